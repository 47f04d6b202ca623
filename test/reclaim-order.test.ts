import { join } from 'node:path';
import { makeTable, type RecordBatch } from 'apache-arrow';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { MemoryPool, ShuffleReader, ShuffleWriter } from '../src/index.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const batch = (from: number, rows: number) => makeTable({ v: Int32Array.from({ length: rows }, (_, i) => from + i) }).batches[0]! as RecordBatch;

async function readAll(prefix: string): Promise<number[][]> {
  const reader = await ShuffleReader.open(prefix);
  const out: number[][] = [];
  for (let p = 0; p < reader.numPartitions; p++) {
    const rows: number[] = [];
    for await (const b of reader.readPartition(p)) for (const row of b) rows.push(row!.v as number);
    out.push(rows);
  }
  await reader.close();
  return out;
}

test('reclaim first shrinks partition buffers to the rows they hold, without spilling anything', async () => {
  const pool = new MemoryPool(64 * 1024 * 1024);
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions: 4, partitioning: { kind: 'round-robin' }, outputPrefix: prefix, memoryPool: pool, spillDir: dir, stagingBytes: 0 });
  await writer.write(batch(0, 40)); // 10 rows in buffers sized for thousands
  const before = pool.reserved;
  const freed = await writer.reclaim(1024);
  expect(freed).toBeGreaterThan(1024);
  expect(pool.reserved).toBe(before - freed);
  await writer.write(batch(40, 40));
  const result = await writer.finish();
  expect(result.spills).toBe(0);
  expect((await readAll(prefix)).flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 80 }, (_, i) => i));
});

test('reclaim then spills cached payloads, then evicts buffers; rows keep their order', async () => {
  const pool = new MemoryPool(64 * 1024 * 1024);
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'round-robin' }, outputPrefix: prefix, memoryPool: pool, spillDir: dir, stagingBytes: 0, maxBatchRows: 100, mergeThreshold: 0 });
  await writer.write(batch(0, 500)); // payloads of 100 rows, cached
  expect(await writer.reclaim(Number.MAX_SAFE_INTEGER)).toBeGreaterThan(0); // everything it can
  await writer.write(batch(500, 150));
  expect(await writer.reclaim(Number.MAX_SAFE_INTEGER)).toBeGreaterThan(0);
  await writer.write(batch(650, 10));
  const result = await writer.finish();
  expect(result.spills).toBe(2);
  const [even, odd] = await readAll(prefix);
  const all = Array.from({ length: 660 }, (_, i) => i);
  const start = even![0]! % 2;
  expect(even).toEqual(all.filter((v) => v % 2 === start));
  expect(odd).toEqual(all.filter((v) => v % 2 !== start));
  expect((await listFiles(dir)).filter((f) => f.includes('spill'))).toEqual([]);
  expect(pool.reserved).toBe(0);
});

test('reclaim frees merge buffers that hold capacity but no rows (emitted, kept for reuse)', async () => {
  const pool = new MemoryPool(64 * 1024 * 1024);
  const prefix = join(dir, 'out');
  // partition buffers of 8 rows (memLimit 128 B / 4 B per row / 4); evictions of <= 10 rows are parked in a
  // merge buffer of up to 40 rows, which is emitted when full and kept, empty, for the next parked rows
  const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: prefix, memoryPool: pool, spillDir: dir, stagingBytes: 0, memLimit: 128, maxBatchRows: 40 });
  for (let i = 0; i < 6; i++) await writer.write(batch(i * 8, 8)); // five evictions of 8 rows: 40 parked, emitted
  const held = pool.reserved;
  const freed = await writer.reclaim(Number.MAX_SAFE_INTEGER);
  expect(pool.reserved).toBeLessThanOrEqual(held - freed); // never claims more than it freed
  // all that is left: the per-row scratch (8 rows x 12 B), the merger's row ids (40 x 4 B) and the partition's state (64 B)
  expect(pool.reserved).toBe(8 * 12 + 40 * 4 + 64);
  const result = await writer.finish();
  expect((await readAll(prefix)).flat()).toEqual(Array.from({ length: 48 }, (_, i) => i));
  expect(result.rows).toBe(48);
});

test('reclaim returns every byte it gave back, the evicted buffers included (it returned only the shrunk ones, and a shared pool then refused a grow it could have granted)', async () => {
  const pool = new MemoryPool(64 * 1024 * 1024);
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'round-robin' }, outputPrefix: prefix, memoryPool: pool, spillDir: dir, stagingBytes: 0, codec: 'none' });
  await writer.write(batch(0, 500)); // rows in the partition buffers, no payload yet
  const before = pool.reserved;
  const freed = await writer.reclaim(Number.MAX_SAFE_INTEGER);
  expect(freed).toBe(before - pool.reserved);
  expect(freed).toBeGreaterThan(500 * 4);
  const result = await writer.finish();
  expect(result.spills).toBe(1);
  expect((await readAll(prefix)).flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 500 }, (_, i) => i));
});
