import { randomBytes } from 'node:crypto';
import { open, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { ioError } from '../errors.js';
import { writeChunks } from '../format/write-chunks.js';

/**
 * One spill: the payloads (encoded record-batch messages) of many partitions,
 * written in ascending partition order into one temporary file. The segment
 * list stays in memory; at merge time each partition's segment is copied
 * verbatim into the final data file, never decoded.
 *
 * ```text
 * spill file := segment(p1) | segment(p2) | ...       p1 < p2 < ..., only partitions with payloads
 * segment(p) := payload | payload | ...                record-batch messages as they go into the data file
 * ```
 */
export interface SpillSegment {
  partition: number;
  offset: number;
  length: number;
}

export class SpillFile {
  readonly segments: SpillSegment[] = [];
  private position = 0;
  private cursor = 0;

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

  /** Appends partition p's payload chunks as one segment; partitions must ascend. */
  async writeSegment(partition: number, chunks: readonly Uint8Array[]): Promise<void> {
    const last = this.segments[this.segments.length - 1];
    if (last !== undefined && last.partition >= partition) throw new Error(`spill segments must ascend: ${partition} after ${last.partition}`);
    let length = 0;
    for (const chunk of chunks) length += chunk.byteLength;
    try {
      await writeChunks(this.handle!, chunks, this.position);
    } catch (cause) {
      throw ioError('write a spill file', this.path, cause);
    }
    this.segments.push({ partition, offset: this.position, length });
    this.position += length;
  }

  /**
   * Streams partition p's segment (if this spill has one) through `buffer`,
   * handing each filled part to `sink` before reusing the buffer. Segments are
   * consumed in partition order, as the merge asks for them.
   */
  async copySegment(partition: number, buffer: Uint8Array, sink: (bytes: Uint8Array) => Promise<void>): Promise<void> {
    while ((this.segments[this.cursor]?.partition ?? Infinity) < partition) this.cursor++;
    const segment = this.segments[this.cursor];
    if (segment === undefined || segment.partition !== partition) return;
    this.cursor++;
    try {
      for (let done = 0; done < segment.length; ) {
        const want = Math.min(buffer.byteLength, segment.length - done);
        const { bytesRead } = await this.handle!.read(buffer, 0, want, segment.offset + done);
        if (bytesRead === 0) throw new Error(`spill file ended at ${segment.offset + done}, segment runs to ${segment.offset + segment.length}`);
        await sink(buffer.subarray(0, bytesRead));
        done += bytesRead;
      }
    } catch (cause) {
      throw ioError('read a spill file', this.path, cause);
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
