import type { SourceColumn } from './source-column.js';
import type { ColumnBuffer } from './column-buffer.js';

/**
 * Gathers fixed-width values (Gluten's splitFixedWidthValueBuffer):
 * dst row (dstRow + j) = src row rowIds[start + j]. Widths of 1, 2 and
 * multiples of 4 bytes copy whole words (never through floats, which could
 * rewrite NaN payloads); other widths (fixed-size binary) copy bytes.
 */
export function splitFixedWidth(
  src: SourceColumn,
  byteWidth: number,
  rowIds: Uint32Array,
  start: number,
  end: number,
  dst: ColumnBuffer,
  dstRow: number,
): void {
  if (isContiguous(rowIds, start, end)) {
    // one stretch of source rows (one partition, or rows that happen to be adjacent): a block copy
    const from = rowIds[start]! * byteWidth;
    dst.values.set(src.bytes.subarray(from, from + (end - start) * byteWidth), dstRow * byteWidth);
  } else if (byteWidth === 1) {
    const s = src.bytes;
    const d = dst.values;
    for (let k = start, j = dstRow; k < end; k++, j++) d[j] = s[rowIds[k]!]!;
  } else if (byteWidth === 2 && src.words16 !== null) {
    const s = src.words16;
    const d = dst.values16;
    for (let k = start, j = dstRow; k < end; k++, j++) d[j] = s[rowIds[k]!]!;
  } else if (byteWidth === 4 && src.words32 !== null) {
    const s = src.words32;
    const d = dst.values32;
    for (let k = start, j = dstRow; k < end; k++, j++) d[j] = s[rowIds[k]!]!;
  } else if (byteWidth === 8 && src.words32 !== null) {
    const s = src.words32;
    const d = dst.values32;
    for (let k = start, j = dstRow << 1; k < end; k++, j += 2) {
      const r = rowIds[k]! << 1;
      d[j] = s[r]!;
      d[j + 1] = s[r + 1]!;
    }
  } else if (byteWidth === 16 && src.words32 !== null) {
    // decimal128, interval month-day-nano, 16-byte fixed-size binary: four words, unrolled
    const s = src.words32;
    const d = dst.values32;
    for (let k = start, j = dstRow << 2; k < end; k++, j += 4) {
      const r = rowIds[k]! << 2;
      d[j] = s[r]!;
      d[j + 1] = s[r + 1]!;
      d[j + 2] = s[r + 2]!;
      d[j + 3] = s[r + 3]!;
    }
  } else if ((byteWidth & 3) === 0 && src.words32 !== null) {
    const words = byteWidth >>> 2;
    const s = src.words32;
    const d = dst.values32;
    for (let k = start, j = dstRow * words; k < end; k++) {
      const r = rowIds[k]! * words;
      for (let w = 0; w < words; w++, j++) d[j] = s[r + w]!;
    }
  } else {
    const s = src.bytes;
    const d = dst.values;
    for (let k = start, j = dstRow * byteWidth; k < end; k++) {
      const r = rowIds[k]! * byteWidth;
      for (let b = 0; b < byteWidth; b++, j++) d[j] = s[r + b]!;
    }
  }
}

/** Fewer rows than this are gathered one by one even when they are adjacent. */
const MIN_BLOCK_ROWS = 16;

/**
 * Whether rowIds[start, end) are consecutive row ids (r, r + 1, ...): always at
 * one partition, rarely otherwise. The first and last ids settle it at once in
 * the usual case (ids ascend within a partition); the walk makes it exact for
 * any order.
 */
export function isContiguous(rowIds: Uint32Array, start: number, end: number): boolean {
  if (end - start < MIN_BLOCK_ROWS) return false;
  const first = rowIds[start]!;
  if (rowIds[end - 1]! - first !== end - start - 1) return false;
  for (let k = start + 1, r = first + 1; k < end - 1; k++, r++) if (rowIds[k] !== r) return false;
  return true;
}
