/**
 * One benchmark case: the three shuffles of one input at one partition
 * count, codec and memory setting, timed in rounds with tinybench. Each
 * round is one tinybench run of one iteration of every shuffle's write and
 * then its read, in an order that rotates from round to round (columnar,
 * sort, object; then sort, object, columnar; ...), so that drift on a shared
 * machine hits every shuffle alike; the figures are medians over the rounds.
 * The first round runs `warmup` untimed iterations of each first. Each
 * timed write creates its output anew (freshOutput). Output size, spills and
 * peak memory are those of each shuffle's last write.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { RecordBatch, Schema } from 'apache-arrow';
import { Bench, type TaskResult } from 'tinybench';
import { createShuffleWriter, MemoryPool, outputPaths, ShuffleReader, type CodecName, type ShuffleWriteResult, type WriterKind } from '../src/index.js';
import { readObjectRows, writeObjectRows } from './object-row-shuffle.js';

/**
 * The pool the two library writers use without a memory limit: unbounded, as
 * the default pool of writers created without one, but it keeps its idle
 * buffers for good. The default pool lets them go after 2 s with nothing
 * reserved; the object-row shuffle's wide and nested rounds take 2.3-3.6 s
 * without reserving anything, so the library writer after them started with
 * fresh memory (a wide columnar write 517 ms against 444 after a shorter
 * pause), which a job's map tasks, run one after another, do not.
 */
export const UNLIMITED_POOL = new MemoryPool(Number.POSITIVE_INFINITY, { releaseIdleAfterMs: Number.POSITIVE_INFINITY });

/** The three shuffles: the columnar (hash) writer, the sort-based row writer, the naive object-row shuffle. */
export type ShuffleName = 'columnar' | 'sort' | 'object';
export const SHUFFLES: readonly ShuffleName[] = ['columnar', 'sort', 'object'];
export const SHUFFLE_LABELS: Record<ShuffleName, string> = {
  columnar: 'columnar (hash writer)',
  sort: 'sort-based row writer',
  object: 'object rows (v8.serialize)',
};

export interface Input {
  shape: string;
  key: string;
  schema: Schema;
  batches: RecordBatch[];
  rows: number;
  inputBytes: number;
}

export interface CaseSpec {
  shape: string;
  shuffle: ShuffleName;
  partitions: number;
  codec: CodecName;
  /** null: unlimited */
  memoryLimit: number | null;
}

export interface CaseResult extends CaseSpec {
  rows: number;
  inputBytes: number;
  /** medians, milliseconds */
  writeMs: number;
  readMs: number;
  outputBytes: number;
  spills: number;
  spilledBytes: number;
  /**
   * columnar and sort: the most the writer had reserved in its memory pool
   * (what it held, exactly); object: growth of the JS heap from the start of
   * the write to the moment every row is grouped (when the shuffle holds the
   * most; its rows are heap objects), sampled without a collection (garbage
   * not yet collected counts too). Not ArrayBuffers: V8 frees their memory
   * on a background thread after a collection, so the previous run's buffers
   * may still count at the start and be gone by the sample.
   */
  peakMemoryBytes: number;
  /** set when the shuffle could not run the case (e.g. CS_MEMORY_LIMIT: the limit is below what it needs); the figures are then NaN */
  error?: string;
}

/** A case the shuffle failed: the error's code (or message) and NaN figures. */
export function failedCase(spec: CaseSpec, input: Input, error: unknown): CaseResult {
  let cause: unknown = error;
  while (cause instanceof Error && !('code' in cause) && cause.cause !== undefined) cause = cause.cause;
  const code = cause instanceof Error && 'code' in cause ? String((cause as { code: unknown }).code) : String((error as Error)?.message ?? error);
  return { ...spec, rows: input.rows, inputBytes: input.inputBytes, writeMs: NaN, readMs: NaN, outputBytes: NaN, spills: NaN, spilledBytes: NaN, peakMemoryBytes: NaN, error: code };
}

export interface Timing {
  /** timed runs of each shuffle's write and read, one per round */
  rounds: number;
  /** untimed runs of each before the first round */
  warmup: number;
}

const WRITER_OF: Record<Exclude<ShuffleName, 'object'>, WriterKind> = { columnar: 'hash', sort: 'sort' };

/** A shuffle's write and read of one case, and what its last write reported. */
interface Runner {
  spec: CaseSpec;
  input: Input;
  /** the prefix of the output files its write creates */
  prefix: string;
  write: () => Promise<void>;
  /** rows read */
  read: () => Promise<number>;
  last: WriteFigures | null;
}

type WriteFigures = Pick<CaseResult, 'outputBytes' | 'spills' | 'spilledBytes' | 'peakMemoryBytes'>;

function runnerOf(spec: CaseSpec, input: Input, dir: string): Runner {
  const prefix = join(dir, `${spec.shape}-${spec.shuffle}-p${spec.partitions}-${spec.codec}-${spec.memoryLimit ?? 'unlimited'}`);
  const runner: Runner = { spec, input, prefix, write: async () => {}, read: async () => 0, last: null };
  if (spec.shuffle === 'object') {
    runner.write = async () => {
      const before = process.memoryUsage();
      let grouped = 0;
      const result = await writeObjectRows(input.batches, {
        numPartitions: spec.partitions,
        key: input.key,
        codec: spec.codec,
        outputPrefix: prefix,
        onGrouped: () => {
          const now = process.memoryUsage();
          grouped = now.heapUsed - before.heapUsed;
        },
      });
      runner.last = { outputBytes: result.bytesWritten, spills: 0, spilledBytes: 0, peakMemoryBytes: Math.max(0, grouped) };
    };
    runner.read = async () => {
      let rows = 0;
      for await (const batch of readObjectRows(prefix, input.schema, spec.codec)) rows += batch.numRows;
      return rows;
    };
    return runner;
  }
  const kind = WRITER_OF[spec.shuffle];
  // one pool for every write of the case, as map tasks one after another share one: each write gets the buffers the last gave back
  const pool = spec.memoryLimit === null ? UNLIMITED_POOL : new MemoryPool(spec.memoryLimit);
  runner.write = async () => {
    const writer = await createShuffleWriter(kind, {
      numPartitions: spec.partitions,
      partitioning: { kind: 'hash', keys: [input.key] },
      outputPrefix: prefix,
      codec: spec.codec,
      overwrite: true,
      memoryPool: pool,
      spillDir: dir,
    });
    for (const batch of input.batches) await writer.write(batch);
    const result: ShuffleWriteResult = await writer.finish();
    runner.last = { outputBytes: result.bytesWritten, spills: result.spills, spilledBytes: result.spilledBytes, peakMemoryBytes: result.peakMemoryBytes };
  };
  runner.read = async () => {
    const reader = await ShuffleReader.open(prefix);
    let rows = 0;
    try {
      for await (const batch of reader.readPartitions(0, reader.numPartitions)) rows += batch.numRows;
    } finally {
      await reader.close();
    }
    return rows;
  };
  return runner;
}

/**
 * Measures `specs` (one case, one spec per shuffle; `inputOf` gives each its
 * input) in `timing.rounds` rounds. A shuffle that fails under a memory
 * limit (e.g. CS_MEMORY_LIMIT: the limit is below what it needs) is a result
 * too (`failedCase`) and leaves the later rounds; without a limit, a failure
 * throws.
 */
export async function measureCase(specs: readonly CaseSpec[], inputOf: (spec: CaseSpec) => Input, dir: string, timing: Timing): Promise<CaseResult[]> {
  let runners = specs.map((spec) => runnerOf(spec, inputOf(spec), dir));
  const times = new Map<Runner, { write: number[]; read: number[] }>(runners.map((r) => [r, { write: [], read: [] }]));
  const failed = new Map<Runner, CaseResult>();
  // a full collection before every timed run, outside the timing (when node runs with --expose-gc, as npm run bench does):
  // one run's garbage is not collected on the next one's time, and the object-row shuffle's memory sample starts clean
  const collect = { beforeEach: collectGarbage };
  for (let round = 0; round < timing.rounds && runners.length > 0; round++) {
    const bench = new Bench({ iterations: 1, time: 0, warmupIterations: round === 0 ? timing.warmup : 0, warmupTime: 0, warmup: round === 0 && timing.warmup > 0 });
    const order = runners.map((_, i) => runners[(i + round) % runners.length]!);
    const tasks = order.map((runner) => {
      const name = runner.spec.shuffle;
      bench.add(`${name} write`, runner.write, { beforeEach: () => freshOutput(runner.prefix) });
      bench.add(`${name} read`, async () => {
        const rows = await runner.read();
        if (rows !== runner.input.rows) throw new Error(`${name}: read ${rows} rows, wrote ${runner.input.rows}`);
      }, collect);
      return { runner, write: bench.getTask(`${name} write`)!, read: bench.getTask(`${name} read`)! };
    });
    await bench.run();
    for (const { runner, write, read } of tasks) {
      const writeMs = outcome(write.result, write.name);
      const readMs = outcome(read.result, read.name);
      if (typeof writeMs === 'number' && typeof readMs === 'number') {
        times.get(runner)!.write.push(writeMs);
        times.get(runner)!.read.push(readMs);
        continue;
      }
      const cause = typeof writeMs === 'number' ? (readMs as Error) : writeMs;
      if (runner.spec.memoryLimit === null) throw new Error(`${runner.spec.shuffle}: ${cause.message}`, { cause });
      failed.set(runner, failedCase(runner.spec, runner.input, cause));
    }
    runners = runners.filter((runner) => !failed.has(runner));
  }
  return [...times.keys()].map((runner) => {
    const failure = failed.get(runner);
    if (failure !== undefined) return failure;
    if (runner.last === null) throw new Error(`${runner.spec.shuffle}: the write never ran`);
    const { write, read } = times.get(runner)!;
    return { ...runner.spec, rows: runner.input.rows, inputBytes: runner.input.inputBytes, writeMs: median(write), readMs: median(read), ...runner.last };
  });
}

function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/**
 * Before a timed write, outside its timing: removes the output the last
 * write left at `prefix`, as a map task writes a new one (replacing it cost
 * the write 25-60 ms of freeing the old file's 30-100 MB, in the rename or
 * truncation), then collects garbage.
 */
export async function freshOutput(prefix: string): Promise<void> {
  const paths = outputPaths(prefix);
  await Promise.all([paths.data, paths.index, paths.checksum].map((path) => rm(path, { force: true })));
  collectGarbage();
}

/** A task's latency in its one run, or why it has none. */
function outcome(result: TaskResult, name: string): number | Error {
  if (result.state === 'completed') return result.latency.p50;
  return result.state === 'errored' ? result.error : new Error(`${name}: ${result.state}`);
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
