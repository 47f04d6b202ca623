import type { RecordBatch, Schema, Vector } from 'apache-arrow';
import type { FieldNodeInfo } from '../format/ipc-message.js';
import { recordBatchFromBuffers } from '../format/ipc-reader.js';
import { IdentityRows, onePartition, planAppend, splitAppend } from '../writer/append-rows.js';
import { ColumnBuffer } from '../writer/column-buffer.js';
import { columnLayoutOf, dictionaryLayouts, type ColumnLayout } from '../writer/column-layout.js';
import { collectDictionaries, maxIndexById } from '../writer/dictionary-indices.js';
import { prepareSourceColumn } from '../writer/source-column.js';
import { ScratchSelections } from '../writer/split-plan.js';
import { HeldDictionary } from './held-dictionary.js';

/**
 * Merges small batches into batches of about `targetRows` rows (after a
 * shuffle, partitions often arrive as many small batches: Gluten #9035).
 * It appends rows with the writer's own split functions, reading every row
 * in order, nested columns included. A batch that is already large enough
 * passes through untouched.
 *
 * Dictionary columns: a batch whose dictionary is the one of the rows held,
 * or extends it (a delta dictionary, as in one partition's stream), keeps its
 * indices. A batch with another dictionary (each of the sort writer's blocks
 * brings its own, and so does each map output) has its dictionary's values
 * appended after the held ones and its indices shifted past them, as
 * arrow-rs's `concat` does (values are not de-duplicated; see
 * held-dictionary.ts); when the index type cannot address them all, what is
 * held is flushed first. The dictionaries are placed by the ids of the
 * coalescer's schema: a batch whose columns of one such id hold different
 * dictionaries (another map output, whose schema gave them ids of their own)
 * passes through as it is, after what is held (coalesced, it took one
 * column's dictionary for both: wrong values, silently).
 *
 * ```text
 * held:  dictionary [a, b]      indices 0 1 1
 * batch: dictionary [b, c, d]   indices 2 0
 * out:   dictionary [a, b, b, c, d]   indices 0 1 1 4 2   (the batch's shifted by 2)
 * ```
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
  /** the dictionary of the rows held, by id */
  private readonly dictionaries = new Map<number, HeldDictionary>();

  constructor(private readonly schema: Schema, private readonly targetRows: number) {
    this.layouts = schema.fields.map((field) => columnLayoutOf(field));
    this.columns = this.layouts.map((layout) => new ColumnBuffer(layout));
    const dictionaryColumns = this.layouts.flatMap((column) => dictionaryLayouts(column));
    const maxIndex = maxIndexById(dictionaryColumns);
    for (const layout of dictionaryColumns) {
      if (!this.dictionaries.has(layout.id)) this.dictionaries.set(layout.id, new HeldDictionary(layout, maxIndex.get(layout.id)!, this.identity, this.scratch));
    }
  }

  push(batch: RecordBatch): RecordBatch[] {
    const out: RecordBatch[] = [];
    const rows = batch.numRows;
    if (rows === 0) return out;
    const dictionaries = new Map<number, Vector>();
    const placed = batch.data.children.every((data, c) => collectDictionaries(data, this.layouts[c]!, dictionaries) === null);
    if (this.filled > 0 && (this.filled + rows > this.targetRows || !placed)) out.push(this.flush());
    if (rows >= this.targetRows || !placed) {
      out.push(batch);
      return out;
    }
    let remaps = this.filled > 0 ? this.stageDictionaries(dictionaries) : NO_REMAPS;
    if (remaps === null) {
      out.push(this.flush());
      remaps = NO_REMAPS;
    }
    if (this.append(batch, dictionaries, remaps)) return out;
    // its binary values would take a held buffer past 2 GiB: what is held goes first, then the batch
    if (this.filled > 0) {
      out.push(this.flush());
      if (this.append(batch, dictionaries, NO_REMAPS)) return out;
    }
    out.push(batch);
    return out;
  }

  finish(): RecordBatch | null {
    return this.filled > 0 ? this.flush() : null;
  }

  /**
   * Appends the values of each of a batch's `dictionaries` that does not keep
   * its indices to the held one; returns the remaps of their indices, or null
   * when one of them does not fit (the batch then goes after a flush).
   */
  private stageDictionaries(dictionaries: ReadonlyMap<number, Vector>): ReadonlyMap<number, Int32Array> | null {
    const remaps = new Map<number, Int32Array>();
    for (const [id, dictionary] of dictionaries) {
      const held = this.dictionaries.get(id)!;
      if (held.keepsIndices(dictionary)) continue;
      const remap = held.stage(dictionary);
      if (remap === null) return null;
      remaps.set(id, remap);
    }
    return remaps;
  }

  /**
   * Appends the batch's rows, the indices of its dictionaries remapped by
   * `remaps` (the held rows' otherwise); false, changing nothing, when a binary
   * data buffer would pass 2 GiB.
   */
  private append(batch: RecordBatch, dictionaries: ReadonlyMap<number, Vector>, remaps: ReadonlyMap<number, Int32Array>): boolean {
    const rows = batch.numRows;
    // grow by doubling up to the target, so a huge target does not allocate up front
    const capacity = this.filled + rows > this.capacity ? Math.min(this.targetRows, Math.max(this.capacity * 2, this.filled + rows, 1024)) : this.capacity;
    const sources = batch.data.children.map((data, c) => prepareSourceColumn(data, this.layouts[c]!));
    const remapOf = (id: number) => remaps.get(id) ?? null;
    const { plans, growth } = planAppend(sources, this.columns, onePartition(this.identity.get(rows), 0, rows), this.filled, capacity, this.scratch, remapOf);
    if (growth.overflows) return false;
    growth.apply();
    this.capacity = capacity;
    splitAppend(plans, this.columns, this.filled);
    for (const [id, dictionary] of dictionaries) this.dictionaries.get(id)!.commit(dictionary, remaps.has(id));
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
    const dictionaries = new Map<number, Vector>();
    for (const [id, held] of this.dictionaries) dictionaries.set(id, held.vector());
    const batch = recordBatchFromBuffers(this.schema, this.filled, nodes, buffers, dictionaries);
    this.filled = 0;
    return batch;
  }
}

const NO_REMAPS: ReadonlyMap<number, Int32Array> = new Map();
