import { Schema, type RecordBatch } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { codecByName, type Codec, type CodecName } from '../format/codec.js';
import { CompressionAdvisor } from '../format/compression-advisor.js';
import { encodeRecordBatchMessage, encodeSchemaMessage, END_OF_STREAM, type EncodedMessage, type FieldNodeInfo } from '../format/ipc-message.js';
import { DataFileWriter, type OutputPaths } from '../format/output-files.js';
import { partitionBufferRows, targetCapacity } from './buffer-sizing.js';
import { ColumnBuffer } from './column-buffer.js';
import { columnLayoutOf, fixedBytesPerRow, type ColumnLayout } from './column-layout.js';
import { createPartitioner, columnIndex, type Partitioner, type Partitioning } from './partitioner.js';
import { PartitionRows } from './partition-rows.js';
import { sameSchema } from './same-schema.js';
import { prepareSourceColumn, type SourceColumn } from './source-column.js';
import { splitColumn } from './split-column.js';

/** Gluten's kMinMemLimit: buffers are sized as if at least this much memory were available. */
export const DEFAULT_MEM_LIMIT_FLOOR = 128 * 1024 * 1024;
/** spark.gluten.sql.columnar.maxBatchSize: the most rows one partition buffer (one IPC batch) holds. */
export const DEFAULT_MAX_BATCH_ROWS = 4096;
/** spark.gluten.sql.columnar.shuffle.realloc.threshold */
export const DEFAULT_RESIZE_THRESHOLD = 0.25;
/** Bytes of copied-but-not-yet-compressed payloads allowed in flight before write() waits. */
const MAX_IN_FLIGHT_BYTES = 32 * 1024 * 1024;

export interface ShuffleWriterOptions {
  /** Number of output partitions, an integer >= 1. */
  numPartitions: number;
  /** How rows are assigned to partitions. */
  partitioning: Partitioning;
  /** Output files are `<outputPrefix>.data`, `.index` and `.checksum.CRC32C`; the directory must exist. */
  outputPrefix: string;
  /** Body compression of every record batch (default lz4, i.e. Arrow LZ4_FRAME). */
  codec?: CodecName;
  /** The map task's id: seeds round-robin's start as Spark does (default 0). */
  mapId?: number;
  /** Input schema; by default taken from the first batch. */
  schema?: Schema;
  /** Memory available to this writer for sizing partition buffers (default: the floor). */
  memLimit?: number;
  /** Lower bound of memLimit in the sizing formula (default 128 MiB, Gluten's kMinMemLimit). */
  memLimitFloor?: number;
  /** Most rows per partition buffer and per output batch (default 4096). */
  maxBatchRows?: number;
  /** Resize hysteresis (default 0.25). */
  resizeThreshold?: number;
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
}

/** One partition's pre-allocated buffers: every output column, same capacity in rows. */
interface PartitionBuffer {
  capacity: number;
  filled: number;
  columns: ColumnBuffer[];
}

type WriterState = 'open' | 'finishing' | 'finished' | 'aborted';

/**
 * The columnar hash shuffle writer (Gluten's VeloxHashShuffleWriter): for each
 * input batch, compute partition ids, group rows by partition (counting sort),
 * and split every column's buffers into per-partition pre-allocated buffers.
 * A partition buffer that would overflow becomes one compressed Arrow IPC
 * record-batch payload; `finish()` writes all payloads partition by partition
 * into one data file with an index and checksums.
 *
 * Protocol: `await ShuffleWriter.create(options)`, any number of
 * `await write(batch)` (one at a time), then `await finish()` once, or
 * `await abort()` at any point. After either, the writer refuses every call.
 */
export class ShuffleWriter {
  private state: WriterState = 'open';
  private readonly options: Required<Omit<ShuffleWriterOptions, 'schema' | 'codec'>>;
  private readonly codec: Codec | null;
  private readonly advisor = new CompressionAdvisor();
  private readonly output: DataFileWriter;
  private inputSchema: Schema | null = null;
  private lastCheckedSchema: Schema | null = null;
  private outputSchema: Schema | null = null;
  private outputColumns: number[] = [];
  private layouts: ColumnLayout[] = [];
  private partitioner: Partitioner | null = null;
  private readonly rows: PartitionRows;
  private partitionIds = new Uint32Array(0);
  private readonly buffers: (PartitionBuffer | undefined)[];
  private readonly payloads: Promise<EncodedMessage>[][];
  private readonly partitionRowCounts: number[];
  private inFlight: { done: Promise<unknown>; bytes: number }[] = [];
  private inFlightBytes = 0;
  private totalRows = 0;
  /** rows per partition buffer computed for the last chunk (Gluten's preAllocRowCnt) */
  private preferredRows = 0;
  private totalBatches = 0;
  /** per output column: binary bytes seen so far, for the running average in bytesPerRow */
  private binaryBytesSeen: number[] = [];

  private constructor(options: ShuffleWriterOptions, output: DataFileWriter) {
    this.options = {
      numPartitions: options.numPartitions,
      partitioning: options.partitioning,
      outputPrefix: options.outputPrefix,
      mapId: options.mapId ?? 0,
      memLimit: options.memLimit ?? 0,
      memLimitFloor: options.memLimitFloor ?? DEFAULT_MEM_LIMIT_FLOOR,
      maxBatchRows: options.maxBatchRows ?? DEFAULT_MAX_BATCH_ROWS,
      resizeThreshold: options.resizeThreshold ?? DEFAULT_RESIZE_THRESHOLD,
    };
    this.codec = codecByName(options.codec ?? 'lz4');
    this.output = output;
    const n = options.numPartitions;
    this.rows = new PartitionRows(n);
    this.buffers = new Array<PartitionBuffer | undefined>(n);
    this.payloads = Array.from({ length: n }, () => []);
    this.partitionRowCounts = new Array<number>(n).fill(0);
  }

  /** Validates the options, checks the output directory and opens the temporary data file. */
  static async create(options: ShuffleWriterOptions): Promise<ShuffleWriter> {
    validateOptions(options);
    codecByName(options.codec ?? 'lz4');
    if (options.schema) bindSchemaChecks(options.schema, options);
    const output = await DataFileWriter.create(options.outputPrefix);
    const writer = new ShuffleWriter(options, output);
    if (options.schema) writer.bindSchema(options.schema);
    return writer;
  }

  /** The schema of the output partitions (the input's, less a partition-id column). */
  get schema(): Schema | null {
    return this.outputSchema;
  }

  /** Splits one batch into the partition buffers. Batches must share the first batch's schema. */
  async write(batch: RecordBatch): Promise<void> {
    this.assertOpen('write');
    try {
      if (this.inputSchema === null) this.bindSchema(batch.schema);
      else if (batch.schema !== this.lastCheckedSchema) {
        // comparing schemas is slow; producers usually hand over the same Schema object every time
        if (!sameSchema(this.inputSchema, batch.schema)) {
          throw new ShuffleError('CS_SCHEMA_MISMATCH', `batch ${this.totalBatches} has schema ${describe(batch.schema)}, expected ${describe(this.inputSchema)}`);
        }
        this.lastCheckedSchema = batch.schema;
      }
      if (batch.numRows > 0) this.splitBatch(batch);
      this.totalBatches++;
      while (this.inFlightBytes > MAX_IN_FLIGHT_BYTES) await this.settleOldest();
    } catch (error) {
      if (error instanceof ShuffleError && error.code !== 'CS_IO') throw error; // the batch was refused before any state changed
      await this.abort();
      throw error;
    }
  }

  /** Flushes every partition buffer, writes the data, index and checksum files and commits them. */
  async finish(): Promise<ShuffleWriteResult> {
    this.assertOpen('finish');
    this.state = 'finishing';
    try {
      if (this.outputSchema === null) throw new ShuffleError('CS_INVALID_ARGUMENT', 'finish() before any batch: pass `schema` to create() to write an empty output');
      for (let p = 0; p < this.buffers.length; p++) {
        const buffer = this.buffers[p];
        if (buffer !== undefined && buffer.filled > 0) this.evict(p, buffer);
      }
      const schemaMessage = encodeSchemaMessage(this.outputSchema);
      const partitionBatches: number[] = [];
      for (let p = 0; p < this.payloads.length; p++) {
        this.output.beginPartition(p);
        const payloads = this.payloads[p]!;
        if (payloads.length > 0) {
          await this.output.append(schemaMessage);
          for (const payload of payloads) for (const chunk of (await payload).chunks) await this.output.append(chunk);
          await this.output.append(END_OF_STREAM);
        }
        partitionBatches.push(payloads.length);
        this.payloads[p] = [];
        this.output.endPartition();
      }
      const { partitionLengths, checksums, bytesWritten } = await this.output.commit();
      this.state = 'finished';
      return {
        paths: this.output.paths,
        numPartitions: this.options.numPartitions,
        rows: this.totalRows,
        batches: this.totalBatches,
        bytesWritten,
        partitionLengths,
        partitionRows: [...this.partitionRowCounts],
        partitionBatches,
        checksums,
      };
    } catch (error) {
      await this.abort();
      throw error;
    }
  }

  /** Drops everything and removes temporary files. Safe to call in any state. */
  async abort(): Promise<void> {
    if (this.state === 'finished' || this.state === 'aborted') return;
    this.state = 'aborted';
    this.buffers.fill(undefined);
    const pending = this.payloads.flat();
    this.payloads.forEach((list) => (list.length = 0));
    await Promise.allSettled(pending);
    await this.output.abort();
  }

  private assertOpen(action: string): void {
    if (this.state !== 'open') {
      throw new ShuffleError('CS_WRITER_CLOSED', `cannot ${action}: the writer is ${this.state === 'finishing' ? 'finishing' : this.state}`);
    }
  }

  private bindSchema(schema: Schema): void {
    bindSchemaChecks(schema, this.options);
    const pidColumn = this.options.partitioning.kind === 'partition-id' ? columnIndex(schema, this.options.partitioning.column) : -1;
    this.outputColumns = schema.fields.map((_, i) => i).filter((i) => i !== pidColumn);
    this.layouts = this.outputColumns.map((i) => columnLayoutOf(schema.fields[i]!));
    this.binaryBytesSeen = this.outputColumns.map(() => 0);
    this.partitioner = createPartitioner(this.options.partitioning, schema, this.options.numPartitions, this.options.mapId);
    this.inputSchema = schema;
    this.lastCheckedSchema = schema;
    this.outputSchema = pidColumn < 0 ? schema : new Schema(this.outputColumns.map((i) => schema.fields[i]!), schema.metadata);
  }

  /**
   * Computes every row's partition first (so a bad partition id refuses the
   * whole batch before anything changes), then splits the batch in chunks of at
   * most preferredRows x numPartitions rows: a huge batch would otherwise force
   * every partition buffer to grow to its share of it (Gluten #5534). A chunk
   * that would bring one partition more than maxBatchRows rows (skew) is halved
   * until it does not, so no output batch exceeds maxBatchRows.
   */
  private splitBatch(batch: RecordBatch): void {
    const numRows = batch.numRows;
    if (this.partitionIds.length < numRows) this.partitionIds = new Uint32Array(Math.max(numRows, this.partitionIds.length * 2));
    this.partitioner!.computePartitionIds(batch, this.partitionIds, this.totalRows);
    const { maxBatchRows, numPartitions } = this.options;
    const chunkRows = Math.max(1, this.preferredRows || this.estimateRows(batch)) * numPartitions;
    for (let start = 0; start < numRows; ) {
      let end = Math.min(numRows, start + chunkRows);
      for (;;) {
        this.rows.build(this.partitionIds.subarray(start, end), end - start);
        if (this.rows.maxRowCount <= maxBatchRows) break;
        end = start + Math.max(maxBatchRows, (end - start) >>> 1);
      }
      this.splitChunk(start === 0 && end === numRows ? batch : batch.slice(start, end));
      this.totalRows += end - start;
      start = end;
    }
  }

  /** Splits rows grouped by `this.rows` (already built for this chunk) into the partition buffers. */
  private splitChunk(batch: RecordBatch): void {
    const numRows = batch.numRows;
    const rows = this.rows;

    const sources = this.outputColumns.map((i, c) => prepareSourceColumn(batch.data.children[i]!, this.layouts[c]!));
    this.preferredRows = this.preferredCapacity(sources, numRows);
    this.prepareBuffers(this.preferredRows, sources);

    const rowIds = rows.rowOffset2RowId;
    const offsets = rows.partition2RowOffset;
    const used = rows.usedPartitions;
    for (let c = 0; c < sources.length; c++) {
      const src = sources[c]!;
      for (let u = 0; u < rows.usedCount; u++) {
        const p = used[u]!;
        const buffer = this.buffers[p]!;
        splitColumn(src, rowIds, offsets[p]!, offsets[p + 1]!, buffer.columns[c]!, buffer.filled, buffer.capacity);
      }
    }
    for (let u = 0; u < rows.usedCount; u++) {
      const p = used[u]!;
      const count = rows.rowCount(p);
      this.buffers[p]!.filled += count;
      this.partitionRowCounts[p]! += count;
    }
  }

  /** Rows per partition buffer for this chunk (buffer-sizing.ts), updating the running average of binary bytes. */
  private preferredCapacity(sources: SourceColumn[], numRows: number): number {
    let bytesPerRow = 0;
    const rowsSeen = this.totalRows + numRows;
    sources.forEach((src, c) => {
      bytesPerRow += fixedBytesPerRow(src.layout);
      if (src.layout.kind === 'binary') {
        this.binaryBytesSeen[c]! += binaryBytes(src, numRows);
        bytesPerRow += this.binaryBytesSeen[c]! / rowsSeen;
      }
    });
    return this.rowsFor(bytesPerRow);
  }

  /** The same estimate from one batch alone, before anything has been split. */
  private estimateRows(batch: RecordBatch): number {
    let bytesPerRow = 0;
    this.outputColumns.forEach((i, c) => {
      const src = prepareSourceColumn(batch.data.children[i]!, this.layouts[c]!);
      bytesPerRow += fixedBytesPerRow(src.layout);
      if (src.layout.kind === 'binary') bytesPerRow += binaryBytes(src, batch.numRows) / batch.numRows;
    });
    return this.rowsFor(bytesPerRow);
  }

  private rowsFor(bytesPerRow: number): number {
    return partitionBufferRows({
      memLimit: this.options.memLimit,
      memLimitFloor: this.options.memLimitFloor,
      bytesPerRow: Math.ceil(bytesPerRow),
      numPartitions: this.options.numPartitions,
      maxBatchRows: this.options.maxBatchRows,
    });
  }

  /** Gives every used partition a buffer with room for its incoming rows, evicting or resizing as needed. */
  private prepareBuffers(preferred: number, sources: SourceColumn[]): void {
    const rows = this.rows;
    for (let u = 0; u < rows.usedCount; u++) {
      const p = rows.usedPartitions[u]!;
      const incoming = rows.rowCount(p);
      let buffer = this.buffers[p];
      if (buffer === undefined) {
        buffer = { capacity: 0, filled: 0, columns: this.layouts.map((layout) => new ColumnBuffer(layout)) };
        this.buffers[p] = buffer;
      }
      const target = targetCapacity(buffer.capacity, preferred, incoming, this.options.resizeThreshold);
      if (buffer.filled + incoming > target) this.evict(p, buffer);
      if (target !== buffer.capacity) {
        buffer.columns.forEach((column, c) => column.resize(target, buffer!.filled, this.binaryBytesFor(c, target, sources[c]!)));
        buffer.capacity = target;
      }
    }
  }

  /** Initial binary data capacity: the average value size times rows, plus 1 KiB (Gluten). */
  private binaryBytesFor(column: number, rows: number, src: SourceColumn): number {
    if (src.layout.kind !== 'binary') return 0;
    const average = this.binaryBytesSeen[column]! / Math.max(1, this.totalRows + src.length);
    return Math.ceil(average) * rows + 1024;
  }

  /** Turns partition p's filled rows into a payload (copied now, compressed in the background). */
  private evict(p: number, buffer: PartitionBuffer): void {
    const nodes: FieldNodeInfo[] = [];
    const bodyBuffers: Uint8Array[] = [];
    for (const column of buffer.columns) {
      column.snapshot(buffer.filled, nodes, bodyBuffers);
      column.clear();
    }
    const payload = encodeRecordBatchMessage(buffer.filled, nodes, bodyBuffers, this.codec, this.advisor);
    buffer.filled = 0;
    this.payloads[p]!.push(payload);
    let bytes = 0;
    for (const b of bodyBuffers) bytes += b.byteLength;
    this.inFlight.push({ done: payload, bytes });
    this.inFlightBytes += bytes;
  }

  private async settleOldest(): Promise<void> {
    const oldest = this.inFlight.shift();
    if (oldest === undefined) return;
    await oldest.done;
    this.inFlightBytes -= oldest.bytes;
  }
}

/** Value bytes of a binary column's first `rows` rows. */
function binaryBytes(src: SourceColumn, rows: number): number {
  return src.offsets![rows * src.offsetStride]! - src.offsets![0]!;
}

function validateOptions(options: ShuffleWriterOptions): void {
  const n = options.numPartitions;
  if (!Number.isInteger(n) || n < 1 || n > 0x7fffffff) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `numPartitions must be an integer >= 1, got ${String(n)}`);
  }
  const positive = (name: string, value: number | undefined, min: number) => {
    if (value !== undefined && !(Number.isFinite(value) && value >= min)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `${name} must be a number >= ${min}, got ${String(value)}`);
    }
  };
  positive('memLimit', options.memLimit, 0);
  positive('memLimitFloor', options.memLimitFloor, 0);
  positive('maxBatchRows', options.maxBatchRows, 1);
  positive('resizeThreshold', options.resizeThreshold, 0);
  if (options.mapId !== undefined && !Number.isSafeInteger(options.mapId)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `mapId must be an integer, got ${String(options.mapId)}`);
  }
  if (typeof options.outputPrefix !== 'string' || options.outputPrefix.length === 0) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', 'outputPrefix must be a non-empty path');
  }
}

/** Everything about a schema that can be refused before any data is touched. */
function bindSchemaChecks(schema: Schema, options: Pick<ShuffleWriterOptions, 'partitioning' | 'numPartitions'>): void {
  const pidColumn = options.partitioning.kind === 'partition-id' ? columnIndex(schema, options.partitioning.column) : -1;
  schema.fields.forEach((field, i) => {
    if (i !== pidColumn) columnLayoutOf(field);
  });
  createPartitioner(options.partitioning, schema, options.numPartitions, 0);
}

function describe(schema: Schema): string {
  return `{${schema.fields.map((f) => `${f.name}: ${String(f.type)}${f.nullable ? '' : ' not null'}`).join(', ')}}`;
}
