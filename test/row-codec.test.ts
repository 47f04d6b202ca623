/**
 * The compact row format (src/sort-writer/row-layout.ts) at the byte level:
 * the encoder writes exactly the documented bytes, rows of every flat type
 * decode back to the same values (nulls, slices, padded IPC buffers), null
 * slots and padding are zeros whatever was there before, and the decoder
 * refuses every inconsistent length instead of reading past it.
 */
import { describe, expect, test } from 'vitest';
import { Bool, Dictionary, Field, Int32, Int8, List, makeData, Null, Schema, Struct, Utf8, vectorFromArray, type RecordBatch } from 'apache-arrow';
import { ShuffleError } from '../src/errors.js';
import { RowDecoder } from '../src/sort-writer/row-decoder.js';
import { RowEncoder } from '../src/sort-writer/row-encoder.js';
import { rowLayoutOf } from '../src/sort-writer/row-layout.js';
import { columnLayoutOf } from '../src/writer/column-layout.js';
import { prepareSourceColumn } from '../src/writer/source-column.js';
import { batchOf, buildColumn, NO_BITMAP, schemaOf, sequenceColumn, TYPE_CASES } from './support/columns.js';
import { Rng } from './support/random.js';
import { throughIpc } from './support/random-case.js';
import { rowsOf } from './support/rows.js';

/** Encodes every row of `batch` back to back (4-aligned) into `page` (default: a fresh one); returns the bytes used. */
function encodeBatch(batch: RecordBatch, page?: Uint8Array): Uint8Array {
  const fields = batch.schema.fields;
  const layout = rowLayoutOf(fields);
  const encoder = new RowEncoder(layout);
  const sources = fields.map((f, c) => prepareSourceColumn(batch.data.children[c]!, columnLayoutOf(f)));
  const n = batch.numRows;
  const rowBytes = new Uint32Array(n);
  const total = encoder.measure(sources, n, rowBytes);
  const target = page ?? new Uint8Array(total);
  const rowStart = new Uint32Array(n);
  let at = 0;
  for (let i = 0; i < n; i++) {
    rowStart[i] = at;
    at += (rowBytes[i]! + 3) & ~3;
  }
  expect(at).toBe(total);
  // rows encoded in reverse order: the encoder takes any order of row ids and places each row where rowStart says
  const ids = Uint32Array.from({ length: n }, (_, i) => n - 1 - i);
  encoder.encode(sources, ids, 0, n, target, new DataView(target.buffer, target.byteOffset, target.byteLength), rowStart, rowBytes, new Uint32Array(n));
  return target.subarray(0, total);
}

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
    const bytes = encodeBatch(exampleBatch());
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
    expect(hex(encodeBatch(exampleBatch(), page))).toBe(hex(encodeBatch(exampleBatch())));
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
      const bytes = encodeBatch(batch);
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

describe('nested and dictionary columns are refused naming the column', () => {
  test.each([
    ['a list', new Field('tags', new List(new Field('item', new Int32(), true)))],
    ['a struct', new Field('point', new Struct([new Field('x', new Int32())]))],
    ['a dictionary', new Field('city', new Dictionary(new Utf8(), new Int8()))],
  ])('%s column is CS_UNSUPPORTED_TYPE', (_, field) => {
    let error: unknown;
    try {
      rowLayoutOf([new Field('ok', new Int32()), field]);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ShuffleError);
    expect((error as ShuffleError).code).toBe('CS_UNSUPPORTED_TYPE');
    expect((error as ShuffleError).where.column).toBe(field.name);
  });

  test('the same list column built from data is refused too', () => {
    const list = vectorFromArray([[1], [2, 3]], new List(new Field('item', new Int32(), true)));
    expect(() => rowLayoutOf([new Field('l', list.type)])).toThrow(/sort writer|nested/);
  });
});

describe('the decoder refuses inconsistent rows', () => {
  /** The example's two rows with one edit; the decoder must say CS_CORRUPT_DATA matching `message`. */
  function expectCorrupt(edit: (bytes: Uint8Array, view: DataView) => Uint8Array | void, message: RegExp, rows = 2): void {
    const bytes = encodeBatch(exampleBatch()).slice();
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
    const bytes = encodeBatch(batchOf(schema, [makeData({ type: new Null(), length: 2 })], 2)).slice();
    expect(hex(bytes)).toBe('01 00 00 00 01 00 00 00 01 00 00 00 01 00 00 00'); // length 1: the bitmap, null bit set; padded to 8
    bytes[8 + 4] = 0;
    expect(() => decode(schema, bytes, 2)).toThrow(/row 1: field 0 is of type Null but its null bit is clear/);
  });
});
