/**
 * Claims about the columnar hash writer's core (src/writer/shuffle-writer.ts, but for its spill paths;
 * src/writer/buffer-sizing.ts; src/writer/input-staging.ts) that the twenty-second mutation sweep found no
 * other test pinned (docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps"). Each test
 * compares with a simple reference: the rows read back through ShuffleReader against the rows written,
 * memory against the pool's own figures.
 */
import { join } from 'node:path';
import { Field, Int32, makeData, RecordBatch, Schema, Struct, Table, Utf8, Utf8View, vectorFromArray } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { MemoryPool, ShuffleError, ShuffleWriter, type ShuffleWriterOptions } from '../src/index.js';
import { PayloadStore } from '../src/spill/payload-store.js';
import { batchBufferBytes } from '../src/writer/input-staging.js';
import { batchOf as batchOfColumns, buildColumn } from './support/columns.js';
import { Rng } from './support/random.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';
import { readValuesAndSizes } from './support/shuffle-harness.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-core-')));
afterEach(async () => {
  vi.restoreAllMocks();
  await removeDir(dir);
});

const INT_SCHEMA = new Schema([new Field('v', new Int32(), false)]);
const STR_SCHEMA = new Schema([new Field('v', new Int32(), false), new Field('s', new Utf8(), false)]);

/** `count` consecutive int32 values from `first`, one non-null column `v`. */
function intBatch(first: number, count: number): RecordBatch {
  const ints = makeData({ type: new Int32(), length: count, data: Int32Array.from({ length: count }, (_, i) => first + i) });
  return new RecordBatch(INT_SCHEMA, makeData({ type: new Struct(INT_SCHEMA.fields), length: count, children: [ints] }));
}

/** The same with a utf8 column `s` of `width` bytes per value ("v<first+i>" padded with 'x'). */
function strBatch(first: number, count: number, width: number): RecordBatch {
  const ints = Int32Array.from({ length: count }, (_, i) => first + i);
  const offsets = Int32Array.from({ length: count + 1 }, (_, i) => i * width);
  const data = new Uint8Array(count * width).fill(0x78);
  const strs = makeData({ type: new Utf8(), length: count, valueOffsets: offsets, data });
  const v = makeData({ type: new Int32(), length: count, data: ints });
  return new RecordBatch(STR_SCHEMA, makeData({ type: new Struct(STR_SCHEMA.fields), length: count, children: [v, strs] }));
}

const PID_SCHEMA = new Schema([new Field('v', new Int32(), false), new Field('pid', new Int32(), false)]);

/** Rows `first`.. with `v` = the row number and partition id `pidOf(v)` (partitioning partition-id, column `pid`). */
function pidBatch(first: number, count: number, pidOf: (v: number) => number): RecordBatch {
  const v = makeData({ type: new Int32(), length: count, data: Int32Array.from({ length: count }, (_, i) => first + i) });
  const pid = makeData({ type: new Int32(), length: count, data: Int32Array.from({ length: count }, (_, i) => pidOf(first + i)) });
  return new RecordBatch(PID_SCHEMA, makeData({ type: new Struct(PID_SCHEMA.fields), length: count, children: [v, pid] }));
}
const BY_PID = { kind: 'partition-id', column: 'pid' } as const;

function options(overrides: Partial<ShuffleWriterOptions> = {}): ShuffleWriterOptions {
  return { numPartitions: 4, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, 'out'), spillDir: dir, stagingBytes: 0, ...overrides };
}

/** Every partition's `v` values in the order read, and each record batch's rows. */
const readBack = (prefix = join(dir, 'out')) => readValuesAndSizes(prefix);

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
/**
 * Round-robin over P partitions of rows 0..n-1, starting where the partition holding row 0 says (Spark's start
 * for the map task): partition (start + i) % P gets row i, in order. `values` are the partitions read back.
 */
const roundRobin = (n: number, P: number, values: number[][]) => {
  const start = Math.max(0, values.findIndex((rows) => rows[0] === 0));
  return Array.from({ length: P }, (_, p) => range(0, n).filter((i) => (start + i) % P === p));
};

async function codeOf(promise: Promise<unknown>): Promise<string | null> {
  return promise.then(
    () => null,
    (e: unknown) => (e instanceof ShuffleError ? e.code : `not a ShuffleError: ${String(e)}`),
  );
}

describe('rows: every row once, in order', () => {
  test('round-robin over many small batches: partition p holds rows p, p + P, ... in order (reference: the rows written)', async () => {
    const writer = await ShuffleWriter.create(options({ numPartitions: 3, maxBatchRows: 16 }));
    for (let first = 0; first < 500; first += 7) await writer.write(intBatch(first, Math.min(7, 500 - first)));
    const result = await writer.finish();
    const { values } = await readBack();
    expect(values).toEqual(roundRobin(500, 3, values));
    expect(result.rows).toBe(500);
    expect(result.partitionRows).toEqual(roundRobin(500, 3, values).map((r) => r.length));
  });
});

describe('buffer sizing', () => {
  test('a memLimit above a bounded pool\'s share sizes buffers for the share: int32 rows, P = 4, a 1 MiB pool give 1 MiB / 4 B / 4 / 4 = 16,384 rows, not memLimit\'s', async () => {
    const pool = new MemoryPool(1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, memLimit: 1024 ** 3, memLimitFloor: 0, maxBatchRows: 1_000_000 }));
    try {
      expect(await writer.bufferRowsFor(intBatch(0, 1000))).toBe(16_384);
    } finally {
      await writer.abort();
    }
  });
  test('bufferRowsFor a batch without rows is maxBatchRows: nothing to size from (a 1 MiB pool would size int32 rows at 16,384)', async () => {
    const pool = new MemoryPool(1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, memLimitFloor: 0, maxBatchRows: 1_000_000 }));
    try {
      expect(await writer.bufferRowsFor(intBatch(0, 0))).toBe(1_000_000);
      expect(await writer.bufferRowsFor(intBatch(0, 10))).toBe(16_384);
    } finally {
      await writer.abort();
    }
  });
  test('a batch much larger than a chunk is split in chunks of the buffer rows x P: 400,000 int32 rows, P = 4, memLimit 1 MiB give record batches of at most 16,384 rows, not 100,000', async () => {
    // 1 MiB / 4 B / 4 partitions >> 2 = 16,384 rows per buffer, chunks of 65,536 rows (no merger: it would join the evictions)
    const writer = await ShuffleWriter.create(options({ memLimit: 1024 * 1024, memLimitFloor: 1024 * 1024, maxBatchRows: 1_000_000, mergeThreshold: 0 }));
    expect(await writer.bufferRowsFor(intBatch(0, 10))).toBe(16_384);
    await writer.write(intBatch(0, 400_000));
    const result = await writer.finish();
    const { values, sizes } = await readBack();
    expect(values).toEqual(roundRobin(400_000, 4, values));
    expect(Math.max(...sizes.flat())).toBeLessThanOrEqual(16_384);
    expect(result.rows).toBe(400_000);
  });
  test('a fractional width is rounded up, as Gluten does: strings of 1 and 2 bytes are 4 + 1.5 = 5.5, sized as 6 bytes a row (96,000 / 6 / 4 = 4,000 rows, not 4,800)', async () => {
    const writer = await ShuffleWriter.create(options({ numPartitions: 1, memLimit: 96_000, memLimitFloor: 96_000, maxBatchRows: 1_000_000 }));
    try {
      const batch = new Table({ s: vectorFromArray(['a', 'bb', 'c', 'dd'], new Utf8()) }).batches[0]!;
      expect(await writer.bufferRowsFor(batch)).toBe(4000);
    } finally {
      await writer.abort();
    }
  });
});

describe('the payload merger', () => {
  test('a parked eviction of more rows than the merger\'s first row-id table (4,096) comes back whole, nulls included: two evictions of 5,000 rows make one batch of 10,000', async () => {
    // a nullable int32 column, every third value null (the bit copy of its validity reads the row ids)
    const batchOf = (first: number, count: number) => new Table({ v: vectorFromArray(range(first, count).map((v) => (v % 3 === 0 ? null : v)), new Int32()) }).batches[0]!;
    // memLimit = floor = 80,000 bytes, rows of 4 bytes (the sizing counts no validity), one partition: 5,000-row buffers;
    // mergeMinRows 20,000 x 0.25 = 5,000
    const writer = await ShuffleWriter.create(options({ numPartitions: 1, memLimit: 80_000, memLimitFloor: 80_000, maxBatchRows: 20_000, mergeThreshold: 0.25 }));
    await writer.write(batchOf(0, 5000));
    await writer.write(batchOf(5000, 5000)); // the first 5,000 are evicted and parked
    await writer.finish();
    const { values, sizes } = await readBack();
    expect(values).toEqual([range(0, 10_000).map((v) => (v % 3 === 0 ? null : v))]);
    expect(sizes).toEqual([[10_000]]);
  });

  test('parked evictions that add up to exactly maxBatchRows make one batch: 5 + 5 rows at maxBatchRows 10, mergeThreshold 0.5 (an eviction of 5 is parked)', async () => {
    // memLimit = floor = 128 bytes, int32 rows, one partition: 8-row buffers
    const writer = await ShuffleWriter.create(options({ numPartitions: 1, memLimit: 128, memLimitFloor: 128, maxBatchRows: 10, mergeThreshold: 0.5 }));
    await writer.write(intBatch(0, 5)); // the buffer holds 5
    await writer.write(intBatch(5, 5)); // 5 + 5 > 8: the 5 are evicted and parked; the buffer holds 5
    await writer.finish(); // the last 5 are evicted: 5 + 5 = 10 parked rows, one batch
    const { values, sizes } = await readBack();
    expect(values).toEqual([range(0, 10)]);
    expect(sizes).toEqual([[10]]);
  });

  test('an eviction is parked only when it holds at most floor(maxBatchRows x mergeThreshold) rows: 10 x 0.25 = 2.5 parks 2 rows, not 3', async () => {
    // memLimit = floor = 64 bytes, int32 rows, one partition: 64 / 4 / 1 >> 2 = 4-row buffers (and 4-row chunks)
    const writer = await ShuffleWriter.create(options({ numPartitions: 1, memLimit: 64, memLimitFloor: 64, maxBatchRows: 10, mergeThreshold: 0.25 }));
    await writer.write(intBatch(0, 2)); // buffer holds 2
    await writer.write(intBatch(2, 3)); // 2 + 3 > 4: the 2 rows are evicted, parked; the buffer holds 3
    await writer.finish(); // 3 rows evicted: 3 > 2, so the parked 2 go out first, then the 3 as their own batch
    const { values, sizes } = await readBack();
    expect(values).toEqual([range(0, 5)]);
    expect(sizes).toEqual([[2, 3]]);
  });
});

describe('results', () => {
  test('peakMemoryBytes is the highest the writer\'s reservation reached (the pool\'s own figure for it), not what it held at the end', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, numPartitions: 8 }));
    let seen = 0;
    for (let first = 0; first < 40_000; first += 10_000) {
      await writer.write(strBatch(first, 10_000, 20));
      seen = Math.max(seen, ...pool.consumers().map((c) => c.peak));
    }
    const result = await writer.finish();
    expect(seen).toBeGreaterThan(0);
    expect(result.peakMemoryBytes).toBeGreaterThanOrEqual(seen); // it can still rise in finish()
    expect(result.peakMemoryBytes).toBeLessThanOrEqual(pool.peak);
    expect(pool.reserved).toBe(0);
    expect((await readBack()).values.flat().sort((a, b) => a - b)).toEqual(range(0, 40_000));
  });
});

describe('states', () => {
  test('abort() right after writes whose payloads are still compressing: once it resolves the pool holds nothing, and nothing changes afterwards', async () => {
    const pool = new MemoryPool(256 * 1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, numPartitions: 2, maxBatchRows: 8192 }));
    for (let first = 0; first < 200_000; first += 50_000) await writer.write(strBatch(first, 50_000, 40));
    await writer.abort();
    const after = { reserved: pool.reserved, held: pool.held };
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(after.reserved).toBe(0);
    expect({ reserved: pool.reserved, held: pool.held }).toEqual(after);
    expect(await listFiles(dir)).toEqual([]);
  });

  test('a second abort() returns the first one\'s teardown: once it resolves, no file of the writer is left and the pool holds nothing', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await ShuffleWriter.create(options({ memoryPool: pool }));
    await writer.write(strBatch(0, 5000, 30));
    const first = writer.abort();
    const second = writer.abort();
    expect(second).toBe(first);
    await second;
    expect(await listFiles(dir)).toEqual([]);
    expect(pool.reserved).toBe(0);
    expect(await codeOf(writer.write(intBatch(0, 1)))).toBe('CS_WRITER_CLOSED');
    await first;
  });

  test('a write() that abort() comes into rejects with CS_WRITER_CLOSED even when none of its steps fails (no limit, no spill): aborted at any microtask turn of its run', async () => {
    // per turn count: what the write gave when abort() was called that many microtask turns after write()
    const codes: (string | null)[] = [];
    for (let turns = 0; turns < 40; turns++) {
      const writer = await ShuffleWriter.create(options({ outputPrefix: join(dir, `t${turns}`) }));
      const writing = codeOf(writer.write(intBatch(0, 5000)));
      for (let t = 0; t < turns; t++) await Promise.resolve();
      await writer.abort();
      codes.push(await writing);
    }
    // the write takes some turns: aborted before its end it is refused; only once it has resolved is it not
    const closed = codes.findIndex((c) => c !== 'CS_WRITER_CLOSED');
    expect(closed, codes.join(',')).toBeGreaterThan(5);
    expect(codes.slice(closed).every((c) => c === null), codes.join(',')).toBe(true);
  });
});

describe('no record batch holds more than maxBatchRows rows', () => {
  test('tiny buffers, the merger at several thresholds, batches of 1-9 rows: every batch within maxBatchRows, and every row once, in order', async () => {
    let seed = 12345;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    for (const memLimit of [64, 128, 160]) { // one partition of int32 rows: buffers of 4, 8 and 10 rows
      for (const maxBatchRows of [7, 10, 11]) {
        for (const mergeThreshold of [0.3, 0.5, 1]) {
          const prefix = join(dir, `m${memLimit}-${maxBatchRows}-${mergeThreshold}`);
          const writer = await ShuffleWriter.create(options({ outputPrefix: prefix, numPartitions: 1, memLimit, memLimitFloor: memLimit, maxBatchRows, mergeThreshold }));
          let first = 0;
          while (first < 120) {
            const count = 1 + (next() % 9);
            await writer.write(intBatch(first, count));
            first += count;
          }
          const result = await writer.finish();
          const { values, sizes } = await readBack(prefix);
          const where = `memLimit ${memLimit}, maxBatchRows ${maxBatchRows}, mergeThreshold ${mergeThreshold}: ${sizes[0]!.join(',')}`;
          expect(values, where).toEqual([range(0, first)]);
          expect(Math.max(...sizes[0]!), where).toBeLessThanOrEqual(maxBatchRows);
          expect(result.partitionBatches, where).toEqual([sizes[0]!.length]);
        }
      }
    }
  });

  test('a skewed batch: 202 rows all for partition 0 of 4, maxBatchRows 100 (chunks of 400 halved to 101, then 100): batches of 100, 100, 2', async () => {
    const writer = await ShuffleWriter.create(options({ partitioning: BY_PID, maxBatchRows: 100 }));
    await writer.write(pidBatch(0, 202, () => 0));
    await writer.finish();
    const { values, sizes } = await readBack();
    expect(values).toEqual([range(0, 202), [], [], []]);
    expect(Math.max(...sizes[0]!)).toBeLessThanOrEqual(100);
  });

  test('skewed batches of many sizes, partitions 0 and 3 only: every batch within maxBatchRows, every row once in order', async () => {
    const writer = await ShuffleWriter.create(options({ partitioning: BY_PID, maxBatchRows: 37 }));
    let first = 0;
    for (const count of [1, 36, 37, 38, 73, 74, 75, 150, 151, 3]) {
      await writer.write(pidBatch(first, count, (v) => (v % 5 === 0 ? 3 : 0)));
      first += count;
    }
    const result = await writer.finish();
    const { values, sizes } = await readBack();
    expect(values).toEqual([range(0, first).filter((v) => v % 5 !== 0), [], [], range(0, first).filter((v) => v % 5 === 0)]);
    for (const s of sizes) for (const n of s) expect(n).toBeLessThanOrEqual(37);
    expect(result.partitionBatches).toEqual(sizes.map((s) => s.length));
  });
});

describe('finish()', () => {
  test('when the merge starts, the writer holds only its cached payloads and its per-partition state (64 bytes each): partition buffers (also those replaced by larger ones), merge buffers and scratch are released', async () => {
    const pool = new MemoryPool(256 * 1024 * 1024);
    const merge = PayloadStore.prototype.merge;
    let atMerge: { reserved: number; payloads: number } | null = null;
    vi.spyOn(PayloadStore.prototype, 'merge').mockImplementation(function (this: PayloadStore, ...args) {
      atMerge = { reserved: pool.reserved, payloads: this.memoryBytes };
      return merge.apply(this, args);
    });
    // compressionMinRows 0: every payload has its own arena, none is carved from a slab
    const writer = await ShuffleWriter.create(options({ memoryPool: pool, numPartitions: 5, maxBatchRows: 64, compressionMinRows: 0 }));
    // full and parked evictions, rows left at the end, and buffers grown for wider strings (the old ones given back)
    for (let first = 0; first < 1000; first += 100) await writer.write(strBatch(first, 100, first < 500 ? 9 : 9 + first / 10));
    await writer.finish();
    expect(atMerge).not.toBeNull();
    expect(atMerge!.reserved - atMerge!.payloads).toBe(64 * 5);
    const { values } = await readBack();
    expect(values).toEqual(roundRobin(1000, 5, values));
  });
});

describe('input staging', () => {
  /** Writes `sizes` batches of strings (width by batch) with the options; returns the partitions read back. */
  async function shuffle(name: string, sizes: number[], overrides: Partial<ShuffleWriterOptions>): Promise<number[][]> {
    const prefix = join(dir, name);
    const writer = await ShuffleWriter.create(options({ outputPrefix: prefix, numPartitions: 100, ...overrides }));
    let first = 0;
    for (const [b, count] of sizes.entries()) {
      await writer.write(strBatch(first, count, 3 + (b % 7)));
      first += count;
    }
    const result = await writer.finish();
    expect(result.rows).toBe(first);
    return (await readBack(prefix)).values;
  }

  test('staged small batches, then a large one, more small ones and finish(): each partition holds the rows it holds without staging, in input order', async () => {
    const sizes = [10, 7, 1, 10, 30, 2000, 5, 5, 13, 1, 10, 900, 3, 3];
    const staged = await shuffle('staged', sizes, { stagingBytes: 64 * 1024 });
    const plain = await shuffle('plain', sizes, { stagingBytes: 0 });
    expect(staged).toEqual(plain);
    expect(staged.flat().sort((a, b) => a - b)).toEqual(range(0, sizes.reduce((a, b) => a + b)));
  });

  test('the bytes a staged batch counts include a view column\'s data buffers (variadic buffers), not only its views', () => {
    const schema = new Schema([new Field('s', new Utf8View(), true)]);
    const column = buildColumn(new Utf8View(), 200, { bitmap: true, nullRate: 0.1 }, new Rng(7));
    const batch = batchOfColumns(schema, [column], 200);
    const variadic = column.variadicBuffers.reduce((sum, b) => sum + b.byteLength, 0);
    expect(variadic).toBeGreaterThan(0);
    expect(batchBufferBytes(batch)).toBe(column.values.byteLength + (column.nullBitmap?.byteLength ?? 0) + variadic);
  });
});
