/**
 * Range partitioning (src/writer/range-partitioner.ts) puts each row where
 * Spark's RangePartitioner with the same bounds would: in the partition
 * numbered by how many bounds sort before it, keys compared in turn, each in
 * its direction and null order. Claimed against the worked examples of the
 * code, against a one-row-at-a-time reference (support/reference-range.ts)
 * for every orderable type, random slices, null rates, key counts and
 * orders, struct and dictionary keys, and for Spark's special values (NaN,
 * -0.0, unsigned high bits, byte prefixes, struct fields and null structs);
 * bad keys and bounds are refused with what is wrong.
 * Both writers' round trips with range partitioning are in
 * property-roundtrip.test.ts; a map task in a worker thread in
 * map-task-pool.test.ts.
 */
import fc from 'fast-check';
import {
  Decimal,
  Dictionary,
  Field,
  Float64,
  Int32,
  Int64,
  IntervalDayTime,
  List,
  RecordBatch,
  Schema,
  Null,
  Struct,
  Table,
  Type,
  Uint64,
  Utf8,
  Utf8View,
  Vector,
  makeData,
  tableToIPC,
  vectorFromArray,
  type Data,
  type DataType,
} from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import { ShuffleError } from '../src/errors.js';
import { DecodedDictionaries } from '../src/writer/key-hash.js';
import { createPartitioner, type Partitioning } from '../src/writer/partitioner.js';
import { rangeBoundsOf } from '../src/writer/range-bounds.js';
import type { RangeBounds, RangeKey } from '../src/writer/range-partitioner.js';
import { batchOf, buildColumn, NO_BITMAP, TYPE_CASES } from './support/columns.js';
import { Rng } from './support/random.js';
import { buildAny } from './support/nested.js';
import { boundsFrom, compareTuples, keyValue, orderOf, ReferenceRange, type KeyValue } from './support/reference-range.js';

function partitionIds(batch: RecordBatch, keys: readonly (string | RangeKey)[], bounds: RangeBounds, numPartitions: number): number[] {
  const ids = new Uint32Array(batch.numRows);
  createPartitioner({ kind: 'range', keys, bounds }, batch.schema, numPartitions, 0).computePartitionIds(batch, ids, 0);
  return [...ids];
}

function tableOf(columns: Record<string, { values: unknown[]; type: DataType }>): Table {
  return new Table(Object.fromEntries(Object.entries(columns).map(([name, { values, type }]) => [name, vectorFromArray(values, type)])));
}

const INPUT = tableOf({ k: { values: [5, 10, 11, 20, 21, null, -3], type: new Int32() }, s: { values: ['a', 'b', 'c', 'd', 'e', 'f', 'g'], type: new Utf8() } });
const ROWS = INPUT.batches[0]!;

function refused(make: () => unknown, code: string, message: RegExp): void {
  let error: unknown;
  try {
    make();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ShuffleError);
  expect((error as ShuffleError).code).toBe(code);
  expect((error as ShuffleError).message).toMatch(message);
}

describe('the worked examples of range-partitioner.ts', () => {
  test('ascending bounds [10, 20]: a row equal to a bound goes to that bound\'s partition, a null first', () => {
    expect(partitionIds(ROWS, ['k'], tableOf({ k: { values: [10, 20], type: new Int32() } }), 3)).toEqual([0, 0, 1, 1, 2, 0, 0]);
  });

  test('descending bounds [20, 10]: larger keys first, a null last', () => {
    expect(partitionIds(ROWS, [{ column: 'k', descending: true }], tableOf({ k: { values: [20, 10], type: new Int32() } }), 3)).toEqual([2, 1, 1, 0, 0, 2, 2]);
  });

  test('the null order can be turned around either way', () => {
    const asc = tableOf({ k: { values: [10, 20], type: new Int32() } });
    expect(partitionIds(ROWS, [{ column: 'k', nullsFirst: false }], asc, 3)[5]).toBe(2);
    const desc = tableOf({ k: { values: [20, 10], type: new Int32() } });
    expect(partitionIds(ROWS, [{ column: 'k', descending: true, nullsFirst: true }], desc, 3)[5]).toBe(0);
  });

  test('two keys compare as tuples: the second decides between rows equal in the first', () => {
    const bounds = tableOf({ s: { values: ['b', 'd'], type: new Utf8() }, k: { values: [0, 100], type: new Int32() } });
    // (a,5) (b,10) (c,11) (d,20) (e,21) (f,null) (g,-3) against (b,0) and (d,100)
    expect(partitionIds(ROWS, ['s', 'k'], bounds, 3)).toEqual([0, 1, 1, 1, 2, 2, 2]);
  });

  test('a null bound is a value like any other: nulls equal to it go to its partition', () => {
    const bounds = tableOf({ k: { values: [null, 10], type: new Int32() } });
    expect(partitionIds(ROWS, ['k'], bounds, 3)).toEqual([1, 1, 2, 2, 2, 0, 1]);
  });

  test('fewer bounds than partitions - 1 leave the last partitions empty; no bounds send everything to partition 0', () => {
    expect(Math.max(...partitionIds(ROWS, ['k'], tableOf({ k: { values: [10], type: new Int32() } }), 100))).toBe(1);
    expect(partitionIds(ROWS, ['k'], tableOf({ k: { values: [], type: new Int32() } }), 4)).toEqual([0, 0, 0, 0, 0, 0, 0]);
  });

  test('bounds given as a RecordBatch, a Table of many chunks or IPC stream bytes place rows alike', () => {
    const bounds = tableOf({ k: { values: [-3, 10, 20], type: new Int32() } });
    const expected = partitionIds(ROWS, ['k'], bounds, 4);
    expect(partitionIds(ROWS, ['k'], bounds.batches[0]!, 4)).toEqual(expected);
    expect(partitionIds(ROWS, ['k'], tableToIPC(bounds, 'stream'), 4)).toEqual(expected);
    const chunked = new Table({ k: vectorFromArray([-3], new Int32()).concat(vectorFromArray([10, 20], new Int32())) });
    expect(chunked.batches.length).toBe(2);
    expect(partitionIds(ROWS, ['k'], chunked, 4)).toEqual(expected);
  });
});

describe("Spark's order of special values", () => {
  test('floats: -0.0 equals 0.0, NaN sorts after +Infinity and equals NaN', () => {
    const input = tableOf({ x: { values: [-0, 0, 1, Infinity, NaN, -Infinity, null], type: new Float64() } }).batches[0]!;
    const bounds = tableOf({ x: { values: [0, Infinity, NaN], type: new Float64() } });
    expect(partitionIds(input, ['x'], bounds, 4)).toEqual([0, 0, 1, 1, 2, 0, 0]);
  });

  test('with enough bounds for the bucket index: infinities, NaN and values beyond the bounds land as the reference says', () => {
    const values = [-Infinity, -1e300, -1, -0, 0, 0.5, 1, 2, 2.5, 3, 1e300, Infinity, NaN, null];
    const input = tableOf({ x: { values, type: new Float64() } }).batches[0]!;
    const bounds = tableOf({ x: { values: [-1, 0, 1, 2, 3, Infinity, NaN], type: new Float64() } });
    const expected = new ReferenceRange(['x'], bounds).partitionsOf(input);
    expect(expected).toEqual([0, 0, 0, 1, 1, 2, 2, 3, 4, 4, 5, 5, 6, 0]);
    expect(partitionIds(input, ['x'], bounds, 8)).toEqual(expected);
    expect(partitionIds(input, [{ column: 'x', descending: true }], tableOf({ x: { values: [NaN, Infinity, 3, 2, 1, 0, -1], type: new Float64() } }), 8)).toEqual(
      new ReferenceRange([{ column: 'x', descending: true }], tableOf({ x: { values: [NaN, Infinity, 3, 2, 1, 0, -1], type: new Float64() } })).partitionsOf(input),
    );
  });

  test('int64 values one apart where their doubles are equal (above 2^53) are told apart within a bucket', () => {
    const big = 2n ** 62n;
    const input = tableOf({ x: { values: [big - 1n, big, big + 1n, big + 2n, -big, 2n ** 63n - 1n, -(2n ** 63n)], type: new Int64() } }).batches[0]!;
    const bounds = tableOf({ x: { values: [-big, 0n, big, big + 1n, big + 3n], type: new Int64() } });
    expect(partitionIds(input, ['x'], bounds, 6)).toEqual([2, 2, 3, 4, 0, 5, 0]);
  });

  test('uint64 values with the top bit set sort above smaller ones; int64 negatives below zero', () => {
    const u = tableOf({ x: { values: [1n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 63n - 1n], type: new Uint64() } }).batches[0]!;
    expect(partitionIds(u, ['x'], tableOf({ x: { values: [2n ** 63n - 1n], type: new Uint64() } }), 2)).toEqual([0, 1, 1, 0]);
    const s = tableOf({ x: { values: [-(2n ** 62n), 0n, -1n, 2n ** 40n], type: new Int64() } }).batches[0]!;
    expect(partitionIds(s, ['x'], tableOf({ x: { values: [-1n], type: new Int64() } }), 2)).toEqual([0, 1, 0, 1]);
  });

  test('strings compare as unsigned bytes, a prefix first ("" < "a" < "ab" < "b" < "é")', () => {
    const input = tableOf({ x: { values: ['', 'a', 'ab', 'b', 'é', 'aa'], type: new Utf8() } }).batches[0]!;
    const bounds = tableOf({ x: { values: ['a', 'ab', 'b'], type: new Utf8() } });
    expect(partitionIds(input, ['x'], bounds, 4)).toEqual([0, 0, 1, 2, 3, 1]);
  });

  // The bounds' shared bytes are compared first: a row leaving them sorts before or after every bound without a search.
  test.each([
    ['utf8', () => new Utf8()],
    ['utf8 view', () => new Utf8View()],
  ] as const)('%s bounds sharing a prefix: rows that leave it anywhere, stop inside it, equal it or go past it land as the reference says', (_, type) => {
    const shared = 'https://www.';
    const ascending = ['', 'a', 'apple', 'kiwi', 'kiwi2', 'pear', '\u00ff'].map((suffix) => shared + suffix);
    const rows = [
      '', 'h', 'http', 'http://a.b', 'https:', 'https://ww', 'https://wwx', 'https://www', 'https://www-', 'https://www/',
      ...[...shared].map((_, k) => shared.slice(0, k) + '\u0000'),
      ...[...shared].map((_, k) => shared.slice(0, k) + '\u00ff'),
      shared, shared + '\u0000', shared + 'a', shared + 'aa', shared + 'apple', shared + 'applf', shared + 'fig', shared + 'kiwi', shared + 'kiwi1',
      shared + 'kiwi2', shared + 'kiwi20', shared + 'pear', shared + 'zzz', shared + '\u00ff', shared + '\u00ff\u0000', 'https://wwz', 'z', null,
    ];
    const input = tableOf({ x: { values: rows, type: type() } }).batches[0]!;
    for (const order of [{ column: 'x' }, { column: 'x', descending: true }] as RangeKey[]) {
      const values = order.descending === true ? [...ascending].reverse() : ascending;
      const orderedBounds = tableOf({ x: { values, type: type() } });
      const expected = new ReferenceRange([order], orderedBounds).partitionsOf(input);
      expect(new Set(expected).size).toBeGreaterThan(5);
      expect(partitionIds(input, [order], orderedBounds, 8)).toEqual(expected);
    }
  });

  /** A one-column batch `x` of decimals of `bitWidth` bits holding `values` (two's complement words, the lowest first). */
  function decimals(bitWidth: 32 | 64 | 128 | 256, values: readonly bigint[]): RecordBatch {
    const type = new Decimal(2, { 32: 9, 64: 18, 128: 38, 256: 76 }[bitWidth], bitWidth);
    const width = bitWidth / 32;
    const words = values.flatMap((v) => {
      const u = BigInt.asUintN(bitWidth, v);
      return Array.from({ length: width }, (_, w) => Number((u >> BigInt(32 * w)) & 0xffffffffn));
    });
    return batchOf(new Schema([new Field('x', type, false)]), [makeData({ type, length: values.length, nullCount: 0, data: Uint32Array.from(words) })], values.length);
  }

  test('decimals compare by their signed value across all words', () => {
    const batch = decimals(128, [-(2n ** 100n), -1n, 0n, 2n ** 96n, 2n ** 32n]);
    expect(partitionIds(batch, ['x'], new Table(decimals(128, [-1n, 2n ** 32n])), 3)).toEqual([0, 0, 1, 2, 1]);
  });

  // Regression: a decimal32's bucket was taken from its word and the word before it, another row's (or bound's) value.
  test.each([32, 64, 128, 256] as const)('decimal%s rows equal to a bound go to its partition whatever the row before them holds', (bitWidth) => {
    const bounds = new Table(decimals(bitWidth, [1n, 2n, 3n, 4n, 5n]));
    const input = decimals(bitWidth, [-1n, 2n, -1n, 1n, -999n, 3n, 7n, 4n, 0n, 5n, -1n, 6n]);
    const expected = new ReferenceRange(['x'], bounds).partitionsOf(input);
    expect(expected).toEqual([0, 1, 0, 0, 0, 2, 5, 3, 0, 4, 0, 5]);
    expect(partitionIds(input, ['x'], bounds, 6)).toEqual(expected);
  });

  // With four bounds or more, a row is looked up in a bucket of a monotone double approximation of its value: its low
  // 64 bits when every bound fits them (values beyond them clamped past the bounds), its top 64 bits otherwise.
  test.each([128, 256] as const)('decimal%s bounds within 64 bits: rows beyond them, below them and one apart above 2^53 land by their exact value', (bitWidth) => {
    const big = 2n ** 60n;
    const bounds = decimals(bitWidth, [-big, -1n, 0n, big, big + 1n, big + 3n]);
    const rows = [-(2n ** 100n), -(2n ** 63n) - 1n, -(2n ** 63n), -big - 1n, -big, -5n, -1n, 0n, 7n, big - 1n, big, big + 1n, big + 2n, big + 3n, big + 4n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n, 2n ** 100n];
    const input = decimals(bitWidth, rows);
    const expected = new ReferenceRange(['x'], new Table(bounds)).partitionsOf(input);
    expect(expected).toEqual([0, 0, 0, 0, 0, 1, 1, 2, 3, 3, 3, 4, 5, 5, 6, 6, 6, 6, 6]);
    expect(partitionIds(input, ['x'], new Table(bounds), 8)).toEqual(expected);
    const descending = new Table(decimals(bitWidth, [big + 3n, big + 1n, big, 0n, -1n, -big]));
    const expectedDescending = new ReferenceRange([{ column: 'x', descending: true }], descending).partitionsOf(input);
    expect(expectedDescending).toEqual([6, 6, 6, 6, 5, 5, 4, 3, 3, 3, 2, 1, 1, 0, 0, 0, 0, 0, 0]);
    expect(partitionIds(input, [{ column: 'x', descending: true }], descending, 8)).toEqual(expectedDescending);
  });

  test.each([128, 256] as const)('decimal%s bounds beyond 64 bits: values tied in their top 64 bits are told apart within a bucket', (bitWidth) => {
    const top = bitWidth === 128 ? 2n ** 64n : 2n ** 192n; // the values the top 64 bits tell apart are multiples of this
    const bounds = decimals(bitWidth, [-(top * 5n), -1n, 0n, 1n, top, top + 1n, top * 7n]);
    const rows = [-(top * 6n), -(top * 5n) - 1n, -(top * 5n), -(top * 5n) + 1n, -2n, -1n, 0n, 1n, 2n, top - 1n, top, top + 1n, top + 2n, top * 7n - 1n, top * 7n, top * 7n + 1n];
    const input = decimals(bitWidth, rows);
    const expected = new ReferenceRange(['x'], new Table(bounds)).partitionsOf(input);
    expect(expected).toEqual([0, 0, 0, 1, 1, 1, 2, 3, 4, 4, 4, 5, 6, 6, 6, 7]);
    expect(partitionIds(input, ['x'], new Table(bounds), 8)).toEqual(expected);
  });
});

describe('dictionary keys are ordered by their values', () => {
  const dictionaryType = new Dictionary(new Utf8(), new Int32());
  const input = new Table({ x: vectorFromArray(['m', 'a', 'z', null, 'm'], dictionaryType) }).batches[0]!;

  test('with bounds of the value type or of the dictionary type alike', () => {
    const plain = tableOf({ x: { values: ['b', 'm'], type: new Utf8() } });
    expect(partitionIds(input, ['x'], plain, 3)).toEqual([1, 0, 2, 0, 1]);
    const encoded = new Table({ x: vectorFromArray(['b', 'm'], new Dictionary(new Utf8(), new Int32())) });
    expect(partitionIds(input, ['x'], encoded, 3)).toEqual([1, 0, 2, 0, 1]);
  });

  test('a null index is a null key, in the rows and in dictionary-encoded bounds', () => {
    const withNull = new Table({ x: vectorFromArray([null, 'm'], new Dictionary(new Utf8(), new Int32())) });
    expect(partitionIds(input, ['x'], withNull, 3)).toEqual([1, 1, 2, 0, 1]);
    expect(partitionIds(input, [{ column: 'x', nullsFirst: false }], tableOf({ x: { values: ['m'], type: new Utf8() } }), 2)).toEqual([0, 0, 1, 1, 0]);
  });
});

describe('every orderable type against the reference, ascending and descending, with nulls, slices and repeats', () => {
  const orderable = TYPE_CASES.filter((c) => c.hashable);
  test.each(orderable.map((c) => [c.name, c] as const))('%s', (_, typeCase) => {
    const rng = new Rng(typeCase.name.length * 7919);
    for (const [nullRate, descending, nullsFirst] of [[0, false, undefined], [0.2, true, undefined], [0.3, false, false], [0.5, true, true]] as const) {
      const rows = 400;
      const type = typeCase.make();
      const low = repeated(type, rows, nullRate, 40, rng);
      const schema = new Schema([new Field('x', type, true)]);
      const full = batchOf(schema, [low], rows);
      const keys: RangeKey[] = [{ column: 'x', descending, ...(nullsFirst === undefined ? {} : { nullsFirst }) }];
      const bounds = boundsFrom([full], keys, 15, (n) => Array.from({ length: 30 }, () => rng.int(0, n - 1)));
      const batch = full.slice(rng.int(0, 50), rows - rng.int(0, 50));
      const expected = new ReferenceRange(keys, bounds).partitionsOf(batch);
      expect(partitionIds(batch, keys, bounds, 16)).toEqual(expected);
      // the rows the bounds were drawn from are spread over more than one partition (the check is not vacuous)
      if (bounds.numRows > 1 && typeCase.name !== 'Null') expect(new Set(expected).size).toBeGreaterThan(1);
    }
  });
});

const ORDERABLE = TYPE_CASES.filter((c) => c.hashable);

/** A key type: mostly flat, sometimes a struct of keys (possibly nested) or a dictionary of a flat type or of a struct. */
function keyType(shape: number, picks: readonly number[]): DataType {
  const flat = (k: number) => ORDERABLE[picks[k % picks.length]! % ORDERABLE.length]!.make();
  if (shape === 7) return new Struct([new Field('a', flat(0), true), new Field('b', flat(1), true)]);
  if (shape === 8) return new Struct([new Field('a', flat(0), true), new Field('inner', new Struct([new Field('c', flat(1), true)]), true)]);
  if (shape === 9) {
    const values = flat(0);
    return new Dictionary(values.typeId === Type.Null ? new Utf8() : values, new Int32());
  }
  if (shape === 10) return new Dictionary(new Struct([new Field('a', flat(0), true), new Field('b', flat(1), true)]), new Int32());
  return flat(0);
}

/** 1-3 keys: a type (keyType), an order (bit 0 descending, bit 1 the other null order) and how many distinct values. */
const keySpecsArb = (maxCardinality: number) =>
  fc.array(
    fc.record({ shape: fc.nat({ max: 10 }), picks: fc.array(fc.nat(), { minLength: 2, maxLength: 2 }), order: fc.nat({ max: 3 }), cardinality: fc.integer({ min: 1, max: maxCardinality }) }),
    { minLength: 1, maxLength: 3 },
  );

/** A batch of the keys' columns (k0, k1, ...) with repeated values, and the keys in their orders. */
function keyedBatch(specs: readonly { shape: number; picks: number[]; order: number; cardinality: number }[], rows: number, nullRate: number, rng: Rng): { batch: RecordBatch; keys: RangeKey[] } {
  const fields = specs.map((s, k) => new Field(`k${k}`, keyType(s.shape, s.picks), true));
  const children = fields.map((f, k) =>
    (f.type as DataType).typeId === Type.Dictionary
      ? buildAny(f.type, rows, rng, { nullRate: nullRate / 2, dictionaryMode: 'new' })
      : repeated(f.type, rows, nullRate, specs[k]!.cardinality, rng),
  );
  const keys: RangeKey[] = specs.map((s, k) => ({ column: `k${k}`, descending: (s.order & 1) === 1, ...((s.order & 2) === 2 ? { nullsFirst: (s.order & 1) === 1 } : {}) }));
  return { batch: batchOf(new Schema(fields), children, rows), keys };
}

test('property (columns with repeated values): random key types (flat, struct, dictionary), orders, null rates, slices and partition counts', () => {
  fc.assert(
    fc.property(
      keySpecsArb(20),
      fc.integer({ min: 1, max: 600 }),
      fc.constantFrom(0, 0.1, 0.5, 1),
      fc.integer({ min: 1, max: 300 }),
      fc.nat(),
      (specs, rows, nullRate, numPartitions, seed) => {
        const rng = new Rng(seed);
        const { batch: full, keys } = keyedBatch(specs, rows, nullRate, rng);
        const bounds = boundsFrom([full], keys, numPartitions - 1, (n) => Array.from({ length: rng.int(0, 60) }, () => rng.int(0, n - 1)));
        const begin = rng.int(0, rows - 1);
        const batch = full.slice(begin, rng.int(begin, rows));
        expect(partitionIds(batch, keys, bounds, numPartitions)).toEqual(new ReferenceRange(keys, bounds).partitionsOf(batch));
      },
    ),
    { numRuns: 400, seed: 0x7a5e },
  );
});

describe('struct keys compare as Spark compares structs', () => {
  const type = new Struct([new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]);
  const schema = new Schema([new Field('s', type, true)]);
  /** a struct column from [a, b] pairs, null for a null struct (its fields then hold garbage) */
  const structs = (rows: ([number | null, string | null] | null)[], garbage = 77) => {
    const a = vectorFromArray(rows.map((r) => (r === null ? garbage : r[0])), new Int32()).data[0]!;
    const b = vectorFromArray(rows.map((r) => (r === null ? `garbage ${garbage}` : r[1])), new Utf8()).data[0]!;
    const bitmap = new Uint8Array((rows.length + 7) >>> 3);
    rows.forEach((r, i) => r !== null && (bitmap[i >>> 3]! |= 1 << (i & 7)));
    return makeData({ type, length: rows.length, nullCount: rows.filter((r) => r === null).length, nullBitmap: bitmap, children: [a, b] });
  };
  const ROWS: ([number | null, string | null] | null)[] = [null, [0, 'z'], [1, null], [1, 'x'], [1, 'y'], [5, null], [5, 'x'], [6, null], [null, 'a']];
  const batch = batchOf(schema, [structs(ROWS)], ROWS.length);

  test('ascending: field by field, a null field first, a null struct first whatever its fields hold', () => {
    const bounds = new Table({ s: new Vector([structs([[1, 'x'], [5, 'x']])]) });
    expect(partitionIds(batch, ['s'], bounds, 3)).toEqual([0, 0, 0, 0, 1, 1, 1, 2, 0]);
  });

  test('descending: the whole comparison reversed, so null fields come last among equal ones, and a null struct last', () => {
    const bounds = new Table({ s: new Vector([structs([[5, 'x'], [1, 'x']])]) });
    // (6,null) > (5,x) > (5,null) > (1,y) > (1,x) > (1,null) > (0,z) > (null,a); null struct last
    expect(partitionIds(batch, [{ column: 's', descending: true }], bounds, 3)).toEqual([2, 2, 2, 1, 1, 1, 0, 0, 2]);
  });

  test('a dictionary of structs is the struct its index points at, a null index a null struct; bounds of the struct or of the dictionary alike', () => {
    const dictionaryType = new Dictionary(type, new Int32());
    // value 1 is a null struct with garbage fields (77, "garbage 77")
    const values = new Vector([structs([[1, 'x'], null, [5, 'x'], [0, 'z'], [5, null]])]);
    // rows (0,z), (1,x), null struct, (5,x), (5,null), null index (its slot points at (5,x)), (1,x)
    const indices = Int32Array.of(3, 0, 1, 2, 4, 2, 0);
    const column = makeData({ type: dictionaryType, length: 7, nullCount: 1, nullBitmap: Uint8Array.of(0b1011111), data: indices, dictionary: values });
    const rows = batchOf(new Schema([new Field('s', dictionaryType, true)]), [column], 7);
    const ascending = [[1, 'x'], [5, 'x']] as [number, string][];
    const descending = [[5, 'x'], [1, 'x']] as [number, string][];
    const encoded = (pairs: [number, string][]) => new Table({ s: new Vector([makeData({ type: dictionaryType, length: pairs.length, nullCount: 0, data: Int32Array.from(pairs, (_, i) => i), dictionary: new Vector([structs(pairs)]) })]) });
    for (const bounds of [new Table({ s: new Vector([structs(ascending)]) }), encoded(ascending)]) {
      expect(new ReferenceRange(['s'], bounds).partitionsOf(rows)).toEqual([0, 0, 0, 1, 1, 0, 0]);
      expect(partitionIds(rows, ['s'], bounds, 3)).toEqual([0, 0, 0, 1, 1, 0, 0]);
    }
    // descending: (5,x) > (5,null) > (1,x) > (0,z), null structs last
    for (const bounds of [new Table({ s: new Vector([structs(descending)]) }), encoded(descending)]) {
      expect(new ReferenceRange([{ column: 's', descending: true }], bounds).partitionsOf(rows)).toEqual([2, 1, 2, 0, 1, 2, 1]);
      expect(partitionIds(rows, [{ column: 's', descending: true }], bounds, 3)).toEqual([2, 1, 2, 0, 1, 2, 1]);
    }
  });

  test('a null struct bound equals every null struct row, whatever the fields under it hold', () => {
    const bounds = new Table({ s: new Vector([structs([null, [1, 'x']], -5)]) });
    expect(partitionIds(batch, ['s'], bounds, 3)).toEqual([0, 1, 1, 1, 2, 2, 2, 2, 1]);
  });
});

/**
 * A column of `rows` rows whose values are drawn from `cardinality` random
 * ones, so that rows repeat and equal bounds: a dictionary of them with random
 * indices, decoded (key-hash.ts's DecodedDictionaries makes the input here;
 * the reference and the partitioner then see the same rows).
 */
function repeated(type: DataType, rows: number, nullRate: number, cardinality: number, rng: Rng): Data {
  if (type.typeId === Type.Null) return makeData({ type: type as Null, length: rows });
  const pool = type.typeId === Type.Struct ? buildAny(type, cardinality, rng, { nullRate }) : buildColumn(type, cardinality, nullRate === 0 ? NO_BITMAP : { bitmap: true, nullRate }, rng);
  const indices = Int32Array.from({ length: rows }, () => rng.int(0, cardinality - 1));
  const encoded = makeData({ type: new Dictionary(type, new Int32()), length: rows, nullCount: 0, data: indices, dictionary: new Vector([pool]) });
  return new DecodedDictionaries().decode(encoded);
}

describe("rangeBoundsOf chooses bounds from a sample as Spark's determineBounds does", () => {
  const ints = (values: (number | null)[]) => tableOf({ x: { values, type: new Int32() } });

  test('the worked example: rows 1..10 into 4 partitions give 3, 5, 8', () => {
    const bounds = rangeBoundsOf(ints([7, 3, 10, 1, 5, 2, 9, 4, 8, 6]), ['x'], 4);
    expect([...bounds.getChild('x')!]).toEqual([3, 5, 8]);
  });

  test('the bounds are copies: they keep none of the sample\'s buffers alive (long strings and views included)', () => {
    const words = Array.from({ length: 1000 }, (_, i) => `a key long enough not to be inline, number ${String(i).padStart(4, '0')}`);
    const sample = new Table({ s: vectorFromArray(words, new Utf8()), v: vectorFromArray(words, new Utf8View()), n: vectorFromArray(words.map((_, i) => i), new Int32()) });
    const bounds = rangeBoundsOf(sample, ['v', 's', 'n'], 10);
    expect([...bounds.getChild('v')!]).toEqual(words.filter((_, i) => i % 100 === 99).slice(0, 9));
    const sampleBuffers = new Set(sample.data.flatMap((d) => d.children.flatMap((c) => [c.values.buffer, ...c.variadicBuffers.map((b) => b.buffer)])));
    const boundBuffers = bounds.data.flatMap((d) => d.children.flatMap((c) => [c.values.buffer, ...c.variadicBuffers.map((b) => b.buffer)]));
    expect(boundBuffers.filter((b) => sampleBuffers.has(b))).toEqual([]);
    expect(boundBuffers.reduce((sum, b) => sum + b.byteLength, 0), 'the bounds hold their own rows only').toBeLessThan(9 * 3 * 100);
  });

  test("dictionary keys give bounds of their values' type, a null index a null bound, a chunk with an empty dictionary nulls", () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const empty = makeData({ type, length: 3, nullCount: 3, nullBitmap: new Uint8Array(1), data: new Int32Array(3), dictionary: new Vector([vectorFromArray([], new Utf8()).data[0]!]) });
    const full = vectorFromArray(['b', 'a', 'c', 'a'], type).data[0]!;
    const sample = new Table({ x: new Vector([empty, full]) });
    // sorted: null, null, null, a, a, b, c; a bound each 7 / 3 rows: the 3rd (null), the 5th (a)
    const bounds = rangeBoundsOf(sample, ['x'], 3);
    expect(String(bounds.schema.fields[0]!.type)).toBe('Utf8');
    expect([...bounds.getChild('x')!]).toEqual([null, 'a']);
    expect(partitionIds(new Table({ x: new Vector([full]) }).batches[0]!, ['x'], bounds, 3)).toEqual([2, 1, 2, 1]);
  });

  test('a bound equal to the one before is skipped; fewer distinct keys give fewer bounds; one partition none', () => {
    expect([...rangeBoundsOf(ints([1, 1, 2, 1, 1]), ['x'], 4).getChild('x')!]).toEqual([1, 2]);
    expect(rangeBoundsOf(ints([4, 4, 4]), ['x'], 100).numRows).toBe(1);
    const none = rangeBoundsOf(ints([1, 2, 3]), ['x'], 1);
    expect(none.numRows).toBe(0);
    expect(none.schema.fields.map((f) => String(f.type))).toEqual(['Int32']);
    expect(rangeBoundsOf(ints([]), ['x'], 8).numRows).toBe(0);
  });

  test('in the keys\' order: descending, nulls as the key says', () => {
    const sample = ints([5, null, 1, 3, null, 4, 2, 6]);
    expect([...rangeBoundsOf(sample, [{ column: 'x', descending: true }], 4).getChild('x')!]).toEqual([5, 3, 1]);
    expect([...rangeBoundsOf(sample, ['x'], 4).getChild('x')!]).toEqual([null, 2, 4]);
  });

  test('a sample that is no Table or RecordBatch, keys that are no array, an unknown key column, no keys, a bad partition count are refused', () => {
    refused(() => rangeBoundsOf(null as never, ['x'], 2), 'CS_INVALID_ARGUMENT', /the sample must be an apache-arrow Table or RecordBatch, got null/);
    refused(() => rangeBoundsOf([1, 2] as never, ['x'], 2), 'CS_INVALID_ARGUMENT', /Table or RecordBatch, got object/);
    refused(() => rangeBoundsOf(ints([1]), 'x' as never, 2), 'CS_INVALID_ARGUMENT', /keys must be an array of key columns, got string/);
    refused(() => rangeBoundsOf(ints([1]), ['y'], 2), 'CS_UNKNOWN_COLUMN', /no column "y" in the sample \(columns: x\)/);
    refused(() => rangeBoundsOf(ints([1]), [], 2), 'CS_INVALID_ARGUMENT', /at least one key column/);
    refused(() => rangeBoundsOf(ints([1]), ['x'], 0), 'CS_INVALID_ARGUMENT', /numPartitions must be an integer >= 1, got 0/);
  });

  test('property: for random key types (flat, struct, dictionary) and samples, the bounds are those the reference picks, and the partitioner takes them', () => {
    fc.assert(
      fc.property(
        keySpecsArb(30),
        fc.integer({ min: 0, max: 400 }),
        fc.constantFrom(0, 0.2, 1),
        fc.integer({ min: 1, max: 300 }),
        fc.nat(),
        (specs, rows, nullRate, numPartitions, seed) => {
          const { batch: sample, keys } = keyedBatch(specs, rows, nullRate, new Rng(seed));
          const bounds = rangeBoundsOf(sample, keys, numPartitions);
          expect(bounds.numRows).toBeLessThanOrEqual(numPartitions - 1);
          expect(canonicalTuples(referenceTuples(bounds, keys))).toEqual(canonicalTuples(referenceBounds(sample, keys, numPartitions)));
          // the partitioner takes them (strictly ascending, of the keys' types) and places the sample as the reference does
          expect(partitionIds(sample, keys, bounds, numPartitions)).toEqual(new ReferenceRange(keys, bounds).partitionsOf(sample));
        },
      ),
      { numRuns: 300, seed: 0xb0d5 },
    );
  });
});

/** Spark's determineBounds over the sample's key tuples, unit weights, by the reference's comparison. */
function referenceBounds(sample: RecordBatch, keys: readonly RangeKey[], numPartitions: number): KeyValue[][] {
  const orders = keys.map(orderOf);
  const tuples = Array.from({ length: sample.numRows }, (_, i) => orders.map((o) => keyValue(sample.getChild(o.column)!.data[0]!, i)));
  const sorted = [...tuples].sort((a, b) => compareTuples(a, b, orders));
  const step = sorted.length / numPartitions;
  const bounds: KeyValue[][] = [];
  let target = step;
  for (let i = 0; i < sorted.length && bounds.length < numPartitions - 1; i++) {
    if (i + 1 >= target && (bounds.length === 0 || compareTuples(bounds[bounds.length - 1]!, sorted[i]!, orders) < 0)) {
      bounds.push(sorted[i]!);
      target += step;
    }
  }
  return bounds;
}

function referenceTuples(bounds: Table, keys: readonly RangeKey[]): KeyValue[][] {
  const orders = keys.map(orderOf);
  return bounds.batches.flatMap((batch) => Array.from({ length: batch.numRows }, (_, i) => orders.map((o) => keyValue(batch.getChild(o.column)!.data[0]!, i))));
}

function canonicalTuples(tuples: KeyValue[][]): string[] {
  const show = (v: KeyValue): unknown => (v instanceof Uint8Array ? `0x${Buffer.from(v).toString('hex')}` : typeof v === 'bigint' ? `${v}n` : typeof v === 'number' ? (Object.is(v, -0) ? '0' : Number.isNaN(v) ? 'NaN' : v) : v !== null && typeof v === 'object' ? v.fields.map(show) : v);
  return tuples.map((t) => JSON.stringify(t.map(show)));
}

describe('bad keys and bounds are refused, saying what is wrong', () => {
  const bounds = tableOf({ k: { values: [10, 20], type: new Int32() } });
  const create = (partitioning: Partitioning, numPartitions = 3, schema = ROWS.schema) => () => createPartitioner(partitioning, schema, numPartitions, 0);

  test('no key, an unknown key column, bounds without the key column', () => {
    refused(create({ kind: 'range', keys: [], bounds }), 'CS_INVALID_ARGUMENT', /at least one key column/);
    refused(create({ kind: 'range', keys: ['nope'], bounds }), 'CS_UNKNOWN_COLUMN', /no column "nope" in the input \(columns: k, s\)/);
    refused(create({ kind: 'range', keys: ['s'], bounds }), 'CS_INVALID_ARGUMENT', /bounds have no column "s" \(their columns: k\)/);
  });

  test('bounds of another type than the key', () => {
    refused(create({ kind: 'range', keys: ['k'], bounds: tableOf({ k: { values: [10n], type: new Int64() } }) }), 'CS_INVALID_ARGUMENT', /column "k" is Int64, the key's values are Int32/);
    // decimals of one precision and scale print alike in arrow-js: the message names their widths
    const decimal32 = new Schema([new Field('k', new Decimal(2, 9, 32), true)]);
    const decimal64Bounds = new Table(new RecordBatch(new Schema([new Field('k', new Decimal(2, 9, 64), true)]), makeData({ type: new Struct([new Field('k', new Decimal(2, 9, 64), true)]), length: 1, children: [makeData({ type: new Decimal(2, 9, 64), length: 1, data: new Uint32Array(2) })] })));
    refused(create({ kind: 'range', keys: ['k'], bounds: decimal64Bounds }, 3, decimal32), 'CS_INVALID_ARGUMENT', /column "k" is Decimal64\[9e\+2\], the key's values are Decimal32\[9e\+2\]/);
  });

  test('more bounds than partitions - 1', () => {
    refused(create({ kind: 'range', keys: ['k'], bounds }, 2), 'CS_INVALID_ARGUMENT', /into 2 partitions takes at most 1 bounds, got 2/);
  });

  test('bounds that repeat or descend in the keys\' order', () => {
    refused(create({ kind: 'range', keys: ['k'], bounds: tableOf({ k: { values: [10, 10], type: new Int32() } }) }), 'CS_INVALID_ARGUMENT', /strictly ascending.*bound 1 equals bound 0/);
    refused(create({ kind: 'range', keys: ['k'], bounds: tableOf({ k: { values: [20, 10], type: new Int32() } }) }), 'CS_INVALID_ARGUMENT', /bound 1 sorts before bound 0 \(by column "k"\)/);
    // ascending bounds for a descending key descend in its order
    refused(create({ kind: 'range', keys: [{ column: 'k', descending: true }], bounds }), 'CS_INVALID_ARGUMENT', /bound 1 sorts before bound 0/);
  });

  test('key types without an order: lists, day-time intervals, a struct with a list field, a dictionary of such structs', () => {
    const list = new List(new Field('item', new Int32(), true));
    const struct = new Struct([new Field('a', new Int32(), true), new Field('b', list, true)]);
    for (const type of [list, struct, new IntervalDayTime(), new Dictionary(struct, new Int32())]) {
      const schema = new Schema([new Field('x', type, true)]);
      refused(create({ kind: 'range', keys: ['x'], bounds: new Table(schema) }, 3, schema), 'CS_UNSUPPORTED_KEY_TYPE', /cannot be a range partitioning key/);
    }
  });

  test('bytes that are not an Arrow IPC stream', () => {
    refused(create({ kind: 'range', keys: ['k'], bounds: Uint8Array.of(1, 2, 3) }), 'CS_INVALID_ARGUMENT', /must be an Arrow IPC stream/);
  });
});
