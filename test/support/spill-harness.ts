/**
 * Helpers for the spill tests (test/spill.test.ts): input batches, a writer run
 * that samples its memory pool after every write, reading every partition
 * back as canonical row strings, what the reference partitioner expects, a
 * look at which files a directory holds, and a small tmpfs for full-disk cases.
 */
import { execFileSync } from 'node:child_process';
import { crc32c } from '@node-rs/crc32';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Binary,
  Bool,
  Decimal,
  FixedSizeBinary,
  Float64,
  Int64,
  LargeUtf8,
  Utf8,
  type RecordBatch,
  type Schema,
} from 'apache-arrow';
import { narrowBatch } from '../../src/cli/demo-data.js';
import { ShuffleError } from '../../src/errors.js';
import type { MemoryPool } from '../../src/memory/memory-pool.js';
import { ShuffleReader } from '../../src/reader/shuffle-reader.js';
import type { Partitioning } from '../../src/writer/partitioner.js';
import { createShuffleWriter, type WriterKind } from '../../src/writer-kind.js';
import type { ShuffleWriteResult, ShuffleWriterOptions } from '../../src/writer/writer-options.js';
import { batchOf, buildColumn, NO_BITMAP, schemaOf, type ColumnSpec, type ValiditySpec } from './columns.js';
import { Rng } from './random.js';
import { ReferencePartitioner } from './reference-partitioner.js';
import { rowsOf } from './rows.js';

export const MiB = 1024 * 1024;
export const KiB = 1024;

/** `count` narrow batches (int64 key, float64, utf8 ~20 B, int32 with nulls) of `rows` rows, seeds seed, seed+1, ... */
export function narrowBatches(count: number, rows: number, seed: number): RecordBatch[] {
  return Array.from({ length: count }, (_, i) => narrowBatch(rows, seed + i));
}

/**
 * A mixed schema: an int64 key without nulls, strings of very different
 * lengths (empty to 600 bytes) with nulls, binary with many nulls, booleans,
 * decimals, doubles, fixed-size binary, large utf8.
 */
const MIXED_COLUMNS: readonly ColumnSpec[] = [
  { name: 'k', type: new Int64(), nullable: false },
  { name: 's', type: new Utf8(), nullable: true },
  { name: 'bin', type: new Binary(), nullable: true },
  { name: 'flag', type: new Bool(), nullable: true },
  { name: 'dec', type: new Decimal(10, 38, 128), nullable: true },
  { name: 'x', type: new Float64(), nullable: true },
  { name: 'uuid', type: new FixedSizeBinary(16), nullable: true },
  { name: 'big', type: new LargeUtf8(), nullable: true },
];
const MIXED_VALIDITY: readonly ValiditySpec[] = [
  NO_BITMAP,
  { bitmap: true, nullRate: 0.2 },
  { bitmap: true, nullRate: 0.6 },
  { bitmap: true, nullRate: 0.1 },
  { bitmap: true, nullRate: 0.05 },
  { bitmap: true, nullRate: 0 },
  { bitmap: true, nullRate: 0.3 },
  { bitmap: true, nullRate: 0.5 },
];
export const MIXED_SCHEMA: Schema = schemaOf(MIXED_COLUMNS);

export function mixedBatches(count: number, rows: number, seed: number): RecordBatch[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, () => {
    const children = MIXED_COLUMNS.map((c, i) => buildColumn(c.type, rows, MIXED_VALIDITY[i]!, rng));
    return batchOf(MIXED_SCHEMA, children, rows);
  });
}

/** Per partition, the rows the reference partitioner sends there, in input order (all columns are output columns). */
export function expectedPartitions(batches: readonly RecordBatch[], partitioning: Partitioning, numPartitions: number, mapId = 0): string[][] {
  const first = batches[0];
  if (first === undefined) throw new Error('expectedPartitions needs a batch');
  const reference = new ReferencePartitioner(partitioning, first.schema, numPartitions, mapId);
  const columns = reference.outputColumns(first.schema);
  const out: string[][] = Array.from({ length: numPartitions }, () => []);
  for (const batch of batches) {
    const rows = rowsOf(batch, columns);
    reference.partitionsOf(batch).forEach((p, i) => out[p]!.push(rows[i]!));
  }
  return out;
}

/** Per partition, the rows ShuffleReader yields, in order; also the largest batch seen. */
export async function readPartitions(prefix: string): Promise<{ rows: string[][]; largestBatch: number }> {
  const reader = await ShuffleReader.open(prefix);
  try {
    const rows: string[][] = [];
    let largestBatch = 0;
    for (let p = 0; p < reader.numPartitions; p++) {
      const partition: string[] = [];
      for await (const batch of reader.readPartition(p)) {
        for (const row of rowsOf(batch)) partition.push(row);
        largestBatch = Math.max(largestBatch, batch.numRows);
      }
      rows.push(partition);
    }
    return { rows, largestBatch };
  } finally {
    await reader.close();
  }
}

/** One partition's rows, summarized: how many, and a CRC32C over their canonical bytes in order. */
export interface PartitionFingerprint {
  rows: number;
  crc: number;
}

const bytesOfView = (v: ArrayBufferView) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

/**
 * Per partition, a fingerprint of the rows of a shuffle output of the narrow
 * schema (src/cli/demo-data.ts), in the order the reader yields them: equal
 * fingerprints mean the same rows in the same order, whatever the batch
 * boundaries. Much faster than canonical row strings for hundreds of thousands
 * of rows: per batch it hashes the key and amount values, the string lengths
 * and bytes, and the quantities with nulls made canonical (value 0, flag 0).
 */
export async function narrowFingerprints(prefix: string): Promise<PartitionFingerprint[]> {
  const reader = await ShuffleReader.open(prefix);
  try {
    const out: PartitionFingerprint[] = [];
    for (let p = 0; p < reader.numPartitions; p++) {
      let rows = 0;
      // one running CRC per column stream, so that batch boundaries do not matter
      const crcs = new Uint32Array(5);
      for await (const batch of reader.readPartition(p)) {
        const [key, amount, label, quantity] = batch.data.children;
        if (key === undefined || amount === undefined || label === undefined || quantity === undefined) throw new Error('not the narrow schema');
        const n = batch.numRows;
        crcs[0] = crc32c(bytesOfView((key.values as BigInt64Array).subarray(0, n)), crcs[0]);
        crcs[1] = crc32c(bytesOfView((amount.values as Float64Array).subarray(0, n)), crcs[1]);
        const offsets = label.valueOffsets as Int32Array;
        const lengths = new Int32Array(n);
        for (let i = 0; i < n; i++) lengths[i] = offsets[i + 1]! - offsets[i]!;
        crcs[2] = crc32c(bytesOfView(lengths), crcs[2]);
        crcs[3] = crc32c((label.values as Uint8Array).subarray(offsets[0]!, offsets[n]!), crcs[3]);
        const values = quantity.values as Int32Array;
        const bitmap = quantity.nullCount > 0 ? (quantity.nullBitmap as Uint8Array | null) : null;
        const canonical = new Int32Array(2 * n);
        for (let i = 0; i < n; i++) {
          const bit = quantity.offset + i;
          const valid = bitmap === null || bitmap.length === 0 || ((bitmap[bit >>> 3]! >>> (bit & 7)) & 1) === 1;
          canonical[2 * i] = valid ? 1 : 0;
          canonical[2 * i + 1] = valid ? values[i]! : 0;
        }
        crcs[4] = crc32c(bytesOfView(canonical), crcs[4]);
        rows += n;
      }
      const crc = crc32c(bytesOfView(crcs));
      out.push({ rows, crc: crc >>> 0 });
    }
    return out;
  } finally {
    await reader.close();
  }
}

/** The first partition whose fingerprint differs, described briefly; null when all are equal. */
export function fingerprintsDiffer(actual: readonly PartitionFingerprint[], expected: readonly PartitionFingerprint[]): string | null {
  if (actual.length !== expected.length) return `${actual.length} partitions, expected ${expected.length}`;
  const differing = expected.map((e, p) => (actual[p]!.rows !== e.rows || actual[p]!.crc !== e.crc ? p : -1)).filter((p) => p >= 0);
  if (differing.length === 0) return null;
  const first = differing[0]!;
  return `${differing.length} partition(s) differ, first ${first}: ${actual[first]!.rows} rows (crc ${actual[first]!.crc}), expected ${expected[first]!.rows} rows (crc ${expected[first]!.crc})`;
}

/** The first partition whose rows differ, described briefly; null when all are equal (same rows, same order). */
export function partitionsDiffer(actual: readonly string[][], expected: readonly string[][]): string | null {
  if (actual.length !== expected.length) return `${actual.length} partitions, expected ${expected.length}`;
  for (let p = 0; p < expected.length; p++) {
    const a = actual[p]!;
    const e = expected[p]!;
    const n = Math.min(a.length, e.length);
    for (let i = 0; i < n; i++) {
      if (a[i] !== e[i]) return `partition ${p}: first difference at row ${i} of ${e.length}`;
    }
    if (a.length !== e.length) return `partition ${p}: ${a.length} rows, expected ${e.length}`;
  }
  return null;
}

export function totalRows(partitions: readonly string[][]): number {
  return partitions.reduce((sum, rows) => sum + rows.length, 0);
}

export interface SampledRun {
  result: ShuffleWriteResult;
  /** pool.reserved right after every write() and after finish() */
  reservedAfterWrite: number[];
}

/** Creates a writer of kind `writer` (default the columnar one), writes every batch (sampling the pool after each), finishes. */
export async function writeSampled(options: ShuffleWriterOptions & { memoryPool: MemoryPool }, batches: readonly RecordBatch[], writerKind: WriterKind = 'hash'): Promise<SampledRun> {
  const writer = await createShuffleWriter(writerKind, options);
  const reservedAfterWrite: number[] = [];
  for (const batch of batches) {
    await writer.write(batch);
    reservedAfterWrite.push(options.memoryPool.reserved);
  }
  const result = await writer.finish();
  reservedAfterWrite.push(options.memoryPool.reserved);
  return { result, reservedAfterWrite };
}

/** A promise's outcome without throwing. */
export async function outcome<T>(promise: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}

/** The error a promise rejects with; fails when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  const settled = await outcome(promise);
  if (settled.ok) throw new Error('expected the promise to reject, but it resolved');
  return settled.error;
}

/** An error and its chain of causes, one line. */
export function describeError(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    if (e instanceof ShuffleError) parts.push(`${e.name} ${e.code}: ${e.message}`);
    else parts.push(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join(' <- caused by: ');
}

/** Entries of a directory, sorted; [] when it does not exist. */
export async function entries(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/** Files named like a finished shuffle output (`<prefix>.data`, `.index`, `.checksum.CRC32C`). */
export function finalOutputs(files: readonly string[]): string[] {
  return files.filter((f) => /\.(data|index|checksum\.CRC32C)$/.test(f));
}

/** Temporary files the writer makes (data/index/checksum `.tmp` files and spill files). */
export function temporaries(files: readonly string[]): string[] {
  return files.filter((f) => f.endsWith('.tmp') || f.includes('spill'));
}

/** A small tmpfs mounted on a fresh directory (needs root and CAP_SYS_ADMIN). */
export class SmallFilesystem {
  private constructor(readonly dir: string) {}

  /** Mounts a tmpfs of `bytes`, or returns why it could not. */
  static async mount(bytes: number): Promise<SmallFilesystem | { reason: string }> {
    const dir = await mkdtemp(join(tmpdir(), 'cs-small-fs-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', dir], { stdio: 'pipe' });
      return new SmallFilesystem(dir);
    } catch (error) {
      await rm(dir, { recursive: true, force: true });
      const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
      return { reason: stderr || (error instanceof Error ? error.message : String(error)) };
    }
  }

  /** Bytes in use on the file system (df). */
  usedBytes(): number {
    const line = execFileSync('df', ['-B1', '--output=used', this.dir]).toString().trim().split('\n').pop() ?? '';
    return Number(line.trim());
  }

  async unmount(): Promise<void> {
    try {
      execFileSync('umount', [this.dir], { stdio: 'pipe' });
    } finally {
      await rm(this.dir, { recursive: true, force: true });
    }
  }
}
