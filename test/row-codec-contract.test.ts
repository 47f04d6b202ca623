/**
 * Claims about the sort writer's compact row codec (src/sort-writer/row-*.ts,
 * nested-*.ts, copy-bytes.ts) that the broader round-trip suites do not pin:
 * bitmap sizes at multiples of 8 fields, wide rows, structs of 8 fields,
 * dictionary index edge cases, a decoder reused across blocks, corrupt
 * inputs that must be refused, and the partition header's magic and reserved
 * bytes. Written during a mutation sweep (docs/RELIABILITY.md): most of these
 * tests fail with a mutant of the codec that the broader suites let through.
 */
import { describe, expect, test } from 'vitest';
import {
  Bool,
  DenseUnion,
  Dictionary,
  Field,
  FixedSizeBinary,
  Int32,
  Int64,
  Int8,
  List,
  makeData,
  Schema,
  SparseUnion,
  Struct,
  Utf8,
  Vector,
  type Data,
  type RecordBatch,
} from 'apache-arrow';
import { ShuffleError } from '../src/errors.js';
import { RowDecoder } from '../src/sort-writer/row-decoder.js';
import { encodeRowPartitionHeader, isRowPartition, parseRowPartitionHeader } from '../src/sort-writer/row-format.js';
import { rowLayoutOf } from '../src/sort-writer/row-layout.js';
import { batchOf, buildColumn, utf8Column } from './support/columns.js';
import { Rng } from './support/random.js';
import { encodeRows } from './support/row-encoding.js';
import { rowsOf } from './support/rows.js';

const corruptError = (what: string) => new ShuffleError('CS_CORRUPT_DATA', what);

function decoderOf(schema: Schema): RowDecoder {
  return new RowDecoder(schema, rowLayoutOf(schema.fields));
}

function decodeAll(schema: Schema, bytes: Uint8Array, rows: number): RecordBatch[] {
  return decoderOf(schema).decode(bytes, rows, corruptError);
}

function roundTrip(batch: RecordBatch): RecordBatch[] {
  return decodeAll(batch.schema, encodeRows(batch), batch.numRows);
}

function expectRoundTrip(batch: RecordBatch): void {
  expect(roundTrip(batch).flatMap((b) => rowsOf(b))).toEqual(rowsOf(batch));
}

function expectCode(run: () => unknown, code: string, message?: RegExp): void {
  let error: unknown;
  try {
    run();
  } catch (e) {
    error = e;
  }
  expect(error, 'no error was thrown').toBeInstanceOf(ShuffleError);
  expect((error as ShuffleError).code).toBe(code);
  if (message !== undefined) expect((error as ShuffleError).message).toMatch(message);
}

/** A column of `n` Int8 values `value(i)`, null where `isNull(i)`. */
function int8Column(n: number, value: (i: number) => number, isNull: (i: number) => boolean): Data {
  const bitmap = new Uint8Array((n + 7) >>> 3);
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    if (isNull(i)) nulls++;
    else bitmap[i >>> 3]! |= 1 << (i & 7);
  }
  return makeData({ type: new Int8(), length: n, nullCount: nulls, nullBitmap: bitmap, data: Int8Array.from({ length: n }, (_, i) => value(i)) });
}

describe('the row bitmap and wide rows', () => {
  test('a row bitmap takes exactly ceil(F / 8) bytes, also when F is a multiple of 8', () => {
    for (const [f, bytes] of [[1, 1], [7, 1], [8, 1], [9, 2], [16, 2], [17, 3], [24, 3]] as const) {
      const layout = rowLayoutOf(Array.from({ length: f }, (_, i) => new Field(`c${i}`, new Int8(), true)));
      expect(layout.bitmapBytes, `${f} fields`).toBe(bytes);
      expect(layout.headerBytes, `${f} fields`).toBe(4 + bytes + f);
    }
  });

  test('eight nullable Int8 fields make a 13-byte row: 1 bitmap byte and 8 one-byte slots', () => {
    const schema = new Schema(Array.from({ length: 8 }, (_, i) => new Field(`c${i}`, new Int8(), true)));
    const batch = batchOf(schema, schema.fields.map((_, c) => int8Column(1, () => c + 1, () => c === 7)), 1);
    const bytes = encodeRows(batch);
    expect(Array.from(bytes)).toEqual([9, 0, 0, 0, 0x80, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0]);
    expectRoundTrip(batch);
  });

  test('every field of a 20-field row keeps its own null bit (bit f & 7 of bitmap byte f >> 3)', () => {
    const fields = Array.from({ length: 20 }, (_, i) => new Field(`c${i}`, i % 3 === 2 ? new Utf8() : new Int8(), true));
    const schema = new Schema(fields);
    const rows = 40;
    const columns = fields.map((field, c) => {
      // each field has its own pattern of nulls; in row 0 fields 2, 9 and 16 are null
      const isNull = (r: number) => ((r + 1) * (c + 1)) % 7 === 3;
      if (field.type instanceof Utf8) return utf8Column(Array.from({ length: rows }, (_, r) => (isNull(r) ? null : `v${c}.${r}`)));
      return int8Column(rows, (r) => (r + c) % 100, isNull);
    });
    const batch = batchOf(schema, columns, rows);
    const bytes = encodeRows(batch);
    // row 0's bitmap: bit 2 of byte 0, bit 1 of byte 1, bit 0 of byte 2
    expect(Array.from(bytes.subarray(4, 7))).toEqual([0b100, 0b10, 0b1]);
    expectRoundTrip(batch);
  });

  test('a null string in field 8 or later that claims bytes is refused, whatever field 0 holds', () => {
    const fields = [...Array.from({ length: 8 }, (_, i) => new Field(`c${i}`, new Int8(), true)), new Field('s', new Utf8(), true)];
    const schema = new Schema(fields);
    const columns = [...Array.from({ length: 8 }, (_, c) => int8Column(1, () => c, () => false)), utf8Column(['abcd'])];
    const bytes = encodeRows(batchOf(schema, columns, 1)).slice();
    // mark s (field 8: bitmap byte 1, bit 0) null but leave its 4 bytes and its length: corrupt
    bytes[5] = 1;
    expectCode(() => decodeAll(schema, bytes, 1), 'CS_CORRUPT_DATA', /null field 8 claims 4 bytes/);
  });
});

describe('fixed-width values', () => {
  test('a null Int32 slot is four zero bytes whatever value the column held, even in a dirty page', () => {
    const schema = new Schema([new Field('x', new Int32(), true)]);
    const x = makeData({ type: new Int32(), length: 1, nullCount: 1, nullBitmap: Uint8Array.of(0), data: Int32Array.of(-1) });
    const batch = batchOf(schema, [x], 1);
    const bytes = encodeRows(batch, () => new Uint8Array(12).fill(0xee));
    expect(Array.from(bytes)).toEqual([5, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
  });

  test('FixedSizeBinary values of 5, 7 and 12 bytes keep every byte through a row and back', () => {
    const rng = new Rng(0x5eed5);
    for (const width of [5, 7, 12]) {
      const type = new FixedSizeBinary(width);
      const schema = new Schema([new Field('b', type, true), new Field('n', new Int8(), true)]);
      const rows = 33;
      const batch = batchOf(schema, [buildColumn(type, rows, { bitmap: true, nullRate: 0.2 }, rng), buildColumn(new Int8(), rows, { bitmap: true, nullRate: 0.2 }, rng)], rows);
      expectRoundTrip(batch);
      expectRoundTrip(batch.slice(3, 30));
    }
  });

  test('strings of 257 to 5000 bytes keep every byte (the bulk copy path)', () => {
    const values = [257, 300, 1000, 5000].map((n, k) => Array.from({ length: n }, (_, i) => String.fromCharCode(97 + ((i * 7 + k) % 26))).join(''));
    const schema = new Schema([new Field('s', new Utf8(), true)]);
    expectRoundTrip(batchOf(schema, [utf8Column(values)], values.length));
  });
});

describe('structs', () => {
  test('a struct of 8 and one of 16 fields have a 1- and a 2-byte bitmap in their value, and come back with their nulls', () => {
    for (const count of [8, 16]) {
      const children = Array.from({ length: count }, (_, c) => new Field(`f${c}`, new Int8(), true));
      const type = new Struct(children);
      const schema = new Schema([new Field('s', type, true)]);
      const rows = 10;
      const childData = children.map((_, c) => int8Column(rows, (r) => r * 3 + c, (r) => (r + c) % 4 === 0));
      const s = makeData({ type, length: rows, nullCount: 0, children: childData });
      const batch = batchOf(schema, [s], rows);
      const bytes = encodeRows(batch);
      // row 0: length, bitmap (1 byte), the struct's length slot, then its value: bitmap of count / 8 bytes and count slots
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      expect(view.getUint32(5, true), `struct of ${count}`).toBe(count / 8 + count);
      expect(view.getUint32(0, true)).toBe(1 + 4 + count / 8 + count);
      expectRoundTrip(batch);
    }
  });
});

describe('dictionaries', () => {
  const utf8Dictionary = (values: string[]) => new Vector([utf8Column(values)]);

  test('an Int64 dictionary index of 2^32 (high word set) is refused, not read as its low word', () => {
    const type = new Dictionary(new Utf8(), new Int64() as unknown as Int32);
    const schema = new Schema([new Field('d', type, true)]);
    const d = makeData({ type, length: 1, data: BigInt64Array.of(1n << 32n), dictionary: utf8Dictionary(['a', 'b']) } as never);
    expectCode(() => encodeRows(batchOf(schema, [d], 1)), 'CS_INVALID_ARGUMENT', /dictionary index points outside/);
  });

  test('a dictionary index equal to the dictionary length is refused', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const schema = new Schema([new Field('d', type, true)]);
    const d = makeData({ type, length: 1, data: Int32Array.of(2), dictionary: utf8Dictionary(['a', 'b']) } as never);
    expectCode(() => encodeRows(batchOf(schema, [d], 1)), 'CS_INVALID_ARGUMENT', /dictionary index points outside its dictionary of 2 values/);
  });

  test('a dictionary of two chunks: indices past the first chunk point into the second', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const schema = new Schema([new Field('d', type, true)]);
    const dictionary = new Vector([utf8Column(['a', 'b']), utf8Column(['c', 'd', 'e'])]);
    const d = makeData({ type, length: 5, data: Int32Array.of(4, 0, 2, 3, 1), dictionary } as never);
    const [back] = roundTrip(batchOf(schema, [d], 5));
    expect([...back!.getChild('d')!]).toEqual(['e', 'a', 'c', 'd', 'b']);
  });

  test('a valid index pointing at a null dictionary value decodes to null', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const schema = new Schema([new Field('d', type, true)]);
    const d = makeData({ type, length: 3, data: Int32Array.of(0, 1, 0), dictionary: new Vector([utf8Column(['a', null])]) } as never);
    const [back] = roundTrip(batchOf(schema, [d], 3));
    expect([...back!.getChild('d')!]).toEqual(['a', null, 'a']);
  });

  test('two batches of 100 distinct Int8-indexed values in one block decode to batches whose dictionaries fit Int8 (at most 128 values)', () => {
    const type = new Dictionary(new Utf8(), new Int8());
    const schema = new Schema([new Field('d', type, true)]);
    const values = Array.from({ length: 200 }, (_, i) => `w${i}`);
    // one block holds the rows of several input batches: here two, each with a dictionary of its own 100 values
    const half = (k: number) => makeData({ type, length: 100, data: Int8Array.from({ length: 100 }, (_, i) => i), dictionary: utf8Dictionary(values.slice(100 * k, 100 * k + 100)) } as never);
    const first = encodeRows(batchOf(schema, [half(0)], 100));
    const second = encodeRows(batchOf(schema, [half(1)], 100));
    const block = new Uint8Array(first.byteLength + second.byteLength);
    block.set(first, 0);
    block.set(second, first.byteLength);
    const back = decodeAll(schema, block, 200);
    expect(back.length).toBeGreaterThanOrEqual(2);
    expect(back.flatMap((b) => [...b.getChild('d')!])).toEqual(values);
    for (const b of back) expect(b.data.children[0]!.dictionary!.length).toBeLessThanOrEqual(128);
  });

  test('when a block splits at a full dictionary, the nested columns before and after the dictionary split with it', () => {
    const dictType = new Dictionary(new Utf8(), new Int8());
    const listType = new List(new Field('item', new Int32(), true));
    const structType = new Struct([new Field('x', new Int8(), true)]);
    const schema = new Schema([new Field('l', listType, true), new Field('d', dictType, true), new Field('s', structType, true)]);
    const rng = new Rng(0x5b1d);
    const part = (k: number) => {
      const rows = 100;
      const d = makeData({ type: dictType, length: rows, data: Int8Array.from({ length: rows }, (_, i) => i), dictionary: utf8Dictionary(Array.from({ length: rows }, (_, i) => `p${k}.${i}`)) } as never);
      const l = makeData({ type: listType, length: rows, nullCount: 0, valueOffsets: Int32Array.from({ length: rows + 1 }, (_, i) => 2 * i), child: buildColumn(new Int32(), 2 * rows, { bitmap: true, nullRate: 0.2 }, rng) } as never) as Data;
      const st = makeData({ type: structType, length: rows, nullCount: 0, children: [int8Column(rows, (i) => i + k, (i) => i % 9 === 0)] });
      return batchOf(schema, [l, d, st], rows);
    };
    const [a, b] = [part(0), part(1)];
    const first = encodeRows(a);
    const second = encodeRows(b);
    const block = new Uint8Array(first.byteLength + second.byteLength);
    block.set(first, 0);
    block.set(second, first.byteLength);
    const back = decodeAll(schema, block, 200);
    expect(back.length).toBeGreaterThanOrEqual(2);
    for (const batch of back) for (const child of batch.data.children) expect(child.length).toBe(batch.numRows);
    expect(back.flatMap((x) => rowsOf(x))).toEqual([...rowsOf(a), ...rowsOf(b)]);
  });

  test('values that are prefixes of each other ("", "a", "aa", ...) stay distinct dictionary values', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const schema = new Schema([new Field('d', type, true)]);
    const values = Array.from({ length: 60 }, (_, i) => 'a'.repeat(i));
    const rows = 240;
    const rng = new Rng(0xd1c7);
    const indices = Int32Array.from({ length: rows }, () => rng.int(0, values.length - 1));
    const d = makeData({ type, length: rows, data: indices, dictionary: utf8Dictionary(values) } as never);
    const [back] = roundTrip(batchOf(schema, [d], rows));
    expect([...back!.getChild('d')!]).toEqual(Array.from(indices, (i) => values[i]));
  });
});

describe('one decoder, several blocks', () => {
  test('a decoder reused for a second block forgets the first block\'s dictionary values', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const schema = new Schema([new Field('d', type, true)]);
    const block = (indices: number[]) => encodeRows(batchOf(schema, [makeData({ type, length: indices.length, data: Int32Array.from(indices), dictionary: new Vector([utf8Column(['a', 'b'])]) } as never)], indices.length));
    const decoder = decoderOf(schema);
    const [first] = decoder.decode(block([0, 1]), 2, corruptError);
    expect([...first!.getChild('d')!]).toEqual(['a', 'b']);
    const [second] = decoder.decode(block([1, 1]), 2, corruptError);
    expect([...second!.getChild('d')!]).toEqual(['b', 'b']);
    expect(second!.data.children[0]!.dictionary!.length).toBe(1);
  });

  test('a decoder reused for a block with nulls after one without keeps the nulls of nested values', () => {
    const type = new List(new Field('item', new Int32(), true));
    const schema = new Schema([new Field('l', type, true)]);
    const rng = new Rng(0xb10c);
    const block = (nullRate: number) => {
      const rows = 12;
      const child = buildColumn(new Int32(), rows * 3, nullRate > 0 ? { bitmap: true, nullRate } : { bitmap: false, nullRate: 0 }, rng);
      const l = makeData({ type, length: rows, nullCount: 0, valueOffsets: Int32Array.from({ length: rows + 1 }, (_, i) => 3 * i), child } as never) as Data;
      return batchOf(schema, [l], rows);
    };
    const decoder = decoderOf(schema);
    const clean = block(0);
    const dirty = block(0.5);
    const [a] = decoder.decode(encodeRows(clean), clean.numRows, corruptError);
    expect(rowsOf(a!)).toEqual(rowsOf(clean));
    const [b] = decoder.decode(encodeRows(dirty), dirty.numRows, corruptError);
    expect(rowsOf(b!)).toEqual(rowsOf(dirty));
  });
});

describe('lists of fixed-width values', () => {
  test('a list of 20 Int32 elements keeps a null at any element position (the bitmap is read in full)', () => {
    const type = new List(new Field('item', new Int32(), true));
    const schema = new Schema([new Field('l', type, true)]);
    const n = 20;
    // row r: 20 elements, only element r null (r < 20), so every bitmap byte and bit is exercised alone
    const rows = n;
    const valid = (e: number) => e % n !== Math.floor(e / n);
    const bitmap = new Uint8Array((rows * n + 7) >>> 3);
    let nulls = 0;
    for (let e = 0; e < rows * n; e++) {
      if (valid(e)) bitmap[e >>> 3]! |= 1 << (e & 7);
      else nulls++;
    }
    const child = makeData({ type: new Int32(), length: rows * n, nullCount: nulls, nullBitmap: bitmap, data: Int32Array.from({ length: rows * n }, (_, e) => e + 1) });
    const l = makeData({ type, length: rows, nullCount: 0, valueOffsets: Int32Array.from({ length: rows + 1 }, (_, i) => n * i), child });
    expectRoundTrip(batchOf(schema, [l], rows));
  });
});

describe('unions', () => {
  test('a union type id of 130 is refused by the encoder (type ids are 0 to 127), not read as 130 & 127', () => {
    const type = new SparseUnion([0, 1, 2], [new Field('a', new Int8(), true), new Field('b', new Int8(), true), new Field('c', new Int8(), true)]);
    const schema = new Schema([new Field('u', type, true)]);
    const child = () => makeData({ type: new Int8(), length: 1, data: Int8Array.of(5) });
    const u = makeData({ type, length: 1, typeIds: Int8Array.of(-126), children: [child(), child(), child()] } as never);
    expectCode(() => encodeRows(batchOf(schema, [u], 1)), 'CS_INVALID_ARGUMENT', /union type id 130/);
  });

  test('a top-level union marked null with a zero length slot is refused (unions have no nulls of their own)', () => {
    const type = new DenseUnion([0, 5], [new Field('i', new Int32(), true), new Field('s', new Utf8(), true)]);
    const schema = new Schema([new Field('u', type, true)]);
    // one row: length 5 = bitmap (u null) + u's 4-byte slot, zero; padded to 12
    const bytes = Uint8Array.of(5, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0);
    expectCode(() => decodeAll(schema, bytes, 1), 'CS_CORRUPT_DATA', /union column is marked null/);
  });

  test('a union under a null struct still holds only the type ids of its type (ids 1 and 4, not 0)', () => {
    for (const union of [new SparseUnion([1, 4], [new Field('a', new Int8(), true), new Field('b', new Utf8(), true)]), new DenseUnion([1, 4], [new Field('a', new Int8(), true), new Field('b', new Utf8(), true)])]) {
      const type = new Struct([new Field('u', union, true)]);
      const schema = new Schema([new Field('s', type, true)]);
      const a = makeData({ type: new Int8(), length: 3, data: Int8Array.of(1, 2, 3) });
      const b = utf8Column(['x', 'y', 'z']);
      const u = union instanceof SparseUnion
        ? makeData({ type: union, length: 3, typeIds: Int8Array.of(1, 4, 4), children: [a, b] } as never)
        : makeData({ type: union, length: 3, typeIds: Int8Array.of(1, 4, 4), valueOffsets: Int32Array.of(0, 0, 1), children: [a, b] } as never);
      const s = makeData({ type, length: 3, nullCount: 1, nullBitmap: Uint8Array.of(0b101), children: [u as Data] });
      const batch = batchOf(schema, [s], 3);
      const [back] = roundTrip(batch);
      expect(rowsOf(back!)).toEqual(rowsOf(batch));
      const typeIds = Array.from(back!.data.children[0]!.children[0]!.typeIds as Int8Array);
      expect(typeIds.length).toBe(3);
      for (const id of typeIds) expect([1, 4]).toContain(id);
    }
  });

  test('a union value too short for its child\'s slot is refused as such', () => {
    const type = new DenseUnion([0], [new Field('i', new Int32(), true)]);
    const schema = new Schema([new Field('u', type, true)]);
    // one row: bitmap, u's slot says 5 bytes: type id 0, not null, then only 3 of the Int32's 4 bytes; padded to 16
    const bytes = Uint8Array.of(14 - 4, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 7, 7, 7, 0, 0);
    expectCode(() => decodeAll(schema, bytes, 1), 'CS_CORRUPT_DATA', /no room for its 4-byte slot/);
  });

  test('a nested Bool of 2 inside a struct is refused', () => {
    const type = new Struct([new Field('b', new Bool(), true)]);
    const schema = new Schema([new Field('s', type, true)]);
    const s = makeData({ type, length: 1, nullCount: 0, children: [makeData({ type: new Bool(), length: 1, data: Uint8Array.of(1) })] });
    const bytes = encodeRows(batchOf(schema, [s], 1)).slice();
    // length 7: bitmap, slot (2), the struct value: its bitmap, b = 1
    expect(Array.from(bytes)).toEqual([7, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0]);
    bytes[10] = 2;
    expectCode(() => decodeAll(schema, bytes, 1), 'CS_CORRUPT_DATA', /a Bool holds 2/);
  });
});

describe('the partition header', () => {
  const schema = new Schema([new Field('x', new Int32(), true)]);

  test('only the exact magic CSRW marks a row partition', () => {
    expect(isRowPartition(Uint8Array.of(0x43, 0x53, 0x52, 0x57))).toBe(true);
    expect(isRowPartition(Uint8Array.of(0x43, 0x53, 0x52, 0x58))).toBe(false);
    expect(isRowPartition(Uint8Array.of(0x43, 0x53, 0x52))).toBe(false);
    expect(isRowPartition(Uint8Array.of(0xff, 0xff, 0xff, 0xff))).toBe(false);
  });

  test('either reserved header byte that is not zero is refused', () => {
    const header = encodeRowPartitionHeader(schema, 'none');
    expect(parseRowPartitionHeader(header, {}).schema.fields.map((f) => f.name)).toEqual(['x']);
    for (const at of [6, 7]) {
      const edited = header.slice();
      edited[at] = 1;
      expectCode(() => parseRowPartitionHeader(edited, {}), 'CS_CORRUPT_DATA', /reserved header bytes are not zero/);
    }
  });
});
