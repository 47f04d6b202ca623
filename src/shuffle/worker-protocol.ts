import type { RecordBatch } from 'apache-arrow';
import type { SerializedError } from '../errors.js';
import type { CodecName } from '../format/codec.js';
import type { Partitioning } from '../writer/partitioner.js';
import type { TransferableBatch } from './batch-transfer.js';
import type { MapOutputId } from './map-output-id.js';
import type { MapStatus } from './map-status.js';

/**
 * The messages between MapTaskPool (host) and a map-task worker thread. One
 * task runs at a time per worker:
 *
 * ```text
 * host                                   worker
 * start {task, memoryBytes}        ->    creates the MapOutputWriter
 * batch {schema?, batch} x n       ->    queued for the transform (at most WINDOW unacknowledged)
 *                                  <-    taken {rows}        one per batch the transform pulled
 *                                  <-    progress {rows}     after each batch written
 * end | abort                      ->
 *                                  <-    done {status} | failed {error}   the task's files are committed or gone
 * ```
 */

/**
 * A map task's own code, run in the worker: it receives the batches the runner
 * sent and yields the batches to shuffle (a partial aggregate, a projection, a
 * filter). `args` is the spec's `transform.args`, structured-cloned. The module
 * that exports it is imported in the worker thread: it must be JavaScript Node
 * can load there (or TypeScript when this library itself runs from its sources).
 */
export type MapTransform = (input: AsyncIterable<RecordBatch>, args: unknown) => AsyncIterable<RecordBatch> | Iterable<RecordBatch>;

/** Batches sent but not yet pulled by the worker's transform: bounds the memory in flight between threads. */
export const TRANSFER_WINDOW = 2;

/** What a map task's writer is told: plain data, it crosses to the worker as it is. */
export interface MapTaskWriterSpec {
  /** The shuffle directory, the attempt's id and its spill root (see MapOutputWriterOptions). */
  dir: string;
  id: MapOutputId;
  spillRoot?: string;
  numPartitions: number;
  partitioning: Partitioning;
  codec?: CodecName;
  maxBatchRows?: number;
  mergeThreshold?: number;
  compressionMinRows?: number;
}

/** The structured-clone form of a MapTaskSpec. */
export interface WorkerTask extends MapTaskWriterSpec {
  /** IPC schema message of the batches the transform yields (needed when it may yield none) */
  outputSchema?: Uint8Array;
  transform?: { module: string; export: string; args: unknown };
}

export type HostMessage =
  | { type: 'start'; task: WorkerTask; memoryBytes: number }
  /** `schema`: the IPC schema message, sent with the first batch and whenever it changes */
  | { type: 'batch'; schema?: Uint8Array; batch: TransferableBatch }
  | { type: 'end' }
  | { type: 'abort' };

export type WorkerMessage =
  | { type: 'taken'; rows: number }
  | { type: 'progress'; rows: number; batches: number }
  | { type: 'done'; status: MapStatus }
  | { type: 'failed'; error: SerializedError };
