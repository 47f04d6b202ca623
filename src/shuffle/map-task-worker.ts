/**
 * The worker-thread side of MapTaskPool: runs one map task at a time, writing
 * the batches the host transfers (through the task's transform, if it has one)
 * with a MapOutputWriter whose memory pool is this thread's share of the
 * process-wide budget. See worker-protocol.ts for the messages.
 */
import { parentPort } from 'node:worker_threads';
import type { RecordBatch, Schema } from 'apache-arrow';
import { serializeError, ShuffleError } from '../errors.js';
import { readIpcSchema } from '../format/ipc-reader.js';
import { MemoryPool } from '../memory/memory-pool.js';
import { batchFromTransferable, ReceivedDictionaries } from './batch-transfer.js';
import { MapOutputWriter } from './map-output-writer.js';
import { writerSpecOf, type HostMessage, type MapTransform, type WorkerMessage, type WorkerTask } from './worker-protocol.js';

if (parentPort === null) throw new Error('map-task-worker.js runs in a worker thread started by MapTaskPool');
const port = parentPort;

function send(message: WorkerMessage): void {
  port.postMessage(message);
}

/** The batches the host sent, in order; acknowledges each as the transform pulls it. */
class InputQueue implements AsyncIterable<RecordBatch> {
  private readonly items: RecordBatch[] = [];
  private ended = false;
  private error: unknown = null;
  private wake: (() => void) | null = null;

  push(batch: RecordBatch): void {
    this.items.push(batch);
    this.wake?.();
  }

  end(): void {
    this.ended = true;
    this.wake?.();
  }

  fail(error: unknown): void {
    this.error ??= error;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<RecordBatch> {
    for (;;) {
      if (this.error !== null) throw this.error;
      const item = this.items.shift();
      if (item !== undefined) {
        send({ type: 'taken', rows: item.numRows });
        yield item;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = null;
    }
  }
}

interface Running {
  input: InputQueue;
  schema: Schema | null;
  /** the dictionary chunks the host's last batch carried (batch-transfer.ts) */
  dictionaries: ReceivedDictionaries;
  aborted: ShuffleError | null;
  /** rejects the transform step being awaited: an abort does not wait for a transform that is stuck */
  interrupt: ((error: unknown) => void) | null;
}

let running: Running | null = null;

port.on('message', (message: HostMessage) => {
  switch (message.type) {
    case 'start': {
      const task: Running = { input: new InputQueue(), schema: null, dictionaries: new ReceivedDictionaries(), aborted: null, interrupt: null };
      running = task;
      void runTask(task, message.task, message.memoryBytes).finally(() => {
        if (running === task) running = null;
      });
      return;
    }
    case 'batch': {
      if (running === null) return; // the task already ended: the host drops the rest
      try {
        if (message.schema !== undefined) running.schema = readIpcSchema(message.schema);
        if (running.schema === null) throw new ShuffleError('CS_INVALID_ARGUMENT', 'a batch arrived before its schema');
        running.input.push(batchFromTransferable(message.batch, running.schema, running.dictionaries));
      } catch (error) {
        running.input.fail(error);
      }
      return;
    }
    case 'end':
      running?.input.end();
      return;
    case 'abort':
      if (running !== null) {
        running.aborted = new ShuffleError('CS_ABORTED', 'the map task was aborted');
        running.input.fail(running.aborted);
        running.interrupt?.(running.aborted);
      }
      return;
  }
});

/**
 * This thread's memory pool, kept from one task to the next so that the large
 * buffers one task gave back (memory/buffer-recycler.ts) serve the next. A
 * task that starts while another still winds down (an abort) gets a pool of
 * its own, as does a task with another budget.
 */
let threadPool: { pool: MemoryPool; bytes: number; inUse: boolean } | null = null;

function acquirePool(memoryBytes: number): { pool: MemoryPool; release: () => void } {
  if (threadPool?.inUse === true) return { pool: newPool(memoryBytes), release: () => undefined };
  if (threadPool?.bytes !== memoryBytes) threadPool = { pool: newPool(memoryBytes), bytes: memoryBytes, inUse: false };
  const kept = threadPool;
  kept.inUse = true;
  const release = () => {
    kept.inUse = false;
    // a writer whose abort failed part-way may still hold a reservation: the next task must not inherit it
    if (kept.pool.reserved > 0 && threadPool === kept) threadPool = null;
  };
  return { pool: kept.pool, release };
}

function newPool(memoryBytes: number): MemoryPool {
  return Number.isFinite(memoryBytes) ? new MemoryPool(memoryBytes) : new MemoryPool();
}

async function runTask(running: Running, task: WorkerTask, memoryBytes: number): Promise<void> {
  const { pool, release } = acquirePool(memoryBytes);
  try {
    await runTaskOn(pool, running, task);
  } finally {
    release();
  }
}

async function runTaskOn(pool: MemoryPool, running: Running, task: WorkerTask): Promise<void> {
  let writer: MapOutputWriter | null = null;
  const reusedBefore = pool.recycler.reused;
  try {
    const transform = task.transform === undefined ? passThrough : await loadTransform(task.transform.module, task.transform.export);
    writer = await MapOutputWriter.create({
      ...writerSpecOf(task), // the writer kind and its options, as the host sent them
      schema: task.outputSchema === undefined ? undefined : readIpcSchema(task.outputSchema),
      // this thread's share of the process-wide budget (memory pools are per-thread objects)
      memoryPool: pool,
    });
    let rows = 0;
    let batches = 0;
    const output = iterate(transform(running.input, task.transform?.args));
    for (;;) {
      const next = await interruptible(running, output);
      if (next.done) break;
      await writer.write(next.value);
      rows += next.value.numRows;
      batches++;
      send({ type: 'progress', rows, batches });
    }
    if (running.aborted !== null) throw running.aborted;
    const status = await writer.finish();
    send({ type: 'done', status: { ...status, metrics: { ...status.metrics, reusedBuffers: pool.recycler.reused - reusedBefore } } });
  } catch (error) {
    running.input.fail(error); // stops a transform still reading, so nothing keeps running
    await writer?.abort().catch(() => undefined);
    send({ type: 'failed', error: serializeError(error) });
  }
}

type Output = AsyncIterator<RecordBatch> | Iterator<RecordBatch>;

function iterate(output: AsyncIterable<RecordBatch> | Iterable<RecordBatch>): Output {
  if (Symbol.asyncIterator in output) return (output as AsyncIterable<RecordBatch>)[Symbol.asyncIterator]();
  return (output as Iterable<RecordBatch>)[Symbol.iterator]();
}

/**
 * The transform's next batch, or the abort's error as soon as the task is
 * aborted (one fresh promise per step: nothing piles up on a long-lived one).
 * An interrupted transform is told to return but not waited for.
 */
async function interruptible(running: Running, output: Output): Promise<IteratorResult<RecordBatch>> {
  if (running.aborted !== null) throw running.aborted;
  try {
    return await new Promise<IteratorResult<RecordBatch>>((resolve, reject) => {
      running.interrupt = reject;
      Promise.resolve(output.next()).then(resolve, reject);
    });
  } catch (error) {
    if (error === running.aborted) void Promise.resolve(output.return?.()).catch(() => undefined);
    throw error;
  } finally {
    running.interrupt = null;
  }
}

async function* passThrough(input: AsyncIterable<RecordBatch>): AsyncGenerator<RecordBatch> {
  yield* input;
}

async function loadTransform(module: string, name: string): Promise<MapTransform> {
  let loaded: Record<string, unknown>;
  try {
    loaded = (await import(module)) as Record<string, unknown>;
  } catch (cause) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `cannot load the map task's transform module ${module}: ${(cause as Error).message}`, {}, { cause });
  }
  const fn = loaded[name];
  if (typeof fn !== 'function') throw new ShuffleError('CS_INVALID_ARGUMENT', `the transform module ${module} has no function export "${name}"`);
  return fn as MapTransform;
}
