/**
 * The dictionary contract, second pass: what test/dictionary-contract.test.ts leaves out.
 * Fields that share one dictionary id, dictionaries nested in struct, list, map and union
 * children, every index width signed and unsigned, sliced index columns, null rows whose
 * index holds garbage, and the memory the writer's dictionary tracker reserves.
 *
 * Each test pins a gap found by the second mutation sweep of the dictionary handling
 * (src/writer/dictionary-tracker.ts, src/writer/split-dictionary.ts,
 * src/writer/dictionary-indices.ts, src/reader/held-dictionary.ts): a small change to the
 * source that no earlier test noticed; each test was checked to fail against its change
 * (docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps").
 *
 * The sweep found that columns sharing a dictionary id with index types of different widths
 * let the narrower one's indices wrap when the wider came first (writer and reduce side); the
 * tests of "fields that share one dictionary id" claim the fix, and the sort writer's side of
 * it: its reader keeps a batch's dictionary within the narrowest type, retries with fewer rows
 * where a later column fills the dictionary first (it refused valid rows as corrupt), and its
 * writer refuses a schema one row of which could not fit.
 *
 * Expected values never come from the code under test: the input rows are made canonical
 * strings from arrow-js's own values (test/support/js-values.ts: `Vector.get`, 64-bit
 * dictionary indices decoded by hand), and a partition's bytes are read back by arrow-js's
 * `tableFromIPC` and made strings the same way. Memory figures are worked by hand from the
 * arrays the tracker keeps.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Bool, Dictionary, Field, FixedSizeBinary, FixedSizeList, Int16, LargeUtf8, MessageReader, Utf8View, Int32, Int64, Int8, List, Map_, RecordBatch, Schema, SparseUnion, Struct, Uint16, Uint32, Uint64, Uint8, Utf8, Vector,
  makeData, tableFromIPC, vectorFromArray, type Data, type DataType,
} from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { BatchCoalescer } from '../src/reader/batch-coalescer.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { columnLayoutOf, dictionaryLayouts } from '../src/writer/column-layout.js';
import { DictionaryTracker } from '../src/writer/dictionary-tracker.js';
import { ShuffleWriter } from '../src/writer/shuffle-writer.js';
import { createShuffleWriter } from '../src/writer-kind.js';
import { unreadableSharedDictionary } from '../src/sort-writer/shared-dictionaries.js';
import { indicesOf, strings, words, type IndexType } from './support/dictionary-columns.js';
import { canonical, expectedByPid, jsRows, jsRowsWithoutPid, valueAt } from './support/js-values.js';

let dir: string;
beforeEach(async () => (dir = await mkdtemp(join(tmpdir(), 'cs-dict-second-'))));
afterEach(async () => rm(dir, { recursive: true, force: true }));

/** A batch of `schema` (its first field the partition id `pid`): rows sent to pids[i] (0 by default). */
function batchOf(schema: Schema, columns: readonly Data[], pids?: readonly number[]): RecordBatch {
  const n = columns[0]!.length;
  const pid = makeData({ type: new Int32(), length: n, data: Int32Array.from({ length: n }, (_, i) => pids?.[i] ?? 0) });
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: [pid, ...columns] }));
}

function schemaOf(...fields: Field[]): Schema {
  return new Schema([new Field('pid', new Int32(), false), ...fields]);
}

/** The rows arrow-js reads from a partition's stream, as canonical strings. */
function arrowRows(bytes: Uint8Array): string[] {
  return bytes.byteLength === 0 ? [] : tableFromIPC(bytes).batches.flatMap(jsRows);
}

/** Writes `batches` uncompressed with partition ids from `pid`; every partition's bytes. */
async function write(batches: readonly RecordBatch[], numPartitions = 1, options: Record<string, unknown> = {}): Promise<Uint8Array[]> {
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, overwrite: true, codec: 'none', ...options });
  for (const b of batches) await writer.write(b);
  await writer.finish();
  const reader = await ShuffleReader.open(prefix);
  try {
    const bytes: Uint8Array[] = [];
    for (let p = 0; p < numPartitions; p++) bytes.push(await reader.partitionBytes(p));
    return bytes;
  } finally {
    await reader.close();
  }
}

/** Writes `batches` and checks that arrow-js reads back every partition's input rows, in order. */
async function roundTrip(batches: readonly RecordBatch[], numPartitions = 1, options: Record<string, unknown> = {}): Promise<void> {
  const bytes = await write(batches, numPartitions, { maxBatchRows: 2, ...options });
  const expected = expectedByPid(batches, numPartitions);
  for (let p = 0; p < numPartitions; p++) expect(arrowRows(bytes[p]!), `partition ${p}`).toEqual(expected[p]);
}

/** The dictionary batches of a stream, in order, walked with apache-arrow's MessageReader: [isDelta, values]. */
function dictionaryBatches(bytes: Uint8Array): Array<[boolean, number]> {
  const reader = new MessageReader(bytes);
  const out: Array<[boolean, number]> = [];
  for (let r = reader.next(); !r.done; r = reader.next()) {
    const msg = r.value;
    if (msg.isDictionaryBatch()) out.push([msg.header().isDelta, Number(msg.header().data.length)]);
    reader.readMessageBody(Number(msg.bodyLength));
  }
  return out;
}

describe('empty dictionaries and null rows', () => {
  test('batches that each bring a new, empty dictionary (every row null): one empty dictionary batch, then none until values come, as one delta', async () => {
    const type = new Dictionary(new Utf8(), new Int32(), 7);
    const schema = schemaOf(new Field('d', type, true));
    const batches = [
      ...[0, 1, 2].map(() => batchOf(schema, [indicesOf(type, strings([]), [null, null], 5)])),
      batchOf(schema, [indicesOf(type, strings(['x', 'y']), [1, null, 0], -9)]),
    ];
    const bytes = await write(batches, 1, { maxBatchRows: 1 });
    expect(arrowRows(bytes[0]!)).toEqual(expectedByPid(batches, 1)[0]);
    expect(dictionaryBatches(bytes[0]!)).toEqual([[false, 0], [true, 2]]);
  });
});

describe('delta updates across batches', () => {
  test('a rebuilt vector of the same values, then an IPC extension of that rebuilt vector (its chunks plus one): only the one new value is sent, as a delta', async () => {
    const type = new Dictionary(new Utf8(), new Int32(), 7);
    const schema = schemaOf(new Field('d', type, true));
    const rebuilt = strings(['a', 'b']);
    const extended = new Vector([...rebuilt.data, ...strings(['c']).data]);
    const batches = [
      batchOf(schema, [indicesOf(type, strings(['a', 'b']), [1, 0])]),
      batchOf(schema, [indicesOf(type, rebuilt, [0, 1])]),
      batchOf(schema, [indicesOf(type, extended, [2, 1, null])]),
    ];
    const bytes = await write(batches, 1, { maxBatchRows: 1 });
    expect(arrowRows(bytes[0]!)).toEqual(expectedByPid(batches, 1)[0]);
    expect(dictionaryBatches(bytes[0]!)).toEqual([[false, 2], [true, 1]]);
  });
});

describe('a rebuilt single-chunk dictionary compared value by value: slices, nulls, bools', () => {
  /** Writes one batch per dictionary (each row pointing at every value of it, the last one first) and returns the dictionary batches sent. */
  async function sentFor(valueType: DataType, dictionaries: readonly Vector[]): Promise<Array<[boolean, number]>> {
    const type = new Dictionary(valueType, new Int32(), 7);
    const schema = schemaOf(new Field('d', type, true));
    const batches = dictionaries.map((d) => batchOf(schema, [indicesOf(type, d, Array.from({ length: d.length }, (_, i) => d.length - 1 - i))]));
    const bytes = await write(batches, 1, { maxBatchRows: 1 });
    expect(arrowRows(bytes[0]!)).toEqual(expectedByPid(batches, 1)[0]);
    return dictionaryBatches(bytes[0]!);
  }

  test('utf8 with nulls: a sliced dictionary, its rebuilt extension, then a sliced extension of that: each sends only its one new value', async () => {
    const held = strings(['z', 'z', 'z', 'a', null, 'b', null]).slice(3);
    const rebuilt = strings(['a', null, 'b', null, 'c']);
    const sliced = strings(['zz', 'zz', 'zz', 'a', null, 'b', null, 'c', 'd']).slice(3);
    expect(await sentFor(new Utf8(), [held, rebuilt, sliced])).toEqual([[false, 4], [true, 1], [true, 1]]);
  });

  test('utf8: a value that differs after a null is another value ([a, null, b] then [a, null, x, y]: appended whole, rows read x)', async () => {
    expect(await sentFor(new Utf8(), [strings(['a', null, 'b']), strings(['a', null, 'x', 'y'])])).toEqual([[false, 3], [true, 4]]);
  });

  test('large utf8 (64-bit offsets): [ab, c] then [ab, x, d] differ in their second value: appended whole, rows read x; [ab, c, d] is an extension', async () => {
    const large = (v: string[]) => vectorFromArray(v, new LargeUtf8()) as Vector;
    expect(await sentFor(new LargeUtf8(), [large(['ab', 'c']), large(['ab', 'x', 'd'])])).toEqual([[false, 2], [true, 3]]);
    expect(await sentFor(new LargeUtf8(), [large(['ab', 'c']), large(['ab', 'c', 'd'])])).toEqual([[false, 2], [true, 1]]);
  });

  test('utf8view: a sliced dictionary (views 2.. of a longer one) extending the held values sends only its new value', async () => {
    const views = (values: readonly string[]): Vector => {
      const bytes = new Uint8Array(16 * values.length);
      const dv = new DataView(bytes.buffer);
      values.forEach((v, i) => {
        const b = new TextEncoder().encode(v);
        dv.setInt32(16 * i, b.length, true);
        bytes.set(b, 16 * i + 4);
      });
      return new Vector([makeData({ type: new Utf8View(), length: values.length, views: bytes, variadicBuffers: [] } as never) as Data]);
    };
    expect(await sentFor(new Utf8View(), [views(['ab', 'c']), views(['zz', 'zz', 'ab', 'c', 'd']).slice(2)])).toEqual([[false, 2], [true, 1]]);
  });

  test('fixed width: a sliced int32 dictionary (values 2.. of [9, 9, 1, 2]) then [1, 2, 3], and fixed-size binary likewise: only the new value is sent', async () => {
    const ints = (v: number[]) => vectorFromArray(v, new Int32()) as Vector;
    expect(await sentFor(new Int32(), [ints([9, 9, 1, 2]).slice(2), ints([1, 2, 3])])).toEqual([[false, 2], [true, 1]]);
    expect(await sentFor(new Int32(), [ints([1, 2]), ints([9, 9, 1, 2, 3]).slice(2)])).toEqual([[false, 2], [true, 1]]);
    const fsb = (v: number[]) => new Vector([makeData({ type: new FixedSizeBinary(3), length: v.length, data: Uint8Array.from(v.flatMap((x) => [x, x + 1, x + 2])) }) as Data]);
    expect(await sentFor(new FixedSizeBinary(3), [fsb([7, 1, 2]).slice(1), fsb([1, 2, 5])])).toEqual([[false, 2], [true, 1]]);
    expect(await sentFor(new FixedSizeBinary(3), [fsb([1, 2]), fsb([1, 4, 5])])).toEqual([[false, 2], [true, 3]]);
  });

  test('bool: a sliced dictionary [true, false] (bits 3.. of its bitmap) then [true, false, true]: only the new value is sent', async () => {
    const bools = (v: boolean[]) => vectorFromArray(v, new Bool()) as Vector;
    expect(await sentFor(new Bool(), [bools([false, false, false, true, false]).slice(3), bools([true, false, true])])).toEqual([[false, 2], [true, 1]]);
  });
});

describe('dictionaries whose values are nested or hold nulls', () => {
  test.each(['delta', 'replacement'] as const)('%s updates: list<utf8> values with null lists and null items, extended by IPC chunks, then an unrelated one: every row back', async (updates) => {
    const valueType = new List(new Field('item', new Utf8(), true));
    const type = new Dictionary(valueType, new Int16(), 8);
    const schema = schemaOf(new Field('d', type, true));
    const lists = (rows: Array<Array<string | null> | null>) => vectorFromArray(rows, valueType) as Vector;
    const first = lists([['a', null], null, []]);
    const extended = new Vector([...first.data, ...lists([[null, 'b', 'c'], null]).data]);
    const batches = [
      batchOf(schema, [indicesOf(type, first, [0, 1, null, 2], 9)], [0, 1, 0, 1]),
      batchOf(schema, [indicesOf(type, extended, [3, 4, 0, null], -7)], [1, 0, 0, 1]),
      batchOf(schema, [indicesOf(type, lists([['z'], null, ['y', null]]), [2, 0, 1], 0)], [0, 0, 1]),
    ];
    await roundTrip(batches, 2, { dictionaryUpdates: updates, maxBatchRows: 1 });
  });
});

describe('every index width, signed and unsigned, with sliced index columns', () => {
  const WIDTHS: Array<[string, () => IndexType]> = [
    ['Int8', () => new Int8()], ['Int16', () => new Int16()], ['Int32', () => new Int32()], ['Int64', () => new Int64()],
    ['Uint8', () => new Uint8()], ['Uint16', () => new Uint16()], ['Uint32', () => new Uint32()], ['Uint64', () => new Uint64()],
  ];

  test.each(WIDTHS)('%s: an unrelated dictionary whose index column is a slice (rows 3.. of a longer column, a null among them) is remapped row by row into two partitions', async (_, index) => {
    const type = new Dictionary(new Utf8(), index() as Int32, 9);
    const schema = schemaOf(new Field('d', type, true));
    const first = batchOf(schema, [indicesOf(type, strings(['a', 'b']), [1, 0, 1])], [0, 1, 1]);
    // the rows cut off hold indices 99 and 120: read in place of the slice's, they point outside the dictionary
    const whole = indicesOf(type, strings(['p', 'q', 'r', null]), [99, 120, 99, 2, 0, null, 3, 1], 127);
    const second = batchOf(schema, [whole.slice(3, 5)], [1, 0, 1, 0, 0]);
    await roundTrip([first, second, first], 2, { maxBatchRows: 2 });
  });
});

describe('null rows and indices outside the dictionary', () => {
  test('Int64 indices: null rows holding -1 (high word set) after an unrelated, empty dictionary come out null, their index 0, inside the one-value dictionary', async () => {
    const type = new Dictionary(new Utf8(), new Int64() as unknown as Int32, 7);
    const schema = schemaOf(new Field('d', type, true));
    const batches = [batchOf(schema, [indicesOf(type, strings(['a']), [0])]), batchOf(schema, [indicesOf(type, strings([]), [null, null], -1)])];
    const bytes = await write(batches, 1, { maxBatchRows: 4 });
    expect(arrowRows(bytes[0]!)).toEqual(['"a"', 'null', 'null']);
    const column = tableFromIPC(bytes[0]!).getChild('d')!;
    const indices = column.data.flatMap((d) => [...(d.values as unknown as BigInt64Array)].slice(0, d.length));
    expect(indices).toEqual([0n, 0n, 0n]);
  });

  test('an index buffer longer than its column (99 past the last row, as makeData keeps it): what lies past the last row is no index, the batch is written, every row right', async () => {
    const type = new Dictionary(new Utf8(), new Int8(), 7);
    const schema = schemaOf(new Field('d', type, true));
    const d = makeData({ type, length: 2, data: Int8Array.of(1, 0, 99), dictionary: strings(['a', 'b']) } as never) as Data;
    expect((d.values as Int8Array).length).toBe(3);
    await roundTrip([batchOf(schema, [d])]);
  });

  async function refusal(batch: RecordBatch): Promise<unknown> {
    const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: join(dir, 'refused') });
    try {
      await writer.write(batch);
      return null;
    } catch (e) {
      return e;
    } finally {
      await writer.abort();
    }
  }

  test('Int64 indices: a valid row pointing at value 2 of a 2-value dictionary is refused (one past the end)', async () => {
    const type = new Dictionary(new Utf8(), new Int64() as unknown as Int32, 7);
    const batch = batchOf(schemaOf(new Field('d', type, true)), [indicesOf(type, strings(['a', 'b']), [1, 0, 2])]);
    expect(await refusal(batch)).toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('row 2 of the dictionary column "d" points at value 2') });
  });

  test('a dictionary in a struct\'s second field and in a map\'s values: a valid row pointing outside is refused, naming the nested column', async () => {
    const inStruct = new Dictionary(new Utf8(), new Int32(), 3);
    const struct = new Struct([new Field('n', new Int32(), true), new Field('d', inStruct, true)]);
    const ints = makeData({ type: new Int32(), length: 2, data: Int32Array.of(1, 2) });
    const s = makeData({ type: struct, length: 2, nullCount: 0, children: [ints, indicesOf(inStruct, strings(['a', 'b']), [1, 5])] });
    expect(await refusal(batchOf(schemaOf(new Field('s', struct, true)), [s]))).toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('"s.d" points at value 5') });

    const inMap = new Dictionary(new Utf8(), new Int16(), 4);
    const map = new Map_(new Field('entries', new Struct([new Field('key', new Utf8(), false), new Field('value', inMap, true)]), false) as never);
    const keys = vectorFromArray(['k0', 'k1'], new Utf8()).data[0]!;
    const entries = makeData({ type: map.children[0]!.type as Struct, length: 2, nullCount: 0, children: [keys, indicesOf(inMap, strings(['a']), [0, 3])] });
    const m = makeData({ type: map, length: 2, valueOffsets: Int32Array.of(0, 1, 2), child: entries });
    expect(await refusal(batchOf(schemaOf(new Field('m', map, true)), [m]))).toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('points at value 3') });
  });
});

describe('fields that share one dictionary id', () => {
  /** Two fields `a` and `b` of dictionary id 1 over one value type (arrow-js requires the same type object), `a` first. */
  function sharedSchema(a: IndexType, b: IndexType): Schema {
    const values = new Utf8();
    return schemaOf(new Field('a', new Dictionary(values, a as Int32, 1), true), new Field('b', new Dictionary(values, b as Int32, 1), true));
  }

  function sharedBatches(schema: Schema): RecordBatch[] {
    const [ta, tb] = [schema.fields[1]!.type as Dictionary, schema.fields[2]!.type as Dictionary];
    // 100 values, then an unrelated 100: remapped together they need indices up to 199, past Int8's 127
    return [words('a', 100), words('b', 100)].map((d) => batchOf(schema, [indicesOf(ta, d, [99, 0, null]), indicesOf(tb, d, [0, 99, 50])]));
  }

  /** The rows the project's own reader reads back from partition 0 of `prefix`. */
  async function readerRows(prefix: string): Promise<string[]> {
    const reader = await ShuffleReader.open(prefix);
    try {
      const out: string[] = [];
      for await (const b of reader.readPartition(0)) out.push(...jsRows(b));
      return out;
    } finally {
      await reader.close();
    }
  }

  // Whichever field comes first, the dictionary stays within the narrower index type's reach
  // (before 2026-12-07 the first field's type decided: an Int32 field first let the Int8
  // field's indices 150 and 199 wrap to -106 and -57).
  test.each([
    ['the Int8-indexed field first', new Int8(), new Int32()],
    ['the Int32-indexed field first', new Int32(), new Int8()],
  ] as [string, IndexType, IndexType][])('%s: an unrelated dictionary that would take the Int8 field past 127 starts over, and both fields read back every value (arrow-js and our reader)', async (_, a, b) => {
    const batches = sharedBatches(sharedSchema(a, b));
    await roundTrip(batches, 1, { maxBatchRows: 1 });
    expect(await readerRows(join(dir, 'out'))).toEqual(expectedByPid(batches, 1)[0]);
  });

  test.each([
    ['the Int8-indexed field first', new Int8(), new Int32()],
    ['the Int32-indexed field first', new Int32(), new Int8()],
  ] as [string, IndexType, IndexType][])('reduce side, %s: the coalescer does not merge two unrelated 100-value dictionaries (199 is past Int8), every value kept', (_, a, b) => {
    const batches = sharedBatches(sharedSchema(a, b));
    expect(coalesced(batches)).toEqual(expectedByPid(batches, 1)[0]);
  });

  test.each([
    ['the Int8-indexed field first', new Int8(), new Int32()],
    ['the Int32-indexed field first', new Int32(), new Int8()],
  ] as [string, IndexType, IndexType][])('sort writer, %s: rows that meet 250 distinct values of the shared dictionary end a block before the 129th, and every row reads back', async (_, a, b) => {
    const schema = sharedSchema(a, b);
    const [ta, tb] = [schema.fields[1]!.type as Dictionary, schema.fields[2]!.type as Dictionary];
    const dictionary = words('v', 250);
    // row i: the Int8 field at v(i % 100), within its reach; the other at v(100 + i % 150): 250 values met by row 150
    const rows = Array.from({ length: 300 }, (_, i) => i);
    const [first, second] = [rows.map((i) => 100 + (i % 150)), rows.map((i) => i % 100)];
    const [forA, forB] = a instanceof Int8 ? [second, first] : [first, second];
    const batch = batchOf(schema, [indicesOf(ta, dictionary, forA), indicesOf(tb, dictionary, forB)]);
    const prefix = join(dir, 'sorted');
    const writer = await createShuffleWriter('sort', { numPartitions: 1, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, codec: 'none' });
    await writer.write(batch);
    await writer.finish();
    expect(await readerRows(prefix)).toEqual(expectedByPid([batch], 1)[0]);
  });

  test('sort writer, two Int8-indexed fields: rows of two batches with unrelated dictionaries, where the first field alone fills 128 values and the second field\'s values in the rows before lie past them, read back (the reader tried those rows again and refused them as corrupt)', async () => {
    const schema = sharedSchema(new Int8(), new Int8());
    const [ta, tb] = [schema.fields[1]!.type as Dictionary, schema.fields[2]!.type as Dictionary];
    // each batch: a at its dictionary's values 0..99, b at 100..127; a alone meets 128 values at row 128 of the block
    const batches = ['p', 'q'].map((tag) => {
      const rows = Array.from({ length: 100 }, (_, i) => i);
      const dictionary = words(tag, 128);
      return batchOf(schema, [indicesOf(ta, dictionary, rows), indicesOf(tb, dictionary, rows.map((i) => 100 + (i % 28)))]);
    });
    const prefix = join(dir, 'sorted');
    const writer = await createShuffleWriter('sort', { numPartitions: 1, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, codec: 'none' });
    for (const b of batches) await writer.write(b);
    await writer.finish();
    expect(await readerRows(prefix)).toEqual(expectedByPid(batches, 1)[0]);
  });

  test('an Int32-indexed list beside an Int8-indexed column of the same id: one row may meet more values than Int8 indexes, so the sort writer refuses the schema before writing anything, naming the columns, and the columnar writer writes it', async () => {
    const values = new Utf8();
    const wide = new Dictionary(values, new Int32(), 1);
    const narrow = new Dictionary(values, new Int8(), 1);
    const list = new List(new Field('item', wide, true));
    const schema = schemaOf(new Field('tags', list, true), new Field('b', narrow, true));
    const dictionary = words('v', 250);
    // one row: a list of all 250 values, and b at v5
    const tags = makeData({ type: list, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, 250), child: indicesOf(wide, dictionary, Array.from({ length: 250 }, (_, i) => i)) } as never) as Data;
    const batch = batchOf(schema, [tags, indicesOf(narrow, dictionary, [5])]);

    const prefix = join(dir, 'sorted');
    const sort = await createShuffleWriter('sort', { numPartitions: 1, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, codec: 'none' });
    const refused = await sort.write(batch).then(() => null, (error: unknown) => error);
    expect(refused).toMatchObject({ code: 'CS_UNSUPPORTED_TYPE', message: expect.stringMatching(/columns "tags\.item", "b" share dictionary id 1 .* narrowest \(128 values\).*columnar \(hash\) writer/) });
    await sort.abort();
    expect(await readdir(dir)).toEqual([]);

    await roundTrip([batch], 1);
  });

  test.each([
    ['Int32 and Int8 columns of one value each', (w: Dictionary, n: Dictionary) => [new Field('a', w), new Field('b', n)], null],
    ['two Int8 lists (one index type)', (_: Dictionary, n: Dictionary) => [new Field('a', new List(new Field('item', n))), new Field('b', n)], null],
    ['an Int32 fixed-size list of one beside Int8', (w: Dictionary, n: Dictionary) => [new Field('a', new FixedSizeList(1, new Field('item', w))), new Field('b', n)], null],
    ['an Int8 list beside an Int32 column (128 + 1 values)', (w: Dictionary, n: Dictionary) => [new Field('a', new List(new Field('item', n))), new Field('b', w)], /"a\.item", "b"/],
    ['an Int32 fixed-size list of two beside Int8', (w: Dictionary, n: Dictionary) => [new Field('a', new FixedSizeList(2, new Field('item', w))), new Field('b', n)], /"a\.item", "b"/],
    ['an Int32 column in a struct in a map beside Int8', (w: Dictionary, n: Dictionary) => [new Field('m', new Map_(new Field('entries', new Struct([new Field('key', new Utf8(), false), new Field('value', new Struct([new Field('d', w)]))]), false) as never)), new Field('b', n)], /"m\.entries\.value\.d", "b"/],
  ] as [string, (w: Dictionary, n: Dictionary) => Field[], RegExp | null][])('the sort writer\'s check of shared ids: %s', (_, fieldsOf, refused) => {
    const values = new Utf8();
    const fields = fieldsOf(new Dictionary(values, new Int32(), 1), new Dictionary(values, new Int8(), 1));
    const error = unreadableSharedDictionary(fields);
    if (refused === null) expect(error).toBeNull();
    else expect(error).toMatchObject({ code: 'CS_UNSUPPORTED_TYPE', message: expect.stringMatching(refused) });
  });

  /** The coalescer's output rows (every column but pid), as canonical strings. */
  function coalesced(batches: readonly RecordBatch[]): string[] {
    const coalescer = new BatchCoalescer(batches[0]!.schema, 100);
    const out = batches.flatMap((b) => coalescer.push(b));
    const last = coalescer.finish();
    if (last !== null) out.push(last);
    return out.flatMap(jsRowsWithoutPid);
  }
});

describe('dictionaries nested in struct, list, map and union children', () => {
  const f = (name: string, type: DataType, nullable = true) => new Field(name, type, nullable);
  const D_STRUCT = new Dictionary(new Utf8(), new Int16(), 3);
  const D_LIST = new Dictionary(new Utf8(), new Uint8(), 4);
  const D_MAP = new Dictionary(new Utf8(), new Int8(), 5);
  const D_UNION = new Dictionary(new Utf8(), new Uint32(), 6);
  const STRUCT = new Struct([f('n', new Int32()), f('d', D_STRUCT)]);
  const LIST = new List(f('item', D_LIST));
  const MAP = new Map_(f('entries', new Struct([f('key', new Utf8(), false), f('value', D_MAP)]), false) as never);
  const UNION = new SparseUnion([0, 1], [f('i', new Int32()), f('d', D_UNION)]);
  const SCHEMA = schemaOf(f('s', STRUCT), f('l', LIST), f('m', MAP), f('u', UNION));

  /** Three rows; every nested dictionary is `tag`'s own (unrelated to other batches'): each row points at other values. */
  function nestedBatch(tag: string, pids: number[]): RecordBatch {
    const n = 3;
    const ints = (v: number[]) => makeData({ type: new Int32(), length: v.length, data: Int32Array.from(v) });
    const s = makeData({ type: STRUCT, length: n, nullCount: 0, children: [ints([1, 2, 3]), indicesOf(D_STRUCT, words(`${tag}s`, 3), [2, null, 0], 77)] });
    const l = makeData({ type: LIST, length: n, valueOffsets: Int32Array.of(0, 2, 2, 5), child: indicesOf(D_LIST, words(`${tag}l`, 4), [3, 0, null, 1, 2], 200) });
    const keys = vectorFromArray(['k0', 'k1', 'k2', 'k3'], new Utf8()).data[0]!;
    const entries = makeData({ type: MAP.children[0]!.type as Struct, length: 4, nullCount: 0, children: [keys, indicesOf(D_MAP, words(`${tag}m`, 3), [1, 2, null, 0], -3)] });
    const m = makeData({ type: MAP, length: n, valueOffsets: Int32Array.of(0, 1, 3, 4), child: entries });
    const u = makeData({ type: UNION, length: n, typeIds: Int8Array.of(1, 0, 1), children: [ints([5, 6, 7]), indicesOf(D_UNION, words(`${tag}u`, 2), [1, 0, 0])] } as never);
    return batchOf(SCHEMA, [s, l, m, u as Data], pids);
  }

  test('batches bringing unrelated dictionaries for each nested column: every partition reads back every value (each one appended and remapped)', async () => {
    const batches = [nestedBatch('a', [0, 1, 0]), nestedBatch('b', [1, 1, 0]), nestedBatch('c', [0, 0, 1])];
    await roundTrip(batches, 2);
  });

  test('replacement updates: the same, with every nested dictionary sent whole each time it grows', async () => {
    const batches = [nestedBatch('a', [0, 1, 0]), nestedBatch('b', [1, 1, 0]), nestedBatch('c', [0, 0, 1])];
    await roundTrip(batches, 2, { dictionaryUpdates: 'replacement' });
  });
});

describe('the reduce side: held dictionaries across messages and partitions', () => {
  test.each([1, 4, 7])('Int8 indices, deltas, unrelated dictionaries and a start-over (a replacement mid-stream), two partitions read as one range with coalesceRows %i: every row, in order', async (coalesceRows) => {
    const type = new Dictionary(new Utf8(), new Int8(), 7);
    const schema = schemaOf(new Field('d', type, true));
    const grown1 = words('g', 3);
    const grown2 = new Vector([...grown1.data, ...words('h', 2).data]);
    const grown3 = new Vector([...grown2.data, ...words('i', 1).data]);
    const batches = [
      batchOf(schema, [indicesOf(type, grown1, [2, 0, null, 1], 100)], [0, 1, 0, 1]),
      batchOf(schema, [indicesOf(type, grown2, [4, 3, 0], -100)], [1, 0, 0]),
      batchOf(schema, [indicesOf(type, words('u', 60), [59, null, 0, 30], 127)], [0, 1, 1, 0]),
      batchOf(schema, [indicesOf(type, grown3, [5, 1])], [1, 1]),
      // 70 more unrelated values: past Int8's 127, a new epoch
      batchOf(schema, [indicesOf(type, words('v', 70), [69, 0, null, 35], -1)], [1, 0, 0, 1]),
      batchOf(schema, [indicesOf(type, words('w', 2), [1, 0, 1])], [0, 1, 0]),
    ];
    const prefix = join(dir, 'range');
    const writer = await ShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, codec: 'none', maxBatchRows: 2 });
    for (const b of batches) await writer.write(b);
    await writer.finish();
    const reader = await ShuffleReader.open(prefix);
    const got: string[] = [];
    try {
      for await (const b of reader.readPartitions(0, 2, { coalesceRows })) {
        for (let i = 0; i < b.numRows; i++) got.push(canonical(valueAt(b.getChild('d')!, i)));
      }
    } finally {
      await reader.close();
    }
    expect(got).toEqual(expectedByPid(batches, 2).flat());
  });
});

describe('memory: what the dictionary tracker keeps, it reserves', () => {
  function trackerFor(fields: Field[], numPartitions: number, pool: MemoryPool) {
    const layouts = fields.flatMap((f) => dictionaryLayouts(columnLayoutOf(f)));
    const reservation = pool.register('dictionaries');
    return { tracker: new DictionaryTracker(layouts, numPartitions, reservation, null), reservation };
  }

  test('two dictionary ids at 100,000 partitions: the per-partition state (an Int32 epoch and a Uint32 count a partition and id, 1.6 MB) is reserved once, at the first register', async () => {
    const pool = new MemoryPool();
    const f1 = new Field('x', new Dictionary(new Utf8(), new Int32(), 1), true);
    const f2 = new Field('y', new Dictionary(new Utf8(), new Int32(), 2), true);
    const { tracker, reservation } = trackerFor([f1, f2], 100_000, pool);
    const d1 = strings(['a']);
    const d2 = strings(['b']);
    expect(await tracker.register(1, d1)).toBe('ok');
    expect(await tracker.register(2, d2)).toBe('ok');
    const first = reservation.size;
    expect(first).toBeGreaterThanOrEqual(2 * 8 * 100_000);
    for (let i = 0; i < 5; i++) {
      expect(await tracker.register(1, d1)).toBe('ok');
      expect(await tracker.register(2, d2)).toBe('ok');
    }
    expect(reservation.size).toBe(first);
    await tracker.release();
    expect(pool.reserved).toBe(0);
  });

  test('replacement updates: the latest replacement is never counted retired (partitions are still sent it); each superseded one is, with exactly its bytes, added up', async () => {
    const pool = new MemoryPool();
    const field = new Field('x', new Dictionary(new Utf8(), new Int32(), 1), true);
    const layouts = dictionaryLayouts(columnLayoutOf(field));
    const tracker = new DictionaryTracker(layouts, 2, pool.register('dictionaries'), null, undefined, 'replacement');
    expect(await tracker.register(1, strings(['a', 'b']))).toBe('ok');
    expect(tracker.retired).toBe(0);
    const first = (await Promise.all(tracker.messagesFor(0))).reduce((sum, m) => sum + m.byteLength, 0);
    expect(first).toBeGreaterThan(0);
    expect(await tracker.register(1, strings(['x', 'y', 'z']))).toBe('ok');
    expect(tracker.retired).toBe(first);
    const second = (await Promise.all(tracker.messagesFor(0))).reduce((sum, m) => sum + m.byteLength, 0);
    expect(second).toBeGreaterThan(first);
    expect(await tracker.register(1, strings(['q']))).toBe('ok');
    expect(tracker.retired).toBe(first + second);
    await tracker.release();
    expect(pool.reserved).toBe(0);
  });

  test('dropRetired gives back at most the retired bytes, and after release nothing counts as retired', async () => {
    const pool = new MemoryPool();
    const field = new Field('x', new Dictionary(new Utf8(), new Int32(), 1), true);
    const reservation = pool.register('dictionaries');
    const tracker = new DictionaryTracker(dictionaryLayouts(columnLayoutOf(field)), 1, reservation, null, undefined, 'replacement');
    await tracker.register(1, strings(['a', 'b']));
    await tracker.register(1, strings(['x', 'y', 'z']));
    const retired = tracker.retired;
    expect(retired).toBeGreaterThan(0);
    const before = reservation.size;
    expect(tracker.dropRetired(retired + 1_000_000)).toBe(retired);
    expect(reservation.size).toBe(before - retired);
    expect(tracker.retired).toBe(0);
    await tracker.register(1, strings(['p']));
    expect(tracker.retired).toBeGreaterThan(0);
    await tracker.release();
    expect(tracker.retired).toBe(0);
    expect(tracker.dropRetired(1_000_000)).toBe(0);
    expect(pool.reserved).toBe(0);
  });

  test('dictionary values that are lists (with null lists and null items): after release the tracker holds nothing, the selection scratch it gathered them with included', async () => {
    const pool = new MemoryPool();
    const valueType = new List(new Field('item', new Int32(), true));
    const field = new Field('x', new Dictionary(valueType, new Int32(), 1), true);
    const { tracker, reservation } = trackerFor([field], 3, pool);
    const lists = (n: number, tag: number) => vectorFromArray(Array.from({ length: n }, (_, i) => (i % 5 === 4 ? null : [i, tag, i % 3 === 0 ? null : i + tag])), valueType) as Vector;
    expect(await tracker.register(1, lists(300, 1))).toBe('ok');
    expect(await tracker.register(1, lists(500, 2))).toBe('ok');
    expect(reservation.size).toBeGreaterThan(0);
    await tracker.release();
    expect(reservation.size).toBe(0);
    expect(pool.reserved).toBe(0);
  });

  test('a dictionary of 100,000 values: the tracker reserves its encoded batch (at least one byte a value) and the 4-byte row numbers it gathers them with (at least 400,000 bytes)', async () => {
    const pool = new MemoryPool();
    const field = new Field('x', new Dictionary(new Int8(), new Int32(), 1), true);
    const { tracker, reservation } = trackerFor([field], 1, pool);
    const values = vectorFromArray(Array.from({ length: 100_000 }, (_, i) => (i % 200) - 100), new Int8());
    expect(await tracker.register(1, values)).toBe('ok');
    const messages = await Promise.all(tracker.messagesFor(0));
    const encoded = messages.reduce((sum, m) => sum + m.byteLength, 0);
    expect(encoded).toBeGreaterThanOrEqual(100_000);
    expect(reservation.size).toBeGreaterThanOrEqual(encoded + 4 * 100_000);
    await tracker.release();
    expect(pool.reserved).toBe(0);
  });
});
