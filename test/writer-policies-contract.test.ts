/**
 * The columnar writer's policies, as the documentation states them: `auto`'s choice between the
 * columnar and the sort writer (src/auto-writer.ts), the compression advisor's skipping and back-off
 * (src/format/compression-advisor.ts), the staging of small input batches (src/writer/input-staging.ts
 * and its use in the shuffle writer) and the partition buffer sizing (src/writer/buffer-sizing.ts).
 *
 * Each test here fails against a mutant of those files that the other tests let through (a boundary
 * moved by one, a reset or a wake-up dropped, a decision taken again on a later batch): see
 * docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps". Expected values come from
 * the doc comments' worked examples, README.md's rules and hand arithmetic, or from rows read back
 * compared with the rows written; never from the code under test. Nothing here measures time.
 */
import { join } from 'node:path';
import { Field, Int32, List, makeData, makeVector, RecordBatch, Schema, Struct, Utf8, vectorFromArray } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { AutoShuffleWriter, createShuffleWriter, MemoryPool, ShuffleError, ShuffleReader } from '../src/index.js';
import { isRowPartition } from '../src/sort-writer/row-format.js';
import { CompressionAdvisor } from '../src/format/compression-advisor.js';
import { batchBufferBytes, InputStaging, stagingTargetRows } from '../src/writer/input-staging.js';
import { chunkRows, keepsSize, partitionBufferRows, targetCapacity } from '../src/writer/buffer-sizing.js';
import { batchOf, sequenceColumn, utf8Column } from './support/columns.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';
import { runShuffle } from './support/shuffle-harness.js';

let dir: string;
beforeEach(async () => {
  dir = await makeTempDir('cs-policies-');
});
afterEach(async () => {
  vi.restoreAllMocks();
  await removeDir(dir);
});

const MiB = 1024 * 1024;
const KiB = 1024;

// ---------------------------------------------------------------------------------------------------------------------
// auto
// ---------------------------------------------------------------------------------------------------------------------

const SCHEMA = new Schema([new Field('id', new Int32(), false), new Field('s', new Utf8(), false)]);
const OTHER_SCHEMA = new Schema([new Field('id', new Int32(), false), new Field('t', new Utf8(), false)]);

/** Rows [start, start + n): an id and a string of `width` characters (4 + 4 + width bytes a row in a partition buffer). */
function rows(start: number, n: number, width = 40, schema = SCHEMA): RecordBatch {
  const id = makeVector(Int32Array.from({ length: n }, (_, i) => start + i)).data[0]!;
  const s = vectorFromArray(Array.from({ length: n }, (_, i) => `${start + i}`.padEnd(width, '.').slice(0, width)), new Utf8()).data[0]!;
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: [id, s] }));
}

async function readBack(prefix: string): Promise<{ ids: number[]; rowPartitions: boolean[] }> {
  const reader = await ShuffleReader.open(prefix);
  const ids: number[] = [];
  const rowPartitions: boolean[] = [];
  try {
    for (let p = 0; p < reader.numPartitions; p++) if (reader.partitionLength(p) > 0) rowPartitions.push(isRowPartition(await reader.partitionBytes(p)));
    for await (const b of reader.readPartitions(0, reader.numPartitions)) for (const row of b) ids.push(row!.id as number);
  } finally {
    await reader.close();
  }
  return { ids: ids.sort((a, b) => a - b), rowPartitions };
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const codeOf = (call: Promise<unknown>) => call.then(() => 'done', (e: unknown) => (e instanceof ShuffleError ? e.code : `untyped ${String(e)}`));

/**
 * 1 MiB and 300 partitions (memLimit and its floor are both the pool's 1 MiB):
 * rows of 4 + 4 + 40 = 48 bytes: 1048576 / 48 / 300 = 72, / 4 = 18 rows per buffer, under 32: sort;
 * rows of 4 + 4 + 4 = 12 bytes:  1048576 / 12 / 300 = 291, / 4 = 72 rows per buffer: hash.
 */
const tight = (prefix: string, pool = new MemoryPool(MiB)) =>
  createShuffleWriter('auto', { numPartitions: 300, partitioning: { kind: 'hash', keys: ['id'] }, outputPrefix: prefix, memoryPool: pool, spillDir: dir }) as Promise<AutoShuffleWriter>;

describe("auto: the choice is made once, at the first batch with rows (README, createShuffleWriter('auto'))", () => {
  test('narrow first rows keep the columnar writer; wider rows later do not hand its rows over to the sort writer', async () => {
    const prefix = join(dir, 'out');
    const writer = await tight(prefix);
    await writer.write(rows(0, 3000, 4)); // 72 rows per buffer: hash
    expect(writer.kind).toBe('hash');
    await writer.write(rows(3000, 3000, 40)); // these rows alone would size 18-row buffers
    expect(writer.kind).toBe('hash');
    const result = await writer.finish();
    expect(result.rows).toBe(6000);
    const { ids, rowPartitions } = await readBack(prefix);
    expect(ids).toEqual(range(6000));
    expect(rowPartitions.every((isRows) => !isRows)).toBe(true);
  });

  test('a first batch with rows of another schema than an empty one before it is CS_SCHEMA_MISMATCH, and auto stays usable and undecided', async () => {
    const prefix = join(dir, 'out');
    const writer = await tight(prefix);
    await writer.write(rows(0, 0));
    expect(await codeOf(writer.write(rows(0, 100, 40, OTHER_SCHEMA)))).toBe('CS_SCHEMA_MISMATCH');
    expect(writer.kind).toBe('hash');
    await writer.write(rows(0, 20_000)); // 18 rows per buffer: the hand-over happens now
    expect(writer.kind).toBe('sort');
    const result = await writer.finish();
    expect(result).toMatchObject({ rows: 20_000, batches: 2 });
    expect((await readBack(prefix)).ids).toEqual(range(20_000));
  });

  test('a first write() of something that is not a RecordBatch is CS_INVALID_ARGUMENT, and auto stays usable and undecided', async () => {
    const prefix = join(dir, 'out');
    const writer = await tight(prefix);
    expect(await codeOf(writer.write(null as unknown as RecordBatch))).toBe('CS_INVALID_ARGUMENT');
    await writer.write(rows(0, 20_000));
    expect(writer.kind).toBe('sort');
    expect(await writer.finish()).toMatchObject({ rows: 20_000, batches: 1 });
  });

  test('`batches` counts every accepted write() once, empty ones included, whichever writer was chosen', async () => {
    const roomy = await createShuffleWriter('auto', { numPartitions: 8, partitioning: { kind: 'hash', keys: ['id'] }, outputPrefix: join(dir, 'hash') });
    await roomy.write(rows(0, 0));
    await roomy.write(rows(0, 500));
    await roomy.write(rows(500, 0));
    expect((roomy as AutoShuffleWriter).kind).toBe('hash');
    expect(await roomy.finish()).toMatchObject({ rows: 500, batches: 3 });

    const handedOver = await tight(join(dir, 'sort'));
    await handedOver.write(rows(0, 0));
    await handedOver.write(rows(0, 20_000));
    await handedOver.write(rows(20_000, 0));
    await handedOver.write(rows(20_000, 100));
    expect(handedOver.kind).toBe('sort');
    expect(await handedOver.finish()).toMatchObject({ rows: 20_100, batches: 4 });
  });

  // Found by the sweep: `auto` took the sort writer's options (pageBytes, blockBytes) without checking them when it was
  // created. An invalid pageBytes failed the first write() with CS_INVALID_ARGUMENT only if that write handed over to
  // the sort writer (the writer was then aborted); with memory to spare the same options wrote and committed. Whether a
  // map task failed thus depended on its memory, not its options.
  test.each([{ pageBytes: 65 }, { blockBytes: 63 }])("an invalid sort-writer option (%j) is refused when `auto` is created, as createShuffleWriter('sort') refuses it", async (invalid) => {
    const made = await createShuffleWriter('auto', { numPartitions: 300, partitioning: { kind: 'hash', keys: ['id'] }, outputPrefix: join(dir, 'out'), memoryPool: new MemoryPool(MiB), spillDir: dir, ...invalid }).catch(
      (e: unknown) => e,
    );
    try {
      expect(made).toBeInstanceOf(ShuffleError);
      expect(made).toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining(Object.keys(invalid)[0]!) });
    } finally {
      if (!(made instanceof Error)) await (made as AutoShuffleWriter).abort();
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// compression advisor
// ---------------------------------------------------------------------------------------------------------------------

const MISS = [1000, 990] as const; // saves 1 %
const HIT = [1000, 500] as const; // saves 50 %

/** Misses four times at `position` from a fresh state: skipping starts (16 buffers). */
function missFour(advisor: CompressionAdvisor, position = 0): void {
  for (let i = 0; i < 4; i++) {
    expect(advisor.shouldCompress(position)).toBe(true);
    advisor.record(position, ...MISS);
  }
}

/** How many buffers in a row are stored raw before the next attempt (at most `limit` asked). */
function skipped(advisor: CompressionAdvisor, position = 0, limit = 5000): number {
  for (let n = 0; n < limit; n++) if (advisor.shouldCompress(position)) return n;
  return -1;
}

describe('CompressionAdvisor: miss miss miss miss | skip x16 | miss | skip x32 | hit | ... (its doc comment)', () => {
  test('an abandoned attempt (the compressor failed) wakes whoever waits for an outcome', async () => {
    const advisor = new CompressionAdvisor();
    for (let i = 0; i < 4; i++) advisor.shouldCompress(0);
    const wait = advisor.settled(0);
    expect(wait).toBeInstanceOf(Promise);
    let woken = false;
    void wait!.then(() => (woken = true));
    advisor.abandon(0);
    await Promise.resolve();
    await Promise.resolve();
    expect(woken).toBe(true);
  });

  test('a hit resets the back-off: after skip x16, miss, skip x32, hit, four misses skip 16 again', () => {
    const advisor = new CompressionAdvisor();
    missFour(advisor);
    expect(skipped(advisor)).toBe(16);
    advisor.record(0, ...MISS); // the probe misses
    expect(skipped(advisor)).toBe(32);
    advisor.record(0, ...HIT); // the probe hits: back to compressing every buffer
    missFour(advisor);
    expect(skipped(advisor)).toBe(16);
  });

  test('the back-off doubles up to 1024 buffers and stays there', () => {
    const advisor = new CompressionAdvisor();
    missFour(advisor);
    const skips: number[] = [];
    for (let probe = 0; probe < 9; probe++) {
      skips.push(skipped(advisor));
      advisor.record(0, ...MISS);
    }
    expect(skips).toEqual([16, 32, 64, 128, 256, 512, 1024, 1024, 1024]);
  });

  test('misses of attempts made before the skipping started change nothing: six out, six misses, still a skip of 16', () => {
    const advisor = new CompressionAdvisor();
    for (let i = 0; i < 6; i++) expect(advisor.shouldCompress(0)).toBe(true);
    for (let i = 0; i < 6; i++) advisor.record(0, ...MISS);
    expect(skipped(advisor)).toBe(16);
    advisor.record(0, ...MISS);
    expect(skipped(advisor)).toBe(32);
  });

  test('by default a buffer must save 15 %: saving 14 % (1000 -> 860 bytes) is a miss', () => {
    const advisor = new CompressionAdvisor();
    for (let i = 0; i < 4; i++) {
      advisor.shouldCompress(0);
      advisor.record(0, 1000, 860);
    }
    expect(advisor.shouldCompress(0)).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// staging
// ---------------------------------------------------------------------------------------------------------------------

/** Rows staged per split of the staged rows (InputStaging.batch() is what the split reads), in order. */
function stagedSplits(): () => number[] {
  const batch = vi.spyOn(InputStaging.prototype, 'batch');
  return () => batch.mock.results.map((r) => (r.value as RecordBatch).numRows);
}

/** Rows of each batch appended to the staging, in order. */
function appended(): () => number[] {
  const append = vi.spyOn(InputStaging.prototype, 'append');
  return () => append.mock.calls.map(([b]) => b.numRows);
}

const VALUES = new Schema([new Field('v', new Int32(), false)]);
const values = (start: number, n: number) => batchOf(VALUES, [sequenceColumn(start, n)], n);

describe('staging small batches (README, "Staging small batches")', () => {
  test('at P = 16 the staged rows are split when they reach 64 x 16 = 1024 rows: 16 batches of 128 rows make two splits of 1024', async () => {
    const splits = stagedSplits();
    const outcome = await runShuffle(dir, { numPartitions: 16, partitioning: { kind: 'round-robin' } }, Array.from({ length: 16 }, (_, b) => values(b * 128, 128)));
    expect(splits()).toEqual([1024, 1024]);
    expect(outcome.actual).toEqual(outcome.expected);
  });

  test('at P = 16 a batch of 256 rows brings 16 rows to each partition: split as it comes, after the rows staged before it', async () => {
    const append = appended();
    const outcome = await runShuffle(dir, { numPartitions: 16, partitioning: { kind: 'hash', keys: ['v'] } }, [values(0, 100), values(100, 256), values(356, 100), values(456, 255)]);
    expect(append()).toEqual([100, 100, 255]);
    expect(outcome.actual).toEqual(outcome.expected);
  });

  test('after a split the staged bytes count from zero again: rows of 308 bytes under a 128 KiB stagingBytes split every fifth 100-row batch', async () => {
    // the row target: 131072 / (4 + 4 + 300) bytes = 425 rows (under 64 x 500), reached by the fifth batch (500 rows);
    // five batches hold about 5 x 30.8 KB = 154 KB, under the byte net of twice stagingBytes (262 KB): it never applies
    const schema = new Schema([new Field('v', new Int32(), false), new Field('s', new Utf8(), false)]);
    const batches = Array.from({ length: 15 }, (_, b) => batchOf(schema, [sequenceColumn(b * 100, 100), utf8Column(Array.from({ length: 100 }, (_, i) => `${b}.${i} `.padEnd(300, 'x')))], 100));
    const splits = stagedSplits();
    const outcome = await runShuffle(dir, { numPartitions: 500, partitioning: { kind: 'round-robin' }, stagingBytes: 128 * KiB }, batches);
    expect(splits()).toEqual([500, 500, 500]);
    expect(outcome.actual).toEqual(outcome.expected);
  });

  test('a batch of exactly a quarter of stagingBytes is staged; only more than a quarter is split as it comes', async () => {
    // partition ids in a column of their own: the row target counts the output column alone (4 bytes a row: about
    // 32000 / 4 = 8000 rows), the staged bytes both columns (1000 rows x 8 bytes = 8000 bytes = 32000 / 4)
    const schema = new Schema([new Field('pid', new Int32(), false), new Field('v', new Int32(), false)]);
    const batch = (start: number, n: number) => batchOf(schema, [sequenceColumn(0, n), sequenceColumn(start, n)], n);
    const quarter = batch(100, 1000);
    expect(batchBufferBytes(quarter)).toBe(8000);
    const append = appended();
    const outcome = await runShuffle(dir, { numPartitions: 1024, partitioning: { kind: 'partition-id', column: 'pid' }, stagingBytes: 32_000 }, [batch(0, 100), quarter, batch(1100, 1001)]);
    expect(append()).toEqual([100, 1000]);
    expect(outcome.actual).toEqual(outcome.expected);
  });


  test('8,192-row batches are staged above P = 512, 4,096-row ones above P = 256: at 16 rows per partition they are split as they come', () => {
    const budget = 8 * MiB;
    expect(stagingTargetRows(512, 44, 8192, budget)).toBe(0);
    expect(stagingTargetRows(513, 44, 8192, budget)).toBe(64 * 513); // 15.97 rows per partition: gather 64 each
    expect(stagingTargetRows(256, 44, 4096, budget)).toBe(0);
    expect(stagingTargetRows(257, 44, 4096, budget)).toBe(64 * 257);
  });

  test('release() gives back every byte the staging reserved (identity rows included), and returns that count', async () => {
    const pool = new MemoryPool(64 * MiB);
    const reservation = pool.register('staging');
    const schema = new Schema([new Field('v', new Int32(), false), new Field('s', new Utf8(), true)]);
    const staging = new InputStaging(schema, reservation);
    await staging.append(batchOf(schema, [sequenceColumn(0, 300), utf8Column(Array.from({ length: 300 }, (_, i) => (i % 7 === 0 ? null : `staged ${i}`)))], 300));
    await staging.append(batchOf(schema, [sequenceColumn(300, 50), utf8Column(Array.from({ length: 50 }, (_, i) => `more ${i}`))], 50));
    expect(staging.rows).toBe(350);
    const held = pool.reserved;
    expect(held).toBeGreaterThan(350 * 4);
    expect(staging.release()).toBe(held);
    expect(pool.reserved).toBe(0);
    reservation.free();
  });

  test('clear() keeps the staging buffers: fewer rows appended after it take no new memory and give none back', async () => {
    const pool = new MemoryPool(64 * MiB);
    const reservation = pool.register('staging');
    const schema = new Schema([new Field('v', new Int32(), false), new Field('s', new Utf8(), true)]);
    const staging = new InputStaging(schema, reservation);
    await staging.append(batchOf(schema, [sequenceColumn(0, 300), utf8Column(Array.from({ length: 300 }, (_, i) => `staged ${i}`))], 300));
    const held = pool.reserved;
    staging.clear();
    await staging.append(batchOf(schema, [sequenceColumn(300, 50), utf8Column(Array.from({ length: 50 }, (_, i) => `again ${i}`))], 50));
    expect(staging.rows).toBe(50);
    expect(pool.reserved).toBe(held);
    staging.release();
    reservation.free();
  });

  test('batchBufferBytes counts every buffer of a batch: values, validity bitmaps, offsets and nested children', () => {
    const item = new Field('item', new Int32(), false);
    const schema = new Schema([new Field('a', new Int32(), true), new Field('l', new List(item), false)]);
    // a: 10 int32 values (40 bytes) and a validity bitmap of 2 bytes
    const a = makeData({ type: new Int32(), length: 10, nullCount: 1, nullBitmap: Uint8Array.of(0xfe, 0x03), data: new Int32Array(10) });
    // l: 11 int32 offsets (44 bytes) over a child of 30 int32 values (120 bytes)
    const child = makeData({ type: new Int32(), length: 30, nullCount: 0, data: new Int32Array(30) });
    const l = makeData({ type: new List(item), length: 10, nullCount: 0, valueOffsets: Int32Array.from({ length: 11 }, (_, i) => 3 * i), child });
    expect(batchBufferBytes(batchOf(schema, [a, l], 10))).toBe(40 + 2 + 44 + 120);
  });

  test('a row counts as at least one byte against stagingBytes: rows of a quarter of a byte, 1000 bytes, stage 1000 rows', () => {
    expect(stagingTargetRows(1000, 0.25, 10, 1000)).toBe(1000);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// buffer sizing
// ---------------------------------------------------------------------------------------------------------------------

describe('buffer sizing (buffer-sizing.ts worked examples, README "Buffer sizing")', () => {
  test('rows too wide for one per partition: the chunk is a quarter of max(memLimit, memLimitFloor), the floor included', () => {
    // the worked example with the limit under the floor: 4194304 / 524288 / 8 = 1, >> 2 = 0; chunk 4194304 / 524288 / 4 = 2
    const input = { memLimit: 1 * MiB, memLimitFloor: 4 * MiB, bytesPerRow: 512 * KiB, numPartitions: 8, maxBatchRows: 4096 };
    expect(partitionBufferRows(input)).toBe(0);
    expect(chunkRows(input)).toBe(2);
  });

  test('a row counts as at least one byte (an output without columns): 1 MiB / 1 / 1000 partitions = 1048, >> 2 = 262 rows', () => {
    const input = { memLimit: MiB, memLimitFloor: MiB, bytesPerRow: 0, numPartitions: 1000, maxBatchRows: 4096 };
    expect(partitionBufferRows(input)).toBe(262);
    expect(chunkRows(input)).toBe(262 * 1000);
  });

  test('the ±25 % band is around the size the buffer was sized for, not its capacity: grown to 4800 for 4000, 5500 re-sizes', () => {
    // sized for 4000: the band is 3000..5000, whatever the buffer grew to for a chunk's rows
    expect(targetCapacity(4800, 5500, 100, 0.25, 4000)).toBe(5500);
    expect(keepsSize(4800, 5500, 0.25, 4000)).toBe(false);
    expect(targetCapacity(4800, 5000, 100, 0.25, 4000)).toBe(4800);
    // and a buffer cut down to 2000 by a reclaim, sized for 4000: 2900 is below 3000 and re-sizes, 3100 keeps 2000
    expect(targetCapacity(2000, 2900, 100, 0.25, 4000)).toBe(2900);
    expect(targetCapacity(2000, 3100, 100, 0.25, 4000)).toBe(2000);
  });
});
