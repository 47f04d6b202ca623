export function partitionBufferRows(input) {
    const memory = Math.max(input.memLimit, input.memLimitFloor);
    const perPartition = Math.floor(Math.floor(memory / Math.max(1, input.bytesPerRow)) / input.numPartitions);
    return Math.min(Math.floor(perPartition / 4), input.maxBatchRows);
}
/**
 * The capacity a partition buffer should have for a batch bringing `incoming`
 * rows, given its `current` capacity and the freshly computed `preferred` one.
 * A buffer is re-sized only when the preferred size is outside ±threshold of the
 * current one (Gluten's realloc threshold, 0.25), so sizes that wobble with the
 * running string-length average do not re-allocate on every batch; it always
 * holds at least the incoming rows.
 *
 * Worked example with threshold 0.25 and current capacity 4000:
 *
 * ```text
 * preferred 4500, incoming 100  -> 4000   (within 3000..5000: keep, flush if full)
 * preferred 5200, incoming 100  -> 5200   (above 5000: grow)
 * preferred 2900, incoming 100  -> 2900   (below 3000: shrink)
 * preferred 4500, incoming 4800 -> 4800   (must hold the batch's rows)
 * ```
 */
export function targetCapacity(current, preferred, incoming, threshold) {
    const wanted = Math.max(preferred, incoming, 1);
    if (current === 0)
        return wanted;
    const withinBand = wanted >= (1 - threshold) * current && wanted <= (1 + threshold) * current;
    return Math.max(withinBand ? current : wanted, incoming);
}
