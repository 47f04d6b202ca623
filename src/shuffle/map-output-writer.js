import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { ioError } from '../errors.js';
import { assertDirectory } from '../format/output-files.js';
import { ShuffleWriter } from '../writer/shuffle-writer.js';
import { assertMapOutputId, mapOutputPrefix, mapOutputSpillDir } from './map-output-id.js';
import { removeSpillDir } from './shuffle-files.js';
/**
 * One attempt of one map task: a ShuffleWriter whose files are named from the
 * map output id, with a spill directory of its own, that returns the output's
 * MapStatus when it commits.
 *
 * Protocol: `await MapOutputWriter.create(options)`, any number of
 * `await write(batch)`, then `await finish()` (the MapStatus) or `await abort()`.
 *
 * Guarantees: nothing has a final name until `finish()` commits (the index is
 * renamed last); any failed `write` or `finish` aborts the attempt, and abort
 * removes every file of the attempt, the spill directory included. A killed attempt cannot clean up:
 * `discardMapOutput(dir, id)` removes what it left. An attempt number is used
 * once: `create` fails with CS_OUTPUT_EXISTS when that attempt already committed.
 */
export class MapOutputWriter {
    id;
    prefix;
    spillDir;
    writer;
    started;
    finished = false;
    constructor(id, prefix, spillDir, writer, started) {
        this.id = id;
        this.prefix = prefix;
        this.spillDir = spillDir;
        this.writer = writer;
        this.started = started;
    }
    static async create(options) {
        const started = performance.now();
        assertMapOutputId(options.id);
        await assertDirectory(options.dir);
        const { dir, id, spillRoot, ...writerOptions } = options;
        const prefix = mapOutputPrefix(dir, id);
        const spillDir = mapOutputSpillDir(spillRoot ?? dir, id);
        try {
            await mkdir(spillDir, { recursive: true });
        }
        catch (cause) {
            throw ioError('create the spill directory', spillDir, cause);
        }
        try {
            const writer = await ShuffleWriter.create({ ...writerOptions, outputPrefix: prefix, mapId: id.mapId, spillDir, overwrite: false });
            return new MapOutputWriter(id, prefix, spillDir, writer, started);
        }
        catch (error) {
            await removeDir(spillDir);
            throw error;
        }
    }
    /** Writes one batch (ShuffleWriter.write). Any failure, a refused batch too, aborts the attempt: a retry is a new attempt. */
    async write(batch) {
        try {
            await this.writer.write(batch);
        }
        catch (error) {
            await this.abort();
            throw error;
        }
    }
    /** Commits the output and returns its status; on failure nothing of the attempt is left. */
    async finish() {
        try {
            const result = await this.writer.finish();
            this.finished = true;
            await removeDir(this.spillDir);
            return {
                id: { shuffleId: this.id.shuffleId, mapId: this.id.mapId, attempt: this.id.attempt },
                location: { host: hostname(), prefix: this.prefix },
                numPartitions: result.numPartitions,
                partitionLengths: result.partitionLengths,
                partitionRows: result.partitionRows,
                metrics: {
                    rows: result.rows,
                    batches: result.batches,
                    bytesWritten: result.bytesWritten,
                    spills: result.spills,
                    spilledBytes: result.spilledBytes,
                    peakMemoryBytes: result.peakMemoryBytes,
                    writeMs: performance.now() - this.started,
                },
            };
        }
        catch (error) {
            await this.abort();
            throw error;
        }
    }
    /** Drops the attempt: temporary files, spill files and the spill directory. Safe to call in any state. */
    async abort() {
        if (this.finished)
            return;
        await this.writer.abort();
        await removeDir(this.spillDir);
    }
}
/** The spill directory is empty once the writer is done with it; a failure to remove it must not hide the task's own error. */
async function removeDir(dir) {
    await removeSpillDir(dir).catch(() => undefined);
}
