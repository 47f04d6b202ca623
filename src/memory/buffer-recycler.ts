/**
 * Large buffers that consumers of one memory pool gave back, kept for the next
 * consumer that asks for the same length: a fresh large buffer is slow here
 * (memory touched for the first time: about 3 ms per MiB, against a memset of
 * warm memory at 16 GB/s; see the platform facts), and under a tight limit a
 * writer drops and re-creates its buffers at every reclaim.
 *
 * Only buffers of at least `MIN_BYTES` (4 KiB) are kept: smaller ones are
 * cheap to allocate and would only fill the lists. A writer's partition
 * buffers at P = 200 are mostly 16-64 KiB (1,700 of 32-64 KiB for 1 M nested
 * rows). With a 64 KiB floor every task allocated them afresh; kept, they
 * halved the collector's time in a write (wide 66 ms to 39, nested 69 to 27,
 * narrow 57 to 24; medians of 8 alternating writes) and made the writes 4-10 %
 * faster. Lengths that a caller may choose (payload arenas under a memory
 * limit, binary data) are rounded up to a size class (`recycledLength`), so
 * that buffers of nearly the same size meet again.
 *
 * Memory: idle buffers are the pool's `idle` bytes, part of what it holds
 * under its limit, so what the pool reports stays what exists. They are not
 * anyone's memory in use: the pool lets them go (oldest first) when a
 * reservation would not fit otherwise, so they never cause a spill.
 *
 * Protocol, for a consumer holding a `MemoryReservation` of the pool:
 * - `take(n)`: after reserving n bytes, instead of `new Uint8Array(n)`; the
 *   array is zeroed and exactly n bytes long. A recycled array stops being
 *   the recycler's memory: the caller's reservation counts it. `takeUnzeroed(n)`
 *   is the same for a caller that writes every byte it uses.
 * - `give(array)`: when nothing refers to `array` any more (no view of it is
 *   still being written or compressed), then release the reservation of its
 *   bytes as before, in the same synchronous step. Arrays that are views into
 *   a larger buffer, small arrays and arrays over the idle limit are let go.
 */
export class BufferRecycler {
  /** Buffers smaller than this are neither kept nor rounded. */
  static readonly MIN_BYTES = 4 * 1024;

  /** idle arrays by length, each list oldest first; the Map iterates lengths from the one given back longest ago (give re-inserts) */
  private readonly idle = new Map<number, Uint8Array[]>();
  private idleBytes = 0;
  /** takes answered from the idle lists, and takes that allocated */
  reused = 0;
  allocated = 0;

  constructor(
    /** the most bytes kept idle at once */
    readonly maxIdleBytes: number,
  ) {}

  /** Bytes held idle (reserved in the pool, used by nobody). */
  get bytes(): number {
    return this.idleBytes;
  }

  /**
   * The length to allocate for a buffer of at least `bytes` bytes when any
   * length at least that large will do: eight size classes per power of two
   * from MIN_BYTES up, so at most an eighth more (a payload keeps its arena:
   * four classes cost 5 % more peak memory at narrow P = 200). Worked example:
   * 300,000 bytes lie between 2^18 = 262,144 and 2^19; the classes there step
   * by 2^18 / 8 = 32,768, so the length is 10 x 32,768 = 327,680.
   */
  static recycledLength(bytes: number): number {
    if (bytes <= BufferRecycler.MIN_BYTES) return bytes;
    const step = 2 ** (Math.floor(Math.log2(bytes)) - 3);
    return Math.ceil(bytes / step) * step;
  }

  /** A zeroed array of exactly `bytes` bytes: an idle one of that length if there is one, else a new one. */
  take(bytes: number): Uint8Array {
    return this.reuse(bytes)?.fill(0) ?? this.allocate(bytes);
  }

  /**
   * Like `take`, but an idle array keeps the bytes its last user left: for a
   * caller that writes every byte it uses (a compressed payload's arena). The
   * zeroing was 8 of a narrow write's ~330 ms at P = 200 (77 MB of arenas).
   */
  takeUnzeroed(bytes: number): Uint8Array {
    return this.reuse(bytes) ?? this.allocate(bytes);
  }

  private reuse(bytes: number): Uint8Array | undefined {
    if (bytes < BufferRecycler.MIN_BYTES) return undefined;
    const list = this.idle.get(bytes);
    const array = list?.pop();
    if (array === undefined) return undefined;
    if (list!.length === 0) this.idle.delete(bytes);
    this.idleBytes -= bytes;
    this.reused++;
    return array;
  }

  private allocate(bytes: number): Uint8Array {
    if (bytes >= BufferRecycler.MIN_BYTES) this.allocated++;
    return new Uint8Array(bytes);
  }

  /**
   * Keeps `array` for a later `take` of its length, if it is a whole large
   * buffer of at most maxIdleBytes. When the idle buffers are full, those of
   * the lengths given back longest ago go to make room: the buffers just given
   * back are the ones the next task of the same kind asks for. Keeping the old
   * ones instead, a pool that had served wide rows and the sort writer kept
   * 256 MiB of their lengths, and narrow writes after them got fresh memory.
   */
  give(array: Uint8Array): void {
    const bytes = array.byteLength;
    if (bytes < BufferRecycler.MIN_BYTES || array.byteOffset !== 0 || bytes !== array.buffer.byteLength) return;
    if (bytes > this.maxIdleBytes) return;
    const list = this.idle.get(bytes) ?? [];
    this.idle.delete(bytes); // set again below, as the newest length
    list.push(array);
    this.idle.set(bytes, list);
    this.idleBytes += bytes;
    if (this.idleBytes > this.maxIdleBytes) this.drop(this.idleBytes - this.maxIdleBytes);
  }

  /**
   * Lets idle arrays go, those of the length given back longest ago first (the
   * oldest of each), until `bytes` are released or none is left; returns the bytes released.
   * `bytes` must be a number >= 0 (Infinity: all): anything else is a RangeError, as the pool's
   * reservation changes are, since a negative count made the idle bytes grow and NaN made them NaN for good.
   */
  drop(bytes: number): number {
    if (!(bytes >= 0)) throw new RangeError(`drop() takes a number of bytes >= 0, got ${String(bytes)}`);
    let released = 0;
    for (const [length, list] of this.idle) {
      const count = Math.min(list.length, Math.ceil((bytes - released) / length));
      list.splice(0, count);
      released += count * length;
      if (list.length === 0) this.idle.delete(length);
      if (released >= bytes) break;
    }
    this.idleBytes -= released;
    return released;
  }

  /** Lets every idle array go. */
  clear(): number {
    return this.drop(this.idleBytes);
  }
}
