/**
 * The naive object-row shuffle: what a Node job runner does without this
 * library, written plainly but not carelessly, as the third shuffle of the
 * benchmark.
 *
 * Write: every row becomes a JS object (arrow-js `batch.get(i).toJSON()`;
 * nested values as plain arrays, objects and Maps),
 * is hashed on its key (a 32-bit mix of the key's value) and pushed onto
 * its partition's array; at the end each partition's array is serialized
 * with `v8.serialize` (which keeps bigints, typed arrays and dates, unlike
 * JSON), compressed with the same codec as the other shuffles (lz4-napi's
 * async frame compressor, zstd-napi at level 1, or none), and appended to
 * one data file; an index file of Spark's layout ((P + 1) big-endian int64
 * offsets) tells where each partition lies.
 *
 * Read: a partition's bytes are decompressed, `v8.deserialize`d back into
 * the row objects, and turned into a RecordBatch of the written schema, a
 * column at a time with arrow-js's `vectorFromArray` (its builders).
 *
 * It holds every row in memory until the end (there is no memory limit to
 * respect), so the benchmark runs it on fewer rows and reports rows/s.
 */
import { open, readFile, writeFile } from 'node:fs/promises';
import { deserialize, serialize } from 'node:v8';
import { compressFrame, decompressFrame } from 'lz4-napi';
import * as zstd from 'zstd-napi';
import { makeData, RecordBatch, Struct, Type, vectorFromArray, type Data, type DataType, type Field, type Schema } from 'apache-arrow';
import type { CodecName } from '../src/index.js';

export interface ObjectRowOptions {
  numPartitions: number;
  /** the column whose value picks the partition */
  key: string;
  codec: CodecName;
  /** writes `<prefix>.data` and `<prefix>.index` */
  outputPrefix: string;
  /** called once every row is grouped, before serializing: when the shuffle holds the most (the benchmark samples memory there) */
  onGrouped?: () => void;
}

export interface ObjectRowResult {
  rows: number;
  bytesWritten: number;
  partitionLengths: number[];
  partitionRows: number[];
}

type Row = Record<string, unknown>;

/** fmix32 of MurmurHash3: spreads a 32-bit value over all bits. */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** A partition for a key value of any type the shapes use (integers, bigints, strings). */
export function partitionOfKey(value: unknown, numPartitions: number): number {
  let h: number;
  if (typeof value === 'bigint') h = Number(BigInt.asUintN(32, value)) ^ Number(BigInt.asUintN(32, value >> 32n));
  else if (typeof value === 'number') h = value | 0;
  else {
    h = 0x811c9dc5;
    for (const ch of String(value)) h = Math.imul(h ^ ch.codePointAt(0)!, 0x01000193);
  }
  return mix(h) % numPartitions;
}

async function compress(bytes: Uint8Array, codec: CodecName): Promise<Uint8Array> {
  if (codec === 'lz4') return compressFrame(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  if (codec === 'zstd') return zstd.compress(bytes, { compressionLevel: 1 });
  return bytes;
}

async function decompress(bytes: Uint8Array, codec: CodecName): Promise<Uint8Array> {
  if (codec === 'lz4') return decompressFrame(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  if (codec === 'zstd') return zstd.decompress(bytes);
  return bytes;
}

function isNested(type: DataType): boolean {
  return type.typeId === Type.List || type.typeId === Type.LargeList || type.typeId === Type.FixedSizeList || type.typeId === Type.Struct || type.typeId === Type.Map;
}

/**
 * A nested value as plain JS (what a job runner's rows hold, and what
 * v8.serialize keeps): lists as arrays, structs as objects, maps as Maps;
 * arrow-js's builders take the same back.
 */
function plain(value: unknown, type: DataType): unknown {
  if (value === null || value === undefined) return null;
  switch (type.typeId) {
    case Type.List:
    case Type.LargeList:
    case Type.FixedSizeList: {
      const item = type.children[0]!.type;
      return Array.from(value as Iterable<unknown>, (v) => plain(v, item));
    }
    case Type.Struct: {
      const struct = value as Record<string, unknown>;
      return Object.fromEntries(type.children.map((f) => [f.name, plain(struct[f.name], f.type)]));
    }
    case Type.Map: {
      const [keyField, valueField] = type.children[0]!.type.children as [Field, Field];
      const out = new Map<unknown, unknown>();
      for (const [k, v] of value as Iterable<[unknown, unknown]>) out.set(plain(k, keyField.type), plain(v, valueField.type));
      return out;
    }
    default:
      return value;
  }
}

/** Shuffles `batches` as JS row objects into `<prefix>.data` and `<prefix>.index`. */
export async function writeObjectRows(batches: Iterable<RecordBatch>, options: ObjectRowOptions): Promise<ObjectRowResult> {
  const { numPartitions, key } = options;
  const partitions: Row[][] = Array.from({ length: numPartitions }, () => []);
  let rows = 0;
  for (const batch of batches) {
    const fields = batch.schema.fields;
    const nested = fields.some((f) => isNested(f.type));
    for (let i = 0; i < batch.numRows; i++) {
      let row = batch.get(i)!.toJSON() as Row;
      if (nested) row = Object.fromEntries(fields.map((f) => [f.name, plain(row[f.name], f.type)]));
      partitions[partitionOfKey(row[key], numPartitions)]!.push(row);
    }
    rows += batch.numRows;
  }
  options.onGrouped?.();
  const handle = await open(`${options.outputPrefix}.data`, 'w');
  const partitionLengths: number[] = [];
  try {
    let position = 0;
    for (const partition of partitions) {
      if (partition.length === 0) {
        partitionLengths.push(0);
        continue;
      }
      const bytes = await compress(serialize(partition), options.codec);
      await handle.write(bytes, 0, bytes.byteLength, position);
      position += bytes.byteLength;
      partitionLengths.push(bytes.byteLength);
    }
  } finally {
    await handle.close();
  }
  const index = Buffer.alloc((numPartitions + 1) * 8);
  let offset = 0;
  partitionLengths.forEach((length, p) => index.writeBigInt64BE(BigInt((offset += length)), (p + 1) * 8));
  await writeFile(`${options.outputPrefix}.index`, index);
  return { rows, bytesWritten: offset, partitionLengths, partitionRows: partitions.map((p) => p.length) };
}

/** Reads every partition back, as one RecordBatch of `schema` per non-empty partition. */
export async function* readObjectRows(prefix: string, schema: Schema, codec: CodecName): AsyncGenerator<RecordBatch> {
  const index = await readFile(`${prefix}.index`);
  const handle = await open(`${prefix}.data`, 'r');
  try {
    for (let p = 0; p + 1 < index.byteLength / 8; p++) {
      const start = Number(index.readBigInt64BE(p * 8));
      const end = Number(index.readBigInt64BE((p + 1) * 8));
      if (end === start) continue;
      const stored = Buffer.alloc(end - start);
      await handle.read(stored, 0, stored.byteLength, start);
      const rows = deserialize(await decompress(stored, codec)) as Row[];
      const children: Data[] = schema.fields.map((field) => vectorFromArray(rows.map((row) => row[field.name]), field.type).data[0]!);
      yield new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows.length, children }));
    }
  } finally {
    await handle.close();
  }
}
