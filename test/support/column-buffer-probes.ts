/**
 * A column buffer of the columnar writer filled through the protocol
 * append-rows.ts states and read back through the library's reader, and the
 * bytes it really holds: for tests of the partition buffers that compare what
 * a buffer says with what it has.
 */
import { Field, type Data, type DataType } from 'apache-arrow';
import type { FieldNodeInfo } from '../../src/format/ipc-message.js';
import { dataFromBuffers } from '../../src/format/ipc-reader.js';
import { onePartition, planAppend, splitAppend } from '../../src/writer/append-rows.js';
import type { BufferGrowth } from '../../src/writer/buffer-growth.js';
import type { ColumnBuffer } from '../../src/writer/column-buffer.js';
import { columnLayoutOf } from '../../src/writer/column-layout.js';
import { prepareSourceColumn } from '../../src/writer/source-column.js';
import { ScratchSelections } from '../../src/writer/split-plan.js';
import { cellReader } from './rows.js';

/** The layout of a nullable column `value` of `type`. */
export const layoutOf = (type: DataType) => columnLayoutOf(new Field('value', type, true));
/** Row ids 0..n-1. */
export const ids = (n: number) => Uint32Array.from({ length: n }, (_, i) => i);

/** Bytes of the arrays a buffer (and its children) really holds: what the memory pool must have reserved for it. */
export function held(node: ColumnBuffer): number {
  let bytes = (node.validity?.byteLength ?? 0) + node.values.byteLength + node.data.byteLength + node.unionOffsets.byteLength;
  for (const child of node.children) bytes += held(child);
  return bytes;
}

/** The canonical strings of rows [0, n) of `data` (arrow-js's buffers, read raw: test/support/rows.ts). */
export function cells(data: Data, n = data.length): string[] {
  const read = cellReader(data);
  return Array.from({ length: n }, (_, i) => read(i));
}

/** The first `rows` rows of `column`, snapshot as Arrow buffers and loaded by the library's IPC reader. */
export function readBack(column: ColumnBuffer, rows: number, type: DataType): string[] {
  const nodes: FieldNodeInfo[] = [];
  const buffers: Uint8Array[] = [];
  column.snapshot(rows, nodes, buffers);
  return cells(dataFromBuffers(type, nodes, buffers), rows);
}

/**
 * Appends all rows of `data` after row `filled` of `column` through the protocol append-rows.ts states
 * (plan, then the growth, then the split), with `capacity` rows; returns the growth for its byte counts.
 */
export function append(column: ColumnBuffer, data: Data, filled: number, capacity: number): BufferGrowth {
  const plan = planAppend([prepareSourceColumn(data, column.layout)], [column], onePartition(ids(data.length), 0, data.length), filled, capacity, new ScratchSelections());
  plan.growth.apply();
  splitAppend(plan.plans, [column], filled);
  return plan.growth;
}
