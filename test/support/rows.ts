/**
 * A reference "row value" extractor: turns any row of any column (flat or nested) into a
 * canonical string made of the raw bytes of its value ('null' for a null row).
 * It reads the buffers directly, never through arrow-js getters or JS numbers,
 * so NaN payloads, -0.0, and every word of a decimal or interval are compared
 * bit for bit.
 *
 * It follows arrow-js's slicing conventions (see node-platform-facts.md):
 * fixed-width `values` are sub-arrayed to the slice; validity and Bool values
 * are not (row i is bit `offset + i`); binary `valueOffsets` are sub-arrayed and
 * absolute into the unsliced `values`.
 */
import { Type, type Data, type RecordBatch } from 'apache-arrow';
import { fixedByteWidth, isLargeOffsets, isVariableWidth, isView } from './columns.js';

const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

function hex(bytes: Uint8Array, start: number, end: number): string {
  let s = '';
  for (let i = start; i < end; i++) s += HEX[bytes[i]!]!;
  return s;
}

function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

function bit(bytes: ArrayLike<number>, index: number): boolean {
  return ((bytes[index >>> 3]! >>> (index & 7)) & 1) === 1;
}

/** Whether row i of `data` is valid, by the Arrow rules (no bitmap, or a known null count of 0: all valid). */
export function isValidRow(data: Data, i: number): boolean {
  if (data.typeId === Type.Null) return false;
  const bitmap = data.nullBitmap as Uint8Array | undefined | null;
  if (bitmap === undefined || bitmap === null || bitmap.length === 0) return true;
  if (data.nullCount === 0) return true;
  return bit(bitmap, data.offset + i);
}

/**
 * A function giving the canonical string of row i of `data`, with the column's
 * buffers prepared once (the extractor is called for every row of every column).
 */
export function cellReader(data: Data): (i: number) => string {
  const type = data.type;
  if (type.typeId === Type.Null) return () => 'null';
  const valid = (i: number) => isValidRow(data, i);

  if (type.typeId === Type.Bool) {
    const values = data.values as Uint8Array;
    const offset = data.offset;
    return (i) => (valid(i) ? (bit(values, offset + i) ? 'true' : 'false') : 'null');
  }

  const width = fixedByteWidth(type);
  if (width !== null) {
    const bytes = bytesOf(data.values as ArrayBufferView);
    return (i) => (valid(i) ? hex(bytes, i * width, (i + 1) * width) : 'null');
  }

  if (isView(type)) {
    // a view's bytes, inline or in a variadic buffer, written like a Utf8 cell: the same values compare equal across types
    const views = bytesOf(data.values as ArrayBufferView);
    const view = new DataView(views.buffer, views.byteOffset, views.byteLength);
    return (i) => {
      if (!valid(i)) return 'null';
      const length = view.getInt32(i * 16, true);
      if (length <= 12) return `"${hex(views, i * 16 + 4, i * 16 + 4 + length)}"`;
      const at = view.getInt32(i * 16 + 12, true);
      return `"${hex(data.variadicBuffers[view.getInt32(i * 16 + 8, true)]!, at, at + length)}"`;
    };
  }

  if (isVariableWidth(type)) {
    const bytes = bytesOf(data.values as ArrayBufferView);
    if (isLargeOffsets(type)) {
      const offsets = data.valueOffsets as unknown as BigInt64Array;
      return (i) => (valid(i) ? `"${hex(bytes, Number(offsets[i]!), Number(offsets[i + 1]!))}"` : 'null');
    }
    const offsets = data.valueOffsets as Int32Array;
    return (i) => (valid(i) ? `"${hex(bytes, offsets[i]!, offsets[i + 1]!)}"` : 'null');
  }
  return nestedCellReader(data, valid);
}

/**
 * Nested cells, by the Arrow rules and arrow-js's slicing conventions: list
 * and map offsets are sub-arrayed and absolute into the unsliced child; a
 * struct's, fixed-size list's and sparse union's children are sliced with it;
 * a dense union's offsets point into its children; a dictionary cell is the
 * value its index points at. Null rows are 'null' whatever their slots hold.
 */
function nestedCellReader(data: Data, valid: (i: number) => boolean): (i: number) => string {
  const type = data.type;
  switch (type.typeId) {
    case Type.List:
    case Type.Map:
    case Type.LargeList: {
      const child = cellReader(data.children[0]!);
      const offsets = data.valueOffsets as Int32Array | BigInt64Array;
      const open = type.typeId === Type.Map ? 'map[' : '[';
      return (i) => {
        if (!valid(i)) return 'null';
        const parts: string[] = [];
        for (let e = Number(offsets[i]!), end = Number(offsets[i + 1]!); e < end; e++) parts.push(child(e));
        return `${open}${parts.join(',')}]`;
      };
    }
    case Type.FixedSizeList: {
      const child = cellReader(data.children[0]!);
      const size = (type as unknown as { listSize: number }).listSize;
      return (i) => {
        if (!valid(i)) return 'null';
        const parts: string[] = [];
        for (let e = i * size; e < (i + 1) * size; e++) parts.push(child(e));
        return `fixed[${parts.join(',')}]`;
      };
    }
    case Type.Struct: {
      const children = data.children.map((c) => cellReader(c));
      const names = type.children.map((f) => f.name);
      return (i) => (valid(i) ? `{${children.map((child, c) => `${names[c]}:${child(i)}`).join(',')}}` : 'null');
    }
    case Type.Union: {
      const union = type as unknown as { mode: number; typeIds: Int32Array; typeIdToChildIndex: Record<number, number> };
      const children = data.children.map((c) => cellReader(c));
      const typeIds = data.typeIds as Int8Array;
      const dense = union.mode === 1; // UnionMode.Dense
      const offsets = data.valueOffsets as Int32Array;
      return (i) => {
        const id = typeIds[i]!;
        const child = children[union.typeIdToChildIndex[id]!]!;
        return `u${id}:${child(dense ? offsets[i]! : i)}`;
      };
    }
    case Type.Dictionary: {
      const chunks = (data.dictionary?.data ?? []) as Data[];
      const readers = chunks.map((c) => cellReader(c));
      const indices = data.values as ArrayLike<number | bigint>;
      return (i) => {
        if (!valid(i)) return 'null';
        let index = Number(indices[i]!);
        for (let c = 0; c < chunks.length; c++) {
          if (index < chunks[c]!.length) return readers[c]!(index);
          index -= chunks[c]!.length;
        }
        throw new Error(`dictionary index ${indices[i]} outside a dictionary of ${data.dictionary?.length ?? 0} values`);
      };
    }
    default:
      throw new Error(`no row extractor for ${String(type)}`);
  }
}

/** The canonical string of one row of one column. */
export function cellOf(data: Data, i: number): string {
  return cellReader(data)(i);
}

/**
 * The canonical strings of every row of a batch: the listed columns' cells joined by '|'
 * (all columns by default).
 */
export function rowsOf(batch: RecordBatch, columns?: readonly number[]): string[] {
  const children = batch.data.children;
  const picked = columns ?? children.map((_, c) => c);
  const readers = picked.map((c) => cellReader(children[c]!));
  const out = new Array<string>(batch.numRows);
  for (let i = 0; i < batch.numRows; i++) {
    let s = '';
    for (let c = 0; c < readers.length; c++) s += (c === 0 ? '' : '|') + readers[c]!(i);
    out[i] = s;
  }
  return out;
}
