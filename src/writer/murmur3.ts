/**
 * Spark-compatible Murmur3 (the x86_32 variant of `org.apache.spark.unsafe.hash.Murmur3_x86_32`
 * used by Spark's `Murmur3Hash` expression and therefore by `HashPartitioning`) over Arrow columns,
 * so that a row lands in the partition Spark, Gluten (Velox) and Comet would put it in:
 *
 *     hash = 42; for each key column: hash = hash(value, seed = hash) unless the value is null
 *     partition = pmod(hash, numPartitions)
 *
 * Every Arrow value is hashed as the Spark value it would become, with Spark's function for that
 * Spark type:
 *
 * | Arrow type                          | Spark type seen            | Spark hash of the value                               |
 * | ----------------------------------- | -------------------------- | ----------------------------------------------------- |
 * | Null                                | NullType                   | none: every row is null, the hash flows through        |
 * | Bool                                | BooleanType                | hashInt(1 or 0)                                        |
 * | Int8, Int16, Int32                  | Byte/Short/IntegerType     | hashInt(v)                                             |
 * | Uint8, Uint16                       | Short/IntegerType          | hashInt(v)                                             |
 * | Uint32                              | LongType                   | hashLong(v)                                            |
 * | Int64                               | LongType                   | hashLong(v)                                            |
 * | Uint64                              | DecimalType(20, 0)         | hashUnsafeBytes(BigInteger(v).toByteArray())           |
 * | Float16                             | FloatType (widened)        | as Float32                                             |
 * | Float32                             | FloatType                  | -0.0f -> 0.0f, hashInt(floatToIntBits(f)) (NaN canonical 0x7fc00000) |
 * | Float64                             | DoubleType                 | -0.0 -> 0.0, hashLong(doubleToLongBits(d)) (NaN canonical 0x7ff8000000000000) |
 * | Decimal, precision <= 18            | DecimalType(p, s)          | hashLong(unscaled value)                               |
 * | Decimal, precision > 18             | DecimalType(p, s)          | hashUnsafeBytes(unscaled.toByteArray()), minimal big-endian two's complement |
 * | Date32 (days)                       | DateType                   | hashInt(days)                                          |
 * | Date64 (ms)                         | DateType                   | hashInt(floor(ms / 86_400_000))                        |
 * | Timestamp (any unit, any tz)        | TimestampType (micros)     | hashLong(micros): s*1e6, ms*1e3, us, floor(ns / 1e3)   |
 * | Time32, Time64 (any unit)           | TimeType (Spark 4.1, nanos of day) | hashLong(nanos): s*1e9, ms*1e6, us*1e3, ns      |
 * | Duration (any unit)                 | DayTimeIntervalType (micros) | hashLong(micros): s*1e6, ms*1e3, us, floor(ns / 1e3) |
 * | Interval YEAR_MONTH                 | YearMonthIntervalType      | hashInt(months)                                        |
 * | Utf8, LargeUtf8, Utf8View           | StringType (UTF8_BINARY)   | hashUnsafeBytes(utf8 bytes)                            |
 * | Binary, LargeBinary, BinaryView, FixedSizeBinary | BinaryType    | hashUnsafeBytes(bytes)                                 |
 * | anything else (Interval DAY_TIME / MONTH_DAY_NANO, List, LargeList, FixedSizeList, Struct, Map, Union, Dictionary) | | not a hash key: `assertHashable` throws CS_UNSUPPORTED_KEY_TYPE |
 *
 * `hashUnsafeBytes` is Spark's legacy variant (the one `Murmur3Hash` uses, not `hashUnsafeBytes2`):
 * little-endian 4-byte blocks, then every tail byte mixed on its own as a *signed* byte, then
 * fmix(h1, length).
 *
 * 64-bit values are handled as two int32 halves (low word first, little-endian) read through an
 * Int32Array view; no BigInt is used per row. Unit conversions of 64-bit values (multiplication
 * wraps like Java `long`, floor division is exact) are done on the halves as well.
 */
import {
  type Data,
  type DataType,
  type Decimal,
  type FixedSizeBinary,
  type Float,
  type Int,
  type Interval,
  type Time,
  type Timestamp,
  type Duration,
  type Date_,
  DateUnit,
  IntervalUnit,
  Precision,
  TimeUnit,
  Type,
} from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { viewValueOf, type ViewValue } from '../format/binary-view.js';

/** The seed Spark's `HashPartitioning` passes to `Murmur3Hash`. */
export const SPARK_HASH_SEED = 42;

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;
const TWO_32 = 4294967296;

function mixK1(k1: number): number {
  k1 = Math.imul(k1, C1);
  k1 = (k1 << 15) | (k1 >>> 17);
  return Math.imul(k1, C2);
}

function mixH1(h1: number, k1: number): number {
  h1 ^= k1;
  h1 = (h1 << 13) | (h1 >>> 19);
  return (Math.imul(h1, 5) + 0xe6546b64) | 0;
}

function fmix(h1: number, length: number): number {
  h1 ^= length;
  h1 ^= h1 >>> 16;
  h1 = Math.imul(h1, 0x85ebca6b);
  h1 ^= h1 >>> 13;
  h1 = Math.imul(h1, 0xc2b2ae35);
  h1 ^= h1 >>> 16;
  return h1;
}

/** Spark Murmur3_x86_32.hashInt */
export function hashInt(value: number, seed: number): number {
  return fmix(mixH1(seed | 0, mixK1(value)), 4);
}

/** Spark Murmur3_x86_32.hashLong, the long given as its low and high 32-bit halves */
export function hashLong(lo: number, hi: number, seed: number): number {
  return fmix(mixH1(mixH1(seed | 0, mixK1(lo)), mixK1(hi)), 8);
}

/** Spark Murmur3_x86_32.hashUnsafeBytes (Spark's variant: 4-byte LE blocks, then EACH tail byte mixed separately as a SIGNED byte, then fmix(h1, length)) over bytes[start, end) */
export function hashBytes(bytes: Uint8Array, start: number, end: number, seed: number): number {
  const length = end - start;
  const aligned = end - (length & 3);
  let h1 = seed | 0;
  let i = start;
  for (; i < aligned; i += 4) {
    const k1 = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    h1 = mixH1(h1, mixK1(k1));
  }
  for (; i < end; i++) {
    h1 = mixH1(h1, mixK1((bytes[i]! << 24) >> 24));
  }
  return fmix(h1, length);
}

/** Spark's pmod(hash, n): non-negative remainder */
export function pmod(hash: number, n: number): number {
  const r = hash % n;
  // `+ 0` turns the -0 of e.g. -200 % 200 into 0
  return r < 0 ? r + n : r + 0;
}

function isHashable(type: DataType): boolean {
  switch (type.typeId) {
    case Type.Null:
    case Type.Bool:
    case Type.Utf8:
    case Type.LargeUtf8:
    case Type.Utf8View:
    case Type.Binary:
    case Type.LargeBinary:
    case Type.BinaryView:
    case Type.FixedSizeBinary:
    case Type.Date:
    case Type.Time:
    case Type.Timestamp:
    case Type.Duration:
      return true;
    case Type.Int: {
      const bits = (type as Int).bitWidth;
      return bits === 8 || bits === 16 || bits === 32 || bits === 64;
    }
    case Type.Float: {
      const p = (type as Float).precision;
      return p === Precision.HALF || p === Precision.SINGLE || p === Precision.DOUBLE;
    }
    case Type.Decimal: {
      const bits = (type as Decimal).bitWidth;
      return bits === 32 || bits === 64 || bits === 128 || bits === 256;
    }
    case Type.Interval:
      return (type as Interval).unit === IntervalUnit.YEAR_MONTH;
    default:
      return false;
  }
}

/** Throws ShuffleError CS_UNSUPPORTED_KEY_TYPE naming the column and the type if `type` cannot be a hash key. */
export function assertHashable(type: DataType, column: string): void {
  if (!isHashable(type)) {
    throw new ShuffleError(
      'CS_UNSUPPORTED_KEY_TYPE',
      `type ${String(type)} cannot be a hash partitioning key (Spark-compatible Murmur3 supports ` +
        'null, boolean, integer, floating-point, decimal, date, time, timestamp, duration, ' +
        'year-month interval, string and binary columns)',
      { column },
    );
  }
}

/**
 * For every row i of `data` (an arrow-js Data, possibly sliced: data.offset != 0) that is valid,
 * hashes[i] = hash(value_i, seed = hashes[i]); null rows leave hashes[i] unchanged (Spark semantics:
 * the running hash of the previous key columns flows through). hashes.length >= data.length.
 * Callers chain key columns by calling this once per key column on the same hashes array,
 * which starts filled with 42.
 */
export function hashColumnInto(data: Data, hashes: Int32Array, column: string): void {
  const type = data.type as DataType;
  assertHashable(type, column);
  const n = data.length;
  if (hashes.length < n) {
    throw new ShuffleError(
      'CS_INVALID_ARGUMENT',
      `hash buffer holds ${hashes.length} rows but the column has ${n}`,
      { column },
    );
  }
  if (n === 0 || type.typeId === Type.Null) return;
  const nulls = validityOf(data);
  const off = data.offset;
  const values = data.values as unknown;

  switch (type.typeId) {
    case Type.Bool:
      return boolColumn(values as Uint8Array, n, hashes, nulls, off);

    case Type.Int: {
      const { bitWidth, isSigned } = type as Int;
      if (bitWidth === 32) {
        if (isSigned) return int32Column(values as Int32Array, n, hashes, nulls, off);
        return uint32Column(values as Uint32Array, n, hashes, nulls, off);
      }
      if (bitWidth === 64) {
        const words = wordsOf(values as BigInt64Array | BigUint64Array);
        if (isSigned) return longColumn(words, n, hashes, nulls, off);
        return uint64Column(words, n, hashes, nulls, off);
      }
      return smallIntColumn(values as Int8Array | Int16Array | Uint8Array | Uint16Array, n, hashes, nulls, off);
    }

    case Type.Float: {
      const { precision } = type as Float;
      if (precision === Precision.DOUBLE) return float64Column(values as Float64Array, n, hashes, nulls, off);
      if (precision === Precision.SINGLE) return float32Column(values as Float32Array, n, hashes, nulls, off);
      return float16Column(values as Uint16Array, n, hashes, nulls, off);
    }

    case Type.Decimal: {
      const { precision, bitWidth } = type as Decimal;
      const stride = bitWidth >>> 5;
      if (precision <= 18) return smallDecimalColumn(values as Uint32Array, stride, n, hashes, nulls, off);
      return bigDecimalColumn(values as Uint32Array, stride, n, hashes, nulls, off);
    }

    case Type.Date: {
      if ((type as Date_).unit === DateUnit.DAY) return int32Column(values as Int32Array, n, hashes, nulls, off);
      return date64Column(wordsOf(values as BigInt64Array), n, hashes, nulls, off);
    }

    case Type.Timestamp:
      return toMicrosColumn((type as Timestamp).unit, values as BigInt64Array, n, hashes, nulls, off);

    case Type.Duration:
      return toMicrosColumn((type as Duration).unit, values as BigInt64Array, n, hashes, nulls, off);

    case Type.Time: {
      const { unit, bitWidth } = type as Time;
      if (bitWidth === 32) {
        // seconds or milliseconds of the day, as nanoseconds
        const mul = unit === TimeUnit.SECOND ? 1_000_000_000 : unit === TimeUnit.MILLISECOND ? 1_000_000 : unit === TimeUnit.MICROSECOND ? 1000 : 1;
        return int32ScaledLongColumn(values as Int32Array, mul, n, hashes, nulls, off);
      }
      const words = wordsOf(values as BigInt64Array);
      if (unit === TimeUnit.NANOSECOND) return longColumn(words, n, hashes, nulls, off);
      const mul = unit === TimeUnit.MICROSECOND ? 1000 : unit === TimeUnit.MILLISECOND ? 1_000_000 : 1_000_000_000;
      return scaledLongColumn(words, mul, 1, n, hashes, nulls, off);
    }

    case Type.Interval:
      // YEAR_MONTH only (assertHashable): months as int32
      return int32Column(values as Int32Array, n, hashes, nulls, off);

    case Type.Utf8:
    case Type.Binary:
      return binaryColumn(data.valueOffsets as Int32Array, values as Uint8Array, n, hashes, nulls, off);

    case Type.LargeUtf8:
    case Type.LargeBinary:
      return largeBinaryColumn(wordsOf(data.valueOffsets as unknown as BigInt64Array), values as Uint8Array, n, hashes, nulls, off);

    case Type.FixedSizeBinary:
      return fixedBinaryColumn(values as Uint8Array, (type as FixedSizeBinary).byteWidth, n, hashes, nulls, off);

    case Type.Utf8View:
    case Type.BinaryView:
      return viewColumn(values as Uint8Array, data.variadicBuffers, n, hashes, nulls, off);

    default:
      // unreachable: assertHashable rejected everything else
      return;
  }
}

// ---------------------------------------------------------------------------------------------
// helpers

/** The validity bitmap if the column may hold nulls, else null (fast path without null checks). */
function validityOf(data: Data): Uint8Array | null {
  const bitmap = data.nullBitmap as Uint8Array | undefined | null;
  if (bitmap === undefined || bitmap === null || bitmap.length === 0) return null;
  if (data.nullCount === 0) return null;
  return bitmap;
}

/** Int32 view (two words per 64-bit value, low word first) over a 64-bit typed array. */
function wordsOf(values: BigInt64Array | BigUint64Array | Float64Array): Int32Array {
  return new Int32Array(values.buffer, values.byteOffset, values.byteLength >>> 2);
}

function isValid(nulls: Uint8Array, bit: number): boolean {
  return ((nulls[bit >>> 3]! >>> (bit & 7)) & 1) !== 0;
}

function int32Column(values: Int32Array, n: number, hashes: Int32Array, nulls: Uint8Array | null, off: number): void {
  if (nulls === null) {
    for (let i = 0; i < n; i++) hashes[i] = hashInt(values[i]!, hashes[i]!);
  } else {
    for (let i = 0; i < n; i++) {
      if (isValid(nulls, off + i)) hashes[i] = hashInt(values[i]!, hashes[i]!);
    }
  }
}

function smallIntColumn(
  values: Int8Array | Int16Array | Uint8Array | Uint16Array,
  n: number,
  hashes: Int32Array,
  nulls: Uint8Array | null,
  off: number,
): void {
  if (nulls === null) {
    for (let i = 0; i < n; i++) hashes[i] = hashInt(values[i]!, hashes[i]!);
  } else {
    for (let i = 0; i < n; i++) {
      if (isValid(nulls, off + i)) hashes[i] = hashInt(values[i]!, hashes[i]!);
    }
  }
}

/** Uint32 is a LongType to Spark: hashLong(v, 0). */
function uint32Column(values: Uint32Array, n: number, hashes: Int32Array, nulls: Uint8Array | null, off: number): void {
  if (nulls === null) {
    for (let i = 0; i < n; i++) hashes[i] = hashLong(values[i]!, 0, hashes[i]!);
  } else {
    for (let i = 0; i < n; i++) {
      if (isValid(nulls, off + i)) hashes[i] = hashLong(values[i]!, 0, hashes[i]!);
    }
  }
}

function longColumn(words: Int32Array, n: number, hashes: Int32Array, nulls: Uint8Array | null, off: number): void {
  if (nulls === null) {
    for (let i = 0; i < n; i++) hashes[i] = hashLong(words[2 * i]!, words[2 * i + 1]!, hashes[i]!);
  } else {
    for (let i = 0; i < n; i++) {
      if (isValid(nulls, off + i)) hashes[i] = hashLong(words[2 * i]!, words[2 * i + 1]!, hashes[i]!);
    }
  }
}

function boolColumn(bits: Uint8Array, n: number, hashes: Int32Array, nulls: Uint8Array | null, off: number): void {
  // boolean values are a bitmap; arrow-js does not slice it, the row's bit is off + i
  if (nulls === null) {
    for (let i = 0; i < n; i++) {
      const b = off + i;
      hashes[i] = hashInt((bits[b >>> 3]! >>> (b & 7)) & 1, hashes[i]!);
    }
  } else {
    for (let i = 0; i < n; i++) {
      const b = off + i;
      if (isValid(nulls, b)) hashes[i] = hashInt((bits[b >>> 3]! >>> (b & 7)) & 1, hashes[i]!);
    }
  }
}

/** FloatType: -0.0f hashes as 0.0f, every NaN as floatToIntBits(NaN) = 0x7fc00000. */
function float32Column(values: Float32Array, n: number, hashes: Int32Array, nulls: Uint8Array | null, off: number): void {
  const bits = new Int32Array(values.buffer, values.byteOffset, values.length);
  for (let i = 0; i < n; i++) {
    if (nulls !== null && !isValid(nulls, off + i)) continue;
    const v = values[i]!;
    const b = v !== v ? 0x7fc00000 : v === 0 ? 0 : bits[i]!;
    hashes[i] = hashInt(b, hashes[i]!);
  }
}

/** DoubleType: -0.0 hashes as 0.0, every NaN as doubleToLongBits(NaN) = 0x7ff8000000000000. */
function float64Column(values: Float64Array, n: number, hashes: Int32Array, nulls: Uint8Array | null, off: number): void {
  const words = wordsOf(values);
  for (let i = 0; i < n; i++) {
    if (nulls !== null && !isValid(nulls, off + i)) continue;
    const v = values[i]!;
    if (v !== v) hashes[i] = hashLong(0, 0x7ff80000, hashes[i]!);
    else if (v === 0) hashes[i] = hashLong(0, 0, hashes[i]!);
    else hashes[i] = hashLong(words[2 * i]!, words[2 * i + 1]!, hashes[i]!);
  }
}

/**
 * floatToIntBits of an IEEE half widened to float (exact), with Spark's normalisation:
 * ±0 -> 0.0f, any NaN -> 0x7fc00000.
 */
function halfToFloatBits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return mant !== 0 ? 0x7fc00000 : sign | 0x7f800000;
  if (exp !== 0) return sign | ((exp + 112) << 23) | (mant << 13);
  if (mant === 0) return 0;
  // subnormal half: mant * 2^-24; normalise so the leading 1 is at bit 10
  let m = mant;
  let shift = 0;
  while ((m & 0x400) === 0) {
    m <<= 1;
    shift++;
  }
  return sign | ((113 - shift) << 23) | ((m & 0x3ff) << 13);
}

function float16Column(values: Uint16Array, n: number, hashes: Int32Array, nulls: Uint8Array | null, off: number): void {
  for (let i = 0; i < n; i++) {
    if (nulls !== null && !isValid(nulls, off + i)) continue;
    hashes[i] = hashInt(halfToFloatBits(values[i]!), hashes[i]!);
  }
}

/** Decimal with precision <= 18: Spark hashes the unscaled value as a long (its low 64 bits). */
function smallDecimalColumn(
  words: Uint32Array,
  stride: number,
  n: number,
  hashes: Int32Array,
  nulls: Uint8Array | null,
  off: number,
): void {
  if (stride === 1) {
    // 32-bit decimal: sign-extend
    for (let i = 0; i < n; i++) {
      if (nulls !== null && !isValid(nulls, off + i)) continue;
      const lo = words[i]! | 0;
      hashes[i] = hashLong(lo, lo >> 31, hashes[i]!);
    }
    return;
  }
  if (nulls === null) {
    for (let i = 0, w = 0; i < n; i++, w += stride) hashes[i] = hashLong(words[w]!, words[w + 1]!, hashes[i]!);
  } else {
    for (let i = 0, w = 0; i < n; i++, w += stride) {
      if (isValid(nulls, off + i)) hashes[i] = hashLong(words[w]!, words[w + 1]!, hashes[i]!);
    }
  }
}

/** Room for the big-endian bytes of up to 8 words (Decimal256) plus a sign byte. */
const beScratch = new Uint8Array(40);

/**
 * Writes the two's complement integer held in `count` little-endian 32-bit words at
 * words[base..] into beScratch as Java's BigInteger.toByteArray() would (minimal big-endian two's
 * complement, at least one byte), returning the start index; the bytes are beScratch[start, count * 4).
 */
function toByteArrayInScratch(words: ArrayLike<number>, base: number, count: number): number {
  let p = 0;
  for (let w = base + count - 1; w >= base; w--) {
    const v = words[w]!;
    beScratch[p++] = v >>> 24;
    beScratch[p++] = v >>> 16;
    beScratch[p++] = v >>> 8;
    beScratch[p++] = v;
  }
  const signByte = (beScratch[0]! & 0x80) !== 0 ? 0xff : 0x00;
  let s = 0;
  // a leading sign byte is redundant when the next byte carries the same sign bit
  while (s < p - 1 && beScratch[s] === signByte && ((beScratch[s + 1]! ^ signByte) & 0x80) === 0) s++;
  return s;
}

/** Decimal with precision > 18: hashUnsafeBytes over unscaled.toByteArray(). */
function bigDecimalColumn(
  words: Uint32Array,
  stride: number,
  n: number,
  hashes: Int32Array,
  nulls: Uint8Array | null,
  off: number,
): void {
  const end = stride * 4;
  for (let i = 0; i < n; i++) {
    if (nulls !== null && !isValid(nulls, off + i)) continue;
    const s = toByteArrayInScratch(words, i * stride, stride);
    hashes[i] = hashBytes(beScratch, s, end, hashes[i]!);
  }
}

/** Uint64 is DecimalType(20, 0) to Spark (precision > 18): hashUnsafeBytes over toByteArray(). */
function uint64Column(words: Int32Array, n: number, hashes: Int32Array, nulls: Uint8Array | null, off: number): void {
  const three = new Int32Array(3); // lo, hi, then a zero word: the value is non-negative
  for (let i = 0; i < n; i++) {
    if (nulls !== null && !isValid(nulls, off + i)) continue;
    three[0] = words[2 * i]!;
    three[1] = words[2 * i + 1]!;
    const s = toByteArrayInScratch(three, 0, 3);
    hashes[i] = hashBytes(beScratch, s, 12, hashes[i]!);
  }
}

// 64-bit arithmetic on (lo, hi) int32 halves; results in rLo / rHi.
let rLo = 0;
let rHi = 0;

/** (lo, hi) * m, wrapping like a Java long; m must be a positive integer <= 2^21. */
function mulSmall(lo: number, hi: number, m: number): void {
  const p = (lo >>> 0) * m; // < 2^53: exact
  rLo = p | 0;
  rHi = (Math.imul(hi, m) + Math.floor(p / TWO_32)) | 0;
}

/** (lo, hi) * m for m a product of factors <= 2^21 (1e3, 1e6, 1e9), wrapping like a Java long. */
function mulLong(lo: number, hi: number, m: number): void {
  if (m === 1_000_000_000) {
    mulSmall(lo, hi, 1000);
    mulSmall(rLo, rHi, 1_000_000);
  } else {
    mulSmall(lo, hi, m);
  }
}

/** floor((lo, hi) / d), exact for every signed 64-bit value; d a positive integer < 2^31. */
function floorDivSmall(lo: number, hi: number, d: number): void {
  const negative = hi < 0;
  let l = lo;
  let h = hi;
  if (negative) {
    l = (~lo + 1) | 0;
    h = (~hi + (lo === 0 ? 1 : 0)) | 0;
  }
  const hu = h >>> 0; // magnitude as unsigned 64 (2^63 for Long.MIN_VALUE)
  const lu = l >>> 0;
  const qh = Math.floor(hu / d);
  let r = hu - qh * d;
  let t = r * 65536 + (lu >>> 16); // < 2^47: exact, and floor(t / d) is exact
  const q1 = Math.floor(t / d);
  r = t - q1 * d;
  t = r * 65536 + (lu & 0xffff);
  const q0 = Math.floor(t / d);
  r = t - q0 * d;
  let qLo = ((q1 << 16) + q0) | 0;
  let qHi = qh | 0;
  if (negative) {
    // floor(-x / d) = -ceil(x / d)
    if (r !== 0) {
      qLo = (qLo + 1) | 0;
      if (qLo === 0) qHi = (qHi + 1) | 0;
    }
    const nLo = (~qLo + 1) | 0;
    qHi = (~qHi + (qLo === 0 ? 1 : 0)) | 0;
    qLo = nLo;
  }
  rLo = qLo;
  rHi = qHi;
}

/** (words * mul) or floor(words / div), then hashLong; exactly one of mul / div is not 1. */
function scaledLongColumn(
  words: Int32Array,
  mul: number,
  div: number,
  n: number,
  hashes: Int32Array,
  nulls: Uint8Array | null,
  off: number,
): void {
  for (let i = 0; i < n; i++) {
    if (nulls !== null && !isValid(nulls, off + i)) continue;
    if (div !== 1) floorDivSmall(words[2 * i]!, words[2 * i + 1]!, div);
    else mulLong(words[2 * i]!, words[2 * i + 1]!, mul);
    hashes[i] = hashLong(rLo, rHi, hashes[i]!);
  }
}

/** int32 * mul as a long, then hashLong (Time32 to nanoseconds). */
function int32ScaledLongColumn(
  values: Int32Array,
  mul: number,
  n: number,
  hashes: Int32Array,
  nulls: Uint8Array | null,
  off: number,
): void {
  for (let i = 0; i < n; i++) {
    if (nulls !== null && !isValid(nulls, off + i)) continue;
    const v = values[i]!;
    mulLong(v, v >> 31, mul);
    hashes[i] = hashLong(rLo, rHi, hashes[i]!);
  }
}

/** Timestamp / Duration of any unit as microseconds (TimestampType / DayTimeIntervalType). */
function toMicrosColumn(
  unit: TimeUnit,
  values: BigInt64Array,
  n: number,
  hashes: Int32Array,
  nulls: Uint8Array | null,
  off: number,
): void {
  const words = wordsOf(values);
  switch (unit) {
    case TimeUnit.MICROSECOND:
      return longColumn(words, n, hashes, nulls, off);
    case TimeUnit.NANOSECOND:
      return scaledLongColumn(words, 1, 1000, n, hashes, nulls, off);
    case TimeUnit.MILLISECOND:
      return scaledLongColumn(words, 1000, 1, n, hashes, nulls, off);
    default:
      return scaledLongColumn(words, 1_000_000, 1, n, hashes, nulls, off);
  }
}

/** Date64 (ms since epoch) as Spark's DateType: hashInt(floor(ms / 86_400_000)). */
function date64Column(words: Int32Array, n: number, hashes: Int32Array, nulls: Uint8Array | null, off: number): void {
  for (let i = 0; i < n; i++) {
    if (nulls !== null && !isValid(nulls, off + i)) continue;
    floorDivSmall(words[2 * i]!, words[2 * i + 1]!, 86_400_000);
    hashes[i] = hashInt(rLo, hashes[i]!);
  }
}

/** Utf8 / Binary: offsets are sliced with the Data and index the unsliced value bytes. */
function binaryColumn(
  offsets: Int32Array,
  bytes: Uint8Array,
  n: number,
  hashes: Int32Array,
  nulls: Uint8Array | null,
  off: number,
): void {
  if (nulls === null) {
    for (let i = 0; i < n; i++) hashes[i] = hashBytes(bytes, offsets[i]!, offsets[i + 1]!, hashes[i]!);
  } else {
    for (let i = 0; i < n; i++) {
      if (isValid(nulls, off + i)) hashes[i] = hashBytes(bytes, offsets[i]!, offsets[i + 1]!, hashes[i]!);
    }
  }
}

/** Utf8View / BinaryView: each value's bytes, inline in its view or in a variadic buffer. */
function viewColumn(views: Uint8Array, variadic: readonly Uint8Array[], n: number, hashes: Int32Array, nulls: Uint8Array | null, off: number): void {
  const view = new DataView(views.buffer, views.byteOffset, views.byteLength);
  const value: ViewValue = { bytes: views, start: 0, length: 0 };
  for (let i = 0; i < n; i++) {
    if (nulls !== null && !isValid(nulls, off + i)) continue;
    if (viewValueOf(views, view, variadic, i, value) === null) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `the view of row ${i} of a key column points outside its ${variadic.length} variadic buffers`, { row: i });
    }
    hashes[i] = hashBytes(value.bytes, value.start, value.start + value.length, hashes[i]!);
  }
}

/** LargeUtf8 / LargeBinary: 64-bit offsets read as (lo, hi) words. */
function largeBinaryColumn(
  offsetWords: Int32Array,
  bytes: Uint8Array,
  n: number,
  hashes: Int32Array,
  nulls: Uint8Array | null,
  off: number,
): void {
  let start = (offsetWords[0]! >>> 0) + offsetWords[1]! * TWO_32;
  for (let i = 0; i < n; i++) {
    const end = (offsetWords[2 * i + 2]! >>> 0) + offsetWords[2 * i + 3]! * TWO_32;
    if (nulls === null || isValid(nulls, off + i)) hashes[i] = hashBytes(bytes, start, end, hashes[i]!);
    start = end;
  }
}

function fixedBinaryColumn(
  bytes: Uint8Array,
  width: number,
  n: number,
  hashes: Int32Array,
  nulls: Uint8Array | null,
  off: number,
): void {
  if (nulls === null) {
    for (let i = 0, s = 0; i < n; i++, s += width) hashes[i] = hashBytes(bytes, s, s + width, hashes[i]!);
  } else {
    for (let i = 0, s = 0; i < n; i++, s += width) {
      if (isValid(nulls, off + i)) hashes[i] = hashBytes(bytes, s, s + width, hashes[i]!);
    }
  }
}
