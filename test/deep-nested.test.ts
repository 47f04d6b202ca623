/**
 * A fixed, deep nested case end to end (the property tests reach depth 4 only by
 * chance): list<struct<a: map<utf8, list<int32>>, b: dense union<int64, list<utf8>>>>
 * (5 levels below the column) and large_list<fixed_size_list<3, struct<x: int16,
 * y: list<utf8>>>> (5 levels), with nulls at every level that can hold one, sliced
 * input batches (arrow-js slices unevenly: list offsets sub-arrayed and absolute into an
 * unsliced child, struct and fixed-size-list children sliced with their parent, dense
 * union offsets into unsliced children), parents built over children that are slices
 * themselves, and a batch read back from IPC (padded buffers); hashed on an int64 key at
 * P = 13. Both writers: every partition holds exactly the rows an independent reference
 * sends there (arrow-js JS values and raw bytes, partitions from Spark's murmur3 of the
 * key), through ShuffleReader and, for the columnar writer, arrow-js's tableFromIPC on
 * the partition's byte range.
 */
import { join } from 'node:path';
import {
  DenseUnion,
  Field,
  FixedSizeList,
  Int16,
  Int32,
  Int64,
  LargeList,
  List,
  Map_,
  RecordBatch,
  Schema,
  Struct,
  Utf8,
  makeData,
  tableFromIPC,
  tableToIPC,
  type Data,
} from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { SortShuffleWriterOptions } from '../src/sort-writer/sort-shuffle-writer.js';
import { WRITER_KINDS } from '../src/writer-kind.js';
import { buildColumn } from './support/columns.js';
import { expectedByLongKey, jsRows, outputProblems, writeAll } from './support/js-values.js';
import { buildAny } from './support/nested.js';
import { levelCounts, levelsWithoutNulls } from './support/null-levels.js';
import { Rng } from './support/random.js';
import { makeTempDir, removeDir } from './support/shuffle-harness.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const f = (name: string, type: ConstructorParameters<typeof Field>[1], nullable = true) => new Field(name, type, nullable);

const ENTRY = new Struct([f('key', new Utf8(), false), f('value', new List(f('item', new Int32())))]);
const MAP = new Map_(f('entries', ENTRY, false) as never);
const UNION = new DenseUnion([0, 1], [f('n', new Int64()), f('s', new List(f('item', new Utf8())))]);
const ELEMENT = new Struct([f('a', MAP), f('b', UNION)]);
/** list<struct<a: map<utf8, list<int32>>, b: dense union<int64, list<utf8>>>> */
const DEEP = new List(f('item', ELEMENT));
const CELL = new Struct([f('x', new Int16()), f('y', new List(f('item', new Utf8())))]);
const FIXED = new FixedSizeList(3, f('item', CELL));
/** large_list<fixed_size_list<3, struct<x: int16, y: list<utf8>>>> */
const BIG = new LargeList(f('item', FIXED));
const SCHEMA = new Schema([f('key', new Int64(), false), f('deep', DEEP), f('big', BIG)]);

const NULL_RATE = 0.25;

function batchOf(n: number, columns: Data[]): RecordBatch {
  return new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: n, nullCount: 0, children: columns }));
}

function keyColumn(n: number, rng: Rng): Data {
  return buildColumn(new Int64(), n, { bitmap: false, nullRate: 0 }, rng);
}

/** A batch whose nested columns come from the shared random builder (nulls at every level, empty lists, offsets not starting at 0, children longer than needed). */
function generated(n: number, rng: Rng): RecordBatch {
  return batchOf(n, [keyColumn(n, rng), buildAny(DEEP, n, rng, { nullRate: NULL_RATE }), buildAny(BIG, n, rng, { nullRate: NULL_RATE })]);
}

/**
 * A list-like column of n rows over `child`, a slice of a longer column (so the child has
 * its own non-zero offset): offsets start at 2, some rows empty, some null (a null
 * row may still span child rows), and the child holds a row past the last offset.
 */
function listOver(type: List | LargeList, n: number, child: Data, rng: Rng): Data {
  const offsets = [2];
  const valid: boolean[] = [];
  for (let i = 0; i < n; i++) {
    const isValid = !rng.chance(NULL_RATE);
    valid.push(isValid);
    const room = child.length - 1 - offsets[i]!;
    const count = Math.min(room, rng.chance(0.2) ? 0 : rng.int(0, 4));
    offsets.push(offsets[i]! + count);
  }
  const nullBitmap = new Uint8Array((n + 7) >>> 3);
  valid.forEach((v, i) => v && (nullBitmap[i >>> 3]! |= 1 << (i & 7)));
  const nullCount = valid.filter((v) => !v).length;
  const valueOffsets = type instanceof LargeList ? BigInt64Array.from(offsets, BigInt) : Int32Array.from(offsets);
  return makeData({ type, length: n, nullCount, nullBitmap, valueOffsets, child } as never);
}

/** A batch whose list parents sit over sliced children: deep over a struct slice, big over a fixed-size-list slice. */
function overSlicedChildren(n: number, rng: Rng): RecordBatch {
  const elements = buildAny(ELEMENT, 4 * n + 20, rng, { nullRate: NULL_RATE }).slice(9, 4 * n + 5);
  const fixed = buildAny(FIXED, 4 * n + 20, rng, { nullRate: NULL_RATE }).slice(5, 4 * n + 7);
  return batchOf(n, [keyColumn(n, rng), listOver(DEEP, n, elements, rng), listOver(BIG, n, fixed, rng)]);
}

function inputBatches(): RecordBatch[] {
  const rng = new Rng(20_240_607);
  const ipc = (batch: RecordBatch) => tableFromIPC(tableToIPC([batch] as never, 'stream')).batches[0]!;
  return [
    generated(300, rng).slice(7, 290), // offsets sub-arrayed, first offset far from 0
    generated(200, rng),
    generated(251, rng).slice(1, 250),
    overSlicedChildren(180, rng),
    overSlicedChildren(90, rng).slice(13, 77),
    generated(40, rng).slice(20, 20), // zero rows
    ipc(generated(160, rng)).slice(33, 159), // padded IPC buffers, then sliced
    generated(97, rng).slice(96, 97), // one row, at the very end
  ];
}

describe('the input is the case the test claims', () => {
  const batches = inputBatches();

  test('nulls at every level that can hold one (lists, structs, map values, union children, fixed-size lists, leaves), and values reach every level', () => {
    expect(levelsWithoutNulls(batches, ['deep', 'big'])).toEqual([]);
    const levels = [...levelCounts(batches).keys()];
    expect(levels).toContain('deep[].a{value}[]'); // list, struct, map, list, int32: depth 5
    expect(levels).toContain('deep[].b|s[]');
    expect(levels).toContain('big[][fixed].y[]'); // large list, fixed-size list, struct, list, utf8: depth 5
  });

  test('sliced inputs: list offsets that do not start at 0, children with their own offset, empty lists', () => {
    const columns = batches.map((b) => b.data.children[1]!);
    expect(columns.filter((d) => d.offset > 0).length).toBeGreaterThanOrEqual(4);
    expect(columns.filter((d) => d.length > 0 && (d.valueOffsets as Int32Array)[0]! > 0).length).toBeGreaterThanOrEqual(4);
    expect(columns.filter((d) => d.children[0]!.offset > 0).length).toBeGreaterThanOrEqual(2);
    expect(batches.map((b) => b.data.children[2]!).filter((d) => d.children[0]!.offset > 0).length).toBeGreaterThanOrEqual(2);
    expect(jsRows(batches[1]!).some((row) => row.includes('| [] |'))).toBe(true);
  });
});

describe.each(WRITER_KINDS)('%s writer: a depth-5 case, sliced, hashed on an int64 key at P = 13, comes back exactly', (writer) => {
  const settings: Array<[string, Partial<SortShuffleWriterOptions>]> =
    writer === 'hash'
      ? [
          ['lz4, 32-row batches', { codec: 'lz4', maxBatchRows: 32 }],
          ['zstd, default batches', { codec: 'zstd' }],
          ['uncompressed, 5-row batches', { codec: 'none', maxBatchRows: 5 }],
        ]
      : [
          ['16 KiB pages, 256-byte blocks', { pageBytes: 1 << 14, blockBytes: 256 }],
          ['default pages and blocks, zstd', { codec: 'zstd' }],
        ];

  test.each(settings)('%s', async (_, options) => {
    const batches = inputBatches();
    const prefix = join(dir, 'deep');
    const result = await writeAll(writer, { numPartitions: 13, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: prefix, ...options }, batches);
    const expected = expectedByLongKey(batches, 'key', 13);
    expect(result.partitionRows).toEqual(expected.map((rows) => rows.length));
    expect(expected.filter((rows) => rows.length > 0).length).toBe(13);
    expect(await outputProblems(prefix, SCHEMA, (rowStrings) => expectedByLongKey(batches, 'key', 13, rowStrings), writer === 'hash')).toEqual([]);
  });
});
