import { writesPartition, type DataFileWriter } from '../format/output-files.js';
import type { SpillFile } from '../spill/spill-file.js';
import type { BlockSink } from './block-writer.js';
import { ROW_END } from './row-format.js';

/**
 * The sink of the sort writer's final pass (Gluten opens the final data file
 * as the target of its last eviction): it writes the data file partition by
 * partition, in ascending order, each non-empty partition as
 *
 * ```text
 * header | its spilled blocks, run by run (copied verbatim) | its in-memory blocks | end
 * ```
 * and, when no partition has rows, partition 0 as `header | end`, so that the
 * output keeps its schema.
 * In-memory blocks arrive through `write` in partition order; partitions
 * between them that only have spilled rows, or none at all, are written when
 * the next partition arrives or at `finish`.
 *
 * Protocol: `write`/`flush` from a BlockWriter, then `finish()` once.
 */
export class RowPartitionMerger implements BlockSink {
  /** the partition whose blocks are being written, or -1 */
  private open = -1;
  /** the next partition not begun yet */
  private next = 0;

  constructor(
    private readonly output: DataFileWriter,
    /** the partition header (row-format.ts), the same bytes for every partition */
    private readonly header: Uint8Array,
    private readonly spill: SpillFile | null,
    /** read buffer for spilled segments */
    private readonly buffer: Uint8Array,
    /** rows each partition received (spilled or not): a partition without rows stays empty */
    private readonly partitionRows: ArrayLike<number>,
  ) {
    this.noRows = Array.prototype.every.call(partitionRows, (rows: number) => rows === 0);
  }

  /** no partition has rows: partition 0 is written all the same (header and end), for the schema */
  private readonly noRows: boolean;

  /** Whether partition p is written (else it stays empty: no bytes). */
  private holdsBytes(p: number): boolean {
    return writesPartition(p, this.partitionRows[p]!, this.noRows);
  }

  async write(partition: number, chunks: readonly Uint8Array[]): Promise<void> {
    if (partition !== this.open) await this.advanceTo(partition);
    for (const chunk of chunks) await this.output.append(chunk);
  }

  async flush(): Promise<void> {
    await this.output.flush();
  }

  /** Writes the partitions after the last block's, and the end of the open one. */
  async finish(): Promise<void> {
    await this.advanceTo(this.partitionRows.length);
    await this.output.flush();
  }

  /** Ends the open partition, writes every partition before p, and begins p (unless p is past the last). */
  private async advanceTo(partition: number): Promise<void> {
    if (partition < this.next) throw new Error(`blocks must come in partition order: ${partition} after ${this.next - 1}`);
    if (this.open >= 0) await this.end();
    while (this.next < partition) {
      const p = this.next;
      await this.begin(p);
      if (this.holdsBytes(p)) await this.end();
      else this.output.endPartition();
    }
    if (partition < this.partitionRows.length) {
      await this.begin(partition);
      this.open = partition;
    }
  }

  private async begin(p: number): Promise<void> {
    this.output.beginPartition(p);
    this.next = p + 1;
    if (!this.holdsBytes(p)) return;
    await this.output.append(this.header);
    await this.spill?.copyPartition(p, this.buffer, { append: (bytes) => this.output.append(bytes), flush: () => this.output.flush() });
  }

  private async end(): Promise<void> {
    await this.output.append(ROW_END);
    this.output.endPartition();
    this.open = -1;
  }
}
