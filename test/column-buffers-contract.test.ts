/**
 * The columnar writer's per-partition buffers and row placement, as their doc comments state
 * them: the column buffers (src/writer/column-buffer.ts: what they hold, what they say they hold,
 * shrinking, releasing, reuse), the growth plans that size them (buffer-growth.ts), the nested
 * levels' row selections (split-plan.ts), the appends of contiguous rows (append-column.ts,
 * append-rows.ts, gather-rows.ts), the counting sort (partition-rows.ts) and the column layouts
 * (column-layout.ts, column-index.ts).
 *
 * Each test here fails against a mutant of those files that the other tests let through (a
 * boundary moved by one, a bit offset or an offset rebase dropped, a reset left out, a byte count
 * that forgets a buffer): see docs/RELIABILITY.md, "The tests notice a broken line: mutation
 * sweeps". Expected values come from arrow-js's own decoding of the input (rows compared as
 * canonical strings made of their raw bytes, test/support/rows.ts), from the rows read back
 * through the library's reader, from the byte lengths of the arrays a buffer really holds, or
 * from hand arithmetic on the doc comments; never from the code under test. Nothing here
 * measures time.
 */
import {
  Binary,
  Bool,
  Data,
  DateDay,
  Decimal,
  DenseUnion,
  Dictionary,
  Field,
  FixedSizeBinary,
  FixedSizeList,
  Int16,
  Int32,
  LargeList,
  LargeUtf8,
  List,
  makeData,
  Null,
  Schema,
  SparseUnion,
  Struct,
  Utf8,
  Utf8View,
  type DataType,
} from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import type { FieldNodeInfo } from '../src/format/ipc-message.js';
import { ColumnBuffer } from '../src/writer/column-buffer.js';
import { columnLayoutOf } from '../src/writer/column-layout.js';
import { columnIndex } from '../src/writer/column-index.js';
import { appendAccounted, IdentityRows, onePartition, planAppend, splitAppend } from '../src/writer/append-rows.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { ShuffleError } from '../src/errors.js';
import { prepareSourceColumn } from '../src/writer/source-column.js';
import { planSplit, ScratchSelections, ScratchShortage, withScratchMemory } from '../src/writer/split-plan.js';
import { buildAny } from './support/nested.js';
import { Rng } from './support/random.js';
import { append, cells, held, ids, layoutOf, readBack } from './support/column-buffer-probes.js';

// ---------------------------------------------------------------------------------------------------------------------
// helpers: a column buffer filled through the documented protocol, read back through the library's reader
// (test/support/column-buffer-probes.ts)
// ---------------------------------------------------------------------------------------------------------------------

const f = (name: string, type: DataType) => new Field(name, type, true);
const i32 = () => new Int32();

/** One type of every layout, nested ones included (a dense and a sparse union of an int and a string). */
const TYPES: { name: string; type: () => DataType }[] = [
  { name: 'int32', type: i32 },
  { name: 'bool', type: () => new Bool() },
  { name: 'utf8', type: () => new Utf8() },
  { name: 'large utf8', type: () => new LargeUtf8() },
  { name: 'utf8 view', type: () => new Utf8View() },
  { name: 'list<int32>', type: () => new List(f('item', i32())) },
  { name: 'list<utf8>', type: () => new List(f('item', new Utf8())) },
  { name: 'large list<utf8>', type: () => new LargeList(f('item', new Utf8())) },
  { name: 'date32 (days)', type: () => new DateDay() },
  { name: 'decimal32(9, 2)', type: () => new Decimal(2, 9, 32) },
  { name: 'fixed-size list<int16, 3>', type: () => new FixedSizeList(3, f('item', new Int16())) },
  { name: 'struct<int32, binary>', type: () => new Struct([f('a', i32()), f('b', new Binary())]) },
  { name: 'dense union<int32, utf8>', type: () => new DenseUnion([0, 1], [f('i', i32()), f('s', new Utf8())]) },
  { name: 'sparse union<int32, utf8>', type: () => new SparseUnion([0, 1], [f('i', i32()), f('s', new Utf8())]) },
  { name: 'list<struct<int32, list<utf8>>>', type: () => new List(f('item', new Struct([f('a', i32()), f('l', new List(f('x', new Utf8())))]))) },
];

// ---------------------------------------------------------------------------------------------------------------------
// what a buffer holds, what it says it holds, what a growth says it costs
// ---------------------------------------------------------------------------------------------------------------------

describe('column buffers count exactly the bytes they hold (the pool is reserved with these counts)', () => {
  for (const { name, type: make } of TYPES) {
    test(`${name}: growths cost what they allocate; allocatedBytes, fittedBytes and release() are the arrays' bytes`, () => {
      const type = make();
      const rng = new Rng(TYPES.findIndex((t) => t.name === name) + 11);
      const column = new ColumnBuffer(layoutOf(type));
      // no nulls first, then nulls (a validity bitmap appears), then a slice of a batch with nulls
      const chunks = [buildAny(type, 40, rng, { nullRate: 0 }), buildAny(type, 70, rng, { nullRate: 0.3 }), buildAny(type, 90, rng, { nullRate: 0.3 }).slice(13, 50)]; // Data.slice(offset, length)
      const expected: string[] = [];
      let filled = 0;
      for (const [k, chunk] of chunks.entries()) {
        const before = held(column);
        const capacity = [40, 150, 400][k]!;
        const growth = append(column, chunk, filled, capacity);
        // the caller reserves bytesAfter, applies, releases bytesBefore: the net is what the arrays grew by
        expect(growth.bytesAfter - growth.bytesBefore, `chunk ${k}: growth's net`).toBe(held(column) - before);
        expect(column.allocatedBytes, `chunk ${k}: allocatedBytes`).toBe(held(column));
        filled += chunk.length;
        expected.push(...cells(chunk));
        expect(readBack(column, filled, type), `chunk ${k}: rows`).toEqual(expected);
      }
      // shrinkTo: what fittedBytes said it would be, and every row kept
      const fitted = column.fittedBytes(filled);
      column.shrinkTo(filled);
      expect(held(column), 'after shrinkTo').toBe(fitted);
      expect(column.allocatedBytes).toBe(fitted);
      expect(readBack(column, filled, type), 'rows after shrinkTo').toEqual(expected);
      // release: returns every byte, holds none, and the buffer takes rows again from scratch
      const bytes = held(column);
      expect(column.release(), 'release() returns').toBe(bytes);
      expect(held(column)).toBe(0);
      expect(column.capacity).toBe(0);
      const again = buildAny(type, 30, rng, { nullRate: 0.3 });
      append(column, again, 0, 30);
      expect(column.allocatedBytes).toBe(held(column));
      expect(readBack(column, 30, type), 'rows after release and refill').toEqual(cells(again));
    });
  }
});

describe('a growth costs what it allocates (BufferGrowth.plan)', () => {
  /*
   * A list<utf8> row that is null (or empty) selects no child rows, but its child's source has a validity
   * bitmap: BufferGrowth.plan records a change for the child (validity false -> true) at capacity 0. It
   * counted bytesFor(0, true, 0) = 4 bytes of offsets ((0 + 1) x 4), which apply() never allocates (it does
   * not resize a node whose capacity stays), and release(), which returns what the arrays hold, never gave
   * them back (found by the sweep of 2026-12-07, fixed).
   */
  test('the growth of a list<utf8> buffer by one null row whose child has a validity bitmap costs what it allocates', () => {
    const type = new List(f('item', new Utf8()));
    // child: two strings, the second null; the list's one row is null and spans no child rows
    const child = makeData({ type: new Utf8(), length: 2, nullCount: 1, nullBitmap: Uint8Array.of(0b01), valueOffsets: Int32Array.of(0, 1, 1), data: Uint8Array.of(97) });
    const list = makeData({ type, length: 1, nullCount: 1, nullBitmap: Uint8Array.of(0), valueOffsets: Int32Array.of(2, 2), child });
    const column = new ColumnBuffer(layoutOf(type));
    const growth = append(column, list, 0, 1);
    expect(readBack(column, 1, type)).toEqual(['null']);
    expect(growth.bytesAfter - growth.bytesBefore).toBe(held(column)); // 12: the list's validity (4) and offsets (8); the child has none (16 before the fix)
  });
});

describe('the nested levels get buffers for the rows they receive (BufferGrowth.plan, column-layout.ts)', () => {
  test("a dense union's children hold as many rows as point at each: a child no row points at holds no buffers", () => {
    const type = new DenseUnion([0, 1], [f('i', i32()), f('s', new Utf8())]);
    const ints = makeData({ type: i32(), length: 100, nullCount: 0, data: Int32Array.from({ length: 100 }, (_, i) => i * 7) });
    const strings = makeData({ type: new Utf8(), length: 0, nullCount: 0, valueOffsets: new Int32Array(1), data: new Uint8Array(0) });
    const data = makeData({ type, length: 100, nullCount: 0, typeIds: new Int8Array(100), valueOffsets: ids(100) as unknown as Int32Array, children: [ints, strings] });
    const column = new ColumnBuffer(layoutOf(type));
    append(column, data, 0, 400);
    expect(held(column.children[1]!), 'the string child').toBe(0);
    expect(readBack(column, 100, type)).toEqual(cells(data));
  });
});

describe('appending contiguous rows (append-column.ts, append-rows.ts): the merger\'s and the staging\'s append', () => {
  for (const { name, type: make } of TYPES) {
    test(`${name}: sliced inputs appended after rows already held, a buffer's rows appended to another; the reservation is the arrays' bytes`, async () => {
      const type = make();
      const rng = new Rng(TYPES.findIndex((t) => t.name === name) + 101);
      const pool = new MemoryPool();
      const reservation = pool.register('test');
      const scratch = new ScratchSelections((bytes) => reservation.tryGrow(bytes));
      const identity = ids(512);
      const column = new ColumnBuffer(layoutOf(type), reservation.recycler);
      // slices start at odd rows (a bit offset that is not a multiple of 8, binary offsets that do not start at 0)
      // no nulls, then nulls at the same capacity (only a validity bitmap is new), then more at a larger one (Data.slice(offset, length))
      const chunks = [buildAny(type, 50, rng, { nullRate: 0 }).slice(3, 37), buildAny(type, 80, rng, { nullRate: 0.3 }).slice(5, 65), buildAny(type, 60, rng, { nullRate: 0.5 }).slice(11, 49)];
      const expected: string[] = [];
      let filled = 0;
      for (const [k, chunk] of chunks.entries()) {
        const capacity = [200, 200, 400][k]!; // 37, 37 + 65 and 37 + 65 + 49 = 151 rows
        await appendAccounted([prepareSourceColumn(chunk, column.layout)], [column], chunk.length, filled, capacity, identity, scratch, reservation);
        filled += chunk.length;
        expected.push(...cells(chunk));
        expect(readBack(column, filled, type), `chunk ${k}: rows`).toEqual(expected);
        expect(reservation.size, `chunk ${k}: reserved`).toBe(held(column) + scratch.bytes);
      }
      // the merger's step: this buffer's rows (asSource) appended to another buffer holding a row of its own
      const merged = new ColumnBuffer(layoutOf(type), reservation.recycler);
      // (no nulls in it: a nested level of a row with nulls at capacity 0 meets the defect pinned below)
      const first = buildAny(type, 9, rng, { nullRate: 0 }).slice(8, 1);
      await appendAccounted([prepareSourceColumn(first, merged.layout)], [merged], 1, 0, 1, identity, scratch, reservation);
      expect(reservation.size, 'reserved after the first row').toBe(held(column) + held(merged) + scratch.bytes);
      await appendAccounted([column.asSource(filled)], [merged], filled, 1, 400, identity, scratch, reservation);
      expect(readBack(merged, filled + 1, type), 'merged rows').toEqual([...cells(first), ...expected]);
      expect(reservation.size, 'reserved after the merge').toBe(held(column) + held(merged) + scratch.bytes);
      // emptied and refilled (the buffers kept), with rows without nulls where nulls were
      column.clear();
      const clean = buildAny(type, 100, rng, { nullRate: 0 });
      // (at the capacity it has: nothing is re-allocated, the bitmap keeps the old rows' bits)
      await appendAccounted([prepareSourceColumn(clean, column.layout)], [column], clean.length, 0, 400, identity, scratch, reservation);
      expect(readBack(column, 100, type), 'rows after clear()').toEqual(cells(clean));
      reservation.shrink(column.release() + merged.release());
      expect(reservation.size).toBe(scratch.bytes);
    });
  }

  test('onePartition(rowIds, start, end) appends exactly rowIds[start, end), in that order', () => {
    const type = new Utf8();
    const data = makeData({ type, length: 8, nullCount: 0, valueOffsets: Int32Array.of(0, 1, 2, 3, 4, 5, 6, 7, 8), data: new TextEncoder().encode('abcdefgh') });
    const rowIds = Uint32Array.of(7, 6, 1, 3, 0, 2);
    const column = new ColumnBuffer(layoutOf(type));
    const plan = planAppend([prepareSourceColumn(data, column.layout)], [column], onePartition(rowIds, 2, 5), 0, 3, new ScratchSelections());
    plan.growth.apply();
    splitAppend(plan.plans, [column], 0);
    // rows 1, 3, 0: "b", "d", "a" (cells are hex of the bytes)
    expect(readBack(column, 3, type)).toEqual(['"62"', '"64"', '"61"']);
  });

  test('binary data that outgrows its buffer without more rows than the capacity is grown by the growth, and costs what it allocates', () => {
    for (const type of [new Utf8(), new Utf8View()]) {
      const strings = (n: number, width: number) => makeData({ type: new Utf8(), length: n, nullCount: 0, valueOffsets: Int32Array.from({ length: n + 1 }, (_, i) => i * width), data: new Uint8Array(n * width).fill(120) });
      const asType = (data: Data) => (type instanceof Utf8View ? makeData({ type, length: data.length, nullCount: 0, views: viewsOf(data), variadicBuffers: [data.values as Uint8Array] } as never) : data);
      const column = new ColumnBuffer(layoutOf(type));
      const small = asType(strings(4, 20));
      append(column, small, 0, 16);
      const before = held(column);
      const large = asType(strings(4, 3000)); // 12,000 bytes at the same capacity of 16 rows
      const growth = append(column, large, 4, 16);
      expect(growth.bytesAfter - growth.bytesBefore, String(type)).toBe(held(column) - before);
      expect(readBack(column, 8, type)).toEqual([...cells(small), ...cells(large)]);
    }
  });

  test('appending no rows to a binary buffer that is re-sized costs a whole number of bytes (no running average to divide)', () => {
    const type = new Utf8();
    const empty = makeData({ type, length: 0, nullCount: 0, valueOffsets: Int32Array.of(0), data: new Uint8Array(0) });
    const column = new ColumnBuffer(layoutOf(type));
    const growth = append(column, empty, 0, 16);
    expect(Number.isSafeInteger(growth.bytesAfter)).toBe(true);
    expect(growth.bytesAfter - growth.bytesBefore).toBe(held(column));
  });

  test('a buffer holding exactly one null among its rows gives it to the buffer its rows are appended to', () => {
    const type = new Int32();
    const data = makeData({ type, length: 10, nullCount: 1, nullBitmap: Uint8Array.of(0xff ^ (1 << 6), 0xff), data: Int32Array.from({ length: 10 }, (_, i) => i) });
    const column = new ColumnBuffer(layoutOf(type));
    append(column, data, 0, 10);
    const merged = new ColumnBuffer(layoutOf(type));
    const plan = planAppend([column.asSource(10)], [merged], onePartition(ids(10), 0, 10), 0, 10, new ScratchSelections());
    plan.growth.apply();
    splitAppend(plan.plans, [merged], 0);
    expect(readBack(merged, 10, type)[6]).toBe('null');
    expect(readBack(merged, 10, type)).toEqual(cells(data));
  });
});

describe('selection scratch (split-plan.ts): every array reserved before it is allocated, and counted', () => {
  test('take() reserves what it grows by (by half again, at least 64 entries); a refusal is a ScratchShortage of the missing bytes; prepay() pays the next growth', () => {
    const asked: number[] = [];
    let grant = true;
    const scratch = new ScratchSelections((bytes) => {
      asked.push(bytes);
      return grant;
    });
    expect(scratch.take(0, 10).length).toBe(64); // at least 64 entries: 256 bytes
    expect(scratch.take(0, 64).length).toBe(64); // long enough: no growth
    expect(scratch.take(1, 100).length).toBe(100);
    expect(asked).toEqual([256, 400]);
    expect(scratch.bytes).toBe(656);
    // slot 1 grows to max(120, 100 x 1.5) = 150 entries: 200 more bytes, refused
    grant = false;
    let shortage: unknown;
    try {
      scratch.take(1, 120);
    } catch (error) {
      shortage = error;
    }
    expect(shortage).toBeInstanceOf(ScratchShortage);
    expect((shortage as ScratchShortage).bytes).toBe(200);
    // reserved by the caller (awaiting), handed over: the retry asks for nothing more
    scratch.prepay(150);
    expect(scratch.bytes).toBe(806);
    try {
      scratch.take(1, 120);
    } catch (error) {
      shortage = error;
    }
    expect((shortage as ScratchShortage).bytes).toBe(50); // 200 - 150 prepaid
    scratch.prepay(50);
    scratch.prepay(1000); // prepaid bytes add up; what a growth does not use stays prepaid and counted
    expect(scratch.take(1, 120).length).toBe(150);
    expect(asked).toEqual([256, 400, 200, 50]);
    expect(scratch.bytes).toBe(656 + 200 + 1000);
    grant = true;
    expect(scratch.take(2, 250).length).toBe(250); // 1000 bytes, paid from the 1000 prepaid: nothing asked
    expect(asked).toEqual([256, 400, 200, 50]);
    expect(scratch.bytes).toBe(656 + 200 + 1000);
    // clear(): the caller releases `bytes` (read before); nothing is left counted, prepaid included
    scratch.prepay(40);
    expect(scratch.bytes).toBe(656 + 200 + 1000 + 40);
    scratch.clear();
    expect(scratch.bytes).toBe(0);
    expect(scratch.take(0, 1).length).toBe(64);
    expect(asked).toEqual([256, 400, 200, 50, 256]);
  });

  test("a list's child selection asks for exactly the child rows of the selected valid rows (a null row's range is dropped)", () => {
    // offsets [0, 2, 5, 5, 9]: rows [a b], null over [c d e], [], [f g h i]; the worked example's shape, with a null
    const type = new List(f('item', i32()));
    const child = makeData({ type: i32(), length: 9, nullCount: 0, data: Int32Array.from({ length: 9 }, (_, i) => i) });
    const list = makeData({ type, length: 4, nullCount: 1, nullBitmap: Uint8Array.of(0b1101), valueOffsets: Int32Array.of(0, 2, 5, 5, 9), child });
    const requests: number[] = [];
    const arrays = { take: (_slot: number, length: number) => (requests.push(length), new Uint32Array(length)) };
    // partition 0: rows 1, 3; partition 1: rows 0, 2 (of rowIds [1, 3, 0, 2])
    const plan = planSplit(prepareSourceColumn(list, layoutOf(type)), { rowIds: Uint32Array.of(1, 3, 0, 2), starts: Uint32Array.of(0, 2, 4) }, arrays, () => null, { next: 0 });
    expect(requests).toEqual([6, 3]); // row 3's 4 items and row 0's 2; starts for 2 partitions
    expect([...plan.children[0]!.sel.rowIds.subarray(0, 6)]).toEqual([5, 6, 7, 8, 0, 1]);
    expect([...plan.children[0]!.sel.starts]).toEqual([0, 4, 6]);
    // one partition that starts past position 0 (a dictionary's new values: onePartition(ids, a, b)): only its rows count
    requests.length = 0;
    planSplit(prepareSourceColumn(list, layoutOf(type)), onePartition(Uint32Array.of(3, 3, 0), 2, 3), arrays, () => null, { next: 0 });
    expect(requests).toEqual([2, 2]);
  });

  test('withScratchMemory: a shortage is reserved by waiting, prepaid, and planned again; the reservation is what the scratch counts', async () => {
    let reserved = 0;
    let refusals = 1;
    const scratch = new ScratchSelections((bytes) => {
      if (refusals > 0) {
        refusals--;
        return false;
      }
      reserved += bytes;
      return true;
    });
    let plans = 0;
    const array = await withScratchMemory(
      scratch,
      async (bytes) => {
        reserved += bytes;
      },
      () => {
        plans++;
        return scratch.take(0, 1000);
      },
    );
    expect(array.length).toBe(1000);
    expect(plans).toBe(2);
    expect(reserved).toBe(4000);
    expect(scratch.bytes).toBe(4000);
  });
});

describe('column layouts (column-layout.ts): the limits, not one less or one more', () => {
  test('counts of 0 and of 2^31 - 1 (int32) are accepted, union type ids are 0..127 (int8), and no dictionary may sit inside a dictionary\'s values', () => {
    expect(columnLayoutOf(new Field('b', new FixedSizeBinary(0x7fffffff), true))).toEqual({ kind: 'fixed-width', byteWidth: 0x7fffffff });
    expect(columnLayoutOf(new Field('b', new FixedSizeList(0x7fffffff, f('x', i32())), true))).toMatchObject({ kind: 'fixed-size-list', listSize: 0x7fffffff });
    const union = (ids: number[]) => columnLayoutOf(new Field('u', new DenseUnion(ids, ids.map((id) => f(`c${id}`, i32()))), true));
    expect(union([0, 127])).toMatchObject({ kind: 'union', mode: 'dense' });
    const code = (make: () => unknown) => {
      try {
        make();
        return 'accepted';
      } catch (error) {
        return error instanceof ShuffleError ? error.code : `untyped ${String(error)}`;
      }
    };
    expect(code(() => union([0, 128]))).toBe('CS_UNSUPPORTED_TYPE');
    // zero is a count like any other: lists of no items, values of no bytes
    expect(columnLayoutOf(new Field('b', new FixedSizeList(0, f('x', i32())), true))).toMatchObject({ kind: 'fixed-size-list', listSize: 0 });
    expect(columnLayoutOf(new Field('b', new FixedSizeBinary(0), true))).toEqual({ kind: 'fixed-width', byteWidth: 0 });
    expect(code(() => columnLayoutOf(new Field('b', new FixedSizeBinary(0x80000000), true)))).toBe('CS_UNSUPPORTED_TYPE');
    // a dictionary's values are written in dictionary batches the tracker keeps per dictionary id; it has no
    // place for a dictionary inside them, at the top of the values or deeper: refused, not written wrong
    const inner = () => new Dictionary(new Utf8(), new Int32(), 7);
    expect(code(() => columnLayoutOf(new Field('d', new Dictionary(inner(), new Int32(), 8), true)))).toBe('CS_UNSUPPORTED_TYPE');
    expect(code(() => columnLayoutOf(new Field('d', new Dictionary(new List(f('x', inner())), new Int32(), 9), true)))).toBe('CS_UNSUPPORTED_TYPE');
    expect(code(() => columnLayoutOf(new Field('d', new Dictionary(new Struct([f('a', i32()), f('b', inner())]), new Int32(), 10), true)))).toBe('CS_UNSUPPORTED_TYPE');
  });
});

describe('identity rows (append-rows.ts IdentityRows)', () => {
  test('get(rows) gives 0 .. rows - 1 in its first rows entries, whatever smaller counts were asked for before', () => {
    const identity = new IdentityRows();
    expect([...identity.get(3).subarray(0, 3)]).toEqual([0, 1, 2]);
    const bytes = identity.bytes;
    const more = identity.get(700);
    expect(identity.bytes).toBe(bytes); // the first array (at least 1024 entries) serves 700 rows too
    expect(Array.from(more.subarray(0, 700))).toEqual(Array.from({ length: 700 }, (_, i) => i));
  });
});

describe('snapshots (ColumnBuffer.snapshot): the Arrow buffers of a partition\'s rows', () => {
  const snapshotOf = (column: ColumnBuffer, rows: number) => {
    const nodes: FieldNodeInfo[] = [];
    const buffers: Uint8Array[] = [];
    column.snapshot(rows, nodes, buffers);
    return { nodes, buffers };
  };

  test('bits past the last row are zeroed in validity bitmaps and boolean values, as the Arrow format recommends', () => {
    const type = new Bool();
    const column = new ColumnBuffer(layoutOf(type));
    // 16 rows, all true and valid but row 1, then the buffer is emptied and takes 11 rows: stale 1s follow them
    append(column, makeData({ type, length: 16, nullCount: 1, nullBitmap: Uint8Array.of(0xfd, 0xff), data: Uint8Array.of(0xff, 0xff) }), 0, 16);
    column.clear();
    append(column, makeData({ type, length: 11, nullCount: 1, nullBitmap: Uint8Array.of(0xfe, 0xff), data: Uint8Array.of(0xff, 0xff) }), 0, 16);
    const { nodes, buffers } = snapshotOf(column, 11);
    expect(nodes).toEqual([{ length: 11, nullCount: 1 }]);
    // rows 8, 9, 10 in the second byte: 0b111; row 0 null
    expect([...buffers[0]!]).toEqual([0xfe, 0x07]);
    expect([...buffers[1]!]).toEqual([0xff, 0x07]);
  });

  test('a null column says every row is null (the Arrow format: a Null array\'s null count is its length)', () => {
    const type = new Null();
    const column = new ColumnBuffer(layoutOf(type));
    append(column, makeData({ type, length: 5 }), 0, 5);
    expect(snapshotOf(column, 5).nodes).toEqual([{ length: 5, nullCount: 5 }]);
  });

  test('a nested binary or list node that never received a row still has one offset, 0 (rows + 1 offsets)', () => {
    const type = new List(f('item', new List(f('x', new Utf8()))));
    const inner = makeData({ type: new List(f('x', new Utf8())), length: 0, nullCount: 0, valueOffsets: Int32Array.of(0), child: makeData({ type: new Utf8(), length: 0, nullCount: 0, valueOffsets: Int32Array.of(0), data: new Uint8Array(0) }) });
    const lists = makeData({ type, length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, 0, 0, 0), child: inner });
    const column = new ColumnBuffer(layoutOf(type));
    append(column, lists, 0, 3);
    const { nodes, buffers } = snapshotOf(column, 3);
    expect(nodes).toEqual([{ length: 3, nullCount: 0 }, { length: 0, nullCount: 0 }, { length: 0, nullCount: 0 }]);
    // [validity, offsets] x 2 levels, then the strings' [validity, offsets, data]
    expect(buffers.map((b) => [...b])).toEqual([[], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [], [0, 0, 0, 0], [], [0, 0, 0, 0], []]);
    expect(readBack(column, 3, type)).toEqual(cells(lists));
  });
});

describe('columnIndex (column-index.ts)', () => {
  test('an unknown column is CS_UNKNOWN_COLUMN with the column in its location, and the first column is column 0', () => {
    const schema = new Schema([f('a', i32()), f('b', new Utf8())]);
    expect(columnIndex(schema, 'a')).toBe(0);
    expect(columnIndex(schema, 'b')).toBe(1);
    let caught: unknown;
    try {
      columnIndex(schema, 'nope');
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ShuffleError);
    expect((caught as ShuffleError).code).toBe('CS_UNKNOWN_COLUMN');
    expect((caught as ShuffleError).where).toEqual({ column: 'nope' });
    expect((caught as ShuffleError).message).toContain('a, b');
  });
});

/** Views (16 bytes each) of a utf8 column's values, all of them long (out of line) values in buffer 0. */
function viewsOf(data: Data): Uint8Array {
  const offsets = data.valueOffsets as Int32Array;
  const views = new Uint8Array(data.length * 16);
  const words = new DataView(views.buffer);
  const bytes = data.values as Uint8Array;
  for (let i = 0; i < data.length; i++) {
    const length = offsets[i + 1]! - offsets[i]!;
    words.setInt32(i * 16, length, true);
    views.set(bytes.subarray(offsets[i]!, offsets[i]! + 4), i * 16 + 4); // prefix
    words.setInt32(i * 16 + 8, 0, true); // buffer index
    words.setInt32(i * 16 + 12, offsets[i]!, true); // offset
  }
  return views;
}
