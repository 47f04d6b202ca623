/**
 * The columnar writer's split kernels (split-column, split-fixed-width, split-binary,
 * split-bits, split-view) and the column preparation they read from (source-column),
 * stated as claims about what a partition reads back: every test writes batches whose rows
 * it places itself (a `pid` column, partition-id partitioning), reads every partition back
 * through the library's reader and compares it with the input's rows (test/support/rows.ts
 * reads the input's buffers directly, by the Arrow rules). The mutation sweep that wrote
 * these is described in docs/RELIABILITY.md ("The tests notice a broken line: mutation
 * sweeps"); each test failed against the mutant it was written for.
 */
import {
  Binary,
  Bool,
  Decimal,
  DenseUnion,
  SparseUnion,
  LargeList,
  Dictionary,
  Int16,
  Int8,
  Field,
  FixedSizeBinary,
  FixedSizeList,
  Int32,
  Int64,
  LargeBinary,
  LargeUtf8,
  List,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Utf8,
  type Data,
  type DataType,
} from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { viewValueOf, type ViewValue } from '../src/format/binary-view.js';
import { WRITER_KINDS, type WriterKind } from '../src/writer-kind.js';
import { ColumnBuffer } from '../src/writer/column-buffer.js';
import { prepareSourceColumn } from '../src/writer/source-column.js';
import { splitView } from '../src/writer/split-view.js';
import { buildColumn } from './support/columns.js';
import { buildAny } from './support/nested.js';
import { Rng } from './support/random.js';
import { firstDifference, makeTempDir, removeDir, runShuffle, type ShuffleOutcome, type WriterOptions } from './support/shuffle-harness.js';
import { viewData } from './support/view-columns.js';

let dir: string;
let runs = 0;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

/** A batch of the given columns and a `pid` column (Int32, no nulls) saying where each row goes. */
function batchOf(columns: readonly { name: string; data: Data }[], pids: readonly number[]): RecordBatch {
  const fields = [new Field('pid', new Int32(), false), ...columns.map((c) => new Field(c.name, c.data.type, true))];
  const pid = makeData({ type: new Int32(), data: Int32Array.from(pids), length: pids.length, nullCount: 0 });
  const schema = new Schema(fields);
  return new RecordBatch(schema, makeData({ type: new Struct(fields), length: pids.length, nullCount: 0, children: [pid, ...columns.map((c) => c.data)] }));
}

/** Writes `batches` (rows go to partition `pid`), reads every partition back, and requires each to hold exactly its input rows, in order. */
async function expectRoundTrip(batches: readonly RecordBatch[], numPartitions: number, writer: WriterKind = 'hash', options: Partial<WriterOptions> = {}): Promise<ShuffleOutcome> {
  const outcome = await runShuffle(dir, { numPartitions, partitioning: { kind: 'partition-id', column: 'pid' }, codec: 'none', ...options }, batches, `map-${runs++}`, writer);
  outcome.actual.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)).toBeNull());
  expect(outcome.actual.flat().length).toBe(outcome.input.length);
  return outcome;
}

/** Row pids: the first `block` rows to partition 0 (a stretch the kernels copy as a block), the rest spread over 1..P-1. */
function pidsOf(rows: number, partitions: number, block = 0): number[] {
  return Array.from({ length: rows }, (_, i) => (i < block ? 0 : 1 + ((i * 7) % (partitions - 1))));
}

function bitmapOf(valid: (i: number) => boolean, length: number): Uint8Array {
  const bitmap = new Uint8Array(((length + 7) >>> 3) + 1);
  for (let i = 0; i < length; i++) if (valid(i)) bitmap[i >>> 3]! |= 1 << (i & 7);
  return bitmap;
}

const encoder = new TextEncoder();

/** A Utf8 / Binary / Large* column of these values, its data buffer exactly their bytes (no slack after the last value). */
function binaryData(type: DataType, values: readonly (string | null)[]): Data {
  const bytes = values.map((v) => encoder.encode(v ?? 'x-null'));
  const total = bytes.reduce((n, b) => n + b.byteLength, 0);
  const data = new Uint8Array(total);
  const ends: number[] = [0];
  let at = 0;
  for (const b of bytes) data.set(b, at), (at += b.byteLength), ends.push(at);
  const nulls = values.filter((v) => v === null).length;
  const large = type instanceof LargeUtf8 || type instanceof LargeBinary;
  const valueOffsets = large ? BigInt64Array.from(ends, BigInt) : Int32Array.from(ends);
  return makeData({ type: type as Utf8, data, valueOffsets: valueOffsets as Int32Array, length: values.length, nullCount: nulls, nullBitmap: bitmapOf((i) => values[i] !== null, values.length) });
}

describe.each(WRITER_KINDS)('%s writer', (writer) => {
  test('a column whose null count is 0 has every row valid, whatever the bits of its bitmap say', async () => {
    const n = 40;
    const zeros = bitmapOf((i) => i % 3 !== 0, n); // a third of the bits are 0, yet the null count says none is null
    const int32 = makeData({ type: new Int32(), data: Int32Array.from({ length: n }, (_, i) => i * 1000 + 7), length: n, nullCount: 0, nullBitmap: zeros });
    const utf8 = binaryData(new Utf8(), Array.from({ length: n }, (_, i) => `value ${i}`));
    const utf8NoNulls = makeData({ type: new Utf8(), data: utf8.values, valueOffsets: utf8.valueOffsets, length: n, nullCount: 0, nullBitmap: zeros });
    const bool = makeData({ type: new Bool(), data: bitmapOf((i) => i % 2 === 0, n), length: n, nullCount: 0, nullBitmap: zeros });
    const outcome = await expectRoundTrip([batchOf([{ name: 'i', data: int32 }, { name: 's', data: utf8NoNulls }, { name: 'b', data: bool }], pidsOf(n, 3, 20))], 3, writer);
    expect(outcome.actual.flat().some((row) => row.includes('null'))).toBe(false);
  });

  test('slices starting at every bit 1 to 9 split their validity bits and boolean values into the right rows', async () => {
    const rng = new Rng(11);
    const batches: RecordBatch[] = [];
    for (let k = 1; k <= 9; k++) {
      const n = 120;
      const cols = [
        { name: 'b', data: buildColumn(new Bool(), n, { bitmap: true, nullRate: 0.3 }, rng) },
        { name: 'i', data: buildColumn(new Int32(), n, { bitmap: true, nullRate: 0.3 }, rng) },
        { name: 's', data: buildColumn(new Utf8(), n, { bitmap: true, nullRate: 0.3 }, rng) },
        { name: 'l', data: buildColumn(new LargeUtf8(), n, { bitmap: true, nullRate: 0.3 }, rng) },
      ];
      batches.push(batchOf(cols, pidsOf(n, 4, k + 40)).slice(k, n - 3));
    }
    await expectRoundTrip(batches, 4, writer);
  });
});

describe('binary values', () => {
  test.each([new Utf8(), new Binary(), new LargeUtf8(), new LargeBinary()])('%s: values ending 0 to 4 bytes before the end of their data buffer (no padding after it) are copied whole, gathered or in a block', async (type) => {
    // the short values are copied a word at a time, reading up to 3 bytes past their end: a 5-byte
    // value followed by a last value of 1 to 4 bytes puts its last word 0 to 3 bytes from the end
    for (const last of ['p', 'pq', 'pqr', 'pqrs', 'abcde']) {
      const values = Array.from({ length: 50 }, (_, i) => (i % 11 === 5 ? null : 'v'.repeat(i % 9) + String(i)));
      values.push('abcde', last);
      const data = binaryData(type, values);
      for (const block of [0, values.length]) await expectRoundTrip([batchOf([{ name: 's', data }], pidsOf(values.length, 5, block))], 5);
    }
  });

  test.each([new Utf8(), new LargeUtf8(), new LargeBinary()])('%s: a slice starting at an odd row, its offsets rebased onto what each partition holds, gathered and in blocks of 16 or more rows', async (type) => {
    const rng = new Rng(7);
    const batches = [37, 200, 3].map((n, b) => {
      const data = buildColumn(type, n + 20, { bitmap: true, nullRate: 0.2 }, rng);
      return batchOf([{ name: 's', data }], pidsOf(n + 20, 3, b === 1 ? 60 : 0)).slice(b === 2 ? 1 : 7, n + 17);
    });
    await expectRoundTrip(batches, 3);
  });
});


describe('view values', () => {
  const lengths = [0, 1, 4, 11, 12, 13, 14, 16, 17, 40];
  const values = Array.from({ length: 60 }, (_, i) => (i % 13 === 9 ? null : String.fromCharCode(97 + (i % 26)).repeat(lengths[i % lengths.length]!)));

  test.each(WRITER_KINDS)('%s writer: a 12-byte value stays in its view and a 13-byte one goes to the data buffer, whichever of three variadic buffers it came from', async (writer) => {
    expect(values.some((v) => v?.length === 12) && values.some((v) => v?.length === 13)).toBe(true);
    await expectRoundTrip([batchOf([{ name: 'v', data: viewData(values, 3) }], pidsOf(values.length, 4, 20))], 4, writer);
  });

  test('a slice of a view column starting at bit 5: its null rows stay null and its long values come whole', async () => {
    const batch = batchOf([{ name: 'v', data: viewData(values, 2) }], pidsOf(values.length, 3, 0)).slice(5, 55);
    await expectRoundTrip([batch], 3);
  });

  test('a partition buffer grown on the way keeps the long values it already holds (data sized from an average)', async () => {
    // small values first, then values 30 times longer into the same partitions, in one batch
    const mixed = Array.from({ length: 80 }, (_, i) => (i < 40 ? `short value ${i % 10}` : `long value ${i} `.repeat(30)));
    await expectRoundTrip([batchOf([{ name: 'v', data: viewData(mixed, 2) }, { name: 's', data: binaryData(new Utf8(), mixed) }], pidsOf(80, 3, 0))], 3);
  });
});

describe('fixed-width values', () => {
  const types: DataType[] = [new Int32(), new Int64(), new Decimal(2, 38, 128), new Decimal(0, 76, 256), new FixedSizeBinary(3), new FixedSizeBinary(1)];
  test.each(types)('%s: rows of a slice starting at an odd row, gathered one by one and in a block of adjacent rows', async (type) => {
    const rng = new Rng(3);
    const n = 90;
    const batch = batchOf([{ name: 'x', data: buildColumn(type, n, { bitmap: true, nullRate: 0.2 }, rng) }], pidsOf(n, 4, 40)).slice(3, 85);
    await expectRoundTrip([batch, batchOf([{ name: 'x', data: buildColumn(type, 30, { bitmap: false, nullRate: 0 }, rng) }], pidsOf(30, 4, 0))], 4);
  });
});

describe.each(WRITER_KINDS)('%s writer, nested columns', (writer) => {
  const child = (type: DataType) => new Field('item', type, true);
  const nested: [string, () => DataType][] = [
    ['list<int64>', () => new List(child(new Int64()))],
    ['large list<utf8>', () => new LargeList(child(new Utf8()))],
    ['fixed-size list<int32>[3]', () => new FixedSizeList(3, child(new Int32()))],
    ['fixed-size list<utf8>[2]', () => new FixedSizeList(2, child(new Utf8()))],
    ['struct<int16, utf8>', () => new Struct([new Field('a', new Int16(), true), new Field('b', new Utf8(), true)])],
    ['dense union<int32, utf8, int64>', () => new DenseUnion([0, 3, 5], [child(new Int32()), new Field('s', new Utf8(), true), new Field('l', new Int64(), true)])],
    ['sparse union<int8, utf8>', () => new SparseUnion([1, 2], [child(new Int8()), new Field('s', new Utf8(), true)])],
    ['dictionary<utf8, int16>', () => new Dictionary(new Utf8(), new Int16())],
    ['list<dictionary<utf8, int32>>', () => new List(child(new Dictionary(new Utf8(), new Int32())))],
  ];
  test.each(nested)('%s: slices at odd rows, null rows spanning child rows, into partitions already holding rows, gathered and in blocks', async (_, make) => {
    const rng = new Rng(23);
    const type = make();
    const batches = [41, 120, 60].map((n, b) => {
      const data = buildAny(type, n, rng, { nullRate: 0.3 });
      const batch = batchOf([{ name: 'x', data }], pidsOf(n, 4, b === 1 ? 50 : 0));
      return b === 0 ? batch : batch.slice(b * 2 + 1, n - 2);
    });
    await expectRoundTrip(batches, 4, writer);
  });
});

describe.each(WRITER_KINDS)('%s writer, a null count without a bitmap', (writer) => {
  test('a column claiming nulls but carrying no bitmap is read as arrow-js reads it: every row valid', async () => {
    const n = 30;
    const int32 = makeData({ type: new Int32(), data: Int32Array.from({ length: n }, (_, i) => i * 3 - 40), length: n, nullCount: 4 });
    expect(int32.nullCount).toBe(4);
    expect(int32.getValid(5)).toBe(true);
    const utf8 = binaryData(new Utf8(), Array.from({ length: n }, (_, i) => `s${i}`));
    const utf8NoBitmap = makeData({ type: new Utf8(), data: utf8.values, valueOffsets: utf8.valueOffsets, length: n, nullCount: 2 });
    const outcome = await expectRoundTrip([batchOf([{ name: 'i', data: int32 }, { name: 's', data: utf8NoBitmap }], pidsOf(n, 3, 18))], 3, writer);
    expect(outcome.actual.flat().some((row) => row.includes('null'))).toBe(false);
  });
});

describe('validity of rows without nulls appended after rows with nulls', () => {
  test.each([1, 2, 7, 8, 9, 15, 17])('a batch without nulls appended after %i held rows, the last of them null, leaves that null row null', async (held) => {
    // batch 1: `held` rows to partition 0, the last one null (a validity bitmap appears); batch 2:
    // 30 rows without a bitmap to partition 0, marked valid from bit `held` on (head bits, whole bytes, tail bits)
    const first = makeData({ type: new Int32(), data: Int32Array.from({ length: held }, (_, i) => i + 1), length: held, nullCount: 1, nullBitmap: bitmapOf((i) => i !== held - 1, held) });
    const second = makeData({ type: new Int32(), data: Int32Array.from({ length: 30 }, (_, i) => 100 + i), length: 30, nullCount: 0 });
    for (const writer of WRITER_KINDS) {
      const outcome = await expectRoundTrip([batchOf([{ name: 'x', data: first }], new Array(held).fill(0)), batchOf([{ name: 'x', data: second }], new Array(30).fill(0))], 2, writer);
      expect(outcome.actual[0]!.filter((row) => row.endsWith('null')).length).toBe(1);
    }
  });
});

describe('splitView on a data buffer too small for the long values (a caller that did not size it)', () => {
  /** Row r of a view buffer's first `rows` rows, as a string (null for a null row). */
  function viewsOf(dst: ColumnBuffer, rows: number): (string | null)[] {
    const src = dst.asSource(rows);
    const view = new DataView(src.bytes.buffer, src.bytes.byteOffset, src.bytes.byteLength);
    const value: ViewValue = { bytes: src.bytes, start: 0, length: 0 };
    return Array.from({ length: rows }, (_, r) => {
      const v = viewValueOf(src.bytes, view, src.variadic, r, value);
      if (v === null) throw new Error(`row ${r}'s view points outside the buffer`);
      return new TextDecoder().decode(v.bytes.subarray(v.start, v.start + v.length));
    });
  }

  test.each([
    ['the last value does not fit: the buffer grows for it', ['thirteen byte', 'thirteen-byte', 'a value of forty bytes, far past the rest']],
    ['a value in the middle does not fit: the values before it are kept through the growth', ['thirteen byte', 'thirteen-byte', 'a value of forty bytes, far past the rest', 'short', 'another long value']],
  ])('%s', (_, values) => {
    const src = prepareSourceColumn(viewData(values, 2), { kind: 'view' });
    const dst = new ColumnBuffer({ kind: 'view' });
    dst.resize(values.length, 0, 26); // room for the first two long values only
    splitView(src, Uint32Array.from(values.keys()), 0, values.length, dst, 0);
    expect(viewsOf(dst, values.length)).toEqual(values);
    expect(dst.dataLength).toBe(values.filter((v) => v.length > 12).reduce((n, v) => n + v.length, 0));
  });
});


describe.each(WRITER_KINDS)('%s writer, children that are slices of their own', (writer) => {
  test('a list, a fixed-size list and a struct whose child arrays start at their own offsets read their child rows from there', async () => {
    const rng = new Rng(31);
    const n = 40;
    const childOf = (type: DataType, length: number, offset: number) => buildColumn(type, length + offset + 5, { bitmap: true, nullRate: 0.3 }, rng).slice(offset, length);
    const listChild = childOf(new Utf8(), 100, 3);
    const ends = [0];
    for (let i = 0; i < n; i++) ends.push(Math.min(100, ends[i]! + (i % 4)));
    const list = makeData({ type: new List(new Field('item', new Utf8(), true)), length: n, nullCount: 0, valueOffsets: Int32Array.from(ends), child: listChild } as never) as Data;
    const fixed = makeData({ type: new FixedSizeList(2, new Field('item', new Int64(), true)), length: n, nullCount: 0, child: childOf(new Int64(), 2 * n, 5) } as never) as Data;
    const struct = makeData({ type: new Struct([new Field('a', new Bool(), true), new Field('b', new LargeUtf8(), true)]), length: n, nullCount: 0, children: [childOf(new Bool(), n, 7), childOf(new LargeUtf8(), n, 1)] } as never) as Data;
    await expectRoundTrip([batchOf([{ name: 'l', data: list }, { name: 'f', data: fixed }, { name: 's', data: struct }], pidsOf(n, 3, 17))], 3, writer);
  });
});
