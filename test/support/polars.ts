/**
 * Helpers for the nodejs-polars interop tests: loading polars, a mixed-type
 * Arrow table, and one value representation both sides can be compared in.
 *
 * nodejs-polars 0.25.2 runs on Node 20, but its native package declares
 * Node >= 22 and npm skips optional packages whose engines do not match, so
 * `nodejs-polars-linux-x64-gnu` is an explicit (non-optional) devDependency.
 */
import { createRequire } from 'node:module';
import {
  Bool,
  DateDay,
  DateUnit,
  Decimal,
  Float64,
  Int32,
  Int64,
  LargeUtf8,
  makeData,
  Null,
  Table,
  Type,
  TimestampMicrosecond,
  Utf8,
  Vector,
  type Data,
  type DataType,
  type RecordBatch,
} from 'apache-arrow';
import { MessageHeader } from 'apache-arrow/enum';
import { Message, type RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import type { CompressionType } from 'apache-arrow/fb/compression-type';

export type Polars = typeof import('nodejs-polars');
export type PolarsDataFrame = import('nodejs-polars').DataFrame;

let polars: Polars | undefined;

/** nodejs-polars, loaded once (a CommonJS native module: required, not imported). */
export function loadPolars(): Polars {
  if (polars === undefined) {
    try {
      polars = createRequire(import.meta.url)('nodejs-polars') as Polars;
    } catch (cause) {
      throw new Error(
        'nodejs-polars did not load. On Node 20 npm skips its native package (it declares Node >= 22): ' +
          `install nodejs-polars-${process.platform}-${process.arch}* @0.25.2 explicitly (linux-x64-gnu is a devDependency).`,
        { cause },
      );
    }
  }
  return polars;
}

/** A Node Buffer over the same bytes (polars' readIPCStream takes a Buffer, not a Uint8Array). */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A plain Uint8Array over the same bytes. */
export function asBytes(buffer: Uint8Array): Uint8Array {
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

// ---------------------------------------------------------------------------
// A deterministic mixed-type table
// ---------------------------------------------------------------------------

/** mulberry32: a small seeded PRNG so every run builds the same table. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function bitmap(valid: readonly boolean[]): { nullBitmap: Uint8Array; nullCount: number } {
  const nullBitmap = new Uint8Array(Math.ceil(valid.length / 8));
  let nullCount = 0;
  valid.forEach((v, i) => {
    if (v) nullBitmap[i >>> 3]! |= 1 << (i & 7);
    else nullCount++;
  });
  return { nullBitmap, nullCount };
}

function fixedColumn<T extends DataType>(type: T, data: ArrayLike<unknown> & ArrayBufferView, valid?: readonly boolean[]): Vector<T> {
  const length = valid?.length ?? (data as unknown as { length: number }).length;
  const nulls = valid === undefined ? { nullCount: 0 } : bitmap(valid);
  return new Vector([makeData({ type, length, data, ...nulls } as never) as Data<T>]);
}

function stringColumn(type: Utf8 | LargeUtf8, values: readonly (string | null)[]): Vector {
  const encoder = new TextEncoder();
  const encoded = values.map((s) => (s === null ? new Uint8Array(0) : encoder.encode(s)));
  const total = encoded.reduce((n, b) => n + b.byteLength, 0);
  const data = new Uint8Array(total);
  const offsets = type instanceof LargeUtf8 ? new BigInt64Array(values.length + 1) : new Int32Array(values.length + 1);
  let at = 0;
  encoded.forEach((b, i) => {
    data.set(b, at);
    at += b.byteLength;
    if (offsets instanceof BigInt64Array) offsets[i + 1] = BigInt(at);
    else offsets[i + 1] = at;
  });
  const nulls = bitmap(values.map((v) => v !== null));
  return new Vector([makeData({ type, length: values.length, valueOffsets: offsets, data, ...nulls } as never) as Data]);
}

/** Two's complement 128-bit little-endian words, as Arrow stores Decimal128. */
function decimalWords(values: readonly bigint[]): Uint32Array {
  const words = new Uint32Array(values.length * 4);
  values.forEach((v, i) => {
    let x = BigInt.asUintN(128, v);
    for (let w = 0; w < 4; w++) {
      words[i * 4 + w] = Number(x & 0xffffffffn);
      x >>= 32n;
    }
  });
  return words;
}

export const DECIMAL_SCALE = 2;
export const MIXED_COLUMNS = ['i64', 'f64', 's', 'ls', 'b', 'i32', 'd', 'ts', 'dec'] as const;

/**
 * Columns: i64 (Int64, unique, > 2^53 for some rows), f64 (Float64), s (Utf8 with nulls,
 * some empty), ls (LargeUtf8, some multi-byte UTF-8), b (Bool), i32 (Int32 with nulls),
 * d (Date32 days, with nulls), ts (Timestamp[us], with nulls), dec (Decimal128(30, 2), with nulls).
 */
export function mixedTable(rows: number, seed = 1): Table {
  const random = prng(seed);
  const i64 = new BigInt64Array(rows);
  const f64 = new Float64Array(rows);
  const s: (string | null)[] = [];
  const ls: (string | null)[] = [];
  const b: boolean[] = [];
  const i32 = new Int32Array(rows);
  const i32Valid: boolean[] = [];
  const d = new Int32Array(rows);
  const dValid: boolean[] = [];
  const ts = new BigInt64Array(rows);
  const tsValid: boolean[] = [];
  const dec: bigint[] = [];
  const decValid: boolean[] = [];
  for (let i = 0; i < rows; i++) {
    i64[i] = (BigInt(i) * 1_000_000_007n) ^ (i % 3 === 0 ? -(1n << 60n) : 0n); // exact only as bigint
    f64[i] = i % 11 === 0 ? -0.5 * i : random() * 1e6 - 5e5;
    s.push(i % 7 === 3 ? null : i % 13 === 0 ? '' : `name-${Math.floor(random() * 1000)}`);
    ls.push(i % 5 === 0 ? `große straße ${i} ✓` : `large-${i}-${'x'.repeat(i % 17)}`);
    b.push(random() < 0.4);
    i32[i] = Math.floor(random() * 2 ** 32) - 2 ** 31;
    i32Valid.push(i % 4 !== 1);
    d[i] = Math.floor(random() * 40_000) - 10_000; // 1942 .. 2079
    dValid.push(i % 9 !== 2);
    ts[i] = 1_700_000_000_000_000n + BigInt(Math.floor(random() * 1e12)) * 7n + BigInt(i % 1000); // microseconds
    tsValid.push(i % 10 !== 5);
    dec.push((BigInt(Math.floor(random() * 2 ** 40)) - (1n << 39n)) * (i % 2 === 0 ? 1n : 1_000_000_000_000n) - BigInt(i % 3));
    decValid.push(i % 6 !== 4);
  }
  return new Table({
    i64: fixedColumn(new Int64(), i64),
    f64: fixedColumn(new Float64(), f64),
    s: stringColumn(new Utf8(), s),
    ls: stringColumn(new LargeUtf8(), ls),
    b: boolColumn(b),
    i32: fixedColumn(new Int32(), i32, i32Valid),
    d: fixedColumn(new DateDay(), d, dValid),
    ts: fixedColumn(new TimestampMicrosecond(), ts, tsValid),
    dec: fixedColumn(new Decimal(DECIMAL_SCALE, 30, 128), decimalWords(dec), decValid),
  });
}

/**
 * Columns whose buffers are degenerate: a Utf8 column of nulls only (empty data buffer),
 * one of empty strings only (non-empty offsets, empty data), Int32 and Bool columns of
 * nulls only, and a Null-type column (no buffers at all).
 */
export function degenerateTable(rows: number): Table {
  const noneValid = new Uint8Array(Math.ceil(rows / 8));
  return new Table({
    k: fixedColumn(new Int32(), Int32Array.from({ length: rows }, (_, i) => i)),
    null_s: new Vector([makeData({ type: new Utf8(), length: rows, nullCount: rows, nullBitmap: noneValid, valueOffsets: new Int32Array(rows + 1), data: new Uint8Array(0) })]),
    empty_s: new Vector([makeData({ type: new Utf8(), length: rows, nullCount: 0, valueOffsets: new Int32Array(rows + 1), data: new Uint8Array(0) })]),
    null_i: new Vector([makeData({ type: new Int32(), length: rows, nullCount: rows, nullBitmap: noneValid, data: new Int32Array(rows) })]),
    null_b: new Vector([makeData({ type: new Bool(), length: rows, nullCount: rows, nullBitmap: noneValid, data: new Uint8Array(noneValid.byteLength) })]),
    nul: new Vector([makeData({ type: new Null(), length: rows, nullCount: rows })]),
  });
}

function boolColumn(values: readonly boolean[]): Vector {
  const bits = new Uint8Array(Math.ceil(values.length / 8));
  values.forEach((v, i) => {
    if (v) bits[i >>> 3]! |= 1 << (i & 7);
  });
  return new Vector([makeData({ type: new Bool(), length: values.length, data: bits, nullCount: 0 })]);
}

// ---------------------------------------------------------------------------
// One comparable representation of a cell
// ---------------------------------------------------------------------------

/** A cell as compared: int64, timestamps and decimals as exact strings, dates as days. */
export type Cell = string | number | boolean | null;
export type Row = Cell[];

/** Formats an unscaled decimal as polars' cast to Utf8 does: "-0.05", "123.40" (scale digits always shown). */
export function formatDecimal(unscaled: bigint, scale: number): string {
  const negative = unscaled < 0n;
  const digits = (negative ? -unscaled : unscaled).toString().padStart(scale + 1, '0');
  const text = scale === 0 ? digits : `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
  return negative ? `-${text}` : text;
}

function cellOf(data: Data, vector: Vector, i: number): Cell {
  if (!data.getValid(i)) return null;
  const type = data.type;
  switch (type.typeId) {
    case Type.Null:
      return null;
    case Type.Int:
      return (type as Int32 | Int64).bitWidth === 64 ? String((data.values as BigInt64Array)[i]) : Number(vector.get(i));
    case Type.Float:
      return vector.get(i) as number;
    case Type.Utf8:
    case Type.LargeUtf8:
      return vector.get(i) as string;
    case Type.Bool:
      return vector.get(i) as boolean;
    case Type.Date:
      // Date32 stores days; arrow-js returns milliseconds
      return (type as DateDay).unit === DateUnit.DAY ? (data.values as Int32Array)[i]! : Number(vector.get(i)) / 86_400_000;
    case Type.Timestamp:
      return String((data.values as BigInt64Array)[i]); // raw value in the type's unit
    case Type.Decimal: {
      const words = data.values as Uint32Array;
      let x = 0n;
      for (let w = 3; w >= 0; w--) x = (x << 32n) | BigInt(words[i * 4 + w]!);
      return formatDecimal(BigInt.asIntN(128, x), (type as Decimal).scale);
    }
    default:
      throw new Error(`no comparable representation for ${String(type)}`);
  }
}

/** The rows of arrow-js record batches, in order, as comparable cells. */
export function arrowRows(batches: Iterable<RecordBatch>): Row[] {
  const rows: Row[] = [];
  for (const batch of batches) {
    const columns = batch.data.children.map((data) => ({ data, vector: new Vector([data]) }));
    for (let i = 0; i < batch.numRows; i++) rows.push(columns.map(({ data, vector }) => cellOf(data, vector, i)));
  }
  return rows;
}

/** The rows of a polars DataFrame, in order, as comparable cells (exact types cast to strings inside polars). */
export function polarsRows(pl: Polars, df: PolarsDataFrame): Row[] {
  const exprs = df.columns.map((name) => {
    const variant = (df.schema[name] as { variant?: string } | undefined)?.variant;
    const column = pl.col(name);
    switch (variant) {
      case 'Int64':
      case 'UInt64':
      case 'Decimal':
        return column.cast(pl.Utf8);
      case 'Datetime':
        return column.cast(pl.Int64).cast(pl.Utf8);
      case 'Date':
        return column.cast(pl.Int32);
      default:
        return column;
    }
  });
  // column-wise toArray() and a transpose: several times faster than DataFrame.rows()
  const columns = df.select(...exprs).getColumns().map((series) => Array.from(series.toArray() as ArrayLike<Cell>));
  return Array.from({ length: df.height }, (_, i) => columns.map((column) => column[i]!));
}

/** One row as a string that keeps -0 and NaN apart from 0 and null. */
export function rowKey(row: Row): string {
  return JSON.stringify(row, (_, v: unknown) => (typeof v === 'number' && (Object.is(v, -0) || Number.isNaN(v)) ? `number:${String(Object.is(v, -0) ? '-0' : v)}` : v));
}

/**
 * The first index at which two row lists differ (by rowKey), or -1 when they are equal.
 * Deep-equality matchers are slow on thousands of rows; this is not, and the caller
 * then compares just the first differing row with a matcher for a readable diff.
 */
export function firstDifference(actual: readonly Row[], expected: readonly Row[]): number {
  const n = Math.max(actual.length, expected.length);
  for (let i = 0; i < n; i++) {
    const a = actual[i];
    const e = expected[i];
    if (a === undefined || e === undefined || rowKey(a) !== rowKey(e)) return i;
  }
  return -1;
}

/** The polars dtype names of a DataFrame, in column order. */
export function polarsTypes(df: PolarsDataFrame): string[] {
  return df.columns.map((name) => String(df.schema[name]));
}

// ---------------------------------------------------------------------------
// Inspecting a stream written by someone else
// ---------------------------------------------------------------------------

interface StreamMessage {
  headerType: MessageHeader;
  compression: CompressionType | null;
  /** the whole encapsulated message: prefix, metadata, body */
  bytes: Uint8Array;
}

/** The encapsulated messages of an IPC stream, up to its end-of-stream marker (not included). */
export function streamMessages(stream: Uint8Array): StreamMessage[] {
  const view = new DataView(stream.buffer, stream.byteOffset, stream.byteLength);
  const out: StreamMessage[] = [];
  let position = 0;
  while (position + 8 <= stream.byteLength) {
    let size = view.getInt32(position, true);
    let header = 4;
    if (size === -1) {
      size = view.getInt32(position + 4, true);
      header = 8;
    }
    if (size === 0) break;
    const message = Message.decode(stream.subarray(position + header, position + header + size));
    const end = position + header + size + Number(message.bodyLength);
    const compression = message.headerType === MessageHeader.RecordBatch ? ((message.header() as RecordBatchHeader).compression?.type ?? null) : null;
    out.push({ headerType: message.headerType, compression, bytes: stream.subarray(position, end) });
    position = end;
  }
  return out;
}

/** The `BodyCompression` codec of every record-batch message of an IPC stream (null: uncompressed). */
export function recordBatchCompressions(stream: Uint8Array): (CompressionType | null)[] {
  return streamMessages(stream)
    .filter((m) => m.headerType === MessageHeader.RecordBatch)
    .map((m) => m.compression);
}

/**
 * One stream made of the first stream's schema and the record batches of all of them,
 * byte for byte as their writer encoded them (polars writes a DataFrame as one batch).
 */
export function spliceStreams(streams: readonly Uint8Array[]): Uint8Array {
  const first = streamMessages(streams[0]!);
  const parts = [first[0]!.bytes];
  for (const stream of streams) {
    for (const m of streamMessages(stream)) if (m.headerType === MessageHeader.RecordBatch) parts.push(m.bytes);
  }
  parts.push(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}
