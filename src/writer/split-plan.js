/**
 * Thrown by `ScratchSelections.take` when its memory could not be reserved
 * without waiting: the caller awaits a reservation of `bytes`, hands it over
 * with `prepay`, and plans again (planning is synchronous, reclaim is not).
 */
export class ScratchShortage extends Error {
    bytes;
    constructor(bytes) {
        super(`selection scratch needs ${bytes} more bytes`);
        this.bytes = bytes;
    }
}
/**
 * Arrays held for one slot each, grown (never shrunk) as chunks need them.
 * Each growth is reserved through `tryReserve` before it is allocated, or
 * paid from what `prepay` handed over.
 */
export class ScratchSelections {
    tryReserve;
    arrays = [];
    /** reserved bytes not yet allocated */
    prepaid = 0;
    constructor(tryReserve = () => true) {
        this.tryReserve = tryReserve;
    }
    take(slot, length) {
        const current = this.arrays[slot];
        if (current !== undefined && current.length >= length)
            return current;
        const grown = Math.max(length, Math.ceil((current?.length ?? 0) * 1.5), 64);
        const bytes = (grown - (current?.length ?? 0)) * 4;
        if (bytes > this.prepaid && !this.tryReserve(bytes - this.prepaid))
            throw new ScratchShortage(bytes - this.prepaid);
        this.prepaid = Math.max(0, this.prepaid - bytes);
        const array = new Uint32Array(grown);
        this.arrays[slot] = array;
        return array;
    }
    /** Adds reserved bytes the next growths may use. */
    prepay(bytes) {
        this.prepaid += bytes;
    }
    /** Bytes reserved for the arrays (allocated or prepaid). */
    get bytes() {
        return this.arrays.reduce((sum, a) => sum + a.byteLength, 0) + this.prepaid;
    }
    /** Drops every array; the caller releases `bytes` (read before). */
    clear() {
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
export function planSplit(src, sel, arrays, remapOf, slots) {
    const { layout } = src;
    const plan = (child, childSel) => planSplit(child, childSel, arrays, remapOf, slots);
    switch (layout.kind) {
        case 'struct':
        case 'union': {
            const dense = layout.kind === 'union' && layout.mode === 'dense';
            const children = src.children.map((child, c) => plan(child, dense ? denseUnionChildSelection(src, sel, c, arrays, slots) : sel));
            return { src, sel, children, remap: null };
        }
        case 'list':
            return { src, sel, children: [plan(src.children[0], listChildSelection(src, sel, arrays, slots))], remap: null };
        case 'fixed-size-list':
            return { src, sel, children: [plan(src.children[0], fixedListChildSelection(sel, layout.listSize, arrays, slots))], remap: null };
        case 'dictionary':
            return { src, sel, children: [], remap: remapOf(layout.id) };
        default:
            return { src, sel, children: [], remap: null };
    }
}
function takeSelection(arrays, slots, rows, partitions) {
    const rowIds = arrays.take(slots.next++, rows);
    // exactly partitions + 1 starts: a selection's partition count is its starts' length - 1
    const starts = arrays.take(slots.next++, partitions + 1).subarray(0, partitions + 1);
    return { rowIds, starts };
}
function isValid(src, row) {
    const v = src.validity;
    if (v === null)
        return true;
    const bit = src.bitOffset + row;
    return ((v[bit >>> 3] >>> (bit & 7)) & 1) === 1;
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
function listChildSelection(src, sel, arrays, slots) {
    const offsets = src.offsets;
    const stride = src.offsetStride;
    const partitions = sel.starts.length - 1;
    const first = sel.starts[0];
    const last = sel.starts[partitions];
    let total = 0;
    for (let k = first; k < last; k++) {
        const r = sel.rowIds[k];
        if (isValid(src, r))
            total += offsets[(r + 1) * stride] - offsets[r * stride];
    }
    const out = takeSelection(arrays, slots, total, partitions);
    const { rowIds, starts } = out;
    let pos = 0;
    for (let p = 0; p < partitions; p++) {
        starts[p] = pos;
        for (let k = sel.starts[p], end = sel.starts[p + 1]; k < end; k++) {
            const r = sel.rowIds[k];
            if (!isValid(src, r))
                continue;
            for (let e = offsets[r * stride], to = offsets[(r + 1) * stride]; e < to; e++)
                rowIds[pos++] = e;
        }
    }
    starts[partitions] = pos;
    return out;
}
/** A fixed-size list's child rows: rows r x size .. r x size + size - 1 for every selected row, null or not. */
function fixedListChildSelection(sel, size, arrays, slots) {
    const partitions = sel.starts.length - 1;
    const out = takeSelection(arrays, slots, (sel.starts[partitions] - sel.starts[0]) * size, partitions);
    const { rowIds, starts } = out;
    let pos = 0;
    for (let p = 0; p < partitions; p++) {
        starts[p] = pos;
        for (let k = sel.starts[p], end = sel.starts[p + 1]; k < end; k++) {
            for (let e = sel.rowIds[k] * size, to = e + size; e < to; e++)
                rowIds[pos++] = e;
        }
    }
    starts[partitions] = pos;
    return out;
}
/**
 * Child c of a dense union: the child rows the selected rows of type c point
 * at (their offsets), in order.
 */
function denseUnionChildSelection(src, sel, c, arrays, slots) {
    const layout = src.layout;
    const typeIds = src.bytes;
    const offsets = src.offsets;
    const childIndex = layout.childIndex;
    const partitions = sel.starts.length - 1;
    let total = 0;
    for (let k = sel.starts[0], end = sel.starts[partitions]; k < end; k++)
        if (childIndex[typeIds[sel.rowIds[k]]] === c)
            total++;
    const out = takeSelection(arrays, slots, total, partitions);
    const { rowIds, starts } = out;
    let pos = 0;
    for (let p = 0; p < partitions; p++) {
        starts[p] = pos;
        for (let k = sel.starts[p], end = sel.starts[p + 1]; k < end; k++) {
            const r = sel.rowIds[k];
            if (childIndex[typeIds[r]] === c)
                rowIds[pos++] = offsets[r];
        }
    }
    starts[partitions] = pos;
    return out;
}
/** Rows partition p receives at this level. */
export function selectedRows(sel, p) {
    return sel.starts[p + 1] - sel.starts[p];
}
/**
 * Runs a synchronous planning step whose scratch arrays may need memory the
 * pool cannot grant without reclaiming: on a shortage it waits for the
 * reservation (`grow`), prepays it to the scratch and plans again.
 */
export async function withScratchMemory(scratch, grow, plan) {
    for (;;) {
        try {
            return plan();
        }
        catch (error) {
            if (!(error instanceof ScratchShortage))
                throw error;
            await grow(error.bytes);
            scratch.prepay(error.bytes);
        }
    }
}
