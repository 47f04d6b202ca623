/**
 * The jobs' input: generated orders and customers, or an Arrow IPC file of
 * the user's own, split into one input per map task.
 */
import { readFile } from 'node:fs/promises';
import { TextEncoder } from 'node:util';
import {
  Field,
  Float64,
  Int32,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  DataType,
  tableFromIPC,
  Type,
  Utf8,
  type Data,
  type Table,
} from 'apache-arrow';

export const ORDERS_SCHEMA = new Schema([
  new Field('order_id', new Int32(), false),
  new Field('customer_id', new Int32(), false),
  new Field('amount', new Float64(), false),
]);

/** The customers' schema with `customer_id` of the integer type `idType` (the join's orders' type). */
export function customersSchema(idType: DataType): Schema {
  return new Schema([new Field('customer_id', idType, false), new Field('name', new Utf8(), false), new Field('country', new Utf8(), false)]);
}

export const COUNTRIES = ['DE', 'FR', 'US', 'JP', 'BR', 'IN', 'NG', 'AU', 'CA', 'MX', 'ES', 'KR'];

const BATCH_ROWS = 8192;

/** Where a job's orders come from: one input per map task, re-created for every attempt (batches sent to a worker are handed over). */
export interface OrdersSource {
  /** "1,000,000 generated orders of 10,000 customers" */
  readonly description: string;
  readonly rows: number;
  /** The schema of the batches `split` yields. */
  readonly schema: Schema;
  /** customer ids are in [0, customerIds) */
  readonly customerIds: number;
  /** The batches of map task `task` of `tasks`. */
  split(task: number, tasks: number): Iterable<RecordBatch>;
}

/**
 * Orders with skewed customer ids: id = floor(customers * u^3) for uniform u, so
 * a few customers place most orders (customer 0 alone about (1/customers)^(1/3)
 * of them); every `unknownEvery`-th order names a customer that does not exist
 * (so that an inner join drops it). Deterministic: the same seed gives the same orders.
 */
export function generatedOrders(rows: number, customers: number, seed = 1, unknownEvery = 0): OrdersSource {
  return {
    description: `${rows.toLocaleString('en-US')} generated orders of ${customers.toLocaleString('en-US')} customers (skewed ids)`,
    rows,
    schema: ORDERS_SCHEMA,
    customerIds: customers + (unknownEvery > 0 ? 1 : 0),
    *split(task, tasks) {
      const [start, end] = splitRange(rows, task, tasks);
      for (let from = start; from < end; from += BATCH_ROWS) yield ordersBatch(from, Math.min(BATCH_ROWS, end - from), customers, seed, unknownEvery);
    },
  };
}

/** Rows [start, end) of `rows` for task `task` of `tasks`: contiguous, as even as can be. */
export function splitRange(rows: number, task: number, tasks: number): [number, number] {
  return [Math.floor((rows * task) / tasks), Math.floor((rows * (task + 1)) / tasks)];
}

/** Orders first..first+rows-1; each row's values depend only on its order id, so any split gives the same orders. */
function ordersBatch(first: number, rows: number, customers: number, seed: number, unknownEvery: number): RecordBatch {
  const ids = new Int32Array(rows);
  const customerIds = new Int32Array(rows);
  const amounts = new Float64Array(rows);
  for (let i = 0; i < rows; i++) {
    const id = first + i;
    const u = unit(id, seed);
    ids[i] = id;
    customerIds[i] = unknownEvery > 0 && id % unknownEvery === unknownEvery - 1 ? customers : Math.floor(customers * u * u * u);
    amounts[i] = Math.round(500 + unit(id, seed + 1) * 99_500) / 100; // 5.00 to 1,000.00
  }
  return batch(ORDERS_SCHEMA, rows, [
    makeData({ type: new Int32(), length: rows, nullCount: 0, data: ids }),
    makeData({ type: new Int32(), length: rows, nullCount: 0, data: customerIds }),
    makeData({ type: new Float64(), length: rows, nullCount: 0, data: amounts }),
  ]);
}

/**
 * The customers 0..count-1 with a name and a country, in batches; `split` as
 * for orders. Their ids are of the integer type `idType` (any: count - 1 must fit).
 */
export function* customersSplit(count: number, task: number, tasks: number, idType: DataType = new Int32()): Generator<RecordBatch> {
  if (!DataType.isInt(idType)) throw new Error(`customer ids must be of an integer type, got ${String(idType)}`);
  const schema = customersSchema(idType);
  const [start, end] = splitRange(count, task, tasks);
  const encoder = new TextEncoder();
  for (let from = start; from < end; from += BATCH_ROWS) {
    const rows = Math.min(BATCH_ROWS, end - from);
    const ids = new idType.ArrayType(rows);
    const names: string[] = [];
    const countries: string[] = [];
    for (let i = 0; i < rows; i++) {
      ids[i] = idType.bitWidth === 64 ? BigInt(from + i) : from + i;
      names.push(`customer-${from + i}`);
      countries.push(countryOf(from + i));
    }
    yield batch(schema, rows, [makeData({ type: idType, length: rows, nullCount: 0, data: ids }), utf8(names, encoder), utf8(countries, encoder)]);
  }
}

export function countryOf(customerId: number): string {
  return COUNTRIES[Math.floor(unit(customerId, 77) * COUNTRIES.length)]!;
}

/** The columns a job needs from the user's orders, and the types each may have. */
export interface ColumnNeed {
  name: string;
  kinds: readonly ('integer' | 'float')[];
}

/** The columns a job reads of an orders file: `customer_id` and `amount`, and `order_id` for the join. */
export function orderColumns(withOrderId: boolean): ColumnNeed[] {
  return [
    ...(withOrderId ? [{ name: 'order_id', kinds: ['integer'] } as const] : []),
    { name: 'customer_id', kinds: ['integer'] },
    { name: 'amount', kinds: ['integer', 'float'] },
  ];
}

/**
 * Orders from the user's uncompressed Arrow IPC file (file or stream format),
 * read whole; `needs` names the columns the job uses (others are ignored).
 * Throws an InputError naming what is missing.
 */
export async function ordersFromFile(path: string, needs: readonly ColumnNeed[]): Promise<OrdersSource> {
  let table: Table;
  let bytes: Buffer;
  const notArrow = (why: string) => new InputError(`cannot read ${path} as an uncompressed Arrow IPC file or stream: ${why}`);
  try {
    bytes = await readFile(path);
    table = tableFromIPC(bytes);
  } catch (cause) {
    throw notArrow((cause as Error).message);
  }
  // arrow-js reads an empty file, or one too short to hold a message, as a table without columns instead of throwing
  if (table.schema.fields.length === 0) throw notArrow(bytes.length === 0 ? 'the file is empty' : 'no Arrow schema in it');
  const present = table.schema.fields.map((f) => `${f.name}: ${String(f.type)}`).join(', ');
  for (const need of needs) {
    const field = table.schema.fields.find((f) => f.name === need.name);
    if (field === undefined) throw new InputError(`${path} has no column "${need.name}" (${need.kinds.join(' or ')}); its columns: ${present}`);
    if (!need.kinds.includes(numericKind(field.type) as never)) {
      throw new InputError(`column "${need.name}" of ${path} is ${String(field.type)}; the job needs ${need.kinds.join(' or ')} values`);
    }
  }
  const selected = table.select(needs.map((n) => n.name));
  let maxId = -1;
  for (const chunk of selected.getChild('customer_id')!.data) maxId = Math.max(maxId, maxOf(chunk));
  return {
    description: `${table.numRows.toLocaleString('en-US')} orders from ${path}`,
    rows: table.numRows,
    schema: selected.schema,
    customerIds: maxId + 1,
    *split(task, tasks) {
      const [start, end] = splitRange(table.numRows, task, tasks);
      if (end > start) yield* selected.slice(start, end).batches; // views into the file's bytes: copied on their way to a worker
    },
  };
}

/** A message for the user: bad input, not a bug. */
export class InputError extends Error {
  override name = 'InputError';
}

function numericKind(type: DataType): 'integer' | 'float' | 'other' {
  if (type.typeId === Type.Int) return 'integer';
  if (type.typeId === Type.Float) return 'float';
  return 'other';
}

/** The largest valid value of an integer column, -1 when it has none. */
function maxOf(data: Data): number {
  let max = -1;
  const values = data.values as ArrayLike<number | bigint>;
  for (let i = 0; i < data.length; i++) if (data.getValid(i)) max = Math.max(max, Number(values[i]));
  return max;
}

function batch(schema: Schema, rows: number, children: Data[]): RecordBatch {
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children }));
}

function utf8(values: readonly string[], encoder: TextEncoder): Data<Utf8> {
  const bytes = values.map((v) => encoder.encode(v));
  const offsets = new Int32Array(values.length + 1);
  bytes.forEach((b, i) => (offsets[i + 1] = offsets[i]! + b.length));
  const data = new Uint8Array(offsets[values.length]!);
  bytes.forEach((b, i) => data.set(b, offsets[i]!));
  return makeData({ type: new Utf8(), length: values.length, nullCount: 0, valueOffsets: offsets, data });
}

/** A deterministic number in [0, 1) from (n, seed): a 32-bit integer hash, so that rows need no shared generator state. */
function unit(n: number, seed: number): number {
  let h = Math.imul(n ^ Math.imul(seed, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  h = Math.imul(h ^ seed, 0x27d4eb2f);
  h ^= h >>> 15;
  return (h >>> 0) / 4294967296;
}
