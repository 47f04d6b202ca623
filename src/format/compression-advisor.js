/** Stores every buffer raw (prefix -1): needs no memory for compression output (spilling under pressure). */
export const STORE_RAW = {
    shouldCompress: () => false,
    record: () => undefined,
};
export class CompressionAdvisor {
    minSavings;
    positions = [];
    constructor(minSavings = DEFAULT_MIN_SAVINGS) {
        this.minSavings = minSavings;
    }
    /** Whether the buffer at this body position should be compressed this time. */
    shouldCompress(position) {
        const state = this.state(position);
        if (state.misses < MISSES_BEFORE_SKIP)
            return true;
        if (state.probing)
            return false;
        if (state.skipLeft > 0) {
            state.skipLeft--;
            return false;
        }
        state.probing = true;
        return true;
    }
    /** Records the outcome of a compression attempt. */
    record(position, rawBytes, compressedBytes) {
        const state = this.state(position);
        if (compressedBytes <= rawBytes * (1 - this.minSavings)) {
            state.misses = 0;
            state.skipLeft = 0;
            state.backoff = INITIAL_BACKOFF;
            state.probing = false;
            return;
        }
        // a late miss from before the skipping started changes nothing; the probe's miss or the one that starts skipping backs off
        if (++state.misses < MISSES_BEFORE_SKIP || (state.misses > MISSES_BEFORE_SKIP && !state.probing))
            return;
        state.probing = false;
        state.skipLeft = state.backoff;
        state.backoff = Math.min(state.backoff * 2, MAX_BACKOFF);
    }
    state(position) {
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
