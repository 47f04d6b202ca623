/**
 * Builders of random flat Arrow columns for every flat type the shuffle supports,
 * made with `makeData` from raw typed arrays so that the test controls every buffer:
 * validity bitmaps (absent, present but all valid, with nulls, all null, with garbage
 * in the bits past the end), garbage in the value slots of null rows, typed arrays
 * that start at a non-zero byteOffset of their ArrayBuffer, and binary columns whose
 * first offset is not 0.
 */
import {
  Binary,
  Bool,
  DateDay,
  type Dictionary,
  DateMillisecond,
  DateUnit,
  Decimal,
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
  IntervalUnit,
  IntervalYearMonth,
  LargeBinary,
  LargeUtf8,
  Null,
  RecordBatch,
  Schema,
  Struct,
  TimeMicrosecond,
  TimeMillisecond,
  TimeNanosecond,
  TimeSecond,
  TimestampMicrosecond,
  TimestampMillisecond,
  TimestampNanosecond,
  TimestampSecond,
  Type,
  Uint16,
  Uint32,
  Uint64,
  Uint8,
  Utf8,
  Utf8View,
  BinaryView,
  makeData,
  type Data,
  type DataType,
} from 'apache-arrow';
import { TextEncoder } from 'node:util';
import type { Rng } from './random.js';

/** One entry of the type catalog. */
export interface TypeCase {
  /** A unique, readable name (used in test titles). */
  readonly name: string;
  readonly make: () => DataType;
  /** Whether the type can be a hash-partitioning key (murmur3.ts's table). */
  readonly hashable: boolean;
}

const t = (name: string, make: () => DataType, hashable = true): TypeCase => ({ name, make, hashable });

/** Every supported flat type, with the parameter variants worth telling apart. */
export const TYPE_CASES: readonly TypeCase[] = [
  t('Null', () => new Null()),
  t('Bool', () => new Bool()),
  t('Int8', () => new Int8()),
  t('Int16', () => new Int16()),
  t('Int32', () => new Int32()),
  t('Int64', () => new Int64()),
  t('Uint8', () => new Uint8()),
  t('Uint16', () => new Uint16()),
  t('Uint32', () => new Uint32()),
  t('Uint64', () => new Uint64()),
  t('Float16', () => new Float16()),
  t('Float32', () => new Float32()),
  t('Float64', () => new Float64()),
  t('Decimal32(9,2)', () => new Decimal(2, 9, 32)),
  t('Decimal64(18,4)', () => new Decimal(4, 18, 64)),
  t('Decimal128(5,2)', () => new Decimal(2, 5, 128)),
  t('Decimal128(18,0)', () => new Decimal(0, 18, 128)),
  t('Decimal128(19,4)', () => new Decimal(4, 19, 128)),
  t('Decimal128(38,10)', () => new Decimal(10, 38, 128)),
  t('Decimal256(18,3)', () => new Decimal(3, 18, 256)),
  t('Decimal256(40,5)', () => new Decimal(5, 40, 256)),
  t('Decimal256(76,0)', () => new Decimal(0, 76, 256)),
  t('DateDay', () => new DateDay()),
  t('DateMillisecond', () => new DateMillisecond()),
  t('TimeSecond', () => new TimeSecond()),
  t('TimeMillisecond', () => new TimeMillisecond()),
  t('TimeMicrosecond', () => new TimeMicrosecond()),
  t('TimeNanosecond', () => new TimeNanosecond()),
  t('TimestampSecond', () => new TimestampSecond()),
  t('TimestampMillisecond', () => new TimestampMillisecond()),
  t('TimestampMicrosecond', () => new TimestampMicrosecond()),
  t('TimestampNanosecond', () => new TimestampNanosecond()),
  t('TimestampSecond(UTC)', () => new TimestampSecond('UTC')),
  t('TimestampMillisecond(+05:30)', () => new TimestampMillisecond('+05:30')),
  t('TimestampMicrosecond(America/New_York)', () => new TimestampMicrosecond('America/New_York')),
  t('TimestampNanosecond(Europe/Paris)', () => new TimestampNanosecond('Europe/Paris')),
  t('DurationSecond', () => new DurationSecond()),
  t('DurationMillisecond', () => new DurationMillisecond()),
  t('DurationMicrosecond', () => new DurationMicrosecond()),
  t('DurationNanosecond', () => new DurationNanosecond()),
  t('IntervalYearMonth', () => new IntervalYearMonth()),
  t('IntervalDayTime', () => new IntervalDayTime(), false),
  t('IntervalMonthDayNano', () => new IntervalMonthDayNano(), false),
  t('FixedSizeBinary(1)', () => new FixedSizeBinary(1)),
  t('FixedSizeBinary(3)', () => new FixedSizeBinary(3)),
  t('FixedSizeBinary(16)', () => new FixedSizeBinary(16)),
  t('Utf8', () => new Utf8()),
  t('Binary', () => new Binary()),
  t('LargeUtf8', () => new LargeUtf8()),
  t('LargeBinary', () => new LargeBinary()),
  t('Utf8View', () => new Utf8View()),
  t('BinaryView', () => new BinaryView()),
];

export function typeCase(name: string): TypeCase {
  const found = TYPE_CASES.find((c) => c.name === name);
  if (found === undefined) throw new Error(`no type case ${name}`);
  return found;
}

/** How a column's validity is represented. */
export interface ValiditySpec {
  /** false: no validity bitmap at all (nullCount 0). */
  readonly bitmap: boolean;
  /** Probability of a null row when there is a bitmap: 0 gives a bitmap with every bit set, 1 an all-null column. */
  readonly nullRate: number;
}

export const NO_BITMAP: ValiditySpec = { bitmap: false, nullRate: 0 };

/** Bytes per value of a fixed-width type, or null for Null, Bool and the variable-width types. */
export function fixedByteWidth(type: DataType): number | null {
  switch (type.typeId) {
    case Type.Int:
      return (type as Int8).bitWidth / 8;
    case Type.Float:
      return [2, 4, 8][(type as Float32).precision]!;
    case Type.Decimal:
      return (type as Decimal).bitWidth / 8;
    case Type.Date:
      return (type as DateDay).unit === DateUnit.DAY ? 4 : 8;
    case Type.Time:
      return (type as TimeSecond).bitWidth / 8;
    case Type.Timestamp:
    case Type.Duration:
      return 8;
    case Type.Interval: {
      const unit = (type as IntervalDayTime).unit;
      return unit === IntervalUnit.YEAR_MONTH ? 4 : unit === IntervalUnit.DAY_TIME ? 8 : 16;
    }
    case Type.FixedSizeBinary:
      return (type as FixedSizeBinary).byteWidth;
    default:
      return null;
  }
}

/** Utf8View and BinaryView: 16-byte views, long values in variadic buffers. */
export function isView(type: DataType): boolean {
  return type.typeId === Type.Utf8View || type.typeId === Type.BinaryView;
}

/**
 * Whether a view type sits anywhere in `type` (children, dictionary values).
 * Such batches cannot go through arrow-js 21.2's IPC writer once a view column
 * is sliced, by the caller or by the writer itself under a list: it cuts the
 * already sliced views a second time and writes none (test/view-types.test.ts).
 */
export function containsView(type: DataType): boolean {
  if (isView(type)) return true;
  if (type.typeId === Type.Dictionary && containsView((type as Dictionary).dictionary)) return true;
  return (type.children ?? []).some((f) => containsView(f.type));
}

export function isVariableWidth(type: DataType): boolean {
  return [Type.Utf8, Type.Binary, Type.LargeUtf8, Type.LargeBinary].includes(type.typeId);
}

export function isLargeOffsets(type: DataType): boolean {
  return type.typeId === Type.LargeUtf8 || type.typeId === Type.LargeBinary;
}

/** A typed array of `ctor` over `count` elements of a fresh buffer, starting a random number of elements in. */
function carve<T extends ArrayBufferView>(
  ctor: { new (buffer: ArrayBuffer, byteOffset: number, length: number): T; BYTES_PER_ELEMENT: number },
  count: number,
  rng: Rng,
): T {
  const lead = rng.chance(0.5) ? rng.int(1, 3) : 0;
  const tail = rng.int(0, 2);
  const buffer = new ArrayBuffer((lead + count + tail) * ctor.BYTES_PER_ELEMENT);
  rng.fill(new Uint8Array(buffer)); // garbage around the used range
  return new ctor(buffer, lead * ctor.BYTES_PER_ELEMENT, count);
}

function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/** Validity per row and the bitmap that encodes it (with garbage in the bits past the end). */
function buildValidity(length: number, spec: ValiditySpec, rng: Rng): { bitmap?: Uint8Array; nullCount: number } {
  if (!spec.bitmap) return { nullCount: 0 };
  const valid = Array.from({ length }, () => !(spec.nullRate >= 1 || rng.chance(spec.nullRate)));
  const bitmap = carve(Uint8Array, ((length + 7) >>> 3) + rng.int(0, 9), rng);
  let nullCount = 0;
  valid.forEach((v, i) => {
    if (v) bitmap[i >>> 3]! |= 1 << (i & 7);
    else {
      bitmap[i >>> 3]! &= ~(1 << (i & 7));
      nullCount++;
    }
  });
  return { bitmap, nullCount };
}

const F16_SPECIALS = [0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x7fff, 0x0001, 0x8001, 0x03ff, 0x3c00, 0xbc00];
const F32_SPECIALS = [0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc00001, 0x7fffffff, 0x00000001, 0x80000001, 0x3f800000];
/** [low word, high word] */
const F64_SPECIALS: readonly (readonly [number, number])[] = [
  [0, 0],
  [0, 0x80000000],
  [0, 0x7ff00000],
  [0, 0xfff00000],
  [0, 0x7ff80000],
  [1, 0x7ff00000],
  [0xdeadbeef, 0xfff80000],
  [0xffffffff, 0x7fffffff],
  [1, 0],
  [1, 0x80000000],
  [0, 0x3ff00000],
];

/** Writes one random value of `width` bytes at `bytes[at..]`, favouring edge values. */
function writeValue(type: DataType, bytes: Uint8Array, at: number, width: number, rng: Rng): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (type.typeId === Type.Float && rng.chance(0.35)) {
    if (width === 2) view.setUint16(at, rng.pick(F16_SPECIALS), true);
    else if (width === 4) view.setUint32(at, rng.pick(F32_SPECIALS), true);
    else {
      const [lo, hi] = rng.pick(F64_SPECIALS);
      view.setUint32(at, lo, true);
      view.setUint32(at + 4, hi, true);
    }
    return;
  }
  const r = rng.next();
  if (type.typeId !== Type.FixedSizeBinary && r < 0.15) {
    // zero, -1, min, max of a two's complement integer of this width
    const which = rng.int(0, 3);
    for (let b = 0; b < width; b++) {
      const top = b === width - 1;
      bytes[at + b] = which === 0 ? 0 : which === 1 ? 0xff : which === 2 ? (top ? 0x80 : 0) : top ? 0x7f : 0xff;
    }
    return;
  }
  if (type.typeId !== Type.FixedSizeBinary && type.typeId !== Type.Float && r < 0.5) {
    // a small signed integer, sign-extended (negative times exercise floor division in the hash)
    const v = rng.int(-200_000_000, 200_000_000);
    for (let b = 0; b < width; b++) bytes[at + b] = b < 4 ? (v >> (8 * b)) & 0xff : v < 0 ? 0xff : 0;
    return;
  }
  for (let b = 0; b < width; b++) bytes[at + b] = rng.u32() & 0xff;
}

const CHAR_POOL = ['a', 'b', 'z', 'A', '0', ' ', '-', '\u0000', 'é', 'ß', 'Ω', '中', '文', '😀', '🚀', '\u{10FFFF}'];

function randomValueBytes(type: DataType, rng: Rng, encoder: TextEncoder, long: boolean): Uint8Array {
  const r = rng.next();
  const length = long
    ? rng.int(1000, 6000)
    : r < 0.08 ? 0 : r < 0.5 ? rng.int(1, 8) : r < 0.8 ? rng.int(9, 32) : r < 0.96 ? rng.int(33, 80) : rng.int(200, 600);
  if (type.typeId === Type.Utf8 || type.typeId === Type.LargeUtf8 || type.typeId === Type.Utf8View) {
    let s = '';
    while (s.length < length) s += rng.chance(0.6) ? String.fromCharCode(rng.int(0x20, 0x7e)) : rng.pick(CHAR_POOL);
    return encoder.encode(s);
  }
  return rng.fill(new Uint8Array(length));
}

export interface BuildOptions {
  /** Variable-width values of 1-6 KB instead of mostly short ones (outgrows the writer's size estimate). */
  readonly longValues?: boolean;
}

/** A random column of `type` with `length` rows. */
export function buildColumn(type: DataType, length: number, validity: ValiditySpec, rng: Rng, options: BuildOptions = {}): Data {
  if (type.typeId === Type.Null) return makeData({ type: type as Null, length });
  const { bitmap, nullCount } = buildValidity(length, validity, rng);
  const common = { length, nullCount, ...(bitmap ? { nullBitmap: bitmap } : {}) };

  if (type.typeId === Type.Bool) {
    const values = carve(Uint8Array, ((length + 7) >>> 3) + rng.int(0, 4), rng);
    if (rng.chance(0.2)) values.fill(rng.chance(0.5) ? 0xff : 0); // runs of equal booleans
    return makeData({ type: type as Bool, data: values, ...common });
  }

  const width = fixedByteWidth(type);
  if (width !== null) {
    const ctor = (type as DataType & { ArrayType: FixedCtor }).ArrayType;
    const elements = (length * width) / ctor.BYTES_PER_ELEMENT;
    const values = carve(ctor, elements, rng);
    const bytes = bytesOf(values);
    for (let i = 0; i < length; i++) writeValue(type, bytes, i * width, width, rng);
    return makeData({ type, data: values, ...common } as unknown as Parameters<typeof makeData>[0]) as Data;
  }

  if (isVariableWidth(type)) {
    const encoder = new TextEncoder();
    const first = rng.chance(0.3) ? rng.int(1, 40) : 0; // offsets need not start at 0
    const pieces: Uint8Array[] = [];
    const offsets: number[] = [first];
    let end = first;
    for (let i = 0; i < length; i++) {
      const piece = randomValueBytes(type, rng, encoder, options.longValues === true); // null rows get bytes too: the spec allows it
      pieces.push(piece);
      end += piece.length;
      offsets.push(end);
    }
    const data = carve(Uint8Array, end + rng.int(0, 16), rng);
    let at = first;
    for (const piece of pieces) {
      data.set(piece, at);
      at += piece.length;
    }
    if (isLargeOffsets(type)) {
      const valueOffsets = carve(BigInt64Array, length + 1, rng);
      offsets.forEach((o, i) => (valueOffsets[i] = BigInt(o)));
      return makeData({ type: type as LargeUtf8, data, valueOffsets, ...common });
    }
    const valueOffsets = carve(Int32Array, length + 1, rng);
    offsets.forEach((o, i) => (valueOffsets[i] = o));
    return makeData({ type: type as Utf8, data, valueOffsets, ...common });
  }
  if (isView(type)) return buildViewColumn(type, length, common, rng, options);
  throw new Error(`no builder for ${String(type)}`);
}

/**
 * A view column: inline values zero padded in their views; long values spread
 * over one to three variadic buffers, at scattered offsets with garbage
 * between them (and sometimes sharing bytes: two views may point at the same
 * value); null rows get garbage views, even ones pointing nowhere.
 */
function buildViewColumn(type: DataType, length: number, common: { length: number; nullCount: number; nullBitmap?: Uint8Array }, rng: Rng, options: BuildOptions): Data {
  const encoder = new TextEncoder();
  const views = carve(Uint8Array, length * 16, rng);
  const view = new DataView(views.buffer, views.byteOffset, views.byteLength);
  const buffers: number[][] = Array.from({ length: rng.int(1, 3) }, () => []);
  const valid = (i: number) => common.nullBitmap === undefined || ((common.nullBitmap[i >>> 3]! >>> (i & 7)) & 1) === 1;
  let previous: { buffer: number; at: number; value: Uint8Array } | null = null;
  for (let i = 0; i < length; i++) {
    if (!valid(i)) {
      if (rng.chance(0.5)) view.setInt32(i * 16, rng.int(13, 1_000_000), true), view.setInt32(i * 16 + 8, rng.int(0, 9), true); // a long view pointing nowhere
      continue;
    }
    const value: Uint8Array = previous !== null && rng.chance(0.1) ? previous.value : randomValueBytes(type, rng, encoder, options.longValues === true);
    views.fill(0, i * 16, i * 16 + 16);
    view.setInt32(i * 16, value.byteLength, true);
    if (value.byteLength <= 12) {
      views.set(value, i * 16 + 4);
      continue;
    }
    views.set(value.subarray(0, 4), i * 16 + 4);
    let place: { buffer: number; at: number };
    if (previous !== null && previous.value === value) place = previous;
    else {
      const buffer = rng.int(0, buffers.length - 1);
      const bytes = buffers[buffer]!;
      for (let g = rng.int(0, 5); g > 0; g--) bytes.push(rng.int(0, 255)); // garbage between values
      place = { buffer, at: bytes.length };
      bytes.push(...value);
    }
    view.setInt32(i * 16 + 8, place.buffer, true);
    view.setInt32(i * 16 + 12, place.at, true);
    previous = { ...place, value };
  }
  const variadicBuffers = buffers.map((bytes) => {
    const out = carve(Uint8Array, bytes.length + rng.int(0, 8), rng);
    out.set(bytes);
    return out;
  });
  return makeData({ type: type as Utf8View, views, variadicBuffers, ...common } as never) as Data;
}

type FixedCtor = {
  new (buffer: ArrayBuffer, byteOffset: number, length: number): ArrayBufferView;
  BYTES_PER_ELEMENT: number;
};

/** A column spec inside a batch spec. */
export interface ColumnSpec {
  readonly name: string;
  readonly type: DataType;
  readonly nullable?: boolean;
}

/** A record batch with the given columns; each column's validity is chosen by `validityOf(columnIndex)`. */
export function buildBatch(
  columns: readonly ColumnSpec[],
  length: number,
  validityOf: (column: number) => ValiditySpec,
  rng: Rng,
): RecordBatch {
  const schema = schemaOf(columns);
  const children = columns.map((c, i) => buildColumn(c.type, length, validityOf(i), rng));
  return batchOf(schema, children, length);
}

export function schemaOf(columns: readonly ColumnSpec[]): Schema {
  return new Schema(columns.map((c) => new Field(c.name, c.type, c.nullable ?? true)));
}

export function batchOf(schema: Schema, children: Data[], length: number): RecordBatch {
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length, nullCount: 0, children }));
}

/** An Int32 column 0, 1, 2, ... + start without a validity bitmap (row identity). */
export function sequenceColumn(start: number, length: number): Data {
  const values = new Int32Array(length);
  for (let i = 0; i < length; i++) values[i] = start + i;
  return makeData({ type: new Int32(), data: values, length, nullCount: 0 });
}

/** A Utf8 column of exactly these values (null where null), built from raw buffers. */
export function utf8Column(values: readonly (string | null)[]): Data {
  const encoder = new TextEncoder();
  const offsets = new Int32Array(values.length + 1);
  const bytes: number[] = [];
  const bitmap = new Uint8Array((values.length + 7) >>> 3);
  let nullCount = 0;
  values.forEach((v, i) => {
    if (v === null) nullCount++;
    else {
      bitmap[i >>> 3]! |= 1 << (i & 7);
      bytes.push(...encoder.encode(v));
    }
    offsets[i + 1] = bytes.length;
  });
  return makeData({ type: new Utf8(), length: values.length, nullCount, nullBitmap: bitmap, valueOffsets: offsets, data: Uint8Array.from(bytes) });
}
