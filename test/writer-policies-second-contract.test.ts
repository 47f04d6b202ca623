/**
 * The columnar writer's policies, second contract: the sizing formula's inputs (memLimit, its floor,
 * concurrentTasks' share of the pool, bytes per row of every layout kind), the ±25 % band, buffer
 * growth, the compression advisor, the staging of small batches and `auto`'s choice, at the places
 * the first contract (writer-policies-contract.test.ts) did not look.
 *
 * Each test here fails against a mutant of src/writer/buffer-sizing.ts, buffer-growth.ts,
 * input-staging.ts, src/format/compression-advisor.ts, src/auto-writer.ts or the lines of
 * src/writer/shuffle-writer.ts that use them, which the other tests let through (the thirty-first
 * sweep; docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps"). Expected values are
 * worked by hand from README.md ("Buffer sizing"), the options' and the files' doc comments; never
 * taken from the code under test. Nothing here measures time.
 */
import { join } from 'node:path';
import { DenseUnion, Dictionary, Field, Int32, Int8, List, makeData, RecordBatch, Schema, SparseUnion, Utf8, Utf8View, vectorFromArray, type Data } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { AutoShuffleWriter, createShuffleWriter, MemoryPool, ShuffleWriter, type ShuffleWriterOptions } from '../src/index.js';
import { SortShuffleWriter } from '../src/sort-writer/sort-shuffle-writer.js';
import { keepsSize, targetCapacity } from '../src/writer/buffer-sizing.js';
import { batchBufferBytes, InputStaging } from '../src/writer/input-staging.js';
import { BufferGrowth } from '../src/writer/buffer-growth.js';
import { ColumnBuffer, MAX_DATA_BYTES } from '../src/writer/column-buffer.js';
import { columnLayoutOf } from '../src/writer/column-layout.js';
import { onePartition, planAppend, splitAppend } from '../src/writer/append-rows.js';
import { prepareSourceColumn } from '../src/writer/source-column.js';
import { ScratchSelections } from '../src/writer/split-plan.js';
import { CompressionAdvisor } from '../src/format/compression-advisor.js';
import { encodeRecordBatchMessage } from '../src/format/ipc-message.js';
import { codecByName } from '../src/format/codec.js';
import { batchOf, sequenceColumn } from './support/columns.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';
import { readValuesAndSizes } from './support/shuffle-harness.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-policies2-')));
afterEach(async () => {
  vi.restoreAllMocks();
  await removeDir(dir);
});

const KiB = 1024;
const MiB = 1024 * KiB;
const INT_SCHEMA = new Schema([new Field('v', new Int32(), false)]);
const ints = (n: number) => batchOf(INT_SCHEMA, [sequenceColumn(0, n)], n);

/** The rows a columnar writer (4 partitions unless said, no staging) sizes its partition buffers for, for rows like `batch`'s. */
async function bufferRows(batch: RecordBatch, overrides: Partial<ShuffleWriterOptions> = {}): Promise<number> {
  const writer = await ShuffleWriter.create({
    numPartitions: 4,
    partitioning: { kind: 'round-robin' },
    outputPrefix: join(dir, 'out'),
    spillDir: dir,
    stagingBytes: 0,
    maxBatchRows: 1_000_000,
    ...overrides,
  });
  try {
    return await writer.bufferRowsFor(batch);
  } finally {
    await writer.abort();
  }
}

describe('the sizing formula\'s memory: max(memLimit, memLimitFloor), both within the pool\'s share (README "Buffer sizing", writer-options.ts)', () => {
  test('concurrentTasks divides the pool: a 4 MiB pool and 4 tasks size int32 rows at P = 4 for 1 MiB: 1048576 / 4 / 4 >> 2 = 16,384 rows, not 65,536', async () => {
    expect(await bufferRows(ints(100), { memoryPool: new MemoryPool(4 * MiB), concurrentTasks: 4 })).toBe(16_384);
    expect(await bufferRows(ints(100), { memoryPool: new MemoryPool(4 * MiB) })).toBe(65_536);
  });
  test('the default floor is never above a given memLimit: memLimit 1 MiB in a 64 MiB pool sizes for 1 MiB (16,384 rows), not for the 64 MiB share', async () => {
    expect(await bufferRows(ints(100), { memoryPool: new MemoryPool(64 * MiB), memLimit: MiB })).toBe(16_384);
  });
  test('a given memLimitFloor above a bounded pool\'s share is taken as the share: a 64 MiB floor in a 1 MiB pool sizes for 1 MiB (16,384 rows)', async () => {
    expect(await bufferRows(ints(100), { memoryPool: new MemoryPool(MiB), memLimitFloor: 64 * MiB })).toBe(16_384);
    // and with 2 tasks, for half of it: 524288 / 4 / 4 >> 2 = 8,192
    expect(await bufferRows(ints(100), { memoryPool: new MemoryPool(MiB), memLimitFloor: 64 * MiB, concurrentTasks: 2 })).toBe(8_192);
  });
});

describe('the ±25 % band (buffer-sizing.ts targetCapacity)', () => {
  test('a buffer cut down to its 50 rows by a reclaim (sized for 0) keeps them while the preferred size is 0 (rows too wide): 0 is inside ±25 % of 0', () => {
    expect(keepsSize(50, 0, 0.25, 0)).toBe(true);
    expect(targetCapacity(50, 0, 10, 0.25, 0)).toBe(50);
    // a preferred size above 0 is outside the band of 0: re-sized to it
    expect(targetCapacity(50, 40, 10, 0.25, 0)).toBe(40);
  });
});

/** A list<int32> column whose row i holds counts[i] elements (values 0, 1, 2, ...), without nulls. */
function intListColumn(counts: readonly number[]): Data {
  const offsets = new Int32Array(counts.length + 1);
  counts.forEach((c, i) => (offsets[i + 1] = offsets[i]! + c));
  const total = offsets[counts.length]!;
  const child = makeData({ type: new Int32(), length: total, nullCount: 0, data: Int32Array.from({ length: total }, (_, i) => i) });
  return makeData({ type: new List(new Field('item', new Int32(), false)), length: counts.length, nullCount: 0, valueOffsets: offsets, child });
}

/** A list<utf8> column of `n` rows, each of `perRow` strings of `width` bytes. */
function strListColumn(n: number, perRow: number, width: number): Data {
  const total = n * perRow;
  const strs = makeData({ type: new Utf8(), length: total, nullCount: 0, valueOffsets: Int32Array.from({ length: total + 1 }, (_, i) => i * width), data: new Uint8Array(total * width).fill(0x61) });
  return makeData({ type: new List(new Field('item', new Utf8(), false)), length: n, nullCount: 0, valueOffsets: Int32Array.from({ length: n + 1 }, (_, i) => i * perRow), child: strs });
}

/** A utf8 column of `n` values of `width` bytes each. */
function strColumn(n: number, width: number): Data {
  return makeData({ type: new Utf8(), length: n, nullCount: 0, valueOffsets: Int32Array.from({ length: n + 1 }, (_, i) => i * width), data: new Uint8Array(n * width).fill(0x62) });
}

/** A Utf8View column of these values: up to 12 bytes inline in the 16-byte view, longer ones in one data buffer. */
function viewColumn(values: readonly string[]): Data {
  const encoder = new TextEncoder();
  const views = new Uint8Array(values.length * 16);
  const dv = new DataView(views.buffer);
  const data: number[] = [];
  values.forEach((value, i) => {
    const bytes = encoder.encode(value);
    dv.setInt32(i * 16, bytes.length, true);
    if (bytes.length <= 12) views.set(bytes, i * 16 + 4);
    else {
      views.set(bytes.subarray(0, 4), i * 16 + 4);
      dv.setInt32(i * 16 + 8, 0, true);
      dv.setInt32(i * 16 + 12, data.length, true);
      data.push(...bytes);
    }
  });
  return makeData({ type: new Utf8View(), length: values.length, nullCount: 0, views, variadicBuffers: [Uint8Array.from(data)] } as never) as Data;
}

const one = (name: string, data: Data) => batchOf(new Schema([new Field(name, data.type, false)]), [data], data.length);
/** P = 1, memLimit and its floor both `memory`: rows = floor(memory / ceil(bytesPerRow)) >> 2 */
const sized = (batch: RecordBatch, memory: number) => bufferRows(batch, { numPartitions: 1, memoryPool: new MemoryPool(64 * MiB), memLimit: memory, memLimitFloor: memory });

describe('bytes per row, by layout (README "Buffer sizing": a row\'s bytes in a partition buffer; Gluten\'s complexTotalSizeBytes_ for nested ones)', () => {
  test('a view column: the 16-byte view plus its long values (over 12 bytes) on average; inline ones cost nothing more: 16 + (20 + 30) / 4 = 28.5, taken as 29', async () => {
    const batch = one('s', viewColumn(['a', 'x'.repeat(20), 'twelve bytes', 'y'.repeat(30)]));
    // 116,000 / 29 = 4,000, >> 2 = 1,000
    expect(await sized(batch, 116_000)).toBe(1000);
  });
  test('a utf8 column of 8,192 rows (more than the 4,096 sampled for nested bytes): 4 bytes of offset + 10 of data a row, over all the rows: 14', async () => {
    // 56,000 / 14 = 4,000, >> 2 = 1,000 (10 bytes over 4,096 rows would be 20 a row: 24)
    expect(await sized(one('s', strColumn(8192, 10)), 56_000)).toBe(1000);
  });
  test('a list<int32> column of 8,192 rows of two elements: 4 bytes of offset + 2 x 4 of values a row: 12, whichever rows are sampled', async () => {
    // 48,000 / 12 = 4,000, >> 2 = 1,000
    expect(await sized(one('l', intListColumn(Array.from({ length: 8192 }, () => 2))), 48_000)).toBe(1000);
  });
  test('a list<int32> column of 4,096 rows is counted whole (at most 4,096 rows are sampled): every 64th row empty, the others one element: 4 + 4 x 63/64, taken as 8', async () => {
    // 32,000 / 8 = 4,000, >> 2 = 1,000 (a sample of the empty rows alone would be 4 bytes a row: 2,000)
    expect(await sized(one('l', intListColumn(Array.from({ length: 4096 }, (_, i) => (i % 64 === 0 ? 0 : 1)))), 32_000)).toBe(1000);
  });
  test('a list<utf8> column: 4 bytes of offset + 2 strings x (4 bytes of offset + 5 of data) a row: 22, the strings\' data included', async () => {
    // 88,000 / 22 = 4,000, >> 2 = 1,000
    expect(await sized(one('l', strListColumn(100, 2, 5)), 88_000)).toBe(1000);
  });
});

describe('compressionMinRows (writer-options.ts: payloads of fewer rows are stored uncompressed, Gluten\'s compression threshold)', () => {
  /** One partition, `n` rows of 1,000 identical bytes each (LZ4 shrinks them ~250x), no merger: the data file's bytes. */
  async function written(n: number, compressionMinRows?: number): Promise<number> {
    const schema = new Schema([new Field('s', new Utf8(), false)]);
    const writer = await ShuffleWriter.create({
      numPartitions: 1, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, `out-${n}`), spillDir: dir, stagingBytes: 0, mergeThreshold: 0,
      ...(compressionMinRows === undefined ? {} : { compressionMinRows }),
    });
    await writer.write(batchOf(schema, [strColumn(n, 1000)], n));
    return (await writer.finish()).bytesWritten;
  }
  test('by default (100) a payload of 100 rows is compressed and one of 99 is stored raw: 99 x 1,000 bytes are in the file, 100 x 1,000 are not', async () => {
    expect(await written(99)).toBeGreaterThan(99_000);
    expect(await written(100)).toBeLessThan(20_000);
  });
  test('compressionMinRows 10: a payload of exactly 10 rows is compressed, 9 are not', async () => {
    expect(await written(9, 10)).toBeGreaterThan(9_000);
    expect(await written(10, 10)).toBeLessThan(5_000);
  });
});

describe('the running averages: a buffer is sized from the bytes of every row seen so far, not of the last chunk alone (shuffle-writer.ts preferredCapacity)', () => {
  const VS = new Schema([new Field('v', new Int32(), false), new Field('s', new Utf8(), false)]);
  /** Rows v = start.. with strings of `width` bytes. */
  const vs = (start: number, n: number, width: number) => batchOf(VS, [sequenceColumn(start, n), strColumn(n, width)], n);
  test('4,000 rows of 10-byte strings, then 10 batches of 10 rows of 110-byte ones: every record batch holds the 100 rows the buffer was sized for', async () => {
    // P = 1, memory 7,200: rows of 4 + 4 + 10 = 18 bytes: 7200 / 18 = 400, >> 2 = 100 rows a buffer (chunks of 100).
    // After the wide rows the average string is (4000 x 10 + 100 x 110) / 4100 = 12.44: 8 + 12.44 -> 21 bytes a row,
    // 7200 / 21 = 342, >> 2 = 85, inside 100 ± 25 %: the buffers keep their 100 rows (the last chunk's 118 bytes a row would
    // give 15, outside the band: buffers re-sized to 15 rows)
    const writer = await ShuffleWriter.create({
      numPartitions: 1, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, 'out'), spillDir: dir, stagingBytes: 0, mergeThreshold: 0,
      memoryPool: new MemoryPool(64 * MiB), memLimit: 7200, memLimitFloor: 7200, maxBatchRows: 1_000_000,
    });
    await writer.write(vs(0, 4000, 10));
    for (let k = 0; k < 10; k++) await writer.write(vs(4000 + 10 * k, 10, 110));
    await writer.finish();
    const { values, sizes } = await readValuesAndSizes(join(dir, 'out'));
    expect(values[0]).toEqual(Array.from({ length: 4100 }, (_, i) => i));
    expect(sizes[0]).toEqual(Array.from({ length: 41 }, () => 100));
  });
});

describe('batchBufferBytes counts a view column\'s data buffers and a union\'s type ids (input-staging.ts: "view columns\' data buffers included")', () => {
  test('a Utf8View column of 4 rows, 50 bytes of long values: 4 x 16 bytes of views + 50 bytes of data = 114', () => {
    const batch = one('s', viewColumn(['a', 'x'.repeat(20), 'twelve bytes', 'y'.repeat(30)]));
    expect(batchBufferBytes(batch)).toBe(114);
  });
  test('a sparse union<int32, int32> of 8 rows: 8 type ids (int8) + 2 x 8 x 4 bytes of values = 72', () => {
    const child = (k: number) => makeData({ type: new Int32(), length: 8, nullCount: 0, data: Int32Array.from({ length: 8 }, (_, i) => k * 100 + i) });
    const type = new SparseUnion([0, 1], [new Field('a', new Int32(), false), new Field('b', new Int32(), false)]);
    const union = makeData({ type, length: 8, nullCount: 0, typeIds: Int8Array.of(0, 1, 0, 1, 0, 1, 0, 1), children: [child(0), child(1)] } as never) as Data;
    expect(batchBufferBytes(one('u', union))).toBe(72);
  });
});

describe('staging\'s byte net (shuffle-writer.ts stageOrSplit: staged rows are split once their bytes pass twice stagingBytes)', () => {
  test('staged bytes of exactly twice stagingBytes (128 KiB) stay staged; the next batch passes the net and splits them', async () => {
    const schema = new Schema([new Field('v', new Int32(), false), new Field('s', new Utf8(), false)]);
    const rowsOf = (start: number, n: number, width: number) => batchOf(schema, [sequenceColumn(start, n), strColumn(n, width)], n);
    // first: 100 rows of 4 + 4 + 4 = 12 bytes: a target of min(64 x 500, 131072 / 12 = 10,922) rows;
    // its buffers: 400 (v) + 404 (offsets) + 400 (data) = 1,204 bytes.
    // then ten 1-row batches of 4 + 8 + 26,082 = 26,094 bytes (under a quarter of 128 KiB: staged):
    // 1,204 + 10 x 26,094 = 262,144 = 2 x 131,072, not past it; then a 1-row batch of 16 bytes passes it
    const batches = [rowsOf(0, 100, 4), ...Array.from({ length: 10 }, (_, k) => rowsOf(100 + k, 1, 26_082)), rowsOf(110, 1, 4)];
    const split = vi.spyOn(InputStaging.prototype, 'batch');
    const writer = await ShuffleWriter.create({ numPartitions: 500, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, 'out'), spillDir: dir, stagingBytes: 128 * KiB });
    for (const batch of batches) await writer.write(batch);
    expect(split.mock.results.map((r) => (r.value as RecordBatch).numRows)).toEqual([111]); // one split, of every row, at the last batch
    await writer.finish();
    const { values } = await readValuesAndSizes(join(dir, 'out'));
    expect(values.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 111 }, (_, i) => i));
  });
});

describe('staging is decided once, from the first batch (shuffle-writer.ts decideStaging)', () => {
  test('a first batch of 300 rows at P = 16 (target 64 x 16 = 1,024, not more than 4 x 300) means no staging, even for the 10-row batches after it', async () => {
    const append = vi.spyOn(InputStaging.prototype, 'append');
    const writer = await ShuffleWriter.create({ numPartitions: 16, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, 'out'), spillDir: dir, stagingBytes: 8 * MiB });
    await writer.write(batchOf(INT_SCHEMA, [sequenceColumn(0, 300)], 300));
    for (let k = 0; k < 10; k++) await writer.write(batchOf(INT_SCHEMA, [sequenceColumn(300 + 10 * k, 10)], 10));
    expect(append).not.toHaveBeenCalled();
    await writer.finish();
    const { values } = await readValuesAndSizes(join(dir, 'out'));
    expect(values.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 400 }, (_, i) => i));
  });
});

describe('compressionMinRows holds for rows spilled from their buffers too (shuffle-writer.ts spilledRows)', () => {
  /** P = 1, compressionMinRows 10: `n` rows of 1,000 identical bytes stay in the buffer until another consumer takes nearly the whole 4 MiB pool. */
  async function spilled(n: number): Promise<{ bytes: number; spills: number }> {
    const pool = new MemoryPool(4 * MiB);
    const schema = new Schema([new Field('s', new Utf8(), false)]);
    const writer = await ShuffleWriter.create({
      numPartitions: 1, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, `out-${n}`), spillDir: dir, stagingBytes: 0, mergeThreshold: 0, compressionMinRows: 10, memoryPool: pool,
    });
    await writer.write(batchOf(schema, [strColumn(n, 1000)], n));
    const other = pool.register('other');
    await other.grow(4 * MiB - 20 * KiB); // the writer cannot go under 20 KiB without spilling its buffer's rows (10 KB of data, ~16 KB of row ids and scratch)
    other.free();
    const result = await writer.finish();
    return { bytes: result.bytesWritten, spills: result.spills };
  }
  test('a spilled buffer of exactly 10 rows is compressed (10 x 1,000 bytes are not in the file); one of 9 is stored raw', async () => {
    const ten = await spilled(10);
    const nine = await spilled(9);
    expect([ten.spills, nine.spills]).toEqual([1, 1]);
    expect(nine.bytes).toBeGreaterThan(9_000);
    expect(ten.bytes).toBeLessThan(5_000);
  });
});

describe('a nested level\'s growth (buffer-growth.ts: children with lengths of their own grow by half again when full, or at once to what a full parent needs at the rate rows arrive)', () => {
  const LIST = new List(new Field('item', new Int32(), false));
  /** Appends every row of `data` after row `filled` through the documented protocol (plan, growth, split) at `capacity` rows. */
  function append(column: ColumnBuffer, data: Data, filled: number, capacity: number): BufferGrowth {
    const rowIds = Uint32Array.from({ length: data.length }, (_, i) => i);
    const plan = planAppend([prepareSourceColumn(data, column.layout)], [column], onePartition(rowIds, 0, data.length), filled, capacity, new ScratchSelections());
    plan.growth.apply();
    splitAppend(plan.plans, [column], filled);
    return plan.growth;
  }
  test('list<utf8>: a nested string level is sized like the values arriving now: 3 bytes over 2 values, x 11 values = 16.5, so 17 bytes of data', () => {
    const type = new List(new Field('item', new Utf8(), false));
    const column = new ColumnBuffer(columnLayoutOf(new Field('l', type, false)));
    const strs = makeData({ type: new Utf8(), length: 2, nullCount: 0, valueOffsets: Int32Array.of(0, 1, 3), data: Uint8Array.of(97, 98, 98) });
    const lists = makeData({ type, length: 2, nullCount: 0, valueOffsets: Int32Array.of(0, 1, 2), child: strs });
    append(column, lists, 0, 11); // one value a row: 11 values for 11 rows
    expect(column.children[0]!.capacity).toBe(11);
    expect(column.children[0]!.data.byteLength).toBe(17);
  });
  test('utf8 data that outgrows its buffer at the same capacity grows by at least half again (column-buffer.ts, "we keep x1.5"): 40 bytes, 44 needed, 60', () => {
    const column = new ColumnBuffer(columnLayoutOf(new Field('s', new Utf8(), false)));
    append(column, strColumn(1, 4), 0, 10); // sized like the rows arriving: 4 bytes a row x 10 rows = 40
    expect(column.data.byteLength).toBe(40);
    append(column, strColumn(1, 40), 1, 10); // 44 bytes at the same 10 rows: 40 x 1.5 = 60
    expect(column.data.byteLength).toBe(60);
  });
  test('list<int32>: a child with room keeps its capacity: 17 elements\' room, 3 used, one more row of 1 element: still 17', () => {
    const column = new ColumnBuffer(columnLayoutOf(new Field('l', LIST, false)));
    append(column, intListColumn([1, 2]), 0, 11); // 1.5 a row x 11 = 16.5: 17
    append(column, intListColumn([1]), 2, 11); // 4 of 17: not full
    expect(column.children[0]!.capacity).toBe(17);
  });
  test('list<int32>: 2 rows of 3 elements at 11 rows: 1.5 elements a row x 11 = 16.5, so 17; full at 17, one more row at 12: half again, 26', () => {
    const column = new ColumnBuffer(columnLayoutOf(new Field('l', LIST, false)));
    append(column, intListColumn([1, 2]), 0, 11);
    expect(column.children[0]!.capacity).toBe(17);
    append(column, intListColumn([2, 2, 2, 2, 2, 2, 2]), 2, 11); // 3 + 14 = 17 elements: it fits
    expect(column.children[0]!.capacity).toBe(17);
    // 18 needed; 17 x 1.5 = 25.5 -> 26; at the rate of 1 a row a full parent of 12 needs 12
    append(column, intListColumn([1]), 9, 12);
    expect(column.children[0]!.capacity).toBe(26);
  });
});

describe('a binary data buffer holds up to MAX_DATA_BYTES (buffer-growth.ts overflows: "would need more than MAX_DATA_BYTES")', () => {
  test('one utf8 value of exactly 2^31 - 1 bytes (the most int32 offsets reach) is not an overflow (planned only: nothing is allocated)', () => {
    const column = new ColumnBuffer(columnLayoutOf(new Field('s', new Utf8(), false)));
    // offsets only: the plan reads the lengths, not the bytes
    const data = makeData({ type: new Utf8(), length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, MAX_DATA_BYTES), data: new Uint8Array(0) });
    const plan = planAppend([prepareSourceColumn(data, column.layout)], [column], onePartition(Uint32Array.of(0), 0, 1), 0, 1, new ScratchSelections());
    expect(plan.growth.overflows).toBe(false);
  });
});

describe('auto\'s choice at its edges (auto-writer.ts: sort from SORT_PARTITIONS_THRESHOLD partitions on, or when buffers would hold fewer than MIN_HASH_BUFFER_ROWS rows)', () => {
  const KEYED = new Schema([new Field('id', new Int32(), false)]);
  /** `auto` for int32 rows (4 bytes a row), hashed on `id`, with memLimit `limit` (its floor then the same) in a 64 MiB pool, or no pool limit. */
  async function autoKind(numPartitions: number, limit: number | null): Promise<string> {
    const writer = (await createShuffleWriter('auto', {
      numPartitions, partitioning: { kind: 'hash', keys: ['id'] }, outputPrefix: join(dir, `auto-${numPartitions}-${limit}`), spillDir: dir,
      ...(limit === null ? {} : { memoryPool: new MemoryPool(64 * MiB), memLimit: limit }),
    })) as AutoShuffleWriter;
    try {
      await writer.write(batchOf(KEYED, [sequenceColumn(0, 10)], 10));
      return writer.kind;
    } finally {
      await writer.abort();
    }
  }
  test('buffers of exactly 32 rows keep the columnar writer; 31 hand over to the sort writer (P = 100, int32 rows)', async () => {
    // 51,200 / 4 / 100 = 128, >> 2 = 32: hash.  49,600 / 4 / 100 = 124, >> 2 = 31: sort
    expect(await autoKind(100, 51_200)).toBe('hash');
    expect(await autoKind(100, 49_600)).toBe('sort');
  });
  test('3,999 partitions with room to spare: still the columnar writer after the first batch (the threshold is 4,000)', async () => {
    // no pool limit: 1 GiB / 4 / 3999 >> 2 = 16,782 rows a buffer
    expect(await autoKind(3999, null)).toBe('hash');
  });
});

describe('the staging\'s memory (input-staging.ts: every buffer is reserved before it is allocated; release() frees every buffer)', () => {
  const LIST_SCHEMA = new Schema([new Field('l', new List(new Field('item', new Int32(), false)), false)]);
  test('row ids that the pool has no room for are not allocated: in a 2,000-byte pool, staging 10 int32 rows (at least 1,024 row ids, 4 KiB) is CS_MEMORY_LIMIT', async () => {
    const pool = new MemoryPool(2000);
    const staging = new InputStaging(INT_SCHEMA, pool.register('staging'));
    await expect(staging.append(ints(10))).rejects.toMatchObject({ code: 'CS_MEMORY_LIMIT' });
  });
  test('after release() the staging holds no rows (`rows`: "rows held") and no memory: a list column\'s 100 rows, their row ids and scratch all given back', async () => {
    const pool = new MemoryPool(64 * MiB);
    const reservation = pool.register('staging');
    const staging = new InputStaging(LIST_SCHEMA, reservation);
    await staging.append(batchOf(LIST_SCHEMA, [intListColumn(Array.from({ length: 100 }, (_, i) => i % 5))], 100));
    expect(staging.rows).toBe(100);
    const reserved = reservation.size;
    expect(staging.release()).toBe(reserved);
    expect(staging.rows).toBe(0);
    expect(reservation.size).toBe(0);
  });
  test('release() twice gives back nothing the second time, and a staging used again after release() reserves its row ids anew and gives back exactly what it took', async () => {
    const pool = new MemoryPool(64 * MiB);
    const reservation = pool.register('staging');
    const staging = new InputStaging(INT_SCHEMA, reservation);
    await staging.append(ints(10));
    staging.release();
    expect(staging.release()).toBe(0); // (it gave back the row ids' bytes again: a RangeError, more than the reservation held)
    await staging.append(ints(10));
    const held = reservation.size;
    expect(held).toBeGreaterThanOrEqual(4096); // at least 1,024 row ids, reserved again
    expect(staging.release()).toBe(held);
    expect(reservation.size).toBe(0);
  });
});

describe('stagingBytes\' defaults and cap (writer-options.ts: 8 MiB with an unbounded pool; at most an eighth of the share of a bounded one)', () => {
  const VS = new Schema([new Field('v', new Int32(), false), new Field('s', new Utf8(), false)]);
  /** `count` batches of 100 rows of 4 + 4 + 200 = 208 bytes at P = 1000; the rows of each split of the staged rows. */
  async function splits(count: number, overrides: Partial<ShuffleWriterOptions>): Promise<number[]> {
    const split = vi.spyOn(InputStaging.prototype, 'batch');
    const writer = await ShuffleWriter.create({ numPartitions: 1000, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, 'out'), spillDir: dir, ...overrides });
    for (let k = 0; k < count; k++) await writer.write(batchOf(VS, [sequenceColumn(100 * k, 100), strColumn(100, 200)], 100));
    await writer.finish();
    return split.mock.results.map((r) => (r.value as RecordBatch).numRows);
  }
  test('no pool limit: 8 MiB / 208 = 40,329 rows (under 64 x 1000): 25,000 staged rows are split once, at finish', async () => {
    expect(await splits(250, {})).toEqual([25_000]);
  });
  test('an 8 MiB pool and stagingBytes 8 MiB: an eighth of it, 1 MiB / 208 = 5,041 rows: split at 5,100 (51 batches), then 900 at finish', async () => {
    expect(await splits(60, { memoryPool: new MemoryPool(8 * MiB), stagingBytes: 8 * MiB })).toEqual([5100, 900]);
  });
});

describe('auto\'s state after finish() (auto-writer.ts; the writers\' protocol, writer-calls.ts: CS_WRITER_CLOSED saying the state)', () => {
  const KEYED = new Schema([new Field('id', new Int32(), false)]);
  const options = (name: string) => ({ numPartitions: 4, partitioning: { kind: 'hash' as const, keys: ['id'] }, outputPrefix: join(dir, name), spillDir: dir });
  const refusal = (call: Promise<unknown>) => call.then(() => 'done', (e: unknown) => (e as Error).message);
  test('abort() after a successful finish() changes nothing: a later write() is refused as finished, as the columnar writer\'s own', async () => {
    const messages: string[] = [];
    for (const kind of ['hash', 'auto'] as const) {
      const writer = await createShuffleWriter(kind, options(kind));
      await writer.write(batchOf(KEYED, [sequenceColumn(0, 10)], 10));
      await writer.finish();
      await writer.abort();
      messages.push(await refusal(writer.write(batchOf(KEYED, [sequenceColumn(0, 10)], 10))));
    }
    expect(messages[1]).toBe(messages[0]);
    expect(messages[1]).toMatch(/finished/);
  });
  test('a finish() that fails leaves auto aborted ("the writer\'s failed finish() has aborted it"): a later write() is refused as aborted', async () => {
    const writer = await createShuffleWriter('auto', options('failed'));
    await writer.write(batchOf(KEYED, [sequenceColumn(0, 10)], 10));
    vi.spyOn(ShuffleWriter.prototype, 'finish').mockRejectedValueOnce(new Error('disk full'));
    await expect(writer.finish()).rejects.toThrow('disk full');
    expect(await refusal(writer.write(batchOf(KEYED, [sequenceColumn(0, 10)], 10)))).toMatch(/aborted/);
    await writer.abort();
  });
});

describe('auto\'s hand-over needs one writer\'s memory at a time (auto-writer.ts: the columnar writer is aborted, then the sort writer made)', () => {
  test('when the sort writer is made, the columnar writer holds nothing in the pool any more (1 MiB, P = 300, rows of 48 bytes: 18-row buffers)', async () => {
    const pool = new MemoryPool(MiB);
    const schema = new Schema([new Field('id', new Int32(), false), new Field('s', new Utf8(), false)]);
    const create = SortShuffleWriter.create.bind(SortShuffleWriter);
    let heldThen: { name: string; reserved: number }[] | null = null;
    vi.spyOn(SortShuffleWriter, 'create').mockImplementation(async (options) => {
      heldThen = pool.consumers().filter((c) => c.reserved > 0).map(({ name, reserved }) => ({ name, reserved }));
      return create(options);
    });
    const writer = (await createShuffleWriter('auto', { numPartitions: 300, partitioning: { kind: 'hash', keys: ['id'] }, outputPrefix: join(dir, 'out'), spillDir: dir, memoryPool: pool })) as AutoShuffleWriter;
    // 1 MiB / (4 + 4 + 40) / 300 = 72, >> 2 = 18 rows a buffer: fewer than 32, sort
    await writer.write(batchOf(schema, [sequenceColumn(0, 20_000), strColumn(20_000, 40)], 20_000));
    expect(writer.kind).toBe('sort');
    expect(heldThen).toEqual([]);
    await writer.finish();
  });
});

describe('a skewed chunk is halved until no partition gets more than maxBatchRows (shuffle-writer.ts splitBatch)', () => {
  test('P = 8, maxBatchRows 100, rows over 7 partitions: the 800-row chunk gives each 114 (> 100), halved once to 400 (57 each): record batches of 57 or 58 rows', async () => {
    const PID = new Schema([new Field('v', new Int32(), false), new Field('pid', new Int32(), false)]);
    const n = 2800;
    const batch = batchOf(PID, [sequenceColumn(0, n), makeData({ type: new Int32(), length: n, nullCount: 0, data: Int32Array.from({ length: n }, (_, i) => i % 7) })], n);
    // no pool limit: 1 GiB sizes buffers at maxBatchRows, 100 rows; chunks of 100 x 8 = 800 rows. Buffers of 100 cannot take
    // a second chunk's 57 and, at more than a quarter of maxBatchRows (the merger's default), are flushed as they are: with the
    // rows of one chunk (chunks quartered to 200 would bring 28 or 29 a partition: batches of 86)
    const writer = await ShuffleWriter.create({ numPartitions: 8, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: join(dir, 'out'), spillDir: dir, stagingBytes: 0, maxBatchRows: 100 });
    await writer.write(batch);
    await writer.finish();
    const { values, sizes } = await readValuesAndSizes(join(dir, 'out'));
    expect(values.slice(0, 7).map((v) => v.length)).toEqual(Array.from({ length: 7 }, () => 400));
    expect(new Set(sizes.flat())).toEqual(new Set([57, 58]));
  });
});

describe('bytes per row of unions and dictionaries (column-layout.ts fixedBytesPerRow: a dense union\'s type id and offset, a dictionary\'s index)', () => {
  test('a dense union<int32, int32> of 8 rows, 4 on each side: 1 byte of type id + 4 of offset + the 4-byte value = 9 bytes a row', async () => {
    const child = (k: number) => makeData({ type: new Int32(), length: 4, nullCount: 0, data: Int32Array.from({ length: 4 }, (_, i) => k * 100 + i) });
    const type = new DenseUnion([0, 1], [new Field('a', new Int32(), false), new Field('b', new Int32(), false)]);
    const union = makeData({ type, length: 8, nullCount: 0, typeIds: Int8Array.of(0, 1, 0, 1, 0, 1, 0, 1), valueOffsets: Int32Array.of(0, 0, 1, 1, 2, 2, 3, 3), children: [child(0), child(1)] } as never) as Data;
    // 36,000 / 9 = 4,000, >> 2 = 1,000
    expect(await sized(one('u', union), 36_000)).toBe(1000);
  });
  test('a dictionary<int8, utf8> column: 1 byte of index a row (its values are written once, as dictionary batches)', async () => {
    const type = new Dictionary(new Utf8(), new Int8());
    const values = vectorFromArray(['red', 'green', 'blue'], new Utf8());
    const column = makeData({ type, length: 6, nullCount: 0, data: Int8Array.of(0, 1, 2, 0, 1, 2), dictionary: values });
    // 4,000 / 1 = 4,000, >> 2 = 1,000
    expect(await sized(one('d', column), 4000)).toBe(1000);
  });
});

describe('the advisor learns per body-buffer position (compression-advisor.ts: "per body-buffer position")', () => {
  test('a message\'s second buffer (zeros: a hit) is recorded at its own position: after four messages nobody waits on it, and the first (random: four misses) is skipped', async () => {
    const advisor = new CompressionAdvisor();
    const codec = codecByName('lz4')!;
    let seed = 7;
    const random = Uint8Array.from({ length: 4096 }, () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 24));
    const zeros = new Uint8Array(4096);
    // two body buffers of 4 KiB: positions 0 and 1 (the advisor does not look at what they hold)
    for (let k = 0; k < 4; k++) await encodeRecordBatchMessage(1024, [{ length: 1024, nullCount: 0 }], [random, zeros], codec, advisor);
    expect(advisor.settled(1)).toBeUndefined();
    expect(advisor.shouldCompress(0)).toBe(false);
    expect(advisor.shouldCompress(1)).toBe(true);
  });
});
