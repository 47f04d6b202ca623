import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { makeTable, type RecordBatch } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createShuffleWriter, ShuffleError, ShuffleReader, WRITER_KINDS, type ByteRangeSource, type WriterKind } from '../src/index.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';
import { failure } from './support/failure.js';

let dir: string;
let prefix: string;
afterEach(async () => removeDir(dir));

/** 100 rows (v = 0..99) round-robin into 4 partitions, batches of 10, by the given writer at `at`. */
async function writeOutput(kind: WriterKind, at: string): Promise<void> {
  const writer = await createShuffleWriter(kind, { numPartitions: 4, partitioning: { kind: 'round-robin' }, outputPrefix: at, maxBatchRows: 10 });
  await writer.write(makeTable({ v: Int32Array.from({ length: 100 }, (_, i) => i) }).batches[0]! as RecordBatch);
  await writer.finish();
}

async function rowsOf(batches: AsyncIterable<RecordBatch>): Promise<number[]> {
  const values: number[] = [];
  for await (const batch of batches) for (const row of batch) values.push(row!.v as number);
  return values;
}

/** An in-memory ByteRangeSource: what a remote fetcher would implement. */
class MemorySource implements ByteRangeSource {
  reads = 0;
  constructor(readonly name: string, private readonly bytes: Uint8Array) {}
  async size() { return this.bytes.byteLength; }
  async read(offset: number, length: number) { this.reads++; return this.bytes.slice(offset, offset + length); }
  async close() {}
}

describe.each(WRITER_KINDS)('ShuffleReader on the %s writer\'s output', (kind) => {
  beforeEach(async () => {
    dir = await makeTempDir();
    prefix = join(dir, 'out');
    await writeOutput(kind, prefix);
  });

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
    expect(await failure(ShuffleReader.open(prefix))).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: `${prefix}.data`, offset: bytes.length - 8 } });
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

  test.each(['.data', '.checksum.CRC32C', '.index'])('a directory in place of the %s file is CS_IO naming it (its size, 4096, was taken for the file\'s)', async (suffix) => {
    await rm(prefix + suffix);
    await mkdir(prefix + suffix);
    const error = await failure(ShuffleReader.open(prefix));
    expect(error.code).toBe('CS_IO');
    expect(error.message).toMatch(/it is a directory/);
    expect(error.where.file).toBe(prefix + suffix);
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

  test('partitions that disagree about the schema are CS_CORRUPT_DATA when read as one range', async () => {
    const other = join(dir, 'other');
    const writer = await createShuffleWriter(kind, { numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: other });
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
});

/** An output's data and index in memory, made of the given partitions' bytes. */
function memoryOutput(partitions: readonly Uint8Array[]): { data: MemorySource; index: MemorySource } {
  const data = Buffer.concat(partitions);
  const index = new Uint8Array((partitions.length + 1) * 8);
  let at = 0;
  partitions.forEach((p, i) => new DataView(index.buffer).setBigInt64((i + 1) * 8, BigInt((at += p.byteLength)), false));
  return { data: new MemorySource('mem:data', data), index: new MemorySource('mem:index', index) };
}

describe("sort-writer partitions: the format is told per partition, and broken framing is CS_CORRUPT_DATA where it is", () => {
  let hash: ShuffleReader;
  let sort: ShuffleReader;
  beforeEach(async () => {
    dir = await makeTempDir();
    await writeOutput('hash', join(dir, 'hash'));
    await writeOutput('sort', join(dir, 'sort'));
    hash = await ShuffleReader.open(join(dir, 'hash'));
    sort = await ShuffleReader.open(join(dir, 'sort'));
  });
  afterEach(async () => {
    await hash.close();
    await sort.close();
  });

  test('an output mixing partitions of both writers (same schema) reads as one range, each partition in its own format', async () => {
    const mixed = memoryOutput([await hash.partitionBytes(0), await sort.partitionBytes(1), await hash.partitionBytes(2), await sort.partitionBytes(3)]);
    const reader = await ShuffleReader.fromSources(mixed);
    expect((await rowsOf(reader.readPartitions(0, 4))).sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(await rowsOf(reader.readPartition(1))).toEqual(await rowsOf(sort.readPartition(1)));
  });

  /** Partition 0 of the sort output, edited; reading it must fail with `code` and a message matching `message`. */
  async function expectBroken(edit: (bytes: Uint8Array) => Uint8Array, message: RegExp, code = 'CS_CORRUPT_DATA'): Promise<ShuffleError> {
    const bytes = edit((await sort.partitionBytes(0)).slice());
    const reader = await ShuffleReader.fromSources(memoryOutput([bytes]));
    const error = await failure(rowsOf(reader.readPartition(0)));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
    expect(error.where.partition).toBe(0);
    return error;
  }

  test('a partition cut before its end marker', async () => {
    await expectBroken((b) => b.subarray(0, b.byteLength - 4), /ends without its end marker/);
  });

  test('bytes after the end marker', async () => {
    await expectBroken((b) => Uint8Array.from([...b, 0, 0, 0, 0]), /4 bytes follow the end marker/);
  });

  test('a block whose stored bytes run past the partition, located at the block', async () => {
    const headerLength = (await sort.partitionBytes(0)).byteLength - 4 - blockBytes(await sort.partitionBytes(0));
    const error = await expectBroken((b) => {
      new DataView(b.buffer).setUint32(headerLength + 8, 1 << 20, true);
      return b;
    }, /runs past the end of the partition/);
    expect(error.where.offset).toBe(headerLength);
  });

  test('an unknown format version, and an unknown codec id (CS_UNSUPPORTED_CODEC)', async () => {
    await expectBroken((b) => ((b[4] = 9), b), /unknown row format version 9/);
    await expectBroken((b) => ((b[5] = 7), b), /codec id 7/, 'CS_UNSUPPORTED_CODEC');
  });

  test('schema() of a sort output reads the header only', async () => {
    const full = await sort.partitionBytes(0);
    const data = new MemorySource('mem:data', Uint8Array.from([...full.subarray(0, full.byteLength - 30), ...new Uint8Array(30).fill(0xee)]));
    const reader = await ShuffleReader.fromSources({ data, index: memoryOutput([full]).index });
    expect((await reader.schema())?.fields.map((f) => f.name)).toEqual(['v']);
    expect(data.reads).toBe(2); // 16 bytes to find the header's length, then the header
  });
});

/** Bytes of a partition's blocks: everything between its header and its end marker. */
function blockBytes(partition: Uint8Array): number {
  const view = new DataView(partition.buffer, partition.byteOffset, partition.byteLength);
  const headerLength = 16 + view.getInt32(12, true);
  return partition.byteLength - 4 - headerLength;
}
