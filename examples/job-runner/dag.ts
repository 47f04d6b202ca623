/**
 * A small DAG runner: map stages that shuffle their output, a reduce stage
 * that reads them. Map tasks run in columnar-shuffle's worker pool; a failed
 * task is retried under the next attempt number; reducers read the attempts
 * the runner registered. Everything it does with the shuffle goes through the
 * package's public API.
 */
import type { RecordBatch, Schema } from 'apache-arrow';
import {
  MapOutputTracker,
  MapTaskPool,
  ReduceReader,
  removeShuffleFiles,
  ShuffleError,
  type MapStatus,
  type MapTask,
  type Partitioning,
  type WriterKind,
} from 'columnar-shuffle';
import type { InjectedFault } from './map-tasks.js';
import { SILENT, type ProgressBoard } from './progress.js';

export interface MapStage {
  kind: 'map';
  name: string;
  /** The shuffle this stage writes (one output per task). */
  shuffleId: number;
  tasks: number;
  /** Reduce partitions, and how rows are assigned to them (hash of key columns: Spark's Murmur3, so the partition of a key is Spark's; or range). */
  numPartitions: number;
  partitioning: Partitioning;
  /** The schema of what the transform writes. */
  outputSchema: Schema;
  /** Task `task`'s input, made anew for every attempt: batches sent to a worker are handed over. */
  input(task: number): Iterable<RecordBatch> | AsyncIterable<RecordBatch>;
  /** The task's code, run in the worker (a MapTransform export of a module). */
  transform: { module: URL; export: string; args: Record<string, unknown> };
}

/** What a reduce task gets: its partition, and a reader of that partition of each shuffle it reads. */
export interface ReduceContext {
  partition: number;
  attempt: number;
  read(shuffleId: number): AsyncIterable<RecordBatch>;
}

export interface ReduceStage<T, R> {
  kind: 'reduce';
  name: string;
  /** The shuffles it reads: it runs after the map stages that write them (or with them, pipelined). */
  reads: number[];
  /** One task per partition of the shuffles it reads. */
  tasks: number;
  run(context: ReduceContext): Promise<T>;
  /** The job's answer from every task's result, in partition order. */
  combine(results: T[]): R;
}

export interface Job<T, R> {
  name: string;
  maps: MapStage[];
  reduce: ReduceStage<T, R>;
}

/** A fault for one attempt of one task: `terminate` kills the worker thread mid-write; `zombie` commits a wrong output that the runner then loses. */
export interface Fault {
  stage: string;
  task: number;
  attempt: number;
  kind: 'throw' | 'terminate' | 'zombie';
}

export interface RunOptions {
  /** The shuffle directory (it must exist); the job's files are removed from it at the end. */
  dir: string;
  threads: number;
  /** The map tasks' memory budget, split evenly over the threads. */
  memoryBytes?: number;
  /** The writer of the map tasks' outputs (default `hash`, the columnar one; `sort`, the row writer, pays off with many partitions); reducers read either. */
  writer?: WriterKind;
  /** Run the map tasks in this pool (a runner that lives longer than one job keeps its threads) instead of a new one of `threads` and `memoryBytes`. */
  pool?: MapTaskPool;
  /** Attempts per task before the job fails (default 4). */
  maxAttempts?: number;
  /** Start the reducers with the map tasks: they read outputs as they commit. */
  pipelined?: boolean;
  /** How long a pipelined reducer waits for map outputs (default 60 s). */
  waitTimeoutMs?: number;
  /** Rows per batch the reducers read (default 8192). */
  coalesceRows?: number;
  faults?: readonly Fault[];
  /** Progress bars and retry lines (default: none). */
  progress?: ProgressBoard;
  /** Called at stage boundaries, e.g. for tests to look at the shuffle directory. */
  onStage?: (event: { stage: string; phase: 'start' | 'end' }) => void | Promise<void>;
  /** Keep the shuffle files after the job (default: removed). */
  keepFiles?: boolean;
  /** Aborting it stops the job (its map tasks aborted, its files removed as after a failure); runJob then rejects. */
  signal?: AbortSignal;
}

export interface StageReport {
  name: string;
  kind: 'map' | 'reduce';
  tasks: number;
  /** Attempts run, failed ones included. */
  attempts: number;
  failures: string[];
  ms: number;
  /** Map: rows sent to the tasks, rows they wrote. Reduce: rows read. */
  rowsIn: number;
  rowsOut: number;
  /** Map: bytes of the committed outputs the reducers read (the shuffled bytes), spills, input moved and copied to the workers. */
  bytesShuffled: number;
  spills: number;
  spilledBytes: number;
  transferredBytes: number;
  copiedBytes: number;
  /** Reduce: map outputs read. */
  outputsRead: number;
}

export interface JobResult<R> {
  value: R;
  stages: StageReport[];
  /** The map statuses the reducers read: one attempt per map task. */
  statuses: Map<number, MapStatus[]>;
  /** Files removed at the end. */
  removedFiles: number;
}

export async function runJob<T, R>(job: Job<T, R>, options: RunOptions): Promise<JobResult<R>> {
  const maxAttempts = options.maxAttempts ?? 4;
  const progress = options.progress ?? SILENT;
  const tracker = new MapOutputTracker();
  const pool = options.pool ?? new MapTaskPool({ threads: options.threads, memoryBytes: options.memoryBytes });
  const cancel = new AbortController();
  const stop = () => cancel.abort();
  if (options.signal?.aborted) stop();
  options.signal?.addEventListener('abort', stop, { once: true });
  const running: MapTask[] = [];
  const reports = new Map<string, StageReport>();
  let removedFiles = 0;
  let result: JobResult<R>;
  for (const stage of job.maps) tracker.registerShuffle(stage.shuffleId, stage.tasks);
  try {
    const mapStages = job.maps.map((stage) =>
      runMapStage(stage, { pool, running, tracker, cancel, maxAttempts, progress, options, report: newReport(reports, stage.name, 'map', stage.tasks) }).catch((error: unknown) => {
        tracker.failShuffle(stage.shuffleId, error); // pipelined reducers stop waiting
        cancel.abort();
        throw error;
      }),
    );
    const runReduce = () => runReduceStage(job.reduce, { tracker, cancel, maxAttempts, progress, options, report: newReport(reports, job.reduce.name, 'reduce', job.reduce.tasks) });
    let value: R;
    if (options.pipelined) {
      const reduce = runReduce();
      const [results] = await Promise.all([reduce, ...mapStages] as const);
      value = results;
    } else {
      await Promise.all(mapStages);
      value = await runReduce();
    }
    const statuses = new Map(job.maps.map((s) => [s.shuffleId, tracker.statuses(s.shuffleId)]));
    result = { value, stages: [...reports.values()], statuses, removedFiles: 0 };
  } catch (error) {
    cancel.abort();
    throw error;
  } finally {
    options.signal?.removeEventListener('abort', stop);
    progress.done();
    if (options.pool === undefined) await pool.close();
    else await Promise.all(running.map((task) => task.status.catch(() => undefined))); // a failed job's tasks end before its files go
    if (!options.keepFiles) for (const stage of job.maps) removedFiles += (await removeShuffleFiles(options.dir, stage.shuffleId)).length;
  }
  result.removedFiles = removedFiles;
  return result;
}

interface StageContext {
  tracker: MapOutputTracker;
  cancel: AbortController;
  maxAttempts: number;
  progress: ProgressBoard;
  options: RunOptions;
  report: StageReport;
}

async function runMapStage(stage: MapStage, ctx: StageContext & { pool: MapTaskPool; running: MapTask[] }): Promise<void> {
  const { report } = ctx;
  const started = performance.now();
  await ctx.options.onStage?.({ stage: stage.name, phase: 'start' });
  const rows = new Array<number>(stage.tasks).fill(0);
  let done = 0;
  const show = () =>
    ctx.progress.update(stage.name, { done, total: stage.tasks, detail: `${fmt(rows.reduce((a, b) => a + b, 0))} rows in${retries(report)}` });
  show();
  await Promise.all(
    Array.from({ length: stage.tasks }, (_, task) =>
      withRetries(ctx, stage.name, task, async (attempt) => {
        const fault = ctx.options.faults?.find((f) => f.stage === stage.name && f.task === task && f.attempt === attempt);
        const injected: InjectedFault | undefined =
          fault === undefined ? undefined : { kind: fault.kind === 'throw' ? 'throw' : fault.kind === 'terminate' ? 'stall' : 'corrupt', afterBatches: 1 };
        let handle: MapTask | null = null;
        handle = ctx.pool.run(
          {
            dir: ctx.options.dir,
            id: { shuffleId: stage.shuffleId, mapId: task, attempt },
            writer: ctx.options.writer,
            numPartitions: stage.numPartitions,
            partitioning: stage.partitioning,
            outputSchema: stage.outputSchema,
            transform: { ...stage.transform, args: { ...stage.transform.args, fault: injected } },
          },
          stage.input(task),
          {
            signal: ctx.cancel.signal,
            onProgress: (p) => {
              rows[task] = p.inputRows;
              show();
              // the task is stalled with a batch in its writer: kill its thread as a crash would
              if (injected?.kind === 'stall' && p.batches >= injected.afterBatches) void handle?.terminate();
            },
          },
        );
        report.attempts++;
        ctx.running.push(handle);
        const status = await handle.status;
        if (fault?.kind === 'zombie') {
          // the attempt committed, but the runner lost it (a lost executor, a stale stage attempt): it is not
          // registered, so no reducer reads it, and its files stay until the job's files are removed
          const { shuffleId, mapId, attempt: a } = status.id;
          throw new ShuffleError('CS_MAP_TASK_FAILED', 'injected fault: the attempt committed but its status was lost', { shuffle: shuffleId, map: mapId, attempt: a });
        }
        return status;
      }),
    ).map(async (attemptDone) => {
      const status = await attemptDone;
      ctx.tracker.registerMapOutput(status);
      report.rowsIn += status.metrics.inputRows ?? 0;
      report.rowsOut += status.metrics.rows;
      report.bytesShuffled += status.metrics.bytesWritten;
      report.spills += status.metrics.spills;
      report.spilledBytes += status.metrics.spilledBytes;
      report.transferredBytes += status.metrics.transferredBytes ?? 0;
      report.copiedBytes += status.metrics.copiedBytes ?? 0;
      done++;
      show();
    }),
  );
  report.ms = performance.now() - started;
  await ctx.options.onStage?.({ stage: stage.name, phase: 'end' });
}

async function runReduceStage<T, R>(stage: ReduceStage<T, R>, ctx: StageContext): Promise<R> {
  const { report } = ctx;
  const started = performance.now();
  await ctx.options.onStage?.({ stage: stage.name, phase: 'start' });
  let done = 0;
  const show = () => ctx.progress.update(stage.name, { done, total: stage.tasks, detail: `${fmt(report.rowsIn)} rows read${retries(report)}` });
  show();
  const results = await limit(ctx.options.threads, stage.tasks, (partition) =>
    withRetries(ctx, stage.name, partition, async (attempt) => {
      report.attempts++;
      const readers: ReduceReader[] = [];
      const result = await stage.run({
        partition,
        attempt,
        read: (shuffleId) => {
          const reader = new ReduceReader({
            // pipelined: wait for outputs as they commit; otherwise every map task has finished
            maps: ctx.options.pipelined ? ctx.tracker.locator(shuffleId) : ctx.tracker.statuses(shuffleId),
            partitions: partition,
            coalesceRows: ctx.options.coalesceRows ?? 8192,
            waitTimeoutMs: ctx.options.waitTimeoutMs ?? 60_000,
            signal: ctx.cancel.signal,
          });
          readers.push(reader);
          return reader;
        },
      });
      for (const reader of readers) {
        report.rowsIn += reader.metrics.rows;
        report.outputsRead += reader.metrics.outputsRead;
      }
      done++;
      show();
      return result;
    }),
  );
  report.ms = performance.now() - started;
  await ctx.options.onStage?.({ stage: stage.name, phase: 'end' });
  return stage.combine(results);
}

/** Runs `attempt(0)`, `attempt(1)`, ... until one succeeds or `maxAttempts` have failed. */
async function withRetries<V>(ctx: StageContext, stage: string, task: number, attempt: (n: number) => Promise<V>): Promise<V> {
  for (let n = 0; ; n++) {
    try {
      return await attempt(n);
    } catch (error) {
      const code = error instanceof ShuffleError ? `${error.code}: ` : '';
      const message = `${stage} task ${task} attempt ${n} failed (${code}${(error as Error).message})`;
      ctx.report.failures.push(message);
      if (ctx.cancel.signal.aborted || n + 1 >= ctx.maxAttempts) throw error;
      ctx.progress.log(`${message}; retrying as attempt ${n + 1}`);
    }
  }
}

/** Runs task(0..count-1) with at most `concurrency` at once; results in task order. */
async function limit<V>(concurrency: number, count: number, task: (i: number) => Promise<V>): Promise<V[]> {
  const results = new Array<V>(count);
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) {
      const i = next++;
      results[i] = await task(i);
    }
  });
  await Promise.all(lanes);
  return results;
}

function newReport(reports: Map<string, StageReport>, name: string, kind: 'map' | 'reduce', tasks: number): StageReport {
  const report: StageReport = {
    name,
    kind,
    tasks,
    attempts: 0,
    failures: [],
    ms: 0,
    rowsIn: 0,
    rowsOut: 0,
    bytesShuffled: 0,
    spills: 0,
    spilledBytes: 0,
    transferredBytes: 0,
    copiedBytes: 0,
    outputsRead: 0,
  };
  reports.set(name, report);
  return report;
}

function retries(report: StageReport): string {
  const n = report.failures.length;
  return n === 0 ? '' : `  ${n} ${n === 1 ? 'retry' : 'retries'}`;
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}
