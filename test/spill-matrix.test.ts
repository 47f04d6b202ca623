/**
 * The spill test matrix of issue 3 ("Memory pool, spill and merge"), for both writers:
 * inputs 50-100 times the memory limit for limits of 1, 2 and 8 MiB, at 4000, 1000 and
 * 200 partitions (the tightest limit with the most partitions), 8 and 1; skew (one key holding
 * half the rows; every row in one partition); rows with 1 MiB strings under a limit of
 * 4 MiB; thousands of tiny batches; and the process's ArrayBuffer memory (measured in a
 * child process) within the limit plus one input batch plus a small constant. Every
 * input is at least 50 times the limit.
 *
 * Every case asserts: every row comes back exactly once, with its bytes, in its
 * partition, in input order within the partition (test/support/matrix-input.ts: each
 * row carries its global row number, so a lost, duplicated, misplaced or reordered row
 * fails the check even though the input repeats a few source batches); the pool's peak
 * (and every sample after a write) is within the limit; the writer spilled; no spill or
 * temporary file is left, only the three output files.
 *
 * Narrow inputs about 14 times the limit are in test/spill.test.ts (also writers of one
 * kind sharing a pool), writers of both kinds sharing a pool in
 * test/shared-pool-spill.test.ts, nested columns in test/spill-nested.test.ts.
 *
 * Sizes: on a 2-core machine the whole file takes about a minute; the columnar writer's
 * cost under these limits is mostly per spill (one segment per partition each time),
 * the check's is reading the output back.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { createShuffleWriter, WRITER_KINDS, type WriterKind } from '../src/writer-kind.js';
import type { ShuffleWriteResult } from '../src/writer/writer-options.js';
import { checkOutput, MATRIX_PARTITIONING, MatrixInput, type MatrixSpec } from './support/matrix-input.js';
import type { ProbeConfig, ProbeReport } from './support/memory-probe.js';
import { entries, MiB } from './support/spill-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

// ---------------------------------------------------------------------------------------------
// The inputs. Labels of 100-300 bytes make rows of ~230 B (fewer rows for the same bytes: the
// writers' and the check's costs are per row); 1000 and 4000 partitions get rows of ~1.6 KiB.

/** ~0.9 MB batches of 4096 rows of ~230 B, three distinct sources */
const MEDIUM = (batches: number, keys: MatrixSpec['keys'] = 'uniform'): MatrixSpec => ({ sources: 3, sourceRows: 4096, batches, label: [100, 300], keys, seed: batches });
/** ~0.8 MB batches of 512 rows of ~1.6 KiB */
const KILO = (batches: number): MatrixSpec => ({ sources: 3, sourceRows: 512, batches, label: [1200, 2000], seed: 11 });
/** 100 batches of two rows with 1 MiB strings */
const WIDE: MatrixSpec = { sources: 3, sourceRows: 2, batches: 100, label: [MiB, MiB], seed: 5 };
/** 3000 batches of 1-10 rows (slices at random offsets of the sources) of ~3.2 KiB */
const TINY: MatrixSpec = { sources: 3, sourceRows: 1024, batches: 3000, label: [2000, 4400], tiny: true, seed: 9 };

let out: string;
let spillDir: string;
beforeEach(async () => {
  out = await makeTempDir('cs-matrix-out-');
  spillDir = await makeTempDir('cs-matrix-spill-');
});
afterEach(async () => {
  await removeDir(out);
  await removeDir(spillDir);
});

interface MatrixCase {
  limit: number;
  numPartitions: number;
  spec: MatrixSpec;
  /** the input's Arrow bytes are at least this many times the limit */
  ratio: number;
}

/** Writes the input (each batch made right before its write), finishes, and checks every claim of the file comment. */
async function runCase(kind: WriterKind, c: MatrixCase): Promise<{ input: MatrixInput; result: ShuffleWriteResult; partitionRows: number[] }> {
  const input = new MatrixInput(c.spec);
  expect(input.inputBytes, `input ${(input.inputBytes / MiB).toFixed(1)} MiB`).toBeGreaterThanOrEqual(c.ratio * c.limit);
  const pool = new MemoryPool(c.limit);
  const prefix = join(out, 'map');
  const writer = await createShuffleWriter(kind, { numPartitions: c.numPartitions, partitioning: MATRIX_PARTITIONING, outputPrefix: prefix, memoryPool: pool, spillDir });
  let maxSample = 0;
  for (const batch of input.batches()) {
    await writer.write(batch);
    maxSample = Math.max(maxSample, pool.held);
  }
  const result = await writer.finish();
  expect(result.rows).toBe(input.totalRows);
  expect(result.spills, 'the writer spilled').toBeGreaterThan(0);
  expect(result.spilledBytes).toBeGreaterThan(0);
  expect(maxSample, 'pool.held after a write').toBeLessThanOrEqual(c.limit);
  expect(pool.peak, 'the pool peak').toBeLessThanOrEqual(c.limit);
  expect(result.peakMemoryBytes).toBeLessThanOrEqual(c.limit);
  expect(pool.reserved).toBe(0);
  expect(await entries(spillDir), 'files left in the spill directory').toEqual([]);
  expect(await entries(out), 'files in the output directory').toEqual(['map.checksum.CRC32C', 'map.data', 'map.index']);
  const check = await checkOutput(prefix, input, c.numPartitions);
  expect(check.problems).toEqual([]);
  expect(check.rows).toBe(input.totalRows);
  const expected = input.expectedPartitionRows(c.numPartitions);
  expect(check.partitionRows).toEqual(expected);
  expect(result.partitionRows).toEqual(expected);
  return { input, result, partitionRows: check.partitionRows };
}

describe.each(WRITER_KINDS)('%s writer', (kind: WriterKind) => {
  describe('an input 50-100 times the limit: every row back exactly, in order, spilled, within the limit, nothing left', () => {
    test.each<[string, MatrixCase]>([
      // the columnar writer runs ~30 k rows/s here (every partition buffer holds a row or two): rows of ~1.6 KiB keep it to ~34 k rows
      ['1 MiB, 4000 partitions, 55 MB (52x)', { limit: 1 * MiB, numPartitions: 4000, spec: KILO(66), ratio: 50 }],
      ['2 MiB, 1000 partitions, 110 MB (52x)', { limit: 2 * MiB, numPartitions: 1000, spec: KILO(132), ratio: 50 }],
      ['8 MiB, 200 partitions, 430 MB (51x)', { limit: 8 * MiB, numPartitions: 200, spec: MEDIUM(460), ratio: 50 }],
      ['1 MiB, 8 partitions, 55 MB (52x)', { limit: 1 * MiB, numPartitions: 8, spec: MEDIUM(59), ratio: 50 }],
      ['1 MiB, 1 partition, 55 MB (52x)', { limit: 1 * MiB, numPartitions: 1, spec: MEDIUM(59), ratio: 50 }],
    ])('%s', async (_, c) => {
      await runCase(kind, c);
    }, 120_000);
  });

  describe('skew', () => {
    test('one key holding half the rows, 200 partitions, 1 MiB, 55 MB (52x): that partition holds half the rows, far more than the limit', async () => {
      const spec: MatrixSpec = { ...KILO(66), keys: 'half-one-key' };
      const { input, partitionRows } = await runCase(kind, { limit: 1 * MiB, numPartitions: 200, spec, ratio: 50 });
      const largest = Math.max(...partitionRows);
      expect(largest).toBeGreaterThanOrEqual(input.totalRows / 2);
      expect(largest * 1200).toBeGreaterThan(10 * MiB); // rows of at least 1.2 KB: ten times the limit in one partition
    }, 120_000);

    test('every row in one partition (one key), 200 partitions, 1 MiB, 60 MB (57x)', async () => {
      const { input, partitionRows } = await runCase(kind, { limit: 1 * MiB, numPartitions: 200, spec: MEDIUM(64, 'one-key'), ratio: 50 });
      expect(partitionRows.filter((n) => n > 0)).toEqual([input.totalRows]);
    }, 120_000);
  });

  test('very wide rows: batches of two rows with 1 MiB strings, 8 partitions, a 4 MiB limit, 200 MiB (50x)', async () => {
    await runCase(kind, { limit: 4 * MiB, numPartitions: 8, spec: WIDE, ratio: 50 });
  }, 120_000);

  test('thousands of tiny batches (3000 of 1-10 rows of 2-4.4 KB), 200 partitions, 1 MiB, 53 MB (51x)', async () => {
    await runCase(kind, { limit: 1 * MiB, numPartitions: 200, spec: TINY, ratio: 50 });
  }, 120_000);
});

// ---------------------------------------------------------------------------------------------
// The process's ArrayBuffer memory, measured in a child `node --expose-gc` (test/support/memory-probe.ts):
// after every sampled write and a full GC, the growth of process.memoryUsage().arrayBuffers over the
// baseline (taken with the input's sources built) stays within the limit plus one input batch plus a small
// constant. The probes run one after the other in the background while the cases above run.

const PROBE = fileURLToPath(new URL('./support/memory-probe.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Node's Buffer pool slabs, the codecs' scratch buffers, allocator rounding: as in memory-accounting.test.ts */
const SLACK = 2 * MiB;

const PROBES = {
  '1 MiB, 200 partitions, 55 MB (52x)': { limit: 1 * MiB, partitions: 200, spec: KILO(66) },
  'batches of two 1 MiB rows, 4 MiB, 8 partitions, 200 MiB (50x)': { limit: 4 * MiB, partitions: 8, spec: WIDE },
} as const;
type ProbeName = keyof typeof PROBES;

const run = promisify(execFile);
async function probe(kind: WriterKind, name: ProbeName): Promise<ProbeReport> {
  const p = PROBES[name];
  const config: ProbeConfig = { limit: p.limit, codec: 'lz4', batches: 0, rows: 0, partitions: p.partitions, writer: kind, matrix: p.spec };
  const { stdout } = await run(process.execPath, ['--expose-gc', '--import', 'tsx', PROBE, JSON.stringify(config)], { cwd: ROOT, maxBuffer: 16 * MiB, timeout: 120_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!) as ProbeReport;
}

// started when the file loads, one at a time; each test awaits its own
const probeRuns = new Map<string, Promise<ProbeReport>>();
{
  let previous: Promise<unknown> = Promise.resolve();
  for (const kind of WRITER_KINDS) {
    for (const name of Object.keys(PROBES) as ProbeName[]) {
      const report = previous.then(() => probe(kind, name));
      report.catch(() => undefined); // surfaces in its test
      probeRuns.set(`${kind}: ${name}`, report);
      previous = report.catch(() => undefined);
    }
  }
}

const mib = (bytes: number) => `${(bytes / MiB).toFixed(2)} MiB`;

describe.each(WRITER_KINDS)('%s writer, in a child process', (kind: WriterKind) => {
  test.each(Object.keys(PROBES) as ProbeName[])('%s: ArrayBuffers stay within the limit + one input batch + 2 MiB; spilled; no spill file left', async (name) => {
    const r = await probeRuns.get(`${kind}: ${name}`)!;
    const limit = PROBES[name].limit;
    const bound = limit + r.largestBatchBytes + SLACK;
    expect(r.inputBytes).toBeGreaterThanOrEqual(50 * limit);
    expect(r.spills).toBeGreaterThan(0);
    expect(r.poolPeak).toBeLessThanOrEqual(limit);
    expect(r.spillFilesLeft).toBe(0);
    const over = r.samples.filter((s) => s.arrayBuffers > bound).map((s) => `after ${s.after}: +${mib(s.arrayBuffers)} (held ${mib(s.held)})`);
    expect(over, `bound ${mib(bound)}; largest growth +${mib(r.maxArrayBuffers)} (before GC +${mib(r.maxArrayBuffersBeforeGc)})`).toEqual([]);
    expect(r.maxArrayBuffers).toBeLessThanOrEqual(bound);
  }, 300_000);
});
