/**
 * Zero-length children, end to end, fixed cases (the property tests only meet them by
 * chance): list columns whose child has length 0 (every row null or an empty list), a
 * struct of zero rows in zero-row batches, maps whose entries are all empty, dense
 * unions with a child of length 0, dictionaries whose dictionary is empty (every index
 * null, garbage under the nulls). Both writers, P = 1, 7 and 64: every partition holds
 * exactly the rows an independent reference sends there (arrow-js JS values and raw
 * bytes, partitions from Spark's murmur3 of the int64 key), through ShuffleReader and,
 * for the columnar writer, through arrow-js's tableFromIPC on the partition's byte
 * range of the data file as the index file gives it.
 */
import { join } from 'node:path';
import {
  DenseUnion,
  Dictionary,
  Field,
  FixedSizeBinary,
  FixedSizeList,
  Int16,
  Int32,
  Int64,
  LargeList,
  LargeUtf8,
  List,
  Map_,
  RecordBatch,
  Schema,
  SparseUnion,
  Struct,
  Type,
  Utf8,
  Vector,
  makeData,
  vectorFromArray,
  type Data,
  type DataType,
} from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { WRITER_KINDS, type WriterKind } from '../src/writer-kind.js';
import { expectedByLongKey, indexRanges, outputProblems, writeAll } from './support/js-values.js';
import { makeTempDir, removeDir } from './support/shuffle-harness.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const field = (name: string, type: DataType, nullable = true) => new Field(name, type, nullable);
const I32 = () => new Int32();
const UTF8 = () => new Utf8();

/** Validity from a predicate: the bitmap and its real null count. */
function validity(length: number, valid: (i: number) => boolean): { nullBitmap: Uint8Array; nullCount: number } {
  const nullBitmap = new Uint8Array(((length + 7) >>> 3) + 1);
  let nullCount = 0;
  for (let i = 0; i < length; i++) {
    if (valid(i)) nullBitmap[i >>> 3]! |= 1 << (i & 7);
    else nullCount++;
  }
  return { nullBitmap, nullCount };
}

/**
 * A column of length 0 of any type, children of length 0 all the way down. `offsets`:
 * 'one' gives offset buffers holding the single 0 the spec asks for, 'none' leaves
 * them empty (what arrow-js's makeData gives by default, and what the spec tolerates
 * for a zero-length array).
 */
function zeroLength(type: DataType, offsets: 'one' | 'none' = 'one'): Data {
  const none = offsets === 'none';
  switch (type.typeId) {
    case Type.List:
    case Type.Map:
      return makeData({ type, length: 0, nullCount: 0, valueOffsets: new Int32Array(none ? 0 : 1), child: zeroLength(type.children[0]!.type, offsets) } as never);
    case Type.LargeList:
      return makeData({ type, length: 0, nullCount: 0, valueOffsets: new BigInt64Array(none ? 0 : 1), child: zeroLength(type.children[0]!.type, offsets) } as never);
    case Type.FixedSizeList:
      return makeData({ type, length: 0, nullCount: 0, child: zeroLength(type.children[0]!.type, offsets) } as never);
    case Type.Struct:
      return makeData({ type, length: 0, nullCount: 0, children: type.children.map((f) => zeroLength(f.type, offsets)) } as never);
    case Type.Union:
      return makeData({
        type,
        length: 0,
        typeIds: new Int8Array(0),
        ...((type as DenseUnion).mode === 1 ? { valueOffsets: new Int32Array(0) } : {}),
        children: type.children.map((f) => zeroLength(f.type, offsets)),
      } as never);
    case Type.Dictionary: {
      const dictionary = type as Dictionary;
      const Indices = dictionary.indices.ArrayType as unknown as new (n: number) => Int32Array;
      return makeData({ type, length: 0, nullCount: 0, data: new Indices(0), dictionary: new Vector([zeroLength(dictionary.dictionary, offsets)]) } as never);
    }
    case Type.Utf8:
    case Type.Binary:
      return makeData({ type, length: 0, nullCount: 0, valueOffsets: new Int32Array(none ? 0 : 1), data: new Uint8Array(0) } as never);
    case Type.LargeUtf8:
    case Type.LargeBinary:
      return makeData({ type, length: 0, nullCount: 0, valueOffsets: new BigInt64Array(none ? 0 : 1), data: new Uint8Array(0) } as never);
    default:
      return makeData({ type, length: 0, nullCount: 0 } as never);
  }
}

/** n rows of lists (List or LargeList or Map) that are all null or empty: offsets all 0, a child of length 0. */
function emptyLists(type: List | LargeList | Map_, n: number, valid: (i: number) => boolean, offsets: 'one' | 'none' = 'one'): Data {
  const valueOffsets = type.typeId === Type.LargeList ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
  return makeData({ type, length: n, ...validity(n, valid), valueOffsets, child: zeroLength(type.children[0]!.type, offsets) } as never);
}

/** n int64 keys, spread over positive and negative values (distinct per seed). */
function keys(n: number, seed: number): Data {
  return makeData({ type: new Int64(), length: n, data: BigInt64Array.from({ length: n }, (_, i) => BigInt(i * 2_654_435_761 + seed * 97) * (i % 3 === 0 ? -1n : 1n)) });
}

function batchOf(schema: Schema, n: number, columns: Data[]): RecordBatch {
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: columns }));
}

/** A batch of zero rows: every column of length 0, children of length 0 all the way down. */
function zeroRowBatch(schema: Schema, offsets: 'one' | 'none' = 'one'): RecordBatch {
  return batchOf(schema, 0, schema.fields.map((f) => zeroLength(f.type, offsets)));
}

// ---- the types of the cases

const LIST_I32 = new List(field('item', I32()));
const LARGE_LIST_STRUCT = new LargeList(field('item', new Struct([field('a', I32()), field('b', UTF8())])));
const LIST_LIST_UTF8 = new List(field('item', new List(field('item', UTF8()))));
const STRUCT = new Struct([field('a', I32()), field('b', new List(field('item', UTF8()))), field('c', new LargeUtf8()), field('d', new FixedSizeList(2, field('item', new Int16())))]);
const mapOf = (value: DataType) => new Map_(new Field('entries', new Struct([new Field('key', UTF8(), false), field('value', value)]), false) as never);
const MAP_I64 = mapOf(new Int64());
const MAP_LIST = mapOf(new List(field('item', I32())));
/** dense union<int32 (id 2), utf8 (id 5)>: every row an int32, the utf8 child of length 0 */
const DENSE = new DenseUnion([2, 5], [field('i', I32()), field('s', UTF8())]);
/** dense union<list<int32> (id 0), int64 (id 1), struct (id 3)>: rows int64 and struct, the list child of length 0 */
const DENSE_NESTED = new DenseUnion([0, 1, 3], [field('l', new List(field('item', I32()))), field('n', new Int64()), field('s', new Struct([field('x', UTF8())]))]);
const DICT_UTF8 = new Dictionary(UTF8(), new Int32(), 11);
const DICT_LIST = new Dictionary(new List(field('item', I32())), new Int16(), 12);

/** Every row of a dictionary column null, its dictionary empty, garbage indices under the nulls. */
function emptyDictionary(type: Dictionary, n: number): Data {
  const Indices = type.indices.ArrayType as unknown as new (values: number[]) => Int32Array;
  const indices = new Indices(Array.from({ length: n }, (_, i) => [0, 1, 7, 1000][i % 4]!));
  return makeData({ type, length: n, ...validity(n, () => false), data: indices, dictionary: new Vector([zeroLength(type.dictionary)]) } as never);
}

/** Dense union rows: `ids[i]` is row i's type id; each child gets exactly the rows that reference it (a child nobody references: length 0). */
function denseUnion(type: DenseUnion, ids: number[], child: (c: number, length: number) => Data): Data {
  const counts = type.children.map(() => 0);
  const offsets = Int32Array.from(ids, (id) => counts[type.typeIdToChildIndex[id]!]!++);
  return makeData({ type, length: ids.length, typeIds: Int8Array.from(ids), valueOffsets: offsets, children: type.children.map((_, c) => child(c, counts[c]!)) } as never);
}

function int32s(n: number, valid: (i: number) => boolean = () => true): Data {
  return makeData({ type: new Int32(), length: n, ...validity(n, valid), data: Int32Array.from({ length: n }, (_, i) => i * 31 - 500) });
}

function int64s(n: number): Data {
  return makeData({ type: new Int64(), length: n, data: BigInt64Array.from({ length: n }, (_, i) => BigInt(i) * -1_000_000_007n) });
}

function utf8s(n: number, valid: (i: number) => boolean = () => true): Data {
  return vectorFromArray(Array.from({ length: n }, (_, i) => (valid(i) ? `s${i}-${'x'.repeat(i % 5)}` : null)), new Utf8()).data[0]!;
}

interface Case {
  readonly name: string;
  readonly schema: Schema;
  /** The input batches: built fresh per run (zero-row batches among them). */
  readonly batches: () => RecordBatch[];
}

const schemaOf = (...fields: Field[]) => new Schema([new Field('key', new Int64(), false), ...fields]);

/** n rows of the list case, null every `nullEvery` rows, the rest empty lists. */
function listColumns(n: number, nullEvery: number, offsets: 'one' | 'none'): Data[] {
  const valid = (i: number) => i % nullEvery !== 0;
  return [emptyLists(LIST_I32, n, valid, offsets), emptyLists(LARGE_LIST_STRUCT, n, (i) => i % 2 === 0, offsets), emptyLists(LIST_LIST_UTF8, n, () => false, offsets)];
}

function structColumn(n: number): Data {
  const children = [
    int32s(n, (i) => i % 4 !== 1),
    makeData({ type: STRUCT.children[1]!.type, length: n, ...validity(n, (i) => i % 3 !== 0), valueOffsets: Int32Array.from({ length: n + 1 }, (_, i) => Math.floor(i / 2)), child: utf8s(Math.floor(n / 2)) } as never),
    vectorFromArray(Array.from({ length: n }, (_, i) => `large-${i}`), new LargeUtf8()).data[0]!,
    makeData({ type: STRUCT.children[3]!.type, length: n, ...validity(n, (i) => i % 5 !== 2), child: makeData({ type: new Int16(), length: 2 * n, data: Int16Array.from({ length: 2 * n }, (_, i) => i - n) }) } as never),
  ];
  return makeData({ type: STRUCT, length: n, ...validity(n, (i) => i % 6 !== 3), children } as never);
}

function denseColumns(n: number): Data[] {
  const first = denseUnion(DENSE, Array.from({ length: n }, () => 2), (c, length) => (c === 0 ? int32s(length, (i) => i % 7 !== 0) : zeroLength(DENSE.children[1]!.type)));
  const second = denseUnion(DENSE_NESTED, Array.from({ length: n }, (_, i) => (i % 3 === 0 ? 3 : 1)), (c, length) => {
    if (c === 0) return zeroLength(DENSE_NESTED.children[0]!.type);
    if (c === 1) return int64s(length);
    return makeData({ type: DENSE_NESTED.children[2]!.type, length, ...validity(length, (i) => i % 2 === 0), children: [utf8s(length)] } as never);
  });
  return [first, second];
}

const LIST_SCHEMA = schemaOf(field('l', LIST_I32), field('ll', LARGE_LIST_STRUCT), field('lll', LIST_LIST_UTF8));
const STRUCT_SCHEMA = schemaOf(field('s', STRUCT));
const MAP_SCHEMA = schemaOf(field('m', MAP_I64), field('ml', MAP_LIST));
const DENSE_SCHEMA = schemaOf(field('u', DENSE), field('un', DENSE_NESTED));
const DICT_SCHEMA = schemaOf(field('d', DICT_UTF8), field('dl', DICT_LIST));
/** Values of zero bytes: fixed-size binary(0) at the top, in a list, in a struct, and as dictionary values. */
const FSB0 = () => new FixedSizeBinary(0);
const ZERO_WIDTH_SCHEMA = schemaOf(
  field('f', FSB0()),
  field('lf', new List(field('item', FSB0()))),
  field('sf', new Struct([field('z', FSB0()), field('a', I32())])),
  field('df', new Dictionary(FSB0(), new Int16(), 13)),
);

function zeroWidthColumns(n: number): Data[] {
  const f = makeData({ type: FSB0(), length: n, ...validity(n, (i) => i % 3 !== 0), data: new Uint8Array(0) });
  const lf = makeData({ type: ZERO_WIDTH_SCHEMA.fields[2]!.type, length: n, ...validity(n, (i) => i % 4 !== 1), valueOffsets: Int32Array.from({ length: n + 1 }, (_, i) => 2 * i), child: makeData({ type: FSB0(), length: 2 * n, data: new Uint8Array(0) }) } as never);
  const sf = makeData({ type: ZERO_WIDTH_SCHEMA.fields[3]!.type, length: n, ...validity(n, (i) => i % 5 !== 2), children: [makeData({ type: FSB0(), length: n, ...validity(n, (i) => i % 2 === 0), data: new Uint8Array(0) }), int32s(n)] } as never);
  const dictionaryType = ZERO_WIDTH_SCHEMA.fields[4]!.type as Dictionary;
  const df = makeData({ type: dictionaryType, length: n, ...validity(n, (i) => i % 2 === 1), data: Int16Array.from({ length: n }, (_, i) => i % 2), dictionary: new Vector([makeData({ type: FSB0(), length: 2, nullCount: 1, nullBitmap: Uint8Array.of(1), data: new Uint8Array(0) })]) } as never);
  return [f, lf, sf, df];
}

const ALL_SCHEMA = schemaOf(...LIST_SCHEMA.fields.slice(1), ...STRUCT_SCHEMA.fields.slice(1), ...MAP_SCHEMA.fields.slice(1), ...DENSE_SCHEMA.fields.slice(1), ...DICT_SCHEMA.fields.slice(1));

const CASES: readonly Case[] = [
  {
    name: 'list columns whose child has length 0 (every row null or an empty list; list<int32>, large_list<struct>, list<list<utf8>>)',
    schema: LIST_SCHEMA,
    batches: () => [
      batchOf(LIST_SCHEMA, 40, [keys(40, 1), ...listColumns(40, 3, 'one')]),
      zeroRowBatch(LIST_SCHEMA),
      batchOf(LIST_SCHEMA, 33, [keys(33, 2), ...listColumns(33, 2, 'none')]).slice(5, 31), // sliced: offsets sub-arrayed, still all 0
      zeroRowBatch(LIST_SCHEMA, 'none'),
    ],
  },
  {
    name: 'a struct of zero rows in zero-row batches (children of length 0, nested ones too), between non-empty batches',
    schema: STRUCT_SCHEMA,
    batches: () => [
      zeroRowBatch(STRUCT_SCHEMA),
      batchOf(STRUCT_SCHEMA, 30, [keys(30, 3), structColumn(30)]),
      zeroRowBatch(STRUCT_SCHEMA, 'none'),
      batchOf(STRUCT_SCHEMA, 30, [keys(30, 4), structColumn(30)]).slice(12, 12), // a zero-row slice of a non-empty batch
      batchOf(STRUCT_SCHEMA, 21, [keys(21, 5), structColumn(21)]).slice(3, 20),
    ],
  },
  {
    name: 'only zero-row batches of a struct: every partition comes back empty',
    schema: STRUCT_SCHEMA,
    batches: () => [zeroRowBatch(STRUCT_SCHEMA), zeroRowBatch(STRUCT_SCHEMA, 'none'), batchOf(STRUCT_SCHEMA, 9, [keys(9, 6), structColumn(9)]).slice(4, 4)],
  },
  {
    name: 'maps whose entries are all empty (map<utf8, int64>, map<utf8, list<int32>>; some maps null)',
    schema: MAP_SCHEMA,
    batches: () => [
      batchOf(MAP_SCHEMA, 45, [keys(45, 7), emptyLists(MAP_I64, 45, (i) => i % 4 !== 0), emptyLists(MAP_LIST, 45, (i) => i % 2 === 1)]),
      zeroRowBatch(MAP_SCHEMA),
      batchOf(MAP_SCHEMA, 20, [keys(20, 8), emptyLists(MAP_I64, 20, () => true, 'none'), emptyLists(MAP_LIST, 20, () => false, 'none')]).slice(1, 19),
    ],
  },
  {
    name: 'dense unions with a child of length 0 (type ids not 0..n-1; the other children null in places)',
    schema: DENSE_SCHEMA,
    batches: () => [batchOf(DENSE_SCHEMA, 50, [keys(50, 9), ...denseColumns(50)]), zeroRowBatch(DENSE_SCHEMA), batchOf(DENSE_SCHEMA, 27, [keys(27, 10), ...denseColumns(27)]).slice(2, 25)],
  },
  {
    name: 'dictionaries whose dictionary is empty (every index null, garbage indices under the nulls; utf8 and list<int32> values)',
    schema: DICT_SCHEMA,
    batches: () => [
      batchOf(DICT_SCHEMA, 36, [keys(36, 11), emptyDictionary(DICT_UTF8, 36), emptyDictionary(DICT_LIST, 36)]),
      zeroRowBatch(DICT_SCHEMA),
      batchOf(DICT_SCHEMA, 24, [keys(24, 12), emptyDictionary(DICT_UTF8, 24), emptyDictionary(DICT_LIST, 24)]).slice(7, 24),
    ],
  },
  {
    name: 'values of zero bytes (fixed-size binary(0) at the top, in a list, a struct, a dictionary; the sort writer refused them)',
    schema: ZERO_WIDTH_SCHEMA,
    batches: () => [
      batchOf(ZERO_WIDTH_SCHEMA, 40, [keys(40, 16), ...zeroWidthColumns(40)]),
      zeroRowBatch(ZERO_WIDTH_SCHEMA),
      batchOf(ZERO_WIDTH_SCHEMA, 29, [keys(29, 17), ...zeroWidthColumns(29)]).slice(3, 26),
    ],
  },
  {
    name: 'all of them side by side in one schema, with zero-row batches between',
    schema: ALL_SCHEMA,
    batches: () => {
      const rows = (n: number, seed: number) =>
        batchOf(ALL_SCHEMA, n, [
          keys(n, seed),
          ...listColumns(n, 2 + (seed % 3), seed % 2 === 0 ? 'one' : 'none'),
          structColumn(n),
          emptyLists(MAP_I64, n, (i) => i % 3 !== 0),
          emptyLists(MAP_LIST, n, (i) => i % 2 === 0),
          ...denseColumns(n),
          emptyDictionary(DICT_UTF8, n),
          emptyDictionary(DICT_LIST, n),
        ]);
      return [zeroRowBatch(ALL_SCHEMA), rows(60, 13), zeroRowBatch(ALL_SCHEMA, 'none'), rows(35, 14).slice(9, 34), rows(17, 15)];
    },
  },
];

/** The sort writer with small pages and blocks, so that a partition spans several blocks. */
const sizesFor = (writer: WriterKind) => (writer === 'sort' ? { pageBytes: 1 << 14, blockBytes: 512 } : {});

describe.each(WRITER_KINDS)('%s writer: zero-length children come back exactly', (writer) => {
  describe.each(CASES)('$name', ({ schema, batches }) => {
    test.each([1, 7, 64])('P = %i', async (numPartitions) => {
      const input = batches();
      const prefix = join(dir, 'out');
      const codec = numPartitions === 7 ? 'zstd' : numPartitions === 64 ? 'none' : 'lz4';
      const result = await writeAll(writer, { numPartitions, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: prefix, codec, schema, maxBatchRows: 16, ...sizesFor(writer) }, input);

      const totalRows = input.reduce((sum, b) => sum + b.numRows, 0);
      const expectedRows = expectedByLongKey(input, 'key', numPartitions);
      expect(result.rows).toBe(totalRows);
      expect(result.partitionRows).toEqual(expectedRows.map((rows) => rows.length));
      // the index file's ranges are the partitions' lengths; a partition without rows is empty
      // (but for partition 0 of an output without rows, which keeps the schema)
      const ranges = await indexRanges(prefix);
      expect(ranges.map(([start, end]) => end - start)).toEqual(result.partitionLengths);
      expectedRows.forEach((rows, p) => {
        if (rows.length === 0 && !(p === 0 && totalRows === 0)) expect(result.partitionLengths[p]).toBe(0);
      });

      const problems = await outputProblems(prefix, schema, (rowStrings) => expectedByLongKey(input, 'key', numPartitions, rowStrings), writer === 'hash');
      expect(problems).toEqual([]);
    });
  });
});

test('the inputs are what the cases say: children of length 0, empty dictionaries, zero-row structs', () => {
  const childLengths = (data: Data): number[] => data.children.map((c) => c.length);
  const [list, large, nested] = listColumns(40, 3, 'one');
  expect([list!, large!, nested!].map((d) => childLengths(d))).toEqual([[0], [0], [0]]);
  expect(zeroRowBatch(STRUCT_SCHEMA).data.children[1]!.children.map((c) => c.length)).toEqual([0, 0, 0, 0]);
  expect(childLengths(emptyLists(MAP_I64, 45, () => true))).toEqual([0]);
  const [dense, denseNested] = denseColumns(50);
  expect(childLengths(dense!)).toEqual([50, 0]);
  expect(childLengths(denseNested!)).toEqual([0, 33, 17]);
  const dictionary = emptyDictionary(DICT_UTF8, 36);
  expect(dictionary.dictionary!.length).toBe(0);
  expect(dictionary.nullCount).toBe(36);
});

test('the sparse union of zero rows and the fixed-size list of zero rows round-trip in a zero-row-only input too (both writers)', async () => {
  const schema = schemaOf(field('su', new SparseUnion([1, 4], [field('a', I32()), field('b', new List(field('item', UTF8())))])), field('fsl', new FixedSizeList(3, field('item', new Struct([field('x', I32())])))));
  for (const writer of WRITER_KINDS) {
    const prefix = join(dir, `zero-${writer}`);
    const result = await writeAll(writer, { numPartitions: 7, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: prefix, schema }, [zeroRowBatch(schema), zeroRowBatch(schema, 'none')]);
    expect(result.rows).toBe(0);
    expect(result.partitionLengths.slice(1)).toEqual(new Array(6).fill(0)); // partition 0 keeps the schema
    expect(await outputProblems(prefix, schema, () => Array.from({ length: 7 }, () => []), writer === 'hash')).toEqual([]);
  }
});
