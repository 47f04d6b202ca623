/**
 * MapTaskPool (src/shuffle/map-task-pool.ts), a second mutation pass: edges that
 * test/worker-protocol-contract.test.ts and test/map-task-transfer-contract.test.ts
 * leave open. Each test here fails against a mutant of the pool that the other
 * tests let through (docs/RELIABILITY.md, "The tests notice a broken line:
 * mutation sweeps"). Expected values come from README.md ("Workers and memory",
 * "Failures") and the doc comments of MapTaskPoolOptions, MapTask and close(),
 * never from the code under test. Nothing here measures time: where a test
 * waits, it waits for an event.
 */
import { existsSync, readdirSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { describe, expect, test } from 'vitest';
import type { RecordBatch } from 'apache-arrow';
import { narrowBatch } from '../src/cli/demo-data.js';
import { MapTaskPool, type MapTaskSpec } from '../src/shuffle/map-task-pool.js';
import { deferred } from './support/deferred.js';
import { narrowTaskSpec, readBackRows, useMapTaskFixture } from './support/map-task-fixture.js';
import { rowsOf } from './support/rows.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const TRANSFORMS = new URL('./support/map-transforms.ts', import.meta.url);
const PARTITIONS = 3;
const moduleOf = (source: string) => `data:text/javascript,${encodeURIComponent(source)}`;

let dir: string;
let pool: MapTaskPool;

const spec = (mapId: number, extra: Partial<MapTaskSpec> = {}): MapTaskSpec => narrowTaskSpec(dir, mapId, PARTITIONS, extra);
const inputOf = (count: number, rows: number, seed: number) => Array.from({ length: count }, (_, i) => narrowBatch(rows, seed * 100 + i + 1));
const rowsIn = (batches: RecordBatch[]) => batches.flatMap((b) => rowsOf(b)).sort();
const files = async () => (await readdir(dir)).sort();
const stallAfter = (batches: number) => ({ transform: { module: TRANSFORMS, export: 'stallAfter', args: { batches } } });

/** Whether `promise` has settled, as seen by a handler attached now. */
function settledFlag(promise: Promise<unknown>): () => boolean {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return () => settled;
}

useMapTaskFixture({ threads: 1, dirPrefix: 'cs-mtp2-' }, (fixture) => ({ dir, pool } = fixture));

describe('the options (MapTaskPoolOptions: "threads: an integer >= 1")', () => {
  test('threads 0 and threads 1.5 are CS_INVALID_ARGUMENT', () => {
    for (const threads of [0, 1.5, -1]) {
      expect(() => new MapTaskPool({ threads }), `threads ${threads}`).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
    }
  });

  test('resourceLimits reach the worker thread', { timeout: 30_000 }, async () => {
    // the transform reports the limits its thread runs under, as its error's message
    const REPORT = moduleOf(`import { resourceLimits } from 'node:worker_threads';
      export async function* report(input) { for await (const b of input) void b; throw new Error(JSON.stringify(resourceLimits)); }`);
    const limited = new MapTaskPool({ threads: 1, resourceLimits: { maxOldGenerationSizeMb: 384 } });
    try {
      const error = (await limited.run(spec(1, { transform: { module: REPORT, export: 'report' } }), inputOf(1, 10, 1)).status.catch((e: unknown) => e)) as Error;
      expect(error).toMatchObject({ code: 'CS_MAP_TASK_FAILED' });
      expect(JSON.parse((error.cause as Error).message)).toMatchObject({ maxOldGenerationSizeMb: 384 });
    } finally {
      await limited.close();
    }
  });
});

describe('the transform (MapTaskSpec.transform: "`args` is structured-cloned to it")', () => {
  test('a transform given no args receives undefined, as structuredClone(undefined) is', { timeout: 30_000 }, async () => {
    const CHECK = moduleOf('export async function* check(input, args) { if (args !== undefined) throw new Error(`args: ${String(args)}`); for await (const b of input) yield b; }');
    const input = inputOf(1, 50, 12);
    const expected = rowsIn(input);
    const status = await pool.run(spec(12, { transform: { module: CHECK, export: 'check' } }), input).status;
    expect(await readBackRows([status], PARTITIONS)).toEqual(expected);
  });
});

describe('terminate() and close() wait for what they end (MapTask.terminate: "Resolves once status has settled"; close: "waits for all of it")', () => {
  test('once terminate() resolves, the status has settled and the attempt\'s files are gone', { timeout: 30_000 }, async () => {
    const wrote = deferred();
    const task = pool.run(spec(2, stallAfter(1)), inputOf(3, 500, 2), { onProgress: (p) => p.batches === 1 && wrote.resolve() });
    const settled = settledFlag(task.status);
    await wrote.promise;
    expect((await files()).length, 'the attempt has files to remove').toBeGreaterThan(0);
    await task.terminate();
    expect(settled(), 'status settled before terminate() resolved').toBe(true);
    expect(await files()).toEqual([]);
    await expect(task.status).rejects.toMatchObject({ code: 'CS_WORKER_EXITED' });
  });

  test('once close() resolves, a running task has failed and its files are gone', { timeout: 30_000 }, async () => {
    const own = new MapTaskPool({ threads: 1 });
    const wrote = deferred();
    const task = own.run(spec(3, stallAfter(1)), inputOf(3, 500, 3), { onProgress: (p) => p.batches === 1 && wrote.resolve() });
    const settled = settledFlag(task.status);
    await wrote.promise;
    expect((await files()).length, 'the attempt has files to remove').toBeGreaterThan(0);
    await own.close();
    expect(settled(), 'status settled before close() resolved').toBe(true);
    expect(await files()).toEqual([]);
    await expect(task.status).rejects.toMatchObject({ code: 'CS_WORKER_EXITED' });
  });

  test('terminate() of a task that already succeeded does not end the thread now running the next task', { timeout: 30_000 }, async () => {
    const first = pool.run(spec(4), inputOf(1, 100, 4));
    await first.status;
    const input = inputOf(3, 200, 5);
    const expected = rowsIn(input);
    const second = pool.run(spec(5), input); // on the thread the first task ran on
    await first.terminate();
    expect(await readBackRows([await second.status], PARTITIONS)).toEqual(expected);
  });
});

describe('an abort after the task settled (README "Failures"; the signal may be shared by many tasks)', () => {
  test('a signal aborted as a task succeeds does not reach the next task on its thread', { timeout: 30_000 }, async () => {
    const controller = new AbortController();
    const first = pool.run(spec(6), inputOf(1, 100, 6), { signal: controller.signal });
    const input = inputOf(3, 200, 7);
    const expected = rowsIn(input);
    const second = pool.run(spec(7), input); // waits for the one thread; starts as the first task's 'done' arrives
    // runs as soon as the first status resolves, before the pool has removed the first task's abort listener
    const aborted = first.status.then((status) => {
      controller.abort();
      return status;
    });
    expect((await aborted).metrics.rows).toBe(100);
    expect(await readBackRows([await second.status], PARTITIONS)).toEqual(expected);
  });
});

describe("the attempt's files, wherever they are (README: \"in every case the attempt's files are gone\")", () => {
  test('a task whose spill directory is under its own spillRoot, terminated mid-write, leaves nothing there either', { timeout: 30_000 }, async () => {
    const spillRoot = await makeTempDir('cs-mtp2-spill-');
    try {
      let midWrite: string[] = [];
      let terminated: Promise<void> | null = null;
      let terminate: () => Promise<void> = async () => undefined;
      const task = pool.run(spec(8, { spillRoot, ...stallAfter(2) }), inputOf(4, 2000, 8), {
        onProgress: (p) => {
          if (p.batches === 2 && terminated === null) {
            midWrite = readdirSync(spillRoot);
            terminated = terminate();
          }
        },
      });
      terminate = () => task.terminate();
      await expect(task.status).rejects.toMatchObject({ code: 'CS_WORKER_EXITED' });
      await terminated;
      expect(midWrite, 'the attempt had a spill directory under spillRoot').toEqual(['shuffle_0_8_0.spill']);
      expect(readdirSync(spillRoot)).toEqual([]);
      expect(await files()).toEqual([]);
    } finally {
      await removeDir(spillRoot);
    }
  });

  test('a thread that crashes on an uncaught error after its files could not be found: the cause is the crash, not the cleanup', { timeout: 30_000 }, async () => {
    // the transform removes the shuffle directory, then throws where nothing catches it
    const VANISH = moduleOf(`import { rmSync } from 'node:fs';
      export async function* vanish(input, args) { for await (const b of input) { yield b; rmSync(args.dir, { recursive: true, force: true }); setTimeout(() => { throw new Error('native crash'); }); await new Promise(() => {}); } }`);
    const error = (await pool.run(spec(9, { transform: { module: VANISH, export: 'vanish', args: { dir } } }), inputOf(2, 100, 9)).status.catch((e: unknown) => e)) as Error;
    expect(error).toMatchObject({ code: 'CS_WORKER_EXITED', message: expect.stringContaining('native crash') });
    expect(error.cause).toMatchObject({ message: 'native crash' });
    expect(existsSync(dir)).toBe(false);
  });
});

describe('the input', () => {
  // Found by the sweep (fixed): failureOf() told an input failure by `run.inputError !== undefined`, so an
  // input that threw `undefined` (a generator doing `throw undefined`, a promise rejected with no reason)
  // failed with the worker's answer to the pool's 'abort': CS_ABORTED, "the map task was aborted", though
  // nothing aborted it. README "Failures": CS_MAP_TASK_FAILED when "the transform or the input threw".
  test('an input that throws undefined fails the task with CS_MAP_TASK_FAILED, not CS_ABORTED', { timeout: 30_000 }, async () => {
    function* input(): Generator<RecordBatch> {
      yield narrowBatch(100, 11);
      throw undefined; // what a careless scan may throw
    }
    const error = await pool.run(spec(11), input()).status.catch((e: unknown) => e);
    expect(await files()).toEqual([]);
    expect(error).toMatchObject({ code: 'CS_MAP_TASK_FAILED' });
  });

  test("an input whose cleanup (its iterator's return()) throws: the task still succeeds, and nothing is left unhandled", { timeout: 30_000 }, async () => {
    const batches = inputOf(2, 100, 10);
    const expected = rowsIn(batches);
    const input: Iterable<RecordBatch> = {
      [Symbol.iterator]() {
        let i = 0;
        return {
          next: () => (i < batches.length ? { value: batches[i++]!, done: false } : { value: undefined, done: true }),
          return: () => {
            throw new Error('the scan could not close');
          },
        };
      },
    };
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const status = await pool.run(spec(10), input).status;
      await new Promise((resolve) => setImmediate(resolve));
      expect(await readBackRows([status], PARTITIONS)).toEqual(expected);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
