import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { makeTable, type RecordBatch } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ShuffleError, ShuffleReader, ShuffleWriter, type ByteRangeSource } from '../src/index.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
let prefix: string;
beforeEach(async () => {
  dir = await makeTempDir();
  prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions: 4, partitioning: { kind: 'round-robin' }, outputPrefix: prefix, maxBatchRows: 10 });
  await writer.write(makeTable({ v: Int32Array.from({ length: 100 }, (_, i) => i) }).batches[0]! as RecordBatch);
  await writer.finish();
});
afterEach(async () => removeDir(dir));

async function rowsOf(batches: AsyncIterable<RecordBatch>): Promise<number[]> {
  const values: number[] = [];
  for await (const batch of batches) for (const row of batch) values.push(row!.v as number);
  return values;
}

async function failure(promise: Promise<unknown>): Promise<ShuffleError> {
  const error = await promise.then(() => null, (e: unknown) => e);
  expect(error).toBeInstanceOf(ShuffleError);
  return error as ShuffleError;
}

/** An in-memory ByteRangeSource: what a remote fetcher would implement. */
class MemorySource implements ByteRangeSource {
  reads = 0;
  constructor(readonly name: string, private readonly bytes: Uint8Array) {}
  async size() { return this.bytes.byteLength; }
  async read(offset: number, length: number) { this.reads++; return this.bytes.slice(offset, offset + length); }
  async close() {}
}

describe('ShuffleReader', () => {
  test('reads every partition, and a range of partitions in partition order', async () => {
    const reader = await ShuffleReader.open(prefix);
    expect(reader.numPartitions).toBe(4);
    const all = await rowsOf(reader.readPartitions(0, 4));
    expect(all.slice().sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    const first = await rowsOf(reader.readPartition(0));
    const second = await rowsOf(reader.readPartition(1));
    expect(await rowsOf(reader.readPartitions(0, 2))).toEqual([...first, ...second]);
    await reader.close();
  });

  test('coalesceRows merges the small stored batches into batches of at most the target size', async () => {
    const reader = await ShuffleReader.open(prefix);
    const stored: number[] = [];
    for await (const batch of reader.readPartitions(0, 4)) stored.push(batch.numRows);
    expect(Math.max(...stored)).toBe(10); // maxBatchRows
    const sizes: number[] = [];
    for await (const batch of reader.readPartitions(0, 4, { coalesceRows: 40 })) sizes.push(batch.numRows);
    expect(sizes.reduce((a, b) => a + b)).toBe(100);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(40);
    expect(sizes.slice(0, -1).every((n) => n > 40 - 10)).toBe(true);
    expect(await rowsOf(reader.readPartitions(0, 4, { coalesceRows: 40 }))).toEqual(await rowsOf(reader.readPartitions(0, 4)));
    await reader.close();
  });

  test('reads through any ByteRangeSource, e.g. an in-memory one', async () => {
    const data = new MemorySource('mem:data', new Uint8Array(await readFile(`${prefix}.data`)));
    const index = new MemorySource('mem:index', new Uint8Array(await readFile(`${prefix}.index`)));
    const reader = await ShuffleReader.fromSources({ data, index });
    expect((await rowsOf(reader.readPartitions(0, 4))).length).toBe(100);
  });

  test('schema() reads only the first message, so a damaged partition elsewhere does not matter', async () => {
    const bytes = new Uint8Array(await readFile(`${prefix}.data`));
    bytes[bytes.length - 20]! ^= 0xff; // inside the last partition
    await writeFile(`${prefix}.data`, bytes);
    const reader = await ShuffleReader.open(prefix);
    expect((await reader.schema())?.fields.map((f) => f.name)).toEqual(['v']);
    await reader.close();
  });

  test('a flipped bit is CS_CHECKSUM_MISMATCH naming file and partition, and no row of that partition is yielded', async () => {
    const bytes = new Uint8Array(await readFile(`${prefix}.data`));
    const reader0 = await ShuffleReader.open(prefix);
    const start = reader0.offsets[2]!;
    await reader0.close();
    bytes[start + 200]! ^= 0x01;
    await writeFile(`${prefix}.data`, bytes);
    const reader = await ShuffleReader.open(prefix);
    const seen: number[] = [];
    const error = await failure((async () => {
      for await (const batch of reader.readPartition(2)) seen.push(batch.numRows);
    })());
    expect(error.code).toBe('CS_CHECKSUM_MISMATCH');
    expect(error.where).toMatchObject({ file: `${prefix}.data`, partition: 2, offset: start });
    expect(seen).toEqual([]);
    await reader.close();
  });

  test('a truncated data file is CS_CORRUPT_DATA', async () => {
    const bytes = await readFile(`${prefix}.data`);
    await writeFile(`${prefix}.data`, bytes.subarray(0, bytes.length - 8));
    expect((await failure(ShuffleReader.open(prefix))).code).toBe('CS_CORRUPT_DATA');
  });

  test('an index whose offsets decrease is CS_CORRUPT_DATA naming the entry', async () => {
    const index = new Uint8Array(await readFile(`${prefix}.index`));
    new DataView(index.buffer).setBigInt64(16, 1n, false);
    await writeFile(`${prefix}.index`, index);
    const error = await failure(ShuffleReader.open(prefix));
    expect(error.code).toBe('CS_CORRUPT_DATA');
    expect(error.message).toMatch(/index entry 2/);
  });

  test('an index of the wrong size is CS_CORRUPT_DATA', async () => {
    await writeFile(`${prefix}.index`, new Uint8Array(12));
    expect((await failure(ShuffleReader.open(prefix))).code).toBe('CS_CORRUPT_DATA');
  });

  test('a missing output is CS_FILE_NOT_FOUND', async () => {
    expect((await failure(ShuffleReader.open(join(dir, 'nothing')))).code).toBe('CS_FILE_NOT_FOUND');
  });

  test('partition numbers outside the output are CS_INVALID_ARGUMENT', async () => {
    const reader = await ShuffleReader.open(prefix);
    expect(() => reader.partitionLength(4)).toThrow(ShuffleError);
    expect((await failure(rowsOf(reader.readPartitions(2, 5)))).code).toBe('CS_INVALID_ARGUMENT');
    await reader.close();
  });
});

test('partitions that disagree about the schema are CS_CORRUPT_DATA when read as one range', async () => {
  const other = join(dir, 'other');
  const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: other });
  await writer.write(makeTable({ w: Float64Array.of(1, 2) }).batches[0]! as RecordBatch);
  await writer.finish();
  const ours = await ShuffleReader.open(prefix);
  const p0 = await ours.partitionBytes(0);
  await ours.close();
  const theirs = new Uint8Array(await readFile(`${other}.data`));
  const data = Buffer.concat([p0, theirs]);
  const index = new Uint8Array(24);
  const view = new DataView(index.buffer);
  view.setBigInt64(8, BigInt(p0.byteLength), false);
  view.setBigInt64(16, BigInt(data.byteLength), false);
  const reader = await ShuffleReader.fromSources({ data: new MemorySource('mem:data', data), index: new MemorySource('mem:index', index) });
  const error = await failure(rowsOf(reader.readPartitions(0, 2)));
  expect(error.code).toBe('CS_CORRUPT_DATA');
  expect(error.where.partition).toBe(1);
});
