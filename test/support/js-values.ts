/**
 * An independent reference for "every row comes back exactly": rows as arrow-js's own
 * JavaScript values (`Vector.get`; a StructRow's and a MapRow's fields through the
 * child vectors they hold), made canonical strings, never read from buffers by the
 * project's code or by test/support/rows.ts;
 * each row's partition computed from an int64 key column with Spark's murmur3
 * (`hashLong`, seed 42, pmod) directly, not through the writer's column hashing.
 *
 * Also: the shuffle output read back partition by partition through ShuffleReader,
 * and through arrow-js's `tableFromIPC` on byte ranges that this module takes from
 * the index file itself (Spark's layout: P + 1 big-endian int64 offsets).
 *
 * arrow-js 21.2's `get` cannot decode dictionaries with 64-bit indices (Int64 or Uint64:
 * it indexes the dictionary with a BigInt and throws); those are decoded here from the
 * index and the dictionary vector instead (the only place a buffer is read).
 */
import { readFile } from 'node:fs/promises';
import { MapRow, StructRow, Type, Vector, tableFromIPC, type Data, type DataType, type RecordBatch, type Schema } from 'apache-arrow';
import { ShuffleReader } from '../../src/reader/shuffle-reader.js';
import { hashLong, pmod, SPARK_HASH_SEED } from '../../src/writer/murmur3.js';
import { createShuffleWriter, type WriterKind } from '../../src/writer-kind.js';
import type { ShuffleWriteResult } from '../../src/writer/writer-options.js';
import type { SortShuffleWriterOptions } from '../../src/sort-writer/sort-shuffle-writer.js';
import { registerArrowJsDecoders } from './shuffle-harness.js';
import { rowsOf } from './rows.js';

const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

function isWideDictionary(type: DataType): boolean {
  return type.typeId === Type.Dictionary && (type as unknown as { indices: { bitWidth: number } }).indices.bitWidth === 64;
}

/** Value j of a vector: arrow-js's `get`, except for dictionaries with 64-bit indices (decoded by hand). */
export function valueAt(vector: Vector, j: number): unknown {
  if (!isWideDictionary(vector.type)) return vector.get(j);
  let local = j;
  for (const data of vector.data as Data[]) {
    if (local < data.length) {
      if (!data.getValid(local)) return null;
      const index = (data.values as unknown as BigInt64Array | BigUint64Array)[local]!;
      const dictionary = data.dictionary as Vector;
      if (index < 0n || index >= BigInt(dictionary.length)) throw new Error(`dictionary index ${index} outside a dictionary of ${dictionary.length}`);
      return valueAt(dictionary, Number(index));
    }
    local -= data.length;
  }
  throw new Error(`row ${j} outside a vector of ${vector.length}`);
}

const vectors = new WeakMap<Data, Vector>();

/** One Vector per Data (a struct row's or map row's children are wrapped once, not once per row). */
function vectorOf(data: Data): Vector {
  let vector = vectors.get(data);
  if (vector === undefined) vectors.set(data, (vector = new Vector([data])));
  return vector;
}

/** A JavaScript value from arrow-js, as a canonical string (type tags keep e.g. 1, 1n and "1" apart). */
export function canonical(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  switch (typeof value) {
    case 'bigint':
      return `${value}n`;
    case 'number':
      return Object.is(value, -0) ? '-0' : String(value);
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return String(value);
    default:
      break;
  }
  if (value instanceof Uint8Array) {
    let s = '0x';
    for (const b of value) s += HEX[b]!;
    return s;
  }
  if (ArrayBuffer.isView(value)) return `${value.constructor.name}[${Array.from(value as unknown as ArrayLike<number | bigint>, (v) => canonical(v)).join(',')}]`;
  if (value instanceof Vector) {
    const parts: string[] = [];
    for (let j = 0; j < value.length; j++) parts.push(canonical(valueAt(value, j)));
    return `[${parts.join(',')}]`;
  }
  // a map row's and a struct row's fields are read through valueAt too (their own iterators use `get`)
  if (value instanceof MapRow) {
    const keys = (value as unknown as Record<symbol, Vector>)[Symbol.for('keys')]!;
    const values = vectorOf((value as unknown as Record<symbol, Data>)[Symbol.for('vals')]!);
    const parts: string[] = [];
    for (let j = 0; j < keys.length; j++) parts.push(`${canonical(valueAt(keys, j))}=>${canonical(valueAt(values, j))}`);
    return `map{${parts.join(',')}}`;
  }
  if (value instanceof StructRow) {
    const parent = (value as unknown as Record<symbol, Data>)[Symbol.for('parent')]!;
    const row = (value as unknown as Record<symbol, number>)[Symbol.for('rowIndex')]!;
    const fields = parent.type.children as Array<{ name: string }>;
    let s = '{';
    for (let c = 0; c < fields.length; c++) s += `${c === 0 ? '' : ','}${fields[c]!.name}:${canonical(valueAt(vectorOf(parent.children[c]!), row))}`;
    return `${s}}`;
  }
  throw new Error(`no canonical form for ${Object.prototype.toString.call(value)}`);
}

/** Every row of a batch as the canonical strings of its columns' JS values, joined by ' | '. */
export function jsRows(batch: RecordBatch): string[] {
  const columns = batch.schema.fields.map((_, c) => batch.getChildAt(c)!);
  const out: string[] = [];
  for (let i = 0; i < batch.numRows; i++) out.push(columns.map((column) => canonical(valueAt(column, i))).join(' | '));
  return out;
}

/** jsRows of every column but the first: the partition id column `pid` a test's input carries and its output does not. */
export function jsRowsWithoutPid(batch: RecordBatch): string[] {
  return jsRows(batch.selectAt(batch.schema.fields.map((_, c) => c).slice(1)));
}

/** Per partition, the input's rows (jsRowsWithoutPid) that its first column, the partition id, sends there, in input order. */
export function expectedByPid(batches: readonly RecordBatch[], numPartitions: number): string[][] {
  return expectedBy(batches, numPartitions, jsRowsWithoutPid, (batch) => {
    const pids = batch.getChildAt(0)!;
    return (i) => pids.get(i) as number;
  });
}

/** Spark's partition of an int64 key: pmod(Murmur3_x86_32.hashLong(key, 42), n). */
export function sparkPartitionOfLong(key: bigint, numPartitions: number): number {
  const lo = Number(BigInt.asUintN(32, key)) | 0;
  const hi = Number(BigInt.asUintN(32, key >> 32n)) | 0;
  return pmod(hashLong(lo, hi, SPARK_HASH_SEED), numPartitions);
}

/** How a batch's rows are made strings: `jsRows` (arrow-js values), or test/support/rows.ts's `rowsOf` (raw bytes, union type ids). */
export type RowStrings = (batch: RecordBatch) => string[];

/** Per partition, the rows of the input that hash there on the non-null int64 column `key`, in input order. */
export function expectedByLongKey(batches: readonly RecordBatch[], key: string, numPartitions: number, rowStrings: RowStrings = jsRows): string[][] {
  return expectedBy(batches, numPartitions, rowStrings, (batch) => {
    const keys = batch.getChild(key);
    if (keys === null) throw new Error(`no column ${key}`);
    return (i) => {
      const k = keys.get(i) as bigint | null;
      if (typeof k !== 'bigint') throw new Error(`key ${key} row ${i} is ${String(k)}, not an int64`);
      return sparkPartitionOfLong(k, numPartitions);
    };
  });
}

/** Per partition, the rows of the input whose partition `partitionOf(batch)(i)` gives, in input order. */
export function expectedBy(batches: readonly RecordBatch[], numPartitions: number, rowStrings: RowStrings, partitionOf: (batch: RecordBatch) => (i: number) => number): string[][] {
  const out: string[][] = Array.from({ length: numPartitions }, () => []);
  for (const batch of batches) {
    const rows = rowStrings(batch);
    const pid = partitionOf(batch);
    rows.forEach((row, i) => out[pid(i)]!.push(row));
  }
  return out;
}

/** Writes `batches` with a fresh writer of kind `writer`; the output's prefix and the writer's result. */
export async function writeAll(writer: WriterKind, options: SortShuffleWriterOptions, batches: readonly RecordBatch[]): Promise<ShuffleWriteResult> {
  const w = await createShuffleWriter(writer, options);
  for (const batch of batches) await w.write(batch);
  return w.finish();
}

/** Throws unless every column of `batch` has the type (and name) of the same column of `schema`. */
export function assertSchemaTypes(batch: RecordBatch, schema: Schema | undefined, where: string): void {
  if (schema === undefined) return;
  const got = batch.schema.fields.map((f) => `${f.name}: ${String(f.type)}`).join(', ');
  const expected = schema.fields.map((f) => `${f.name}: ${String(f.type)}`).join(', ');
  if (got !== expected) throw new Error(`${where}: schema ${got}, expected ${expected}`);
}

/** Per partition, the batches ShuffleReader yields, in order (given `schema`, each checked to have its column types). */
export async function readBatches(prefix: string, schema?: Schema): Promise<RecordBatch[][]> {
  const reader = await ShuffleReader.open(prefix);
  try {
    const out: RecordBatch[][] = [];
    for (let p = 0; p < reader.numPartitions; p++) {
      const batches: RecordBatch[] = [];
      for await (const batch of reader.readPartition(p)) {
        assertSchemaTypes(batch, schema, `ShuffleReader partition ${p}`);
        batches.push(batch);
      }
      out.push(batches);
    }
    return out;
  } finally {
    await reader.close();
  }
}

/** Per partition, the rows ShuffleReader yields, in order. */
export async function readRows(prefix: string, rowStrings: RowStrings = jsRows, schema?: Schema): Promise<string[][]> {
  return (await readBatches(prefix, schema)).map((batches) => batches.flatMap((batch) => rowStrings(batch)));
}

/** The partition byte ranges of `<prefix>.data`, from `<prefix>.index` read here (P + 1 big-endian int64 offsets). */
export async function indexRanges(prefix: string): Promise<Array<[number, number]>> {
  const index = await readFile(`${prefix}.index`);
  const view = new DataView(index.buffer, index.byteOffset, index.byteLength);
  const offsets = Array.from({ length: index.byteLength / 8 }, (_, i) => Number(view.getBigInt64(i * 8, false)));
  if (offsets[0] !== 0) throw new Error(`index starts at ${offsets[0]}`);
  return offsets.slice(1).map((end, p) => [offsets[p]!, end]);
}

/** Per partition, the batches arrow-js's tableFromIPC reads from the partition's byte range of the data file ([] when empty). */
export async function readBatchesWithArrowJs(prefix: string, schema?: Schema): Promise<RecordBatch[][]> {
  registerArrowJsDecoders();
  const data = await readFile(`${prefix}.data`);
  const ranges = await indexRanges(prefix);
  if (ranges[ranges.length - 1]![1] !== data.byteLength) throw new Error(`index ends at ${ranges[ranges.length - 1]![1]}, data file has ${data.byteLength} bytes`);
  return ranges.map(([start, end]) => {
    if (start === end) return [];
    const bytes = new Uint8Array(data.subarray(start, end)); // a fresh, 8-aligned copy
    const batches = tableFromIPC(bytes).batches;
    batches.forEach((batch) => assertSchemaTypes(batch, schema, `arrow-js tableFromIPC [${start}, ${end})`));
    return batches;
  });
}

/** Per partition, the rows arrow-js's tableFromIPC reads from the partition's byte range of the data file. */
export async function readRowsWithArrowJs(prefix: string, rowStrings: RowStrings = jsRows, schema?: Schema): Promise<string[][]> {
  return (await readBatchesWithArrowJs(prefix, schema)).map((batches) => batches.flatMap((batch) => rowStrings(batch)));
}

/** null when every partition holds exactly the expected rows in order, else the first difference, briefly. */
export function partitionDifference(actual: readonly string[][], expected: readonly string[][], what: string): string | null {
  if (actual.length !== expected.length) return `${what}: ${actual.length} partitions, expected ${expected.length}`;
  for (let p = 0; p < expected.length; p++) {
    const a = actual[p]!;
    const e = expected[p]!;
    for (let i = 0; i < Math.min(a.length, e.length); i++) {
      if (a[i] !== e[i]) return `${what}, partition ${p}, row ${i} of ${e.length}: got ${clip(a[i]!)}, expected ${clip(e[i]!)}`;
    }
    if (a.length !== e.length) return `${what}, partition ${p}: ${a.length} rows, expected ${e.length}${a.length > e.length ? `, first extra ${clip(a[e.length]!)}` : `, first missing ${clip(e[a.length]!)}`}`;
  }
  return null;
}

function clip(s: string): string {
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}

/**
 * Everything a test claims about one output, as a list of problems ([] when it holds):
 * per partition, exactly the expected rows in input order, both as arrow-js JS values
 * (`jsRows`) and as raw bytes with union type ids (`rowsOf`), through ShuffleReader
 * and — when `viaArrowJs` (the columnar writer: partitions are IPC streams) — through
 * arrow-js's tableFromIPC on the index file's byte ranges; every batch read back has
 * the input schema's column types.
 */
export async function outputProblems(
  prefix: string,
  schema: Schema,
  expectedFor: (rowStrings: RowStrings) => string[][],
  viaArrowJs: boolean,
): Promise<string[]> {
  const problems: string[] = [];
  const outputs: Array<[string, RecordBatch[][]]> = [['ShuffleReader', await readBatches(prefix, schema)]];
  if (viaArrowJs) outputs.push(['arrow-js tableFromIPC', await readBatchesWithArrowJs(prefix, schema)]);
  for (const [name, rowStrings] of [['JS values', jsRows], ['raw bytes', (b: RecordBatch) => rowsOf(b)]] as const) {
    const expected = expectedFor(rowStrings);
    for (const [how, partitions] of outputs) {
      const difference = partitionDifference(partitions.map((batches) => batches.flatMap((batch) => rowStrings(batch))), expected, `${how} (${name})`);
      if (difference !== null) problems.push(difference);
    }
  }
  return problems;
}
