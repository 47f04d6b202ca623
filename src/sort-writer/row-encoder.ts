import { ShuffleError } from '../errors.js';
import type { SourceColumn } from '../writer/source-column.js';
import { align4, copyBytes } from './copy-bytes.js';
import { copyView, isValid, nestedSourceOf, valueBytes, viewAt, writeSlot, type NestedSource } from './nested-encode.js';
import { ROW_LENGTH_BYTES, type RowLayout } from './row-layout.js';

/** The largest row (length prefix included) the sort writer stores. */
export const MAX_ROW_BYTES = 0x7fffffff;

/**
 * Turns the rows of a batch into compact rows (row-layout.ts), a column at a
 * time: one loop per column writes that column's slot of every row, so there
 * is no per-row dispatch on types and no per-row object. Sources are the
 * columnar writer's prepared columns (source-column.ts: slices and padded
 * IPC buffers already accounted for).
 *
 * Protocol per batch: `measure` the rows, place them (the caller decides the
 * page and offset of each), then `encode` ranges of rows that share a page.
 */
export class RowEncoder {
  /** the nested sources of the batch last measured (per field; null for the other flat fields) */
  private nestedFor: readonly SourceColumn[] | null = null;
  private nested: (NestedSource | null)[] = [];

  constructor(readonly layout: RowLayout) {}

  /** The nested sources of `sources`' tree and view fields (a view field's for its DataViews), built once per batch. */
  private nestedSources(sources: readonly SourceColumn[]): (NestedSource | null)[] {
    if (this.nestedFor !== sources) {
      this.nested = this.layout.fields.map((field, f) => (field.kind === 'tree' || field.kind === 'view' ? nestedSourceOf(sources[f]!) : null));
      this.nestedFor = sources;
    }
    return this.nested;
  }

  /**
   * Writes each row's encoded size (length prefix included, padding not)
   * into `rowBytes[0, rows)` and returns the bytes they take padded to
   * 4-byte multiples. A null string counts 0 bytes.
   * `firstRow` (the batch's first row in the writer's input) locates errors.
   */
  measure(sources: readonly SourceColumn[], rows: number, rowBytes: Uint32Array, firstRow = 0): number {
    const { headerBytes, variableFields } = this.layout;
    rowBytes.fill(headerBytes, 0, rows);
    let variableBytes = 0;
    const nested = this.nestedSources(sources);
    for (const f of variableFields) {
      const tree = nested[f];
      if (this.layout.fields[f]!.kind === 'view') {
        variableBytes += measureView(tree!, rows, rowBytes);
        continue;
      }
      if (tree !== null && tree !== undefined) {
        // nested values: measured a value at a time (every byte of them counts, for the pages and the pool)
        for (let i = 0; i < rows; i++) {
          if (!isValid(tree, i)) continue;
          const bytes = valueBytes(tree, i);
          const total = rowBytes[i]! + bytes;
          if (total > MAX_ROW_BYTES) tooLarge(total, firstRow + i);
          variableBytes += bytes;
          rowBytes[i] = total;
        }
        continue;
      }
      const src = sources[f]!;
      const offsets = src.offsets!;
      const stride = src.offsetStride;
      const validity = src.validity;
      const bitOffset = src.bitOffset;
      variableBytes += offsets[rows * stride]! - offsets[0]!;
      for (let i = 0; i < rows; i++) {
        if (validity !== null && !isSet(validity, bitOffset + i)) continue;
        rowBytes[i]! += offsets[(i + 1) * stride]! - offsets[i * stride]!;
      }
    }
    // a binary column holds < 2 GiB of values (a view column may claim more, its views sharing bytes, but then so does
    // this sum), so only batches with that much in all columns together need the per-row check, in JS numbers
    if (headerBytes + variableBytes > MAX_ROW_BYTES) assertRowSizes(sources, nested, this.layout, rows, firstRow);
    let total = 0;
    for (let i = 0; i < rows; i++) total += align4(rowBytes[i]!);
    return total;
  }

  /**
   * Encodes the rows `ids[from, to)` into `page`: row i starts at
   * `rowStart[i]` (a multiple of 4) and takes `rowBytes[i]` bytes (from
   * `measure`) plus its zero padding. `varCursor[i]` is scratch for the next
   * free byte of row i's variable section. The ids may come in any order
   * (the writer passes them grouped by partition).
   */
  encode(
    sources: readonly SourceColumn[],
    ids: Uint32Array,
    from: number,
    to: number,
    page: Uint8Array,
    view: DataView,
    rowStart: Uint32Array,
    rowBytes: Uint32Array,
    varCursor: Uint32Array,
  ): void {
    const { fields, bitmapBytes, headerBytes } = this.layout;
    const nested = this.nestedSources(sources);
    for (let k = from; k < to; k++) {
      const i = ids[k]!;
      const start = rowStart[i]!;
      const bytes = rowBytes[i]!;
      view.setUint32(start, bytes - ROW_LENGTH_BYTES, true);
      for (let b = 0; b < bitmapBytes; b++) page[start + ROW_LENGTH_BYTES + b] = 0;
      // the padding: the last word of the row is zeroed before the fields fill what they cover (pages are reused)
      if ((bytes & 3) !== 0) view.setInt32(start + (bytes & ~3), 0, true);
      varCursor[i] = start + headerBytes;
    }
    for (let f = 0; f < fields.length; f++) {
      const field = fields[f]!;
      const src = sources[f]!;
      const bitmapAt = ROW_LENGTH_BYTES + (f >>> 3);
      const mask = 1 << (f & 7);
      switch (field.kind) {
        case 'null':
          for (let k = from; k < to; k++) {
            const i = ids[k]!;
            page[rowStart[i]! + bitmapAt]! |= mask;
          }
          break;
        case 'bool':
          encodeBool(src, ids, from, to, page, rowStart, field.slot);
          markNulls(src, ids, from, to, page, rowStart, bitmapAt, mask, field.slot, 1);
          break;
        case 'fixed':
          encodeFixed(src, field.width, ids, from, to, page, view, rowStart, field.slot);
          markNulls(src, ids, from, to, page, rowStart, bitmapAt, mask, field.slot, field.width);
          break;
        case 'variable':
          encodeVariable(src, ids, from, to, page, view, rowStart, varCursor, field.slot, bitmapAt, mask);
          break;
        case 'view':
          encodeView(nested[f]!, ids, from, to, page, view, rowStart, varCursor, field.slot, bitmapAt, mask);
          break;
        case 'tree': {
          const tree = nested[f]!;
          const slot = field.slot;
          for (let k = from; k < to; k++) {
            const i = ids[k]!;
            const start = rowStart[i]!;
            if (isValid(tree, i)) varCursor[i] = writeSlot(tree, i, page, view, start + slot, varCursor[i]!);
            else {
              page[start + bitmapAt]! |= mask;
              page.fill(0, start + slot, start + slot + field.width);
            }
          }
          break;
        }
      }
    }
  }
}

function isSet(bits: Uint8Array, index: number): boolean {
  return ((bits[index >>> 3]! >>> (index & 7)) & 1) === 1;
}

function encodeBool(src: SourceColumn, ids: Uint32Array, from: number, to: number, page: Uint8Array, rowStart: Uint32Array, slot: number): void {
  const bits = src.bytes;
  const bitOffset = src.bitOffset;
  for (let k = from; k < to; k++) {
    const i = ids[k]!;
    const bit = bitOffset + i;
    page[rowStart[i]! + slot] = (bits[bit >>> 3]! >>> (bit & 7)) & 1;
  }
}

/**
 * Copies fixed-width values into their slots: 32-bit words through the
 * DataView where the source is word-aligned (several times faster than bytes,
 * and rows are not aligned), bytes otherwise.
 */
function encodeFixed(
  src: SourceColumn,
  width: number,
  ids: Uint32Array,
  from: number,
  to: number,
  page: Uint8Array,
  view: DataView,
  rowStart: Uint32Array,
  slot: number,
): void {
  const words = src.words32;
  const bytes = src.bytes;
  if (width === 8 && words !== null) {
    for (let k = from; k < to; k++) {
      const i = ids[k]!;
      const at = rowStart[i]! + slot;
      view.setInt32(at, words[2 * i]!, true);
      view.setInt32(at + 4, words[2 * i + 1]!, true);
    }
  } else if (width === 4 && words !== null) {
    for (let k = from; k < to; k++) {
      const i = ids[k]!;
      view.setInt32(rowStart[i]! + slot, words[i]!, true);
    }
  } else if (width === 2 && src.words16 !== null) {
    const halves = src.words16;
    for (let k = from; k < to; k++) {
      const i = ids[k]!;
      view.setUint16(rowStart[i]! + slot, halves[i]!, true);
    }
  } else if (width === 1) {
    for (let k = from; k < to; k++) {
      const i = ids[k]!;
      page[rowStart[i]! + slot] = bytes[i]!;
    }
  } else if ((width & 3) === 0 && words !== null) {
    const n = width >>> 2;
    for (let k = from; k < to; k++) {
      const i = ids[k]!;
      const at = rowStart[i]! + slot;
      for (let w = 0; w < n; w++) view.setInt32(at + 4 * w, words[i * n + w]!, true);
    }
  } else {
    for (let k = from; k < to; k++) {
      const i = ids[k]!;
      const at = rowStart[i]! + slot;
      const s = i * width;
      for (let b = 0; b < width; b++) page[at + b] = bytes[s + b]!;
    }
  }
}

/** Sets the null bit of every null row and zeroes its slot (the value copied there is whatever the column held). */
function markNulls(
  src: SourceColumn,
  ids: Uint32Array,
  from: number,
  to: number,
  page: Uint8Array,
  rowStart: Uint32Array,
  bitmapAt: number,
  mask: number,
  slot: number,
  width: number,
): void {
  const validity = src.validity;
  if (validity === null) return;
  const bitOffset = src.bitOffset;
  for (let k = from; k < to; k++) {
    const i = ids[k]!;
    if (isSet(validity, bitOffset + i)) continue;
    const start = rowStart[i]!;
    page[start + bitmapAt]! |= mask;
    page.fill(0, start + slot, start + slot + width);
  }
}

/** Writes each value's length into its slot and its bytes into the row's variable section. */
function encodeVariable(
  src: SourceColumn,
  ids: Uint32Array,
  from: number,
  to: number,
  page: Uint8Array,
  view: DataView,
  rowStart: Uint32Array,
  varCursor: Uint32Array,
  slot: number,
  bitmapAt: number,
  mask: number,
): void {
  const offsets = src.offsets!;
  const stride = src.offsetStride;
  const data = src.bytes;
  const dataView = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const validity = src.validity;
  const bitOffset = src.bitOffset;
  for (let k = from; k < to; k++) {
    const i = ids[k]!;
    const start = rowStart[i]!;
    if (validity !== null && !isSet(validity, bitOffset + i)) {
      page[start + bitmapAt]! |= mask;
      view.setUint32(start + slot, 0, true);
      continue;
    }
    const begin = offsets[i * stride]!;
    const end = offsets[(i + 1) * stride]!;
    const length = end - begin;
    view.setUint32(start + slot, length, true);
    const at = varCursor[i]!;
    copyBytes(data, dataView, begin, page, view, at, length);
    varCursor[i] = at + length;
  }
}

/** Adds each valid value's byte length to its row's `rowBytes` (as the offsets of a binary column give them); returns their sum. */
function measureView(s: NestedSource, rows: number, rowBytes: Uint32Array): number {
  const { validity, bitOffset } = s.col;
  let total = 0;
  for (let i = 0; i < rows; i++) {
    if (validity !== null && !isSet(validity, bitOffset + i)) continue;
    const length = viewAt(s, i).length;
    rowBytes[i]! += length;
    total += length;
  }
  return total;
}

/** As encodeVariable, for a view column: its values' bytes, wherever their views keep them, exactly as a binary column's. */
function encodeView(
  s: NestedSource,
  ids: Uint32Array,
  from: number,
  to: number,
  page: Uint8Array,
  view: DataView,
  rowStart: Uint32Array,
  varCursor: Uint32Array,
  slot: number,
  bitmapAt: number,
  mask: number,
): void {
  const { validity, bitOffset } = s.col;
  for (let k = from; k < to; k++) {
    const i = ids[k]!;
    const start = rowStart[i]!;
    if (validity !== null && !isSet(validity, bitOffset + i)) {
      page[start + bitmapAt]! |= mask;
      view.setUint32(start + slot, 0, true);
      continue;
    }
    const at = varCursor[i]!;
    const length = copyView(s, i, page, view, at);
    view.setUint32(start + slot, length, true);
    varCursor[i] = at + length;
  }
}

/** CS_INVALID_ARGUMENT naming the first row that would not fit in MAX_ROW_BYTES. */
function assertRowSizes(sources: readonly SourceColumn[], nested: readonly (NestedSource | null)[], layout: RowLayout, rows: number, firstRow: number): void {
  for (let i = 0; i < rows; i++) {
    let bytes = layout.headerBytes;
    for (const f of layout.variableFields) {
      const src = sources[f]!;
      const kind = layout.fields[f]!.kind;
      if (kind === 'tree') continue; // checked as they are measured
      if (src.validity !== null && !isSet(src.validity, src.bitOffset + i)) continue;
      const stride = src.offsetStride;
      bytes += kind === 'view' ? viewAt(nested[f]!, i).length : src.offsets![(i + 1) * stride]! - src.offsets![i * stride]!;
    }
    if (bytes > MAX_ROW_BYTES) tooLarge(bytes, firstRow + i);
  }
}

function tooLarge(bytes: number, row: number): never {
  throw new ShuffleError('CS_INVALID_ARGUMENT', `a row of ${bytes} bytes is larger than the sort writer's ${MAX_ROW_BYTES}-byte row limit`, { row });
}
