/**
 * Reading with `coalesceRows`: rows come back unchanged and in order whatever the
 * target, and the target only bounds batch sizes: it is not an allocation size.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Int32, Utf8 } from 'apache-arrow';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { batchOf, buildColumn, schemaOf, sequenceColumn } from './support/columns.js';
import { Rng } from './support/random.js';
import { collect, firstDifference, makeTempDir, removeDir, runShuffle, type ShuffleOutcome } from './support/shuffle-harness.js';

describe('coalesceRows on a small partition', () => {
  let dir = '';
  let outcome: ShuffleOutcome;

  beforeAll(async () => {
    dir = await makeTempDir();
    const schema = schemaOf([{ name: 'id', type: new Int32(), nullable: false }, { name: 's', type: new Utf8() }]);
    const rng = new Rng(99);
    const batches = [0, 1].map((b) => batchOf(schema, [sequenceColumn(b * 10, 10), buildColumn(new Utf8(), 10, { bitmap: true, nullRate: 0.3 }, rng)], 10));
    outcome = await runShuffle(dir, { numPartitions: 1, partitioning: { kind: 'single' }, codec: 'lz4' }, batches);
  });

  afterAll(async () => {
    await removeDir(dir);
  });

  test.each([25, 1000])('coalesceRows %i merges the two stored 10-row batches into one batch', async (target) => {
    const reader = await ShuffleReader.open(outcome.prefix);
    try {
      const { rows, sizes } = await collect(reader.readPartition(0, { coalesceRows: target }));
      expect(firstDifference(rows, outcome.expected[0]!)).toBeNull();
      expect(sizes).toEqual([20]);
    } finally {
      await reader.close();
    }
  });

  // Regression: BatchCoalescer used to pre-allocate `targetRows` rows per column and a
  // `targetRows`-long identity array on the first push, whatever the rows present: 2^31 - 1
  // (an accepted value) overflowed the buffer size computation (RangeError "Invalid typed array
  // length: -4"); 2^30 took over a minute and ~4 GB for these 20 rows.
  test('coalesceRows 2^31 - 1 (a valid target far above the rows present) yields the 20 rows as one batch', async () => {
    const reader = await ShuffleReader.open(outcome.prefix);
    try {
      const { rows, sizes } = await collect(reader.readPartition(0, { coalesceRows: 2 ** 31 - 1 }));
      expect(firstDifference(rows, outcome.expected[0]!)).toBeNull();
      expect(sizes).toEqual([20]);
    } finally {
      await reader.close();
    }
  });
});
