import type { SourceColumn } from './source-column.js';

/**
 * The rows of one nesting level of a column, grouped by partition (`starts` has
 * exactly numPartitions + 1 entries): partition
 * p's rows are `rowIds[starts[p] .. starts[p + 1])`, row ids of that level's
 * source. The top level is the counting sort's partition2RowOffset /
 * rowOffset2RowId; every nested level is derived from its parent's.
 */
export interface RowSelection {
  readonly rowIds: Uint32Array;
  readonly starts: Uint32Array;
}

/**
 * What one chunk's split does to one column: its source, the rows of each
 * partition at this level, and the same for every nested level below. Built
 * before the partition buffers are prepared (their sizes depend on how many
 * child rows each partition receives) and used by the split that follows.
 */
export interface SplitPlan {
  readonly src: SourceColumn;
  readonly sel: RowSelection;
  readonly children: readonly SplitPlan[];
  /** dictionary columns: output index of each input index, or null when they are the same */
  readonly remap: Int32Array | null;
}

/** Where derived selections get their arrays. */
export interface SelectionArrays {
  /** An array of at least `length` entries for slot `slot` (contents undefined), reusable after the split. */
  take(slot: number, length: number): Uint32Array;
}

/**
 * Thrown by `ScratchSelections.take` when its memory could not be reserved
 * without waiting: the caller awaits a reservation of `bytes`, hands it over
 * with `prepay`, and plans again (planning is synchronous, reclaim is not).
 */
export class ScratchShortage extends Error {
  constructor(readonly bytes: number) {
    super(`selection scratch needs ${bytes} more bytes`);
  }
}

/**
 * Arrays held for one slot each, grown (never shrunk) as chunks need them.
 * Each growth is reserved through `tryReserve` before it is allocated, or
 * paid from what `prepay` handed over.
 */
export class ScratchSelections implements SelectionArrays {
  private readonly arrays: Uint32Array[] = [];
  /** reserved bytes not yet allocated */
  private prepaid = 0;

  constructor(private readonly tryReserve: (bytes: number) => boolean = () => true) {}

  take(slot: number, length: number): Uint32Array {
    const current = this.arrays[slot];
    if (current !== undefined && current.length >= length) return current;
    const grown = Math.max(length, Math.ceil((current?.length ?? 0) * 1.5), 64);
    const bytes = (grown - (current?.length ?? 0)) * 4;
    if (bytes > this.prepaid && !this.tryReserve(bytes - this.prepaid)) throw new ScratchShortage(bytes - this.prepaid);
    this.prepaid = Math.max(0, this.prepaid - bytes);
    const array = new Uint32Array(grown);
    this.arrays[slot] = array;
    return array;
  }

  /** Adds reserved bytes the next growths may use. */
  prepay(bytes: number): void {
    this.prepaid += bytes;
  }

  /** Bytes reserved for the arrays (allocated or prepaid). */
  get bytes(): number {
    return this.arrays.reduce((sum, a) => sum + a.byteLength, 0) + this.prepaid;
  }

  /** Drops every array; the caller releases `bytes` (read before). */
  clear(): void {
    this.arrays.length = 0;
    this.prepaid = 0;
  }
}

/**
 * Builds the plan of one column for a selection of its rows. Derived
 * selections take their arrays from `arrays`, in slots numbered in pre-order
 * from `slots.next` (shared by all columns of a chunk, so each chunk reuses the
 * same arrays); `remapOf` gives a dictionary column's index remap by dictionary
 * id. Null list rows select no child rows (their offsets ranges, which Arrow
 * allows to be non-empty, are dropped); the slots of null struct, fixed-size
 * list and sparse union rows are kept, as the layout requires.
 */
export function planSplit(
  src: SourceColumn,
  sel: RowSelection,
  arrays: SelectionArrays,
  remapOf: (dictionaryId: number) => Int32Array | null,
  slots: { next: number },
): SplitPlan {
  const { layout } = src;
  switch (layout.kind) {
    case 'struct':
    case 'union': {
      const dense = layout.kind === 'union' && layout.mode === 'dense';
      const children = src.children.map((child, c) => planSplit(child, dense ? denseUnionChildSelection(src, sel, c, arrays, slots) : sel, arrays, remapOf, slots));
      return { src, sel, children, remap: null };
    }
    case 'list':
      return { src, sel, children: [planSplit(src.children[0]!, listChildSelection(src, sel, arrays, slots), arrays, remapOf, slots)], remap: null };
    case 'fixed-size-list':
      return { src, sel, children: [planSplit(src.children[0]!, fixedListChildSelection(sel, layout.listSize, arrays, slots), arrays, remapOf, slots)], remap: null };
    case 'dictionary':
      return { src, sel, children: [], remap: remapOf(layout.id) };
    default:
      return { src, sel, children: [], remap: null };
  }
}

function takeSelection(arrays: SelectionArrays, slots: { next: number }, rows: number, partitions: number): RowSelection {
  const rowIds = arrays.take(slots.next++, rows);
  // exactly partitions + 1 starts: a selection's partition count is its starts' length - 1
  const starts = arrays.take(slots.next++, partitions + 1).subarray(0, partitions + 1);
  return { rowIds, starts };
}

function isValid(src: SourceColumn, row: number): boolean {
  const v = src.validity;
  if (v === null) return true;
  const bit = src.bitOffset + row;
  return ((v[bit >>> 3]! >>> (bit & 7)) & 1) === 1;
}

/**
 * A list's child rows, partition by partition: the offsets range of every
 * selected (valid) row, in order.
 *
 * Worked example: offsets [0, 2, 2, 5] (rows [a b], [], [c d e]), two
 * partitions with rows [2] and [0, 1]:
 *
 * ```text
 * parent  rowIds [2, 0, 1]  starts [0, 1, 3]
 * child   rowIds [2, 3, 4, 0, 1]  starts [0, 3, 5]     (c d e | a b)
 * ```
 */
function listChildSelection(src: SourceColumn, sel: RowSelection, arrays: SelectionArrays, slots: { next: number }): RowSelection {
  const offsets = src.offsets!;
  const stride = src.offsetStride;
  const partitions = sel.starts.length - 1;
  const first = sel.starts[0]!;
  const last = sel.starts[partitions]!;
  let total = 0;
  for (let k = first; k < last; k++) {
    const r = sel.rowIds[k]!;
    if (isValid(src, r)) total += offsets[(r + 1) * stride]! - offsets[r * stride]!;
  }
  const out = takeSelection(arrays, slots, total, partitions);
  const { rowIds, starts } = out;
  let pos = 0;
  for (let p = 0; p < partitions; p++) {
    starts[p] = pos;
    for (let k = sel.starts[p]!, end = sel.starts[p + 1]!; k < end; k++) {
      const r = sel.rowIds[k]!;
      if (!isValid(src, r)) continue;
      for (let e = offsets[r * stride]!, to = offsets[(r + 1) * stride]!; e < to; e++) rowIds[pos++] = e;
    }
  }
  starts[partitions] = pos;
  return out;
}

/** A fixed-size list's child rows: rows r x size .. r x size + size - 1 for every selected row, null or not. */
function fixedListChildSelection(sel: RowSelection, size: number, arrays: SelectionArrays, slots: { next: number }): RowSelection {
  const partitions = sel.starts.length - 1;
  const out = takeSelection(arrays, slots, (sel.starts[partitions]! - sel.starts[0]!) * size, partitions);
  const { rowIds, starts } = out;
  let pos = 0;
  for (let p = 0; p < partitions; p++) {
    starts[p] = pos;
    for (let k = sel.starts[p]!, end = sel.starts[p + 1]!; k < end; k++) {
      for (let e = sel.rowIds[k]! * size, to = e + size; e < to; e++) rowIds[pos++] = e;
    }
  }
  starts[partitions] = pos;
  return out;
}

/**
 * Child c of a dense union: the child rows the selected rows of type c point
 * at (their offsets), in order.
 */
function denseUnionChildSelection(src: SourceColumn, sel: RowSelection, c: number, arrays: SelectionArrays, slots: { next: number }): RowSelection {
  const layout = src.layout as Extract<SourceColumn['layout'], { kind: 'union' }>;
  const typeIds = src.bytes;
  const offsets = src.offsets!;
  const childIndex = layout.childIndex;
  const partitions = sel.starts.length - 1;
  let total = 0;
  for (let k = sel.starts[0]!, end = sel.starts[partitions]!; k < end; k++) if (childIndex[typeIds[sel.rowIds[k]!]!] === c) total++;
  const out = takeSelection(arrays, slots, total, partitions);
  const { rowIds, starts } = out;
  let pos = 0;
  for (let p = 0; p < partitions; p++) {
    starts[p] = pos;
    for (let k = sel.starts[p]!, end = sel.starts[p + 1]!; k < end; k++) {
      const r = sel.rowIds[k]!;
      if (childIndex[typeIds[r]!] === c) rowIds[pos++] = offsets[r]!;
    }
  }
  starts[partitions] = pos;
  return out;
}

/** Rows partition p receives at this level. */
export function selectedRows(sel: RowSelection, p: number): number {
  return sel.starts[p + 1]! - sel.starts[p]!;
}

/**
 * Runs a synchronous planning step whose scratch arrays may need memory the
 * pool cannot grant without reclaiming: on a shortage it waits for the
 * reservation (`grow`), prepays it to the scratch and plans again.
 */
export async function withScratchMemory<T>(scratch: ScratchSelections, grow: (bytes: number) => Promise<void>, plan: () => T): Promise<T> {
  for (;;) {
    try {
      return plan();
    } catch (error) {
      if (!(error instanceof ScratchShortage)) throw error;
      await grow(error.bytes);
      scratch.prepay(error.bytes);
    }
  }
}
