/**
 * A deliberately simple reference for range partitioning, one row at a time:
 * each key value read as a JS number, BigInt or byte string (arrow-js's `get`
 * where it is exact, else the value's own words summed as a BigInt), a
 * struct as its fields' values, a dictionary as the value it points at; tuples
 * compared key by key in each key's direction and null order, and a row's
 * partition the count of bounds that compare below it. Nothing of
 * src/writer/key-ranks.ts is used.
 */
import { Table, Type, Vector, type Data, type DataType, type Decimal, type RecordBatch } from 'apache-arrow';
import type { RangeBounds, RangeKey } from '../../src/writer/range-partitioner.js';

export type KeyValue = null | number | bigint | Uint8Array | { fields: KeyValue[] };

interface Order {
  descending: boolean;
  nullsFirst: boolean;
}

const encoder = new TextEncoder();

/** Value i of a key column as the reference compares it. */
export function keyValue(data: Data, i: number): KeyValue {
  const type = data.type as DataType;
  if (type.typeId === Type.Null || !data.getValid(i)) return null;
  switch (type.typeId) {
    case Type.Struct:
      return { fields: data.children.map((child) => keyValue(child, i)) };
    case Type.Dictionary: {
      // the value the index points at, in whichever chunk of the dictionary holds it
      let index = Number((data.values as ArrayLike<number | bigint>)[i]!);
      for (const chunk of (data.dictionary as Vector).data as Data[]) {
        if (index < chunk.length) return keyValue(chunk, index);
        index -= chunk.length;
      }
      throw new Error(`dictionary index ${i} out of range`);
    }
    case Type.Utf8:
    case Type.LargeUtf8:
    case Type.Utf8View:
      return encoder.encode(new Vector([data]).get(i) as string);
    case Type.Binary:
    case Type.LargeBinary:
    case Type.BinaryView:
    case Type.FixedSizeBinary:
      return Uint8Array.from(new Vector([data]).get(i) as Uint8Array);
    case Type.Decimal: {
      const words = data.values as Uint32Array;
      const width = (type as Decimal).bitWidth / 32;
      let value = 0n;
      for (let w = width - 1; w >= 0; w--) value = (value << 32n) | BigInt(words[i * width + w]!);
      return BigInt.asIntN(width * 32, value);
    }
    case Type.Bool:
      return (new Vector([data]).get(i) as boolean) ? 1 : 0;
    default: {
      const value = (data.values as ArrayLike<number | bigint>)[i]!;
      return type.typeId === Type.Float ? (new Vector([data]).get(i) as number) : value; // a float16 is stored as its bits
    }
  }
}

function compareValues(a: KeyValue, b: KeyValue, order: Order): number {
  if (a === null || b === null) {
    if (a === b) return 0;
    return (a === null) === order.nullsFirst ? -1 : 1;
  }
  let c: number;
  if (typeof a === 'object' && 'fields' in a) {
    // Spark: field by field, each ascending with nulls first; a descending key reverses the whole comparison
    const fields = (b as { fields: KeyValue[] }).fields;
    c = 0;
    for (let f = 0; f < a.fields.length && c === 0; f++) c = compareValues(a.fields[f]!, fields[f]!, { descending: false, nullsFirst: true });
  } else if (a instanceof Uint8Array) c = Buffer.compare(a, b as Uint8Array);
  else if (typeof a === 'number') {
    const x = a;
    const y = b as number;
    // Spark: NaN above everything and equal to itself, -0.0 equal to 0.0
    c = Number.isNaN(x) ? (Number.isNaN(y) ? 0 : 1) : Number.isNaN(y) ? -1 : x < y ? -1 : x > y ? 1 : 0;
  } else c = a < (b as bigint) ? -1 : a > (b as bigint) ? 1 : 0;
  return order.descending ? -c : c;
}

export function orderOf(key: string | RangeKey): Order & { column: string } {
  if (typeof key === 'string') return { column: key, descending: false, nullsFirst: true };
  const descending = key.descending ?? false;
  return { column: key.column, descending, nullsFirst: key.nullsFirst ?? !descending };
}

export function compareTuples(a: readonly KeyValue[], b: readonly KeyValue[], orders: readonly Order[]): number {
  for (let k = 0; k < orders.length; k++) {
    const c = compareValues(a[k]!, b[k]!, orders[k]!);
    if (c !== 0) return c;
  }
  return 0;
}

/** The key tuple of every row of the given columns (one Data per key). */
function tuplesOf(columns: readonly Data[], rows: number): KeyValue[][] {
  return Array.from({ length: rows }, (_, i) => columns.map((data) => keyValue(data, i)));
}

export class ReferenceRange {
  private readonly orders: (Order & { column: string })[];
  private readonly bounds: KeyValue[][];

  constructor(keys: readonly (string | RangeKey)[], bounds: RangeBounds) {
    this.orders = keys.map(orderOf);
    const table = bounds instanceof Table ? bounds : bounds instanceof Uint8Array ? (() => { throw new Error('the reference takes Arrow bounds'); })() : new Table(bounds);
    this.bounds = table.batches.flatMap((batch) => tuplesOf(this.orders.map((o) => batch.getChild(o.column)!.data[0]!), batch.numRows));
  }

  /** The partition of row i of `batch`: how many bounds compare below it. */
  partitionsOf(batch: RecordBatch): number[] {
    const rows = tuplesOf(this.orders.map((o) => batch.getChild(o.column)!.data[0]!), batch.numRows);
    return rows.map((row) => this.bounds.filter((bound) => compareTuples(bound, row, this.orders) < 0).length);
  }
}

/**
 * Bounds for `keys` drawn from the rows of `batches`: the key tuples of the
 * rows `pick` chooses, sorted and without repeats, at most `max` of them,
 * as a Table of one-row chunks (arrow-js slices of the input columns).
 */
export function boundsFrom(batches: readonly RecordBatch[], keys: readonly (string | RangeKey)[], max: number, pick: (rows: number) => number[]): Table {
  const orders = keys.map(orderOf);
  const candidates: { tuple: KeyValue[]; slices: Data[] }[] = [];
  for (const batch of batches) {
    const columns = orders.map((o) => batch.getChild(o.column)!.data[0]!);
    for (const i of pick(batch.numRows)) candidates.push({ tuple: columns.map((d) => keyValue(d, i)), slices: columns.map((d) => d.slice(i, 1)) });
  }
  candidates.sort((a, b) => compareTuples(a.tuple, b.tuple, orders));
  const all = candidates.filter((c, j) => j === 0 || compareTuples(candidates[j - 1]!.tuple, c.tuple, orders) !== 0);
  // evenly spread over the distinct tuples when there are more than `max`
  const distinct = all.length <= max ? all : Array.from({ length: max }, (_, j) => all[Math.floor((j * all.length) / max)]!);
  const first = batches[0]!;
  const vectors = Object.fromEntries(
    orders.map((o, k) => [o.column, new Vector(distinct.length > 0 ? distinct.map((c) => c.slices[k]!) : [first.getChild(o.column)!.data[0]!.slice(0, 0)])]),
  );
  return new Table(vectors);
}
