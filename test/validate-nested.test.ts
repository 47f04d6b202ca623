/**
 * Nested columns read from IPC bytes are checked before anyone indexes into them: an
 * inconsistent list, struct, union, fixed-size list or dictionary (as another writer or a
 * damaged file could produce) is CS_CORRUPT_DATA saying what is wrong, never a crash,
 * a wrong value or an out-of-bounds read.
 */
import { Bool, type Data, type DataType, DenseUnion, Dictionary, Field, FixedSizeList, Int32, List, makeData, Schema, SparseUnion, Struct, Utf8, Utf8View } from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import { ShuffleError } from '../src/errors.js';
import { encodeRecordBatchMessage, encodeSchemaMessage, END_OF_STREAM, type FieldNodeInfo } from '../src/format/ipc-message.js';
import { readIpcStream } from '../src/format/ipc-reader.js';
import { columnInconsistency } from '../src/format/validate-column.js';

const i32 = (...values: number[]) => new Uint8Array(Int32Array.from(values).buffer);
const i8 = (...values: number[]) => new Uint8Array(Int8Array.from(values).buffer);
const NONE = new Uint8Array(0);

interface Body {
  rows: number;
  nodes: FieldNodeInfo[];
  buffers: Uint8Array[];
}

async function streamOf(schema: Schema, batch: Body, dictionary?: { id: number } & Body): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [encodeSchemaMessage(schema)];
  if (dictionary !== undefined) chunks.push(...(await encodeRecordBatchMessage(dictionary.rows, dictionary.nodes, dictionary.buffers, null, undefined, { id: dictionary.id, isDelta: false })).chunks);
  chunks.push(...(await encodeRecordBatchMessage(batch.rows, batch.nodes, batch.buffers, null)).chunks, END_OF_STREAM);
  return Buffer.concat(chunks);
}

async function readError(bytes: Uint8Array): Promise<ShuffleError> {
  try {
    for await (const batch of readIpcStream(bytes)) void batch;
  } catch (error) {
    expect(error).toBeInstanceOf(ShuffleError);
    expect((error as ShuffleError).code).toBe('CS_CORRUPT_DATA');
    return error as ShuffleError;
  }
  throw new Error('the stream was read without an error');
}

const node = (length: number, nullCount = 0): FieldNodeInfo => ({ length, nullCount });
const list = new List(new Field('item', new Int32(), true));

describe('inconsistent nested columns are CS_CORRUPT_DATA', () => {
  test('a list whose last offset lies beyond its child', async () => {
    const schema = new Schema([new Field('l', list)]);
    const bytes = await streamOf(schema, { rows: 2, nodes: [node(2), node(3)], buffers: [NONE, i32(0, 1, 9), NONE, i32(1, 2, 3)] });
    expect((await readError(bytes)).message).toMatch(/last offset 9 lies beyond its 3 child rows/);
  });

  // arrow-js loads a view column with its null count unknown, whatever the message says, and counts the
  // bitmap's zero bits when asked for it: past the bitmap's end if it is short and nothing checked it first
  test.each([
    ['at the top level', false],
    ['as a struct child', true],
  ])('a Utf8View column %s whose validity bitmap is shorter than its rows', async (_, nested) => {
    const views = new Uint8Array(20 * 16); // 20 empty inline values
    const column = { length: 20, nullCount: 3, variadicBuffers: 0 };
    const field = new Field('v', new Utf8View(), true);
    const schema = new Schema([nested ? new Field('s', new Struct([field])) : field]);
    const body = nested
      ? { rows: 20, nodes: [node(20), column], buffers: [NONE, new Uint8Array([0xf8]), views] }
      : { rows: 20, nodes: [column], buffers: [new Uint8Array([0xf8]), views] };
    expect((await readError(await streamOf(schema, body))).message).toMatch(/validity bitmap holds 8 bits for 20 rows/);
  });

  test('a list whose offsets decrease', async () => {
    const schema = new Schema([new Field('l', list)]);
    const bytes = await streamOf(schema, { rows: 2, nodes: [node(2), node(3)], buffers: [NONE, i32(0, 3, 1), NONE, i32(1, 2, 3)] });
    expect((await readError(bytes)).message).toMatch(/offsets decrease/);
  });

  test('a struct whose child is shorter than the struct', async () => {
    const schema = new Schema([new Field('s', new Struct([new Field('a', new Int32(), true)]))]);
    const bytes = await streamOf(schema, { rows: 3, nodes: [node(3), node(1)], buffers: [NONE, NONE, i32(7)] });
    expect((await readError(bytes)).message).toMatch(/record batch has 3 rows|child 0 has 1 rows for 3/);
  });

  test('a fixed-size list whose child cannot hold rows x listSize values', async () => {
    const schema = new Schema([new Field('f', new FixedSizeList(2, new Field('item', new Int32(), true)))]);
    const bytes = await streamOf(schema, { rows: 2, nodes: [node(2), node(3)], buffers: [NONE, NONE, i32(1, 2, 3)] });
    expect((await readError(bytes)).message).toMatch(/child has 3 rows for 2 lists of 2/);
  });

  test('a sparse union row with a type id the union does not declare', async () => {
    const schema = new Schema([new Field('u', new SparseUnion([0, 5], [new Field('a', new Int32(), true), new Field('b', new Int32(), true)]))]);
    const bytes = await streamOf(schema, { rows: 2, nodes: [node(2), node(2), node(2)], buffers: [i8(0, 3, 0, 0), NONE, i32(1, 2), NONE, i32(3, 4)] });
    expect((await readError(bytes)).message).toMatch(/row 1 has type id 3/);
  });

  test('a dense union offset beyond its child', async () => {
    const schema = new Schema([new Field('u', new DenseUnion([0, 1], [new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]))]);
    const bytes = await streamOf(schema, { rows: 2, nodes: [node(2), node(1), node(1)], buffers: [i8(0, 0, 0, 0), i32(0, 4), NONE, i32(1), NONE, i32(0, 1), new Uint8Array([120])] });
    expect((await readError(bytes)).message).toMatch(/row 1 points at row 4 of a child with 1/);
  });

  test('a dictionary index beyond the dictionary', async () => {
    const type = new Dictionary(new Utf8(), new Int32(), 3);
    const schema = new Schema([new Field('d', type)]);
    const dictionary = { id: 3, rows: 2, nodes: [node(2)], buffers: [NONE, i32(0, 1, 2), new Uint8Array([97, 98])] };
    const bytes = await streamOf(schema, { rows: 2, nodes: [node(2)], buffers: [NONE, i32(1, 2)] }, dictionary);
    expect((await readError(bytes)).message).toMatch(/row 1 points at dictionary value 2 of 2/);
  });

  test('a dictionary batch whose values are themselves inconsistent', async () => {
    const type = new Dictionary(new Utf8(), new Int32(), 3);
    const schema = new Schema([new Field('d', type)]);
    const dictionary = { id: 3, rows: 2, nodes: [node(2)], buffers: [NONE, i32(0, 1, 50), new Uint8Array([97, 98])] };
    const bytes = await streamOf(schema, { rows: 1, nodes: [node(1)], buffers: [NONE, i32(0)] }, dictionary);
    expect((await readError(bytes)).message).toMatch(/dictionary 3 is inconsistent: its last offset 50/);
  });
});

// Each check of validate-column.ts pinned at its limit: the largest column it must still accept reads back
// right, and the same column one element short (or one past) is refused, naming that check. Moving any
// bound by one flips one of the two.
const utf8 = (text: string) => new TextEncoder().encode(text);
const bits = (...bytes: number[]) => new Uint8Array(bytes);
/** A Utf8View view of an inline value (at most 12 bytes): its length, then the bytes. */
const inlineView = (text: string) => {
  const view = new Uint8Array(16);
  new DataView(view.buffer).setInt32(0, text.length, true);
  view.set(utf8(text), 4);
  return view;
};
const sparse = (b: DataType) => new SparseUnion([0, 5], [new Field('a', new Int32(), true), new Field('b', b, true)]);
const dense = new DenseUnion([0, 1], [new Field('a', new Int32(), true), new Field('b', new Int32(), true)]);
const dictionaryOf = { id: 3, rows: 2, nodes: [node(2)], buffers: [NONE, i32(0, 1, 2), utf8('ab')] };

async function columnOf(bytes: Uint8Array): Promise<unknown[]> {
  const values: unknown[] = [];
  for await (const batch of readIpcStream(bytes)) {
    for (const value of batch.getChildAt(0)!) values.push(value !== null && typeof value === 'object' ? JSON.parse(JSON.stringify(value)) : value); // a struct row as a plain object
  }
  return values;
}

interface Limit {
  claim: string;
  type: DataType;
  /** the column at the limit, still consistent, and the values it reads back as */
  valid: Body;
  reads: unknown[];
  /** the same column one element short or one past */
  invalid: Body;
  error: RegExp;
  dictionary?: { id: number } & Body;
}

const limits: Limit[] = [
  {
    // bits are whole bytes: the pairs below differ by one row, not one byte, so a bound moved either way shows
    claim: 'a validity bitmap of 1 byte holds 8 rows; 9 rows are refused',
    type: new Int32(),
    valid: { rows: 8, nodes: [node(8, 1)], buffers: [bits(0x7f), i32(1, 2, 3, 4, 5, 6, 7, 8)] },
    reads: [1, 2, 3, 4, 5, 6, 7, null],
    invalid: { rows: 9, nodes: [node(9, 1)], buffers: [bits(0x7f), i32(1, 2, 3, 4, 5, 6, 7, 8, 9)] },
    error: /column 0 \("c"\) is inconsistent: its validity bitmap holds 8 bits for 9 rows/,
  },
  {
    claim: 'a Bool value byte holds 8 rows; 9 rows are refused',
    type: new Bool(),
    valid: { rows: 8, nodes: [node(8)], buffers: [NONE, bits(0b10101011)] },
    reads: [true, true, false, true, false, true, false, true],
    invalid: { rows: 9, nodes: [node(9)], buffers: [NONE, bits(0b10101011)] },
    error: /column 0 \("c"\) is inconsistent: its values hold 8 bits for 9 rows/,
  },
  {
    claim: 'an Int32 column of 3 rows is held by 12 value bytes; 8 bytes are refused',
    type: new Int32(),
    valid: { rows: 3, nodes: [node(3)], buffers: [NONE, i32(1, 2, 3)] },
    reads: [1, 2, 3],
    invalid: { rows: 3, nodes: [node(3)], buffers: [NONE, i32(1, 2)] },
    error: /column 0 \("c"\) is inconsistent: its values hold 8 bytes for 3 rows of 4/,
  },
  {
    claim: 'a struct of 3 rows holds a child of 3 rows; a child of 2 is refused',
    type: new Struct([new Field('a', new Int32(), true)]),
    valid: { rows: 3, nodes: [node(3), node(3)], buffers: [NONE, NONE, i32(7, 8, 9)] },
    reads: [{ a: 7 }, { a: 8 }, { a: 9 }],
    invalid: { rows: 3, nodes: [node(3), node(2)], buffers: [NONE, NONE, i32(7, 8)] },
    error: /column 0 \("c"\) is inconsistent: its child 0 has 2 rows for 3/,
  },
  {
    // the last row null: the index loop skips it, so only the length check can see the missing index
    claim: 'a dictionary column of 3 rows (the last null) is held by 12 index bytes; 8 bytes are refused',
    type: new Dictionary(new Utf8(), new Int32(), 3),
    dictionary: dictionaryOf,
    valid: { rows: 3, nodes: [node(3, 1)], buffers: [bits(0b011), i32(1, 0, 0)] },
    reads: ['b', 'a', null],
    invalid: { rows: 3, nodes: [node(3, 1)], buffers: [bits(0b011), i32(1, 0)] },
    error: /column 0 \("c"\) is inconsistent: its indices hold 8 bytes for 3 rows of 4/,
  },
  {
    claim: 'a Utf8View column of 2 rows (the last null) is held by 32 view bytes; 16 bytes are refused',
    type: new Utf8View(),
    valid: { rows: 2, nodes: [{ length: 2, nullCount: 1, variadicBuffers: 0 }], buffers: [bits(0b01), Buffer.concat([inlineView('ab'), new Uint8Array(16)])] },
    reads: ['ab', null],
    invalid: { rows: 2, nodes: [{ length: 2, nullCount: 1, variadicBuffers: 0 }], buffers: [bits(0b01), inlineView('ab')] },
    error: /column 0 \("c"\) is inconsistent: its views hold 16 bytes for 2 rows of 16/,
  },
  {
    claim: 'a Utf8 column of 2 rows needs 3 offsets; 2 are refused',
    type: new Utf8(),
    valid: { rows: 2, nodes: [node(2)], buffers: [NONE, i32(0, 1, 2), utf8('ab')] },
    reads: ['a', 'b'],
    invalid: { rows: 2, nodes: [node(2)], buffers: [NONE, i32(0, 1), utf8('ab')] },
    error: /column 0 \("c"\) is inconsistent: it has 2 offsets for 2 rows/,
  },
  {
    claim: 'offsets may start at 0; a first offset of -1 is refused',
    type: new Utf8(),
    valid: { rows: 2, nodes: [node(2)], buffers: [NONE, i32(0, 1, 2), utf8('ab')] },
    reads: ['a', 'b'],
    invalid: { rows: 2, nodes: [node(2)], buffers: [NONE, i32(-1, 1, 2), utf8('ab')] },
    error: /column 0 \("c"\) is inconsistent: its first offset is -1/,
  },
  {
    claim: 'offsets may repeat (an empty value); offsets decreasing by 1 are refused',
    type: new Utf8(),
    valid: { rows: 2, nodes: [node(2)], buffers: [NONE, i32(0, 3, 3), utf8('abc')] },
    reads: ['abc', ''],
    invalid: { rows: 2, nodes: [node(2)], buffers: [NONE, i32(0, 3, 2), utf8('abc')] },
    error: /column 0 \("c"\) is inconsistent: its offsets decrease at row 1/,
  },
  {
    claim: 'the last offset may equal the data length (4); 5 is refused',
    type: new Utf8(),
    valid: { rows: 2, nodes: [node(2)], buffers: [NONE, i32(0, 1, 4), utf8('abcd')] },
    reads: ['a', 'bcd'],
    invalid: { rows: 2, nodes: [node(2)], buffers: [NONE, i32(0, 1, 5), utf8('abcd')] },
    error: /column 0 \("c"\) is inconsistent: its last offset 5 lies beyond its 4 data bytes/,
  },
  {
    claim: 'a sparse union of 2 rows needs 2 type ids; 1 is refused',
    type: sparse(new Int32()),
    valid: { rows: 2, nodes: [node(2), node(2), node(2)], buffers: [i8(0, 5), NONE, i32(1, 2), NONE, i32(3, 4)] },
    reads: [1, 4],
    invalid: { rows: 2, nodes: [node(2), node(2), node(2)], buffers: [i8(0), NONE, i32(1, 2), NONE, i32(3, 4)] },
    error: /column 0 \("c"\) is inconsistent: it has 1 type ids for 2 rows/,
  },
  {
    claim: 'a union type id may be 0; -1 is refused',
    type: sparse(new Int32()),
    valid: { rows: 2, nodes: [node(2), node(2), node(2)], buffers: [i8(5, 0), NONE, i32(1, 2), NONE, i32(3, 4)] },
    reads: [3, 2],
    invalid: { rows: 2, nodes: [node(2), node(2), node(2)], buffers: [i8(5, -1), NONE, i32(1, 2), NONE, i32(3, 4)] },
    error: /column 0 \("c"\) is inconsistent: row 1 has type id -1, which the union does not declare/,
  },
  {
    claim: 'a dense union offset may be its child length - 1 (1 of 2); 2 is refused',
    type: dense,
    valid: { rows: 2, nodes: [node(2), node(1), node(2)], buffers: [i8(0, 1), i32(0, 1), NONE, i32(10), NONE, i32(20, 21)] },
    reads: [10, 21],
    invalid: { rows: 2, nodes: [node(2), node(1), node(2)], buffers: [i8(0, 1), i32(0, 2), NONE, i32(10), NONE, i32(20, 21)] },
    error: /column 0 \("c"\) is inconsistent: row 1 points at row 2 of a child with 2/,
  },
  {
    claim: 'a dense union offset may be 0; -1 is refused',
    type: dense,
    valid: { rows: 2, nodes: [node(2), node(1), node(2)], buffers: [i8(0, 1), i32(0, 0), NONE, i32(10), NONE, i32(20, 21)] },
    reads: [10, 20],
    invalid: { rows: 2, nodes: [node(2), node(1), node(2)], buffers: [i8(0, 1), i32(0, -1), NONE, i32(10), NONE, i32(20, 21)] },
    error: /column 0 \("c"\) is inconsistent: row 1 points at row -1 of a child with 2/,
  },
  {
    claim: 'a sparse union of 2 rows holds children of 2 rows; a child of 1 is refused',
    type: sparse(new Int32()),
    valid: { rows: 2, nodes: [node(2), node(2), node(2)], buffers: [i8(0, 5), NONE, i32(1, 2), NONE, i32(3, 4)] },
    reads: [1, 4],
    invalid: { rows: 2, nodes: [node(2), node(2), node(1)], buffers: [i8(0, 5), NONE, i32(1, 2), NONE, i32(3)] },
    error: /column 0 \("c"\) is inconsistent: its child 1 has 1 rows for 2/,
  },
  {
    claim: "a union child is checked too: its Utf8 child's last offset may be 2 over 2 bytes; 3 is refused",
    type: sparse(new Utf8()),
    valid: { rows: 2, nodes: [node(2), node(2), node(2)], buffers: [i8(0, 5), NONE, i32(1, 2), NONE, i32(0, 1, 2), utf8('xy')] },
    reads: [1, 'y'],
    invalid: { rows: 2, nodes: [node(2), node(2), node(2)], buffers: [i8(0, 5), NONE, i32(1, 2), NONE, i32(0, 1, 3), utf8('xy')] },
    error: /column 0 \("c"\) is inconsistent: its child 1: its last offset 3 lies beyond its 2 data bytes/,
  },
];

describe('each consistency check holds exactly at its limit', () => {
  test.each(limits)('$claim', async ({ type, valid, reads, invalid, error, dictionary }) => {
    const schema = new Schema([new Field('c', type, true)]);
    expect(await columnOf(await streamOf(schema, valid, dictionary))).toEqual(reads);
    expect((await readError(await streamOf(schema, invalid, dictionary))).message).toMatch(error);
  });

  // Columns a writer is handed are built in memory and may be slices (offset > 0) or miss children, which
  // IPC bytes never give: checked by the same function, called as the writers call it.
  const int32s = (rows: number, bitmapBytes: number) => makeData({ type: new Int32(), length: rows, nullCount: 1, nullBitmap: new Uint8Array(bitmapBytes).fill(0xff, 0, bitmapBytes - 1).fill(0x7f, bitmapBytes - 1), data: new Int32Array(rows) });
  const writerInput = (data: Data) => columnInconsistency(data, { dictionaryIndices: false });
  test.each([
    ['a column sliced to rows 8..16 needs a validity bitmap of 2 bytes; 1 byte is refused', (bytes: number) => int32s(16, bytes).slice(8, 8), /^its validity bitmap holds 8 bits for 16 rows$/],
    [
      "a list's child sliced to rows 8..16 needs a validity bitmap of 2 bytes; 1 byte is refused",
      (bytes: number) => makeData({ type: list, length: 1, nullCount: 0, valueOffsets: Int32Array.from([0, 8]), child: int32s(16, bytes).slice(8, 8) }),
      /^its child: its validity bitmap holds 8 bits for 16 rows$/,
    ],
  ] as const)('%s', (_, column, error) => {
    expect(writerInput(column(2))).toBeNull();
    expect(writerInput(column(1))).toMatch(error);
  });

  test('a sparse union needs all its declared children: with 1 of 2 it is refused, not a TypeError', () => {
    const type = sparse(new Int32());
    const children = [makeData({ type: new Int32(), length: 2, data: Int32Array.from([1, 2]) }), makeData({ type: new Int32(), length: 2, data: Int32Array.from([3, 4]) })];
    const typeIds = Int8Array.from([0, 5]);
    expect(writerInput(makeData({ type, length: 2, nullCount: 0, typeIds, children }))).toBeNull();
    expect(writerInput(makeData({ type, length: 2, nullCount: 0, typeIds, children: children.slice(0, 1) }))).toBe('it has 1 children for 2');
  });
});
