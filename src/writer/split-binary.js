/** Strings up to this length are copied byte by byte: faster than set(subarray) for short values. */
const SHORT_VALUE_BYTES = 32;
/**
 * Gathers binary / utf8 values (Gluten's splitBinaryType), writing Arrow
 * offsets (int32, or int64 as low word + zero high word) instead of Gluten's
 * lengths, so a partition buffer is an Arrow array as it stands.
 *
 * Worked example: src offsets [0, 2, 5, 9] ("ab", "cde", "fghi"), rowIds [2, 0],
 * a partition already holding "xy" (offsets [0, 2], dataLength 2):
 *
 * ```text
 * dst offsets  [0, 2, 6, 8]     2 + len("fghi") = 6, 6 + len("ab") = 8
 * dst data     "xyfghiab"
 * ```
 */
export function splitBinary(src, rowIds, start, end, dst, dstRow) {
    const offsets = src.offsets;
    const stride = src.offsetStride;
    const srcData = src.bytes;
    const dstOffsets = dst.values32;
    let dstData = dst.data;
    let pos = dst.dataLength;
    let o = (dstRow + 1) * stride;
    for (let k = start; k < end; k++, o += stride) {
        const r = rowIds[k] * stride;
        const from = offsets[r];
        const to = offsets[r + stride];
        if (pos + to - from > dstData.byteLength) {
            // rare: grow for this value and, at the same average size, the rest of the rows
            dst.dataLength = pos;
            dst.ensureDataCapacity(pos + (to - from) * (end - k));
            dstData = dst.data;
        }
        if (to - from <= SHORT_VALUE_BYTES) {
            for (let b = from; b < to; b++)
                dstData[pos++] = srcData[b];
        }
        else {
            dstData.set(srcData.subarray(from, to), pos);
            pos += to - from;
        }
        dstOffsets[o] = pos;
    }
    dst.dataLength = pos;
}
/** Value bytes of the rows rowIds[start, end): what a partition's data buffer must take in. */
export function binaryBytesOf(src, rowIds, start, end) {
    const offsets = src.offsets;
    const stride = src.offsetStride;
    let bytes = 0;
    for (let k = start; k < end; k++) {
        const r = rowIds[k] * stride;
        bytes += offsets[r + stride] - offsets[r];
    }
    return bytes;
}
