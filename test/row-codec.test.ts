/**
 * The compact row format (src/sort-writer/row-layout.ts) at the byte level:
 * the encoder writes exactly the documented bytes, rows of every flat type
 * decode back to the same values (nulls, slices, padded IPC buffers), null
 * slots and padding are zeros whatever was there before, and the decoder
 * refuses every inconsistent length instead of reading past it; nested and
 * dictionary values likewise (the worked examples byte for byte, random types
 * round trip, corrupt counts, lengths and type ids refused).
 */
import { describe, expect, test } from 'vitest';
import { Bool, DenseUnion, Dictionary, Field, FixedSizeList, Int16, Int32, Int8, List, makeData, Map_, Null, Schema, SparseUnion, Struct, Utf8, Utf8View, Vector, type RecordBatch } from 'apache-arrow';
import { ShuffleError } from '../src/errors.js';
import { RowDecoder } from '../src/sort-writer/row-decoder.js';
import { rowLayoutOf } from '../src/sort-writer/row-layout.js';
import { batchOf, buildColumn, NO_BITMAP, schemaOf, sequenceColumn, TYPE_CASES } from './support/columns.js';
import { buildAny, NESTED_KINDS, nestedType, randomType } from './support/nested.js';
import { Rng } from './support/random.js';
import { encodeRows } from './support/row-encoding.js';
import { throughIpc } from './support/random-case.js';
import { rowsOf } from './support/rows.js';

function decodeAll(schema: Schema, bytes: Uint8Array, rows: number): RecordBatch[] {
  return new RowDecoder(schema, rowLayoutOf(schema.fields)).decode(bytes, rows, (what) => new ShuffleError('CS_CORRUPT_DATA', what));
}

/** The one batch the rows decode to. */
function decode(schema: Schema, bytes: Uint8Array, rows: number): RecordBatch {
  const batches = decodeAll(schema, bytes, rows);
  expect(batches).toHaveLength(1);
  return batches[0]!;
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex').replace(/(..)/g, '$1 ').trim();
}

const EXAMPLE = new Schema([new Field('id', new Int32(), true), new Field('name', new Utf8(), true), new Field('flag', new Bool(), true)]);

function exampleBatch(): RecordBatch {
  const id = makeData({ type: new Int32(), length: 2, nullCount: 1, nullBitmap: Uint8Array.of(0b01), data: Int32Array.of(7, 12345) });
  const name = makeData({ type: new Utf8(), length: 2, nullCount: 1, nullBitmap: Uint8Array.of(0b01), valueOffsets: Int32Array.of(0, 2, 5), data: new TextEncoder().encode('hixyz') });
  const flag = makeData({ type: new Bool(), length: 2, nullCount: 0, data: Uint8Array.of(0b01) });
  return batchOf(EXAMPLE, [id, name, flag], 2);
}

describe('the encoder writes the documented bytes', () => {
  test('the worked example of row-layout.ts: (7, "hi", true) and (null, null, false), the second padded to 16 bytes', () => {
    const bytes = encodeRows(exampleBatch());
    expect(hex(bytes.subarray(0, 16))).toBe('0c 00 00 00 00 07 00 00 00 02 00 00 00 01 68 69');
    // the null id's value (12345) and the null name's bytes ("xyz") are not stored: zeros and length 0
    expect(hex(bytes.subarray(16))).toBe('0a 00 00 00 03 00 00 00 00 00 00 00 00 00 00 00');
  });

  test('the layout: bitmap bytes, slot offsets, where the variable section starts', () => {
    const layout = rowLayoutOf(EXAMPLE.fields);
    expect(layout.bitmapBytes).toBe(1);
    expect(layout.fields.map((f) => f.slot)).toEqual([5, 9, 13]);
    expect(layout.headerBytes).toBe(14);
    expect(layout.variableFields).toEqual([1]);
    // nine fields need a second bitmap byte
    expect(rowLayoutOf(Array.from({ length: 9 }, (_, i) => new Field(`b${i}`, new Bool()))).bitmapBytes).toBe(2);
  });

  test('null slots and padding are zeros even in a page full of garbage (pages are reused)', () => {
    const page = new Uint8Array(64).fill(0xee);
    expect(hex(encodeRows(exampleBatch(), () => page))).toBe(hex(encodeRows(exampleBatch())));
  });
});

describe('every flat type decodes back to the same rows', () => {
  test.each(TYPE_CASES.map((tc) => [tc.name, tc] as const))('%s, with nulls, without bitmap, sliced, from IPC', (_, tc) => {
    const rng = new Rng(0xc0de + tc.name.length);
    const type = tc.make();
    const schema = schemaOf([{ name: 'k', type }, { name: 'id', type: new Int32(), nullable: false }, { name: 'k2', type }]);
    const make = (rows: number, nullRate: number, bitmap = true) =>
      batchOf(schema, [buildColumn(type, rows, bitmap ? { bitmap: true, nullRate } : NO_BITMAP, rng), sequenceColumn(0, rows), buildColumn(type, rows, { bitmap: true, nullRate: 0.5 }, rng, { longValues: rows < 50 })], rows);
    const batches = [make(200, 0.2), make(100, 0, false), make(300, 1), make(500, 0.3).slice(17, 401), throughIpc(make(250, 0.1)), throughIpc(make(250, 0.1)).slice(3, 200), make(30, 0.1), make(1, 0)];
    for (const batch of batches) {
      const bytes = encodeRows(batch);
      expect(bytes.byteLength % 4).toBe(0);
      const back = decode(schema, bytes, batch.numRows);
      expect(back.numRows).toBe(batch.numRows);
      expect(rowsOf(back)).toEqual(rowsOf(batch));
    }
  });

  test('zero rows decode from zero bytes to an empty batch', () => {
    expect(decode(EXAMPLE, new Uint8Array(0), 0).numRows).toBe(0);
  });
});

const NESTED_EXAMPLE = new Schema([
  new Field('id', new Int32(), false),
  new Field('tags', new List(new Field('item', new Utf8(), true)), true),
  new Field('pt', new Struct([new Field('x', new Int16(), true), new Field('name', new Utf8(), true)]), true),
]);

/** The first worked example of row-layout.ts's nested section: (7, ["a", null, "bc"], {x: 5, name: null}). */
function nestedExampleBatch(): RecordBatch {
  const [, tagsField, ptField] = NESTED_EXAMPLE.fields as [Field, Field<List>, Field<Struct>];
  const id = makeData({ type: new Int32(), length: 1, data: Int32Array.of(7) });
  const items = makeData({ type: new Utf8(), length: 3, nullCount: 1, nullBitmap: Uint8Array.of(0b101), valueOffsets: Int32Array.of(0, 1, 1, 3), data: new TextEncoder().encode('abc') });
  const tags = makeData({ type: tagsField.type, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, 3), child: items });
  const x = makeData({ type: new Int16(), length: 1, data: Int16Array.of(5) });
  const name = makeData({ type: new Utf8(), length: 1, nullCount: 1, nullBitmap: Uint8Array.of(0), valueOffsets: Int32Array.of(0, 4), data: new TextEncoder().encode('junk') });
  const pt = makeData({ type: ptField.type, length: 1, nullCount: 0, children: [x, name] });
  return batchOf(NESTED_EXAMPLE, [id, tags, pt], 1);
}

const UNION_TYPE = new DenseUnion([0, 5], [new Field('i', new Int32(), true), new Field('s', new Utf8(), true)]);
const UNION_EXAMPLE = new Schema([new Field('u', UNION_TYPE, true), new Field('d', new Dictionary(new Utf8(), new Int8()), true)]);

/** The second worked example: (u = s: "hi", d = "xyz"). */
function unionExampleBatch(): RecordBatch {
  const i = makeData({ type: new Int32(), length: 1, data: Int32Array.of(99) });
  const str = makeData({ type: new Utf8(), length: 2, valueOffsets: Int32Array.of(0, 3, 5), data: new TextEncoder().encode('xxxhi') });
  const u = makeData({ type: UNION_TYPE, length: 1, typeIds: Int8Array.of(5), valueOffsets: Int32Array.of(1), children: [i, str] } as never);
  const dictionary = new Vector([makeData({ type: new Utf8(), length: 2, valueOffsets: Int32Array.of(0, 2, 5), data: new TextEncoder().encode('abxyz') })]);
  const d = makeData({ type: UNION_EXAMPLE.fields[1]!.type, length: 1, data: Int8Array.of(1), dictionary } as never);
  return batchOf(UNION_EXAMPLE, [u, d], 1);
}

describe('nested and dictionary values: the documented bytes', () => {
  test('the nested worked example of row-layout.ts: a list of strings with a null and a struct with a null field', () => {
    const bytes = encodeRows(nestedExampleBatch());
    expect(hex(bytes)).toBe(
      [
        '28 00 00 00', '00', '07 00 00 00', '14 00 00 00', '07 00 00 00',
        '03 00 00 00', '02', '01 00 00 00', '00 00 00 00', '02 00 00 00', '61', '62 63',
        '02', '05 00', '00 00 00 00',
      ].join(' '),
    );
    const layout = rowLayoutOf(NESTED_EXAMPLE.fields);
    expect(layout.fields.map((f) => f.slot)).toEqual([5, 9, 13]);
    expect(layout.headerBytes).toBe(17);
    expect(layout.variableFields).toEqual([1, 2]);
    expect(rowsOf(decode(NESTED_EXAMPLE, bytes, 1))).toEqual(rowsOf(nestedExampleBatch()));
  });

  test('the union and dictionary worked example: a dense union holding a string, a dictionary value stored decoded', () => {
    const bytes = encodeRows(unionExampleBatch());
    expect(hex(bytes)).toBe('14 00 00 00 00 08 00 00 00 03 00 00 00 05 00 02 00 00 00 68 69 78 79 7a');
    const back = decode(UNION_EXAMPLE, bytes, 1);
    expect(rowsOf(back)).toEqual(rowsOf(unionExampleBatch()));
    expect(String(back.getChild('d')!.type)).toBe(String(UNION_EXAMPLE.fields[1]!.type));
    expect([...back.getChild('d')!.data[0]!.dictionary!]).toEqual(['xyz']);
  });

  test('a fixed-size list, a map and a sparse union: element bitmaps, counts, type ids and null flags', () => {
    const fsl = new FixedSizeList(2, new Field('item', new Int8(), true));
    const map = new Map_(new Field('entries', new Struct([new Field('key', new Utf8(), false), new Field('value', new Int8(), true)]), false) as never);
    const sparse = new SparseUnion([1, 2], [new Field('a', new Int8(), true), new Field('b', new Bool(), true)]);
    const schema = new Schema([new Field('f', fsl, true), new Field('m', map, true), new Field('u', sparse, true)]);
    const f = makeData({ type: fsl, length: 1, nullCount: 0, child: makeData({ type: new Int8(), length: 2, nullCount: 1, nullBitmap: Uint8Array.of(0b10), data: Int8Array.of(9, 3) }) });
    const keys = makeData({ type: new Utf8(), length: 1, valueOffsets: Int32Array.of(0, 1), data: new TextEncoder().encode('k') });
    const entries = makeData({ type: map.children[0]!.type as Struct, length: 1, nullCount: 0, children: [keys, makeData({ type: new Int8(), length: 1, data: Int8Array.of(4) })] });
    const m = makeData({ type: map, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, 1), child: entries } as never);
    const a = makeData({ type: new Int8(), length: 1, data: Int8Array.of(0) });
    const b = makeData({ type: new Bool(), length: 1, nullCount: 1, nullBitmap: Uint8Array.of(0), data: Uint8Array.of(1) });
    const u = makeData({ type: sparse, length: 1, typeIds: Int8Array.of(2), children: [a, b] } as never);
    const batch = batchOf(schema, [f, m, u], 1);
    const bytes = encodeRows(batch);
    expect(hex(bytes)).toBe(
      [
        '23 00 00 00', '00', '03 00 00 00', '10 00 00 00', '03 00 00 00', // bm, f: 3 B, m: 16 B, u: 3 B
        '01', '00 03', // f: bit 0 (first element null, its slot zeros), 3
        '01 00 00 00', '00', '07 00 00 00', // m: 1 entry, its bitmap, its slot: 7 B
        '00', '01 00 00 00', '04', '6b', // the entry struct: bitmap, key: 1 B, value 4, "k"
        '02', '01', '00', // u: type id 2, null, Bool slot zero
        '00', // padding to 40
      ].join(' '),
    );
    expect(rowsOf(decode(schema, bytes, 1))).toEqual(rowsOf(batch));
  });
});

describe('nested and dictionary columns decode back to the same rows', () => {
  test.each(NESTED_KINDS.map((k) => [k]))('%s, random types up to 4 deep, nulls at every level, sliced, through IPC, encoded into a dirty page', (kind) => {
    for (let seed = 0; seed < 12; seed++) {
      const rng = new Rng(seed * 31 + NESTED_KINDS.indexOf(kind));
      const type = nestedType(kind, rng, rng.int(1, 4), 0.7);
      const schema = new Schema([new Field('a', type, true), new Field('n', new Int32(), true), new Field('b', randomType(rng, 2), true)]);
      const dictionaries = new Map();
      for (const nullRate of [0, 0.3, 0.9]) {
        const rows = rng.int(0, 120);
        const options = { nullRate, dictionaries };
        let batch = batchOf(schema, [buildAny(type, rows, rng, options), buildColumn(new Int32(), rows, { bitmap: true, nullRate }, rng), buildAny(schema.fields[2]!.type, rows, rng, options)], rows);
        if (rows > 4 && rng.chance(0.5)) batch = batch.slice(rng.int(1, 3), rows - rng.int(0, 2));
        const clean = encodeRows(batch);
        const dirty = encodeRows(batch, (bytes) => new Uint8Array(bytes).fill(0xa5));
        expect(hex(dirty)).toBe(hex(clean));
        const back = decodeAll(schema, clean, batch.numRows);
        expect(back.flatMap((b) => rowsOf(b))).toEqual(rowsOf(batch));
        back.forEach((b) => expect(String(b.schema.fields[0]!.type)).toBe(String(type)));
      }
    }
  });

  test('a view column takes a u32 length slot and variable bytes like a string; nested in a list, its list does', () => {
    const layout = rowLayoutOf([new Field('ok', new Int32()), new Field('s', new Utf8View()), new Field('tags', new List(new Field('item', new Utf8View(), true)))]);
    expect(layout.fields.map((f) => f.kind)).toEqual(['fixed', 'view', 'tree']);
    expect(layout.variableFields).toEqual([1, 2]);
    expect(layout.headerBytes).toBe(4 + 1 + 4 + 4 + 4);
  });
});

describe('the decoder refuses inconsistent nested values', () => {
  /** The bytes of `batch` with one edit; decoding must be CS_CORRUPT_DATA matching `message`. */
  function expectCorrupt(schema: Schema, bytes: Uint8Array, edit: (bytes: Uint8Array, view: DataView) => Uint8Array | void, message: RegExp): void {
    const copy = bytes.slice();
    const edited = edit(copy, new DataView(copy.buffer)) ?? copy;
    let error: unknown;
    try {
      decodeAll(schema, edited, 1);
    } catch (e) {
      error = e;
    }
    expect(error, 'the decoder accepted the edited block').toBeInstanceOf(ShuffleError);
    expect((error as ShuffleError).code).toBe('CS_CORRUPT_DATA');
    expect((error as ShuffleError).message).toMatch(message);
  }
  const nested = () => encodeRows(nestedExampleBatch());
  const union = () => encodeRows(unionExampleBatch());

  // offsets in the nested example: tags value at 17 (count 17, bitmap 21, slots 22, 26, 30, bytes 34), pt value at 37
  test('a list count that runs past the value', () => expectCorrupt(NESTED_EXAMPLE, nested(), (_, v) => v.setUint32(17, 1000, true), /1000 elements need 4125 bytes of bitmap and slots, the value has 16/));
  test('a huge list count is refused before anything is allocated', () => expectCorrupt(NESTED_EXAMPLE, nested(), (_, v) => v.setUint32(17, 0xffffffff, true), /4294967295 elements/));
  test('a list count smaller than its elements', () => expectCorrupt(NESTED_EXAMPLE, nested(), (_, v) => v.setUint32(17, 2, true), /bytes of a value no element accounts for/));
  test('an element string longer than its list value', () => expectCorrupt(NESTED_EXAMPLE, nested(), (_, v) => v.setUint32(30, 9, true), /a string value claims 9 bytes, 2 are left/));
  test('a nested value longer than its row', () => expectCorrupt(NESTED_EXAMPLE, nested(), (_, v) => v.setUint32(9, 100, true), /field 1 claims 100 bytes/));
  test('a struct value shorter than its bitmap and slots', () => expectCorrupt(NESTED_EXAMPLE, nested(), (b, v) => {
    v.setUint32(0, 36, true);
    v.setUint32(13, 3, true);
    return b.subarray(0, 40);
  }, /struct value of 3 bytes is shorter than its 7 bytes/));
  test('a struct field marked null with a non-Null type mismatching bytes: bytes left over', () => expectCorrupt(NESTED_EXAMPLE, nested(), (b) => void (b[21] = 0b111), /bytes of a value no element accounts for/));
  test('a bad union type id', () => expectCorrupt(UNION_EXAMPLE, union(), (b) => void (b[13] = 3), /union type id 3 is not one of the type's/));
  test('a union type id over 127', () => expectCorrupt(UNION_EXAMPLE, union(), (b) => void (b[13] = 200), /union type id 200/));
  test('a union null flag that is neither 0 nor 1', () => expectCorrupt(UNION_EXAMPLE, union(), (b) => void (b[14] = 7), /null flag is 7/));
  test('a union column marked null', () => expectCorrupt(UNION_EXAMPLE, union(), (b) => void (b[4] = 1), /null field 0 claims 8 bytes|union column is marked null/));
  test('a union child whose string runs past the union value', () => expectCorrupt(UNION_EXAMPLE, union(), (_, v) => v.setUint32(15, 5, true), /a string value claims 5 bytes, 2 are left/));

  test('null fixed-size lists of a huge list size (a header can claim any) are refused once their children pass maxBufferBytes', () => {
    const type = new FixedSizeList(1 << 22, new Field('item', new Int8(), true));
    const schema = new Schema([new Field('f', type, true)]);
    const bytes = Uint8Array.of(1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0).slice(0, 12);
    // one row: length 5 (bitmap: f is null, its 4-byte length slot zero), padded to 12
    new DataView(bytes.buffer).setUint32(0, 5, true);
    const decoder = new RowDecoder(schema, rowLayoutOf(schema.fields));
    const corrupt = (what: string) => new ShuffleError('CS_CORRUPT_DATA', what);
    expect(() => decoder.decode(bytes, 1, corrupt, 1 << 20)).toThrow(/more than the 1048576-byte buffer limit/);
    // within the limit the same row decodes, and the budget does not leak into the next decode
    const [batch] = decoder.decode(bytes, 1, corrupt, 1 << 24);
    expect(batch!.getChild('f')!.get(0)).toBeNull();
    expect(batch!.getChild('f')!.data[0]!.children[0]!.length).toBe(1 << 22);
  });

  test('random corruption of nested rows is CS_CORRUPT_DATA or decodes, never another error, a hang or an out-of-bounds read', () => {
    const rng = new Rng(0xbad);
    for (let round = 0; round < 30; round++) {
      const kind = NESTED_KINDS[round % NESTED_KINDS.length]!;
      const type = nestedType(kind, rng, 3, 0.7);
      const schema = new Schema([new Field('a', type, true), new Field('s', new Utf8(), true)]);
      const rows = rng.int(1, 20);
      const batch = batchOf(schema, [buildAny(type, rows, rng, { nullRate: 0.2 }), buildColumn(new Utf8(), rows, { bitmap: true, nullRate: 0.2 }, rng)], rows);
      const bytes = encodeRows(batch);
      for (let k = 0; k < 40; k++) {
        const edited = bytes.slice();
        const flips = rng.int(1, 3);
        for (let f = 0; f < flips; f++) edited[rng.int(0, edited.length - 1)] = rng.chance(0.5) ? rng.int(0, 255) : edited[rng.int(0, edited.length - 1)]! ^ (1 << rng.int(0, 7));
        try {
          decodeAll(schema, edited, rows);
        } catch (error) {
          if (!(error instanceof ShuffleError) || error.code !== 'CS_CORRUPT_DATA') throw new Error(`${String(type)}: ${String(error)}`);
        }
      }
    }
  });
});

describe('the decoder refuses inconsistent rows', () => {
  /** The example's two rows with one edit; the decoder must say CS_CORRUPT_DATA matching `message`. */
  function expectCorrupt(edit: (bytes: Uint8Array, view: DataView) => Uint8Array | void, message: RegExp, rows = 2): void {
    const bytes = encodeRows(exampleBatch()).slice();
    const edited = edit(bytes, new DataView(bytes.buffer)) ?? bytes;
    let error: unknown;
    try {
      decode(EXAMPLE, edited, rows);
    } catch (e) {
      error = e;
    }
    expect(error, 'the decoder accepted the edited block').toBeInstanceOf(ShuffleError);
    expect((error as ShuffleError).code).toBe('CS_CORRUPT_DATA');
    expect((error as ShuffleError).message).toMatch(message);
  }

  test('a row length below the fixed part of a row', () => expectCorrupt((_, v) => v.setUint32(0, 3, true), /row 0 claims 3 bytes/));
  test('a row length past the end of the block', () => expectCorrupt((_, v) => v.setUint32(16, 1000, true), /row 1 claims 1000 bytes/));
  test('more rows than the block holds', () => expectCorrupt(() => undefined, /row 2 of 3 starts past the end/, 3));
  test('bytes after the last row', () => expectCorrupt((b) => Uint8Array.from([...b, 0, 0, 0, 0]), /4 bytes follow/));
  test('a string longer than what is left of its row', () => expectCorrupt((_, v) => v.setUint32(9, 3, true), /field 1 claims 3 bytes, its row has 2 left/));
  test('a string shorter than its row, leaving bytes no field accounts for', () => expectCorrupt((_, v) => v.setUint32(9, 1, true), /row 0 has 1 bytes no field accounts for/));
  test('a null string with a length', () => expectCorrupt((_, v) => v.setUint32(16 + 9, 1, true), /null field 1 claims 1 bytes/));
  test('a Bool that is neither 0 nor 1', () => expectCorrupt((b) => void (b[13] = 2), /Bool field 2 holds 2/));
  test('a non-null row of a Null column', () => {
    const schema = new Schema([new Field('n', new Null())]);
    const bytes = encodeRows(batchOf(schema, [makeData({ type: new Null(), length: 2 })], 2)).slice();
    expect(hex(bytes)).toBe('01 00 00 00 01 00 00 00 01 00 00 00 01 00 00 00'); // length 1: the bitmap, null bit set; padded to 8
    bytes[8 + 4] = 0;
    expect(() => decode(schema, bytes, 2)).toThrow(/row 1: field 0 is of type Null but its null bit is clear/);
  });
});
