/**
 * The map-task pool's worker protocol at its edges, pinned by a mutation
 * sweep (one thread, so every task after the first reuses or replaces it):
 * a failed task hands its thread back and nothing of it reaches the next task
 * on that thread; its input's cleanup runs; a batch the worker cannot rebuild
 * fails the task with its typed error instead of being dropped; an abort
 * interrupts a stalled transform at once and ends a spinning one's thread
 * after the grace period (still CS_ABORTED); a task terminated while waiting
 * never starts; a dictionary is copied once per stream and never taken from
 * the sender; and a post that fails with DataCloneError is retried as copies
 * with the dictionaries the worker really has.
 */
import { Worker } from 'node:worker_threads';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { Dictionary, Field, Int32, Int64, makeData, RecordBatch, Schema, Struct, Utf8, Vector, vectorFromArray } from 'apache-arrow';
import { narrowBatch } from '../src/cli/demo-data.js';
import { MapTaskPool, type MapTaskSpec } from '../src/shuffle/map-task-pool.js';
import type { MapStatus } from '../src/shuffle/map-status.js';
import { runChildModule } from './support/child-module.js';
import { rowsOf } from './support/rows.js';
import { narrowTaskSpec, readBackRows, useMapTaskFixture } from './support/map-task-fixture.js';

const TRANSFORMS = new URL('./support/map-transforms.ts', import.meta.url);
/** A transform that writes `batches` batches, then loops synchronously forever: its thread cannot see an abort. */
const SPIN = `data:text/javascript,${encodeURIComponent('export async function* spinAfter(input, args) { let n = 0; for await (const b of input) { yield b; if (++n === args.batches) for (;;) {} } }')}`;
const PARTITIONS = 3;

let dir: string;
let pool: MapTaskPool;

const spec = (mapId: number, extra: Partial<MapTaskSpec> = {}): MapTaskSpec => narrowTaskSpec(dir, mapId, PARTITIONS, extra);
const readBack = (status: MapStatus): Promise<string[]> => readBackRows([status], PARTITIONS);

const files = async () => (await readdir(dir)).sort();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

useMapTaskFixture({ threads: 1, dirPrefix: 'cs-wpc-' }, (fixture) => ({ dir, pool } = fixture));

describe('a failed task and the thread it ran on', () => {
  test('the thread runs the next task, which gets all of its own input; the failed input is closed', { timeout: 30_000 }, async () => {
    let closedA = false;
    async function* slowA(): AsyncGenerator<RecordBatch> {
      try {
        for (let i = 0; i < 6; i++) {
          yield narrowBatch(200, 100 + i);
          await sleep(150);
        }
      } finally {
        closedA = true;
      }
    }
    const inputB = Array.from({ length: 5 }, (_, i) => narrowBatch(400, 200 + i));
    const expectedB = inputB.flatMap((b) => rowsOf(b)).sort();
    async function* slowB(): AsyncGenerator<RecordBatch> {
      for (const batch of inputB) {
        yield batch;
        await sleep(100);
      }
    }
    const a = pool.run(spec(1, { transform: { module: TRANSFORMS, export: 'throwAfter', args: { batches: 1 } } }), slowA());
    const b = pool.run(spec(2), slowB());
    await expect(a.status).rejects.toMatchObject({ code: 'CS_MAP_TASK_FAILED' });
    const status = await b.status;
    expect(status.metrics.rows, "a late 'end' of the failed task must not end this one's input").toBe(2000);
    expect(await readBack(status)).toEqual(expectedB);
    expect(closedA, "the failed task's input generator was returned (its finally ran)").toBe(true);
  });

  test('a batch the worker cannot rebuild fails the task with its typed error, not dropped', { timeout: 30_000 }, async () => {
    const schema = new Schema([new Field('key', new Int64(), false)]);
    const key = makeData({ type: new Int64(), data: new BigInt64Array([1n, 2n]), length: 2, nullCount: 0 });
    // a batch whose data has a column its schema lacks (arrow-js builds it; the worker's rebuild refuses it)
    const odd = new RecordBatch(schema, makeData({ type: new Struct([...schema.fields, new Field('x', new Int64(), false)]), length: 2, nullCount: 0, children: [key, key] }));
    const error = await pool.run(spec(3, { outputSchema: schema }), [odd]).status.catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CS_SCHEMA_MISMATCH', where: { shuffle: 0, map: 3, attempt: 0 } });
    expect(await files()).toEqual([]);
  });
});

describe('aborts and terminations', () => {
  test('aborting a task whose transform awaits forever is stopped by the interrupt (the transform step rejects), CS_ABORTED', { timeout: 30_000 }, async () => {
    const controller = new AbortController();
    let aborted = false;
    const task = pool.run(spec(4, { transform: { module: TRANSFORMS, export: 'stallAfter', args: { batches: 1 } } }), [narrowBatch(100, 4), narrowBatch(100, 5)], {
      signal: controller.signal,
      onProgress: (p) => {
        if (p.batches === 1 && !aborted) {
          aborted = true;
          controller.abort();
        }
      },
    });
    const error = (await task.status.catch((e: unknown) => e)) as Error;
    expect(error).toMatchObject({ code: 'CS_ABORTED' });
    expect(error.message, 'stopped by the interrupt, not by ending the thread after the grace period').not.toContain('did not stop in time');
    expect(await files()).toEqual([]);
  });

  test('aborting a task whose transform spins synchronously ends its thread after the grace period: still CS_ABORTED, nothing left', { timeout: 30_000 }, async () => {
    const controller = new AbortController();
    const task = pool.run(spec(5, { transform: { module: SPIN, export: 'spinAfter', args: { batches: 1 } } }), [narrowBatch(100, 6), narrowBatch(100, 7)], {
      signal: controller.signal,
      onProgress: (p) => p.batches === 1 && controller.abort(),
    });
    await expect(task.status).rejects.toMatchObject({ code: 'CS_ABORTED', message: expect.stringContaining('did not stop in time') });
    expect(await files()).toEqual([]);
    expect((await pool.run(spec(6), [narrowBatch(50, 8)]).status).metrics.rows, 'a new thread runs the next task').toBe(50);
  });

  test('a task terminated while it waits for a thread never starts; the task after it runs', { timeout: 30_000 }, async () => {
    const running = pool.run(spec(7, { transform: { module: TRANSFORMS, export: 'stallAfter', args: { batches: 1 } } }), [narrowBatch(100, 9), narrowBatch(100, 10)]);
    let pulled = 0;
    function* waitingInput(): Generator<RecordBatch> {
      pulled++;
      yield narrowBatch(100, 11);
    }
    const waiting = pool.run(spec(8), waitingInput());
    await waiting.terminate();
    await expect(waiting.status).rejects.toMatchObject({ code: 'CS_ABORTED', message: expect.stringContaining('before it started') });
    await running.terminate();
    await expect(running.status).rejects.toMatchObject({ code: 'CS_WORKER_EXITED' });
    expect((await pool.run(spec(9), [narrowBatch(100, 12)]).status).metrics.rows).toBe(100);
    expect(pulled, 'the terminated task never read its input').toBe(0);
    expect(await files()).toEqual(['shuffle_0_9_0.checksum.CRC32C', 'shuffle_0_9_0.data', 'shuffle_0_9_0.index']);
  });
});

describe('dictionaries crossing to the worker', () => {
  const type = new Dictionary(new Utf8(), new Int32(), 4);
  const schema = new Schema([new Field('key', new Int64(), false), new Field('d', type, true)]);
  const batchesSharing = (dictionary: Vector, count: number) =>
    Array.from({ length: count }, (_, b) => {
      const n = 300;
      const key = makeData({ type: new Int64(), length: n, nullCount: 0, data: BigInt64Array.from({ length: n }, (_, i) => BigInt(b * n + i)) });
      const d = makeData({ type, length: n, nullCount: 0, data: Int32Array.from({ length: n }, (_, i) => (i + b) % 3), dictionary });
      return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: [key, d] }));
    });
  const dictionaryOf = (values: string[]) => new Vector([vectorFromArray(values, new Utf8()).data[0]!]);

  test('a dictionary every batch shares is copied once per task, and the sender keeps it intact', { timeout: 30_000 }, async () => {
    const one = await pool.run(spec(10, { outputSchema: schema }), batchesSharing(dictionaryOf(['red', 'green', 'blue']), 1)).status;
    const dictionary = dictionaryOf(['red', 'green', 'blue']);
    const input = batchesSharing(dictionary, 6);
    const expected = input.flatMap((b) => rowsOf(b)).sort();
    const six = await pool.run(spec(11, { outputSchema: schema }), input).status;
    expect(one.metrics.copiedBytes).toBeGreaterThan(0);
    expect(six.metrics.copiedBytes, 'six batches copy no more than one: the dictionary').toBe(one.metrics.copiedBytes);
    expect([...dictionary], 'the sender still has its dictionary').toEqual(['red', 'green', 'blue']);
    expect(await readBack(six)).toEqual(expected);
  });

  test('a post refused with DataCloneError is sent again as copies, with the dictionary the worker does not have yet', { timeout: 30_000 }, async () => {
    const post = Worker.prototype.postMessage;
    let refused = 0;
    Worker.prototype.postMessage = function (this: Worker, message: unknown, transfer?: readonly unknown[]) {
      if ((message as { type?: string }).type === 'batch' && refused === 0 && transfer !== undefined && transfer.length > 0) {
        refused++;
        throw new DOMException('injected: an ArrayBuffer that cannot be transferred', 'DataCloneError');
      }
      return post.call(this, message, transfer as never);
    } as typeof post;
    try {
      const input = batchesSharing(dictionaryOf(['x', 'y', 'z']), 3);
      const expected = input.flatMap((b) => rowsOf(b)).sort();
      const status = await pool.run(spec(12, { outputSchema: schema }), input).status;
      expect(refused).toBe(1);
      expect(await readBack(status)).toEqual(expected);
    } finally {
      Worker.prototype.postMessage = post;
    }
  });
});

describe('the process', () => {
  test('an idle pool that was never closed does not keep the process alive', { timeout: 60_000 }, async () => {
    const poolModule = new URL('../src/shuffle/map-task-pool.ts', import.meta.url).href;
    const demo = new URL('../src/cli/demo-data.ts', import.meta.url).href;
    const script = [
      `import { MapTaskPool } from ${JSON.stringify(poolModule)};`,
      `import { narrowBatch, NARROW_SCHEMA } from ${JSON.stringify(demo)};`,
      `await (await import('node:fs/promises')).mkdir(${JSON.stringify(join(dir, 'out'))});`,
      'const pool = new MapTaskPool({ threads: 1 });',
      `const status = await pool.run({ dir: ${JSON.stringify(join(dir, 'out'))}, id: { shuffleId: 0, mapId: 0, attempt: 0 }, numPartitions: 2, partitioning: { kind: 'hash', keys: ['key'] }, outputSchema: NARROW_SCHEMA }, [narrowBatch(100, 1)]).status;`,
      'console.log(`rows ${status.metrics.rows}`);',
    ];
    expect(await runChildModule(dir, script)).toEqual({ code: 0, signal: null, out: 'rows 100' });
  });
});

describe('an abort before the first batch, a cleanup that fails, the memory floor', () => {
  /** A transform that ignores its input and writes a small batch every millisecond, forever. */
  const ENDLESS = `data:text/javascript,${encodeURIComponent(
    `import { narrowBatch } from ${JSON.stringify(new URL('../src/cli/demo-data.ts', import.meta.url).href)};
     export async function* endless() { for (let i = 1; ; i++) { yield narrowBatch(10, i); await new Promise((r) => setTimeout(r, 1)); } }`,
  )}`;

  test('a task aborted before its transform gave a batch never pulls one: CS_ABORTED, nothing written', { timeout: 30_000 }, async () => {
    await pool.run(spec(10), [narrowBatch(10, 1)]).status; // the thread is up and idle: 'start' and 'abort' reach it back to back
    const controller = new AbortController();
    let progressed = 0;
    const task = pool.run(spec(8, { transform: { module: ENDLESS, export: 'endless' } }), [], { signal: controller.signal, onProgress: () => progressed++ });
    controller.abort(); // the 'abort' follows 'start' at once: it reaches the thread while it loads the transform and creates the writer
    const error = (await task.status.catch((e: unknown) => e)) as Error;
    expect(error).toMatchObject({ code: 'CS_ABORTED', where: { shuffle: 0, map: 8, attempt: 0 } });
    expect(progressed, 'the aborted task wrote no batch (the transform was never stepped)').toBe(0);
    expect((await files()).filter((name) => name.startsWith('shuffle_0_8_'))).toEqual([]);
  });

  test('a thread that dies while its attempt cannot be cleaned up: CS_WORKER_EXITED whose cause is the cleanup error', { timeout: 30_000 }, async () => {
    // the transform removes the shuffle directory, then kills its thread: discardMapOutput then finds no directory
    const VANISH = `data:text/javascript,${encodeURIComponent(
      `import { rmSync } from 'node:fs';
       export async function* vanish(input, args) { for await (const b of input) { yield b; rmSync(args.dir, { recursive: true, force: true }); process.exit(3); } }`,
    )}`;
    const error = (await pool.run(spec(9, { transform: { module: VANISH, export: 'vanish', args: { dir } } }), [narrowBatch(100, 11), narrowBatch(100, 12)]).status.catch((e: unknown) => e)) as Error;
    expect(error).toMatchObject({ code: 'CS_WORKER_EXITED', message: expect.stringContaining('exited with code 3'), where: { shuffle: 0, map: 9, attempt: 0 } });
    expect(error.cause).toMatchObject({ code: 'CS_FILE_NOT_FOUND' });
  });

  test('memoryBytes may be exactly one byte per thread', () => {
    const tight = new MapTaskPool({ threads: 2, memoryBytes: 2 });
    expect(tight.memoryPerTask).toBe(1);
    expect(() => new MapTaskPool({ threads: 2, memoryBytes: 1 })).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
  });
});
