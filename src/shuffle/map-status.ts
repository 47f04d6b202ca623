import { ShuffleError } from '../errors.js';
import { assertMapOutputId, idLocation, type MapOutputId } from './map-output-id.js';

/** What a map task measured while it wrote its output. */
export interface MapTaskMetrics {
  /** Rows and batches the writer received (after the task's transform, if any). */
  rows: number;
  batches: number;
  /** Size of the data file. */
  bytesWritten: number;
  /** Spill files written under memory pressure, and their bytes. */
  spills: number;
  spilledBytes: number;
  /** The most memory the writer held at once. */
  peakMemoryBytes: number;
  /** From the writer's creation until its output was committed. */
  writeMs: number;
  /** For a task run in a worker: rows and batches sent to it, before its transform. */
  inputRows?: number;
  inputBatches?: number;
  /** For a task run in a worker: input bytes whose ArrayBuffers were transferred, and bytes that had to be copied. */
  transferredBytes?: number;
  copiedBytes?: number;
  /**
   * For a task run in a worker: buffers (4 KiB and up) the task got back
   * from its thread's memory pool instead of allocating them, its own given back
   * after a spill and those an earlier task on the thread left.
   */
  reusedBuffers?: number;
}

/**
 * The status of a committed map output (Spark's MapStatus): where it is, what
 * each partition holds, and the task's metrics. Plain data: it crosses threads
 * and may be stored as JSON. A status exists only for a committed output: the
 * map task returns it after its index file got its final name.
 */
export interface MapStatus {
  readonly id: MapOutputId;
  readonly location: {
    /** The machine that holds the files (os.hostname() of the writer). */
    readonly host: string;
    /** The output's `outputPrefix`: its files are `<prefix>.data`, `.index`, `.checksum.CRC32C`. */
    readonly prefix: string;
  };
  readonly numPartitions: number;
  /** Bytes of each partition in the data file (0: no rows). */
  readonly partitionLengths: readonly number[];
  /** Rows in each partition. */
  readonly partitionRows: readonly number[];
  readonly metrics: MapTaskMetrics;
}

/** CS_INVALID_ARGUMENT unless `status` has the shape of a MapStatus (it may come from another thread or from JSON). */
export function assertMapStatus(status: MapStatus): void {
  if (typeof status !== 'object' || status === null) throw new ShuffleError('CS_INVALID_ARGUMENT', `a map status must be an object, got ${String(status)}`);
  assertMapOutputId(status.id);
  const where = idLocation(status.id);
  const bad = (what: string) => new ShuffleError('CS_INVALID_ARGUMENT', `invalid map status: ${what}`, where);
  if (typeof status.location?.prefix !== 'string' || status.location.prefix === '') throw bad('location.prefix must be a path');
  const n = status.numPartitions;
  if (!(Number.isSafeInteger(n) && n >= 1)) throw bad(`numPartitions must be an integer >= 1, got ${String(n)}`);
  for (const key of ['partitionLengths', 'partitionRows'] as const) {
    const values = status[key];
    if (!Array.isArray(values) || values.length !== n || !values.every((v) => Number.isSafeInteger(v) && v >= 0)) {
      throw bad(`${key} must hold ${n} whole numbers >= 0`);
    }
  }
}

/** Bytes and rows of partitions [start, end) of one map output. */
export function rangeTotals(status: MapStatus, start: number, end: number): { bytes: number; rows: number } {
  let bytes = 0;
  let rows = 0;
  for (let p = start; p < end; p++) {
    bytes += status.partitionLengths[p]!;
    rows += status.partitionRows[p]!;
  }
  return { bytes, rows };
}
