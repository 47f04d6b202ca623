/**
 * The example runner (examples/job-runner), end to end: real worker threads,
 * real files. Claims: the three jobs give the answer a single-threaded computation
 * gives (the sort, range-partitioned, in order partition after partition); with a map task that throws mid-write, a worker terminated mid-write
 * and an attempt that commits a wrong output and is lost, the job still gives
 * it, reads only the attempts it registered, never meets a temporary file and
 * leaves no file behind; pipelined reducers, started before the map tasks
 * finish, give it too; a task that fails every attempt fails the job with its
 * typed error, without hanging or leaving files; bad input is reported by name.
 */
import { readdirSync } from 'node:fs';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { Float64, Int64, Table, tableToIPC, Utf8, vectorFromArray } from 'apache-arrow';
import { MapTaskPool } from 'columnar-shuffle';
import { runJob, type Fault } from '../examples/job-runner/dag.js';
import { generatedOrders } from '../examples/job-runner/data.js';
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
} from '../examples/job-runner/jobs.js';
import { main } from '../examples/job-runner/main.js';
import { progressBoard, renderLine } from '../examples/job-runner/progress.js';
import { useMapTaskFixture } from './support/map-task-fixture.js';
import { textSink } from './support/text-sink.js';

const SHAPE = { maps: 4, partitions: 4 };
const MAP_STAGE = 'map (partial aggregate)';

let dir: string;
/** one pool for every job of this file: a thread takes seconds to start from the sources */
let pool: MapTaskPool;
useMapTaskFixture({ threads: 2, dirPrefix: 'cs-job-' }, (fixture) => ({ dir, pool } = fixture));


describe('job 1: orders per customer, two-phase aggregate', () => {
  test('with a map task that throws, a worker terminated and a lost attempt, the answer is still right and nothing is left', async () => {
    const source = generatedOrders(60_000, 2_000, 7);
    const faults: Fault[] = [
      { stage: MAP_STAGE, task: 1, attempt: 0, kind: 'throw' },
      { stage: MAP_STAGE, task: 2, attempt: 0, kind: 'terminate' },
      { stage: MAP_STAGE, task: 3, attempt: 0, kind: 'zombie' },
    ];
    let atReduce: string[] = [];
    const result = await runJob(ordersPerCustomerJob(source, SHAPE), {
      dir,
      threads: 2,
      pool,
      faults,
      onStage: ({ stage, phase }) => {
        if (stage.startsWith('reduce') && phase === 'start') atReduce = readdirSync(dir).sort();
      },
    });
    expect(checkOrdersPerCustomer(result.value, ordersPerCustomerReference(source, SHAPE.maps))).toEqual([]);
    const map = result.stages.find((s) => s.name === MAP_STAGE)!;
    expect(map.attempts).toBe(7);
    expect(map.failures.map((f) => /task (\d) attempt 0 failed \((CS_[A-Z_]+)/.exec(f)!.slice(1))).toEqual(
      expect.arrayContaining([
        ['1', 'CS_MAP_TASK_FAILED'],
        ['2', 'CS_WORKER_EXITED'],
        ['3', 'CS_MAP_TASK_FAILED'],
      ]),
    );
    // the reducers read one attempt per map task: the ones registered
    expect(result.statuses.get(0)!.map((s) => [s.id.mapId, s.id.attempt])).toEqual([
      [0, 0],
      [1, 1],
      [2, 1],
      [3, 1],
    ]);
    // when the reducers started: committed outputs only (the lost attempt's among them, never read), no temporary file
    expect(atReduce).toEqual(
      ['0_0', '1_1', '2_1', '3_0', '3_1'].flatMap((a) => [`shuffle_0_${a}.checksum.CRC32C`, `shuffle_0_${a}.data`, `shuffle_0_${a}.index`]).sort(),
    );
    expect(result.stages.find((s) => s.kind === 'reduce')!.outputsRead).toBeLessThanOrEqual(4 * SHAPE.partitions);
    expect(await readdir(dir), 'the job removes its files').toEqual([]);
  });

  test('pipelined: reducers started with the map tasks read outputs as they commit and give the same answer', async () => {
    const source = generatedOrders(40_000, 1_000, 8);
    const events: string[] = [];
    const result = await runJob(ordersPerCustomerJob(source, SHAPE), {
      dir,
      threads: 2,
      pool,
      pipelined: true,
      faults: [{ stage: MAP_STAGE, task: 0, attempt: 0, kind: 'terminate' }],
      onStage: ({ stage, phase }) => void events.push(`${stage.split(' ')[0]} ${phase}`),
    });
    expect(events.indexOf('reduce start'), 'the reducers started before the map stage ended').toBeLessThan(events.indexOf('map end'));
    expect(checkOrdersPerCustomer(result.value, ordersPerCustomerReference(source, SHAPE.maps))).toEqual([]);
    expect(await readdir(dir)).toEqual([]);
  });

  test('a map task that fails every attempt fails the job with its typed error, promptly, leaving nothing', async () => {
    const source = generatedOrders(20_000, 500, 9);
    const faults: Fault[] = [0, 1, 2].map((attempt) => ({ stage: MAP_STAGE, task: 1, attempt, kind: 'throw' }));
    const started = performance.now();
    await expect(runJob(ordersPerCustomerJob(source, SHAPE), { dir, threads: 2, pool, faults, maxAttempts: 3, pipelined: true })).rejects.toMatchObject({
      code: 'CS_MAP_TASK_FAILED',
      where: { shuffle: 0, map: 1, attempt: 2 },
    });
    expect(performance.now() - started).toBeLessThan(30_000);
    expect(await readdir(dir)).toEqual([]);
  });
});

describe('job 2: shuffle hash join', () => {
  test('orders join customers gives the single-threaded join, with a map task that throws', async () => {
    const orders = generatedOrders(50_000, 3_000, 11, 50);
    const result = await runJob(joinJob(orders, 3_000, { ...SHAPE, customerMaps: 2 }), {
      dir,
      threads: 2,
      pool,
      faults: [{ stage: 'map orders', task: 2, attempt: 0, kind: 'throw' }],
    });
    const reference = joinReference(orders, 3_000, SHAPE.maps);
    expect(reference.unmatched, 'every 50th order has no customer').toBe(1_000);
    expect(checkJoin(result.value, reference)).toEqual([]);
    expect(result.stages.map((s) => s.name)).toEqual(['map orders', 'map customers', 'reduce (hash join)']);
    expect(await readdir(dir)).toEqual([]);
  });

  test('the check can fail: a join summary missing a row is reported', () => {
    const orders = generatedOrders(2_000, 100, 12, 50);
    const reference = joinReference(orders, 100, 2);
    const broken = { ...reference, joined: reference.joined - 1 };
    expect(checkJoin(broken, reference).length).toBeGreaterThan(0);
  });
});

describe('job 3: orders by amount, a distributed sort', () => {
  test('range partitioning by sampled bounds gives the single-threaded sort, partition after partition, with a worker terminated', async () => {
    const orders = generatedOrders(60_000, 2_000, 13);
    const shape = { maps: 4, partitions: 6 };
    const bounds = sortBounds(orders, shape);
    expect(bounds.numRows).toBe(5);
    const result = await runJob(sortJob(orders, shape, bounds), { dir, threads: 2, pool, faults: [{ stage: 'map (range by amount)', task: 1, attempt: 0, kind: 'terminate' }] });
    expect(checkSort(result.value, sortReference(orders, shape.maps))).toEqual([]);
    // the sampled bounds split the orders about evenly: every partition within a fifth of its share
    for (const rows of result.value.partitionRows) expect(Math.abs(rows - 10_000)).toBeLessThan(2_000);
    expect(await readdir(dir)).toEqual([]);
  });

  test('the check can fail: two orders swapped are reported', () => {
    const orders = generatedOrders(1_000, 100, 14);
    const reference = sortReference(orders, 2);
    const swapped = { ...reference, amounts: reference.amounts.slice(), partitionRows: [1_000] };
    [swapped.amounts[10], swapped.amounts[500]] = [swapped.amounts[500]!, swapped.amounts[10]!];
    expect(checkSort(swapped, reference)).toEqual([expect.stringMatching(/^order 10 of the sorted output is/)]);
  });

  test("the user's file with int64 amounts, nulls and NaN: NaN first and nulls last, as Spark's descending order puts them", async () => {
    const rows = 5_000;
    const path = join(dir, 'amounts.arrow');
    const amounts = Array.from({ length: rows }, (_, i) => (i % 97 === 0 ? null : i % 89 === 0 ? Number.NaN : (i * 7919) % 3000));
    await writeFile(path, tableToIPC(new Table({ customer_id: vectorFromArray(Array.from({ length: rows }, (_, i) => BigInt(i % 50)), new Int64()), amount: vectorFromArray(amounts, new Float64()) }), 'file'));
    const stdout = textSink();
    const code = await main(['--job', 'sort', '--input', path, '--maps', '3', '--partitions', '5', '--threads', '2'], { stdout: stdout.stream, stderr: textSink().stream });
    expect(code).toBe(0);
    expect(stdout.text()).toContain('check     verified');
    expect(stdout.text()).toMatch(/result {4}5,000 orders in order of amount over 5 range partitions/);
    const ints = join(dir, 'int-amounts.arrow');
    await writeFile(ints, tableToIPC(new Table({ customer_id: vectorFromArray(Array.from({ length: rows }, (_, i) => BigInt(i % 50)), new Int64()), amount: vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 31 === 0 ? null : BigInt(i % 700))), new Int64()) }), 'file'));
    expect(await main(['--job', 'sort', '--input', ints, '--partitions', '4', '--threads', '2'], { stdout: textSink().stream, stderr: textSink().stream })).toBe(0);
  });
});

describe('the command line', () => {
  test("an input file without a column the job needs is refused, naming it and the file's columns", async () => {
    const path = join(dir, 'orders.arrow');
    await writeFile(path, tableToIPC(new Table({ customer: vectorFromArray([1n, 2n], new Int64()), amount: vectorFromArray([1.5, 2.5], new Float64()) }), 'file'));
    const stderr = textSink();
    const code = await main(['--input', path], { stdout: textSink().stream, stderr: stderr.stream });
    expect(code).toBe(2);
    expect(stderr.text()).toContain('has no column "customer_id" (integer); its columns: customer: Int64, amount: Float64');
  });

  test('a column of the wrong type is refused', async () => {
    const path = join(dir, 'orders.arrow');
    await writeFile(path, tableToIPC(new Table({ customer_id: vectorFromArray(['a'], new Utf8()), amount: vectorFromArray([1], new Float64()) })));
    const stderr = textSink();
    expect(await main(['--input', path], { stdout: textSink().stream, stderr: stderr.stream })).toBe(2);
    expect(stderr.text()).toContain('column "customer_id"');
  });

  test("the user's own Arrow file: job 1 on it is verified, its batches copied (they are views into the file's bytes)", async () => {
    const rows = 30_000;
    const ids = vectorFromArray(Array.from({ length: rows }, (_, i) => BigInt((i * 7919) % 1234)), new Int64());
    const amounts = vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 1000) / 10), new Float64());
    const path = join(dir, 'mine.arrow');
    await writeFile(path, tableToIPC(new Table({ customer_id: ids, amount: amounts, note: vectorFromArray(Array.from({ length: rows }, () => 'x'), new Utf8()) }), 'file'));
    const stdout = textSink();
    const stderr = textSink();
    const code = await main(['--input', path, '--maps', '3', '--partitions', '3', '--threads', '2', '--dir', join(dir)], { stdout: stdout.stream, stderr: stderr.stream });
    expect(stderr.text()).toBe('');
    expect(code).toBe(0);
    const text = stdout.text();
    expect(text).toContain('30,000 orders from');
    expect(text).toContain('1,234 customers');
    expect(text).toMatch(/input sent to the worker threads: 0 B moved, [\d.]+ KiB copied/);
    expect(text).toContain('check     verified');
    expect((await readdir(dir)).sort()).toEqual(['mine.arrow']);
  });
});

describe('progress bars', () => {
  test('drawn on a terminal, one line per stage, redrawn in place and erased at the end', () => {
    const out = textSink();
    const tty = Object.assign(out.stream, { isTTY: true, columns: 100 });
    let now = 0;
    const board = progressBoard(tty, () => now);
    board.update('map', { done: 0, total: 4, detail: '0 rows in' });
    board.update('reduce', { done: 0, total: 2, detail: '' });
    now += 200;
    board.update('map', { done: 2, total: 4, detail: '10 rows in' });
    board.log('map task 1 attempt 0 failed; retrying as attempt 1');
    board.done();
    const text = out.text();
    expect(text).toContain('map    [##########..........] 2/4 tasks  10 rows in');
    expect(text).toContain('\x1b[2A\r\x1b[J'); // two bars moved over and cleared
    expect(text).toContain('map task 1 attempt 0 failed; retrying as attempt 1\n');
    expect(text.endsWith('\x1b[2A\r\x1b[J'), 'done() erases the bars').toBe(true);
  });

  test('not drawn into a pipe or a file; log lines still are', () => {
    const out = textSink();
    const board = progressBoard(out.stream);
    board.update('map', { done: 1, total: 4, detail: '' });
    board.log('a retry');
    board.done();
    expect(out.text()).toBe('a retry\n');
  });

  test('a bar is as full as the share of tasks done', () => {
    expect(renderLine('s', { done: 1, total: 4, detail: 'x' })).toBe('s [#####...............] 1/4 tasks  x');
  });
});
