import { Data, DataType, RecordBatch, Struct, Vector, type Schema } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { cutToRows } from './cut-to-rows.js';

/**
 * How a batch's buffers cross to another thread:
 * - `exclusive` (default): an ArrayBuffer is transferred (moved, not copied)
 *   when exactly one buffer of the batch covers all of it, unless it is a
 *   validity bitmap or Bool values or belongs to a slice (see isSlice); every
 *   other buffer is copied into a fresh ArrayBuffer, which is transferred.
 *   Views into a larger ArrayBuffer are copied because the rest of it may
 *   belong to someone else: the batches of a table read from one IPC file are
 *   all views into the file's bytes, and moving those bytes would empty every
 *   other batch. The sender
 *   hands the batch over: its transferred buffers are detached (length 0) once
 *   it is sent, so neither it nor anything sharing its typed arrays (a slice of
 *   it, another batch made from the same arrays) may be used afterwards (sending
 *   it again is CS_INVALID_ARGUMENT).
 * - `copy`: every buffer is copied; the sender keeps a usable batch.
 * A slice's copy holds only the bytes of its rows (see cutToRows), but for a
 * slice from row 0 of Bool columns alone, which cannot be told from its parent:
 * its bitmaps are copied whole (an eighth of a byte per row of the parent).
 * SharedArrayBuffers are shared as they are in both modes (neither copied nor moved).
 * Dictionaries are always copied: a batch stream shares them from batch to
 * batch (see SentDictionaries).
 */
export type TransferMode = 'exclusive' | 'copy';

/** One Data node as plain data: [valueOffsets, values, nullBitmap, typeIds] as arrow-js orders them. */
export interface TransferableData {
  offset: number;
  length: number;
  nullCount: number;
  buffers: (ArrayBufferView | null)[];
  variadic: ArrayBufferView[];
  children: TransferableData[];
  /** a Dictionary column's dictionary, one entry per chunk */
  dictionary: TransferableChunk[] | null;
}

/** A dictionary chunk: its id in the stream, and its data unless the receiver has it already (null). */
export interface TransferableChunk {
  id: number;
  data: TransferableData | null;
}

/**
 * The sending side of a stream of batches: which dictionary chunks (Data) the
 * receiver has. A chunk the batch before already carried is sent as its id
 * alone, so the receiver rebuilds one dictionary Vector where the sender had
 * one: for two columns sharing it (a writer refuses two different
 * dictionaries of one id), and from batch to batch (a writer takes a
 * dictionary it has seen, or one that extends it with new chunks, as an IPC
 * delta, without sending it again to every partition).
 *
 * Protocol: per batch, batchToTransferable, then `commit()` once it is posted,
 * or `rollback()` if it was not. The receiver keeps the chunks of the last
 * batch only, so one last sent earlier is sent again.
 */
export class SentDictionaries {
  private previous = new Map<Data, number>();
  private current = new Map<Data, number>();
  private nextId = 0;

  /** `chunk`'s id, and whether the receiver has it (else it must be sent). */
  take(chunk: Data): { id: number; known: boolean } {
    const id = this.current.get(chunk) ?? this.previous.get(chunk);
    if (id !== undefined) {
      this.current.set(chunk, id);
      return { id, known: true };
    }
    const fresh = this.nextId++;
    this.current.set(chunk, fresh);
    return { id: fresh, known: false };
  }

  /** The batch was posted: what it carried is what the receiver keeps. */
  commit(): void {
    this.previous = this.current;
    this.current = new Map();
  }

  /** The batch was not posted. */
  rollback(): void {
    this.current = new Map();
  }
}

/** The receiving side (see SentDictionaries): the chunks and Vectors of the last batch and this one. */
export class ReceivedDictionaries {
  private previous = new Map<number, Data>();
  private current = new Map<number, Data>();
  private previousVectors = new Map<string, Vector>();
  private currentVectors = new Map<string, Vector>();

  chunk(id: number, data: Data | null): Data {
    const chunk = data ?? this.current.get(id) ?? this.previous.get(id);
    if (chunk === undefined) throw new ShuffleError('CS_INVALID_ARGUMENT', `a transferred batch refers to dictionary chunk ${id}, which the batch before did not carry`);
    this.current.set(id, chunk);
    return chunk;
  }

  /** One Vector for one sequence of chunks, as the sender had. */
  vector(ids: readonly number[], chunks: Data[]): Vector {
    const key = ids.join(',');
    const vector = this.currentVectors.get(key) ?? this.previousVectors.get(key) ?? new Vector(chunks);
    this.currentVectors.set(key, vector);
    return vector;
  }

  /** The batch is rebuilt: its chunks are the ones the next may refer to. */
  endBatch(): void {
    this.previous = this.current;
    this.current = new Map();
    this.previousVectors = this.currentVectors;
    this.currentVectors = new Map();
  }
}

/** A RecordBatch without its schema (sent once per stream), ready for postMessage with `transfer`. */
export interface TransferableBatch {
  data: TransferableData;
}

export interface PreparedTransfer {
  batch: TransferableBatch;
  /** the postMessage transfer list */
  transfer: ArrayBuffer[];
  /** bytes moved without copying, and bytes that had to be copied */
  transferredBytes: number;
  copiedBytes: number;
}

/**
 * Prepares `batch` for postMessage (see TransferMode for what happens to the
 * sender's batch); `sent`: the stream it belongs to (by default a stream of
 * its own: every dictionary sent whole).
 */
export function batchToTransferable(batch: RecordBatch, mode: TransferMode = 'exclusive', sent: SentDictionaries = new SentDictionaries()): PreparedTransfer {
  if (mode !== 'exclusive' && mode !== 'copy') throw new ShuffleError('CS_INVALID_ARGUMENT', `transfer mode must be 'exclusive' or 'copy', got ${JSON.stringify(mode)}`);
  // how many views of this batch each ArrayBuffer backs: only a buffer backing one view, wholly, may move
  const viewsPer = new Map<ArrayBufferLike, number>();
  visitViews(batch.data, (view) => {
    if (isDetached(view.buffer)) {
      throw new ShuffleError(
        'CS_INVALID_ARGUMENT',
        "a batch whose memory was moved to another thread cannot be sent: it, or a batch sharing its arrays, was sent before with transfer 'exclusive' (send batches used again with 'copy')",
      );
    }
    viewsPer.set(view.buffer, (viewsPer.get(view.buffer) ?? 0) + 1);
  });
  const out: PreparedTransfer = { batch: { data: null as unknown as TransferableData }, transfer: [], transferredBytes: 0, copiedBytes: 0 };
  const copy = (view: ArrayBufferView): ArrayBufferView => {
    if (isShared(view.buffer)) return view;
    const copied = copyView(view);
    if (copied.byteLength > 0) out.transfer.push(copied.buffer as ArrayBuffer);
    out.copiedBytes += view.byteLength;
    return copied;
  };
  const send = (view: ArrayBufferView): ArrayBufferView => {
    const buffer = view.buffer;
    const whole = view.byteOffset === 0 && view.byteLength === buffer.byteLength && viewsPer.get(buffer) === 1;
    if (mode === 'exclusive' && whole && buffer.byteLength > 0 && !isShared(buffer)) {
      out.transfer.push(buffer as ArrayBuffer);
      out.transferredBytes += view.byteLength;
      return view;
    }
    return copy(view);
  };
  out.batch.data = encodeData(batch.data, { send, copy, sent });
  return out;
}

/** Rebuilds the batch on the receiving side; `schema` is the one the sender's batches have, `received` the stream's (see SentDictionaries). */
export function batchFromTransferable(batch: TransferableBatch, schema: Schema, received: ReceivedDictionaries = new ReceivedDictionaries()): RecordBatch {
  const rebuilt = new RecordBatch(schema, decodeData(batch.data, new Struct(schema.fields), received) as Data<Struct>);
  received.endBatch();
  return rebuilt;
}

interface Encoding {
  /** a buffer of the batch: moved or copied (TransferMode) */
  send: (view: ArrayBufferView) => ArrayBufferView;
  /** a buffer of a dictionary: always copied (a later batch may need it sent again) */
  copy: (view: ArrayBufferView) => ArrayBufferView;
  sent: SentDictionaries;
}

function encodeData(node: Data, encoding: Encoding, send = encoding.send): TransferableData {
  // a slice's buffers are copied: its siblings and its parent hold them too (see isSlice); what is copied is cut to its rows
  const own = send === encoding.send && !isSlice(node) ? send : encoding.copy;
  const data = own === encoding.copy ? cutToRows(node) : node;
  // the validity bitmap (buffer 2) and Bool values (buffer 1) are copied always: see isSlice
  const bits = (i: number) => i === 2 || (i === 1 && DataType.isBool(data.type));
  const buffers = [data.valueOffsets, data.values, data.nullBitmap, data.typeIds] as (ArrayBufferView | undefined)[];
  return {
    offset: data.offset,
    length: data.length,
    nullCount: data.nullCount,
    buffers: buffers.map((b, i) => (b === undefined || b === null ? null : bits(i) ? encoding.copy(b) : own(b))),
    variadic: (data.variadicBuffers ?? []).map((b) => own(b)),
    children: data.children.map((child) => encodeData(child, encoding, own)),
    dictionary:
      data.dictionary === undefined
        ? null
        : data.dictionary.data.map((chunk) => {
            const { id, known } = encoding.sent.take(chunk);
            return { id, data: known ? null : encodeData(chunk, encoding, encoding.copy) };
          }),
  };
}

function decodeData(t: TransferableData, type: DataType, received: ReceivedDictionaries): Data {
  const buffers = t.buffers.map((b) => b ?? undefined);
  const children = t.children.map((child, i) => {
    const field = type.children?.[i];
    if (field === undefined) throw new ShuffleError('CS_SCHEMA_MISMATCH', `a transferred batch has more children than its type ${String(type)}`);
    return decodeData(child, field.type, received);
  });
  let dictionary: Vector | undefined;
  if (t.dictionary !== null) {
    const valueType = (type as DataType & { dictionary?: DataType }).dictionary;
    if (valueType === undefined) throw new ShuffleError('CS_SCHEMA_MISMATCH', `a transferred batch has a dictionary where its type ${String(type)} has none`);
    const chunks = t.dictionary.map(({ id, data }) => received.chunk(id, data === null ? null : decodeData(data, valueType, received)));
    dictionary = received.vector(
      t.dictionary.map((c) => c.id),
      chunks,
    );
  }
  return new Data(type, t.offset, t.length, t.nullCount, buffers as never, children, dictionary, t.variadic as Uint8Array[]);
}

/**
 * Whether `data` is a slice of a longer node. arrow-js's `slice()` cuts a
 * node's offsets, fixed-width values, views and type ids to its rows, but
 * leaves whole what sibling slices share: the validity bitmap, Bool values,
 * binary data, variadic buffers, and the children of lists, maps and dense
 * unions. Moving one of those with the first slice sent left the others
 * detached. A slice is told by an offset other than 0 or a cut buffer (one
 * that is not all of its ArrayBuffer); its buffers and its children's are
 * copied, cut to its rows (cutToRows). Bit buffers are copied always (an eighth of a byte per row): a
 * slice of Bool columns alone has no cut buffer to tell it by.
 */
function isSlice(data: Data): boolean {
  if (data.offset !== 0) return true;
  const cut = data.valueOffsets ?? (DataType.isBool(data.type) ? undefined : data.values); // (binary types have offsets)
  // (a slice of no rows has its buffers cut to nothing: an empty view of a buffer that is not empty)
  return [cut, data.typeIds].some((view) => view !== undefined && view !== null && (view.byteOffset !== 0 || view.byteLength !== view.buffer.byteLength));
}

function visitViews(data: Data, visit: (view: ArrayBufferView) => void): void {
  for (const b of [data.valueOffsets, data.values, data.nullBitmap, data.typeIds] as (ArrayBufferView | undefined)[]) if (b) visit(b);
  for (const b of data.variadicBuffers ?? []) visit(b);
  for (const child of data.children) visitViews(child, visit);
  for (const d of data.dictionary?.data ?? []) visitViews(d, visit);
}

/** A fresh copy of exactly the view's bytes, of the same typed-array kind. */
function copyView(view: ArrayBufferView): ArrayBufferView {
  const bytes = new Uint8Array(view.byteLength);
  bytes.set(new Uint8Array(view.buffer, view.byteOffset, view.byteLength));
  const Kind = view.constructor as new (buffer: ArrayBuffer, byteOffset: number, length: number) => ArrayBufferView;
  const elementSize = (view as ArrayBufferView & { BYTES_PER_ELEMENT?: number }).BYTES_PER_ELEMENT ?? 1;
  return view instanceof DataView ? new DataView(bytes.buffer) : new Kind(bytes.buffer, 0, view.byteLength / elementSize);
}

/** Whether `buffer` was transferred away (Node 20 has no `ArrayBuffer.prototype.detached`: a view of it cannot be made). */
function isDetached(buffer: ArrayBufferLike): boolean {
  if (buffer.byteLength > 0 || isShared(buffer)) return false;
  try {
    new Uint8Array(buffer, 0, 0);
    return false;
  } catch {
    return true;
  }
}

function isShared(buffer: ArrayBufferLike): boolean {
  return typeof SharedArrayBuffer !== 'undefined' && buffer instanceof SharedArrayBuffer;
}
