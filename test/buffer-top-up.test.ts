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

/**
 * Two partitions of 10-row buffers (memLimit 320: (320 / 4 / 2) >> 2 = 10); each 20-row batch is one chunk.
 * Batches bring partition 0 `counts[b % 2]` rows and partition 1 the rest, value = row number within its partition.
 */
async function shuffleByTurns(batches: number, counts: [number, number]): Promise<{ sizes: number[][]; values: number[][] }> {
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({
    numPartitions: 2,
    partitioning: { kind: 'partition-id', column: 'pid' },
    outputPrefix: prefix,
    stagingBytes: 0,
    memLimit: 320,
    memLimitFloor: 320,
    maxBatchRows: 40,
    mergeThreshold: 0,
  });
  const schema = new Schema([new Field('pid', new Int32(), false), INT_SCHEMA.fields[0]!]);
  const next = [0, 0];
  for (let b = 0; b < batches; b++) {
    const pids = Int32Array.from({ length: 20 }, (_, i) => (i < counts[b % 2]! ? 0 : 1));
    const values = Int32Array.from(pids, (p) => next[p]!++);
    const children = [makeData({ type: new Int32(), length: 20, data: pids }), makeData({ type: new Int32(), length: 20, data: values })];
    await writer.write(new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 20, children })));
  }
  await writer.finish();
  const reader = await ShuffleReader.open(prefix);
  const sizes: number[][] = [[], []];
  const values: number[][] = [[], []];
  for (const p of [0, 1]) {
    for await (const batch of reader.readPartition(p)) {
      sizes[p]!.push(batch.numRows);
      for (const row of batch) values[p]!.push(row!.v as number);
    }
  }
  await reader.close();
  return { sizes, values };
}

test('a buffer grown for one chunk\'s rows keeps its size: partitions that get 14 and 6 rows by turns come out in batches of 14', async () => {
  // Gluten's rule shrank a buffer grown to 14 back to 10 at every 6-row chunk (flushing 14 rows) and grew it again
  // at the next 14-row one (flushing 6): batches of 14, 6, 14, 6, ... and a re-allocation per chunk
  const { sizes, values } = await shuffleByTurns(12, [14, 6]);
  expect(sizes[0]).toEqual([14, 14, 14, 14, 14, 14, 14, 14, 8]);
  // partition 1's fresh 10-row buffer held its first 6 rows when 14 came: flushed as it was, then grown to 14
  expect(sizes[1]).toEqual([6, 14, 14, 14, 14, 14, 14, 14, 14, 2]);
  expect(values[0]).toEqual(inOrder(6 * 14 + 6 * 6));
  expect(values[1]).toEqual(inOrder(6 * 6 + 6 * 14));
});
