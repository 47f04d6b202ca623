import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';
import { util, type RecordBatch, type Schema } from 'apache-arrow';
import { atMapOutput, deserializeError, ShuffleError } from '../errors.js';
import { encodeSchemaMessage } from '../format/ipc-message.js';
import { batchToTransferable, SentDictionaries, type TransferMode } from './batch-transfer.js';
import { assertMapOutputId, idLocation, type MapOutputId } from './map-output-id.js';
import type { MapStatus } from './map-status.js';
import { discardMapOutput } from './shuffle-files.js';
import { TRANSFER_WINDOW, writerSpecOf, type HostMessage, type MapTaskWriterSpec, type WorkerMessage, type WorkerTask } from './worker-protocol.js';

export interface MapTaskPoolOptions {
  /** Worker threads, i.e. map tasks that run at once (an integer >= 1). */
  threads: number;
  /**
   * The process-wide memory budget of all map tasks' writers. Each task's writer
   * gets `floor(memoryBytes / threads)`, as Gluten gives each task
   * `available / taskSlots`, in a MemoryPool of its own thread (pools are
   * per-thread objects). Default: unbounded. Batches in flight between threads
   * (at most 2 per task) and the threads' own heaps are not part of it.
   */
  memoryBytes?: number;
  /** Passed to each Worker (heap limits). */
  resourceLimits?: ResourceLimits;
}

export interface MapTaskSpec extends MapTaskWriterSpec {
  /** The schema of the batches written (the transform's output): needed when the task may write none. */
  outputSchema?: Schema;
  /**
   * The map task's own code, run in the worker on the batches sent: a module
   * (URL, file URL string or absolute path of JavaScript the worker can import)
   * and the name of its MapTransform export (default `default`); `args` is
   * structured-cloned to it. Without it, the batches sent are written as they are.
   */
  transform?: { module: string | URL; export?: string; args?: unknown };
  /** How input batches cross to the worker (default `exclusive`: see TransferMode). */
  transfer?: TransferMode;
}

export interface MapTaskProgress {
  /** Batches and rows the worker has taken from the input so far. */
  inputBatches: number;
  inputRows: number;
  /** Batches and rows written to the shuffle writer so far. */
  batches: number;
  rows: number;
}

export interface MapTaskRunOptions {
  /** Aborting it cancels the task: the worker aborts its writer and the task fails with CS_ABORTED. */
  signal?: AbortSignal;
  /** Called as the worker takes input and writes (on the calling thread). */
  onProgress?: (progress: MapTaskProgress) => void;
}

/** A map task submitted to a MapTaskPool. */
export interface MapTask {
  readonly id: MapOutputId;
  /**
   * The committed output's status; or a rejection, after which nothing of the
   * attempt is left on disk: CS_WORKER_EXITED (the thread died: its files were
   * removed with discardMapOutput), CS_ABORTED, CS_MAP_TASK_FAILED (the
   * transform or the input threw; `cause`), or the writer's own ShuffleError.
   */
  readonly status: Promise<MapStatus>;
  /**
   * Kills the task's thread at once (`worker.terminate()`), as a crash would:
   * no cleanup runs in the thread. The pool then removes the attempt's files and
   * starts a new thread for later tasks. Resolves once `status` has settled.
   */
  terminate(): Promise<void>;
}

type Input = AsyncIterable<RecordBatch> | Iterable<RecordBatch>;

interface TaskRun {
  spec: MapTaskSpec;
  task: WorkerTask;
  input: Input;
  options: MapTaskRunOptions;
  progress: MapTaskProgress;
  transferredBytes: number;
  copiedBytes: number;
  /** the dictionary chunks the worker has (its batches share them as the input's did) */
  dictionaries: SentDictionaries;
  /** batches sent and not yet taken by the worker */
  inFlight: number;
  credit: (() => void) | null;
  worker: PooledWorker | null;
  settled: boolean;
  terminating: boolean;
  /** set when an abort was asked for: a thread that does not answer in time is terminated */
  aborting: boolean;
  /** what the input threw, boxed: an input may throw anything, `undefined` too */
  inputFailure: { thrown: unknown } | null;
  resolve(status: MapStatus): void;
  reject(error: Error): void;
  done: Promise<void>;
}

interface PooledWorker {
  worker: Worker;
  run: TaskRun | null;
  error: Error | null;
  exited: Promise<void>;
}

/** How long an aborted task's thread may take to abort its writer before it is terminated. */
const ABORT_GRACE_MS = 2000;

// From the TypeScript sources (tests, tsx) the worker needs tsx registered first; see dev-worker-bootstrap.mjs.
const FROM_SOURCE = import.meta.url.endsWith('.ts');
const WORKER_URL = new URL(FROM_SOURCE ? './dev-worker-bootstrap.mjs' : './map-task-worker.js', import.meta.url);
const WORKER_ENTRY = new URL('./map-task-worker.ts', import.meta.url).href;

/**
 * Runs map tasks in worker threads: each task's batches are transferred to a
 * thread, which writes them (through the task's transform) with a
 * MapOutputWriter and its share of the memory budget, and hands back the
 * MapStatus. Tasks beyond `threads` wait in submission order.
 *
 * Protocol: `new MapTaskPool(options)`, any number of `run(spec, input)`
 * (concurrently), then `await close()`. Guarantees: a task's input is read only
 * while it runs, at most 2 batches ahead of the worker; whatever happens (the
 * task throws, is aborted, its thread is terminated or crashes), `status`
 * settles and a failed attempt leaves no file behind; a dead thread is replaced.
 * Idle threads do not keep the process alive.
 */
export class MapTaskPool {
  readonly threads: number;
  /** Each task's memory budget: memoryBytes / threads. */
  readonly memoryPerTask: number;
  private readonly workers = new Set<PooledWorker>();
  private readonly idle: PooledWorker[] = [];
  private readonly queue: TaskRun[] = [];
  private closed = false;

  constructor(private readonly options: MapTaskPoolOptions) {
    if (typeof options !== 'object' || options === null) throw new ShuffleError('CS_INVALID_ARGUMENT', 'MapTaskPool takes an options object { threads, memoryBytes }');
    if (!(Number.isInteger(options.threads) && options.threads >= 1)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `threads must be an integer >= 1, got ${String(options.threads)}`);
    }
    if (options.memoryBytes !== undefined && !(options.memoryBytes >= options.threads)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `memoryBytes must be at least one byte per thread, got ${String(options.memoryBytes)}`);
    }
    this.threads = options.threads;
    this.memoryPerTask = options.memoryBytes === undefined ? Number.POSITIVE_INFINITY : Math.floor(options.memoryBytes / options.threads);
  }

  /** Submits a map task: `input` is read (and its batches sent to a worker) once a thread is free. */
  run(spec: MapTaskSpec, input: Input, options: MapTaskRunOptions = {}): MapTask {
    if (typeof spec !== 'object' || spec === null) throw new ShuffleError('CS_INVALID_ARGUMENT', 'run() takes a map task spec object');
    assertMapOutputId(spec.id);
    if (this.closed) throw new ShuffleError('CS_ABORTED', 'the map task pool is closed', idLocation(spec.id));
    const task = workerTask(spec);
    let resolve!: (status: MapStatus) => void;
    let reject!: (error: Error) => void;
    const status = new Promise<MapStatus>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const run: TaskRun = {
      spec,
      task,
      input,
      options,
      progress: { inputBatches: 0, inputRows: 0, batches: 0, rows: 0 },
      transferredBytes: 0,
      dictionaries: new SentDictionaries(),
      copiedBytes: 0,
      inFlight: 0,
      credit: null,
      worker: null,
      settled: false,
      terminating: false,
      aborting: false,
      inputFailure: null,
      resolve,
      reject,
      done: status.then(
        () => undefined,
        () => undefined,
      ),
    };
    const signal = options.signal;
    if (signal !== undefined) {
      const onAbort = () => this.cancel(run);
      if (signal.aborted) queueMicrotask(onAbort);
      else signal.addEventListener('abort', onAbort, { once: true });
      void run.done.then(() => signal.removeEventListener('abort', onAbort));
    }
    this.queue.push(run);
    this.schedule();
    return {
      id: spec.id,
      status,
      terminate: async () => {
        if (run.worker === null) this.settle(run, new ShuffleError('CS_ABORTED', 'the map task was terminated before it started', idLocation(spec.id)));
        else if (!run.settled) {
          run.terminating = true;
          await run.worker.worker.terminate();
        }
        await run.done;
      },
    };
  }

  /** Cancels waiting tasks (CS_ABORTED), terminates every thread (running tasks fail with CS_WORKER_EXITED, their files removed) and waits for all of it. */
  async close(): Promise<void> {
    this.closed = true;
    for (const run of this.queue.splice(0)) this.settle(run, new ShuffleError('CS_ABORTED', 'the map task pool was closed', idLocation(run.spec.id)));
    const workers = [...this.workers];
    await Promise.all(workers.map((w) => w.worker.terminate()));
    await Promise.all(workers.map((w) => w.exited));
    await Promise.all(workers.map((w) => w.run?.done));
  }

  private schedule(): void {
    while (this.queue.length > 0 && !this.closed) {
      let worker = this.idle.pop();
      if (worker === undefined) {
        if (this.workers.size >= this.threads) return;
        worker = this.spawn();
      }
      const run = this.queue.shift()!;
      void this.execute(worker, run);
    }
  }

  private spawn(): PooledWorker {
    const worker = new Worker(WORKER_URL, {
      workerData: FROM_SOURCE ? { entry: WORKER_ENTRY } : undefined,
      resourceLimits: this.options.resourceLimits,
    });
    let exited!: () => void;
    const pooled: PooledWorker = { worker, run: null, error: null, exited: new Promise((resolve) => (exited = resolve)) };
    this.workers.add(pooled);
    worker.on('message', (message: WorkerMessage) => this.onMessage(pooled, message));
    worker.on('error', (error) => (pooled.error ??= error));
    worker.on('exit', (code) => void this.onExit(pooled, code).finally(exited));
    return pooled;
  }

  private async execute(pooled: PooledWorker, run: TaskRun): Promise<void> {
    pooled.run = run;
    run.worker = pooled;
    pooled.worker.ref();
    this.post(pooled, { type: 'start', task: run.task, memoryBytes: this.memoryPerTask });
    let source: AsyncIterator<RecordBatch> | Iterator<RecordBatch> | null = null;
    let schema: Schema | null = null;
    try {
      source = iterate(run.input);
      for (;;) {
        while (run.inFlight >= TRANSFER_WINDOW && !run.settled) await new Promise<void>((resolve) => (run.credit = resolve));
        if (run.settled) return;
        const next = await source.next();
        if (run.settled || next.done) break;
        const batch = next.value;
        const message: HostMessage & { type: 'batch' } = { type: 'batch', batch: { data: null as never } };
        if (batch.schema !== schema) {
          schema = batch.schema;
          message.schema = encodeSchemaMessage(schema);
        }
        this.postBatch(pooled, run, batch, message);
      }
      if (!run.settled) this.post(pooled, { type: 'end' });
    } catch (error) {
      // the input failed (or was not an iterable of batches): the worker aborts its writer and answers `failed`
      run.inputFailure = { thrown: error };
      if (!run.settled) this.post(pooled, { type: 'abort' });
    } finally {
      try {
        await source?.return?.(); // lets a generator producing the input run its finally blocks
      } catch {
        // the input's own cleanup failing does not change the task's outcome
      }
    }
  }

  private postBatch(pooled: PooledWorker, run: TaskRun, batch: RecordBatch, message: HostMessage & { type: 'batch' }): void {
    let prepared = batchToTransferable(batch, run.spec.transfer ?? 'exclusive', run.dictionaries);
    try {
      pooled.worker.postMessage({ ...message, batch: prepared.batch }, prepared.transfer);
    } catch (error) {
      // an ArrayBuffer Node will not transfer (e.g. marked untransferable): send copies instead
      run.dictionaries.rollback();
      if ((error as Error).name !== 'DataCloneError') throw error;
      prepared = batchToTransferable(batch, 'copy', run.dictionaries);
      try {
        pooled.worker.postMessage({ ...message, batch: prepared.batch }, prepared.transfer);
      } catch (again) {
        run.dictionaries.rollback();
        throw again;
      }
    }
    run.dictionaries.commit();
    run.inFlight++;
    run.transferredBytes += prepared.transferredBytes;
    run.copiedBytes += prepared.copiedBytes;
  }

  private post(pooled: PooledWorker, message: HostMessage): void {
    pooled.worker.postMessage(message);
  }

  private onMessage(pooled: PooledWorker, message: WorkerMessage): void {
    const run = pooled.run;
    if (run === null || run.settled) return;
    switch (message.type) {
      case 'taken':
        run.inFlight--;
        run.progress.inputBatches++;
        run.progress.inputRows += message.rows;
        run.credit?.();
        run.credit = null;
        run.options.onProgress?.({ ...run.progress });
        return;
      case 'progress':
        run.progress.batches = message.batches;
        run.progress.rows = message.rows;
        run.options.onProgress?.({ ...run.progress });
        return;
      case 'done': {
        const status: MapStatus = {
          ...message.status,
          metrics: {
            ...message.status.metrics,
            inputRows: run.progress.inputRows,
            inputBatches: run.progress.inputBatches,
            transferredBytes: run.transferredBytes,
            copiedBytes: run.copiedBytes,
          },
        };
        this.release(pooled);
        this.settle(run, status);
        return;
      }
      case 'failed': {
        this.release(pooled);
        this.settle(run, this.failureOf(run, deserializeError(message.error)));
        return;
      }
    }
  }

  private failureOf(run: TaskRun, error: Error): Error {
    const where = idLocation(run.spec.id);
    if (run.inputFailure !== null) {
      const { thrown } = run.inputFailure;
      return new ShuffleError('CS_MAP_TASK_FAILED', `the map task's input failed: ${messageOf(thrown)}`, where, { cause: thrown });
    }
    if (error instanceof ShuffleError) return atMapOutput(error, { shuffle: run.spec.id.shuffleId, map: run.spec.id.mapId, attempt: run.spec.id.attempt });
    return new ShuffleError('CS_MAP_TASK_FAILED', `the map task failed in its worker: ${error.message}`, where, { cause: error });
  }

  /** The thread died: remove what its attempt left, then fail the task and replace the thread. */
  private async onExit(pooled: PooledWorker, code: number): Promise<void> {
    this.workers.delete(pooled);
    const at = this.idle.indexOf(pooled);
    if (at >= 0) this.idle.splice(at, 1);
    const run = pooled.run;
    pooled.run = null;
    if (run !== null && !run.settled) {
      // the thread's pending file operations have completed by its 'exit' event, so nothing reappears after this
      let cleanupError: unknown;
      await discardMapOutput(run.spec.dir, run.spec.id, { spillRoot: run.spec.spillRoot }).catch((error: unknown) => (cleanupError = error));
      if (run.aborting && !run.terminating) {
        this.settle(run, new ShuffleError('CS_ABORTED', 'the map task was aborted (its thread did not stop in time and was terminated)', idLocation(run.spec.id)));
        this.schedule();
        return;
      }
      const why = run.terminating ? 'was terminated' : pooled.error !== null ? `crashed: ${pooled.error.message}` : `exited with code ${code}`;
      const cause = pooled.error ?? cleanupError;
      this.settle(run, new ShuffleError('CS_WORKER_EXITED', `the worker thread running the map task ${why}`, idLocation(run.spec.id), cause === undefined ? undefined : { cause }));
    }
    this.schedule();
  }

  private cancel(run: TaskRun): void {
    if (run.settled) return;
    if (run.worker === null) {
      this.settle(run, new ShuffleError('CS_ABORTED', 'the map task was aborted before it started', idLocation(run.spec.id)));
      return;
    }
    run.aborting = true;
    const worker = run.worker;
    this.post(worker, { type: 'abort' });
    // a transform busy in a synchronous loop cannot see the abort: its thread is ended instead
    const timer = setTimeout(() => {
      if (!run.settled && worker.run === run) void worker.worker.terminate();
    }, ABORT_GRACE_MS);
    timer.unref();
    void run.done.then(() => clearTimeout(timer));
  }

  private release(pooled: PooledWorker): void {
    pooled.run = null;
    pooled.worker.unref();
    this.idle.push(pooled);
    this.schedule();
  }

  private settle(run: TaskRun, outcome: MapStatus | Error): void {
    if (run.settled) return;
    run.settled = true;
    const queued = this.queue.indexOf(run);
    if (queued >= 0) this.queue.splice(queued, 1);
    run.credit?.();
    if (outcome instanceof Error) run.reject(outcome);
    else run.resolve(outcome);
  }
}

/**
 * What a worker is sent of a spec (plain, structured-cloneable data). Refuses,
 * with CS_INVALID_ARGUMENT and at once, what could not be sent: an
 * outputSchema that is not an arrow-js Schema, anything that does not
 * structured-clone (a function in the transform's args crashed the process:
 * the worker's start message threw where nothing caught it).
 */
function workerTask(spec: MapTaskSpec): WorkerTask {
  const where = idLocation(spec.id);
  const task: WorkerTask = writerSpecOf(spec);
  if (spec.outputSchema !== undefined) {
    if (!util.isArrowSchema(spec.outputSchema)) throw new ShuffleError('CS_INVALID_ARGUMENT', "the task's outputSchema must be an Arrow Schema", where);
    task.outputSchema = encodeSchemaMessage(spec.outputSchema);
  }
  if (spec.transform !== undefined) {
    task.transform = { module: moduleHref(spec.transform.module), export: spec.transform.export ?? 'default', args: spec.transform.args };
  }
  try {
    structuredClone(task);
  } catch (cause) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `the task spec cannot be sent to a worker thread (its transform args and options must structured-clone): ${messageOf(cause)}`, where, { cause });
  }
  return task;
}

function moduleHref(module: string | URL): string {
  if (module instanceof URL) return module.href;
  return isAbsolute(module) ? pathToFileURL(module).href : module;
}

function iterate(input: Input): AsyncIterator<RecordBatch> | Iterator<RecordBatch> {
  if (Symbol.asyncIterator in input) return (input as AsyncIterable<RecordBatch>)[Symbol.asyncIterator]();
  return (input as Iterable<RecordBatch>)[Symbol.iterator]();
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
