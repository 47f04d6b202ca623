/**
 * Binary values adding up to more than 2 GiB in one partition: no buffer of
 * binary data may pass 2 GiB (int32 offsets address it, and readers refuse
 * larger buffers), so rows held for merging or coalescing go out first.
 * Regression: the writer's payload merger and the reader's BatchCoalescer
 * threw an untyped RangeError ("a partition buffer would hold more than 2 GiB
 * of binary data"); the merger had parked 256-row evictions of 1 MiB values
 * up to maxBatchRows, and the coalescer sized its data for 1,024 rows of them.
 *
 * Every input row points at one shared 1 MiB value, so the input costs
 * nothing; the buffers do (a few GiB).
 */
import { Binary, Field, Int32, makeData, RecordBatch, Schema, Struct } from 'apache-arrow';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { BatchCoalescer } from '../src/reader/batch-coalescer.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { ShuffleWriter } from '../src/writer/shuffle-writer.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const MIB = 1024 * 1024;
const fields = [new Field('k', new Int32(), false), new Field('v', new Binary(), false)];
const schema = new Schema(fields);

/** A value of `bytes` bytes: zeros (they compress) between marker bytes at its ends. */
function sharedValue(bytes: number): Uint8Array {
  const value = new Uint8Array(bytes);
  value[0] = 0xab;
  value[bytes - 1] = 0xcd;
  return value;
}

/** A one-row batch {k, v}, v pointing at all of `value`. */
function oneRow(k: number, value: Uint8Array): RecordBatch {
  const key = makeData({ type: new Int32(), length: 1, data: Int32Array.of(k) });
  const bytes = makeData({ type: new Binary(), length: 1, valueOffsets: Int32Array.of(0, value.byteLength), data: value });
  return new RecordBatch(schema, makeData({ type: new Struct(fields), length: 1, children: [key, bytes] }));
}

/** Each row's key, after checking its value is the shared one; and the most binary data in one batch. */
function rowsOf(batches: readonly RecordBatch[], valueBytes: number): { keys: number[]; largestData: number } {
  const keys: number[] = [];
  let largestData = 0;
  for (const batch of batches) {
    const [key, value] = batch.data.children as [typeof batch.data.children[0], typeof batch.data.children[0]];
    const offsets = value.valueOffsets as Int32Array;
    const data = value.values as Uint8Array;
    largestData = Math.max(largestData, offsets[batch.numRows]! - offsets[0]!);
    for (let i = 0; i < batch.numRows; i++) {
      const [start, end] = [offsets[i]!, offsets[i + 1]!];
      expect([end - start, data[start], data[end - 1]]).toEqual([valueBytes, 0xab, 0xcd]);
      keys.push((key.values as Int32Array)[i]!);
    }
  }
  return { keys, largestData };
}

let dir = '';
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

test('the hash writer cuts a partition of 2,100 values of 1 MiB into batches of under 2 GiB, every row in order', async () => {
  const value = sharedValue(MIB);
  const count = 2100;
  const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'o') });
  for (let k = 0; k < count; k++) await writer.write(oneRow(k, value));
  const result = await writer.finish();
  expect(result.partitionBatches[0]).toBeGreaterThanOrEqual(2);

  const reader = await ShuffleReader.open(join(dir, 'o'));
  const batches: RecordBatch[] = [];
  for await (const batch of reader.readPartition(0)) batches.push(batch);
  await reader.close();
  const { keys, largestData } = rowsOf(batches, MIB);
  expect(keys).toEqual(Array.from({ length: count }, (_, k) => k));
  expect(largestData).toBeLessThan(2 ** 31);
}, 120_000);

test('the coalescer lets what it holds go before a batch whose values would take it past 2 GiB', () => {
  const value = sharedValue(700 * MIB);
  const coalescer = new BatchCoalescer(schema, 8192);
  const out = [0, 1, 2].map((k) => coalescer.push(oneRow(k, value)));
  const last = coalescer.finish();
  expect(out.map((batches) => batches.map((b) => b.numRows))).toEqual([[], [], [2]]);
  expect(last?.numRows).toBe(1);
  const { keys, largestData } = rowsOf([...out.flat(), last!], 700 * MIB);
  expect(keys).toEqual([0, 1, 2]);
  expect(largestData).toBe(1400 * MIB);
}, 60_000);
