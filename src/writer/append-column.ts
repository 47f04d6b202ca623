import type { ColumnBuffer } from './column-buffer.js';
import type { SourceColumn } from './source-column.js';
import { gatherBits } from './split-bits.js';
import { splitView } from './split-view.js';

/**
 * Appends rows 0 .. rows - 1 of a flat split source (a partition buffer's
 * column, `asSource(rows)`, or an input batch's) to `dst` at row `dstRow`:
 * the payload merger's append (Gluten's InMemoryPayload::merge) and the input
 * staging's. Rows are contiguous, so values and binary data are block copies
 * (memcpy) rather than the split's per-row gathers; only binary offsets are
 * rebased and validity bits shifted.
 *
 * Worked example, utf8: dst holds "ab" (offsets [0, 2], dataLength 2), src
 * holds "cde", "f" (offsets [0, 3, 4]):
 *
 * ```text
 * dst data     "ab" + "cdef"                  one copy of src's dataLength bytes
 * dst offsets  [0, 2, 2 + 3, 2 + 4] = [0, 2, 5, 6]
 * ```
 * The destination has room for the rows and the data (the caller sized it);
 * `identity` holds row ids 0, 1, 2, ... (at least `rows` of them) for the bit copy.
 */
export function appendRows(src: SourceColumn, rows: number, dst: ColumnBuffer, dstRow: number, capacity: number, identity: Uint32Array): void {
  const layout = src.layout;
  if (layout.kind === 'null') return;
  if (src.validity !== null) {
    dst.ensureValidity(capacity);
    gatherBits(src.validity, src.bitOffset, identity, 0, rows, dst.validity!, dstRow);
  } else {
    dst.markValid(dstRow, rows);
  }
  switch (layout.kind) {
    case 'fixed-width': {
      const width = layout.byteWidth;
      dst.values.set(src.bytes.subarray(0, rows * width), dstRow * width);
      break;
    }
    case 'bool':
      gatherBits(src.bytes, src.bitOffset, identity, 0, rows, dst.values, dstRow);
      break;
    case 'binary': {
      const stride = src.offsetStride;
      const from = src.offsets!;
      const first = from[0]!;
      const last = from[rows * stride]!;
      const base = dst.dataLength - first;
      const to = dst.values32;
      // int64 offsets: low words only; the high words are 0 in both (data < 2 GiB per buffer)
      for (let s = stride, d = (dstRow + 1) * stride, end = rows * stride; s <= end; s += stride, d += stride) to[d] = from[s]! + base;
      dst.data.set(src.bytes.subarray(first, last), dst.dataLength);
      dst.dataLength += last - first;
      break;
    }
    case 'view':
      // each long value may sit in any of the source's variadic buffers: re-pointed one by one, as the split does
      splitView(src, identity, 0, rows, dst, dstRow);
      break;
  }
}
