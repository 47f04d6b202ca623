/**
 * The example runner's job 1 (examples/job-runner), what it claims beyond its
 * answer: the check that verifies it can fail (a missing customer, a wrong
 * count or sum, a customer out of two partitions, an extra one); the partial
 * aggregate in the map tasks writes one row per customer a task saw, far fewer
 * than the orders on skewed ids; the demo prints the bytes shuffled and the
 * spills; and the map tasks may write with the sort writer (`--writer sort`),
 * the reducers reading its outputs alike.
 */
import { readdir } from 'node:fs/promises';
import { describe, expect, test } from 'vitest';
import { MapTaskPool, ShuffleReader } from 'columnar-shuffle';
import { column, CustomerTotals, forEachNumber } from '../examples/job-runner/columns.js';
import { runJob } from '../examples/job-runner/dag.js';
import { generatedOrders } from '../examples/job-runner/data.js';
import { checkOrdersPerCustomer, ordersPerCustomerJob, ordersPerCustomerReference, type CustomerAnswer } from '../examples/job-runner/jobs.js';
import { main } from '../examples/job-runner/main.js';
import { useMapTaskFixture } from './support/map-task-fixture.js';
import { textSink } from './support/text-sink.js';

const SHAPE = { maps: 4, partitions: 4 };

let dir: string;
/** one pool for the jobs of this file: a thread takes seconds to start from the sources */
let pool: MapTaskPool;
useMapTaskFixture({ threads: 2, dirPrefix: 'cs-job-agg-' }, (fixture) => ({ dir, pool } = fixture));


/** An answer equal to the reference, then changed by `edit`. */
function answerFrom(reference: CustomerTotals, edit: (totals: CustomerTotals, answer: CustomerAnswer) => void = () => undefined, skip?: number): CustomerAnswer {
  const totals = new CustomerTotals();
  for (let slot = 0; slot < reference.size; slot++) {
    if (reference.ids[slot] !== skip) totals.add(reference.ids[slot]!, reference.orders[slot]!, reference.spent[slot]!);
  }
  const answer: CustomerAnswer = { totals, duplicates: 0, largestPartition: 0 };
  edit(totals, answer);
  return answer;
}

/** Distinct customer ids in map task `task`'s orders. */
function customersOf(source: ReturnType<typeof generatedOrders>, task: number, tasks: number): number {
  const ids = new Set<number>();
  for (const batch of source.split(task, tasks)) forEachNumber(column(batch, 'customer_id'), (_, id) => ids.add(id));
  return ids.size;
}

describe('the check of job 1', () => {
  const source = generatedOrders(5_000, 200, 13);
  const reference = ordersPerCustomerReference(source, 2);
  const someone = reference.ids[7]!;
  const problems = (answer: CustomerAnswer) => checkOrdersPerCustomer(answer, reference);

  test('an answer equal to the reference passes, and sums that differ only in rounding (relative 1e-9) too', () => {
    expect(problems(answerFrom(reference))).toEqual([]);
    expect(problems(answerFrom(reference, (t) => t.add(someone, 0, t.get(someone)!.spent * 1e-12)))).toEqual([]);
  });

  test('a missing customer is reported, by id', () => {
    const found = problems(answerFrom(reference, undefined, someone));
    expect(found).toContain(`${reference.size - 1} customers in the answer, ${reference.size} in the reference`);
    expect(found.join('\n')).toContain(`1 customers have the wrong totals (customer ${someone}: missing`);
  });

  test('a wrong order count and a wrong sum are reported, with the expected values', () => {
    const expected = reference.get(someone)!;
    expect(problems(answerFrom(reference, (t) => t.add(someone, 1, 0)))).toEqual([
      `1 customers have the wrong totals (customer ${someone}: ${expected.orders + 1} orders, ${expected.spent.toFixed(2)} spent, expected ${expected.orders} orders, ${expected.spent.toFixed(2)} spent)`,
    ]);
    expect(problems(answerFrom(reference, (t) => t.add(someone, 0, 0.01)))).toHaveLength(1);
  });

  test('a customer that came out of two reduce partitions, and a customer the orders do not have, are reported', () => {
    expect(problems(answerFrom(reference, (_, a) => (a.duplicates = 1)))).toEqual(['1 customers came out of more than one reduce partition']);
    expect(problems(answerFrom(reference, (t) => t.add(1_000_000, 1, 5)))).toEqual([`${reference.size + 1} customers in the answer, ${reference.size} in the reference`]);
  });
});

describe('job 1 on skewed orders', () => {
  test('the partial aggregate writes one row per customer each map task saw: far fewer rows than orders; the bytes shuffled are the outputs read', async () => {
    const source = generatedOrders(80_000, 2_000, 21);
    const reference = ordersPerCustomerReference(source, SHAPE.maps);
    expect(reference.get(0)!.orders / source.rows, 'skewed: customer 0 alone places several percent of the orders').toBeGreaterThan(0.03);
    const result = await runJob(ordersPerCustomerJob(source, SHAPE), { dir, threads: 2, pool });
    expect(checkOrdersPerCustomer(result.value, reference)).toEqual([]);
    const map = result.stages.find((s) => s.kind === 'map')!;
    const perTask = Array.from({ length: SHAPE.maps }, (_, task) => customersOf(source, task, SHAPE.maps));
    expect(map.rowsIn).toBe(80_000);
    expect(map.rowsOut).toBe(perTask.reduce((a, b) => a + b, 0));
    expect(map.rowsOut).toBeLessThan(map.rowsIn / 5);
    const statuses = result.statuses.get(0)!;
    expect(map.bytesShuffled).toBe(statuses.reduce((sum, s) => sum + s.metrics.bytesWritten, 0));
    expect(map.bytesShuffled).toBeGreaterThan(0);
    expect(result.stages.find((s) => s.kind === 'reduce')!.rowsIn, 'the reducers read what the map tasks wrote').toBe(map.rowsOut);
  });

  test('the map tasks write with the sort writer when asked, and the answer is the same', async () => {
    const source = generatedOrders(40_000, 1_000, 22);
    const result = await runJob(ordersPerCustomerJob(source, SHAPE), { dir, threads: 2, pool, writer: 'sort', keepFiles: true });
    expect(checkOrdersPerCustomer(result.value, ordersPerCustomerReference(source, SHAPE.maps))).toEqual([]);
    for (const status of result.statuses.get(0)!) {
      const reader = await ShuffleReader.open(status.location.prefix);
      try {
        for (let p = 0; p < status.numPartitions; p++) {
          if (status.partitionLengths[p] === 0) continue;
          expect(Buffer.from((await reader.partitionBytes(p)).subarray(0, 4)).toString('latin1'), `map ${status.id.mapId} partition ${p}`).toBe('CSRW');
        }
      } finally {
        await reader.close();
      }
    }
  });
});

describe('the demo', () => {
  test('prints the rows in and written, the bytes shuffled and the spills (with their bytes) of the map stage', async () => {
    // 50,000 customers: the partial aggregates (about 430 KiB) outgrow a 256 KiB share, so the writers spill
    const stdout = textSink();
    const stderr = textSink();
    const code = await main(['--orders', '60000', '--customers', '50000', '--maps', '2', '--partitions', '4', '--threads', '2', '--memory', '512KiB', '--dir', dir], {
      stdout: stdout.stream,
      stderr: stderr.stream,
    });
    const text = stdout.text();
    expect(stderr.text()).toBe('');
    expect(code).toBe(0);
    expect(text).toContain('map memory 512.0 KiB (256.0 KiB per thread), hash writer');
    const line = /stage {5}map \(partial aggregate\): 2 tasks, 2 attempts, .*\n {14}([\d,]+) rows in, ([\d,]+) rows written, ([\d.]+) (B|KiB|MiB) shuffled, (\d+) spills \(([\d.]+) (B|KiB|MiB)\)/.exec(text);
    expect(line, text).not.toBeNull();
    const [, rowsIn, rowsOut, shuffled, , spills, spilled] = line!;
    expect(rowsIn).toBe('60,000');
    expect(Number(rowsOut!.replace(/,/g, ''))).toBeLessThan(60_000);
    expect(Number(shuffled)).toBeGreaterThan(0);
    expect(Number(spills)).toBeGreaterThan(0);
    expect(Number(spilled)).toBeGreaterThan(0);
    expect(text).toMatch(/stage {5}reduce \(final aggregate\): 4 tasks, 4 attempts, .*\n {14}[\d,]+ rows read from 8 map outputs/);
    expect(text).toContain('check     verified');
    expect(await readdir(dir), 'the job removes its files').toEqual([]);
  });

  test('--writer takes hash or sort, nothing else', async () => {
    const stderr = textSink();
    expect(await main(['--writer', 'radix'], { stdout: textSink().stream, stderr: stderr.stream })).toBe(2);
    expect(stderr.text()).toContain('--writer must be hash or sort, got radix');
  });
});
