import type { SourceColumn } from './source-column.js';
import type { ColumnBuffer } from './column-buffer.js';
import { isContiguous } from './split-fixed-width.js';
import { viewBytesOf } from './split-view.js';

/** Values longer than this are copied with `set` (native memcpy beats the word loop for long values). */
const LONG_VALUE_BYTES = 128;

/**
 * Gathers binary / utf8 values (Gluten's splitBinaryType), writing Arrow
 * offsets (int32, or int64 as low word + zero high word) instead of Gluten's
 * lengths, so a partition buffer is an Arrow array as it stands.
 *
 * Worked example: src offsets [0, 2, 5, 9] ("ab", "cde", "fghi"), rowIds [2, 0],
 * a partition already holding "xy" (offsets [0, 2], dataLength 2):
 *
 * ```text
 * dst offsets  [0, 2, 6, 8]     2 + len("fghi") = 6, 6 + len("ab") = 8
 * dst data     "xyfghiab"
 * ```
 *
 * Short values are copied 4 bytes at a time through DataViews (unaligned
 * int32 loads and stores), about twice as fast as a byte loop. The last word of
 * a value may run up to 3 bytes past its end on both sides: those source bytes
 * exist (checked against the source's length), and the destination bytes are
 * overwritten by the next value or lie past dataLength, where nothing reads.
 * In the example, "fghi" is one word; "ab" is copied as the word "ab??" at
 * data[6..10), and dataLength ends at 8.
 */
export function splitBinary(
  src: SourceColumn,
  rowIds: Uint32Array,
  start: number,
  end: number,
  dst: ColumnBuffer,
  dstRow: number,
): void {
  if (isContiguous(rowIds, start, end)) {
    splitBinaryBlock(src, rowIds[start]!, end - start, dst, dstRow);
    return;
  }
  const offsets = src.offsets!;
  const stride = src.offsetStride;
  const srcData = src.bytes;
  const srcView = viewOf(srcData);
  const srcLimit = srcData.byteLength - 3; // a word read at b < srcLimit stays inside the source
  const dstOffsets = dst.values32;
  let dstData = dst.data;
  let dstView = dst.dataView;
  let dstLimit = dstData.byteLength - 3;
  let pos = dst.dataLength;
  let o = (dstRow + 1) * stride;
  for (let k = start; k < end; k++, o += stride) {
    const r = rowIds[k]! * stride;
    let from = offsets[r]!;
    const to = offsets[r + stride]!;
    const next = pos + (to - from);
    if (next > dstLimit) {
      if (next > dstData.byteLength) {
        // rare (prepareBuffers sizes the data): grow for this value and, at the same average size, the rest of the rows
        dst.dataLength = pos;
        dst.ensureDataCapacity(pos + (to - from) * (end - k));
        dstData = dst.data;
        dstView = dst.dataView;
        dstLimit = dstData.byteLength - 3;
      }
      if (next > dstLimit) {
        while (pos < next) dstData[pos++] = srcData[from++]!;
        dstOffsets[o] = pos;
        continue;
      }
    }
    if (to - from > LONG_VALUE_BYTES) {
      dstData.set(srcData.subarray(from, to), pos);
    } else if (to < srcLimit) {
      for (let d = pos; d < next; d += 4, from += 4) dstView.setInt32(d, srcView.getInt32(from, true), true);
    } else {
      for (let d = pos; d < next; d++) dstData[d] = srcData[from++]!;
    }
    pos = next;
    dstOffsets[o] = pos;
  }
  dst.dataLength = pos;
}

/**
 * `count` adjacent source rows from `first`: their bytes in one copy, their
 * offsets rebased onto the partition's data. The caller sized the data for
 * them (prepareBuffers), as for the gather.
 */
function splitBinaryBlock(src: SourceColumn, first: number, count: number, dst: ColumnBuffer, dstRow: number): void {
  const offsets = src.offsets!;
  const stride = src.offsetStride;
  const from = offsets[first * stride]!;
  const to = offsets[(first + count) * stride]!;
  dst.ensureDataCapacity(dst.dataLength + (to - from));
  dst.data.set(src.bytes.subarray(from, to), dst.dataLength);
  const base = dst.dataLength - from;
  const dstOffsets = dst.values32;
  for (let i = 1, s = (first + 1) * stride, o = (dstRow + 1) * stride; i <= count; i++, s += stride, o += stride) dstOffsets[o] = offsets[s]! + base;
  dst.dataLength += to - from;
}

/**
 * A DataView over a source column's bytes, made once per column and batch:
 * splitBinary is called once per partition with the same source, and a new
 * DataView per call cost a tenth of its time at P=200. Keyed weakly by the
 * Uint8Array, so the view goes when the batch does.
 */
const sourceViews = new WeakMap<Uint8Array, DataView>();

function viewOf(bytes: Uint8Array): DataView {
  let view = sourceViews.get(bytes);
  if (view === undefined) {
    view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    sourceViews.set(bytes, view);
  }
  return view;
}

/** Bytes a partition's data buffer must take in for rows rowIds[start, end) of a binary or view column. */
export function dataBytesOf(src: SourceColumn, rowIds: Uint32Array, start: number, end: number): number {
  return src.layout.kind === 'view' ? viewBytesOf(src, rowIds, start, end) : binaryBytesOf(src, rowIds, start, end);
}

/** Value bytes of the rows rowIds[start, end): what a partition's data buffer must take in. */
export function binaryBytesOf(src: SourceColumn, rowIds: Uint32Array, start: number, end: number): number {
  const offsets = src.offsets!;
  const stride = src.offsetStride;
  let bytes = 0;
  for (let k = start; k < end; k++) {
    const r = rowIds[k]! * stride;
    bytes += offsets[r + stride]! - offsets[r]!;
  }
  return bytes;
}
