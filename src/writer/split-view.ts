import { MAX_INLINE_BYTES, VIEW_BYTES } from '../format/binary-view.js';
import type { ColumnBuffer } from './column-buffer.js';
import type { SourceColumn } from './source-column.js';

/**
 * Gathers Utf8View / BinaryView values into a partition buffer: its views
 * (16 bytes per row, `values`) and one data buffer for the long values
 * (`data`, variadic buffer 0 of the partition's column). An inline value is
 * its view, copied as it is; a long value's bytes are appended to the data
 * and its view re-pointed at them; a null row gets a zero view (length 0),
 * whatever its input view held.
 *
 * Worked example: a partition whose data holds 20 bytes receives row 7, a
 * 30-byte value in input variadic buffer 2 at offset 100:
 *
 * ```text
 * input view   30 | prefix | 2 | 100
 * output view  30 | prefix | 0 | 20      its bytes copied to data[20, 50), dataLength 50
 * ```
 * The caller sized the data (viewBytesOf) and checked the input's views
 * (prepareSourceColumn), as for binary columns.
 */
export function splitView(src: SourceColumn, rowIds: Uint32Array, start: number, end: number, dst: ColumnBuffer, dstRow: number): void {
  const views = src.bytes;
  const srcView = new DataView(views.buffer, views.byteOffset, views.byteLength);
  const variadic = src.variadic;
  const validity = src.validity;
  const bitOffset = src.bitOffset;
  const out = dst.values32;
  let pos = dst.dataLength;
  for (let k = start, o = dstRow * 4; k < end; k++, o += 4) {
    const r = rowIds[k]!;
    const bit = bitOffset + r;
    const at = r * VIEW_BYTES;
    if (validity !== null && ((validity[bit >>> 3]! >>> (bit & 7)) & 1) === 0) {
      out[o] = out[o + 1] = out[o + 2] = out[o + 3] = 0;
      continue;
    }
    const length = srcView.getInt32(at, true);
    out[o] = length;
    out[o + 1] = srcView.getInt32(at + 4, true);
    if (length <= MAX_INLINE_BYTES) {
      out[o + 2] = srcView.getInt32(at + 8, true);
      out[o + 3] = srcView.getInt32(at + 12, true);
      continue;
    }
    const from = srcView.getInt32(at + 12, true);
    if (pos + length > dst.data.byteLength) {
      // rare (prepareBuffers sizes the data): grow for this value and, at the same size, the rest of the rows
      dst.dataLength = pos;
      dst.ensureDataCapacity(pos + length * (end - k));
    }
    dst.data.set(variadic[srcView.getInt32(at + 8, true)]!.subarray(from, from + length), pos);
    out[o + 2] = 0;
    out[o + 3] = pos;
    pos += length;
  }
  dst.dataLength = pos;
}

/** Bytes of the long values among rows rowIds[start, end): what a partition's data buffer must take in. */
export function viewBytesOf(src: SourceColumn, rowIds: Uint32Array, start: number, end: number): number {
  const view = new DataView(src.bytes.buffer, src.bytes.byteOffset, src.bytes.byteLength);
  let bytes = 0;
  for (let k = start; k < end; k++) bytes += longBytes(src, view, rowIds[k]!);
  return bytes;
}

/** Bytes of the long values among the first `rows` rows. */
export function viewBytes(src: SourceColumn, rows: number): number {
  const view = new DataView(src.bytes.buffer, src.bytes.byteOffset, src.bytes.byteLength);
  let bytes = 0;
  for (let r = 0; r < rows; r++) bytes += longBytes(src, view, r);
  return bytes;
}

/** Row r's length if it is a long value (kept in a data buffer), else 0 (inline or null). */
function longBytes(src: SourceColumn, view: DataView, r: number): number {
  const bit = src.bitOffset + r;
  if (src.validity !== null && ((src.validity[bit >>> 3]! >>> (bit & 7)) & 1) === 0) return 0;
  const length = view.getInt32(r * VIEW_BYTES, true);
  return length > MAX_INLINE_BYTES ? length : 0;
}
