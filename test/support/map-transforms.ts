/**
 * MapTransforms for test/map-task-pool.test.ts, imported inside the pool's
 * worker threads (through tsx: the library runs from its sources there).
 */
import type { RecordBatch } from 'apache-arrow';

/** Writes the first `batches` input batches, then throws: a map task failing mid-write. */
export async function* throwAfter(input: AsyncIterable<RecordBatch>, args: unknown): AsyncGenerator<RecordBatch> {
  const { batches } = args as { batches: number };
  let n = 0;
  for await (const batch of input) {
    if (n++ === batches) throw new Error(`injected failure after ${batches} batches`);
    yield batch;
  }
}

/** Writes the first `batches` input batches, then stops pulling and never ends (until its thread is terminated). */
export async function* stallAfter(input: AsyncIterable<RecordBatch>, args: unknown): AsyncGenerator<RecordBatch> {
  const { batches } = args as { batches: number };
  let n = 0;
  for await (const batch of input) {
    yield batch;
    if (++n === batches) await new Promise(() => undefined);
  }
}

/** Reads everything and writes nothing. */
export async function* dropAll(input: AsyncIterable<RecordBatch>): AsyncGenerator<RecordBatch> {
  for await (const batch of input) void batch;
}

/** Kills its own thread from the inside after `batches` batches, as a native crash would. */
export async function* exitAfter(input: AsyncIterable<RecordBatch>, args: unknown): AsyncGenerator<RecordBatch> {
  const { batches } = args as { batches: number };
  let n = 0;
  for await (const batch of input) {
    yield batch;
    if (++n === batches) process.exit(3);
  }
}

export const notAFunction = 42;
