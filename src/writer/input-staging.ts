import type { Data, RecordBatch, Schema } from 'apache-arrow';
import type { FieldNodeInfo } from '../format/ipc-message.js';
import { recordBatchOverBuffers } from '../format/ipc-reader.js';
import type { MemoryReservation } from '../memory/memory-pool.js';
import { appendAccounted, IdentityRows } from './append-rows.js';
import { ColumnBuffer } from './column-buffer.js';
import { columnLayoutOf } from './column-layout.js';
import { prepareSourceColumn } from './source-column.js';
import { ScratchSelections } from './split-plan.js';

/** Rows per partition a staged batch aims at: enough for each gather to stream through its destination. */
export const STAGED_ROWS_PER_PARTITION = 64;
/** The most bytes of input rows staged at once, by default (with an unbounded pool; none under a limit). */
export const MAX_STAGING_BYTES = 8 * 1024 * 1024;

/** The most of a bounded pool's share (limit / concurrentTasks) a writer stages, whatever `stagingBytes` says: staged rows cannot be spilled. */
export const MAX_STAGING_SHARE = 1 / 8;

/** Staging gathers at least this many batches: below that, the copy costs what the longer gathers save. */
export const MIN_STAGED_BATCHES = 4;

/**
 * How many input rows to gather before a split, or 0 for none. A batch of
 * `batchRows` rows brings batchRows / numPartitions rows to each partition, and
 * the split moves them with one gather per column and partition, each starting
 * at a destination line that is no longer in cache: with a few rows per
 * partition, those starts are the split. Staging costs a copy of every row,
 * and a larger source that fits less well in cache (strings are copied row by
 * row from it), so it pays only for batches that bring fewer than
 * STAGED_ROWS_PER_PARTITION / MIN_STAGED_BATCHES = 16 rows per partition.
 *
 * Worked example, 2 M narrow rows of 44 bytes, in 8,192-row batches unless said
 * (write times measured here, alternating with and without staging):
 *
 * ```text
 * P = 200:   41 rows per partition; target 64 x 200 = 12,800 < 4 x 8,192: none
 * P = 200, 4,096-row batches: 20 per partition; 12,800 < 4 x 4,096: none (staged: no faster, often slower)
 * P = 500:   16 per partition; 32,000 < 4 x 8,192: none (staged: no different)
 * P = 1000:   8 per partition; 64,000 rows (2.7 MiB): 1.4-1.7 s -> 1.2 s
 * P = 4000:   2 per partition; 8 MiB / 44 B = 190,650 rows, 47 per partition: 4.1-4.5 s -> 2.6-3.1 s
 * ```
 */
export function stagingTargetRows(numPartitions: number, bytesPerRow: number, batchRows: number, stagingBytes: number): number {
  const rows = Math.min(STAGED_ROWS_PER_PARTITION * numPartitions, Math.floor(stagingBytes / Math.max(1, bytesPerRow)));
  return rows > MIN_STAGED_BATCHES * batchRows ? rows : 0;
}

/**
 * Input batches gathered into one larger batch before the split (the shuffle
 * writer's staging): their rows are appended, in order, to one set of column
 * buffers with the split functions (every type but dictionaries), and the
 * split then reads them as one batch. Appending is a block copy per buffer
 * (string offsets are rebased), so it pays where the gathers it makes longer
 * were short (stagingTargetRows).
 *
 * Memory: every buffer is reserved in `reservation` before it is allocated.
 * Staged rows cannot be spilled: the writer stages under a memory limit only
 * when asked to (`stagingBytes`).
 *
 * Protocol: `append` batches of `schema` until `rows` reaches the target, split
 * `batch()` (its buffers are this staging's: valid until the next `append` or
 * `clear`), `clear()`, and so on; `release()` at the end.
 */
export class InputStaging {
  private readonly columns: ColumnBuffer[];
  private readonly identity = new IdentityRows();
  private readonly scratch: ScratchSelections;
  /** rows held */
  rows = 0;
  private capacity = 0;

  constructor(
    private readonly schema: Schema,
    private readonly reservation: MemoryReservation,
  ) {
    this.columns = schema.fields.map((field) => new ColumnBuffer(columnLayoutOf(field), reservation.recycler));
    this.scratch = new ScratchSelections((bytes) => reservation.tryGrow(bytes));
  }

  /** Appends every row of `batch` (its schema is the staging's). */
  async append(batch: RecordBatch): Promise<void> {
    const rows = batch.numRows;
    if (rows === 0) return;
    const identityBytes = this.identity.bytesFor(rows) - this.identity.bytes;
    if (identityBytes > 0) await this.reservation.grow(identityBytes);
    const ids = this.identity.get(rows);
    const capacity = Math.max(this.capacity, this.rows + rows);
    const sources = batch.data.children.map((data, c) => prepareSourceColumn(data, this.columns[c]!.layout));
    await appendAccounted(sources, this.columns, rows, this.rows, capacity, ids, this.scratch, this.reservation);
    this.capacity = capacity;
    this.rows += rows;
  }

  /** The rows held, as one batch over the staging's buffers (not copied). */
  batch(): RecordBatch {
    const nodes: FieldNodeInfo[] = [];
    const buffers: Uint8Array[] = [];
    for (const column of this.columns) column.snapshot(this.rows, nodes, buffers, false);
    return recordBatchOverBuffers(this.schema, this.rows, nodes, buffers);
  }

  /** Empties the staging, keeping its buffers for the next rows. */
  clear(): void {
    for (const column of this.columns) column.clear();
    this.rows = 0;
  }

  /** Frees every buffer; returns the bytes released from the reservation (0 the second time). */
  release(): number {
    let bytes = this.identity.release() + this.scratch.bytes;
    for (const column of this.columns) bytes += column.release();
    this.scratch.clear();
    this.rows = 0;
    this.capacity = 0;
    this.reservation.shrink(bytes);
    return bytes;
  }
}

/**
 * Bytes of a batch's buffers as Arrow holds them (nested children and view
 * columns' data buffers included; a slice counts its whole buffers).
 */
export function batchBufferBytes(batch: RecordBatch): number {
  const bytesOf = (data: Data): number => {
    let total = 0;
    for (const buffer of [data.values, data.valueOffsets, data.nullBitmap, data.typeIds]) total += (buffer as ArrayBufferView | undefined)?.byteLength ?? 0;
    for (const buffer of data.variadicBuffers ?? []) total += buffer.byteLength;
    for (const child of data.children) total += bytesOf(child);
    return total;
  };
  return batch.data.children.reduce((sum, child) => sum + bytesOf(child), 0);
}
