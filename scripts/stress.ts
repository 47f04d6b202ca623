/**
 * Spill soak: pushes gigabytes of Arrow data through one ShuffleWriter held
 * to a few MiB, reads everything back and checks that nothing was lost.
 *
 *   npm run stress                          ~2 GiB of input, 8 MiB pool, P = 200, lz4
 *   npm run stress -- --gib 0.25            a shorter run
 *   npm run stress -- --memory-limit 4MiB --partitions 1000 --codec zstd --spill-dir /mnt/scratch
 *
 * Input: the standard narrow shape (src/cli/demo-data.ts: int64 key, float64,
 * utf8 ~20 B, int32 with 10 % nulls), generated batch by batch and never held,
 * hash-partitioned on the key. While generating, and again while reading the
 * output back, it sums a fingerprint of every column (a Murmur3 hash of each
 * value, summed over the rows) and of every row (the column hashes mixed),
 * so any lost, duplicated or changed value, or values shuffled between rows,
 * changes a sum.
 *
 * Fails (exit 1) unless: every row comes back, each in the partition its key
 * hashes to, per-partition row counts match the writer's; every column and
 * row fingerprint matches; the pool's reservation, sampled after every
 * write, never exceeded the limit, nor did the pool's peak; the pool holds
 * 0 bytes at the end; the writer spilled (when the input exceeds the limit)
 * and no spill file is left. Exit 2 for a wrong command line. Not part of
 * `npm test`.
 *
 * It also reports the process's ArrayBuffer bytes (not a pass/fail check):
 * sampled after every write they include garbage not yet collected; run with
 * `node --expose-gc --import tsx scripts/stress.ts` to also sample them right
 * after a full GC every 64 batches, which shows the live figure.
 *
 * scripts/ is outside the root tsconfig's "include": type-check it with
 * `npm run typecheck:scripts`.
 */
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RecordBatch } from 'apache-arrow';
import { CODEC_NAMES, ShuffleReader, ShuffleWriter, type ShuffleWriteResult } from '../src/index.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { byteSizeOption, choiceOption, integerOption, parseCommandArgs, stringOption, UsageError, wantsHelp } from '../src/cli/args.js';
import { bytes, count, seconds } from '../src/cli/context.js';
import { batchBytes, NARROW_SCHEMA, narrowBatch } from '../src/cli/demo-data.js';
import { hashColumnInto, pmod, SPARK_HASH_SEED } from '../src/writer/murmur3.js';

const HELP = `Usage: npm run stress -- [options]

Options:
  --gib G               GiB of Arrow input to generate (default: 2)
  --memory-limit SIZE   the writer's memory pool (default: 8MiB)
  --partitions N        number of partitions (default: 200)
  --codec CODEC         lz4 | zstd | none (default: lz4)
  --batch-rows N        rows per input batch (default: 8192)
  --spill-dir DIR       where spill files go (default: a fresh temporary
                        directory next to the output)
  -h, --help            show this help
`;

const OPTIONS = {
  gib: { type: 'string' },
  'memory-limit': { type: 'string' },
  partitions: { type: 'string' },
  codec: { type: 'string' },
  'batch-rows': { type: 'string' },
  'spill-dir': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const KEY = 'key';
/** Progress lines at most this often. */
const REPORT_EVERY_MS = 10_000;
/** With --expose-gc: how often to force a GC and sample the live ArrayBuffer bytes. */
const GC_EVERY_BATCHES = 64;
/** Spill files are named columnar-shuffle-spill-<hex>.tmp (src/spill/spill-file.ts); anything new in the spill dir counts. */
const SPILL_FILE = /^columnar-shuffle-spill-/;

interface StressArgs {
  inputBytes: number;
  memoryLimit: number;
  partitions: number;
  codec: (typeof CODEC_NAMES)[number];
  batchRows: number;
  spillDir: string | undefined;
}

function parse(argv: string[]): StressArgs {
  const parsed = parseCommandArgs('stress', argv, OPTIONS, 0);
  const gibText = stringOption(parsed, 'gib');
  const gib = gibText === undefined ? 2 : /^[0-9]+(\.[0-9]+)?$/.test(gibText) ? Number(gibText) : NaN;
  if (!(gib > 0)) throw new UsageError(`--gib must be a number > 0, got '${gibText}'`, 'stress');
  const spillDir = stringOption(parsed, 'spill-dir');
  return {
    inputBytes: Math.ceil(gib * GiB),
    memoryLimit: byteSizeOption(stringOption(parsed, 'memory-limit'), 'memory-limit', 'stress') ?? 8 * MiB,
    partitions: integerOption(stringOption(parsed, 'partitions'), 'partitions', 'stress', 1, 0x7fffffff) ?? 200,
    codec: choiceOption(stringOption(parsed, 'codec'), 'codec', CODEC_NAMES, 'stress') ?? 'lz4',
    batchRows: integerOption(stringOption(parsed, 'batch-rows'), 'batch-rows', 'stress', 1, 1 << 24) ?? 8192,
    spillDir: spillDir === '' ? undefined : spillDir,
  };
}

// ---------------------------------------------------------------- fingerprints

/** Odd constants mixing the column hashes of a row into one row hash. */
const ROW_MIX = [0x01000193, 0x9e3779b1, 0x85ebca6b, 0xc2b2ae35, 0x27d4eb2f, 0x165667b1];

/** Murmur3's finalizer: a non-linear bijection on 32 bits. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) | 0;
}

/**
 * Order-independent sums over a multiset of rows: rows, per column the
 * wrapping sum of each value's hash, and the wrapping sum of a row hash that
 * mixes the row's column hashes non-linearly (so values moved between rows
 * change it even when every column's multiset is intact).
 */
class Fingerprint {
  rows = 0;
  readonly columns: number[];
  row = 0;
  private scratch: Int32Array[];

  constructor(private readonly names: readonly string[]) {
    this.columns = names.map(() => 0);
    this.scratch = names.map(() => new Int32Array(0));
  }

  add(batch: RecordBatch): void {
    const n = batch.numRows;
    this.rows += n;
    const hashes = this.names.map((name, c) => {
      if (this.scratch[c]!.length < n) this.scratch[c] = new Int32Array(n);
      const h = this.scratch[c]!.subarray(0, n).fill(0x5eed + c);
      hashColumnInto(batch.data.children[c]!, h, name);
      let sum = this.columns[c]!;
      for (let i = 0; i < n; i++) sum = (sum + h[i]!) | 0;
      this.columns[c] = sum;
      return h;
    });
    let rowSum = this.row;
    for (let i = 0; i < n; i++) {
      let mixed = 0;
      for (let c = 0; c < hashes.length; c++) mixed = (mixed + Math.imul(hashes[c]![i]!, ROW_MIX[c % ROW_MIX.length]!)) | 0;
      rowSum = (rowSum + fmix32(mixed)) | 0;
    }
    this.row = rowSum;
  }
}

const hex = (n: number) => (n >>> 0).toString(16).padStart(8, '0');

// ---------------------------------------------------------------- the soak

interface Stats {
  batches: number;
  inputBytes: number;
  generateMs: number;
  writeMs: number;
  readMs: number;
  maxSampledReserved: number;
  overLimitSamples: number;
  firstOverLimit: string;
  maxArrayBuffers: number;
  /** after a forced GC (only with --expose-gc) */
  maxLiveArrayBuffers: number;
  baselineArrayBuffers: number;
  maxBatchBytes: number;
}

async function run(options: StressArgs, signal: AbortSignal): Promise<string[]> {
  const names = NARROW_SCHEMA.fields.map((f) => f.name);
  const keyIndex = names.indexOf(KEY);
  const work = await mkdtemp(join(tmpdir(), 'columnar-shuffle-stress-'));
  const spillDir = options.spillDir ?? join(work, 'spill');
  const problems: string[] = [];
  try {
    await mkdir(spillDir, { recursive: true });
    const spillFilesBefore = new Set((await readdir(spillDir)).filter((f) => SPILL_FILE.test(f)));
    const prefix = join(work, 'out');
    const pool = new MemoryPool(options.memoryLimit);
    const stats: Stats = {
      batches: 0,
      inputBytes: 0,
      generateMs: 0,
      writeMs: 0,
      readMs: 0,
      maxSampledReserved: 0,
      overLimitSamples: 0,
      firstOverLimit: '',
      maxArrayBuffers: 0,
      maxLiveArrayBuffers: 0,
      baselineArrayBuffers: liveArrayBuffers() ?? process.memoryUsage().arrayBuffers,
      maxBatchBytes: 0,
    };
    console.log(
      `stress: ${bytes(options.inputBytes)} of Arrow input (narrow shape, batches of ${count(options.batchRows)} rows), ` +
        `hash(${KEY}) into ${count(options.partitions)} partitions, ${options.codec}, memory limit ${bytes(options.memoryLimit)}`,
    );
    console.log(`        output ${prefix}.*, spill files in ${spillDir}`);

    // ---- generate and write
    const input = new Fingerprint(names);
    const started = performance.now();
    let t = performance.now();
    const writer = await ShuffleWriter.create({
      numPartitions: options.partitions,
      partitioning: { kind: 'hash', keys: [KEY] },
      outputPrefix: prefix,
      codec: options.codec,
      schema: NARROW_SCHEMA,
      memoryPool: pool,
      spillDir,
    });
    stats.writeMs += performance.now() - t;
    const sample = (when: string) => {
      const reserved = pool.reserved;
      if (reserved > stats.maxSampledReserved) stats.maxSampledReserved = reserved;
      if (reserved > options.memoryLimit) {
        if (stats.overLimitSamples === 0) stats.firstOverLimit = `${reserved} bytes reserved ${when}`;
        stats.overLimitSamples++;
      }
      const arrayBuffers = process.memoryUsage().arrayBuffers;
      if (arrayBuffers > stats.maxArrayBuffers) stats.maxArrayBuffers = arrayBuffers;
    };
    let result: ShuffleWriteResult;
    try {
      let lastReport = performance.now();
      for (let seed = 1; stats.inputBytes < options.inputBytes; seed++) {
        if (signal.aborted) throw new Error('interrupted');
        t = performance.now();
        const batch = narrowBatch(options.batchRows, seed);
        const size = batchBytes(batch);
        input.add(batch);
        stats.generateMs += performance.now() - t;
        t = performance.now();
        await writer.write(batch);
        stats.writeMs += performance.now() - t;
        stats.batches++;
        stats.inputBytes += size;
        if (size > stats.maxBatchBytes) stats.maxBatchBytes = size;
        sample(`after write ${stats.batches}`);
        if (stats.batches % GC_EVERY_BATCHES === 0) {
          const live = liveArrayBuffers();
          if (live !== null && live > stats.maxLiveArrayBuffers) stats.maxLiveArrayBuffers = live;
        }
        if (performance.now() - lastReport >= REPORT_EVERY_MS) {
          lastReport = performance.now();
          const done = Math.min(1, stats.inputBytes / options.inputBytes);
          console.log(
            `  [${(done * 100).toFixed(0).padStart(3)} %] ${bytes(stats.inputBytes)} in, ${count(input.rows)} rows, ` +
              `${mibps(stats.inputBytes, stats.writeMs)} MiB/s in the writer, pool ${bytes(pool.reserved)} (peak ${bytes(pool.peak)}), ` +
              `${seconds(performance.now() - started)} elapsed`,
          );
        }
      }
      t = performance.now();
      result = await writer.finish();
      stats.writeMs += performance.now() - t;
      sample('after finish');
    } catch (error) {
      await writer.abort();
      throw error;
    }
    const totalWriteMs = performance.now() - started;

    // ---- memory and spill files, right after the writer is done
    if (stats.overLimitSamples > 0) problems.push(`the pool went over its limit of ${options.memoryLimit} bytes ${stats.overLimitSamples} times (first: ${stats.firstOverLimit})`);
    if (pool.peak > options.memoryLimit) problems.push(`the pool's peak ${pool.peak} exceeds its limit ${options.memoryLimit}`);
    if (result.peakMemoryBytes > options.memoryLimit) problems.push(`the writer's peakMemoryBytes ${result.peakMemoryBytes} exceeds the limit ${options.memoryLimit}`);
    if (pool.reserved !== 0) problems.push(`the pool still holds ${pool.reserved} bytes after finish()`);
    const leftOver = (await readdir(spillDir)).filter((f) => SPILL_FILE.test(f) && !spillFilesBefore.has(f));
    if (leftOver.length > 0) problems.push(`${leftOver.length} spill files left in ${spillDir}: ${leftOver.slice(0, 3).join(', ')}`);
    if (options.spillDir === undefined && (await readdir(spillDir)).length > 0) problems.push(`the spill directory ${spillDir} is not empty`);
    if (stats.inputBytes > 4 * options.memoryLimit && result.spills === 0) problems.push(`${bytes(stats.inputBytes)} went through a ${bytes(options.memoryLimit)} pool without a single spill`);
    if (result.rows !== input.rows) problems.push(`the writer reports ${result.rows} rows, ${input.rows} were written`);

    // ---- read back
    const output = new Fingerprint(names);
    const partitionRows = new Array<number>(options.partitions).fill(0);
    let misplaced = 0;
    let firstMisplaced = '';
    let keyHashes = new Int32Array(0);
    t = performance.now();
    let readOnly = 0;
    const reader = await ShuffleReader.open(prefix);
    try {
      if (reader.numPartitions !== options.partitions) problems.push(`the output has ${reader.numPartitions} partitions, expected ${options.partitions}`);
      let lastReport = performance.now();
      for (let p = 0; p < reader.numPartitions; p++) {
        if (signal.aborted) throw new Error('interrupted');
        const batches = reader.readPartition(p);
        for (;;) {
          const r = performance.now();
          const next = await batches.next();
          readOnly += performance.now() - r;
          if (next.done) break;
          const batch = next.value;
          output.add(batch);
          partitionRows[p]! += batch.numRows;
          if (keyHashes.length < batch.numRows) keyHashes = new Int32Array(batch.numRows);
          const h = keyHashes.subarray(0, batch.numRows).fill(SPARK_HASH_SEED);
          hashColumnInto(batch.data.children[keyIndex]!, h, KEY);
          for (let i = 0; i < h.length; i++) {
            if (pmod(h[i]!, options.partitions) !== p) {
              if (misplaced === 0) firstMisplaced = `row ${i} of a batch of partition ${p} hashes to ${pmod(h[i]!, options.partitions)}`;
              misplaced++;
            }
          }
        }
        if (performance.now() - lastReport >= REPORT_EVERY_MS) {
          lastReport = performance.now();
          console.log(`  read back ${count(p + 1)} of ${count(reader.numPartitions)} partitions, ${count(output.rows)} rows`);
        }
      }
    } finally {
      await reader.close();
    }
    stats.readMs = readOnly;
    const totalReadMs = performance.now() - t;

    // ---- verdict
    if (output.rows !== input.rows) problems.push(`${output.rows} rows read back, ${input.rows} written`);
    const wrongPartition = partitionRows.findIndex((rows, p) => rows !== result.partitionRows[p]);
    if (wrongPartition >= 0) problems.push(`partition ${wrongPartition}: ${partitionRows[wrongPartition]} rows read back, the writer reports ${result.partitionRows[wrongPartition]}`);
    if (misplaced > 0) problems.push(`${misplaced} rows in the wrong partition (first: ${firstMisplaced})`);
    names.forEach((name, c) => {
      if (output.columns[c] !== input.columns[c]) problems.push(`column ${name}: fingerprint ${hex(output.columns[c]!)} read back, ${hex(input.columns[c]!)} written`);
    });
    if (output.row !== input.row) problems.push(`row fingerprint ${hex(output.row)} read back, ${hex(input.row)} written`);
    if (pool.reserved !== 0) problems.push(`the pool holds ${pool.reserved} bytes at the end`);

    const rows = input.rows;
    console.log('');
    console.log(`  input       ${count(rows)} rows in ${count(stats.batches)} batches, ${bytes(stats.inputBytes)} of Arrow buffers (generated in ${seconds(stats.generateMs)}, not counted below)`);
    console.log(`  write       ${seconds(stats.writeMs)} in the writer: ${mibps(stats.inputBytes, stats.writeMs)} MiB/s, ${count((rows * 1000) / stats.writeMs)} rows/s (${seconds(totalWriteMs)} with generation and fingerprints)`);
    console.log(`  output      ${bytes(result.bytesWritten)}, ${count(result.partitionBatches.reduce((a, b) => a + b, 0))} record batches (${(result.bytesWritten / stats.inputBytes).toFixed(2)} of the input)`);
    console.log(`  spills      ${count(result.spills)} spill files, ${bytes(result.spilledBytes)} spilled (${(result.spilledBytes / stats.inputBytes).toFixed(2)} of the input)`);
    console.log(
      `  memory      limit ${bytes(options.memoryLimit)}; peak ${bytes(result.peakMemoryBytes)} (writer), ${bytes(pool.peak)} (pool), ` +
        `${bytes(stats.maxSampledReserved)} (largest sample of ${count(stats.batches + 1)})`,
    );
    console.log(
      `  process     ArrayBuffers peaked at ${bytes(stats.maxArrayBuffers)} ` +
        `(${bytes(stats.maxArrayBuffers - stats.baselineArrayBuffers)} over the start; largest input batch ${bytes(stats.maxBatchBytes)}; sampled after each write)`,
    );
    if (stats.maxLiveArrayBuffers > 0) {
      console.log(
        `              live after a full GC every ${GC_EVERY_BATCHES} batches: at most ${bytes(stats.maxLiveArrayBuffers)} ` +
          `(${bytes(stats.maxLiveArrayBuffers - stats.baselineArrayBuffers)} over the start)`,
      );
    }
    console.log(`  read        ${seconds(stats.readMs)} in the reader: ${mibps(stats.inputBytes, stats.readMs)} MiB/s, ${count((rows * 1000) / stats.readMs)} rows/s (${seconds(totalReadMs)} with checks)`);
    console.log(`  fingerprint ${names.map((name, c) => `${name} ${hex(input.columns[c]!)}`).join(', ')}, rows ${hex(input.row)}`);
    return problems;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** process ArrayBuffer bytes right after a full GC, or null when gc() is not exposed */
function liveArrayBuffers(): number | null {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc !== 'function') return null;
  gc();
  return process.memoryUsage().arrayBuffers;
}

function mibps(bytes: number, ms: number): string {
  return ms > 0 ? ((bytes / MiB) / (ms / 1000)).toFixed(1) : '-';
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (wantsHelp(argv)) {
    process.stdout.write(HELP);
    return 0;
  }
  let options: StressArgs;
  try {
    options = parse(argv);
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`stress: ${error.message} (see 'npm run stress -- --help')`);
      return 2;
    }
    throw error;
  }
  const controller = new AbortController();
  const onSignal = () => (controller.signal.aborted ? process.exit(130) : controller.abort());
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const started = performance.now();
  try {
    const problems = await run(options, controller.signal);
    if (problems.length > 0) {
      console.log(`  verdict     FAILED after ${seconds(performance.now() - started)}`);
      for (const problem of problems) console.log(`              - ${problem}`);
      return 1;
    }
    console.log(`  verdict     PASSED in ${seconds(performance.now() - started)}: every row back in its partition, fingerprints equal, the pool within its limit and empty, no spill file left`);
    return 0;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    console.error(`stress: FAILED: ${typeof code === 'string' ? `${code}: ` : ''}${error instanceof Error ? error.message : String(error)}`);
    if (error instanceof Error && error.stack && process.env.COLUMNAR_SHUFFLE_DEBUG) console.error(error.stack);
    return controller.signal.aborted ? 130 : 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

process.exitCode = await main();
