import type { ColumnBuffer } from './column-buffer.js';
import type { SourceColumn } from './source-column.js';
import { gatherBits } from './split-bits.js';
import { splitBinary } from './split-binary.js';
import { splitFixedWidth } from './split-fixed-width.js';

/** Moves one column's rows of one partition (rowIds[start, end)) to row `dstRow` of its partition buffer. */
export function splitColumn(
  src: SourceColumn,
  rowIds: Uint32Array,
  start: number,
  end: number,
  dst: ColumnBuffer,
  dstRow: number,
  capacity: number,
): void {
  const layout = src.layout;
  if (layout.kind === 'null') return;
  if (src.validity !== null) {
    dst.ensureValidity(capacity);
    gatherBits(src.validity, src.bitOffset, rowIds, start, end, dst.validity!, dstRow);
  } else {
    dst.markValid(dstRow, end - start);
  }
  switch (layout.kind) {
    case 'fixed-width':
      splitFixedWidth(src, layout.byteWidth, rowIds, start, end, dst, dstRow);
      break;
    case 'bool':
      gatherBits(src.bytes, src.bitOffset, rowIds, start, end, dst.values, dstRow);
      break;
    case 'binary':
      splitBinary(src, rowIds, start, end, dst, dstRow);
      break;
  }
}
