/**
 * The example runner (examples/job-runner) on inputs and command lines that
 * once gave wrong answers or wrong messages: Float16 amounts are read as their
 * values (and the reference reads them its own way); the join finds every
 * customer whatever integer type customer_id has; the sort leaves out rows
 * with a null customer_id and its check takes 0 and -0 as equal, as the sort
 * does; a stopped job (SIGINT, through its signal) leaves no file; empty and
 * non-Arrow files, and a --memory below one byte per thread, are usage errors;
 * injected faults take effect on a map task with no rows; a run under --dir
 * touches nothing of another run's in it.
 */
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, test } from 'vitest';
import {
  Float16,
  Float64,
  Int16,
  Int32,
  Int64,
  Int8,
  Uint16,
  Uint32,
  Uint64,
  Uint8,
  vectorFromArray,
  type DataType,
  type Vector,
} from 'apache-arrow';
import { MapTaskPool } from 'columnar-shuffle';
import { column, numbers } from '../examples/job-runner/columns.js';
import { runJob, type Fault } from '../examples/job-runner/dag.js';
import { generatedOrders, orderColumns, ordersFromFile } from '../examples/job-runner/data.js';
import {
  checkJoin,
  checkOrdersPerCustomer,
  checkSort,
  joinJob,
  joinReference,
  ordersPerCustomerJob,
  ordersPerCustomerReference,
  sortBounds,
  sortJob,
  sortReference,
  type SortAnswer,
} from '../examples/job-runner/jobs.js';
import { main } from '../examples/job-runner/main.js';
import { writeArrowFile } from './support/arrow-file.js';
import { useMapTaskFixture } from './support/map-task-fixture.js';
import { textSink } from './support/text-sink.js';

const NEEDS = orderColumns(true);

let dir: string;
/** one pool for the jobs of this file: a thread takes seconds to start from the sources */
let pool: MapTaskPool;
useMapTaskFixture({ threads: 2, dirPrefix: 'cs-job-inputs-' }, (fixture) => ({ dir, pool } = fixture));

const arrowFile = (name: string, columns: Record<string, Vector>) => writeArrowFile(join(dir, name), columns);

async function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = textSink();
  const stderr = textSink();
  const code = await main(argv, { stdout: stdout.stream, stderr: stderr.stream });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

describe('Float16 amounts', () => {
  const rows = 400;
  const amounts = Array.from({ length: rows }, (_, i) => (i % 9) - 3 + (i % 2) / 4); // exact in Float16
  const expectedSpent = (customer: number) => amounts.reduce((sum, a, i) => sum + (i % 5 === customer ? a : 0), 0);
  const file = () =>
    arrowFile('f16.arrow', {
      order_id: vectorFromArray(Array.from({ length: rows }, (_, i) => i), new Int32()),
      customer_id: vectorFromArray(Array.from({ length: rows }, (_, i) => i % 5), new Int32()),
      amount: vectorFromArray(amounts, new Float16()),
    });

  test('are read as their values, not their bits, by the jobs and by the reference', async () => {
    const source = await ordersFromFile(await file(), NEEDS);
    const [batch] = [...source.split(0, 1)];
    expect([...numbers(column(batch!, 'amount'))]).toEqual(amounts);
    const reference = ordersPerCustomerReference(source, 2);
    for (let customer = 0; customer < 5; customer++) expect(reference.get(customer)).toEqual({ orders: 80, spent: expectedSpent(customer) });
    const result = await runJob(ordersPerCustomerJob(source, { maps: 2, partitions: 2 }), { dir, threads: 2, pool });
    expect(result.value.totals.get(0)).toEqual({ orders: 80, spent: expectedSpent(0) });
    expect(checkOrdersPerCustomer(result.value, reference)).toEqual([]);
  });

  test('job 1 on the command line prints the right totals, and the sort and the join are verified', async () => {
    const path = await file();
    const job1 = await run(['--input', path, '--maps', '2', '--partitions', '2', '--threads', '2']);
    expect(job1.code).toBe(0);
    expect(job1.stdout).toMatch(new RegExp(`customer 0 +80 orders \\(20\\.0 %\\) +${expectedSpent(0).toFixed(2)} spent`));
    const source = await ordersFromFile(path, NEEDS);
    const shape = { maps: 2, partitions: 3 };
    const sorted = await runJob(sortJob(source, shape, sortBounds(source, shape)), { dir, threads: 2, pool });
    expect(checkSort(sorted.value, sortReference(source, shape.maps))).toEqual([]);
    expect(sorted.value.amounts[0]).toBe(Math.max(...amounts));
    const joined = await runJob(joinJob(source, source.customerIds, { ...shape, customerMaps: 1 }), { dir, threads: 2, pool });
    expect(checkJoin(joined.value, joinReference(source, source.customerIds, shape.maps))).toEqual([]);
  });
});

describe('job 2 with customer_id of every integer type', () => {
  const types: [string, DataType, (i: number) => number | bigint][] = [
    ['Int8', new Int8(), Number],
    ['Int16', new Int16(), Number],
    ['Int32', new Int32(), Number],
    ['Int64', new Int64(), BigInt],
    ['Uint8', new Uint8(), Number],
    ['Uint16', new Uint16(), Number],
    ['Uint32', new Uint32(), Number],
    ['Uint64', new Uint64(), BigInt],
  ];
  test.each(types)('%s: the customers side is shuffled as the orders are, so every order finds its customer', async (name, type, value) => {
    const rows = 3_000;
    const path = await arrowFile(`${name}.arrow`, {
      order_id: vectorFromArray(Array.from({ length: rows }, (_, i) => i), new Int32()),
      customer_id: vectorFromArray(Array.from({ length: rows }, (_, i) => value((i * 37) % 120)), type),
      amount: vectorFromArray(Array.from({ length: rows }, (_, i) => i / 4), new Float64()),
    });
    const source = await ordersFromFile(path, NEEDS);
    const shape = { maps: 2, partitions: 5, customerMaps: 2 };
    const result = await runJob(joinJob(source, source.customerIds, shape), { dir, threads: 2, pool });
    const reference = joinReference(source, source.customerIds, shape.maps);
    expect(reference.joined).toBe(rows);
    expect(checkJoin(result.value, reference)).toEqual([]);
    expect(result.value.joined).toBe(rows);
  });
});

describe('job 3 and its check', () => {
  test('rows with a null customer_id are left out, as the README says; infinite amounts sort too', async () => {
    const rows = 2_000;
    const path = await arrowFile('null-customers.arrow', {
      customer_id: vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 7 === 0 ? null : i % 40)), new Int32()),
      amount: vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 11 === 0 ? Infinity : i % 13 === 0 ? -Infinity : (i * 31) % 500)), new Float64()),
    });
    const source = await ordersFromFile(path, NEEDS.slice(1));
    const shape = { maps: 3, partitions: 4 };
    const reference = sortReference(source, shape.maps);
    const kept = Array.from({ length: rows }, (_, i) => i).filter((i) => i % 7 !== 0).length;
    expect(reference.amounts.length).toBe(kept);
    expect([...reference.customers].some(Number.isNaN)).toBe(false);
    const result = await runJob(sortJob(source, shape, sortBounds(source, shape)), { dir, threads: 2, pool });
    expect(result.value.amounts.length).toBe(kept);
    expect(checkSort(result.value, reference)).toEqual([]);
    const { code, stdout } = await run(['--job', 'sort', '--input', path, '--maps', '1', '--partitions', '1', '--threads', '1']);
    expect(stdout).toContain('check     verified');
    expect(code).toBe(0);
  });

  const answer = (amounts: number[], customers = amounts.map(() => 1)): SortAnswer => ({
    amounts: Float64Array.from(amounts),
    nulls: new Uint8Array(amounts.length),
    customers: Float64Array.from(customers),
    partitionRows: [amounts.length],
  });

  test('0 and -0 are equal to the check, as they are to the sort (either may come first), but a lost sign is reported', () => {
    expect(checkSort(answer([5, -0, 0, 0, -0]), answer([5, 0, -0, -0, 0]))).toEqual([]);
    expect(checkSort(answer([5, 0, 0]), answer([5, 0, -0]))).toEqual(['0 amounts of -0 in the answer, 1 in the reference']);
  });

  test("the check's message tells -0 from 0", () => {
    expect(checkSort(answer([-0, 5]), answer([5, -0]))).toEqual(['order 0 of the sorted output is (amount -0, customer 1), the reference has (amount 5, customer 1)']);
  });

  test('orders with both 0 and -0 amounts from several map tasks are verified', async () => {
    const rows = 4_000;
    const path = await arrowFile('zeros.arrow', {
      customer_id: vectorFromArray(Array.from({ length: rows }, (_, i) => i % 3), new Int32()),
      amount: vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 4 === 0 ? -0 : i % 4 === 1 ? 0 : i % 50)), new Float64()),
    });
    const source = await ordersFromFile(path, NEEDS.slice(1));
    const shape = { maps: 4, partitions: 3 };
    const result = await runJob(sortJob(source, shape, sortBounds(source, shape)), { dir, threads: 2, pool });
    expect(checkSort(result.value, sortReference(source, shape.maps))).toEqual([]);
  });
});

describe('a stopped job', () => {
  test('aborting its signal mid-run fails it and removes every file: committed outputs, spills, temporary files', async () => {
    const source = generatedOrders(400_000, 50_000, 3);
    const stop = new AbortController();
    const job = runJob(ordersPerCustomerJob(source, { maps: 8, partitions: 4 }), {
      dir,
      threads: 2,
      pool,
      memoryBytes: 2 * 1024 * 1024,
      signal: stop.signal,
      // stopped once a map output has committed, with tasks still running
      progress: { update: (_, p) => void (p.done >= 1 && stop.abort()), log: () => undefined, done: () => undefined },
    });
    await expect(job).rejects.toMatchObject({ code: 'CS_ABORTED' });
    expect(await readdir(dir)).toEqual([]);
  });

  test('the command line stopped through its signal exits 130, leaving nothing in --dir', async () => {
    const stop = new AbortController();
    let printed = '';
    const stdout = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        printed += chunk.toString();
        if (printed.includes('  plan ')) stop.abort(); // as soon as the plan is printed, before the job starts
        callback();
      },
    });
    const stderr = textSink();
    const code = await main(['--orders', '20000', '--maps', '2', '--threads', '1', '--dir', dir], { stdout, stderr: stderr.stream, signal: stop.signal });
    expect(code).toBe(130);
    expect(stderr.text()).toContain('job-runner: interrupted');
    expect(printed).not.toContain('check');
    expect(await readdir(dir)).toEqual([]);
  });
});

describe('the command line', () => {
  test('an empty file and a tiny non-Arrow one are "not an Arrow IPC file", not a missing column', async () => {
    const empty = join(dir, 'empty.arrow');
    const text = join(dir, 'text.arrow');
    await writeFile(empty, '');
    await writeFile(text, 'a,b\n');
    const first = await run(['--input', empty]);
    expect(first.code).toBe(2);
    expect(first.stderr).toBe(`job-runner: cannot read ${empty} as an uncompressed Arrow IPC file or stream: the file is empty\n`);
    const second = await run(['--input', text]);
    expect(second.code).toBe(2);
    expect(second.stderr).toBe(`job-runner: cannot read ${text} as an uncompressed Arrow IPC file or stream: no Arrow schema in it\n`);
  });

  test('--memory below one byte per thread is a usage error naming --memory', async () => {
    for (const memory of ['0', '1']) {
      const { code, stderr } = await run(['--memory', memory, '--threads', '2']);
      expect(code).toBe(2);
      expect(stderr).toContain(`job-runner: --memory must be at least one byte per thread (--threads 2), got ${memory}`);
    }
  });

  test('--fail-map and --kill-map take effect on a map task with no rows', async () => {
    const source = generatedOrders(3, 10, 5); // 3 orders over 10 map tasks: tasks 3, 6 and 8 have one each, the others none
    const stage = 'map (partial aggregate)';
    expect([4, 5].map((task) => [...source.split(task, 10)].length)).toEqual([0, 0]);
    const faults: Fault[] = [
      { stage, task: 5, attempt: 0, kind: 'throw' },
      { stage, task: 4, attempt: 0, kind: 'terminate' },
    ];
    const result = await runJob(ordersPerCustomerJob(source, { maps: 10, partitions: 2 }), { dir, threads: 2, pool, faults });
    expect(checkOrdersPerCustomer(result.value, ordersPerCustomerReference(source, 10))).toEqual([]);
    const failures = result.stages.find((s) => s.name === stage)!.failures;
    expect(failures.map((f) => /task (\d) attempt 0 failed \((CS_[A-Z_]+)/.exec(f)!.slice(1)).sort()).toEqual([
      ['4', 'CS_WORKER_EXITED'],
      ['5', 'CS_MAP_TASK_FAILED'],
    ]);
    expect(await readdir(dir)).toEqual([]);
  });

  test("a run under --dir works in a subdirectory of its own: another run's files in --dir are left alone", async () => {
    // what another run of the same shuffle ids has committed in the shared directory
    const others = ['shuffle_0_0_0.data', 'shuffle_0_0_0.index', 'shuffle_1_0_0.data'];
    for (const name of others) await writeFile(join(dir, name), 'another run');
    const { code, stdout } = await run(['--job', 'join', '--orders', '5000', '--customers', '100', '--maps', '2', '--partitions', '2', '--threads', '2', '--dir', dir]);
    expect(stdout).toContain('check     verified');
    expect(code).toBe(0);
    expect((await readdir(dir)).sort()).toEqual(others);
  });
});
