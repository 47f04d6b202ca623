import { randomBytes } from 'node:crypto';
import { open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ioError } from '../errors.js';
import { writeChunks } from '../format/write-chunks.js';
/** Gathered segment bytes that trigger a write before the run ends. */
const FLUSH_BYTES = 4 * 1024 * 1024;
export class SpillFile {
    path;
    handle;
    /** the segments of each run, in spill order */
    runs = [];
    /** per run, the next segment the merge has not consumed */
    cursors = [];
    position = 0;
    /** chunks of the current run not written yet, and their bytes */
    pending = [];
    pendingBytes = 0;
    constructor(path, handle) {
        this.path = path;
        this.handle = handle;
    }
    /** Creates a new, empty spill file in `dir`. */
    static async create(dir) {
        const path = join(dir, `columnar-shuffle-spill-${randomBytes(8).toString('hex')}.tmp`);
        try {
            return new SpillFile(path, await open(path, 'wx+'));
        }
        catch (cause) {
            throw ioError('create a spill file', path, cause);
        }
    }
    get bytesWritten() {
        return this.position;
    }
    get runCount() {
        return this.runs.length;
    }
    runStart = 0;
    /** Starts the next run (one spill). */
    beginRun() {
        this.runs.push([]);
        this.cursors.push(0);
        this.runStart = this.position;
    }
    /** Completes the current run (its last segments must have been flushed); returns its bytes. */
    endRun() {
        if (this.pending.length > 0)
            throw new Error('endRun before flushRun');
        return this.position - this.runStart;
    }
    /** Forgets the current run after a failed write (its bytes are overwritten by the next run). */
    abandonRun() {
        this.pending = [];
        this.pendingBytes = 0;
        if (this.runs.length === 0)
            return;
        this.runs.pop();
        this.cursors.pop();
        this.position = this.runStart;
    }
    /**
     * Adds partition p's payload chunks as the next segment of the current run
     * (partitions ascend within a run). Segments are gathered and written with
     * few large writes: by `flushRun()` at the latest, or when enough is pending.
     */
    async writeSegment(partition, chunks) {
        const run = this.runs[this.runs.length - 1];
        if (run === undefined)
            throw new Error('writeSegment before beginRun');
        const last = run[run.length - 1];
        if (last !== undefined && last.partition >= partition)
            throw new Error(`spill segments must ascend: ${partition} after ${last.partition}`);
        let length = 0;
        for (const chunk of chunks)
            length += chunk.byteLength;
        run.push({ partition, offset: this.position + this.pendingBytes, length });
        this.pending.push(...chunks);
        this.pendingBytes += length;
        if (this.pendingBytes >= FLUSH_BYTES)
            await this.flushPending();
    }
    /** Writes what the run has gathered; the run's segments are on disk when this returns. */
    async flushRun() {
        await this.flushPending();
    }
    async flushPending() {
        if (this.pending.length === 0)
            return;
        const chunks = this.pending;
        const bytes = this.pendingBytes;
        this.pending = [];
        this.pendingBytes = 0;
        try {
            await writeChunks(this.handle, chunks, this.position);
        }
        catch (cause) {
            throw ioError('write a spill file', this.path, cause);
        }
        this.position += bytes;
    }
    /**
     * Copies partition p's segments, run by run, through `buffer`: segments are
     * read concurrently into consecutive parts of the buffer and handed to `sink`
     * a bufferful at a time (a segment larger than the buffer is streamed in
     * pieces). `sink` must be done with the bytes when its promise settles. The
     * merge asks for the partitions in ascending order.
     */
    async copyPartition(partition, buffer, sink) {
        let filled = 0;
        let reads = [];
        const drain = async () => {
            await Promise.all(reads);
            reads = [];
            if (filled > 0)
                await sink(buffer.subarray(0, filled));
            filled = 0;
        };
        for (let r = 0; r < this.runs.length; r++) {
            const run = this.runs[r];
            let cursor = this.cursors[r];
            while ((run[cursor]?.partition ?? Infinity) < partition)
                cursor++;
            const segment = run[cursor];
            if (segment?.partition === partition) {
                cursor++;
                if (segment.length > buffer.byteLength) {
                    await drain();
                    await this.streamSegment(segment, buffer, sink);
                }
                else {
                    if (filled + segment.length > buffer.byteLength)
                        await drain();
                    reads.push(this.readFully(buffer.subarray(filled, filled + segment.length), segment.offset));
                    filled += segment.length;
                }
            }
            this.cursors[r] = cursor;
        }
        await drain();
    }
    async streamSegment(segment, buffer, sink) {
        for (let done = 0; done < segment.length;) {
            const piece = buffer.subarray(0, Math.min(buffer.byteLength, segment.length - done));
            await this.readFully(piece, segment.offset + done);
            await sink(piece);
            done += piece.byteLength;
        }
    }
    /** Fills `target` from `offset`, or fails naming the file. */
    async readFully(target, offset) {
        for (let done = 0; done < target.byteLength;) {
            let bytesRead;
            try {
                ({ bytesRead } = await this.handle.read(target, done, target.byteLength - done, offset + done));
            }
            catch (cause) {
                throw ioError('read a spill file', this.path, cause);
            }
            if (bytesRead === 0) {
                throw ioError('read a spill file', this.path, new Error(`it ends at ${offset + done}, a segment runs to ${offset + target.byteLength}`));
            }
            done += bytesRead;
        }
    }
    /** Closes and deletes the file; safe to call more than once. */
    async delete() {
        const handle = this.handle;
        this.handle = null;
        await handle?.close().catch(() => undefined);
        await rm(this.path, { force: true });
    }
}
