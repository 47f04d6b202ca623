/**
 * The example runner (examples/job-runner), what sweep 42 found no test
 * holding it to: the checks report every kind of difference they claim to
 * (unmatched orders, the join's fingerprint and per-country counts, a missing
 * last order, a customer out of place, a null taken for NaN, sums off by more
 * than a relative 1e-9 but not sums near 0); the references leave out null
 * customer ids and sort ties by customer id; null amounts count as 0 in every
 * job; the runner retries a task up to 4 attempts by default, logs each retry
 * and counts it in the progress detail, runs at most `threads` reduce tasks at
 * once, never retries once stopped, refuses to run under a signal already
 * aborted, removes its abort listener, ends its progress board, counts every
 * map stage's removed files and sums every map task's metrics; the injected
 * faults do what the README says (after the first batch; a zombie commits half
 * its rows); and the command line's options and exit codes are the ones its
 * usage gives.
 */
import { getEventListeners } from 'node:events';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, test } from 'vitest';
import { Float64, Int32, Table, vectorFromArray, type Vector } from 'apache-arrow';
import { MapTaskPool, rangeBoundsOf, ShuffleReader } from 'columnar-shuffle';
import { CustomerTotals } from '../examples/job-runner/columns.js';
import { runJob, type Fault, type Job } from '../examples/job-runner/dag.js';
import { generatedOrders, orderColumns, ordersFromFile } from '../examples/job-runner/data.js';
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
  sortReference,
  type CustomerAnswer,
  type JoinSummary,
  type SortAnswer,
} from '../examples/job-runner/jobs.js';
import { main } from '../examples/job-runner/main.js';
import { progressBoard, renderLine, type ProgressBoard, type StageProgress } from '../examples/job-runner/progress.js';
import { writeArrowFile } from './support/arrow-file.js';
import { useMapTaskFixture } from './support/map-task-fixture.js';
import { textSink } from './support/text-sink.js';

const NEEDS = orderColumns(true);
const MAP_STAGE = 'map (partial aggregate)';

let dir: string;
/** one pool for the jobs of this file: a thread takes seconds to start from the sources */
let pool: MapTaskPool;
useMapTaskFixture({ threads: 2, dirPrefix: 'cs-job-contract-' }, (fixture) => ({ dir, pool } = fixture));

const arrowFile = (name: string, columns: Record<string, Vector>) => writeArrowFile(join(dir, name), columns);

async function run(argv: string[], signal?: AbortSignal): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = textSink();
  const stderr = textSink();
  const code = await main(argv, { stdout: stdout.stream, stderr: stderr.stream, ...(signal === undefined ? {} : { signal }) });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** A progress board that keeps what it is given. */
function recordingBoard(): ProgressBoard & { updates: [string, StageProgress][]; logs: string[]; dones: number } {
  const board = {
    updates: [] as [string, StageProgress][],
    logs: [] as string[],
    dones: 0,
    update: (stage: string, p: StageProgress) => void board.updates.push([stage, { ...p }]),
    log: (line: string) => void board.logs.push(line),
    done: () => void board.dones++,
  };
  return board;
}

/** A job of no map stage whose reduce tasks run `run` (no thread is involved). */
function reduceOnlyJob(tasks: number, runTask: (partition: number, attempt: number) => Promise<number>): Job<number, number[]> {
  return {
    name: 'reduce only',
    maps: [],
    reduce: { kind: 'reduce', name: 'reduce', reads: [], tasks, run: ({ partition, attempt }) => runTask(partition, attempt), combine: (results) => results },
  };
}

const joinSummary = (joined: number, unmatched: number, fingerprint: number, countries: [string, number, number][]): JoinSummary => ({
  joined,
  unmatched,
  fingerprint,
  countries: new Map(countries.map(([name, orders, amount]) => [name, { orders, amount }])),
});

const sortAnswer = (amounts: number[], customers: number[], nulls = amounts.map(() => 0)): SortAnswer => ({
  amounts: Float64Array.from(amounts),
  nulls: Uint8Array.from(nulls),
  customers: Float64Array.from(customers),
  partitionRows: [amounts.length],
});

describe('the checks report every difference they claim to', () => {
  const reference = joinSummary(10, 2, 12345, [
    ['DE', 6, 60],
    ['FR', 4, 40],
  ]);

  test('the join check reports a different count of unmatched orders, a different fingerprint and a country with another count of orders', () => {
    expect(checkJoin(joinSummary(10, 2, 12345, [['DE', 6, 60], ['FR', 4, 40]]), reference)).toEqual([]);
    expect(checkJoin(joinSummary(10, 3, 12345, [['DE', 6, 60], ['FR', 4, 40]]), reference)).toEqual(['3 unmatched orders, the reference has 2']);
    expect(checkJoin(joinSummary(10, 2, 54321, [['DE', 6, 60], ['FR', 4, 40]]), reference)).toEqual(['the joined rows differ from the reference (fingerprint)']);
    expect(checkJoin(joinSummary(10, 2, 12345, [['DE', 7, 60], ['FR', 3, 40]]), reference)).toEqual([
      'country DE: {"orders":7,"amount":60}, expected {"orders":6,"amount":60}',
      'country FR: {"orders":3,"amount":40}, expected {"orders":4,"amount":40}',
    ]);
  });

  test('the sort check reports an answer missing its last order, a customer out of place, and a null amount taken for NaN', () => {
    const reference = sortAnswer([Number.NaN, 9, 5, 5], [1, 2, 3, 4]);
    expect(checkSort(sortAnswer([Number.NaN, 9, 5, 5], [1, 2, 3, 4]), reference)).toEqual([]);
    expect(checkSort(sortAnswer([Number.NaN, 9, 5], [1, 2, 3]), reference)).toEqual(['3 orders in the answer, 4 in the reference']);
    expect(checkSort(sortAnswer([Number.NaN, 9, 5, 5], [1, 2, 4, 3]), reference)).toEqual([
      'order 2 of the sorted output is (amount 5, customer 4), the reference has (amount 5, customer 3)',
    ]);
    // a null amount is NaN in `amounts`, and only its `nulls` entry tells it from a NaN amount
    expect(checkSort(sortAnswer([Number.NaN, 9, 5, 5], [1, 2, 3, 4], [1, 0, 0, 0]), reference)).toEqual([
      'order 0 of the sorted output is (amount null, customer 1), the reference has (amount NaN, customer 1)',
    ]);
  });

  test('job 1\'s check takes sums equal within a relative 1e-9, or an absolute 1e-9 near 0, and no further', () => {
    const totals = (spent: number) => {
      const t = new CustomerTotals();
      t.add(7, 3, spent);
      return t;
    };
    const answer = (spent: number): CustomerAnswer => ({ totals: totals(spent), duplicates: 0, largestPartition: 1 });
    expect(checkOrdersPerCustomer(answer(1000 * (1 + 1e-10)), totals(1000))).toEqual([]);
    expect(checkOrdersPerCustomer(answer(1000 * (1 + 1e-6)), totals(1000))).toHaveLength(1);
    expect(checkOrdersPerCustomer(answer(1e-12), totals(0)), 'near 0 the tolerance is absolute').toEqual([]);
    expect(checkOrdersPerCustomer(answer(1e-6), totals(0))).toHaveLength(1);
  });
});

describe('the references and the jobs on the orders', () => {
  test('rows with a null customer_id are left out of job 1\'s and the join\'s references; null amounts count as 0', async () => {
    const path = await arrowFile('nulls.arrow', {
      order_id: vectorFromArray([0, 1, 2, 3, 4, 5], new Int32()),
      customer_id: vectorFromArray([0, null, 1, 0, null, 1], new Int32()),
      amount: vectorFromArray([1.5, 100, null, 2.5, 100, 4], new Float64()),
    });
    const source = await ordersFromFile(path, NEEDS);
    const totals = ordersPerCustomerReference(source, 2);
    expect(totals.size).toBe(2);
    expect([totals.get(0), totals.get(1)]).toEqual([
      { orders: 2, spent: 4 },
      { orders: 2, spent: 4 },
    ]);
    const join = joinReference(source, 2, 2);
    expect([join.joined, join.unmatched]).toEqual([4, 0]);
    expect([...join.countries.values()].reduce((sum, c) => sum + c.amount, 0)).toBe(8);
  });

  test('job 1 and the join on orders with null amounts are verified, a null amount counting as 0', async () => {
    const rows = 3_000;
    const path = await arrowFile('null-amounts.arrow', {
      order_id: vectorFromArray(Array.from({ length: rows }, (_, i) => i), new Int32()),
      customer_id: vectorFromArray(Array.from({ length: rows }, (_, i) => i % 40), new Int32()),
      amount: vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 3 === 0 ? null : i % 100)), new Float64()),
    });
    const source = await ordersFromFile(path, NEEDS);
    const shape = { maps: 2, partitions: 3 };
    const totals = await runJob(ordersPerCustomerJob(source, shape), { dir, threads: 2, pool });
    expect(checkOrdersPerCustomer(totals.value, ordersPerCustomerReference(source, shape.maps))).toEqual([]);
    expect(Number.isFinite(totals.value.totals.get(0)!.spent)).toBe(true);
    const joined = await runJob(joinJob(source, source.customerIds, { ...shape, customerMaps: 1 }), { dir, threads: 2, pool });
    expect(checkJoin(joined.value, joinReference(source, source.customerIds, shape.maps))).toEqual([]);
  });

  test('the sort breaks ties of amount by customer id, whatever order the orders come in', async () => {
    const path = await arrowFile('ties.arrow', {
      customer_id: vectorFromArray([5, 3, 9, 1, 7], new Int32()),
      amount: vectorFromArray([2, 2, 8, 2, 8], new Float64()),
    });
    const sorted = sortReference(await ordersFromFile(path, NEEDS.slice(1)), 1);
    expect([...sorted.amounts]).toEqual([8, 8, 2, 2, 2]);
    expect([...sorted.customers]).toEqual([7, 9, 1, 3, 5]);
  });

  test('the sort\'s bounds come from every 97th order\'s amount; orders without a row give no bounds', async () => {
    const source = generatedOrders(5_000, 100, 3);
    const shape = { maps: 2, partitions: 4 };
    const sample: number[] = [];
    for (let task = 0; task < shape.maps; task++) {
      for (const batch of source.split(task, shape.maps)) {
        const amounts = batch.getChild('amount')!;
        for (let i = 0; i < batch.numRows; i += SAMPLE_EVERY) sample.push(amounts.get(i) as number);
      }
    }
    const expected = rangeBoundsOf(new Table({ amount: vectorFromArray(sample, new Float64()) }), [{ column: 'amount', descending: true }], shape.partitions);
    expect([...sortBounds(source, shape).getChild('amount')!]).toEqual([...expected.getChild('amount')!]);
    const empty = await ordersFromFile(await arrowFile('empty.arrow', { customer_id: vectorFromArray([], new Int32()), amount: vectorFromArray([], new Float64()) }), NEEDS.slice(1));
    expect(sortBounds(empty, shape).numRows).toBe(0);
  });

  test('job 1\'s answer names its largest partition, in customers', () => {
    const job = ordersPerCustomerJob(generatedOrders(10, 10), { maps: 1, partitions: 3 });
    const part = (partition: number, ids: number[]) => ({ partition, ids: Float64Array.from(ids), orders: Float64Array.from(ids, () => 1), spent: Float64Array.from(ids, () => 1) });
    const answer = job.reduce.combine([part(0, [1, 2]), part(1, [3, 4, 5, 6]), part(2, [7])]);
    expect(answer.largestPartition).toBe(4);
    expect(answer.duplicates).toBe(0);
  });
});

describe('the runner', () => {
  test('a task is retried up to 4 attempts by default, each attempt of a fault throwing after its first batch', async () => {
    const orders = generatedOrders(40_000, 500, 4); // 20,000 orders per map task: 3 batches each
    const faults: Fault[] = [0, 1, 2].map((attempt) => ({ stage: 'map orders', task: 0, attempt, kind: 'throw' }));
    const result = await runJob(joinJob(orders, 500, { maps: 2, partitions: 2, customerMaps: 1 }), { dir, threads: 2, pool, faults });
    expect(checkJoin(result.value, joinReference(orders, 500, 2))).toEqual([]);
    expect(result.statuses.get(0)!.map((s) => s.id.attempt)).toEqual([3, 0]);
    const failures = result.stages.find((s) => s.name === 'map orders')!.failures;
    expect(failures).toHaveLength(3);
    for (const failure of failures) expect(failure).toContain('injected fault: the map task throws after writing 1 of its batches');
  });

  test('each retry is logged on the progress board and counted in its stage\'s detail; the board is ended once', async () => {
    const source = generatedOrders(20_000, 300, 5);
    const board = recordingBoard();
    const faults: Fault[] = [1, 2].map((task) => ({ stage: MAP_STAGE, task, attempt: 0, kind: 'throw' }));
    await runJob(ordersPerCustomerJob(source, { maps: 4, partitions: 2 }), { dir, threads: 2, pool, faults, progress: board });
    expect(board.logs.sort()).toEqual([1, 2].map((task) => expect.stringMatching(new RegExp(`^map \\(partial aggregate\\) task ${task} attempt 0 failed \\(CS_MAP_TASK_FAILED: .*injected fault.*\\); retrying as attempt 1$`))));
    const details = board.updates.filter(([stage]) => stage === MAP_STAGE).map(([, p]) => p.detail);
    expect(details.some((d) => d.endsWith('  1 retry'))).toBe(true);
    expect(details.at(-1)).toBe('20,000 rows in  2 retries');
    const done = board.updates.filter(([stage]) => stage === MAP_STAGE).map(([, p]) => p.done);
    expect(done.at(-1), 'the last update counts every task done').toBe(4);
    expect(new Set(done), 'done counts up one task at a time').toEqual(new Set([0, 1, 2, 3, 4]));
    expect(board.dones).toBe(1);
  });

  test('a job whose signal is already aborted is stopped, its board ended, nothing left', async () => {
    const board = recordingBoard();
    const stop = new AbortController();
    stop.abort();
    const job = runJob(ordersPerCustomerJob(generatedOrders(5_000, 100, 6), { maps: 2, partitions: 2 }), { dir, threads: 2, pool, signal: stop.signal, progress: board });
    await expect(job).rejects.toMatchObject({ code: 'CS_ABORTED' });
    expect(board.dones).toBe(1);
    expect(await readdir(dir)).toEqual([]);
  });

  test('a task that fails once the job is stopped is not retried', async () => {
    const stop = new AbortController();
    let runs = 0;
    const job = runJob(
      reduceOnlyJob(1, async () => {
        runs++;
        stop.abort();
        throw new Error('stopped');
      }),
      { dir, threads: 1, pool, signal: stop.signal },
    );
    await expect(job).rejects.toThrow('stopped');
    expect(runs).toBe(1);
  });

  test('at most `threads` reduce tasks run at once, and the job removes its listener from the signal', async () => {
    const stop = new AbortController();
    let running = 0;
    let most = 0;
    const result = await runJob(
      reduceOnlyJob(6, async (partition) => {
        most = Math.max(most, ++running);
        await Promise.resolve();
        await Promise.resolve();
        running--;
        return partition * 10;
      }),
      { dir, threads: 2, pool, signal: stop.signal },
    );
    expect(result.value).toEqual([0, 10, 20, 30, 40, 50]);
    expect(most).toBe(2);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  });

  test('the stage report sums every map task\'s moved and copied bytes, spills and spilled bytes', async () => {
    // 50,000 customers: the partial aggregates outgrow a 256 KiB share, so both writers spill
    const result = await runJob(ordersPerCustomerJob(generatedOrders(60_000, 50_000, 7), { maps: 2, partitions: 4 }), { dir, threads: 2, memoryBytes: 512 * 1024 });
    const map = result.stages.find((s) => s.kind === 'map')!;
    const statuses = result.statuses.get(0)!;
    const sum = (f: (s: (typeof statuses)[number]) => number | undefined) => statuses.reduce((n, s) => n + (f(s) ?? 0), 0);
    expect(statuses.every((s) => s.metrics.spills > 0 && (s.metrics.transferredBytes ?? 0) > 0)).toBe(true);
    expect([map.spills, map.spilledBytes, map.transferredBytes]).toEqual([sum((s) => s.metrics.spills), sum((s) => s.metrics.spilledBytes), sum((s) => s.metrics.transferredBytes)]);
    const rows = 6_000;
    const path = await arrowFile('copied.arrow', {
      customer_id: vectorFromArray(Array.from({ length: rows }, (_, i) => i % 70), new Int32()),
      amount: vectorFromArray(Array.from({ length: rows }, (_, i) => i), new Float64()),
    });
    const copied = await runJob(ordersPerCustomerJob(await ordersFromFile(path, NEEDS.slice(1)), { maps: 3, partitions: 2 }), { dir, threads: 2, pool });
    const copiedMap = copied.stages.find((s) => s.kind === 'map')!;
    expect(copiedMap.copiedBytes).toBe(copied.statuses.get(0)!.reduce((n, s) => n + (s.metrics.copiedBytes ?? 0), 0));
    expect(copied.statuses.get(0)!.every((s) => (s.metrics.copiedBytes ?? 0) > 0)).toBe(true);
  });

  test('a job stopped while its reducers read is stopped: its readers are aborted, not read to the end', async () => {
    const stop = new AbortController();
    const job = runJob(ordersPerCustomerJob(generatedOrders(10_000, 300, 9), { maps: 2, partitions: 2 }), {
      dir,
      threads: 2,
      pool,
      signal: stop.signal,
      onStage: ({ stage, phase }) => {
        if (stage.startsWith('reduce') && phase === 'start') stop.abort();
      },
    });
    await expect(job).rejects.toMatchObject({ code: 'CS_ABORTED' });
    expect(await readdir(dir)).toEqual([]);
  });

  test('a failed job ends every map task it started before it rejects (a pool of the caller\'s is not closed to wait for them)', async () => {
    const started: Promise<unknown>[] = [];
    let settled = 0;
    const watched = {
      run: (...args: Parameters<MapTaskPool['run']>) => {
        const task = pool.run(...args);
        started.push(task.status);
        void task.status.then(
          () => settled++,
          () => settled++,
        );
        return task;
      },
    } as unknown as MapTaskPool;
    // task 1 fails for good after its first batch, task 0 has 200,000 orders still to write
    const source = generatedOrders(400_000, 50_000, 10);
    const job = runJob(ordersPerCustomerJob(source, { maps: 2, partitions: 4 }), { dir, threads: 2, pool: watched, maxAttempts: 1, faults: [{ stage: MAP_STAGE, task: 1, attempt: 0, kind: 'throw' }] });
    await expect(job).rejects.toMatchObject({ code: 'CS_MAP_TASK_FAILED' });
    expect(settled, 'tasks still running when the job rejected').toBe(started.length);
    expect(await readdir(dir)).toEqual([]);
  });

  test('reducers read their partition coalesced into batches of up to 8192 rows by default: a small partition from two map outputs comes as one batch', async () => {
    const job = ordersPerCustomerJob(generatedOrders(10_000, 2_000, 11), { maps: 2, partitions: 2 });
    const batches: number[][] = [[], []];
    const run = job.reduce.run;
    job.reduce.run = async (context) =>
      run({
        ...context,
        read: async function* (shuffleId) {
          for await (const batch of context.read(shuffleId)) {
            batches[context.partition]!.push(batch.numRows);
            yield batch;
          }
        },
      });
    const result = await runJob(job, { dir, threads: 2, pool });
    const reduce = result.stages.find((s) => s.kind === 'reduce')!;
    expect(reduce.outputsRead).toBe(4);
    expect(reduce.rowsIn).toBeLessThan(8192);
    expect(batches.map((b) => b.length)).toEqual([1, 1]);
  });

  test('a zombie attempt commits an output with half of its rows, which the job keeps with keepFiles but never reads', async () => {
    const source = generatedOrders(10_000, 600, 8);
    const result = await runJob(ordersPerCustomerJob(source, { maps: 2, partitions: 2 }), {
      dir,
      threads: 2,
      pool,
      keepFiles: true,
      faults: [{ stage: MAP_STAGE, task: 1, attempt: 0, kind: 'zombie' }],
    });
    const accepted = result.statuses.get(0)!.find((s) => s.id.mapId === 1)!;
    expect(accepted.id.attempt).toBe(1);
    const reader = await ShuffleReader.open(join(dir, 'shuffle_0_1_0'));
    let rows = 0;
    try {
      for (let p = 0; p < reader.numPartitions; p++) for await (const batch of reader.readPartition(p)) rows += batch.numRows;
    } finally {
      await reader.close();
    }
    expect(rows).toBe(accepted.metrics.rows >> 1);
  });
});

describe('the command line', () => {
  test('its options are checked before anything runs: --job, --maps, the fault tasks, --memory per thread, integers', async () => {
    const refused = async (argv: string[], message: string) => {
      const { code, stderr } = await run([...argv, '--help']);
      expect(code, argv.join(' ')).toBe(2);
      expect(stderr).toContain(`job-runner: ${message}`);
    };
    await refused(['--job', 'wordcount'], '--job must be orders, join or sort, got wordcount');
    await refused(['--maps', '0'], '--maps must be an integer >= 1, got 0');
    for (const fault of ['fail-map', 'kill-map', 'zombie-map']) await refused([`--${fault}`, '8'], `--${fault} 8: there are only 8 map tasks`);
    await refused(['--orders', '1e300'], '--orders must be an integer >= 1, got 1e300');
    const accepted = await run(['--memory', '2', '--threads', '2', '--orders', '1_000', '--fail-map', '7', '--help']);
    expect(accepted.code, accepted.stderr).toBe(0);
  });

  test('--dir that is not a directory is a usage error', async () => {
    const missing = join(dir, 'missing');
    const { code, stderr } = await run(['--orders', '100', '--dir', missing]);
    expect(code).toBe(2);
    expect(stderr).toBe(`job-runner: --dir ${missing} is not a directory\n`);
  });

  test('the plan gives --memory in binary units, split over the threads', async () => {
    const stop = new AbortController();
    let printed = '';
    const stdout = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        printed += chunk.toString();
        if (printed.includes('  plan ')) stop.abort(); // stopped before the job starts
        callback();
      },
    });
    const code = await main(['--memory', '1GiB', '--threads', '2', '--dir', dir], { stdout, stderr: textSink().stream, signal: stop.signal });
    expect(code).toBe(130);
    expect(printed).toContain('map memory 1.00 GiB (512.0 MiB per thread), hash writer');
  });

  test('run without a signal of its own, main leaves no signal handler behind', async () => {
    const before = ['SIGINT', 'SIGTERM', 'SIGHUP'].map((s) => process.listenerCount(s));
    const stdout = textSink();
    expect(await main(['--help'], { stdout: stdout.stream, stderr: textSink().stream })).toBe(0);
    expect(['SIGINT', 'SIGTERM', 'SIGHUP'].map((s) => process.listenerCount(s))).toEqual(before);
  });

  test('--fail-map, --kill-map and --zombie-map of the join hit the orders\' map tasks, each retried once; the generated join drops every 100th order; every file is counted removed', async () => {
    const { code, stdout, stderr } = await run(['--job', 'join', '--orders', '3000', '--customers', '100', '--maps', '3', '--partitions', '2', '--threads', '2', '--fail-map', '0', '--kill-map', '1', '--zombie-map', '2', '--dir', dir]);
    expect(code, stderr).toBe(0);
    expect(stdout).toContain('check     verified');
    expect(stdout).toContain('  retries   3\n');
    expect(stdout).toMatch(/- map orders task 0 attempt 0 failed \(CS_MAP_TASK_FAILED: .*injected fault: the map task throws/);
    expect(stdout).toMatch(/- map orders task 1 attempt 0 failed \(CS_WORKER_EXITED/);
    expect(stdout).toMatch(/- map orders task 2 attempt 0 failed \(CS_MAP_TASK_FAILED: injected fault: the attempt committed but its status was lost/);
    expect(stdout).toContain('2,970 joined rows');
    expect(stdout).toContain('30 orders without a customer dropped');
    // 3 order outputs, the zombie's, 2 customer outputs: 3 files each
    expect(stdout).toContain('  cleanup   18 shuffle files removed\n');
    expect(await readdir(dir)).toEqual([]);
  });

  test('an answer that differs from the single-threaded one is exit 1, check FAILED with the difference', async () => {
    // the reference adds 1 + 1e17 - 1e17 in file order and loses the 1; the map tasks add (1) and (1e17 - 1e17)
    const path = await arrowFile('cancelling.arrow', {
      customer_id: vectorFromArray([0, 0, 0], new Int32()),
      amount: vectorFromArray([1, 1e17, -1e17], new Float64()),
    });
    const { code, stdout } = await run(['--input', path, '--maps', '2', '--partitions', '1', '--threads', '1', '--dir', dir]);
    expect(stdout).toContain('  check     FAILED: the answer differs from the single-threaded computation\n');
    expect(stdout).toContain('- 1 customers have the wrong totals (customer 0: 3 orders, 1.00 spent, expected 3 orders, 0.00 spent)');
    expect(code).toBe(1);
  });

  test('a run without retries says none', async () => {
    const { code, stdout } = await run(['--orders', '2000', '--maps', '2', '--partitions', '2', '--threads', '1', '--dir', dir]);
    expect(code).toBe(0);
    expect(stdout).toContain('  retries   none\n');
  });

  test('a job that fails is exit 1 with its typed error, after --max-attempts attempts, leaving nothing', async () => {
    const { code, stdout, stderr } = await run(['--orders', '2000', '--maps', '2', '--partitions', '2', '--threads', '1', '--fail-map', '0', '--max-attempts', '1', '--dir', dir]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/^job-runner: error CS_MAP_TASK_FAILED: .*injected fault: the map task throws/m);
    expect(stdout).not.toContain('check');
    expect(await readdir(dir)).toEqual([]);
  });
});

describe('progress bars', () => {
  const tty = (columns = 200) => {
    const out = textSink();
    return { out, stream: Object.assign(out.stream, { isTTY: true, columns }) };
  };

  test('a stage\'s first update and the update that completes it are drawn at once; others once 100 ms have passed since the last drawing', () => {
    const { out, stream } = tty();
    let now = 0;
    const board = progressBoard(stream, () => now);
    board.update('map', { done: 0, total: 2, detail: 'a' });
    board.update('reduce', { done: 0, total: 2, detail: 'b' });
    expect(out.text()).toContain('reduce [....................] 0/2 tasks  b');
    now = 50;
    board.update('map', { done: 1, total: 2, detail: 'c' });
    expect(out.text()).not.toContain('tasks  c');
    board.update('map', { done: 2, total: 2, detail: 'd' });
    expect(out.text()).toContain('map    [####################] 2/2 tasks  d');
    board.update('reduce', { done: 1, total: 2, detail: 'e' });
    expect(out.text()).not.toContain('tasks  e');
    now = 150;
    board.update('reduce', { done: 1, total: 2, detail: 'f' });
    expect(out.text()).toContain('reduce [##########..........] 1/2 tasks  f');
  });

  test('lines are cut to one column less than the terminal\'s width', () => {
    const { out, stream } = tty(30);
    progressBoard(stream, () => 0).update('map', { done: 1, total: 4, detail: 'x'.repeat(50) });
    expect(out.text()).toBe(`${renderLine('map', { done: 1, total: 4, detail: 'x'.repeat(50) }).slice(0, 29)}\n`);
  });

  test('a bar is full, not broken, when more tasks are done than it counts', () => {
    expect(renderLine('s', { done: 5, total: 4, detail: '' })).toBe('s [####################] 5/4 tasks  ');
  });
});
