/**
 * The benchmark's measurement (bench/measure.ts): every shuffle of a case
 * gets a result (it throws if a read gives back other than every row); a
 * shuffle that cannot work within a memory limit is a recorded result, not a
 * crash of the suite; the output a timed write replaces is removed before it
 * (freshOutput), and only that output; without a limit the library writers'
 * buffers stay warm through pauses longer than the default pool keeps them.
 */
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { freshOutput, measureCase, SHUFFLES, UNLIMITED_POOL, type CaseSpec, type Input } from '../bench/measure.js';
import { batchesOf, inputBytesOf, SHAPES } from '../bench/shapes.js';
import { outputPaths } from '../src/index.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-bench-measure-')));
afterEach(async () => removeDir(dir));

function narrowInput(rows: number): Input {
  const shape = SHAPES.narrow;
  const batches = batchesOf(shape, rows);
  return { shape: shape.name, key: shape.key, schema: shape.schema, batches, rows, inputBytes: inputBytesOf(batches) };
}

const specsOf = (partitions: number, memoryLimit: number | null, shuffles = SHUFFLES): CaseSpec[] =>
  shuffles.map((shuffle) => ({ shape: 'narrow', shuffle, partitions, codec: 'lz4', memoryLimit }));

test('every shuffle of a case gets a result with its timings and what its write reported', async () => {
  const input = narrowInput(10_000);
  const results = await measureCase(specsOf(8, null), () => input, dir, { rounds: 3, warmup: 1 });
  expect(results.map((r) => r.shuffle)).toEqual([...SHUFFLES]);
  for (const r of results) {
    expect(r.error).toBeUndefined();
    expect(r.rows).toBe(10_000);
    expect(r.writeMs).toBeGreaterThan(0);
    expect(r.readMs).toBeGreaterThan(0);
    expect(r.outputBytes).toBeGreaterThan(0);
    expect(r.peakMemoryBytes).toBeGreaterThanOrEqual(0);
  }
  // the library writers' figures are exact: a write of 10,000 rows reserves memory and spills nothing without a limit
  for (const r of results.filter((r) => r.shuffle !== 'object')) {
    expect(r.peakMemoryBytes).toBeGreaterThan(0);
    expect(r.spills).toBe(0);
  }
});

test('without a limit the library writers give their buffers to a pool that keeps them through a pause longer than 2 s (the default pool lets them go)', async () => {
  const input = narrowInput(50_000);
  await measureCase(specsOf(8, null, ['columnar']), () => input, dir, { rounds: 1, warmup: 0 });
  const idle = UNLIMITED_POOL.idle;
  expect(idle, 'idle buffers after the write').toBeGreaterThan(0);
  expect(UNLIMITED_POOL.reserved).toBe(0);
  await new Promise((resolve) => setTimeout(resolve, 2_200));
  expect(UNLIMITED_POOL.idle).toBe(idle);
});

test('a shuffle that cannot work within its memory limit is a failed result; the others are still measured', async () => {
  const input = narrowInput(20_000);
  // 16 KiB cannot hold the columnar writer's partition buffers at P = 1000, nor the sort writer's first page
  const results = await measureCase(specsOf(1000, 16 * 1024, ['columnar', 'sort']), () => input, dir, { rounds: 2, warmup: 0 });
  expect(results).toHaveLength(2);
  for (const r of results) {
    expect(r.error).toBe('CS_MEMORY_LIMIT');
    expect(r.writeMs).toBeNaN();
  }
});

test('freshOutput removes the output at a prefix (data, index and checksum files) and nothing else', async () => {
  const prefix = join(dir, 'map-0');
  const paths = outputPaths(prefix);
  for (const path of [paths.data, paths.index, paths.checksum, join(dir, 'map-1.data'), join(dir, 'map-0.notes')]) await writeFile(path, 'x');
  await freshOutput(prefix);
  expect((await readdir(dir)).sort()).toEqual(['map-0.notes', 'map-1.data']);
  await freshOutput(prefix); // nothing to remove: no error
});
