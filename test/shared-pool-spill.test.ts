/**
 * A spill another writer asks for (its grow reclaims this writer) while this writer is
 * itself waiting for memory: when the wait ends, the spill may still be writing this
 * writer's pages. The sort writer used to go on adding rows to the pages and pointers
 * then, and the spill, when done, reset them: those rows were lost (hundreds of rows per
 * run, finish() still counting them). Both writers, written concurrently on one pool.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Field, Int32, makeData, RecordBatch, Schema, Struct, Utf8, vectorFromArray } from 'apache-arrow';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { MemoryLimitError, MemoryPool } from '../src/memory/memory-pool.js';
import { createShuffleWriter, type WriterKind } from '../src/writer-kind.js';
import { checkOutput, MATRIX_PARTITIONING, MatrixInput } from './support/matrix-input.js';
import { entries, MiB } from './support/spill-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-shared-pool-')));
afterEach(async () => removeDir(dir));

test.each<[string, WriterKind[]]>([
  ['sort + hash', ['sort', 'hash']],
  ['hash + sort + hash', ['hash', 'sort', 'hash']],
])('writers %s written concurrently on one 4 MiB pool: each gets exactly its rows back, in order', async (_, kinds) => {
  const pool = new MemoryPool(4 * MiB);
  const inputs = kinds.map((_, i) => new MatrixInput({ sources: 3, sourceRows: 4096, batches: 40, label: [100, 300], seed: 100 + i }));
  const writers = await Promise.all(
    kinds.map((kind, i) => createShuffleWriter(kind, { numPartitions: 200, partitioning: MATRIX_PARTITIONING, outputPrefix: join(dir, `w${i}`), memoryPool: pool, spillDir: dir, concurrentTasks: kinds.length, mapId: i })),
  );
  const results = await Promise.all(
    writers.map(async (writer, i) => {
      for (const batch of inputs[i]!.batches()) await writer.write(batch);
      return writer.finish();
    }),
  );
  expect(pool.peak).toBeLessThanOrEqual(4 * MiB);
  expect(pool.reserved).toBe(0);
  for (const [i, result] of results.entries()) {
    expect(result.spills, `writer ${i} spilled`).toBeGreaterThan(0);
    const check = await checkOutput(join(dir, `w${i}`), inputs[i]!, 200);
    expect(check.problems, `writer ${i} (${kinds[i]})`).toEqual([]);
    expect(check.rows).toBe(inputs[i]!.totalRows);
  }
  expect((await entries(dir)).filter((f) => f.includes('spill'))).toEqual([]);
}, 60_000);

/**
 * What a writer holds while it writes its data file (the columnar writer's cached payloads and
 * merge windows, the sort writer's pages being sorted out) it cannot give back. Held beyond its
 * share of the pool, it starved another writer: a CI run failed with CS_MEMORY_LIMIT (a sort writer
 * asked for 512 KiB while two columnar writers merging held 3.1 of 4 MiB). And a sort writer that
 * had begun to finish did not spill for others until its final pass. Another consumer here asks
 * for exactly its share at every turn of the event loop, from the first turn after finish() is
 * called, or from the moment the data file has bytes, until the writer has finished: the input
 * fits the pool but not the share (3 batches) or spills (24 batches).
 */
const FINISH_CASES = (['hash', 'sort'] as const).flatMap((kind) =>
  [3, 24].flatMap((batches) => (['finish() is called', 'the data file has bytes'] as const).map((from) => [kind, batches, from] as const)),
);

test.each(FINISH_CASES)('while a %s writer of %i batches finishes, another consumer can get its share at every turn from when %s', async (kind, batches, from) => {
  const pool = new MemoryPool(4 * MiB);
  const input = new MatrixInput({ sources: 3, sourceRows: 4096, batches, label: [100, 300], seed: 7 });
  const writer = await createShuffleWriter(kind, { numPartitions: 200, partitioning: MATRIX_PARTITIONING, outputPrefix: join(dir, 'w'), memoryPool: pool, spillDir: dir, concurrentTasks: 2 });
  const other = pool.register('other task');
  const share = pool.share(2);
  for (const batch of input.batches()) await writer.write(batch);
  expect(pool.held).toBeGreaterThan(share);
  // the data file is written under a temporary name, renamed into place between a listing and a stat
  const dataStarted = () => readdirSync(dir).some((f) => f.startsWith('w.data') && (statSync(join(dir, f), { throwIfNoEntry: false })?.size ?? 0) > 0);
  let finished = false;
  const finishing = writer.finish().finally(() => (finished = true));
  let grants = 0;
  try {
    await new Promise((resolve) => setImmediate(resolve));
    while (!finished) {
      if (from === 'finish() is called' || dataStarted()) {
        await other.grow(share);
        grants++;
        other.shrink(share);
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    await finishing.catch(() => undefined); // not removing the directory under a finish still running
  }
  await finishing;
  other.free();
  expect(grants).toBeGreaterThan(0);
  expect(pool.reserved).toBe(0);
  const check = await checkOutput(join(dir, 'w'), input, 200);
  expect(check.problems).toEqual([]);
  expect(check.rows).toBe(input.totalRows);
}, 60_000);

/**
 * A spill another consumer asks for just as finish() begins takes the columnar writer's payloads
 * out of memory; the merge must not start before they are on disk. It did: the partitions were
 * committed without them (every row lost, without an error). The other consumer asks for one
 * byte more than the pool has, and finish() is called while the spill that starts is on its way.
 */
test.each<WriterKind>(['hash', 'sort'])('a %s writer spilled for another consumer as finish() begins loses no row', async (kind) => {
  const pool = new MemoryPool(16 * MiB);
  const input = new MatrixInput({ sources: 3, sourceRows: 1000, batches: 6, label: [10, 30], seed: 3 });
  const writer = await createShuffleWriter(kind, { numPartitions: 8, partitioning: MATRIX_PARTITIONING, outputPrefix: join(dir, 'w'), memoryPool: pool, spillDir: dir, codec: 'none', maxBatchRows: 100 });
  for (const batch of input.batches()) await writer.write(batch);
  const other = pool.register('other task');
  // the request starts the spill (it runs until its first write), then finish() begins while it is on its way
  const growing = other.grow(pool.available + 1);
  const finishing = writer.finish();
  try {
    // (it may be refused in the end: the finishing writer takes its merge buffer meanwhile)
    await growing.catch((error: unknown) => expect(error).toBeInstanceOf(MemoryLimitError));
  } finally {
    await finishing.catch(() => undefined); // not removing the directory under a finish still running
  }
  other.free();
  const result = await finishing;
  expect(result.spills).toBe(1);
  const check = await checkOutput(join(dir, 'w'), input, 8);
  expect(check.problems).toEqual([]);
  expect(check.rows).toBe(input.totalRows);
});

// Regression: a sort writer's per-row scratch grew by doubling, so batches of 4,000-4,150 rows kept 8,000 rows of it
// (192 KB) while writing, more than its share of the pool beside its pointer array: the writer asking within its
// share then failed with CS_MEMORY_LIMIT, every run.
test('four sort writers on a 1 MiB pool (a 256 KiB share each), batches growing by 13 rows: each finishes with every row', async () => {
  const pool = new MemoryPool(MiB);
  const partitionCounts = [7, 300, 5000, 50];
  const batchOf = (rows: number, P: number, seed: number) => {
    const pid = makeData({ type: new Int32(), length: rows, data: Int32Array.from({ length: rows }, (_, i) => (i * 31 + seed) % P) });
    const text = vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 9 === 0 ? null : 'w'.repeat((i * 7 + seed) % 150) + i)), new Utf8()).data[0]!;
    const schema = new Schema([new Field('pid', new Int32(), false), new Field('s', new Utf8(), true)]);
    return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, children: [pid, text] }));
  };
  const results = await Promise.all(
    partitionCounts.map(async (P, i) => {
      const writer = await createShuffleWriter('sort', { numPartitions: P, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: join(dir, `w${i}`), memoryPool: pool, spillDir: dir, concurrentTasks: 4, mapId: i });
      let rows = 0;
      for (let k = 0; k < 12; k++) {
        const batch = batchOf(4000 + 13 * k, P, 100 * k + i);
        rows += batch.numRows;
        await writer.write(batch);
      }
      return { rows, result: await writer.finish() };
    }),
  );
  expect(pool.peak).toBeLessThanOrEqual(MiB);
  expect(pool.reserved).toBe(0);
  for (const { rows, result } of results) expect(result.rows).toBe(rows);
}, 60_000);
