/**
 * Reading with `coalesceRows`: rows come back unchanged and in order whatever the
 * target, and the target only bounds batch sizes: it is not an allocation size.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Int32, Utf8, type RecordBatch } from 'apache-arrow';
import { BatchCoalescer } from '../src/reader/batch-coalescer.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { batchOf, buildColumn, schemaOf, sequenceColumn, utf8Column } from './support/columns.js';
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

describe('BatchCoalescer at its boundaries', () => {
  const schema = schemaOf([{ name: 'id', type: new Int32(), nullable: false }, { name: 's', type: new Utf8() }]);
  /** A batch of ids [start, start + rows) and strings "value <id>". */
  const batchFrom = (start: number, rows: number) => batchOf(schema, [sequenceColumn(start, rows), utf8Column(Array.from({ length: rows }, (_, i) => `value ${start + i}`))], rows);
  const rowsOf = (batches: RecordBatch[]) => batches.flatMap((b) => [...b].map((row) => `${row!.id}:${row!.s}`));

  test('three 60-row batches at 100 rows: 60, 60 and 60, every string its own after each flush (a buffer not cleared kept the strings before)', () => {
    const coalescer = new BatchCoalescer(schema, 100);
    const input = [batchFrom(0, 60), batchFrom(60, 60), batchFrom(120, 60)];
    const out = [...input.flatMap((b) => coalescer.push(b)), coalescer.finish()!];
    expect(out.map((b) => b.numRows)).toEqual([60, 60, 60]);
    expect(out.every((b, i) => b !== input[i])).toBe(true); // merged copies, not the batches passed through
    expect(rowsOf(out)).toEqual(rowsOf(input));
  });

  test('batches filling the target exactly are merged into one; a batch of exactly the target passes through as it is', () => {
    const coalescer = new BatchCoalescer(schema, 100);
    const exact = batchFrom(100, 100);
    const out = [...coalescer.push(batchFrom(0, 50)), ...coalescer.push(batchFrom(50, 50)), ...coalescer.push(exact)];
    const last = coalescer.finish();
    expect(last).toBeNull();
    expect(out.map((b) => b.numRows)).toEqual([100, 100]);
    expect(out[1]).toBe(exact);
    expect(rowsOf(out)).toEqual(rowsOf([batchFrom(0, 200)]));
  });
});
