import { Schema } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import type { CodecName } from '../format/codec.js';
import type { OutputPaths } from '../format/output-files.js';
import type { MemoryPool } from '../memory/memory-pool.js';
import { MAX_PARTITIONS } from '../sort-writer/packed-pointer.js';
import type { DictionaryUpdates } from './dictionary-tracker.js';
import type { Partitioning } from './partitioner.js';

/** What a ShuffleWriter is asked to do, its defaults, and what it reports when it finishes. */

/** Gluten's kMinMemLimit: buffers are sized as if at least this much memory were available. */
export const DEFAULT_MEM_LIMIT_FLOOR = 128 * 1024 * 1024;
/**
 * Gluten's kMaxMemLimit (1 GiB), the memory a writer whose pool has no limit
 * sizes its buffers for: the memLimit Gluten's own shuffle benchmark passes,
 * and less than a Spark task usually has. The floor alone (128 MiB) made
 * 1,048-row buffers of the wide 160-byte rows at P = 200: batches four times
 * smaller than maxBatchRows, and a write 8 % slower, a read 10 % slower and an
 * output 2 % larger than with 4,096-row buffers. Narrow rows at P = 200 get
 * 4,092 rows either way. At P = 4000 narrow buffers grow from 204 to 1,636
 * rows: in the benchmark run after the change, nested and wide rows wrote
 * faster at high P too, narrow ones no faster, and the peak reservations rose
 * by about half (189 to 279 MiB for narrow rows at P = 4000). A pool limit
 * bounds them.
 */
export const UNBOUNDED_MEM_LIMIT = 1024 * 1024 * 1024;
/** spark.gluten.sql.columnar.maxBatchSize: the most rows one partition buffer (one IPC batch) holds. */
export const DEFAULT_MAX_BATCH_ROWS = 4096;
/** spark.gluten.sql.columnar.shuffle.realloc.threshold */
export const DEFAULT_RESIZE_THRESHOLD = 0.25;
/** spark.gluten.sql.columnar.shuffle.merge.threshold */
export const DEFAULT_MERGE_THRESHOLD = 0.25;
/** spark.gluten.sql.columnar.shuffle.compression.threshold */
export const DEFAULT_COMPRESSION_MIN_ROWS = 100;

export interface ShuffleWriterOptions {
  /** Number of output partitions, an integer >= 1. */
  numPartitions: number;
  /** How rows are assigned to partitions. */
  partitioning: Partitioning;
  /** Output files are `<outputPrefix>.data`, `.index` and `.checksum.CRC32C`; the directory must exist. */
  outputPrefix: string;
  /**
   * Whether a committed output already at `outputPrefix` may be replaced (default false: create()
   * fails with CS_OUTPUT_EXISTS, so an attempt never clobbers another's output by accident).
   * When true, the old output stays as it was until the new one commits.
   */
  overwrite?: boolean;
  /** Body compression of every record batch (default lz4, i.e. Arrow LZ4_FRAME). */
  codec?: CodecName;
  /** The map task's id: seeds round-robin's start as Spark does (default 0). */
  mapId?: number;
  /** Input schema; by default taken from the first batch. */
  schema?: Schema;
  /**
   * The pool every buffer of this writer is reserved from; several writers may
   * share one. The writer never holds more than the pool grants: under
   * pressure it spills. Default: the thread's shared unbounded pool
   * (`defaultMemoryPool()`), whose recycler hands one writer's buffers to the next.
   */
  memoryPool?: MemoryPool;
  /** Writers expected to share the pool at once: each sizes its buffers for limit / concurrentTasks (Gluten). Default 1. */
  concurrentTasks?: number;
  /** Directory for spill files (default: the OS temp dir). They are deleted on finish and abort. */
  spillDir?: string;
  /**
   * Memory this writer sizes its partition buffers for (default: the pool's limit / concurrentTasks;
   * UNBOUNDED_MEM_LIMIT, 1 GiB, when the pool has no limit). With a bounded pool, never more than
   * limit / concurrentTasks: a larger value is taken as that.
   */
  memLimit?: number;
  /** Lower bound of memLimit in the sizing formula (default 128 MiB, Gluten's kMinMemLimit, or memLimit when smaller; with a bounded pool, at most limit / concurrentTasks). */
  memLimitFloor?: number;
  /** Most rows per partition buffer and per output batch (default 4096). */
  maxBatchRows?: number;
  /** Resize hysteresis (default 0.25). */
  resizeThreshold?: number;
  /**
   * Evictions of at most this share of maxBatchRows rows are merged, uncompressed,
   * into batches of up to maxBatchRows before they are compressed (default 0.25,
   * spark.gluten.sql.columnar.shuffle.merge.threshold; 0 turns merging off).
   */
  mergeThreshold?: number;
  /** Batches with fewer rows are stored uncompressed (default 100, spark.gluten.sql.columnar.shuffle.compression.threshold). */
  compressionMinRows?: number;
  /**
   * The least share of its size a compressed buffer (the sort writer: a block) must save for the
   * writer to keep compressing buffers like it, in [0, 1] (default 0.15, DEFAULT_MIN_SAVINGS; Arrow
   * C++'s `min_space_savings`). A column position whose buffers keep saving less is stored raw (the
   * IPC prefix -1) and tried again now and then (compression-advisor.ts). 0 keeps every buffer that
   * shrinks at all; 1 stores everything raw after the first few tries. Raise it when CPU is scarcer
   * than I/O, lower it when the bytes cross a slow network.
   */
  minCompressionSavings?: number;
  /**
   * About how many bytes of input rows are gathered from small batches before they are split
   * (input-staging.ts): batches that bring fewer than 16 rows to each partition
   * (8,192 rows above P = 512) are staged until they bring 64 (a row count sized on the
   * first batch's rows), or their bytes pass twice this (wider rows later); a batch of more
   * than a quarter of it is split as it comes; 0 splits every batch as it comes. Default 8 MiB with an unbounded pool, 0 under a limit: staged rows cannot
   * be spilled, and three writers on a 4 MiB pool then sometimes ran out of memory.
   * With a bounded pool, at most an eighth of the writer's share (MAX_STAGING_SHARE):
   * 16 MiB of staging on a 4 MiB pool failed with CS_MEMORY_LIMIT.
   * The hash writer's only: the sort writer copies rows one at a time whatever the batch size.
   */
  stagingBytes?: number;
  /**
   * How a partition's stream receives dictionary values that later input batches bring:
   * `delta` (default) sends only the new values as delta dictionary batches; `replacement`
   * sends the whole dictionary again, for readers without delta support (polars).
   */
  dictionaryUpdates?: DictionaryUpdates;
}

export interface ShuffleWriteResult {
  paths: OutputPaths;
  numPartitions: number;
  /** Input rows and batches seen. */
  rows: number;
  batches: number;
  /** Size of the data file. */
  bytesWritten: number;
  /** Bytes of each partition's IPC stream in the data file (0 for an empty partition). */
  partitionLengths: number[];
  /** Rows written to each partition. */
  partitionRows: number[];
  /** Record batches (payloads) written to each partition. */
  partitionBatches: number[];
  /** CRC32C of each partition's bytes. */
  checksums: number[];
  /** Spills under memory pressure (runs appended to the writer's one spill file), and their bytes. */
  spills: number;
  spilledBytes: number;
  /** The most memory this writer held at once, as reserved in its pool. */
  peakMemoryBytes: number;
}

/**
 * The most partitions a writer takes: Spark's limit for its sort shuffle (a
 * partition id is 24 bits of PackedRecordPointer, as it is of this library's
 * sort writer's packed pointers, whose limit this is). The columnar writer keeps a few dozen
 * bytes per partition, reserved in its pool (PARTITION_STATE_BYTES).
 */
export const MAX_NUM_PARTITIONS = MAX_PARTITIONS;

/** The most rows an output batch may hold: an Arrow array's length is at most 2^31 - 1 for most readers. */
export const MAX_BATCH_ROWS = 0x7fffffff;

/** Refuses options outside their domain with CS_INVALID_ARGUMENT naming the option. */
export function validateOptions(options: ShuffleWriterOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `a writer takes an options object, got ${options === null ? 'null' : typeof options}`);
  }
  const n = options.numPartitions;
  if (!Number.isInteger(n) || n < 1 || n > MAX_NUM_PARTITIONS) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `numPartitions must be an integer in [1, ${MAX_NUM_PARTITIONS}], got ${String(n)}`);
  }
  validatePartitioning(options.partitioning);
  if (options.schema !== undefined && !(options.schema instanceof Schema)) throw new ShuffleError('CS_INVALID_ARGUMENT', 'schema must be an Arrow Schema');
  const integer = (name: string, value: number | undefined, min: number, max: number) => {
    if (value !== undefined && !(Number.isInteger(value) && value >= min && value <= max)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `${name} must be an integer in [${min}, ${max}], got ${String(value)}`);
    }
  };
  integer('maxBatchRows', options.maxBatchRows, 1, MAX_BATCH_ROWS);
  integer('concurrentTasks', options.concurrentTasks, 1, 0x7fffffff);
  const positive = (name: string, value: number | undefined, min: number) => {
    if (value !== undefined && !(Number.isFinite(value) && value >= min)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `${name} must be a number >= ${min}, got ${String(value)}`);
    }
  };
  positive('memLimit', options.memLimit, 0);
  positive('memLimitFloor', options.memLimitFloor, 0);
  positive('resizeThreshold', options.resizeThreshold, 0);
  positive('mergeThreshold', options.mergeThreshold, 0);
  positive('compressionMinRows', options.compressionMinRows, 0);
  positive('stagingBytes', options.stagingBytes, 0);
  if (options.minCompressionSavings !== undefined && !(typeof options.minCompressionSavings === 'number' && options.minCompressionSavings >= 0 && options.minCompressionSavings <= 1)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `minCompressionSavings is a share of a buffer's size in [0, 1], got ${String(options.minCompressionSavings)}`);
  }
  if (options.mergeThreshold !== undefined && options.mergeThreshold > 1) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `mergeThreshold is a share of maxBatchRows in [0, 1], got ${options.mergeThreshold}`);
  }
  if (options.mapId !== undefined && !Number.isSafeInteger(options.mapId)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `mapId must be an integer, got ${String(options.mapId)}`);
  }
  if (options.dictionaryUpdates !== undefined && options.dictionaryUpdates !== 'delta' && options.dictionaryUpdates !== 'replacement') {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `dictionaryUpdates must be "delta" or "replacement", got ${JSON.stringify(options.dictionaryUpdates)}`);
  }
  if (options.overwrite !== undefined && typeof options.overwrite !== 'boolean') {
    // ('false', a string, would be true: a committed output replaced, which is what the option guards)
    throw new ShuffleError('CS_INVALID_ARGUMENT', `overwrite must be true or false, got ${describeValue(options.overwrite)}`);
  }
  if (options.spillDir !== undefined && (typeof options.spillDir !== 'string' || options.spillDir.length === 0)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `spillDir must be a directory's path, got ${describeValue(options.spillDir)}`);
  }
  const pool = options.memoryPool as Partial<MemoryPool> | null | undefined;
  if (pool !== undefined && (typeof pool !== 'object' || pool === null || typeof pool.register !== 'function' || typeof pool.share !== 'function')) {
    // (by its methods, not instanceof: a pool made by another copy of this library works as well)
    throw new ShuffleError('CS_INVALID_ARGUMENT', `memoryPool must be a MemoryPool, got ${describeValue(pool)}`);
  }
  if (typeof options.outputPrefix !== 'string' || options.outputPrefix.length === 0) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', 'outputPrefix must be a non-empty path');
  }
  if (/[/\\]$/.test(options.outputPrefix)) {
    // 'out/' would name the files out/.data, out/.index: hidden, and one per directory
    throw new ShuffleError('CS_INVALID_ARGUMENT', `outputPrefix names a directory ('${options.outputPrefix}'): give a file name prefix in it, such as '${options.outputPrefix}map-0'`);
  }
}

/**
 * Refuses a partitioning that is not one of Partitioning's shapes (it may come
 * from JSON or another thread): its columns and bounds are checked against
 * the schema when the first batch comes.
 */
function validatePartitioning(partitioning: unknown): void {
  const p = partitioning as { kind?: unknown; keys?: unknown; column?: unknown } | null | undefined;
  const bad = (what: string) => new ShuffleError('CS_INVALID_ARGUMENT', `partitioning ${what}, got ${describeValue(partitioning)}`);
  if (typeof p !== 'object' || p === null) throw bad("must be an object such as { kind: 'hash', keys: ['id'] }");
  switch (p.kind) {
    case 'hash':
    case 'range':
      if (!Array.isArray(p.keys)) throw bad(`${p.kind} needs \`keys\`, an array of column names`);
      return;
    case 'partition-id':
      if (typeof p.column !== 'string') throw bad('partition-id needs `column`, the name of the partition id column');
      return;
    case 'round-robin':
    case 'single':
      return;
    default:
      throw bad("kind must be 'hash', 'range', 'round-robin', 'single' or 'partition-id'");
  }
}

function describeValue(value: unknown): string {
  try {
    return (JSON.stringify(value) ?? String(value)).slice(0, 200);
  } catch {
    return String(value);
  }
}
