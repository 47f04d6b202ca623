import { randomBytes } from 'node:crypto';
import { open, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { ioError } from '../errors.js';
import { writeChunks } from '../format/write-chunks.js';

/**
 * A writer's spill file. Each spill appends one run: the payloads (encoded
 * record-batch messages) of many partitions in ascending partition order. The
 * segment list stays in memory; at merge time each partition's segments are
 * copied verbatim, run by run, into the final data file, never decoded.
 *
 * ```text
 * spill file := run(1) | run(2) | ...                  one run per spill, in spill order
 * run        := segment(p1) | segment(p2) | ...        p1 < p2 < ..., only partitions with payloads
 * segment(p) := payload | payload | ...                record-batch messages as they go into the data file
 * ```
 *
 * Gluten writes a new file per spill; one file appended run by run (as Comet
 * does since its #5916) keeps a single descriptor open however often a tight
 * memory limit makes the writer spill.
 */
export interface SpillSegment {
  partition: number;
  offset: number;
  length: number;
}

/** Gathered segment bytes that trigger a write before the run ends. */
const FLUSH_BYTES = 4 * 1024 * 1024;

export class SpillFile {
  /** the segments of each run, in spill order */
  private readonly runs: SpillSegment[][] = [];
  /** per run, the next segment the merge has not consumed */
  private readonly cursors: number[] = [];
  private position = 0;
  /** chunks of the current run not written yet, and their bytes */
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;

  private constructor(readonly path: string, private handle: FileHandle | null) {}

  /** Creates a new, empty spill file in `dir`. */
  static async create(dir: string): Promise<SpillFile> {
    const path = join(dir, `columnar-shuffle-spill-${randomBytes(8).toString('hex')}.tmp`);
    try {
      return new SpillFile(path, await open(path, 'wx+'));
    } catch (cause) {
      throw ioError('create a spill file', path, cause);
    }
  }

  get bytesWritten(): number {
    return this.position;
  }

  get runCount(): number {
    return this.runs.length;
  }

  private runStart = 0;

  /** Starts the next run (one spill). */
  beginRun(): void {
    this.runs.push([]);
    this.cursors.push(0);
    this.runStart = this.position;
  }

  /** Completes the current run (its last segments must have been flushed); returns its bytes. */
  endRun(): number {
    if (this.pending.length > 0) throw new Error('endRun before flushRun');
    return this.position - this.runStart;
  }

  /** Forgets the current run after a failed write (its bytes are overwritten by the next run). */
  abandonRun(): void {
    this.pending = [];
    this.pendingBytes = 0;
    if (this.runs.length === 0) return;
    this.runs.pop();
    this.cursors.pop();
    this.position = this.runStart;
  }

  /**
   * Adds partition p's payload chunks as the next segment of the current run
   * (partitions ascend within a run; chunks for the partition of the previous
   * call extend its segment, so a writer may hand a large partition over in
   * pieces). Segments are gathered and written with few large writes: by
   * `flushRun()` at the latest, or when enough is pending.
   */
  async writeSegment(partition: number, chunks: readonly Uint8Array[]): Promise<void> {
    const run = this.runs[this.runs.length - 1];
    if (run === undefined) throw new Error('writeSegment before beginRun');
    const last = run[run.length - 1];
    if (last !== undefined && last.partition > partition) throw new Error(`spill segments must ascend: ${partition} after ${last.partition}`);
    let length = 0;
    for (const chunk of chunks) length += chunk.byteLength;
    if (last?.partition === partition) last.length += length; // segments of a run are contiguous: the previous one ends here
    else run.push({ partition, offset: this.position + this.pendingBytes, length });
    this.pending.push(...chunks);
    this.pendingBytes += length;
    if (this.pendingBytes >= FLUSH_BYTES) await this.flushPending();
  }

  /** Writes what the run has gathered; the run's segments are on disk when this returns. */
  async flushRun(): Promise<void> {
    await this.flushPending();
  }

  private async flushPending(): Promise<void> {
    if (this.pending.length === 0) return;
    const chunks = this.pending;
    const bytes = this.pendingBytes;
    this.pending = [];
    this.pendingBytes = 0;
    try {
      await writeChunks(this.handle!, chunks, this.position);
    } catch (cause) {
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
  async copyPartition(partition: number, buffer: Uint8Array, sink: (bytes: Uint8Array) => Promise<void>): Promise<void> {
    let filled = 0;
    let reads: Promise<void>[] = [];
    const drain = async () => {
      await Promise.all(reads);
      reads = [];
      if (filled > 0) await sink(buffer.subarray(0, filled));
      filled = 0;
    };
    for (let r = 0; r < this.runs.length; r++) {
      const run = this.runs[r]!;
      let cursor = this.cursors[r]!;
      while ((run[cursor]?.partition ?? Infinity) < partition) cursor++;
      const segment = run[cursor];
      if (segment?.partition === partition) {
        cursor++;
        if (segment.length > buffer.byteLength) {
          await drain();
          await this.streamSegment(segment, buffer, sink);
        } else {
          if (filled + segment.length > buffer.byteLength) await drain();
          reads.push(this.readFully(buffer.subarray(filled, filled + segment.length), segment.offset));
          filled += segment.length;
        }
      }
      this.cursors[r] = cursor;
    }
    await drain();
  }

  private async streamSegment(segment: SpillSegment, buffer: Uint8Array, sink: (bytes: Uint8Array) => Promise<void>): Promise<void> {
    for (let done = 0; done < segment.length; ) {
      const piece = buffer.subarray(0, Math.min(buffer.byteLength, segment.length - done));
      await this.readFully(piece, segment.offset + done);
      await sink(piece);
      done += piece.byteLength;
    }
  }

  /** Fills `target` from `offset`, or fails naming the file. */
  private async readFully(target: Uint8Array, offset: number): Promise<void> {
    for (let done = 0; done < target.byteLength; ) {
      let bytesRead: number;
      try {
        ({ bytesRead } = await this.handle!.read(target, done, target.byteLength - done, offset + done));
      } catch (cause) {
        throw ioError('read a spill file', this.path, cause);
      }
      if (bytesRead === 0) {
        throw ioError('read a spill file', this.path, new Error(`it ends at ${offset + done}, a segment runs to ${offset + target.byteLength}`));
      }
      done += bytesRead;
    }
  }

  /** Closes and deletes the file; safe to call more than once. */
  async delete(): Promise<void> {
    const handle = this.handle;
    this.handle = null;
    await handle?.close().catch(() => undefined);
    await rm(this.path, { force: true });
  }
}
