import { ShuffleError } from '../errors.js';
import { idLocation } from './map-output-id.js';
import { assertMapStatus } from './map-status.js';
/**
 * The runner's record of which attempt of each map task holds the output a
 * shuffle is read from (Spark's MapOutputTracker). Only committed outputs are
 * registered, so readers never see a partial one; registering another attempt
 * of the same map replaces the first (the runner names the attempt).
 *
 * Protocol: `registerShuffle(id, numMaps)`; then, in any order and from any
 * number of readers, `registerMapOutput(status)` after each map task commits
 * and `locator(id)` / `waitFor` / `statuses(id)` to read; `failShuffle` when
 * a map task failed for good; `unregisterShuffle` when the job is done.
 */
export class MapOutputTracker {
    shuffles = new Map();
    /** Starts tracking a shuffle of `numMaps` map tasks (CS_INVALID_ARGUMENT if it is already tracked). */
    registerShuffle(shuffleId, numMaps) {
        if (!(Number.isSafeInteger(shuffleId) && shuffleId >= 0))
            throw new ShuffleError('CS_INVALID_ARGUMENT', `a shuffle id is a whole number >= 0, got ${shuffleId}`);
        if (!(Number.isSafeInteger(numMaps) && numMaps >= 0))
            throw new ShuffleError('CS_INVALID_ARGUMENT', `numMaps must be a whole number >= 0, got ${numMaps}`, { shuffle: shuffleId });
        if (this.shuffles.has(shuffleId))
            throw new ShuffleError('CS_INVALID_ARGUMENT', 'this shuffle is already registered', { shuffle: shuffleId });
        this.shuffles.set(shuffleId, {
            numMaps,
            statuses: new Array(numMaps).fill(undefined),
            waiters: Array.from({ length: numMaps }, () => new Set()),
            failure: null,
        });
    }
    /**
     * Records a committed map output and wakes the readers waiting for it. The
     * status must belong to a registered shuffle and agree with the other maps
     * about the number of partitions.
     */
    registerMapOutput(status) {
        assertMapStatus(status);
        const { shuffleId, mapId } = status.id;
        const entry = this.entry(shuffleId);
        if (mapId >= entry.numMaps) {
            throw new ShuffleError('CS_INVALID_ARGUMENT', `map ${mapId} does not exist: the shuffle has ${entry.numMaps} map tasks`, idLocation(status.id));
        }
        const other = entry.statuses.find((s) => s !== undefined && s.id.mapId !== mapId);
        if (other !== undefined && other.numPartitions !== status.numPartitions) {
            throw new ShuffleError('CS_INVALID_ARGUMENT', `the output has ${status.numPartitions} partitions, map ${other.id.mapId}'s has ${other.numPartitions}`, idLocation(status.id));
        }
        entry.statuses[mapId] = status;
        const waiters = entry.waiters[mapId];
        entry.waiters[mapId] = new Set();
        for (const waiter of waiters)
            waiter.resolve(status);
    }
    /** Forgets map `mapId`'s output (it was lost); readers that start later wait for a new one. */
    unregisterMapOutput(shuffleId, mapId) {
        const entry = this.entry(shuffleId);
        if (mapId >= 0 && mapId < entry.numMaps)
            entry.statuses[mapId] = undefined;
    }
    /** No more outputs will come (a map task failed for good): every reader waiting, now or later, fails with CS_MAP_OUTPUT_FAILED. */
    failShuffle(shuffleId, cause) {
        const entry = this.entry(shuffleId);
        const reason = cause instanceof Error ? `: ${cause.message}` : '';
        entry.failure = new ShuffleError('CS_MAP_OUTPUT_FAILED', `the shuffle failed, its missing map outputs will not come${reason}`, { shuffle: shuffleId }, { cause });
        this.rejectAll(entry, entry.failure);
    }
    /** Stops tracking the shuffle; readers still waiting fail with CS_MAP_OUTPUT_FAILED. */
    unregisterShuffle(shuffleId) {
        const entry = this.shuffles.get(shuffleId);
        if (entry === undefined)
            return;
        this.shuffles.delete(shuffleId);
        this.rejectAll(entry, new ShuffleError('CS_MAP_OUTPUT_FAILED', 'the shuffle was unregistered while a reader waited for it', { shuffle: shuffleId }));
    }
    /** The statuses registered so far, by map id (the finished outputs). */
    statuses(shuffleId) {
        return this.entry(shuffleId).statuses.filter((s) => s !== undefined);
    }
    /** Map ids that have no registered output yet. */
    missing(shuffleId) {
        const missing = [];
        this.entry(shuffleId).statuses.forEach((s, m) => s === undefined && missing.push(m));
        return missing;
    }
    /** Readers waiting right now, over all shuffles (a closed reader leaves none behind). */
    get waiting() {
        let n = 0;
        for (const entry of this.shuffles.values())
            for (const set of entry.waiters)
                n += set.size;
        return n;
    }
    /** Resolves with map `mapId`'s status once it is registered (see MapOutputLocator.waitFor). */
    waitFor(shuffleId, mapId, signal) {
        const entry = this.shuffles.get(shuffleId);
        if (entry === undefined)
            return Promise.reject(new ShuffleError('CS_MAP_OUTPUT_FAILED', 'the shuffle is not registered', { shuffle: shuffleId }));
        if (!(Number.isInteger(mapId) && mapId >= 0 && mapId < entry.numMaps)) {
            return Promise.reject(new ShuffleError('CS_INVALID_ARGUMENT', `map ${mapId} does not exist: the shuffle has ${entry.numMaps} map tasks`, { shuffle: shuffleId }));
        }
        const status = entry.statuses[mapId];
        if (status !== undefined)
            return Promise.resolve(status);
        if (entry.failure !== null)
            return Promise.reject(entry.failure);
        if (signal?.aborted)
            return Promise.reject(abortedError(shuffleId, mapId));
        return new Promise((resolve, reject) => {
            const set = entry.waiters[mapId];
            const onAbort = () => {
                set.delete(waiter);
                entry.waiters[mapId].delete(waiter);
                reject(abortedError(shuffleId, mapId));
            };
            const waiter = {
                resolve: (s) => {
                    signal?.removeEventListener('abort', onAbort);
                    resolve(s);
                },
                reject: (e) => {
                    signal?.removeEventListener('abort', onAbort);
                    reject(e);
                },
            };
            set.add(waiter);
            signal?.addEventListener('abort', onAbort, { once: true });
        });
    }
    /** A locator over one shuffle, for the reduce reader. */
    locator(shuffleId) {
        const entry = this.entry(shuffleId);
        return { shuffleId, numMaps: entry.numMaps, waitFor: (mapId, signal) => this.waitFor(shuffleId, mapId, signal) };
    }
    entry(shuffleId) {
        const entry = this.shuffles.get(shuffleId);
        if (entry === undefined)
            throw new ShuffleError('CS_INVALID_ARGUMENT', 'the shuffle is not registered', { shuffle: shuffleId });
        return entry;
    }
    rejectAll(entry, error) {
        const waiters = entry.waiters.flatMap((set) => [...set]);
        entry.waiters.forEach((set) => set.clear());
        for (const waiter of waiters)
            waiter.reject(error);
    }
}
function abortedError(shuffleId, mapId) {
    return new ShuffleError('CS_ABORTED', 'stopped waiting for the map output', { shuffle: shuffleId, map: mapId });
}
