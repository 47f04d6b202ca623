/**
 * One benchmark case: one shuffle of one input at one partition count,
 * codec and memory setting, timed with tinybench (write, then read, each
 * `iterations` times after `warmup` untimed runs; medians), with the output
 * size, spills and peak memory of the last write.
 */
import { join } from 'node:path';
import type { RecordBatch, Schema } from 'apache-arrow';
import { Bench } from 'tinybench';
import { createShuffleWriter, MemoryPool, ShuffleReader, type CodecName, type ShuffleWriteResult, type WriterKind } from '../src/index.js';
import { readObjectRows, writeObjectRows } from './object-row-shuffle.js';

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
   * (what it held, exactly); object: growth of heap + ArrayBuffers from the
   * start of the write to the moment every row is grouped (when the shuffle
   * holds the most), sampled without a collection (garbage not yet collected
   * counts too)
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
  iterations: number;
  warmup: number;
}

const WRITER_OF: Record<Exclude<ShuffleName, 'object'>, WriterKind> = { columnar: 'hash', sort: 'sort' };

export async function measureCase(spec: CaseSpec, input: Input, dir: string, timing: Timing): Promise<CaseResult> {
  const prefix = join(dir, `${spec.shape}-${spec.shuffle}-p${spec.partitions}-${spec.codec}-${spec.memoryLimit ?? 'unlimited'}`);
  // what the last write reported (a holder: the writes run inside tinybench's callbacks)
  const last: { result: { outputBytes: number; spills: number; spilledBytes: number; peakMemoryBytes: number } | null } = { result: null };
  let write: () => Promise<void>;
  let read: () => Promise<number>;
  if (spec.shuffle === 'object') {
    write = async () => {
      const before = process.memoryUsage();
      let grouped = 0;
      const result = await writeObjectRows(input.batches, {
        numPartitions: spec.partitions,
        key: input.key,
        codec: spec.codec,
        outputPrefix: prefix,
        onGrouped: () => {
          const now = process.memoryUsage();
          grouped = now.heapUsed + now.arrayBuffers - (before.heapUsed + before.arrayBuffers);
        },
      });
      last.result = { outputBytes: result.bytesWritten, spills: 0, spilledBytes: 0, peakMemoryBytes: Math.max(0, grouped) };
    };
    read = async () => {
      let rows = 0;
      for await (const batch of readObjectRows(prefix, input.schema, spec.codec)) rows += batch.numRows;
      return rows;
    };
  } else {
    const kind = WRITER_OF[spec.shuffle];
    // one pool for every write of the case, as map tasks one after another share one: each write gets the buffers the last gave back
    const pool = spec.memoryLimit === null ? undefined : new MemoryPool(spec.memoryLimit);
    write = async () => {
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
      last.result = { outputBytes: result.bytesWritten, spills: result.spills, spilledBytes: result.spilledBytes, peakMemoryBytes: result.peakMemoryBytes };
    };
    read = async () => {
      const reader = await ShuffleReader.open(prefix);
      let rows = 0;
      try {
        for await (const batch of reader.readPartitions(0, reader.numPartitions)) rows += batch.numRows;
      } finally {
        await reader.close();
      }
      return rows;
    };
  }
  const bench = new Bench({ iterations: timing.iterations, time: 0, warmupIterations: timing.warmup, warmupTime: 0 });
  // a full collection before every timed run, outside the timing (when node runs with --expose-gc, as npm run bench does):
  // one case's garbage is not collected on the next case's time, and the object-row shuffle's memory sample starts clean
  const collect = { beforeEach: () => (globalThis as { gc?: () => void }).gc?.() };
  bench.add('write', write, collect);
  bench.add('read', async () => {
    const rows = await read();
    if (rows !== input.rows) throw new Error(`${spec.shuffle}: read ${rows} rows, wrote ${input.rows}`);
  }, collect);
  await bench.run();
  const [writeMs, readMs] = bench.tasks.map((task) => {
    const result = task.result;
    if (result.state === 'errored') throw new Error(`${spec.shuffle} ${task.name}: ${result.error.message}`, { cause: result.error });
    if (result.state !== 'completed') throw new Error(`${spec.shuffle} ${task.name}: ${result.state}`);
    return result.latency.p50;
  });
  if (last.result === null) throw new Error(`${spec.shuffle}: the write never ran`);
  return { ...spec, rows: input.rows, inputBytes: input.inputBytes, writeMs: writeMs!, readMs: readMs!, ...last.result };
}
