import { Data, Field, makeData, RecordBatch, Schema, Struct, Table, Type, vectorFromArray, type DataType } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { IdentityRows } from './append-rows.js';
import { concatenateChunks, gatherRows } from './gather-rows.js';
import { DecodedDictionaries } from './key-hash.js';
import { KeyDigits, rowDigitsOf, valueTypeOf } from './key-digits.js';
import { sameType } from './same-schema.js';
import { ScratchSelections } from './split-plan.js';
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
 * The result is a Table of one record batch, the key columns (each once),
 * one row per bound: the sample's own values, copied (the bounds keep
 * nothing of the sample alive), every type as it is but dictionaries, which
 * become their values' type (as bounds may give them). Pass it as `bounds`
 * of `{ kind: 'range' }` with the same keys.
 */
export function rangeBoundsOf(sample: Table | RecordBatch, keys: readonly (string | RangeKey)[], numPartitions: number): Table {
  if (typeof (sample as Partial<Table> | null | undefined)?.getChild !== 'function') {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `the sample must be an apache-arrow Table or RecordBatch, got ${sample === null ? 'null' : typeof sample}`);
  }
  if (!Array.isArray(keys)) throw new ShuffleError('CS_INVALID_ARGUMENT', `keys must be an array of key columns, got ${typeof keys}`);
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
  // one batch: each key column's chosen rows gathered (a batch per bound took seconds at P = 10,000, most in arrow-js)
  const names = [...new Set(orders.map((o) => o.column))];
  const scratch = new ScratchSelections();
  const identity = new IdentityRows();
  const rowIds = Uint32Array.from(chosen);
  const fields: Field[] = [];
  const children = names.map((name) => {
    const field = table.schema.fields.find((f) => f.name === name)!;
    const type = valueTypeOf(field.type as DataType);
    fields.push(new Field(name, type, field.nullable, field.metadata));
    if (rowIds.length === 0) return null;
    const chunks = columns[orders.findIndex((o) => o.column === name)]!.chunks.map((chunk) => plainOf(chunk, decoded, scratch));
    const whole = chunks.length === 1 ? chunks[0]! : concatenateChunks(chunks, type, identity, scratch);
    return gatherRows(whole, type, rowIds, rowIds.length, scratch);
  });
  const schema = new Schema(fields);
  if (rowIds.length === 0) return new Table(schema);
  return new Table(schema, [new RecordBatch(schema, makeData({ type: new Struct(fields), length: rowIds.length, nullCount: 0, children: children as Data[] }))]);
}

/**
 * A key column's chunk with every dictionary in it replaced by the values its
 * indices point at (a null index a null value), as bounds may hold them:
 * dictionaries cannot be gathered (their indices would need their dictionary).
 */
function plainOf(data: Data, decoded: DecodedDictionaries, scratch: ScratchSelections): Data {
  const type = data.type as DataType;
  if (type.typeId === Type.Dictionary) {
    const values = decoded.decode(data);
    if (values.length < data.length) {
      // an empty dictionary: every row is null (decode gives no rows); n copies of a null built by arrow-js
      const valueType = valueTypeOf(type);
      return gatherRows(vectorFromArray([null], valueType).data[0]!, valueType, new Uint32Array(data.length), data.length, scratch);
    }
    return withNullsOf(plainOf(values, decoded, scratch), data);
  }
  if (type.typeId !== Type.Struct || sameType(valueTypeOf(type), type)) return data;
  return new Data(valueTypeOf(type), data.offset, data.length, data.nullCount, data, data.children.map((child) => plainOf(child as Data, decoded, scratch)));
}

/** `values` (of offset 0) null also wherever `dictionary` (its rows) has a null index. */
function withNullsOf(values: Data, dictionary: Data): Data {
  if (dictionary.nullCount === 0) return values;
  const bitmap = new Uint8Array((values.length + 7) >>> 3);
  let nulls = 0;
  for (let i = 0; i < values.length; i++) {
    if (values.getValid(i) && dictionary.getValid(i)) bitmap[i >>> 3]! |= 1 << (i & 7);
    else nulls++;
  }
  const buffers = { [0]: values.valueOffsets, [1]: values.values, [2]: bitmap, [3]: values.typeIds };
  return new Data(values.type, 0, values.length, nulls, buffers as never, values.children, undefined, values.variadicBuffers);
}
