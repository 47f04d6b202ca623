import { util, type RecordBatch } from 'apache-arrow';
import type { SerializedError } from '../errors.js';
import type { CodecName } from '../format/codec.js';
import { tableToIpcStream } from '../format/table-to-ipc.js';
import type { DictionaryUpdates } from '../writer/dictionary-tracker.js';
import type { Partitioning } from '../writer/partitioner.js';
import type { WriterChoice } from '../writer-kind.js';
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

/** What a map task's writer is told (see MapOutputWriterOptions): plain data, it crosses to the worker as it is. */
export interface MapTaskWriterSpec {
  /** The shuffle directory, the attempt's id and its spill root. */
  dir: string;
  id: MapOutputId;
  spillRoot?: string;
  /** `hash` (default, the columnar writer), `sort` (the row writer) or `auto` (either); the status has the same shape. */
  writer?: WriterChoice;
  numPartitions: number;
  partitioning: Partitioning;
  codec?: CodecName;
  maxBatchRows?: number;
  mergeThreshold?: number;
  compressionMinRows?: number;
  minCompressionSavings?: number;
  dictionaryUpdates?: DictionaryUpdates;
  /** The sort writer's page and block sizes (the hash writer ignores them). */
  pageBytes?: number;
  blockBytes?: number;
}

/** Every option of MapTaskWriterSpec: the compiler refuses this list when the spec gains one it lacks, so none is dropped on the way to the worker. */
const WRITER_SPEC_KEYS = {
  dir: true,
  id: true,
  spillRoot: true,
  writer: true,
  numPartitions: true,
  partitioning: true,
  codec: true,
  maxBatchRows: true,
  mergeThreshold: true,
  compressionMinRows: true,
  minCompressionSavings: true,
  dictionaryUpdates: true,
  pageBytes: true,
  blockBytes: true,
} as const satisfies Record<keyof MapTaskWriterSpec, true>;

/** The writer options of a spec and nothing else (a spec may carry more, which need not clone), with a plain copy of its id. */
export function writerSpecOf(spec: MapTaskWriterSpec): MapTaskWriterSpec {
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(WRITER_SPEC_KEYS) as (keyof MapTaskWriterSpec)[]) if (spec[key] !== undefined) copy[key] = spec[key];
  copy.id = { shuffleId: spec.id.shuffleId, mapId: spec.id.mapId, attempt: spec.id.attempt };
  copy.partitioning = cloneablePartitioning(spec.partitioning);
  return copy as unknown as MapTaskWriterSpec;
}

/** A range partitioning's Arrow bounds do not structured-clone: they cross as the bytes of an IPC stream. */
function cloneablePartitioning(partitioning: Partitioning): Partitioning {
  // anything but range bounds goes as it is: the worker's writer refuses a partitioning that is not one (validateOptions)
  if (typeof partitioning !== 'object' || partitioning === null || partitioning.kind !== 'range') return partitioning;
  const { bounds } = partitioning;
  if (!util.isArrowTable(bounds) && !util.isArrowRecordBatch(bounds)) return partitioning; // bytes, or what the worker's writer refuses
  return { ...partitioning, bounds: tableToIpcStream(bounds) };
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
