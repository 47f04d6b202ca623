import { join } from 'node:path';
import { Dictionary, Field, Int32, Int8, List, makeData, makeVector, RecordBatch, Schema, Struct, Utf8, vectorFromArray } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import {
  AutoShuffleWriter,
  chooseWriter,
  createShuffleWriter,
  MemoryPool,
  MIN_HASH_BUFFER_ROWS,
  ShuffleError,
  ShuffleReader,
  SORT_PARTITIONS_THRESHOLD,
} from '../src/index.js';
import { isRowPartition } from '../src/sort-writer/row-format.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => {
  dir = await makeTempDir();
});
afterEach(async () => removeDir(dir));

const SCHEMA = new Schema([new Field('id', new Int32(), false), new Field('s', new Utf8(), false)]);

/** Rows [start, start + n): an id and a 40-character string, about 48 bytes a row. */
function batch(start: number, n: number): RecordBatch {
  const id = makeVector(Int32Array.from({ length: n }, (_, i) => start + i)).data[0]!;
  const s = vectorFromArray(Array.from({ length: n }, (_, i) => `row ${start + i}`.padEnd(40, '.')), new Utf8()).data[0]!;
  return new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: n, nullCount: 0, children: [id, s] }));
}

/** Every id the output holds, sorted, and whether its non-empty partitions are sort-writer row partitions. */
async function readBack(prefix: string): Promise<{ ids: number[]; rowPartitions: boolean[] }> {
  const reader = await ShuffleReader.open(prefix);
  const ids: number[] = [];
  const rowPartitions: boolean[] = [];
  for (let p = 0; p < reader.numPartitions; p++) {
    if (reader.partitionLength(p) > 0) rowPartitions.push(isRowPartition(await reader.partitionBytes(p)));
  }
  for await (const b of reader.readPartitions(0, reader.numPartitions)) for (const row of b) ids.push(row!.id as number);
  await reader.close();
  return { ids: ids.sort((a, b) => a - b), rowPartitions };
}

describe('chooseWriter', () => {
  test('sort from the partition threshold on (Gluten: 4000), whatever the buffers', () => {
    expect(SORT_PARTITIONS_THRESHOLD).toBe(4000);
    expect(chooseWriter(4000, null)).toBe('sort');
    expect(chooseWriter(10_000, 4096)).toBe('sort');
    expect(chooseWriter(3999, 4096)).toBe('hash');
  });

  test(`below it, sort when the columnar writer's buffers would hold fewer than ${MIN_HASH_BUFFER_ROWS} rows`, () => {
    expect(chooseWriter(200, 19)).toBe('sort'); // wide rows under the benchmark's tight limit
    expect(chooseWriter(200, 31)).toBe('sort');
    expect(chooseWriter(200, 32)).toBe('hash');
    expect(chooseWriter(200, 78)).toBe('hash'); // narrow rows under the same limit
    expect(chooseWriter(200, null)).toBe('hash'); // no batch yet
  });
});

describe("createShuffleWriter('auto', ...)", () => {
  test('with memory to spare at P = 200 it stays the columnar writer, and the output reads back whole', async () => {
    const prefix = join(dir, 'out');
    const writer = await createShuffleWriter('auto', { numPartitions: 200, partitioning: { kind: 'hash', keys: ['id'] }, outputPrefix: prefix });
    expect(writer).toBeInstanceOf(AutoShuffleWriter);
    await writer.write(batch(0, 5000));
    await writer.write(batch(5000, 3000));
    const result = await writer.finish();
    expect((writer as AutoShuffleWriter).kind).toBe('hash');
    expect(result.rows).toBe(8000);
    const { ids, rowPartitions } = await readBack(prefix);
    expect(ids).toEqual(Array.from({ length: 8000 }, (_, i) => i));
    expect(rowPartitions.every((isRows) => !isRows)).toBe(true);
  });

  test('at the partition threshold it is the sort writer from the start', async () => {
    const prefix = join(dir, 'out');
    const writer = await createShuffleWriter('auto', { numPartitions: SORT_PARTITIONS_THRESHOLD, partitioning: { kind: 'round-robin' }, outputPrefix: prefix });
    expect((writer as AutoShuffleWriter).kind).toBe('sort');
    await writer.write(batch(0, 6000));
    await writer.finish();
    const { ids, rowPartitions } = await readBack(prefix);
    expect(ids).toEqual(Array.from({ length: 6000 }, (_, i) => i));
    expect(rowPartitions.length).toBeGreaterThan(0);
    expect(rowPartitions.every((isRows) => isRows)).toBe(true);
  });

  test('when the pool leaves the columnar buffers a few rows each, the first batch hands over to the sort writer: no row lost, no temporary file left', async () => {
    // 1 MiB, rows of ~48 bytes, 300 partitions: 1048576 / 48 / 300 = 72, / 4 = 18 rows per buffer
    const prefix = join(dir, 'out');
    const pool = new MemoryPool(1024 * 1024);
    const writer = (await createShuffleWriter('auto', { numPartitions: 300, partitioning: { kind: 'hash', keys: ['id'] }, outputPrefix: prefix, memoryPool: pool, spillDir: dir })) as AutoShuffleWriter;
    expect(writer.kind).toBe('hash');
    await writer.write(batch(0, 0)); // an empty batch first: counted, though the columnar writer took it
    await writer.write(batch(0, 20_000));
    expect(writer.kind).toBe('sort');
    expect(writer.schema?.fields.map((f) => f.name)).toEqual(['id', 's']);
    await writer.write(batch(20_000, 20_000));
    const result = await writer.finish();
    expect(result).toMatchObject({ rows: 40_000, batches: 3 });
    expect(result.peakMemoryBytes).toBeLessThanOrEqual(1024 * 1024);
    expect(pool.reserved).toBe(0);
    const { ids, rowPartitions } = await readBack(prefix);
    expect(ids).toEqual(Array.from({ length: 40_000 }, (_, i) => i));
    expect(rowPartitions.every((isRows) => isRows)).toBe(true);
    expect((await listFiles(dir)).sort()).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
  });

  test('the same memory with 8 partitions leaves the buffers hundreds of rows: the columnar writer keeps the output', async () => {
    const prefix = join(dir, 'out');
    const writer = (await createShuffleWriter('auto', { numPartitions: 8, partitioning: { kind: 'hash', keys: ['id'] }, outputPrefix: prefix, memoryPool: new MemoryPool(1024 * 1024), spillDir: dir })) as AutoShuffleWriter;
    await writer.write(batch(0, 20_000));
    expect(writer.kind).toBe('hash');
    await writer.finish();
    expect((await readBack(prefix)).ids).toHaveLength(20_000);
  });

  test('a first batch the columnar writer refuses (no such key column) is that error, and nothing is left behind', async () => {
    const prefix = join(dir, 'out');
    const writer = await createShuffleWriter('auto', { numPartitions: 200, partitioning: { kind: 'hash', keys: ['nope'] }, outputPrefix: prefix });
    const error = await writer.write(batch(0, 100)).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(ShuffleError);
    expect((error as ShuffleError).code).toBe('CS_UNKNOWN_COLUMN');
    expect(await listFiles(dir)).toEqual([]);
  });

  /** Rows [0, n): an id, a list of 200 values of an Int32-indexed dictionary, and an Int8-indexed column of the same id. */
  function sharedDictionaryBatch(n: number): RecordBatch {
    const values = new Utf8();
    const wide = new Dictionary(values, new Int32(), 1);
    const narrow = new Dictionary(values, new Int8(), 1);
    const list = new List(new Field('item', wide, true));
    const schema = new Schema([new Field('id', new Int32(), false), new Field('tags', list, true), new Field('b', narrow, true)]);
    const dictionary = vectorFromArray(Array.from({ length: 200 }, (_, i) => `v${i}`), new Utf8());
    const items = makeData({ type: wide, length: 200 * n, nullCount: 0, data: Int32Array.from({ length: 200 * n }, (_, i) => i % 200), dictionary });
    const tags = makeData({ type: list, length: n, nullCount: 0, valueOffsets: Int32Array.from({ length: n + 1 }, (_, i) => 200 * i), child: items });
    const b = makeData({ type: narrow, length: n, nullCount: 0, data: Int8Array.from({ length: n }, (_, i) => i % 128), dictionary });
    const id = makeVector(Int32Array.from({ length: n }, (_, i) => i)).data[0]!;
    return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: [id, tags, b] }));
  }

  test.each([
    ['at the partition threshold, where it starts as the sort writer, the first write hands over', SORT_PARTITIONS_THRESHOLD, undefined],
    ['with buffers of a few rows, where it would hand over to the sort writer', 300, 1024 * 1024],
  ])('a schema the sort writer refuses (an Int32-indexed list beside an Int8 column of one dictionary id) stays with the columnar writer %s', async (_, numPartitions, limit) => {
    const prefix = join(dir, 'out');
    const memoryPool = limit === undefined ? undefined : new MemoryPool(limit);
    const writer = (await createShuffleWriter('auto', { numPartitions, partitioning: { kind: 'hash', keys: ['id'] }, outputPrefix: prefix, memoryPool, spillDir: dir })) as AutoShuffleWriter;
    await writer.write(sharedDictionaryBatch(500));
    expect(writer.kind).toBe('hash');
    expect(await writer.finish()).toMatchObject({ rows: 500 });
    const { ids, rowPartitions } = await readBack(prefix);
    expect(ids).toEqual(Array.from({ length: 500 }, (_, i) => i));
    expect(rowPartitions.some((isRows) => isRows)).toBe(false);
    expect((await listFiles(dir)).sort()).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
  });

  test('an unknown writer is CS_INVALID_ARGUMENT naming the choices', async () => {
    const error = await createShuffleWriter('bucket' as 'auto', { numPartitions: 2, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'out') }).then(() => null, (e: unknown) => e);
    expect((error as ShuffleError).code).toBe('CS_INVALID_ARGUMENT');
    expect((error as ShuffleError).message).toMatch(/expected one of hash, sort, auto/);
  });
});

// The first write hands over to the sort writer (1 MiB, 300 partitions: 18-row buffers): an abort() at any point of it,
// or a second call while it runs, used to leave a live writer that later committed, or lose a batch's rows.
describe('auto during the hand-over: one call at a time, and abort() ends it whenever it comes', () => {
  const handingOver = async (pool: MemoryPool) =>
    (await createShuffleWriter('auto', { numPartitions: 300, partitioning: { kind: 'hash', keys: ['id'] }, outputPrefix: join(dir, 'out'), memoryPool: pool, spillDir: dir })) as AutoShuffleWriter;
  const outcome = (call: Promise<unknown>) => call.then(() => 'done', (e: unknown) => (e as ShuffleError).code);

  test.each([
    ['at once', async () => undefined],
    ['after a microtask', async () => Promise.resolve()],
    ['after a 0 ms timer', () => new Promise((resolve) => setTimeout(resolve, 0))],
    ['after 1 ms', () => new Promise((resolve) => setTimeout(resolve, 1))],
    ['after 2 ms', () => new Promise((resolve) => setTimeout(resolve, 2))],
    ['after 5 ms', () => new Promise((resolve) => setTimeout(resolve, 5))],
  ])('abort() %s: the write is refused or done, nothing is left, the pool is empty, and the writer takes no more calls', async (_, wait) => {
    const pool = new MemoryPool(1024 * 1024);
    const writer = await handingOver(pool);
    const write = outcome(writer.write(batch(0, 20_000)));
    await wait();
    await writer.abort();
    expect(['done', 'CS_WRITER_CLOSED']).toContain(await write);
    expect(await listFiles(dir)).toEqual([]);
    expect(pool.reserved).toBe(0);
    expect(await outcome(writer.write(batch(0, 10)))).toBe('CS_WRITER_CLOSED');
    expect(await outcome(writer.finish())).toBe('CS_WRITER_CLOSED');
    expect(await listFiles(dir)).toEqual([]);
  });

  test('a second write() or a finish() while the first write runs is CS_WRITER_BUSY, and every accepted row is written', async () => {
    const pool = new MemoryPool(1024 * 1024);
    const writer = await handingOver(pool);
    const calls = [writer.write(batch(0, 20_000)), writer.write(batch(20_000, 20_000)), writer.finish()].map(outcome);
    expect(await Promise.all(calls)).toEqual(['done', 'CS_WRITER_BUSY', 'CS_WRITER_BUSY']);
    expect(writer.kind).toBe('sort');
    expect((await writer.finish()).rows).toBe(20_000);
    expect(pool.reserved).toBe(0);
    expect((await readBack(join(dir, 'out'))).ids).toEqual(Array.from({ length: 20_000 }, (_, i) => i));
    expect((await listFiles(dir)).sort()).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
  });
});
