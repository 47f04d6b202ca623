import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  type Data,
  type DataType,
  Binary,
  BinaryView,
  Bool,
  DateDay,
  DateMillisecond,
  Decimal,
  Dictionary,
  DurationMicrosecond,
  DurationMillisecond,
  DurationNanosecond,
  DurationSecond,
  Field,
  FixedSizeBinary,
  Float16,
  Float32,
  Float64,
  Int16,
  Int32,
  Int64,
  Int8,
  IntervalDayTime,
  IntervalMonthDayNano,
  IntervalYearMonth,
  LargeBinary,
  LargeUtf8,
  List,
  Map_,
  Null,
  Struct,
  TimeMicrosecond,
  TimeMillisecond,
  TimeNanosecond,
  TimeSecond,
  TimestampMicrosecond,
  TimestampMillisecond,
  TimestampNanosecond,
  TimestampSecond,
  Uint16,
  Uint32,
  Uint64,
  Uint8,
  Utf8,
  Utf8View,
  makeData,
  vectorFromArray,
  Vector,
} from 'apache-arrow';
import { ShuffleError } from '../src/errors.js';
import { buildColumn } from './support/columns.js';
import { Rng } from './support/random.js';
import {
  SPARK_HASH_SEED,
  assertHashable,
  hashBytes,
  hashColumnInto,
  hashInt,
  hashLong,
  pmod,
} from '../src/writer/murmur3.js';

/*
 * Where the expected values come from (copied verbatim, u32 literals turned into Java ints with `| 0`):
 *  [spark-suite]  apache/spark common/unsafe/src/test/java/org/apache/spark/unsafe/hash/Murmur3_x86_32Suite.java
 *                 (testKnownIntegerInputs / testKnownLongInputs, seed 0)
 *  [comet]        apache/datafusion-comet native/spark-expr/src/hash_funcs/murmur3.rs, test module
 *                 (test_i8, test_i32, test_i64, test_f32, test_f64, test_str; seed 42)
 *  [comet-pmod]   apache/datafusion-comet native/core/src/execution/shuffle/ (test_pmod: "expected partition
 *                 from Spark with n=200")
 *  [velox]        facebookincubator/velox velox/functions/sparksql/tests/HashTest.cpp (Spark `hash()`, seed 42:
 *                 String, longDecimal, Timestamp, Int64, Int32, Int16, Bool, StringInt32, Double, Float)
 *  [rapids]       NVIDIA/spark-rapids-jni src/test/java/com/nvidia/spark/rapids/jni/HashTest.java
 *                 ("derived from Apache Spark": Ints, Timestamps, Decimal64, Decimal32, Dates, Bools)
 *  [gluten-ch]    apache/incubator-gluten cpp-ch/local-engine/tests/gtest_hash.cpp (SparkMurmurHash3_32 of
 *                 the bytes {0x00, 0xc8}: Spark's signed-byte tail vs standard murmur3)
 */

const u = (xs: number[]): number[] => xs.map((x) => x | 0);

/** Runs hashColumnInto over `data` with every running hash starting at `seed`. */
function hashOf(data: Data, seed: number = SPARK_HASH_SEED): number[] {
  const hashes = new Int32Array(data.length).fill(seed);
  hashColumnInto(data, hashes, 'k');
  return Array.from(hashes);
}

/** Hashes several key columns in order, as the partitioner chains them. */
function hashRows(columns: Data[], seed: number = SPARK_HASH_SEED): number[] {
  const hashes = new Int32Array(columns[0]!.length).fill(seed);
  columns.forEach((c, k) => hashColumnInto(c, hashes, `k${k}`));
  return Array.from(hashes);
}

function bitmapOf(valid: boolean[]): Uint8Array {
  const bitmap = new Uint8Array(Math.max(1, Math.ceil(valid.length / 8)));
  valid.forEach((v, i) => {
    if (v) bitmap[i >> 3]! |= 1 << (i & 7);
  });
  return bitmap;
}

/** makeData for the fixed-width types the tests build by hand (typed arrays given directly). */
function fixed(type: DataType, data: ArrayBufferView, length: number, valid?: boolean[]): Data {
  const props = { type, length, data, ...(valid ? { nullBitmap: bitmapOf(valid) } : {}) };
  return makeData(props as Parameters<typeof makeData>[0]) as Data;
}

const i64s = (xs: bigint[]): BigInt64Array => BigInt64Array.from(xs);

/** Little-endian 32-bit words of a two's complement integer of `bits` bits. */
function wordsOf(values: bigint[], bits: 128 | 256): Uint32Array {
  const perValue = bits / 32;
  const words = new Uint32Array(values.length * perValue);
  values.forEach((v, i) => {
    let x = BigInt.asUintN(bits, v);
    for (let w = 0; w < perValue; w++) {
      words[i * perValue + w] = Number(x & 0xffffffffn);
      x >>= 32n;
    }
  });
  return words;
}

/** Independent reference: java.math.BigInteger#toByteArray (byteLen = bitLength() / 8 + 1). */
function javaToByteArray(v: bigint): Uint8Array {
  const magnitude = v < 0n ? -v - 1n : v;
  const bitLength = magnitude === 0n ? 0 : magnitude.toString(2).length;
  const length = Math.floor(bitLength / 8) + 1;
  const out = new Uint8Array(length);
  let x = BigInt.asUintN(length * 8, v);
  for (let i = length - 1; i >= 0; i--) {
    out[i] = Number(x & 0xffn);
    x >>= 8n;
  }
  return out;
}

/** Independent reference for Spark's hashUnsafeBytes, written with a DataView. */
function referenceHashUnsafeBytes(bytes: Uint8Array, seed: number): number {
  const mixK1 = (k: number): number => Math.imul((Math.imul(k, 0xcc9e2d51) << 15) | (Math.imul(k, 0xcc9e2d51) >>> 17), 0x1b873593);
  const mixH1 = (h: number, k: number): number => {
    const x = h ^ k;
    return (Math.imul((x << 13) | (x >>> 19), 5) + 0xe6546b64) | 0;
  };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let h = seed;
  const aligned = bytes.length - (bytes.length % 4);
  for (let i = 0; i < aligned; i += 4) h = mixH1(h, mixK1(view.getInt32(i, true)));
  for (let i = aligned; i < bytes.length; i++) h = mixH1(h, mixK1(view.getInt8(i)));
  h ^= bytes.length;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const lo32 = (v: bigint): number => Number(BigInt.asIntN(32, v));
const hi32 = (v: bigint): number => Number(BigInt.asIntN(32, v >> 32n));

describe('scalar Murmur3_x86_32', () => {
  it('hashInt matches Spark Murmur3_x86_32Suite.testKnownIntegerInputs (seed 0) [spark-suite]', () => {
    expect(hashInt(0, 0)).toBe(593689054);
    expect(hashInt(-42, 0)).toBe(-189366624);
    expect(hashInt(42, 0)).toBe(-1134849565);
    expect(hashInt(-2147483648, 0)).toBe(-1718298732);
    expect(hashInt(2147483647, 0)).toBe(-1653689534);
  });

  it('hashLong of (lo, hi) halves matches Spark Murmur3_x86_32Suite.testKnownLongInputs (seed 0) [spark-suite]', () => {
    expect(hashLong(0, 0, 0)).toBe(1669671676);
    expect(hashLong(-42, -1, 0)).toBe(-846261623);
    expect(hashLong(42, 0, 0)).toBe(1871679806);
    expect(hashLong(0, 0x80000000 | 0, 0)).toBe(1366273829);
    expect(hashLong(-1, 0x7fffffff, 0)).toBe(-2106506049);
  });

  it('hashBytes mixes each tail byte as a signed byte, unlike standard murmur3 [gluten-ch]', () => {
    const bytes = new Uint8Array([0x00, 0xc8]);
    expect(hashBytes(bytes, 0, 2, 42)).toBe(-424716282);
    expect(hashBytes(bytes, 0, 2, 42)).not.toBe(-1346355085); // MurmurHash3_x86_32 of the same bytes
  });

  it('hashBytes hashes exactly bytes[start, end) of a larger buffer', () => {
    const hello = utf8('hello');
    const padded = new Uint8Array([0xff, 0x01, ...hello, 0x7f, 0x80]);
    expect(hashBytes(padded, 2, 2 + hello.length, 42)).toBe(hashBytes(hello, 0, hello.length, 42));
    expect(hashBytes(hello, 0, 5, 42)).toBe(3286402344 | 0); // [comet] test_str "hello"
    expect(hashBytes(padded, 3, 3, 42)).toBe(142593372); // empty range: [comet] test_str ""
  });

  it('hashBytes agrees with an independent DataView implementation on random bytes and seeds', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.integer({ min: -2147483648, max: 2147483647 }), (bytes, seed) => {
        expect(hashBytes(bytes, 0, bytes.length, seed)).toBe(referenceHashUnsafeBytes(bytes, seed));
      }),
    );
  });

  it('pmod gives the partitions Spark gives for negative hashes with n = 200 [comet-pmod]', () => {
    const hashes = u([0x99f0149d, 0x9c67b85d, 0xc8008529, 0xa05b5d7b, 0xcd1e64fb]);
    expect(hashes.every((h) => h < 0)).toBe(true);
    expect(hashes.map((h) => pmod(h, 200))).toEqual([69, 5, 193, 171, 115]);
  });

  it('pmod is a non-negative remainder, never -0', () => {
    expect(pmod(-1, 200)).toBe(199);
    expect(pmod(-200, 200)).toBe(0); // toBe uses Object.is: -0 would fail
    expect(pmod(-2147483648, 200)).toBe(152);
    expect(pmod(2147483647, 7)).toBe(2147483647 % 7);
    expect(pmod(-5, 1)).toBe(0);
  });
});

describe('hashColumnInto: integers and booleans', () => {
  it('Int32 column matches Comet test_i32 and Velox Int32', () => {
    const data = vectorFromArray([1, 0, -1, 2147483647, -2147483648, 0xdeadbeef | 0, 0xcafecafe | 0], new Int32()).data[0]!;
    expect(hashOf(data)).toEqual([
      ...u([0xdea578e3, 0x379fae8f, 0xa0590e3d, 0x07fb67e7, 0x2b1f0fc6]), // [comet]
      141248195, // [velox] 0xdeadbeef
      638354558, // [velox] 0xcafecafe
    ]);
  });

  it('Int8 column matches Comet test_i8; Int16 matches Velox Int16', () => {
    const i8 = vectorFromArray([1, 0, -1, 127, -128], new Int8()).data[0]!;
    expect(hashOf(i8)).toEqual(u([0xdea578e3, 0x379fae8f, 0xa0590e3d, 0x43b4d8ed, 0x422a1365]));
    const i16 = vectorFromArray([1, 0, -1], new Int16()).data[0]!;
    expect(hashOf(i16)).toEqual([-559580957, 933211791, -1604776387]);
  });

  it('Uint8 and Uint16 hash as the (non-negative) int; Uint32 hashes as a long', () => {
    expect(hashOf(vectorFromArray([255, 0, 7], new Uint8()).data[0]!)).toEqual(hashOf(vectorFromArray([255, 0, 7], new Int32()).data[0]!));
    expect(hashOf(vectorFromArray([65535, 1, 7], new Uint16()).data[0]!)).toEqual(hashOf(vectorFromArray([65535, 1, 7], new Int32()).data[0]!));
    const u32 = fixed(new Uint32(), new Uint32Array([0xffffffff, 7, 0]), 3);
    expect(hashOf(u32)).toEqual(hashOf(vectorFromArray([4294967295n, 7n, 0n], new Int64()).data[0]!));
    expect(hashOf(u32)[2]).toBe(-1670924195); // hash of 0L [velox Int64]
  });

  it('Int64 column matches Comet test_i64 and Velox Int64', () => {
    const data = vectorFromArray(
      [1n, 0n, -1n, 9223372036854775807n, -9223372036854775808n, BigInt.asIntN(64, 0xcafecafedeadbeefn), BigInt.asIntN(64, 0xdeadbeefcafecafen)],
      new Int64(),
    ).data[0]!;
    expect(hashOf(data)).toEqual([
      ...u([0x99f0149d, 0x9c67b85d, 0xc8008529, 0xa05b5d7b, 0xcd1e64fb]), // [comet]
      -256235155, // [velox]
      673261790, // [velox]
    ]);
  });

  it('Bool hashes as int 1 / 0 (Velox Bool) and chains over two columns (rapids Bools, seed 0)', () => {
    expect(hashOf(vectorFromArray([false, true, null], new Bool()).data[0]!)).toEqual([933211791, -559580957, 42]);
    const v0 = vectorFromArray([null, true, false, true, null, false], new Bool()).data[0]!;
    const v1 = vectorFromArray([null, true, false, null, false, true], new Bool()).data[0]!;
    expect(hashRows([v0, v1], 0)).toEqual([0, -1589400010, -239939054, -68075478, 593689054, -1194558265]);
  });
});

describe('hashColumnInto: floating point', () => {
  it('Float32 matches Comet test_f32: -0.0 hashes as 0.0 and every NaN as the canonical NaN', () => {
    const values = new Float32Array([1.0, 0.0, -0.0, -1.0, 99999999999.99999999999, -99999999999.99999999999, NaN, 0, 0]);
    const bits = new Int32Array(values.buffer);
    bits[7] = 0xffc00000 | 0; // negative quiet NaN
    bits[8] = 0x7f800001; // signalling NaN with a payload
    const hashes = hashOf(fixed(new Float32(), values, values.length));
    expect(hashes).toEqual(u([0xe434cc39, 0x379fae8f, 0x379fae8f, 0xdc0da8eb, 0xcbdc340f, 0xc0361c86, 0xeb2eb18a, 0xeb2eb18a, 0xeb2eb18a]));
    expect(hashes[2]).toBe(hashes[1]);
  });

  it('Float32 infinities match Velox Float', () => {
    expect(hashOf(fixed(new Float32(), new Float32Array([Infinity, -Infinity, 1]), 3))).toEqual([2026854605, 427440766, -466301895]);
  });

  it('Float64 matches Comet test_f64 and Velox Double: -0.0 == 0.0, NaN canonical', () => {
    const values = new Float64Array([1.0, 0.0, -0.0, -1.0, 99999999999.99999999999, -99999999999.99999999999, NaN, 0, 0, Infinity, -Infinity]);
    const view = new DataView(values.buffer);
    view.setUint32(7 * 8 + 4, 0xfff80000, true); // 0xfff8000000000000: negative NaN
    view.setUint32(7 * 8, 0, true);
    view.setUint32(8 * 8 + 4, 0x7ff00000, true); // 0x7ff0000000000001: signalling NaN
    view.setUint32(8 * 8, 1, true);
    expect(Number.isNaN(values[7]) && Number.isNaN(values[8])).toBe(true);
    expect(hashOf(fixed(new Float64(), values, values.length))).toEqual([
      ...u([0xe4876492, 0x9c67b85d, 0x9c67b85d, 0x13d81357, 0xb87e1595, 0xa0eef9f9, 0xb3a005cf, 0xb3a005cf, 0xb3a005cf]), // [comet]
      833680482, // [velox] +inf
      461104036, // [velox] -inf
    ]);
  });

  it('Float16 hashes as the value widened to Float32 (normal, subnormal, ±0, ±inf, NaN)', () => {
    const halves = new Uint16Array([0x3c00, 0x0000, 0x8000, 0xbc00, 0x7e00, 0xfe01, 0x7c00, 0xfc00, 0x0001, 0x03ff, 0x0200, 0x0400, 0x7bff, 0xc100]);
    const widened = new Float32Array([1, 0, -0, -1, NaN, NaN, Infinity, -Infinity, 2 ** -24, 1023 * 2 ** -24, 2 ** -15, 2 ** -14, 65504, -2.5]);
    const hashes = hashOf(fixed(new Float16(), halves, halves.length));
    expect(hashes).toEqual(hashOf(fixed(new Float32(), widened, widened.length)));
    expect(hashes.slice(0, 6)).toEqual(u([0xe434cc39, 0x379fae8f, 0x379fae8f, 0xdc0da8eb, 0xeb2eb18a, 0xeb2eb18a])); // [comet] f32
  });
});

describe('hashColumnInto: strings and binary', () => {
  const strings = ['hello', 'bar', '', '😁', '天地', 'a', 'ab', 'abc', 'abcd', 'abcde'];
  // [comet] test_str: "a", "ab", "abc", "abcde" end in 1, 2, 3, 1 tail bytes; "😁" is 4 bytes, "天地" 6 (4 + 2 tail)
  const cometExpected = u([3286402344, 2486176763, 142593372, 885025535, 2395000894, 1485273170, 0xfa37157b, 1322437556, 0xe860e5cc, 814637928]);

  it('Utf8 matches Comet test_str (ASCII, empty, non-ASCII, tails of 1, 2 and 3 bytes)', () => {
    expect(hashOf(vectorFromArray(strings, new Utf8()).data[0]!)).toEqual(cometExpected);
  });

  it('Utf8 matches Velox String (including a length that is a multiple of four)', () => {
    const data = vectorFromArray(['Spark', '', 'abcdefghijklmnopqrstuvwxyz', '12345678', null], new Utf8()).data[0]!;
    expect(hashOf(data)).toEqual([228093765, 142593372, -1990933474, 2036199019, 42]);
  });

  it('LargeUtf8 (64-bit offsets) hashes exactly like Utf8', () => {
    expect(hashOf(vectorFromArray(strings, new LargeUtf8()).data[0]!)).toEqual(cometExpected);
  });

  it('Binary and LargeBinary hash the same bytes the same way', () => {
    const bytes = strings.map(utf8);
    expect(hashOf(vectorFromArray(bytes, new Binary()).data[0]!)).toEqual(cometExpected);
    expect(hashOf(vectorFromArray(bytes, new LargeBinary()).data[0]!)).toEqual(cometExpected);
  });

  it('FixedSizeBinary hashes each byteWidth-wide value', () => {
    const two = fixed(new FixedSizeBinary(2), new Uint8Array([0x00, 0xc8, 0x61, 0x62]), 2);
    expect(hashOf(two)).toEqual([-424716282, 0xfa37157b | 0]); // [gluten-ch] {0, 0xc8}; [comet] "ab"
    const four = fixed(new FixedSizeBinary(4), new Uint8Array([1, 2, 3, 4, 0x61, 0x62, 0x63, 0x64]), 2, [true, true]);
    expect(hashOf(four)).toEqual([hashBytes(new Uint8Array([1, 2, 3, 4]), 0, 4, 42), 0xe860e5cc | 0]);
  });
});

describe('hashColumnInto: decimals', () => {
  it('precision <= 18 hashes the unscaled long (rapids Decimal64 / Decimal32), in 128- and 256-bit storage', () => {
    const unscaled = [0n, 100n, -100n, 0x123456789abcdefn, -0x123456789abcdefn];
    const expected = [-1670924195, 1114849490, 904948192, 657182333, -57193045];
    expect(hashOf(fixed(new Decimal(7, 18, 128), wordsOf(unscaled, 128), 5))).toEqual(expected);
    expect(hashOf(fixed(new Decimal(7, 18, 256), wordsOf(unscaled, 256), 5))).toEqual(expected);
    const small = [0n, 100n, -100n, 0x12345678n, -0x12345678n];
    expect(hashOf(fixed(new Decimal(3, 9, 128), wordsOf(small, 128), 5))).toEqual([-1670924195, 1114849490, 904948192, -958054811, -1447702630]);
  });

  it('precision > 18 hashes BigInteger.toByteArray() of the unscaled value (Velox longDecimal)', () => {
    const max = 10n ** 38n - 1n;
    const unscaled = [12345678n, 0n, -max, max, -12345678n];
    const expected = [-277285195, -783713497, 1400911110, -817514053, -1198355617];
    expect(hashOf(fixed(new Decimal(0, 38, 128), wordsOf(unscaled, 128), 5))).toEqual(expected);
    expect(hashOf(fixed(new Decimal(2, 38, 256), wordsOf(unscaled, 256), 5))).toEqual(expected);
  });

  it('precision > 18 equals hashBytes over an independent BigInt toByteArray, for any 128/256-bit value', () => {
    const reference = (v: bigint, seed: number): number => {
      const bytes = javaToByteArray(v);
      return hashBytes(bytes, 0, bytes.length, seed);
    };
    const edges = [0n, -1n, 1n, 127n, 128n, -128n, -129n, 255n, 256n, 2n ** 63n, -(2n ** 63n), 2n ** 127n - 1n, -(2n ** 127n)];
    expect(hashOf(fixed(new Decimal(0, 38, 128), wordsOf(edges, 128), edges.length))).toEqual(edges.map((v) => reference(v, 42)));
    fc.assert(
      fc.property(
        fc.array(fc.bigInt({ min: -(2n ** 127n), max: 2n ** 127n - 1n }), { minLength: 1, maxLength: 20 }),
        fc.integer({ min: 19, max: 38 }),
        (values, precision) => {
          const data = fixed(new Decimal(0, precision, 128), wordsOf(values, 128), values.length);
          expect(hashOf(data)).toEqual(values.map((v) => reference(v, 42)));
        },
      ),
    );
    fc.assert(
      fc.property(fc.array(fc.bigInt({ min: -(2n ** 255n), max: 2n ** 255n - 1n }), { minLength: 1, maxLength: 10 }), (values) => {
        const data = fixed(new Decimal(0, 76, 256), wordsOf(values, 256), values.length);
        expect(hashOf(data)).toEqual(values.map((v) => reference(v, 42)));
      }),
    );
  });

  it('Uint64 hashes as DecimalType(20, 0): toByteArray of the unsigned value', () => {
    const values = [12345678n, 0n, 2n ** 64n - 1n, 2n ** 63n, 127n, 128n];
    const expected = values.map((v) => {
      const bytes = javaToByteArray(v);
      return hashBytes(bytes, 0, bytes.length, 42);
    });
    expect(expected.slice(0, 2)).toEqual([-277285195, -783713497]); // [velox] longDecimal 12345678, 0
    expect(hashOf(vectorFromArray(values, new Uint64()).data[0]!)).toEqual(expected);
  });
});

describe('hashColumnInto: dates, times, timestamps, intervals', () => {
  it('Date32 hashes the day number (rapids Dates)', () => {
    const days = [0, 0, 100, -100, 0x12345678, 0, -0x12345678];
    const data = fixed(new DateDay(), new Int32Array(days), days.length, [true, false, true, true, true, false, true]);
    expect(hashOf(data)).toEqual([933211791, 42, 751823303, -1080202046, -1721170160, 42, 1852996993]);
  });

  it('Date64 hashes floor(ms / 86400000) as Spark DateType days', () => {
    const day = 86_400_000n;
    const ms = [0n, 100n * day, -100n * day, 0x12345678n * day, -1n, day - 1n, -day - 1n];
    expect(hashOf(fixed(new DateMillisecond(), i64s(ms), ms.length))).toEqual([
      933211791, 751823303, -1080202046, -1721170160, // [rapids] days 0, 100, -100, 0x12345678
      -1604776387, // -1 ms is day -1: [velox] Int32(-1)
      933211791, // last ms of day 0
      hashInt(-2, 42), // first-but-one ms before day -1
    ]);
  });

  it('TimestampMicrosecond hashes the long micros (rapids Timestamps, Velox Timestamp)', () => {
    const micros = [0n, 100n, -100n, 0x123456789abcdefn, -0x123456789abcdefn, 12345678n];
    const data = fixed(new TimestampMicrosecond(), i64s(micros), micros.length, [true, true, true, true, true, true]);
    expect(hashOf(data)).toEqual([-1670924195, 1114849490, 904948192, 657182333, -57193045, 1402875301]);
  });

  it('timestamps in seconds, milliseconds and nanoseconds hash as the equivalent microseconds', () => {
    const seconds = [0n, 100n, -86_400n, 1_700_000_000n, -2_208_988_800n]; // nanoseconds cover 1677..2262
    const micros = hashOf(fixed(new TimestampMicrosecond('UTC'), i64s(seconds.map((s) => s * 1_000_000n)), seconds.length));
    expect(hashOf(fixed(new TimestampSecond(), i64s(seconds), seconds.length))).toEqual(micros);
    expect(hashOf(fixed(new TimestampMillisecond('Europe/Paris'), i64s(seconds.map((s) => s * 1000n)), seconds.length))).toEqual(micros);
    expect(hashOf(fixed(new TimestampNanosecond(), i64s(seconds.map((s) => s * 1_000_000_000n)), seconds.length))).toEqual(micros);
    expect(hashOf(fixed(new TimestampNanosecond(), i64s([12345678000n]), 1))).toEqual([1402875301]); // [velox]
  });

  it('nanosecond timestamps are floor-divided to micros (negative values round down)', () => {
    const nanos = [-1n, -1000n, -1001n, 999n, 1999n];
    const expectedMicros = [-1n, -1n, -2n, 0n, 1n];
    expect(hashOf(fixed(new TimestampNanosecond(), i64s(nanos), nanos.length))).toEqual(
      hashOf(fixed(new TimestampMicrosecond(), i64s(expectedMicros), nanos.length)),
    );
    expect(hashOf(fixed(new TimestampNanosecond(), i64s([-1n, 999n]), 2))).toEqual(u([0xc8008529, 0x9c67b85d])); // [comet] i64 -1, 0
  });

  it('64-bit unit conversions agree with BigInt arithmetic for every long (floor division, wrapping multiply)', () => {
    const ref = (v: bigint): number => hashLong(lo32(v), hi32(v), 42);
    const floorDiv = (v: bigint, d: bigint): bigint => (v % d < 0n ? v / d - 1n : v / d);
    const anyLong = fc.oneof(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.constantFrom(-(2n ** 63n), 2n ** 63n - 1n, -1n, 0n, -999n, -1000n, -1001n));
    fc.assert(
      fc.property(fc.array(anyLong, { minLength: 1, maxLength: 20 }), (values) => {
        const n = values.length;
        expect(hashOf(fixed(new TimestampNanosecond(), i64s(values), n))).toEqual(values.map((v) => ref(floorDiv(v, 1000n))));
        expect(hashOf(fixed(new DurationNanosecond(), i64s(values), n))).toEqual(values.map((v) => ref(floorDiv(v, 1000n))));
        expect(hashOf(fixed(new TimestampMillisecond(), i64s(values), n))).toEqual(values.map((v) => ref(BigInt.asIntN(64, v * 1000n))));
        expect(hashOf(fixed(new TimestampSecond(), i64s(values), n))).toEqual(values.map((v) => ref(BigInt.asIntN(64, v * 1_000_000n))));
        expect(hashOf(fixed(new TimeMillisecond(), new Int32Array(values.map((v) => Number(BigInt.asIntN(32, v)))), n))).toEqual(
          values.map((v) => ref(BigInt.asIntN(32, v) * 1_000_000n)),
        );
        expect(hashOf(fixed(new TimeSecond(), new Int32Array(values.map((v) => Number(BigInt.asIntN(32, v)))), n))).toEqual(
          values.map((v) => ref(BigInt.asIntN(32, v) * 1_000_000_000n)),
        );
        expect(hashOf(fixed(new DateMillisecond(), i64s(values), n))).toEqual(
          values.map((v) => hashInt(Number(BigInt.asIntN(32, floorDiv(v, 86_400_000n))), 42)),
        );
      }),
    );
  });

  it('Time32 / Time64 of any unit hash as long nanoseconds of the day (Spark 4.1 TimeType)', () => {
    const nanosOfDay = [0n, 3_600_000_000_000n, 86_399_000_000_000n];
    const expected = hashOf(vectorFromArray(nanosOfDay, new Int64()).data[0]!);
    expect(hashOf(fixed(new TimeSecond(), new Int32Array([0, 3600, 86399]), 3))).toEqual(expected);
    expect(hashOf(fixed(new TimeMillisecond(), new Int32Array([0, 3_600_000, 86_399_000]), 3))).toEqual(expected);
    expect(hashOf(fixed(new TimeMicrosecond(), i64s(nanosOfDay.map((n) => n / 1000n)), 3))).toEqual(expected);
    expect(hashOf(fixed(new TimeNanosecond(), i64s(nanosOfDay), 3))).toEqual(expected);
  });

  it('Duration of any unit hashes as long microseconds (Spark DayTimeIntervalType)', () => {
    const micros = hashOf(fixed(new DurationMicrosecond(), i64s([0n, 100n, -100n, 0x123456789abcdefn]), 4));
    expect(micros).toEqual([-1670924195, 1114849490, 904948192, 657182333]); // same longs as [rapids] Timestamps
    const seconds = [0n, 90n, -3600n];
    const asMicros = hashOf(fixed(new DurationMicrosecond(), i64s(seconds.map((s) => s * 1_000_000n)), 3));
    expect(hashOf(fixed(new DurationSecond(), i64s(seconds), 3))).toEqual(asMicros);
    expect(hashOf(fixed(new DurationMillisecond(), i64s(seconds.map((s) => s * 1000n)), 3))).toEqual(asMicros);
    expect(hashOf(fixed(new DurationNanosecond(), i64s(seconds.map((s) => s * 1_000_000_000n)), 3))).toEqual(asMicros);
  });

  it('Interval YEAR_MONTH hashes the month count as an int', () => {
    const data = fixed(new IntervalYearMonth(), new Int32Array([0, 1, -1, 14]), 4);
    expect(hashOf(data)).toEqual([933211791, -559580957, -1604776387, hashInt(14, 42)]);
  });
});

describe('hashColumnInto: nulls, chaining, slices', () => {
  it('a null row leaves the running hash unchanged, whatever it is', () => {
    const data = vectorFromArray([null, 5, null, 7], new Int32()).data[0]!;
    const hashes = new Int32Array([1, 2, 3, -4]);
    hashColumnInto(data, hashes, 'k');
    expect(Array.from(hashes)).toEqual([1, hashInt(5, 2), 3, hashInt(7, -4)]);
  });

  it('a Null-typed column leaves every hash unchanged', () => {
    const hashes = new Int32Array([7, 8, 9]);
    hashColumnInto(makeData({ type: new Null(), length: 3 }), hashes, 'k');
    expect(Array.from(hashes)).toEqual([7, 8, 9]);
  });

  it('chains key columns: the hash of column 1 seeds column 2 (rapids Ints)', () => {
    const v0 = vectorFromArray([0, 100, null, null, -2147483648, null], new Int32()).data[0]!;
    const v1 = vectorFromArray([0, null, -100, null, null, 2147483647], new Int32()).data[0]!;
    expect(hashRows([v0, v1])).toEqual([59727262, 751823303, -1080202046, 42, 723455942, 133916647]);
  });

  it('chains a string and an int column (Velox StringInt32)', () => {
    const s = vectorFromArray([null, '', null, ''], new Utf8()).data[0]!;
    const i = vectorFromArray([null, null, 0, 0], new Int32()).data[0]!;
    expect(hashRows([s, i])).toEqual([42, 142593372, 933211791, 1143746540]);
  });

  it('hashes only the rows a sliced Data covers (non-zero, non-byte-aligned offset)', () => {
    const ints = [1, null, 3, 4, null, 6, 7, 8, 9, null, 11, -12, 13];
    const whole = vectorFromArray(ints, new Int32()).data[0]!;
    const slice = whole.slice(3, 8); // rows 3..10 (Data.slice takes offset, length)
    expect(slice.offset).toBe(3);
    expect(hashOf(slice)).toEqual(ints.slice(3, 11).map((v) => (v === null ? 42 : hashInt(v, 42))));
  });

  const strs = ['hello', null, 'bar', '', '😁', '天地', null, 'a', 'ab', 'abc', 'abcd', 'abcde', 'x'];
  const cases: Array<[string, () => Data]> = [
    ['Utf8', () => vectorFromArray(strs, new Utf8()).data[0]!],
    ['LargeUtf8', () => vectorFromArray(strs, new LargeUtf8()).data[0]!],
    ['Binary', () => vectorFromArray(strs.map((s) => (s === null ? null : utf8(s))), new Binary()).data[0]!],
    ['Bool', () => vectorFromArray([true, false, null, true, true, null, false, false, true, null, true, false, true], new Bool()).data[0]!],
    ['Int64', () => vectorFromArray([1n, null, -1n, 5n, 2n ** 40n, null, -7n, 8n, 9n, 10n, null, 12n, 13n], new Int64()).data[0]!],
    ['Float64', () => vectorFromArray([1.5, null, -0, NaN, 2, null, 3, 4, 5, 6, null, 8, 9], new Float64()).data[0]!],
    ['Float32', () => vectorFromArray([1.5, null, -0, NaN, 2, null, 3, 4, 5, 6, null, 8, 9], new Float32()).data[0]!],
    ['Decimal(10,2)', () => fixed(new Decimal(2, 10, 128), wordsOf([1n, 2n, -3n, 4n, 5n, 6n, 7n, 8n, -9n, 10n, 11n, 12n, 13n], 128), 13, [true, false, true, true, true, false, true, true, true, true, false, true, true])],
    ['Decimal(38,2)', () => fixed(new Decimal(2, 38, 128), wordsOf([1n, 2n, -3n, 4n, 5n, 6n, 7n, 8n, -(10n ** 30n), 10n, 11n, 12n, 13n], 128), 13, [true, false, true, true, true, false, true, true, true, true, false, true, true])],
    ['FixedSizeBinary(3)', () => fixed(new FixedSizeBinary(3), Uint8Array.from({ length: 39 }, (_, i) => (i * 37) & 0xff), 13, [true, true, false, true, true, true, true, true, false, true, true, true, true])],
    ['TimestampNanosecond', () => fixed(new TimestampNanosecond(), i64s([1n, -1n, -1001n, 999n, 5n, 6n, 7n, 8n, 9n, 10n, 11n, 12n, 13n]), 13, [true, true, true, true, false, true, true, true, true, false, true, true, true])],
    ['Date64', () => fixed(new DateMillisecond(), i64s([1n, -1n, -1001n, 999n, 5n, 6n, 7n, 8n, 9n, 10n, 11n, 12n, 13n].map((v) => v * 40_000_000n)), 13)],
    ['Uint64', () => vectorFromArray([1n, null, 2n ** 64n - 1n, 5n, 2n ** 40n, null, 7n, 8n, 9n, 10n, null, 12n, 13n], new Uint64()).data[0]!],
  ];
  for (const [name, make] of cases) {
    it(`a sliced ${name} column hashes like the same rows of the unsliced column`, () => {
      const whole = make();
      expect(whole.length).toBe(13);
      const all = hashOf(whole, 7);
      for (const [offset, length] of [[3, 8], [1, 12], [9, 4], [13, 0]] as const) {
        expect(hashOf(whole.slice(offset, length), 7)).toEqual(all.slice(offset, offset + length));
      }
    });
  }

  it('property: hashColumnInto over random int32s with random nulls and slices equals per-row hashInt', () => {
    fc.assert(
      fc.property(
        fc.array(fc.option(fc.integer({ min: -2147483648, max: 2147483647 }), { nil: null, freq: 3 }), { maxLength: 200 }),
        fc.nat(),
        fc.nat(),
        fc.array(fc.integer({ min: -2147483648, max: 2147483647 }), { minLength: 200, maxLength: 200 }),
        (values, a, b, seeds) => {
          const whole = vectorFromArray(values, new Int32()).data[0]!;
          const offset = values.length === 0 ? 0 : a % (values.length + 1);
          const length = b % (values.length - offset + 1);
          const data = whole.slice(offset, length);
          const hashes = Int32Array.from(seeds.slice(0, length));
          hashColumnInto(data, hashes, 'k');
          const expected = values.slice(offset, offset + length).map((v, i) => (v === null ? seeds[i]! : hashInt(v, seeds[i]!)));
          expect(Array.from(hashes)).toEqual(expected);
        },
      ),
    );
  });

  it('property: Int64 columns equal per-row hashLong of the (lo, hi) halves', () => {
    fc.assert(
      fc.property(fc.array(fc.option(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), { nil: null }), { maxLength: 50 }), (values) => {
        const data = vectorFromArray(values, new Int64()).data[0]!;
        expect(hashOf(data)).toEqual(values.map((v) => (v === null ? 42 : hashLong(lo32(v), hi32(v), 42))));
      }),
    );
  });

  it('property: Utf8 columns equal hashBytes over the UTF-8 encoding', () => {
    fc.assert(
      fc.property(fc.array(fc.option(fc.string({ unit: 'grapheme', maxLength: 12 }), { nil: null }), { maxLength: 30 }), (values) => {
        const data = vectorFromArray(values, new Utf8()).data[0]!;
        expect(hashOf(data)).toEqual(
          values.map((s) => {
            if (s === null) return 42;
            const bytes = utf8(s);
            return referenceHashUnsafeBytes(bytes, 42);
          }),
        );
      }),
    );
  });

  it('rejects a hash buffer shorter than the column', () => {
    const data = vectorFromArray([1, 2, 3], new Int32()).data[0]!;
    expect(() => hashColumnInto(data, new Int32Array(2), 'k')).toThrow(ShuffleError);
  });
});

describe('assertHashable', () => {
  function thrown(fn: () => void): ShuffleError {
    try {
      fn();
    } catch (e) {
      if (e instanceof ShuffleError) return e;
      throw e;
    }
    throw new Error('expected a ShuffleError');
  }

  it('rejects a List key with CS_UNSUPPORTED_KEY_TYPE naming the column and the type', () => {
    const err = thrown(() => assertHashable(new List(new Field('item', new Int32(), true)), 'tags'));
    expect(err.code).toBe('CS_UNSUPPORTED_KEY_TYPE');
    expect(err.where.column).toBe('tags');
    expect(err.message).toContain('List');
    expect(err.message).toContain('"tags"');
  });

  it('rejects a Dictionary key, and hashColumnInto rejects dictionary data the same way', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const err = thrown(() => assertHashable(type, 'city'));
    expect(err.code).toBe('CS_UNSUPPORTED_KEY_TYPE');
    expect(err.where.column).toBe('city');
    expect(err.message).toContain('Dictionary');
    const data = vectorFromArray(['a', 'b', 'a'], type).data[0]!;
    const err2 = thrown(() => hashColumnInto(data, new Int32Array(3).fill(42), 'city'));
    expect(err2.code).toBe('CS_UNSUPPORTED_KEY_TYPE');
  });

  it('rejects the other types Spark cannot hash here (nested, day-time intervals)', () => {
    const rejected: DataType[] = [
      new Struct([new Field('a', new Int32(), true)]),
      new Map_<Utf8, Int32>(
        new Field('entries', new Struct<{ key: Utf8; value: Int32 }>([new Field('key', new Utf8(), false), new Field('value', new Int32(), true)]), false),
      ),
      new IntervalDayTime(),
      new IntervalMonthDayNano(),
    ];
    for (const type of rejected) expect(thrown(() => assertHashable(type, 'c')).code).toBe('CS_UNSUPPORTED_KEY_TYPE');
  });

  it('accepts every type hashColumnInto implements', () => {
    const accepted: DataType[] = [
      new Null(), new Bool(), new Int8(), new Int16(), new Int32(), new Int64(), new Uint8(), new Uint16(), new Uint32(), new Uint64(),
      new Float16(), new Float32(), new Float64(), new Decimal(2, 10, 128), new Decimal(2, 38, 128), new Decimal(2, 60, 256),
      new DateDay(), new DateMillisecond(), new TimeSecond(), new TimeMillisecond(), new TimeMicrosecond(), new TimeNanosecond(),
      new TimestampSecond(), new TimestampMillisecond(), new TimestampMicrosecond('UTC'), new TimestampNanosecond(),
      new DurationSecond(), new DurationMillisecond(), new DurationMicrosecond(), new DurationNanosecond(), new IntervalYearMonth(),
      new Utf8(), new LargeUtf8(), new Binary(), new LargeBinary(), new FixedSizeBinary(16), new Utf8View(), new BinaryView(),
    ];
    for (const type of accepted) expect(() => assertHashable(type, 'c')).not.toThrow();
  });

  it('hashes a Utf8View or BinaryView column exactly as Utf8 or Binary of the same values (inline, long, null, sliced)', () => {
    const rng = new Rng(77);
    for (const [viewType, flatType] of [[new Utf8View(), new Utf8()], [new BinaryView(), new Binary()]] as const) {
      const views = buildColumn(viewType, 300, { bitmap: true, nullRate: 0.2 }, rng).slice(11, 250);
      const flat = flatTwinOf(views, flatType);
      const viewHashes = new Int32Array(views.length).fill(42);
      const flatHashes = new Int32Array(views.length).fill(42);
      hashColumnInto(views, viewHashes, 'v');
      hashColumnInto(flat, flatHashes, 'f');
      expect([...viewHashes]).toEqual([...flatHashes]);
    }
  });
});

/** A Utf8 or Binary column of a view column's values (vector.get reads the views the arrow-js way). */
function flatTwinOf(views: Data, type: Utf8 | Binary): Data {
  const values = new Vector([views]).toArray() as (string | Uint8Array | null)[];
  const bytes = values.map((v) => (v === null ? new Uint8Array(0) : typeof v === 'string' ? new TextEncoder().encode(v) : v));
  const offsets = new Int32Array(values.length + 1);
  bytes.forEach((b, i) => (offsets[i + 1] = offsets[i]! + b.byteLength));
  const data = new Uint8Array(offsets[values.length]!);
  bytes.forEach((b, i) => data.set(b, offsets[i]!));
  const nullBitmap = new Uint8Array((values.length + 7) >>> 3);
  values.forEach((v, i) => v !== null && (nullBitmap[i >>> 3]! |= 1 << (i & 7)));
  return makeData({ type, length: values.length, nullCount: values.filter((v) => v === null).length, nullBitmap, valueOffsets: offsets, data } as never) as Data;
}
