/**
 * A second pass over how batches become IPC streams (src/format/table-to-ipc.ts,
 * src/format/disjoint-buffers.ts) and the checks at the top of a column's validation
 * (src/format/validate-column.ts): each test fails against a mutant the other tests let through.
 * Expected values are arrow-js's own reading of the input table (what the table holds), and
 * arrow-rs's reading (test/support/arrow-rs.ts) where the question is what another reader takes.
 */
import {
  Data,
  Dictionary,
  Field,
  Float64,
  Int32,
  Int8,
  List,
  MessageReader,
  Null,
  Struct,
  Table,
  Union,
  Utf8,
  Utf8View,
  Vector,
  makeData,
  tableFromIPC,
  vectorFromArray,
} from 'apache-arrow';
import { UnionMode } from 'apache-arrow/enum';
import { describe, expect, it } from 'vitest';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { columnInconsistency } from '../src/format/validate-column.js';
import { withDisjointBuffers } from '../src/format/disjoint-buffers.js';
import { throughArrowRs } from './support/arrow-rs.js';

/** Every column's values as arrow-js reads them (byte arrays as number arrays, rows as JSON). */
const rowsOf = (table: Table) => table.schema.fields.map((field) => [...table.getChild(field.name)!].map((v) => (v instanceof Uint8Array ? [...v] : v !== null && typeof v === 'object' && 'toJSON' in v ? (v as { toJSON(): unknown }).toJSON() : v)));

/** The null count of each field node of each record batch in `stream`, depth first. */
const nullCountsOf = (stream: Uint8Array): number[] => {
  const counts: number[] = [];
  const reader = new MessageReader(stream);
  for (let message = reader.readMessage(); message !== null; message = reader.readMessage()) {
    if (message.isRecordBatch()) counts.push(...message.header().nodes.map((node) => Number(node.nullCount)));
    reader.readMessageBody(message.bodyLength);
  }
  return counts;
};

/** `table` written by tableToIpcStream reads back, in arrow-js and through arrow-rs, to what it holds. */
function expectWrittenAsItIs(table: Table): void {
  const stream = tableToIpcStream(table);
  const expected = rowsOf(table);
  expect(rowsOf(tableFromIPC(stream))).toEqual(expected);
  expect(rowsOf(tableFromIPC(throughArrowRs(stream)))).toEqual(expected);
}

describe('buffers that overlap in memory are written whole, whichever kind of buffer they are', () => {
  // arrow-js's writer joins a buffer into the one before it in the body when both view one ArrayBuffer and
  // their ranges touch or overlap: each case puts two overlapping buffers side by side in the body
  it("a Utf8 column's offsets lying over the values of the Int32 column before it", () => {
    // (buffers a multiple of 8 bytes long: the writer pads the others with a fresh array, which keeps them apart)
    const offsets = Int32Array.of(0, 2, 5, 5, 6);
    const ints = makeData({ type: new Int32(), length: 4, nullCount: 0, data: offsets.subarray(0, 4) }); // (another view of the same bytes)
    const strings = makeData({ type: new Utf8(), length: 4, nullCount: 0, valueOffsets: offsets, data: new TextEncoder().encode('abcdef') });
    expectWrittenAsItIs(new Table({ i: new Vector([ints]), s: new Vector([strings]) }));
  });

  it("a sparse union's type ids lying over the values of the Int8 column before it", () => {
    const typeIds = Int8Array.of(0, 1, 1, 0, 0, 1, 0, 1);
    const type = new Union(UnionMode.Sparse, [0, 1], [new Field('i', new Int32(), true), new Field('f', new Float64(), true)]);
    const union = makeData({
      type,
      length: 8,
      nullCount: 0,
      typeIds,
      children: [makeData({ type: new Int32(), length: 8, nullCount: 0, data: Int32Array.of(1, 2, 3, 4, 5, 6, 7, 8) }), makeData({ type: new Float64(), length: 8, nullCount: 0, data: Float64Array.of(0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5) })],
    });
    const ints = makeData({ type: new Int8(), length: 8, nullCount: 0, data: new Int8Array(typeIds.buffer, 0, 8) }); // (another view of the same bytes)
    expectWrittenAsItIs(new Table({ i: new Vector([ints]), u: new Vector([union]) }));
  });

  it("a Utf8View column's variadic buffer lying over its own views", () => {
    // one ArrayBuffer of 32 bytes: the views of 2 rows; the variadic buffer its first 16 bytes, row 0's view,
    // which row 1 (16 bytes long) reads as its value: the writers' own layout but for where the bytes are
    const bytes = new ArrayBuffer(32);
    const views = new Uint8Array(bytes);
    const at = new DataView(bytes);
    at.setInt32(0, 3, true); // row 0: "abc" inline
    views.set([97, 98, 99], 4);
    at.setInt32(16, 16, true); // row 1: 16 bytes at offset 0 of buffer 0
    views.set(views.subarray(0, 4), 20); // its prefix
    const column = makeData({ type: new Utf8View(), length: 2, nullCount: 0, views, variadicBuffers: [new Uint8Array(bytes, 0, 16)] });
    expectWrittenAsItIs(new Table({ s: new Vector([column]) }));
  });

  it('a sliced nullable column keeps its bit offset when a table is rebuilt for overlapping buffers elsewhere', () => {
    const shared = vectorFromArray([1.5, 2.5, 3.5, 4.5, 5.5, 6.5], new Float64());
    const nullable = vectorFromArray([1, null, null, 2, 3, 4, null, 5, 6, 7], new Int32()).slice(3, 9);
    expectWrittenAsItIs(new Table({ a: shared, b: shared, c: nullable }));
  });

  it('columns made without a validity bitmap keep their null count of 0 when a table is rebuilt for overlapping buffers elsewhere', () => {
    const shared = vectorFromArray([1.5, 2.5, 3.5], new Float64());
    const ints = new Data(new Int32(), 0, 3, 0, { [1]: Int32Array.of(7, 8, 9) });
    const struct = new Data(new Struct([new Field('i', new Int32(), true)]), 0, 3, 0, {}, [ints]);
    const table = new Table({ a: shared, b: shared, t: new Vector([struct]) });
    expect(nullCountsOf(tableToIpcStream(table))).toEqual([0, 0, 0, 0]);
    expectWrittenAsItIs(table);
  });

  it('two dictionary columns sharing one array of indices', () => {
    const dictionary = vectorFromArray(['x', 'y', 'z'], new Utf8());
    const column = makeData({ type: new Dictionary(new Utf8(), new Int32()), length: 4, nullCount: 0, data: Int32Array.of(2, 0, 1, 2), dictionary });
    expectWrittenAsItIs(new Table({ a: new Vector([column]), b: new Vector([column]) }));
  });

  it('a dictionary whose values have a validity bitmap overlapping their own values', () => {
    // one ArrayBuffer: the values at [0, 32) as 4 Float64s, the bitmap a view of its first 8 bytes
    const bytes = new ArrayBuffer(32);
    const floats = new Float64Array(bytes);
    floats.set([1, 2, 3, 4]);
    const bitmap = new Uint8Array(bytes, 0, 8);
    bitmap[0] = 0b1011;
    const values = makeData({ type: new Float64(), length: 4, nullCount: 1, nullBitmap: bitmap, data: floats });
    const column = makeData({ type: new Dictionary(new Float64(), new Int32()), length: 5, nullCount: 0, data: Int32Array.of(3, 2, 1, 0, 3), dictionary: new Vector([values]) });
    expectWrittenAsItIs(new Table({ d: new Vector([column]) }));
  });

  it('a column lying inside another while a third, further on, overlaps only the first', () => {
    // one ArrayBuffer of 32 bytes: a = 4 Float64s over all of it, b = 4 Int8s over its first 4 bytes, c = 4 Int8s at bytes 16-19
    const bytes = new ArrayBuffer(32);
    new Float64Array(bytes).set([1.25, 2.25, 3.25, 4.25]);
    const a = makeData({ type: new Float64(), length: 4, nullCount: 0, data: new Float64Array(bytes) });
    const b = makeData({ type: new Int8(), length: 4, nullCount: 0, data: new Int8Array(bytes, 0, 4) });
    const c = makeData({ type: new Int8(), length: 4, nullCount: 0, data: new Int8Array(bytes, 16, 4) });
    // (in the body c comes right after a, which the writer would join it into)
    expectWrittenAsItIs(new Table({ a: new Vector([a]), c: new Vector([c]), b: new Vector([b]) }));
  });

  it('two columns overlapping away from the start of their ArrayBuffer', () => {
    // bytes 16-23 and 20-27 of one ArrayBuffer, as two Int32 columns of 2 rows
    const bytes = new ArrayBuffer(32);
    new Int32Array(bytes).set([0, 0, 0, 0, 7, 8, 9, 0]);
    const a = makeData({ type: new Int32(), length: 2, nullCount: 0, data: new Int32Array(bytes, 16, 2) });
    const b = makeData({ type: new Int32(), length: 2, nullCount: 0, data: new Int32Array(bytes, 20, 2) });
    expectWrittenAsItIs(new Table({ a: new Vector([a]), b: new Vector([b]) }));
  });
});

describe('buffers of one ArrayBuffer that do not overlap are left where they are (withDisjointBuffers)', () => {
  // as in every batch our reader makes of an uncompressed stream: each buffer a view into one copy of the body
  const structOf = (...columns: Data[]) =>
    makeData({ type: new Struct(columns.map((column, i) => new Field(`c${i}`, column.type, true))), length: columns[0]!.length, nullCount: 0, children: columns });

  it('columns side by side in one ArrayBuffer, in either order, touching or apart, give back the batch itself', () => {
    const bytes = new ArrayBuffer(48);
    const at = (offset: number) => makeData({ type: new Int32(), length: 4, nullCount: 0, data: new Int32Array(bytes, offset, 4) });
    for (const columns of [[at(0), at(16)], [at(16), at(0)], [at(32), at(0), at(16)], [at(0), at(32)]]) {
      const struct = structOf(...columns);
      expect(withDisjointBuffers(struct)).toBe(struct);
    }
  });

  it('an empty validity bitmap lying inside the values it goes with is no overlap', () => {
    const bytes = new ArrayBuffer(16);
    const column = makeData({ type: new Int32(), length: 4, nullCount: 0, nullBitmap: new Uint8Array(bytes, 8, 0), data: new Int32Array(bytes) });
    const struct = structOf(column);
    expect(withDisjointBuffers(struct)).toBe(struct);
  });
});

describe('Null columns are written with their length as their null count, however they were made', () => {
  const listOf = (values: Data<Null>) => makeData({ type: new List(new Field('item', new Null(), true)), length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, 2, 2, 6), child: values });

  it.each([
    ['claiming no nulls, without a bitmap', () => new Data(new Null(), 0, 6, 0)],
    ['claiming no nulls, with a bitmap of ones', () => new Data(new Null(), 0, 6, 0, { [2]: Uint8Array.of(0xff) })],
    ['with an empty bitmap', () => new Data(new Null(), 0, 6, 6, { [2]: new Uint8Array(0) })],
    // (found by this sweep: a bitmap with bits set and the right count was kept, and arrow-js's slice of it counted 0 nulls)
    ['claiming 6 nulls, with a bitmap of ones', () => new Data(new Null(), 0, 6, 6, { [2]: Uint8Array.of(0xff) })],
  ] as const)('a Null column of 6 rows %s, on its own and as the values of a list (which the writer slices)', (_, make) => {
    const alone = tableToIpcStream(new Table({ n: new Vector([make()]) }));
    expect(nullCountsOf(alone)).toEqual([6]);
    expect(tableFromIPC(throughArrowRs(alone)).numRows).toBe(6);
    const inList = tableToIpcStream(new Table({ l: new Vector([listOf(make() as Data<Null>)]) }));
    expect(nullCountsOf(inList)).toEqual([0, 6]); // the list, then its child (cut by the writer to its values, all 6)
    expect(tableFromIPC(throughArrowRs(inList)).getChild('l')!.toArray().map((list: { length: number }) => list.length)).toEqual([2, 0, 4]);
  });
});

describe('how many variadic buffers a written view column has', () => {
  const variadicCountOf = (stream: Uint8Array) => tableFromIPC(stream).getChild('s')!.data.map((data) => data.variadicBuffers.length);

  it('a slice whose values are all short (12 bytes or fewer) is written with no variadic buffer', () => {
    const views = vectorFromArray(['short', 'a value longer than twelve bytes', 'twelve bytes', 'x'], new Utf8View());
    const table = new Table({ s: views.slice(2, 4) });
    const stream = tableToIpcStream(table);
    expect(variadicCountOf(stream)).toEqual([0]);
    expect(rowsOf(tableFromIPC(stream))).toEqual([['twelve bytes', 'x']]);
  });

  it('a column whose long values lie in two variadic buffers, every byte used, is written with them in one', () => {
    // row 0: 13 bytes at 0 of buffer 0; row 1: 14 bytes at 0 of buffer 1
    const first = new TextEncoder().encode('thirteen byte');
    const second = new TextEncoder().encode('fourteen bytes');
    const views = new Uint8Array(32);
    const at = new DataView(views.buffer);
    at.setInt32(0, 13, true);
    views.set(first.subarray(0, 4), 4);
    at.setInt32(16, 14, true);
    views.set(second.subarray(0, 4), 20);
    at.setInt32(24, 1, true);
    const column = makeData({ type: new Utf8View(), length: 2, nullCount: 0, views, variadicBuffers: [first, second] });
    const stream = tableToIpcStream(new Table({ s: new Vector([column]) }));
    expect(variadicCountOf(stream)).toEqual([1]);
    expect(rowsOf(tableFromIPC(stream))).toEqual([['thirteen byte', 'fourteen bytes']]);
  });
});

describe('a struct rebuilt for a view child keeps its null count', () => {
  it('a struct made without a validity bitmap, over a sliced Utf8View column, is written with a null count of 0', () => {
    const strings = vectorFromArray(['short', 'a value longer than twelve bytes', 'x', 'another value over twelve bytes'], new Utf8View()).data[0]!.slice(1, 2); // (Data.slice takes an offset and a length)
    const type = new Struct([new Field('s', new Utf8View(), true)]);
    const struct = new Data(type, 0, 2, 0, {}, [strings]);
    const table = new Table({ t: new Vector([struct]) });
    expect(nullCountsOf(tableToIpcStream(table))).toEqual([0, 0]);
    expectWrittenAsItIs(table);
  });
});

describe('view columns inside unions', () => {
  it('a sliced sparse union with a Utf8View child is written (only a sliced dense one is refused), reading back as it was', () => {
    const type = new Union(UnionMode.Sparse, [0, 1], [new Field('s', new Utf8View(), true), new Field('f', new Float64(), true)]);
    const strings = vectorFromArray(['a value longer than twelve bytes', 'x', 'another value over twelve bytes', 'y'], new Utf8View()).data[0]!;
    const union = makeData({ type, length: 4, nullCount: 0, typeIds: Int8Array.of(0, 1, 0, 0), children: [strings, makeData({ type: new Float64(), length: 4, nullCount: 0, data: Float64Array.of(1, 2, 3, 4) })] });
    const table = new Table({ u: new Vector([union]).slice(1, 4) });
    expect(rowsOf(table)).toEqual([[2, 'another value over twelve bytes', 'y']]);
    expectWrittenAsItIs(table);
  });
});

describe("a column's null count and length, checked before anything else (columnInconsistency)", () => {
  /** An Int32 column of `length` rows claiming `nullCount` nulls, with `bitmap` as its validity. */
  const ints = (length: number, nullCount: number, bitmap: Uint8Array) => new Data(new Int32(), 0, length, nullCount, { [1]: new Int32Array(length), [2]: bitmap });

  it('a Null column of 2^31 - 1 rows is an array Arrow holds, and one of 2^31 rows is not', () => {
    expect(columnInconsistency(makeData({ type: new Null(), length: 2 ** 31 - 1 }))).toBeNull();
    expect(columnInconsistency(makeData({ type: new Null(), length: 2 ** 31 }))).toMatch(/its 2147483648 rows are more than an Arrow array holds \(2\^31 - 1\)/);
  });

  it('one null without a validity bitmap is refused', () => {
    expect(columnInconsistency(ints(4, 1, new Uint8Array(0)))).toMatch(/its null count is 1 but it has no validity bitmap/);
  });
});
