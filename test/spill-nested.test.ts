/**
 * Nested and dictionary data under a memory limit far smaller than the input: every row
 * comes back exactly, in order, the pool never goes over its limit, spills happen, and no
 * spill or temporary file is left. Both writers (arrow-js reads the columnar writer's partitions too).
 */
import { readdir } from 'node:fs/promises';
import { Dictionary, Field, Int16, Int32, List, RecordBatch, Schema, Struct, Utf8, Vector, makeData } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { batchBytes, nestedBatch, NESTED_SCHEMA } from '../src/cli/demo-data.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { buildColumn } from './support/columns.js';
import { Rng } from './support/random.js';
import { firstDifference, makeTempDir, readWithArrowJs, removeDir, runShuffle } from './support/shuffle-harness.js';
import { WRITER_KINDS } from '../src/writer-kind.js';

const MiB = 1024 * 1024;
let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

/** The nested shape plus a dictionary column whose dictionary grows (deltas) every few batches. */
function batches(count: number, rows: number): RecordBatch[] {
  const type = new Dictionary(new Utf8(), new Int16(), 1);
  const schema = new Schema([...NESTED_SCHEMA.fields, new Field('city', type, true)]);
  const rng = new Rng(3);
  let dictionary = new Vector([buildColumn(new Utf8(), 50, { bitmap: false, nullRate: 0 }, rng)]);
  return Array.from({ length: count }, (_, b) => {
    if (b % 4 === 3) dictionary = new Vector([...dictionary.data, buildColumn(new Utf8(), 20, { bitmap: false, nullRate: 0 }, rng)]);
    const base = nestedBatch(rows, b + 1);
    const indices = Int16Array.from({ length: rows }, () => rng.int(0, dictionary.length - 1));
    const city = makeData({ type, length: rows, data: indices, dictionary } as never);
    return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children: [...base.data.children, city] }));
  });
}

describe.each(WRITER_KINDS)('%s writer: nested data through a memory limit 10-20 times smaller than the input', (writer) => {
  const large = batches(56, 4096); // ~20 MB of Arrow buffers
  const small = large.slice(0, 30); // ~11 MB

  test.each([
    [8, 1 * MiB, large, 18],
    [200, 1 * MiB, small, 10],
  ])('P = %i, a %i-byte pool', async (numPartitions, limit, input, ratio) => {
    expect(input.reduce((sum, b) => sum + batchBytes(b), 0)).toBeGreaterThan(ratio * limit);
    const pool = new MemoryPool(limit);
    const outcome = await runShuffle(dir, { numPartitions, partitioning: { kind: 'hash', keys: ['key'] }, memoryPool: pool, spillDir: dir }, input, 'map', writer);
    expect(outcome.result.spills).toBeGreaterThan(0);
    expect(pool.peak).toBeLessThanOrEqual(limit);
    expect(pool.reserved).toBe(0);
    outcome.actual.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)).toBeNull());
    if (writer === 'hash') {
      const viaArrowJs = await readWithArrowJs(outcome.prefix);
      viaArrowJs.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `arrow-js partition ${p}`)).toBeNull());
    }
    const left = (await readdir(dir)).filter((name) => !name.startsWith('map.'));
    expect(left).toEqual([]);
  }, 120_000);
});

// Regression: the columnar writer's first estimate of a batch's bytes per row planned every row, which took selection
// scratch for every list element of the whole batch (12 MB for these 3,000,000), and failed with CS_MEMORY_LIMIT under
// a pool the chunked split fits in; it now plans a sample of the rows.
describe.each(WRITER_KINDS)('%s writer: one batch with many more list elements than the pool holds', (writer) => {
  test('30,000 rows of 100-element lists (12 MB) through an 8 MiB pool: every row, in order, within the pool', async () => {
    const rows = 30_000;
    const listType = new List(new Field('item', new Int32(), false));
    const values = makeData({ type: new Int32(), length: rows * 100, data: Int32Array.from({ length: rows * 100 }, (_, i) => i) });
    const lists = makeData({ type: listType, length: rows, valueOffsets: Int32Array.from({ length: rows + 1 }, (_, r) => r * 100), child: values });
    const keys = makeData({ type: new Int32(), length: rows, data: Int32Array.from({ length: rows }, (_, r) => r) });
    const schema = new Schema([new Field('key', new Int32(), false), new Field('items', listType, false)]);
    const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, children: [keys, lists] }));
    const pool = new MemoryPool(8 * MiB);
    const outcome = await runShuffle(dir, { numPartitions: 7, partitioning: { kind: 'hash', keys: ['key'] }, memoryPool: pool, spillDir: dir }, [batch], 'map', writer);
    expect(pool.peak).toBeLessThanOrEqual(8 * MiB);
    expect(pool.reserved).toBe(0);
    outcome.actual.forEach((got, p) => expect(firstDifference(got, outcome.expected[p]!, `partition ${p}`)).toBeNull());
  }, 60_000);
});
