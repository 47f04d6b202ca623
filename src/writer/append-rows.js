import { BufferGrowth } from './buffer-growth.js';
import { splitPlanned } from './split-column.js';
import { planSplit } from './split-plan.js';
/** rowIds[start, end) as the one partition of a selection. */
export function onePartition(rowIds, start, end) {
    return { rowIds, starts: Uint32Array.of(start, end) };
}
/**
 * Plans appending the selected rows of `sources` after row `filled` of
 * `columns` (one per source), which then have `capacity` rows.
 */
export function planAppend(sources, columns, sel, filled, capacity, arrays, remapOf = () => null) {
    const slots = { next: 0 };
    const plans = sources.map((src) => planSplit(src, sel, arrays, remapOf, slots));
    const growth = new BufferGrowth();
    plans.forEach((plan, c) => growth.plan(plan, 0, columns[c], filled, capacity));
    return { plans, growth };
}
/** Writes the planned rows (after `growth.apply()`). */
export function splitAppend(plans, columns, filled) {
    plans.forEach((plan, c) => splitPlanned(plan, 0, columns[c], filled));
}
/** Row ids 0, 1, 2, ...: appending whole buffers. Grown as needed, never shrunk. */
export class IdentityRows {
    ids = new Uint32Array(0);
    /** An array whose first `rows` entries are 0 .. rows - 1. */
    get(rows) {
        if (this.ids.length < rows) {
            const ids = new Uint32Array(this.bytesFor(rows) / 4);
            for (let i = 0; i < ids.length; i++)
                ids[i] = i;
            this.ids = ids;
        }
        return this.ids;
    }
    get bytes() {
        return this.ids.byteLength;
    }
    /** What `bytes` will be after `get(rows)` (reserve the difference first). */
    bytesFor(rows) {
        return this.ids.length >= rows ? this.ids.byteLength : Math.max(rows, this.ids.length * 2, 1024) * 4;
    }
}
