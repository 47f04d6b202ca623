/**
 * The benchmark's naive object-row shuffle (bench/object-row-shuffle.ts) is a
 * real shuffle, not a stand-in: on every benchmark shape and every codec it
 * gives back exactly the input rows (nested values too) (every value's bytes, through JS objects,
 * v8.serialize and arrow-js builders), each row in the partition its key
 * hashes to, in input order.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { RecordBatch } from 'apache-arrow';
import { partitionOfKey, readObjectRows, writeObjectRows } from '../bench/object-row-shuffle.js';
import { batchesOf, SHAPES } from '../bench/shapes.js';
import type { CodecName } from '../src/index.js';
import { rowsOf } from './support/rows.js';
import { firstDifference } from './support/shuffle-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-object-rows-')));
afterEach(async () => removeDir(dir));

describe.each(['narrow', 'wide', 'nested'] as const)('the %s shape', (shapeName) => {
  const shape = SHAPES[shapeName];
  const batches = batchesOf(shape, 9000); // two batches, the second a short one

  test.each<CodecName>(['lz4', 'zstd', 'none'])('codec %s: every row comes back, in the partition of its key, in input order', async (codec) => {
    const numPartitions = 7;
    const prefix = join(dir, `map-${codec}`);
    const keyColumn = shape.schema.fields.findIndex((f) => f.name === shape.key);
    const expected: string[][] = Array.from({ length: numPartitions }, () => []);
    for (const batch of batches) {
      const keys = batch.getChildAt(keyColumn)!;
      rowsOf(batch).forEach((row, i) => expected[partitionOfKey(keys.get(i), numPartitions)]!.push(row));
    }
    const result = await writeObjectRows(batches, { numPartitions, key: shape.key, codec, outputPrefix: prefix });
    expect(result.rows).toBe(9000);
    expect(result.partitionRows).toEqual(expected.map((rows) => rows.length));
    expect(result.partitionLengths.reduce((a, b) => a + b, 0)).toBe(result.bytesWritten);

    const read: RecordBatch[] = [];
    for await (const batch of readObjectRows(prefix, shape.schema, codec)) read.push(batch);
    const nonEmpty = expected.filter((rows) => rows.length > 0);
    expect(read.map((b) => b.numRows)).toEqual(nonEmpty.map((rows) => rows.length));
    read.forEach((batch, k) => expect(firstDifference(rowsOf(batch), nonEmpty[k]!, `partition ${k}`)).toBeNull());
    expect(read[0]!.schema.fields.map((f) => String(f.type))).toEqual(shape.schema.fields.map((f) => String(f.type)));
  });
});

test('keys spread over the partitions (no partition gets more than twice its share)', () => {
  const counts = new Array<number>(200).fill(0);
  for (let k = 0; k < 200_000; k++) counts[partitionOfKey(BigInt(k * 7919), 200)]!++;
  expect(Math.max(...counts)).toBeLessThan(2 * 1000);
  expect(Math.min(...counts)).toBeGreaterThan(1000 / 2);
});
