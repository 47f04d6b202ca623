import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { deserializeError, ShuffleError } from '../errors.js';
import { encodeSchemaMessage } from '../format/ipc-message.js';
import { batchToTransferable } from './batch-transfer.js';
import { assertMapOutputId, idLocation } from './map-output-id.js';
import { discardMapOutput } from './shuffle-files.js';
import { TRANSFER_WINDOW } from './worker-protocol.js';
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
    options;
    threads;
    /** Each task's memory budget: memoryBytes / threads. */
    memoryPerTask;
    workers = new Set();
    idle = [];
    queue = [];
    closed = false;
    constructor(options) {
        this.options = options;
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
    run(spec, input, options = {}) {
        assertMapOutputId(spec.id);
        if (this.closed)
            throw new ShuffleError('CS_ABORTED', 'the map task pool is closed', idLocation(spec.id));
        let resolve;
        let reject;
        const status = new Promise((res, rej) => {
            resolve = res;
            reject = rej;
        });
        const run = {
            spec,
            task: workerTask(spec),
            input,
            options,
            progress: { inputBatches: 0, inputRows: 0, batches: 0, rows: 0 },
            transferredBytes: 0,
            copiedBytes: 0,
            inFlight: 0,
            credit: null,
            worker: null,
            settled: false,
            terminating: false,
            aborting: false,
            inputError: undefined,
            resolve,
            reject,
            done: status.then(() => undefined, () => undefined),
        };
        const signal = options.signal;
        if (signal !== undefined) {
            const onAbort = () => this.cancel(run);
            if (signal.aborted)
                queueMicrotask(onAbort);
            else
                signal.addEventListener('abort', onAbort, { once: true });
            void run.done.then(() => signal.removeEventListener('abort', onAbort));
        }
        this.queue.push(run);
        this.schedule();
        return {
            id: spec.id,
            status,
            terminate: async () => {
                if (run.worker === null)
                    this.settle(run, new ShuffleError('CS_ABORTED', 'the map task was terminated before it started', idLocation(spec.id)));
                else if (!run.settled) {
                    run.terminating = true;
                    await run.worker.worker.terminate();
                }
                await run.done;
            },
        };
    }
    /** Cancels waiting tasks (CS_ABORTED), terminates every thread (running tasks fail with CS_WORKER_EXITED, their files removed) and waits for all of it. */
    async close() {
        this.closed = true;
        for (const run of this.queue.splice(0))
            this.settle(run, new ShuffleError('CS_ABORTED', 'the map task pool was closed', idLocation(run.spec.id)));
        const workers = [...this.workers];
        await Promise.all(workers.map((w) => w.worker.terminate()));
        await Promise.all(workers.map((w) => w.exited));
        await Promise.all(workers.map((w) => w.run?.done));
    }
    schedule() {
        while (this.queue.length > 0 && !this.closed) {
            let worker = this.idle.pop();
            if (worker === undefined) {
                if (this.workers.size >= this.threads)
                    return;
                worker = this.spawn();
            }
            const run = this.queue.shift();
            void this.execute(worker, run);
        }
    }
    spawn() {
        const worker = new Worker(WORKER_URL, {
            workerData: FROM_SOURCE ? { entry: WORKER_ENTRY } : undefined,
            resourceLimits: this.options.resourceLimits,
        });
        let exited;
        const pooled = { worker, run: null, error: null, exited: new Promise((resolve) => (exited = resolve)) };
        this.workers.add(pooled);
        worker.on('message', (message) => this.onMessage(pooled, message));
        worker.on('error', (error) => (pooled.error ??= error));
        worker.on('exit', (code) => void this.onExit(pooled, code).finally(exited));
        return pooled;
    }
    async execute(pooled, run) {
        pooled.run = run;
        run.worker = pooled;
        pooled.worker.ref();
        this.post(pooled, { type: 'start', task: run.task, memoryBytes: this.memoryPerTask });
        let source = null;
        let schema = null;
        try {
            source = iterate(run.input);
            for (;;) {
                while (run.inFlight >= TRANSFER_WINDOW && !run.settled)
                    await new Promise((resolve) => (run.credit = resolve));
                if (run.settled)
                    return;
                const next = await source.next();
                if (run.settled || next.done)
                    break;
                const batch = next.value;
                const message = { type: 'batch', batch: { data: null } };
                if (batch.schema !== schema) {
                    schema = batch.schema;
                    message.schema = encodeSchemaMessage(schema);
                }
                this.postBatch(pooled, run, batch, message);
            }
            if (!run.settled)
                this.post(pooled, { type: 'end' });
        }
        catch (error) {
            // the input failed (or was not an iterable of batches): the worker aborts its writer and answers `failed`
            run.inputError = error;
            if (!run.settled)
                this.post(pooled, { type: 'abort' });
        }
        finally {
            try {
                await source?.return?.(); // lets a generator producing the input run its finally blocks
            }
            catch {
                // the input's own cleanup failing does not change the task's outcome
            }
        }
    }
    postBatch(pooled, run, batch, message) {
        let prepared = batchToTransferable(batch, run.spec.transfer ?? 'exclusive');
        try {
            pooled.worker.postMessage({ ...message, batch: prepared.batch }, prepared.transfer);
        }
        catch (error) {
            // an ArrayBuffer Node will not transfer (e.g. marked untransferable): send copies instead
            if (error.name !== 'DataCloneError')
                throw error;
            prepared = batchToTransferable(batch, 'copy');
            pooled.worker.postMessage({ ...message, batch: prepared.batch }, prepared.transfer);
        }
        run.inFlight++;
        run.transferredBytes += prepared.transferredBytes;
        run.copiedBytes += prepared.copiedBytes;
    }
    post(pooled, message) {
        pooled.worker.postMessage(message);
    }
    onMessage(pooled, message) {
        const run = pooled.run;
        if (run === null || run.settled)
            return;
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
                const status = {
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
    failureOf(run, error) {
        const where = idLocation(run.spec.id);
        if (run.inputError !== undefined) {
            return new ShuffleError('CS_MAP_TASK_FAILED', `the map task's input failed: ${messageOf(run.inputError)}`, where, { cause: run.inputError });
        }
        if (error instanceof ShuffleError)
            return error;
        return new ShuffleError('CS_MAP_TASK_FAILED', `the map task failed in its worker: ${error.message}`, where, { cause: error });
    }
    /** The thread died: remove what its attempt left, then fail the task and replace the thread. */
    async onExit(pooled, code) {
        this.workers.delete(pooled);
        const at = this.idle.indexOf(pooled);
        if (at >= 0)
            this.idle.splice(at, 1);
        const run = pooled.run;
        pooled.run = null;
        if (run !== null && !run.settled) {
            // the thread's pending file operations have completed by its 'exit' event, so nothing reappears after this
            let cleanupError;
            await discardMapOutput(run.spec.dir, run.spec.id, { spillRoot: run.spec.spillRoot }).catch((error) => (cleanupError = error));
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
    cancel(run) {
        if (run.settled)
            return;
        if (run.worker === null) {
            this.settle(run, new ShuffleError('CS_ABORTED', 'the map task was aborted before it started', idLocation(run.spec.id)));
            return;
        }
        run.aborting = true;
        const worker = run.worker;
        this.post(worker, { type: 'abort' });
        // a transform busy in a synchronous loop cannot see the abort: its thread is ended instead
        const timer = setTimeout(() => {
            if (!run.settled && worker.run === run)
                void worker.worker.terminate();
        }, ABORT_GRACE_MS);
        timer.unref();
        void run.done.then(() => clearTimeout(timer));
    }
    release(pooled) {
        pooled.run = null;
        pooled.worker.unref();
        this.idle.push(pooled);
        this.schedule();
    }
    settle(run, outcome) {
        if (run.settled)
            return;
        run.settled = true;
        const queued = this.queue.indexOf(run);
        if (queued >= 0)
            this.queue.splice(queued, 1);
        run.credit?.();
        if (outcome instanceof Error)
            run.reject(outcome);
        else
            run.resolve(outcome);
    }
}
function workerTask(spec) {
    const task = {
        dir: spec.dir,
        id: { shuffleId: spec.id.shuffleId, mapId: spec.id.mapId, attempt: spec.id.attempt },
        spillRoot: spec.spillRoot,
        numPartitions: spec.numPartitions,
        partitioning: spec.partitioning,
        codec: spec.codec,
        maxBatchRows: spec.maxBatchRows,
        mergeThreshold: spec.mergeThreshold,
        compressionMinRows: spec.compressionMinRows,
    };
    if (spec.outputSchema !== undefined)
        task.outputSchema = encodeSchemaMessage(spec.outputSchema);
    if (spec.transform !== undefined) {
        task.transform = { module: moduleHref(spec.transform.module), export: spec.transform.export ?? 'default', args: spec.transform.args };
    }
    return task;
}
function moduleHref(module) {
    if (module instanceof URL)
        return module.href;
    return isAbsolute(module) ? pathToFileURL(module).href : module;
}
function iterate(input) {
    if (Symbol.asyncIterator in input)
        return input[Symbol.asyncIterator]();
    return input[Symbol.iterator]();
}
function messageOf(error) {
    return error instanceof Error ? error.message : String(error);
}
