import { Vector, type Data } from 'apache-arrow';
import type { FieldNodeInfo } from '../format/ipc-message.js';
import { dataFromBuffers } from '../format/ipc-reader.js';
import { IdentityRows, onePartition, planAppend, splitAppend } from '../writer/append-rows.js';
import { ColumnBuffer } from '../writer/column-buffer.js';
import type { DictionaryLayout } from '../writer/column-layout.js';
import { prepareSourceColumn } from '../writer/source-column.js';
import type { ScratchSelections } from '../writer/split-plan.js';

/**
 * The dictionary of one id for the rows a BatchCoalescer holds: the vector
 * a batch brought, as it is, until a batch with another dictionary comes.
 * From then on its values are gathered into one buffer, and each further
 * dictionary's values are appended after them: the coalesced batch gets one
 * dictionary chunk, not a chunk per batch (an IPC writer would send every
 * chunk after the first as a delta, which some readers, polars among them,
 * refuse).
 *
 * Protocol: `keepsIndices(next)`; if not, `stage(next)` (false: it does not
 * fit, nothing is counted), then `commit(next)` once the batch's rows are in;
 * `vector()` at the flush.
 */
export class HeldDictionary {
  private brought: Vector | null = null;
  private values: ColumnBuffer | null = null;
  /** values counted in `values` (a staged dictionary lies past them until committed) */
  private length = 0;

  constructor(
    private readonly layout: DictionaryLayout,
    /** the largest index every field of this id can hold (maxIndexById) */
    private readonly maxIndex: number,
    private readonly identity: IdentityRows,
    private readonly scratch: ScratchSelections,
  ) {}

  /** Starts over with a batch's own dictionary (nothing is held). */
  reset(dictionary: Vector): void {
    this.brought = dictionary;
    this.length = dictionary.length;
    this.values?.clear();
  }

  /** Whether a batch with `next` keeps its indices: `next` is the held vector or extends it (a delta). */
  keepsIndices(next: Vector): boolean {
    if (this.brought === null) return false;
    if (next === this.brought) return true;
    const a = this.brought.data;
    const b = next.data;
    return a.length <= b.length && a.every((chunk, i) => chunk === b[i]);
  }

  /**
   * Appends `next`'s values after the held ones; returns the remap of its
   * indices (index i becomes `length + i`), or null, counting nothing, when
   * the index type cannot address them all or a binary buffer would pass
   * 2 GiB.
   */
  stage(next: Vector): Int32Array | null {
    if (this.length + next.length - 1 > this.maxIndex) return null;
    if (this.values === null || this.brought !== null) {
      // the first dictionary appended: the held one's values are gathered first
      this.values ??= new ColumnBuffer(this.layout.values);
      this.values.clear();
      if (this.brought !== null && !this.appendAt(0, this.brought)) return null;
      this.brought = null;
    }
    if (!this.appendAt(this.length, next)) return null;
    return Int32Array.from({ length: next.length }, (_, i) => this.length + i);
  }

  /** Counts a staged dictionary, or takes `next` as it is when its batch kept its indices. */
  commit(next: Vector, staged: boolean): void {
    if (staged) this.length += next.length;
    else this.reset(next);
  }

  /** The dictionary of the rows held. */
  vector(): Vector {
    if (this.brought !== null) return this.brought;
    const nodes: FieldNodeInfo[] = [];
    const buffers: Uint8Array[] = [];
    (this.values ??= new ColumnBuffer(this.layout.values)).snapshot(this.length, nodes, buffers, false);
    return new Vector([dataFromBuffers(this.layout.valueType, nodes, buffers)]);
  }

  /** Appends every value of `dictionary` at value `at`; false, changing nothing, past 2 GiB. */
  private appendAt(at: number, dictionary: Vector): boolean {
    const column = this.values!;
    const end = at + dictionary.length;
    // grown geometrically, as coalesced batches are
    const capacity = column.capacity >= end ? column.capacity : Math.max(end, 2 * column.capacity);
    let filled = at;
    for (const chunk of dictionary.data as Data[]) {
      const source = prepareSourceColumn(chunk, this.layout.values);
      const { plans, growth } = planAppend([source], [column], onePartition(this.identity.get(chunk.length), 0, chunk.length), filled, capacity, this.scratch);
      if (growth.overflows) return false;
      growth.apply();
      splitAppend(plans, [column], filled);
      filled += chunk.length;
    }
    return true;
  }
}
