/**
 * More claims about the sort writer's compact row codec (src/sort-writer/row-*.ts,
 * nested-*.ts), from a second mutation sweep over it (docs/RELIABILITY.md): the
 * partition header's checks and where their errors point, the canonical bytes of
 * slots (null slots are zeros, slots have their type's width), dictionary indices
 * at the edges of their index types, damaged nested values that must be refused
 * as CS_CORRUPT_DATA (never a RangeError, a TypeError or wrong rows), and the
 * decode budget. row-codec-contract.test.ts holds the first sweep's claims.
 */
import { describe, expect, test } from 'vitest';
import {
  Bool,
  DenseUnion,
  Dictionary,
  Field,
  FixedSizeList,
  Int16,
  Int32,
  Int64,
  Int8,
  List,
  makeData,
  Null,
  Schema,
  SparseUnion,
  Struct,
  Uint16,
  Uint8,
  Utf8,
  Utf8View,
  Vector,
  type Data,
  type DataType,
  type RecordBatch,
} from 'apache-arrow';
import { ShuffleError } from '../src/errors.js';
import { RowDecoder } from '../src/sort-writer/row-decoder.js';
import { encodeRowPartitionHeader, parseRowPartitionHeader } from '../src/sort-writer/row-format.js';
import { rowLayoutOf } from '../src/sort-writer/row-layout.js';
import { batchOf, utf8Column } from './support/columns.js';
import { encodeRows } from './support/row-encoding.js';
import { rowsOf } from './support/rows.js';

const corruptError = (what: string) => new ShuffleError('CS_CORRUPT_DATA', what);

function decodeAll(schema: Schema, bytes: Uint8Array, rows: number, maxBufferBytes?: number): RecordBatch[] {
  return new RowDecoder(schema, rowLayoutOf(schema.fields)).decode(bytes, rows, corruptError, maxBufferBytes);
}

function roundTrip(batch: RecordBatch): RecordBatch[] {
  return decodeAll(batch.schema, encodeRows(batch), batch.numRows);
}

function expectRoundTrip(batch: RecordBatch): void {
  expect(roundTrip(batch).flatMap((b) => rowsOf(b))).toEqual(rowsOf(batch));
}

function errorOf(run: () => unknown): unknown {
  try {
    run();
  } catch (e) {
    return e;
  }
  return undefined;
}

function expectCode(run: () => unknown, code: string, message?: RegExp): ShuffleError {
  const error = errorOf(run);
  expect(error, 'no ShuffleError was thrown').toBeInstanceOf(ShuffleError);
  expect((error as ShuffleError).code).toBe(code);
  if (message !== undefined) expect((error as ShuffleError).message).toMatch(message);
  return error as ShuffleError;
}

const int8s = (values: readonly (number | null)[]): Data => {
  const bitmap = new Uint8Array((values.length + 7) >>> 3);
  values.forEach((v, i) => {
    if (v !== null) bitmap[i >>> 3]! |= 1 << (i & 7);
  });
  const nulls = values.filter((v) => v === null).length;
  return makeData({ type: new Int8(), length: values.length, nullCount: nulls, nullBitmap: nulls > 0 ? bitmap : null, data: Int8Array.from(values, (v) => v ?? 0) } as never);
};

const schemaOf = (...fields: [string, DataType][]) => new Schema(fields.map(([name, type]) => new Field(name, type, true)));

describe('the partition header: every check, and where its error points', () => {
  const schema = schemaOf(['x', new Int32()]);
  const header = encodeRowPartitionHeader(schema, 'none');
  const at100 = { offset: 100 };

  test('a partition of 12 bytes (magic, version, codec, reserved, 4 more) ends inside its header', () => {
    expectCode(() => parseRowPartitionHeader(header.slice(0, 12), at100), 'CS_CORRUPT_DATA', /ends inside its header/);
  });

  test('row format versions 0 and 2 are refused, located at byte 4', () => {
    for (const version of [0, 2]) {
      const edited = header.slice();
      edited[4] = version;
      const error = expectCode(() => parseRowPartitionHeader(edited, at100), 'CS_CORRUPT_DATA', new RegExp(`unknown row format version ${version}`));
      expect(error.where.offset).toBe(104);
    }
  });

  test('codec id 3 is CS_UNSUPPORTED_CODEC located at byte 5', () => {
    const edited = header.slice();
    edited[5] = 3;
    const error = expectCode(() => parseRowPartitionHeader(edited, at100), 'CS_UNSUPPORTED_CODEC', /codec id 3/);
    expect(error.where.offset).toBe(105);
  });

  test('the header names its codec: none 0, lz4 1, zstd 2', () => {
    expect(encodeRowPartitionHeader(schema, 'none')[5]).toBe(0);
    expect(encodeRowPartitionHeader(schema, 'lz4')[5]).toBe(1);
    expect(encodeRowPartitionHeader(schema, 'zstd')[5]).toBe(2);
  });

  test('a schema message without its FF FF FF FF marker, of metadata size 0, or running past the partition is refused as such, at byte 8', () => {
    const noMarker = header.slice();
    noMarker[8] = 0;
    const zeroSize = header.slice();
    new DataView(zeroSize.buffer).setInt32(12, 0, true);
    const truncated = header.slice(0, header.length - 4);
    for (const bytes of [noMarker, zeroSize, truncated]) {
      const error = expectCode(() => parseRowPartitionHeader(bytes, at100), 'CS_CORRUPT_DATA', /schema message is missing or runs past the end of the partition/);
      expect(error.where.offset).toBe(108);
    }
  });

  test('a schema with two columns of the same name is refused (the writer never writes one)', () => {
    const twice = encodeRowPartitionHeader(new Schema([new Field('x', new Int32(), true), new Field('x', new Utf8(), true)]), 'none');
    expectCode(() => parseRowPartitionHeader(twice, at100), 'CS_CORRUPT_DATA', /several columns of the same name/);
  });
});

describe('slots have their type\'s width, and a null slot is zeros', () => {
  test('slots: Null 0 bytes, Bool 1, Int8 1, Int16 2, Int32 4, Int64 8, a string, a list or a dictionary of strings a 4-byte length, a dictionary of Int16 or Bool its value\'s', () => {
    const types: [string, DataType][] = [
      ['n', new Null()],
      ['b', new Bool()],
      ['i8', new Int8()],
      ['i16', new Int16()],
      ['i32', new Int32()],
      ['i64', new Int64()],
      ['s', new Utf8()],
      ['l', new List(new Field('item', new Int8(), true))],
      ['ds', new Dictionary(new Utf8(), new Int8())],
      ['dh', new Dictionary(new Int16(), new Int32())],
      ['db', new Dictionary(new Bool(), new Int32())],
      ['last', new Int8()],
    ];
    const layout = rowLayoutOf(schemaOf(...types).fields);
    // 12 fields: a 2-byte bitmap after the 4-byte length, so the first slot is at 6
    expect(layout.bitmapBytes).toBe(2);
    expect(layout.fields.map((f) => f.slot)).toEqual([6, 6, 7, 8, 10, 14, 22, 26, 30, 34, 36, 37]);
    expect(layout.headerBytes).toBe(38);
    expect(layout.variableFields).toEqual([6, 7, 8]);
    expect(layout.fields.map((f) => (f.kind === 'tree' ? f.lengthSlot : null))).toEqual([null, null, null, null, null, null, null, true, true, false, false, null]);
  });

  test('a schema of no fields has no bitmap: a row is its 4-byte length alone', () => {
    const layout = rowLayoutOf([]);
    expect(layout.bitmapBytes).toBe(0);
    expect(layout.headerBytes).toBe(4);
  });

  test('a Null and an Int8 field make a 6-byte row: length 2, the bitmap, the Int8 (the Null has no slot)', () => {
    const schema = schemaOf(['n', new Null()], ['x', new Int8()]);
    const batch = batchOf(schema, [makeData({ type: new Null(), length: 1 }), int8s([5])], 1);
    expect(Array.from(encodeRows(batch, (n) => new Uint8Array(n).fill(0xee)))).toEqual([2, 0, 0, 0, 0b01, 5, 0, 0]);
    expectRoundTrip(batch);
  });

  test('a row of nulls in a dirty page: a Bool that held true, an Int64 dictionary value, an Int8 and an Int16 are all zeros, and so is the padding of a 17-byte row', () => {
    const dict = new Dictionary(new Int64(), new Int32());
    const schema = schemaOf(['b', new Bool()], ['d', dict], ['x', new Int8()], ['y', new Int16()]);
    // b's value bit is set although the row is null; d's index points at a real value
    const b = makeData({ type: new Bool(), length: 1, nullCount: 1, nullBitmap: Uint8Array.of(0), data: Uint8Array.of(1) });
    const values = makeData({ type: new Int64(), length: 1, data: BigInt64Array.of(-1n) });
    const d = makeData({ type: dict, length: 1, nullCount: 1, nullBitmap: Uint8Array.of(0), data: Int32Array.of(0), dictionary: new Vector([values]) } as never) as Data;
    const x = makeData({ type: new Int8(), length: 1, nullCount: 1, nullBitmap: Uint8Array.of(0), data: Int8Array.of(-1) });
    const y = makeData({ type: new Int16(), length: 1, nullCount: 1, nullBitmap: Uint8Array.of(0), data: Int16Array.of(-1) });
    const batch = batchOf(schema, [b, d, x, y], 1);
    const bytes = encodeRows(batch, (n) => new Uint8Array(n).fill(0xee));
    // length 13 = bitmap 1 + b 1 + d 8 + x 1 + y 2; 17 bytes padded to 20
    expect(Array.from(bytes)).toEqual([13, 0, 0, 0, 0b1111, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expectRoundTrip(batch);
  });
});

describe('dictionary indices at the edges of their index types', () => {
  const words = (n: number) => new Vector([utf8Column(Array.from({ length: n }, (_, i) => `w${i}`))]);
  const dictColumn = (type: Dictionary, data: ArrayLike<number | bigint>, n: number) =>
    makeData({ type, length: data.length, data, dictionary: words(n) } as never) as Data;

  test('an Int8 index of -56 is refused even when the dictionary has 256 values (it is not read as 200)', () => {
    const type = new Dictionary(new Utf8(), new Int8());
    const batch = batchOf(schemaOf(['d', type]), [dictColumn(type, Int8Array.of(0, -56), 256)], 2);
    expectCode(() => encodeRows(batch), 'CS_INVALID_ARGUMENT', /dictionary index points outside its dictionary of 256 values/);
  });

  test('an Int32 index of -1 is refused', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const batch = batchOf(schemaOf(['d', type]), [dictColumn(type, Int32Array.of(1, -1), 3)], 2);
    expectCode(() => encodeRows(batch), 'CS_INVALID_ARGUMENT', /dictionary index points outside/);
  });

  test('an Int64 index of -2^32 + 3 (high word all ones) is refused, not read as its low word 3', () => {
    const type = new Dictionary(new Utf8(), new Int64() as unknown as Int32);
    const batch = batchOf(schemaOf(['d', type]), [dictColumn(type, BigInt64Array.of(3n - (1n << 32n)), 5)], 1);
    expectCode(() => encodeRows(batch), 'CS_INVALID_ARGUMENT', /dictionary index points outside/);
  });

  test('a Uint8 index of 200 and 255 and a Uint16 index of 40000 read their values (they are not negative)', () => {
    const u8 = new Dictionary(new Utf8(), new Uint8());
    const a = batchOf(schemaOf(['d', u8]), [dictColumn(u8, Uint8Array.of(200, 255, 3), 256)], 3);
    const [backA] = roundTrip(a);
    expect([...backA!.getChild('d')!]).toEqual(['w200', 'w255', 'w3']);
    const u16 = new Dictionary(new Utf8(), new Uint16());
    const b = batchOf(schemaOf(['d', u16]), [dictColumn(u16, Uint16Array.of(40000, 1), 40001)], 2);
    const [backB] = roundTrip(b);
    expect([...backB!.getChild('d')!]).toEqual(['w40000', 'w1']);
  });
});

/** The 4 bytes of `n`, u32 LE. */
const u32 = (n: number) => [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, n >>> 24];

/** A row holding `body` (bitmap, slots, variable section): its length, the body, zero padding to a multiple of 4. */
function rowOf(body: readonly number[]): number[] {
  const bytes = [...u32(body.length), ...body];
  while (bytes.length % 4 !== 0) bytes.push(0);
  return bytes;
}

function expectCorrupt(schema: Schema, bytes: readonly number[], rows: number, message: RegExp): void {
  const error = errorOf(() => decodeAll(schema, Uint8Array.from(bytes), rows));
  expect(error, 'no ShuffleError was thrown').toBeInstanceOf(ShuffleError);
  expect((error as ShuffleError).code).toBe('CS_CORRUPT_DATA');
  expect((error as ShuffleError).message).toMatch(message);
}

describe('damaged flat rows are CS_CORRUPT_DATA naming what is wrong', () => {
  const int32 = schemaOf(['x', new Int32()]);
  const utf8 = schemaOf(['s', new Utf8()]);

  test('a block that ends 2 bytes into its second row (14 bytes): the row starts past the end, not a RangeError', () => {
    expectCorrupt(int32, [...rowOf([0, 1, 2, 3, 4]), 9, 0], 2, /row 1 of 2 starts past the end of the block's 14 bytes/);
  });

  test('a row one byte shorter than its bitmap and slots is refused for its length', () => {
    expectCorrupt(int32, rowOf([0, 1, 2, 3]), 1, /row 0 claims 4 bytes: a row has at least 5/);
  });

  test('a null string that claims a single byte is refused', () => {
    expectCorrupt(utf8, rowOf([1, ...u32(1), 0x61]), 1, /null field 0 claims 1 bytes/);
  });

});

describe('damaged nested values are CS_CORRUPT_DATA naming what is wrong, never a RangeError, a TypeError or rows', () => {
  const listOf = (type: DataType) => schemaOf(['l', new List(new Field('item', type, true))]);

  test('a list value of 2 bytes at the very end of a block has no room for its element count', () => {
    expectCorrupt(listOf(new Int8()), rowOf([0, ...u32(2), 1, 0]), 1, /a list value of 2 bytes has no room for its element count/);
  });

  test('a list of Int32 claiming 3 elements in room for 2 is refused before anything is read', () => {
    // value: count 3, bitmap, two 4-byte slots (13 bytes would be needed after the count, 9 are there)
    expectCorrupt(listOf(new Int32()), rowOf([0, ...u32(13), ...u32(3), 0, 1, 0, 0, 0, 2, 0, 0, 0]), 1, /3 elements need 13 bytes of bitmap and slots, the value has 9/);
  });

  test('a string inside a struct that claims one byte more than its struct has is refused as such', () => {
    const schema = schemaOf(['s', new Struct([new Field('t', new Utf8(), true)])]);
    // struct value: bitmap, t's slot says 3, 2 bytes "ab" follow; the row has a padding byte after them
    expectCorrupt(schema, rowOf([0, ...u32(7), 0, ...u32(3), 0x61, 0x62]), 1, /a string value claims 3 bytes, 2 are left/);
  });

  test('a struct value of 0 bytes at the very end of a block is shorter than its bitmap and slots', () => {
    const schema = schemaOf(['s', new Struct([new Field('t', new Utf8(), true)])]);
    expectCorrupt(schema, rowOf([0, ...u32(0)]), 1, /a struct value of 0 bytes is shorter than its 5 bytes of bitmap and slots/);
  });

  test('a struct of one Int8 with one byte no field accounts for is refused', () => {
    const schema = schemaOf(['s', new Struct([new Field('x', new Int8(), true)])]);
    expectCorrupt(schema, rowOf([0, ...u32(3), 0, 5, 9]), 1, /1 bytes of a struct value no field accounts for/);
  });

  test('a union of one Int8 with one byte no field accounts for is refused', () => {
    const schema = schemaOf(['u', new DenseUnion([0], [new Field('x', new Int8(), true)])]);
    expectCorrupt(schema, rowOf([0, ...u32(4), 0, 0, 5, 9]), 1, /1 bytes of a union value no field accounts for/);
  });

  test('a union value of 1 byte has no room for its type id and null flag', () => {
    const schema = schemaOf(['u', new DenseUnion([0], [new Field('x', new Int8(), true)])]);
    expectCorrupt(schema, rowOf([0, ...u32(1), 0]), 1, /a union value of 1 bytes has no room for its type id and null flag/);
  });

  test('union type ids 3 (not the type\'s) and 130 (not 2) are refused', () => {
    for (const union of [new DenseUnion([0, 2], [new Field('x', new Int8(), true), new Field('y', new Int8(), true)]), new SparseUnion([0, 2], [new Field('x', new Int8(), true), new Field('y', new Int8(), true)])]) {
      const schema = schemaOf(['u', union]);
      for (const id of [3, 130]) expectCorrupt(schema, rowOf([0, ...u32(3), id, 0, 5]), 1, new RegExp(`union type id ${id} is not one of the type's`));
    }
  });

  test('a union null flag of 255 is refused', () => {
    const schema = schemaOf(['u', new DenseUnion([0], [new Field('x', new Int8(), true)])]);
    expectCorrupt(schema, rowOf([0, ...u32(3), 0, 255, 5]), 1, /a union value's null flag is 255/);
  });

  test('a union element of a list marked null is refused (unions have no nulls of their own)', () => {
    const schema = listOf(new DenseUnion([0], [new Field('x', new Int32(), true)]));
    // list value: count 1, bitmap with element 0 null, its 4-byte slot zeros
    expectCorrupt(schema, rowOf([0, ...u32(9), ...u32(1), 1, 0, 0, 0, 0]), 1, /a union value is marked null/);
  });
});

describe('nested values: bitmaps, slots and counts at their edges', () => {
  test('list and struct fields at positions 4 to 11 keep their own null bits (bitmap byte f >> 3, bit f & 7)', () => {
    const listType = new List(new Field('item', new Int8(), true));
    const structType = new Struct([new Field('x', new Int8(), true)]);
    const fields: [string, DataType][] = Array.from({ length: 12 }, (_, f) => [`c${f}`, f < 4 ? new Int8() : f % 2 === 0 ? listType : structType]);
    const schema = schemaOf(...fields);
    const rows = 12;
    // field f is null in row f only
    const columns = fields.map(([, type], f): Data => {
      const bitmap = Uint8Array.of(0xff, 0x0f);
      bitmap[f >>> 3]! &= ~(1 << (f & 7));
      if (type === listType) {
        return makeData({ type, length: rows, nullCount: 1, nullBitmap: bitmap, valueOffsets: Int32Array.from({ length: rows + 1 }, (_, i) => i), child: int8s(Array.from({ length: rows }, (_, i) => i + f)) } as never) as Data;
      }
      if (type === structType) return makeData({ type, length: rows, nullCount: 1, nullBitmap: bitmap, children: [int8s(Array.from({ length: rows }, (_, i) => i - f))] } as never) as Data;
      return int8s(Array.from({ length: rows }, (_, i) => (i === f ? null : i)));
    });
    const batch = batchOf(schema, columns, rows);
    expectRoundTrip(batch);
    const [back] = roundTrip(batch);
    for (let f = 0; f < 12; f++) expect(back!.getChildAt(f)!.get(f), `field ${f}, row ${f}`).toBeNull();
  });

  test('in a dirty page, a struct of 9 Int8 and Bool fields, all null, is a 2-byte bitmap of ones and 9 zero slots', () => {
    const children = Array.from({ length: 9 }, (_, c) => new Field(`f${c}`, c % 2 === 0 ? new Int8() : new Bool(), true));
    const type = new Struct(children);
    const schema = schemaOf(['s', type]);
    const data = children.map((f) =>
      f.type instanceof Bool
        ? makeData({ type: new Bool(), length: 1, nullCount: 1, nullBitmap: Uint8Array.of(0), data: Uint8Array.of(1) })
        : makeData({ type: new Int8(), length: 1, nullCount: 1, nullBitmap: Uint8Array.of(0), data: Int8Array.of(-1) }),
    );
    const batch = batchOf(schema, [makeData({ type, length: 1, nullCount: 0, children: data })], 1);
    const bytes = encodeRows(batch, (n) => new Uint8Array(n).fill(0xee));
    // length 16: bitmap, slot 11, the value: bitmap 0xff 0x01, nine zero slots
    expect(Array.from(bytes)).toEqual(rowOf([0, ...u32(11), 0xff, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
    expectRoundTrip(batch);
  });

  test('in a dirty page, a list of 9 Int8 elements, all null, is its count, a 2-byte bitmap of ones and 9 zero slots; a list of 3 null Bools likewise', () => {
    for (const [type, n, value] of [[new Int8(), 9, -1], [new Bool(), 3, 0xff]] as const) {
      const listType = new List(new Field('item', type, true));
      const schema = schemaOf(['l', listType]);
      const child = type instanceof Bool
        ? makeData({ type, length: n, nullCount: n, nullBitmap: Uint8Array.of(0, 0), data: Uint8Array.of(value, value) })
        : makeData({ type, length: n, nullCount: n, nullBitmap: Uint8Array.of(0, 0), data: new Int8Array(n).fill(value) });
      const l = makeData({ type: listType, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, n), child } as never) as Data;
      const batch = batchOf(schema, [l], 1);
      const bytes = encodeRows(batch, (size) => new Uint8Array(size).fill(0xee));
      const bitmap = n === 9 ? [0xff, 0x01] : [0b111];
      const value_ = [...u32(n), ...bitmap, ...new Array<number>(n).fill(0)];
      expect(Array.from(bytes), `${type}`).toEqual(rowOf([0, ...u32(value_.length), ...value_]));
      expectRoundTrip(batch);
    }
  });

  test('a struct of 10 Int8 fields where only field 9 is null in row 0 and only field 1 in row 1 reads each null back where it was', () => {
    const children = Array.from({ length: 10 }, (_, c) => new Field(`f${c}`, new Int8(), true));
    const type = new Struct(children);
    const data = children.map((_, c) => int8s([c === 9 ? null : c, c === 1 ? null : 10 + c]));
    const batch = batchOf(schemaOf(['s', type]), [makeData({ type, length: 2, nullCount: 0, children: data })], 2);
    expectRoundTrip(batch);
    const [back] = roundTrip(batch);
    expect(back!.getChild('s')!.get(0)!.toJSON()).toMatchObject({ f1: 1, f9: null });
    expect(back!.getChild('s')!.get(1)!.toJSON()).toMatchObject({ f1: null, f9: 19 });
  });

  test('in a dirty page, a list of 9 Int8 without a validity bitmap is its count, a 2-byte zero bitmap and the 9 values verbatim', () => {
    const listType = new List(new Field('item', new Int8(), true));
    const child = makeData({ type: new Int8(), length: 9, data: Int8Array.of(1, 2, 3, 4, 5, 6, 7, 8, -9) });
    const l = makeData({ type: listType, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, 9), child } as never) as Data;
    const batch = batchOf(schemaOf(['l', listType]), [l], 1);
    const bytes = encodeRows(batch, (size) => new Uint8Array(size).fill(0xee));
    expect(Array.from(bytes)).toEqual(rowOf([0, ...u32(15), ...u32(9), 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0xf7]));
    expectRoundTrip(batch);
  });

  test('a null fixed-size list of 10 Int8 has 10 null children, so the rows after it keep their values', () => {
    const type = new FixedSizeList(10, new Field('item', new Int8(), true));
    const schema = schemaOf(['f', type]);
    const child = int8s(Array.from({ length: 30 }, (_, i) => i));
    const f = makeData({ type, length: 3, nullCount: 1, nullBitmap: Uint8Array.of(0b101), child } as never) as Data;
    expectRoundTrip(batchOf(schema, [f], 3));
  });

  test('a Null column inside a struct comes back with every row counted null', () => {
    const type = new Struct([new Field('n', new Null(), true), new Field('x', new Int8(), true)]);
    const schema = schemaOf(['s', type]);
    const s = makeData({ type, length: 3, nullCount: 0, children: [makeData({ type: new Null(), length: 3 }), int8s([1, 2, 3])] });
    const [back] = roundTrip(batchOf(schema, [s], 3));
    const n = back!.data.children[0]!.children[0]!;
    expect(n.length).toBe(3);
    expect(n.nullCount).toBe(3);
  });

  test('a dense union whose Utf8 child has nulls at other rows than the union\'s measures and encodes each value at its offset', () => {
    const type = new DenseUnion([0, 1], [new Field('i', new Int8(), true), new Field('s', new Utf8(), true)]);
    const schema = schemaOf(['u', type]);
    // union rows 0..3 = s[2], i[0], s[0], s[1]; s[0] is null, s[1] and s[2] are not
    const u = makeData({ type, length: 4, typeIds: Int8Array.of(1, 0, 1, 1), valueOffsets: Int32Array.of(2, 0, 0, 1), children: [int8s([7]), utf8Column([null, 'bb', 'ccc'])] } as never) as Data;
    expectRoundTrip(batchOf(schema, [u], 4));
  });
});

describe('dictionaries decoded: indices and deduplication', () => {
  test('a null dictionary row gets index 0, inside even a one-value dictionary', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const d = makeData({ type, length: 3, nullCount: 1, nullBitmap: Uint8Array.of(0b101), data: Int32Array.of(0, 0, 0), dictionary: new Vector([utf8Column(['a'])]) } as never) as Data;
    const [back] = roundTrip(batchOf(schemaOf(['d', type]), [d], 3));
    const out = back!.data.children[0]!;
    expect(out.dictionary!.length).toBe(1);
    expect(Array.from(out.values as Int32Array)).toEqual([0, 0, 0]);
  });

  test('Int64 dictionary values 1 and 2^32 + 1 (the same low word) stay two values', () => {
    const type = new Dictionary(new Int64(), new Int32());
    const values = makeData({ type: new Int64(), length: 2, data: BigInt64Array.of(1n, (1n << 32n) + 1n) });
    const d = makeData({ type, length: 4, data: Int32Array.of(0, 1, 1, 0), dictionary: new Vector([values]) } as never) as Data;
    const batch = batchOf(schemaOf(['d', type]), [d], 4);
    const [back] = roundTrip(batch);
    expect([...back!.getChild('d')!]).toEqual([1n, (1n << 32n) + 1n, (1n << 32n) + 1n, 1n]);
    expect(back!.data.children[0]!.dictionary!.length).toBe(2);
  });

  test('a Uint16 dictionary of 33,000 distinct values in one batch keeps indices of 32,768 and up', () => {
    const type = new Dictionary(new Utf8(), new Uint16());
    const n = 33_000;
    const words = Array.from({ length: n }, (_, i) => `v${i}`);
    const d = makeData({ type, length: n, data: Uint16Array.from({ length: n }, (_, i) => i), dictionary: new Vector([utf8Column(words)]) } as never) as Data;
    const back = roundTrip(batchOf(schemaOf(['d', type]), [d], n));
    expect(back.length).toBe(1);
    expect([...back[0]!.getChild('d')!]).toEqual(words);
  });
});

describe('the decode budget (maxBufferBytes) counts every byte a block decodes to', () => {
  test('a one-row list of two Int32 decodes to 14 bytes (a validity byte each for list and items, 8 bytes of values, a 4-byte offset): 14 is enough, 13 is refused', () => {
    const type = new List(new Field('item', new Int32(), true));
    const schema = schemaOf(['l', type]);
    const l = makeData({ type, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, 2), child: makeData({ type: new Int32(), length: 2, data: Int32Array.of(7, 8) }) } as never) as Data;
    const bytes = encodeRows(batchOf(schema, [l], 1));
    expect(rowsOf(decodeAll(schema, bytes, 1, 14)[0]!)).toEqual(['[07000000,08000000]']);
    expect(() => decodeAll(schema, bytes, 1, 13)).toThrow(/buffer limit/);
  });
});

describe('decoded batches', () => {
  test('a decoded Int32 column of 3 rows has exactly 3 values (the body\'s padding is not part of it)', () => {
    const schema = schemaOf(['x', new Int32()], ['y', new Int8()]);
    const batch = batchOf(schema, [makeData({ type: new Int32(), length: 3, data: Int32Array.of(1, 2, 3) }), int8s([4, 5, 6])], 3);
    const [back] = roundTrip(batch);
    expect((back!.data.children[0]!.values as Int32Array).length).toBe(3);
    expect((back!.data.children[1]!.values as Int8Array).length).toBe(3);
  });

  test('a row whose list holds 129 distinct values of an Int8-indexed dictionary is refused (no batch can index them)', () => {
    // the bytes of a list of strings are those of a list of dictionary-encoded strings: values are stored decoded
    const strings = new List(new Field('item', new Utf8(), true));
    const words = Array.from({ length: 129 }, (_, i) => `w${i}`);
    const l = makeData({ type: strings, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, 129), child: utf8Column(words) } as never) as Data;
    const bytes = encodeRows(batchOf(schemaOf(['l', strings]), [l], 1));
    const dictionaries = schemaOf(['l', new List(new Field('item', new Dictionary(new Utf8(), new Int8()), true))]);
    expect(() => decodeAll(dictionaries, bytes, 1)).toThrow(/row 0 alone holds more distinct values of a dictionary than its index type can address/);
    // 128 of them fit
    const fits = makeData({ type: strings, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, 128), child: utf8Column(words) } as never) as Data;
    const [back] = decodeAll(dictionaries, encodeRows(batchOf(schemaOf(['l', strings]), [fits], 1)), 1);
    expect(back!.getChild('l')!.get(0)!.length).toBe(128);
  });
});

describe('nested sources: slices, long values, views', () => {
  test('sliced at 3: a dictionary, a struct, a fixed-size list of strings and a list of 10 Int64 without nulls come back exactly', () => {
    const rows = 16;
    const dict = new Dictionary(new Utf8(), new Int32());
    const struct = new Struct([new Field('x', new Int8(), true), new Field('t', new Utf8(), true)]);
    const fsl = new FixedSizeList(2, new Field('item', new Utf8(), true));
    const longs = new List(new Field('item', new Int64(), true));
    const schema = schemaOf(['d', dict], ['s', struct], ['f', fsl], ['l', longs]);
    const nullAt = (i: number, k: number) => (i * 7 + k) % 5 === 0;
    const bitmapOf = (n: number, k: number) => {
      const bitmap = new Uint8Array((n + 7) >>> 3);
      let nulls = 0;
      for (let i = 0; i < n; i++) {
        if (nullAt(i, k)) nulls++;
        else bitmap[i >>> 3]! |= 1 << (i & 7);
      }
      return { nullBitmap: bitmap, nullCount: nulls };
    };
    const text = (n: number, k: number) => utf8Column(Array.from({ length: n }, (_, i) => (nullAt(i, k + 1) ? null : `${k}:${'x'.repeat((i * 3) % 11)}`)));
    const d = makeData({ type: dict, length: rows, ...bitmapOf(rows, 0), data: Int32Array.from({ length: rows }, (_, i) => i % 3), dictionary: new Vector([utf8Column(['a', 'bb', 'ccc'])]) } as never) as Data;
    const st = makeData({ type: struct, length: rows, ...bitmapOf(rows, 1), children: [int8s(Array.from({ length: rows }, (_, i) => (nullAt(i, 2) ? null : i))), text(rows, 3)] });
    const f = makeData({ type: fsl, length: rows, ...bitmapOf(rows, 4), child: text(2 * rows, 5) } as never) as Data;
    const l = makeData({ type: longs, length: rows, nullCount: 0, valueOffsets: Int32Array.from({ length: rows + 1 }, (_, i) => 10 * i), child: makeData({ type: new Int64(), length: 10 * rows, data: BigInt64Array.from({ length: 10 * rows }, (_, e) => BigInt(e) * 0x100000001n) }) } as never) as Data;
    const batch = batchOf(schema, [d, st, f, l], rows);
    expectRoundTrip(batch);
    expectRoundTrip(batch.slice(3, 14));
  });

  test('a 40-byte string inside a struct and two long views inside a list keep every byte', () => {
    const struct = new Struct([new Field('t', new Utf8(), true)]);
    const views = new List(new Field('item', new Utf8View(), true));
    const schema = schemaOf(['s', struct], ['v', views]);
    const long = (k: number) => String.fromCharCode(97 + k).repeat(13 + 7 * k);
    const st = makeData({ type: struct, length: 1, nullCount: 0, children: [utf8Column(['0123456789'.repeat(4)])] });
    const viewValues = [long(0), 'short', long(1), long(2)];
    const child = (() => {
      const encoder = new TextEncoder();
      const n = viewValues.length;
      const viewsBytes = new Uint8Array(16 * n);
      const dv = new DataView(viewsBytes.buffer);
      const data: number[] = [];
      viewValues.forEach((v, i) => {
        const bytes = encoder.encode(v);
        dv.setInt32(16 * i, bytes.length, true);
        if (bytes.length <= 12) viewsBytes.set(bytes, 16 * i + 4);
        else {
          viewsBytes.set(bytes.subarray(0, 4), 16 * i + 4);
          dv.setInt32(16 * i + 12, data.length, true);
          data.push(...bytes);
        }
      });
      return makeData({ type: new Utf8View(), length: n, views: viewsBytes, variadicBuffers: [Uint8Array.from(data)] } as never) as Data;
    })();
    const v = makeData({ type: views, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, 4), child } as never) as Data;
    const batch = batchOf(schema, [st, v], 1);
    const [back] = roundTrip(batch);
    expect(back!.getChild('s')!.get(0)!.t).toBe('0123456789'.repeat(4));
    expect([...back!.getChild('v')!.get(0)!]).toEqual(viewValues);
  });

  test('a view that points outside its column\'s variadic buffers is refused by the encoder', () => {
    const views = new Uint8Array(32);
    const dv = new DataView(views.buffer);
    dv.setInt32(0, 2, true);
    views.set([0x61, 0x62], 4);
    dv.setInt32(16, 20, true);
    dv.setInt32(24, 1, true); // buffer 1: the column has only buffer 0
    const v = makeData({ type: new Utf8View(), length: 2, views, variadicBuffers: [new Uint8Array(30)] } as never) as Data;
    expectCode(() => encodeRows(batchOf(schemaOf(['v', new Utf8View()]), [v], 2)), 'CS_INVALID_ARGUMENT', /the view of row 1 points outside its column's buffers/);
  });
});

describe('one decoder, several blocks: nested builders start empty for each', () => {
  test('a struct of a string, a list of views and a dense union decode a second block as they decoded the first', () => {
    const struct = new Struct([new Field('t', new Utf8(), true)]);
    const views = new List(new Field('item', new Utf8View(), true));
    const union = new DenseUnion([0, 1], [new Field('i', new Int8(), true), new Field('s', new Utf8(), true)]);
    const schema = schemaOf(['s', struct], ['v', views], ['u', union]);
    const block = (k: number) => {
      const rows = 3;
      const words = Array.from({ length: 2 * rows }, (_, i) => `${k}-${i}-`.padEnd(13 + k + i, '*'));
      const st = makeData({ type: struct, length: rows, nullCount: 0, children: [utf8Column(words.slice(0, rows))] });
      const child = makeData({ type: new Utf8View(), length: 2 * rows, views: (() => {
        const bytes = new Uint8Array(32 * rows);
        const dv = new DataView(bytes.buffer);
        let at = 0;
        words.forEach((w, i) => {
          dv.setInt32(16 * i, w.length, true);
          bytes.set(new TextEncoder().encode(w.slice(0, 4)), 16 * i + 4);
          dv.setInt32(16 * i + 12, at, true);
          at += w.length;
        });
        return bytes;
      })(), variadicBuffers: [new TextEncoder().encode(words.join(''))] } as never) as Data;
      const v = makeData({ type: views, length: rows, nullCount: 0, valueOffsets: Int32Array.of(0, 2, 4, 6), child } as never) as Data;
      const u = makeData({ type: union, length: rows, typeIds: Int8Array.of(1, 0, 1), valueOffsets: Int32Array.of(0, 0, 1), children: [int8s([k]), utf8Column([`a${k}`, `b${k}`])] } as never) as Data;
      return { batch: batchOf(schema, [st, v, u], rows), longBytes: words.reduce((n, w) => n + w.length, 0) };
    };
    const decoder = new RowDecoder(schema, rowLayoutOf(schema.fields));
    for (const k of [1, 2]) {
      const { batch, longBytes } = block(k);
      const [back] = decoder.decode(encodeRows(batch), batch.numRows, corruptError);
      expect(rowsOf(back!), `block ${k}`).toEqual(rowsOf(batch));
      // the list's views have one variadic buffer holding this block's long values only
      expect(back!.data.children[1]!.children[0]!.variadicBuffers[0]!.length, `block ${k}`).toBe(longBytes);
      expect(Array.from(back!.data.children[2]!.valueOffsets as Int32Array), `block ${k}`).toEqual([0, 0, 1]);
    }
  });
  test('a null Int32 inside a list holds zero bytes, not the value an earlier block had in its place', () => {
    const type = new List(new Field('item', new Int32(), true));
    const schema = schemaOf(['l', type]);
    const block = (values: (number | null)[]) => {
      const bitmap = Uint8Array.of(values.reduce<number>((m, v, i) => (v === null ? m : m | (1 << i)), 0));
      const nulls = values.filter((v) => v === null).length;
      const child = makeData({ type: new Int32(), length: values.length, nullCount: nulls, nullBitmap: bitmap, data: Int32Array.from(values, (v) => v ?? -1) });
      return batchOf(schema, [makeData({ type, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, values.length), child } as never) as Data], 1);
    };
    const decoder = new RowDecoder(schema, rowLayoutOf(schema.fields));
    decoder.decode(encodeRows(block([5, 6, 7])), 1, corruptError);
    const [back] = decoder.decode(encodeRows(block([8, null, 9])), 1, corruptError);
    expect(Array.from(back!.data.children[0]!.children[0]!.values as Int32Array)).toEqual([8, 0, 9]);
  });
});

describe('dictionaries shared by id', () => {
  test('two columns of one dictionary id decode against one dictionary holding both columns\' values', () => {
    const a = new Dictionary(new Utf8(), new Int32(), 7);
    const b = a;
    const schema = schemaOf(['a', a], ['b', b]);
    const dictionary = new Vector([utf8Column(['x', 'y', 'z'])]);
    const da = makeData({ type: a, length: 2, data: Int32Array.of(0, 1), dictionary } as never) as Data;
    const db = makeData({ type: b, length: 2, data: Int32Array.of(2, 0), dictionary } as never) as Data;
    const [back] = roundTrip(batchOf(schema, [da, db], 2));
    expect([...back!.getChild('a')!]).toEqual(['x', 'y']);
    expect([...back!.getChild('b')!]).toEqual(['z', 'x']);
  });
});
