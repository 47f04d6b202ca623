/**
 * Nested spill coverage beyond the bench shape (test/spill-nested.test.ts covers list,
 * struct and map): sparse and dense unions, fixed-size lists, large lists, dictionaries
 * with nested values (list and struct; deltas and replacements between batches) and a
 * depth-4 column, under a 1 MiB MemoryPool with an input 10-20 times larger. Both
 * writers: spills happen, the pool never goes over its limit and is empty afterwards,
 * every row comes back exactly and in its partition's input order (arrow-js JS values,
 * partitions from Spark's murmur3 of the int64 key), and no file is left in the spill
 * directory or next to the committed output.
 */
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import {
  DenseUnion,
  Dictionary,
  Field,
  FixedSizeList,
  Float64,
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
  Uint32,
  Utf8,
  Vector,
  makeData,
  type Data,
  type DataType,
} from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { batchBytes } from '../src/cli/demo-data.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { WRITER_KINDS } from '../src/writer-kind.js';
import { buildColumn, type ValiditySpec } from './support/columns.js';
import { expectedByLongKey, partitionDifference, readRows, readRowsWithArrowJs, writeAll } from './support/js-values.js';
import { buildAny } from './support/nested.js';
import { levelCounts } from './support/null-levels.js';
import { Rng } from './support/random.js';
import { makeTempDir, removeDir } from './support/shuffle-harness.js';

const MiB = 1024 * 1024;
let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const f = (name: string, type: DataType, nullable = true) => new Field(name, type, nullable);

/** sparse union<int32 (id 0), large_utf8 (id 1), list<int64> (id 2)> */
const SPARSE = new SparseUnion([0, 1, 2], [f('i', new Int32()), f('s', new LargeUtf8()), f('l', new List(f('item', new Int64())))]);
/** dense union<struct<a: int32, b: utf8> (id 1), fixed_size_list<8, float64> (id 4)> */
const DENSE = new DenseUnion([1, 4], [f('st', new Struct([f('a', new Int32()), f('b', new Utf8())])), f('v', new FixedSizeList(8, f('item', new Float64())))]);
const FIXED = new FixedSizeList(16, f('item', new Int32()));
const LARGE = new LargeList(f('item', new Utf8()));
const DICT_LIST = new Dictionary(new List(f('item', new Int32())), new Int16(), 21);
const DICT_STRUCT = new Dictionary(new Struct([f('x', new Int32()), f('s', new Utf8())]), new Uint32(), 22);
/** list<struct<m: map<utf8, list<int32>>, t: int16>>: depth 4 below the column */
const DEEP = new List(f('item', new Struct([f('m', new Map_(new Field('entries', new Struct([new Field('key', new Utf8(), false), f('value', new List(f('item', new Int32())))]), false) as never)), f('t', new Int16())])));

const SCHEMA = new Schema([
  f('key', new Int64(), false),
  f('sparse', SPARSE),
  f('dense', DENSE),
  f('fixed', FIXED),
  f('large', LARGE),
  f('dict_list', DICT_LIST),
  f('dict_struct', DICT_STRUCT),
  f('deep', DEEP),
]);

const WITH_NULLS: ValiditySpec = { bitmap: true, nullRate: 0.15 };
const NO_NULLS: ValiditySpec = { bitmap: false, nullRate: 0 };

function bitmap(n: number, rng: Rng, nullRate: number): { nullBitmap: Uint8Array; nullCount: number } {
  const nullBitmap = new Uint8Array((n + 7) >>> 3);
  let nullCount = 0;
  for (let i = 0; i < n; i++) {
    if (rng.chance(nullRate)) nullCount++;
    else nullBitmap[i >>> 3]! |= 1 << (i & 7);
  }
  return { nullBitmap, nullCount };
}

/** n lists of 0..maxItems items over a child built for the total (null lists span no items here). */
function lists(type: List | LargeList, n: number, maxItems: number, rng: Rng, child: (length: number) => Data): Data {
  const { nullBitmap, nullCount } = bitmap(n, rng, 0.1);
  const offsets = [0];
  for (let i = 0; i < n; i++) offsets.push(offsets[i]! + ((nullBitmap[i >>> 3]! >>> (i & 7)) & 1 ? rng.int(0, maxItems) : 0));
  const valueOffsets = type instanceof LargeList ? BigInt64Array.from(offsets, BigInt) : Int32Array.from(offsets);
  return makeData({ type, length: n, nullCount, nullBitmap, valueOffsets, child: child(offsets[n]!) } as never);
}

/**
 * A string column of n rows, row i `lengthOf(i)` bytes (ASCII and some multi-byte
 * characters), null with probability 0.15: the bulk of the input's bytes with few values
 * to compare, so the reference stays fast.
 */
function strings(type: Utf8 | LargeUtf8, n: number, rng: Rng, lengthOf: (i: number) => number): Data {
  const { nullBitmap, nullCount } = bitmap(n, rng, 0.15);
  const alphabet = Array.from(new TextEncoder().encode('abcdefghijklmnopqrstuvwxyz0123456789 -é中'));
  const offsets = [0];
  const bytes: number[] = [];
  for (let i = 0; i < n; i++) {
    const length = lengthOf(i);
    const start = rng.int(0, alphabet.length - 1);
    for (let b = 0; b < length; b++) bytes.push(alphabet[(start + b * 7) % alphabet.length]!);
    offsets.push(bytes.length);
  }
  // the multi-byte characters may be cut at a value's end: arrow-js decodes with replacement characters, the same on both sides
  const valueOffsets = type instanceof LargeUtf8 ? BigInt64Array.from(offsets, BigInt) : Int32Array.from(offsets);
  return makeData({ type, length: n, nullCount, nullBitmap, valueOffsets, data: Uint8Array.from(bytes) } as never);
}

function sparseColumn(n: number, rng: Rng): Data {
  const typeIds = Int8Array.from({ length: n }, () => rng.int(0, 2));
  // every child spans all n rows (sparse); the strings are long only where a row selects them
  const strings_ = strings(new LargeUtf8(), n, rng, (i) => (typeIds[i] === 1 ? rng.int(500, 4000) : rng.int(0, 3)));
  const list = lists(SPARSE.children[2]!.type as List, n, 6, rng, (m) => buildColumn(new Int64(), m, WITH_NULLS, rng));
  return makeData({ type: SPARSE, length: n, typeIds, children: [buildColumn(new Int32(), n, WITH_NULLS, rng), strings_, list] } as never);
}

function denseColumn(n: number, rng: Rng): Data {
  const typeIds = Int8Array.from({ length: n }, () => (rng.chance(0.5) ? 1 : 4));
  let structs = 0;
  let vectors = 0;
  const valueOffsets = Int32Array.from(typeIds, (id) => (id === 1 ? structs++ : vectors++));
  const st = makeData({ type: DENSE.children[0]!.type, length: structs, ...bitmap(structs, rng, 0.1), children: [buildColumn(new Int32(), structs, WITH_NULLS, rng), buildColumn(new Utf8(), structs, WITH_NULLS, rng)] } as never);
  const v = makeData({ type: DENSE.children[1]!.type, length: vectors, ...bitmap(vectors, rng, 0.1), child: buildColumn(new Float64(), 8 * vectors, WITH_NULLS, rng) } as never);
  return makeData({ type: DENSE, length: n, typeIds, valueOffsets, children: [st, v] } as never);
}

function dictionaryColumn(type: Dictionary, n: number, dictionary: Vector, rng: Rng): Data {
  const { nullBitmap, nullCount } = bitmap(n, rng, 0.1);
  const Indices = type.indices.ArrayType as unknown as new (n: number) => Int32Array;
  const indices = new Indices(n);
  for (let i = 0; i < n; i++) indices[i] = rng.int(0, dictionary.length - 1);
  return makeData({ type, length: n, nullCount, nullBitmap, data: indices, dictionary } as never);
}

/**
 * `count` batches of `rows` rows. dict_list's dictionary grows every 4th batch (an IPC
 * delta: the old chunks plus a new one); dict_struct's is replaced by an unrelated one
 * every 5th batch.
 */
function inputBatches(count: number, rows: number): RecordBatch[] {
  const rng = new Rng(77);
  const listValues = (m: number) => buildAny(DICT_LIST.dictionary, m, rng, { nullRate: 0.1 });
  const structValues = (m: number) => buildAny(DICT_STRUCT.dictionary, m, rng, { nullRate: 0.1 });
  let dictList = new Vector([listValues(40)]);
  let dictStruct = new Vector([structValues(30)]);
  return Array.from({ length: count }, (_, b) => {
    if (b % 4 === 3) dictList = new Vector([...dictList.data, listValues(10)]);
    if (b % 5 === 4) dictStruct = new Vector([structValues(25)]);
    const columns = [
      buildColumn(new Int64(), rows, NO_NULLS, rng),
      sparseColumn(rows, rng),
      denseColumn(rows, rng),
      makeData({ type: FIXED, length: rows, ...bitmap(rows, rng, 0.1), child: buildColumn(new Int32(), 16 * rows, WITH_NULLS, rng) } as never),
      lists(LARGE, rows, 5, rng, (m) => strings(new Utf8(), m, rng, () => rng.int(50, 600))),
      dictionaryColumn(DICT_LIST, rows, dictList, rng),
      dictionaryColumn(DICT_STRUCT, rows, dictStruct, rng),
      buildAny(DEEP, rows, rng, { nullRate: 0.15 }),
    ];
    const batch = new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: rows, nullCount: 0, children: columns }));
    return b % 3 === 1 ? batch.slice(b % 7, rows - 1) : batch; // some sliced
  });
}

const LIMIT = 1 * MiB;
/** The input and, per partition count, the rows the reference expects: built once for both writers. */
let input: RecordBatch[] | undefined;
const expectations = new Map<number, string[][]>();
const theInput = () => (input ??= inputBatches(30, 250));
function expectedFor(numPartitions: number): string[][] {
  let expected = expectations.get(numPartitions);
  if (expected === undefined) expectations.set(numPartitions, (expected = expectedByLongKey(theInput(), 'key', numPartitions)));
  return expected;
}

test('the input is 10-20 times the pool', () => {
  const inputBytes = theInput().reduce((sum, b) => sum + batchBytes(b), 0);
  expect(inputBytes).toBeGreaterThan(10 * LIMIT);
  expect(inputBytes).toBeLessThan(20 * LIMIT);
});

describe.each(WRITER_KINDS)('%s writer: unions, fixed-size and large lists, nested dictionaries and depth 4 through a 1 MiB pool', (writer) => {
  test('spills, stays within the pool, loses and reorders no row, leaves no file behind', async () => {
    const limit = LIMIT;
    const batches = theInput();

    const spillDir = join(dir, 'spill');
    const outputDir = join(dir, 'output');
    await mkdir(spillDir);
    await mkdir(outputDir);
    const prefix = join(outputDir, 'map');
    const pool = new MemoryPool(limit);
    const numPartitions = 16;
    const result = await writeAll(writer, { numPartitions, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: prefix, memoryPool: pool, spillDir }, batches);

    expect(result.spills).toBeGreaterThan(0);
    expect(pool.peak).toBeLessThanOrEqual(limit);
    expect(pool.reserved).toBe(0);
    expect(await readdir(spillDir)).toEqual([]);
    expect((await readdir(outputDir)).sort()).toEqual(['map.checksum.CRC32C', 'map.data', 'map.index']);

    const expected = expectedFor(numPartitions);
    expect(result.partitionRows).toEqual(expected.map((rows) => rows.length));
    expect(partitionDifference(await readRows(prefix, undefined, SCHEMA), expected, 'ShuffleReader')).toBeNull();
    if (writer === 'hash') expect(partitionDifference(await readRowsWithArrowJs(prefix, undefined, SCHEMA), expected, 'arrow-js tableFromIPC')).toBeNull();
  }, 60_000);
});

test('the input holds what the test claims: every union child selected, nulls in the union children, nested dictionary values, depth 4 reached', () => {
  const batches = inputBatches(6, 200);
  const levels = levelCounts(batches);
  for (const path of ['sparse|i', 'sparse|s', 'sparse|l', 'sparse|l[]', 'dense|st', 'dense|st.b', 'dense|v', 'dense|v[fixed]', 'fixed[fixed]', 'large[]', 'deep[].m{value}[]']) {
    const level = levels.get(path);
    expect(level, path).toBeDefined();
    expect(level!.values, path).toBeGreaterThan(0);
    expect(level!.nulls, path).toBeGreaterThan(0);
  }
  const dictionaryLengths = batches.map((b) => [b.data.children[5]!.dictionary!.length, b.data.children[6]!.dictionary!.length]);
  expect(new Set(dictionaryLengths.map(([l]) => l)).size).toBeGreaterThan(1); // deltas
  expect(dictionaryLengths.map(([, s]) => s)).toContain(25); // replaced
});
