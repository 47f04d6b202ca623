/**
 * The two jobs, each with the single-threaded computation its answer is checked against:
 * 1. orders per customer, aggregated in two phases (partial in the map task,
 *    shuffled by customer id, final in the reduce task);
 * 2. a shuffle hash join of orders with customers (both sides shuffled by
 *    customer id; each reduce task builds a hash table of its customers and
 *    probes it with its orders).
 */
import type { RecordBatch } from 'apache-arrow';
import { column, CustomerTotals, forEachNumber, numbers, PARTIAL_SCHEMA } from './columns.js';
import type { Job } from './dag.js';
import { COUNTRIES, countryOf, CUSTOMERS_SCHEMA, customersSplit, type OrdersSource } from './data.js';

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
        keys: ['customer_id'],
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
      const amounts = numbers(column(batch, 'amount'));
      forEachNumber(column(batch, 'customer_id'), (row, id) => totals.add(id, 1, Number.isNaN(amounts[row]!) ? 0 : amounts[row]!));
    }
  }
  return totals;
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

const CUSTOMER_SIDE = CUSTOMERS_SCHEMA.select(['customer_id', 'country']);

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
  return {
    name: 'orders join customers',
    maps: [
      {
        kind: 'map',
        name: 'map orders',
        shuffleId: 0,
        tasks: shape.maps,
        numPartitions: shape.partitions,
        keys: ['customer_id'],
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
        keys: ['customer_id'],
        outputSchema: CUSTOMER_SIDE,
        input: (task) => customersSplit(customers, task, shape.customerMaps),
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
      const ids = numbers(column(batch, 'order_id'));
      const amounts = numbers(column(batch, 'amount'));
      forEachNumber(column(batch, 'customer_id'), (row, customer) =>
        joinRow(summary, ids[row]!, customer >= 0 && customer < customers && Number.isInteger(customer) ? countryOf(customer) : undefined, amounts[row]!),
      );
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
