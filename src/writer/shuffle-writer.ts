import { tmpdir } from 'node:os';
import { Schema, type RecordBatch, type Vector } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { runEveryStep } from '../run-every-step.js';
import { codecByName, type Codec } from '../format/codec.js';
import { CompressionAdvisor, DEFAULT_MIN_SAVINGS, STORE_RAW } from '../format/compression-advisor.js';
import {
  compressionBound,
  encodeRawPayload,
  encodeRecordBatchMessage,
  encodeRecordBatchPayload,
  encodeSchemaMessage,
  payloadArenaBound,
  rawPayloadBytes,
  type EncodedMessage,
  type FieldNodeInfo,
} from '../format/ipc-message.js';
import { assertDirectory, DataFileWriter } from '../format/output-files.js';
import { BufferRecycler } from '../memory/buffer-recycler.js';
import { MemoryLimitError, type MemoryPool, type MemoryReservation, type Reclaimable } from '../memory/memory-pool.js';
import { defaultMemoryPool } from '../memory/default-pool.js';
import { PayloadStore, type ExtraMessages } from '../spill/payload-store.js';
import { mergeBufferBytes } from '../spill/spill-file.js';
import { binarySlackBytes, chunkRows, keepsSize, partitionBufferRows, targetCapacity } from './buffer-sizing.js';
import { appendAccounted, onePartition } from './append-rows.js';
import { BufferGrowth, nestedBytes } from './buffer-growth.js';
import { binaryDataFits, ColumnBuffer, hasData, hasValidity } from './column-buffer.js';
import { childLayouts, dictionaryLayouts, fixedBytesPerRow, type ColumnLayout } from './column-layout.js';
import { DictionaryTracker } from './dictionary-tracker.js';
import { batchBufferBytes, InputStaging, MAX_STAGING_BYTES, MAX_STAGING_SHARE, MIN_STAGED_BATCHES, stagingTargetRows } from './input-staging.js';
import { collectWritableDictionaries } from './dictionary-indices.js';
import { assertInputBatch } from './input-batch.js';
import { checkInputSchema } from './output-columns.js';
import { OneCallAtATime, writerAborted, type WriterState } from './writer-calls.js';
import { createPartitioner, type Partitioner } from './partitioner.js';
import { PartitionRows } from './partition-rows.js';
import { assertBatchSchema } from './same-schema.js';
import { prepareSourceColumn, type SourceColumn } from './source-column.js';
import { dataBytesOf } from './split-binary.js';
import { splitPlanned, splitRange } from './split-column.js';
import { viewBytes } from './split-view.js';
import { planSplit, ScratchSelections, withScratchMemory, type RowSelection, type SplitPlan } from './split-plan.js';
import { warmSource } from './warm-source.js';
import {
  DEFAULT_COMPRESSION_MIN_ROWS,
  DEFAULT_MAX_BATCH_ROWS,
  DEFAULT_MEM_LIMIT_FLOOR,
  DEFAULT_MERGE_THRESHOLD,
  DEFAULT_RESIZE_THRESHOLD,
  UNBOUNDED_MEM_LIMIT,
  validateOptions,
  type ShuffleWriteResult,
  type ShuffleWriterOptions,
} from './writer-options.js';

/** Slabs small uncompressed payloads are carved from (memory/slab-allocator.ts), and the least a small pool gets. */
const SLAB_BYTES = 256 * 1024;
const MIN_SLAB_BYTES = 16 * 1024;

/** Chunks split into more partitions than this get the sequential warm-up pass (warm-source.ts). */
const WARM_MIN_PARTITIONS = 16;

/** Bytes of copied-but-not-yet-compressed payloads allowed in flight before write() waits. */
const MAX_IN_FLIGHT_BYTES = 32 * 1024 * 1024;

/** One partition's pre-allocated buffers: every output column, same capacity in rows. */
interface PartitionBuffer {
  capacity: number;
  /** the preferred rows the buffer was last sized for (targetCapacity); 0 once a reclaim cut it down */
  sizedFor: number;
  filled: number;
  columns: ColumnBuffer[];
  /** > 0 while an emit is copying this buffer: reclaim leaves it alone */
  busy: number;
}


/**
 * The columnar hash shuffle writer (Gluten's VeloxHashShuffleWriter): for each
 * input batch, compute partition ids, group rows by partition (counting sort),
 * and split every column's buffers into per-partition pre-allocated buffers.
 * A partition buffer that would overflow becomes one compressed Arrow IPC
 * record-batch payload, cached in memory; under memory pressure cached payloads
 * and then partition buffers are spilled to disk in partition order. Batches
 * that bring only a few rows to each partition are staged and split together.
 * `finish()` merges everything partition by partition into one data file with
 * an index and checksums.
 *
 * Every buffer the writer owns is reserved in its memory pool before it is
 * allocated and released when dropped; the writer is the pool's `Reclaimable`.
 *
 * Protocol: `await ShuffleWriter.create(options)`, any number of
 * `await write(batch)` (one at a time), then `await finish()` once, or
 * `await abort()` at any point. After either, the writer refuses every call.
 */
export class ShuffleWriter implements Reclaimable {
  private state: WriterState = 'open';
  /** the teardown abort() started, which every later abort() returns */
  private aborting: Promise<void> | null = null;
  private readonly calls = new OneCallAtATime(() => this.state);
  /** set when a spill asked for by another writer failed in a way that cost this writer rows */
  private failure: unknown = null;
  private readonly options: Required<Omit<ShuffleWriterOptions, 'schema' | 'codec' | 'memoryPool' | 'overwrite'>>;
  private readonly codec: Codec | null;
  private readonly advisor: CompressionAdvisor;
  private readonly output: DataFileWriter;
  private readonly pool: MemoryPool;
  private readonly reservation: MemoryReservation;
  private readonly store: PayloadStore;
  private inputSchema: Schema | null = null;
  private lastCheckedSchema: Schema | null = null;
  private outputSchema: Schema | null = null;
  private outputColumns: number[] = [];
  private layouts: ColumnLayout[] = [];
  private partitioner: Partitioner | null = null;
  private readonly rows: PartitionRows;
  private partitionIds = new Uint32Array(0);
  /** rows the scratch arrays (partition ids, row ids, hashes) are reserved for */
  private scratchRows = 0;
  private readonly buffers: (PartitionBuffer | undefined)[];
  /** per partition, small evictions parked uncompressed until they make one full batch */
  private readonly merged: (PartitionBuffer | undefined)[];
  /** row ids 0, 1, 2, ...: appends whole buffers with the split functions */
  private identity = new Uint32Array(0);
  private readonly mergeMinRows: number;
  /** the partition whose merge buffer is being appended to or emitted (reclaim leaves it alone) */
  private mergeBusy = -1;
  /** partitions whose buffers the chunk being split relies on: reclaim leaves them alone */
  private readonly pinned: Uint8Array;
  /** per partition, rows of the current chunk a top-up already moved into a flushed buffer (topUp) */
  private readonly toppedUp: Uint32Array;
  /** no column has nested levels: a partition's rows can be split in two parts (topUp) */
  private flatRows = false;
  private readonly partitionRowCounts: Float64Array;
  /** payload encodings still compressing; each removes itself when it settles */
  private readonly inFlight = new Set<Promise<void>>();
  private inFlightBytes = 0;
  private totalRows = 0;
  /** rows per partition buffer computed for the last chunk (Gluten's preAllocRowCnt) */
  private preferredRows = 0;
  /**
   * false once a reclaim has had to drain merge buffers: the pool is too small
   * for parked rows to grow into large batches (they would be spilled small
   * anyway), so from then on evictions become payloads at once
   */
  private merging = true;
  /** rows per chunk of a batch for the last estimate (buffer-sizing.ts chunkRows); 0 before the first */
  private chunkRows = 0;
  private totalBatches = 0;
  /** per output column: binary bytes seen so far, for the running average in bytesPerRow */
  private binaryBytesSeen: number[] = [];
  /** bytes added to a top-level binary column's estimated data capacity */
  private binarySlack = 0;
  /** per output column: bytes of nested levels seen so far (Gluten's complexTotalSizeBytes_) */
  private nestedBytesSeen: number[] = [];
  /** the rows the running averages are over (all rows up to the end of the chunk being split) */
  private rowsAveraged = 0;
  /** the dictionaries every partition's stream shares, when the schema has dictionary columns */
  private dictionaries: DictionaryTracker | null = null;
  /** arrays of the nested levels' row selections: one set for the chunk being split, one for the payload merger */
  private readonly splitScratch: ScratchSelections;
  private readonly mergeScratch: ScratchSelections;
  /** what warmSource read: kept so the reads are not optimized away */
  private warmth = 0;
  /** small input batches gathered before the split (input-staging.ts); null when batches are split as they come */
  private staging: InputStaging | null = null;
  /** rows a staged batch aims at: -1 until the first batch decides, 0 for no staging */
  private stagingTarget = -1;
  /** bytes of the input batches staged (batchBufferBytes) */
  private stagedBytes = 0;

  /**
   * The length of a payload's arena of at least `bytes`: under a memory limit a
   * size class (BufferRecycler.recycledLength), so that an arena a spill or a
   * compaction gave back serves later payloads; without one exactly `bytes`, as
   * arenas are then kept to the end and a size class would only add slack
   * (5 % more peak memory at narrow P = 200).
   */
  private readonly arenaLength: (bytes: number) => number;
  /** A payload's arena (emit reserved arenaLength of its bound): the payload store gives it back. */
  private readonly allocateArena = (bytes: number): Uint8Array => this.reservation.recycler.take(this.arenaLength(bytes));
  /** The same for a payload to be compressed, which writes every byte of its body (encodeRecordBatchPayload): not zeroed. */
  private readonly allocateCompressedArena = (bytes: number): Uint8Array => this.reservation.recycler.takeUnzeroed(this.arenaLength(bytes));

  private constructor(options: ShuffleWriterOptions, output: DataFileWriter) {
    const pool = options.memoryPool ?? defaultMemoryPool();
    const tasks = options.concurrentTasks ?? 1;
    const bounded = Number.isFinite(pool.limit);
    const share = pool.share(tasks);
    // never sized for more than the share of a bounded pool: a chunk's buffers sized for the 128 MiB floor (or a
    // memLimit above the pool) could not be held even after every spill, and a 4 MiB pool failed with CS_MEMORY_LIMIT
    const memLimit = Math.min(options.memLimit ?? (bounded ? share : UNBOUNDED_MEM_LIMIT), share);
    this.options = {
      numPartitions: options.numPartitions,
      partitioning: options.partitioning,
      outputPrefix: options.outputPrefix,
      mapId: options.mapId ?? 0,
      concurrentTasks: tasks,
      spillDir: options.spillDir ?? tmpdir(),
      memLimit,
      memLimitFloor: Math.min(options.memLimitFloor ?? (memLimit > 0 ? Math.min(DEFAULT_MEM_LIMIT_FLOOR, memLimit) : DEFAULT_MEM_LIMIT_FLOOR), share),
      maxBatchRows: options.maxBatchRows ?? DEFAULT_MAX_BATCH_ROWS,
      resizeThreshold: options.resizeThreshold ?? DEFAULT_RESIZE_THRESHOLD,
      mergeThreshold: options.mergeThreshold ?? DEFAULT_MERGE_THRESHOLD,
      compressionMinRows: options.compressionMinRows ?? DEFAULT_COMPRESSION_MIN_ROWS,
      minCompressionSavings: options.minCompressionSavings ?? DEFAULT_MIN_SAVINGS,
      dictionaryUpdates: options.dictionaryUpdates ?? 'delta',
      // staged rows cannot be spilled: under a limit they starved other writers of a tight shared pool
      stagingBytes: Math.min(options.stagingBytes ?? (bounded ? 0 : MAX_STAGING_BYTES), Math.floor(share * MAX_STAGING_SHARE)),
    };
    this.codec = codecByName(options.codec ?? 'lz4');
    this.advisor = new CompressionAdvisor(this.options.minCompressionSavings);
    this.output = output;
    this.pool = pool;
    this.reservation = pool.register(`ShuffleWriter[map ${this.options.mapId}]`, this);
    const n = options.numPartitions;
    // slabs for small uncompressed payloads: 256 KiB, a sixteenth of a small pool (at least 16 KiB)
    const slab = bounded ? Math.min(SLAB_BYTES, Math.max(MIN_SLAB_BYTES, Math.floor(pool.limit / 16))) : SLAB_BYTES;
    this.store = new PayloadStore(n, this.reservation, this.options.spillDir, { bufferBytes: mergeBufferBytes(share), maxHeldBytes: share }, slab, bounded);
    this.arenaLength = bounded ? BufferRecycler.recycledLength : (bytes: number) => bytes;
    this.rows = new PartitionRows(n);
    this.buffers = new Array<PartitionBuffer | undefined>(n);
    this.merged = new Array<PartitionBuffer | undefined>(n);
    this.mergeMinRows = Math.floor(this.options.maxBatchRows * this.options.mergeThreshold);
    this.pinned = new Uint8Array(n);
    this.toppedUp = new Uint32Array(n);
    this.partitionRowCounts = new Float64Array(n);
    this.splitScratch = new ScratchSelections((bytes) => this.reservation.tryGrow(bytes));
    this.mergeScratch = new ScratchSelections((bytes) => this.reservation.tryGrow(bytes));
  }

  /** Validates the options, checks the output and spill directories and opens the temporary data file. */
  static async create(options: ShuffleWriterOptions): Promise<ShuffleWriter> {
    validateOptions(options);
    codecByName(options.codec ?? 'lz4');
    if (options.schema) checkInputSchema(options.schema, options);
    if (options.spillDir !== undefined) await assertDirectory(options.spillDir, 'spill');
    const output = await DataFileWriter.create(options.outputPrefix, options.overwrite ?? false);
    const writer = new ShuffleWriter(options, output);
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
   * Splits one batch into the partition buffers, or stages it to be split with
   * the next ones when it brings few rows to each partition (input-staging.ts).
   * Batches must share the first batch's schema. A refused batch (schema,
   * partition id) changes nothing, staged rows included, and the writer stays
   * usable; any other failure (memory, disk) aborts the writer.
   */
  write(batch: RecordBatch): Promise<void> {
    return this.calls.run('write', () => this.writeBatch(batch));
  }

  private async writeBatch(batch: RecordBatch): Promise<void> {
    await this.assertUsable('write');
    this.bindOrCheckSchema(batch);
    try {
      const staged = this.staging?.rows ?? 0;
      if (batch.numRows > 0) {
        await this.reserveScratch(staged + batch.numRows);
        // every row's partition first (after the staged rows' ones), so a bad partition id refuses the whole batch
        // before anything changes: its dictionaries' values included, which would be written to every partition
        this.partitioner!.computePartitionIds(batch, this.partitionIds.subarray(staged), this.totalRows + staged);
      }
      await this.registerDictionaries(batch);
      if (batch.numRows > 0) await this.stageOrSplit(batch, staged);
      this.totalBatches++;
      while (this.inFlightBytes > MAX_IN_FLIGHT_BYTES) await Promise.race(this.inFlight);
    } catch (error) {
      // abort() was called while this write was running: that, not its side effects, is the story
      if (this.state === 'aborted') throw writerAborted('while write() was running', error);
      if (error instanceof ShuffleError && error.code === 'CS_PARTITION_ID_OUT_OF_RANGE') throw error;
      await this.abort().catch(() => undefined);
      throw error;
    }
    if ((this.state as WriterState) === 'aborted') throw writerAborted('while write() was running: the batch is not written');
  }

  /**
   * The rows each partition buffer would be sized for, given rows as wide as
   * this batch's (buffer-sizing.ts): also the most rows a payload holds
   * before the payload merger. Binds the schema when no batch has come yet;
   * nothing is written. AutoShuffleWriter asks it before the first write.
   */
  async bufferRowsFor(batch: RecordBatch): Promise<number> {
    await this.assertUsable('size buffers for');
    this.bindOrCheckSchema(batch);
    return batch.numRows === 0 ? this.options.maxBatchRows : this.estimateRows(batch);
  }

  /** Binds the first batch's schema; CS_SCHEMA_MISMATCH for a later batch of another schema (input-batch.ts: not a batch at all). */
  private bindOrCheckSchema(batch: RecordBatch): void {
    assertInputBatch(batch, 'write');
    if (this.inputSchema === null) this.bindSchema(batch.schema);
    else if (batch.schema !== this.lastCheckedSchema) {
      // comparing schemas is slow; producers usually hand over the same Schema object every time
      assertBatchSchema(this.inputSchema, batch.schema, this.totalBatches);
      this.lastCheckedSchema = batch.schema;
    }
  }

  /** Flushes every partition buffer, merges spilled and cached payloads into the data file, writes the index and checksums and commits. */
  finish(): Promise<ShuffleWriteResult> {
    return this.calls.run('finish', () => this.finishOutput());
  }

  private async finishOutput(): Promise<ShuffleWriteResult> {
    this.state = 'finishing'; // at once: a write() or finish() from now on is refused
    await this.throwIfFailed();
    try {
      if (this.outputSchema === null) throw new ShuffleError('CS_INVALID_ARGUMENT', 'finish() before any batch: pass `schema` to create() to write an empty output');
      if (this.staging !== null) {
        await this.splitStaged();
        this.staging.release();
        this.staging = null;
      }
      for (let p = 0; p < this.buffers.length; p++) {
        this.pinned[p] = 1;
        const buffer = this.buffers[p];
        if (buffer !== undefined && buffer.filled > 0) await this.evict(p, buffer);
        const merged = this.merged[p];
        if (merged !== undefined && merged.filled > 0) await this.orSpill(p, undefined, () => this.emit(p, merged));
        this.pinned[p] = 0;
        this.release(p);
      }
      this.releaseScratch();
      await this.store.prepareMerge(this.pool.available);
      await this.store.merge(this.output, encodeSchemaMessage(this.outputSchema));
      if (this.failure !== null) throw this.failure; // a spill another consumer asked for failed: rows may be missing
      // The merge flushed all it appended: the payloads and the spill file go before the commit, so a spill file that
      // cannot be deleted fails the write rather than a finish() whose output is committed. The dictionary batches go
      // after the store: its cached payloads point at them (released first, they stayed alive unreserved).
      const { spillCount, spilledBytes } = this.store; // the store's counts go with its spill file
      const partitionBatches = Array.from(this.store.batchCounts);
      await this.store.discard();
      await this.dictionaries?.release();
      // an abort() from here on waits for the commit, which then stands (DataFileWriter.abort)
      if ((this.state as WriterState) === 'aborted') throw writerAborted('while finish() was running');
      const { partitionLengths, checksums, bytesWritten } = await this.output.commit();
      const result: ShuffleWriteResult = {
        paths: this.output.paths,
        numPartitions: this.options.numPartitions,
        rows: this.totalRows,
        batches: this.totalBatches,
        bytesWritten,
        partitionLengths,
        partitionRows: Array.from(this.partitionRowCounts),
        partitionBatches,
        checksums,
        spills: spillCount,
        spilledBytes,
        peakMemoryBytes: this.reservation.peak,
      };
      this.reservation.free();
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
      () => Promise.all(this.inFlight),
      () => this.store.discard(),
      () => this.dictionaries?.release(),
      () => this.output.abort(),
      () => {
        this.buffers.fill(undefined);
        this.merged.fill(undefined);
        this.staging = null;
        this.reservation.free();
      },
    ]);
  }

  /**
   * Gives memory back to the pool (Gluten's reclaimFixedSize), in this order:
   * write every cached payload, in partition order, as a new run of the spill
   * file, and with them the merge buffers' parked rows (Gluten drains its
   * payload merger in the same step), largest first; then shrink the partition
   * buffers with the most unused capacity to what they hold; then evict
   * partition buffers, largest first. Evicted buffers go into the same spill
   * run (compressed where the pool has room for the output, stored
   * uncompressed otherwise). The partitions the current chunk is being split
   * into are never touched.
   *
   * Merge buffers go before shrinking because shrinking frees capacity the
   * next batch needs again: under a tight limit every reclaim cut all
   * partition buffers down and the next split grew them back (two
   * allocations per column and partition per reclaim).
   */
  async reclaim(requested: number): Promise<number> {
    if (this.state !== 'open' && this.state !== 'finishing') return 0;
    // free at least half of what this writer holds: a little headroom saves many tiny spills
    const bytes = Math.max(requested, Math.floor(this.reservation.size / 2));
    await Promise.all(this.inFlight);
    // From here on nothing awaits until the chosen buffers are detached: the writer (which may be
    // running between our awaits when another writer asked for memory) can then no longer touch them.
    // Partition buffers the current chunk relies on are pinned; merge buffers are not used by the
    // split, so only the one being appended to or emitted right now is off limits.
    let planned = this.store.memoryBytes;
    const detached: { p: number; merged: PartitionBuffer | undefined; buffer: PartitionBuffer | undefined }[] = [];
    if (planned < bytes) {
      const merges = [...this.merged.keys()]
        .filter((p) => p !== this.mergeBusy && this.merged[p] !== undefined && this.merged[p]!.busy === 0)
        .map((p) => ({ p, held: bufferBytes(this.merged[p]) }))
        .sort((a, b) => b.held - a.held);
      for (const { p, held } of merges) {
        if (planned >= bytes) break;
        this.merging = false;
        planned += held;
        detached.push({ p, merged: this.merged[p], buffer: undefined });
        this.merged[p] = undefined;
      }
    }
    let freed = planned < bytes ? this.shrinkBuffers(bytes - planned) : 0;
    planned += freed;
    if (planned < bytes) {
      const buffers = [...this.buffers.keys()]
        .filter((p) => this.pinned[p] === 0 && this.buffers[p] !== undefined && this.buffers[p]!.busy === 0)
        .map((p) => ({ p, held: bufferBytes(this.buffers[p]) }))
        .sort((a, b) => b.held - a.held);
      for (const { p, held } of buffers) {
        if (planned >= bytes) break;
        // a partition's rows must reach the spill in order: its parked (older) rows go with it
        const merged = this.merged[p];
        const parked = merged !== undefined && merged.filled > 0;
        if (parked && (p === this.mergeBusy || merged.busy > 0)) continue;
        planned += held + (parked ? bufferBytes(merged) : 0);
        const entry = detached.find((d) => d.p === p);
        if (entry !== undefined) entry.buffer = this.buffers[p];
        else detached.push({ p, merged: parked ? merged : undefined, buffer: this.buffers[p] });
        if (parked) this.merged[p] = undefined;
        this.buffers[p] = undefined;
      }
    }
    if (detached.length === 0) return freed + (await this.spillStore());
    // the dictionary batches detached rows need go right before them: taken now, still without an
    // await, so they are in order with every other payload of the partition
    const dictionaries = detached.map(({ p, merged, buffer }) => ((merged?.filled ?? 0) + (buffer?.filled ?? 0) > 0 ? this.dictionaryMessages(p) : []));
    // Evicted partitions are compressed where the pool has room for the output (reserved until the
    // spill run is on disk) and stored uncompressed where it has not.
    const extra = new Map<number, ExtraMessages>();
    detached.forEach(({ p, merged, buffer }, d) => {
      extra.set(p, this.spilledRows(merged, buffer, dictionaries[d]!, () => (freed += this.releaseDetached(merged) + this.releaseDetached(buffer))));
    });
    try {
      // (not `freed += await ...`: that reads freed before the run, and the run's written() adds the evicted bytes to it)
      const released = await this.spillStore(extra);
      freed += released;
    } catch (error) {
      // some of these rows may have left memory without reaching a complete spill: this writer is done
      this.failure ??= error;
      throw error;
    }
    return freed;
  }

  /**
   * Reclaim's second step (Gluten's shrinkPartitionBuffersMinSize): partition
   * buffers with the most unused capacity, largest first, are cut down to the
   * rows they hold (an empty one is dropped), until `bytes` are freed. Needs
   * room in the pool for the smaller copy; runs without awaiting, so the
   * writer cannot interleave. Returns the bytes freed.
   */
  private shrinkBuffers(bytes: number): number {
    const fitted = (buffer: PartitionBuffer) => buffer.columns.reduce((sum, c) => sum + c.fittedBytes(buffer.filled), 0);
    const unused = (buffer: PartitionBuffer) => bufferBytes(buffer) - fitted(buffer);
    const candidates = [...this.buffers.keys()]
      .filter((p) => this.pinned[p] === 0 && this.buffers[p]?.busy === 0)
      .map((p) => ({ p, buffer: this.buffers[p]!, unused: unused(this.buffers[p]!) }))
      .filter((c) => c.unused > 0)
      .sort((a, b) => b.unused - a.unused);
    let freed = 0;
    for (const { p, buffer } of candidates) {
      if (freed >= bytes) break;
      if (buffer.filled === 0) {
        freed += this.release(p, true, false);
        continue;
      }
      const before = bufferBytes(buffer);
      const after = fitted(buffer);
      if (!this.reservation.tryGrow(after)) continue;
      for (const column of buffer.columns) column.shrinkTo(buffer.filled);
      buffer.capacity = buffer.filled;
      buffer.sizedFor = 0; // the next chunk sizes it from the formula again
      this.reservation.shrink(before);
      freed += before - after;
    }
    return freed;
  }

  /** Releases the memory of a buffer the writer no longer references; returns the bytes. */
  private releaseDetached(buffer: PartitionBuffer | undefined): number {
    let bytes = 0;
    for (const column of buffer?.columns ?? []) bytes += column.release();
    this.reservation.shrink(bytes);
    return bytes;
  }

  /**
   * A spill run's messages for rows written straight from their buffers (no copy): the
   * dictionary batches they need, then `merged`'s parked rows (older), then `buffer`'s.
   * Each is compressed when the pool has room for the compressor's output (reserved
   * until the run is on disk) and stored uncompressed when it has not. `written` runs
   * once the run is on disk.
   */
  private spilledRows(merged: PartitionBuffer | undefined, buffer: PartitionBuffer | undefined, dictionaries: Promise<EncodedMessage>[], written: () => void): ExtraMessages {
    let compressionBytes = 0;
    return {
      encode: async () => {
        const messages: EncodedMessage[] = await Promise.all(dictionaries);
        let batches = 0;
        for (const source of [merged, buffer]) {
          if (source === undefined || source.filled === 0) continue; // merged rows are older: first
          const nodes: FieldNodeInfo[] = [];
          const views: Uint8Array[] = [];
          for (const column of source.columns) column.snapshot(source.filled, nodes, views, false);
          const raw = views.reduce((sum, v) => sum + v.byteLength, 0);
          const bound = compressionBound(raw);
          const compress = this.codec !== null && source.filled >= this.options.compressionMinRows && this.reservation.tryGrow(bound);
          if (compress) compressionBytes += bound;
          messages.push(await encodeRecordBatchMessage(source.filled, nodes, views, this.codec, compress ? this.advisor : STORE_RAW));
          batches++;
        }
        return { messages, batches };
      },
      written: () => {
        this.reservation.shrink(compressionBytes);
        compressionBytes = 0;
        written();
      },
    };
  }

  /**
   * Writes partition p's parked rows and then `buffer`'s rows (p's partition buffer, or
   * nothing) straight from their buffers into a new spill run, with every cached payload:
   * the eviction for which the pool could not give the memory of a copy (the payload
   * merger's, or a payload's arena and compression output). A buffer of rows of a
   * megabyte each can be a good part of the limit, and copying it needs as much again.
   * Afterwards `buffer` is empty (its capacity kept) and the merge buffer released.
   * The caller pins p (or, in finish(), nothing else runs on it); the buffers are
   * marked busy meanwhile, so a reclaim asked for by another consumer leaves them alone.
   */
  private async spillPartition(p: number, buffer: PartitionBuffer | undefined): Promise<void> {
    const merged = this.merged[p];
    const sources = [merged, buffer].filter((b): b is PartitionBuffer => b !== undefined && b.filled > 0);
    if (sources.length === 0) return;
    for (const source of sources) source.busy++;
    try {
      // taken without an await before the spill, so they stay in order with p's other payloads
      const dictionaries = this.dictionaryMessages(p);
      await this.spillStore(new Map([[p, this.spilledRows(merged, buffer, dictionaries, () => undefined)]]));
    } finally {
      for (const source of sources) source.busy--;
    }
    if (buffer !== undefined) {
      for (const column of buffer.columns) column.clear();
      buffer.filled = 0;
    }
    this.release(p, false, true);
  }

  private async assertUsable(action: string): Promise<void> {
    this.assertOpen(action);
    await this.throwIfFailed();
  }

  /** A failure that came while no call ran (a spill another consumer asked for): the writer aborts and reports it. */
  private async throwIfFailed(): Promise<void> {
    if (this.failure !== null) {
      await this.abort().catch(() => undefined);
      throw this.failure;
    }
  }

  private assertOpen(action: string): void {
    if (this.state !== 'open') {
      throw new ShuffleError('CS_WRITER_CLOSED', `cannot ${action}: the writer is ${this.state === 'finishing' ? 'finishing' : this.state}`);
    }
  }

  private bindSchema(schema: Schema): void {
    const output = checkInputSchema(schema, this.options);
    this.outputColumns = output.inputIndices;
    this.layouts = output.layouts;
    this.binaryBytesSeen = this.outputColumns.map(() => 0);
    this.nestedBytesSeen = this.outputColumns.map(() => 0);
    this.flatRows = this.layouts.every((layout) => childLayouts(layout).length === 0);
    const { memLimit, memLimitFloor, numPartitions } = this.options;
    this.binarySlack = binarySlackBytes(memLimit, memLimitFloor, numPartitions, this.layouts.filter(hasData).length);
    const dictionaries = this.layouts.flatMap((layout) => dictionaryLayouts(layout));
    if (dictionaries.length > 0) {
      this.dictionaries = new DictionaryTracker(dictionaries, this.options.numPartitions, this.reservation, this.codec, this.advisor, this.options.dictionaryUpdates);
    }
    this.partitioner = createPartitioner(this.options.partitioning, schema, this.options.numPartitions, this.options.mapId);
    this.inputSchema = schema;
    this.lastCheckedSchema = schema;
    this.outputSchema = output.schema;
  }

  /**
   * Takes in the dictionaries a batch brings (dictionary-tracker.ts) before any
   * of its rows is split. When one would outgrow its index type, every
   * partition is flushed first, so no payload mixes rows of two epochs.
   */
  private async registerDictionaries(batch: RecordBatch): Promise<void> {
    const tracker = this.dictionaries;
    if (tracker === null) return;
    const found = new Map<number, Vector>();
    this.outputColumns.forEach((i, c) => collectWritableDictionaries(batch.data.children[i]!, this.layouts[c]!, found)); // (indices checked: input-batch.ts)
    for (const [id, dictionary] of found) {
      if ((await tracker.register(id, dictionary)) === 'ok') continue;
      await this.flushAll();
      tracker.restart(id);
      // a new epoch keeps the input's own indices, which fit their type
      if ((await tracker.register(id, dictionary)) !== 'ok') throw new Error(`internal: dictionary ${id} overflows a new epoch`);
    }
  }

  /**
   * Spills the payload store's cached payloads (and `extra` evicted rows),
   * then lets go of the dictionary batches retired before it began: the run
   * took every cached payload that pointed at them. Returns the bytes released.
   */
  private async spillStore(extra?: ReadonlyMap<number, ExtraMessages>): Promise<number> {
    // after the teardown a new spill file would outlive the writer
    if (this.state === 'aborted') throw writerAborted('before a spill');
    const retired = this.dictionaries?.retired ?? 0;
    const merging = this.store.merging; // then nothing is spilled, and the merge still reads them
    const released = await this.store.spill(extra);
    return released + (merging ? 0 : (this.dictionaries?.dropRetired(retired) ?? 0));
  }

  /** Emits every partition's buffered rows (partition and merge buffers), keeping the buffers. */
  private async flushAll(): Promise<void> {
    for (let p = 0; p < this.buffers.length; p++) {
      this.pinned[p] = 1;
      try {
        const buffer = this.buffers[p];
        if (buffer !== undefined && buffer.filled > 0) await this.evict(p, buffer);
        const merged = this.merged[p];
        if (merged !== undefined && merged.filled > 0) await this.emit(p, merged);
      } finally {
        this.pinned[p] = 0;
      }
    }
  }

  /** The dictionary batches partition p's stream needs before its next payload (none without dictionary columns). */
  private dictionaryMessages(p: number): Promise<EncodedMessage>[] {
    return this.dictionaries?.messagesFor(p) ?? [];
  }

  /** Reserves and grows the per-row scratch arrays: partition ids, row ids and key hashes, 4 bytes each. */
  private async reserveScratch(rows: number): Promise<void> {
    if (rows <= this.scratchRows) return;
    const grown = Math.max(rows, this.scratchRows * 2);
    await this.reservation.grow((grown - this.scratchRows) * SCRATCH_BYTES_PER_ROW);
    this.scratchRows = grown;
    const partitionIds = new Uint32Array(grown);
    partitionIds.set(this.partitionIds); // the staged rows' ids
    this.partitionIds = partitionIds;
  }

  /**
   * Stages a batch (input-staging.ts) while batches are small for the
   * partition count, splitting the staged rows once they reach the target;
   * otherwise splits it at once, after any staged rows (they came first).
   * The batch's partition ids are in partitionIds from `staged`.
   */
  private async stageOrSplit(batch: RecordBatch, staged: number): Promise<void> {
    if (this.stagingTarget < 0) await this.decideStaging(batch);
    const staging = this.staging;
    // The target counts rows of the first batch's width. A batch much wider (values of MiBs) is split as it comes,
    // and the staged rows once their bytes pass twice stagingBytes, a net the row target meets first on rows of
    // one width: held to the rows alone, wider ones took a staging buffer past 2 GiB.
    const fewRows = staging !== null && batch.numRows * MIN_STAGED_BATCHES < this.stagingTarget;
    const bytes = fewRows ? batchBufferBytes(batch) : 0; // (only for a batch that may be staged)
    if (staging === null || !fewRows || bytes * MIN_STAGED_BATCHES > this.options.stagingBytes) {
      if (staged > 0) await this.splitStaged();
      await this.splitBatch(batch, staged);
      return;
    }
    await staging.append(batch);
    this.stagedBytes += bytes;
    if (staging.rows >= this.stagingTarget || this.stagedBytes > 2 * this.options.stagingBytes) await this.splitStaged();
  }

  /** Whether to stage, from the first batch: not with dictionary columns (each batch may bring its own dictionaries). */
  private async decideStaging(batch: RecordBatch): Promise<void> {
    const stages = this.dictionaries === null && this.options.stagingBytes > 0;
    this.stagingTarget = stages ? stagingTargetRows(this.options.numPartitions, await this.bytesPerRowOf(batch), batch.numRows, this.options.stagingBytes) : 0;
    if (this.stagingTarget > 0) this.staging = new InputStaging(this.inputSchema!, this.reservation);
  }

  /** Splits the staged rows (their partition ids start partitionIds) and empties the staging. */
  private async splitStaged(): Promise<void> {
    const staging = this.staging!;
    if (staging.rows === 0) return;
    await this.splitBatch(staging.batch(), 0);
    staging.clear();
    this.stagedBytes = 0;
  }

  private releaseScratch(): void {
    this.reservation.shrink(this.scratchRows * SCRATCH_BYTES_PER_ROW + this.identity.byteLength + this.splitScratch.bytes + this.mergeScratch.bytes);
    this.scratchRows = 0;
    this.partitionIds = new Uint32Array(0);
    this.identity = new Uint32Array(0);
    this.splitScratch.clear();
    this.mergeScratch.clear();
  }

  /**
   * Splits the batch in chunks of at most preferredRows x numPartitions rows
   * (fewer for rows too wide for one per partition: buffer-sizing.ts chunkRows):
   * a huge batch would otherwise force every partition buffer to grow to its
   * share of it (Gluten #5534). A chunk that would bring one partition more
   * than maxBatchRows rows (skew) is halved until it does not, so no output
   * batch exceeds maxBatchRows. The batch's partition ids start at partitionIds[firstId].
   */
  private async splitBatch(batch: RecordBatch, firstId: number): Promise<void> {
    const numRows = batch.numRows;
    const { maxBatchRows } = this.options;
    if (this.chunkRows === 0) await this.estimateRows(batch);
    const chunkRows = this.chunkRows;
    for (let start = 0; start < numRows; ) {
      let end = Math.min(numRows, start + chunkRows);
      for (;;) {
        this.rows.build(this.partitionIds.subarray(firstId + start, firstId + end), end - start);
        if (this.rows.maxRowCount <= maxBatchRows) break;
        end = start + Math.max(maxBatchRows, (end - start) >>> 1);
      }
      await this.splitChunk(start === 0 && end === numRows ? batch : batch.slice(start, end));
      this.totalRows += end - start;
      start = end;
    }
  }

  /** Splits rows grouped by `this.rows` (already built for this chunk) into the partition buffers. */
  private async splitChunk(batch: RecordBatch): Promise<void> {
    const numRows = batch.numRows;
    const rows = this.rows;
    const used = rows.usedPartitions.subarray(0, rows.usedCount);
    const plans = await this.plan(batch, { rowIds: rows.rowOffset2RowId, starts: rows.partition2RowOffset }, this.splitScratch);
    // with few partitions the gathers read the source in long ascending runs, which the prefetcher follows
    if (rows.usedCount > WARM_MIN_PARTITIONS) for (const plan of plans) this.warmth ^= warmSource(plan.src);
    this.preferredRows = this.preferredCapacity(plans, numRows);
    for (const p of used) this.pinned[p] = 1;
    try {
      await this.prepareBuffers(this.preferredRows, plans);

      // from here on nothing awaits: no reclaim can run while the buffers are written
      for (let c = 0; c < plans.length; c++) {
        const plan = plans[c]!;
        for (const p of used) {
          const buffer = this.buffers[p]!;
          splitPlanned(plan, p, buffer.columns[c]!, buffer.filled, this.toppedUp[p]);
        }
      }
      for (const p of used) {
        const count = rows.rowCount(p);
        this.buffers[p]!.filled += count - this.toppedUp[p]!;
        this.partitionRowCounts[p]! += count;
      }
    } finally {
      for (const p of used) this.pinned[p] = 0;
    }
  }

  /** A dictionary column's index remap (dictionary-tracker.ts), by dictionary id; a field, so no closure is made per chunk. */
  private readonly remapOf = (id: number): Int32Array | null => this.dictionaries?.remap(id) ?? null;

  /** Every output column's split plan for a selection of the batch's rows (nested levels' selections in `scratch`). */
  private plan(batch: RecordBatch, sel: RowSelection, scratch: ScratchSelections): Promise<SplitPlan[]> {
    return withScratchMemory(scratch, (bytes) => this.reservation.grow(bytes), () => {
      const slots = { next: 0 };
      return this.outputColumns.map((i, c) => planSplit(prepareSourceColumn(batch.data.children[i]!, this.layouts[c]!), sel, scratch, this.remapOf, slots));
    });
  }

  /**
   * Rows per partition buffer for this chunk (buffer-sizing.ts), updating the
   * running averages of binary and nested bytes.
   */
  private preferredCapacity(plans: readonly SplitPlan[], numRows: number): number {
    let bytesPerRow = 0;
    const rowsSeen = this.totalRows + numRows;
    this.rowsAveraged = rowsSeen;
    plans.forEach(({ src }, c) => {
      bytesPerRow += fixedBytesPerRow(src.layout);
      if (hasData(src.layout)) {
        this.binaryBytesSeen[c]! += binaryBytes(src, numRows);
        bytesPerRow += this.binaryBytesSeen[c]! / rowsSeen;
      } else if (src.children.length > 0) {
        this.nestedBytesSeen[c]! += nestedBytes(plans[c]!);
        bytesPerRow += this.nestedBytesSeen[c]! / rowsSeen;
      }
    });
    return this.rowsFor(bytesPerRow);
  }

  /** The same estimate from one batch alone, before anything has been split. */
  private async estimateRows(batch: RecordBatch): Promise<number> {
    return this.rowsFor(await this.bytesPerRowOf(batch));
  }

  /**
   * Bytes a row of this batch takes in a partition buffer (fixed widths, binary and nested bytes), on average.
   * Nested bytes come from at most ESTIMATE_SAMPLE_ROWS rows spread over the batch: planning every row took
   * selection scratch for each nested element of the whole batch (12 MB for 30,000 rows of 100-element lists),
   * which the chunked split never needs.
   */
  private async bytesPerRowOf(batch: RecordBatch): Promise<number> {
    const rows = batch.numRows;
    const sample = Math.min(rows, ESTIMATE_SAMPLE_ROWS);
    if (sample === rows && this.identity.length < rows) await this.reserveIdentity(rows);
    const rowIds = sample === rows ? this.identity : Uint32Array.from({ length: sample }, (_, k) => Math.floor((k * rows) / sample));
    const plans = await this.plan(batch, onePartition(rowIds, 0, sample), this.mergeScratch);
    let bytesPerRow = 0;
    for (const plan of plans) {
      bytesPerRow += fixedBytesPerRow(plan.src.layout);
      if (hasData(plan.src.layout)) bytesPerRow += binaryBytes(plan.src, rows) / rows;
      else bytesPerRow += nestedBytes(plan) / sample;
    }
    return bytesPerRow;
  }

  /** Rows per partition buffer for rows of `bytesPerRow`; also sets the rows per chunk. */
  private rowsFor(bytesPerRow: number): number {
    const input = {
      memLimit: this.options.memLimit,
      memLimitFloor: this.options.memLimitFloor,
      bytesPerRow: Math.ceil(bytesPerRow),
      numPartitions: this.options.numPartitions,
      maxBatchRows: this.options.maxBatchRows,
    };
    this.chunkRows = chunkRows(input);
    return partitionBufferRows(input);
  }

  /**
   * Gives every partition of the chunk a buffer with room for its incoming
   * rows (capacity, validity, binary data, nested children), evicting or
   * resizing as needed, so the split that follows never allocates. New memory
   * is reserved before it is allocated, for the moment old and new buffers
   * both exist.
   */
  private async prepareBuffers(preferred: number, plans: readonly SplitPlan[]): Promise<void> {
    const rows = this.rows;
    for (let u = 0; u < rows.usedCount; u++) {
      const p = rows.usedPartitions[u]!;
      const incoming = rows.rowCount(p);
      let buffer = this.buffers[p];
      if (buffer === undefined) {
        buffer = this.newBuffer();
        this.buffers[p] = buffer;
      }
      const threshold = this.options.resizeThreshold;
      const target = targetCapacity(buffer.capacity, preferred, incoming, threshold, buffer.sizedFor);
      if (!keepsSize(buffer.capacity, preferred, threshold, buffer.sizedFor)) buffer.sizedFor = preferred;
      this.toppedUp[p] = 0;
      if (buffer.filled + incoming > target && buffer.filled > 0) {
        if (target === buffer.capacity) this.topUp(p, buffer, plans);
        await this.evict(p, buffer);
      }
      if (target === buffer.capacity && fitsAsItIs(buffer, plans, p, this.toppedUp[p]!)) continue;

      let growth = this.planGrowth(buffer, plans, p, target);
      if (growth.overflows && buffer.filled > 0) {
        // the incoming values would take a binary data buffer past 2 GiB: the rows held go first
        await this.evict(p, buffer);
        growth = this.planGrowth(buffer, plans, p, target);
      }
      if (growth.overflows) {
        throw new ShuffleError('CS_INVALID_ARGUMENT', `a batch brings more than 2 GiB of binary data to partition ${p} in one column; write it in smaller batches`, { partition: p });
      }
      if (growth.empty) continue;
      await this.reservation.grow(growth.bytesAfter);
      growth.apply();
      buffer.capacity = target;
      this.reservation.shrink(growth.bytesBefore);
    }
  }

  /** What partition p's buffer must get to take its rows of `plans` at a capacity of `target` rows. */
  private planGrowth(buffer: PartitionBuffer, plans: readonly SplitPlan[], p: number, target: number): BufferGrowth {
    const growth = new BufferGrowth();
    buffer.columns.forEach((column, c) => growth.plan(plans[c]!, p, column, buffer.filled, target, (capacity) => this.binaryBytesFor(c, capacity)));
    return growth;
  }

  /**
   * Fills a buffer that cannot take all of partition p's incoming rows with
   * the first of them, so the flush that follows carries a full buffer; the
   * rest go into the emptied buffer by the split (`toppedUp[p]` rows are
   * skipped there). Gluten flushes the buffer as it is instead, and the rows
   * per payload then depend on how the batches fall: under a tight limit at
   * P = 200 a buffer holds 78 rows, batches bring about 41 rows per
   * partition, 41 + 41 > 78, so every payload had 41 rows, not 78:
   *
   * ```text
   * Gluten:  filled 41, incoming 41 -> flush 41 rows;    filled 41
   * top-up:  filled 41, incoming 41 -> take 37, flush 78; filled 4
   * ```
   * While the merger runs, only for small buffers (at most mergeMinRows
   * rows): a larger buffer's payload is large already, and full ones all land
   * above the merge threshold. Wide rows at P = 200 get 1035-row buffers;
   * flushed as they are, some of their payloads hold 1024 rows or fewer and
   * are merged; topped up, none is, and the output grew by 3 %.
   *
   * Only when nothing must grow for the first rows (validity bitmap, binary
   * data room) and no column has nested levels; otherwise the buffer is
   * flushed as it is. Synchronous: p is pinned and nothing interleaves.
   */
  private topUp(p: number, buffer: PartitionBuffer, plans: readonly SplitPlan[]): void {
    const merger = this.merging && this.mergeMinRows > 0;
    if (!this.flatRows || (merger && buffer.capacity > this.mergeMinRows)) return;
    const head = buffer.capacity - buffer.filled;
    const first = plans[0];
    if (head <= 0 || first === undefined) return;
    const start = first.sel.starts[p]!;
    if (!fitsAsItIs(buffer, plans, p, 0, start + head)) return;
    for (let c = 0; c < plans.length; c++) splitRange(plans[c]!, start, start + head, buffer.columns[c]!, buffer.filled);
    buffer.filled += head;
    this.toppedUp[p] = head;
  }

  private newBuffer(): PartitionBuffer {
    return { capacity: 0, sizedFor: 0, filled: 0, columns: this.layouts.map((layout) => new ColumnBuffer(layout, this.reservation.recycler)), busy: 0 };
  }

  /** Initial binary data capacity of a top-level binary column: the average value size times rows, plus the slack (buffer-sizing.ts). */
  private binaryBytesFor(column: number, rows: number): number {
    const average = this.binaryBytesSeen[column]! / Math.max(1, this.rowsAveraged);
    return Math.ceil(average) * rows + this.binarySlack;
  }

  /**
   * Turns partition p's filled rows into a payload. Small evictions (at most
   * mergeMinRows, a quarter of maxBatchRows) are parked uncompressed in the
   * partition's merge buffer until it would exceed maxBatchRows (Gluten's
   * PayloadMerger: few large batches compress better and read faster than many
   * small ones); a larger eviction first emits the parked rows, which are older.
   * Once a reclaim has drained merge buffers, parking stops (`merging`): under
   * a limit that tight, narrow P = 200 at 1/32 of the input, merging made the
   * write 25 % slower (copies, and small merge buffers freed and re-allocated
   * at every reclaim) for batches hardly larger.
   * The caller pins p.
   */
  private async evict(p: number, buffer: PartitionBuffer): Promise<void> {
    this.mergeBusy = p;
    try {
      await this.orSpill(p, buffer, async () => {
        const merged = this.merged[p];
        if (this.merging && buffer.filled <= this.mergeMinRows) {
          // parked rows go out first when this eviction's rows or binary bytes (values of MiBs) would not fit with them
          if (merged !== undefined && (merged.filled + buffer.filled > this.options.maxBatchRows || !this.mergeFits(merged, buffer))) await this.emit(p, merged);
          await this.appendToMerged(p, buffer);
          const full = this.merged[p]!;
          if (full.filled >= this.options.maxBatchRows) await this.emit(p, full);
          return;
        }
        if (merged !== undefined && merged.filled > 0) await this.emit(p, merged);
        await this.emit(p, buffer);
      });
    } finally {
      this.mergeBusy = -1;
    }
  }

  /**
   * Runs `evict`, an eviction of partition p's rows through copies (the payload
   * merger, payloads); when the pool cannot give the memory of a copy even after
   * every reclaim, writes the rows left in p's merge buffer and `buffer` straight
   * into a spill run instead (spillPartition). Every step of `evict` fails before it
   * changes anything when its memory is refused, so the rows are where they were.
   */
  private async orSpill(p: number, buffer: PartitionBuffer | undefined, evict: () => Promise<void>): Promise<void> {
    try {
      await evict();
    } catch (error) {
      if (!(error instanceof MemoryLimitError) || this.failure !== null || this.state === 'aborted') throw error;
      await this.spillPartition(p, buffer);
    }
  }

  /**
   * Makes `buffer`'s filled rows a payload: copied now (memory reserved first,
   * with room for the compression output), compressed in the background,
   * cached in the payload store after the dictionary batches it needs.
   */
  private async emit(p: number, buffer: PartitionBuffer): Promise<void> {
    // views first (nothing is allocated), so the arena's bound counts the buffers a nested column has
    const nodes: FieldNodeInfo[] = [];
    const bodyBuffers: Uint8Array[] = [];
    for (const column of buffer.columns) column.snapshot(buffer.filled, nodes, bodyBuffers, false);
    let raw = 0;
    for (const view of bodyBuffers) raw += view.byteLength;
    // tiny batches barely compress and cost a compression call per buffer (Gluten's compression threshold)
    const storedRaw = this.codec === null || buffer.filled < this.options.compressionMinRows;
    // a small uncompressed payload goes into the store's slabs (reserved with them) when they have room
    const rawBytes = storedRaw ? rawPayloadBytes(nodes, bodyBuffers, this.codec) : 0;
    const range = storedRaw ? this.store.allocate(rawBytes) : null;
    // otherwise an arena of its own from the recycler (with room for prefixes and padding), plus the compressor's output
    const arena = this.arenaLength(storedRaw ? rawBytes : payloadArenaBound(raw, bodyBuffers.length));
    const reserved = range !== null ? 0 : arena + (storedRaw ? 0 : compressionBound(raw));
    if (!this.reservation.tryGrow(reserved)) {
      buffer.busy++;
      try {
        await this.reservation.grow(reserved); // a reclaim meanwhile leaves this busy buffer (and so the views) alone
      } finally {
        buffer.busy--;
      }
    }
    // copies the views into the payload's arena before it returns: the buffer may be refilled at once
    const message = storedRaw
      ? encodeRawPayload(buffer.filled, nodes, bodyBuffers, this.codec, range?.bytes ?? this.allocateArena)
      : encodeRecordBatchPayload(buffer.filled, nodes, bodyBuffers, this.codec, this.advisor, this.allocateCompressedArena);
    for (const column of buffer.columns) column.clear();
    buffer.filled = 0;
    for (const dictionary of this.dictionaryMessages(p)) this.store.add(p, dictionary, 0, false); // the tracker holds their memory
    this.store.add(p, message, reserved, true, range);
    if (!(message instanceof Promise)) return;
    this.inFlightBytes += raw;
    const done: Promise<void> = message.then(
      () => undefined,
      () => undefined, // a failed encoding surfaces where the message is awaited (spill, merge)
    ).finally(() => {
      this.inFlight.delete(done);
      this.inFlightBytes -= raw;
    });
    this.inFlight.add(done);
  }

  /** Reserves and fills the identity row ids for at least `rows` rows (growing by doubling, up to maxBatchRows unless `rows` is more). */
  private async reserveIdentity(rows: number): Promise<void> {
    const length = Math.max(rows, Math.min(this.options.maxBatchRows, Math.max(MIN_IDENTITY_ROWS, 2 * this.identity.length)));
    await this.reservation.grow(length * 4 - this.identity.byteLength);
    this.identity = Uint32Array.from({ length }, (_, i) => i);
  }

  /** Appends `buffer`'s filled rows to partition p's merge buffer (growing it, memory reserved first) and clears `buffer`. */
  private async appendToMerged(p: number, buffer: PartitionBuffer): Promise<void> {
    const rows = buffer.filled;
    let merged = this.merged[p];
    if (merged === undefined) {
      merged = this.newBuffer();
      this.merged[p] = merged;
    }
    if (this.identity.length < rows) await this.reserveIdentity(rows);
    const sources = buffer.columns.map((column) => column.asSource(rows));
    const needed = merged.filled + rows;
    // room for four evictions of this size at once: a merge buffer filled by evictions of ~1000 rows
    // (wide rows at P = 200) was re-allocated three times on its way to maxBatchRows, for every column
    const capacity = needed > merged.capacity ? Math.min(this.options.maxBatchRows, Math.max(needed, merged.capacity * 2, rows * 4)) : merged.capacity;
    await appendAccounted(sources, merged.columns, rows, merged.filled, capacity, this.identity, this.mergeScratch, this.reservation);
    merged.capacity = capacity;
    merged.filled += rows;
    for (const column of buffer.columns) column.clear();
    buffer.filled = 0;
  }

  /** Whether the merge buffer can take `buffer`'s rows without a binary data buffer over 2 GiB. */
  private mergeFits(merged: PartitionBuffer, buffer: PartitionBuffer): boolean {
    return merged.columns.every((column, c) => binaryDataFits(column, buffer.columns[c]!));
  }

  /** Frees partition p's partition buffer and/or merge buffer; returns the bytes released. */
  private release(p: number, buffer = true, merged = true): number {
    let bytes = 0;
    if (buffer) {
      for (const column of this.buffers[p]?.columns ?? []) bytes += column.release();
      this.buffers[p] = undefined;
    }
    if (merged) {
      for (const column of this.merged[p]?.columns ?? []) bytes += column.release();
      this.merged[p] = undefined;
    }
    this.reservation.shrink(bytes);
    return bytes;
  }

}

/**
 * What the writer keeps per partition from its creation on, reserved in its
 * pool then (buffer and merge-buffer slots, row and batch counts,
 * PartitionRows' arrays): 16 bytes of heap and 33 of typed arrays measured at
 * 1,000,000 partitions. Dictionaries reserve their own (dictionary-tracker.ts).
 */
const PARTITION_STATE_BYTES = 64;
/** Most rows whose nested bytes are planned to estimate a batch's bytes per row. */
const ESTIMATE_SAMPLE_ROWS = 4096;
/** Per-row scratch: partition id, row id and key hash, 4 bytes each. */
const SCRATCH_BYTES_PER_ROW = 12;
/** The identity row ids start at this many and double (they served maxBatchRows at once, 8 GiB at 2^31 - 1 rows). */
const MIN_IDENTITY_ROWS = 4096;

function bufferBytes(buffer: PartitionBuffer | undefined): number {
  let bytes = 0;
  for (const column of buffer?.columns ?? []) bytes += column.allocatedBytes;
  return bytes;
}

/**
 * Whether partition p's rows of flat `plans` (after its first `skip`, up to
 * row offset `end` if given) fit into `buffer` as it is (the usual case once
 * a buffer has its size): no validity bitmap to add, room for the binary
 * bytes. The same test BufferGrowth.plan makes, without its objects: it runs
 * for every partition of every chunk, thousands of times per batch at high
 * partition counts. Nested columns take the full plan.
 */
function fitsAsItIs(buffer: PartitionBuffer, plans: readonly SplitPlan[], p: number, skip = 0, end?: number): boolean {
  for (let c = 0; c < plans.length; c++) {
    const plan = plans[c]!;
    const column = buffer.columns[c]!;
    if (plan.children.length > 0) return false;
    if (column.validity === null && plan.src.validity !== null && hasValidity(column.layout)) return false;
    if (hasData(column.layout)) {
      const { rowIds, starts } = plan.sel;
      if (column.dataLength + dataBytesOf(plan.src, rowIds, starts[p]! + skip, end ?? starts[p + 1]!) > column.data.byteLength) return false;
    }
  }
  return true;
}

/** Value bytes of a binary column's first `rows` rows (a view column's: of its long values). */
function binaryBytes(src: SourceColumn, rows: number): number {
  if (src.layout.kind === 'view') return viewBytes(src, rows);
  return src.offsets![rows * src.offsetStride]! - src.offsets![0]!;
}


