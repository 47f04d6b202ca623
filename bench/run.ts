/**
 * The benchmark suite: the columnar writer against the sort-based row writer
 * and the naive object-row shuffle (bench/RESULTS.md explains the matrix).
 *
 *   npm run bench                 the full profile (about 15 minutes here); writes bench/RESULTS.md
 *                                 and bench/throughput.svg
 *   npm run bench -- --quick      a small profile (about 45 s here: fixed costs dominate); writes no file
 *   npm run bench -- --json       also print every result as one JSON object on stdout
 *   npm run bench -- --out DIR    write RESULTS.md and throughput.svg into DIR instead (also with --quick)
 *   npm run bench -- --shape nested   only these shapes (narrow, wide, nested; repeat or comma-separate);
 *                                 writes no file unless --out is given
 *
 * Figures on a shared 2-core machine move 20-50 % between runs: compare
 * ratios measured in one run, not absolute numbers across runs.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CodecName } from '../src/index.js';
import { measureCase, SHUFFLES, type CaseResult, type CaseSpec, type Input, type ShuffleName } from './measure.js';
import { derive, e2eRate, readRate, resultsMarkdown, summaryLines, TARGETS, throughputChart, writeRate, type SuiteMeta, type SuiteResults } from './report.js';
import { batchesOf, inputBytesOf, SHAPES, type Shape, type ShapeName } from './shapes.js';
import { spillComparison, SPILL_FRACTION } from './spill-comparison.js';

/** the repository's bench/, whether this file runs from there (tsx) or compiled into dist-bench/bench/ (npm run bench) */
const BENCH_DIR = fileURLToPath(new URL(import.meta.url.includes('/dist-bench/') ? '../../bench/' : './', import.meta.url));

const argv = process.argv.slice(2);
const args = new Set(argv);
const quick = args.has('--quick');
const outIndex = argv.indexOf('--out');
const outDir = outIndex >= 0 ? argv[outIndex + 1] : undefined;
if (outIndex >= 0 && (outDir === undefined || outDir.startsWith('--'))) throw new Error('--out needs a directory');
/** `--shape nested` (repeatable, or `--shape narrow,nested`): only those shapes; the spill comparison runs with narrow */
const shapeNames: ShapeName[] = argv.flatMap((a, i) => (a === '--shape' ? (argv[i + 1] ?? '').split(',') : [])).map((name) => {
  if (!(name in SHAPES)) throw new Error(`--shape: unknown shape "${name}", expected one of ${Object.keys(SHAPES).join(', ')}`);
  return name as ShapeName;
});
const selectedShapes = shapeNames.length > 0 ? [...new Set(shapeNames)] : (Object.keys(SHAPES) as ShapeName[]);

const PROFILE = quick
  ? { rows: { narrow: 100_000, wide: 25_000, nested: 50_000 }, objectFraction: 4, rounds: 1, targetRounds: 1, warmup: 0, spillRounds: 1 }
  : { rows: { narrow: 2_000_000, wide: 500_000, nested: 1_000_000 }, objectFraction: 8, rounds: 3, targetRounds: 7, warmup: 1, spillRounds: 5 };
/**
 * The cases the issue's targets are read from (P = 200, lz4, unlimited) run
 * `targetRounds` rounds: a median of 3 still moved a ratio by 20 % between two
 * runs of the same code; these rounds cost about a minute in all.
 */
const isTargetCase = (spec: CaseSpec) => spec.partitions === TARGETS.at && spec.codec === 'lz4' && spec.memoryLimit === null;
const PARTITION_COUNTS = [1, 8, 200, 1000, 4000, 10000];
const CODECS: readonly CodecName[] = ['lz4', 'zstd', 'none'];
const TIGHT_PARTITIONS = [200, 1000];
/** The tight memory limit: this fraction of the input's Arrow bytes (as the spill comparison's), at least TIGHT_FLOOR. */
const TIGHT_FRACTION = SPILL_FRACTION;
/** The quick profile's inputs are small: 1/32 of them is below what a writer needs at 1000 partitions. */
const TIGHT_FLOOR = 2 * 1024 * 1024;

function inputOf(shape: Shape, rows: number): Input {
  const batches = batchesOf(shape, rows);
  return { shape: shape.name, key: shape.key, schema: shape.schema, batches, rows, inputBytes: inputBytesOf(batches) };
}

/** The matrix, in the order it runs: cases, each one spec per shuffle (measured together, in rounds). */
function matrix(inputs: Record<string, { full: Input }>): CaseSpec[][] {
  const cases: CaseSpec[][] = [];
  const all = (shape: string, partitions: number, codec: CodecName, memoryLimit: number | null, shuffles: readonly ShuffleName[]) =>
    cases.push(shuffles.map((shuffle) => ({ shape, shuffle, partitions, codec, memoryLimit })));
  for (const shape of Object.keys(inputs)) {
    for (const partitions of PARTITION_COUNTS) all(shape, partitions, 'lz4', null, SHUFFLES);
    for (const codec of CODECS.filter((c) => c !== 'lz4')) all(shape, 200, codec, null, SHUFFLES);
    const limit = Math.max(TIGHT_FLOOR, Math.floor(inputs[shape]!.full.inputBytes / TIGHT_FRACTION));
    for (const partitions of TIGHT_PARTITIONS) all(shape, partitions, 'lz4', limit, ['columnar', 'sort']);
  }
  return cases;
}

function line(c: CaseResult): string {
  const memory = c.memoryLimit === null ? 'unlimited' : `${(c.memoryLimit / 1024 / 1024).toFixed(2)} MiB`;
  if (c.error !== undefined) return `${c.shape} P=${c.partitions} ${c.codec} ${memory} ${c.shuffle}: FAILED (${c.error})`;
  return `${c.shape} P=${c.partitions} ${c.codec} ${memory} ${c.shuffle}: write ${(writeRate(c) / 1e6).toFixed(2)} M rows/s, read ${(readRate(c) / 1e6).toFixed(2)}, ` +
    `end to end ${(e2eRate(c) / 1e6).toFixed(2)}; ${(c.outputBytes / c.rows).toFixed(1)} B/row${c.spills > 0 ? `, ${c.spills} spills` : ''}`;
}

async function main(): Promise<void> {
  const started = Date.now();
  const inputs: Record<string, { full: Input; object: Input }> = {};
  for (const shape of selectedShapes.map((name) => SHAPES[name])) {
    const rows = PROFILE.rows[shape.name as ShapeName];
    inputs[shape.name] = { full: inputOf(shape, rows), object: inputOf(shape, Math.floor(rows / PROFILE.objectFraction)) };
  }
  const dir = await mkdtemp(join(tmpdir(), 'cs-bench-'));
  const cases: CaseResult[] = [];
  const spill = [];
  try {
    for (const specs of matrix(inputs)) {
      const inputOfSpec = (spec: CaseSpec) => (spec.shuffle === 'object' ? inputs[spec.shape]!.object : inputs[spec.shape]!.full);
      const rounds = isTargetCase(specs[0]!) ? PROFILE.targetRounds : PROFILE.rounds;
      for (const result of await measureCase(specs, inputOfSpec, dir, { rounds, warmup: PROFILE.warmup })) {
        cases.push(result);
        console.log(line(result));
      }
    }
    const narrow = inputs['narrow']?.full;
    for (const writer of ['hash', 'sort'] as const) {
      if (narrow === undefined) break;
      const s = await spillComparison(writer, narrow.key, narrow.batches, narrow.inputBytes, dir, PROFILE.spillRounds, TIGHT_FLOOR);
      spill.push(s);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const meta: SuiteMeta = {
    date: new Date().toISOString().slice(0, 10),
    node: process.version,
    cpus: cpus().length,
    cpu,
    profile: quick ? 'quick' : 'full',
    rows: Object.fromEntries(Object.entries(inputs).map(([k, v]) => [k, v.full.rows])),
    objectRows: Object.fromEntries(Object.entries(inputs).map(([k, v]) => [k, v.object.rows])),
    inputBytes: Object.fromEntries(Object.entries(inputs).map(([k, v]) => [k, v.full.inputBytes])),
    rounds: PROFILE.rounds,
    targetRounds: PROFILE.targetRounds,
    warmup: PROFILE.warmup,
    partitionCounts: PARTITION_COUNTS,
    tightFraction: TIGHT_FRACTION,
    tightFloor: TIGHT_FLOOR,
  };
  const results: SuiteResults = { meta, cases, spill, derived: derive(meta, cases) };
  for (const l of summaryLines(results)) console.log(l);
  console.log(`${((Date.now() - started) / 1000).toFixed(0)} s`);
  if (args.has('--json')) console.log(JSON.stringify(results, null, 2));
  if ((!quick && shapeNames.length === 0) || outDir !== undefined) {
    const target = (name: string) => join(outDir ?? BENCH_DIR, name);
    if (outDir !== undefined) await mkdir(outDir, { recursive: true });
    await writeFile(target('RESULTS.md'), resultsMarkdown(results));
    await writeFile(target('throughput.svg'), throughputChart(results));
    console.log(`wrote ${outDir ?? 'bench'}/RESULTS.md and throughput.svg`);
  }
}

await main();
