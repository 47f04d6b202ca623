/**
 * Claims about Spark-compatible hash partitioning that the mutation sweep of
 * src/writer/{murmur3,key-hash,partitioner,round-robin-start}.ts found unpinned
 * (docs/RELIABILITY.md). Each test names the Spark behaviour it pins.
 *
 * Expected hashes come from two places only:
 *  - Spark / Comet / Velox / rapids reference vectors already quoted (with their sources) in
 *    test/murmur3.test.ts, repeated here where a claim reuses them;
 *  - `spark`, a small independent reference of Spark's Murmur3_x86_32 (hashInt, hashLong,
 *    hashUnsafeBytes) transcribed from org.apache.spark.unsafe.hash.Murmur3_x86_32, checked
 *    against those reference vectors in the first describe block before anything relies on it.
 * Nothing here takes an expected value from the code under test.
 */
import {
  Bool,
  Decimal,
  Dictionary,
  Field,
  Int16,
  Int32,
  Int64,
  Int8,
  DateDay,
  Float16,
  IntervalYearMonth,
  TimeMillisecond,
  RecordBatch,
  Schema,
  Struct,
  TimestampNanosecond,
  Uint16,
  Uint32,
  Uint8,
  Utf8,
  makeData,
  vectorFromArray,
  type Data,
  type DataType,
} from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import { hashColumnInto } from '../src/writer/murmur3.js';
import { createPartitioner } from '../src/writer/partitioner.js';
import { XorShiftRandom } from '../src/writer/round-robin-start.js';
import { thrown } from './support/failure.js';

// ---------------------------------------------------------------------------------------------
// Independent reference: Spark's Murmur3_x86_32, unsigned 32-bit arithmetic, results as Java ints.

const spark = (() => {
  const u32 = (x: number): number => x >>> 0;
  const mul = (a: number, b: number): number => u32(Math.imul(a, b));
  const rotl = (x: number, r: number): number => u32((x << r) | (x >>> (32 - r)));
  const mixK1 = (k1: number): number => mul(rotl(mul(k1, 0xcc9e2d51), 15), 0x1b873593);
  const mixH1 = (h1: number, k1: number): number => u32(mul(rotl(u32(h1 ^ k1), 13), 5) + 0xe6546b64);
  const fmix = (h1: number, length: number): number => {
    let h = u32(h1 ^ length);
    h = mul(u32(h ^ (h >>> 16)), 0x85ebca6b);
    h = mul(u32(h ^ (h >>> 13)), 0xc2b2ae35);
    return (h ^ (h >>> 16)) | 0; // a Java int
  };
  return {
    /** Murmur3_x86_32.hashInt(input, seed) */
    hashInt: (input: number, seed: number): number => fmix(mixH1(u32(seed), mixK1(u32(input))), 4),
    /** Murmur3_x86_32.hashLong(input, seed): low int first, then high int */
    hashLong: (input: bigint, seed: number): number => {
      const v = BigInt.asUintN(64, input);
      const low = Number(v & 0xffffffffn);
      const high = Number(v >> 32n);
      return fmix(mixH1(mixH1(u32(seed), mixK1(low)), mixK1(high)), 8);
    },
    /** Murmur3_x86_32.hashUnsafeBytes: 4-byte little-endian ints, then each tail byte on its own as a SIGNED byte */
    hashUnsafeBytes: (bytes: Uint8Array, seed: number): number => {
      const aligned = bytes.length - (bytes.length % 4);
      let h1 = u32(seed);
      for (let i = 0; i < aligned; i += 4) {
        const word = bytes[i]! + bytes[i + 1]! * 0x100 + bytes[i + 2]! * 0x10000 + bytes[i + 3]! * 0x1000000;
        h1 = mixH1(h1, mixK1(word));
      }
      for (let i = aligned; i < bytes.length; i++) {
        const signed = bytes[i]! >= 0x80 ? bytes[i]! - 0x100 : bytes[i]!;
        h1 = mixH1(h1, mixK1(u32(signed)));
      }
      return fmix(h1, bytes.length);
    },
  };
})();

/** java.math.BigInteger#toByteArray: minimal big-endian two's complement, bitLength() / 8 + 1 bytes. */
function toByteArray(v: bigint): Uint8Array {
  const magnitude = v < 0n ? -v - 1n : v;
  const bitLength = magnitude === 0n ? 0 : magnitude.toString(2).length;
  const out = new Uint8Array(Math.floor(bitLength / 8) + 1);
  let x = BigInt.asUintN(out.length * 8, v);
  for (let i = out.length - 1; i >= 0; i--, x >>= 8n) out[i] = Number(x & 0xffn);
  return out;
}

// ---------------------------------------------------------------------------------------------
// helpers

const SEED = 42;

function bitmapOf(valid: readonly boolean[]): Uint8Array {
  const bitmap = new Uint8Array(Math.max(1, (valid.length + 7) >>> 3));
  valid.forEach((v, i) => v && (bitmap[i >>> 3]! |= 1 << (i & 7)));
  return bitmap;
}

/** A fixed-width column from a typed array, with an optional validity. */
function fixed(type: DataType, data: ArrayBufferView, length: number, valid?: readonly boolean[]): Data {
  const nulls = valid ? { nullBitmap: bitmapOf(valid), nullCount: valid.filter((v) => !v).length } : { nullCount: 0 };
  return makeData({ type, length, data, ...nulls } as never) as Data;
}

/** Runs hashColumnInto over `data`, every running hash starting at 42. */
function hashOf(data: Data): number[] {
  const hashes = new Int32Array(data.length).fill(SEED);
  hashColumnInto(data, hashes, 'k');
  return [...hashes];
}

/** Little-endian 32-bit words of each value as a two's complement integer of `bits` bits. */
function decimalWords(values: readonly bigint[], bits: 32 | 64 | 128): Uint32Array {
  const per = bits / 32;
  const words = new Uint32Array(values.length * per);
  values.forEach((v, i) => {
    let x = BigInt.asUintN(bits, v);
    for (let w = 0; w < per; w++, x >>= 32n) words[i * per + w] = Number(x & 0xffffffffn);
  });
  return words;
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

/** Spark's pmod(hash, n) for a Java int hash, written independently of src (BigInt). */
function sparkPmod(hash: number, n: number): number {
  const r = BigInt(hash) % BigInt(n);
  return Number(r < 0n ? r + BigInt(n) : r);
}

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

// ---------------------------------------------------------------------------------------------

describe('the independent reference reproduces the published Spark vectors (so the claims below can rely on it)', () => {
  test('hashInt and hashLong match Spark Murmur3_x86_32Suite (seed 0) and Comet/Velox (seed 42)', () => {
    expect([0, -42, 42, -2147483648, 2147483647].map((v) => spark.hashInt(v, 0))).toEqual([593689054, -189366624, -1134849565, -1718298732, -1653689534]);
    expect([0n, -42n, 42n, -(2n ** 63n), 2n ** 63n - 1n].map((v) => spark.hashLong(v, 0))).toEqual([1669671676, -846261623, 1871679806, 1366273829, -2106506049]);
    expect([1, 0, -1].map((v) => spark.hashInt(v, SEED))).toEqual([0xdea578e3 | 0, 0x379fae8f | 0, 0xa0590e3d | 0]); // [comet] test_i32
    expect([0n, 100n, -100n, 0x123456789abcdefn, -0x123456789abcdefn].map((v) => spark.hashLong(v, SEED))).toEqual([-1670924195, 1114849490, 904948192, 657182333, -57193045]); // [rapids]
  });

  test('hashUnsafeBytes matches Comet test_str (tails of 0-3 bytes), Velox longDecimal and the gluten-ch signed tail byte', () => {
    const strings = ['hello', 'bar', '', 'a', 'ab', 'abc', 'abcd', 'abcde'];
    expect(strings.map((s) => spark.hashUnsafeBytes(utf8(s), SEED))).toEqual(
      [3286402344, 2486176763, 142593372, 1485273170, 0xfa37157b, 1322437556, 0xe860e5cc, 814637928].map((x) => x | 0),
    );
    expect(spark.hashUnsafeBytes(new Uint8Array([0x00, 0xc8]), SEED)).toBe(-424716282); // [gluten-ch]
    expect(spark.hashUnsafeBytes(toByteArray(12345678n), SEED)).toBe(-277285195); // [velox] longDecimal
    expect(spark.hashUnsafeBytes(toByteArray(0n), SEED)).toBe(-783713497); // [velox] longDecimal
  });
});

describe('decimals: Spark hashes precision <= 18 as the unscaled long, whatever the Arrow storage width', () => {
  test('a Decimal32 (precision 9) key hashes its unscaled value as a sign-extended long (rapids Decimal32 vectors)', () => {
    const unscaled = [0n, 100n, -100n, 0x12345678n, -0x12345678n, -1n];
    const data = fixed(new Decimal(3, 9, 32), decimalWords(unscaled, 32), unscaled.length);
    expect(hashOf(data)).toEqual([-1670924195, 1114849490, 904948192, -958054811, -1447702630, spark.hashLong(-1n, SEED)]);
  });

  test('a Decimal64 (precision 18) key hashes all 64 bits of its unscaled value (rapids Decimal64 vectors)', () => {
    const unscaled = [0n, 100n, -100n, 0x123456789abcdefn, -0x123456789abcdefn, 999_999_999_999_999_999n, -999_999_999_999_999_999n];
    const data = fixed(new Decimal(7, 18, 64), decimalWords(unscaled, 64), unscaled.length);
    expect(hashOf(data)).toEqual([
      -1670924195, 1114849490, 904948192, 657182333, -57193045,
      spark.hashLong(999_999_999_999_999_999n, SEED),
      spark.hashLong(-999_999_999_999_999_999n, SEED),
    ]);
  });

  test('a Decimal64 key with nulls, sliced, hashes the rows the slice covers and leaves null rows at the running hash', () => {
    const unscaled = [5n, -(2n ** 40n), 7n, 2n ** 50n, -3n, 11n];
    const valid = [true, true, false, true, true, false];
    const whole = fixed(new Decimal(0, 18, 64), decimalWords(unscaled, 64), unscaled.length, valid);
    const expected = unscaled.map((v, i) => (valid[i] ? spark.hashLong(v, SEED) : SEED));
    expect(hashOf(whole)).toEqual(expected);
    expect(hashOf(whole.slice(1, 4))).toEqual(expected.slice(1, 5));
  });

  test('precision 19 is the first precision Spark hashes as BigInteger.toByteArray() bytes, not as a long', () => {
    const unscaled = [12345678n, 0n, -1n, 10n ** 18n, -(10n ** 18n), 10n ** 19n - 1n];
    const data = fixed(new Decimal(0, 19, 128), decimalWords(unscaled, 128), unscaled.length);
    const expected = unscaled.map((v) => spark.hashUnsafeBytes(toByteArray(v), SEED));
    expect(expected.slice(0, 2)).toEqual([-277285195, -783713497]); // [velox] longDecimal 12345678, 0
    expect(hashOf(data)).toEqual(expected);
    // and precision 18 in the same 128-bit storage is the long hash
    const asLong = fixed(new Decimal(0, 18, 128), decimalWords(unscaled.slice(0, 5), 128), 5);
    expect(hashOf(asLong)).toEqual(unscaled.slice(0, 5).map((v) => spark.hashLong(v, SEED)));
  });
});

describe('integers with nulls: the value type decides the hash, the slice offset decides the validity bit', () => {
  test('a Uint32 key with nulls hashes every valid value as a long (Spark LongType), 2^32 - 1 included', () => {
    const values = new Uint32Array([0xffffffff, 0, 0x80000000, 7, 123]);
    const valid = [true, false, true, true, false];
    const data = fixed(new Uint32(), values, values.length, valid);
    expect(hashOf(data)).toEqual([spark.hashLong(4294967295n, SEED), SEED, spark.hashLong(2147483648n, SEED), spark.hashLong(7n, SEED), SEED]);
  });

  test.each([
    ['Int8', () => new Int8(), [1, -1, null, 127, -128, null, 5, 0, null, -7, 9]],
    ['Int16', () => new Int16(), [1, -1, null, 32767, -32768, null, 5, 0, null, -7, 9]],
    ['Uint8', () => new Uint8(), [1, 255, null, 127, 128, null, 5, 0, null, 7, 9]],
    ['Uint16', () => new Uint16(), [1, 65535, null, 32767, 32768, null, 5, 0, null, 7, 9]],
  ] as const)('a sliced %s key with nulls hashes hashInt(value) on valid rows and keeps 42 on null rows', (_name, type, values) => {
    const whole = vectorFromArray([...values], type()).data[0]!;
    const expected = values.map((v) => (v === null ? SEED : spark.hashInt(v, SEED)));
    expect(hashOf(whole)).toEqual(expected);
    for (const [offset, length] of [[1, 9], [3, 8], [5, 5]] as const) {
      expect(hashOf(whole.slice(offset, length))).toEqual(expected.slice(offset, offset + length));
    }
  });

  test('a sliced Bool key without nulls hashes the bit of each covered row (true -> 1, false -> 0)', () => {
    const bools = [true, false, false, true, true, false, true, false, false, false, true, true, false];
    const whole = vectorFromArray(bools, new Bool()).data[0]!;
    expect(whole.nullCount).toBe(0);
    for (const [offset, length] of [[1, 12], [3, 7], [9, 4]] as const) {
      const slice = whole.slice(offset, length);
      expect(hashOf(slice)).toEqual(bools.slice(offset, offset + length).map((b) => spark.hashInt(b ? 1 : 0, SEED)));
    }
  });
});

describe('every narrow fixed-width key type, sliced at a non-byte-aligned offset with nulls, hashes its own rows', () => {
  const valid = [true, false, true, true, false, true, true, true, false, true, true, false, true];
  const ints = [5, -6, 7, -8, 9, 0, -1, 2147483647, -2147483648, 123456, -654321, 3, 4];
  const halves = [0x3c00, 0x8000, 0xbc00, 0x7e00, 0x0001, 0x0000, 0x4000, 0xc100, 0x7c00, 0xfc00, 0x3555, 0x0400, 0x8001];
  const halfBitsAsFloat = (h: number): number => {
    // IEEE half -> float -> floatToIntBits with Spark's -0.0 / NaN normalisation, computed through a Float32Array
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const mant = h & 0x3ff;
    const value = exp === 0x1f ? (mant ? NaN : sign * Infinity) : exp === 0 ? sign * mant * 2 ** -24 : sign * (1 + mant / 1024) * 2 ** (exp - 15);
    if (Number.isNaN(value)) return 0x7fc00000;
    if (value === 0) return 0;
    return new Int32Array(Float32Array.of(value).buffer)[0]!;
  };
  const cases: Array<[string, () => Data, (i: number) => number]> = [
    ['Decimal32(9, 2)', () => fixed(new Decimal(2, 9, 32), decimalWords(ints.map(BigInt), 32), 13, valid), (i) => spark.hashLong(BigInt(ints[i]!), SEED)],
    ['Date32', () => fixed(new DateDay(), Int32Array.from(ints), 13, valid), (i) => spark.hashInt(ints[i]!, SEED)],
    ['IntervalYearMonth', () => fixed(new IntervalYearMonth(), Int32Array.from(ints), 13, valid), (i) => spark.hashInt(ints[i]!, SEED)],
    ['Time32 ms (as long nanoseconds)', () => fixed(new TimeMillisecond(), Int32Array.from(ints), 13, valid), (i) => spark.hashLong(BigInt(ints[i]!) * 1_000_000n, SEED)],
    ['Float16 (as Float32)', () => fixed(new Float16(), Uint16Array.from(halves), 13, valid), (i) => spark.hashInt(halfBitsAsFloat(halves[i]!), SEED)],
  ];
  test.each(cases)('%s', (_name, make, hashOfRow) => {
    const whole = make();
    const expected = valid.map((v, i) => (v ? hashOfRow(i) : SEED));
    expect(hashOf(whole)).toEqual(expected);
    for (const [offset, length] of [[3, 9], [1, 12], [9, 4]] as const) {
      expect(hashOf(whole.slice(offset, length))).toEqual(expected.slice(offset, offset + length));
    }
  });
});

describe('64-bit unit conversions', () => {
  test('a nanosecond timestamp whose micros cross a 2^32 boundary is floor-divided exactly (borrow into the high word)', () => {
    // |v| / 1000 = 2^32 - 1 remainder 1: floor(v / 1000) = -(2^32), whose low word is 0
    const nanos = [-4294967295001n, -4294967295000n, -4294967296001n, 4294967295999n, -(2n ** 63n)];
    const floorDiv = (v: bigint): bigint => (v % 1000n < 0n ? v / 1000n - 1n : v / 1000n);
    const data = fixed(new TimestampNanosecond(), BigInt64Array.from(nanos), nanos.length);
    expect(hashOf(data)).toEqual(nanos.map((v) => spark.hashLong(floorDiv(v), SEED)));
  });
});

describe('nested and dictionary keys', () => {
  test('a sliced struct key with null structs hashes like its fields as consecutive keys, null structs keeping the running hash', () => {
    const a = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
    const b = ['p', 'q', 'rr', 'sss', 'tttt', 'u', 'vv', 'w', 'xx', 'yyy', 'z', 'é'];
    const structValid = [true, false, true, true, false, true, false, true, true, true, false, true];
    const aData = vectorFromArray(a, new Int32()).data[0]!;
    const bData = vectorFromArray(b, new Utf8()).data[0]!;
    const type = new Struct([new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]);
    const struct = makeData({ type, length: a.length, nullCount: structValid.filter((v) => !v).length, nullBitmap: bitmapOf(structValid), children: [aData, bData] });
    const batch = batchOf([new Field('k', type, true)], [struct], a.length);
    const n = 97;
    const expected = a.map((x, i) => (structValid[i] ? sparkPmod(spark.hashUnsafeBytes(utf8(b[i]!), spark.hashInt(x, SEED)), n) : sparkPmod(SEED, n)));
    expect(hashPartitions(batch, ['k'], n)).toEqual(expected);
    for (const [offset, length] of [[1, 10], [3, 6], [5, 7]] as const) {
      expect(hashPartitions(batch.slice(offset, offset + length), ['k'], n)).toEqual(expected.slice(offset, offset + length));
    }
  });

  test('a sliced dictionary key hashes the values its own rows point at (not the indices, not rows shifted by the slice)', () => {
    const dictionary = vectorFromArray(['apple', 'banana', 'cherry', 'date'], new Utf8());
    const picked = [3, 0, 2, 1, 1, 3, 0, 2, 3, 1];
    const type = new Dictionary(new Utf8(), new Int32());
    const data = makeData({ type, length: picked.length, nullCount: 0, data: Int32Array.from(picked), dictionary } as never) as Data;
    const batch = batchOf([new Field('k', type, true)], [data], picked.length);
    const n = 1000;
    const expected = picked.map((p) => sparkPmod(spark.hashUnsafeBytes(utf8(dictionary.get(p)!), SEED), n));
    expect(hashPartitions(batch, ['k'], n)).toEqual(expected);
    for (const [offset, length] of [[1, 9], [4, 5], [7, 3]] as const) {
      expect(hashPartitions(batch.slice(offset, offset + length), ['k'], n)).toEqual(expected.slice(offset, offset + length));
    }
  });

  test('a dictionary key with an empty dictionary (every row null) leaves every row at the seed: partition pmod(42, n)', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const rows = 5;
    const data = makeData({ type, length: rows, nullCount: rows, nullBitmap: new Uint8Array(1), data: new Int32Array(rows), dictionary: vectorFromArray([] as string[], new Utf8()) } as never) as Data;
    const batch = batchOf([new Field('k', type, true)], [data], rows);
    expect(hashPartitions(batch, ['k'], 7)).toEqual(Array(rows).fill(sparkPmod(SEED, 7)));
  });
});

describe('precomputed partition-id column', () => {
  function pidBatch(type: DataType, values: ArrayBufferView, length: number): RecordBatch {
    return batchOf([new Field('pid', type, true)], [fixed(type, values, length)], length);
  }

  test('a negative partition id is refused with CS_PARTITION_ID_OUT_OF_RANGE, -1 included', () => {
    for (const bad of [-1, -2, -2147483648]) {
      const batch = pidBatch(new Int32(), Int32Array.of(0, bad, 1), 3);
      const partitioner = createPartitioner({ kind: 'partition-id', column: 'pid' }, batch.schema, 4, 0);
      const caught = thrown(() => partitioner.computePartitionIds(batch, new Uint32Array(3), 10));
      expect(caught.code).toBe('CS_PARTITION_ID_OUT_OF_RANGE');
      expect(caught.where.row).toBe(11);
    }
  });

  test('an Int64 partition-id column is refused when the partitioner is created (ids are 8, 16 or 32-bit integers)', () => {
    const schema = new Schema([new Field('pid', new Int64(), true)]);
    const caught = thrown(() => createPartitioner({ kind: 'partition-id', column: 'pid' }, schema, 4, 0));
    expect(caught.code).toBe('CS_UNSUPPORTED_KEY_TYPE');
  });
});

describe('round-robin start: java.util.Random.nextInt(bound) over Spark XORShiftRandom', () => {
  /**
   * Independent reference, transcribed from Spark's XORShiftRandom.next(bits) and the JDK's
   * Random.nextInt(bound) (javadoc): for a bound that is not a power of two, a draw u from the
   * last, incomplete block of 2^31 (where `u - u % bound + (bound - 1)` overflows an int) is
   * rejected and redrawn.
   */
  function referenceDraws(state: bigint, bound: number, count: number): { values: number[]; rejections: number } {
    let s = BigInt.asUintN(64, state);
    const next31 = (): number => {
      s = BigInt.asUintN(64, s ^ (s << 21n));
      s ^= s >> 35n;
      s = BigInt.asUintN(64, s ^ (s << 4n));
      return Number(s & 0x7fffffffn);
    };
    const values: number[] = [];
    let rejections = 0;
    for (let k = 0; k < count; k++) {
      let u = next31();
      let r = u % bound;
      while (((u - r + (bound - 1)) | 0) < 0) {
        rejections++;
        u = next31();
        r = u % bound;
      }
      values.push(r);
    }
    return { values, rejections };
  }

  test('the reference reproduces the JDK-printed draws quoted in test/round-robin-start.test.ts', () => {
    expect(referenceDraws(123456789n, 1000, 2).values).toEqual([130, 381]);
    expect(referenceDraws(123456789n, 2147483647, 2).values).toEqual([2051463130, 973578381]);
    expect(referenceDraws(-987654321987n, 10007, 2).values).toEqual([5162, 3273]);
  });

  test('a biased draw is rejected and redrawn, as java.util.Random does (bound 3 * 2^29: a quarter of draws are rejected)', () => {
    const bound = 3 * 2 ** 29;
    for (const state of [123456789n, -987654321987n, 42n]) {
      const { values, rejections } = referenceDraws(state, bound, 64);
      expect(rejections).toBeGreaterThan(0);
      const random = new XorShiftRandom(state);
      expect(values.map(() => random.nextInt(bound))).toEqual(values);
    }
  });
});
