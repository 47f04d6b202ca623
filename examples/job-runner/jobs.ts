/**
 * The three jobs, each with the single-threaded computation its answer is checked against:
 * 1. orders per customer, aggregated in two phases (partial in the map task,
 *    shuffled by customer id, final in the reduce task);
 * 2. a shuffle hash join of orders with customers (both sides shuffled by
 *    customer id; each reduce task builds a hash table of its customers and
 *    probes it with its orders);
 * 3. the orders sorted by amount, largest first: a distributed sort (bounds
 *    sampled on the main thread, orders range-partitioned by amount, each
 *    reduce task sorts its partition; partition after partition, they are in order).
 */
import { Table, type RecordBatch } from 'apache-arrow';
import { rangeBoundsOf } from 'columnar-shuffle';
import { column, CustomerTotals, forEachNumber, numbers, PARTIAL_SCHEMA } from './columns.js';
import type { Job } from './dag.js';
import { COUNTRIES, countryOf, customersSchema, customersSplit, type OrdersSource } from './data.js';

const MAP_TASKS = new URL(import.meta.url.endsWith('.ts') ? './map-tasks.ts' : './map-tasks.js', import.meta.url);

export interface JobShape {
  /** Map tasks over the orders, and reduce partitions. */
  maps: number;
  partitions: number;
}

// ---------------------------------------------------------------- job 1: orders per customer

/** One reduce task's customers. */
export interface PartitionTotals {
  partition: number;
  ids: Float64Array;
  orders: Float64Array;
  spent: Float64Array;
}

export interface CustomerAnswer {
  totals: CustomerTotals;
  /** customers that came out of more than one reduce partition (a broken shuffle would do that) */
  duplicates: number;
  /** the largest partition, in customers: the skew the hash could not even out */
  largestPartition: number;
}

export function ordersPerCustomerJob(source: OrdersSource, shape: JobShape): Job<PartitionTotals, CustomerAnswer> {
  return {
    name: 'orders per customer',
    maps: [
      {
        kind: 'map',
        name: 'map (partial aggregate)',
        shuffleId: 0,
        tasks: shape.maps,
        numPartitions: shape.partitions,
        partitioning: { kind: 'hash', keys: ['customer_id'] },
        outputSchema: PARTIAL_SCHEMA,
        input: (task) => source.split(task, shape.maps),
        transform: { module: MAP_TASKS, export: 'partialAggregate', args: { key: 'customer_id', value: 'amount' } },
      },
    ],
    reduce: {
      kind: 'reduce',
      name: 'reduce (final aggregate)',
      reads: [0],
      tasks: shape.partitions,
      run: async ({ partition, read }) => {
        const totals = new CustomerTotals();
        for await (const batch of read(0)) addPartials(totals, batch);
        return { partition, ids: totals.ids.slice(0, totals.size), orders: totals.orders.slice(0, totals.size), spent: totals.spent.slice(0, totals.size) };
      },
      combine: (results) => {
        const totals = new CustomerTotals();
        let duplicates = 0;
        for (const r of results) {
          for (let i = 0; i < r.ids.length; i++) {
            if (totals.get(r.ids[i]!) !== undefined) duplicates++;
            totals.add(r.ids[i]!, r.orders[i]!, r.spent[i]!);
          }
        }
        return { totals, duplicates, largestPartition: Math.max(...results.map((r) => r.ids.length)) };
      },
    },
  };
}

/** The final phase: a partial row's counts and sums added to its customer's. */
function addPartials(totals: CustomerTotals, batch: RecordBatch): void {
  const orders = numbers(column(batch, 'orders'));
  const spent = numbers(column(batch, 'spent'));
  forEachNumber(column(batch, 'customer_id'), (row, id) => totals.add(id, orders[row]!, spent[row]!));
}

/** The same answer computed in one pass over all the orders, on this thread. */
export function ordersPerCustomerReference(source: OrdersSource, maps: number): CustomerTotals {
  const totals = new CustomerTotals();
  for (let task = 0; task < maps; task++) {
    for (const batch of source.split(task, maps)) {
      const ids = referenceValues(batch, 'customer_id');
      const amounts = referenceValues(batch, 'amount');
      for (let row = 0; row < batch.numRows; row++) if (ids[row] !== null) totals.add(ids[row]!, 1, amounts[row] ?? 0);
    }
  }
  return totals;
}

/**
 * A numeric column's values (null where null) read through apache-arrow's own
 * accessor, not the column helpers the jobs use: the references read the orders
 * another way, so that a mistake in reading a type (Float16's raw bits, say)
 * shows as a difference instead of being made on both sides.
 */
function referenceValues(batch: RecordBatch, name: string): (number | null)[] {
  const vector = batch.getChild(name)!;
  return Array.from({ length: batch.numRows }, (_, row) => {
    const value = vector.get(row) as number | bigint | null;
    return value === null ? null : Number(value);
  });
}

/** What differs between the job's answer and the reference; empty when they agree. */
export function checkOrdersPerCustomer(answer: CustomerAnswer, reference: CustomerTotals): string[] {
  const problems: string[] = [];
  if (answer.duplicates > 0) problems.push(`${answer.duplicates} customers came out of more than one reduce partition`);
  if (answer.totals.size !== reference.size) problems.push(`${answer.totals.size} customers in the answer, ${reference.size} in the reference`);
  let wrong = 0;
  let example = '';
  for (let slot = 0; slot < reference.size; slot++) {
    const id = reference.ids[slot]!;
    const got = answer.totals.get(id);
    const orders = reference.orders[slot]!;
    const spent = reference.spent[slot]!;
    if (got === undefined || got.orders !== orders || !close(got.spent, spent)) {
      if (wrong++ === 0) example = `customer ${id}: ${got === undefined ? 'missing' : `${got.orders} orders, ${got.spent.toFixed(2)} spent`}, expected ${orders} orders, ${spent.toFixed(2)} spent`;
    }
  }
  if (wrong > 0) problems.push(`${wrong} customers have the wrong totals (${example})`);
  return problems;
}

// ---------------------------------------------------------------- job 2: shuffle hash join

/** One reduce task's join output, summarized: the joined rows are counted, not collected. */
export interface JoinSummary {
  joined: number;
  /** orders whose customer does not exist: an inner join drops them */
  unmatched: number;
  /** per country: orders and amount */
  countries: Map<string, { orders: number; amount: number }>;
  /** sum over joined rows of a hash of (order id, country), mod 2^32: any lost, doubled or mismatched row changes it */
  fingerprint: number;
}

export function joinJob(orders: OrdersSource, customers: number, shape: JobShape & { customerMaps: number }): Job<JoinSummary, JoinSummary> {
  // both sides' customer_id in the orders' type: the partition of a key is a Murmur3 hash of its
  // type's representation (Int64 and Int32 of the same value differ), so equal ids must share a type
  const idType = orders.schema.fields.find((f) => f.name === 'customer_id')!.type;
  return {
    name: 'orders join customers',
    maps: [
      {
        kind: 'map',
        name: 'map orders',
        shuffleId: 0,
        tasks: shape.maps,
        numPartitions: shape.partitions,
        partitioning: { kind: 'hash', keys: ['customer_id'] },
        outputSchema: orders.schema.select(['order_id', 'customer_id', 'amount']),
        input: (task) => orders.split(task, shape.maps),
        transform: { module: MAP_TASKS, export: 'project', args: { columns: ['order_id', 'customer_id', 'amount'] } },
      },
      {
        kind: 'map',
        name: 'map customers',
        shuffleId: 1,
        tasks: shape.customerMaps,
        numPartitions: shape.partitions,
        partitioning: { kind: 'hash', keys: ['customer_id'] },
        outputSchema: customersSchema(idType).select(['customer_id', 'country']),
        input: (task) => customersSplit(customers, task, shape.customerMaps, idType),
        transform: { module: MAP_TASKS, export: 'project', args: { columns: ['customer_id', 'country'] } },
      },
    ],
    reduce: {
      kind: 'reduce',
      name: 'reduce (hash join)',
      reads: [0, 1],
      tasks: shape.partitions,
      run: async ({ read }) => {
        // build: this partition's customers (the small side), then probe with its orders
        const country = new Map<number, string>();
        for await (const batch of read(1)) {
          const names = batch.getChild('country')!;
          forEachNumber(column(batch, 'customer_id'), (row, id) => country.set(id, names.get(row) as string));
        }
        const summary = emptySummary();
        for await (const batch of read(0)) {
          const ids = numbers(column(batch, 'order_id'));
          const amounts = numbers(column(batch, 'amount'));
          forEachNumber(column(batch, 'customer_id'), (row, customer) => joinRow(summary, ids[row]!, country.get(customer), amounts[row]!));
        }
        return summary;
      },
      combine: (results) => {
        const total = emptySummary();
        for (const r of results) {
          total.joined += r.joined;
          total.unmatched += r.unmatched;
          total.fingerprint = (total.fingerprint + r.fingerprint) >>> 0;
          for (const [name, c] of r.countries) {
            const t = total.countries.get(name) ?? { orders: 0, amount: 0 };
            t.orders += c.orders;
            t.amount += c.amount;
            total.countries.set(name, t);
          }
        }
        return total;
      },
    },
  };
}

/** The same join on this thread: a hash table of every customer, probed with every order. */
export function joinReference(orders: OrdersSource, customers: number, maps: number): JoinSummary {
  const summary = emptySummary();
  for (let task = 0; task < maps; task++) {
    for (const batch of orders.split(task, maps)) {
      const ids = referenceValues(batch, 'order_id');
      const customerIds = referenceValues(batch, 'customer_id');
      const amounts = referenceValues(batch, 'amount');
      for (let row = 0; row < batch.numRows; row++) {
        const customer = customerIds[row] ?? null;
        if (customer === null) continue;
        joinRow(summary, ids[row] ?? Number.NaN, customer >= 0 && customer < customers ? countryOf(customer) : undefined, amounts[row] ?? Number.NaN);
      }
    }
  }
  return summary;
}

export function checkJoin(answer: JoinSummary, reference: JoinSummary): string[] {
  const problems: string[] = [];
  if (answer.joined !== reference.joined) problems.push(`${answer.joined} joined rows, the reference has ${reference.joined}`);
  if (answer.unmatched !== reference.unmatched) problems.push(`${answer.unmatched} unmatched orders, the reference has ${reference.unmatched}`);
  if (answer.fingerprint !== reference.fingerprint) problems.push('the joined rows differ from the reference (fingerprint)');
  for (const [name, r] of reference.countries) {
    const got = answer.countries.get(name);
    if (got === undefined || got.orders !== r.orders || !close(got.amount, r.amount)) problems.push(`country ${name}: ${JSON.stringify(got)}, expected ${JSON.stringify(r)}`);
  }
  return problems;
}

function emptySummary(): JoinSummary {
  return { joined: 0, unmatched: 0, countries: new Map(), fingerprint: 0 };
}

function joinRow(summary: JoinSummary, orderId: number, country: string | undefined, amount: number): void {
  if (country === undefined) {
    summary.unmatched++;
    return;
  }
  summary.joined++;
  const c = summary.countries.get(country) ?? { orders: 0, amount: 0 };
  c.orders++;
  c.amount += Number.isNaN(amount) ? 0 : amount;
  summary.countries.set(country, c);
  summary.fingerprint = (summary.fingerprint + mix(orderId, COUNTRY_CODE.get(country) ?? hashString(country))) >>> 0;
}

const COUNTRY_CODE = new Map(COUNTRIES.map((c, i) => [c, i]));

function mix(a: number, b: number): number {
  let h = Math.imul((a | 0) ^ Math.imul(Math.floor(a / 4294967296) | 0, 0x27d4eb2f), 0x9e3779b1) ^ Math.imul(b + 1, 0x85ebca6b);
  h ^= h >>> 15;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 13)) >>> 0;
}

function hashString(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = Math.imul(h, 31) + s.charCodeAt(i);
  return h >>> 0;
}

/** Sums of many doubles depend on their order: equal within a relative 1e-9. */
function close(a: number, b: number): boolean {
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

// ---------------------------------------------------------------- job 3: distributed sort

/**
 * Orders sorted by amount, largest first: Spark's descending order puts a NaN
 * amount first (NaN is larger than any number there) and null amounts last.
 */
export interface SortedOrders {
  amounts: Float64Array;
  /** 1 where the amount is null (its `amounts` entry is NaN then) */
  nulls: Uint8Array;
  customers: Float64Array;
}

export interface SortAnswer extends SortedOrders {
  /** rows per reduce partition: how evenly the sampled bounds split the orders */
  partitionRows: number[];
}

/** Every this many-th order's amount goes into the sample the bounds are chosen from. */
export const SAMPLE_EVERY = 97;

/**
 * The bounds of the range partitioning: a sample of the orders (every
 * SAMPLE_EVERY-th one of every map task's input, its amount only) handed to
 * columnar-shuffle's `rangeBoundsOf`, which sorts it largest amount first (NaN
 * first, nulls last, as the partitioner orders them) and cuts it where Spark's
 * RangePartitioner would.
 */
export function sortBounds(source: OrdersSource, shape: JobShape): Table {
  const sample: RecordBatch[] = [];
  for (let task = 0; task < shape.maps; task++) {
    for (const batch of source.split(task, shape.maps)) {
      const amounts = batch.selectAt([batch.schema.fields.findIndex((f) => f.name === 'amount')]);
      for (let i = 0; i < batch.numRows; i += SAMPLE_EVERY) sample.push(amounts.slice(i, i + 1));
    }
  }
  const amounts = source.schema.select(['amount']);
  return rangeBoundsOf(sample.length === 0 ? new Table(amounts) : new Table(sample), SORT_KEYS, shape.partitions);
}

/** Largest amount first; Spark's descending order puts null amounts last (and NaN first). */
const SORT_KEYS = [{ column: 'amount', descending: true }];

export function sortJob(source: OrdersSource, shape: JobShape, bounds: Table): Job<SortedOrders, SortAnswer> {
  return {
    name: 'orders by amount',
    maps: [
      {
        kind: 'map',
        name: 'map (range by amount)',
        shuffleId: 0,
        tasks: shape.maps,
        numPartitions: shape.partitions,
        partitioning: { kind: 'range', keys: SORT_KEYS, bounds },
        outputSchema: source.schema.select(['customer_id', 'amount']),
        input: (task) => source.split(task, shape.maps),
        transform: { module: MAP_TASKS, export: 'project', args: { columns: ['customer_id', 'amount'] } },
      },
    ],
    reduce: {
      kind: 'reduce',
      name: 'reduce (sort)',
      reads: [0],
      tasks: shape.partitions,
      run: async ({ read }) => {
        const orders = new OrderList();
        for await (const batch of read(0)) orders.add(batch);
        return orders.sorted();
      },
      combine: (results) => {
        const total = results.reduce((n, r) => n + r.amounts.length, 0);
        const answer: SortAnswer = { amounts: new Float64Array(total), nulls: new Uint8Array(total), customers: new Float64Array(total), partitionRows: results.map((r) => r.amounts.length) };
        let at = 0;
        for (const r of results) {
          answer.amounts.set(r.amounts, at);
          answer.nulls.set(r.nulls, at);
          answer.customers.set(r.customers, at);
          at += r.amounts.length;
        }
        return answer;
      },
    },
  };
}

/**
 * Orders collected from batches, then sorted largest amount first (NaN first,
 * nulls last), ties by customer id. Rows with a null customer_id are left out,
 * as in the other jobs.
 */
class OrderList {
  private readonly amounts: number[] = [];
  private readonly nulls: number[] = [];
  private readonly customers: number[] = [];

  /** A reduce task's batch, read with the jobs' column helpers. */
  add(batch: RecordBatch): void {
    const amount = column(batch, 'amount');
    const amounts = numbers(amount);
    forEachNumber(column(batch, 'customer_id'), (row, customer) => this.push(amount.getValid(row) ? amounts[row]! : null, customer));
  }

  push(amount: number | null, customer: number): void {
    this.amounts.push(amount ?? Number.NaN);
    this.nulls.push(amount === null ? 1 : 0);
    this.customers.push(customer);
  }

  sorted(): SortedOrders {
    const { amounts, nulls, customers } = this;
    const rank = (i: number) => (nulls[i] === 1 ? 2 : Number.isNaN(amounts[i]!) ? 0 : 1);
    // compared, not subtracted: Infinity - Infinity is NaN, which a comparator must never return;
    // 0 and -0 compare equal (as in Spark's order), so their order among equal customer ids is the input's
    const descending = (a: number, b: number) => (a > b ? -1 : a < b ? 1 : 0);
    const order = amounts.map((_, i) => i).sort((a, b) => rank(a) - rank(b) || (rank(a) === 1 ? descending(amounts[a]!, amounts[b]!) : 0) || customers[a]! - customers[b]!);
    return { amounts: Float64Array.from(order, (i) => amounts[i]!), nulls: Uint8Array.from(order, (i) => nulls[i]!), customers: Float64Array.from(order, (i) => customers[i]!) };
  }
}

/** Every order, sorted on this thread (read through apache-arrow's accessor, see referenceValues). */
export function sortReference(source: OrdersSource, maps: number): SortedOrders {
  const orders = new OrderList();
  for (let task = 0; task < maps; task++) {
    for (const batch of source.split(task, maps)) {
      const customers = referenceValues(batch, 'customer_id');
      const amounts = referenceValues(batch, 'amount');
      for (let row = 0; row < batch.numRows; row++) if (customers[row] !== null) orders.push(amounts[row] ?? null, customers[row]!);
    }
  }
  return orders.sorted();
}

/**
 * The job's orders, partition after partition, must be the reference's, in its
 * order, amounts equal as the sort compares them (0 and -0 tie, so either may
 * come first); that no -0 turned into 0 or back is checked by their count.
 */
export function checkSort(answer: SortAnswer, reference: SortedOrders): string[] {
  if (answer.amounts.length !== reference.amounts.length) return [`${answer.amounts.length} orders in the answer, ${reference.amounts.length} in the reference`];
  const show = (orders: SortedOrders, i: number) => `(amount ${orders.nulls[i] === 1 ? 'null' : showAmount(orders.amounts[i]!)}, customer ${orders.customers[i]})`;
  for (let i = 0; i < answer.amounts.length; i++) {
    if (!sameAmount(answer.amounts[i]!, reference.amounts[i]!) || answer.nulls[i] !== reference.nulls[i] || answer.customers[i] !== reference.customers[i]) {
      return [`order ${i} of the sorted output is ${show(answer, i)}, the reference has ${show(reference, i)}`];
    }
  }
  const negativeZeros = (orders: SortedOrders) => orders.amounts.reduce((n, amount) => n + (Object.is(amount, -0) ? 1 : 0), 0);
  if (negativeZeros(answer) !== negativeZeros(reference)) return [`${negativeZeros(answer)} amounts of -0 in the answer, ${negativeZeros(reference)} in the reference`];
  return [];
}

/** Equal as the sort orders them: 0 and -0 alike, NaN like NaN. */
function sameAmount(a: number, b: number): boolean {
  return a === b || (Number.isNaN(a) && Number.isNaN(b));
}

/** String(-0) is "0": a message that shows both must tell them apart. */
function showAmount(amount: number): string {
  return Object.is(amount, -0) ? '-0' : String(amount);
}
