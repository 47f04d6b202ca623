/**
 * Dictionaries with Uint64 indices (issue 4: "any index width"). arrow-js 21.2 builds
 * them (makeData with a BigUint64Array) and reads and writes them through IPC, but its
 * `Vector.get` cannot decode them (it indexes the dictionary with a BigInt and throws
 * "Cannot mix BigInt and other types"): the reference here decodes them from the index
 * and the dictionary vector instead (test/support/js-values.ts `valueAt`).
 *
 * Both writers accept them: every partition comes back exactly, with the input's types
 * (Uint64 indices still), through ShuffleReader and, for the columnar writer, arrow-js's
 * tableFromIPC on the partition's byte range: top-level, with list values, inside a list
 * and inside a struct; nulls, null dictionary values, garbage (up to 2^64 - 1) under
 * null indices, a dictionary extended by a later batch (delta), an unrelated one,
 * sliced batches. Hashing on the dictionary column hashes the decoded value as Spark
 * would (murmur3 of the UTF-8 bytes; a null keeps the seed).
 */
import { join } from 'node:path';
import { Dictionary, Field, Int32, Int64, List, RecordBatch, Schema, Struct, Uint64, Utf8, Vector, makeData, vectorFromArray, type Data, type DataType } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { hashBytes, pmod, SPARK_HASH_SEED } from '../src/writer/murmur3.js';
import { WRITER_KINDS } from '../src/writer-kind.js';
import { expectedBy, expectedByLongKey, jsRows, outputProblems, valueAt, writeAll, type RowStrings } from './support/js-values.js';
import { makeTempDir, removeDir } from './support/shuffle-harness.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const f = (name: string, type: DataType, nullable = true) => new Field(name, type, nullable);
const u64 = () => new Uint64() as never; // arrow-js's Dictionary type parameter leaves out the 64-bit index types; its runtime takes them

const D = new Dictionary(new Utf8(), u64(), 31);
const DL = new Dictionary(new List(f('item', new Int32())), u64(), 32);
const LD = new List(f('item', new Dictionary(new Utf8(), u64(), 33)));
const SD = new Struct([f('d', new Dictionary(new Utf8(), u64(), 34)), f('n', new Int32())]);
const SCHEMA = new Schema([f('key', new Int64(), false), f('d', D), f('dl', DL), f('ld', LD), f('sd', SD)]);

const GARBAGE = [0n, 3n, 1000n, 2n ** 63n, 2n ** 64n - 1n];

function validity(n: number, valid: (i: number) => boolean): { nullBitmap: Uint8Array; nullCount: number } {
  const nullBitmap = new Uint8Array((n + 7) >>> 3);
  let nullCount = 0;
  for (let i = 0; i < n; i++) {
    if (valid(i)) nullBitmap[i >>> 3]! |= 1 << (i & 7);
    else nullCount++;
  }
  return { nullBitmap, nullCount };
}

/** n rows of a Uint64-indexed dictionary column: index (i * step) % size, null every `nullEvery` rows with garbage under the null. */
function indices(type: Dictionary, n: number, dictionary: Vector, step: number, nullEvery: number): Data {
  const valid = (i: number) => i % nullEvery !== nullEvery - 1;
  const data = BigUint64Array.from({ length: n }, (_, i) => (valid(i) ? BigInt((i * step) % dictionary.length) : GARBAGE[i % GARBAGE.length]!));
  return makeData({ type, length: n, ...validity(n, valid), data, dictionary } as never);
}

const utf8 = (values: (string | null)[]) => vectorFromArray(values, new Utf8());

function listValues(count: number, seed: number): Vector {
  const offsets = Int32Array.from({ length: count + 1 }, (_, i) => Math.floor((i * 3) / 2));
  const items = offsets[count]!;
  const child = makeData({ type: new Int32(), length: items, ...validity(items, (j) => j % 5 !== 4), data: Int32Array.from({ length: items }, (_, j) => seed * 1000 + j) });
  return new Vector([makeData({ type: DL.dictionary, length: count, ...validity(count, (i) => i !== 2), valueOffsets: offsets, child } as never)]);
}

interface Dictionaries {
  d: Vector;
  dl: Vector;
  ld: Vector;
  sd: Vector;
}

function batchOf(n: number, seed: number, dictionaries: Dictionaries): RecordBatch {
  const key = makeData({ type: new Int64(), length: n, data: BigInt64Array.from({ length: n }, (_, i) => BigInt(seed) * 1_000_003n + BigInt(i) * -7_777_777_777n) });
  const d = indices(D, n, dictionaries.d, 3, 5);
  const dl = indices(DL, n, dictionaries.dl, 2, 4);
  // a list of 0-3 dictionary entries per row, some lists null
  const listOffsets = Int32Array.from({ length: n + 1 }, (_, i) => i + Math.floor(i / 2));
  const entries = listOffsets[n]!;
  const ld = makeData({ type: LD, length: n, ...validity(n, (i) => i % 7 !== 3), valueOffsets: listOffsets, child: indices(LD.children[0]!.type as Dictionary, entries, dictionaries.ld, 5, 3) } as never);
  const sd = makeData({
    type: SD,
    length: n,
    ...validity(n, (i) => i % 6 !== 1),
    children: [indices(SD.children[0]!.type as Dictionary, n, dictionaries.sd, 1, 4), makeData({ type: new Int32(), length: n, data: Int32Array.from({ length: n }, (_, i) => i - seed) })],
  } as never);
  return new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: n, nullCount: 0, children: [key, d, dl, ld, sd] }));
}

function inputBatches(): RecordBatch[] {
  const first: Dictionaries = {
    d: utf8(['alpha', 'beta', null, 'gamma', 'delta', '', 'epsilon']), // a null value and an empty string
    dl: listValues(6, 1),
    ld: utf8(['x', 'y', 'z']),
    sd: utf8(['one', 'two', 'three', 'four']),
  };
  // extended: the old chunks plus new ones (an IPC delta)
  const extended: Dictionaries = {
    d: new Vector([...first.d.data, ...utf8(['zeta', 'eta']).data]),
    dl: new Vector([...first.dl.data, ...listValues(3, 2).data]),
    ld: new Vector([...first.ld.data, ...utf8(['w']).data]),
    sd: first.sd,
  };
  // unrelated: new values for every column
  const unrelated: Dictionaries = { d: utf8(['omega', 'alpha', 'psi']), dl: listValues(4, 3), ld: utf8(['q', 'r']), sd: utf8(['five', null, 'six']) };
  return [batchOf(60, 1, first), batchOf(45, 2, extended).slice(4, 41), batchOf(50, 3, unrelated), batchOf(0, 4, unrelated), batchOf(33, 5, extended).slice(1, 33)];
}

test('arrow-js builds Uint64-indexed dictionaries but its get cannot decode them (why the reference decodes them itself)', () => {
  const batch = inputBatches()[0]!;
  expect(String(batch.schema.fields[1]!.type)).toBe('Dictionary<Uint64, Utf8>');
  expect(batch.getChild('d')!.data[0]!.values).toBeInstanceOf(BigUint64Array);
  expect(() => batch.getChild('d')!.get(0)).toThrow(TypeError);
  // the reference's decoding: row 0 points at index 0, row 4 is null (garbage index 2^64 - 1 under it)
  expect(valueAt(batch.getChild('d')!, 0)).toBe('alpha');
  expect(batch.getChild('d')!.data[0]!.values[4]).toBe(2n ** 64n - 1n);
  expect(valueAt(batch.getChild('d')!, 4)).toBeNull();
  expect(jsRows(batch)[0]).toBe('1000003n | "alpha" | [1000] | ["x"] | {d:"one",n:-1}');
});

describe.each(WRITER_KINDS)('%s writer: Uint64 dictionary indices', (writer) => {
  test.each([1, 5, 32])('hashed on the int64 key, P = %i: every row back exactly, Uint64 indices kept', async (numPartitions) => {
    const batches = inputBatches();
    const prefix = join(dir, 'out');
    const result = await writeAll(writer, { numPartitions, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: prefix, maxBatchRows: 16 }, batches);
    expect(result.rows).toBe(batches.reduce((sum, b) => sum + b.numRows, 0));
    expect(await outputProblems(prefix, SCHEMA, (rowStrings) => expectedByLongKey(batches, 'key', numPartitions, rowStrings), writer === 'hash')).toEqual([]);
  });

  test('hashed on the Uint64-indexed dictionary column itself: the decoded value is hashed, as Spark would hash the string', async () => {
    const numPartitions = 6;
    const batches = inputBatches();
    const prefix = join(dir, 'by-dictionary');
    await writeAll(writer, { numPartitions, partitioning: { kind: 'hash', keys: ['d'] }, outputPrefix: prefix }, batches);
    const encoder = new TextEncoder();
    const byValue = (rowStrings: RowStrings) =>
      expectedBy(batches, numPartitions, rowStrings, (batch) => {
        const column = batch.getChild('d')!;
        return (i) => {
          const value = valueAt(column, i) as string | null;
          if (value === null) return pmod(SPARK_HASH_SEED, numPartitions);
          const bytes = encoder.encode(value);
          return pmod(hashBytes(bytes, 0, bytes.length, SPARK_HASH_SEED), numPartitions);
        };
      });
    expect(byValue(jsRows).filter((rows) => rows.length > 0).length).toBeGreaterThan(2);
    expect(await outputProblems(prefix, SCHEMA, byValue, writer === 'hash')).toEqual([]);
  });
});
