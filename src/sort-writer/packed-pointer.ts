/**
 * One 64-bit pointer per buffered row, as Spark's PackedRecordPointer lays it
 * out, and the array of them that the sort writer radix-sorts on the
 * partition bits (Spark's ShuffleInMemorySorter with useRadixSort).
 *
 * ```text
 * bit 63           40 39        27 26                 0
 *     | partition id | page number | offset in the page |
 *       24 bits        13 bits       27 bits
 * ```
 * JavaScript has no 64-bit integers outside BigInt (far too slow here), so a
 * pointer is two 32-bit words, stored little-endian as the u64 would be:
 *
 * ```text
 * words[2r]     lo = (page & 0x1f) << 27 | offset
 * words[2r + 1] hi = partition << 8 | page >>> 5
 * ```
 * e.g. partition 3, page 37 (0b1_00101), offset 1000: hi = 3 << 8 | 1 = 0x301,
 * lo = 5 << 27 | 1000 = 0x280003E8. The partition is `hi >>> 8`, so sorting on
 * bytes 1-3 of hi (bytes 5-7 of the u64) orders the rows by partition.
 */

/** Spark's MAX_SHUFFLE_OUTPUT_PARTITIONS_FOR_SERIALIZED_MODE: partition ids have 24 bits. */
export const MAX_PARTITIONS = 1 << 24;
/** Page numbers have 13 bits. */
export const MAX_PAGES = 1 << 13;
/** Offsets have 27 bits: a standard page holds at most 128 MiB (a row larger than a page gets a page of its own, at offset 0). */
export const MAX_PAGE_OFFSET = (1 << 27) - 1;
/** Bytes one pointer slot costs: the pointer and its radix-sort scratch, 8 bytes each. */
export const POINTER_SLOT_BYTES = 16;

export function packHi(partition: number, page: number): number {
  return ((partition << 8) | (page >>> 5)) >>> 0;
}

export function packLo(page: number, offset: number): number {
  return (((page & 0x1f) << 27) | offset) >>> 0;
}

export function partitionOf(hi: number): number {
  return hi >>> 8;
}

export function pageOf(hi: number, lo: number): number {
  return ((hi & 0xff) << 5) | (lo >>> 27);
}

export function offsetOf(lo: number): number {
  return lo & MAX_PAGE_OFFSET;
}

/**
 * A growable array of packed pointers with its sort scratch (same size: an
 * LSD radix sort needs room for a second copy). Memory is the caller's to
 * reserve: `capacity * POINTER_SLOT_BYTES`.
 */
export class PointerArray {
  words = new Uint32Array(0);
  private scratch = new Uint32Array(0);
  count = 0;

  get capacity(): number {
    return this.words.length >>> 1;
  }

  get allocatedBytes(): number {
    return this.words.byteLength + this.scratch.byteLength;
  }

  /** Re-allocates for `capacity` pointers (>= count), keeping them. */
  resize(capacity: number): void {
    const words = new Uint32Array(capacity * 2);
    words.set(this.words.subarray(0, this.count * 2));
    this.words = words;
    this.scratch = new Uint32Array(capacity * 2);
  }

  /** Drops both arrays (capacity 0; count must be 0). */
  release(): void {
    this.words = new Uint32Array(0);
    this.scratch = new Uint32Array(0);
  }

  append(hi: number, lo: number): void {
    const at = this.count * 2;
    this.words[at] = lo;
    this.words[at + 1] = hi;
    this.count++;
  }

  /**
   * Sorts the pointers by partition, keeping insertion order within a
   * partition; returns the array that holds them sorted (the pointer array or
   * its scratch). The result is valid until the next append or resize.
   */
  sortByPartition(): Uint32Array {
    return radixSortByPartition(this.words, this.scratch, this.count);
  }
}

/**
 * LSD radix sort of `count` packed pointers on their partition bits, one
 * byte at a time (bits 8-15, 16-23, 24-31 of hi), stable, so that rows of one
 * partition keep the order they were appended in. Like Spark's RadixSort, it
 * counts every byte in one pre-pass and skips a byte on which all pointers
 * agree (found from the bitwise OR and AND of every hi word): with fewer than
 * 257 partitions one pass sorts everything, up to 65 536 two.
 *
 * Worked example, 5 pointers (partition:row), bytes 1 and 2 of hi:
 * ```text
 * input                  3:a  1:b  258:c  3:d  1:e      258 = 0x0102
 * byte 1 digits          03   01   02     03   01       byte 2 digits: 00 00 01 00 00
 * after the byte-1 pass  1:b  1:e  258:c  3:a  3:d
 * after the byte-2 pass  1:b  1:e  3:a  3:d  258:c      byte 3 is 0 everywhere: skipped
 * ```
 * Returns whichever of `words` and `scratch` holds the result.
 */
export function radixSortByPartition(words: Uint32Array, scratch: Uint32Array, count: number): Uint32Array {
  const counts = new Uint32Array(3 * 256);
  let or = 0;
  let and = 0xffffffff;
  for (let r = 0; r < count; r++) {
    const hi = words[2 * r + 1]!;
    counts[(hi >>> 8) & 0xff]!++;
    counts[256 + ((hi >>> 16) & 0xff)]!++;
    counts[512 + (hi >>> 24)]!++;
    or |= hi;
    and &= hi;
  }
  const differing = (or ^ and) >>> 0;
  let src = words;
  let dst = scratch;
  for (let b = 0; b < 3; b++) {
    const shift = 8 + 8 * b;
    if (((differing >>> shift) & 0xff) === 0) continue; // every pointer has the same digit: the pass would move nothing
    const base = b * 256;
    let sum = 0;
    for (let d = 0; d < 256; d++) {
      const c = counts[base + d]!;
      counts[base + d] = sum;
      sum += c;
    }
    for (let r = 0; r < count; r++) {
      const lo = src[2 * r]!;
      const hi = src[2 * r + 1]!;
      const at = 2 * counts[base + ((hi >>> shift) & 0xff)]!++;
      dst[at] = lo;
      dst[at + 1] = hi;
    }
    const t = src;
    src = dst;
    dst = t;
  }
  return src;
}
