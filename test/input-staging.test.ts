/**
 * The hash writer's staging of small input batches (src/writer/input-staging.ts):
 * batches that bring few rows to each partition are gathered and split together.
 * It must change nothing but speed: the same rows in every partition, in input
 * order, for every type, whatever mix of small and large batches arrives.
 */
import { join } from 'node:path';
import { Field, Int32, makeData, Schema, Utf8, type DataType, type RecordBatch } from 'apache-arrow';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { MemoryPool, ShuffleError, ShuffleReader, ShuffleWriter } from '../src/index.js';
import { nestedBatch } from '../src/cli/demo-data.js';
import { InputStaging, MAX_STAGING_BYTES, stagingTargetRows } from '../src/writer/input-staging.js';
import { batchOf, buildColumn, sequenceColumn, TYPE_CASES, utf8Column } from './support/columns.js';
import { buildAny, nestedType } from './support/nested.js';
import { Rng } from './support/random.js';
import { runShuffle, type WriterOptions } from './support/shuffle-harness.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => {
  vi.restoreAllMocks();
  await removeDir(dir);
});

test('staging is for batches that bring fewer than 16 rows to each partition, within the byte budget', () => {
  expect(stagingTargetRows(200, 44, 8192, MAX_STAGING_BYTES), '41 rows per partition: split as they come').toBe(0);
  expect(stagingTargetRows(1000, 44, 8192, MAX_STAGING_BYTES), '8 rows per partition: gather 64').toBe(64_000);
  expect(stagingTargetRows(4000, 44, 8192, MAX_STAGING_BYTES), 'capped by the budget').toBe(Math.floor(MAX_STAGING_BYTES / 44));
  expect(stagingTargetRows(4000, 44, 8192, 0), 'no budget, no staging').toBe(0);
  expect(stagingTargetRows(500, 44, 8192, MAX_STAGING_BYTES), '16 rows per partition: split as they come').toBe(0);
  expect(stagingTargetRows(1, 8, 10, MAX_STAGING_BYTES), 'tiny batches, even at one partition').toBe(64);
});

/** A schema with an int32 key, every flat type of the catalog, and nested columns of each kind but dictionaries. */
function mixedSchema(rng: Rng): Schema {
  const nested: DataType[] = (['list', 'large-list', 'fixed-size-list', 'struct', 'map', 'sparse-union', 'dense-union'] as const).map((kind) => nestedType(kind, rng, 2, 0.6, true)); // no dictionaries, at any depth
  return new Schema([
    new Field('key', new Int32(), false),
    ...TYPE_CASES.map((c, i) => new Field(`f${i}_${c.name}`, c.make(), true)),
    ...nested.map((type, i) => new Field(`n${i}`, type, true)),
  ]);
}

/** Batches of these sizes, every other one a slice of a longer batch, keys 0, 1, 2, ... across batches. */
function batchesOf(schema: Schema, sizes: readonly number[], rng: Rng): RecordBatch[] {
  let key = 0;
  return sizes.map((rows, b) => {
    const lead = b % 2 === 1 ? rng.int(1, 9) : 0;
    const length = rows + lead + (b % 2 === 1 ? rng.int(0, 5) : 0);
    const children = schema.fields.map((field, c) =>
      c === 0 ? sequenceColumn(key - lead, length) : TYPE_CASES[c - 1] !== undefined ? buildColumn(field.type, length, { bitmap: true, nullRate: 0.2 }, rng) : buildAny(field.type, length, rng, { nullRate: 0.2 }),
    );
    key += rows;
    const batch = batchOf(schema, children, length);
    return lead > 0 || length > rows ? batch.slice(lead, lead + rows) : batch;
  });
}

test('small batches of every flat and nested type, sliced, mixed with large ones: staged, every partition holds its rows in input order, as without staging', async () => {
  const rng = new Rng(7);
  const schema = mixedSchema(rng);
  // P = 16 stages batches of up to 255 rows (target 1024); 700, 2000, 300 and 260 pass through, after the rows staged before them
  const sizes = [17, 3, 40, 1, 700, 25, 9, 2000, 5, 5, 300, 260, 33, 1, 2];
  const batches = batchesOf(schema, sizes, rng);
  const options: WriterOptions = { numPartitions: 16, partitioning: { kind: 'hash', keys: ['key'] }, maxBatchRows: 50 };
  const append = vi.spyOn(InputStaging.prototype, 'append');

  const staged = await runShuffle(dir, options, batches, 'staged');
  expect(append.mock.calls.length, 'batches staged').toBe(sizes.filter((rows) => rows * 4 < 1024).length);
  expect(staged.actual).toEqual(staged.expected);

  append.mockClear();
  const direct = await runShuffle(dir, { ...options, stagingBytes: 0 }, batches, 'direct');
  expect(append).not.toHaveBeenCalled();
  expect(direct.actual).toEqual(staged.actual);
});

test('round-robin over staged batches deals rows in input order, as Spark does', async () => {
  const schema = new Schema([new Field('v', new Int32(), false)]);
  const batches = [3, 8, 1, 500, 6].map((rows, b) => batchOf(schema, [sequenceColumn(b * 1000, rows)], rows));
  const outcome = await runShuffle(dir, { numPartitions: 7, partitioning: { kind: 'round-robin' }, mapId: 3 }, batches);
  expect(outcome.actual).toEqual(outcome.expected);
});

test('a batch with an out-of-range partition id is refused while rows are staged: the staged rows are kept, the refused ones are not written', async () => {
  const schema = new Schema([new Field('pid', new Int32(), false), new Field('s', new Utf8(), true)]);
  const batch = (pids: number[], tag: string) => batchOf(schema, [int32s(pids), utf8Column(pids.map((_, i) => `${tag}${i}`))], pids.length);
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions: 8, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix });
  const append = vi.spyOn(InputStaging.prototype, 'append');
  await writer.write(batch([1, 2, 3], 'a'));
  await writer.write(batch([3, 3], 'b'));
  const refused = await writer.write(batch([1, 99, 2], 'x')).catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(ShuffleError);
  expect((refused as ShuffleError).code).toBe('CS_PARTITION_ID_OUT_OF_RANGE');
  await writer.write(batch([2, 1], 'c'));
  expect(append, 'the accepted batches were staged').toHaveBeenCalledTimes(3);
  const result = await writer.finish();
  expect(result.partitionRows).toEqual([0, 2, 2, 3, 0, 0, 0, 0]);
  const reader = await ShuffleReader.open(prefix);
  const rows: string[][] = [];
  for (let p = 0; p < 8; p++) {
    const values: string[] = [];
    for await (const b of reader.readPartition(p)) for (const row of b) values.push(row!.s as string);
    rows.push(values);
  }
  await reader.close();
  expect(rows).toEqual([[], ['a0', 'c1'], ['a1', 'c0'], ['a2', 'b0', 'b1'], [], [], [], []]);
});

test('staged rows are reserved in the writer pool and given back by finish and by abort, which leaves no file', async () => {
  const schema = new Schema([new Field('v', new Int32(), false), new Field('s', new Utf8(), true)]);
  const small = (b: number) => batchOf(schema, [sequenceColumn(b * 100, 100), utf8Column(Array.from({ length: 100 }, (_, i) => `row ${b * 100 + i} of a staged batch`))], 100);
  for (const ending of ['finish', 'abort'] as const) {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const append = vi.spyOn(InputStaging.prototype, 'append');
    const writer = await ShuffleWriter.create({ numPartitions: 500, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, ending), memoryPool: pool, spillDir: dir, stagingBytes: 1024 * 1024 });
    await writer.write(small(0));
    const one = pool.reserved;
    for (let b = 1; b < 20; b++) await writer.write(small(b));
    expect(append).toHaveBeenCalledTimes(20);
    // 2,000 rows staged (the target is 64 x 500), nothing split yet: the staging's buffers grew with them
    expect(pool.reserved).toBeGreaterThan(one + 19 * 100 * 30);
    if (ending === 'finish') expect((await writer.finish()).rows).toBe(2000);
    else await writer.abort();
    expect(pool.reserved, ending).toBe(0);
    append.mockRestore();
  }
  expect((await listFiles(dir)).sort()).toEqual(['finish.checksum.CRC32C', 'finish.data', 'finish.index']);
});

test('under a memory limit staging is off unless stagingBytes is given (staged rows cannot be spilled)', async () => {
  const schema = new Schema([new Field('v', new Int32(), false)]);
  const batches = Array.from({ length: 10 }, (_, b) => batchOf(schema, [sequenceColumn(b * 50, 50)], 50));
  const append = vi.spyOn(InputStaging.prototype, 'append');
  const bounded = await runShuffle(dir, { numPartitions: 300, partitioning: { kind: 'round-robin' }, memoryPool: new MemoryPool(64 * 1024 * 1024) }, batches, 'bounded');
  expect(append).not.toHaveBeenCalled();
  expect(bounded.actual).toEqual(bounded.expected);
  const unbounded = await runShuffle(dir, { numPartitions: 300, partitioning: { kind: 'round-robin' } }, batches, 'unbounded');
  expect(append).toHaveBeenCalledTimes(10);
  expect(unbounded.actual).toEqual(bounded.actual);
});

test('a stagingBytes above an eighth of a bounded pool is taken as that eighth: 16 MiB asked on a 4 MiB pool, every row comes back within the pool', async () => {
  // nested rows, 4,096-row batches at P = 300 (13 rows per partition): 16 MiB of staged rows, which cannot be spilled, left
  // the split no room in the pool (CS_MEMORY_LIMIT); 512 KiB hold fewer rows than four batches, so nothing is staged
  const batches = Array.from({ length: 8 }, (_, b) => nestedBatch(4096, b + 1));
  const pool = new MemoryPool(4 * 1024 * 1024);
  const outcome = await runShuffle(dir, { numPartitions: 300, partitioning: { kind: 'hash', keys: ['key'] }, memoryPool: pool, spillDir: dir, stagingBytes: 16 * 1024 * 1024 }, batches);
  expect(outcome.actual).toEqual(outcome.expected);
  expect(pool.peak).toBeLessThanOrEqual(4 * 1024 * 1024);
  expect(pool.reserved).toBe(0);
});

test('schemas with dictionary columns are not staged (each batch may bring dictionaries of its own)', async () => {
  const rng = new Rng(11);
  const type = nestedType('dictionary', rng, 1);
  const schema = new Schema([new Field('key', new Int32(), false), new Field('d', type, true)]);
  const dictionaries = new Map();
  const batches = [5, 7, 3].map((rows, b) => batchOf(schema, [sequenceColumn(b * 10, rows), buildAny(type, rows, rng, { nullRate: 0.1, dictionaries })], rows));
  const append = vi.spyOn(InputStaging.prototype, 'append');
  const outcome = await runShuffle(dir, { numPartitions: 4, partitioning: { kind: 'hash', keys: ['key'] } }, batches);
  expect(append).not.toHaveBeenCalled();
  expect(outcome.actual).toEqual(outcome.expected);
});

test('stagingBytes is validated', async () => {
  await expect(ShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'x'), stagingBytes: -1 })).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('stagingBytes') });
});

function int32s(values: number[]) {
  return makeData({ type: new Int32(), length: values.length, data: Int32Array.from(values) });
}

// Regression: the target counts rows of the first batch's width, and staging held rows to it alone, so wider rows
// later (values of hundreds of MiBs) took a staging buffer past 2 GiB, an untyped RangeError.
test('rows wider than the first batch\'s: a batch of more than a quarter of stagingBytes is split as it comes, and staged rows once they pass twice stagingBytes', async () => {
  const schema = new Schema([new Field('v', new Int32(), false), new Field('s', new Utf8(), true)]);
  const rowsOf = (b: number, rows: number, bytes: number) => batchOf(schema, [sequenceColumn(b * 1000, rows), utf8Column(Array.from({ length: rows }, (_, i) => `${b}.${i} `.padEnd(bytes, 'x')))], rows);
  const narrow = rowsOf(0, 100, 20); // the first batch: about 28 bytes a row, a target of thousands of rows
  const wide = [1, 2].map((b) => rowsOf(b, 1, 40 * 1024)); // 40 KiB: more than a quarter of 128 KiB, not staged
  const middling = Array.from({ length: 10 }, (_, b) => rowsOf(3 + b, 100, 300)); // 30 KB each: staged, nine pass 256 KiB
  const append = vi.spyOn(InputStaging.prototype, 'append');
  const clear = vi.spyOn(InputStaging.prototype, 'clear');
  const outcome = await runShuffle(dir, { numPartitions: 500, partitioning: { kind: 'round-robin' }, stagingBytes: 128 * 1024 }, [narrow, ...wide, ...middling]);
  expect(append.mock.calls.map(([batch]) => batch.numRows)).toEqual([100, ...middling.map(() => 100)]);
  // splits: the narrow rows before the first wide batch, nine middling batches (270 KB) by the byte net, the last at finish
  expect(clear).toHaveBeenCalledTimes(3);
  expect(outcome.actual).toEqual(outcome.expected);
});
