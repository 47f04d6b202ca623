/**
 * Runs one shuffle end to end (write every batch, finish, read every partition back)
 * and computes what the reference says each partition must hold, so that tests only
 * have to state their claims.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decompressFrameSync } from 'lz4-napi';
import * as zstd from 'zstd-napi';
import { CompressionType, compressionRegistry, tableFromIPC, type RecordBatch, type Schema } from 'apache-arrow';
import { ShuffleReader } from '../../src/reader/shuffle-reader.js';
import type { SortShuffleWriterOptions } from '../../src/sort-writer/sort-shuffle-writer.js';
import { createShuffleWriter, type WriterKind } from '../../src/writer-kind.js';
import type { ShuffleWriteResult } from '../../src/writer/writer-options.js';
import { ReferencePartitioner } from './reference-partitioner.js';
import { rowsOf } from './rows.js';

export async function makeTempDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'cs-roundtrip-'));
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

export type WriterOptions = Omit<SortShuffleWriterOptions, 'outputPrefix'>;

export interface ShuffleOutcome {
  prefix: string;
  options: WriterOptions;
  /** The schema the writer binds: options.schema, else the first batch's. */
  schema: Schema;
  result: ShuffleWriteResult;
  /** Every input row (output columns only), in input order. */
  input: string[];
  /** Per partition: the input rows the reference partitioner sends there, in input order. */
  expected: string[][];
  /** Per partition: the rows ShuffleReader.readPartition(p) yields, in the order yielded. */
  actual: string[][];
  /** Per partition: the row counts of the batches readPartition(p) yields. */
  actualBatchRows: number[][];
}

/**
 * Writes `batches` with a fresh writer of kind `writer` (the columnar `hash` writer by
 * default, or the `sort` writer) under `dir`, then reads every partition back.
 */
export async function runShuffle(
  dir: string,
  options: WriterOptions,
  batches: readonly RecordBatch[],
  name = 'map',
  writer: WriterKind = 'hash',
  /** awaited after each write (other writers on the same pool then run in between) */
  afterWrite: () => Promise<void> = async () => undefined,
): Promise<ShuffleOutcome> {
  const prefix = join(dir, name);
  const first = batches[0];
  const schema = options.schema ?? first?.schema;
  if (schema === undefined) throw new Error('runShuffle needs a schema or at least one batch');
  const reference = new ReferencePartitioner(options.partitioning, schema, options.numPartitions, options.mapId ?? 0);
  const outputColumns = reference.outputColumns(schema);

  const input: string[] = [];
  const expected: string[][] = Array.from({ length: options.numPartitions }, () => []);
  for (const batch of batches) {
    const rows = rowsOf(batch, outputColumns);
    const pids = reference.partitionsOf(batch);
    rows.forEach((row, i) => {
      input.push(row);
      expected[pids[i]!]!.push(row);
    });
  }

  const mapWriter = await createShuffleWriter(writer, { ...options, outputPrefix: prefix });
  for (const batch of batches) {
    await mapWriter.write(batch);
    await afterWrite();
  }
  const result = await mapWriter.finish();

  const actual: string[][] = [];
  const actualBatchRows: number[][] = [];
  const reader = await ShuffleReader.open(prefix);
  try {
    for (let p = 0; p < options.numPartitions; p++) {
      const rows: string[] = [];
      const sizes: number[] = [];
      for await (const batch of reader.readPartition(p)) {
        for (const row of rowsOf(batch)) rows.push(row);
        sizes.push(batch.numRows);
      }
      actual.push(rows);
      actualBatchRows.push(sizes);
    }
  } finally {
    await reader.close();
  }
  return { prefix, options, schema, result, input, expected, actual, actualBatchRows };
}

/** Rows of all batches a reader generator yields, and the batch sizes. */
export async function collect(batches: AsyncIterable<RecordBatch>): Promise<{ rows: string[]; sizes: number[] }> {
  const rows: string[] = [];
  const sizes: number[] = [];
  for await (const batch of batches) {
    for (const row of rowsOf(batch)) rows.push(row);
    sizes.push(batch.numRows);
  }
  return { rows, sizes };
}

/**
 * null when every partition, read a message (or row block) at a time
 * (`wholePartitionBytes: 0`, as a partition too long to hold whole is read),
 * holds exactly the `expected` rows in order; else the first difference.
 */
export async function streamedDifference(prefix: string, expected: readonly (readonly string[])[]): Promise<string | null> {
  const reader = await ShuffleReader.open(prefix, { wholePartitionBytes: 0 });
  try {
    for (let p = 0; p < reader.numPartitions; p++) {
      const difference = firstDifference((await collect(reader.readPartition(p))).rows, expected[p]!, `partition ${p} read a message at a time`);
      if (difference !== null) return difference;
    }
    return null;
  } finally {
    await reader.close();
  }
}

/** Per partition, the rows arrow-js's own tableFromIPC reads from the partition's byte range ([] when empty). */
export async function readWithArrowJs(prefix: string): Promise<string[][]> {
  registerArrowJsDecoders();
  const reader = await ShuffleReader.open(prefix);
  try {
    const out: string[][] = [];
    for (let p = 0; p < reader.numPartitions; p++) {
      const bytes = await reader.partitionBytes(p);
      if (bytes.byteLength === 0) {
        out.push([]);
        continue;
      }
      const table = tableFromIPC(bytes);
      // (a stream without record batches, an output of no rows' partition 0, gives a table of one
      // batch arrow-js makes up, of no rows and no children to read)
      out.push(table.batches.filter((b) => b.numRows > 0).flatMap((b) => rowsOf(b)));
    }
    return out;
  } finally {
    await reader.close();
  }
}

let decodersRegistered = false;

/** Teaches this process's arrow-js to decode LZ4_FRAME and ZSTD bodies (decode only; tests never encode with it). */
export function registerArrowJsDecoders(): void {
  if (decodersRegistered) return;
  decodersRegistered = true;
  const copy = (b: Uint8Array) => new Uint8Array(b); // a fresh, 8-aligned buffer
  compressionRegistry.set(CompressionType.LZ4_FRAME, {
    decode: (data) => copy(decompressFrameSync(Buffer.from(data.buffer, data.byteOffset, data.byteLength))),
  });
  compressionRegistry.set(CompressionType.ZSTD, { decode: (data) => copy(zstd.decompress(data)) });
}

/** null when equal, else a short description of the first difference (never a 10 000-line diff). */
export function firstDifference(actual: readonly string[], expected: readonly string[], what = 'rows'): string | null {
  const n = Math.min(actual.length, expected.length);
  for (let i = 0; i < n; i++) {
    if (actual[i] !== expected[i]) {
      return `${what}: first difference at index ${i} of ${expected.length}: got ${clip(actual[i]!)}, expected ${clip(expected[i]!)}`;
    }
  }
  if (actual.length !== expected.length) {
    return `${what}: got ${actual.length} rows, expected ${expected.length}` +
      (actual.length > n ? ` (first extra: ${clip(actual[n]!)})` : ` (first missing: ${clip(expected[n]!)})`);
  }
  return null;
}

/** null when the two lists hold the same strings the same number of times. */
export function multisetDifference(actual: readonly string[], expected: readonly string[], what = 'rows'): string | null {
  const counts = new Map<string, number>();
  for (const row of expected) counts.set(row, (counts.get(row) ?? 0) + 1);
  for (const row of actual) {
    const c = counts.get(row);
    if (c === undefined || c === 0) return `${what}: ${clip(row)} appears more often than in the expected rows (or not at all)`;
    counts.set(row, c - 1);
  }
  for (const [row, c] of counts) if (c > 0) return `${what}: ${clip(row)} is missing ${c} time(s)`;
  return null;
}

function clip(s: string): string {
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
}

/** Every partition's `column` values in the order read, and each of its record batches' rows. */
export async function readValuesAndSizes(prefix: string, column = 'v'): Promise<{ values: number[][]; sizes: number[][] }> {
  const reader = await ShuffleReader.open(prefix);
  const values: number[][] = [];
  const sizes: number[][] = [];
  try {
    for (let p = 0; p < reader.numPartitions; p++) {
      values.push([]);
      sizes.push([]);
      for await (const batch of reader.readPartition(p)) {
        sizes[p]!.push(batch.numRows);
        const vector = batch.getChild(column)!;
        for (let i = 0; i < batch.numRows; i++) values[p]!.push(vector.get(i) as number);
      }
    }
  } finally {
    await reader.close();
  }
  return { values, sizes };
}

/** Every `k` value of the output at `prefix`, sorted (for claims about which rows an output holds). */
export async function readKeys(prefix: string): Promise<number[]> {
  const reader = await ShuffleReader.open(prefix);
  const values: number[] = [];
  try {
    for await (const batch of reader.readPartitions(0, reader.numPartitions)) for (const row of batch) values.push(row!.k as number);
  } finally {
    await reader.close();
  }
  return values.sort((a, b) => a - b);
}
