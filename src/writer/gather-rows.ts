import { Field, type Data, type DataType } from 'apache-arrow';
import { dataFromBuffers } from '../format/ipc-reader.js';
import type { FieldNodeInfo } from '../format/ipc-message.js';
import { type IdentityRows, onePartition, planAppend, splitAppend } from './append-rows.js';
import { ColumnBuffer } from './column-buffer.js';
import { columnLayoutOf } from './column-layout.js';
import { prepareSourceColumn } from './source-column.js';
import type { ScratchSelections } from './split-plan.js';

/*
 * New columns made of rows of others, through the writer's own split (a
 * column buffer filled as one partition, then snapshot as Arrow data): every
 * type the writer takes but dictionaries (whose indices would need their
 * dictionary), sliced or not, views compacted into one data buffer. Used to
 * decode dictionaries (key-hash.ts) and to copy range bounds out of a sample
 * (range-bounds.ts).
 */

/** A column of rows rowIds[0, count) of `data` (of `type`), in that order. */
export function gatherRows(data: Data, type: DataType, rowIds: Uint32Array, count: number, scratch: ScratchSelections): Data {
  const layout = columnLayoutOf(new Field('value', type, true));
  const column = new ColumnBuffer(layout);
  const plan = planAppend([prepareSourceColumn(data, layout)], [column], onePartition(rowIds, 0, count), 0, count, scratch);
  plan.growth.apply();
  splitAppend(plan.plans, [column], 0);
  return toData(column, count, type);
}

/** One column of all the rows of `chunks` (of `type`), in order; `identity` gives the row ids 0, 1, 2, ... */
export function concatenateChunks(chunks: readonly Data[], type: DataType, identity: IdentityRows, scratch: ScratchSelections): Data {
  const layout = columnLayoutOf(new Field('value', type, true));
  const column = new ColumnBuffer(layout);
  const total = chunks.reduce((sum, c) => sum + c.length, 0);
  let filled = 0;
  for (const chunk of chunks) {
    const plan = planAppend([prepareSourceColumn(chunk, layout)], [column], onePartition(identity.get(chunk.length), 0, chunk.length), filled, total, scratch);
    plan.growth.apply();
    splitAppend(plan.plans, [column], filled);
    filled += chunk.length;
  }
  return toData(column, total, type);
}

function toData(column: ColumnBuffer, rows: number, type: DataType): Data {
  const nodes: FieldNodeInfo[] = [];
  const buffers: Uint8Array[] = [];
  column.snapshot(rows, nodes, buffers, false);
  return dataFromBuffers(type, nodes, buffers);
}
