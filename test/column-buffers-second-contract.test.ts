/**
 * A second pass over the columnar writer's per-partition buffers and row placement, as their doc
 * comments and the Arrow format state them: the column layouts (src/writer/column-layout.ts), the
 * nested levels' row selections and their scratch memory (split-plan.ts), appending rows
 * (append-rows.ts), the counting sort (partition-rows.ts) and the column buffers themselves
 * (column-buffer.ts: what they hold, what they say they hold and release).
 *
 * Each test here fails against a mutant of those files that the other tests let through (see
 * docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps"). Expected values come
 * from the Arrow format's widths, from arrow-js's own decoding of the input (rows compared as
 * canonical strings of their raw bytes, test/support/rows.ts), from the byte lengths of the arrays
 * a buffer really holds, or from hand arithmetic on the doc comments; never from the code under
 * test. Nothing here measures time.
 */
import {
  Binary,
  BinaryView,
  Bool,
  DateDay,
  DateMillisecond,
  Decimal,
  DenseUnion,
  Dictionary,
  DurationSecond,
  Field,
  FixedSizeBinary,
  FixedSizeList,
  Float16,
  Float32,
  Float64,
  Int16,
  Int32,
  Int64,
  Int8,
  IntervalDayTime,
  IntervalMonthDayNano,
  IntervalYearMonth,
  LargeBinary,
  LargeList,
  LargeUtf8,
  List,
  makeData,
  Map_,
  Null,
  SparseUnion,
  Struct,
  Time,
  TimeMicrosecond,
  TimeMillisecond,
  TimeNanosecond,
  TimeSecond,
  TimestampSecond,
  TimeUnit,
  Uint64,
  Uint8,
  Utf8,
  Utf8View,
  type DataType,
} from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import { ShuffleError } from '../src/errors.js';
import type { FieldNodeInfo } from '../src/format/ipc-message.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { appendAccounted, IdentityRows, onePartition, planAppend, splitAppend } from '../src/writer/append-rows.js';
import { ColumnBuffer, grownDataCapacity, hasValidity, MAX_DATA_BYTES } from '../src/writer/column-buffer.js';
import { childLayouts, dictionaryLayouts, fixedBytesPerRow, isFlat, layoutOfType, type ColumnLayout } from '../src/writer/column-layout.js';
import { prepareSourceColumn } from '../src/writer/source-column.js';
import { planSplit, ScratchSelections, ScratchShortage, withScratchMemory } from '../src/writer/split-plan.js';
import { buildAny } from './support/nested.js';
import { Rng } from './support/random.js';
import { append, cells, held, ids, layoutOf, readBack } from './support/column-buffer-probes.js';

const f = (name: string, type: DataType) => new Field(name, type, true);

/** The error code of a layout refused, 'accepted' when it is not. */
function verdict(type: () => DataType): string {
  try {
    layoutOf(type());
    return 'accepted';
  } catch (error) {
    return error instanceof ShuffleError ? error.code : `untyped ${String(error)}`;
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// column layouts: the widths the Arrow format gives each type
// ---------------------------------------------------------------------------------------------------------------------

describe('column layouts (column-layout.ts) give every type the widths of the Arrow format', () => {
  test('fixed-width types take the byte width the format gives their type, unit and precision', () => {
    const widths: [DataType, number][] = [
      [new Int8(), 1],
      [new Int16(), 2],
      [new Int32(), 4],
      [new Int64(), 8],
      [new Uint8(), 1],
      [new Uint64(), 8],
      [new Float16(), 2],
      [new Float32(), 4],
      [new Float64(), 8],
      [new TimeSecond(), 4],
      [new TimeMillisecond(), 4], // milliseconds in 32 bits, as seconds
      [new TimeMicrosecond(), 8],
      [new TimeNanosecond(), 8],
      [new Decimal(2, 9, 32), 4],
      [new Decimal(2, 18, 64), 8],
      [new Decimal(2, 38, 128), 16],
      [new Decimal(2, 76, 256), 32],
      [new DateDay(), 4],
      [new DateMillisecond(), 8],
      [new TimestampSecond(), 8],
      [new DurationSecond(), 8],
      [new IntervalYearMonth(), 4], // months: one int32
      [new IntervalDayTime(), 8], // days and milliseconds: two int32
      [new IntervalMonthDayNano(), 16], // months, days (int32) and nanoseconds (int64)
      [new FixedSizeBinary(5), 5],
    ];
    for (const [type, byteWidth] of widths) expect(layoutOf(type), String(type)).toEqual({ kind: 'fixed-width', byteWidth });
  });

  test('a time unit comes with its width: seconds and milliseconds in 32 bits, micro- and nanoseconds in 64; other pairs are refused', () => {
    expect(verdict(() => new Time(TimeUnit.SECOND, 32))).toBe('accepted');
    expect(verdict(() => new Time(TimeUnit.MILLISECOND, 32))).toBe('accepted');
    expect(verdict(() => new Time(TimeUnit.MICROSECOND, 64))).toBe('accepted');
    expect(verdict(() => new Time(TimeUnit.MILLISECOND, 64 as 32))).toBe('CS_UNSUPPORTED_TYPE');
    expect(verdict(() => new Time(TimeUnit.NANOSECOND, 32 as 64))).toBe('CS_UNSUPPORTED_TYPE');
  });

  test('binary and list offsets are int32, large ones int64 (a map is a list); views are their own layout', () => {
    expect(layoutOf(new Utf8())).toEqual({ kind: 'binary', offsetWidth: 4 });
    expect(layoutOf(new Binary())).toEqual({ kind: 'binary', offsetWidth: 4 });
    expect(layoutOf(new LargeUtf8())).toEqual({ kind: 'binary', offsetWidth: 8 });
    expect(layoutOf(new LargeBinary())).toEqual({ kind: 'binary', offsetWidth: 8 });
    expect(layoutOf(new Utf8View())).toEqual({ kind: 'view' });
    expect(layoutOf(new BinaryView())).toEqual({ kind: 'view' });
    expect(layoutOf(new List(f('x', new Int32())))).toMatchObject({ kind: 'list', offsetWidth: 4 });
    expect(layoutOf(new LargeList(f('x', new Int32())))).toMatchObject({ kind: 'list', offsetWidth: 8 });
    const map = new Map_(new Field('entries', new Struct([new Field('key', new Utf8(), false), f('value', new Int32())]), false) as never);
    expect(layoutOf(map)).toMatchObject({ kind: 'list', offsetWidth: 4, child: { kind: 'struct' } });
  });

  test("a union's mode is its type's, and its child index maps each declared type id to its child (-1 for the others)", () => {
    const dense = layoutOf(new DenseUnion([5, 0], [f('a', new Int32()), f('b', new Utf8())]));
    const sparse = layoutOf(new SparseUnion([5, 0], [f('a', new Int32()), f('b', new Utf8())]));
    for (const [layout, mode] of [[dense, 'dense'], [sparse, 'sparse']] as const) {
      expect(layout.kind).toBe('union');
      if (layout.kind !== 'union') continue;
      expect(layout.mode).toBe(mode);
      expect(layout.childIndex[5]).toBe(0);
      expect(layout.childIndex[0]).toBe(1);
      expect([...layout.childIndex].filter((c) => c === -1).length).toBe(126);
    }
  });

  test("a dictionary's layout has its indices' width and signedness, 64-bit indices included", () => {
    expect(layoutOf(new Dictionary(new Utf8(), new Int32(), 1))).toMatchObject({ kind: 'dictionary', id: 1, indexWidth: 4, indexSigned: true, values: { kind: 'binary' } });
    expect(layoutOf(new Dictionary(new Utf8(), new Uint8(), 2))).toMatchObject({ kind: 'dictionary', indexWidth: 1, indexSigned: false });
    expect(layoutOf(new Dictionary(new Utf8(), new Int64() as unknown as Int32, 3))).toMatchObject({ kind: 'dictionary', indexWidth: 8, indexSigned: true });
    expect(layoutOf(new Dictionary(new Utf8(), new Uint64() as unknown as Int32, 4))).toMatchObject({ kind: 'dictionary', indexWidth: 8, indexSigned: false });
  });

  test('layoutOfType caches by type object (one type, one layout) and is null for a type it does not split', () => {
    const type = new Struct([f('a', new Int32())]);
    const layout = layoutOfType(type);
    expect(layout).not.toBeNull();
    expect(layoutOfType(type)).toBe(layout);
    // a type this library does not split is null here, not an error (the reader asks about any type it loads)
    expect(layoutOfType(new FixedSizeBinary(-1))).toBeNull();
    expect(layoutOfType(new Dictionary(new Dictionary(new Utf8(), new Int32(), 1), new Int32(), 2))).toBeNull();
  });

  test("fixedBytesPerRow is the doc comment's table: a bool a byte, offsets, a view's 16 bytes, a union's type id (and, dense, its offset)", () => {
    const table: [DataType, number][] = [
      [new Null(), 0],
      [new Bool(), 1],
      [new Int16(), 2],
      [new Decimal(2, 38, 128), 16],
      [new Utf8(), 4],
      [new LargeBinary(), 8],
      [new Utf8View(), 16],
      [new List(f('x', new Int64())), 4],
      [new LargeList(f('x', new Int64())), 8],
      [new FixedSizeList(3, f('x', new Int64())), 0],
      [new Struct([f('a', new Int64())]), 0],
      [new SparseUnion([0], [f('a', new Int64())]), 1],
      [new DenseUnion([0], [f('a', new Int64())]), 5],
      [new Dictionary(new Utf8(), new Int16(), 1), 2],
      [new Dictionary(new Utf8(), new Int64() as unknown as Int32, 2), 8],
    ];
    for (const [type, bytes] of table) expect(fixedBytesPerRow(layoutOf(type)), String(type)).toBe(bytes);
  });

  test('childLayouts lists every nested layout in IPC order, a fixed-size list\'s child too; dictionaryLayouts finds dictionaries at any depth', () => {
    const dict = (id: number) => new Dictionary(new Utf8(), new Int32(), id);
    const type = new Struct([f('a', dict(1)), f('l', new FixedSizeList(2, f('x', dict(2)))), f('m', new List(f('y', dict(3))))]);
    const layout = layoutOf(type);
    const kinds = (l: ColumnLayout) => childLayouts(l).map((c) => c.kind);
    expect(kinds(layout)).toEqual(['dictionary', 'fixed-size-list', 'list']);
    expect(kinds(childLayouts(layout)[1]!)).toEqual(['dictionary']);
    expect(dictionaryLayouts(layout).map((d) => d.id)).toEqual([1, 2, 3]);
    expect(dictionaryLayouts(layoutOf(new FixedSizeList(2, f('x', dict(4))))).map((d) => d.id)).toEqual([4]);
  });

  test('the flat layouts are exactly null, fixed-width, bool, binary and view', () => {
    const flat = (type: DataType) => isFlat(layoutOf(type));
    for (const type of [new Null(), new Int32(), new Bool(), new Utf8(), new LargeUtf8(), new Utf8View(), new BinaryView()]) expect(flat(type), String(type)).toBe(true);
    for (const type of [new List(f('x', new Int32())), new FixedSizeList(1, f('x', new Int32())), new Struct([]), new SparseUnion([0], [f('a', new Int32())]), new Dictionary(new Utf8(), new Int32(), 1)]) {
      expect(flat(type), String(type)).toBe(false);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// column buffers: what they allocate, what they give back, what they send
// ---------------------------------------------------------------------------------------------------------------------

describe('column buffers (column-buffer.ts) hold whole words, and the memory they say they hold', () => {
  test('values buffers are whole 32-bit words: a union\'s int8 type ids of 5 rows take 8 bytes, as an int8 column\'s values and a bool\'s bits do', () => {
    const sized = (type: DataType, capacity: number) => {
      const column = new ColumnBuffer(layoutOf(type));
      column.resize(capacity, 0, 0);
      return column.values.byteLength;
    };
    expect(sized(new SparseUnion([0], [f('a', new Int32())]), 5)).toBe(8);
    expect(sized(new DenseUnion([0], [f('a', new Int32())]), 5)).toBe(8);
    expect(sized(new Int8(), 5)).toBe(8);
    expect(sized(new Bool(), 33)).toBe(8); // 5 bytes of bits
    expect(sized(new Dictionary(new Utf8(), new Uint8(), 1), 6)).toBe(8);
  });

  test('only unions and the null type have no validity bitmap (Arrow format V5: a union\'s nulls live in its children)', () => {
    expect(hasValidity(layoutOf(new Null()))).toBe(false);
    expect(hasValidity(layoutOf(new SparseUnion([0], [f('a', new Int32())])))).toBe(false);
    expect(hasValidity(layoutOf(new DenseUnion([0], [f('a', new Int32())])))).toBe(false);
    for (const type of [new Int32(), new Bool(), new Utf8(), new Utf8View(), new List(f('x', new Int32())), new FixedSizeList(2, f('x', new Int32())), new Struct([]), new Dictionary(new Utf8(), new Int32(), 1)]) {
      expect(hasValidity(layoutOf(type)), String(type)).toBe(true);
    }
  });

  test('binary data grows to what is needed, by at least half again, never past MAX_DATA_BYTES; data that fits keeps its buffer', () => {
    expect(grownDataCapacity(100, 100)).toBe(100);
    expect(grownDataCapacity(100, 99)).toBe(100);
    expect(grownDataCapacity(100, 101)).toBe(150);
    expect(grownDataCapacity(100, 400)).toBe(400);
    expect(grownDataCapacity(0, 1)).toBe(1);
    expect(grownDataCapacity(0x60000000, 0x60000001)).toBe(MAX_DATA_BYTES);
  });

  test("binary data grown to exactly what the rows need is not grown again by the split: a growth's cost and the reservation stay the arrays' bytes", async () => {
    // a split into one partition (plan, growth, split): capacity = rows, so the growth sizes the data to exactly their bytes
    for (const type of [new Utf8(), new LargeBinary()]) {
      const data = buildAny(type, 20, new Rng(7), { nullRate: 0 });
      const column = new ColumnBuffer(layoutOf(type));
      const plan = planAppend([prepareSourceColumn(data, column.layout)], [column], onePartition(ids(20), 0, 20), 0, 20, new ScratchSelections());
      plan.growth.apply();
      splitAppend(plan.plans, [column], 0);
      expect(column.data.byteLength, String(type)).toBe(column.dataLength);
      expect(plan.growth.bytesAfter - plan.growth.bytesBefore, String(type)).toBe(held(column));
      expect(readBack(column, 20, type)).toEqual(cells(data));
    }
    // the accounted append of a nested column: a list's strings, split through their plan
    const type = new List(f('item', new Utf8()));
    const pool = new MemoryPool();
    const reservation = pool.register('test');
    const scratch = new ScratchSelections((bytes) => reservation.tryGrow(bytes));
    const data = buildAny(type, 20, new Rng(8), { nullRate: 0 });
    const column = new ColumnBuffer(layoutOf(type), reservation.recycler);
    await appendAccounted([prepareSourceColumn(data, column.layout)], [column], 20, 0, 20, ids(20), scratch, reservation);
    expect(reservation.size).toBe(held(column) + scratch.bytes);
    expect(readBack(column, 20, type)).toEqual(cells(data));
    reservation.shrink(column.release() + scratch.bytes);
    scratch.clear();
    expect(reservation.size).toBe(0);
  });

  test("release() gives a buffer's large arrays (values, validity, binary data) to the pool's recycler, and a new buffer of the same size reuses them", () => {
    const pool = new MemoryPool();
    const reservation = pool.register('test');
    const recycler = reservation.recycler;
    const type = new Utf8();
    const rows = 40_000; // validity: 5,000 bytes; offsets: 160,004 bytes (both past the recycler's 4 KiB floor)
    const make = () => {
      const column = new ColumnBuffer(layoutOf(type), recycler);
      column.resize(rows, 0, 8192);
      column.ensureValidity(rows);
      return column;
    };
    const column = make();
    const bytes = held(column);
    reservation.tryGrow(bytes);
    expect(recycler.bytes).toBe(0);
    reservation.shrink(column.release());
    expect(recycler.bytes, 'idle after release').toBe(bytes);
    const reusedBefore = recycler.reused;
    reservation.tryGrow(bytes);
    const again = make();
    expect(recycler.reused - reusedBefore, 'arrays taken back from the recycler').toBe(3);
    expect(recycler.bytes).toBe(0);
    reservation.shrink(again.release());
  });

  test('a buffer whose rows hold no null (its bitmap from earlier rows kept) gives no bitmap to the buffer they are appended to, and sends none', () => {
    const type = new Int32();
    const column = new ColumnBuffer(layoutOf(type));
    append(column, makeData({ type, length: 4, nullCount: 1, nullBitmap: Uint8Array.of(0b1011), data: Int32Array.of(1, 2, 3, 4) }), 0, 8);
    column.clear(); // rows forgotten, bitmap kept (sticky)
    const clean = makeData({ type, length: 6, nullCount: 0, data: Int32Array.of(5, 6, 7, 8, 9, 10) });
    append(column, clean, 0, 8);
    expect(column.validity).not.toBeNull();
    const nodes: FieldNodeInfo[] = [];
    const buffers: Uint8Array[] = [];
    column.snapshot(6, nodes, buffers);
    expect(nodes).toEqual([{ length: 6, nullCount: 0 }]);
    expect(buffers[0]!.byteLength, 'no validity buffer for rows without nulls').toBe(0);
    const merged = new ColumnBuffer(layoutOf(type));
    const plan = planAppend([column.asSource(6)], [merged], onePartition(ids(6), 0, 6), 0, 8, new ScratchSelections());
    plan.growth.apply();
    splitAppend(plan.plans, [merged], 0);
    expect(merged.validity, 'the merged buffer has had no null').toBeNull();
    expect(readBack(merged, 6, type)).toEqual(cells(clean));
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// appending rows (append-rows.ts): identity rows, and the protocol's order under a memory limit
// ---------------------------------------------------------------------------------------------------------------------

describe('appending rows (append-rows.ts)', () => {
  test('IdentityRows: bytesFor(rows) is what bytes becomes after get(rows): 1,024 entries at least, then doubling; an array long enough is kept', () => {
    const identity = new IdentityRows();
    expect(identity.bytes).toBe(0);
    expect(identity.bytesFor(3)).toBe(4096);
    identity.get(3);
    expect(identity.bytes).toBe(4096);
    // exactly as long as asked: kept
    expect(identity.bytesFor(1024)).toBe(4096);
    const same = identity.get(1024);
    expect(identity.bytes).toBe(4096);
    expect(identity.get(1024)).toBe(same);
    // one more: twice as long (2,048 entries), every entry its index
    expect(identity.bytesFor(1025)).toBe(8192);
    const grown = identity.get(1025);
    expect(identity.bytes).toBe(8192);
    expect(grown.length).toBe(2048);
    expect(grown.every((v, i) => v === i)).toBe(true);
    // more than twice: exactly as many as asked
    expect(identity.bytesFor(5000)).toBe(20_000);
    // release: the bytes once, then nothing held and nothing more to release
    expect(identity.release()).toBe(8192);
    expect(identity.bytes).toBe(0);
    expect(identity.release()).toBe(0);
  });

  test('an append whose growth the pool refuses leaves the buffer as it was: nothing allocated that is not reserved', async () => {
    const pool = new MemoryPool(10_000);
    const reservation = pool.register('test');
    const scratch = new ScratchSelections((bytes) => reservation.tryGrow(bytes));
    const type = new Int32();
    const column = new ColumnBuffer(layoutOf(type), reservation.recycler);
    const small = makeData({ type, length: 4, nullCount: 0, data: Int32Array.of(1, 2, 3, 4) });
    await appendAccounted([prepareSourceColumn(small, column.layout)], [column], 4, 0, 4, ids(4), scratch, reservation);
    const before = held(column);
    expect(reservation.size).toBe(before + scratch.bytes);
    // 5,000 rows of int32 at a capacity of 5,000: 20,000 bytes, more than the pool's limit
    const large = makeData({ type, length: 5000, nullCount: 0, data: new Int32Array(5000) });
    await expect(appendAccounted([prepareSourceColumn(large, column.layout)], [column], 5000, 4, 5000, ids(5000), scratch, reservation)).rejects.toThrow();
    expect(held(column)).toBe(before);
    expect(column.capacity).toBe(4);
    expect(reservation.size).toBe(held(column) + scratch.bytes);
    expect(readBack(column, 4, type)).toEqual(cells(small));
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// split plans (split-plan.ts): the nested levels' selections and their scratch memory
// ---------------------------------------------------------------------------------------------------------------------

describe('split plans (split-plan.ts): derived selections ask for exactly the rows they hold, and scratch memory is reserved once', () => {
  /** A SelectionArrays that records the length of every array asked for. */
  const recording = () => {
    const requests: number[] = [];
    return { requests, arrays: { take: (_slot: number, length: number) => (requests.push(length), new Uint32Array(length)) } };
  };

  test("a dense union's child selections, for one partition that starts past position 0, count only that partition's rows", () => {
    // 6 rows: type ids [0, 1, 0, 0, 1, 0], offsets into the children [0, 0, 1, 2, 1, 3]
    const type = new DenseUnion([0, 1], [f('i', new Int32()), f('s', new Utf8())]);
    const ints = makeData({ type: new Int32(), length: 4, nullCount: 0, data: Int32Array.of(10, 11, 12, 13) });
    const strings = makeData({ type: new Utf8(), length: 2, nullCount: 0, valueOffsets: Int32Array.of(0, 1, 2), data: new TextEncoder().encode('ab') });
    const data = makeData({ type, length: 6, nullCount: 0, typeIds: Int8Array.of(0, 1, 0, 0, 1, 0), valueOffsets: Int32Array.of(0, 0, 1, 2, 1, 3), children: [ints, strings] });
    const { requests, arrays } = recording();
    // rowIds [0, 1, 2, 3, 4, 5], one partition of rows [4, 6): rows 4 (type 1, offset 1) and 5 (type 0, offset 3)
    const plan = planSplit(prepareSourceColumn(data, layoutOf(type)), onePartition(ids(6), 4, 6), arrays, () => null, { next: 0 });
    // child 0: 1 row and 2 starts; child 1: 1 row and 2 starts
    expect(requests).toEqual([1, 2, 1, 2]);
    expect([...plan.children[0]!.sel.rowIds.subarray(0, 1)]).toEqual([3]);
    expect([...plan.children[1]!.sel.rowIds.subarray(0, 1)]).toEqual([1]);
  });

  test("a fixed-size list's child selection, for one partition that starts past position 0, asks for that partition's rows x the list size", () => {
    const type = new FixedSizeList(2, f('x', new Int32()));
    const child = makeData({ type: new Int32(), length: 10, nullCount: 0, data: Int32Array.from({ length: 10 }, (_, i) => i) });
    const data = makeData({ type, length: 5, nullCount: 0, child });
    const { requests, arrays } = recording();
    const plan = planSplit(prepareSourceColumn(data, layoutOf(type)), onePartition(Uint32Array.of(0, 1, 2, 4, 3), 3, 5), arrays, () => null, { next: 0 });
    expect(requests).toEqual([4, 2]); // rows 4 and 3: 2 x 2 child rows; 2 starts
    expect([...plan.children[0]!.sel.rowIds.subarray(0, 4)]).toEqual([8, 9, 6, 7]);
    expect([...plan.children[0]!.sel.starts]).toEqual([0, 4]);
  });

  test('a growth paid in full by prepaid bytes asks the pool for nothing, even when the pool would refuse', () => {
    const asked: number[] = [];
    const scratch = new ScratchSelections((bytes) => (asked.push(bytes), false));
    scratch.prepay(256); // exactly the first growth: 64 entries
    expect(scratch.take(0, 10).length).toBe(64);
    expect(asked).toEqual([]);
    expect(scratch.bytes).toBe(256);
    expect(() => scratch.take(1, 1)).toThrow(ScratchShortage);
    expect(asked).toEqual([256]);
  });

  test('withScratchMemory: a reservation that fails fails the plan with its error (nothing planned on memory not granted)', async () => {
    const scratch = new ScratchSelections(() => false);
    const refusal = new Error('no memory');
    let plans = 0;
    await expect(
      withScratchMemory(
        scratch,
        async () => {
          throw refusal;
        },
        () => {
          plans++;
          return scratch.take(0, 100);
        },
      ),
    ).rejects.toBe(refusal);
    expect(plans).toBe(1);
    expect(scratch.bytes).toBe(0);
  });
});
