import type { MemoryReservation } from './memory-pool.js';

/** One slab: an array reserved whole, handed out front to back. */
interface Slab {
  readonly bytes: Uint8Array;
  /** bytes handed out so far */
  used: number;
  /** ranges handed out and not yet released */
  live: number;
}

/** A range of a slab, zeroed when handed out, 8-aligned. */
export interface SlabRange {
  readonly bytes: Uint8Array;
  readonly slab: Slab;
}

/**
 * Small arrays carved out of large slabs, for things made by the ten thousand
 * that die together: the uncompressed payloads of a writer under a tight memory
 * limit or with thousands of partitions (a few KiB each, all dropped by the
 * next spill). One `new Uint8Array` per payload cost more than copying its
 * rows, and every one of them was an ArrayBuffer for the collector to track.
 *
 * Memory: a slab is reserved whole in the reservation before it is taken
 * from the pool's recycler (`tryGrow`: never waits, never reclaims; when the
 * pool says no, `allocate` returns null and the caller allocates on its own),
 * and given back to the recycler and released when its last range is. The
 * slab being filled is kept when it empties, and reused from its start
 * (zeroed again), until `trim()` (a reclaim) lets it go too; the next slab is
 * then likely the same array, back from the recycler.
 *
 * ```text
 * slab   [ range | range | range |        free        ]
 *          ^ live: 3               ^ used
 * ```
 *
 * Protocol: `allocate(n)` (null: allocate elsewhere), `release(range)` once
 * for each range when nothing refers to its bytes any more, `trim()` when the
 * memory is wanted back, `releaseAll()` at the end (the ranges still out must
 * no longer be used).
 */
export class SlabAllocator {
  private current: Slab | null = null;
  private slabs = 0;

  constructor(
    private readonly reservation: MemoryReservation,
    readonly slabBytes: number,
  ) {}

  /** Bytes reserved for slabs. */
  get reservedBytes(): number {
    return this.slabs * this.slabBytes;
  }

  /**
   * `bytes` zeroed bytes (rounded up to a multiple of 8) from a slab, or null
   * when they are more than an eighth of a slab (a range that large gains
   * nothing here) or the pool has no room for another slab right now.
   */
  allocate(bytes: number): SlabRange | null {
    const length = (bytes + 7) & ~7;
    if (length > this.slabBytes >>> 3) return null;
    let slab = this.current;
    // (a current slab with nothing out starts over at once, in release(): a full one has ranges out)
    if (slab === null || slab.used + length > slab.bytes.byteLength) {
      if (!this.reservation.tryGrow(this.slabBytes)) return null;
      slab = { bytes: this.reservation.recycler.take(this.slabBytes), used: 0, live: 0 };
      this.slabs++;
      this.current = slab;
    }
    const range: SlabRange = { bytes: slab.bytes.subarray(slab.used, slab.used + bytes), slab };
    slab.used += length;
    slab.live++;
    return range;
  }

  /** Gives a range back; returns the bytes released to the reservation (a whole slab, or 0). */
  release(range: SlabRange): number {
    const slab = range.slab;
    slab.live--;
    if (slab.live > 0) return 0;
    if (slab === this.current) {
      // reused from its start: zeroed again, as handed-out ranges promise
      slab.bytes.fill(0, 0, slab.used);
      slab.used = 0;
      return 0;
    }
    return this.drop(slab);
  }

  /** Releases the slab being filled when it has nothing out (a reclaim wants the memory back); returns the bytes. */
  trim(): number {
    if (this.current === null || this.current.live > 0) return 0;
    const slab = this.current;
    this.current = null;
    return this.drop(slab);
  }

  /** Releases every slab; ranges still out must not be used any more. */
  releaseAll(): number {
    const bytes = this.reservedBytes;
    if (this.current !== null) this.reservation.recycler.give(this.current.bytes);
    this.current = null;
    this.slabs = 0;
    this.reservation.shrink(bytes);
    return bytes;
  }

  private drop(slab: Slab): number {
    this.reservation.recycler.give(slab.bytes);
    this.slabs--;
    this.reservation.shrink(this.slabBytes);
    return this.slabBytes;
  }
}
