import { join } from 'node:path';
import { Field, Int32, makeData, RecordBatch, Schema, Struct } from 'apache-arrow';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { ShuffleReader, ShuffleWriter, type ShuffleWriterOptions } from '../src/index.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

// One non-null int32 column (4 bytes a row), one partition: the sizing formula gives
// (memLimit / 4 / 1) >> 2 rows per buffer, so memLimit 160 means buffers of 10 rows.
const TEN_ROW_BUFFERS = { memLimit: 160, memLimitFloor: 160, maxBatchRows: 40 };

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const INT_SCHEMA = new Schema([new Field('v', new Int32(), false)]);
const NESTED_SCHEMA = new Schema([new Field('s', new Struct([new Field('v', new Int32(), false)]), false)]);

/** `count` consecutive values from `first`, flat (int32) or inside a struct. */
function batchOf(first: number, count: number, nested = false): RecordBatch {
  const ints = makeData({ type: new Int32(), length: count, data: Int32Array.from({ length: count }, (_, i) => first + i) });
  const schema = nested ? NESTED_SCHEMA : INT_SCHEMA;
  const column = nested ? makeData({ type: NESTED_SCHEMA.fields[0]!.type, length: count, children: [ints] }) : ints;
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: count, children: [column] }));
}

/** Writes `batches` batches of `rows` consecutive values into one partition; returns the rows of each output batch and every value in order. */
async function shuffle(batches: number, rows: number, options: Partial<ShuffleWriterOptions>, nested = false): Promise<{ sizes: number[]; values: number[] }> {
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: prefix, stagingBytes: 0, ...options });
  for (let b = 0; b < batches; b++) await writer.write(batchOf(b * rows, rows, nested));
  await writer.finish();
  const reader = await ShuffleReader.open(prefix);
  const sizes: number[] = [];
  const values: number[] = [];
  for await (const batch of reader.readPartition(0)) {
    sizes.push(batch.numRows);
    for (const row of batch) values.push(nested ? (row!.s as { v: number }).v : (row!.v as number));
  }
  await reader.close();
  return { sizes, values };
}

const inOrder = (n: number) => Array.from({ length: n }, (_, i) => i);

test('a small buffer that cannot take a whole batch is filled to capacity before it is flushed: batches of 6 rows make payloads of 10', async () => {
  // without the top-up: 6 rows, then 6 + 6 > 10, so every payload would hold 6 rows
  const { sizes, values } = await shuffle(10, 6, { ...TEN_ROW_BUFFERS, mergeThreshold: 0 });
  expect(sizes).toEqual([10, 10, 10, 10, 10, 10]);
  expect(values).toEqual(inOrder(60));
});

test('topped-up payloads of small buffers are merged like any other: batches of 6 rows come out in batches of maxBatchRows (40)', async () => {
  // 10-row payloads (at most mergeMinRows = 0.25 x 40) are parked and merged up to 40 rows; 6-row ones would stop at 36
  const { sizes, values } = await shuffle(20, 6, TEN_ROW_BUFFERS);
  expect(sizes).toEqual([40, 40, 40]);
  expect(values).toEqual(inOrder(120));
});

test('a buffer larger than the merge threshold is flushed as it is, so its payloads stay small enough to merge', async () => {
  // buffers of 12 rows (memLimit 192), mergeMinRows 10: 7-row payloads are merged (7 x 5 = 35), 12-row ones would not be
  const { sizes, values } = await shuffle(10, 7, { memLimit: 192, memLimitFloor: 192, maxBatchRows: 40 });
  expect(sizes).toEqual([35, 35]);
  expect(values).toEqual(inOrder(70));
});

test('a column with nested levels is flushed as it is: its rows cannot be split in two parts', async () => {
  // a struct<int32> row takes 4 bytes too (the struct adds no buffer of its own when it has no nulls)
  const { sizes, values } = await shuffle(10, 6, { ...TEN_ROW_BUFFERS, mergeThreshold: 0 }, true);
  expect(sizes.slice(0, -1).every((rows) => rows === 6)).toBe(true);
  expect(values).toEqual(inOrder(60));
});
