import { RecordBatch, Schema, Table, Vector, tableFromIPC, type Data, type DataType } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { tableToIpcStream } from '../format/table-to-ipc.js';
import { DecodedDictionaries } from './key-hash.js';
import { KeyDigits, rowDigitsOf } from './key-digits.js';
import { keyOrderOf, type RangeKey } from './range-partitioner.js';

/**
 * The bounds of a range partitioning into `numPartitions` partitions, chosen
 * from a sample of the input as Spark's RangePartitioner.determineBounds
 * chooses them: the sample's rows sorted in the keys' order (the order the
 * partitioner uses: nulls, NaN, structs and all), then a bound wherever the
 * rows passed reach the next multiple of rows / numPartitions, skipping a
 * row equal to the bound before it. Every sample row weighs the same (Spark
 * weighs each partition's sample by its share of the input; sample evenly).
 *
 * Worked example, 10 sample rows 1..10 into 4 partitions: step 2.5, so the
 * rows reaching 3, 5, 8 (the 3rd, 5th and 8th smallest) become the bounds
 * 3, 5, 8, and the partitions get 1-3, 4-5, 6-8, 9-10. A sample with fewer
 * distinct keys gives fewer bounds (the last partitions then stay empty).
 *
 * The result is a Table of the key columns (each once), one row per bound,
 * the sample's own values (every type as it is, copied: the bounds do not
 * keep the sample alive), to pass as `bounds` of `{ kind: 'range' }` with
 * the same keys.
 */
export function rangeBoundsOf(sample: Table | RecordBatch, keys: readonly (string | RangeKey)[], numPartitions: number): Table {
  if (keys.length === 0) throw new ShuffleError('CS_INVALID_ARGUMENT', 'range partitioning needs at least one key column');
  if (!(Number.isInteger(numPartitions) && numPartitions >= 1)) throw new ShuffleError('CS_INVALID_ARGUMENT', `numPartitions must be an integer >= 1, got ${String(numPartitions)}`);
  const table = sample instanceof RecordBatch ? new Table(sample) : sample;
  const orders = keys.map(keyOrderOf);
  const columns = orders.map(({ column }) => {
    const vector = table.getChild(column);
    if (vector === null) {
      throw new ShuffleError('CS_UNKNOWN_COLUMN', `no column "${column}" in the sample (columns: ${table.schema.fields.map((f) => f.name).join(', ')})`, { column });
    }
    return { type: vector.type as DataType, chunks: (vector.data as Data[]).filter((chunk) => chunk.length > 0) };
  });
  const decoded = new DecodedDictionaries();
  const digitsOfKeys = orders.map(({ column, order }, k) => new KeyDigits(columns[k]!.type, columns[k]!.chunks, order, column, decoded));
  const rows = table.numRows;
  const rowDigits = rowDigitsOf(digitsOfKeys, columns.map((c) => c.chunks), rows);
  const digits = rowDigits.length / Math.max(rows, 1);
  const compare = (a: number, b: number) => {
    for (let d = 0; d < digits; d++) {
      const x = rowDigits[a * digits + d]!;
      const y = rowDigits[b * digits + d]!;
      if (x !== y) return x - y;
    }
    return 0;
  };
  const sorted = Array.from({ length: rows }, (_, i) => i).sort((a, b) => compare(a, b) || a - b);

  // Spark's determineBounds with unit weights
  const step = rows / numPartitions;
  const chosen: number[] = [];
  let target = step;
  for (let i = 0; i < rows && chosen.length < numPartitions - 1; i++) {
    if (i + 1 < target) continue;
    const row = sorted[i]!;
    if (chosen.length === 0 || compare(chosen[chosen.length - 1]!, row) < 0) {
      chosen.push(row);
      target += step;
    }
  }
  if (chosen.length === 0) {
    const names = new Set(orders.map((o) => o.column));
    return new Table(new Schema(table.schema.fields.filter((f) => names.has(f.name))));
  }
  const slices = new Table(Object.fromEntries(orders.map(({ column }, k) => [column, new Vector(rowsOf(columns[k]!.chunks, chosen))])));
  // copied out through an IPC stream: a one-row slice keeps its chunk's whole buffers, the sample's, alive
  return tableFromIPC(tableToIpcStream(slices));
}

/** One-row slices of the chunks at the given rows of their concatenation. */
function rowsOf(chunks: readonly Data[], rows: readonly number[]): Data[] {
  const starts: number[] = [];
  let start = 0;
  for (const chunk of chunks) {
    starts.push(start);
    start += chunk.length;
  }
  return rows.map((row) => {
    let c = starts.length - 1;
    while (starts[c]! > row) c--;
    return chunks[c]!.slice(row - starts[c]!, 1);
  });
}
