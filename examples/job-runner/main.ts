/**
 * The example job runner's command line (`npm run demo`, `npm run demo:join`, `npm run demo:sort`):
 * runs job 1 (orders per customer), job 2 (orders join customers) or job 3 (orders by amount) on
 * generated data or on the user's Arrow IPC file, checks the answer against a
 * single-threaded computation, and prints what each stage did.
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { Table } from 'apache-arrow';
import { ShuffleError, WRITER_KINDS, type WriterKind } from 'columnar-shuffle';
import { runJob, type Fault, type JobResult, type StageReport } from './dag.js';
import { generatedOrders, InputError, orderColumns, ordersFromFile, type OrdersSource } from './data.js';
import {
  checkJoin,
  checkOrdersPerCustomer,
  checkSort,
  joinJob,
  joinReference,
  ordersPerCustomerJob,
  ordersPerCustomerReference,
  SAMPLE_EVERY,
  sortBounds,
  sortJob,
  sortReference,
  type CustomerAnswer,
  type JoinSummary,
  type SortAnswer,
} from './jobs.js';
import { progressBoard } from './progress.js';

export const USAGE = `usage: job-runner [--job orders|join|sort] [--input orders.arrow] [options]

  --job orders        job 1 (default): orders and amount spent per customer, aggregated in two
                      phases (partial aggregate in each map task, final in each reduce task)
  --job join          job 2: a shuffle hash join of orders with customers
  --job sort          job 3: the orders sorted by amount, largest first (a distributed sort: bounds
                      sampled from the orders, rows range-partitioned by amount, each partition sorted)
  --input FILE        orders from an uncompressed Arrow IPC file or stream instead of generated ones;
                      columns: customer_id (integer), amount (integer or float), and for the join
                      order_id (integer); customers 0..max(customer_id) are generated for the join;
                      rows with a null customer_id are left out
  --orders N          generated orders (default 1000000)
  --customers N       generated customers (default 10000)
  --maps N            map tasks over the orders (default 8)
  --partitions N      reduce partitions (default 8)
  --threads N         worker threads for map tasks (default: CPUs, at most 4)
  --memory SIZE       memory budget of the map tasks, split over the threads (default 64MiB)
  --writer hash|sort  the map tasks' shuffle writer: hash, the columnar one (default), or sort, the
                      row writer (for thousands of partitions); the reducers read either
  --pipelined         start the reducers with the map tasks (they read outputs as they commit)
  --fail-map N        make attempt 0 of map task N throw mid-write (a task with no rows throws once
                      its input is read)
  --kill-map N        terminate the worker thread of attempt 0 of map task N mid-write (a task with no
                      rows ends its thread once its input is read)
  --zombie-map N      let attempt 0 of map task N commit a wrong output, then lose it
  --max-attempts N    attempts per task (default 4)
  --dir DIR           where the job's shuffle directory is made (default: the system's temporary
                      directory): a new subdirectory of DIR per run, so runs may share DIR; it is
                      removed with the job's files at the end, also on SIGINT, SIGTERM or SIGHUP
  -h, --help

Exit codes: 0 verified, 1 the job failed or its answer is wrong, 2 bad command line or input,
130 interrupted (SIGINT, SIGTERM or SIGHUP: the job is stopped and its files removed; a second
signal exits at once, leaving them).`;

/** The signals that stop a run: its map tasks are aborted, its files removed, and it exits 130. */
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const EXIT_INTERRUPTED = 130;

interface IO {
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean; columns?: number };
  /** Stops the run (exit 130); without it, main stops on SIGINT / SIGTERM / SIGHUP, and a second signal exits at once. */
  signal?: AbortSignal;
}

/** Exit codes: 0 verified, 1 the job failed or its answer is wrong, 2 bad command line or input, 130 interrupted. */
export async function main(argv: string[], io: IO = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  const controller = new AbortController();
  const onSignal = () => (controller.signal.aborted ? process.exit(EXIT_INTERRUPTED) : controller.abort());
  // left to Node, a signal killed the process with the job's files in place
  if (io.signal === undefined) for (const name of SIGNALS) process.on(name, onSignal);
  try {
    return await run(argv, io, io.signal ?? controller.signal);
  } finally {
    for (const name of SIGNALS) process.off(name, onSignal);
  }
}

async function run(argv: string[], io: IO, signal: AbortSignal): Promise<number> {
  const out = (line = '') => io.stdout.write(`${line}\n`);
  const interrupted = () => {
    io.stderr.write('job-runner: interrupted\n');
    return EXIT_INTERRUPTED;
  };
  let args: ReturnType<typeof parse>;
  try {
    args = parse(argv);
  } catch (error) {
    io.stderr.write(`job-runner: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (args.help) {
    out(USAGE);
    return 0;
  }
  let source: OrdersSource;
  try {
    source =
      args.input === undefined
        ? generatedOrders(args.orders, args.customers, 1, args.job === 'join' ? 100 : 0)
        : await ordersFromFile(args.input, orderColumns(args.job === 'join'));
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    io.stderr.write(`job-runner: ${error.message}\n`);
    return 2;
  }
  if (args.dir !== undefined && !(await stat(args.dir).then((s) => s.isDirectory(), () => false))) {
    io.stderr.write(`job-runner: --dir ${args.dir} is not a directory\n`);
    return 2;
  }
  if (signal.aborted) return interrupted();
  // a directory of its own, also under --dir: two runs sharing one would write the same shuffle ids,
  // and one's cleanup would remove the other's files
  const dir = await mkdtemp(join(args.dir ?? tmpdir(), 'job-runner-'));
  const started = performance.now();
  const progress = progressBoard(io.stderr);
  const faults: Fault[] = [];
  const stage = { orders: 'map (partial aggregate)', join: 'map orders', sort: 'map (range by amount)' }[args.job];
  if (args.failMap !== undefined) faults.push({ stage, task: args.failMap, attempt: 0, kind: 'throw' });
  if (args.killMap !== undefined) faults.push({ stage, task: args.killMap, attempt: 0, kind: 'terminate' });
  if (args.zombieMap !== undefined) faults.push({ stage, task: args.zombieMap, attempt: 0, kind: 'zombie' });
  const runOptions = { dir, threads: args.threads, memoryBytes: args.memory, writer: args.writer, pipelined: args.pipelined, maxAttempts: args.maxAttempts, faults, progress, signal };
  const shape = { maps: args.maps, partitions: args.partitions };
  try {
    const title = { orders: 'orders per customer (two-phase aggregate)', join: 'orders join customers (shuffle hash join)', sort: 'orders by amount, largest first (distributed sort)' }[args.job];
    out(`columnar-shuffle job runner: ${title}`);
    out(`  input     ${source.description}`);
    out(`  plan      ${args.maps} map tasks, ${args.partitions} reduce partitions, ${args.threads} worker threads, map memory ${bytes(args.memory)} (${bytes(Math.floor(args.memory / args.threads))} per thread), ${args.writer} writer${args.pipelined ? ', pipelined' : ''}`);
    let problems: string[];
    let checkMs: number;
    let result: JobResult<CustomerAnswer> | JobResult<JoinSummary> | JobResult<SortAnswer>;
    if (args.job === 'sort') {
      const bounds = sortBounds(source, shape);
      out(`  bounds    ${bounds.numRows} amounts from a sample of every ${SAMPLE_EVERY}th order, largest first: ${describeBounds(bounds)}`);
      const job = await runJob(sortJob(source, shape, bounds), runOptions);
      result = job;
      printStages(out, job.stages);
      const t = performance.now();
      problems = checkSort(job.value, sortReference(source, args.maps));
      checkMs = performance.now() - t;
      printSorted(out, job.value);
    } else if (args.job === 'join') {
      const customers = args.input === undefined ? args.customers : source.customerIds;
      const job = await runJob(joinJob(source, customers, { ...shape, customerMaps: Math.max(1, Math.min(args.maps, 2)) }), runOptions);
      result = job;
      printStages(out, job.stages);
      const t = performance.now();
      problems = checkJoin(job.value, joinReference(source, customers, args.maps));
      checkMs = performance.now() - t;
      printJoin(out, job.value);
    } else {
      const job = await runJob(ordersPerCustomerJob(source, shape), runOptions);
      result = job;
      printStages(out, job.stages);
      const t = performance.now();
      problems = checkOrdersPerCustomer(job.value, ordersPerCustomerReference(source, args.maps));
      checkMs = performance.now() - t;
      printCustomers(out, job.value, args.partitions);
    }
    if (signal.aborted) return interrupted(); // after the job's last await: its answer is not checked
    const failures = result.stages.flatMap((s) => s.failures);
    out(`  retries   ${failures.length === 0 ? 'none' : failures.length}`);
    for (const failure of failures) out(`            - ${failure}`);
    out(`  cleanup   ${result.removedFiles} shuffle files removed`);
    if (problems.length === 0) out(`  check     verified against a single-threaded computation of the same answer (${seconds(checkMs)})`);
    else {
      out('  check     FAILED: the answer differs from the single-threaded computation');
      for (const problem of problems) out(`            - ${problem}`);
    }
    out(`  total     ${seconds(performance.now() - started)}`);
    return problems.length === 0 ? 0 : 1;
  } catch (error) {
    progress.done();
    if (signal.aborted) return interrupted(); // the job failed because it was stopped (CS_ABORTED and the like)
    const code = error instanceof ShuffleError ? ` ${error.code}` : '';
    io.stderr.write(`job-runner: error${code}: ${(error as Error).message}\n`);
    return 1;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      job: { type: 'string' },
      input: { type: 'string' },
      orders: { type: 'string' },
      customers: { type: 'string' },
      maps: { type: 'string' },
      partitions: { type: 'string' },
      threads: { type: 'string' },
      memory: { type: 'string' },
      writer: { type: 'string' },
      pipelined: { type: 'boolean' },
      'fail-map': { type: 'string' },
      'kill-map': { type: 'string' },
      'zombie-map': { type: 'string' },
      'max-attempts': { type: 'string' },
      dir: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const job = values.job ?? 'orders';
  if (job !== 'orders' && job !== 'join' && job !== 'sort') throw new Error(`--job must be orders, join or sort, got ${job}`);
  const writer = values.writer ?? 'hash';
  if (!WRITER_KINDS.includes(writer as WriterKind)) throw new Error(`--writer must be ${WRITER_KINDS.join(' or ')}, got ${writer}`);
  const maps = integer(values.maps, 'maps', 1) ?? 8;
  const task = (name: 'fail-map' | 'kill-map' | 'zombie-map') => {
    const n = integer(values[name], name, 0);
    if (n !== undefined && n >= maps) throw new Error(`--${name} ${n}: there are only ${maps} map tasks`);
    return n;
  };
  const threads = integer(values.threads, 'threads', 1) ?? Math.min(4, availableParallelism());
  const memory = byteSize(values.memory) ?? 64 * 1024 * 1024;
  // a usage error here, not the pool's CS_INVALID_ARGUMENT about memoryBytes once the job has started
  if (memory < threads) throw new Error(`--memory must be at least one byte per thread (--threads ${threads}), got ${values.memory}`);
  return {
    help: values.help === true,
    job: job as 'orders' | 'join' | 'sort',
    input: values.input,
    orders: integer(values.orders, 'orders', 1) ?? 1_000_000,
    customers: integer(values.customers, 'customers', 1) ?? 10_000,
    maps,
    partitions: integer(values.partitions, 'partitions', 1) ?? 8,
    threads,
    memory,
    writer: writer as WriterKind,
    pipelined: values.pipelined === true,
    failMap: task('fail-map'),
    killMap: task('kill-map'),
    zombieMap: task('zombie-map'),
    maxAttempts: integer(values['max-attempts'], 'max-attempts', 1) ?? 4,
    dir: values.dir,
  };
}

function integer(value: string | undefined, name: string, min: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value.replace(/_/g, ''));
  if (!Number.isSafeInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got ${value}`);
  return n;
}

function byteSize(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB)?$/.exec(value);
  if (match === null) throw new Error(`--memory takes a size like 512KiB, 64MiB or 1GiB, got ${value}`);
  const unit = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }[match[2] ?? 'B']!;
  return Math.floor(Number(match[1]) * unit);
}

function printStages(out: (line?: string) => void, stages: readonly StageReport[]): void {
  for (const s of stages) {
    out(`  stage     ${s.name}: ${s.tasks} tasks, ${s.attempts} attempts, ${seconds(s.ms)}`);
    if (s.kind === 'map') {
      out(`              ${count(s.rowsIn)} rows in, ${count(s.rowsOut)} rows written, ${bytes(s.bytesShuffled)} shuffled, ${s.spills} spills${s.spills > 0 ? ` (${bytes(s.spilledBytes)})` : ''}`);
      out(`              input sent to the worker threads: ${bytes(s.transferredBytes)} moved, ${bytes(s.copiedBytes)} copied`);
    } else {
      out(`              ${count(s.rowsIn)} rows read from ${s.outputsRead} map outputs`);
    }
  }
}

function printCustomers(out: (line?: string) => void, answer: CustomerAnswer, partitions: number): void {
  const { totals } = answer;
  const top = Array.from({ length: totals.size }, (_, slot) => slot)
    .sort((a, b) => totals.orders[b]! - totals.orders[a]! || totals.ids[a]! - totals.ids[b]!)
    .slice(0, 5);
  let orders = 0;
  for (let slot = 0; slot < totals.size; slot++) orders += totals.orders[slot]!;
  out(`  result    ${count(totals.size)} customers, ${count(orders)} orders; the largest of ${partitions} partitions holds ${count(answer.largestPartition)} customers; the busiest:`);
  for (const slot of top) {
    const share = ((totals.orders[slot]! / orders) * 100).toFixed(1);
    out(`              customer ${String(totals.ids[slot]).padEnd(8)} ${count(totals.orders[slot]!).padStart(10)} orders (${share.padStart(4)} %)  ${money(totals.spent[slot]!).padStart(16)} spent`);
  }
}

function describeBounds(bounds: Table): string {
  const values = [...bounds.getChild('amount')!].map((v) => money(Number(v)));
  return values.length <= 8 ? values.join(', ') : `${values.slice(0, 4).join(', ')}, ..., ${values.slice(-3).join(', ')}`;
}

function printSorted(out: (line?: string) => void, answer: SortAnswer): void {
  const rows = answer.partitionRows;
  out(`  result    ${count(answer.amounts.length)} orders in order of amount over ${rows.length} range partitions of ${count(Math.min(...rows))} to ${count(Math.max(...rows))} orders; the largest:`);
  for (let i = 0; i < Math.min(5, answer.amounts.length); i++) {
    out(`              ${(answer.nulls[i] === 1 ? 'null' : money(answer.amounts[i]!)).padStart(12)}  customer ${answer.customers[i]}`);
  }
}

function printJoin(out: (line?: string) => void, summary: JoinSummary): void {
  out(`  result    ${count(summary.joined)} joined rows, ${count(summary.unmatched)} orders without a customer dropped; by country:`);
  const countries = [...summary.countries].sort((a, b) => b[1].orders - a[1].orders).slice(0, 5);
  for (const [name, c] of countries) out(`              ${name}  ${count(c.orders).padStart(10)} orders  ${money(c.amount).padStart(16)}`);
}

function count(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function money(n: number): string {
  return n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}

function seconds(ms: number): string {
  return ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await main(process.argv.slice(2));
}
