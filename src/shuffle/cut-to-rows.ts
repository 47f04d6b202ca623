import { Data, DataType, type DenseUnion } from 'apache-arrow';
import { MAX_INLINE_BYTES, VIEW_BYTES, viewValueOf, type ViewValue } from '../format/binary-view.js';

/**
 * A node cut to the bytes of its rows, so that copying a slice copies those
 * and not its parent's. arrow-js's `slice()` cuts offsets, fixed-width
 * values, views and type ids to the slice's rows, but leaves whole what
 * sibling slices share: bitmaps, Bool values, binary data, variadic buffers,
 * and the children of lists, maps and dense unions. The result holds views
 * into the node's buffers (offsets rebased and view columns' views rewritten
 * into fresh arrays); the caller copies them.
 *
 * ```text
 * bit buffers    cut at a byte boundary; the offset keeps the rest
 *                (offset 13: bytes from 13 >> 3 = 1, offset 13 & 7 = 5)
 * spans          binary data and list children cut to what the offsets cover,
 *                the offsets rebased to start at 0
 *                (offsets [3, 5, 9] over "aaabbcccc": data "bbcccc", offsets [0, 2, 6])
 * dense unions   each child cut to the span its rows' offsets cover, each
 *                row's offset rebased by its child's start
 * view columns   the values longer than 12 bytes gathered into one variadic
 *                buffer and their views pointed at it, when that is smaller
 * ```
 * Children that arrow-js slices with their parent (structs, sparse unions,
 * fixed-size lists) are slices themselves, cut when they are copied.
 */
export function cutToRows(node: Data): Data {
  const { type, offset, length } = node;
  const firstByte = offset >> 3;
  const bitOffset = offset & 7;
  const cutBits = <T extends Uint8Array | undefined>(bits: T): T =>
    bits === undefined || bits === null || bits.byteLength === 0 ? bits : (bits.subarray(firstByte, firstByte + ((bitOffset + length + 7) >> 3)) as T);
  const nullBitmap = cutBits(node.nullBitmap);
  let valueOffsets = node.valueOffsets as Int32Array | BigInt64Array | undefined;
  let values: unknown = DataType.isBool(type) ? cutBits(node.values as Uint8Array) : node.values;
  let children = node.children;
  let variadic = node.variadicBuffers;
  const span = hasSpans(type) ? spanOf(node) : null;
  if (span !== null) {
    const { start, end } = span;
    if (start !== 0) valueOffsets = rebase(valueOffsets!, start, length + 1);
    if (children.length > 0) children = children.map((child) => child.slice(start, end - start));
    else values = (values as Uint8Array).subarray(start, end);
  } else if (DataType.isDenseUnion(type)) {
    const cut = cutDenseUnion(node as Data<DenseUnion>);
    if (cut !== null) ({ valueOffsets, children } = cut);
  } else if ((DataType.isUtf8View(type) || DataType.isBinaryView(type)) && variadic.length > 0) {
    const allValid = nullBitmap === undefined || nullBitmap === null || nullBitmap.byteLength === 0 || node.nullCount === 0;
    const isValid = (row: number) => allValid || ((nullBitmap[(bitOffset + row) >> 3]! >> ((bitOffset + row) & 7)) & 1) === 1;
    const cut = cutViews(node.values as Uint8Array, variadic, length, isValid);
    if (cut !== null) ({ views: values, variadic } = cut);
  }
  const buffers = [valueOffsets, values, nullBitmap, node.typeIds];
  return new Data(type, bitOffset, length, node.nullCount, buffers as never, children, node.dictionary, variadic as Uint8Array[]);
}

/** Types whose offsets say where each row's bytes (binary) or items (lists, maps) are, in one span. */
function hasSpans(type: DataType): boolean {
  return DataType.isUtf8(type) || DataType.isBinary(type) || DataType.isLargeUtf8(type) || DataType.isLargeBinary(type) || DataType.isList(type) || DataType.isLargeList(type) || DataType.isMap(type);
}

/**
 * What the rows' offsets cover, or null (left whole, for the writer to
 * refuse) when they do not fit the data or the child they point into.
 */
function spanOf(node: Data): { start: number; end: number } | null {
  const offsets = node.valueOffsets as Int32Array | BigInt64Array | undefined | null;
  if (offsets === undefined || offsets === null || offsets.length <= node.length) return null;
  const start = Number(offsets[0]);
  const end = Number(offsets[node.length]);
  const limit = node.children.length > 0 ? node.children[0]!.length : (node.values as Uint8Array | undefined)?.length ?? 0;
  return start >= 0 && start <= end && end <= limit ? { start, end } : null;
}

/** The first `count` offsets less `start`, in a fresh array of their kind. */
function rebase(offsets: Int32Array | BigInt64Array, start: number, count: number): Int32Array | BigInt64Array {
  if (offsets instanceof BigInt64Array) {
    const big = BigInt(start);
    const rebased = new BigInt64Array(count);
    for (let i = 0; i < count; i++) rebased[i] = offsets[i]! - big;
    return rebased;
  }
  const rebased = new Int32Array(count);
  for (let i = 0; i < count; i++) rebased[i] = offsets[i]! - start;
  return rebased;
}

/** Each child cut to the rows this slice's offsets use; null (left whole, for the writer to refuse) for offsets or type ids that point nowhere. */
function cutDenseUnion(node: Data<DenseUnion>): { valueOffsets: Int32Array; children: Data[] } | null {
  const { length, typeIds, valueOffsets, children } = node;
  if (typeIds === undefined || valueOffsets === undefined || typeIds.length < length || valueOffsets.length < length) return null;
  const childOf = node.type.typeIdToChildIndex;
  const first = children.map(() => Number.POSITIVE_INFINITY);
  const last = children.map(() => -1);
  for (let row = 0; row < length; row++) {
    const child = childOf[typeIds[row]!];
    const at = valueOffsets[row]!;
    if (child === undefined || children[child] === undefined || at < 0 || at >= children[child].length) return null;
    if (at < first[child]!) first[child] = at;
    if (at > last[child]!) last[child] = at;
  }
  const rebased = new Int32Array(length);
  for (let row = 0; row < length; row++) rebased[row] = valueOffsets[row]! - first[childOf[typeIds[row]!]!]!;
  return { valueOffsets: rebased, children: children.map((child, i) => (last[i]! < 0 ? child.slice(0, 0) : child.slice(first[i]!, last[i]! + 1 - first[i]!))) };
}

/**
 * The rows' views, with their long values gathered into one fresh variadic
 * buffer, or null (left whole, for the writer to refuse) when that would not
 * be smaller or a view points outside its buffers. A null row's view becomes an empty value.
 */
function cutViews(views: Uint8Array, variadic: readonly Uint8Array[], length: number, isValid: (row: number) => boolean): { views: Uint8Array; variadic: Uint8Array[] } | null {
  if (views.byteLength < length * VIEW_BYTES) return null;
  const view = new DataView(views.buffer, views.byteOffset, views.byteLength);
  const value: ViewValue = { bytes: views, start: 0, length: 0 };
  let longBytes = 0;
  for (let row = 0; row < length; row++) {
    if (!isValid(row)) continue;
    if (viewValueOf(views, view, variadic, row, value) === null) return null;
    if (value.length > MAX_INLINE_BYTES) longBytes += value.length;
  }
  if (longBytes >= variadic.reduce((sum, buffer) => sum + buffer.byteLength, 0)) return null;
  const cutViews = views.slice(0, length * VIEW_BYTES);
  const out = new DataView(cutViews.buffer);
  const data = new Uint8Array(longBytes);
  let written = 0;
  for (let row = 0; row < length; row++) {
    const at = row * VIEW_BYTES;
    if (!isValid(row)) {
      cutViews.fill(0, at, at + VIEW_BYTES);
      continue;
    }
    viewValueOf(views, view, variadic, row, value);
    if (value.length <= MAX_INLINE_BYTES) continue;
    data.set(value.bytes.subarray(value.start, value.start + value.length), written);
    out.setInt32(at + 8, 0, true);
    out.setInt32(at + 12, written, true);
    written += value.length;
  }
  return { views: cutViews, variadic: [data] };
}
