/**
 * Contracts of the sort writer that its other tests leave open (found by a
 * mutation sweep of src/sort-writer): the page table's limit, partition ids
 * above 65 535, the memory it hands back between writes, and where its
 * sizing options start and stop being refused.
 */
import { mkdir, rm } from 'node:fs/promises';
import { Field, Int32, makeData, RecordBatch, Schema, Struct, Utf8 } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { MemoryPool, ShuffleReader, SortShuffleWriter, type SortShuffleWriterOptions } from '../src/index.js';
import { rowsOf } from './support/rows.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => {
  dir = await makeTempDir('cs-sort-contract-');
  await mkdir(`${dir}/out`);
});
afterEach(async () => removeDir(dir));

/** (k, v, p): every row of the output {k, v} is 16 bytes (u32 length, 1-byte bitmap, two Int32 slots, 3 bytes padding). */
const FIXED = new Schema([new Field('k', new Int32(), false), new Field('v', new Int32(), false), new Field('p', new Int32(), false)]);

function fixedBatch(partitions: readonly number[], first = 0): RecordBatch {
  const n = partitions.length;
  const k = Int32Array.from({ length: n }, (_, i) => first + i);
  const children = [
    makeData({ type: new Int32(), length: n, data: k }),
    makeData({ type: new Int32(), length: n, data: k.map((x) => x * 7) }),
    makeData({ type: new Int32(), length: n, data: Int32Array.from(partitions) }),
  ];
  return new RecordBatch(FIXED, makeData({ type: new Struct(FIXED.fields), length: n, children }));
}

/** (k, s, p) with the given strings. */
const TEXT = new Schema([new Field('k', new Int32(), false), new Field('s', new Utf8(), false), new Field('p', new Int32(), false)]);

function textBatch(rows: readonly (readonly [string, number])[]): RecordBatch {
  const n = rows.length;
  const encoded = rows.map(([s]) => new TextEncoder().encode(s));
  const offsets = new Int32Array(n + 1);
  encoded.forEach((e, i) => (offsets[i + 1] = offsets[i]! + e.byteLength));
  const data = new Uint8Array(offsets[n]!);
  encoded.forEach((e, i) => data.set(e, offsets[i]!));
  const children = [
    makeData({ type: new Int32(), length: n, data: Int32Array.from({ length: n }, (_, i) => i) }),
    makeData({ type: new Utf8(), length: n, valueOffsets: offsets, data }),
    makeData({ type: new Int32(), length: n, data: Int32Array.from(rows.map(([, p]) => p)) }),
  ];
  return new RecordBatch(TEXT, makeData({ type: new Struct(TEXT.fields), length: n, children }));
}

function options(numPartitions: number, extra: Partial<SortShuffleWriterOptions> = {}): SortShuffleWriterOptions {
  return { numPartitions, partitioning: { kind: 'partition-id', column: 'p' }, outputPrefix: `${dir}/out/map`, spillDir: dir, codec: 'none', ...extra };
}

async function readPartitions(prefix: string, partitions: readonly number[]): Promise<string[][]> {
  const reader = await ShuffleReader.open(prefix);
  try {
    const out: string[][] = [];
    for (const p of partitions) {
      const rows: string[] = [];
      for await (const b of reader.readPartition(p)) rows.push(...rowsOf(b));
      out.push(rows);
    }
    return out;
  } finally {
    await reader.close();
  }
}

const spillFiles = async () => (await listFiles(dir)).filter((f) => f.startsWith('columnar-shuffle-spill-'));

describe('the page table holds at most 8192 pages (13-bit page numbers): the writer spills rather than open one more', () => {
  test('33 000 rows into 64-byte pages (4 rows each, 8250 pages): every row stays in its partition, the rest is written out by a spill', async () => {
    const writer = await SortShuffleWriter.create(options(2, { pageBytes: 64 }));
    const n = 33_000;
    const batch = fixedBatch(new Array<number>(n).fill(0));
    await writer.write(batch);
    const result = await writer.finish();
    expect(result.partitionRows).toEqual([n, 0]);
    expect(result.spills).toBeGreaterThanOrEqual(1);
    expect(result.partitionLengths[1]).toBe(0);
    const [p0, p1] = await readPartitions(`${dir}/out/map`, [0, 1]);
    expect(p1).toEqual([]);
    expect(p0).toEqual(rowsOf(batch, [0, 1]));
    expect(await spillFiles()).toEqual([]);
  });
});

describe('partition ids above 65 535 (the third byte of the radix sort) come out in partition order', () => {
  test('rows for partitions 65 537, 2, 65 536 and 70 000 of 70 001 land in their own partitions', async () => {
    const writer = await SortShuffleWriter.create(options(70_001));
    const pids = [65_537, 2, 65_536, 70_000, 2, 65_537];
    const batch = fixedBatch(pids);
    await writer.write(batch);
    const result = await writer.finish();
    expect(result.partitionRows[2]).toBe(2);
    expect(result.partitionRows[65_536]).toBe(1);
    expect(result.partitionRows[65_537]).toBe(2);
    expect(result.partitionRows[70_000]).toBe(1);
    const rows = rowsOf(batch, [0, 1]);
    const read = await readPartitions(`${dir}/out/map`, [2, 65_536, 65_537, 70_000]);
    expect(read).toEqual([[rows[1], rows[4]], [rows[2]], [rows[0], rows[5]], [rows[3]]]);
  });
});

describe('between writes, a reclaim gives back everything but the per-partition state, and says how much it freed', () => {
  test.each(['none', 'lz4'] as const)('codec %s: pages (spare and large), the grown pointer array, scratch, group arrays, block writer and large-row compression memory all go', async (codec) => {
    const pool = new MemoryPool();
    const numPartitions = 7;
    const writer = await SortShuffleWriter.create(options(numPartitions, { memoryPool: pool, codec, pageBytes: 4096, blockBytes: 1024 }));
    const stateBytes = 16 * numPartitions;
    expect(pool.reserved).toBe(stateBytes);
    // 3000 small rows (the pointer array grows past its first 1024 slots), and rows larger than a page and a block
    const big = 'x'.repeat(9000);
    const rows: [string, number][] = [];
    for (let i = 0; i < 3000; i++) rows.push([`r${i}`, i % numPartitions]);
    rows.push([big, 3], [big + 'y', 5]);
    const first = textBatch(rows);
    await writer.write(first);
    const before = pool.reserved;
    expect(before).toBeGreaterThan(stateBytes);
    await writer.reclaim(1);
    expect(pool.reserved).toBe(stateBytes);
    expect(await spillFiles()).toHaveLength(1);
    // and the writer goes on: a second batch, then finish, with every row
    const second = textBatch([[big, 3], ['z', 6]]);
    await writer.write(second);
    const result = await writer.finish();
    expect(result.spills).toBe(1);
    expect(pool.reserved).toBe(0);
    expect(await spillFiles()).toEqual([]);
    const read = await readPartitions(`${dir}/out/map`, [3, 6]);
    const all = [...rowsOf(first, [0, 1]), ...rowsOf(second, [0, 1])];
    const pids = [...rows.map(([, p]) => p), 3, 6];
    expect(read).toEqual([all.filter((_, i) => pids[i] === 3), all.filter((_, i) => pids[i] === 6)]);
  });

  test('without rows larger than a page, what reclaim() returns is exactly what the pool got back', async () => {
    const pool = new MemoryPool();
    const writer = await SortShuffleWriter.create(options(5, { memoryPool: pool, pageBytes: 4096, blockBytes: 1024 }));
    await writer.write(fixedBatch(Array.from({ length: 2000 }, (_, i) => i % 5)));
    const before = pool.reserved;
    const freed = await writer.reclaim(1);
    expect(freed).toBe(before - pool.reserved);
    expect(pool.reserved).toBe(16 * 5);
    await writer.abort();
  });
});

describe('finish() with more spill runs than the pool has free read windows for', () => {
  test('spills the rows still in memory first (a window per run is then made of their pages): 40 forced runs + 1', async () => {
    const pool = new MemoryPool(4 * 1024 * 1024);
    const writer = await SortShuffleWriter.create(options(3, { memoryPool: pool }));
    const batches: RecordBatch[] = [];
    for (let i = 0; i < 41; i++) {
      const batch = fixedBatch(Array.from({ length: 100 }, (_, r) => (r * 7 + i) % 3), i * 100);
      batches.push(batch);
      await writer.write(batch);
      if (i < 40) await writer.reclaim(1); // a run per batch but the last, as a busier pool would ask for
    }
    const result = await writer.finish();
    expect(result.spills).toBe(41);
    expect(pool.reserved).toBe(0);
    expect(await spillFiles()).toEqual([]);
    const all = batches.flatMap((b) => rowsOf(b, [0, 1]));
    const pids = batches.flatMap((b) => Array.from(b.getChildAt(2)!.toArray() as Int32Array));
    expect(await readPartitions(`${dir}/out/map`, [0, 1, 2])).toEqual([0, 1, 2].map((p) => all.filter((_, i) => pids[i] === p)));
  });
});

describe('pageBytes and blockBytes: multiples of 4 from 64 up to 128 MiB (pages) and 1 GiB (blocks)', () => {
  const create = (extra: Partial<SortShuffleWriterOptions>) => SortShuffleWriter.create(options(3, extra));
  test.each<[string, Partial<SortShuffleWriterOptions>]>([
    ['pageBytes 64', { pageBytes: 64 }],
    ['pageBytes 128 MiB', { pageBytes: 1 << 27 }],
    ['blockBytes 64', { blockBytes: 64 }],
    ['blockBytes 1 GiB', { blockBytes: 1 << 30 }],
  ])('%s is accepted', async (_, extra) => {
    const writer = await create(extra);
    await writer.abort();
    expect(await listFiles(`${dir}/out`)).toEqual([]);
  });
  test.each<[string, Partial<SortShuffleWriterOptions>]>([
    ['pageBytes 60', { pageBytes: 60 }],
    ['pageBytes 66', { pageBytes: 66 }],
    ['pageBytes 128 MiB + 4', { pageBytes: (1 << 27) + 4 }],
    ['blockBytes 60', { blockBytes: 60 }],
    ['blockBytes 1 GiB + 4', { blockBytes: (1 << 30) + 4 }],
  ])('%s is CS_INVALID_ARGUMENT, leaving nothing', async (_, extra) => {
    await expect(create(extra)).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
    expect(await listFiles(`${dir}/out`)).toEqual([]);
  });
});

test('result.batches counts every batch written, empty ones included (as the columnar writer does)', async () => {
  const writer = await SortShuffleWriter.create(options(2));
  await writer.write(fixedBatch([0, 1]));
  await writer.write(fixedBatch([]));
  await writer.write(fixedBatch([1]));
  const result = await writer.finish();
  expect(result.batches).toBe(3);
  expect(result.rows).toBe(3);
});

test('abort() after finish() changes nothing: the committed output stands and the writer still says it is finished', async () => {
  const writer = await SortShuffleWriter.create(options(2));
  const batch = fixedBatch([0, 1, 1]);
  await writer.write(batch);
  const result = await writer.finish();
  await writer.abort();
  expect(await listFiles(`${dir}/out`)).toEqual([result.paths.checksum, result.paths.data, result.paths.index].map((p) => p.slice(`${dir}/out/`.length)).sort());
  const rows = rowsOf(batch, [0, 1]);
  expect(await readPartitions(`${dir}/out/map`, [0, 1])).toEqual([[rows[0]], [rows[1], rows[2]]]);
  expect(result.rows).toBe(3);
  await expect(writer.write(batch)).rejects.toMatchObject({ code: 'CS_WRITER_CLOSED', message: expect.stringContaining('finished') });
});

test('a block takes rows up to exactly blockBytes: four 16-byte rows make one 64-byte block, a fifth starts the next', async () => {
  const writer = await SortShuffleWriter.create(options(2, { blockBytes: 64 }));
  const batch = fixedBatch([0, 0, 0, 0, 1, 1, 1, 1, 1]);
  await writer.write(batch);
  const result = await writer.finish();
  expect(result.partitionBatches).toEqual([1, 2]);
  const rows = rowsOf(batch, [0, 1]);
  expect(await readPartitions(`${dir}/out/map`, [0, 1])).toEqual([rows.slice(0, 4), rows.slice(4)]);
});

test('a block of exactly compressionMinRows rows is compressed (one row fewer is stored as it is)', async () => {
  const lengths: number[] = [];
  for (const rowsInBlock of [4, 3]) {
    const writer = await SortShuffleWriter.create({ ...options(1, { codec: 'lz4', compressionMinRows: 4, overwrite: true }) });
    const batch = textBatch(Array.from({ length: rowsInBlock }, () => ['a'.repeat(200), 0] as const));
    await writer.write(batch);
    const result = await writer.finish();
    expect(result.partitionBatches).toEqual([1]);
    lengths.push(result.partitionLengths[0]! / rowsInBlock);
  }
  // 4 rows of 216 bytes compress to a fraction; 3 stay raw (over 216 bytes a row with the header)
  expect(lengths[0]).toBeLessThan(150);
  expect(lengths[1]).toBeGreaterThan(216);
});

test("a spill another consumer asked for (reclaim) that fails makes the writer's next call reject with that error, leaving nothing", async () => {
  const spillDir = `${dir}/spill`;
  await mkdir(spillDir);
  const writer = await SortShuffleWriter.create(options(2, { spillDir }));
  await writer.write(fixedBatch([0, 1, 0]));
  await rm(spillDir, { recursive: true });
  const failure = await writer.reclaim(1).then(() => null, (error: unknown) => error);
  expect((failure as { code?: string } | null)?.code).toMatch(/^CS_/); // a typed error naming the spill file
  await expect(writer.finish()).rejects.toBe(failure);
  expect(await listFiles(`${dir}/out`)).toEqual([]);
});

describe('sizes given larger than a bounded pool allows are capped by it', () => {
  test('pageBytes 8 MiB on a 4 MiB pool: a page is at most a quarter of the share (1 MiB): one small row holds a 1 MiB page, not 4', async () => {
    const pool = new MemoryPool(4 * 1024 * 1024);
    const writer = await SortShuffleWriter.create(options(2, { memoryPool: pool, pageBytes: 8 * 1024 * 1024 }));
    await writer.write(fixedBatch([0, 1]));
    expect(pool.reserved).toBeGreaterThanOrEqual(1024 * 1024);
    expect(pool.reserved).toBeLessThan(2 * 1024 * 1024); // the page, and the pointer array, scratch and block writer's buffers
    expect((await writer.finish()).rows).toBe(2);
  });

  test('blockBytes 8 MiB on a 4 MiB pool: a block is at most 1/32 of the share (128 KiB): 20 000 16-byte rows make three blocks', async () => {
    const pool = new MemoryPool(4 * 1024 * 1024);
    const writer = await SortShuffleWriter.create(options(1, { memoryPool: pool, blockBytes: 8 * 1024 * 1024, maxBatchRows: 1 << 20 }));
    const batch = fixedBatch(new Array<number>(20_000).fill(0));
    await writer.write(batch);
    const result = await writer.finish();
    expect(result.partitionBatches).toEqual([3]); // 320,000 bytes in blocks of at most 131,072
    expect((await readPartitions(`${dir}/out/map`, [0]))[0]).toEqual(rowsOf(batch, [0, 1]));
  });
});

describe('finish() takes the merge read buffer for spill runs from the pool', () => {
  test('when the pool cannot give it (another consumer holds the rest), finish() is CS_MEMORY_LIMIT and leaves nothing', async () => {
    const pool = new MemoryPool(4 * 1024 * 1024);
    const writer = await SortShuffleWriter.create(options(2, { memoryPool: pool }));
    await writer.write(fixedBatch([0, 1, 0, 1]));
    await writer.reclaim(1); // a spill run: finish() merges it through a read buffer
    const other = pool.register('other consumer');
    await other.grow(pool.available - 1024);
    await expect(writer.finish()).rejects.toMatchObject({ code: 'CS_MEMORY_LIMIT' });
    expect(await listFiles(dir)).toEqual(['out']);
    other.free();
    expect(pool.reserved).toBe(0);
  });
});

test('a block of 4096 bytes is compressed however few rows it has (compressionMinRows); one of 4080 bytes is stored as it is', async () => {
  const lengths: number[] = [];
  for (const rowsInBlock of [256, 255]) { // rows of 16 bytes: 4096 and 4080 bytes
    const writer = await SortShuffleWriter.create({ ...options(1, { codec: 'lz4', compressionMinRows: 1000, blockBytes: 4096, overwrite: true }) });
    await writer.write(fixedBatch(new Array<number>(rowsInBlock).fill(0)));
    const result = await writer.finish();
    expect(result.partitionBatches).toEqual([1]);
    lengths.push(result.partitionLengths[0]!);
  }
  expect(lengths[0]).toBeLessThan(4096);
  expect(lengths[1]).toBeGreaterThan(4080);
});

test('a block that compression does not shrink is stored as it is: two rows of 1,500 random characters take as many bytes with lz4 as uncompressed', async () => {
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 8;
  const rows = Array.from({ length: 2 }, () => [String.fromCharCode(...Array.from({ length: 1500 }, () => 33 + (random() % 90))), 0] as const);
  const lengths: number[] = [];
  for (const codec of ['none', 'lz4'] as const) {
    const writer = await SortShuffleWriter.create({ ...options(1, { codec, compressionMinRows: 1, overwrite: true }) });
    await writer.write(textBatch(rows));
    const result = await writer.finish();
    lengths.push(result.partitionLengths[0]!);
  }
  expect(lengths[1]).toBe(lengths[0]);
});

test.each([
  ['the pool full', 1024],
  ["room for the row's bytes but not for the compressor's worst case (a frame's overhead)", 301_000],
])("a row larger than a block is compressed only into memory the pool gives: with %s it is stored as it is", async (_, left) => {
  const pool = new MemoryPool(1024 * 1024);
  const writer = await SortShuffleWriter.create(options(1, { memoryPool: pool, codec: 'lz4', blockBytes: 4096 }));
  await writer.write(textBatch([['x'.repeat(300_000), 0]])); // would compress to a few KiB
  const other = pool.register('other consumer');
  await other.grow(pool.available - left);
  const result = await writer.finish();
  expect(result.partitionLengths[0]).toBeGreaterThan(300_000);
  other.free();
  expect(pool.reserved).toBe(0);
});

test('a row that exactly fills what is left of the current page goes there: a batch of 3 and one of 1 16-byte rows share a 64-byte page', async () => {
  const pool = new MemoryPool();
  const writer = await SortShuffleWriter.create(options(1, { memoryPool: pool, pageBytes: 64 }));
  await writer.write(fixedBatch([0, 0, 0]));
  const held = pool.reserved;
  await writer.write(fixedBatch([0], 3));
  expect(pool.reserved).toBe(held); // no second page
  expect((await writer.finish()).rows).toBe(4);
});
