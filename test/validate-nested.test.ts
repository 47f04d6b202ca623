/**
 * Nested columns read from IPC bytes are checked before anyone indexes into them: an
 * inconsistent list, struct, union, fixed-size list or dictionary (as another writer or a
 * damaged file could produce) is CS_CORRUPT_DATA saying what is wrong, never a crash,
 * a wrong value or an out-of-bounds read.
 */
import { DenseUnion, Dictionary, Field, FixedSizeList, Int32, List, Schema, SparseUnion, Struct, Utf8, Utf8View } from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import { ShuffleError } from '../src/errors.js';
import { encodeRecordBatchMessage, encodeSchemaMessage, END_OF_STREAM, type FieldNodeInfo } from '../src/format/ipc-message.js';
import { readIpcStream } from '../src/format/ipc-reader.js';

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
