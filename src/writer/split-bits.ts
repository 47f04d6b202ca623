/**
 * Bit gathers for validity bitmaps and boolean values (Gluten's splitBoolType).
 * Arrow bitmaps are LSB-first: row r is bit (r & 7) of byte (r >> 3).
 */

/**
 * dst bit (dstBit + j) = src bit (srcOffset + rowIds[start + j]) for j in [0, end - start).
 *
 * Bits are collected in a register and stored a whole byte at a time; only
 * the first and last byte are merged with the bits already there. Worked
 * example: dstBit 5, three bits b0 b1 b2 = 1 0 1:
 *
 * ```text
 * byte 0: keep bits 0..4, bit 5 = b0, bit 6 = b1, bit 7 = b2   (stored when full)
 * ```
 * With four bits, b3 goes to bit 0 of byte 1, whose bits 1..7 are kept.
 */
export function gatherBits(
  src: Uint8Array,
  srcOffset: number,
  rowIds: Uint32Array,
  start: number,
  end: number,
  dst: Uint8Array,
  dstBit: number,
): void {
  if (start >= end) return;
  let i = dstBit >>> 3;
  let shift = dstBit & 7;
  let acc = dst[i]! & ((1 << shift) - 1); // the bits before dstBit
  for (let k = start; k < end; k++) {
    const s = srcOffset + rowIds[k]!;
    acc |= ((src[s >>> 3]! >>> (s & 7)) & 1) << shift;
    if (++shift === 8) {
      dst[i++] = acc;
      acc = 0;
      shift = 0;
    }
  }
  if (shift > 0) dst[i] = acc | (dst[i]! & (0xff << shift)); // keep the bits after the last one written
}

/** Sets bits [from, from + count) of dst to 1 (rows that are all valid). */
export function setBits(dst: Uint8Array, from: number, count: number): void {
  let bit = from;
  const end = from + count;
  while (bit < end && (bit & 7) !== 0) dst[bit >>> 3]! |= 1 << (bit & 7), bit++;
  const wholeEnd = end & ~7;
  if (bit < wholeEnd) {
    dst.fill(0xff, bit >>> 3, wholeEnd >>> 3);
    bit = wholeEnd;
  }
  while (bit < end) dst[bit >>> 3]! |= 1 << (bit & 7), bit++;
}

const POPCOUNT = new Uint8Array(256).map((_, b) => {
  let n = 0;
  for (let v = b; v !== 0; v >>>= 1) n += v & 1;
  return n;
});

/** Number of 0 bits among the first `bits` bits of a bitmap starting at bit 0. */
export function countZeroBits(bitmap: Uint8Array, bits: number): number {
  let ones = 0;
  const whole = bits >>> 3;
  for (let i = 0; i < whole; i++) ones += POPCOUNT[bitmap[i]!]!;
  const rest = bits & 7;
  if (rest > 0) ones += POPCOUNT[bitmap[whole]! & ((1 << rest) - 1)]!;
  return bits - ones;
}

/** Number of 0 bits among bits [offset, offset + bits) of a bitmap: the bits up to a whole byte one by one, then countZeroBits. */
export function countZeroBitsAt(bitmap: Uint8Array, offset: number, bits: number): number {
  const head = Math.min(bits, (8 - (offset & 7)) & 7);
  let zeros = 0;
  for (let bit = offset; bit < offset + head; bit++) zeros += 1 - ((bitmap[bit >>> 3]! >>> (bit & 7)) & 1);
  return zeros + countZeroBits(bitmap.subarray((offset + head) >>> 3), bits - head);
}
