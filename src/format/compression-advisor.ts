/**
 * Decides, per body-buffer position (column c's values, offsets, ...), whether
 * compressing is worth the CPU. Random floats, hashes and short random strings
 * do not shrink under LZ4, and compressing them costs more than everything else
 * the writer does. A position whose buffers keep saving less than `minSavings`
 * is stored raw (the spec's -1 prefix) for a while, then tried again, with a
 * back-off that doubles while it keeps failing. Arrow C++ has the same idea as
 * its `min_space_savings` option (unset by default there; 0.15 here, see
 * DEFAULT_MIN_SAVINGS).
 *
 * ```text
 * attempt:  miss miss miss miss | skip x16 | miss | skip x32 | hit | ...
 *           (MISSES_BEFORE_SKIP)            (back-off doubles)   (reset)
 * ```
 * Outcomes arrive late (compression runs in the background, and finish()
 * emits every partition at once), so a retry after a skip is a single probe:
 * the position keeps being skipped until the probe has reported back.
 * Without this, every buffer emitted while the probe compressed was tried too.
 */
/** Decides whether a body buffer at a position is worth compressing, and learns from the outcome. */
export interface CompressionPolicy {
  /** true when shouldCompress is false for every position, always (nothing to ask, nothing to wait for) */
  readonly neverCompresses?: boolean;
  shouldCompress(position: number): boolean;
  record(position: number, rawBytes: number, compressedBytes: number): void;
  /**
   * When deciding for this position now would be a guess (no outcome known
   * yet and enough attempts already out), a promise that settles at the next
   * outcome; ask again then. Undefined when shouldCompress can decide.
   */
  settled?(position: number): Promise<void> | undefined;
  /** An attempt that shouldCompress allowed ended without an outcome (the compressor failed). */
  abandon?(position: number): void;
}

/** Stores every buffer raw (prefix -1): needs no memory for compression output (spilling under pressure). */
export const STORE_RAW: CompressionPolicy = {
  neverCompresses: true,
  shouldCompress: () => false,
  record: () => undefined,
};

interface PositionState {
  misses: number;
  skipLeft: number;
  backoff: number;
  probing: boolean;
  /** whether a buffer at this position ever saved enough */
  everHit: boolean;
  /** attempts allowed whose outcome has not been recorded */
  pending: number;
  /** settled() callers waiting for the next outcome */
  waiters: (() => void)[];
}

export class CompressionAdvisor implements CompressionPolicy {
  private readonly positions: PositionState[] = [];

  constructor(private readonly minSavings = DEFAULT_MIN_SAVINGS) {}

  /** Whether the buffer at this body position should be compressed this time. */
  shouldCompress(position: number): boolean {
    const state = this.state(position);
    if (state.misses < MISSES_BEFORE_SKIP) {
      state.pending++;
      return true;
    }
    if (state.probing) return false;
    if (state.skipLeft > 0) {
      state.skipLeft--;
      return false;
    }
    state.probing = true;
    state.pending++;
    return true;
  }

  /**
   * Until a position has had an outcome that saved enough, at most
   * MISSES_BEFORE_SKIP attempts are out at once; later callers wait for an
   * outcome. Without this, the first wave of evictions (every partition fills
   * at about the same batch) compressed every buffer of every position before
   * the first miss was known: at P=200 a third of the writer's LZ4 input was
   * random strings and offsets that do not shrink.
   */
  settled(position: number): Promise<void> | undefined {
    const state = this.state(position);
    if (state.everHit || state.misses >= MISSES_BEFORE_SKIP || state.pending < MISSES_BEFORE_SKIP - state.misses) return undefined;
    return new Promise((resolve) => state.waiters.push(resolve));
  }

  abandon(position: number): void {
    const state = this.state(position);
    state.pending = Math.max(0, state.pending - 1);
    this.wake(state);
  }

  /** Records the outcome of a compression attempt. */
  record(position: number, rawBytes: number, compressedBytes: number): void {
    const state = this.state(position);
    state.pending = Math.max(0, state.pending - 1);
    this.learn(state, rawBytes, compressedBytes);
    this.wake(state);
  }

  private wake(state: PositionState): void {
    const waiters = state.waiters;
    state.waiters = [];
    for (const resolve of waiters) resolve();
  }

  private learn(state: PositionState, rawBytes: number, compressedBytes: number): void {
    if (compressedBytes <= rawBytes * (1 - this.minSavings)) {
      state.everHit = true;
      state.misses = 0;
      state.skipLeft = 0;
      state.backoff = INITIAL_BACKOFF;
      state.probing = false;
      return;
    }
    // a late miss from before the skipping started changes nothing; the probe's miss or the one that starts skipping backs off
    if (++state.misses < MISSES_BEFORE_SKIP || (state.misses > MISSES_BEFORE_SKIP && !state.probing)) return;
    state.probing = false;
    state.skipLeft = state.backoff;
    state.backoff = Math.min(state.backoff * 2, MAX_BACKOFF);
  }

  private state(position: number): PositionState {
    let state = this.positions[position];
    if (state === undefined) {
      state = { misses: 0, skipLeft: 0, backoff: INITIAL_BACKOFF, probing: false, everHit: false, pending: 0, waiters: [] };
      this.positions[position] = state;
    }
    return state;
  }
}

/**
 * A buffer must shrink by at least this fraction for compression to count as
 * worth it (the writers' `minCompressionSavings` default). Compressing costs
 * more CPU than the bytes it saves cost to write and read back, unless they
 * cross a slow network. Measured here on the narrow shape's buffers, LZ4
 * compresses ~0.36 GB/s per core and decompresses ~2.9 GB/s: ~3 ns of CPU per
 * raw byte. Worked example: saving 0.15 bytes per raw byte for 3 ns pays when
 * moving a byte costs at least 3 / 0.15 = 20 ns, that is when each core's
 * share of the I/O path is below ~50 MB/s (a 10 Gbit/s link shared by 25
 * cores). Random float64 values (12 % savings) fall below the bar: at 5 %,
 * the narrow write at P = 200 compressed 16 MB of them per 2 M rows to save
 * 2 MB, and its write + read took 6-10 % longer (three sets of alternating runs).
 */
export const DEFAULT_MIN_SAVINGS = 0.15;
const MISSES_BEFORE_SKIP = 4;
const INITIAL_BACKOFF = 16;
const MAX_BACKOFF = 1024;
