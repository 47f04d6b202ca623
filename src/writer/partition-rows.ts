/**
 * Groups a batch's rows by partition with a counting sort, the way Gluten's
 * `buildPartition2Row` does, keeping input order within each partition.
 *
 * Worked example: 7 rows, 4 partitions, partition ids [3, 1, 1, 1, 2, 2, 0]
 *
 * ```text
 * rowCount             [1, 3, 2, 1]        rows per partition
 * partition2RowOffset  [0, 1, 4, 6, 7]     exclusive prefix sum, numPartitions + 1 entries
 * rowOffset2RowId      [6, 1, 2, 3, 4, 5, 0]
 * usedPartitions       [0, 1, 2, 3]        partitions with at least one row, ascending
 * ```
 * Partition p's rows are rowOffset2RowId[partition2RowOffset[p] .. partition2RowOffset[p+1]).
 *
 * The arrays are reused across batches; they grow, never shrink.
 */
export class PartitionRows {
  readonly numPartitions: number;
  /** partition2RowOffset[p] = first position of partition p in rowOffset2RowId */
  readonly partition2RowOffset: Uint32Array;
  /** row ids grouped by partition */
  rowOffset2RowId: Uint32Array = new Uint32Array(0);
  /** the partitions that received rows in the last batch, ascending */
  usedPartitions: Uint32Array;
  usedCount = 0;
  /** the most rows any one partition received in the last batch */
  maxRowCount = 0;
  private readonly cursor: Uint32Array;

  constructor(numPartitions: number) {
    this.numPartitions = numPartitions;
    this.partition2RowOffset = new Uint32Array(numPartitions + 1);
    this.usedPartitions = new Uint32Array(numPartitions);
    this.cursor = new Uint32Array(numPartitions);
  }

  /** Rows of partition p in the last batch. */
  rowCount(p: number): number {
    return this.partition2RowOffset[p + 1]! - this.partition2RowOffset[p]!;
  }

  /** Groups rows [0, rows) by their partition ids (each must be < numPartitions). */
  build(partitionIds: Uint32Array, rows: number): void {
    const n = this.numPartitions;
    const offsets = this.partition2RowOffset;
    const cursor = this.cursor;
    if (this.rowOffset2RowId.length < rows) this.rowOffset2RowId = new Uint32Array(rows);
    const rowIds = this.rowOffset2RowId;

    cursor.fill(0);
    for (let row = 0; row < rows; row++) cursor[partitionIds[row]!]!++;

    let used = 0;
    let sum = 0;
    let max = 0;
    for (let p = 0; p < n; p++) {
      const count = cursor[p]!;
      if (count > max) max = count;
      offsets[p] = sum;
      cursor[p] = sum;
      if (count > 0) this.usedPartitions[used++] = p;
      sum += count;
    }
    offsets[n] = sum;
    this.usedCount = used;
    this.maxRowCount = max;

    for (let row = 0; row < rows; row++) rowIds[cursor[partitionIds[row]!]!++] = row;
  }
}
