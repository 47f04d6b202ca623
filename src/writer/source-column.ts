import type { Data, Vector } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { VIEW_BYTES, viewValueOf, type ViewValue } from '../format/binary-view.js';
import type { ColumnLayout } from './column-layout.js';

/**
 * One input column prepared for splitting: typed views over its buffers,
 * built once per batch so the per-partition loops only index. A nested
 * column is a tree of them, parallel to its layout.
 *
 * arrow-js slices buffers unevenly (see the platform notes): fixed-width
 * values, dictionary indices, union type ids and every offsets buffer are
 * sub-arrayed to the slice, while validity and boolean values are not (row i
 * is bit `offset + i`). Offsets stay absolute into the unsliced data or child
 * (binary, list, map, dense union), whereas the children of a struct, a sparse
 * union or a fixed-size list are sliced with their parent (child row i, or
 * i x listSize, belongs to row i).
 */
export interface SourceColumn {
  readonly layout: ColumnLayout;
  readonly length: number;
  /** validity bitmap, or null when the column has no nulls in this batch */
  readonly validity: Uint8Array | null;
  /** bit index of row 0 in `validity` and in boolean `bits` */
  readonly bitOffset: number;
  /** fixed-width values or dictionary indices as bytes starting at row 0; boolean values as bits; binary data bytes; union type ids */
  readonly bytes: Uint8Array;
  /** the same values as 16/32-bit words when aligned, for the wide copy loops */
  readonly words16: Uint16Array | null;
  readonly words32: Int32Array | null;
  /** binary or list offsets as int32 words: offset of row i is offsets[i * stride] (stride 2 for int64 offsets, low word); dense union offsets */
  readonly offsets: Int32Array | null;
  readonly offsetStride: 1 | 2;
  /** nested columns: one per child layout */
  readonly children: readonly SourceColumn[];
  /** dictionary columns: the values the indices point into */
  readonly dictionary: Vector | null;
  /** view columns: the variadic buffers their long values are in (`bytes` holds the views) */
  readonly variadic: readonly Uint8Array[];
}

const NO_CHILDREN: readonly SourceColumn[] = Object.freeze([]);
const NO_BUFFERS: readonly Uint8Array[] = Object.freeze([]);

export function prepareSourceColumn(data: Data, layout: ColumnLayout): SourceColumn {
  const validity = data.nullCount > 0 && data.nullBitmap && data.nullBitmap.byteLength > 0 ? data.nullBitmap : null;
  const base = {
    layout,
    length: data.length,
    validity,
    bitOffset: data.offset,
    bytes: EMPTY,
    words16: null,
    words32: null,
    offsets: null,
    offsetStride: 1 as const,
    children: NO_CHILDREN,
    dictionary: null,
    variadic: NO_BUFFERS,
  };
  switch (layout.kind) {
    case 'null':
      return base;
    case 'bool':
      return { ...base, bytes: asBytes(data.values) };
    case 'fixed-width':
      return { ...base, ...words(asBytes(data.values)) };
    case 'dictionary':
      return { ...base, ...words(asBytes(data.values)), dictionary: data.dictionary ?? null };
    case 'binary':
      return { ...base, bytes: asBytes(data.values), ...offsetsOf(data, layout.offsetWidth) };
    case 'view': {
      const views = asBytes(data.values).subarray(0, data.length * VIEW_BYTES);
      const variadic = (data.variadicBuffers ?? NO_BUFFERS).map(asBytes);
      assertViewsInBounds(views, variadic, validity, data.offset, data.length);
      return { ...base, ...words(views), variadic };
    }
    case 'list':
      return { ...base, ...offsetsOf(data, layout.offsetWidth), children: [prepareSourceColumn(data.children[0]!, layout.child)] };
    case 'fixed-size-list':
      return { ...base, children: [prepareSourceColumn(data.children[0]!, layout.child)] };
    case 'struct':
      return { ...base, children: layout.children.map((child, i) => prepareSourceColumn(data.children[i]!, child)) };
    case 'union': {
      const children = layout.children.map((child, i) => prepareSourceColumn(data.children[i]!, child));
      // no validity in a union: nulls are the children's
      const typeIds = asBytes(data.typeIds);
      const offsets = layout.mode === 'dense' ? new Int32Array(data.valueOffsets.buffer, data.valueOffsets.byteOffset, data.length) : null;
      return { ...base, validity: null, bytes: typeIds, offsets, children };
    }
  }
}

const EMPTY = new Uint8Array(0);

function words(bytes: Uint8Array): { bytes: Uint8Array; words16: Uint16Array | null; words32: Int32Array | null } {
  const words16 = bytes.byteOffset % 2 === 0 ? new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 1) : null;
  const words32 = bytes.byteOffset % 4 === 0 ? new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2) : null;
  return { bytes, words16, words32 };
}

function offsetsOf(data: Data, offsetWidth: 4 | 8): { offsets: Int32Array; offsetStride: 1 | 2 } {
  const offsetBytes = asBytes(data.valueOffsets);
  const offsets = new Int32Array(offsetBytes.buffer, offsetBytes.byteOffset, offsetBytes.byteLength >>> 2);
  const stride = offsetWidth === 8 ? 2 : 1;
  if (stride === 2) assertOffsetsFitInt32(offsets, data.length);
  return { offsets, offsetStride: stride };
}

function asBytes(view: ArrayBufferView | null | undefined): Uint8Array {
  if (!view) return EMPTY;
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/** Int64 offsets are read through their low words; offsets are ascending, so checking the last one suffices. */
function assertOffsetsFitInt32(offsets: Int32Array, length: number): void {
  const high = offsets[length * 2 + 1] ?? 0;
  const low = offsets[length * 2] ?? 0;
  if (high !== 0 || low < 0) {
    throw new RangeError('a large binary or list column holds more than 2 GiB of data in one batch; split the batch');
  }
}

/**
 * Every non-null view of a batch must point inside its buffers: the split
 * copies long values from where they say, and a view that points past its
 * buffers would otherwise fail there as an untyped error, or copy stray bytes.
 * Null slots are not read (they may hold anything).
 */
function assertViewsInBounds(views: Uint8Array, variadic: readonly Uint8Array[], validity: Uint8Array | null, bitOffset: number, length: number): void {
  if (views.byteLength < length * VIEW_BYTES) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `a view column of ${length} rows has ${views.byteLength} bytes of views, not ${length * VIEW_BYTES}`);
  }
  const view = new DataView(views.buffer, views.byteOffset, views.byteLength);
  const value: ViewValue = { bytes: views, start: 0, length: 0 };
  for (let row = 0; row < length; row++) {
    const bit = bitOffset + row;
    if (validity !== null && ((validity[bit >>> 3]! >>> (bit & 7)) & 1) === 0) continue;
    if (viewValueOf(views, view, variadic, row, value) === null) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `the view of row ${row} points outside its column's buffers (${variadic.length} variadic buffers)`, { row });
    }
  }
}
