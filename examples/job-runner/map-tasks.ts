/**
 * The map tasks' own code: MapTransforms that columnar-shuffle's MapTaskPool
 * imports and runs inside its worker threads, on the batches the runner sends.
 * This module (and what it imports) must load in a worker: only apache-arrow
 * and sibling modules, no runner state.
 */
import { isMainThread } from 'node:worker_threads';
import type { RecordBatch } from 'apache-arrow';
import { column, CustomerTotals, forEachNumber, numbers, partialBatches } from './columns.js';

/** A failure the runner injects into one attempt (to show, and test, that the job survives it). */
export interface InjectedFault {
  /**
   * `throw`: the task throws after writing `afterBatches` batches;
   * `stall`: it stops after `afterBatches` batches, until the runner terminates its thread;
   * `corrupt`: it writes only half of every batch, and commits (a stale attempt whose output must never be read).
   * A task that writes fewer batches (one with no rows writes none) throws, or ends its thread, at the end of its output.
   */
  kind: 'throw' | 'stall' | 'corrupt';
  afterBatches: number;
}

/**
 * The first phase of the two-phase aggregate: orders and amount per customer
 * over this task's orders (rows with a null customer id are skipped; a null
 * amount counts as an order of 0), sent as one row per customer it saw.
 */
export async function* partialAggregate(input: AsyncIterable<RecordBatch>, args: unknown): AsyncGenerator<RecordBatch> {
  const { key, value, fault } = args as { key: string; value: string; fault?: InjectedFault };
  const totals = new CustomerTotals();
  for await (const batch of input) {
    const amounts = numbers(column(batch, value));
    forEachNumber(column(batch, key), (row, id) => {
      const amount = amounts[row]!;
      totals.add(id, 1, Number.isNaN(amount) ? 0 : amount);
    });
  }
  yield* withFault(partialBatches(totals.ids, totals.orders, totals.spent, totals.size), fault);
}

/** The map side of the join: the columns the join needs, as they are. */
export async function* project(input: AsyncIterable<RecordBatch>, args: unknown): AsyncGenerator<RecordBatch> {
  const { columns, fault } = args as { columns: string[]; fault?: InjectedFault };
  async function* selected(): AsyncGenerator<RecordBatch> {
    for await (const batch of input) {
      // selectAt, not select: apache-arrow 21.2.0's RecordBatch.select leaves the columns at their old
      // positions, so any selection but a prefix gets misplaced columns
      yield batch.selectAt(columns.map((name) => batch.schema.fields.findIndex((f) => f.name === name)));
    }
  }
  yield* withFault(selected(), fault);
}

async function* withFault(batches: AsyncIterable<RecordBatch> | Iterable<RecordBatch>, fault: InjectedFault | undefined): AsyncGenerator<RecordBatch> {
  let written = 0;
  for await (const batch of batches) {
    if (fault?.kind === 'corrupt') {
      yield batch.slice(0, batch.numRows >> 1);
      continue;
    }
    yield batch;
    if (fault !== undefined && ++written === fault.afterBatches) {
      if (fault.kind === 'throw') throw new Error(`injected fault: the map task throws after writing ${written} of its batches`);
      await new Promise<never>(() => undefined); // 'stall': until the thread is terminated
    }
  }
  // fewer batches than the fault waits for (a task with no rows writes none): injected all the same,
  // or --fail-map and --kill-map would silently do nothing
  if (fault === undefined || fault.kind === 'corrupt') return;
  if (fault.kind === 'throw') throw new Error(`injected fault: the map task throws at the end of its output (${written} batches written)`);
  // 'stall': the runner terminates a thread on the task's progress, and there is none to see: the thread ends itself
  // (process.exit in a worker ends the thread only), as a crash would
  if (isMainThread) throw new Error('injected fault: the map task would end its thread, but it runs on the main thread');
  process.exit(1);
}
