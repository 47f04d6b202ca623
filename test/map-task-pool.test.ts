/**
 * MapTaskPool: map tasks in worker threads. Claims: the rows sent are the rows
 * written; each task's writer gets memoryBytes / threads and stays within it;
 * exclusively owned buffers are moved, not copied; the input is read at most
 * two batches ahead of the worker; and whatever ends a task early (its
 * transform throws, its thread is terminated or exits, its input throws, it is
 * aborted, the pool closes) its status rejects with a typed error, nothing of
 * the attempt is left on disk, and the pool goes on running tasks.
 */
import { readdirSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { describe, expect, test } from 'vitest';
import { Dictionary, Field, Float64, Int32, Int64, makeData, RecordBatch, Schema, Struct, Table, Utf8, Vector, vectorFromArray } from 'apache-arrow';
import { narrowBatch, NARROW_SCHEMA } from '../src/cli/demo-data.js';
import { MapTaskPool, type MapTaskSpec } from '../src/shuffle/map-task-pool.js';
import type { MapStatus } from '../src/shuffle/map-status.js';
import { ReduceReader } from '../src/shuffle/reduce-reader.js';
import { batchOf, schemaOf } from './support/columns.js';
import { rowsOf } from './support/rows.js';
import { removeDir } from './support/temp-dir.js';
import { useMapTaskFixture } from './support/map-task-fixture.js';

const TRANSFORMS = new URL('./support/map-transforms.ts', import.meta.url);
const PARTITIONS = 6;

let dir: string;
let pool: MapTaskPool;

function spec(mapId: number, attempt: number, extra: Partial<MapTaskSpec> = {}): MapTaskSpec {
  return {
    dir,
    id: { shuffleId: 0, mapId, attempt },
    numPartitions: PARTITIONS,
    partitioning: { kind: 'hash', keys: ['key'] },
    outputSchema: NARROW_SCHEMA,
    ...extra,
  };
}

function batches(count: number, rows: number, seed: number): RecordBatch[] {
  return Array.from({ length: count }, (_, i) => narrowBatch(rows, seed * 1000 + i + 1));
}

async function readBack(statuses: MapStatus[]): Promise<string[]> {
  const rows: string[] = [];
  for await (const batch of new ReduceReader({ maps: statuses, partitions: { start: 0, end: PARTITIONS } })) rows.push(...rowsOf(batch));
  return rows.sort();
}

const files = async () => (await readdir(dir)).sort();
const committed = (mapId: number, attempt: number) =>
  [`shuffle_0_${mapId}_${attempt}.checksum.CRC32C`, `shuffle_0_${mapId}_${attempt}.data`, `shuffle_0_${mapId}_${attempt}.index`];

useMapTaskFixture({ threads: 2, dirPrefix: 'cs-pool-' }, (fixture) => ({ dir, pool } = fixture));

describe('running map tasks', () => {
  test('three tasks on two threads write exactly the rows sent to them', async () => {
    const inputs = [0, 1, 2].map((m) => batches(4, 3000, m));
    const expected = inputs.flat().flatMap((b) => rowsOf(b)).sort(); // before sending: the batches are handed over
    const tasks = inputs.map((input, m) => pool.run(spec(m, 0), input));
    const statuses = await Promise.all(tasks.map((t) => t.status));
    expect(statuses.map((s) => s.metrics.inputRows)).toEqual([12000, 12000, 12000]);
    expect(statuses.map((s) => s.metrics.rows)).toEqual([12000, 12000, 12000]);
    expect(await readBack(statuses)).toEqual(expected);
    expect(await files()).toEqual([...committed(0, 0), ...committed(1, 0), ...committed(2, 0)].sort());
  });

  test("batches whose buffers are all their own are moved to the worker, not copied", async () => {
    const schema = schemaOf([
      { name: 'key', type: new Int64(), nullable: false },
      { name: 'x', type: new Float64(), nullable: false },
    ]);
    const keys = new BigInt64Array(5000).map((_, i) => BigInt(i));
    const values = new Float64Array(5000).map((_, i) => i / 2);
    const batch = batchOf(schema, [makeData({ type: new Int64(), data: keys, length: 5000, nullCount: 0 }), makeData({ type: new Float64(), data: values, length: 5000, nullCount: 0 })], 5000);
    const status = await pool.run(spec(3, 0, { outputSchema: schema }), [batch]).status;
    expect(status.metrics.transferredBytes).toBe(80_000);
    expect(status.metrics.copiedBytes).toBe(0);
    expect(keys.byteLength, 'the sender no longer holds the moved buffer').toBe(0);

    const kept = new Float64Array(5000);
    const copyBatch = batchOf(schema, [makeData({ type: new Int64(), data: new BigInt64Array(5000), length: 5000, nullCount: 0 }), makeData({ type: new Float64(), data: kept, length: 5000, nullCount: 0 })], 5000);
    const copied = await pool.run(spec(3, 1, { outputSchema: schema, transfer: 'copy' }), [copyBatch]).status;
    expect(copied.metrics.transferredBytes).toBe(0);
    expect(copied.metrics.copiedBytes).toBe(80_000);
    expect(kept.byteLength).toBe(40_000);
  });

  test('a range-partitioned task: its Arrow bounds cross to the worker (as IPC bytes) and partition p holds the keys in (bound p - 1, bound p]', async () => {
    const bounds = [100_000n, 300_000n, 500_000n, 700_000n, 900_000n];
    const partitioning = { kind: 'range' as const, keys: ['key'], bounds: new Table({ key: vectorFromArray(bounds, new Int64()) }) };
    const input = batches(3, 2000, 9);
    const expected = input.flatMap((b) => [...(b.getChild('key')!.toArray() as BigInt64Array)]);
    const status = await pool.run(spec(9, 0, { partitioning }), input).status;
    let rows = 0;
    for (let p = 0; p < PARTITIONS; p++) {
      for await (const batch of new ReduceReader({ maps: [status], partitions: { start: p, end: p + 1 } })) {
        for (const key of batch.getChild('key')!.toArray() as BigInt64Array) {
          expect(p === 0 || key > bounds[p - 1]!, `key ${key} in partition ${p}`).toBe(true);
          expect(p === PARTITIONS - 1 || key <= bounds[p]!, `key ${key} in partition ${p}`).toBe(true);
          rows++;
        }
      }
    }
    expect(rows).toBe(expected.length);
    expect(status.partitionRows.every((n) => n > 0), "every partition gets rows").toBe(true);
  });

  test('range bounds the writer refuses (descending) fail the task with its CS_INVALID_ARGUMENT, leaving nothing', async () => {
    const bounds = new Table({ key: vectorFromArray([500n, 100n], new Int64()) });
    const task = pool.run(spec(10, 0, { partitioning: { kind: 'range', keys: ['key'], bounds } }), batches(1, 100, 10));
    const error = await task.status.catch((e: unknown) => e);
    expect((error as { code?: string }).code).toBe('CS_INVALID_ARGUMENT');
    expect(String((error as Error).message)).toMatch(/range bounds must be strictly ascending in the keys' order: bound 1 sorts before bound 0/);
    expect((error as { where?: object }).where, "the worker's error names the map output").toMatchObject({ shuffle: 0, map: 10, attempt: 0 });
    expect(await files()).toEqual([]);
  });

  test('dictionary columns cross as the input shares them: two columns of one dictionary (refused in the worker as two dictionaries), and a dictionary every batch shares is sent once', async () => {
    const type = new Dictionary(new Utf8(), new Int32(), 9);
    const schema = new Schema([new Field('key', new Int64(), false), new Field('d', type, true), new Field('e', type, true)]);
    const dictionary = new Vector([vectorFromArray(['red', 'green', 'blue'], new Utf8()).data[0]!]);
    const input = Array.from({ length: 6 }, (_, b) => {
      const n = 500;
      const column = (shift: number) => makeData({ type, length: n, nullCount: 0, data: Int32Array.from({ length: n }, (_, i) => (i + shift + b) % 3), dictionary });
      const key = makeData({ type: new Int64(), length: n, nullCount: 0, data: BigInt64Array.from({ length: n }, (_, i) => BigInt(b * n + i)) });
      return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: [key, column(0), column(1)] }));
    });
    const expected = input.flatMap((b) => rowsOf(b)).sort();
    const status = await pool.run(spec(0, 0, { outputSchema: schema }), input).status;
    expect(status.metrics.rows).toBe(3000);
    expect(await readBack([status])).toEqual(expected);
  });

  test('a task whose transform writes nothing commits an empty output from its outputSchema', async () => {
    const status = await pool.run(spec(4, 0, { transform: { module: TRANSFORMS, export: 'dropAll' } }), batches(2, 100, 4)).status;
    expect(status.metrics.inputRows).toBe(200);
    expect(status.metrics.rows).toBe(0);
    expect(status.partitionLengths.slice(1).every((l) => l === 0)).toBe(true); // partition 0 keeps the schema
    expect(status.partitionLengths[0]).toBeGreaterThan(0);
  });

  test('the input is read at most two batches ahead of what the worker took', async () => {
    let pulled = 0;
    function* input(): Generator<RecordBatch> {
      for (let i = 0; i < 50; i++) {
        pulled++;
        yield narrowBatch(100, i + 1);
      }
    }
    let taken = 0;
    const task = pool.run(spec(5, 0, { transform: { module: TRANSFORMS, export: 'stallAfter', args: { batches: 1 } } }), input(), {
      onProgress: (p) => (taken = p.inputBatches),
    });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(taken).toBe(1);
    expect(pulled, 'one taken plus a window of two').toBeLessThanOrEqual(3);
    await task.terminate();
    await expect(task.status).rejects.toMatchObject({ code: 'CS_WORKER_EXITED' });
  });
});

describe('memory', () => {
  test("each task's writer gets memoryBytes / threads in its thread, and stays within it", async () => {
    const small = new MapTaskPool({ threads: 2, memoryBytes: 2 * 1024 * 1024 });
    try {
      expect(small.memoryPerTask).toBe(1024 * 1024);
      // one task is enough (and starts one thread): its writer's pool is its share, not the whole budget
      const status = await small.run(spec(10, 0, { numPartitions: 16 }), batches(8, 8192, 10)).status;
      expect(status.metrics.spills, 'a 1 MiB share must make the writer spill').toBeGreaterThan(0);
      expect(status.metrics.peakMemoryBytes).toBeLessThanOrEqual(1024 * 1024);
    } finally {
      await small.close();
    }
  });

  test('a thread keeps its memory pool from task to task: the second of two like tasks reuses the large buffers the first left', async () => {
    const single = new MapTaskPool({ threads: 1 });
    try {
      const first = await single.run(spec(11, 0, { numPartitions: 2 }), batches(6, 8192, 11)).status;
      const second = await single.run(spec(12, 0, { numPartitions: 2 }), batches(6, 8192, 11)).status;
      expect(first.metrics.spills + second.metrics.spills, 'nothing spills: what is reused was left by the first task').toBe(0);
      expect(second.metrics.reusedBuffers, JSON.stringify([first.metrics.reusedBuffers, second.metrics.reusedBuffers])).toBeGreaterThan(first.metrics.reusedBuffers!);
      expect(second.metrics.rows).toBe(6 * 8192);
    } finally {
      await single.close();
    }
  });
});

describe('a map task that ends early leaves nothing behind', () => {
  test('its transform throws mid-write: CS_MAP_TASK_FAILED with the cause; a retry on the same pool succeeds', async () => {
    const input = batches(6, 4000, 20);
    const expected = input.flatMap((b) => rowsOf(b)).sort();
    const failing = pool.run(spec(20, 0, { transform: { module: TRANSFORMS, export: 'throwAfter', args: { batches: 3 } } }), batches(6, 4000, 20));
    const error = await failing.status.catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CS_MAP_TASK_FAILED', where: { shuffle: 0, map: 20, attempt: 0 } });
    expect(String((error as Error).cause)).toContain('injected failure after 3 batches');
    expect(await files()).toEqual([]);
    const retried = await pool.run(spec(20, 1), input).status;
    expect(await readBack([retried])).toEqual(expected);
    expect(await files()).toEqual(committed(20, 1));
  });

  test('its worker is terminated mid-write: CS_WORKER_EXITED, its files removed, a new thread runs the retry', async () => {
    let terminate: () => Promise<void> = async () => undefined;
    let terminated: Promise<void> | null = null;
    let midWrite: string[] = [];
    const task = pool.run(spec(21, 0, { transform: { module: TRANSFORMS, export: 'stallAfter', args: { batches: 2 } } }), batches(5, 4000, 21), {
      onProgress: (p) => {
        if (p.batches === 2 && terminated === null) {
          midWrite = readdirSync(dir); // two batches are in the writer's buffers
          terminated = terminate();
        }
      },
    });
    terminate = () => task.terminate();
    await expect(task.status).rejects.toMatchObject({ code: 'CS_WORKER_EXITED', message: expect.stringContaining('was terminated') });
    await terminated;
    expect(midWrite, 'the attempt had files to clean up').toEqual(expect.arrayContaining([expect.stringMatching(/^shuffle_0_21_0\.data\.[0-9a-f]{12}\.tmp$/), 'shuffle_0_21_0.spill']));
    expect(await files()).toEqual([]);
    const retried = await pool.run(spec(21, 1), batches(5, 4000, 21)).status;
    expect(retried.metrics.rows).toBe(20000);
  });

  test('terminated at whatever point a spilling write has reached: committed and whole, or gone', async () => {
    const share = new MapTaskPool({ threads: 1, memoryBytes: 1024 * 1024 });
    try {
      for (const afterBatches of [1, 6]) {
        let task: ReturnType<MapTaskPool['run']> | null = null;
        task = share.run(spec(22, afterBatches, { numPartitions: 16 }), batches(8, 8192, 22), {
          onProgress: (p) => {
            if (p.batches === afterBatches) void task?.terminate();
          },
        });
        const outcome = await task.status.then(
          (status) => status,
          (error: unknown) => error,
        );
        const left = await files();
        if ('code' in (outcome as object)) {
          expect(outcome).toMatchObject({ code: 'CS_WORKER_EXITED' });
          expect(left, `killed after ${afterBatches} batches`).toEqual([]);
        } else {
          expect(left).toEqual(committed(22, afterBatches));
          expect((outcome as MapStatus).metrics.rows).toBe(8 * 8192);
          for (const name of left) await removeDir(`${dir}/${name}`);
        }
      }
    } finally {
      await share.close();
    }
  });

  test('its thread exits on its own (a crash): CS_WORKER_EXITED with the exit code', async () => {
    const task = pool.run(spec(23, 0, { transform: { module: TRANSFORMS, export: 'exitAfter', args: { batches: 2 } } }), batches(4, 2000, 23));
    await expect(task.status).rejects.toMatchObject({ code: 'CS_WORKER_EXITED', message: expect.stringContaining('exited with code 3') });
    expect(await files()).toEqual([]);
  });

  test('its input throws: CS_MAP_TASK_FAILED with the input error as cause', async () => {
    function* input(): Generator<RecordBatch> {
      yield narrowBatch(1000, 1);
      yield narrowBatch(1000, 2);
      throw new Error('the scan failed');
    }
    const error = await pool.run(spec(24, 0), input()).status.catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CS_MAP_TASK_FAILED', message: expect.stringContaining('the scan failed') });
    expect(await files()).toEqual([]);
  });

  test("its input was handed to another task already (transfer 'exclusive' moved its memory): CS_MAP_TASK_FAILED that says so, not a TypeError", async () => {
    const input = batches(2, 1000, 26);
    await pool.run(spec(26, 0), input).status;
    const error = await pool.run(spec(27, 0), input).status.catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CS_MAP_TASK_FAILED', message: expect.stringContaining('moved to another thread'), cause: { code: 'CS_INVALID_ARGUMENT' } });
    expect(await files()).toEqual(committed(26, 0));
  });

  test('it is aborted through its signal: CS_ABORTED, also before it started', async () => {
    const controller = new AbortController();
    const running = pool.run(spec(25, 0, { transform: { module: TRANSFORMS, export: 'stallAfter', args: { batches: 1 } } }), batches(3, 1000, 25), {
      signal: controller.signal,
      onProgress: (p) => p.batches === 1 && controller.abort(),
    });
    await expect(running.status).rejects.toMatchObject({ code: 'CS_ABORTED', where: { shuffle: 0, map: 25, attempt: 0 } });
    const early = new AbortController();
    early.abort();
    await expect(pool.run(spec(25, 1), batches(1, 10, 25), { signal: early.signal }).status).rejects.toMatchObject({ code: 'CS_ABORTED' });
    expect(await files()).toEqual([]);
  });

  test('its transform module or export does not exist: CS_INVALID_ARGUMENT', async () => {
    await expect(pool.run(spec(26, 0, { transform: { module: TRANSFORMS, export: 'notAFunction' } }), []).status).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
    await expect(pool.run(spec(26, 1, { transform: { module: new URL('./support/nope.js', import.meta.url) } }), []).status).rejects.toMatchObject({
      code: 'CS_INVALID_ARGUMENT',
    });
    expect(await files()).toEqual([]);
  });

  test('a spec that cannot be sent to a worker is CS_INVALID_ARGUMENT at once, and the pool goes on (a function in args crashed the process)', async () => {
    const invalid = expect.objectContaining({ code: 'CS_INVALID_ARGUMENT', where: { shuffle: 0, map: 30, attempt: 0 } });
    expect(() => pool.run(spec(30, 0, { transform: { module: TRANSFORMS, export: 'default', args: { f: () => 1 } } }), [])).toThrow(invalid);
    expect(() => pool.run(spec(30, 0, { outputSchema: { fields: [] } as never }), [])).toThrow(invalid);
    expect(() => pool.run(null as never, [])).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
    expect(() => new MapTaskPool(undefined as never)).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
    // a partitioning that is not one: the worker's writer refuses it, the error names the output
    await expect(pool.run(spec(31, 0, { partitioning: undefined as never }), batches(1, 10, 31)).status).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT', where: { shuffle: 0, map: 31 } });
    const status = await pool.run(spec(32, 0), batches(1, 100, 32)).status;
    expect(status.metrics.rows).toBe(100);
    expect(await files()).toEqual(committed(32, 0));
  });

  test('closing the pool: the running task fails with CS_WORKER_EXITED, the waiting one with CS_ABORTED, both leave nothing', async () => {
    const closing = new MapTaskPool({ threads: 1 });
    const running = closing.run(spec(27, 0, { transform: { module: TRANSFORMS, export: 'stallAfter', args: { batches: 1 } } }), batches(3, 1000, 27), {
      onProgress: (p) => p.batches === 1 && void closing.close(),
    });
    const waiting = closing.run(spec(28, 0), batches(1, 10, 28));
    await expect(running.status).rejects.toMatchObject({ code: 'CS_WORKER_EXITED' });
    await expect(waiting.status).rejects.toMatchObject({ code: 'CS_ABORTED' });
    await closing.close();
    expect(() => closing.run(spec(29, 0), [])).toThrow(expect.objectContaining({ code: 'CS_ABORTED' }));
    expect(await files()).toEqual([]);
  });
});
