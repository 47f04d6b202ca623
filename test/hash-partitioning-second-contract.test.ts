/**
 * Second contract of Spark-compatible hash partitioning: claims the second mutation sweep of
 * src/writer/{murmur3,key-hash,partitioner}.ts found unpinned (each key type's hashing path,
 * nulls and slices, dictionaries, pmod over every partition count).
 *
 * Expected hashes come only from `ref`, a small independent transcription of Spark's
 * org.apache.spark.unsafe.hash.Murmur3_x86_32 (hashInt, hashLong, hashUnsafeBytes) over BigInt,
 * which the first test checks against the published vectors quoted with their sources in
 * test/murmur3.test.ts, and from Spark's pmod computed with BigInt. Nothing here takes an
 * expected value from the code under test.
 */
import { BinaryView, Dictionary, Field, Int32, Int64, Int8, RecordBatch, Schema, Struct, Uint32, Utf8, makeData, vectorFromArray, type Data } from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import { hashColumnInto } from '../src/writer/murmur3.js';
import { createPartitioner } from '../src/writer/partitioner.js';
import { thrown } from './support/failure.js';

// ---------------------------------------------------------------------------------------------
// Independent reference: Murmur3_x86_32 over BigInt (32-bit wrap by BigInt.asUintN), Java int results.

const ref = (() => {
  const M32 = (x: bigint): bigint => BigInt.asUintN(32, x);
  const rotl = (x: bigint, r: bigint): bigint => M32((x << r) | (x >> (32n - r)));
  const mixK1 = (k: bigint): bigint => M32(rotl(M32(k * 0xcc9e2d51n), 15n) * 0x1b873593n);
  const mixH1 = (h: bigint, k: bigint): bigint => M32(rotl(h ^ k, 13n) * 5n + 0xe6546b64n);
  const fmix = (h: bigint, length: number): number => {
    h ^= BigInt(length);
    h = M32((h ^ (h >> 16n)) * 0x85ebca6bn);
    h = M32((h ^ (h >> 13n)) * 0xc2b2ae35n);
    return Number(BigInt.asIntN(32, h ^ (h >> 16n)));
  };
  const seedOf = (seed: number): bigint => M32(BigInt(seed));
  return {
    hashInt: (v: number, seed: number): number => fmix(mixH1(seedOf(seed), mixK1(M32(BigInt(v)))), 4),
    hashLong: (v: bigint, seed: number): number => {
      const u = BigInt.asUintN(64, v);
      return fmix(mixH1(mixH1(seedOf(seed), mixK1(u & 0xffffffffn)), mixK1(u >> 32n)), 8);
    },
    /** Spark's hashUnsafeBytes: 4-byte little-endian blocks, then each tail byte alone, sign-extended */
    hashUnsafeBytes: (bytes: Uint8Array, seed: number): number => {
      let h = seedOf(seed);
      const blocks = bytes.length >> 2;
      for (let b = 0; b < blocks; b++) {
        let k = 0n;
        for (let j = 3; j >= 0; j--) k = (k << 8n) | BigInt(bytes[4 * b + j]!);
        h = mixH1(h, mixK1(k));
      }
      for (let i = blocks * 4; i < bytes.length; i++) h = mixH1(h, mixK1(M32(BigInt.asIntN(8, BigInt(bytes[i]!)))));
      return fmix(h, bytes.length);
    },
  };
})();

/** Spark's pmod(hash, n) */
const sparkPmod = (hash: number, n: number): number => Number(((BigInt(hash) % BigInt(n)) + BigInt(n)) % BigInt(n));

const SEED = 42;
const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

function bitmapOf(valid: readonly boolean[]): Uint8Array {
  const bitmap = new Uint8Array(Math.max(1, (valid.length + 7) >>> 3));
  valid.forEach((v, i) => v && (bitmap[i >>> 3]! |= 1 << (i & 7)));
  return bitmap;
}

function hashOf(data: Data): number[] {
  const hashes = new Int32Array(data.length).fill(SEED);
  hashColumnInto(data, hashes, 'k');
  return [...hashes];
}

function batchOf(fields: Field[], children: Data[], length: number): RecordBatch {
  const schema = new Schema(fields);
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length, nullCount: 0, children }));
}

function hashPartitions(batch: RecordBatch, keys: string[], n: number): number[] {
  const ids = new Uint32Array(batch.numRows);
  createPartitioner({ kind: 'hash', keys }, batch.schema, n, 0).computePartitionIds(batch, ids, 0);
  return [...ids];
}

// ---------------------------------------------------------------------------------------------

describe('the independent reference reproduces the published vectors (test/murmur3.test.ts quotes their sources)', () => {
  test('hashInt, hashLong (Spark Murmur3_x86_32Suite, seed 0; Comet, rapids, seed 42) and hashUnsafeBytes (Comet test_str, gluten-ch)', () => {
    expect([0, -42, 42, -2147483648, 2147483647].map((v) => ref.hashInt(v, 0))).toEqual([593689054, -189366624, -1134849565, -1718298732, -1653689534]);
    expect([0n, -42n, 42n, -(2n ** 63n), 2n ** 63n - 1n].map((v) => ref.hashLong(v, 0))).toEqual([1669671676, -846261623, 1871679806, 1366273829, -2106506049]);
    expect([1, 0, -1].map((v) => ref.hashInt(v, SEED))).toEqual([0xdea578e3 | 0, 0x379fae8f | 0, 0xa0590e3d | 0]);
    expect([0n, 100n, -100n].map((v) => ref.hashLong(v, SEED))).toEqual([-1670924195, 1114849490, 904948192]);
    expect(['hello', 'bar', '', 'a', 'ab', 'abc', 'abcd', 'abcde'].map((s) => ref.hashUnsafeBytes(utf8(s), SEED))).toEqual(
      [3286402344, 2486176763, 142593372, 1485273170, 0xfa37157b, 1322437556, 0xe860e5cc, 814637928].map((x) => x | 0),
    );
    expect(ref.hashUnsafeBytes(new Uint8Array([0x00, 0xc8]), SEED)).toBe(-424716282);
  });
});

describe('dictionary keys: a null row is null whatever its index holds', () => {
  test('null rows whose Int8 index is out of range (-1, -128, 4 = the dictionary size, 127) keep the running hash; valid rows hash the value they point at', () => {
    const dictionary = vectorFromArray(['zero', 'one', 'two', 'a longer value, out of line'], new Utf8());
    const indices = Int8Array.of(1, -1, 3, -128, 0, 2, 4, 1, 127, 3);
    const valid = [true, false, true, false, true, true, false, true, false, true];
    const type = new Dictionary(new Utf8(), new Int8());
    const data = makeData({ type, length: indices.length, nullCount: 4, nullBitmap: bitmapOf(valid), data: indices, dictionary } as never) as Data;
    const batch = batchOf([new Field('k', type, true), new Field('v', new Int32(), false)], [data, vectorFromArray([...indices].map((_, i) => i * 7 - 20), new Int32()).data[0]!], indices.length);
    const n = 1009;
    // key k alone
    expect(hashPartitions(batch, ['k'], n)).toEqual(
      [...indices].map((x, i) => sparkPmod(valid[i] ? ref.hashUnsafeBytes(utf8(dictionary.get(x)!), SEED) : SEED, n)),
    );
    // k then v: a null k lets 42 flow into v's hash
    expect(hashPartitions(batch, ['k', 'v'], n)).toEqual(
      [...indices].map((x, i) => sparkPmod(ref.hashInt(i * 7 - 20, valid[i] ? ref.hashUnsafeBytes(utf8(dictionary.get(x)!), SEED) : SEED), n)),
    );
  });

  test('the same with an Int64-valued dictionary and a slice starting at a null row', () => {
    const dictionary = vectorFromArray([10n, -(2n ** 40n), 2n ** 62n], new Int64());
    const indices = Int8Array.of(-1, 2, -5, 0, 1, -1, 2);
    const valid = [false, true, false, true, true, false, true];
    const type = new Dictionary(new Int64(), new Int8());
    const data = makeData({ type, length: indices.length, nullCount: 3, nullBitmap: bitmapOf(valid), data: indices, dictionary } as never) as Data;
    const batch = batchOf([new Field('k', type, true)], [data], indices.length);
    const n = 37;
    const expected = [...indices].map((x, i) => sparkPmod(valid[i] ? ref.hashLong(dictionary.get(x) as bigint, SEED) : SEED, n));
    expect(hashPartitions(batch, ['k'], n)).toEqual(expected);
    expect(hashPartitions(batch.slice(2, 7), ['k'], n)).toEqual(expected.slice(2, 7));
  });
});

describe('struct keys: a null struct leaves the running hash unchanged, even when it is the only null', () => {
  test('a struct column with exactly one null row (its fields hold values) keeps 42 there; every other row hashes its fields in order', () => {
    const a = [3, -4, 5, 6];
    const b = ['x', 'yy', 'zzz', 'wwww'];
    const structValid = [true, true, false, true];
    const type = new Struct([new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]);
    const struct = makeData({
      type,
      length: 4,
      nullCount: 1,
      nullBitmap: bitmapOf(structValid),
      children: [vectorFromArray(a, new Int32()).data[0]!, vectorFromArray(b, new Utf8()).data[0]!],
    });
    const batch = batchOf([new Field('s', type, true)], [struct], 4);
    const n = 1 << 20; // a power of two: pid = the hash's low 20 bits
    const expected = a.map((x, i) => sparkPmod(structValid[i] ? ref.hashUnsafeBytes(utf8(b[i]!), ref.hashInt(x, SEED)) : SEED, n));
    expect(expected[2]).toBe(42);
    expect(hashPartitions(batch, ['s'], n)).toEqual(expected);
  });

  test('a dictionary column with exactly one null row keeps 42 there', () => {
    const dictionary = vectorFromArray(['p', 'q'], new Utf8());
    const type = new Dictionary(new Utf8(), new Int32());
    const valid = [true, false, true];
    const data = makeData({ type, length: 3, nullCount: 1, nullBitmap: bitmapOf(valid), data: Int32Array.of(1, 1, 0), dictionary } as never) as Data;
    const batch = batchOf([new Field('k', type, true)], [data], 3);
    expect(hashPartitions(batch, ['k'], 1 << 20)).toEqual([sparkPmod(ref.hashUnsafeBytes(utf8('q'), SEED), 1 << 20), 42, sparkPmod(ref.hashUnsafeBytes(utf8('p'), SEED), 1 << 20)]);
  });
});

describe('seed chaining: a null nested key lets the running hash of the earlier keys through', () => {
  test('keys (i, s, d): a null struct s or a null dictionary d keeps the hash of the keys before it, not the seed 42', () => {
    const i = [7, -8, 9, 10, -11, 12];
    const a = [1, 2, 3, 4, 5, 6];
    const structValid = [true, false, true, false, true, true];
    const dictValid = [false, true, true, false, true, false];
    const picked = [0, 1, 2, 1, 0, 2];
    const words = ['u', 'vv', 'www'];
    const sType = new Struct([new Field('a', new Int32(), false)]);
    const dType = new Dictionary(new Utf8(), new Int32());
    const s = makeData({ type: sType, length: 6, nullCount: 2, nullBitmap: bitmapOf(structValid), children: [vectorFromArray(a, new Int32()).data[0]!] });
    const d = makeData({ type: dType, length: 6, nullCount: 3, nullBitmap: bitmapOf(dictValid), data: Int32Array.from(picked), dictionary: vectorFromArray(words, new Utf8()) } as never) as Data;
    const batch = batchOf(
      [new Field('i', new Int32(), false), new Field('s', sType, true), new Field('d', dType, true)],
      [vectorFromArray(i, new Int32()).data[0]!, s, d],
      6,
    );
    const n = 1 << 24;
    const expected = i.map((x, r) => {
      let h = ref.hashInt(x, SEED);
      if (structValid[r]) h = ref.hashInt(a[r]!, h);
      if (dictValid[r]) h = ref.hashUnsafeBytes(utf8(words[picked[r]!]!), h);
      return sparkPmod(h, n);
    });
    expect(hashPartitions(batch, ['i', 's', 'd'], n)).toEqual(expected);
  });
});

describe('precomputed partition-id column', () => {
  test('an out-of-range Uint32 partition id (2^31, 2^32 - 1) is refused naming the id as it is, not as a negative int', () => {
    for (const bad of [2147483648, 4294967295]) {
      const values = Uint32Array.of(1, bad, 0);
      const pid = makeData({ type: new Uint32(), length: 3, nullCount: 0, data: values });
      const batch = batchOf([new Field('pid', new Uint32(), false)], [pid], 3);
      const partitioner = createPartitioner({ kind: 'partition-id', column: 'pid' }, batch.schema, 4, 0);
      const caught = thrown(() => partitioner.computePartitionIds(batch, new Uint32Array(3), 100));
      expect(caught.code).toBe('CS_PARTITION_ID_OUT_OF_RANGE');
      expect(caught.message).toContain(`partition id ${bad} is outside [0, 4)`);
      expect(caught.where.row).toBe(101);
    }
  });
});

describe('view keys (Utf8View / BinaryView)', () => {
  /** 16-byte views: [length, inline bytes] or [length, prefix, buffer index, offset] */
  function viewsOf(entries: Array<{ inline: Uint8Array } | { length: number; prefix: Uint8Array; buffer: number; offset: number }>): Uint8Array {
    const views = new Uint8Array(16 * entries.length);
    const dv = new DataView(views.buffer);
    entries.forEach((e, i) => {
      if ('inline' in e) {
        dv.setInt32(16 * i, e.inline.length, true);
        views.set(e.inline, 16 * i + 4);
      } else {
        dv.setInt32(16 * i, e.length, true);
        views.set(e.prefix.subarray(0, 4), 16 * i + 4);
        dv.setInt32(16 * i + 8, e.buffer, true);
        dv.setInt32(16 * i + 12, e.offset, true);
      }
    });
    return views;
  }
  const long = Uint8Array.from({ length: 21 }, (_, i) => (i * 37 + 200) & 0xff); // bytes >= 0x80 in the tail
  const buffer = new Uint8Array(40);
  buffer.set(long, 7);

  test('inline and out-of-line values hash their own bytes (Spark BinaryType)', () => {
    const views = viewsOf([{ inline: utf8('abc') }, { length: 21, prefix: long, buffer: 0, offset: 7 }, { inline: new Uint8Array(12).fill(0xff) }]);
    const data = makeData({ type: new BinaryView(), length: 3, nullCount: 0, views, variadicBuffers: [buffer] } as never) as Data;
    expect(hashOf(data)).toEqual([ref.hashUnsafeBytes(utf8('abc'), SEED), ref.hashUnsafeBytes(long, SEED), ref.hashUnsafeBytes(new Uint8Array(12).fill(0xff), SEED)]);
  });

  test.each([
    ['a buffer index past the variadic buffers', { length: 21, prefix: long, buffer: 1, offset: 7 }],
    ['a range past the end of its buffer', { length: 21, prefix: long, buffer: 0, offset: 20 }],
  ] as const)('a view with %s is refused (CS_INVALID_ARGUMENT naming the row), not hashed as some other bytes', (_name, bad) => {
    const views = viewsOf([{ inline: utf8('abc') }, { length: 21, prefix: long, buffer: 0, offset: 7 }, bad]);
    const data = makeData({ type: new BinaryView(), length: 3, nullCount: 0, views, variadicBuffers: [buffer] } as never) as Data;
    const caught = thrown(() => hashOf(data));
    expect(caught.code).toBe('CS_INVALID_ARGUMENT');
    expect(caught.where.row).toBe(2);
  });
});

describe('dictionaries larger than 2^16 values', () => {
  test('an index past 65535 picks its own value (every bit of the index counts)', () => {
    const size = 70_000;
    const dictionary = vectorFromArray(Array.from({ length: size }, (_, i) => i * 3 + 1), new Int32());
    const picked = [65536, 0, 69999, 65535, 65537, 1];
    const type = new Dictionary(new Int32(), new Int32());
    const data = makeData({ type, length: picked.length, nullCount: 0, data: Int32Array.from(picked), dictionary } as never) as Data;
    const batch = batchOf([new Field('k', type, false)], [data], picked.length);
    const n = 211;
    expect(hashPartitions(batch, ['k'], n)).toEqual(picked.map((p) => sparkPmod(ref.hashInt(p * 3 + 1, SEED), n)));
  });
});

describe('one partitioner over several batches', () => {
  test('a dictionary key hashed first in a small batch, then in a larger one, hashes every row of the larger batch', () => {
    const dictionary = vectorFromArray(['red', 'green', 'blue', 'a rather long colour name'], new Utf8());
    const type = new Dictionary(new Utf8(), new Int32());
    const batchWith = (picked: number[]): RecordBatch =>
      batchOf([new Field('k', type, false)], [makeData({ type, length: picked.length, nullCount: 0, data: Int32Array.from(picked), dictionary } as never) as Data], picked.length);
    const small = [2, 0];
    const large = [3, 1, 0, 2, 2, 3, 1, 0, 3, 1, 2, 0, 1];
    const n = 13;
    const schema = batchWith(small).schema;
    const partitioner = createPartitioner({ kind: 'hash', keys: ['k'] }, schema, n, 0);
    const expected = (picked: number[]): number[] => picked.map((p) => sparkPmod(ref.hashUnsafeBytes(utf8(dictionary.get(p)!), SEED), n));
    for (const picked of [small, large, small, large]) {
      const ids = new Uint32Array(picked.length);
      partitioner.computePartitionIds(batchWith(picked), ids, 0);
      expect([...ids]).toEqual(expected(picked));
    }
  });
});
