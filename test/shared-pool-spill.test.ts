/**
 * A spill another writer asks for (its grow reclaims this writer) while this writer is
 * itself waiting for memory: when the wait ends, the spill may still be writing this
 * writer's pages. The sort writer used to go on adding rows to the pages and pointers
 * then, and the spill, when done, reset them: those rows were lost (hundreds of rows per
 * run, finish() still counting them). Both writers, written concurrently on one pool.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { MemoryPool } from '../src/memory/memory-pool.js';
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
