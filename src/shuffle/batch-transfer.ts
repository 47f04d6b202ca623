import { Data, RecordBatch, Struct, Vector, type DataType, type Schema } from 'apache-arrow';
import { ShuffleError } from '../errors.js';

/**
 * How a batch's buffers cross to another thread:
 * - `exclusive` (default): an ArrayBuffer is transferred (moved, not copied)
 *   when exactly one buffer of the batch covers all of it; every other buffer is
 *   copied into a fresh ArrayBuffer, which is transferred. Views into a larger
 *   ArrayBuffer are copied because the rest of it may belong to someone else:
 *   the batches of a table read from one IPC file are all views into the file's
 *   bytes, and moving those bytes would empty every other batch. The sender
 *   hands the batch over: its transferred buffers are detached (length 0) once
 *   it is sent, so neither it nor anything sharing its typed arrays (a slice of
 *   it, another batch made from the same arrays) may be used afterwards.
 * - `copy`: every buffer is copied; the sender keeps a usable batch.
 * SharedArrayBuffers are shared as they are in both modes (neither copied nor moved).
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
  dictionary: TransferableData[] | null;
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

/** Prepares `batch` for postMessage (see TransferMode for what happens to the sender's batch). */
export function batchToTransferable(batch: RecordBatch, mode: TransferMode = 'exclusive'): PreparedTransfer {
  if (mode !== 'exclusive' && mode !== 'copy') throw new ShuffleError('CS_INVALID_ARGUMENT', `transfer mode must be 'exclusive' or 'copy', got ${JSON.stringify(mode)}`);
  // how many views of this batch each ArrayBuffer backs: only a buffer backing one view, wholly, may move
  const viewsPer = new Map<ArrayBufferLike, number>();
  visitViews(batch.data, (view) => viewsPer.set(view.buffer, (viewsPer.get(view.buffer) ?? 0) + 1));
  const out: PreparedTransfer = { batch: { data: null as unknown as TransferableData }, transfer: [], transferredBytes: 0, copiedBytes: 0 };
  const send = (view: ArrayBufferView): ArrayBufferView => {
    const buffer = view.buffer;
    if (isShared(buffer)) return view;
    const whole = view.byteOffset === 0 && view.byteLength === buffer.byteLength && viewsPer.get(buffer) === 1;
    if (mode === 'exclusive' && whole && buffer.byteLength > 0) {
      out.transfer.push(buffer as ArrayBuffer);
      out.transferredBytes += view.byteLength;
      return view;
    }
    const copy = copyView(view);
    if (copy.byteLength > 0) out.transfer.push(copy.buffer as ArrayBuffer);
    out.copiedBytes += view.byteLength;
    return copy;
  };
  out.batch.data = encodeData(batch.data, send);
  return out;
}

/** Rebuilds the batch on the receiving side; `schema` is the one the sender's batches have. */
export function batchFromTransferable(batch: TransferableBatch, schema: Schema): RecordBatch {
  return new RecordBatch(schema, decodeData(batch.data, new Struct(schema.fields)) as Data<Struct>);
}

function encodeData(data: Data, send: (view: ArrayBufferView) => ArrayBufferView): TransferableData {
  const buffers = [data.valueOffsets, data.values, data.nullBitmap, data.typeIds] as (ArrayBufferView | undefined)[];
  return {
    offset: data.offset,
    length: data.length,
    nullCount: data.nullCount,
    buffers: buffers.map((b) => (b === undefined || b === null ? null : send(b))),
    variadic: (data.variadicBuffers ?? []).map((b) => send(b)),
    children: data.children.map((child) => encodeData(child, send)),
    dictionary: data.dictionary === undefined ? null : data.dictionary.data.map((d) => encodeData(d, send)),
  };
}

function decodeData(t: TransferableData, type: DataType): Data {
  const buffers = t.buffers.map((b) => b ?? undefined);
  const children = t.children.map((child, i) => {
    const field = type.children?.[i];
    if (field === undefined) throw new ShuffleError('CS_SCHEMA_MISMATCH', `a transferred batch has more children than its type ${String(type)}`);
    return decodeData(child, field.type);
  });
  let dictionary: Vector | undefined;
  if (t.dictionary !== null) {
    const valueType = (type as DataType & { dictionary?: DataType }).dictionary;
    if (valueType === undefined) throw new ShuffleError('CS_SCHEMA_MISMATCH', `a transferred batch has a dictionary where its type ${String(type)} has none`);
    dictionary = new Vector(t.dictionary.map((d) => decodeData(d, valueType)));
  }
  return new Data(type, t.offset, t.length, t.nullCount, buffers as never, children, dictionary, t.variadic as Uint8Array[]);
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

function isShared(buffer: ArrayBufferLike): boolean {
  return typeof SharedArrayBuffer !== 'undefined' && buffer instanceof SharedArrayBuffer;
}
