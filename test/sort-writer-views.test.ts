/**
 * Utf8View and BinaryView through the sort writer (row format), flat and
 * nested: written with createShuffleWriter('sort', ...), read back with
 * ShuffleReader, and every value compared through `vector.get(i)` with the
 * JS values the inputs were built from. Inputs are laid out by hand as a
 * producer might: long values spread over several variadic buffers at
 * non-zero offsets (a repeated value shares its bytes), null slots holding
 * views that point nowhere, columns sliced. Partitioning is on the Int32
 * column `k` (hash) or round-robin; view columns are never keys here.
 */
import { join } from 'node:path';
import {
  Binary,
  BinaryView,
  DenseUnion,
  Dictionary,
  Field,
  FixedSizeList,
  Int32,
  LargeList,
  List,
  makeData,
  makeVector,
  Map_,
  RecordBatch,
  Schema,
  SparseUnion,
  Struct,
  Type,
  Utf8,
  Utf8View,
  type Data,
  type DataType,
  type Vector,
} from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ShuffleError } from '../src/errors.js';
import type { CodecName } from '../src/format/codec.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { RowDecoder } from '../src/sort-writer/row-decoder.js';
import { rowLayoutOf } from '../src/sort-writer/row-layout.js';
import type { SortShuffleWriterOptions } from '../src/sort-writer/sort-shuffle-writer.js';
import type { Partitioning } from '../src/writer/partitioner.js';
import type { ShuffleWriteResult } from '../src/writer/writer-options.js';
import { createShuffleWriter } from '../src/writer-kind.js';
import { Rng } from './support/random.js';
import { encodeRows } from './support/row-encoding.js';
import { ReferencePartitioner } from './support/reference-partitioner.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-sort-views-')));
afterEach(async () => removeDir(dir));

const utf8 = new TextEncoder();
const CODECS: readonly CodecName[] = ['lz4', 'zstd', 'none'];

// ---------------------------------------------------------------------------------------------
// inputs

/** A union value: which child (by child index) holds it, and its value there. */
class Pick {
  constructor(
    readonly child: number,
    readonly value: unknown,
  ) {}
}

function bytesOf(value: unknown): Uint8Array {
  return typeof value === 'string' ? utf8.encode(value) : (value as Uint8Array);
}

/** Validity with row i at bit `offset + i` (the bits before it set, as junk would be); none when nothing is null. */
function validityOf(values: readonly unknown[], offset = 0): { nullBitmap?: Uint8Array; nullCount?: number } {
  const nulls = values.filter((v) => v === null).length;
  if (nulls === 0) return {};
  const bitmap = new Uint8Array((offset + values.length + 7) >>> 3);
  for (let b = 0; b < offset; b++) bitmap[b >>> 3]! |= 1 << (b & 7);
  values.forEach((v, i) => v !== null && (bitmap[(offset + i) >>> 3]! |= 1 << ((offset + i) & 7)));
  return { nullBitmap: bitmap, nullCount: nulls };
}

/**
 * A view column of `values` (strings for Utf8View, bytes for BinaryView):
 * values of up to 12 bytes inline, longer ones spread round-robin over
 * `buffers` variadic buffers, each starting with junk (so offsets are never
 * 0) and with a junk byte after every value; a value met before shares its
 * bytes. A null slot's view claims 40 bytes in buffer 99. With `offset` > 0
 * the Data has that offset: the views start at its row 0 and row i's
 * validity is bit `offset + i`, as arrow-js's slices have them.
 */
function viewData(type: Utf8View | BinaryView, values: readonly unknown[], buffers = 3, offset = 0): Data {
  const n = values.length;
  const views = new Uint8Array(n * 16);
  const view = new DataView(views.buffer);
  const pieces: number[][] = Array.from({ length: buffers }, (_, b) => new Array<number>(3 + 2 * b).fill(0xab));
  const placed = new Map<string, readonly [number, number]>();
  let long = 0;
  values.forEach((value, i) => {
    const at = 16 * i;
    if (value === null) {
      view.setInt32(at, 40, true);
      view.setInt32(at + 8, 99, true);
      view.setInt32(at + 12, 1 << 20, true);
      return;
    }
    const bytes = bytesOf(value);
    view.setInt32(at, bytes.length, true);
    if (bytes.length <= 12) {
      views.set(bytes, at + 4);
      return;
    }
    views.set(bytes.subarray(0, 4), at + 4);
    const key = Array.from(bytes).join(',');
    let where = placed.get(key);
    if (where === undefined) {
      const b = long++ % buffers;
      where = [b, pieces[b]!.length];
      for (const byte of bytes) pieces[b]!.push(byte);
      pieces[b]!.push(0xcd);
      placed.set(key, where);
    }
    view.setInt32(at + 8, where[0], true);
    view.setInt32(at + 12, where[1], true);
  });
  const variadicBuffers = pieces.map((p) => Uint8Array.from(p));
  return makeData({ type, offset, length: n, views, variadicBuffers, ...validityOf(values, offset) } as never);
}

/** A column of `type` holding `values` (JS values as `norm` gives them back; unions as Picks). */
function columnOf(type: DataType, values: readonly unknown[]): Data {
  const length = values.length;
  const validity = validityOf(values);
  const child = (i: number) => type.children[i]!.type;
  switch (type.typeId) {
    case Type.Int:
      return makeData({ type, length, ...validity, data: Int32Array.from(values, (v) => (v as number | null) ?? 0) } as never);
    case Type.Utf8View:
    case Type.BinaryView:
      return viewData(type as Utf8View, values);
    case Type.Utf8:
    case Type.Binary: {
      const pieces = values.map((v) => (v === null ? new Uint8Array(0) : bytesOf(v)));
      const valueOffsets = new Int32Array(length + 1);
      pieces.forEach((p, i) => (valueOffsets[i + 1] = valueOffsets[i]! + p.length));
      const data = new Uint8Array(valueOffsets[length]!);
      pieces.forEach((p, i) => data.set(p, valueOffsets[i]!));
      return makeData({ type, length, ...validity, valueOffsets, data } as never);
    }
    case Type.List:
    case Type.LargeList: {
      const lists = values.map((v) => (v ?? []) as unknown[]);
      const ends = [0];
      for (const list of lists) ends.push(ends[ends.length - 1]! + list.length);
      const valueOffsets = type.typeId === Type.List ? Int32Array.from(ends) : BigInt64Array.from(ends, BigInt);
      return makeData({ type, length, ...validity, valueOffsets, child: columnOf(child(0), lists.flat()) } as never);
    }
    case Type.FixedSizeList: {
      const size = (type as FixedSizeList).listSize;
      const elements = values.flatMap((v) => (v === null ? new Array<unknown>(size).fill(null) : (v as unknown[])));
      return makeData({ type, length, ...validity, child: columnOf(child(0), elements) } as never);
    }
    case Type.Struct: {
      const children = type.children.map((f) => columnOf(f.type, values.map((v) => (v === null ? null : (v as Record<string, unknown>)[f.name]!))));
      return makeData({ type, length, ...validity, children } as never);
    }
    case Type.Map: {
      const lists = values.map((v) => (v ?? []) as [unknown, unknown][]);
      const ends = [0];
      for (const list of lists) ends.push(ends[ends.length - 1]! + list.length);
      const entries = columnOf(child(0), lists.flat().map(([key, value]) => ({ key, value })));
      return makeData({ type, length, ...validity, valueOffsets: Int32Array.from(ends), child: entries } as never);
    }
    case Type.Union: {
      const union = type as DenseUnion | SparseUnion;
      const picks = values as Pick[];
      const typeIds = Int8Array.from(picks, (p) => union.typeIds[p.child]!);
      if (union instanceof DenseUnion) {
        const perChild: unknown[][] = union.children.map(() => []);
        const valueOffsets = Int32Array.from(picks, (p) => perChild[p.child]!.push(p.value) - 1);
        return makeData({ type, length, typeIds, valueOffsets, children: union.children.map((f, c) => columnOf(f.type, perChild[c]!)) } as never);
      }
      const children = union.children.map((f, c) => columnOf(f.type, picks.map((p) => (p.child === c ? p.value : null))));
      return makeData({ type, length, typeIds, children } as never);
    }
    case Type.Dictionary: {
      // the distinct values in first-seen order; a null row's index is 0
      const keyOf = (v: unknown) => (typeof v === 'string' ? `s:${v}` : `b:${Array.from(v as Uint8Array).join(',')}`);
      const seen = new Map<string, number>();
      const distinct: unknown[] = [];
      const indices = Int32Array.from(values, (v) => {
        if (v === null) return 0;
        const key = keyOf(v);
        if (!seen.has(key)) seen.set(key, distinct.push(v) - 1);
        return seen.get(key)!;
      });
      const dictionary = makeVector(columnOf((type as Dictionary).dictionary, distinct));
      return makeData({ type, length, ...validity, data: indices, dictionary } as never);
    }
    default:
      throw new Error(`no test column for ${String(type)}`);
  }
}

function batchOf(schema: Schema, columns: readonly Data[]): RecordBatch {
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: columns[0]!.length, children: columns as Data[] }));
}

/** A batch and the JS values of its rows (one array per row, in schema order, as `norm` gives them). */
interface Input {
  batch: RecordBatch;
  rows: unknown[][];
}

function inputOf(schema: Schema, columns: readonly (readonly unknown[])[]): Input {
  const batch = batchOf(
    schema,
    schema.fields.map((f, c) => columnOf(f.type, columns[c]!)),
  );
  return { batch, rows: rowsOfColumns(columns) };
}

function rowsOfColumns(columns: readonly (readonly unknown[])[]): unknown[][] {
  return columns[0]!.map((_, i) => columns.map((c) => norm(c[i])));
}

/** Rows [from, from + length) of an input: batch.slice, and the same rows' values. */
function sliceOf(input: Input, from: number, length: number): Input {
  return { batch: input.batch.slice(from, from + length), rows: input.rows.slice(from, from + length) };
}

/** Bytes as a plain array, unions as their value, recursively: the form values are compared in. */
function norm(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (value instanceof Pick) return norm(value.value);
  if (value instanceof Uint8Array) return Array.from(value);
  if (Array.isArray(value)) return value.map(norm);
  if (typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, norm(v)]));
  return value;
}

/** What `vector.get(i)` gave, in `norm`'s form, checking that view values come back as strings (Utf8View) or bytes (BinaryView). */
function fromArrow(value: unknown, type: DataType): unknown {
  if (value === null || value === undefined) return null;
  switch (type.typeId) {
    case Type.Utf8View:
    case Type.Utf8:
      expect(typeof value).toBe('string');
      return value;
    case Type.BinaryView:
    case Type.Binary:
      expect(value).toBeInstanceOf(Uint8Array);
      return Array.from(value as Uint8Array);
    case Type.List:
    case Type.LargeList:
    case Type.FixedSizeList:
      return Array.from(value as Vector, (e) => fromArrow(e, type.children[0]!.type));
    case Type.Struct:
      return Object.fromEntries(type.children.map((f) => [f.name, fromArrow((value as Record<string, unknown>)[f.name], f.type)]));
    case Type.Map: {
      const [key, item] = type.children[0]!.type.children as Field[];
      return Array.from(value as Iterable<[unknown, unknown]>, ([k, v]) => [fromArrow(k, key!.type), fromArrow(v, item!.type)]);
    }
    case Type.Dictionary:
      return fromArrow(value, (type as Dictionary).dictionary);
    default:
      return norm(value); // Int32; a union's value (its child's: a number, a string or bytes)
  }
}

/** Row i of every column of `batch`, through vector.get. */
function rowsOf(batch: RecordBatch): unknown[][] {
  const columns = batch.schema.fields.map((f, c) => [batch.getChildAt(c)!, f.type] as const);
  return Array.from({ length: batch.numRows }, (_, i) => columns.map(([vector, type]) => fromArrow(vector.get(i), type)));
}

// value generators: lengths around the inline limit (12) and past 128 bytes

const LENGTHS = [0, 1, 4, 11, 12, 12, 13, 13, 14, 31, 100, 129, 200, 333];

function text(rng: Rng): string | null {
  if (rng.chance(0.15)) return null;
  const length = rng.pick(LENGTHS);
  if (length === 12 && rng.chance(0.5)) return '€€€€'; // 12 bytes of UTF-8, 4 characters
  if (length === 13 && rng.chance(0.5)) return 'ñ'.repeat(6) + '!'; // 13 bytes
  let s = '';
  for (let i = 0; i < length; i++) s += String.fromCharCode(97 + rng.int(0, 25));
  return s;
}

function bytes(rng: Rng): Uint8Array | null {
  if (rng.chance(0.15)) return null;
  return rng.fill(new Uint8Array(rng.pick(LENGTHS)));
}

// ---------------------------------------------------------------------------------------------
// running a shuffle

interface Outcome {
  result: ShuffleWriteResult;
  /** per partition, the rows the reader gave, in order */
  actual: unknown[][][];
  /** per partition, the input rows the reference partitioner sends there, in input order */
  expected: unknown[][][];
  /** every batch read */
  batches: RecordBatch[];
}

type Options = Omit<SortShuffleWriterOptions, 'outputPrefix'>;

/** Writes the inputs with the sort writer, reads every partition back; checks every batch read has the input's schema. */
async function shuffle(inputs: readonly Input[], options: Options): Promise<Outcome> {
  const schema = inputs[0]!.batch.schema;
  const prefix = join(dir, `map-${Math.random().toString(16).slice(2)}`);
  const reference = new ReferencePartitioner(options.partitioning, schema, options.numPartitions, options.mapId ?? 0);
  const expected: unknown[][][] = Array.from({ length: options.numPartitions }, () => []);
  for (const input of inputs) {
    expect(rowsOf(input.batch), 'the input holds the values it was built from').toEqual(input.rows);
    reference.partitionsOf(input.batch).forEach((p, i) => expected[p]!.push(input.rows[i]!));
  }
  const writer = await createShuffleWriter('sort', { ...options, outputPrefix: prefix });
  for (const input of inputs) await writer.write(input.batch);
  const result = await writer.finish();
  const actual: unknown[][][] = [];
  const batches: RecordBatch[] = [];
  const reader = await ShuffleReader.open(prefix);
  try {
    for (let p = 0; p < options.numPartitions; p++) {
      const rows: unknown[][] = [];
      for await (const batch of reader.readPartition(p)) {
        expect(batch.schema.fields.map((f) => String(f.type))).toEqual(schema.fields.map((f) => String(f.type)));
        rows.push(...rowsOf(batch));
        batches.push(batch);
      }
      actual.push(rows);
    }
  } finally {
    await reader.close();
  }
  return { result, actual, expected, batches };
}

// ---------------------------------------------------------------------------------------------

const FLAT = new Schema([
  new Field('id', new Int32(), false),
  new Field('k', new Int32(), false),
  new Field('s', new Utf8View(), true),
  new Field('b', new BinaryView(), true),
]);

/** `n` rows of FLAT from `first`. */
function flatColumns(rng: Rng, first: number, n: number): unknown[][] {
  const ids = Array.from({ length: n }, (_, i) => first + i);
  return [ids, ids.map(() => rng.int(-1000, 1000)), ids.map(() => text(rng)), ids.map(() => bytes(rng))];
}

/** Rows of FLAT whose view columns are Data with offset 5 (built so, not sliced), in 2 variadic buffers. */
function offsetInput(rng: Rng, first: number, n: number): Input {
  const columns = flatColumns(rng, first, n);
  const batch = batchOf(FLAT, [
    columnOf(FLAT.fields[0]!.type, columns[0]!),
    columnOf(FLAT.fields[1]!.type, columns[1]!),
    viewData(new Utf8View(), columns[2]!, 2, 5),
    viewData(new BinaryView(), columns[3]!, 2, 5),
  ]);
  expect(batch.data.children[2]!.offset).toBe(5);
  return { batch, rows: rowsOfColumns(columns) };
}

/** Several batches of FLAT: plain, sliced (twice, at odd offsets), with offset Data, all null, no long value, empty strings only, one row. */
function flatInputs(seed: number): Input[] {
  const rng = new Rng(seed);
  const whole = inputOf(FLAT, flatColumns(rng, 0, 300));
  const another = inputOf(FLAT, flatColumns(rng, 1000, 120));
  const ids = (first: number, n: number) => Array.from({ length: n }, (_, i) => first + i);
  const allNull = inputOf(FLAT, [ids(2000, 20), ids(0, 20), new Array(20).fill(null), new Array(20).fill(null)]);
  const short = inputOf(FLAT, [ids(3000, 30), ids(7, 30), ids(0, 30).map((i) => 'x'.repeat(i % 13)), ids(0, 30).map((i) => new Uint8Array(i % 13).fill(i))]);
  const empty = inputOf(FLAT, [ids(4000, 9), ids(100, 9), new Array(9).fill(''), new Array(9).fill(new Uint8Array(0))]);
  const one = inputOf(FLAT, [[5000], [3], ['a value longer than twelve bytes'], [new Uint8Array(13).fill(0xff)]]);
  return [whole, sliceOf(another, 7, 101), offsetInput(rng, 6000, 77), allNull, sliceOf(whole, 3, 250), short, empty, one];
}

const SCENARIOS: readonly { codec: CodecName; partitioning: Partitioning; numPartitions: number; extra: Partial<Options> }[] = [
  { codec: 'lz4', partitioning: { kind: 'hash', keys: ['k'] }, numPartitions: 7, extra: { pageBytes: 4096, blockBytes: 2048 } },
  { codec: 'zstd', partitioning: { kind: 'round-robin' }, numPartitions: 5, extra: { mapId: 3 } },
  { codec: 'none', partitioning: { kind: 'hash', keys: ['k'] }, numPartitions: 4, extra: { maxBatchRows: 50 } },
];

describe('flat Utf8View and BinaryView columns through the sort writer', () => {
  test.each(SCENARIOS)(
    '$codec, $partitioning.kind into $numPartitions: nulls, empty values, 12- and 13-byte values, long ones in 3 variadic buffers, sliced and offset inputs, several batches',
    async ({ codec, partitioning, numPartitions, extra }) => {
      const inputs = flatInputs(numPartitions * 7919);
      const out = await shuffle(inputs, { codec, partitioning, numPartitions, ...extra });
      expect(out.actual).toEqual(out.expected);
      expect(out.result.rows).toBe(inputs.reduce((n, i) => n + i.batch.numRows, 0));
      expect(out.expected.filter((rows) => rows.length > 0).length, 'rows spread over several partitions').toBeGreaterThan(1);
      for (const batch of out.batches) {
        // views stay views: the columns are not converted to Utf8 or Binary
        expect(batch.getChildAt(2)!.type.typeId).toBe(Type.Utf8View);
        expect(batch.getChildAt(3)!.type.typeId).toBe(Type.BinaryView);
        expect(batch.data.children[2]!.type).toBeInstanceOf(Utf8View);
        expect(batch.data.children[3]!.type).toBeInstanceOf(BinaryView);
      }
    },
  );
});

// ---------------------------------------------------------------------------------------------

interface NestedCase {
  name: string;
  type: DataType;
  value: (rng: Rng) => unknown;
}

const maybe = <T>(rng: Rng, value: () => T): T | null => (rng.chance(0.1) ? null : value());
const some = <T>(rng: Rng, max: number, value: () => T): T[] => Array.from({ length: rng.int(0, max) }, value);

const NESTED: readonly NestedCase[] = [
  {
    name: 'List<Utf8View>',
    type: new List(new Field('item', new Utf8View(), true)),
    value: (rng) => maybe(rng, () => some(rng, 4, () => text(rng))),
  },
  {
    name: 'LargeList<BinaryView>',
    type: new LargeList(new Field('item', new BinaryView(), true)),
    value: (rng) => maybe(rng, () => some(rng, 4, () => bytes(rng))),
  },
  {
    name: 'FixedSizeList<3, Utf8View>',
    type: new FixedSizeList(3, new Field('item', new Utf8View(), true)),
    value: (rng) => maybe(rng, () => [text(rng), text(rng), text(rng)]),
  },
  {
    name: 'Struct<{b: BinaryView, n: Int32}>',
    type: new Struct([new Field('b', new BinaryView(), true), new Field('n', new Int32(), true)]),
    value: (rng) => maybe(rng, () => ({ b: bytes(rng), n: rng.int(0, 99) })),
  },
  {
    name: 'Map<Utf8View, Utf8View>',
    type: new Map_(new Field('entries', new Struct([new Field('key', new Utf8View(), false), new Field('value', new Utf8View(), true)]), false) as never),
    value: (rng) => maybe(rng, () => some(rng, 3, () => [text(rng) ?? 'a key never null, thirty bytes', text(rng)])),
  },
  {
    name: 'DenseUnion<{i: Int32 = 0, s: Utf8View = 5}>',
    type: new DenseUnion([0, 5], [new Field('i', new Int32(), true), new Field('s', new Utf8View(), true)]),
    value: (rng) => (rng.chance(0.3) ? new Pick(0, rng.chance(0.2) ? null : rng.int(0, 9)) : new Pick(1, text(rng))),
  },
  {
    name: 'SparseUnion<{s: Utf8View, b: BinaryView}>',
    type: new SparseUnion([0, 1], [new Field('s', new Utf8View(), true), new Field('b', new BinaryView(), true)]),
    value: (rng) => (rng.chance(0.5) ? new Pick(0, text(rng)) : new Pick(1, bytes(rng))),
  },
  {
    name: 'List<Struct<{name: Utf8View, tags: List<BinaryView>}>> (3 levels)',
    type: new List(
      new Field('item', new Struct([new Field('name', new Utf8View(), true), new Field('tags', new List(new Field('item', new BinaryView(), true)), true)]), true),
    ),
    value: (rng) => maybe(rng, () => some(rng, 3, () => maybe(rng, () => ({ name: text(rng), tags: maybe(rng, () => some(rng, 3, () => bytes(rng))) })))),
  },
  {
    name: 'Struct<{m: Map<Utf8View, List<Utf8View>>}> (4 levels)',
    type: new Struct([
      new Field(
        'm',
        new Map_(new Field('entries', new Struct([new Field('key', new Utf8View(), false), new Field('value', new List(new Field('item', new Utf8View(), true)), true)]), false) as never),
        true,
      ),
    ]),
    value: (rng) => maybe(rng, () => ({ m: maybe(rng, () => some(rng, 2, () => [`key ${rng.int(0, 1e6)} of the map`, maybe(rng, () => some(rng, 3, () => text(rng)))])) })),
  },
  {
    name: 'Dictionary<Int32, Utf8View>',
    type: new Dictionary(new Utf8View(), new Int32()),
    value: (rng) => (rng.chance(0.1) ? null : rng.pick(['short', '', 'exactly12byt', 'thirteen byte', 'a value well past the inline limit of twelve bytes', 'x'.repeat(150)])),
  },
  {
    name: 'List<Dictionary<Int32, BinaryView>>',
    type: new List(new Field('item', new Dictionary(new BinaryView(), new Int32(), 7), true)),
    value: (rng) => maybe(rng, () => some(rng, 3, () => (rng.chance(0.1) ? null : rng.pick([new Uint8Array(0), new Uint8Array(12).fill(1), new Uint8Array(13).fill(2), new Uint8Array(200).fill(3)])))),
  },
];

function nestedSchema(type: DataType): Schema {
  return new Schema([new Field('id', new Int32(), false), new Field('k', new Int32(), false), new Field('v', type, true)]);
}

function nestedInput(schema: Schema, rng: Rng, first: number, n: number, value: (rng: Rng) => unknown): Input {
  const ids = Array.from({ length: n }, (_, i) => first + i);
  return inputOf(schema, [ids, ids.map(() => rng.int(0, 1e6)), ids.map(() => value(rng))]);
}

describe('view columns nested at any depth through the sort writer', () => {
  test.each(NESTED.map((c, i) => ({ ...c, codec: CODECS[i % 3]! })))('$name ($codec): round trips with nulls, sliced batches, hash on k', async ({ type, value, codec }) => {
    const schema = nestedSchema(type);
    const rng = new Rng(type.typeId * 131 + 7);
    const a = nestedInput(schema, rng, 0, 200, value);
    const b = nestedInput(schema, rng, 1000, 80, value);
    const inputs = [a, sliceOf(b, 5, 61), sliceOf(a, 17, 150)];
    const out = await shuffle(inputs, { codec, partitioning: { kind: 'hash', keys: ['k'] }, numPartitions: 3, blockBytes: 4096 });
    expect(out.actual).toEqual(out.expected);
    for (const batch of out.batches) expect(String(batch.schema.fields[2]!.type)).toBe(String(type));
  });
});

// ---------------------------------------------------------------------------------------------

describe('spilling', () => {
  test('under a small memory pool the writer spills and every view value comes back, in order', async () => {
    const schema = new Schema([...FLAT.fields, new Field('l', new List(new Field('item', new Utf8View(), true)), true)]);
    const rng = new Rng(42);
    const inputs = Array.from({ length: 10 }, (_, b) => {
      const columns = flatColumns(rng, b * 400, 400);
      columns.push(columns[0]!.map(() => maybe(rng, () => some(rng, 3, () => text(rng)))));
      return inputOf(schema, columns);
    });
    const out = await shuffle(inputs, { codec: 'lz4', partitioning: { kind: 'hash', keys: ['k'] }, numPartitions: 5, memoryPool: new MemoryPool(192 * 1024) });
    expect(out.result.spills).toBeGreaterThan(1);
    expect(out.actual).toEqual(out.expected);
  });
});

// ---------------------------------------------------------------------------------------------

/** Checks a decoded view column: one variadic buffer with the long values back to back; inline views zero padded; null views zero. */
function expectDecodedLayout(data: Data): void {
  expect(data.variadicBuffers.length).toBe(1);
  const views = data.values as Uint8Array;
  const view = new DataView(views.buffer, views.byteOffset, views.byteLength);
  const buffer = data.variadicBuffers[0]!;
  let offset = 0;
  for (let i = 0; i < data.length; i++) {
    const at = 16 * i;
    const length = view.getInt32(at, true);
    const valid = data.getValid(i);
    if (!valid) expect(Array.from(views.subarray(at, at + 16))).toEqual(new Array(16).fill(0));
    else if (length <= 12) expect(Array.from(views.subarray(at + 4 + length, at + 16))).toEqual(new Array(12 - length).fill(0));
    else {
      expect(view.getInt32(at + 8, true)).toBe(0);
      expect(view.getInt32(at + 12, true)).toBe(offset);
      expect(Array.from(views.subarray(at + 4, at + 8))).toEqual(Array.from(buffer.subarray(offset, offset + 4)));
      offset += length;
    }
  }
  expect(buffer.byteLength).toBe(offset);
}

describe('decoded view columns', () => {
  test('have exactly one variadic buffer, holding the long values back to back (empty when none is long), at any depth', async () => {
    const schema = new Schema([...FLAT.fields, new Field('l', new List(new Field('item', new Utf8View(), true)), true), new Field('d', new Dictionary(new Utf8View(), new Int32()), true)]);
    const rng = new Rng(9);
    const columns = flatColumns(rng, 0, 100);
    columns.push(columns[0]!.map(() => maybe(rng, () => some(rng, 3, () => text(rng)))));
    columns.push(columns[0]!.map(() => text(rng)));
    const ids = Array.from({ length: 10 }, (_, i) => 500 + i);
    const shortOnly = [ids, ids, ids.map((i) => `v${i}`), ids.map(() => new Uint8Array(3)), ids.map(() => ['tiny', null]), ids.map(() => 'dict')];
    const out = await shuffle([inputOf(schema, columns), inputOf(schema, shortOnly)], { codec: 'none', partitioning: { kind: 'single' }, numPartitions: 1, maxBatchRows: 100 });
    expect(out.actual).toEqual(out.expected);
    expect(out.batches.length).toBe(2);
    for (const batch of out.batches) {
      const [, , s, b, l, d] = batch.data.children;
      for (const data of [s!, b!, l!.children[0]!, d!.dictionary!.data[0]!]) expectDecodedLayout(data);
    }
    const last = out.batches[1]!.data.children;
    expect(last[2]!.variadicBuffers[0]!.byteLength).toBe(0);
    expect(last[4]!.children[0]!.variadicBuffers[0]!.byteLength).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------

describe('the row bytes of a view value', () => {
  test('are those of the same value in Utf8 or Binary, flat and nested; they decode back to view columns', () => {
    const rng = new Rng(5);
    const views = new Schema([
      new Field('s', new Utf8View(), true),
      new Field('b', new BinaryView(), true),
      new Field('l', new List(new Field('item', new Utf8View(), true)), true),
      new Field('t', new Struct([new Field('x', new BinaryView(), true)]), true),
    ]);
    const plain = new Schema([
      new Field('s', new Utf8(), true),
      new Field('b', new Binary(), true),
      new Field('l', new List(new Field('item', new Utf8(), true)), true),
      new Field('t', new Struct([new Field('x', new Binary(), true)]), true),
    ]);
    const n = 150;
    const columns = [
      Array.from({ length: n }, () => text(rng)),
      Array.from({ length: n }, () => bytes(rng)),
      Array.from({ length: n }, () => maybe(rng, () => some(rng, 3, () => text(rng)))),
      Array.from({ length: n }, () => maybe(rng, () => ({ x: bytes(rng) }))),
    ];
    const encoded = encodeRows(inputOf(views, columns).batch, (bytes) => new Uint8Array(bytes).fill(0x5a)); // pages are reused: every byte of a row must be written
    expect(Buffer.from(encoded).equals(Buffer.from(encodeRows(inputOf(plain, columns).batch)))).toBe(true);
    const decoded = new RowDecoder(views, rowLayoutOf(views.fields)).decode(encoded, n, (what) => new ShuffleError('CS_CORRUPT_DATA', what));
    expect(decoded.flatMap((batch) => rowsOf(batch))).toEqual(rowsOfColumns(columns));
    expect(decoded[0]!.data.children[0]!.type).toBeInstanceOf(Utf8View);
  });
});
