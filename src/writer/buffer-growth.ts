import { BufferRecycler } from '../memory/buffer-recycler.js';
import { fixedBytesPerRow } from './column-layout.js';
import { grownDataCapacity, hasData, hasOwnLength, hasValidity, MAX_DATA_BYTES, type ColumnBuffer } from './column-buffer.js';
import { dataBytesOf } from './split-binary.js';
import { selectedRows, type SplitPlan } from './split-plan.js';

/** One node's buffers re-allocated so that a split fits. */
interface NodeChange {
  node: ColumnBuffer;
  capacity: number;
  keep: number;
  validity: boolean;
  dataBytes: number;
}

/**
 * The buffers one column of one partition must get before a planned split
 * writes into them, node by node through the nesting, and what they cost: the
 * caller reserves `bytesAfter` (old and new buffers exist together while rows
 * are copied), applies, then releases `bytesBefore`. Nothing is allocated
 * until `apply`.
 */
export class BufferGrowth {
  private readonly changes: NodeChange[] = [];
  bytesBefore = 0;
  bytesAfter = 0;
  /** whether a binary data buffer would need more than MAX_DATA_BYTES (apply() would throw a RangeError) */
  overflows = false;

  get empty(): boolean {
    return this.changes.length === 0;
  }

  /**
   * Plans `node` (holding `keep` rows) for partition p's rows of `plan` at a
   * capacity of `capacity` rows. Children with lengths of their own (list,
   * dense union) grow by half again when full; children sharing the parent's
   * rows follow its capacity. `dataBytesFor(capacity)` sizes a re-allocated
   * binary data buffer (the writer's running average), at least what is needed.
   */
  plan(plan: SplitPlan, p: number, node: ColumnBuffer, keep: number, capacity: number, dataBytesFor?: (capacity: number) => number): this {
    const { layout } = node;
    const validity = hasValidity(layout) && (node.validity !== null || plan.src.validity !== null);
    let dataBytes = node.data.byteLength;
    const resize = capacity !== node.capacity;
    if (hasData(layout)) {
      const incoming = dataBytesOf(plan.src, plan.sel.rowIds, plan.sel.starts[p]!, plan.sel.starts[p + 1]!);
      const needed = node.dataLength + incoming;
      if (needed > MAX_DATA_BYTES) this.overflows = true;
      // a nested binary node has no running average of its own: size it like the rows arriving now
      const estimate = dataBytesFor ?? ((rows: number) => Math.ceil((incoming / Math.max(1, selectedRows(plan.sel, p))) * rows));
      // an estimate is never more than a buffer may hold (values of MiBs times a capacity of 1,024 rows were)
      dataBytes = resize ? Math.max(needed, Math.min(estimate(capacity), MAX_DATA_BYTES)) : grownDataCapacity(dataBytes, needed);
      // any length at least this will do: a size class lets buffers of other partitions be reused
      if (dataBytes !== node.data.byteLength) dataBytes = Math.max(needed, Math.min(BufferRecycler.recycledLength(dataBytes), MAX_DATA_BYTES));
    }
    if (resize || validity !== (node.validity !== null) || dataBytes !== node.data.byteLength) {
      this.changes.push({ node, capacity, keep, validity, dataBytes });
      this.bytesBefore += node.ownBytes;
      // what apply() allocates: a node keeping its capacity keeps its values
      this.bytesAfter += resize ? node.bytesFor(capacity, validity, dataBytes) : node.bytesAtCapacity(validity, dataBytes);
    }
    plan.children.forEach((childPlan, i) => {
      const child = node.children[i]!;
      if (hasOwnLength(layout)) {
        // a full child: grow by half, or at once to what a full parent would need at the rate rows arrive now
        const used = node.childRows[i]!;
        const incoming = selectedRows(childPlan.sel, p);
        const needed = used + incoming;
        const perRow = incoming / Math.max(1, selectedRows(plan.sel, p));
        const grown = Math.max(needed, Math.ceil(child.capacity * 1.5), Math.ceil(perRow * capacity));
        this.plan(childPlan, p, child, used, needed > child.capacity ? grown : child.capacity);
      } else if (layout.kind === 'fixed-size-list') {
        this.plan(childPlan, p, child, keep * layout.listSize, capacity * layout.listSize);
      } else {
        this.plan(childPlan, p, child, keep, capacity);
      }
    });
    return this;
  }

  /** Re-allocates the planned buffers (the memory must be reserved). */
  apply(): void {
    for (const { node, capacity, keep, validity, dataBytes } of this.changes) {
      if (capacity !== node.capacity) node.resize(capacity, keep, dataBytes);
      else if (dataBytes !== node.data.byteLength) node.setDataCapacity(dataBytes);
      if (validity) node.ensureValidity(capacity);
    }
  }
}

/**
 * Bytes the nested levels of a planned column take across all its selected
 * rows (children's values, offsets and binary data; not the top level's own):
 * the writer's running average of them enters bytesPerRow, as Gluten's
 * complexTotalSizeBytes_ does since its #8089.
 */
export function nestedBytes(plan: SplitPlan, top = true): number {
  let bytes = 0;
  if (!top) {
    const sel = plan.sel;
    const partitions = sel.starts.length - 1;
    const rows = sel.starts[partitions]! - sel.starts[0]!;
    bytes += rows * fixedBytesPerRow(plan.src.layout);
    if (hasData(plan.src.layout)) bytes += dataBytesOf(plan.src, sel.rowIds, sel.starts[0]!, sel.starts[partitions]!);
  }
  for (const child of plan.children) bytes += nestedBytes(child, false);
  return bytes;
}
