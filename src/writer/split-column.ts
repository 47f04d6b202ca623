import type { ColumnBuffer } from './column-buffer.js';
import type { SourceColumn } from './source-column.js';
import { gatherBits } from './split-bits.js';
import { splitBinary } from './split-binary.js';
import { splitFixedWidth } from './split-fixed-width.js';
import { splitRemappedIndices } from './split-dictionary.js';
import { selectedRows, type SplitPlan } from './split-plan.js';
import { splitView } from './split-view.js';

/** Moves one flat column's rows of one partition (rowIds[start, end)) to row `dstRow` of its partition buffer. */
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
  splitValidity(src, rowIds, start, end, dst, dstRow, capacity);
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
    case 'view':
      splitView(src, rowIds, start, end, dst, dstRow);
      break;
  }
}

function splitValidity(src: SourceColumn, rowIds: Uint32Array, start: number, end: number, dst: ColumnBuffer, dstRow: number, capacity: number): void {
  if (src.validity !== null) {
    dst.ensureValidity(capacity);
    gatherBits(src.validity, src.bitOffset, rowIds, start, end, dst.validity!, dstRow);
  } else {
    dst.markValid(dstRow, end - start);
  }
}

/** Per child of a dense union, the next offset to hand out (type ids are < 128). */
const unionCursor = new Int32Array(128);

/**
 * Moves partition p's rows of a planned column, at every nesting level, to
 * row `dstRow` of `dst` (Gluten serializes complex columns row by row; this
 * splits them buffer by buffer like flat ones). The buffers must already have
 * room for them (prepared from the same plan). A column without nested
 * levels may `skip` p's first rows (already moved by a top-up: splitRange).
 *
 * A list writes its offsets rebased onto the child rows the partition already
 * holds, then its child takes the planned child rows. Worked example: a
 * partition holding 3 child rows receives rows of lengths 2 and 0 and a null:
 *
 * ```text
 * dst offsets  [.., 3, 5, 5, 5]    3 + 2, + 0, + 0 (a null selects nothing)
 * child        rows 3, 4 appended
 * ```
 */
export function splitPlanned(plan: SplitPlan, p: number, dst: ColumnBuffer, dstRow: number, skip = 0): void {
  const { src, sel } = plan;
  const start = sel.starts[p]!;
  const end = sel.starts[p + 1]!;
  const layout = src.layout;
  switch (layout.kind) {
    case 'null':
    case 'fixed-width':
    case 'bool':
    case 'binary':
    case 'view':
    case 'dictionary':
      splitRange(plan, start + skip, end, dst, dstRow);
      return;
    case 'struct':
      splitValidity(src, sel.rowIds, start, end, dst, dstRow, dst.capacity);
      plan.children.forEach((child, i) => splitPlanned(child, p, dst.children[i]!, dstRow));
      return;
    case 'fixed-size-list':
      splitValidity(src, sel.rowIds, start, end, dst, dstRow, dst.capacity);
      splitPlanned(plan.children[0]!, p, dst.children[0]!, dstRow * layout.listSize);
      return;
    case 'list': {
      splitValidity(src, sel.rowIds, start, end, dst, dstRow, dst.capacity);
      const offsets = src.offsets!;
      const stride = src.offsetStride;
      const validity = src.validity;
      const dstOffsets = dst.values32;
      const childStart = dst.childRows[0]!;
      let pos = childStart;
      for (let k = start, o = (dstRow + 1) * stride; k < end; k++, o += stride) {
        const r = sel.rowIds[k]!;
        const bit = src.bitOffset + r;
        if (validity === null || ((validity[bit >>> 3]! >>> (bit & 7)) & 1) === 1) pos += offsets[(r + 1) * stride]! - offsets[r * stride]!;
        dstOffsets[o] = pos;
      }
      splitPlanned(plan.children[0]!, p, dst.children[0]!, childStart);
      dst.childRows[0] = pos;
      return;
    }
    case 'union': {
      splitFixedWidth(src, 1, sel.rowIds, start, end, dst, dstRow); // type ids
      if (layout.mode === 'sparse') {
        plan.children.forEach((child, i) => splitPlanned(child, p, dst.children[i]!, dstRow));
        return;
      }
      const typeIds = src.bytes;
      const childIndex = layout.childIndex;
      const dstOffsets = dst.unionOffsets;
      for (let c = 0; c < plan.children.length; c++) unionCursor[c] = dst.childRows[c]!;
      for (let k = start, j = dstRow; k < end; k++, j++) dstOffsets[j] = unionCursor[childIndex[typeIds[sel.rowIds[k]!]!]!]!++;
      plan.children.forEach((child, c) => {
        splitPlanned(child, p, dst.children[c]!, dst.childRows[c]!);
        dst.childRows[c]! += selectedRows(child.sel, p);
      });
      return;
    }
  }
}

/**
 * Moves rows rowIds[start, end) of a column without nested levels (flat or
 * dictionary) to row `dstRow` of `dst`: part of one partition's rows, when a
 * buffer is filled to capacity before it is flushed (the writer's top-up).
 */
export function splitRange(plan: SplitPlan, start: number, end: number, dst: ColumnBuffer, dstRow: number): void {
  const { src, sel } = plan;
  const layout = src.layout;
  if (layout.kind !== 'dictionary') {
    splitColumn(src, sel.rowIds, start, end, dst, dstRow, dst.capacity);
    return;
  }
  splitValidity(src, sel.rowIds, start, end, dst, dstRow, dst.capacity);
  if (plan.remap === null) splitFixedWidth(src, layout.indexWidth, sel.rowIds, start, end, dst, dstRow);
  else splitRemappedIndices(src, layout.indexWidth, layout.indexSigned, plan.remap, sel.rowIds, start, end, dst, dstRow);
}
