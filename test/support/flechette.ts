/**
 * Helpers for reading partitions with flechette (@uwdata/flechette), an Arrow IPC decoder
 * written apart from arrow-js: its codecs, one canonical line per row, and input values kept
 * within what it decodes.
 */
import { DataType, DateUnit, IntervalUnit, type Data } from 'apache-arrow';
import { CompressionType, setCompressionCodec, type Table } from '@uwdata/flechette';
import { compressFrameSync, decompressFrameSync } from 'lz4-napi';
import * as zstd from 'zstd-napi';
import { asBuffer, asBytes } from './polars.js';

/** exact values: 64-bit integers, timestamps and decimals as bigints, maps as Maps */
export const DECODE = { useBigInt: true, useBigIntTimestamp: true, useDecimalInt: true, useMap: true } as const;

let registered = false;

/**
 * Teaches flechette LZ4_FRAME and ZSTD. The codecs' own libraries decode the bytes; flechette
 * reads the length prefixes and the rest, and each prefix must be its buffer's decoded length.
 * Plain Uint8Arrays, not Node Buffers, go back to flechette: its binary values would be Buffers otherwise.
 */
export function registerFlechetteCodecs(): void {
  if (registered) return;
  registered = true;
  setCompressionCodec(CompressionType.LZ4_FRAME, {
    encode: (bytes) => asBytes(compressFrameSync(asBuffer(bytes))),
    decode: (bytes, length) => ofLength(decompressFrameSync(asBuffer(bytes)), length),
  });
  setCompressionCodec(CompressionType.ZSTD, { encode: (bytes) => asBytes(zstd.compress(bytes)), decode: (bytes, length) => ofLength(zstd.decompress(bytes), length) });
}

/** A buffer's length prefix must be its decoded length, as Arrow C++ and pyarrow require (arrow-js 21.2.0 writes another). */
function ofLength(decoded: Uint8Array, prefix: number): Uint8Array {
  if (decoded.byteLength !== prefix) throw new Error(`a compressed buffer's length prefix says ${prefix} bytes, it decodes to ${decoded.byteLength}`);
  return asBytes(decoded);
}

/** One canonical line per row: every value as JSON, bigints as "123n", typed arrays (bytes, lists) as arrays, maps as entry lists. */
export function rowsOf(table: Table, without: string | null = null): string[] {
  // by position: a field stored without a name (arrow-js's writer for "") has the name null here
  const columns = table.schema.fields.flatMap((field, i) => (without !== null && field.name === without ? [] : [table.getChildAt(i)]));
  return Array.from({ length: table.numRows }, (_, i) => JSON.stringify(columns.map((column) => column.at(i)), canonical));
}

function canonical(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return `${value}n`;
  if (value instanceof Map) return { map: [...value.entries()] };
  // (flechette gives a list of non-null values as a typed array, and as an array when the child has a validity bitmap: both are valid)
  if (ArrayBuffer.isView(value)) return Array.from(value as unknown as ArrayLike<number | bigint>, (v) => (typeof v === 'bigint' ? `${v}n` : v));
  return value;
}

/**
 * flechette gives dates in milliseconds and a month-day-nano interval's nanoseconds as JS
 * numbers, and refuses a value past 2^53: such values (random 64-bit ones, at any depth, in
 * dictionaries too) get their top 16 bits cleared, in place.
 */
export function withinNumbers(data: Data): Data {
  const { type } = data;
  const wide = (DataType.isDate(type) && type.unit === DateUnit.MILLISECOND) || (DataType.isInterval(type) && type.unit === IntervalUnit.MONTH_DAY_NANO);
  if (wide && data.values !== undefined) {
    const bytes = new Uint8Array(data.values.buffer, data.values.byteOffset, data.values.byteLength);
    const stride = DataType.isDate(type) ? 8 : 16;
    // the int64 is the slot's last 8 bytes (a date's only ones, an interval's nanoseconds), little-endian: its top 2 bytes last
    for (let slot = 0; slot + stride <= bytes.length; slot += stride) bytes.fill(0, slot + stride - 2, slot + stride);
  }
  for (const child of data.children) withinNumbers(child);
  for (const chunk of data.dictionary?.data ?? []) withinNumbers(chunk);
  return data;
}
