import { ShuffleError } from '../errors.js';
import { BufferRecycler } from './buffer-recycler.js';

/**
 * Something holding memory that it can give back on request, typically by
 * writing it to disk (Gluten's `Reclaimable`, DataFusion's spillable consumer).
 */
export interface Reclaimable {
  /**
   * Frees at least `bytes` bytes of its reservation if it can (spilling,
   * shrinking buffers) and returns how many bytes it freed, possibly fewer or
   * zero. Called by the pool when another reservation cannot be granted; it must
   * not itself wait for memory from the pool.
   *
   * What a consumer cannot give back at a moment (a writer's data file being
   * written, the rows a chunk is being split into) must stay within its
   * `share()`: a grow fails, rather than waits, when nothing more can be freed,
   * so memory held beyond the share could starve a consumer asking for its own.
   */
  reclaim(bytes: number): Promise<number>;
}

/**
 * A byte budget shared by named consumers (one per writer, merger, reader...).
 * The budget is a promise about ArrayBuffers: every consumer reserves before it
 * allocates and releases after it drops, counting each ArrayBuffer once.
 *
 * Protocol, for a consumer:
 * 1. `const r = pool.register(name, reclaimable?)`
 * 2. before allocating: `r.tryGrow(n)` (false is the normal signal: spill and
 *    retry) or `await r.grow(n)`, which asks reclaimable consumers, largest first,
 *    to free memory and fails with `MemoryLimitError` only when nothing more can
 *    be freed;
 * 3. after dropping: `r.shrink(n)`; at the end `r.free()` (also unregisters; a grow after it,
 *    from a step still on its way, throws CS_ABORTED, and a shrink does nothing).
 *
 * Large buffers go through `recycler` (memory/buffer-recycler.ts): allocated
 * with `take` after reserving, given back with `give` before releasing. Its
 * idle buffers are nobody's reservation but they exist: the limit bounds
 * `held` (reserved plus idle), and a reservation that would not fit lets idle
 * buffers go first, so they count as `available` too.
 */
export class MemoryPool {
  /** The byte limit, or Infinity for an unbounded pool. */
  readonly limit: number;
  /** Large buffers given back by this pool's consumers, for the next one that needs the same length. */
  readonly recycler: BufferRecycler;
  private reservedBytes = 0;
  private peakBytes = 0;
  /** @internal bytes released so far, by anyone (a grow's sign that a round made progress) */
  releasedBytes = 0;
  private readonly reservations = new Set<MemoryReservation>();
  private readonly releaseIdleAfterMs: number;
  /** armed while nothing is reserved and the recycler keeps idle buffers */
  private idleTimer: NodeJS.Timeout | null = null;

  /**
   * `maxIdleBytes`: the most the recycler keeps idle (default: 512 MiB, at most half the limit).
   * `releaseIdleAfterMs`: idle buffers are let go once nothing has been reserved for this long
   * (default 2 s; Infinity keeps them), so a pool no task uses holds no memory: the next task
   * on a busy pool gets warm buffers, a process that stopped shuffling gets its memory back.
   */
  constructor(limit: number = Number.POSITIVE_INFINITY, options: { maxIdleBytes?: number; releaseIdleAfterMs?: number } = {}) {
    if (!(limit > 0)) throw new ShuffleError('CS_INVALID_ARGUMENT', `a memory limit must be a positive number of bytes, got ${String(limit)}`);
    const releaseIdleAfterMs = options.releaseIdleAfterMs ?? DEFAULT_RELEASE_IDLE_AFTER_MS;
    if (!(releaseIdleAfterMs >= 0)) throw new ShuffleError('CS_INVALID_ARGUMENT', `releaseIdleAfterMs must be a number of milliseconds >= 0, got ${String(releaseIdleAfterMs)}`);
    this.limit = limit;
    this.releaseIdleAfterMs = releaseIdleAfterMs;
    const maxIdleBytes = options.maxIdleBytes ?? Math.min(DEFAULT_MAX_IDLE_BYTES, Math.floor(limit / 2));
    // NaN failed every comparison of the recycler's, which then kept every buffer given back
    if (!(maxIdleBytes >= 0)) throw new ShuffleError('CS_INVALID_ARGUMENT', `maxIdleBytes must be a number of bytes >= 0, got ${String(maxIdleBytes)}`);
    this.recycler = new BufferRecycler(maxIdleBytes);
  }

  /** Bytes currently reserved by all consumers. */
  get reserved(): number {
    return this.reservedBytes;
  }

  /** Bytes of idle buffers the recycler keeps for the next consumer. */
  get idle(): number {
    return this.recycler.bytes;
  }

  /** Bytes of ArrayBuffers the pool accounts for: reserved plus idle. Never more than the limit. */
  get held(): number {
    return this.reservedBytes + this.recycler.bytes;
  }

  /** The highest `held` has been when a reservation grew. */
  get peak(): number {
    return this.peakBytes;
  }

  /**
   * What each of `tasks` consumers expected to run at once may size itself for
   * (Gluten's memLimit = available / taskSlots): limit / tasks, or Infinity
   * without a limit. Sizes derived from it must stay within it, or a consumer
   * could need more than the pool holds even after every spill. `tasks` is an
   * integer >= 1 (a RangeError otherwise: 0 gave Infinity, a string NaN).
   */
  share(tasks = 1): number {
    if (!(Number.isInteger(tasks) && tasks >= 1)) throw new RangeError(`share() takes a number of tasks >= 1, got ${String(tasks)}`);
    return Number.isFinite(this.limit) ? Math.floor(this.limit / tasks) : Number.POSITIVE_INFINITY;
  }

  /** Bytes a reservation may still get: what is not held, plus the idle buffers (let go on demand). */
  get available(): number {
    return this.limit - this.reservedBytes;
  }

  /** Registers a consumer; pass `reclaimable` if it can give memory back on request. */
  register(name: string, reclaimable?: Reclaimable): MemoryReservation {
    const reservation = new MemoryReservation(this, name, reclaimable ?? null);
    this.reservations.add(reservation);
    return reservation;
  }

  /** Each consumer's current and peak reservation, largest first (for error messages and metrics). */
  consumers(): { name: string; reserved: number; peak: number }[] {
    return [...this.reservations]
      .map((r) => ({ name: r.name, reserved: r.size, peak: r.peak }))
      .sort((a, b) => b.reserved - a.reserved);
  }

  /** @internal */
  _tryGrow(bytes: number): boolean {
    if (this.reservedBytes + bytes > this.limit) return false;
    const over = this.held + bytes - this.limit;
    if (over > 0) this.recycler.drop(over);
    this.reservedBytes += bytes;
    if (this.held > this.peakBytes) this.peakBytes = this.held;
    return true;
  }

  /** @internal */
  _shrink(bytes: number): void {
    this.reservedBytes -= bytes;
    this.releasedBytes += bytes;
    if (this.reservedBytes === 0 && this.recycler.bytes > 0) this.releaseIdleLater();
  }

  /**
   * (Re)starts the countdown after which idle buffers are let go, unless
   * something is reserved by then. Unref'd: it never keeps the process alive.
   */
  private releaseIdleLater(): void {
    if (this.releaseIdleAfterMs > MAX_TIMER_MS) return; // Infinity (or longer than a timer can wait): kept
    if (this.idleTimer !== null) {
      this.idleTimer.refresh();
      return;
    }
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.reservedBytes === 0) this.recycler.clear();
    }, this.releaseIdleAfterMs);
    this.idleTimer.unref();
  }

  /** @internal whether some consumer is reclaiming right now (memory may free up soon) */
  _anyReclaiming(): boolean {
    for (const r of this.reservations) if (r.reclaiming !== null) return true;
    return false;
  }

  /** @internal */
  _unregister(reservation: MemoryReservation): void {
    this.reservations.delete(reservation);
  }

  /**
   * @internal Asks reclaimable consumers, largest first (the requester last),
   * to free `bytes`; returns bytes freed. A consumer that is already reclaiming
   * for someone else is waited for instead of asked twice, and the ones after it
   * are asked only for what its reclaim left missing. Another consumer whose
   * reclaim fails (a disk error while spilling) is skipped, its error kept as the
   * cause should the reservation fail in the end; the requester's own failure
   * is returned to be thrown as it is.
   */
  async _reclaim(bytes: number, requester: MemoryReservation, want: number): Promise<{ granted: boolean; freed: number; errors: unknown[]; ownFailure: { thrown: unknown } | null }> {
    let freed = 0;
    const errors: unknown[] = [];
    // boxed: a consumer may throw anything, `undefined` too, and that is a failure all the same
    let ownFailure: { thrown: unknown } | null = null;
    const candidates = [...this.reservations]
      .filter((r) => r.reclaimable !== null && r.size > 0)
      .sort((a, b) => (a === requester ? 1 : 0) - (b === requester ? 1 : 0) || b.size - a.size);
    for (const candidate of candidates) {
      if (freed >= bytes) break;
      if (candidate.reclaiming !== null) {
        await candidate.reclaiming.catch(() => undefined);
      } else {
        // what the round still lacks, or less if a reclaim waited for freed part of it (another grow's, which
        // that grow took): after a failed tryGrow(want), want - available is at least 1
        const reclaiming = candidate.reclaimable!.reclaim(Math.min(bytes - freed, want - this.available));
        candidate.reclaiming = reclaiming;
        try {
          freed += await reclaiming;
        } catch (error) {
          if (candidate === requester) ownFailure = { thrown: error };
          else errors.push(error);
        } finally {
          candidate.reclaiming = null;
        }
      }
      // granted at once: asking the next candidate can take long (a spill on disk), and a consumer that
      // goes on working meanwhile would take back what this one freed (or what a reclaim waited for freed)
      if (ownFailure === null && requester.tryGrow(want)) return { granted: true, freed, errors, ownFailure };
    }
    return { granted: false, freed, errors, ownFailure };
  }
}

/** One consumer's share of a MemoryPool. */
export class MemoryReservation {
  private bytes = 0;
  private peakBytes = 0;
  /** set by free(): the consumer has left the pool, and a grow still on its way must not be granted */
  private released = false;
  /** @internal the reclaim the pool is running on this consumer, if any */
  reclaiming: Promise<number> | null = null;

  /** @internal */
  constructor(
    private readonly pool: MemoryPool,
    readonly name: string,
    readonly reclaimable: Reclaimable | null,
  ) {}

  get size(): number {
    return this.bytes;
  }

  /** The pool's recycler of large buffers: `take` after reserving, `give` before releasing. */
  get recycler(): BufferRecycler {
    return this.pool.recycler;
  }

  get peak(): number {
    return this.peakBytes;
  }

  /** Reserves `bytes` if the pool has them; false means "free something and retry". After free(), throws CS_ABORTED. */
  tryGrow(bytes: number): boolean {
    assertBytes(bytes);
    // granted after free() (an abort while this consumer waited for memory), it was never given back
    if (this.released) throw new ShuffleError('CS_ABORTED', `${this.name} has released its memory and left the pool (it was aborted or finished): it takes no more`);
    if (!this.pool._tryGrow(bytes)) return false;
    this.bytes += bytes;
    if (this.bytes > this.peakBytes) this.peakBytes = this.bytes;
    return true;
  }

  /**
   * Reserves as much of `bytes` as `share` of what the pool has free right now
   * allows (never reclaiming: memory that is nice to have, not needed); returns the bytes reserved.
   */
  tryGrowUpTo(bytes: number, share = 1): number {
    const granted = Math.max(0, Math.min(bytes, Math.floor(this.pool.available * share)));
    return granted > 0 && this.tryGrow(granted) ? granted : 0;
  }

  /**
   * Reserves `bytes`, asking reclaimable consumers (other ones first, this one
   * last) to free memory when the pool is short. Throws MemoryLimitError when
   * not enough can be freed (at once, asking nobody, for more than the whole
   * limit), and CS_ABORTED when free() came first (also while it waited).
   */
  async grow(bytes: number): Promise<void> {
    if (this.tryGrow(bytes)) return;
    // more than the whole pool: no reclaim can make room, so no consumer is made to spill for it
    if (bytes > this.pool.limit) throw new MemoryLimitError(this.name, bytes, this.bytes, this.pool);
    const errors: unknown[] = [];
    for (let attempt = 0; attempt < MAX_RECLAIM_ROUNDS; attempt++) {
      const missing = bytes - this.pool.available;
      const reservedBefore = this.pool.reserved;
      const releasedBefore = this.pool.releasedBytes;
      const result = await this.pool._reclaim(missing, this, bytes);
      if (result.ownFailure !== null) throw result.ownFailure.thrown; // e.g. this consumer's own spill hit a full disk
      if (result.granted) return;
      errors.push(...result.errors);
      if (this.tryGrow(bytes)) return;
      // A round that freed nothing proves nothing more can be freed only if nobody freed or took memory
      // meanwhile: memory another consumer freed may have been taken by a third, and a consumer that went
      // on working while it was asked may now hold spillable memory it did not hold then.
      const moved = this.pool.releasedBytes > releasedBefore || this.pool.reserved > reservedBefore;
      if (result.freed === 0 && result.errors.length === 0 && !moved && !this.pool._anyReclaiming()) break;
    }
    throw new MemoryLimitError(this.name, bytes, this.bytes, this.pool, errors[0]);
  }

  /** Releases `bytes` of this reservation. */
  shrink(bytes: number): void {
    assertBytes(bytes);
    if (this.released) return; // free() gave everything back: what a step still on its way releases is released already
    if (bytes > this.bytes) throw new RangeError(`${this.name} releases ${bytes} bytes but holds ${this.bytes}`);
    this.bytes -= bytes;
    this.pool._shrink(bytes);
  }

  /** Sets the reservation to exactly `bytes` (growing through tryGrow semantics: false if refused). */
  tryResize(bytes: number): boolean {
    if (bytes >= this.bytes) return this.tryGrow(bytes - this.bytes);
    this.shrink(this.bytes - bytes);
    return true;
  }

  /** Releases everything and leaves the pool for good: a later grow is refused (CS_ABORTED), a later shrink does nothing. */
  free(): void {
    if (this.bytes > 0) this.shrink(this.bytes);
    this.released = true;
    this.pool._unregister(this);
  }
}

/**
 * The most an unbounded pool's recycler keeps idle: more than one writer holds
 * at its peak in the benchmark's cases (156 MiB for wide rows at P = 200, 270-287
 * MiB at P = 1000 and up), so the next task of the process finds all of it warm.
 * With 64 MiB, wide rows at P = 200 wrote 1.6x slower (most payload arenas were
 * fresh memory); with 256 MiB, writes at P = 1000 and up got a tenth to a half
 * of their buffers fresh: wide rows at P = 1000 took 2,452 ms against 1,686
 * with 512 MiB (CPU 1,615 against 1,251), nested at P = 1000 1,808 against
 * 1,525, narrow at P = 4000 2,019 against 1,894 (medians of 6-8 writes
 * alternating between two pools in one process). It bounds what a busy pool
 * keeps of lengths nobody asks for any more; a pool nobody uses lets them go
 * after `releaseIdleAfterMs`.
 */
const DEFAULT_MAX_IDLE_BYTES = 512 * 1024 * 1024;
/** How long a pool with nothing reserved keeps its idle buffers. */
const DEFAULT_RELEASE_IDLE_AFTER_MS = 2000;
/** The longest delay setTimeout takes (a longer one fires after 1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Rounds of asking consumers to free memory before a grow gives up (fewer when a round shows nothing can be). */
const MAX_RECLAIM_ROUNDS = 8;

function assertBytes(bytes: number): void {
  if (!(Number.isSafeInteger(bytes) && bytes >= 0)) throw new RangeError(`a reservation change must be a whole number of bytes >= 0, got ${bytes}`);
}

/** The pool could not grant a reservation even after asking every reclaimable consumer. */
export class MemoryLimitError extends ShuffleError {
  override name = 'MemoryLimitError';
  readonly requester: string;
  readonly requested: number;

  constructor(requester: string, requested: number, held: number, pool: MemoryPool, cause?: unknown) {
    const top = pool
      .consumers()
      .slice(0, 3)
      .map((c) => `${c.name} ${c.reserved}`)
      .join(', ');
    super(
      'CS_MEMORY_LIMIT',
      `${requester} asked for ${requested} more bytes (holding ${held}) but the pool has ${pool.available} of ${pool.limit} left ` +
        `and nothing more could be freed (largest consumers: ${top})` +
        (cause instanceof Error ? `; a reclaim failed: ${cause.message}` : ''),
      {},
      { cause },
    );
    this.requester = requester;
    this.requested = requested;
  }
}
