import type { MemoryReservation } from '../memory/memory-pool.js';
import { appendRows } from './append-column.js';
import { BufferGrowth } from './buffer-growth.js';
import type { ColumnBuffer } from './column-buffer.js';
import { isFlat } from './column-layout.js';
import type { SourceColumn } from './source-column.js';
import { splitPlanned } from './split-column.js';
import { planSplit, withScratchMemory, type RowSelection, type ScratchSelections, type SelectionArrays, type SplitPlan } from './split-plan.js';

/**
 * Appending rows to one set of column buffers: a split into a single
 * partition. Used wherever buffers are filled from other buffers or from
 * arrow-js data outside the partition split: the writer's payload merger,
 * the reader's batch coalescer, dictionaries and hash keys.
 *
 * Protocol: `planAppend`, then reserve `growth.bytesAfter` if memory is
 * accounted, `growth.apply()`, release `growth.bytesBefore`, then
 * `splitAppend` with the same plans.
 */
export interface AppendPlan {
  readonly plans: SplitPlan[];
  readonly growth: BufferGrowth;
}

/** rowIds[start, end) as the one partition of a selection. */
export function onePartition(rowIds: Uint32Array, start: number, end: number): RowSelection {
  return { rowIds, starts: Uint32Array.of(start, end) };
}

/**
 * Plans appending the selected rows of `sources` after row `filled` of
 * `columns` (one per source), which then have `capacity` rows.
 */
export function planAppend(
  sources: readonly SourceColumn[],
  columns: readonly ColumnBuffer[],
  sel: RowSelection,
  filled: number,
  capacity: number,
  arrays: SelectionArrays,
  remapOf: (dictionaryId: number) => Int32Array | null = () => null,
): AppendPlan {
  const slots = { next: 0 };
  const plans = sources.map((src) => planSplit(src, sel, arrays, remapOf, slots));
  const growth = new BufferGrowth();
  plans.forEach((plan, c) => growth.plan(plan, 0, columns[c]!, filled, capacity));
  return { plans, growth };
}

/**
 * The whole protocol with memory accounted in `reservation`: appends rows
 * 0 .. rows - 1 of `sources` after row `filled` of `columns`, which then have
 * `capacity` rows; flat columns with block copies (appendRows), nested ones
 * through their plans. `identity` holds row ids 0, 1, 2, ... (at least `rows`).
 */
export async function appendAccounted(
  sources: readonly SourceColumn[],
  columns: readonly ColumnBuffer[],
  rows: number,
  filled: number,
  capacity: number,
  identity: Uint32Array,
  scratch: ScratchSelections,
  reservation: MemoryReservation,
): Promise<void> {
  const { plans, growth } = await withScratchMemory(scratch, (bytes) => reservation.grow(bytes), () =>
    planAppend(sources, columns, onePartition(identity, 0, rows), filled, capacity, scratch),
  );
  if (!growth.empty) {
    await reservation.grow(growth.bytesAfter);
    growth.apply();
    reservation.shrink(growth.bytesBefore);
  }
  columns.forEach((column, c) => {
    if (isFlat(column.layout)) appendRows(sources[c]!, rows, column, filled, capacity, identity);
    else splitPlanned(plans[c]!, 0, column, filled);
  });
}

/** Writes the planned rows (after `growth.apply()`). */
export function splitAppend(plans: readonly SplitPlan[], columns: readonly ColumnBuffer[], filled: number): void {
  plans.forEach((plan, c) => splitPlanned(plan, 0, columns[c]!, filled));
}

/** Row ids 0, 1, 2, ...: appending whole buffers. Grown as needed, never shrunk. */
export class IdentityRows {
  private ids = new Uint32Array(0);

  /** An array whose first `rows` entries are 0 .. rows - 1. */
  get(rows: number): Uint32Array {
    if (this.ids.length < rows) {
      const ids = new Uint32Array(this.bytesFor(rows) / 4);
      for (let i = 0; i < ids.length; i++) ids[i] = i;
      this.ids = ids;
    }
    return this.ids;
  }

  get bytes(): number {
    return this.ids.byteLength;
  }

  /** What `bytes` will be after `get(rows)` (reserve the difference first). */
  bytesFor(rows: number): number {
    return this.ids.length >= rows ? this.ids.byteLength : Math.max(rows, this.ids.length * 2, 1024) * 4;
  }

  /** Drops the array; returns the bytes it held (to release from a reservation: a second call returns 0). */
  release(): number {
    const bytes = this.ids.byteLength;
    this.ids = new Uint32Array(0);
    return bytes;
  }
}
