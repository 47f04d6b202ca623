import { join } from 'node:path';
import { makeData, RecordBatch, Schema, Field, Utf8, LargeUtf8, Struct, type DataType } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ShuffleReader, ShuffleWriter, UNBOUNDED_MEM_LIMIT } from '../src/index.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

function strings(values: string[], type: DataType = new Utf8()): RecordBatch {
  const bytes = new TextEncoder().encode(values.join(''));
  const large = type instanceof LargeUtf8;
  const offsets = large ? new BigInt64Array(values.length + 1) : new Int32Array(values.length + 1);
  let pos = 0;
  values.forEach((v, i) => {
    pos += new TextEncoder().encode(v).length;
    offsets[i + 1] = (large ? BigInt(pos) : pos) as never;
  });
  const schema = new Schema([new Field('s', type, false)]);
  const child = makeData({ type, length: values.length, valueOffsets: offsets as never, data: bytes } as never);
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: values.length, children: [child] }));
}

async function readAll(prefix: string): Promise<string[]> {
  const reader = await ShuffleReader.open(prefix);
  const out: string[] = [];
  for await (const batch of reader.readPartitions(0, reader.numPartitions)) for (const row of batch) out.push(row!.s as string);
  await reader.close();
  return out;
}

test.each([new Utf8(), new LargeUtf8()])('binary buffers grow mid-batch when values get much longer than the running average (%s)', async (type) => {
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions: 3, partitioning: { kind: 'round-robin' }, outputPrefix: prefix, codec: 'lz4' });
  const short = Array.from({ length: 3000 }, (_, i) => `s${i}`);
  const long = Array.from({ length: 300 }, (_, i) => `${i}:`.padEnd(5000 + i, String.fromCharCode(97 + (i % 26))));
  await writer.write(strings(short, type));
  await writer.write(strings(long, type));
  await writer.write(strings(short.slice(0, 10), type));
  await writer.finish();
  const expected = [...short, ...long, ...short.slice(0, 10)];
  expect((await readAll(prefix)).sort()).toEqual(expected.sort());
});

test('a partition buffer becomes a record batch each time it fills: 250 rows at maxBatchRows 100 give 100, 100, 50', async () => {
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: prefix, maxBatchRows: 100, stagingBytes: 0 });
  for (let i = 0; i < 25; i++) await writer.write(strings(Array.from({ length: 10 }, (_, j) => `${i}-${j}`)));
  const result = await writer.finish();
  expect(result.partitionBatches).toEqual([3]);
  const reader = await ShuffleReader.open(prefix);
  const sizes: number[] = [];
  for await (const batch of reader.readPartition(0)) sizes.push(batch.numRows);
  expect(sizes).toEqual([100, 100, 50]);
  await reader.close();
});

test('a skewed chunk (every row to one of 8 partitions) is halved until it fits: every batch has at most maxBatchRows rows', async () => {
  const prefix = join(dir, 'out');
  // chunks of partitionBufferRows (100) x 8 partitions = 800 rows, all for one partition
  const writer = await ShuffleWriter.create({ numPartitions: 8, partitioning: { kind: 'hash', keys: ['s'] }, outputPrefix: prefix, maxBatchRows: 100, stagingBytes: 0 });
  await writer.write(strings(Array.from({ length: 2000 }, () => 'same key')));
  await writer.finish();
  const reader = await ShuffleReader.open(prefix);
  const sizes: number[] = [];
  for await (const batch of reader.readPartitions(0, 8)) sizes.push(batch.numRows);
  await reader.close();
  expect(sizes.reduce((a, b) => a + b, 0)).toBe(2000);
  expect(Math.max(...sizes)).toBe(100);
});

describe('without a pool limit, buffers are sized for UNBOUNDED_MEM_LIMIT (Gluten kMaxMemLimit, 1 GiB), not the 128 MiB floor', () => {
  // 6,000-byte rows at P = 2: the floor gives 134217728 / 6004 / 2 >> 2 = 2794 rows; 1 GiB gives min(22,355, 4096) = 4096.
  // (Buffers of at most 1,024 rows would hide the difference: the payload merger joins their evictions into 4,096-row batches.)
  const rows = 8192;
  const value = (i: number) => `${i}:`.padEnd(6000, 'x');
  async function batchesPerPartition(options: { memLimit?: number }): Promise<number[]> {
    const prefix = join(dir, `out-${options.memLimit ?? 'default'}`);
    const writer = await ShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'round-robin' }, outputPrefix: prefix, ...options });
    for (let start = 0; start < rows; start += 1024) await writer.write(strings(Array.from({ length: 1024 }, (_, i) => value(start + i))));
    const result = await writer.finish();
    const read = await readAll(prefix);
    expect(read.length).toBe(rows);
    expect(new Set(read)).toEqual(new Set(Array.from({ length: rows }, (_, i) => value(i))));
    return result.partitionBatches;
  }

  test('by default each partition\'s 4,096 rows fill one batch', async () => {
    expect(UNBOUNDED_MEM_LIMIT).toBe(1024 * 1024 * 1024);
    expect(await batchesPerPartition({})).toEqual([1, 1]);
  });

  test('memLimit 0 sizes them for the floor: 2,794 rows, so each partition flushes 2,560 rows (five 512-row shares) and then 1,536', async () => {
    expect(await batchesPerPartition({ memLimit: 0 })).toEqual([2, 2]);
  });
});
