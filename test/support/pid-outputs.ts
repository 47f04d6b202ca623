/**
 * Map outputs of a chosen shape for the reduce-side tests: every row says its partition
 * (`pid`, which the writer drops) and carries a value that names it, so each test knows
 * exactly which rows a partition of which map output holds.
 */
import { Field, Int32, makeData, RecordBatch, Schema, Struct } from 'apache-arrow';
import { MapOutputWriter } from '../../src/shuffle/map-output-writer.js';
import type { MapStatus } from '../../src/shuffle/map-status.js';

/** `pid` says the partition, `v` = 100000 * tag + 1000 * p + i: every row is known. */
export const PID_SCHEMA = new Schema([new Field('pid', new Int32(), false), new Field('v', new Int32(), false)]);

/** One batch holding rowsPerPartition[p] rows of each partition p, tagged `tag` (the map id). */
export function batchFor(rowsPerPartition: readonly number[], tag: number, schema = PID_SCHEMA): RecordBatch {
  const pids: number[] = [];
  const values: number[] = [];
  rowsPerPartition.forEach((rows, p) => {
    for (let i = 0; i < rows; i++) {
      pids.push(p);
      values.push(100_000 * tag + 1000 * p + i);
    }
  });
  const n = pids.length;
  const column = (data: number[]) => makeData({ type: new Int32(), length: n, nullCount: 0, data: Int32Array.from(data) });
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: [column(pids), column(values)] }));
}

/** One committed map output in `dir` whose partition p holds rowsPerPartition[p] rows. */
export async function writePidOutput(
  dir: string,
  id: { shuffleId: number; mapId: number; attempt?: number },
  rowsPerPartition: readonly number[],
  schema = PID_SCHEMA,
): Promise<MapStatus> {
  const writer = await MapOutputWriter.create({
    dir,
    id: { shuffleId: id.shuffleId, mapId: id.mapId, attempt: id.attempt ?? 0 },
    numPartitions: rowsPerPartition.length,
    partitioning: { kind: 'partition-id', column: 'pid' },
    schema,
  });
  await writer.write(batchFor(rowsPerPartition, id.mapId, schema));
  return writer.finish();
}
