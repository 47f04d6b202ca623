/**
 * Property, for both writers: whatever combination of sizing and batching options a
 * caller passes (memLimit, memLimitFloor, maxBatchRows, mergeThreshold, resizeThreshold,
 * compressionMinRows, minCompressionSavings, stagingBytes, concurrentTasks, codec; the sort writer's pageBytes and
 * blockBytes) with a bounded pool of 2-64 MiB,
 * a shuffle of narrow or nested rows (1-4 batches of 1 to 8,192 rows, 1 to 2,000 partitions)
 *   1. puts every row in the partition the reference partitioner says, in input order;
 *   2. never holds more than the pool, and gives all of it back;
 *   3. leaves no spill file.
 * Options sized past the pool used to fail with CS_MEMORY_LIMIT where spilling would do
 * (memLimit 64 MiB on a 4 MiB pool; 16 MiB of staging, or 8 MiB sort pages, on one).
 * Seed policy as in property-roundtrip.test.ts: FC_SEED / FC_RUNS override.
 */
import fc from 'fast-check';
import { test } from 'vitest';
import { nestedBatch, narrowBatch } from '../src/cli/demo-data.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { WRITER_KINDS } from '../src/writer-kind.js';
import { firstDifference, removeDir, runShuffle, type WriterOptions } from './support/shuffle-harness.js';
import { listFiles, makeTempDir } from './support/temp-dir.js';

const SEED = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : 0x0b7_1075;
const RUNS = process.env.FC_RUNS !== undefined ? Number(process.env.FC_RUNS) : 24;
const MiB = 1024 * 1024;

/** An option's value, or undefined (the writer's default) half of the time. */
function maybe<T>(...values: T[]): fc.Arbitrary<T | undefined> {
  return fc.oneof(fc.constant(undefined), fc.constantFrom(...values));
}

const caseArb = fc.record({
  writer: fc.constantFrom(...WRITER_KINDS),
  nested: fc.boolean(),
  batchRows: fc.constantFrom(1, 100, 2048, 8192),
  batches: fc.integer({ min: 1, max: 4 }),
  numPartitions: fc.constantFrom(1, 8, 64, 300, 2000),
  poolMiB: fc.constantFrom(2, 4, 16, 64),
  codec: fc.constantFrom('lz4' as const, 'zstd' as const, 'none' as const),
  memLimit: maybe(0, 256 * 1024, 8 * MiB, 512 * MiB),
  memLimitFloor: maybe(0, 64 * 1024, 256 * MiB),
  maxBatchRows: maybe(1, 7, 100, 5000),
  mergeThreshold: maybe(0, 0.5, 1),
  resizeThreshold: maybe(0, 2),
  compressionMinRows: maybe(0, 1000),
  minCompressionSavings: maybe(0, 0.5, 1),
  stagingBytes: maybe(0, MiB, 16 * MiB),
  concurrentTasks: maybe(1, 4),
  pageBytes: maybe(16 * 1024, 8 * MiB),
  blockBytes: maybe(4 * 1024, 8 * MiB),
});

test('any sizing and batching options on a bounded pool: every row in its partition, in order, within the pool, no spill file left', async () => {
  console.log(`property-options: fast-check seed ${SEED}, ${RUNS} runs (override with FC_SEED / FC_RUNS)`);
  await fc.assert(
    fc.asyncProperty(caseArb, async (c) => {
      const dir = await makeTempDir('cs-options-');
      const spillDir = await makeTempDir('cs-options-spill-');
      try {
        const make = c.nested ? nestedBatch : narrowBatch;
        const batches = Array.from({ length: c.batches }, (_, b) => make(c.batchRows, b + 1));
        const pool = new MemoryPool(c.poolMiB * MiB);
        const options: WriterOptions = { numPartitions: c.numPartitions, partitioning: { kind: 'hash', keys: ['key'] }, memoryPool: pool, spillDir, codec: c.codec };
        for (const name of ['memLimit', 'memLimitFloor', 'maxBatchRows', 'mergeThreshold', 'resizeThreshold', 'compressionMinRows', 'minCompressionSavings', 'stagingBytes', 'concurrentTasks', 'pageBytes', 'blockBytes'] as const) {
          if (c[name] !== undefined) options[name] = c[name];
        }
        const outcome = await runShuffle(dir, options, batches, 'map', c.writer);
        for (let p = 0; p < c.numPartitions; p++) {
          const difference = firstDifference(outcome.actual[p]!, outcome.expected[p]!, `partition ${p}'s rows`);
          if (difference !== null) throw new Error(difference);
        }
        if (pool.peak > pool.limit) throw new Error(`the pool peaked at ${pool.peak} bytes, over its ${pool.limit}`);
        if (pool.reserved !== 0) throw new Error(`${pool.reserved} bytes still reserved after finish`);
        const left = await listFiles(spillDir);
        if (left.length > 0) throw new Error(`spill files left: ${left.join(', ')}`);
      } finally {
        await removeDir(dir);
        await removeDir(spillDir);
      }
    }),
    { numRuns: RUNS, seed: SEED },
  );
}, 600_000);
