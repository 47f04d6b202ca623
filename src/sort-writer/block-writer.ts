import type { Codec } from '../format/codec.js';
import type { CompressionPolicy } from '../format/compression-advisor.js';
import type { MemoryReservation } from '../memory/memory-pool.js';
import { offsetOf, pageOf } from './packed-pointer.js';
import { BLOCK_HEADER_BYTES, writeBlockHeader } from './row-format.js';
import { align4 } from './copy-bytes.js';
import { ROW_LENGTH_BYTES } from './row-layout.js';
import type { RowPages } from './row-pages.js';

/**
 * Where blocks go: a spill run or the final data file. Blocks arrive in
 * output order (partitions ascending, a partition's blocks in row order).
 */
export interface BlockSink {
  /** Takes partition p's next block, as chunks to be written back to back; may keep referencing them until `flush`. */
  write(partition: number, chunks: readonly Uint8Array[]): Promise<void>;
  /** Writes everything taken so far; the chunks' memory may be reused when it returns. */
  flush(): Promise<void>;
}

export interface BlockWriterOptions {
  codec: Codec | null;
  /** most bytes of rows in a block (a single larger row makes a block of its own) */
  blockBytes: number;
  /** most rows in a block (the reader's batch size) */
  maxRows: number;
  /** blocks with fewer rows, unless they hold at least COMPRESS_BLOCK_BYTES, are stored uncompressed (Gluten's compression threshold) */
  compressionMinRows: number;
  /** whether a block is worth compressing, learnt from the blocks before it (one position: a block is one buffer) */
  policy?: CompressionPolicy;
}

/**
 * A block of at least this many bytes is compressed however few rows it has.
 * Gluten's row threshold is meant for tiny columnar payloads; a row block of
 * a few KiB (50 wide rows of one partition in one spill) still compresses to
 * a fraction, for one async call.
 */
export const COMPRESS_BLOCK_BYTES = 4096;

/** Blocks staged in the arena per bufferful: headers are carved from a buffer of this many. */
function maxBlocksFor(arenaBytes: number): number {
  return Math.max(16, Math.min(512, arenaBytes >>> 9));
}

/** Most bytes a codec's frame of `raw` bytes can take (LZ4 and Zstandard bounds, plus frame headers). */
function frameBound(raw: number): number {
  return raw + (raw >>> 7) + 128;
}

/**
 * Copies sorted rows out of their pages into blocks (row-format.ts) and
 * hands the blocks to a sink in order: the copy-out step of Spark's
 * ShuffleExternalSorter.writeSortedFile and Gluten's evictAllPartitions.
 *
 * Rows are copied into an arena (Spark's disk write buffer) a block after
 * the other; each block is compressed asynchronously as soon as it is closed
 * (lz4 runs on the libuv pool, so compression overlaps the copying), and
 * when the arena is full the finished blocks go to the sink in order, the
 * sink is flushed, and the arena is reused. A row larger than a block is
 * compressed straight from its page.
 *
 * Memory: the arena, the block headers and the compression outputs of a full
 * arena are a fixed amount (`BlockWriter.bytesFor`) the caller reserves for
 * as long as it keeps the writer. Only a block made of one large row needs
 * more: reserved with tryGrow for the time it is in flight, or, if the pool
 * refuses, the block is stored uncompressed.
 */
export class BlockWriter {
  private readonly arena: Uint8Array;
  private readonly arenaWords: Int32Array;
  private readonly headers: Uint8Array;
  private readonly headerView: DataView;
  private readonly maxBlocks: number;

  /** What a block writer with these options holds: arena, headers and the compression outputs of a full arena. */
  static bytesFor(options: BlockWriterOptions): number {
    const arena = BlockWriter.arenaBytes(options.blockBytes);
    const blocks = maxBlocksFor(arena);
    return arena + blocks * BLOCK_HEADER_BYTES + (options.codec === null ? 0 : arena + (arena >>> 7) + blocks * 128);
  }

  private static arenaBytes(blockBytes: number): number {
    return 4 * blockBytes;
  }

  constructor(private readonly options: BlockWriterOptions, private readonly reservation: MemoryReservation) {
    this.arena = new Uint8Array(BlockWriter.arenaBytes(options.blockBytes));
    this.arenaWords = new Int32Array(this.arena.buffer);
    this.maxBlocks = maxBlocksFor(this.arena.byteLength);
    this.headers = new Uint8Array(this.maxBlocks * BLOCK_HEADER_BYTES);
    this.headerView = new DataView(this.headers.buffer);
  }

  /**
   * Writes the rows of the first `count` pointers of `sorted` (sorted by
   * partition) as blocks into `sink` and flushes it; adds each partition's
   * number of blocks to `blocks[p]`.
   */
  async writeSorted(sorted: Uint32Array, count: number, pages: RowPages, sink: BlockSink, blocks: Float64Array): Promise<void> {
    const { arena, arenaWords } = this;
    const { blockBytes, maxRows } = this.options;
    const queue: Promise<StagedBlock>[] = [];
    let arenaAt = 0;
    let extraReserved = 0;
    const drain = async () => {
      try {
        for (const staged of queue) {
          const block = await staged;
          await sink.write(block.partition, block.chunks);
        }
        await sink.flush();
      } finally {
        queue.length = 0;
        arenaAt = 0;
        if (extraReserved > 0) this.reservation.shrink(extraReserved);
        extraReserved = 0;
      }
    };
    const stage = (partition: number, raw: Uint8Array, rows: number, extra: number) => {
      const staged = this.encode(partition, raw, rows, queue.length, extra);
      staged.catch(() => undefined); // awaited in order by drain; a failure must not go unhandled meanwhile
      queue.push(staged);
      blocks[partition]!++;
    };

    let r = 0;
    while (r < count) {
      const partition = sorted[2 * r + 1]! >>> 8;
      const first = this.locate(sorted, r, pages);
      if (first.length > blockBytes) {
        // a large row: a block of its own, compressed from its page (which stays untouched until the rows are all written)
        const bound = frameBound(first.length);
        const extra = this.options.codec !== null && this.reservation.tryGrow(bound) ? bound : 0;
        extraReserved += extra;
        stage(partition, first.page.subarray(first.offset, first.offset + first.length), 1, extra);
        r++;
        await drain();
        continue;
      }
      const start = arenaAt;
      let rows = 0;
      while (r < count && rows < maxRows) {
        const hi = sorted[2 * r + 1]!;
        if (hi >>> 8 !== partition) break;
        const lo = sorted[2 * r]!;
        const words = pages.words(pageOf(hi, lo));
        // rows start at multiples of 4, in the pages and in the arena: they are copied a word at a time
        const word = offsetOf(lo) >>> 2;
        const rowWords = (ROW_LENGTH_BYTES + 3 + words[word]!) >>> 2;
        if (arenaAt - start + 4 * rowWords > blockBytes) break; // also closes the block before a large row
        const to = arenaAt >>> 2;
        for (let w = 0; w < rowWords; w++) arenaWords[to + w] = words[word + w]!;
        arenaAt += 4 * rowWords;
        rows++;
        r++;
      }
      stage(partition, arena.subarray(start, arenaAt), rows, 0);
      // the next block must fit in what is left of the arena
      if (arena.byteLength - arenaAt < blockBytes || queue.length === this.maxBlocks) await drain();
    }
    await drain();
  }

  private locate(sorted: Uint32Array, r: number, pages: RowPages): { page: Uint8Array; offset: number; length: number } {
    const hi = sorted[2 * r + 1]!;
    const lo = sorted[2 * r]!;
    const number = pageOf(hi, lo);
    const offset = offsetOf(lo);
    return { page: pages.page(number), offset, length: align4(ROW_LENGTH_BYTES + pages.view(number).getUint32(offset, true)) };
  }

  /**
   * The block's header and stored bytes: compressed unless it is too small, the
   * policy says blocks like it do not shrink enough, compression does not shrink
   * it, or there is no memory for the output.
   */
  private async encode(partition: number, raw: Uint8Array, rows: number, slot: number, extra: number): Promise<StagedBlock> {
    const at = slot * BLOCK_HEADER_BYTES;
    const header = this.headers.subarray(at, at + BLOCK_HEADER_BYTES);
    const { codec, compressionMinRows, policy } = this.options;
    const large = raw.byteLength > this.options.blockBytes;
    if (codec !== null && (rows >= compressionMinRows || raw.byteLength >= COMPRESS_BLOCK_BYTES) && (!large || extra > 0)) {
      for (let wait = policy?.settled?.(0); wait !== undefined; wait = policy?.settled?.(0)) await wait;
      if (policy?.shouldCompress(0) ?? true) {
        let pieces: Uint8Array[];
        try {
          pieces = await codec.compress(raw);
        } catch (error) {
          policy?.abandon?.(0);
          throw error;
        }
        let stored = 0;
        for (const piece of pieces) stored += piece.byteLength;
        policy?.record(0, raw.byteLength, stored);
        if (stored < raw.byteLength) {
          writeBlockHeader(this.headerView, at, rows, raw.byteLength, stored);
          return { partition, chunks: [header, ...pieces] };
        }
      }
    }
    writeBlockHeader(this.headerView, at, rows, raw.byteLength, raw.byteLength);
    return { partition, chunks: [header, raw] };
  }
}

interface StagedBlock {
  partition: number;
  chunks: Uint8Array[];
}
