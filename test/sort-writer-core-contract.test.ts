/**
 * Contracts of the sort writer's main class and its helpers (pages, block
 * writer, final-pass merger, packed pointers) that its other tests leave
 * open, found by a second mutation sweep of src/sort-writer: each test here
 * failed against one changed line and passes on the real code.
 */
import { mkdir, rm } from 'node:fs/promises';
import { Int32, makeData, type RecordBatch, Schema, Utf8 } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { MemoryPool, ShuffleReader, SortShuffleWriter, type SortShuffleWriterOptions } from '../src/index.js';
import { batchOf, schemaOf, sequenceColumn, utf8Column } from './support/columns.js';
import { rowsOf } from './support/rows.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => {
  dir = await makeTempDir('cs-sort-core-');
  await mkdir(`${dir}/out`);
});
afterEach(async () => removeDir(dir));

/** (k, s, p): row i has k = first + i, the string given and partition p; a row is 12 bytes plus its string, rounded up to 4. */
const TEXT: Schema = schemaOf([
  { name: 'k', type: new Int32(), nullable: false },
  { name: 's', type: new Utf8(), nullable: false },
  { name: 'p', type: new Int32(), nullable: false },
]);

function textBatch(rows: readonly (readonly [string, number])[], first = 0): RecordBatch {
  const p = makeData({ type: new Int32(), length: rows.length, nullCount: 0, data: Int32Array.from(rows, ([, q]) => q) });
  return batchOf(TEXT, [sequenceColumn(first, rows.length), utf8Column(rows.map(([s]) => s)), p], rows.length);
}

/** `n` rows of `s` spread over `partitions` partitions (row i to i % partitions). */
function spread(n: number, partitions: number, s = 'v', first = 0): RecordBatch {
  return textBatch(Array.from({ length: n }, (_, i) => [`${s}${first + i}`, i % partitions] as const), first);
}

function options(numPartitions: number, extra: Partial<SortShuffleWriterOptions> = {}): SortShuffleWriterOptions {
  return { numPartitions, partitioning: { kind: 'partition-id', column: 'p' }, outputPrefix: `${dir}/out/map`, spillDir: dir, codec: 'none', ...extra };
}

/** Every partition's rows, as (k, s) strings, in the order the reader gives them. */
async function readAll(numPartitions: number, prefix = `${dir}/out/map`): Promise<string[][]> {
  const reader = await ShuffleReader.open(prefix);
  try {
    const out: string[][] = [];
    for (let p = 0; p < numPartitions; p++) {
      const rows: string[] = [];
      for await (const b of reader.readPartition(p)) rows.push(...rowsOf(b, [0, 1]));
      out.push(rows);
    }
    return out;
  } finally {
    await reader.close();
  }
}

/** What the output must hold: each partition's rows in input order. */
function expected(batches: readonly RecordBatch[], numPartitions: number): string[][] {
  const out: string[][] = Array.from({ length: numPartitions }, () => []);
  for (const b of batches) {
    const rows = rowsOf(b, [0, 1]);
    const pids = b.getChildAt(2)!.toArray() as Int32Array;
    rows.forEach((r, i) => out[pids[i]!]!.push(r));
  }
  return out;
}

const spillFiles = async () => (await listFiles(dir)).filter((f) => f.startsWith('columnar-shuffle-spill-'));

describe('memory the writer takes from its pool', () => {
  test('a memLimit above the pool\'s share does not size the pages: on a 4 MiB pool with memLimit 64 MiB a page is 1/16 of the 4 MiB (256 KiB), not 1 MiB', async () => {
    const pool = new MemoryPool(4 * 1024 * 1024);
    const writer = await SortShuffleWriter.create(options(2, { memoryPool: pool, memLimit: 64 * 1024 * 1024 }));
    await writer.write(spread(2, 2));
    // a 256 KiB page, a 256 KiB arena (4 blocks of 64 KiB), 1024 pointer slots, scratch and state
    expect(pool.reserved).toBeLessThan(1024 * 1024);
    await writer.abort();
  });

  test('a batch of no rows takes nothing from the pool (no block writer, no group arrays): the writer holds only its per-partition state', async () => {
    const pool = new MemoryPool();
    const writer = await SortShuffleWriter.create(options(4, { memoryPool: pool }));
    await writer.write(spread(0, 4));
    expect(pool.reserved).toBe(16 * 4);
    const result = await writer.finish();
    expect(result.batches).toBe(1);
    expect(pool.reserved).toBe(0);
  });
});

describe('a reclaim that comes while write() runs', () => {
  test("at any turn into a write (an earlier batch's rows in memory, so it spills them), every row of both batches is written once and the pool ends empty", async () => {
    const microtask = () => Promise.resolve();
    for (let turns = 0; turns < 40; turns++) {
      const pool = new MemoryPool();
      const writer = await SortShuffleWriter.create(options(3, { memoryPool: pool, overwrite: true, pageBytes: 1024, blockBytes: 256 }));
      const first = spread(200, 3, 'a');
      const second = spread(300, 3, 'b', 200);
      await writer.write(first);
      const writing = writer.write(second);
      for (let t = 0; t < turns; t++) await microtask();
      await writer.reclaim(1);
      await writing;
      const result = await writer.finish();
      expect(result.rows, `${turns} turns in`).toBe(500);
      expect(pool.reserved, `${turns} turns in`).toBe(0);
      expect(await readAll(3), `${turns} turns in`).toEqual(expected([first, second], 3));
    }
  });
});

describe('a write() that comes while a reclaim\'s spill run is on its way', () => {
  test('at any turn of the event loop into the spill, the write waits for it: no row is dropped when the run ends and the pages are reset', async () => {
    const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
    for (let turns = 0; turns <= 12; turns++) {
      const writer = await SortShuffleWriter.create(options(3, { overwrite: true, codec: 'lz4', pageBytes: 64 * 1024 }));
      const first = spread(20_000, 3, 'a');
      const second = spread(2000, 3, 'b', 20_000);
      await writer.write(first);
      const reclaiming = writer.reclaim(1);
      for (let t = 0; t < turns; t++) await tick();
      await writer.write(second);
      await reclaiming;
      const result = await writer.finish();
      expect(result.rows, `${turns} turns in`).toBe(22_000);
      expect(result.partitionRows, `${turns} turns in`).toEqual([7334, 7334, 7332]);
      expect(await readAll(3), `${turns} turns in`).toEqual(expected([first, second], 3));
    }
  });
});

describe('what finish() reports and does with memory', () => {
  test('peakMemoryBytes is the most the writer ever held: at least what it held after its last write (finish() drops the scratch arrays first)', async () => {
    const pool = new MemoryPool();
    const writer = await SortShuffleWriter.create(options(3, { memoryPool: pool }));
    await writer.write(spread(20_000, 3));
    const held = pool.reserved;
    const result = await writer.finish();
    expect(result.peakMemoryBytes).toBeGreaterThanOrEqual(held);
  });

  test('a reclaim asked for as finish() begins (before its final pass) still writes the rows out: it frees their pages and finish() merges the run', async () => {
    const pool = new MemoryPool();
    const writer = await SortShuffleWriter.create(options(3, { memoryPool: pool, pageBytes: 4096 }));
    const batch = spread(1000, 3);
    await writer.write(batch);
    const finishing = writer.finish();
    const freed = await writer.reclaim(1);
    const result = await finishing;
    expect(freed).toBeGreaterThan(0);
    expect(result.spills).toBe(1);
    expect(await readAll(3)).toEqual(expected([batch], 3));
    expect(await spillFiles()).toEqual([]);
  });
});

describe('more than 65 536 partitions (rows placed in input order, no grouping)', () => {
  test('a batch larger than every one before it: all its rows land in their partitions', async () => {
    const numPartitions = 70_001;
    const writer = await SortShuffleWriter.create(options(numPartitions));
    const small = textBatch([['a', 69_999], ['b', 3]]);
    const large = textBatch([['c', 3], ['d', 70_000], ['e', 5], ['f', 69_999], ['g', 3]], 2);
    await writer.write(small);
    await writer.write(large);
    const result = await writer.finish();
    expect(result.rows).toBe(7);
    const want = expected([small, large], numPartitions);
    const reader = await ShuffleReader.open(`${dir}/out/map`);
    try {
      for (const p of [3, 5, 69_999, 70_000]) {
        const rows: string[] = [];
        for await (const b of reader.readPartition(p)) rows.push(...rowsOf(b, [0, 1]));
        expect(rows, `partition ${p}`).toEqual(want[p]);
      }
    } finally {
      await reader.close();
    }
  });
});

describe('memory accounting across writes', () => {
  test('scratch grown for a larger batch is reserved once: after batches of 100 and 200 rows and a reclaim, the pool holds only the per-partition state', async () => {
    const pool = new MemoryPool();
    const writer = await SortShuffleWriter.create(options(3, { memoryPool: pool }));
    await writer.write(spread(100, 3));
    await writer.write(spread(200, 3, 'v', 100));
    await writer.reclaim(1);
    expect(pool.reserved).toBe(16 * 3);
    expect((await writer.finish()).rows).toBe(300);
    expect(pool.reserved).toBe(0);
  });

  test('finish() takes its merge read buffer from spare pages before it spills the rows in memory once more', async () => {
    const MiB = 1024 * 1024;
    const pool = new MemoryPool(4 * MiB);
    const other = pool.register('other consumer');
    await other.grow(4 * MiB - 1.5 * MiB);
    const writer = await SortShuffleWriter.create(options(2, { memoryPool: pool, pageBytes: 64 * 1024 }));
    // about 23 pages of rows where about 17 fit: one spill inside the write, then the rest fill some of the spare pages again
    const batch = textBatch(Array.from({ length: 1500 }, (_, i) => [String(i).padEnd(1000, 'x'), i % 2] as const));
    await writer.write(batch);
    // the pool can then give 300 KiB: too little for the 512 KiB read buffer, enough for the merge's read windows
    other.shrink(300 * 1024 - pool.available);
    const result = await writer.finish();
    expect(result.spills).toBe(1);
    expect(await readAll(2)).toEqual(expected([batch], 2));
    other.free();
    expect(pool.reserved).toBe(0);
  });
});

test("a spill another consumer asked for that fails makes the next write() reject with that error: the writer is aborted and leaves nothing", async () => {
  const spillDir = `${dir}/spill`;
  await mkdir(spillDir);
  const pool = new MemoryPool();
  const writer = await SortShuffleWriter.create(options(2, { spillDir, memoryPool: pool }));
  await writer.write(spread(3, 2));
  await rm(spillDir, { recursive: true });
  const failure = await writer.reclaim(1).then(() => null, (error: unknown) => error);
  expect(failure).not.toBeNull();
  await expect(writer.write(spread(2, 2, 'v', 3))).rejects.toBe(failure);
  expect(await listFiles(`${dir}/out`)).toEqual([]);
  expect(pool.reserved).toBe(0);
  await expect(writer.finish()).rejects.toMatchObject({ code: 'CS_WRITER_CLOSED' });
});

test('without a codec the block writer reserves no room for compressed output: lz4 holds at least a whole arena (4 blocks) more', async () => {
  const held: number[] = [];
  for (const codec of ['none', 'lz4'] as const) {
    const pool = new MemoryPool();
    const writer = await SortShuffleWriter.create(options(2, { memoryPool: pool, codec, pageBytes: 4096, blockBytes: 4096, overwrite: true }));
    await writer.write(spread(10, 2));
    held.push(pool.reserved);
    await writer.abort();
  }
  expect(held[1]! - held[0]!).toBeGreaterThanOrEqual(4 * 4096);
});

describe('blocks staged in the block writer\'s arena (at most 16 header slots for an arena under 8 KiB, 32 for 16 KiB)', () => {
  test('twenty rows each larger than a block, back to back in one partition: each is a block of its own and every row reads back', async () => {
    const writer = await SortShuffleWriter.create(options(1, { blockBytes: 64 }));
    const batch = textBatch(Array.from({ length: 20 }, (_, i) => [String(i).padEnd(100, 'y'), 0] as const));
    await writer.write(batch);
    const result = await writer.finish();
    expect(result.partitionBatches).toEqual([20]);
    expect(await readAll(1)).toEqual(expected([batch], 1));
  });

  test('forty partitions of one small row each (more blocks than one arena has header slots): every row reads back from its partition', async () => {
    const writer = await SortShuffleWriter.create(options(40, { blockBytes: 4096 }));
    const batch = spread(40, 40);
    await writer.write(batch);
    const result = await writer.finish();
    expect(result.partitionBatches).toEqual(new Array<number>(40).fill(1));
    expect(await readAll(40)).toEqual(expected([batch], 40));
  });
});

test('abort() at any point of finish() (0-60 turns of the event loop, then 0-3 microtasks): finish() is refused with nothing left, or the output stands whole and finish() returns it', async () => {
  const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
  const outcomes = new Set<string>();
  for (let turns = 0; turns <= 60; turns++) {
    for (const microtasks of [0, 1, 2, 3]) {
      const out = `${dir}/out/t${turns}-${microtasks}`;
      await mkdir(out);
      const pool = new MemoryPool();
      const writer = await SortShuffleWriter.create(options(3, { memoryPool: pool, outputPrefix: `${out}/o` }));
      const batch = spread(50, 3);
      await writer.write(batch);
      const finishing = writer.finish().then(
        (result) => ({ rows: result.rows }),
        (e: unknown) => ({ code: (e as { code?: string }).code }),
      );
      for (let t = 0; t < turns; t++) await tick();
      for (let t = 0; t < microtasks; t++) await Promise.resolve();
      await writer.abort();
      const at = `${turns} turns and ${microtasks} microtasks in`;
      const whenAborted = await listFiles(out);
      const finished = await finishing;
      expect(await listFiles(out), at).toEqual(whenAborted);
      expect(pool.reserved, at).toBe(0);
      if ('code' in finished) {
        expect(finished.code, at).toBe('CS_WRITER_CLOSED');
        expect(whenAborted, at).toEqual([]);
        outcomes.add('refused');
      } else {
        expect(whenAborted, at).toEqual(['o.checksum.CRC32C', 'o.data', 'o.index']);
        expect(await readAll(3, `${out}/o`), at).toEqual(expected([batch], 3));
        outcomes.add('committed');
      }
    }
  }
  expect(outcomes).toEqual(new Set(['refused', 'committed']));
});

test('finish() gives every page back to the pool\'s recycler, spare pages included, for the next consumer to reuse warm', async () => {
  const MiB = 1024 * 1024;
  const pool = new MemoryPool(8 * MiB);
  const other = pool.register('other consumer');
  await other.grow(8 * MiB - 1.5 * MiB);
  const writer = await SortShuffleWriter.create(options(2, { memoryPool: pool, pageBytes: 64 * 1024 }));
  // rows for about 15 pages where about 9 fit: a spill inside the write leaves 6 spare pages
  const batch = textBatch(Array.from({ length: 1500 }, (_, i) => [String(i).padEnd(1000, 'x'), i % 2] as const));
  await writer.write(batch);
  const held = pool.reserved - other.size;
  other.free();
  const result = await writer.finish();
  expect(result.spills).toBe(1);
  expect(pool.reserved).toBe(0);
  // what the writer held less its block writer's arena and headers, pointer array and scratch (about 570 KiB, not
  // recycler buffers) are its pages; the recycler keeps them, and the 1 MiB merge read buffer (without the 6 spare
  // pages, 384 KiB, it would hold about held - 950 KiB + 1 MiB)
  expect(pool.idle).toBeGreaterThanOrEqual(held - 750 * 1024 + MiB);
});
