import type { Data } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { MAX_INLINE_BYTES, VIEW_BYTES, viewValueOf, type ViewValue } from '../format/binary-view.js';
import type { ColumnLayout } from '../writer/column-layout.js';
import { prepareSourceColumn, type SourceColumn } from '../writer/source-column.js';
import { copyBytes } from './copy-bytes.js';
import { hasLengthSlot, slotWidthOf } from './row-layout.js';

/**
 * The encoder side of nested and dictionary values (row-layout.ts, "nested
 * value"): a value at a time, recursively, over a tree of prepared sources.
 * Nothing is allocated per value: the tree is built once per batch and
 * column, dictionary indices are resolved into module scratch.
 */
export interface NestedSource {
  readonly layout: ColumnLayout;
  readonly col: SourceColumn;
  /** over col.bytes: dictionary indices, a view column's views */
  readonly view: DataView;
  /** a view column: one DataView per variadic buffer (col.variadic), for copyBytes */
  readonly variadic: readonly DataView[];
  /** slotWidthOf(layout) */
  readonly slot: number;
  /** hasLengthSlot(layout) */
  readonly lengthSlot: boolean;
  /** a struct: its bitmap bytes; a union: 1 */
  readonly bitmapBytes: number;
  /** a struct: bitmap and slots, where its variable section starts */
  readonly fixedBytes: number;
  readonly children: readonly NestedSource[];
  /** a dictionary: the chunks of its values, in order */
  readonly chunks: readonly NestedSource[];
}

const NONE: readonly NestedSource[] = Object.freeze([]);
const NO_VIEWS: readonly DataView[] = Object.freeze([]);

export function nestedSourceOf(col: SourceColumn): NestedSource {
  const layout = col.layout;
  const children = col.children.length === 0 ? NONE : col.children.map(nestedSourceOf);
  let chunks = NONE;
  if (layout.kind === 'dictionary' && col.dictionary !== null) {
    chunks = (col.dictionary.data as Data[]).map((chunk) => nestedSourceOf(prepareSourceColumn(chunk, layout.values)));
  }
  const bitmapBytes = layout.kind === 'struct' ? (children.length + 7) >>> 3 : layout.kind === 'union' ? 1 : 0;
  let fixedBytes = bitmapBytes;
  if (layout.kind === 'struct') for (const child of children) fixedBytes += child.slot;
  return {
    layout,
    col,
    view: new DataView(col.bytes.buffer, col.bytes.byteOffset, col.bytes.byteLength),
    variadic: layout.kind === 'view' ? col.variadic.map((b) => new DataView(b.buffer, b.byteOffset, b.byteLength)) : NO_VIEWS,
    slot: slotWidthOf(layout),
    lengthSlot: hasLengthSlot(layout),
    bitmapBytes,
    fixedBytes,
    children,
    chunks,
  };
}

function bit(bits: Uint8Array, index: number): boolean {
  return ((bits[index >>> 3]! >>> (index & 7)) & 1) === 1;
}

function invalid(what: string): ShuffleError {
  return new ShuffleError('CS_INVALID_ARGUMENT', `the sort writer cannot encode a value: ${what}`);
}

/** Where viewAt puts a view value (one object: nothing is allocated per value). */
const viewValue: ViewValue = { bytes: new Uint8Array(0), start: 0, length: 0 };

/** Where the bytes of valid row i of view column `s` are (valid until the next call). */
export function viewAt(s: NestedSource, i: number): ViewValue {
  const value = viewValueOf(s.col.bytes, s.view, s.col.variadic, i, viewValue);
  if (value === null) throw invalid(`the view of row ${i} points outside its column's ${s.col.variadic.length} variadic buffers`);
  return value;
}

/** Copies the bytes of valid row i of view column `s` to `at`; returns how many. */
export function copyView(s: NestedSource, i: number, page: Uint8Array, view: DataView, at: number): number {
  const value = viewAt(s, i);
  const length = value.length;
  // an inline value is in the views; a long one in the variadic buffer its view names (checked by viewAt)
  const from = length <= MAX_INLINE_BYTES ? s.view : s.variadic[s.view.getInt32(i * VIEW_BYTES + 8, true)]!;
  copyBytes(value.bytes, from, value.start, page, view, at, length);
  return length;
}

/** The dictionary chunk `resolve` found. */
let resolved: NestedSource = null as unknown as NestedSource;

/** The row of `resolved` (set here) that dictionary row i points at. */
function resolve(s: NestedSource, i: number): number {
  const layout = s.layout as Extract<ColumnLayout, { kind: 'dictionary' }>;
  const view = s.view;
  let index: number;
  switch (layout.indexWidth) {
    case 1:
      index = layout.indexSigned ? view.getInt8(i) : view.getUint8(i);
      break;
    case 2:
      index = layout.indexSigned ? view.getInt16(2 * i, true) : view.getUint16(2 * i, true);
      break;
    case 4:
      index = layout.indexSigned ? view.getInt32(4 * i, true) : view.getUint32(4 * i, true);
      break;
    default:
      index = view.getInt32(8 * i + 4, true) === 0 ? view.getUint32(8 * i, true) : -1;
  }
  if (index >= 0) {
    for (const chunk of s.chunks) {
      if (index < chunk.col.length) {
        resolved = chunk;
        return index;
      }
      index -= chunk.col.length;
    }
  }
  throw invalid(`a dictionary index points outside its dictionary of ${s.chunks.reduce((n, c) => n + c.col.length, 0)} values`);
}

/** The union child row i holds (its child index), and that child's row in `unionRow`. */
let unionRow = 0;
function unionChild(s: NestedSource, i: number): NestedSource {
  const layout = s.layout as Extract<ColumnLayout, { kind: 'union' }>;
  const id = s.col.bytes[i]!;
  const c = id < 128 ? layout.childIndex[id]! : -1;
  if (c < 0) throw invalid(`union type id ${id} is not one of the type's`);
  unionRow = layout.mode === 'dense' ? s.col.offsets![i]! : i;
  return s.children[c]!;
}

/** Whether row i of `s` is a value (not null): a dictionary's row is null if its index or the value it points at is. Unions are never null themselves. */
export function isValid(s: NestedSource, i: number): boolean {
  const col = s.col;
  switch (s.layout.kind) {
    case 'null':
      return false;
    case 'union':
      return true;
    case 'dictionary': {
      if (col.validity !== null && !bit(col.validity, col.bitOffset + i)) return false;
      const r = resolve(s, i);
      return isValid(resolved, r);
    }
    default:
      return col.validity === null || bit(col.validity, col.bitOffset + i);
  }
}

/** Bytes a valid value of a length-slot node takes in the variable section (what its slot says). */
export function valueBytes(s: NestedSource, i: number): number {
  const col = s.col;
  const layout = s.layout;
  switch (layout.kind) {
    case 'binary':
      return col.offsets![(i + 1) * col.offsetStride]! - col.offsets![i * col.offsetStride]!;
    case 'view':
      return viewAt(s, i).length;
    case 'list': {
      const first = col.offsets![i * col.offsetStride]!;
      return 4 + elementsBytes(s.children[0]!, first, col.offsets![(i + 1) * col.offsetStride]! - first);
    }
    case 'fixed-size-list':
      return elementsBytes(s.children[0]!, i * layout.listSize, layout.listSize);
    case 'struct': {
      let bytes = s.fixedBytes;
      for (const child of s.children) if (child.lengthSlot && isValid(child, i)) bytes += valueBytes(child, i);
      return bytes;
    }
    case 'union': {
      const child = unionChild(s, i);
      const j = unionRow;
      return 2 + child.slot + (child.lengthSlot && isValid(child, j) ? valueBytes(child, j) : 0);
    }
    case 'dictionary': {
      const r = resolve(s, i);
      return valueBytes(resolved, r);
    }
    default:
      return 0;
  }
}

/** Bytes of `n` elements of `child` from row `first`: bitmap, slots, variable bytes. */
function elementsBytes(child: NestedSource, first: number, n: number): number {
  let bytes = ((n + 7) >>> 3) + n * child.slot;
  if (child.lengthSlot) for (let e = first; e < first + n; e++) if (isValid(child, e)) bytes += valueBytes(child, e);
  return bytes;
}

/**
 * Writes the valid value of row i of `s`: its slot at `slotAt`, its bytes (if
 * it has a length slot) at `varAt`. Returns the end of what it wrote in the
 * variable section.
 */
export function writeSlot(s: NestedSource, i: number, page: Uint8Array, view: DataView, slotAt: number, varAt: number): number {
  const col = s.col;
  const layout = s.layout;
  switch (layout.kind) {
    case 'null':
      return varAt;
    case 'bool': {
      const b = col.bitOffset + i;
      page[slotAt] = (col.bytes[b >>> 3]! >>> (b & 7)) & 1;
      return varAt;
    }
    case 'fixed-width': {
      const w = layout.byteWidth;
      copyBytes(col.bytes, s.view, i * w, page, view, slotAt, w);
      return varAt;
    }
    case 'binary': {
      const begin = col.offsets![i * col.offsetStride]!;
      const length = col.offsets![(i + 1) * col.offsetStride]! - begin;
      copyBytes(col.bytes, s.view, begin, page, view, varAt, length);
      view.setUint32(slotAt, length, true);
      return varAt + length;
    }
    case 'view': {
      const length = copyView(s, i, page, view, varAt);
      view.setUint32(slotAt, length, true);
      return varAt + length;
    }
    case 'dictionary': {
      const r = resolve(s, i);
      return writeSlot(resolved, r, page, view, slotAt, varAt);
    }
    default: {
      const end = writeValue(s, i, page, view, varAt);
      view.setUint32(slotAt, end - varAt, true);
      return end;
    }
  }
}

/** Writes a nested value (list, fixed-size list, struct, union) at `at`; returns its end. */
function writeValue(s: NestedSource, i: number, page: Uint8Array, view: DataView, at: number): number {
  const col = s.col;
  const layout = s.layout;
  switch (layout.kind) {
    case 'list': {
      const first = col.offsets![i * col.offsetStride]!;
      const n = col.offsets![(i + 1) * col.offsetStride]! - first;
      view.setUint32(at, n, true);
      return writeElements(s.children[0]!, first, n, page, view, at + 4);
    }
    case 'fixed-size-list':
      return writeElements(s.children[0]!, i * layout.listSize, layout.listSize, page, view, at);
    case 'struct': {
      const children = s.children;
      page.fill(0, at, at + s.bitmapBytes);
      let slotAt = at + s.bitmapBytes;
      let varAt = at + s.fixedBytes;
      for (let c = 0; c < children.length; c++) {
        const child = children[c]!;
        if (isValid(child, i)) varAt = writeSlot(child, i, page, view, slotAt, varAt);
        else {
          page[at + (c >>> 3)]! |= 1 << (c & 7);
          page.fill(0, slotAt, slotAt + child.slot);
        }
        slotAt += child.slot;
      }
      return varAt;
    }
    case 'union': {
      const child = unionChild(s, i);
      const j = unionRow;
      page[at] = col.bytes[i]!;
      const slotAt = at + 2;
      const varAt = slotAt + child.slot;
      if (isValid(child, j)) {
        page[at + 1] = 0;
        return writeSlot(child, j, page, view, slotAt, varAt);
      }
      page[at + 1] = 1;
      page.fill(0, slotAt, varAt);
      return varAt;
    }
    default:
      throw invalid(`no nested encoding for a ${layout.kind} column`);
  }
}

/** `n` elements of `child` from row `first` at `at`: bitmap, slots, variable bytes; returns the end. */
function writeElements(child: NestedSource, first: number, n: number, page: Uint8Array, view: DataView, at: number): number {
  const bitmapBytes = (n + 7) >>> 3;
  page.fill(0, at, at + bitmapBytes);
  const w = child.slot;
  const slotsAt = at + bitmapBytes;
  const col = child.col;
  if (child.layout.kind === 'fixed-width' && col.validity === null) {
    // the common list<int64> and friends: the slots are the child's values back to back
    copyBytes(col.bytes, child.view, first * w, page, view, slotsAt, n * w);
    return slotsAt + n * w;
  }
  let slotAt = slotsAt;
  let varAt = slotsAt + n * w;
  for (let e = 0; e < n; e++) {
    if (isValid(child, first + e)) varAt = writeSlot(child, first + e, page, view, slotAt, varAt);
    else {
      page[at + (e >>> 3)]! |= 1 << (e & 7);
      if (w > 0) page.fill(0, slotAt, slotAt + w);
    }
    slotAt += w;
  }
  return varAt;
}
