import type { RecordBatch, Schema, Vector } from 'apache-arrow';
import type { FieldNodeInfo } from '../format/ipc-message.js';
import { recordBatchFromBuffers } from '../format/ipc-reader.js';
import { IdentityRows, onePartition, planAppend, splitAppend } from '../writer/append-rows.js';
import { ColumnBuffer } from '../writer/column-buffer.js';
import { columnLayoutOf, type ColumnLayout } from '../writer/column-layout.js';
import { collectDictionaries } from '../writer/dictionary-indices.js';
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
 * what is held. The dictionaries are placed by the ids of the coalescer's
 * schema: a batch whose columns of one such id hold different dictionaries
 * (another map output, whose schema gave them ids of their own) passes
 * through as it is, after what is held (coalesced, it took one column's
 * dictionary for both: wrong values, silently).
 *
 * Protocol: `push` each batch and emit what it returns, then emit `finish()`.
 */
export class BatchCoalescer {
  private readonly layouts: ColumnLayout[];
  private readonly columns: ColumnBuffer[];
  private filled = 0;
  private capacity = 0;
  private readonly identity = new IdentityRows();
  private readonly scratch = new ScratchSelections();
  /** the dictionaries of the rows held, by id (the newest, which extends the older ones) */
  private dictionaries = new Map<number, Vector>();

  constructor(private readonly schema: Schema, private readonly targetRows: number) {
    this.layouts = schema.fields.map((field) => columnLayoutOf(field));
    this.columns = this.layouts.map((layout) => new ColumnBuffer(layout));
  }

  push(batch: RecordBatch): RecordBatch[] {
    const out: RecordBatch[] = [];
    const rows = batch.numRows;
    if (rows === 0) return out;
    const dictionaries = new Map<number, Vector>();
    const placed = batch.data.children.every((data, c) => collectDictionaries(data, this.layouts[c]!, dictionaries) === null);
    const compatible = [...dictionaries].every(([id, next]) => extendsVector(next, this.dictionaries.get(id)));
    if (this.filled > 0 && (this.filled + rows > this.targetRows || !compatible || !placed)) out.push(this.flush());
    if (rows >= this.targetRows || !placed) {
      out.push(batch);
      return out;
    }
    this.dictionaries = dictionaries;
    if (this.append(batch)) return out;
    // its binary values would take a held buffer past 2 GiB: what is held goes first, then the batch
    if (this.filled > 0) {
      out.push(this.flush());
      if (this.append(batch)) return out;
    }
    out.push(batch);
    return out;
  }

  finish(): RecordBatch | null {
    return this.filled > 0 ? this.flush() : null;
  }

  /** Appends the batch's rows; false, changing nothing, when a binary data buffer would pass 2 GiB. */
  private append(batch: RecordBatch): boolean {
    const rows = batch.numRows;
    // grow by doubling up to the target, so a huge target does not allocate up front
    const capacity = this.filled + rows > this.capacity ? Math.min(this.targetRows, Math.max(this.capacity * 2, this.filled + rows, 1024)) : this.capacity;
    const sources = batch.data.children.map((data, c) => prepareSourceColumn(data, this.layouts[c]!));
    const { plans, growth } = planAppend(sources, this.columns, onePartition(this.identity.get(rows), 0, rows), this.filled, capacity, this.scratch);
    if (growth.overflows) return false;
    growth.apply();
    this.capacity = capacity;
    splitAppend(plans, this.columns, this.filled);
    this.filled += rows;
    return true;
  }

  private flush(): RecordBatch {
    const nodes: FieldNodeInfo[] = [];
    const buffers: Uint8Array[] = [];
    for (const column of this.columns) {
      column.snapshot(this.filled, nodes, buffers);
      column.clear();
    }
    const batch = recordBatchFromBuffers(this.schema, this.filled, nodes, buffers, this.dictionaries);
    this.filled = 0;
    return batch;
  }
}

/** Whether `next` holds `previous`'s chunks first (an IPC delta dictionary appends to the previous vector). */
function extendsVector(next: Vector, previous: Vector | undefined): boolean {
  if (previous === undefined || previous === next) return true;
  const a = previous.data;
  const b = next.data;
  return a.length <= b.length && a.every((chunk, i) => chunk === b[i]);
}
