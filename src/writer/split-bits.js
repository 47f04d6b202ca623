/**
 * Bit gathers for validity bitmaps and boolean values (Gluten's splitBoolType).
 * Arrow bitmaps are LSB-first: row r is bit (r & 7) of byte (r >> 3).
 */
/** dst bit (dstBit + j) = src bit (srcOffset + rowIds[start + j]) for j in [0, end - start). */
export function gatherBits(src, srcOffset, rowIds, start, end, dst, dstBit) {
    let d = dstBit;
    for (let k = start; k < end; k++, d++) {
        const s = srcOffset + rowIds[k];
        const bit = (src[s >>> 3] >>> (s & 7)) & 1;
        const mask = 1 << (d & 7);
        const i = d >>> 3;
        dst[i] = bit === 0 ? dst[i] & ~mask : dst[i] | mask;
    }
}
/** Sets bits [from, from + count) of dst to 1 (rows that are all valid). */
export function setBits(dst, from, count) {
    let bit = from;
    const end = from + count;
    while (bit < end && (bit & 7) !== 0)
        dst[bit >>> 3] |= 1 << (bit & 7), bit++;
    const wholeEnd = end & ~7;
    if (bit < wholeEnd) {
        dst.fill(0xff, bit >>> 3, wholeEnd >>> 3);
        bit = wholeEnd;
    }
    while (bit < end)
        dst[bit >>> 3] |= 1 << (bit & 7), bit++;
}
const POPCOUNT = new Uint8Array(256).map((_, b) => {
    let n = 0;
    for (let v = b; v !== 0; v >>>= 1)
        n += v & 1;
    return n;
});
/** Number of 0 bits among the first `bits` bits of a bitmap starting at bit 0. */
export function countZeroBits(bitmap, bits) {
    let ones = 0;
    const whole = bits >>> 3;
    for (let i = 0; i < whole; i++)
        ones += POPCOUNT[bitmap[i]];
    const rest = bits & 7;
    if (rest > 0)
        ones += POPCOUNT[bitmap[whole] & ((1 << rest) - 1)];
    return bits - ones;
}
