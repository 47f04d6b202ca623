/**
 * Writer and reader throughput on the standard narrow shape (int64 key,
 * float64, utf8 ~20 B, int32 with 10 % nulls), hash-partitioned on the key.
 *
 *   npm run bench                 2M rows, P = 8, 200, 1000, lz4; writes bench/RESULTS.md
 *   npm run bench -- --quick      500k rows, a smoke run (does not touch RESULTS.md)
 *   npm run bench -- --json       also print the results as JSON
 *
 * Then spilling: the same input at P = 200 with a memory pool of 1/32 of the
 * input's Arrow bytes against unlimited memory, run alternately in the same
 * process (target: the spilling write within 1.5x of the unlimited one).
 *
 * Figures on a shared 2-core machine move 20-50 % between runs: compare
 * ratios measured in one run, not absolute numbers across runs.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RecordBatch } from 'apache-arrow';
import { Bench } from 'tinybench';
import { ShuffleReader, ShuffleWriter, type CodecName, type ShuffleWriteResult } from '../src/index.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { batchBytes, narrowBatch } from '../src/cli/demo-data.js';

const args = new Set(process.argv.slice(2));
const quick = args.has('--quick');
const BATCH_ROWS = 8192;
const ROWS = quick ? 500_000 : 2_000_000;
const PARTITION_COUNTS = [8, 200, 1000];
const CODECS: CodecName[] = ['lz4'];
const ITERATIONS = quick ? 2 : 5;
/** The spill comparison: P, the memory limit as a fraction of the input's Arrow bytes, and the target ratio. */
const SPILL_PARTITIONS = 200;
const SPILL_FRACTION = 32;
const SPILL_TARGET_RATIO = 1.5;

interface CaseResult {
  partitions: number;
  codec: CodecName;
  rows: number;
  inputBytes: number;
  outputBytes: number;
  writeMs: number;
  readMs: number;
}

interface SpillCase {
  /** null: unlimited */
  memoryLimit: number | null;
  writeMs: number;
  spills: number;
  spilledBytes: number;
  peakMemoryBytes: number;
  outputBytes: number;
}

interface SpillResult {
  partitions: number;
  codec: CodecName;
  rows: number;
  inputBytes: number;
  rounds: number;
  unlimited: SpillCase;
  limited: SpillCase;
  /** limited.writeMs / unlimited.writeMs */
  ratio: number;
}

async function main(): Promise<void> {
  const batches = Array.from({ length: Math.ceil(ROWS / BATCH_ROWS) }, (_, i) =>
    narrowBatch(Math.min(BATCH_ROWS, ROWS - i * BATCH_ROWS), i + 1),
  );
  const inputBytes = batches.reduce((sum, b) => sum + batchBytes(b), 0);
  const dir = await mkdtemp(join(tmpdir(), 'cs-bench-'));
  const results: CaseResult[] = [];
  let spill: SpillResult;
  try {
    for (const codec of CODECS) {
      for (const partitions of PARTITION_COUNTS) {
        const prefix = join(dir, `p${partitions}-${codec}`);
        let outputBytes = 0;
        const bench = new Bench({ iterations: ITERATIONS, time: 0, warmupIterations: 1, warmupTime: 0 });
        bench.add(`write P=${partitions} ${codec}`, async () => {
          const writer = await ShuffleWriter.create({ numPartitions: partitions, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: prefix, codec, overwrite: true });
          for (const batch of batches) await writer.write(batch);
          outputBytes = (await writer.finish()).bytesWritten;
        });
        bench.add(`read P=${partitions} ${codec}`, async () => {
          const reader = await ShuffleReader.open(prefix);
          let rows = 0;
          for await (const batch of reader.readPartitions(0, reader.numPartitions)) rows += batch.numRows;
          await reader.close();
          if (rows !== ROWS) throw new Error(`read ${rows} rows, wrote ${ROWS}`);
        });
        await bench.run();
        const [write, read] = bench.tasks.map((task) => {
          const result = task.result;
          if (result.state !== 'completed') throw new Error(`${task.name}: ${result.state}`);
          return result.latency.p50;
        });
        results.push({ partitions, codec, rows: ROWS, inputBytes, outputBytes, writeMs: write!, readMs: read! });
        console.log(formatRow(results[results.length - 1]!));
      }
    }
    spill = await spillComparison(batches, inputBytes, dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  if (args.has('--json')) console.log(JSON.stringify({ results, spill }, null, 2));
  if (!quick) {
    await writeFile(new URL('./RESULTS.md', import.meta.url), resultsMarkdown(results, spill));
    console.log('wrote bench/RESULTS.md');
  }
}

/**
 * The same batches at P = 200 into an unlimited writer and into one whose pool
 * is 1/32 of the input, alternating (unlimited first in even rounds, spilling
 * first in odd ones) so that drift on a shared machine hits both alike;
 * medians over the rounds. Each round is a tinybench run of one iteration of
 * each, after one warm-up iteration of each in the first round.
 */
async function spillComparison(batches: RecordBatch[], inputBytes: number, dir: string): Promise<SpillResult> {
  const codec: CodecName = 'lz4';
  const limit = Math.floor(inputBytes / SPILL_FRACTION);
  const prefix = join(dir, 'spill');
  const last = new Map<string, ShuffleWriteResult>();
  const times = new Map<string, number[]>();
  const write = (name: string, memoryLimit: number | null) => async () => {
    const writer = await ShuffleWriter.create({
      numPartitions: SPILL_PARTITIONS,
      partitioning: { kind: 'hash', keys: ['key'] },
      outputPrefix: `${prefix}-${name}`,
      overwrite: true,
      codec,
      memoryPool: memoryLimit === null ? undefined : new MemoryPool(memoryLimit),
      spillDir: dir,
    });
    for (const batch of batches) await writer.write(batch);
    last.set(name, await writer.finish());
  };
  const cases = [
    { name: 'unlimited', run: write('unlimited', null) },
    { name: 'limited', run: write('limited', limit) },
  ];
  for (let round = 0; round < ITERATIONS; round++) {
    const bench = new Bench({ iterations: 1, time: 0, warmupIterations: round === 0 ? 1 : 0, warmupTime: 0 });
    for (const c of round % 2 === 0 ? cases : [...cases].reverse()) bench.add(c.name, c.run);
    await bench.run();
    for (const task of bench.tasks) {
      const result = task.result;
      if (result.state === 'errored') throw new Error(`spill comparison, ${task.name}: ${result.error.message}`, { cause: result.error });
      if (result.state !== 'completed') throw new Error(`spill comparison, ${task.name}: ${result.state}`);
      times.set(task.name, [...(times.get(task.name) ?? []), result.latency.p50]);
    }
  }
  // the spilled output must hold every row
  const reader = await ShuffleReader.open(`${prefix}-limited`);
  let rows = 0;
  for await (const batch of reader.readPartitions(0, reader.numPartitions)) rows += batch.numRows;
  await reader.close();
  const totalRows = batches.reduce((sum, b) => sum + b.numRows, 0);
  if (rows !== totalRows) throw new Error(`spill comparison: read ${rows} rows, wrote ${totalRows}`);

  const summary = (name: string, memoryLimit: number | null): SpillCase => {
    const result = last.get(name)!;
    return {
      memoryLimit,
      writeMs: median(times.get(name)!),
      spills: result.spills,
      spilledBytes: result.spilledBytes,
      peakMemoryBytes: result.peakMemoryBytes,
      outputBytes: result.bytesWritten,
    };
  };
  const unlimited = summary('unlimited', null);
  const limited = summary('limited', limit);
  const spill: SpillResult = {
    partitions: SPILL_PARTITIONS,
    codec,
    rows: totalRows,
    inputBytes,
    rounds: ITERATIONS,
    unlimited,
    limited,
    ratio: limited.writeMs / unlimited.writeMs,
  };
  for (const line of spillLines(spill)) console.log(line);
  return spill;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(2);

/** "2.75 MiB (1/32)" */
function limitLabel(s: SpillResult): string {
  const limit = s.limited.memoryLimit!;
  return `${mib(limit)} MiB (1/${(s.inputBytes / limit).toFixed(0)})`;
}


function spillLines(s: SpillResult): string[] {
  const verdict = s.ratio <= SPILL_TARGET_RATIO ? 'within' : 'MISSES';
  return [
    `spill P=${s.partitions} ${s.codec}: unlimited: ${s.unlimited.writeMs.toFixed(0)} ms (peak ${mib(s.unlimited.peakMemoryBytes)} MiB), ` +
      `limit ${limitLabel(s)}: ${s.limited.writeMs.toFixed(0)} ms (peak ${mib(s.limited.peakMemoryBytes)} MiB, ` +
      `${s.limited.spills} spills, ${(s.limited.spilledBytes / 1e6).toFixed(1)} MB spilled)`,
    `  ratio ${s.ratio.toFixed(2)}x, ${verdict} the ${SPILL_TARGET_RATIO}x target (median of ${s.rounds} alternating rounds)`,
  ];
}

function spillMarkdown(s: SpillResult): string {
  const row = (label: string, c: SpillCase) =>
    `| ${label} | ${c.writeMs.toFixed(0)} | ${mrows(s.rows, c.writeMs)} | ${(c.writeMs / s.unlimited.writeMs).toFixed(2)}x | ${c.spills} | ` +
    `${(c.spilledBytes / 1e6).toFixed(1)} | ${mib(c.peakMemoryBytes)} | ${(c.outputBytes / 1e6).toFixed(1)} |`;
  return `## Spilling under a memory limit

The same input at P = ${s.partitions}, ${s.codec}, in one process: once with unlimited memory, once with a
memory pool of ${limitLabel(s)} of the input's ${(s.inputBytes / 1e6).toFixed(0)} MB of Arrow buffers. The two runs
alternate (${s.rounds} rounds, median; the first round after a warm-up of each) so that drift on the
machine affects both alike. "peak memory" is \`result.peakMemoryBytes\`, the most the writer had
reserved in its pool at once; spill files go to the OS temp directory.

| memory limit | write ms | write M rows/s | vs unlimited | spills | spilled MB | peak memory MiB | output MB |
| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${row('unlimited', s.unlimited)}
${row(limitLabel(s), s.limited)}

Target: the spilling write within ${SPILL_TARGET_RATIO}x of the unlimited one; measured **${s.ratio.toFixed(2)}x**
(${s.ratio <= SPILL_TARGET_RATIO ? 'met' : 'missed'}).
`;
}

const mrows = (rows: number, ms: number) => (rows / ms / 1000).toFixed(2);
const mbps = (bytes: number, ms: number) => (bytes / ms / 1000).toFixed(0);

function formatRow(r: CaseResult): string {
  return `P=${r.partitions} ${r.codec}: write ${mrows(r.rows, r.writeMs)} M rows/s (${mbps(r.inputBytes, r.writeMs)} MB/s), ` +
    `read ${mrows(r.rows, r.readMs)} M rows/s, output ${(r.outputBytes / 1e6).toFixed(1)} MB`;
}

function resultsMarkdown(results: CaseResult[], spill: SpillResult): string {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const rows = results.map((r) =>
    `| ${r.partitions} | ${r.codec} | ${mrows(r.rows, r.writeMs)} | ${mbps(r.inputBytes, r.writeMs)} | ${mrows(r.rows, r.readMs)} | ${mbps(r.inputBytes, r.readMs)} | ${(r.outputBytes / 1e6).toFixed(1)} | ${(r.outputBytes / r.rows).toFixed(1)} |`,
  );
  return `# Benchmark results

Generated by \`npm run bench\` (bench/run.ts) on ${new Date().toISOString().slice(0, 10)},
Node ${process.version}, ${cpus().length} × ${cpu}. Median of ${ITERATIONS} iterations after one warm-up.

Shape: the standard narrow shape, ${results[0]?.rows.toLocaleString('en-US')} rows in batches of ${BATCH_ROWS}
(int64 key, float64, utf8 of ~20 bytes, int32 with 10 % nulls; ${((results[0]?.inputBytes ?? 0) / 1e6).toFixed(0)} MB of Arrow buffers),
hash-partitioned on the key. "write" is end to end: create, split, compress, write the data, index and
checksum files, commit. "read" reads every partition back (checksum check, decompression, RecordBatches).
Single process; compression runs on the libuv pool, so both cores are used.

| partitions | codec | write M rows/s | write MB/s | read M rows/s | read MB/s | output MB | bytes/row |
| ---: | :--- | ---: | ---: | ---: | ---: | ---: | ---: |
${rows.join('\n')}

${spillMarkdown(spill)}
These figures move 20–50 % between runs on this machine; compare ratios within one run.
`;
}

await main();
