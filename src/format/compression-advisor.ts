/**
 * Decides, per body-buffer position (column c's values, offsets, ...), whether
 * compressing is worth the CPU. Random floats, hashes and short random strings
 * do not shrink under LZ4, and compressing them costs more than everything else
 * the writer does. A position whose buffers keep saving less than `minSavings`
 * is stored raw (the spec's -1 prefix) for a while, then tried again, with a
 * back-off that doubles while it keeps failing. Arrow C++ has the same idea as
 * a fixed `min_space_savings` option.
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
  shouldCompress(position: number): boolean;
  record(position: number, rawBytes: number, compressedBytes: number): void;
}

/** Stores every buffer raw (prefix -1): needs no memory for compression output (spilling under pressure). */
export const STORE_RAW: CompressionPolicy = {
  shouldCompress: () => false,
  record: () => undefined,
};

export class CompressionAdvisor implements CompressionPolicy {
  private readonly positions: { misses: number; skipLeft: number; backoff: number; probing: boolean }[] = [];

  constructor(private readonly minSavings = DEFAULT_MIN_SAVINGS) {}

  /** Whether the buffer at this body position should be compressed this time. */
  shouldCompress(position: number): boolean {
    const state = this.state(position);
    if (state.misses < MISSES_BEFORE_SKIP) return true;
    if (state.probing) return false;
    if (state.skipLeft > 0) {
      state.skipLeft--;
      return false;
    }
    state.probing = true;
    return true;
  }

  /** Records the outcome of a compression attempt. */
  record(position: number, rawBytes: number, compressedBytes: number): void {
    const state = this.state(position);
    if (compressedBytes <= rawBytes * (1 - this.minSavings)) {
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

  private state(position: number) {
    let state = this.positions[position];
    if (state === undefined) {
      state = { misses: 0, skipLeft: 0, backoff: INITIAL_BACKOFF, probing: false };
      this.positions[position] = state;
    }
    return state;
  }
}

/** A buffer must shrink by at least this fraction for compression to count as worth it. */
export const DEFAULT_MIN_SAVINGS = 0.05;
const MISSES_BEFORE_SKIP = 4;
const INITIAL_BACKOFF = 16;
const MAX_BACKOFF = 1024;
