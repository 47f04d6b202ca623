import { constants } from 'node:buffer';
import type { RecordBatch, Schema } from 'apache-arrow';
import { ShuffleError, type ErrorLocation } from '../errors.js';
import { maxBufferBytesOf, readIpcSchemaAt, readIpcStream, type IpcReadOptions } from '../format/ipc-reader.js';
import { SchemaMessageCache } from '../format/schema-message-cache.js';
import { crc32cOf, outputPaths } from '../format/output-files.js';
import { runEveryStep } from '../run-every-step.js';
import { isRowPartition, parseRowPartitionHeader } from '../sort-writer/row-format.js';
import { readRowHeaderAt, readRowPartition, RowHeaderCache } from '../sort-writer/row-reader.js';
import { sameSchema } from '../writer/same-schema.js';
import { BatchCoalescer } from './batch-coalescer.js';
import { LocalFileSource, type ByteRangeSource } from './byte-source.js';
import { CheckedSource } from './checked-source.js';
import { retainReaderShapes } from './reader-shapes.js';
import { assertChecksum, checksumOf, readStreamedPartition } from './streamed-partition.js';

/** ShuffleOutputSources as the reader holds them (checked-source.ts). */
interface CheckedSources {
  data: CheckedSource;
  index: CheckedSource;
  checksum: CheckedSource | undefined;
}

/** The sources of one shuffle output; `checksum` is optional (outputs of other writers may have none). */
export interface ShuffleOutputSources {
  data: ByteRangeSource;
  index: ByteRangeSource;
  checksum?: ByteRangeSource;
}

export interface ReadOptions {
  /** Merge small batches into batches of about this many rows (default: yield batches as stored). */
  coalesceRows?: number;
}

export interface OpenOptions {
  /** Refuse a record batch whose buffers hold more bytes than this, uncompressed (a compressed one's claims are checked before anything is decompressed); default 2 GiB - 1. */
  maxBufferBytes?: number;
  /**
   * A range read (`readPartitions`) reads neighbouring partitions together, up
   * to this many bytes per read call (default 4 MiB, DEFAULT_READ_RUN_BYTES);
   * a larger partition is read alone. 0 reads one partition per call.
   */
  readRunBytes?: number;
  /**
   * The longest partition read whole (default 256 MiB,
   * DEFAULT_WHOLE_PARTITION_BYTES). A longer one is read in two passes of
   * bounded memory: its checksum over reads of 8 MiB, then its batches a
   * message (or row block) at a time (streamed-partition.ts). Its bytes are
   * read twice, but a reader never needs a buffer of its length: past 4 GiB
   * (on Node 20) there is none.
   */
  wholePartitionBytes?: number;
}

/** See OpenOptions.readRunBytes. */
export const DEFAULT_READ_RUN_BYTES = 4 * 1024 * 1024;
/** See OpenOptions.wholePartitionBytes. */
export const DEFAULT_WHOLE_PARTITION_BYTES = 256 * 1024 * 1024;

/**
 * Reads a shuffle output: the index tells where each partition's bytes lie
 * in the data file, the checksum file how to verify them. Partitions written
 * by either writer are read: an Arrow IPC stream (the columnar writer's,
 * starting FF FF FF FF) or blocks of compact rows (the sort writer's,
 * starting with the magic CSRW), told apart by their first bytes, both
 * yielding RecordBatches of the output's schema.
 *
 * A partition is read whole and its CRC32C verified before its first batch is
 * decoded, so a damaged partition never yields a single row; batches are then
 * decompressed asynchronously one after another. A partition longer than
 * `wholePartitionBytes` is verified in a first pass, then read a message at a
 * time (streamed-partition.ts). A range of partitions is
 * read in runs of neighbouring partitions, up to `readRunBytes` per read call,
 * into read buffers the reader reuses (when the source has `readInto`): two,
 * as large as the largest run read so far, up to 64 MiB each, kept until
 * close. The batches handed out never view them (the decoders copy out what
 * is stored raw).
 *
 * Protocol: `await ShuffleReader.open(prefix)` (or `fromSources`), any number
 * of reads (also concurrently), then `close()`.
 */
export class ShuffleReader {
  /** Byte offsets of each partition in the data file: partition p is [offsets[p], offsets[p+1]). */
  readonly offsets: readonly number[];
  readonly checksums: readonly number[] | null;
  /** the partitions of an output share their header (the schema message, or the sort writer's): it is decoded once */
  private readonly headers = { rows: new RowHeaderCache(), schemas: new SchemaMessageCache() };
  /** read buffers no read is using: taken for a run of partitions, given back once its batches are decoded */
  private readonly idleReadBuffers: Uint8Array[] = [];
  private readonly readRunBytes: number;
  private readonly wholePartitionBytes: number;
  private constructor(
    private readonly sources: CheckedSources,
    offsets: number[],
    checksums: number[] | null,
    private readonly openOptions: OpenOptions,
  ) {
    this.offsets = offsets;
    this.checksums = checksums;
    // a run is read into one buffer: never longer than the platform's largest
    this.readRunBytes = Math.min(openOptions.readRunBytes ?? DEFAULT_READ_RUN_BYTES, MAX_READ_BYTES);
    this.wholePartitionBytes = Math.min(openOptions.wholePartitionBytes ?? DEFAULT_WHOLE_PARTITION_BYTES, MAX_READ_BYTES);
  }

  /** Opens `<prefix>.data`, `<prefix>.index` and `<prefix>.checksum.CRC32C` from the local file system. */
  static async open(prefix: string, options: OpenOptions = {}): Promise<ShuffleReader> {
    const paths = outputPaths(prefix);
    const opened: ByteRangeSource[] = [];
    try {
      const index = await LocalFileSource.open(paths.index);
      opened.push(index);
      const data = await LocalFileSource.open(paths.data);
      opened.push(data);
      const checksum = await LocalFileSource.open(paths.checksum);
      opened.push(checksum);
      return await ShuffleReader.fromSources({ data, index, checksum }, options);
    } catch (error) {
      await closeSources(opened).catch(() => undefined); // the error that stopped the open is the story
      throw error;
    }
  }

  /**
   * Reads the index (and checksums) from the given sources and validates them
   * against the data's size. The reader closes the sources on `close()`; when
   * this fails, they stay the caller's to close.
   */
  static async fromSources(given: ShuffleOutputSources, options: OpenOptions = {}): Promise<ShuffleReader> {
    await retainReaderShapes();
    const sources: CheckedSources = {
      data: CheckedSource.of(given.data),
      index: CheckedSource.of(given.index),
      checksum: given.checksum === undefined ? undefined : CheckedSource.of(given.checksum),
    };
    const { index, data, checksum } = sources;
    for (const name of ['readRunBytes', 'wholePartitionBytes'] as const) {
      const bytes = options[name];
      if (bytes !== undefined && !(Number.isSafeInteger(bytes) && bytes >= 0)) {
        throw new ShuffleError('CS_INVALID_ARGUMENT', `${name} must be an integer >= 0, got ${String(bytes)}`);
      }
    }
    maxBufferBytesOf(options.maxBufferBytes); // refused here, before any file is read
    const indexSize = await index.size();
    if (indexSize < 16 || indexSize % 8 !== 0) {
      throw new ShuffleError('CS_CORRUPT_DATA', `index file has ${indexSize} bytes: expected (partitions + 1) * 8 with at least one partition`, { file: index.name });
    }
    const indexBytes = await index.read(0, indexSize);
    const view = new DataView(indexBytes.buffer, indexBytes.byteOffset, indexBytes.byteLength);
    const dataSize = await data.size();
    const offsets: number[] = [];
    const badEntry = (i: number) =>
      new ShuffleError('CS_CORRUPT_DATA', `index entry ${i} is ${offsets[i] ?? Number(view.getBigInt64(i * 8, false))}: offsets must start at 0, never decrease and stay within the ${dataSize}-byte data file`, { file: index.name, offset: i * 8 });
    // the first entry past the end of the data: the index's fault if a later one decreases, else the data file is short
    let beyond: number | null = null;
    for (let i = 0; i < indexSize / 8; i++) {
      const offset = Number(view.getBigInt64(i * 8, false));
      if ((i === 0 && offset !== 0) || offset < (offsets[i - 1] ?? 0)) throw badEntry(beyond ?? i);
      if (offset > dataSize) beyond ??= i;
      offsets.push(offset);
    }
    const end = offsets[offsets.length - 1]!;
    if (beyond !== null) {
      throw new ShuffleError('CS_CORRUPT_DATA', `the data file has ${dataSize} bytes, but the index puts the end of partition ${beyond - 1} at ${offsets[beyond]} and of the last at ${end}: the data file is truncated, or the index damaged`, { file: data.name, offset: dataSize });
    }
    if (end !== dataSize) {
      throw new ShuffleError('CS_CORRUPT_DATA', `the index ends at ${end} but the data file has ${dataSize} bytes`, { file: data.name });
    }
    let checksums: number[] | null = null;
    if (checksum !== undefined) {
      const numPartitions = offsets.length - 1;
      const size = await checksum.size();
      if (size !== numPartitions * 8) {
        throw new ShuffleError('CS_CORRUPT_DATA', `checksum file has ${size} bytes, expected ${numPartitions * 8} for ${numPartitions} partitions`, { file: checksum.name });
      }
      const bytes = await checksum.read(0, size);
      const cview = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      checksums = Array.from({ length: numPartitions }, (_, p) => Number(cview.getBigUint64(p * 8, false) & 0xffffffffn));
    }
    return new ShuffleReader(sources, offsets, checksums, options);
  }

  get numPartitions(): number {
    return this.offsets.length - 1;
  }

  /** Bytes of partition p in the data file (0 when it received no rows). */
  partitionLength(p: number): number {
    this.assertPartition(p);
    return this.offsets[p + 1]! - this.offsets[p]!;
  }

  /**
   * The schema, decoded from the first message of the first non-empty partition
   * (only its frame and metadata are read; no checksum is involved); null when
   * every partition is empty.
   */
  async schema(): Promise<Schema | null> {
    for (let p = 0; p < this.numPartitions; p++) {
      const length = this.partitionLength(p);
      if (length === 0) continue;
      const start = this.offsets[p]!;
      const read = (offset: number, bytes: number) => this.sources.data.read(offset, bytes);
      const head = await read(start, Math.min(16, length));
      if (isRowPartition(head)) return parseRowPartitionHeader(await readRowHeaderAt(read, start, length, head), this.location(p)).schema;
      return readIpcSchemaAt(read, start, length, this.location(p), this.headers.schemas);
    }
    return null;
  }

  /**
   * The verified bytes of partition p: one complete Arrow IPC stream or
   * sort-writer partition, or empty. They are in one buffer: a partition
   * longer than Node's largest (4 GiB on Node 20) is CS_PARTITION_TOO_LARGE
   * here, though readPartition reads it.
   */
  async partitionBytes(p: number): Promise<Uint8Array> {
    const bytes = await this.readFresh(p);
    this.verify(p, bytes);
    return bytes;
  }

  /**
   * Checks partition p against the checksum file (CS_CHECKSUM_MISMATCH) over
   * reads of up to 8 MiB, never holding it whole; nothing to check without a
   * checksum file. For tools that look at a partition without reading its
   * batches (inspect): readPartition verifies what it reads itself.
   */
  async verifyPartition(p: number): Promise<void> {
    const length = this.partitionLength(p);
    const expected = this.checksums?.[p];
    if (expected !== undefined) assertChecksum(await checksumOf(this.sources.data, this.offsets[p]!, length), expected, this.location(p));
  }

  /**
   * The bytes [offset, offset + length) of partition p, not verified: for
   * tools that walk a partition's headers without holding it (inspect).
   * CS_INVALID_ARGUMENT unless the range lies within the partition.
   */
  async readPartitionRange(p: number, offset: number, length: number): Promise<Uint8Array> {
    const size = this.partitionLength(p);
    if (!(Number.isSafeInteger(offset) && Number.isSafeInteger(length) && offset >= 0 && length >= 0 && offset + length <= size)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `bytes [${offset}, +${length}) are not within partition ${p}'s ${size}`);
    }
    return length === 0 ? new Uint8Array(0) : this.sources.data.read(this.offsets[p]! + offset, length);
  }

  /** Partition p's bytes in fresh memory, not verified. */
  private async readFresh(p: number): Promise<Uint8Array> {
    const length = this.partitionLength(p);
    this.assertFitsOneBuffer(p, length);
    return length === 0 ? new Uint8Array(0) : this.sources.data.read(this.offsets[p]!, length);
  }

  /** partitionBytes returns one buffer: a partition longer than the platform's largest cannot be one (allocating it threw a RangeError). */
  private assertFitsOneBuffer(p: number, length: number): void {
    if (length > MAX_READ_BYTES) {
      throw new ShuffleError('CS_PARTITION_TOO_LARGE', `partition ${p} holds ${length} bytes, more than one buffer can hold on this Node.js (${MAX_READ_BYTES}); readPartition reads it a message at a time`, this.location(p));
    }
  }

  /**
   * The bytes of partitions [first, end of the run) in one read call:
   * neighbours join while the run stays within readRunBytes (one partition at
   * least). A read runs on the libuv pool, which competes for the cores with
   * V8's collector threads: of 200 reads of 170 KB (500 k wide rows), most
   * were done when their turn came but some took 6-10 ms, and the loop waited
   * 70-130 ms for them, of 230-310 ms in all. Runs of 4 MiB waited 17-50 ms,
   * mostly for the first run (medians of 10 alternating rounds in one
   * process: wide 234 ms against 298, narrow 203 against 260, nested 210
   * against 247).
   *
   * The bytes are in a read buffer of this reader (`borrowed`: give it back
   * with giveReadBuffer once nothing views it) when the source can read into
   * one; else each partition is read alone, into fresh memory. Read into fresh
   * memory, a read allocated the data file's size on top of the batches it
   * decodes (77 MB besides 88 MB for 2 M narrow rows at P = 200). The caller
   * verifies the checksums, partition by partition.
   */
  private async fetchRun(first: number, rangeEnd: number): Promise<PartitionRun> {
    if (this.isStreamed(first)) return { first, end: first + 1, bytes: new Uint8Array(0), borrowed: false, streamed: true };
    if (this.sources.data.readInto === undefined) return { first, end: first + 1, bytes: await this.readFresh(first), borrowed: false, streamed: false };
    const start = this.offsets[first]!;
    let end = first + 1;
    while (end < rangeEnd && this.offsets[end + 1]! - start <= this.readRunBytes && !this.isStreamed(end)) end++;
    const length = this.offsets[end]! - start;
    if (length === 0) return { first, end, bytes: new Uint8Array(0), borrowed: false, streamed: false };
    let buffer = this.idleReadBuffers.pop();
    if (buffer === undefined || buffer.byteLength < length) buffer = new Uint8Array(Math.min(MAX_READ_BYTES, Math.max(length, (buffer?.byteLength ?? 0) * 2)));
    const bytes = buffer.subarray(0, length);
    try {
      await this.sources.data.readInto(start, bytes);
    } catch (error) {
      this.giveReadBuffer(bytes);
      throw error;
    }
    return { first, end, bytes, borrowed: true, streamed: false };
  }

  /** Whether partition p is too long to read whole (OpenOptions.wholePartitionBytes). */
  private isStreamed(p: number): boolean {
    return this.offsets[p + 1]! - this.offsets[p]! > this.wholePartitionBytes;
  }

  private giveReadBuffer(bytes: Uint8Array): void {
    if (this.idleReadBuffers.length < MAX_IDLE_READ_BUFFERS && bytes.buffer.byteLength <= MAX_IDLE_READ_BUFFER_BYTES) {
      this.idleReadBuffers.push(new Uint8Array(bytes.buffer));
    }
  }

  private verify(p: number, bytes: Uint8Array): void {
    const expected = this.checksums?.[p];
    if (expected !== undefined) assertChecksum(crc32cOf([bytes]), expected, this.location(p));
  }

  /** Partition p, too long to read whole: verified in a first pass, then read a message (or row block) at a time. */
  private async *streamPartition(p: number, where: ErrorLocation, options: IpcReadOptions): AsyncGenerator<RecordBatch> {
    await this.verifyPartition(p);
    const start = this.offsets[p]!;
    yield* readStreamedPartition(this.sources.data, start, this.offsets[p + 1]! - start, where, options, this.headers);
  }

  /** The batches of partition p of `run`, verified first; null when it is empty. */
  private partitionBatches(run: PartitionRun, p: number, options: IpcReadOptions): AsyncGenerator<RecordBatch> | null {
    const where = this.location(p);
    const start = this.offsets[p]!;
    if (run.streamed) return this.streamPartition(p, where, options);
    const runStart = this.offsets[run.first]!;
    const bytes = run.bytes.subarray(start - runStart, this.offsets[p + 1]! - runStart);
    // an empty partition too is verified: its checksum must be that of nothing
    this.verify(p, bytes);
    if (bytes.byteLength === 0) return null;
    return isRowPartition(bytes) ? readRowPartition(bytes, where, options, this.headers.rows) : readIpcStream(bytes, where, options, this.headers.schemas);
  }

  /** The record batches of partition p, in the order they were written. */
  async *readPartition(p: number, options: ReadOptions = {}): AsyncGenerator<RecordBatch> {
    yield* this.readPartitions(p, p + 1, options);
  }

  /** The record batches of partitions [start, end), the way a reducer reads a range of partitions. */
  async *readPartitions(start: number, end: number, options: ReadOptions = {}): AsyncGenerator<RecordBatch> {
    if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && start <= end && end <= this.numPartitions)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `partition range [${start}, ${end}) is not within [0, ${this.numPartitions})`);
    }
    const target = options.coalesceRows;
    if (target !== undefined && !(Number.isInteger(target) && target >= 1)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `coalesceRows must be an integer >= 1, got ${String(target)}`);
    }
    let coalescer: BatchCoalescer | null = null;
    let schema: Schema | null = null;
    // the next run is read while this one is decoded: at most two are held
    const fetch = (p: number): Promise<PartitionRun> | null => {
      if (p >= end) return null;
      const fetched = this.fetchRun(p, end);
      fetched.catch(() => undefined); // awaited in turn; a failure surfaces there
      return fetched;
    };
    let fetching = fetch(start);
    while (fetching !== null) {
      const run = await fetching;
      fetching = fetch(run.end);
      // the decoders copy what their batches keep out of borrowed bytes (row partitions always do)
      const options = { ...this.openOptions, borrowed: run.borrowed };
      for (let p = run.first; p < run.end; p++) {
        const batches = this.partitionBatches(run, p, options);
        if (batches === null) continue;
        // a partition's batches all come from its one schema message (or row header): its first batch speaks for them
        let first = true;
        for await (const batch of batches) {
          if (first) {
            first = false;
            if (schema === null) schema = batch.schema;
            else if (batch.schema !== schema && !sameSchema(schema, batch.schema)) {
              throw new ShuffleError('CS_CORRUPT_DATA', 'the partitions of one output disagree about the schema', this.location(p));
            }
          }
          if (target === undefined) {
            yield batch;
            continue;
          }
          coalescer ??= new BatchCoalescer(batch.schema, target);
          yield* coalescer.push(batch);
        }
      }
      // only after the run's last batch: a caller that stops early may leave a decompression reading the bytes
      if (run.borrowed) this.giveReadBuffer(run.bytes);
    }
    const last = coalescer?.finish();
    if (last) yield last;
  }

  /** Closes the sources, each once (also when one of them fails to close, or close() is called again). */
  async close(): Promise<void> {
    const { data, index, checksum } = this.sources;
    await closeSources([data, index, checksum]);
  }

  private assertPartition(p: number): void {
    if (!(Number.isInteger(p) && p >= 0 && p < this.numPartitions)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `partition ${p} does not exist: this output has ${this.numPartitions} partitions`);
    }
  }

  private location(p: number): ErrorLocation {
    return { file: this.sources.data.name, partition: p, offset: this.offsets[p]! };
  }
}

/** The partitions [first, end) of a range, read together; `bytes` starts at partition `first`. */
interface PartitionRun {
  first: number;
  end: number;
  bytes: Uint8Array;
  borrowed: boolean;
  /** a partition too long to read whole: `bytes` is empty, and the partition is read by readStreamedPartition */
  streamed: boolean;
}
/** Closes every source given, also after one fails to close; then throws the first failure. */
export function closeSources(sources: readonly (ByteRangeSource | undefined)[]): Promise<void> {
  return runEveryStep(sources.map((source) => () => source?.close()));
}

/** The longest read buffer (a partition, or a run of them): the platform's largest typed array, 4 GiB on Node 20. */
const MAX_READ_BYTES = constants.MAX_LENGTH;
/** Read buffers a reader keeps for its next runs: the one being decoded and the one being read ahead. */
const MAX_IDLE_READ_BUFFERS = 2;
/** A larger read buffer (a run or a partition this large) is let go after use rather than kept until close. */
const MAX_IDLE_READ_BUFFER_BYTES = 64 * 1024 * 1024;

