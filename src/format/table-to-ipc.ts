import { Data, RecordBatch, Table, tableToIPC, Type, UnionMode, Vector, vectorFromArray, type DataType, type Struct, type Union } from 'apache-arrow';
import { truncateBitmap } from 'apache-arrow/util/bit';
import { ShuffleError } from '../errors.js';
import { MAX_INLINE_BYTES, VIEW_BYTES, viewValueOf, type ViewValue } from './binary-view.js';
import { withDisjointBuffers } from './disjoint-buffers.js';

/**
 * arrow-js's tableToIPC (an IPC stream, uncompressed) for any table or batch,
 * with its view columns (Utf8View, BinaryView) written as they read.
 *
 * arrow-js 21.2.0 writes a sliced view column wrong: `Data.slice` already
 * cuts the views buffer to the slice, and the IPC writer cuts it again by the
 * slice's offset, so it writes the views of later rows, or none at all
 * (readers then refuse the batch):
 *
 * ```text
 * views of rows 0..3             v0 v1 v2 v3
 * slice(1, 1): views, offset 1   v1             (already cut)
 * written: views.subarray(1 * 16, 2 * 16)       (empty: the slice has one view)
 * ```
 * And a slice keeps every variadic buffer of the column whole, so each
 * one-row slice of a sample (range bounds) would carry all of the sample's
 * long strings. The view child of a list whose offsets do not start at 0 is
 * such a slice too (the writer cuts the child to the list's values).
 *
 * So a view column that is sliced, or whose variadic buffers hold bytes its
 * views do not point at, is rebuilt at offset 0 as the writers build theirs
 * (binary-view.ts): its views copied, each long value copied into one data
 * buffer and its view pointed there (no buffer when no value is long, where
 * the writers send an empty one: both are valid Arrow), the validity bits
 * shifted to bit 0, null rows' views zeroed. A list over views whose
 * offsets do not start at 0 gets them rebased and its child cut to its
 * values.
 *
 * And a slice of a Null column has arrow-js's "null count unknown" (-1),
 * which arrow-js counts from the validity bitmap when asked, but a Null
 * column has none, so its IPC writer writes -1; the spec wants the column's
 * length (every row of a Null column is null), and arrow-rs refuses -1. The
 * writer itself slices a list's or map's child to its values, so a Null
 * column there is always such a slice. A Null column therefore gets a
 * bitmap of zeros (which the writer does not write: a Null column has no
 * buffers), from which every slice of it counts its nulls.
 *
 * And buffers that overlap in memory (columns sharing a vector) are copied
 * apart first, as arrow-js's writer loses bytes of them (disjoint-buffers.ts).
 *
 * At any depth, and in dictionaries; everything else goes as it is.
 */
export function tableToIpcStream(data: Table | RecordBatch): Uint8Array {
  const table = data instanceof RecordBatch ? new Table(data) : data;
  const dictionaries = new Map<Vector, Vector>();
  const batches = table.batches.map((batch) => {
    const struct = withDisjointBuffers(writable(batch.data as Data, dictionaries));
    return struct === batch.data ? batch : new RecordBatch(batch.schema, struct as Data<Struct>);
  });
  // (the table itself when no batch changed: nothing is rebuilt for the common case)
  return tableToIPC(batches.every((batch, i) => batch === table.batches[i]) ? table : new Table(table.schema, batches), 'stream');
}

/**
 * `data` with its view columns compacted, its lists over views rebased and its Null columns
 * given a bitmap of zeros (see tableToIpcStream); `data` itself when nothing needs it.
 */
function writable(data: Data, dictionaries: Map<Vector, Vector>): Data {
  if (data.length === 0) return wholeEmpty(data); // arrow-js writes empty buffers for it
  const type = data.type as DataType;
  if (type.typeId === Type.Null) {
    // (a bitmap with a bit set, which no reader makes, would give arrow-js's slices fewer nulls than rows)
    const zeros = data.nullBitmap !== undefined && data.nullBitmap.byteLength > 0 && data.nullCount === data.length && data.nullBitmap.every((byte) => byte === 0);
    return zeros ? data : new Data(type, 0, data.length, data.length, { [2]: new Uint8Array((data.length + 7) >> 3) });
  }
  if (isView(type)) return compactViews(data);
  if (isListWithOffsets(type) && containsView(type)) {
    const offsets = data.valueOffsets as Int32Array | BigInt64Array;
    const begin = Number(offsets[0]!);
    if (begin !== 0) {
      const end = Number(offsets[data.length]!);
      const rebased = offsets instanceof BigInt64Array ? offsets.map((o) => o - BigInt(begin)) : offsets.map((o) => o - begin);
      const child = writable((data.children[0] as Data).slice(begin, end - begin), dictionaries);
      return new Data(type, data.offset, data.length, data.nullCount, { [0]: rebased, [2]: data.nullBitmap as Uint8Array }, [child]);
    }
  }
  if (type.typeId === Type.Union && (type as Union).mode === UnionMode.Dense && data.offset > 0 && containsView(type)) {
    // the writer slices a sliced dense union's children itself, as it does a list's; no caller of this sends one
    throw new ShuffleError('CS_UNSUPPORTED_TYPE', `a sliced dense union with view columns cannot be written as IPC here (${String(type)})`);
  }
  const children = data.children.map((child) => writable(child as Data, dictionaries));
  let dictionary = data.dictionary;
  if (dictionary !== undefined) {
    let rebuilt = dictionaries.get(dictionary);
    if (rebuilt === undefined) {
      const chunks = (dictionary.data as Data[]).map((chunk) => withDisjointBuffers(writable(chunk, dictionaries)));
      rebuilt = chunks.every((chunk, i) => chunk === dictionary!.data[i]) ? dictionary : new Vector(chunks);
      dictionaries.set(dictionary, rebuilt);
    }
    dictionary = rebuilt;
  }
  if (dictionary === data.dictionary && children.every((child, i) => child === data.children[i])) return data;
  return new Data(type, data.offset, data.length, data.nullCount, data, children, dictionary, data.variadicBuffers);
}

/**
 * A view column at offset 0 whose one variadic buffer (none when no value is
 * long) holds exactly the long values its valid rows point at, in row order; `data` itself when it is
 * that already (as the writers' and reader's columns are).
 */
function compactViews(data: Data): Data {
  const views = data.values as Uint8Array; // cut to the slice: row i's view at i * VIEW_BYTES
  const view = new DataView(views.buffer, views.byteOffset, views.byteLength);
  const variadic = data.variadicBuffers as readonly Uint8Array[];
  const valid = (i: number) => data.getValid(i);
  const value: ViewValue = { bytes: views, start: 0, length: 0 };
  const valueAt = (i: number) => {
    if (viewValueOf(views, view, variadic, i, value) === null) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `the view of row ${i} of a ${String(data.type)} column points outside its ${variadic.length} variadic buffers`, { row: i });
    }
    return value;
  };
  let longBytes = 0;
  for (let i = 0; i < data.length; i++) if (valid(i) && valueAt(i).length > MAX_INLINE_BYTES) longBytes += value.length;
  const heldBytes = variadic.reduce((sum, buffer) => sum + buffer.byteLength, 0);
  if (data.offset === 0 && longBytes === heldBytes && variadic.length <= 1) return data;

  const compacted = new Uint8Array(data.length * VIEW_BYTES);
  const out = new DataView(compacted.buffer);
  const bytes = new Uint8Array(longBytes);
  let at = 0;
  for (let i = 0; i < data.length; i++) {
    if (!valid(i)) continue; // a null row's view stays zero
    const { bytes: from, start, length } = valueAt(i);
    compacted.set(views.subarray(i * VIEW_BYTES, i * VIEW_BYTES + 8), i * VIEW_BYTES); // length, and the inline value or prefix
    if (length <= MAX_INLINE_BYTES) {
      compacted.set(views.subarray(i * VIEW_BYTES + 8, (i + 1) * VIEW_BYTES), i * VIEW_BYTES + 8);
    } else {
      bytes.set(from.subarray(start, start + length), at);
      out.setInt32(i * VIEW_BYTES + 8, 0, true); // buffer index
      out.setInt32(i * VIEW_BYTES + 12, at, true);
      at += length;
    }
  }
  const nullBitmap = data.nullCount > 0 ? truncateBitmap(data.offset, data.length, data.nullBitmap as Uint8Array) : new Uint8Array(0);
  return new Data(data.type, 0, data.length, data.nullCount, { [1]: compacted, [2]: nullBitmap }, [], undefined, longBytes > 0 ? [bytes] : []);
}

function isView(type: DataType): boolean {
  return type.typeId === Type.Utf8View || type.typeId === Type.BinaryView;
}

/** Lists whose writer cuts their child to their values (fixed-size lists are cut by Data.slice itself). */
function isListWithOffsets(type: DataType): boolean {
  return type.typeId === Type.List || type.typeId === Type.LargeList || type.typeId === Type.Map;
}

/** Whether a view column is in `type`'s tree (not counting dictionaries, whose values are written on their own). */
function containsView(type: DataType): boolean {
  return isView(type) || (type.children ?? []).some((field) => containsView(field.type as DataType));
}

/**
 * An empty column as arrow-js's writer needs it. arrow-js's own empty columns
 * (makeData of a type alone, as arrow-js gives a dictionary column no
 * dictionary batch came for) have no child Data, and its writer fails on them
 * with a TypeError. Our reader makes such dictionaries whole itself
 * (missing-dictionary.ts); this is for the tables callers hand in (range
 * bounds). A builder's empty column has every level.
 */
function wholeEmpty(data: Data): Data {
  return hasEveryChild(data) ? data : (vectorFromArray([], data.type as DataType).data[0] ?? data);
}

function hasEveryChild(data: Data): boolean {
  const type = data.type as DataType;
  if (type.typeId === Type.Dictionary) return true; // (its values are its dictionary, made whole on their own)
  const children = (data.children ?? []) as (Data | undefined)[];
  return children.length >= (type.children?.length ?? 0) && children.every((child) => child !== undefined && child !== null && hasEveryChild(child));
}
