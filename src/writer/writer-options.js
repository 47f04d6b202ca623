import { ShuffleError } from '../errors.js';
/** What a ShuffleWriter is asked to do, its defaults, and what it reports when it finishes. */
/** Gluten's kMinMemLimit: buffers are sized as if at least this much memory were available. */
export const DEFAULT_MEM_LIMIT_FLOOR = 128 * 1024 * 1024;
/** spark.gluten.sql.columnar.maxBatchSize: the most rows one partition buffer (one IPC batch) holds. */
export const DEFAULT_MAX_BATCH_ROWS = 4096;
/** spark.gluten.sql.columnar.shuffle.realloc.threshold */
export const DEFAULT_RESIZE_THRESHOLD = 0.25;
/** spark.gluten.sql.columnar.shuffle.merge.threshold */
export const DEFAULT_MERGE_THRESHOLD = 0.25;
/** spark.gluten.sql.columnar.shuffle.compression.threshold */
export const DEFAULT_COMPRESSION_MIN_ROWS = 100;
/** Refuses options outside their domain with CS_INVALID_ARGUMENT naming the option. */
export function validateOptions(options) {
    const n = options.numPartitions;
    if (!Number.isInteger(n) || n < 1 || n > 0x7fffffff) {
        throw new ShuffleError('CS_INVALID_ARGUMENT', `numPartitions must be an integer >= 1, got ${String(n)}`);
    }
    const positive = (name, value, min) => {
        if (value !== undefined && !(Number.isFinite(value) && value >= min)) {
            throw new ShuffleError('CS_INVALID_ARGUMENT', `${name} must be a number >= ${min}, got ${String(value)}`);
        }
    };
    positive('memLimit', options.memLimit, 0);
    positive('memLimitFloor', options.memLimitFloor, 0);
    positive('maxBatchRows', options.maxBatchRows, 1);
    positive('resizeThreshold', options.resizeThreshold, 0);
    positive('mergeThreshold', options.mergeThreshold, 0);
    positive('compressionMinRows', options.compressionMinRows, 0);
    positive('concurrentTasks', options.concurrentTasks, 1);
    if (options.mergeThreshold !== undefined && options.mergeThreshold > 1) {
        throw new ShuffleError('CS_INVALID_ARGUMENT', `mergeThreshold is a share of maxBatchRows in [0, 1], got ${options.mergeThreshold}`);
    }
    if (options.mapId !== undefined && !Number.isSafeInteger(options.mapId)) {
        throw new ShuffleError('CS_INVALID_ARGUMENT', `mapId must be an integer, got ${String(options.mapId)}`);
    }
    if (options.dictionaryUpdates !== undefined && options.dictionaryUpdates !== 'delta' && options.dictionaryUpdates !== 'replacement') {
        throw new ShuffleError('CS_INVALID_ARGUMENT', `dictionaryUpdates must be "delta" or "replacement", got ${JSON.stringify(options.dictionaryUpdates)}`);
    }
    if (typeof options.outputPrefix !== 'string' || options.outputPrefix.length === 0) {
        throw new ShuffleError('CS_INVALID_ARGUMENT', 'outputPrefix must be a non-empty path');
    }
}
