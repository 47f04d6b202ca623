import { recordBatchFromBuffers } from '../format/ipc-reader.js';
import { IdentityRows, onePartition, planAppend, splitAppend } from '../writer/append-rows.js';
import { ColumnBuffer } from '../writer/column-buffer.js';
import { childLayouts, columnLayoutOf } from '../writer/column-layout.js';
import { prepareSourceColumn } from '../writer/source-column.js';
import { ScratchSelections } from '../writer/split-plan.js';
/**
 * Merges small batches into batches of about `targetRows` rows (after a
 * shuffle, partitions often arrive as many small batches: Gluten #9035).
 * It appends rows with the writer's own split functions, reading every row
 * in order, nested columns included. A batch that is already large enough
 * passes through untouched.
 *
 * Dictionary columns keep their indices: the rows held so far and a new
 * batch must share the dictionary (a delta dictionary only extends it, as in
 * one partition's stream); a batch with another dictionary first flushes
 * what is held.
 *
 * Protocol: `push` each batch and emit what it returns, then emit `finish()`.
 */
export class BatchCoalescer {
    schema;
    targetRows;
    layouts;
    columns;
    filled = 0;
    capacity = 0;
    identity = new IdentityRows();
    scratch = new ScratchSelections();
    /** the dictionaries of the rows held, by id (the newest, which extends the older ones) */
    dictionaries = new Map();
    constructor(schema, targetRows) {
        this.schema = schema;
        this.targetRows = targetRows;
        this.layouts = schema.fields.map((field) => columnLayoutOf(field));
        this.columns = this.layouts.map((layout) => new ColumnBuffer(layout));
    }
    push(batch) {
        const out = [];
        const rows = batch.numRows;
        if (rows === 0)
            return out;
        const dictionaries = new Map();
        batch.data.children.forEach((data, c) => collectDictionaries(data, this.layouts[c], dictionaries));
        const compatible = [...dictionaries].every(([id, next]) => extendsVector(next, this.dictionaries.get(id)));
        if (this.filled > 0 && (this.filled + rows > this.targetRows || !compatible))
            out.push(this.flush());
        if (rows >= this.targetRows) {
            out.push(batch);
            return out;
        }
        this.dictionaries = dictionaries;
        this.append(batch);
        return out;
    }
    finish() {
        return this.filled > 0 ? this.flush() : null;
    }
    append(batch) {
        const rows = batch.numRows;
        // grow by doubling up to the target, so a huge target does not allocate up front
        const capacity = this.filled + rows > this.capacity ? Math.min(this.targetRows, Math.max(this.capacity * 2, this.filled + rows, 1024)) : this.capacity;
        const sources = batch.data.children.map((data, c) => prepareSourceColumn(data, this.layouts[c]));
        const { plans, growth } = planAppend(sources, this.columns, onePartition(this.identity.get(rows), 0, rows), this.filled, capacity, this.scratch);
        growth.apply();
        this.capacity = capacity;
        splitAppend(plans, this.columns, this.filled);
        this.filled += rows;
    }
    flush() {
        const nodes = [];
        const buffers = [];
        for (const column of this.columns) {
            column.snapshot(this.filled, nodes, buffers);
            column.clear();
        }
        const batch = recordBatchFromBuffers(this.schema, this.filled, nodes, buffers, this.dictionaries);
        this.filled = 0;
        return batch;
    }
}
function collectDictionaries(data, layout, found) {
    if (layout.kind === 'dictionary')
        found.set(layout.id, data.dictionary);
    else
        childLayouts(layout).forEach((child, i) => collectDictionaries(data.children[i], child, found));
}
/** Whether `next` holds `previous`'s chunks first (an IPC delta dictionary appends to the previous vector). */
function extendsVector(next, previous) {
    if (previous === undefined || previous === next)
        return true;
    const a = previous.data;
    const b = next.data;
    return a.length <= b.length && a.every((chunk, i) => chunk === b[i]);
}
