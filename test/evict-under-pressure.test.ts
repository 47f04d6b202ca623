/**
 * An eviction whose copy the pool cannot hold (rows of a megabyte each, a pool of a
 * few): the columnar writer writes the rows straight from the partition buffer into
 * a spill run instead of failing with CS_MEMORY_LIMIT. Copying a full partition
 * buffer into the payload merger, or into a payload's arena with room for the
 * compressor's output, needs once or twice the buffer's bytes again; with a 2 MiB
 * buffer pinned (the chunk being split relies on it) in a 4 MiB pool that memory
 * does not exist, while the spill path needs none (it writes the buffer's own views).
 * And a batch as large as the pool is split in chunks of a quarter of the memory,
 * not of one row per partition (which, for 8 partitions and rows of 512 KiB, is
 * the whole pool: every partition of a chunk is pinned while it is split).
 */
import { join } from 'node:path';
import { Field, Int32, makeData, RecordBatch, Schema, Struct, Utf8 } from 'apache-arrow';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { MemoryPool, ShuffleReader, ShuffleWriter } from '../src/index.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

const MiB = 1024 * 1024;
let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const schema = new Schema([new Field('v', new Int32(), false), new Field('s', new Utf8(), false)]);

/** `rows` rows v = from, from + 1, ..., each with a string of `bytes` bytes (all the byte v % 251). */
function wideBatch(from: number, rows: number, bytes: number): RecordBatch {
  const values = Int32Array.from({ length: rows }, (_, i) => from + i);
  const offsets = Int32Array.from({ length: rows + 1 }, (_, i) => i * bytes);
  const data = new Uint8Array(rows * bytes);
  for (let i = 0; i < rows; i++) data.fill((from + i) % 251, i * bytes, (i + 1) * bytes);
  const children = [makeData({ type: new Int32(), length: rows, data: values }), makeData({ type: new Utf8(), length: rows, valueOffsets: offsets, data })];
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children }));
}

async function readAll(prefix: string): Promise<{ v: number; length: number; fill: boolean }[][]> {
  const reader = await ShuffleReader.open(prefix);
  const out: { v: number; length: number; fill: boolean }[][] = [];
  for (let p = 0; p < reader.numPartitions; p++) {
    const rows: { v: number; length: number; fill: boolean }[] = [];
    for await (const b of reader.readPartition(p)) {
      const [vs, ss] = b.data.children;
      const offsets = ss!.valueOffsets as Int32Array;
      const bytes = ss!.values as Uint8Array;
      for (let i = 0; i < b.numRows; i++) {
        const v = (vs!.values as Int32Array)[i]!;
        const value = bytes.subarray(offsets[i]!, offsets[i + 1]!);
        rows.push({ v, length: value.length, fill: value.every((x) => x === v % 251) });
      }
    }
    out.push(rows);
  }
  await reader.close();
  return out;
}

test.each([
  ['one partition (every eviction goes to the payload merger)', 1],
  ['8 partitions, round-robin', 8],
])('rows of 1 MiB, batches of two, a 4 MiB pool, %s: every row comes back in order, within the limit', async (_, numPartitions) => {
  const pool = new MemoryPool(4 * MiB);
  const prefix = join(dir, 'out');
  const partitioning = numPartitions === 1 ? ({ kind: 'single' } as const) : ({ kind: 'round-robin' } as const);
  const writer = await ShuffleWriter.create({ numPartitions, partitioning, outputPrefix: prefix, memoryPool: pool, spillDir: dir });
  const batches = 12;
  for (let b = 0; b < batches; b++) await writer.write(wideBatch(2 * b, 2, MiB));
  const result = await writer.finish();
  expect(result.rows).toBe(2 * batches);
  expect(result.spills).toBeGreaterThan(0);
  expect(pool.peak).toBeLessThanOrEqual(4 * MiB);
  expect(pool.reserved).toBe(0);
  const partitions = await readAll(prefix);
  const all = partitions.flat();
  expect(all.every((r) => r.length === MiB && r.fill)).toBe(true);
  expect(all.map((r) => r.v).sort((a, b) => a - b)).toEqual(Array.from({ length: 2 * batches }, (_, i) => i));
  for (const rows of partitions) expect(rows.map((r) => r.v)).toEqual([...rows.map((r) => r.v)].sort((a, b) => a - b));
  expect((await listFiles(dir)).filter((f) => !f.startsWith('out.'))).toEqual([]);
});

test('rows of 512 KiB, batches of 8 (each as large as the pool), 8 partitions, a 4 MiB pool: chunks of a quarter of the memory, every row back in order', async () => {
  const pool = new MemoryPool(4 * MiB);
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions: 8, partitioning: { kind: 'round-robin' }, outputPrefix: prefix, memoryPool: pool, spillDir: dir });
  const batches = 6;
  for (let b = 0; b < batches; b++) await writer.write(wideBatch(8 * b, 8, 512 * 1024));
  const result = await writer.finish();
  expect(result.rows).toBe(8 * batches);
  expect(result.spills).toBeGreaterThan(0);
  expect(pool.peak).toBeLessThanOrEqual(4 * MiB);
  expect(pool.reserved).toBe(0);
  const partitions = await readAll(prefix);
  expect(partitions.flat().every((r) => r.length === 512 * 1024 && r.fill)).toBe(true);
  expect(partitions.flat().map((r) => r.v).sort((a, b) => a - b)).toEqual(Array.from({ length: 8 * batches }, (_, i) => i));
  for (const rows of partitions) expect(rows.map((r) => r.v)).toEqual([...rows.map((r) => r.v)].sort((a, b) => a - b));
});
