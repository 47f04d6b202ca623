import { randomBytes } from 'node:crypto';
import { read } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { MemoryReservation } from '../memory/memory-pool.js';
import { ioError } from '../errors.js';
import { MAX_READ_BYTES } from '../reader/byte-source.js';
import { removeFile } from '../remove-file.js';
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

/** Where the merge copies segments: `append` may keep a reference to the bytes until `flush` settles. */
export interface MergeSink {
  append(bytes: Uint8Array): Promise<void>;
  flush(): Promise<void>;
}

/** Read window per spill run a merge would like (it takes what the pool has, at least its merge buffer). */
export const MERGE_WINDOW_BYTES = 64 * 1024;
/** At most this share of the pool's free memory goes to the windows: other consumers may be short themselves. */
export const MERGE_WINDOW_SHARE = 0.5;

/**
 * The read buffer a merge of `runs` spill runs would like, a window each. A
 * writer whose pool cannot give half of this spills what it still holds in
 * memory first, so that the memory becomes windows: with windows smaller
 * than the segments, every segment is read and written piece by piece.
 */
export function windowsWanted(runs: number): number {
  return runs * MERGE_WINDOW_BYTES;
}

/**
 * The merge's read buffer for a writer whose share of the pool is `share`:
 * 1 MiB, an eighth of a smaller share, at least 64 KiB.
 */
export function mergeBufferBytes(share: number): number {
  return Math.min(1 << 20, Math.max(64 << 10, Math.floor(share / 8)));
}

/**
 * Reserves, on top of a merge's `bufferBytes` (already reserved), more read
 * window for `runs` spill runs if the pool has it: at most what the windows
 * want, MERGE_WINDOW_SHARE of what is free, and what keeps the writer within
 * `maxHeldBytes` (its share: nothing held while merging can be given back).
 * Returns the extra bytes reserved.
 */
export function reserveMergeWindows(reservation: MemoryReservation, runs: number, bufferBytes: number, maxHeldBytes: number): number {
  const wanted = Math.min(windowsWanted(runs) - bufferBytes, maxHeldBytes - reservation.size);
  return reservation.tryGrowUpTo(Math.max(0, wanted), MERGE_WINDOW_SHARE);
}

/** Read windows smaller than this are not worth having: segments are streamed instead. */
const MIN_WINDOW_BYTES = 256;

/** Gathered segment bytes that trigger a write before the run ends. */
const FLUSH_BYTES = 4 * 1024 * 1024;

export class SpillFile {
  /** the segments of each run, in spill order */
  private readonly runs: SpillSegment[][] = [];
  /** per run, the next segment the merge has not consumed */
  private readonly cursors: number[] = [];
  /** per run, the merge's read window: its bytes hold the file range [start, end) */
  private windows: { bytes: Uint8Array; start: number; end: number }[] | null = null;
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
    if (this.pendingBytes >= FLUSH_BYTES) await this.flush();
  }

  /** Writes what the run has gathered; the run's segments are on disk when this returns. */
  async flushRun(): Promise<void> {
    await this.flush();
  }

  private async flush(): Promise<void> {
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
   * Copies partition p's segments, run by run, into `sink`. The merge asks for
   * the partitions in ascending order, so each run is read front to back:
   * `buffer` is split into one read window per run, and a window is refilled
   * with the run's next bytes (this segment and the following partitions')
   * only when it does not hold the segment. Under a tight memory limit there
   * are many runs of small segments (82 runs x 200 partitions of ~5 KiB at
   * 1/32 of the input), and one read per segment cost ~15-30 us of CPU each;
   * a 32 KiB window serves about six. Segments are appended to `sink` as views
   * into the windows: `sink.flush()` is awaited before any window is refilled.
   * A segment larger than its window is streamed through it.
   */
  /** Forgets the read windows (views of the merge's buffer): call before that buffer is given back. */
  dropWindows(): void {
    this.windows = null;
  }

  async copyPartition(partition: number, buffer: Uint8Array, sink: MergeSink): Promise<void> {
    const windowBytes = Math.floor(buffer.byteLength / Math.max(1, this.runs.length));
    if (this.windows === null || this.windows.length !== this.runs.length || this.windows[0]?.bytes.byteLength !== windowBytes) {
      this.windows = this.runs.map((_, r) => ({ bytes: buffer.subarray(r * windowBytes, (r + 1) * windowBytes), start: 0, end: 0 }));
    }
    const windows = this.windows;
    // this partition's segment in each run (or none), advancing the cursors
    const segments: (SpillSegment | undefined)[] = this.runs.map((run, r) => {
      let cursor = this.cursors[r]!;
      while ((run[cursor]?.partition ?? Infinity) < partition) cursor++;
      const segment = run[cursor];
      if (segment?.partition !== partition) {
        this.cursors[r] = cursor;
        return undefined;
      }
      this.cursors[r] = cursor + 1;
      return segment;
    });
    if (windowBytes < MIN_WINDOW_BYTES) {
      // too many runs for windows: every segment is streamed through the whole buffer
      for (const segment of segments) {
        if (segment === undefined || segment.length === 0) continue;
        await sink.flush();
        await this.streamSegment(segment, buffer, sink);
      }
      return;
    }
    const refills: number[] = [];
    segments.forEach((segment, r) => {
      const w = windows[r]!;
      if (segment !== undefined && segment.length <= w.bytes.byteLength && (segment.offset < w.start || segment.offset + segment.length > w.end)) refills.push(r);
    });
    if (refills.length > 0) {
      await sink.flush(); // the windows about to be refilled may back appended bytes
      await Promise.all(
        refills.map(async (r) => {
          const w = windows[r]!;
          const segment = segments[r]!;
          const run = this.runs[r]!;
          const last = run[run.length - 1]!;
          const bytes = Math.min(w.bytes.byteLength, last.offset + last.length - segment.offset);
          await this.readFully(w.bytes.subarray(0, bytes), segment.offset);
          w.start = segment.offset;
          w.end = segment.offset + bytes;
        }),
      );
    }
    for (let r = 0; r < segments.length; r++) {
      const segment = segments[r];
      if (segment === undefined || segment.length === 0) continue;
      const w = windows[r]!;
      if (segment.length > w.bytes.byteLength) {
        await sink.flush();
        await this.streamSegment(segment, w.bytes, sink);
        w.start = w.end = 0;
        continue;
      }
      await sink.append(w.bytes.subarray(segment.offset - w.start, segment.offset - w.start + segment.length));
    }
  }

  /**
   * Copies a segment larger than `buffer` through it, piece by piece. The
   * caller has flushed the sink, so nothing appended views `buffer` yet; each
   * later piece flushes the one before it, and the last piece stays appended,
   * unflushed, like any segment (the buffer's next user flushes first, as every
   * refill does). A flush after the last piece too cost a tight-limit merge
   * (wide rows at P = 200, 108 runs in 13 KB windows, 254 segments streamed) a
   * write each: finish() took 371-401 ms against 276-358 without (medians of
   * alternating writes).
   */
  private async streamSegment(segment: SpillSegment, buffer: Uint8Array, sink: MergeSink): Promise<void> {
    for (let done = 0; done < segment.length; ) {
      if (done > 0) await sink.flush();
      const piece = buffer.subarray(0, Math.min(buffer.byteLength, segment.length - done));
      await this.readFully(piece, segment.offset + done);
      await sink.append(piece);
      done += piece.byteLength;
    }
  }

  /** Fills `target` from `offset`, or fails naming the file. */
  private async readFully(target: Uint8Array, offset: number): Promise<void> {
    for (let done = 0; done < target.byteLength; ) {
      let bytesRead: number;
      try {
        bytesRead = await readAt(this.handle!.fd, target, done, Math.min(target.byteLength - done, MAX_READ_BYTES), offset + done);
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
    await removeFile(this.path, 'a spill file');
  }
}

/**
 * fs.read with a callback, on the FileHandle's descriptor: about half the CPU
 * of FileHandle.read per call, which counts when the merge reads thousands
 * of small segments.
 */
function readAt(fd: number, target: Uint8Array, offset: number, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => read(fd, target, offset, length, position, (error, bytesRead) => (error ? reject(error) : resolve(bytesRead))));
}
