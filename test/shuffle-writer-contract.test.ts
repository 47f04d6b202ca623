/**
 * Claims about the columnar hash writer (ShuffleWriter) that a mutation sweep of
 * src/writer/shuffle-writer.ts and src/writer/writer-calls.ts found no other test
 * pinned: memory given back, reclaim's reach, the life-cycle after finish(), the
 * per-partition counts.
 */
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Dictionary, Field, Int32, makeData, RecordBatch, Schema, Struct, Utf8, vectorFromArray } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryPool, ShuffleError, ShuffleWriter, type ShuffleWriterOptions } from '../src/index.js';
import { OneCallAtATime, writerAborted, type WriterState } from '../src/writer/writer-calls.js';
import { PayloadStore } from '../src/spill/payload-store.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';
import { readValuesAndSizes } from './support/shuffle-harness.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-contract-')));
afterEach(async () => removeDir(dir));

const INT_SCHEMA = new Schema([new Field('v', new Int32(), false)]);

/** `count` consecutive int32 values from `first`, one non-null column `v`. */
function batchOf(first: number, count: number): RecordBatch {
  const ints = makeData({ type: new Int32(), length: count, data: Int32Array.from({ length: count }, (_, i) => first + i) });
  return new RecordBatch(INT_SCHEMA, makeData({ type: new Struct(INT_SCHEMA.fields), length: count, children: [ints] }));
}

function options(overrides: Partial<ShuffleWriterOptions> = {}): ShuffleWriterOptions {
  return { numPartitions: 4, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, 'out'), spillDir: dir, stagingBytes: 0, ...overrides };
}

/** Every partition's values (in the order read) and each output batch's rows. */
const readBack = (prefix: string) => readValuesAndSizes(prefix);

const inOrder = (n: number) => Array.from({ length: n }, (_, i) => i);
const sorted = (values: number[][]) => values.flat().sort((a, b) => a - b);

async function codeOf(promise: Promise<unknown>): Promise<string | null> {
  return promise.then(
    () => null,
    (e: unknown) => (e instanceof ShuffleError ? e.code : `not a ShuffleError: ${String(e)}`),
  );
}

describe('finish() and after', () => {
  it('a write() in the same tick as finish() is CS_WRITER_CLOSED (the writer is finishing), not CS_WRITER_BUSY', async () => {
    const writer = await ShuffleWriter.create(options());
    await writer.write(batchOf(0, 10));
    const finishing = writer.finish();
    expect(await codeOf(writer.write(batchOf(10, 10)))).toBe('CS_WRITER_CLOSED');
    expect(await codeOf(writer.finish())).toBe('CS_WRITER_CLOSED');
    expect((await finishing).rows).toBe(10);
  });

  it('abort() changes nothing: the output stands, and the writer still says it is finished', async () => {
    const writer = await ShuffleWriter.create(options());
    await writer.write(batchOf(0, 100));
    const result = await writer.finish();
    const files = await listFiles(dir);
    await writer.abort();
    expect(await listFiles(dir)).toEqual(files);
    expect(sorted((await readBack(join(dir, 'out'))).values)).toEqual(inOrder(100));
    expect(result.rows).toBe(100);
    await expect(writer.write(batchOf(100, 1))).rejects.toThrow(/the writer is finished/);
  });
});

describe('reclaim', () => {
  it('frees at least half of what the writer holds, even when asked for one byte', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, numPartitions: 8, mergeThreshold: 0 }));
    await writer.write(batchOf(0, 80)); // 10 rows in each of 8 buffers sized for thousands
    const held = pool.reserved;
    const freed = await writer.reclaim(1);
    expect(freed).toBeGreaterThanOrEqual(Math.floor(held / 2));
    expect(pool.reserved).toBe(held - freed);
    await writer.write(batchOf(80, 80));
    const result = await writer.finish();
    expect(result.spills).toBe(0); // half was there to take by shrinking the buffers: nothing had to be spilled
    expect(sorted((await readBack(join(dir, 'out'))).values)).toEqual(inOrder(160));
    expect(pool.reserved).toBe(0);
  });
});

const PID_SCHEMA = new Schema([new Field('pid', new Int32(), false), new Field('v', new Int32(), false)]);

/** `count` consecutive values from `first`, all sent to partition `pid` (partition-id partitioning: the pid column is not output). */
function toPartition(pid: number, first: number, count: number): RecordBatch {
  const column = (values: Int32Array) => makeData({ type: new Int32(), length: count, data: values });
  return new RecordBatch(
    PID_SCHEMA,
    makeData({ type: new Struct(PID_SCHEMA.fields), length: count, children: [column(new Int32Array(count).fill(pid)), column(Int32Array.from({ length: count }, (_, i) => first + i))] }),
  );
}

// output rows of one int32 (4 bytes), 2 partitions: (320 / 4 / 2) >> 2 = 10 rows per buffer, chunks of 20 rows
const TEN_ROWS_TWO_PARTITIONS = { numPartitions: 2, partitioning: { kind: 'partition-id', column: 'pid' }, memLimit: 320, memLimitFloor: 320, maxBatchRows: 40, mergeThreshold: 0 } as const;

describe('reclaim that evicts partition buffers', () => {
  it("gives back the compressor's memory once the spill run is on disk: the pool holds exactly what it held less what reclaim reports", async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, mergeThreshold: 0 }));
    await writer.write(batchOf(0, 4000)); // 1,000 rows in each buffer, no payload yet
    const before = pool.reserved;
    const freed = await writer.reclaim(Number.MAX_SAFE_INTEGER);
    expect(freed).toBeGreaterThan(0);
    expect(pool.reserved).toBe(before - freed);
    const result = await writer.finish();
    expect(result.spills).toBe(1);
    expect(sorted((await readBack(join(dir, 'out'))).values)).toEqual(inOrder(4000));
  });
});

describe('reclaim once finish() has begun', () => {
  it('still spills the cached payloads and buffered rows finish() has not reached (another consumer may need the memory)', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, numPartitions: 8, maxBatchRows: 256, mergeThreshold: 0, codec: 'none' }));
    for (let b = 0; b < 8; b++) await writer.write(batchOf(b * 1000, 1000)); // cached payloads, and rows in every buffer
    const finishing = writer.finish();
    const freed = await writer.reclaim(Number.MAX_SAFE_INTEGER);
    expect(freed).toBeGreaterThan(0);
    const result = await finishing;
    expect(result.spills).toBeGreaterThanOrEqual(1);
    expect(sorted((await readBack(join(dir, 'out'))).values)).toEqual(inOrder(8000));
    expect(pool.reserved).toBe(0);
  });
});

describe('partition buffer sizing', () => {
  it('a buffer a reclaim cut down to its rows is sized from the formula again for the next chunk', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, mergeThreshold: 0 }));
    await writer.write(batchOf(0, 40)); // 10 rows in each of 4 buffers sized for thousands
    await writer.reclaim(1024); // shrinks them to 10 rows
    for (let b = 0; b < 4; b++) await writer.write(batchOf(40 + b * 400, 400)); // 100 rows per partition each
    const result = await writer.finish();
    const { values, sizes } = await readBack(join(dir, 'out'));
    expect(sorted(values)).toEqual(inOrder(1640));
    expect(result.spills).toBe(0);
    expect(sizes).toEqual([[410], [410], [410], [410]]); // kept at 100 rows, each buffer would have flushed 4 times
  });

  it('a buffer grown for a skewed chunk keeps that size while the preferred size stays within the band: later payloads fill it', async () => {
    const writer = await ShuffleWriter.create(options(TEN_ROWS_TWO_PARTITIONS));
    await writer.write(toPartition(0, 0, 20)); // 20 rows for a buffer sized for 10: it grows to 20
    for (let b = 0; b < 10; b++) await writer.write(toPartition(0, 20 + b * 6, 6));
    await writer.finish();
    const { values, sizes } = await readBack(join(dir, 'out'));
    expect(values[0]).toEqual(inOrder(80));
    expect(sizes[0]).toEqual([20, 20, 20, 20]); // shrunk back to 10 rows, the buffer would make payloads of 10
  });
});

describe('the payload merger', () => {
  it("a partition's parked rows go out before a larger eviction of newer rows: the partition reads back in order", async () => {
    const writer = await ShuffleWriter.create(options({ ...TEN_ROWS_TWO_PARTITIONS, mergeThreshold: 0.25 })); // mergeMinRows 10
    await writer.write(toPartition(1, 0, 6)); // 6 rows in a 10-row buffer
    await writer.write(toPartition(1, 6, 20)); // the buffer grows to 20: its 6 rows are evicted first, and parked
    await writer.write(toPartition(1, 26, 20)); // 20 + 20 > 20: an eviction of 20 rows, above mergeMinRows
    await writer.finish();
    const { values, sizes } = await readBack(join(dir, 'out'));
    expect(values[1]).toEqual(inOrder(46));
    expect(sizes[1]).toEqual([6, 20, 20]);
  });

  it('a buffer exactly mergeMinRows rows large is topped up, and its evictions of mergeMinRows rows are parked until they make maxBatchRows', async () => {
    // buffers of 10 rows for partition 1; mergeMinRows = 40 x 0.25 = 10
    const writer = await ShuffleWriter.create(options({ ...TEN_ROWS_TWO_PARTITIONS, mergeThreshold: 0.25 }));
    for (let b = 0; b < 15; b++) await writer.write(toPartition(1, b * 6, 6));
    await writer.finish();
    const { values, sizes } = await readBack(join(dir, 'out'));
    expect(values[1]).toEqual(inOrder(90));
    expect(sizes[1]).toEqual([40, 40, 10]);
  });
});

describe('the result', () => {
  it('counts every row of a partition in partitionRows, the rows a top-up moved included', async () => {
    const writer = await ShuffleWriter.create(options({ ...TEN_ROWS_TWO_PARTITIONS }));
    for (let b = 0; b < 10; b++) await writer.write(toPartition(1, b * 6, 6)); // 6 + 6 > 10: each flush is topped up
    const result = await writer.finish();
    const { values, sizes } = await readBack(join(dir, 'out'));
    expect(sizes[1]).toEqual([10, 10, 10, 10, 10, 10]);
    expect(values[1]).toEqual(inOrder(60));
    expect(result.partitionRows).toEqual([0, 60]);
    expect(result.rows).toBe(60);
    expect(result.batches).toBe(10);
  });
});

describe('compression', () => {
  /** bytes written for one payload of `rows` zeros, given compressionMinRows */
  async function bytesFor(rows: number, compressionMinRows: number, name: string): Promise<number> {
    const writer = await ShuffleWriter.create(options({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: join(dir, name), compressionMinRows, mergeThreshold: 0 }));
    await writer.write(new RecordBatch(INT_SCHEMA, makeData({ type: new Struct(INT_SCHEMA.fields), length: rows, children: [makeData({ type: new Int32(), length: rows, data: new Int32Array(rows) })] })));
    return (await writer.finish()).bytesWritten;
  }

  it('a payload of exactly compressionMinRows rows is compressed; with the threshold one row higher it is stored as it is', async () => {
    const atThreshold = await bytesFor(1000, 1000, 'at');
    const belowThreshold = await bytesFor(1000, 1001, 'below');
    expect(atThreshold).toBeLessThan(belowThreshold - 2000); // 4,000 bytes of zeros compress to a few dozen
  });
});

const WORDS = new Dictionary(new Utf8(), new Int32(), 7);
const WORDS_SCHEMA = new Schema([new Field('pid', new Int32(), false), new Field('d', WORDS, true)]);

/** A dictionary-encoded column `d` of `words`, row i to partition pids[i] (partition-id partitioning on `pid`). */
function wordsTo(pids: number[], words: string[]): RecordBatch {
  const column = vectorFromArray(words, WORDS).data[0]!;
  const ids = makeData({ type: new Int32(), length: pids.length, data: Int32Array.from(pids) });
  return new RecordBatch(WORDS_SCHEMA, makeData({ type: new Struct(WORDS_SCHEMA.fields), length: pids.length, children: [ids, column] }));
}

describe('a refused batch changes nothing', () => {
  // write() once took in a batch's dictionaries before computing its partition ids: the values of a batch refused
  // with CS_PARTITION_ID_OUT_OF_RANGE were then written into every partition's stream.
  it('the dictionary values of a batch refused for an out-of-range partition id are not written', async () => {
    const prefix = join(dir, 'out');
    const writer = await ShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, codec: 'none', schema: WORDS_SCHEMA });
    await writer.write(wordsTo([0, 1], ['apple', 'banana']));
    expect(await codeOf(writer.write(wordsTo([0, 7], ['apple', 'REFUSED-VALUE'])))).toBe('CS_PARTITION_ID_OUT_OF_RANGE');
    await writer.write(wordsTo([1, 0], ['apple', 'cherry']));
    expect((await writer.finish()).rows).toBe(4);
    const data = await readFile(`${prefix}.data`);
    expect(data.includes(Buffer.from('REFUSED-VALUE'))).toBe(false);
  });
});

describe('one call at a time (writer-calls.ts)', () => {
  it('lets a call in after the one before it failed, and refuses a second call made on the same tick with CS_WRITER_BUSY', async () => {
    const calls = new OneCallAtATime(() => 'open');
    await expect(calls.run('write', async () => Promise.reject(new Error('disk full')))).rejects.toThrow('disk full');
    const first = calls.run('write', async () => 'first');
    expect(await codeOf(calls.run('finish', async () => 'second'))).toBe('CS_WRITER_BUSY');
    expect(await first).toBe('first');
    expect(await calls.run('finish', async () => 'third')).toBe('third');
  });

  it.each(['finishing', 'finished', 'aborted'] as WriterState[])('refuses every call once the writer is %s, with CS_WRITER_CLOSED, without running it', async (state) => {
    const calls = new OneCallAtATime(() => state);
    let ran = false;
    expect(await codeOf(calls.run('write', async () => void (ran = true)))).toBe('CS_WRITER_CLOSED');
    expect(ran).toBe(false);
  });

  it('an aborted call reports CS_WRITER_CLOSED with what it ran into as the cause, and passes a CS_WRITER_CLOSED on as it is', () => {
    const disk = new Error('disk full');
    const aborted = writerAborted('while write() was running', disk);
    expect(aborted.code).toBe('CS_WRITER_CLOSED');
    expect(aborted.cause).toBe(disk);
    expect(writerAborted('while finish() was running', aborted)).toBe(aborted);
    expect(writerAborted('before a spill').cause).toBeUndefined();
  });
});

describe('a reclaim that fails while finish() runs', () => {
  it("fails finish() with the spill's error and leaves no output: rows may have gone with the failed spill", async () => {
    const spillDir = join(dir, 'spill');
    await mkdir(spillDir);
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, numPartitions: 8, maxBatchRows: 256, mergeThreshold: 0, codec: 'none', spillDir }));
    for (let b = 0; b < 8; b++) await writer.write(batchOf(b * 1000, 1000)); // cached payloads, and rows in every buffer
    await rm(spillDir, { recursive: true }); // the reclaim's spill cannot create its file
    const finishing = writer.finish();
    expect(await codeOf(writer.reclaim(Number.MAX_SAFE_INTEGER))).toBe('CS_FILE_NOT_FOUND');
    expect(await codeOf(finishing)).toBe('CS_FILE_NOT_FOUND');
    expect(await listFiles(dir)).toEqual([]);
    expect(pool.reserved).toBe(0);
  });
});

describe('abort() while finish() still has to commit', () => {
  it('an abort() that comes once finish() has let go of its payloads (after the merge, before the commit) refuses finish(), and nothing is left', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool }));
    await writer.write(batchOf(0, 100));
    const discard = PayloadStore.prototype.discard;
    let aborting: Promise<void> | null = null;
    const spy = vi.spyOn(PayloadStore.prototype, 'discard').mockImplementation(function (this: PayloadStore) {
      // the first discard is finish()'s own, right before its commit: the abort comes as it ends
      return discard.call(this).then(() => void (aborting ??= writer.abort()));
    });
    try {
      expect(await codeOf(writer.finish())).toBe('CS_WRITER_CLOSED');
      await aborting;
    } finally {
      spy.mockRestore();
    }
    expect(await listFiles(dir)).toEqual([]);
    expect(pool.reserved).toBe(0);
  });
});

describe('the payload merger after a reclaim', () => {
  it('stops parking once a reclaim has drained the merge buffers: later small evictions are payloads of their own', async () => {
    // buffers of 10 rows for partition 1; mergeMinRows = 40 x 0.25 = 10
    const writer = await ShuffleWriter.create(options({ ...TEN_ROWS_TWO_PARTITIONS, mergeThreshold: 0.25 }));
    for (let b = 0; b < 3; b++) await writer.write(toPartition(1, b * 6, 6)); // an eviction of 10 rows parked, 8 rows buffered
    await writer.reclaim(1);
    for (let b = 3; b < 15; b++) await writer.write(toPartition(1, b * 6, 6));
    await writer.finish();
    const { values, sizes } = await readBack(join(dir, 'out'));
    expect(values[1]).toEqual(inOrder(90));
    expect(sizes[1]).toEqual([10, 8, 10, 10, 10, 10, 10, 10, 10, 2]); // merging on, the last 72 rows came out as [40, 32]
  });
});

describe('a reclaim another consumer asked for that fails', () => {
  it("makes the writer's next call reject with that error and leaves nothing: the rows it took from the buffers are gone", async () => {
    const spillDir = join(dir, 'spill');
    await mkdir(spillDir);
    const pool = new MemoryPool(64 * 1024 * 1024);
    await mkdir(join(dir, 'out'));
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, mergeThreshold: 0, spillDir, outputPrefix: join(dir, 'out', 'map') }));
    await writer.write(batchOf(0, 4000)); // 1,000 rows in each buffer
    await rm(spillDir, { recursive: true });
    const failure = await writer.reclaim(Number.MAX_SAFE_INTEGER).then(() => null, (error: unknown) => error);
    expect(failure).toBeInstanceOf(ShuffleError);
    await expect(writer.finish()).rejects.toBe(failure);
    expect(await listFiles(join(dir, 'out'))).toEqual([]);
    expect(pool.reserved).toBe(0);
  });
});

describe('abort() while a reclaim waits', () => {
  it('the reclaim writes no spill file once abort() has begun: it is CS_WRITER_CLOSED, and nothing outlives the writer', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, mergeThreshold: 0 }));
    await writer.write(batchOf(0, 4000)); // 1,000 rows in each buffer
    const reclaiming = codeOf(writer.reclaim(Number.MAX_SAFE_INTEGER)); // waits for in-flight compressions first
    await writer.abort();
    expect(await reclaiming).toBe('CS_WRITER_CLOSED');
    expect(await listFiles(dir)).toEqual([]);
    expect(pool.reserved).toBe(0);
  });
});

/**
 * A writer of one partition on a 4 MiB pool, with buffers of 2,048 rows whose
 * evictions are parked in the merge buffer until it holds `maxBatchRows`.
 */
async function parkingWriter(maxBatchRows: number): Promise<{ pool: MemoryPool; writer: ShuffleWriter }> {
  const pool = new MemoryPool(4 * 1024 * 1024);
  const writer = await ShuffleWriter.create(
    options({ memoryPool: pool, numPartitions: 1, partitioning: { kind: 'single' }, codec: 'none', memLimit: 32 * 1024, memLimitFloor: 32 * 1024, maxBatchRows, mergeThreshold: 0.25 }),
  );
  return { pool, writer };
}

describe('a payload that waits for memory', () => {
  it('keeps its rows out of a reclaim meanwhile: parked rows finish() emits while the pool is short are written once', async () => {
    const { pool, writer } = await parkingWriter(200_000);
    for (let b = 0; b < 80; b++) await writer.write(batchOf(b * 2048, 2048)); // 160 K rows (640 KB) parked
    const other = pool.register('other consumer');
    await other.grow(pool.available - 600 * 1024); // their payload must wait: the pool asks the writer itself to reclaim
    await writer.finish();
    other.free();
    const { values } = await readBack(join(dir, 'out'));
    expect(values[0]).toEqual(inOrder(80 * 2048));
    expect(pool.reserved).toBe(0);
  });
});

describe('an eviction the pool has no memory for', () => {
  it('goes straight into a spill run, parked rows included, and those rows are written once', async () => {
    const { pool, writer } = await parkingWriter(80 * 2048);
    for (let b = 0; b < 80; b++) await writer.write(batchOf(b * 2048, 2048)); // 79 evictions parked, 2,048 rows buffered
    const other = pool.register('other consumer');
    await other.grow(pool.available - 600 * 1024); // no room for a payload of the 640 KB merge buffer
    await writer.write(batchOf(80 * 2048, 2048)); // the merge buffer fills: its payload cannot be had, so it is spilled
    other.free();
    await writer.write(batchOf(81 * 2048, 2048));
    const result = await writer.finish();
    expect(result.spills).toBe(1);
    const { values } = await readBack(join(dir, 'out'));
    expect(values[0]).toEqual(inOrder(82 * 2048));
    expect(pool.reserved).toBe(0);
  });
});

describe('dictionary batches a replacement superseded', () => {
  it('are let go by the next reclaim, which spills the payloads that pointed at them', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const big = 'a'.repeat(100_000);
    const writer = await ShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: join(dir, 'out'), spillDir: dir, codec: 'none', schema: WORDS_SCHEMA, memoryPool: pool, dictionaryUpdates: 'replacement', mergeThreshold: 0 });
    await writer.write(wordsTo([0, 1], [big, 'b']));
    await writer.reclaim(Number.MAX_SAFE_INTEGER); // the rows and their dictionary batch (100 KB) are spilled
    await writer.write(wordsTo([0, 1], [big, 'c'])); // a new value: a replacement dictionary batch (100 KB) supersedes the first
    const before = pool.reserved;
    const freed = await writer.reclaim(Number.MAX_SAFE_INTEGER);
    expect(freed).toBeGreaterThan(100_000); // the superseded batch, besides two rows' buffers
    expect(pool.reserved).toBe(before - freed);
    expect((await writer.finish()).rows).toBe(4);
    expect(pool.reserved).toBe(0);
  });
});

describe('input staging', () => {
  it('a batch of exactly a quarter of the staging target (16 rows per partition) is split at once, not staged: a reclaim after it can spill its rows', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    // 4 partitions: a staging target of 64 x 4 = 256 rows, set by a first batch of 10 rows
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, stagingBytes: 1024 * 1024, mergeThreshold: 0 }));
    await writer.write(batchOf(0, 10)); // staged
    await writer.write(batchOf(10, 64)); // 64 x 4 = 256: split, with the 10 staged rows before it
    await writer.reclaim(Number.MAX_SAFE_INTEGER); // staged rows could not be spilled; split ones are
    const result = await writer.finish();
    expect(result.spills).toBe(1);
    expect(sorted((await readBack(join(dir, 'out'))).values)).toEqual(inOrder(74));
  });
});
