import { DateUnit, Precision, Type, util, type Data, type DataType, type Date_, type Decimal, type FixedSizeBinary, type Float, type Int, type Interval, type Time } from 'apache-arrow';
import { IntervalUnit } from 'apache-arrow/enum';
import { ShuffleError } from '../errors.js';
import { viewValueOf, type ViewValue } from '../format/binary-view.js';

/** How one key column orders its values (Spark's SortOrder: ascending puts nulls first, descending puts them last). */
export interface KeyOrder {
  readonly descending: boolean;
  readonly nullsFirst: boolean;
}

/**
 * Ranks the values of one key column against the distinct values a range
 * partitioning's bounds hold in that column, so that comparing rows with
 * bounds over several key columns becomes comparing small integers.
 *
 * With the D distinct non-null bound values sorted ascending, a value v gets
 *
 * ```text
 * rank(v) = 2 * (bound values < v) + (1 if v is one of them else 0)    in [0, 2D]
 * descending:  2D - rank(v)
 * null:        -1 when nulls come first, 2D + 1 when they come last
 * ```
 *
 * so rank(a) < rank(b) exactly when a sorts before b, and a bound value's rank
 * is odd. Worked example, bound values 10, 20 (D = 2), ascending, nulls first:
 * 5 -> 0, 10 -> 1, 15 -> 2, 20 -> 3, 25 -> 4, null -> -1; descending with
 * nulls last: 5 -> 4, 10 -> 3, 25 -> 0, null -> 5.
 *
 * Values compare as Spark SQL orders them: integers, dates, times, timestamps,
 * durations and decimals by value (timestamps of one type share a unit and a
 * zone), floats by value with -0.0 equal to 0.0 and NaN above everything
 * (NaN equal to NaN), booleans false before true, strings and binaries byte by
 * byte, unsigned (UTF-8 bytes sort as code points). Every column a rank is
 * taken of has the bound column's type.
 */
export class KeyRanks {
  private readonly values: BoundValues;
  /** D: the distinct non-null bound values */
  readonly distinct: number;
  private readonly scratch: Scratch = { numbers: new Float64Array(0), starts: new Float64Array(0), lengths: new Int32Array(0) };

  constructor(readonly type: DataType, bounds: readonly Data[], readonly order: KeyOrder) {
    this.values = boundValuesOf(type, bounds, this.scratch);
    this.distinct = this.values.count;
  }

  /** out[i] = the rank of row i of `data` (of this key's type), for i in [0, data.length). */
  ranksInto(data: Data, out: Int32Array): void {
    const n = data.length;
    const { values } = this;
    switch (values.kind) {
      case 'null':
        break;
      case 'number': {
        if (this.scratch.numbers.length < n) this.scratch.numbers = new Float64Array(Math.max(n, this.scratch.numbers.length * 2));
        const numbers = this.scratch.numbers;
        numbersInto(data, numbers);
        numberRanksInto(numbers, n, values.sorted, values.count, values.index, out);
        break;
      }
      case 'words':
        if (values.width === 2) longRanksInto(wordsOf(data), values.signed ? 0 : TOP_BIT, n, values.sorted, values.count, values.index, out);
        else decimalRanksInto(wordsOf(data), values.width, values.fitsLong, n, values.sorted, values.count, values.index, out);
        break;
      case 'bytes':
        byteRanksInto(data, n, values, this.scratch, out);
        break;
    }
    const d2 = 2 * values.count;
    if (this.order.descending) for (let i = 0; i < n; i++) out[i] = d2 - out[i]!;
    if (values.kind === 'null') out.fill(this.nullRank, 0, n);
    else this.nullsInto(data, out);
  }

  /** out[i] = the rank of null wherever row i of `data` (any type, of out's rows) is null. */
  nullsInto(data: Data, out: Int32Array): void {
    fillNulls(data, this.nullRank, out);
  }

  private get nullRank(): number {
    return this.order.nullsFirst ? -1 : 2 * this.values.count + 1;
  }
}

/** out[i] = value wherever row i of `data` is null. */
export function fillNulls(data: Data, value: number, out: Int32Array): void {
  const bitmap = data.nullBitmap as Uint8Array | null | undefined;
  if (data.nullCount === 0 || bitmap === null || bitmap === undefined || bitmap.byteLength === 0) return;
  for (let i = 0, bit = data.offset, n = data.length; i < n; i++, bit++) {
    if (((bitmap[bit >>> 3]! >>> (bit & 7)) & 1) === 0) out[i] = value;
  }
}

/** Throws CS_UNSUPPORTED_KEY_TYPE unless values of `type` have an order a range partitioning can use. */
export function assertOrderableKey(type: DataType, column: string): void {
  if (valueKindOf(type) === null) {
    throw new ShuffleError(
      'CS_UNSUPPORTED_KEY_TYPE',
      `type ${String(type)} cannot be a range partitioning key (keys are null, boolean, integer, floating-point, decimal, date, time, ` +
        'timestamp, duration, year-month interval, string and binary columns, and dictionaries and structs of keys)',
      { column },
    );
  }
}

type ValueKind = 'null' | 'number' | 'words' | 'bytes';

/**
 * How values of a type are compared: as JS numbers (exact for every type
 * here), as little-endian two's-complement 32-bit words from the top one down,
 * or as bytes. null when the type has no order.
 */
function valueKindOf(type: DataType): ValueKind | null {
  switch (type.typeId) {
    case Type.Null:
      return 'null';
    case Type.Bool:
    case Type.Float:
      return 'number';
    case Type.Int:
      return (type as Int).bitWidth === 64 ? 'words' : 'number';
    case Type.Date:
      return (type as Date_).unit === DateUnit.DAY ? 'number' : 'words';
    case Type.Time:
      return (type as Time).bitWidth === 64 ? 'words' : 'number';
    case Type.Timestamp:
    case Type.Duration:
    case Type.Decimal:
      return 'words';
    case Type.Interval:
      return (type as Interval).unit === IntervalUnit.YEAR_MONTH ? 'number' : null;
    case Type.Utf8:
    case Type.LargeUtf8:
    case Type.Utf8View:
    case Type.Binary:
    case Type.LargeBinary:
    case Type.BinaryView:
    case Type.FixedSizeBinary:
      return 'bytes';
    default:
      return null;
  }
}

/** Per-row arrays reused from batch to batch. */
interface Scratch {
  numbers: Float64Array;
  starts: Float64Array;
  lengths: Int32Array;
}

type BoundValues =
  | { kind: 'null'; count: 0 }
  | { kind: 'number'; count: number; sorted: Float64Array; index: BucketIndex | null }
  | { kind: 'words'; count: number; sorted: Int32Array; width: number; signed: boolean; fitsLong: boolean; index: BucketIndex | null }
  | BoundBytes;

/**
 * Sorted distinct byte strings, past the prefix they all share: `suffixes[j]`
 * is value j without its first `common.length` bytes, `prefixes[j]` the first
 * 6 bytes of that suffix as a number (prefixOf).
 */
interface BoundBytes {
  kind: 'bytes';
  count: number;
  common: Uint8Array;
  suffixes: Uint8Array[];
  prefixes: Float64Array;
  index: BucketIndex | null;
}

/** The distinct non-null values of the bound columns' chunks (of `type`), sorted ascending. */
function boundValuesOf(type: DataType, chunks: readonly Data[], scratch: Scratch): BoundValues {
  const nonNull = (data: Data, i: number) => data.getValid(i);
  switch (valueKindOf(type)) {
    case null:
      throw new Error('unreachable: the key type was checked');
    case 'null':
      return { kind: 'null', count: 0 };
    case 'number': {
      const all: number[] = [];
      for (const data of chunks) {
        if (scratch.numbers.length < data.length) scratch.numbers = new Float64Array(data.length);
        numbersInto(data, scratch.numbers);
        for (let i = 0; i < data.length; i++) if (nonNull(data, i)) all.push(scratch.numbers[i]!);
      }
      all.sort((a, b) => (numberBefore(a, b) ? -1 : numberBefore(b, a) ? 1 : 0));
      const sorted = Float64Array.from(all.filter((v, i) => i === 0 || numberBefore(all[i - 1]!, v)));
      return { kind: 'number', count: sorted.length, sorted, index: bucketIndexOf(sorted) };
    }
    case 'words': {
      const width = wordWidthOf(type);
      const signed = isSignedWords(type);
      // every valid value's words in one array, sorted by index (a sample ranked against itself has 100,000s)
      const all = new Int32Array(chunks.reduce((n, data) => n + data.length, 0) * width);
      let count = 0;
      for (const data of chunks) {
        const words = wordsOf(data);
        for (let i = 0; i < data.length; i++) {
          if (!nonNull(data, i)) continue;
          for (let w = 0; w < width; w++) all[count * width + w] = words[i * width + w]!;
          count++;
        }
      }
      const order = Array.from({ length: count }, (_, i) => i).sort((a, b) => compareWords(all, a * width, all, b * width, width, signed));
      const distinct = order.filter((v, i) => i === 0 || compareWords(all, order[i - 1]! * width, all, v * width, width, signed) < 0);
      const sorted = new Int32Array(distinct.length * width);
      distinct.forEach((v, j) => sorted.set(all.subarray(v * width, (v + 1) * width), j * width));
      const rows = Array.from({ length: distinct.length }, (_, j) => j * width);
      const fitsLong = width > 2 && rows.every((at) => fitsInLong(sorted, at, width));
      const approximations = Float64Array.from(rows, (at) =>
        width === 2 ? longApproximation(sorted[at + 1]!, sorted[at]!, signed ? 0 : TOP_BIT) : decimalApproximation(sorted, at, width, fitsLong),
      );
      return { kind: 'words', count: distinct.length, sorted, width, signed, fitsLong, index: bucketIndexOf(approximations) };
    }
    case 'bytes': {
      // every valid value copied into one array (an array of its own each cost 10x the time), sorted
      // as spans of it on their prefixes first, the bytes where they tie (as Uint8Arrays compared
      // byte by byte: 1.4 s for 200,000 strings, a sample ranked against itself)
      let total = 0;
      let count = 0;
      for (const data of chunks) {
        const value = byteReader(data);
        for (let i = 0; i < data.length; i++) {
          if (!nonNull(data, i)) continue;
          total += value(i).length;
          count++;
        }
      }
      const copy = new Uint8Array(total);
      const ends = new Float64Array(count + 1);
      let at = 0;
      count = 0;
      for (const data of chunks) {
        const value = byteReader(data);
        for (let i = 0; i < data.length; i++) {
          if (!nonNull(data, i)) continue;
          const { bytes, start, length } = value(i);
          copy.set(bytes.subarray(start, start + length), at);
          ends[++count] = at += length;
        }
      }
      const allPrefixes = Float64Array.from({ length: count }, (_, v) => prefixOf(copy, ends[v]!, ends[v + 1]!));
      const compare = (a: number, b: number) => allPrefixes[a]! - allPrefixes[b]! || compareSpans(copy, ends[a]!, ends[a + 1]!, ends[b]!, ends[b + 1]!);
      const order = Array.from({ length: count }, (_, v) => v).sort(compare);
      const distinct = order.filter((v, i) => i === 0 || compare(order[i - 1]!, v) < 0);
      // the prefix every value shares is the one the smallest and the largest share
      const first = distinct.length === 0 ? new Uint8Array(0) : copy.subarray(ends[distinct[0]!]!, ends[distinct[0]! + 1]!);
      const last = distinct.length === 0 ? first : copy.subarray(ends[distinct.at(-1)!]!, ends[distinct.at(-1)! + 1]!);
      let shared = 0;
      while (shared < first.byteLength && shared < last.byteLength && first[shared] === last[shared]) shared++;
      const suffixes = distinct.map((v) => copy.subarray(ends[v]! + shared, ends[v + 1]!));
      const prefixes = Float64Array.from(suffixes, (v) => prefixOf(v, 0, v.byteLength));
      return { kind: 'bytes', count: suffixes.length, common: first.slice(0, shared), suffixes, prefixes, index: bucketIndexOf(prefixes) };
    }
  }
}

// ---------------------------------------------------------------------------------------------
// numbers

/** Spark's order of doubles: by value, -0.0 = 0.0, NaN after everything and equal to itself. */
function numberBefore(a: number, b: number): boolean {
  return a < b || (a === a && b !== b);
}

/** The values of a 'number' column as doubles (each exact); null rows hold anything. */
function numbersInto(data: Data, out: Float64Array): void {
  const n = data.length;
  const type = data.type as DataType;
  if (type.typeId === Type.Bool) {
    const bits = data.values as Uint8Array;
    for (let i = 0, bit = data.offset; i < n; i++, bit++) out[i] = (bits[bit >>> 3]! >>> (bit & 7)) & 1;
    return;
  }
  if (type.typeId === Type.Float && (type as Float).precision === Precision.HALF) {
    const halves = data.values as Uint16Array;
    for (let i = 0; i < n; i++) out[i] = util.uint16ToFloat64(halves[i]!);
    return;
  }
  // Int8-32, Uint8-32, Float32/64, DateDay, Time32, IntervalYearMonth: arrow-js gives them the typed array of their width
  const values = data.values as Int32Array | Float64Array;
  for (let i = 0; i < n; i++) out[i] = values[i]!;
}

function numberRanksInto(values: Float64Array, n: number, sorted: Float64Array, count: number, index: BucketIndex | null, out: Int32Array): void {
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    let lo = 0;
    let hi = count;
    if (index !== null && v === v) {
      const bucket = index.bucketOf(v);
      lo = index.first[bucket]!;
      hi = index.first[bucket + 1]!;
    }
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (numberBefore(sorted[mid]!, v)) lo = mid + 1;
      else hi = mid;
    }
    out[i] = 2 * lo + (lo < count && !numberBefore(v, sorted[lo]!) ? 1 : 0);
  }
}

/**
 * Narrows a row's binary search over the sorted bound values to the few in
 * its bucket. Values map to BUCKETS_PER_VALUE x count buckets linearly
 * between the smallest and largest finite bound value (clamped outside): a
 * monotone map, so every bound in an earlier bucket is below the row and
 * every bound in a later one above it, and the row's rank lies between
 * first[bucket] and first[bucket + 1] (first[b] = the bounds in buckets
 * below b). Worked example, bounds 10, 20, 30, 40: 16 buckets over
 * [10, 40], bucket(v) = floor((v - 10) * 16 / 30), so the bounds lie in
 * buckets 0, 5, 10 and 15 (16, clamped); the row 24 is in bucket 7,
 * first[7] = first[8] = 2: no comparison left, 2 bounds below it.
 * Partition ids of 2 M narrow rows at P = 200 by their int64 key: 100 ms
 * with a binary search over all bounds, 34 with this index (hash: 17).
 */
class BucketIndex {
  constructor(
    private readonly min: number,
    private readonly scale: number,
    private readonly last: number,
    readonly first: Int32Array,
  ) {}

  bucketOf(value: number): number {
    const bucket = Math.floor((value - this.min) * this.scale);
    return bucket < 0 ? 0 : bucket > this.last ? this.last : bucket;
  }
}

const BUCKETS_PER_VALUE = 4;

/** The bucket index of ascending values (approximations of the bounds, in their order), or null where it cannot help. */
function bucketIndexOf(approximations: Float64Array): BucketIndex | null {
  let end = approximations.length;
  while (end > 0 && !Number.isFinite(approximations[end - 1]!)) end--; // NaN and +Infinity sort last
  const min = approximations[0]!;
  const max = approximations[end - 1]!;
  if (end < 4 || !Number.isFinite(min) || !(max > min)) return null;
  const buckets = BUCKETS_PER_VALUE * end;
  // bounds spread wider than a double holds (-1e308 to 1e308) give a scale of 0, bounds within a few subnormals of
  // each other one of Infinity: either makes some bucket NaN (0 x Infinity), a bound uncounted, a row misplaced
  const scale = buckets / (max - min);
  if (!(scale > 0 && scale < Number.POSITIVE_INFINITY)) return null;
  const first = new Int32Array(buckets + 1);
  const index = new BucketIndex(min, scale, buckets - 1, first);
  // first[b]: the bounds in buckets below b; those past `end` (NaN, +Infinity) are above every finite value and never counted
  for (let i = 0; i < end; i++) first[index.bucketOf(approximations[i]!) + 1]!++;
  for (let b = 1; b <= buckets; b++) first[b]! += first[b - 1]!;
  return index;
}

// ---------------------------------------------------------------------------------------------
// words: 64-bit integers, timestamps, durations, decimals

function wordWidthOf(type: DataType): number {
  return type.typeId === Type.Decimal ? (type as Decimal).bitWidth >>> 5 : 2;
}

function isSignedWords(type: DataType): boolean {
  return !(type.typeId === Type.Int && !(type as Int).isSigned);
}

/** The values of a 'words' column as 32-bit words, row i at [i * width, (i + 1) * width). */
function wordsOf(data: Data): Int32Array {
  const values = data.values as Uint32Array | BigInt64Array;
  return new Int32Array(values.buffer, values.byteOffset, values.byteLength >>> 2);
}

/** Compares the values of `width` words at a[i] and b[j]: the top word signed (or not), the others unsigned. */
function compareWords(a: Int32Array, i: number, b: Int32Array, j: number, width: number, signed: boolean): number {
  let w = width - 1;
  let x = a[i + w]!;
  let y = b[j + w]!;
  if (!signed) {
    x >>>= 0;
    y >>>= 0;
  }
  if (x !== y) return x < y ? -1 : 1;
  for (w--; w >= 0; w--) {
    x = a[i + w]! >>> 0;
    y = b[j + w]! >>> 0;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

/**
 * The ranks of decimal128 / decimal256 values (signed, 4 or 8 words): a
 * binary search per row over the sorted bound values in the bucket of the
 * row's decimalApproximation, comparing every word. Partition ids of 1 M
 * wide rows by their decimal(15, 2) price at P = 200: 106 ms with a binary
 * search over all bounds, 36 with the buckets.
 */
function decimalRanksInto(words: Int32Array, width: number, fitsLong: boolean, n: number, sorted: Int32Array, count: number, index: BucketIndex | null, out: Int32Array): void {
  for (let i = 0, at = 0; i < n; i++, at += width) {
    let lo = 0;
    let hi = count;
    if (index !== null) {
      const bucket = index.bucketOf(decimalApproximation(words, at, width, fitsLong));
      lo = index.first[bucket]!;
      hi = index.first[bucket + 1]!;
    }
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareWords(sorted, mid * width, words, at, width, true) < 0) lo = mid + 1;
      else hi = mid;
    }
    out[i] = 2 * lo + (lo < count && compareWords(sorted, lo * width, words, at, width, true) === 0 ? 1 : 0);
  }
}

/** Whether the signed value of `width` words at words[at] fits 64 bits: every word above the second is its sign. */
function fitsInLong(words: Int32Array, at: number, width: number): boolean {
  const sign = words[at + 1]! >> 31;
  for (let w = 2; w < width; w++) if (words[at + w] !== sign) return false;
  return true;
}

const TWO_TO_64 = 2 ** 64;

/**
 * A decimal's signed value (`width` words at words[at]) as a double that is
 * monotone in it, for the bucket index (which needs nothing more). A
 * decimal32's is its value. When every
 * bound value fits 64 bits (`fitsLong`; a decimal of up to 18 digits always
 * does), a value that fits is its nearest double, and one that does not is
 * -2^64 or 2^64 by its sign, beyond every bound: the bounds spread over the
 * buckets. Otherwise the top 64 bits as the nearest double, floor(value /
 * 2^(32 * width - 64)): values closer than that tie, as the bounds may then.
 *
 * ```text
 * -5 (decimal128)    words w0..w3  FFFFFFFB FFFFFFFF FFFFFFFF FFFFFFFF
 *   w2 = w3 = -1, the sign of w1: fits -> w1 * 2^32 + (w0 >>> 0) = -4294967296 + 4294967291 = -5
 * 2^64               words w0..w3  00000000 00000000 00000001 00000000
 *   w2 = 1, not the sign of w1 (0): does not fit; w3 >= 0 -> 2^64
 * ```
 * Both are non-decreasing in the value (rounding to nearest is; floor is; the
 * clamped values lie beyond the range of those that fit), so a row's rank
 * lies within its bucket's bounds.
 */
function decimalApproximation(words: Int32Array, at: number, width: number, fitsLong: boolean): number {
  if (width === 1) return words[at]!; // decimal32: the value itself (its word below is another value's)
  if (fitsLong) {
    if (fitsInLong(words, at, width)) return words[at + 1]! * 4294967296 + (words[at]! >>> 0);
    return words[at + width - 1]! < 0 ? -TWO_TO_64 : TWO_TO_64;
  }
  return words[at + width - 1]! * 4294967296 + (words[at + width - 2]! >>> 0);
}

const TOP_BIT = 0x80000000 | 0;

/** A 64-bit value (high word flipped by `flip` as in longRanksInto) as the nearest double: monotone in the value. */
function longApproximation(high: number, low: number, flip: number): number {
  return (high ^ flip) * 4294967296 + (low >>> 0);
}

/**
 * The ranks of 64-bit values, the common keys (int64, timestamps): a binary
 * search per row over the bound values in its bucket, with the comparison
 * written out (1.4x faster than through compareWords). An unsigned high word
 * with its top bit flipped orders as a signed one.
 */
function longRanksInto(words: Int32Array, flip: number, n: number, sorted: Int32Array, count: number, index: BucketIndex | null, out: Int32Array): void {
  for (let i = 0; i < n; i++) {
    const high = words[2 * i + 1]! ^ flip;
    const low = words[2 * i]! >>> 0;
    let lo = 0;
    let hi = count;
    if (index !== null) {
      const bucket = index.bucketOf(high * 4294967296 + low); // longApproximation, inlined
      lo = index.first[bucket]!;
      hi = index.first[bucket + 1]!;
    }
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const h = sorted[2 * mid + 1]! ^ flip;
      if (h < high || (h === high && sorted[2 * mid]! >>> 0 < low)) lo = mid + 1;
      else hi = mid;
    }
    out[i] = 2 * lo + (lo < count && (sorted[2 * lo + 1]! ^ flip) === high && sorted[2 * lo]! >>> 0 === low ? 1 : 0);
  }
}

// ---------------------------------------------------------------------------------------------
// bytes: strings, binaries, their large and view variants, fixed-size binaries

/** Reads value i of a 'bytes' column (valid rows only); the returned object is reused. */
function byteReader(data: Data): (i: number) => ViewValue {
  const type = data.type as DataType;
  const bytes = data.values as Uint8Array;
  const out: ViewValue = { bytes, start: 0, length: 0 };
  switch (type.typeId) {
    case Type.Utf8:
    case Type.Binary: {
      const offsets = data.valueOffsets as Int32Array;
      return (i) => {
        out.start = offsets[i]!;
        out.length = offsets[i + 1]! - out.start;
        return out;
      };
    }
    case Type.LargeUtf8:
    case Type.LargeBinary: {
      const offsets = data.valueOffsets as unknown as BigInt64Array;
      const words = new Int32Array(offsets.buffer, offsets.byteOffset, offsets.byteLength >>> 2);
      const at = (k: number) => (words[2 * k]! >>> 0) + words[2 * k + 1]! * 2 ** 32;
      return (i) => {
        out.start = at(i);
        out.length = at(i + 1) - out.start;
        return out;
      };
    }
    case Type.FixedSizeBinary: {
      const width = (type as FixedSizeBinary).byteWidth;
      out.length = width;
      return (i) => {
        out.start = i * width;
        return out;
      };
    }
    default: {
      // Utf8View, BinaryView
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const variadic = data.variadicBuffers;
      return (i) => {
        if (viewValueOf(bytes, view, variadic, i, out) === null) {
          throw new ShuffleError('CS_INVALID_ARGUMENT', `the view of row ${i} of a key column points outside its ${variadic.length} variadic buffers`, { row: i });
        }
        return out;
      };
    }
  }
}

/** Compares bytes[start, end) with `b`, unsigned byte by byte, a prefix first. */
function compareBytes(bytes: Uint8Array, start: number, end: number, b: Uint8Array): number {
  const length = end - start;
  const common = Math.min(length, b.byteLength);
  for (let k = 0; k < common; k++) {
    const x = bytes[start + k]!;
    const y = b[k]!;
    if (x !== y) return x < y ? -1 : 1;
  }
  return length === b.byteLength ? 0 : length < b.byteLength ? -1 : 1;
}

/** Compares bytes[aStart, aEnd) with bytes[bStart, bEnd), unsigned byte by byte, a prefix first. */
function compareSpans(bytes: Uint8Array, aStart: number, aEnd: number, bStart: number, bEnd: number): number {
  const common = Math.min(aEnd - aStart, bEnd - bStart);
  for (let k = 0; k < common; k++) {
    const x = bytes[aStart + k]!;
    const y = bytes[bStart + k]!;
    if (x !== y) return x < y ? -1 : 1;
  }
  return aEnd - aStart - (bEnd - bStart);
}

/**
 * The first 6 bytes of bytes[start, end) as a big-endian number (exact: below
 * 2^48), zero-padded: prefixes order as the values do, or tie.
 */
function prefixOf(bytes: Uint8Array, start: number, end: number): number {
  let prefix = 0;
  for (let k = 0; k < 6; k++) prefix = prefix * 256 + (start + k < end ? bytes[start + k]! : 0);
  return prefix;
}

/**
 * Where each row's bytes are in `data`'s one data buffer (strings, binaries,
 * large ones, fixed-size ones): starts[i], lengths[i]. Null for views, whose
 * values are in several buffers.
 */
function rangesOf(data: Data, n: number, starts: Float64Array, lengths: Int32Array): Uint8Array | null {
  const type = data.type as DataType;
  switch (type.typeId) {
    case Type.Utf8:
    case Type.Binary: {
      const offsets = data.valueOffsets as Int32Array;
      for (let i = 0; i < n; i++) {
        starts[i] = offsets[i]!;
        lengths[i] = offsets[i + 1]! - offsets[i]!;
      }
      return data.values as Uint8Array;
    }
    case Type.FixedSizeBinary: {
      const width = (type as FixedSizeBinary).byteWidth;
      for (let i = 0; i < n; i++) starts[i] = i * width;
      lengths.fill(width, 0, n);
      return data.values as Uint8Array;
    }
    case Type.LargeUtf8:
    case Type.LargeBinary: {
      const value = byteReader(data);
      for (let i = 0; i < n; i++) {
        const { start, length } = value(i);
        starts[i] = start;
        lengths[i] = length;
      }
      return data.values as Uint8Array;
    }
    default:
      return null;
  }
}

/**
 * The ranks of a 'bytes' column. The bound values' shared prefix is compared
 * first: a row that leaves it sorts before or after every bound. Past it, a
 * binary search over the bound suffixes in the bucket of the row's 6-byte
 * prefix (prefixes order as the values do, or tie), deciding on the prefixes
 * where they differ and on the bytes where they tie.
 *
 * ```text
 * bounds  https://www.apple  https://www.kiwi  https://www.pear     common "https://www." (12 bytes)
 * row     http://a.b          leaves it at byte 4 (':' < 's')  -> before every bound: rank 0
 * row     https://www.fig     past it "fig": prefix 0x666967000000, searched among "apple" "kiwi" "pear" -> rank 2
 * ```
 * 1 M random 20-byte utf8 keys at P = 200: 196-230 ms comparing bytes at
 * every probe, 68 on prefixes, 43 with the buckets. Keys sharing 12 bytes at
 * P = 10,000: 980 ns a row comparing them at every probe, ~130 past them.
 */
function byteRanksInto(data: Data, n: number, values: BoundBytes, scratch: Scratch, out: Int32Array): void {
  if (scratch.starts.length < n) {
    scratch.starts = new Float64Array(Math.max(n, scratch.starts.length * 2));
    scratch.lengths = new Int32Array(scratch.starts.length);
  }
  const { starts, lengths } = scratch;
  let bytes = rangesOf(data, n, starts, lengths);
  const views = bytes === null ? byteReader(data) : null;
  const bitmap = data.nullCount === 0 ? null : (data.nullBitmap as Uint8Array | null);
  const { count, common, suffixes, prefixes, index } = values;
  const shared = common.byteLength;
  for (let i = 0, bit = data.offset; i < n; i++, bit++) {
    if (bitmap !== null && ((bitmap[bit >>> 3]! >>> (bit & 7)) & 1) === 0) continue; // a null row's ranking is replaced
    let start: number;
    let end: number;
    if (views === null) {
      start = starts[i]!;
      end = start + lengths[i]!;
    } else {
      const value = views(i);
      bytes = value.bytes;
      start = value.start;
      end = start + value.length;
    }
    let k = 0;
    const within = Math.min(shared, end - start);
    while (k < within && bytes![start + k] === common[k]) k++;
    if (k < shared) {
      // left the shared bytes: a proper prefix of them or a smaller byte sorts before every bound, a larger byte after
      out[i] = k < within && bytes![start + k]! > common[k]! ? 2 * count : 0;
      continue;
    }
    start += shared;
    const prefix = prefixOf(bytes!, start, end);
    let lo = 0;
    let hi = count;
    if (index !== null) {
      // prefixes order as the values do (or tie): a monotone map, as bucketIndexOf needs
      const bucket = index.bucketOf(prefix);
      lo = index.first[bucket]!;
      hi = index.first[bucket + 1]!;
    }
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const p = prefixes[mid]!;
      if (p < prefix || (p === prefix && compareBytes(bytes!, start, end, suffixes[mid]!) > 0)) lo = mid + 1;
      else hi = mid;
    }
    out[i] = 2 * lo + (lo < count && prefixes[lo] === prefix && compareBytes(bytes!, start, end, suffixes[lo]!) === 0 ? 1 : 0);
  }
}
