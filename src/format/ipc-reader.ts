import { constants } from 'node:buffer';
import { makeData, RecordBatch, Struct, Vector, type Data, type DataType, type Schema } from 'apache-arrow';
import { DateUnit, IntervalUnit, MessageHeader, MetadataVersion, Precision, TimeUnit, Type, UnionMode } from 'apache-arrow/enum';
import {
  BufferRegion,
  FieldNode,
  Message,
  type DictionaryBatch as DictionaryBatchHeader,
  type RecordBatch as RecordBatchHeader,
} from 'apache-arrow/ipc/metadata/message';
import { CompressedVectorLoader, VectorLoader } from 'apache-arrow/visitor/vectorloader';
import { ShuffleError, type ErrorLocation } from '../errors.js';
import { codecByArrowType, knownCodecByArrowType } from './codec.js';
import { CONTINUATION_MARKER, padding8, variadicBufferCountsOf, type FieldNodeInfo } from './ipc-message.js';
import { restoreEmptyFieldNames } from './empty-field-names.js';
import type { SchemaMessageCache } from './schema-message-cache.js';
import { metadataCountProblem } from './metadata-counts.js';
import { columnInconsistency } from './validate-column.js';
import { flatKindsOf, loadFlatColumns, type FlatKind } from './flat-loader.js';
import { ColumnLoader } from './column-loader.js';

/**
 * Reads one Arrow IPC stream (schema message, dictionary and record-batch
 * messages, optional end-of-stream marker) held in memory, decompressing
 * LZ4_FRAME / ZSTD bodies asynchronously (small one-block LZ4 frames at once:
 * lz4-frame.ts decompressSingleBlock). It accepts any spec-compliant
 * stream, including the legacy framing without the continuation marker.
 *
 * `where` locates the stream in its file for error messages: `offset` is the
 * file offset of `bytes[0]`. `schemas`: a cache shared by streams that
 * start with the same schema message (a reader's partitions), which then
 * decode it once.
 */
export async function* readIpcStream(bytes: Uint8Array, where: ErrorLocation = {}, options: IpcReadOptions = {}, schemas?: SchemaMessageCache): AsyncGenerator<RecordBatch> {
  yield* readMessages(new MessageCursor(bytes, where, schemas), options);
}

/**
 * Reads the Arrow IPC stream of `length` bytes at `start` of a source a
 * message at a time, as readIpcStream reads one in memory (the same checks,
 * the same errors at the same offsets): for a stream too long to hold whole.
 * It holds the message being handed out and the next one; each message is
 * read into memory of its own, which its batches view (`borrowed` is ignored).
 *
 * `where.offset` is the file offset of the stream's first byte, as for readIpcStream.
 */
export async function* readIpcStreamAt(
  read: ReadBytes,
  start: number,
  length: number,
  where: ErrorLocation = {},
  options: IpcReadOptions = {},
  schemas?: SchemaMessageCache,
): AsyncGenerator<RecordBatch> {
  yield* readMessages(new RangeMessageCursor(read, start, length, where, schemas), { ...options, borrowed: false });
}

/** Reads `length` bytes at `offset` (of a file, or another source) into memory of their own, 8-aligned. */
export type ReadBytes = (offset: number, length: number) => Promise<Uint8Array>;

/** How every CS_CORRUPT_DATA of a stream's framing, metadata or contents begins. */
export const INVALID_IPC_STREAM = 'invalid Arrow IPC stream: ';

async function* readMessages(messages: StreamCursor, options: IpcReadOptions): AsyncGenerator<RecordBatch> {
  const maxBufferBytes = maxBufferBytesOf(options.maxBufferBytes);
  const borrowed = options.borrowed ?? false;
  const first = await messages.next();
  if (first === null) return;
  if (first.message.headerType !== MessageHeader.Schema) {
    throw messages.corrupt('the stream does not start with a schema message', first.start);
  }
  const schema = messages.checkedSchema(first);
  const version = first.message.version;
  const dictionaries = options.dictionaries ?? new Map<number, Vector>();

  const types = schema.fields.map((f) => f.type);
  const kinds = flatKindsOf(types);
  const load = (raw: RawMessage): Promise<Data[]> => {
    const loading = loadColumns(raw.header as RecordBatchHeader, raw.body, types, kinds, dictionaries, version, messages, raw.start, maxBufferBytes, borrowed);
    loading.catch(() => undefined); // awaited in turn; a failure surfaces there
    return loading;
  };
  // While a record batch is handed out, the next one (if the next message is one) is already
  // loading (its large frames decompressing on the libuv pool). Dictionary batches are taken in order:
  // nothing is loaded past one.
  let next = await messages.next();
  let loading = next !== null && isRecordBatch(next) ? load(next) : null;
  while (next !== null) {
    const { message, body, start } = next;
    let following: RawMessage | null = null;
    let followingError: unknown = null;
    if (message.headerType === MessageHeader.RecordBatch) {
      const header = next.header as RecordBatchHeader;
      try {
        following = await messages.next();
      } catch (error) {
        followingError = error; // reported after this batch, as without the look-ahead
      }
      const followingLoad = following !== null && isRecordBatch(following) ? load(following) : null;
      const children = await loading!;
      const mismatch = children.findIndex((child) => child.length !== header.length);
      if (mismatch >= 0) {
        throw messages.corrupt(`the record batch has ${header.length} rows but column ${mismatch} has ${children[mismatch]!.length}`, start);
      }
      children.forEach((child, c) => {
        const problem = columnInconsistency(child);
        if (problem !== null) throw messages.corrupt(`column ${c} ("${schema.fields[c]?.name}") is inconsistent: ${problem}`, start);
      });
      let batch: RecordBatch;
      try {
        batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: header.length, nullCount: 0, children }));
      } catch (cause) {
        throw messages.corrupt(`cannot assemble the record batch: ${(cause as Error).message}`, start, cause);
      }
      // arrow-js re-derives the batch's schema and merges fields of the same name: the columns would no longer match it
      if (batch.schema.fields.some((field, c) => field.type !== schema.fields[c]?.type)) {
        throw messages.corrupt('the schema has several columns of the same name, which arrow-js cannot hold apart', start);
      }
      yield batch;
      if (followingError !== null) throw followingError;
      next = following;
      loading = followingLoad;
      continue;
    } else if (message.headerType === MessageHeader.DictionaryBatch) {
      const header = next.header as DictionaryBatchHeader;
      const type = schema.dictionaries.get(header.id);
      if (type === undefined) throw messages.corrupt(`dictionary batch for unknown dictionary id ${header.id}`, start);
      const [data] = await loadColumns(header.data, body, [type], null, dictionaries, version, messages, start, maxBufferBytes, borrowed);
      if (data === undefined || data.length !== header.data.length) throw messages.corrupt(`dictionary batch ${header.id} does not hold its ${header.data.length} values`, start);
      const problem = columnInconsistency(data);
      if (problem !== null) throw messages.corrupt(`dictionary ${header.id} is inconsistent: ${problem}`, start);
      const previous = dictionaries.get(header.id);
      const vector = new Vector([data as Data]);
      dictionaries.set(header.id, header.isDelta && previous ? previous.concat(vector) : vector);
    } else {
      throw messages.corrupt(`unexpected ${MessageHeader[message.headerType] ?? message.headerType} message`, start);
    }
    next = await messages.next();
    loading = next !== null && isRecordBatch(next) ? load(next) : null;
  }
}

function isRecordBatch(raw: RawMessage): boolean {
  return raw.message.headerType === MessageHeader.RecordBatch;
}

/**
 * A schema whose flatbuffer decoded into holes (missing fields or types) or
 * impossible type parameters (a negative fixed width, a bit width its type
 * does not have, a dictionary indexed by something other than an integer) is
 * refused here, not deep in arrow-js or in a buffer allocation.
 */
function assertUsableSchema(schema: Schema, messages: StreamCursor): void {
  const found = fieldsProblem(schema.fields);
  if (found !== null) throw messages.corrupt(`the schema message describes ${found}`, 0);
}

/** What is wrong with the first of `fields` that has something wrong, or null. */
function fieldsProblem(fields: readonly Schema['fields'][number][]): string | null {
  for (const field of fields) {
    if (field === null || field === undefined || field.type === null || field.type === undefined) return 'a field without a type';
    const found = typeProblem(field.type);
    if (found !== null) return `field "${field.name ?? ''}" ${found}`; // (an absent name is "": its restoring comes after this check)
  }
  return null;
}

/** What is wrong with one type's parameters, its dictionary's or its children's, or null. */
function typeProblem(dataType: DataType): string | null {
  const type = dataType as { byteWidth?: number; bitWidth?: number; listSize?: number };
  if (type.byteWidth !== undefined && !(Number.isInteger(type.byteWidth) && type.byteWidth >= 0 && type.byteWidth <= MAX_FIXED_WIDTH)) {
    return `has a fixed width of ${type.byteWidth} bytes`;
  }
  const widths = BIT_WIDTHS[dataType.typeId] ?? ANY_BIT_WIDTH;
  if (type.bitWidth !== undefined && !widths.includes(type.bitWidth)) return `has a bit width of ${type.bitWidth}`;
  if (type.listSize !== undefined && !(Number.isInteger(type.listSize) && type.listSize >= 0)) return `has a list size of ${type.listSize}`;
  const { precision, unit, mode } = dataType as { precision?: number; unit?: number; mode?: number };
  if (dataType.typeId === Type.Float && !FLOAT_PRECISIONS.includes(precision!)) return `has a floating point precision of ${precision}`;
  const units = UNITS[dataType.typeId];
  if (units !== undefined && !units.includes(unit!)) return `has a unit of ${unit}`;
  // (arrow-js reads a nanosecond time of 32 bits as 32-bit values; flechette, by its unit, as 64-bit ones)
  if (dataType.typeId === Type.Time && TIME_BIT_WIDTH[unit!] !== type.bitWidth) {
    return `is a time of unit ${TimeUnit[unit!]} in ${type.bitWidth} bits (seconds and milliseconds take 32, micro- and nanoseconds 64)`;
  }
  if (dataType.typeId === Type.Union && mode !== UnionMode.Sparse && mode !== UnionMode.Dense) return `is a union of mode ${mode}, neither sparse nor dense`;
  if (dataType.typeId === Type.Dictionary) {
    const { indices, dictionary } = dataType as DataType & { indices?: DataType; dictionary?: DataType };
    if (indices?.typeId !== Type.Int || !INT_BIT_WIDTHS.includes((indices as { bitWidth?: number }).bitWidth ?? 0)) {
      return `is a dictionary indexed by ${String(indices)}, not an integer of 8, 16, 32 or 64 bits`;
    }
    if (dictionary === null || dictionary === undefined) return 'is a dictionary without a value type';
    const inner = typeProblem(dictionary);
    if (inner !== null) return `is a dictionary whose value type ${inner}`;
  }
  const shape = nestedShapeProblem(dataType);
  if (shape !== null) return `as ${shape}`;
  return fieldsProblem(dataType.children ?? []);
}

/** What is wrong with a nested type's children (arrow-js assumes their shape without checking), or null. */
function nestedShapeProblem(type: Schema['fields'][number]['type']): string | null {
  const children = type.children ?? [];
  switch (type.typeId) {
    case Type.List:
    case Type.LargeList:
    case Type.FixedSizeList:
      return children.length === 1 ? null : `a list with ${children.length} child fields`;
    case Type.Map: {
      const entries = children[0]?.type;
      return children.length === 1 && entries?.typeId === Type.Struct && entries.children.length === 2 ? null : 'a map whose entries are not a struct of key and value';
    }
    case Type.Union: {
      const typeIds = (type as { typeIds?: ArrayLike<number> }).typeIds;
      if (typeIds === undefined || typeIds === null || typeIds.length !== children.length) return `a union of ${children.length} children with ${typeIds?.length ?? 0} type ids`;
      const ids = Array.from(typeIds);
      if (ids.some((id) => !(Number.isInteger(id) && id >= 0 && id < 128)) || new Set(ids).size !== ids.length) return `a union with type ids ${ids.join(', ')} (they must be distinct, in [0, 128))`;
      return null;
    }
    default:
      return null;
  }
}

/** The bit widths arrow-js can read, by type (its readers throw a plain Error on any other) */
const INT_BIT_WIDTHS: readonly number[] = [8, 16, 32, 64];
const BIT_WIDTHS: Partial<Record<Type, readonly number[]>> = { [Type.Int]: INT_BIT_WIDTHS, [Type.Decimal]: [32, 64, 128, 256], [Type.Time]: [32, 64] };
const ANY_BIT_WIDTH: readonly number[] = [1, 8, 16, 32, 64, 128, 256];
const FLOAT_PRECISIONS: readonly number[] = [Precision.HALF, Precision.SINGLE, Precision.DOUBLE];
const TIME_UNITS: readonly number[] = [TimeUnit.SECOND, TimeUnit.MILLISECOND, TimeUnit.MICROSECOND, TimeUnit.NANOSECOND];
/** The bit width of a time of each unit, as the format defines Time (Arrow C++ refuses any other) */
const TIME_BIT_WIDTH: Record<number, number> = { [TimeUnit.SECOND]: 32, [TimeUnit.MILLISECOND]: 32, [TimeUnit.MICROSECOND]: 64, [TimeUnit.NANOSECOND]: 64 };
/** The units each type has (arrow-js reads any other as one of them, and our layouts might not agree on which) */
const UNITS: Partial<Record<Type, readonly number[]>> = {
  [Type.Date]: [DateUnit.DAY, DateUnit.MILLISECOND],
  [Type.Time]: TIME_UNITS,
  [Type.Timestamp]: TIME_UNITS,
  [Type.Duration]: TIME_UNITS,
  [Type.Interval]: [IntervalUnit.YEAR_MONTH, IntervalUnit.DAY_TIME, IntervalUnit.MONTH_DAY_NANO],
};
/** Widest fixed-size binary accepted from a file (a sanity bound, far beyond any real schema). */
const MAX_FIXED_WIDTH = 1 << 20;

/** Bytes all the buffers of one record batch may decompress to, unless the caller says otherwise. */
export const DEFAULT_MAX_BUFFER_BYTES = 2 ** 31 - 1;

/**
 * The `maxBufferBytes` option, or the default: an integer >= 0, else
 * CS_INVALID_ARGUMENT (a fraction or Infinity, compared with a 64-bit
 * claimed size, made every compressed batch look corrupt).
 */
export function maxBufferBytesOf(value: number | undefined): number {
  if (value === undefined) return DEFAULT_MAX_BUFFER_BYTES;
  if (!(Number.isSafeInteger(value) && value >= 0)) throw new ShuffleError('CS_INVALID_ARGUMENT', `maxBufferBytes must be an integer >= 0, got ${String(value)}`);
  return value;
}

export interface IpcReadOptions {
  /** Refuse a record batch whose buffers hold more bytes than this, uncompressed (a compressed one's claims are checked before anything is decompressed); an integer >= 0, default 2 GiB - 1. */
  maxBufferBytes?: number;
  /**
   * The stream's bytes are a read buffer the caller reuses once the generator
   * has finished: the batches then keep no view into them (buffers stored raw
   * and uncompressed bodies are copied out). Default false: batches view the
   * bytes wherever a buffer is stored raw.
   */
  borrowed?: boolean;
  /**
   * The dictionaries (by id) of the messages before `bytes`, for a caller
   * that reads one stream a message at a time (the CLI's input files): the
   * stream's dictionary batches replace or extend them here. Default: none.
   */
  dictionaries?: Map<number, Vector>;
}

/** The schema of an IPC stream, read from its first message. */
export function readIpcSchema(bytes: Uint8Array, where: ErrorLocation = {}): Schema {
  const messages = new MessageCursor(bytes, where);
  return firstSchema(messages, messages.next());
}

/**
 * The schema of the IPC stream of `length` bytes at `start` of a source
 * (`where.offset`: the file offset of its first byte), with the checks
 * readIpcStreamAt makes: only the first message's frame and metadata are
 * read, not its body.
 */
export async function readIpcSchemaAt(read: ReadBytes, start: number, length: number, where: ErrorLocation = {}, schemas?: SchemaMessageCache): Promise<Schema> {
  const messages = new RangeMessageCursor(read, start, length, where, schemas);
  return firstSchema(messages, await messages.skipBody());
}

/**
 * The message at `start` of a source whose messages may run up to `end`
 * (`where.offset`: the file offset of `start`), framed and decoded with the
 * reader's checks (CS_CORRUPT_DATA in the same words at the same offset as a
 * read), its body unread; null at an end-of-stream marker. For readers that
 * find messages by offset rather than in sequence: an Arrow file's footer
 * lists them (src/cli/input.ts).
 */
export async function readIpcMessageAt(read: ReadBytes, start: number, end: number, where: ErrorLocation = {}): Promise<{ message: Message; start: number; end: number } | null> {
  const messages = new RangeMessageCursor(read, start, end - start, where);
  const raw = await messages.skipBody();
  return raw === null ? null : { message: raw.message, start, end: start + messages.nextStart };
}

/** What the headers of an IPC stream say (summarizeIpcStreamAt). */
export interface IpcStreamSummary {
  /** null for a stream that ends before its first message */
  schema: Schema | null;
  /** what the first record batch's compression names ('none' without one, `unknown (n)` for a type not known); null without record batches */
  codec: string | null;
  /** record batches, and their rows */
  batches: number;
  rows: number;
}

/**
 * What the headers of the IPC stream of `length` bytes at `start` of a
 * source say, read a frame and a metadata at a time, bodies unread: with the
 * framing, metadata and schema checks readIpcStreamAt makes, so a damaged
 * stream is CS_CORRUPT_DATA in the same words at the same offset. For tools
 * that report what a partition holds (inspect).
 */
export async function summarizeIpcStreamAt(read: ReadBytes, start: number, length: number, where: ErrorLocation = {}): Promise<IpcStreamSummary> {
  const messages = new RangeMessageCursor(read, start, length, where);
  const summary: IpcStreamSummary = { schema: null, codec: null, batches: 0, rows: 0 };
  const first = await messages.skipBody();
  if (first === null) return summary;
  summary.schema = firstSchema(messages, first);
  for (let next = await messages.skipBody(); next !== null; next = await messages.skipBody()) {
    const type = next.message.headerType;
    if (type === MessageHeader.RecordBatch) {
      const header = next.header as RecordBatchHeader;
      summary.batches++;
      summary.rows += header.length;
      const compression = header.compression?.type;
      summary.codec ??= compression === undefined ? 'none' : (knownCodecByArrowType(compression)?.name ?? `unknown (${Number(compression)})`);
    } else if (type !== MessageHeader.DictionaryBatch) {
      throw messages.corrupt(`unexpected ${MessageHeader[type] ?? type} message`, next.start);
    }
  }
  return summary;
}

function firstSchema(messages: StreamCursor, first: RawMessage | null): Schema {
  if (first === null || first.message.headerType !== MessageHeader.Schema) {
    throw messages.corrupt('the stream does not start with a schema message', 0);
  }
  return messages.checkedSchema(first);
}

interface RawMessage {
  message: Message;
  /** the decoded header (Schema, RecordBatch or DictionaryBatch metadata) */
  header: unknown;
  body: Uint8Array;
  /** offset of the message in the stream */
  start: number;
  /**
   * The first message: the copy of its metadata it was decoded from, or null
   * when it came from the schema cache (checked when it was decoded); later
   * messages: undefined.
   */
  decodedFrom: Uint8Array | null | undefined;
}

/** A message's metadata decoded (RawMessage less its body), and where its body lies. */
interface DecodedMetadata {
  message: Message;
  header: unknown;
  decodedFrom: Uint8Array | null | undefined;
  bodyStart: number;
  bodyLength: number;
}

/**
 * Walks the encapsulated messages of a stream, checking every length against
 * the stream's before anything is allocated. The checks are the subclasses'
 * shared steps, so a stream read in memory and one read from a source fail
 * alike, at the same offsets:
 *
 * ```text
 * FF FF FF FF | int32 LE metadataSize | metadata | body     (metadataSize 0: end of stream)
 * int32 LE metadataSize | metadata | body                  (legacy framing, before Arrow 0.15)
 * ```
 */
abstract class StreamCursor {
  protected position = 0;
  constructor(
    protected readonly length: number,
    private readonly where: ErrorLocation,
    private readonly schemas: SchemaMessageCache | undefined,
  ) {}

  /** The next message, or null at the end of the stream (an end-of-stream marker, or its last byte). */
  abstract next(): RawMessage | null | Promise<RawMessage | null>;

  /**
   * The frame of the message at `start`, from `head`: the stream's bytes
   * from `start`, 8 of them, or fewer where the stream ends sooner. Null at
   * an end-of-stream marker.
   */
  protected frame(head: DataView, headOffset: number, start: number): { metadataStart: number; metadataSize: number } | null {
    if (start + 4 > this.length) throw this.corrupt('truncated message header', start);
    let metadataSize = head.getInt32(headOffset, true);
    let headerSize = 4;
    if (metadataSize === (CONTINUATION_MARKER | 0)) {
      if (start + 8 > this.length) throw this.corrupt('truncated message header', start);
      metadataSize = head.getInt32(headOffset + 4, true);
      headerSize = 8;
    }
    if (metadataSize === 0) return null; // end-of-stream marker
    const metadataStart = start + headerSize;
    if (metadataSize < 0 || metadataStart + metadataSize > this.length) {
      throw this.corrupt(`message metadata of ${metadataSize} bytes runs past the end of the stream`, start);
    }
    return { metadataStart, metadataSize };
  }

  /**
   * The message at `start` whose metadata, from `metadataStart`, is
   * `metadata`; its body checked to lie within the stream.
   *
   * arrow-js decodes a flatbuffer's vectors as typed arrays over the bytes
   * it is handed. The first message's metadata (the schema's: the union type
   * ids, the field lists) is decoded from a copy, once per schema cache, so
   * it never views the caller's memory, and a damaged vector position fails
   * alike whatever follows the metadata. Later metadata is copied only when
   * it lies off 8-alignment in memory (a row partition's header, or what
   * follows one in a read buffer): a copy per message made reading 1 M narrow
   * rows at P = 1000 20-25 % slower.
   */
  protected decode(metadata: Uint8Array, start: number, metadataStart: number): DecodedMetadata {
    const bodyStart = metadataStart + metadata.byteLength;
    const cached = start === 0 ? (this.schemas?.lookup(metadata) ?? null) : null;
    if (cached !== null) return { message: cached.message, header: cached.schema, decodedFrom: null, bodyStart, bodyLength: this.bodyLength(cached.message, bodyStart, start) };
    const countProblem = metadataCountProblem(metadata);
    if (countProblem !== null) throw this.corrupt(countProblem, start);
    const decodedFrom = start === 0 ? metadata.slice() : aligned8(metadata);
    let message: Message;
    let header: unknown;
    try {
      // arrow-js decodes the header lazily: decode it here, where a broken flatbuffer is still ours to report
      message = Message.decode(decodedFrom);
      header = message.header();
    } catch (cause) {
      throw this.corrupt(`unreadable message metadata: ${(cause as Error).message}`, start, cause);
    }
    if (header === null || header === undefined) throw this.corrupt('message metadata without a header', start);
    // V4 (Arrow 0.8 to 0.17, a validity bitmap in each union) and V5 (Arrow 1.0 on) are the versions Arrow C++
    // reads; one of V1-V3 (or a damaged version field) made arrow-js look for buffers of another layout
    if (message.version < MetadataVersion.V4 || message.version > MetadataVersion.V5) {
      throw this.corrupt(`metadata version ${MetadataVersion[message.version] ?? message.version} is not one this reader takes (V4 or V5)`, start);
    }
    const bodyLength = this.bodyLength(message, bodyStart, start);
    return { message, header, decodedFrom: start === 0 ? decodedFrom : undefined, bodyStart, bodyLength };
  }

  private bodyLength(message: Message, bodyStart: number, start: number): number {
    const bodyLength = Number(message.bodyLength);
    if (!Number.isSafeInteger(bodyLength) || bodyLength < 0 || bodyStart + bodyLength > this.length) {
      throw this.corrupt(`message body of ${message.bodyLength} bytes runs past the end of the stream`, start);
    }
    return bodyLength;
  }

  /**
   * The schema of `first`, the stream's first message (a schema message),
   * checked to be whole once; remembered in the schema cache then.
   */
  checkedSchema(first: RawMessage): Schema {
    const schema = first.header as Schema;
    if (first.decodedFrom === null) return schema; // from the cache: checked when it was decoded
    assertUsableSchema(schema, this);
    restoreEmptyFieldNames(schema); // once it is known to be whole
    if (first.decodedFrom !== undefined) this.schemas?.remember(first.decodedFrom, { message: first.message, schema });
    return schema;
  }

  corrupt(what: string, offsetInStream: number, cause?: unknown): ShuffleError {
    const where = { ...this.where, offset: (this.where.offset ?? 0) + offsetInStream };
    return new ShuffleError('CS_CORRUPT_DATA', `${INVALID_IPC_STREAM}${what}`, where, { cause });
  }
}

/** A stream held in memory: its messages' bodies are views into it. */
class MessageCursor extends StreamCursor {
  private readonly view: DataView;
  constructor(private readonly bytes: Uint8Array, where: ErrorLocation, schemas?: SchemaMessageCache) {
    super(bytes.byteLength, where, schemas);
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  next(): RawMessage | null {
    const start = this.position;
    if (start === this.length) return null; // stream ended without an end-of-stream marker
    const frame = this.frame(this.view, start, start);
    if (frame === null) return null;
    const { metadataStart, metadataSize } = frame;
    const { message, header, decodedFrom, bodyStart, bodyLength } = this.decode(this.bytes.subarray(metadataStart, metadataStart + metadataSize), start, metadataStart);
    this.position = bodyStart + bodyLength;
    return { message, header, body: this.bytes.subarray(bodyStart, bodyStart + bodyLength), start, decodedFrom };
  }
}

/**
 * A stream of `length` bytes at `offset` of a source, read a message at a
 * time: its frame, its metadata, then its body, each read once its length is
 * known to lie within the stream.
 */
class RangeMessageCursor extends StreamCursor {
  constructor(private readonly read: ReadBytes, private readonly offset: number, length: number, where: ErrorLocation, schemas?: SchemaMessageCache) {
    super(length, where, schemas);
  }

  next(): Promise<RawMessage | null> {
    return this.advance(true);
  }

  /** Where the next message starts: just past the body of the last one walked. */
  get nextStart(): number {
    return this.position;
  }

  /** The next message with its body left unread (an empty body): for walks of the headers alone. */
  skipBody(): Promise<RawMessage | null> {
    return this.advance(false);
  }

  private async advance(readBody: boolean): Promise<RawMessage | null> {
    const start = this.position;
    if (start === this.length) return null;
    const head = await this.read(this.offset + start, Math.min(8, this.length - start));
    const frame = this.frame(new DataView(head.buffer, head.byteOffset, head.byteLength), 0, start);
    if (frame === null) return null;
    const { metadataStart, metadataSize } = frame;
    const metadata = await this.read(this.offset + metadataStart, metadataSize);
    const { message, header, decodedFrom, bodyStart, bodyLength } = this.decode(metadata, start, metadataStart);
    if (readBody && bodyLength > MAX_BODY_BYTES) throw this.corrupt(`a message body of ${bodyLength} bytes is longer than one buffer can hold`, start);
    this.position = bodyStart + bodyLength;
    const body = !readBody || bodyLength === 0 ? new Uint8Array(0) : await this.read(this.offset + bodyStart, bodyLength);
    return { message, header, body, start, decodedFrom };
  }
}

/** The longest message body a stream read from a source may have: it is read into one buffer. */
const MAX_BODY_BYTES = constants.MAX_LENGTH;
/**
 * Every message of a stream, decoded as readIpcStream decodes them, with the
 * objects decoding made (the cursor, each message and its header): for
 * reader-shapes.ts, which keeps them.
 */
export function decodedMessageObjects(bytes: Uint8Array): unknown[] {
  const cursor = new MessageCursor(bytes, {});
  const objects: unknown[] = [cursor];
  for (let raw = cursor.next(); raw !== null; raw = cursor.next()) objects.push(raw, raw.message, raw.header);
  return objects;
}

/**
 * The columns of a record batch or dictionary batch, from one buffer per
 * region (8-aligned: arrow-js views 64-bit values in place): by
 * loadFlatColumns when `kinds` says every column is flat, else by
 * ColumnLoader (arrow-js's, with the checks and the missing dictionary it adds).
 */
async function loadColumns(
  header: RecordBatchHeader,
  body: Uint8Array,
  types: Schema['fields'][number]['type'][],
  kinds: FlatKind[] | null,
  dictionaries: Map<number, Vector>,
  version: MetadataVersion,
  messages: StreamCursor,
  messageStart: number,
  maxBufferBytes: number,
  borrowed: boolean,
): Promise<Data[]> {
  for (const region of header.buffers) {
    if (region.offset < 0 || region.length < 0 || region.offset + region.length > body.byteLength) {
      throw messages.corrupt(`buffer [${region.offset}, +${region.length}) lies outside the message body`, messageStart);
    }
  }
  try {
    let buffers: Uint8Array[];
    if (header.compression === null) {
      // the buffers are the body's bytes: counted against the limit too, as the sort writer's blocks are
      const total = header.buffers.reduce((sum, region) => sum + region.length, 0);
      if (total > maxBufferBytes) throw overLimit(messages, messageStart, `its buffers hold ${total} bytes`, maxBufferBytes);
      const bytes = borrowed ? body.slice() : body;
      // a caller's stream need not start 8-aligned in memory (a subarray of a larger read): such buffers are copied
      buffers = header.buffers.map((region) => aligned8(bytes.subarray(region.offset, region.offset + region.length)));
    } else {
      buffers = await decompressBody(header, body, messages, messageStart, maxBufferBytes, borrowed);
    }
    if (kinds !== null) return loadFlatColumns(types, kinds, header.nodes, buffers, dictionaries);
    return new ColumnLoader(buffers, header.nodes, header.buffers, dictionaries, version, header.variadicBufferCounts).visitMany(types);
  } catch (cause) {
    if (cause instanceof ShuffleError) throw cause;
    throw messages.corrupt(`cannot load record batch: ${(cause as Error).message}`, messageStart, cause);
  }
}

/** A record batch over maxBufferBytes: CS_CORRUPT_DATA, as the claim may be a damaged length, saying which limit it passed. */
function overLimit(messages: StreamCursor, messageStart: number, what: string, maxBufferBytes: number): ShuffleError {
  return messages.corrupt(`${what}, over the maxBufferBytes limit of ${maxBufferBytes} (a damaged length, or a limit too low for this batch)`, messageStart);
}

/**
 * Decompresses every buffer of a compressed body, each into an array of its
 * own (8-aligned, as arrow-js views 64-bit values in place); buffers stored
 * raw are views into the body. A `borrowed` body (the reader's read buffer,
 * refilled later) is copied for them: whole, once, when raw buffers make up
 * at least half of it (a small batch stored uncompressed is all raw: a copy
 * per buffer was an ArrayBuffer per buffer, 40 for a batch of 16 columns),
 * else buffer by buffer. Frames that decode fastest on this thread are decoded
 * at once (Codec.decompressSync); only the others wait for the libuv pool.
 * ```text
 * region bytes: int64 LE uncompressedLength | frame    (uncompressedLength >= 0)
 *               int64 LE -1                 | raw bytes
 *               (empty)                                  (length-0 buffer)
 * ```
 */
async function decompressBody(
  header: RecordBatchHeader,
  body: Uint8Array,
  messages: StreamCursor,
  messageStart: number,
  maxBufferBytes: number,
  borrowed: boolean,
): Promise<Uint8Array[]> {
  const { type, method } = header.compression!;
  // BUFFER (0), each buffer compressed on its own, is the only method the format defines (Arrow C++ refuses others too)
  if (method !== 0) throw new ShuffleError('CS_UNSUPPORTED_CODEC', `IPC body compression method ${Number(method)} is not supported (only BUFFER, 0)`);
  const codec = codecByArrowType(type);
  const regions = header.buffers;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  // each buffer's length prefix (null: too short for one), read once
  const prefixes = regions.map((region) => (region.length >= 8 ? view.getBigInt64(region.offset, true) : null));
  let rawBytes = 0;
  regions.forEach((region, index) => {
    if (prefixes[index] === -1n) rawBytes += region.length;
  });
  const rawSource = borrowed && rawBytes * 2 >= body.byteLength ? body.slice() : body;
  const pieces: Uint8Array[] = new Array(regions.length);
  const pending: Promise<void>[] = [];
  let total = 0;
  try {
    for (let index = 0; index < regions.length; index++) {
      const region = regions[index]!;
      if (region.length === 0) {
        pieces[index] = body.subarray(0, 0);
        continue;
      }
      const declared = prefixes[index]!;
      if (declared === null) throw messages.corrupt(`compressed buffer ${index} is shorter than its length prefix`, messageStart);
      if (declared === -1n) {
        total += region.length - 8;
        if (total > maxBufferBytes) throw overLimit(messages, messageStart, `buffer ${index} (stored raw) brings its buffers to ${total} bytes`, maxBufferBytes);
        const raw = rawSource.subarray(region.offset + 8, region.offset + region.length);
        pieces[index] = rawSource === body && borrowed ? raw.slice() : aligned8(raw);
        continue;
      }
      // lengths are checked before anything is allocated: a decompression bomb is refused, not attempted
      total += Number(declared);
      if (declared < 0n) throw messages.corrupt(`buffer ${index} claims ${declared} bytes uncompressed`, messageStart);
      if (declared > BigInt(maxBufferBytes) || total > maxBufferBytes) throw overLimit(messages, messageStart, `buffer ${index} claims ${declared} bytes uncompressed`, maxBufferBytes);
      const size = Number(declared);
      const payload = body.subarray(region.offset + 8, region.offset + region.length);
      const mismatch = codec.sizeMismatch(payload, size);
      if (mismatch !== null) throw messages.corrupt(`buffer ${index} claims ${declared} bytes uncompressed but ${mismatch}`, messageStart);
      const decoded = (out: Uint8Array): void => {
        if (out.byteLength !== size) throw messages.corrupt(`buffer ${index} decompressed to ${out.byteLength} bytes, its prefix says ${declared}`, messageStart);
        pieces[index] = aligned8(out);
      };
      const failure = (cause: unknown) => messages.corrupt(`cannot decompress buffer ${index}: ${(cause as Error).message}`, messageStart, cause);
      let out: Uint8Array | null;
      try {
        out = codec.decompressSync(payload, size);
      } catch (cause) {
        throw failure(cause);
      }
      if (out !== null) {
        decoded(out);
        continue;
      }
      const decoding = codec.decompress(payload, size).then(decoded, (cause: unknown) => {
        throw failure(cause);
      });
      decoding.catch(() => undefined); // awaited below
      pending.push(decoding);
    }
  } catch (error) {
    // a buffer refused here may come after one still decoding that fails too: the first in buffer order is reported
    pending.push(Promise.reject(error));
  }
  if (pending.length > 0) await firstFailureInOrder(pending);
  return pieces;
}

/**
 * Waits for every one of `work`, then throws the failure of the first that
 * failed, in the order given: with several damaged buffers, whichever the
 * libuv pool finished first was reported, so one batch read twice could
 * fail with two messages.
 */
async function firstFailureInOrder(work: readonly Promise<void>[]): Promise<void> {
  const settled = await Promise.allSettled(work);
  const failed = settled.find((outcome) => outcome.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}

/** `bytes`, or a copy of them when they do not start 8-aligned (arrow-js views 64-bit values in place). */
function aligned8(bytes: Uint8Array): Uint8Array {
  return bytes.byteOffset % 8 === 0 ? bytes : bytes.slice();
}

/**
 * A RecordBatch over uncompressed body buffers in IPC order (as a partition
 * buffer's snapshot produces them), loaded by arrow-js's own VectorLoader;
 * dictionary columns point into `dictionaries` (by dictionary id).
 */
export function recordBatchFromBuffers(
  schema: Schema,
  rows: number,
  nodes: readonly FieldNodeInfo[],
  buffers: readonly Uint8Array[],
  dictionaries: Map<number, Vector> = new Map(),
): RecordBatch {
  const children = loadFromBuffers(schema.fields.map((f) => f.type), nodes, buffers, dictionaries);
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children }));
}

/**
 * Like recordBatchFromBuffers, but the batch views `buffers` themselves (no
 * copy): for a caller that keeps them unchanged while the batch is in use. Each
 * buffer must start 8-aligned (arrow-js views 64-bit values in place).
 * arrow-js's CompressedVectorLoader takes the i-th buffer for the i-th region.
 */
export function recordBatchOverBuffers(schema: Schema, rows: number, nodes: readonly FieldNodeInfo[], buffers: Uint8Array[]): RecordBatch {
  const fieldNodes = nodes.map((n) => new FieldNode(n.length, n.nullCount));
  const regions = buffers.map((b) => new BufferRegion(0, b.byteLength));
  const children = new CompressedVectorLoader(buffers, fieldNodes, regions, new Map(), MetadataVersion.V5, variadicBufferCountsOf(nodes)).visitMany(schema.fields.map((f) => f.type));
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children }));
}

/** One column over uncompressed body buffers in IPC order (see recordBatchFromBuffers). */
export function dataFromBuffers(type: DataType, nodes: readonly FieldNodeInfo[], buffers: readonly Uint8Array[], dictionaries: Map<number, Vector> = new Map()): Data {
  return loadFromBuffers([type], nodes, buffers, dictionaries)[0]!;
}

/** The buffers are copied into one fresh body: callers hand over views into scratch memory they reuse. */
function loadFromBuffers(types: DataType[], nodes: readonly FieldNodeInfo[], buffers: readonly Uint8Array[], dictionaries: Map<number, Vector>): Data[] {
  const { body, regions } = assembleBody(buffers);
  const fieldNodes = nodes.map((n) => new FieldNode(n.length, n.nullCount));
  return new VectorLoader(body, fieldNodes, regions, dictionaries, MetadataVersion.V5, variadicBufferCountsOf(nodes)).visitMany(types);
}

/** Lays buffers out as an uncompressed IPC body: each at an 8-aligned offset. */
function assembleBody(pieces: readonly Uint8Array[]): { body: Uint8Array; regions: BufferRegion[] } {
  let total = 0;
  for (const piece of pieces) total += piece.byteLength + padding8(piece.byteLength);
  const out = new Uint8Array(total);
  const regions: BufferRegion[] = [];
  let offset = 0;
  for (const piece of pieces) {
    out.set(piece, offset);
    regions.push(new BufferRegion(offset, piece.byteLength));
    offset += piece.byteLength + padding8(piece.byteLength);
  }
  return { body: out, regions };
}
