/**
 * A child-process probe for test/memory-accounting.test.ts: runs one writer (columnar or sort)
 * over narrow batches and compares the memory pool's `held` figure with the
 * process's real ArrayBuffer memory (`process.memoryUsage().arrayBuffers`) after
 * every write, each time after a full garbage collection.
 *
 * Run with `node --expose-gc --import tsx test/support/memory-probe.ts '<json config>'`
 * (the test does that); prints one JSON line (`ProbeReport`) on stdout.
 *
 * Before each sample the probe waits until the pool's figure stops moving: a
 * payload's compression runs on the libuv pool and, when it settles, the writer
 * gives back the difference between its worst-case reservation and what it keeps.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Dictionary, Int32, Int64, Table, Utf8, vectorFromArray, type RecordBatch } from 'apache-arrow';
import { narrowBatch, nestedBatch } from '../../src/cli/demo-data.js';
import type { CodecName } from '../../src/format/codec.js';
import { MemoryPool } from '../../src/memory/memory-pool.js';
import { createShuffleWriter, type AnyShuffleWriter, type WriterKind } from '../../src/writer-kind.js';
import { DictionaryTracker } from '../../src/writer/dictionary-tracker.js';
import { MATRIX_PARTITIONING, MatrixInput, type MatrixSpec } from './matrix-input.js';

export interface ProbeConfig {
  /** pool limit in bytes; null for an unbounded pool */
  limit: number | null;
  codec: CodecName;
  batches: number;
  rows: number;
  partitions: number;
  /** the input: the narrow shape (default), the nested one (list, struct, map), or a key and a dictionary column bringing new values every batch */
  shape?: 'narrow' | 'nested' | 'dictionary';
  /** which writer (default hash, the columnar one) */
  writer?: WriterKind;
  /**
   * A spill-matrix input (test/support/matrix-input.ts) instead of `batches` narrow or
   * nested batches: its sources are built before the baseline, each batch is made
   * right before its write and dropped after it (`batches` and `rows` are then ignored)
   */
  matrix?: MatrixSpec;
  /** sample after every n-th write only (default 1; thousands of tiny batches) */
  sampleEvery?: number;
}

export interface ProbeSample {
  /** 1-based batch number, or 'finish' / 'dropped'; 'dictionaries-released': inside finish(), once the columnar writer let its dictionary batches go */
  after: number | 'dictionaries-released' | 'finish' | 'dropped' | 'idle-cleared';
  /** pool.reserved at the sample */
  reserved: number;
  /** pool.held at the sample: reserved plus the recycler's idle buffers */
  held: number;
  /** arrayBuffers minus the baseline, after a full GC */
  arrayBuffers: number;
  /** arrayBuffers minus the baseline right after the write, before any GC (garbage included) */
  arrayBuffersBeforeGc: number;
}

export interface ProbeReport {
  config: ProbeConfig;
  /** arrayBuffers (absolute) after the input batches were built and a GC */
  baseline: number;
  /** bytes of the input batches' buffers (a matrix input: all batches written) */
  inputBytes: number;
  /** a matrix input: the largest batch written, in Arrow bytes */
  largestBatchBytes: number;
  /** the largest ArrayBuffer growth over the baseline at any sample (after a GC), and before the GC */
  maxArrayBuffers: number;
  maxArrayBuffersBeforeGc: number;
  samples: ProbeSample[];
  spills: number;
  spilledBytes: number;
  peakMemoryBytes: number;
  poolPeak: number;
  /** files left in the spill directory after finish */
  spillFilesLeft: number;
  millis: number;
}

const gc = (globalThis as { gc?: () => void }).gc;

async function fullGc(): Promise<void> {
  if (gc === undefined) throw new Error('memory-probe needs node --expose-gc');
  // two rounds with turns of the event loop in between, so that freed backing stores are really swept
  for (let i = 0; i < 2; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  await sleep(5);
  gc();
}

/** Waits until pool.held has not changed for a few polls (in-flight compressions settled). */
async function quiesce(pool: MemoryPool): Promise<void> {
  let last = -1;
  let stable = 0;
  for (let i = 0; i < 400 && stable < 3; i++) {
    await sleep(2);
    if (pool.held === last) stable++;
    else {
      stable = 0;
      last = pool.held;
    }
  }
}

const arrayBuffers = () => process.memoryUsage().arrayBuffers;

/** A key and a dictionary column whose rows / 2 values (60-byte strings) are new in every batch: the writer's dictionaries grow by ~250 KB a batch. */
function dictionaryBatch(rows: number, seed: number): RecordBatch {
  const values = Array.from({ length: rows }, (_, i) => `value ${seed} ${String(i >> 1).padStart(6, '0')} `.padEnd(60, 'x'));
  return new Table({ key: vectorFromArray(Array.from({ length: rows }, (_, i) => BigInt(i * 7919 + seed)), new Int64()), d: vectorFromArray(values, new Dictionary(new Utf8(), new Int32())) }).batches[0]!;
}

export async function probe(config: ProbeConfig): Promise<ProbeReport> {
  const started = performance.now();
  const matrix = config.matrix === undefined ? null : new MatrixInput(config.matrix);
  const shapes = { narrow: narrowBatch, nested: nestedBatch, dictionary: dictionaryBatch };
  const input = matrix !== null ? [] : Array.from({ length: config.batches }, (_, i) => shapes[config.shape ?? 'narrow'](config.rows, 1000 + i));
  let inputBytes = matrix?.inputBytes ?? 0;
  for (const batch of input) for (const child of batch.data.children) for (const b of [child.values, child.valueOffsets, child.nullBitmap]) inputBytes += b?.byteLength ?? 0;
  const batchCount = matrix?.numBatches ?? input.length;
  const batchAt = (i: number) => (matrix !== null ? matrix.batch(i) : input[i]!);
  const every = Math.max(1, config.sampleEvery ?? 1);
  const outDir = await mkdtemp(join(tmpdir(), 'cs-probe-out-'));
  const spillDir = await mkdtemp(join(tmpdir(), 'cs-probe-spill-'));
  try {
    await fullGc();
    const baseline = arrayBuffers();
    // idle buffers stay until the probe clears them, however long the samples take
    const pool = new MemoryPool(config.limit ?? Number.POSITIVE_INFINITY, { releaseIdleAfterMs: Number.POSITIVE_INFINITY });
    let writer: AnyShuffleWriter | null = await createShuffleWriter(config.writer ?? 'hash', {
      numPartitions: config.partitions,
      partitioning: matrix !== null ? MATRIX_PARTITIONING : { kind: 'hash', keys: ['key'] },
      outputPrefix: join(outDir, 'map'),
      codec: config.codec,
      memoryPool: pool,
      spillDir,
    });
    const samples: ProbeSample[] = [];
    const sample = async (after: ProbeSample['after']) => {
      await quiesce(pool);
      const arrayBuffersBeforeGc = arrayBuffers() - baseline;
      await fullGc();
      samples.push({ after, reserved: pool.reserved, held: pool.held, arrayBuffers: arrayBuffers() - baseline, arrayBuffersBeforeGc });
    };
    // inside finish: what the pool stops counting must be gone (released before the payloads that point at them, the dictionary batches lived on unreserved)
    const release = DictionaryTracker.prototype.release;
    DictionaryTracker.prototype.release = async function (this: DictionaryTracker) {
      await release.call(this);
      await sample('dictionaries-released');
    };
    for (let i = 0; i < batchCount; i++) {
      await writer.write(batchAt(i));
      if ((i + 1) % every === 0 || i + 1 === batchCount) await sample(i + 1);
    }
    const result = await writer.finish();
    await sample('finish'); // the finished writer is still referenced here, as a caller holding it would
    writer = null;
    await sample('dropped');
    pool.recycler.clear();
    await sample('idle-cleared');
    const spillFilesLeft = (await readdir(spillDir)).length;
    return {
      config,
      baseline,
      inputBytes,
      largestBatchBytes: matrix?.largestBatchBytes ?? 0,
      maxArrayBuffers: Math.max(...samples.map((s) => s.arrayBuffers)),
      maxArrayBuffersBeforeGc: Math.max(...samples.map((s) => s.arrayBuffersBeforeGc)),
      samples,
      spills: result.spills,
      spilledBytes: result.spilledBytes,
      peakMemoryBytes: result.peakMemoryBytes,
      poolPeak: pool.peak,
      spillFilesLeft,
      millis: Math.round(performance.now() - started),
    };
  } finally {
    await rm(outDir, { recursive: true, force: true });
    await rm(spillDir, { recursive: true, force: true });
  }
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolve(process.argv[1]);
if (isMain) {
  const config = JSON.parse(process.argv[2] ?? '{}') as ProbeConfig;
  probe(config).then(
    (report) => process.stdout.write(`${JSON.stringify(report)}\n`),
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
