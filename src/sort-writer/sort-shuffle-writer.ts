import { tmpdir } from 'node:os';
import { Schema, type RecordBatch, type Vector } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { runEveryStep } from '../run-every-step.js';
import { codecByName, type Codec, type CodecName } from '../format/codec.js';
import { CompressionAdvisor, DEFAULT_MIN_SAVINGS } from '../format/compression-advisor.js';
import { assertDirectory, DataFileWriter } from '../format/output-files.js';
import type { MemoryPool, MemoryReservation, Reclaimable } from '../memory/memory-pool.js';
import { defaultMemoryPool } from '../memory/default-pool.js';
import { MERGE_WINDOW_SHARE, mergeBufferBytes, reserveMergeWindows, SpillFile, windowsWanted } from '../spill/spill-file.js';
import { collectWritableDictionaries } from '../writer/dictionary-indices.js';
import { assertInputBatch } from '../writer/input-batch.js';
import { OneCallAtATime, writerAborted, type WriterState } from '../writer/writer-calls.js';
import { createPartitioner, type Partitioner } from '../writer/partitioner.js';
import { PartitionRows } from '../writer/partition-rows.js';
import { checkInputSchema, type OutputColumns } from '../writer/output-columns.js';
import { assertBatchSchema } from '../writer/same-schema.js';
import { prepareSourceColumn } from '../writer/source-column.js';
import type { ColumnLayout } from '../writer/column-layout.js';
import {
  DEFAULT_COMPRESSION_MIN_ROWS,
  DEFAULT_MAX_BATCH_ROWS,
  validateOptions,
  type ShuffleWriteResult,
  type ShuffleWriterOptions,
} from '../writer/writer-options.js';
import { BlockWriter } from './block-writer.js';
import { align4 } from './copy-bytes.js';
import { MAX_PAGE_OFFSET, packHi, packLo, POINTER_SLOT_BYTES, PointerArray } from './packed-pointer.js';
import { RowEncoder } from './row-encoder.js';
import { encodeRowPartitionHeader } from './row-format.js';
import { rowLayoutOf, type RowLayout } from './row-layout.js';
import { unreadableSharedDictionary } from './shared-dictionaries.js';
import { RowPartitionMerger } from './row-merge.js';
import { RowPages } from './row-pages.js';

/**
 * Options of the sort writer: those of ShuffleWriter (the hash-writer-only
 * ones, memLimitFloor, resizeThreshold and mergeThreshold, are ignored;
 * maxBatchRows caps the rows of a block, compressionMinRows applies to
 * blocks smaller than 4 KiB), plus the sizes of its pages and blocks.
 */
export interface SortShuffleWriterOptions extends ShuffleWriterOptions {
  /** Bytes of a row page (default: 1/16 of the writer's memory share, between 16 KiB and 4 MiB; at most 128 MiB; with a bounded pool, at most a quarter of the share, or 16 KiB). */
  pageBytes?: number;
  /** Most bytes of rows per compressed block (default: 1/64 of the memory share, between 4 KiB and 256 KiB; with a bounded pool, at most 1/32 of the share, or 4 KiB). */
  blockBytes?: number;
}

/** Pointer slots allocated first (a quarter of spark.shuffle.sort.initialBufferSize: ours are 16 bytes with the sort scratch, and small pools matter). */
const INITIAL_POINTERS = 1024;
/** Per input row of a batch: partition id, key hash, row size, row start, variable-section cursor, placement order. */
const SCRATCH_BYTES_PER_ROW = 24;
/** Up to this many partitions, rows are placed in pages grouped by partition (appendRows). */
const MAX_GROUPED_PARTITIONS = 1 << 16;

/** What the writer keeps per partition from its creation on (rows and blocks per partition), reserved in its pool then. */
const PARTITION_STATE_BYTES = 16;
/** What PartitionRows' per-partition arrays take (offsets, used partitions, cursors). */
function groupBytes(numPartitions: number): number {
  return 12 * (numPartitions + 1);
}
const EMPTY: Uint8Array = new Uint8Array(0);


/**
 * The sort-based row shuffle writer, after Spark's UnsafeShuffleWriter and
 * Gluten's VeloxSortShuffleWriter: every input row is encoded into a compact
 * binary row (row-layout.ts) appended to a pooled page; a packed pointer
 * (partition | page | offset) per row goes into a pointer array. When memory
 * runs short, and at `finish()`, the pointers are radix-sorted on their
 * partition bits and the rows copied out, partition by partition, into
 * compressed blocks (row-format.ts): into a new run of the spill file, or,
 * at the end, straight into the data file after each partition's spilled
 * blocks. The output has the columnar writer's files (data, Spark index,
 * CRC32C checksums, the same atomic commit); only the partitions' bytes
 * differ, and ShuffleReader reads both.
 *
 * Compared with the columnar writer, its per-partition state is nothing but
 * a counter, so its cost hardly grows with the partition count (Gluten uses
 * it from 4000 partitions on); the price is a copy per row in and out of the
 * row format.
 *
 * Memory: pages, the pointer array (with its sort scratch), per-batch
 * scratch and the block writer's arena and compression outputs are reserved
 * in the pool before they are allocated; the writer is the pool's
 * `Reclaimable` and never holds more than it is granted. When a page or a
 * larger pointer array is refused, it spills its rows and reuses its pages.
 *
 * Protocol: `await SortShuffleWriter.create(options)`, any number of
 * `await write(batch)` (one at a time), then `await finish()` once, or
 * `await abort()` at any point. After either, the writer refuses every call.
 */
export class SortShuffleWriter implements Reclaimable {
  private state: WriterState = 'open';
  /** the teardown abort() started, which every later abort() returns */
  private aborting: Promise<void> | null = null;
  private readonly calls = new OneCallAtATime(() => this.state);
  /** a spill asked for by another consumer failed: rows may be lost, the writer must not finish */
  private failure: unknown = null;
  private readonly numPartitions: number;
  private readonly options: SortShuffleWriterOptions;
  private readonly codecName: CodecName;
  private readonly codec: Codec | null;
  /** whether blocks are worth compressing (minCompressionSavings), kept across block writers */
  private readonly advisor: CompressionAdvisor;
  private readonly spillDir: string;
  private readonly output: DataFileWriter;
  private readonly reservation: MemoryReservation;
  private readonly pages: RowPages;
  private readonly pointers = new PointerArray();
  private readonly blockBytes: number;
  private readonly mergeBufferBytes: number;
  /** the most this writer may hold while it writes its data file (limit / concurrentTasks, or Infinity) */
  private readonly finishBytes: number;
  private readonly pool: MemoryPool;
  private blockWriter: BlockWriter | null = null;
  private blockWriterBytes = 0;
  private spillFile: SpillFile | null = null;
  /** the spill run being written, if any: a second one waits for it */
  private spilling: Promise<number> | null = null;
  /** true while write() runs: reclaim leaves the pointer array alone */
  private writing = false;
  /** true once finish() writes the rows in memory into the data file: reclaim can no longer spill them */
  private finalPass = false;
  private inputSchema: Schema | null = null;
  private lastCheckedSchema: Schema | null = null;
  private outputSchema: Schema | null = null;
  private outputColumns: number[] = [];
  private layouts: ColumnLayout[] = [];
  private encoder: RowEncoder | null = null;
  private header = EMPTY;
  private partitioner: Partitioner | null = null;
  private scratchRows = 0;
  private partitionIds = new Uint32Array(0);
  private rowBytes = new Uint32Array(0);
  private rowStart = new Uint32Array(0);
  private varCursor = new Uint32Array(0);
  /** the batch's rows grouped by partition (placementOrder), or null until the first batch */
  private groups: PartitionRows | null = null;
  /** 0, 1, 2, ...: the placement order beyond MAX_GROUPED_PARTITIONS */
  private identity = new Uint32Array(0);
  /** rows and blocks per partition, off the JS heap (16.7 M partitions took 268 MB of it as arrays) */
  private readonly partitionRows: Float64Array;
  private readonly partitionBlocks: Float64Array;
  private totalRows = 0;
  private totalBatches = 0;
  private spilledBytes = 0;

  private constructor(options: SortShuffleWriterOptions, output: DataFileWriter) {
    const pool = options.memoryPool ?? defaultMemoryPool();
    const poolShare = pool.share(options.concurrentTasks ?? 1);
    // a memLimit above the pool's share would size pages the pool cannot give (a 64 MiB memLimit on a 4 MiB pool: 4 MiB pages)
    const share = Math.min(options.memLimit ?? poolShare, poolShare);
    this.options = options;
    this.numPartitions = options.numPartitions;
    this.codecName = options.codec ?? 'lz4';
    this.codec = codecByName(this.codecName);
    this.advisor = new CompressionAdvisor(options.minCompressionSavings ?? DEFAULT_MIN_SAVINGS);
    this.spillDir = options.spillDir ?? tmpdir();
    this.output = output;
    this.pool = pool;
    this.reservation = pool.register(`SortShuffleWriter[map ${options.mapId ?? 0}]`, this);
    // given sizes are capped by a bounded pool too (8 MiB pages, or 8 MiB blocks, on a 4 MiB pool failed the first write):
    // a page at most a quarter of the share, a block at most 1/32 (the block writer holds eight blocks' bytes)
    this.pages = new RowPages(Math.min(options.pageBytes ?? clampKiB(share / 16, 16, 4096), Math.max(16 * 1024, Math.floor(poolShare / 4))), this.reservation);
    this.blockBytes = Math.min(options.blockBytes ?? clampKiB(share / 64, 4, 256), Math.max(4 * 1024, Math.floor(poolShare / 32)));
    // the merge's read buffer for spilled blocks, as the columnar writer's: 1 MiB, less in a small pool
    this.mergeBufferBytes = mergeBufferBytes(poolShare);
    this.finishBytes = poolShare;
    this.partitionRows = new Float64Array(this.numPartitions);
    this.partitionBlocks = new Float64Array(this.numPartitions);
  }

  /** Validates the options, checks the output and spill directories and opens the temporary data file. */
  static async create(options: SortShuffleWriterOptions): Promise<SortShuffleWriter> {
    validateOptions(options);
    validateSortOptions(options);
    codecByName(options.codec ?? 'lz4');
    if (options.schema) checkSchema(options.schema, options);
    if (options.spillDir !== undefined) await assertDirectory(options.spillDir, 'spill');
    const output = await DataFileWriter.create(options.outputPrefix, options.overwrite ?? false);
    const writer = new SortShuffleWriter(options, output);
    try {
      await writer.reservation.grow(PARTITION_STATE_BYTES * options.numPartitions);
    } catch (error) {
      await writer.abort();
      throw error;
    }
    if (options.schema) writer.bindSchema(options.schema);
    return writer;
  }

  /** The schema of the output partitions (the input's, less a partition-id column). */
  get schema(): Schema | null {
    return this.outputSchema;
  }

  /**
   * Encodes one batch's rows into the pages. Batches must share the first
   * batch's schema. A refused batch (schema, partition id) changes nothing and
   * the writer stays usable; any other failure (memory, disk) aborts the writer.
   */
  write(batch: RecordBatch): Promise<void> {
    return this.calls.run('write', () => this.writeBatch(batch));
  }

  private async writeBatch(batch: RecordBatch): Promise<void> {
    await this.assertUsable('write');
    assertInputBatch(batch, 'write');
    if (this.inputSchema === null) this.bindSchema(batch.schema);
    else if (batch.schema !== this.lastCheckedSchema) {
      assertBatchSchema(this.inputSchema, batch.schema, this.totalBatches);
      this.lastCheckedSchema = batch.schema;
    }
    this.writing = true;
    try {
      if (batch.numRows > 0) {
        await this.reserveScratch(batch.numRows);
        // every row's partition first, so a bad partition id refuses the whole batch before anything changes
        this.partitioner!.computePartitionIds(batch, this.partitionIds, this.totalRows);
        const dictionaries = new Map<number, Vector>();
        this.outputColumns.forEach((c, f) => collectWritableDictionaries(batch.data.children[c]!, this.layouts[f]!, dictionaries)); // (indices checked: input-batch.ts)
        await this.appendRows(batch);
        this.totalRows += batch.numRows;
      }
      this.totalBatches++;
    } catch (error) {
      if (this.state === 'aborted') throw writerAborted('while write() was running', error);
      if (error instanceof ShuffleError && error.code === 'CS_PARTITION_ID_OUT_OF_RANGE') throw error;
      await this.abort().catch(() => undefined);
      throw error;
    } finally {
      this.writing = false;
    }
    if ((this.state as WriterState) === 'aborted') throw writerAborted('while write() was running: the batch is not written');
  }

  /** Sorts and writes the rows in memory after each partition's spilled blocks into the data file, writes the index and checksums and commits. */
  finish(): Promise<ShuffleWriteResult> {
    return this.calls.run('finish', () => this.finishOutput());
  }

  private async finishOutput(): Promise<ShuffleWriteResult> {
    this.state = 'finishing'; // at once: a write() or finish() from now on is refused
    await this.throwIfFailed();
    try {
      if (this.outputSchema === null) throw new ShuffleError('CS_INVALID_ARGUMENT', 'finish() before any batch: pass `schema` to create() to write an empty output');
      while (this.spilling !== null) await this.spilling.catch(() => undefined); // a spill another consumer asked for
      if (this.failure !== null) throw this.failure;
      this.releaseScratch();
      let mergeBuffer = EMPTY;
      // What the final pass holds (the pages it sorts out, the read windows) it cannot give back. Rows in
      // memory are spilled first (their pages then become the windows) when the pool is too short for a
      // read window per spill run, and when they would keep more than this writer's share of the pool
      // while the data file is written: that could starve another writer of it (pool.share()).
      const shortOfWindows = this.spillFile !== null && windowsWanted(this.spillFile.runCount + 1) > this.pool.available * MERGE_WINDOW_SHARE;
      const overShare = this.reservation.size + (this.spillFile !== null ? this.mergeBufferBytes : 0) > this.finishBytes;
      if (this.pointers.count > 0 && (shortOfWindows || overShare)) {
        await this.spill();
        this.pages.releaseSpares();
      }
      this.finalPass = true;
      if (this.failure !== null) throw this.failure;
      if (this.spillFile !== null) {
        await this.reserveForFinish(this.mergeBufferBytes);
        const extra = reserveMergeWindows(this.reservation, this.spillFile.runCount, this.mergeBufferBytes, this.finishBytes);
        mergeBuffer = this.reservation.recycler.take(this.mergeBufferBytes + extra);
      }
      const merger = new RowPartitionMerger(this.output, this.header, this.spillFile, mergeBuffer, this.partitionRows);
      if (this.pointers.count > 0) {
        const sorted = this.pointers.sortByPartition();
        await this.blockWriter!.writeSorted(sorted, this.pointers.count, this.pages, merger, this.partitionBlocks);
      }
      await merger.finish();
      // read to its end: deleted before the commit, so that a spill file that cannot be deleted fails the write
      // rather than a finish() whose output is committed
      await this.spillFile?.delete();
      // an abort() from here on waits for the commit, which then stands (DataFileWriter.abort)
      if ((this.state as WriterState) === 'aborted') throw writerAborted('while finish() was running');
      const { partitionLengths, checksums, bytesWritten } = await this.output.commit();
      const result: ShuffleWriteResult = {
        paths: this.output.paths,
        numPartitions: this.numPartitions,
        rows: this.totalRows,
        batches: this.totalBatches,
        bytesWritten,
        partitionLengths,
        partitionRows: Array.from(this.partitionRows),
        partitionBatches: Array.from(this.partitionBlocks),
        checksums,
        spills: this.spillFile?.runCount ?? 0, // the count outlives the file
        spilledBytes: this.spilledBytes,
        peakMemoryBytes: this.reservation.peak,
      };
      this.spillFile = null;
      this.reservation.recycler.give(mergeBuffer); // written and flushed by the commit; released with the rest just below
      this.releaseMemory();
      this.state = 'finished';
      return result;
    } catch (error) {
      if ((this.state as WriterState) === 'aborted') throw writerAborted('while finish() was running', error);
      await this.abort().catch(() => undefined);
      throw error;
    }
  }

  /**
   * Drops everything, removes temporary and spill files and releases all memory. Safe to call in any state.
   * Every step runs even when one fails; a file that cannot be removed then rejects it with CS_IO naming the file
   * (again on each call). A write() or finish() that fails aborts and reports its own error, not abort()'s.
   * Once finish() has begun to commit, abort() comes too late: it waits, the output stands and finish() returns.
   * A write() it comes into rejects with CS_WRITER_CLOSED: its batch is not written.
   */
  abort(): Promise<void> {
    // a second abort() waits for the first: returned early, it let a caller exit with the files still there
    if (this.aborting !== null) return this.aborting;
    if (this.state === 'finished') return Promise.resolve();
    this.state = 'aborted';
    this.aborting = this.tearDown();
    return this.aborting;
  }

  private async tearDown(): Promise<void> {
    await runEveryStep([
      () => this.spilling?.catch(() => undefined),
      () => this.spillFile?.delete(),
      () => this.output.abort(),
      () => {
        this.spillFile = null;
        this.releaseMemory();
      },
    ]);
  }

  /**
   * Gives memory back to the pool: writes the buffered rows out as a spill
   * run (also while finish() gets ready, unless the final pass has taken
   * them: it holds at most this writer's share), then drops the
   * spare pages and, between writes, everything else (the empty pointer
   * array, the scratch arrays, the block writer: the next write reserves
   * them again).
   */
  async reclaim(requested: number): Promise<number> {
    void requested; // everything that can go goes: a partial spill would not free whole pages
    if (this.state !== 'open' && this.state !== 'finishing') return 0;
    let freed = 0;
    if (!this.finalPass) {
      try {
        freed += await this.spill();
      } catch (error) {
        this.failure ??= error; // rows left memory without reaching a complete spill run: this writer is done
        throw error;
      }
    }
    freed += this.pages.releaseSpares();
    if (!this.writing && this.state === 'open' && this.pointers.count === 0) {
      const before = this.reservation.size;
      this.reservation.shrink(this.pointers.allocatedBytes);
      this.pointers.release();
      this.releaseScratch();
      this.releaseBlockWriter();
      freed += before - this.reservation.size;
    }
    return freed;
  }

  // ------------------------------------------------------------------------------------------

  /**
   * Encodes the batch's rows into pages, a run of rows per page, and appends
   * their pointers. The rows are placed grouped by partition (a counting sort
   * of the batch, stable): the copy-out then reads each partition's rows of
   * a batch from one stretch of a page instead of jumping through all of
   * them, which on these machines costs several times the copy itself
   * (cache and TLB misses). Order within a partition stays the input order.
   */
  private async appendRows(batch: RecordBatch): Promise<void> {
    const n = batch.numRows;
    const sources = this.outputColumns.map((c, f) => prepareSourceColumn(batch.data.children[c]!, this.layouts[f]!));
    const { rowBytes, rowStart, varCursor, partitionIds, pages, pointers } = this;
    const encoder = this.encoder!;
    encoder.measure(sources, n, rowBytes, this.totalRows);
    await this.ensureBlockWriter();
    const ids = await this.placementOrder(n);
    for (let k = 0; k < n; ) {
      // room for more pointers (not necessarily for the whole batch: a small pool spills in between), then for a row
      if (pointers.count === pointers.capacity) await this.ensurePointerCapacity(n - k);
      await this.ensureRoom(align4(rowBytes[ids[k]!]!));
      // a spill another consumer asked for while we awaited may still be writing the pages and
      // pointers: rows added now would be dropped when it resets them; wait for it and look again
      if (this.spilling !== null) {
        await this.spilling.catch(() => undefined);
        continue;
      }
      // from here to the next await nothing else touches the pages or the pointers
      const number = pages.current;
      const page = pages.page(number);
      const begin = pages.offset;
      const last = Math.min(n, k + pointers.capacity - pointers.count);
      let at = begin;
      let j = k;
      while (j < last && at + align4(rowBytes[ids[j]!]!) <= page.byteLength) {
        const i = ids[j]!;
        rowStart[i] = at;
        at += align4(rowBytes[i]!);
        j++;
      }
      encoder.encode(sources, ids, k, j, page, pages.view(number), rowStart, rowBytes, varCursor);
      for (let m = k; m < j; m++) {
        const i = ids[m]!;
        const p = partitionIds[i]!;
        pointers.append(packHi(p, number), packLo(number, rowStart[i]!));
        this.partitionRows[p]!++;
      }
      pages.advance(at - begin);
      k = j;
    }
  }

  /**
   * The batch's row ids grouped by partition (PartitionRows, the columnar
   * writer's counting sort), or in input order beyond MAX_GROUPED_PARTITIONS
   * partitions, where a batch has about one row per partition anyway and the
   * per-partition arrays would cost more than they save.
   */
  private async placementOrder(rows: number): Promise<Uint32Array> {
    if (this.numPartitions > MAX_GROUPED_PARTITIONS) {
      if (this.identity.length < rows) this.identity = Uint32Array.from({ length: this.scratchRows }, (_, i) => i);
      return this.identity;
    }
    if (this.groups === null) {
      await this.reservation.grow(groupBytes(this.numPartitions));
      this.groups = new PartitionRows(this.numPartitions);
    }
    // its row-id array grows to at most scratchRows, which the scratch reservation covers
    this.groups.build(this.partitionIds, rows);
    return this.groups.rowOffset2RowId;
  }

  /** Makes the current page one with `bytes` free: a spare, a new page, or, when the pool refuses, the pages emptied by a spill. */
  private async ensureRoom(bytes: number): Promise<void> {
    for (;;) {
      if (this.pages.current >= 0 && this.pages.remaining >= bytes) return;
      const opened = this.pages.tryOpen(bytes);
      if (opened === 'ok') return;
      if (this.pointers.count > 0) {
        await this.spill();
        continue;
      }
      // nothing of ours to write out: wait for the pool, which may ask other consumers to spill
      await this.pages.openWaiting(bytes);
      return;
    }
  }

  /**
   * Room for more pointers, `wanted` at most: the array doubles (or grows to
   * `wanted` more at once); when the pool refuses, the rows are spilled and
   * the array is reused, or, if it has no room at all, it waits for the pool.
   */
  private async ensurePointerCapacity(wanted: number): Promise<void> {
    const { pointers } = this;
    let target = Math.max(Math.min(pointers.count + wanted, pointers.capacity * 4), pointers.capacity * 2, INITIAL_POINTERS);
    if (!this.reservation.tryGrow(target * POINTER_SLOT_BYTES)) {
      if (pointers.count > 0) {
        await this.spill();
        if (pointers.capacity > 0) return;
      }
      target = INITIAL_POINTERS;
      await this.reservation.grow(target * POINTER_SLOT_BYTES);
    }
    const old = pointers.allocatedBytes;
    pointers.resize(target);
    this.reservation.shrink(old);
  }

  /** The block writer and its fixed memory, reserved the first time rows arrive (a spill must not need new memory). */
  private async ensureBlockWriter(): Promise<void> {
    if (this.blockWriter !== null) return;
    const options = {
      codec: this.codec,
      blockBytes: this.blockBytes,
      maxRows: this.options.maxBatchRows ?? DEFAULT_MAX_BATCH_ROWS,
      compressionMinRows: this.options.compressionMinRows ?? DEFAULT_COMPRESSION_MIN_ROWS,
      policy: this.advisor,
    };
    const bytes = BlockWriter.bytesFor(options);
    await this.reservation.grow(bytes);
    this.blockWriter = new BlockWriter(options, this.reservation);
    this.blockWriterBytes = bytes;
  }

  private releaseBlockWriter(): void {
    this.reservation.shrink(this.blockWriterBytes);
    this.blockWriterBytes = 0;
    this.blockWriter = null;
  }

  /**
   * Writes every buffered row out as one partition-ordered run of the spill
   * file (Spark's ShuffleExternalSorter.spill); the pages become spares. A
   * spill asked for while one runs waits for it. Returns the bytes of the
   * pages of single large rows it dropped (the others become spares).
   */
  private async spill(): Promise<number> {
    while (this.spilling !== null) await this.spilling.catch(() => undefined);
    // after the teardown a new spill file would outlive the writer
    if (this.state === 'aborted') throw writerAborted('before a spill');
    if (this.pointers.count === 0) return 0;
    const run = this.writeSpillRun();
    this.spilling = run;
    try {
      return await run;
    } finally {
      this.spilling = null;
    }
  }

  private async writeSpillRun(): Promise<number> {
    this.spillFile ??= await SpillFile.create(this.spillDir);
    const file = this.spillFile;
    const sorted = this.pointers.sortByPartition();
    file.beginRun();
    try {
      await this.blockWriter!.writeSorted(sorted, this.pointers.count, this.pages, {
        write: (p, chunks) => file.writeSegment(p, chunks),
        flush: () => file.flushRun(),
      }, this.partitionBlocks);
      this.spilledBytes += file.endRun();
    } catch (error) {
      file.abandonRun();
      throw error;
    }
    this.pointers.count = 0;
    return this.pages.reset();
  }

  /** Reserves `bytes` at finish, making room from spare pages, then by spilling the rows in memory, if the pool is short. */
  private async reserveForFinish(bytes: number): Promise<void> {
    if (this.reservation.tryGrow(bytes)) return;
    this.pages.releaseSpares();
    if (this.reservation.tryGrow(bytes)) return;
    if (this.pointers.count > 0) {
      await this.spill();
      this.pages.releaseSpares();
    }
    await this.reservation.grow(bytes);
  }

  /**
   * Reserves and grows the per-row scratch arrays, to the batch's rows exactly: they are kept while writing, and
   * doubled, batches of 4,000-4,150 rows held 8,000 rows of them, more than a writer's share of a small shared pool.
   */
  private async reserveScratch(rows: number): Promise<void> {
    if (rows <= this.scratchRows) return;
    const grown = rows;
    await this.reservation.grow((grown - this.scratchRows) * SCRATCH_BYTES_PER_ROW);
    this.scratchRows = grown;
    this.partitionIds = new Uint32Array(grown);
    this.rowBytes = new Uint32Array(grown);
    this.rowStart = new Uint32Array(grown);
    this.varCursor = new Uint32Array(grown);
  }

  private releaseScratch(): void {
    this.reservation.shrink(this.scratchRows * SCRATCH_BYTES_PER_ROW);
    if (this.groups !== null) this.reservation.shrink(groupBytes(this.numPartitions));
    this.groups = null;
    this.identity = new Uint32Array(0);
    this.scratchRows = 0;
    this.partitionIds = new Uint32Array(0);
    this.rowBytes = new Uint32Array(0);
    this.rowStart = new Uint32Array(0);
    this.varCursor = new Uint32Array(0);
  }

  /** Drops every buffer and leaves the pool. */
  private releaseMemory(): void {
    this.pages.releaseAll();
    this.pointers.release();
    this.pointers.count = 0;
    this.blockWriter = null;
    this.groups = null;
    this.reservation.free();
  }

  private async assertUsable(action: string): Promise<void> {
    if (this.state !== 'open') {
      throw new ShuffleError('CS_WRITER_CLOSED', `cannot ${action}: the writer is ${this.state}`);
    }
    await this.throwIfFailed();
  }

  /** A failure that came while no call ran (a spill another consumer asked for): the writer aborts and reports it. */
  private async throwIfFailed(): Promise<void> {
    if (this.failure !== null) {
      const failure = this.failure;
      await this.abort().catch(() => undefined);
      throw failure;
    }
  }

  private bindSchema(schema: Schema): void {
    const output = checkSchema(schema, this.options);
    this.outputColumns = output.inputIndices;
    this.layouts = output.layouts;
    this.encoder = new RowEncoder(output.rowLayout);
    this.partitioner = createPartitioner(this.options.partitioning, schema, this.numPartitions, this.options.mapId ?? 0);
    this.inputSchema = schema;
    this.lastCheckedSchema = schema;
    this.outputSchema = output.schema;
    this.header = encodeRowPartitionHeader(output.schema, this.codecName);
  }
}

/** A byte size in KiB steps, between `min` and `max` KiB. */
function clampKiB(bytes: number, minKiB: number, maxKiB: number): number {
  return Math.min(maxKiB, Math.max(minKiB, Math.floor(bytes / 1024))) * 1024;
}

/** The sort writer's own options (`auto` checks them when it is created, before it knows which writer it will use). */
export function validateSortOptions(options: SortShuffleWriterOptions): void {
  // numPartitions is at most MAX_NUM_PARTITIONS (validateOptions), the 24-bit partition ids of the packed pointers
  const size = (name: string, value: number | undefined, max: number) => {
    if (value !== undefined && !(Number.isInteger(value) && value % 4 === 0 && value >= 64 && value <= max)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `${name} must be a multiple of 4 in [64, ${max}], got ${String(value)}`);
    }
  };
  size('pageBytes', options.pageBytes, MAX_PAGE_OFFSET + 1);
  size('blockBytes', options.blockBytes, 1 << 30);
}

/** Everything about a schema that can be refused before any data is touched: the columnar writer's checks, the row layout, and dictionaries shared beyond what a row can be read back with. */
function checkSchema(schema: Schema, options: Pick<ShuffleWriterOptions, 'partitioning' | 'numPartitions'>): OutputColumns & { rowLayout: RowLayout } {
  const output = checkInputSchema(schema, options);
  const rowLayout = rowLayoutOf(output.schema.fields);
  const unreadable = unreadableSharedDictionary(output.schema.fields);
  if (unreadable !== null) throw unreadable;
  return { ...output, rowLayout };
}

