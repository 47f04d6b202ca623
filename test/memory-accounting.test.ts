/**
 * "The accounting is the truth" (issue 3): the memory pool's `held` figure
 * (what its consumers reserved, plus the idle buffers its recycler keeps)
 * matches the ArrayBuffer memory the writer (the columnar one, or the sort
 * writer in the cases that say so) really holds. Each case runs
 * test/support/memory-probe.ts in a child `node --expose-gc` (a full GC before
 * every sample), which builds its input, takes a baseline, then after every
 * write compares pool.held with the growth of
 * `process.memoryUsage().arrayBuffers` over the baseline.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, test } from 'vitest';
import type { ProbeConfig, ProbeReport, ProbeSample } from './support/memory-probe.js';

const run = promisify(execFile);
const PROBE = fileURLToPath(new URL('./support/memory-probe.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MiB = 1024 * 1024;
/** Slack for what is not the writer's: Node's 8 KiB Buffer pool slabs, the codecs' scratch buffers, allocator rounding. */
const SLACK = 2 * MiB;

async function probe(config: ProbeConfig): Promise<ProbeReport> {
  const { stdout } = await run(process.execPath, ['--expose-gc', '--import', 'tsx', PROBE, JSON.stringify(config)], {
    cwd: ROOT,
    maxBuffer: 16 * MiB,
    timeout: 60_000,
  });
  return JSON.parse(stdout.trim().split('\n').pop()!) as ProbeReport;
}

const CASES = {
  'no spill (unbounded pool), lz4, 200 partitions': { limit: null, codec: 'lz4', batches: 16, rows: 8192, partitions: 200 },
  'no spill (unbounded pool), uncompressed, 200 partitions': { limit: null, codec: 'none', batches: 16, rows: 8192, partitions: 200 },
  'spilling under 4 MiB, lz4, 200 partitions': { limit: 4 * MiB, codec: 'lz4', batches: 20, rows: 8192, partitions: 200 },
  'spilling under 4 MiB, lz4, 8 partitions (large payloads cached, then spilled)': { limit: 4 * MiB, codec: 'lz4', batches: 40, rows: 8192, partitions: 8 },
  // 62,000 rows staged (the target is 64 x 1000) and nothing split until finish: the staging is what the pool holds
  'small batches staged (1,000 rows at 1,000 partitions), unbounded pool, lz4': { limit: null, codec: 'lz4', batches: 62, rows: 1000, partitions: 1000 },
  'nested shape, spilling under 4 MiB, lz4, 200 partitions': { limit: 4 * MiB, codec: 'lz4', batches: 12, rows: 8192, partitions: 200, shape: 'nested' },
  'nested shape, no spill (unbounded pool), uncompressed, 8 partitions': { limit: null, codec: 'none', batches: 12, rows: 8192, partitions: 8, shape: 'nested' },
  // the encoded dictionary batches (~4 MB) are released with the pool's reservation at finish: a finished writer kept them
  'dictionary column with new values every batch, unbounded pool, uncompressed, 200 partitions': { limit: null, codec: 'none', batches: 16, rows: 8192, partitions: 200, shape: 'dictionary' },
  'sort writer, no spill (unbounded pool), lz4, 200 partitions': { limit: null, codec: 'lz4', batches: 16, rows: 8192, partitions: 200, writer: 'sort' },
  'sort writer, spilling under 4 MiB, zstd, 200 partitions': { limit: 4 * MiB, codec: 'zstd', batches: 20, rows: 8192, partitions: 200, writer: 'sort' },
  'sort writer, nested shape, spilling under 4 MiB, lz4, 200 partitions': { limit: 4 * MiB, codec: 'lz4', batches: 12, rows: 8192, partitions: 200, shape: 'nested', writer: 'sort' },
  'sort writer, nested shape, no spill (unbounded pool), uncompressed, 8 partitions': { limit: null, codec: 'none', batches: 12, rows: 8192, partitions: 8, shape: 'nested', writer: 'sort' },
} satisfies Record<string, ProbeConfig>;
type CaseName = keyof typeof CASES;
const NAMES = Object.keys(CASES) as CaseName[];

const reports = new Map<CaseName, ProbeReport>();
beforeAll(async () => {
  // two children at a time: the measurements are per process, only the wall time is shared
  for (let i = 0; i < NAMES.length; i += 2) {
    const pair = NAMES.slice(i, i + 2);
    const done = await Promise.all(pair.map((name) => probe(CASES[name])));
    pair.forEach((name, k) => reports.set(name, done[k]!));
  }
}, 120_000);

function report(name: CaseName): ProbeReport {
  const r = reports.get(name);
  if (r === undefined) throw new Error(`no probe report for ${name}`);
  return r;
}

const mib = (bytes: number) => `${(bytes / MiB).toFixed(2)} MiB`;
const describeSample = (s: ProbeSample) =>
  `after ${s.after}: held ${mib(s.held)} (reserved ${mib(s.reserved)}), ArrayBuffers +${mib(s.arrayBuffers)} (${mib(s.arrayBuffers - s.held)} unaccounted)`;

describe.each(NAMES)('%s', (name) => {
  const config: ProbeConfig = CASES[name];

  test('after every batch (and a GC) the ArrayBuffer growth is within max(2 MiB, 10 %) of pool.held', () => {
    const r = report(name);
    const perBatch = r.samples.filter((s) => typeof s.after === 'number');
    expect(perBatch).toHaveLength(config.batches);
    const off = perBatch.filter((s) => Math.abs(s.arrayBuffers - s.held) > Math.max(SLACK, 0.1 * s.held));
    const worst = [...perBatch].sort((a, b) => b.arrayBuffers - b.held - (a.arrayBuffers - a.held))[0]!;
    expect(off.map(describeSample), `worst: ${describeSample(worst)}`).toEqual([]);
  });

  test('the pool says what the writer reported, and the spill directory is empty afterwards', () => {
    const r = report(name);
    if (config.limit === null) expect(r.spills).toBe(0);
    else {
      expect(r.spills).toBeGreaterThan(0);
      expect(r.poolPeak).toBeLessThanOrEqual(config.limit);
    }
    // the writer's own peak; the pool's may add idle recycled buffers that existed at the time
    expect(r.peakMemoryBytes).toBeGreaterThan(0);
    expect(r.peakMemoryBytes).toBeLessThanOrEqual(r.poolPeak);
    expect(r.spillFilesLeft).toBe(0);
  });

  if (config.limit !== null) {
    const limit = config.limit;
    test('the process never holds more ArrayBuffer memory than the limit plus a small constant (inputs excluded)', () => {
      const r = report(name);
      const over = r.samples.filter((s) => typeof s.after === 'number' && s.arrayBuffers > limit + SLACK);
      expect(over.map(describeSample)).toEqual([]);
    });
  }

  if (config.shape === 'dictionary') {
    test('inside finish, once the dictionary batches are let go, the ArrayBuffer growth is still within 2 MiB of pool.held (they were released from the pool before the payloads pointing at them: 4 MB unaccounted)', () => {
      const released = report(name).samples.find((s) => s.after === 'dictionaries-released')!;
      expect(released, 'the sample was taken').toBeDefined();
      expect(released.arrayBuffers - released.held, describeSample(released)).toBeLessThanOrEqual(SLACK);
    });
  }

  test('after finish (and a GC) nothing is reserved, the ArrayBuffers are the idle recycled buffers, and back near the baseline once they are cleared', () => {
    const r = report(name);
    const finished = r.samples.find((s) => s.after === 'finish')!;
    const dropped = r.samples.find((s) => s.after === 'dropped')!;
    const cleared = r.samples.find((s) => s.after === 'idle-cleared')!;
    expect(finished.reserved).toBe(0);
    expect(Math.abs(finished.arrayBuffers - finished.held), `${describeSample(finished)}; once the writer object is dropped: +${mib(dropped.arrayBuffers)}`).toBeLessThanOrEqual(SLACK);
    expect(Math.abs(dropped.arrayBuffers - dropped.held), describeSample(dropped)).toBeLessThanOrEqual(SLACK);
    expect(cleared.held).toBe(0);
    expect(cleared.arrayBuffers, describeSample(cleared)).toBeLessThanOrEqual(SLACK);
  });
});
