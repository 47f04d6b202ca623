/**
 * Column helpers and the partial aggregate's schema, shared by the map tasks
 * (in worker threads) and the reduce tasks (on the main thread). Imports only
 * apache-arrow: this module is loaded inside the workers too.
 */
import { Field, Float64, Int64, makeData, Precision, RecordBatch, Schema, Struct, Type, util, type Data, type Float } from 'apache-arrow';

/** What a map task's partial aggregate sends: one row per customer it saw. */
export const PARTIAL_SCHEMA = new Schema([
  new Field('customer_id', new Int64(), false),
  new Field('orders', new Int64(), false),
  new Field('spent', new Float64(), false),
]);

/** Column `name` of the batch as one Data (a RecordBatch's columns are one chunk each). */
export function column(batch: RecordBatch, name: string): Data {
  const index = batch.schema.fields.findIndex((f) => f.name === name);
  if (index < 0) throw new Error(`the batch has no column "${name}"`);
  return batch.data.children[index]!;
}

/**
 * Calls `f(row, value)` for every non-null value of an integer or floating
 * column, as a JS number (64-bit integers must be safe integers).
 */
export function forEachNumber(data: Data, f: (row: number, value: number) => void): void {
  const values = data.values as ArrayLike<number | bigint>;
  const nulls = data.nullCount > 0;
  // a Float16 column's values are its raw bits in a Uint16Array
  const half = data.typeId === Type.Float && (data.type as Float).precision === Precision.HALF;
  for (let i = 0; i < data.length; i++) {
    if (nulls && !data.getValid(i)) continue;
    const raw = values[i]!;
    f(i, typeof raw === 'bigint' ? Number(raw) : half ? util.uint16ToFloat64(raw) : raw);
  }
}

/** The value of every row of a numeric column as a number, NaN where it is null. */
export function numbers(data: Data): Float64Array {
  const out = new Float64Array(data.length).fill(Number.NaN);
  forEachNumber(data, (row, value) => (out[row] = value));
  return out;
}

/** Batches of PARTIAL_SCHEMA from parallel arrays, `batchRows` rows at most each. */
export function* partialBatches(ids: ArrayLike<number>, orders: ArrayLike<number>, spent: ArrayLike<number>, count: number, batchRows = 8192): Generator<RecordBatch> {
  for (let start = 0; start < count; start += batchRows) {
    const rows = Math.min(batchRows, count - start);
    const idColumn = new BigInt64Array(rows);
    const orderColumn = new BigInt64Array(rows);
    const spentColumn = new Float64Array(rows);
    for (let i = 0; i < rows; i++) {
      idColumn[i] = BigInt(ids[start + i]!);
      orderColumn[i] = BigInt(orders[start + i]!);
      spentColumn[i] = spent[start + i]!;
    }
    const children = [
      makeData({ type: new Int64(), length: rows, nullCount: 0, data: idColumn }),
      makeData({ type: new Int64(), length: rows, nullCount: 0, data: orderColumn }),
      makeData({ type: new Float64(), length: rows, nullCount: 0, data: spentColumn }),
    ];
    yield new RecordBatch(PARTIAL_SCHEMA, makeData({ type: new Struct(PARTIAL_SCHEMA.fields), length: rows, nullCount: 0, children }));
  }
}

/**
 * Sums of orders and amounts per customer id, in growable typed arrays (a Map
 * finds each id's slot). Used by both phases of the aggregate and by the check.
 */
export class CustomerTotals {
  private readonly slots = new Map<number, number>();
  ids = new Float64Array(1024);
  orders = new Float64Array(1024);
  spent = new Float64Array(1024);

  get size(): number {
    return this.slots.size;
  }

  add(id: number, orders: number, spent: number): void {
    let slot = this.slots.get(id);
    if (slot === undefined) {
      slot = this.slots.size;
      if (slot === this.ids.length) this.grow();
      this.slots.set(id, slot);
      this.ids[slot] = id;
    }
    this.orders[slot]! += orders;
    this.spent[slot]! += spent;
  }

  get(id: number): { orders: number; spent: number } | undefined {
    const slot = this.slots.get(id);
    return slot === undefined ? undefined : { orders: this.orders[slot]!, spent: this.spent[slot]! };
  }

  private grow(): void {
    for (const key of ['ids', 'orders', 'spent'] as const) {
      const bigger = new Float64Array(this[key].length * 2);
      bigger.set(this[key]);
      this[key] = bigger;
    }
  }
}
