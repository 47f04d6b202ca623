import { RecordBatch, Table, tableFromIPC, Type, type Data, type DataType, type Dictionary, type Schema } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { DecodedDictionaries } from './key-hash.js';
import { assertOrderableKey, KeyRanks, type KeyOrder } from './key-ranks.js';
import type { Partitioner } from './partitioner.js';
import { sameType } from './same-schema.js';

/** A key column of a range partitioning and its order (Spark's SortOrder; default ascending, nulls first). */
export interface RangeKey {
  readonly column: string;
  /** default false */
  readonly descending?: boolean;
  /** default: true when ascending, false when descending (Spark's defaults) */
  readonly nullsFirst?: boolean;
}

/**
 * The split points of a range partitioning: a column per key (named as the
 * key, of its type; a dictionary key's bounds hold its values' type), one row
 * per bound, strictly ascending in the keys' order. Given as Arrow data, or as
 * the bytes of an Arrow IPC stream (how they cross to map-task workers).
 */
export type RangeBounds = RecordBatch | Table | Uint8Array;

/**
 * Spark's RangePartitioner with given bounds: row r goes to the partition
 * numbered by how many bounds sort before it,
 *
 * ```text
 * pid(r) = |{ j : bounds[j] < r }|        in [0, bounds.length]
 * ```
 *
 * comparing the key columns in turn, each in its own direction and null
 * order (so a row equal to bounds[j] goes to partition j, as in Spark, whose
 * getPartition counts the bounds a key is greater than). Spark samples the
 * input on the driver to choose the bounds; here the caller does (or an
 * upstream stage): `bounds.length` may be smaller than numPartitions - 1 (a
 * sample with few distinct keys), the partitions past it then stay empty.
 *
 * Worked example, one int key, bounds [10, 20] (three partitions): 5 -> 0,
 * 10 -> 0, 11 -> 1, 20 -> 1, 21 -> 2, null -> 0 (nulls first). Descending,
 * bounds [20, 10]: 25 -> 0, 20 -> 0, 15 -> 1, 5 -> 2, null -> 2 (nulls last).
 *
 * Rows and bounds are first ranked per key column (key-ranks.ts): each value
 * becomes a small integer that orders as the value does, so one key maps a
 * rank straight to its partition through a table, and several keys compare
 * rows with bounds as tuples of integers (a binary search over the bounds).
 */
export class RangePartitioner implements Partitioner {
  private readonly keyIndexes: number[];
  private readonly ranks: KeyRanks[];
  /** the ranks of every bound, bound j's at [j * keys, (j + 1) * keys) */
  private readonly boundRanks: Int32Array;
  private readonly boundCount: number;
  /** one key: the partition of rank r at r + 1 */
  private readonly partitionOfRank: Uint32Array | null;
  private rowRanks: Int32Array[];
  private readonly decoded = new DecodedDictionaries();

  constructor(schema: Schema, keys: readonly (string | RangeKey)[], bounds: RangeBounds, numPartitions: number) {
    if (keys.length === 0) throw new ShuffleError('CS_INVALID_ARGUMENT', 'range partitioning needs at least one key column');
    const orders = keys.map(keyOrderOf);
    this.keyIndexes = orders.map(({ column }) => {
      const index = schema.fields.findIndex((f) => f.name === column);
      if (index < 0) throw new ShuffleError('CS_UNKNOWN_COLUMN', `no column "${column}" in the input (columns: ${schema.fields.map((f) => f.name).join(', ')})`, { column });
      return index;
    });
    const table = boundsTable(bounds);
    const count = table.numRows;
    if (count > numPartitions - 1) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `range partitioning into ${numPartitions} partitions takes at most ${numPartitions - 1} bounds, got ${count}`);
    }
    const chunks = orders.map(({ column }, k) => {
      const valueType = valueTypeOf(schema.fields[this.keyIndexes[k]!]!.type);
      assertOrderableKey(valueType, column);
      return boundChunks(table, column, valueType, this.decoded);
    });
    this.ranks = orders.map(({ order }, k) => new KeyRanks(valueTypeOf(schema.fields[this.keyIndexes[k]!]!.type), chunks[k]!.map((c) => c.values), order));
    this.boundCount = count;
    this.boundRanks = rankBounds(this.ranks, chunks, count);
    assertAscending(this.boundRanks, orders.map((o) => o.column));
    this.partitionOfRank = this.ranks.length === 1 ? partitionTable(this.boundRanks, 2 * this.ranks[0]!.distinct) : null;
    this.rowRanks = this.ranks.map(() => new Int32Array(0));
  }

  computePartitionIds(batch: RecordBatch, partitionIds: Uint32Array): void {
    const rows = batch.numRows;
    const keys = this.ranks.length;
    for (let k = 0; k < keys; k++) {
      if (this.rowRanks[k]!.length < rows) this.rowRanks[k] = new Int32Array(Math.max(rows, this.rowRanks[k]!.length * 2));
      const column = batch.data.children[this.keyIndexes[k]!]!;
      const ranks = this.ranks[k]!;
      if ((column.type as DataType).typeId !== Type.Dictionary) ranks.ranksInto(column, this.rowRanks[k]!);
      else {
        // a null index is a null key; a valid index may point at a null value
        ranks.ranksInto(this.decoded.decode(column), this.rowRanks[k]!);
        ranks.nullsInto(column, this.rowRanks[k]!);
      }
    }
    const table = this.partitionOfRank;
    if (table !== null) {
      const ranks = this.rowRanks[0]!;
      for (let i = 0; i < rows; i++) partitionIds[i] = table[ranks[i]! + 1]!;
      return;
    }
    const { boundRanks, boundCount, rowRanks } = this;
    for (let i = 0; i < rows; i++) {
      // the first bound not before the row
      let lo = 0;
      let hi = boundCount;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        let k = 0;
        let at = mid * keys;
        while (k < keys && boundRanks[at] === rowRanks[k]![i]) {
          k++;
          at++;
        }
        if (k < keys && boundRanks[at]! < rowRanks[k]![i]!) lo = mid + 1;
        else hi = mid;
      }
      partitionIds[i] = lo;
    }
  }
}

/** The ranks of every bound, bound j's at [j * keys, (j + 1) * keys). */
function rankBounds(ranks: readonly KeyRanks[], chunks: readonly (readonly BoundChunk[])[], count: number): Int32Array {
  const keys = ranks.length;
  const out = new Int32Array(count * keys);
  const scratch = new Int32Array(count);
  ranks.forEach((key, k) => {
    let row = 0;
    for (const { values, indices } of chunks[k]!) {
      key.ranksInto(values, scratch);
      if (indices !== null) key.nullsInto(indices, scratch);
      for (let i = 0; i < values.length; i++) out[(row + i) * keys + k] = scratch[i]!;
      row += values.length;
    }
  });
  return out;
}

/** Bounds must be strictly ascending in the keys' order, as Spark's are: equal or descending bounds are a mistake upstream. */
function assertAscending(boundRanks: Int32Array, columns: readonly string[]): void {
  const keys = columns.length;
  for (let j = 1; j * keys < boundRanks.length; j++) {
    let k = 0;
    while (k < keys && boundRanks[j * keys + k] === boundRanks[(j - 1) * keys + k]) k++;
    if (k === keys || boundRanks[j * keys + k]! < boundRanks[(j - 1) * keys + k]!) {
      const what = k === keys ? `equals bound ${j - 1}` : `sorts before bound ${j - 1} (by column "${columns[k]}")`;
      throw new ShuffleError('CS_INVALID_ARGUMENT', `range bounds must be strictly ascending in the keys' order: bound ${j} ${what}`, { row: j });
    }
  }
}

function keyOrderOf(key: string | RangeKey): { column: string; order: KeyOrder } {
  if (typeof key === 'string') return { column: key, order: { descending: false, nullsFirst: true } };
  const descending = key.descending ?? false;
  return { column: key.column, order: { descending, nullsFirst: key.nullsFirst ?? !descending } };
}

function valueTypeOf(type: DataType): DataType {
  return type.typeId === Type.Dictionary ? (type as Dictionary).dictionary : type;
}

function boundsTable(bounds: RangeBounds): Table {
  if (bounds instanceof Table) return bounds;
  if (bounds instanceof RecordBatch) return new Table(bounds);
  if (bounds instanceof Uint8Array) {
    let table: Table;
    try {
      table = tableFromIPC(bounds);
    } catch (cause) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `range bounds given as bytes must be an Arrow IPC stream: ${(cause as Error).message}`, {}, { cause });
    }
    // arrow-js reads bytes without a schema message as an empty table
    if (table.schema.fields.length === 0) throw new ShuffleError('CS_INVALID_ARGUMENT', `range bounds given as bytes must be an Arrow IPC stream; these ${bounds.byteLength} bytes hold no schema`);
    return table;
  }
  throw new ShuffleError('CS_INVALID_ARGUMENT', 'range bounds must be an Arrow Table, RecordBatch or IPC stream bytes');
}

/** A chunk of a bounds column: its values, and for a dictionary column its indices (a null index is a null bound). */
interface BoundChunk {
  values: Data;
  indices: Data | null;
}

/** The chunks of the bounds' column for a key, decoded if a dictionary, checked against the key's value type. */
function boundChunks(table: Table, column: string, valueType: DataType, decoded: DecodedDictionaries): BoundChunk[] {
  const vector = table.getChild(column);
  if (vector === null) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `the range bounds have no column "${column}" (their columns: ${table.schema.fields.map((f) => f.name).join(', ')})`, { column });
  }
  const chunks = (vector.data as Data[]).map((chunk) =>
    (chunk.type as DataType).typeId === Type.Dictionary ? { values: decoded.decode(chunk), indices: chunk } : { values: chunk, indices: null },
  );
  const type = valueTypeOf(vector.type as DataType);
  if (!sameType(type, valueType)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `the range bounds' column "${column}" is ${String(type)}, the key's values are ${String(valueType)}`, { column });
  }
  return chunks;
}

/**
 * One key: table[r + 1] = the bounds of rank below r, for every rank r in
 * [-1, maxRank + 1]. The bounds' ranks ascend (checked before).
 */
function partitionTable(boundRanks: Int32Array, maxRank: number): Uint32Array {
  const table = new Uint32Array(maxRank + 3);
  let below = 0;
  for (let r = -1; r <= maxRank + 1; r++) {
    while (below < boundRanks.length && boundRanks[below]! < r) below++;
    table[r + 1] = below;
  }
  return table;
}
