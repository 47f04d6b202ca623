/**
 * What the suite's numbers mean: ratios measured in the same run, the
 * crossover partition count, the RESULTS.md tables and the chart.
 */
import type { CodecName } from '../src/index.js';
import { lineChart, type Series } from './chart.js';
import { SHUFFLE_LABELS, SHUFFLES, type CaseResult, type ShuffleName } from './measure.js';
import { SPILL_TARGET_RATIO, type SpillResult } from './spill-comparison.js';

export interface SuiteMeta {
  date: string;
  node: string;
  cpus: number;
  cpu: string;
  profile: 'full' | 'quick';
  /** rows per shape (the object-row shuffle runs on objectRows) */
  rows: Record<string, number>;
  objectRows: Record<string, number>;
  inputBytes: Record<string, number>;
  rounds: number;
  /** rounds of the cases the targets are read from (P = 200, lz4, unlimited) */
  targetRounds: number;
  warmup: number;
  partitionCounts: number[];
  tightFraction: number;
  tightFloor: number;
}

export interface SuiteResults {
  meta: SuiteMeta;
  cases: CaseResult[];
  spill: SpillResult[];
  derived: Derived;
}

/** The issue's targets, read from the cases. */
export const TARGETS = { columnarOverSort: 5, columnarOverObject: 20, bytesColumnarOverSort: 1, at: 200, columnarRowsPerSecond: 4e6 };

export interface Crossover {
  /** the smallest measured P at which the sort writer is at least as fast as the columnar one, or null */
  firstP: number | null;
  /** log-linear interpolation of where columnar ÷ sort crosses 1 between measured points, or null */
  estimate: number | null;
  /** columnar ÷ sort at each P */
  ratios: [number, number][];
}

export interface Derived {
  perShape: Record<string, {
    /** the columnar writer at P = 200, lz4, unlimited memory: rows per second written, and written and read back */
    columnarWriteRate: number | null;
    columnarEndToEndRate: number | null;
    /** end to end (write + read), at P = 200, lz4, unlimited memory */
    columnarOverSort: number | null;
    columnarOverObject: number | null;
    writeColumnarOverSort: number | null;
    bytesColumnarOverSort: number | null;
    crossoverEndToEnd: Crossover;
    crossoverWrite: Crossover;
  }>;
}

export const e2eMs = (c: CaseResult) => c.writeMs + c.readMs;
/** rows per second, end to end */
export const e2eRate = (c: CaseResult) => c.rows / (e2eMs(c) / 1000);
export const writeRate = (c: CaseResult) => c.rows / (c.writeMs / 1000);
export const readRate = (c: CaseResult) => c.rows / (c.readMs / 1000);

function find(cases: readonly CaseResult[], shape: string, shuffle: ShuffleName, partitions: number, codec: CodecName = 'lz4', memoryLimit: number | null = null): CaseResult | undefined {
  return cases.find((c) => c.shape === shape && c.shuffle === shuffle && c.partitions === partitions && c.codec === codec && c.memoryLimit === memoryLimit);
}

function crossover(cases: readonly CaseResult[], shape: string, partitionCounts: readonly number[], rate: (c: CaseResult) => number): Crossover {
  const ratios: [number, number][] = [];
  for (const p of partitionCounts) {
    const col = find(cases, shape, 'columnar', p);
    const sort = find(cases, shape, 'sort', p);
    if (col && sort) ratios.push([p, rate(col) / rate(sort)]);
  }
  const first = ratios.find(([, r]) => r <= 1);
  let estimate: number | null = null;
  if (first !== undefined) {
    const i = ratios.indexOf(first);
    if (i === 0) estimate = first[0];
    else {
      const [p0, r0] = ratios[i - 1]!;
      const [p1, r1] = first;
      // where log(ratio) crosses 0, linear in log(P)
      const t = Math.log(r0) / (Math.log(r0) - Math.log(r1));
      estimate = Math.round(Math.exp(Math.log(p0) + t * (Math.log(p1) - Math.log(p0))));
    }
  }
  return { firstP: first?.[0] ?? null, estimate, ratios };
}

export function derive(meta: SuiteMeta, cases: readonly CaseResult[]): Derived {
  const perShape: Derived['perShape'] = {};
  for (const shape of Object.keys(meta.rows)) {
    const col = find(cases, shape, 'columnar', TARGETS.at);
    const sort = find(cases, shape, 'sort', TARGETS.at);
    const object = find(cases, shape, 'object', TARGETS.at);
    perShape[shape] = {
      columnarWriteRate: col ? writeRate(col) : null,
      columnarEndToEndRate: col ? e2eRate(col) : null,
      columnarOverSort: col && sort ? e2eRate(col) / e2eRate(sort) : null,
      columnarOverObject: col && object ? e2eRate(col) / e2eRate(object) : null,
      writeColumnarOverSort: col && sort ? writeRate(col) / writeRate(sort) : null,
      bytesColumnarOverSort: col && sort ? col.outputBytes / sort.outputBytes : null,
      crossoverEndToEnd: crossover(cases, shape, meta.partitionCounts, e2eRate),
      crossoverWrite: crossover(cases, shape, meta.partitionCounts, writeRate),
    };
  }
  return { perShape };
}

// ---------------------------------------------------------------------------------------------
// formatting

const mrows = (rate: number) => (rate / 1e6).toFixed(rate >= 1e6 ? 2 : 3);
const mbps = (bytes: number, ms: number) => (bytes / ms / 1000).toFixed(0);
const mb = (bytes: number) => (bytes / 1e6).toFixed(1);
const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(2);
const x = (r: number | null) => (r === null ? 'n/a' : `${r.toFixed(2)}x`);
const rate = (r: number | null) => (r === null ? 'n/a' : mrows(r));

function row(c: CaseResult, extra: string[] = []): string {
  if (c.error !== undefined) {
    return `| ${[SHUFFLE_LABELS[c.shuffle], c.rows.toLocaleString('en-US'), `failed: ${c.error}`, '', '', '', '', '', '', '', ...extra.map(() => '')].join(' | ')} |`;
  }
  return `| ${[
    c.shuffle === 'object' ? `${SHUFFLE_LABELS[c.shuffle]} *` : SHUFFLE_LABELS[c.shuffle],
    c.rows.toLocaleString('en-US'),
    mrows(writeRate(c)),
    mbps(c.inputBytes, c.writeMs),
    mrows(readRate(c)),
    mbps(c.inputBytes, c.readMs),
    `**${mrows(e2eRate(c))}**`,
    mb(c.outputBytes),
    (c.outputBytes / c.rows).toFixed(1),
    mib(c.peakMemoryBytes),
    ...extra,
  ].join(' | ')} |`;
}

const CASE_HEADER = '| shuffle | rows | write M rows/s | write MB/s | read M rows/s | read MB/s | end to end M rows/s | output MB | bytes/row | peak memory MiB |';
const CASE_ALIGN = '| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |';

function crossoverText(c: Crossover, maxP: number): string {
  if (c.firstP === null) return `not reached: the columnar writer is faster at every P up to ${maxP.toLocaleString('en-US')}`;
  if (c.firstP === c.ratios[0]?.[0]) return `already at P = ${c.firstP} (the sort writer is at least as fast at every P measured)`;
  return `P = ${c.firstP.toLocaleString('en-US')} measured, about ${c.estimate!.toLocaleString('en-US')} interpolated`;
}

function verdict(value: number | null, target: number, atLeast: boolean): string {
  if (value === null) return 'not measured';
  return (atLeast ? value >= target : value <= target) ? 'met' : '**missed**';
}

export function resultsMarkdown(results: SuiteResults): string {
  const { meta, cases, spill, derived } = results;
  const shapes = Object.keys(meta.rows);
  const maxP = Math.max(...meta.partitionCounts);
  const out: string[] = [];
  out.push(`# Benchmark results

Generated by \`npm run bench\` (bench/run.ts and the library compiled by tsc, as the package ships; profile \`${meta.profile}\`) on ${meta.date}, Node ${meta.node},
${meta.cpus} × ${meta.cpu}. **A shared 2-core machine**: other engineers' jobs ran at the same time, so absolute
figures move 20–50 % between runs; the ratios below are between shuffles measured in the same run and the same
rounds: each round of a case writes and reads with every shuffle, one after the other, in an order that rotates
from round to round, so drift hits all of them alike. Each figure is the median of ${meta.rounds} rounds (${meta.targetRounds} at P = 200,
lz4, unlimited memory: the cases the targets are read from) after ${meta.warmup} warm-up of each.

Three shuffles of the same input, hash-partitioned on the key:

- **columnar**: this library's columnar hash writer (\`ShuffleWriter\`, partitions are Arrow IPC streams);
- **sort**: this library's sort-based row writer (\`SortShuffleWriter\`, Spark's UnsafeShuffleWriter / Gluten's
  sort writer: compact rows in pooled pages, packed pointers radix-sorted by partition, compressed blocks);
- **object** (\\*): the naive object-row shuffle a Node job runner writes without this library
  (bench/object-row-shuffle.ts: a JS object per row, \`v8.serialize\` per partition, the same codec; read back
  into RecordBatches with arrow-js builders). It holds every row in memory and is slow, so it runs on
  ${shapes.map((s) => `${meta.objectRows[s]!.toLocaleString('en-US')} ${s}`).join(' and ')} rows (the first rows of the same input); its figures are rates, so they compare.

Inputs: **narrow** (int64 key, float64, utf8 ~20 B, int32 10 % null), ${meta.rows['narrow']?.toLocaleString('en-US')} rows,
${mb(meta.inputBytes['narrow'] ?? 0)} MB of Arrow buffers; **wide** (16 lineitem-like columns: ints, 4 × decimal128(15,2), a
flag, a bool, 3 dates, two short strings, a 10-43 B comment), ${meta.rows['wide']?.toLocaleString('en-US')} rows, ${mb(meta.inputBytes['wide'] ?? 0)} MB;
**nested** (int64 key, list<int32> of 0-6 items, struct<int32, utf8>, map<utf8, int64> of 0-4 entries; nulls at
the list and struct level), ${meta.rows['nested']?.toLocaleString('en-US') ?? 'no'} rows, ${mb(meta.inputBytes['nested'] ?? 0)} MB;
batches of 8192 rows.
"write" is end to end: create, partition, encode/split, sort, compress, write the data, index and checksum files,
commit; it creates a new output, as a map task does (the last write's output is removed before it, untimed:
replacing it cost 25-60 ms more per write). "read" reads every partition back into RecordBatches (checksums,
decompression, decoding).
"end to end" is rows / (write + read). MB/s are input MB (Arrow buffers) per second. "peak memory" is the
writer's peak reservation in its memory pool (exact accounting) for the two library writers, and the sampled
growth of the JS heap once all rows are grouped for the object-row shuffle (its rows are heap objects).
Without a memory limit the two library writers share one unbounded pool, as map tasks created without a pool
share the default one: each timed write gets the large buffers the one before it gave back (at most 512 MiB of
them), as one task after another of a job would. Unlike the default pool, it keeps them however long the
object-row shuffle runs in between (the default lets them go after 2 s with nothing reserved, and the object
rows' wide and nested rounds take longer). With a limit, the writes of a case share a pool of that limit.

The matrix (the full product would take hours here): every partition count (${meta.partitionCounts.join(', ')}) for the three
shuffles with lz4 and unlimited memory; the codecs (lz4, zstd, none) at P = 200; a tight memory limit (1/${meta.tightFraction} of the
input's Arrow bytes, at least ${mib(meta.tightFloor)} MiB) at P = 200 and 1000 for the two library writers (the object-row shuffle cannot work within a limit);
and the spill comparison of issue 3.

![end-to-end throughput against partition count](throughput.svg)
`);

  out.push(`## Targets

Read from this run; not enforced by tests.

| | ${shapes.join(' | ')} | target |
| :--- | ${shapes.map(() => '---:').join(' | ')} | :--- |
| columnar writer at P = 200: write (batches to committed files), M rows/s | ${shapes.map((s) => rate(derived.perShape[s]!.columnarWriteRate)).join(' | ')} | ≥ ${mrows(TARGETS.columnarRowsPerSecond)} on narrow (issue 2): ${verdict(derived.perShape['narrow']?.columnarWriteRate ?? null, TARGETS.columnarRowsPerSecond, true)} |
| columnar writer at P = 200: write + read back, M rows/s | ${shapes.map((s) => rate(derived.perShape[s]!.columnarEndToEndRate)).join(' | ')} | ≥ ${mrows(TARGETS.columnarRowsPerSecond)} on narrow, if "end to end" includes the read: ${verdict(derived.perShape['narrow']?.columnarEndToEndRate ?? null, TARGETS.columnarRowsPerSecond, true)} |
| end to end at P = 200, columnar ÷ sort | ${shapes.map((s) => x(derived.perShape[s]!.columnarOverSort)).join(' | ')} | ≥ ${TARGETS.columnarOverSort}x: ${shapes.map((s) => `${s} ${verdict(derived.perShape[s]!.columnarOverSort, TARGETS.columnarOverSort, true)}`).join(', ')} |
| end to end at P = 200, columnar ÷ object rows | ${shapes.map((s) => x(derived.perShape[s]!.columnarOverObject)).join(' | ')} | ≥ ${TARGETS.columnarOverObject}x: ${shapes.map((s) => `${s} ${verdict(derived.perShape[s]!.columnarOverObject, TARGETS.columnarOverObject, true)}`).join(', ')} |
| write only at P = 200, columnar ÷ sort | ${shapes.map((s) => x(derived.perShape[s]!.writeColumnarOverSort)).join(' | ')} | (for reference) |
| bytes written at P = 200, columnar ÷ sort | ${shapes.map((s) => x(derived.perShape[s]!.bytesColumnarOverSort)).join(' | ')} | ≤ 1: ${shapes.map((s) => `${s} ${verdict(derived.perShape[s]!.bytesColumnarOverSort, TARGETS.bytesColumnarOverSort, false)}`).join(', ')} |
| P where sort overtakes columnar, end to end | ${shapes.map((s) => crossoverText(derived.perShape[s]!.crossoverEndToEnd, maxP)).join(' | ')} | measured and reported (Gluten switches at 4000) |
| P where sort overtakes columnar, write only | ${shapes.map((s) => crossoverText(derived.perShape[s]!.crossoverWrite, maxP)).join(' | ')} | |
`);

  out.push('## Throughput against partition count (lz4, unlimited memory)\n');
  for (const shape of shapes) {
    out.push(`### ${shape}\n`);
    out.push('| P | ' + CASE_HEADER.slice(2));
    out.push('| ---: ' + CASE_ALIGN);
    for (const p of meta.partitionCounts) {
      for (const shuffle of SHUFFLES) {
        const c = find(cases, shape, shuffle, p);
        if (c) out.push(`| ${p} ` + row(c));
      }
    }
    out.push('');
    out.push('| P | columnar ÷ sort, end to end | columnar ÷ sort, write | columnar ÷ sort, read | columnar ÷ object, end to end | bytes columnar ÷ sort |');
    out.push('| ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const p of meta.partitionCounts) {
      const col = find(cases, shape, 'columnar', p);
      const sort = find(cases, shape, 'sort', p);
      const object = find(cases, shape, 'object', p);
      if (!col || !sort) continue;
      out.push(`| ${p} | ${x(e2eRate(col) / e2eRate(sort))} | ${x(writeRate(col) / writeRate(sort))} | ${x(readRate(col) / readRate(sort))} | ${object ? x(e2eRate(col) / e2eRate(object)) : 'n/a'} | ${x(col.outputBytes / sort.outputBytes)} |`);
    }
    out.push('');
  }

  out.push(`## Codecs at P = ${TARGETS.at} (unlimited memory)\n`);
  out.push('| shape | codec ' + CASE_HEADER.slice(1) + ' columnar ÷ sort, end to end |');
  out.push('| :--- | :--- ' + CASE_ALIGN.slice(1) + ' ---: |');
  for (const shape of shapes) {
    for (const codec of ['lz4', 'zstd', 'none'] as const) {
      const col = find(cases, shape, 'columnar', TARGETS.at, codec);
      const sort = find(cases, shape, 'sort', TARGETS.at, codec);
      for (const shuffle of SHUFFLES) {
        const c = find(cases, shape, shuffle, TARGETS.at, codec);
        if (c) out.push(`| ${shape} | ${codec} ` + row(c, [shuffle === 'columnar' && col && sort ? x(e2eRate(col) / e2eRate(sort)) : '']));
      }
    }
  }
  out.push('');

  const tight = cases.filter((c) => c.memoryLimit !== null);
  if (tight.length > 0) {
    out.push(`## A tight memory limit (1/${meta.tightFraction} of the input's Arrow bytes, at least ${mib(meta.tightFloor)} MiB), lz4\n`);
    out.push('| shape | P | limit MiB ' + CASE_HEADER.slice(1) + ' spills | spilled MB | write time vs unlimited |');
    out.push('| :--- | ---: | ---: ' + CASE_ALIGN.slice(1) + ' ---: | ---: | ---: |');
    for (const c of tight) {
      const unlimited = find(cases, c.shape, c.shuffle, c.partitions);
      out.push(`| ${c.shape} | ${c.partitions} | ${mib(c.memoryLimit!)} ` + row(c, [String(c.spills), mb(c.spilledBytes), unlimited ? x(c.writeMs / unlimited.writeMs) : 'n/a']));
    }
    out.push('');
    out.push('Peak memory stays within the limit for both writers (it is the pool reservation, which the writers never exceed). ' +
      'A writer that cannot work within the limit fails with CS_MEMORY_LIMIT; such a case is shown as failed.\n');
  }

  for (const s of spill) out.push(spillMarkdown(s));
  return `${out.join('\n')}\n`;
}

function spillMarkdown(s: SpillResult): string {
  const label = `${mib(s.limited.memoryLimit!)} MiB (1/${(s.inputBytes / s.limited.memoryLimit!).toFixed(0)})`;
  const line = (name: string, c: SpillResult['unlimited']) =>
    `| ${name} | ${c.writeMs.toFixed(0)} | ${mrows(s.rows / (c.writeMs / 1000))} | ${(c.writeMs / s.unlimited.writeMs).toFixed(2)}x | ${c.spills} | ${mb(c.spilledBytes)} | ${mib(c.peakMemoryBytes)} | ${mb(c.outputBytes)} |`;
  const writer = s.writer === 'hash' ? 'columnar writer' : 'sort writer';
  const target = s.writer === 'hash'
    ? `Target (issue 3): the spilling write within ${SPILL_TARGET_RATIO}x of the unlimited one; measured **${s.ratio.toFixed(2)}x** (${s.ratio <= SPILL_TARGET_RATIO ? 'met' : 'missed'}).`
    : `For comparison (no target): the sort writer spilling costs ${s.ratio.toFixed(2)}x its unlimited write.`;
  return `## Spilling under a memory limit: the ${writer}

The same input (narrow, ${s.rows.toLocaleString('en-US')} rows) at P = ${s.partitions}, ${s.codec}: unlimited memory against a pool of ${label} of the input's
${mb(s.inputBytes)} MB, alternating (${s.rounds} rounds, median; the first after a warm-up of each; each write creates a new output). Spill files go to the OS temp directory.

| memory limit | write ms | write M rows/s | vs unlimited | spills | spilled MB | peak memory MiB | output MB |
| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${line('unlimited', s.unlimited)}
${line(label, s.limited)}

${target}
`;
}

/** Console lines summarizing the targets. */
export function summaryLines(results: SuiteResults): string[] {
  const lines: string[] = [];
  const maxP = Math.max(...results.meta.partitionCounts);
  for (const [shape, d] of Object.entries(results.derived.perShape)) {
    lines.push(
      `${shape}: at P=${TARGETS.at} columnar write ${rate(d.columnarWriteRate)} M rows/s, write + read ${rate(d.columnarEndToEndRate)} M rows/s; end to end columnar/sort ${x(d.columnarOverSort)}, columnar/object ${x(d.columnarOverObject)}, bytes columnar/sort ${x(d.bytesColumnarOverSort)}; ` +
        `sort overtakes columnar (end to end): ${crossoverText(d.crossoverEndToEnd, maxP)}`,
    );
  }
  for (const s of results.spill) lines.push(`spill (${s.writer} writer) P=${s.partitions}: limited/unlimited ${s.ratio.toFixed(2)}x`);
  return lines;
}

const COLORS: Record<ShuffleName, string> = { columnar: '#1f77b4', sort: '#d62728', object: '#7f7f7f' };

/** End-to-end throughput against P for the three shuffles, one panel per shape (lz4, unlimited memory). */
export function throughputChart(results: SuiteResults): string {
  const { meta, cases } = results;
  const panels = Object.keys(meta.rows).map((shape) => ({
    title: `${shape} (${shape === 'narrow' ? '4 columns' : shape === 'nested' ? '4 columns, 3 nested' : '16 columns'})`,
    series: SHUFFLES.map((shuffle): Series => ({
      label: SHUFFLE_LABELS[shuffle],
      color: COLORS[shuffle],
      dashed: shuffle === 'object',
      points: meta.partitionCounts.flatMap((p) => {
        const c = find(cases, shape, shuffle, p);
        return c ? [[p, e2eRate(c) / 1e6] as const] : [];
      }),
    })),
  }));
  return lineChart(panels, {
    title: 'Shuffle throughput, end to end (write + read), lz4',
    xLabel: 'partitions (log scale)',
    yLabel: 'M rows/s (log scale)',
    note: `${meta.date}, ${meta.cpus} × ${meta.cpu}, shared machine; bench/RESULTS.md has the tables`,
  });
}

