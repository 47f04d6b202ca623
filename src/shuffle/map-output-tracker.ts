import { ShuffleError, type ErrorLocation } from '../errors.js';
import { idLocation } from './map-output-id.js';
import { assertMapStatus, type MapStatus } from './map-status.js';

/**
 * Where a reduce-side reader learns of a shuffle's map outputs as they commit
 * (Sail's pending streams): it asks for each map output and is answered once
 * that output's status exists.
 */
export interface MapOutputLocator {
  readonly shuffleId: number;
  /** How many map tasks the shuffle has: the reader reads one output of each. */
  readonly numMaps: number;
  /**
   * Resolves with the status of map `mapId`'s committed output, the attempt the
   * runner chose, as soon as there is one. Rejects with CS_MAP_OUTPUT_FAILED when
   * none will come, and with CS_ABORTED when `signal` aborts (the waiter is then
   * dropped: nothing is left behind).
   */
  waitFor(mapId: number, signal: AbortSignal): Promise<MapStatus>;
}

interface Waiter {
  resolve(status: MapStatus): void;
  reject(error: Error): void;
}

interface ShuffleEntry {
  readonly shuffleId: number;
  numMaps: number;
  /** set by unregisterShuffle: locators handed out before answer no more, even if the id is registered again */
  unregistered: boolean;
  statuses: (MapStatus | undefined)[];
  /** readers waiting, by map id (only maps someone waits for have a set) */
  waiters: Map<number, Set<Waiter>>;
  failure: ShuffleError | null;
}

/** The most map tasks a shuffle may have, as it may have partitions (a status slot is kept per map: 2^40 threw a RangeError). */
export const MAX_MAPS = 1 << 24;

/**
 * The runner's record of which attempt of each map task holds the output a
 * shuffle is read from (Spark's MapOutputTracker). Only committed outputs are
 * registered, so readers never see a partial one.
 *
 * Attempts: registering a newer attempt of a map replaces the registered one
 * (a retry's output supersedes), and `registerMapOutput` returns the status it
 * replaced so that the runner can discard its files; an older attempt never
 * replaces a newer one (a late commit of a stale attempt is refused), unless
 * the runner unregisters the newer one first; registering the same attempt
 * again replaces its status and returns nothing (its files are the ones
 * registered). A reader takes each map's status once, when it starts or when
 * the status comes: a reader already reading a replaced output goes on with it.
 *
 * Protocol: `registerShuffle(id, numMaps)`; then, in any order and from any
 * number of readers, `registerMapOutput(status)` after each map task commits
 * and `locator(id)` / `waitFor` / `statuses(id)` to read; `failShuffle` when
 * a map task failed for good; `unregisterShuffle` when the job is done.
 */
export class MapOutputTracker {
  private readonly shuffles = new Map<number, ShuffleEntry>();

  /** Starts tracking a shuffle of `numMaps` map tasks (CS_INVALID_ARGUMENT if it is already tracked). */
  registerShuffle(shuffleId: number, numMaps: number): void {
    if (!(Number.isSafeInteger(shuffleId) && shuffleId >= 0)) throw new ShuffleError('CS_INVALID_ARGUMENT', `a shuffle id is a whole number >= 0, got ${shuffleId}`);
    if (!(Number.isSafeInteger(numMaps) && numMaps >= 0 && numMaps <= MAX_MAPS)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `numMaps must be a whole number in [0, ${MAX_MAPS}], got ${numMaps}`, { shuffle: shuffleId });
    }
    if (this.shuffles.has(shuffleId)) throw new ShuffleError('CS_INVALID_ARGUMENT', 'this shuffle is already registered', { shuffle: shuffleId });
    this.shuffles.set(shuffleId, {
      shuffleId,
      numMaps,
      unregistered: false,
      statuses: new Array<MapStatus | undefined>(numMaps).fill(undefined),
      waiters: new Map(),
      failure: null,
    });
  }

  /**
   * Records a committed map output and wakes the readers waiting for it; returns
   * the status of the older attempt it replaced, if any (its files are the
   * runner's to discard with discardMapOutput). The status must belong to a
   * registered shuffle, name one of its maps, agree with the other maps about
   * the number of partitions, and not be of an older attempt than the one
   * registered (CS_INVALID_ARGUMENT otherwise).
   */
  registerMapOutput(status: MapStatus): MapStatus | undefined {
    assertMapStatus(status);
    const { shuffleId, mapId, attempt } = status.id;
    const entry = this.entry(shuffleId);
    assertMapInRange(entry, mapId, idLocation(status.id));
    const registered = entry.statuses[mapId];
    if (registered !== undefined && attempt < registered.id.attempt) {
      throw new ShuffleError(
        'CS_INVALID_ARGUMENT',
        `attempt ${attempt} is older than the registered attempt ${registered.id.attempt}: a stale attempt never replaces a newer one (unregister that one first)`,
        idLocation(status.id),
      );
    }
    const other = entry.statuses.find((s) => s !== undefined && s.id.mapId !== mapId);
    if (other !== undefined && other.numPartitions !== status.numPartitions) {
      throw new ShuffleError(
        'CS_INVALID_ARGUMENT',
        `the output has ${status.numPartitions} partitions, map ${other.id.mapId}'s has ${other.numPartitions}`,
        idLocation(status.id),
      );
    }
    entry.statuses[mapId] = status;
    const waiters = entry.waiters.get(mapId) ?? [];
    entry.waiters.delete(mapId);
    for (const waiter of waiters) waiter.resolve(status);
    return registered !== undefined && registered.id.attempt < attempt ? registered : undefined;
  }

  /**
   * Forgets map `mapId`'s output (it was lost) and returns its status, if one
   * was registered; readers that start later wait for a new one. With
   * `attempt`, only if that attempt is the one registered: a report about a
   * lost old attempt does not drop the newer output that replaced it.
   */
  unregisterMapOutput(shuffleId: number, mapId: number, attempt?: number): MapStatus | undefined {
    const entry = this.entry(shuffleId);
    assertMapInRange(entry, mapId);
    const registered = entry.statuses[mapId];
    if (registered === undefined || (attempt !== undefined && registered.id.attempt !== attempt)) return undefined;
    entry.statuses[mapId] = undefined;
    return registered;
  }

  /** No more outputs will come (a map task failed for good): every reader waiting, now or later, fails with CS_MAP_OUTPUT_FAILED. */
  failShuffle(shuffleId: number, cause?: unknown): void {
    const entry = this.entry(shuffleId);
    const reason = cause instanceof Error ? `: ${cause.message}` : '';
    entry.failure = new ShuffleError('CS_MAP_OUTPUT_FAILED', `the shuffle failed, its missing map outputs will not come${reason}`, { shuffle: shuffleId }, { cause });
    this.rejectAll(entry, entry.failure);
  }

  /**
   * Stops tracking the shuffle (a shuffle not tracked is ignored); readers still
   * waiting, and later calls through its locators, fail with CS_MAP_OUTPUT_FAILED,
   * also once the id is registered again (that is another shuffle).
   */
  unregisterShuffle(shuffleId: number): void {
    const entry = this.shuffles.get(shuffleId);
    if (entry === undefined) return;
    this.shuffles.delete(shuffleId);
    entry.unregistered = true;
    this.rejectAll(entry, new ShuffleError('CS_MAP_OUTPUT_FAILED', 'the shuffle was unregistered while a reader waited for it', { shuffle: shuffleId }));
  }

  /** The statuses registered so far, by map id (the finished outputs). */
  statuses(shuffleId: number): MapStatus[] {
    return this.entry(shuffleId).statuses.filter((s): s is MapStatus => s !== undefined);
  }

  /** Map ids that have no registered output yet. */
  missing(shuffleId: number): number[] {
    const missing: number[] = [];
    this.entry(shuffleId).statuses.forEach((s, m) => s === undefined && missing.push(m));
    return missing;
  }

  /** Readers waiting right now, over all shuffles (a closed reader leaves none behind). */
  get waiting(): number {
    let n = 0;
    for (const entry of this.shuffles.values()) for (const set of entry.waiters.values()) n += set.size;
    return n;
  }

  /** Resolves with map `mapId`'s status once it is registered (see MapOutputLocator.waitFor). */
  waitFor(shuffleId: number, mapId: number, signal?: AbortSignal): Promise<MapStatus> {
    const entry = this.shuffles.get(shuffleId);
    if (entry === undefined) return Promise.reject(new ShuffleError('CS_MAP_OUTPUT_FAILED', 'the shuffle is not registered', { shuffle: shuffleId }));
    return this.waitOn(entry, mapId, signal);
  }

  /** A locator over one shuffle, for the reduce reader: bound to this registration of it. */
  locator(shuffleId: number): MapOutputLocator {
    const entry = this.entry(shuffleId);
    return { shuffleId, numMaps: entry.numMaps, waitFor: (mapId, signal) => this.waitOn(entry, mapId, signal) };
  }

  private waitOn(entry: ShuffleEntry, mapId: number, signal?: AbortSignal): Promise<MapStatus> {
    const { shuffleId } = entry;
    if (entry.unregistered) return Promise.reject(new ShuffleError('CS_MAP_OUTPUT_FAILED', 'the shuffle was unregistered', { shuffle: shuffleId }));
    if (!(Number.isInteger(mapId) && mapId >= 0 && mapId < entry.numMaps)) {
      return Promise.reject(new ShuffleError('CS_INVALID_ARGUMENT', `map ${mapId} does not exist: the shuffle has ${entry.numMaps} map tasks`, { shuffle: shuffleId }));
    }
    const status = entry.statuses[mapId];
    if (status !== undefined) return Promise.resolve(status);
    if (entry.failure !== null) return Promise.reject(entry.failure);
    if (signal?.aborted) return Promise.reject(abortedError(shuffleId, mapId));
    return new Promise<MapStatus>((resolve, reject) => {
      let set = entry.waiters.get(mapId);
      if (set === undefined) entry.waiters.set(mapId, (set = new Set()));
      const onAbort = () => {
        const waiting = entry.waiters.get(mapId);
        waiting?.delete(waiter);
        if (waiting?.size === 0) entry.waiters.delete(mapId);
        reject(abortedError(shuffleId, mapId));
      };
      const waiter: Waiter = {
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

  private entry(shuffleId: number): ShuffleEntry {
    const entry = this.shuffles.get(shuffleId);
    if (entry === undefined) throw new ShuffleError('CS_INVALID_ARGUMENT', 'the shuffle is not registered', { shuffle: shuffleId });
    return entry;
  }

  private rejectAll(entry: ShuffleEntry, error: ShuffleError): void {
    const waiters = [...entry.waiters.values()].flatMap((set) => [...set]);
    entry.waiters.clear();
    for (const waiter of waiters) waiter.reject(error);
  }
}

function assertMapInRange(entry: ShuffleEntry, mapId: number, where: ErrorLocation = { shuffle: entry.shuffleId, map: mapId }): void {
  if (!(Number.isSafeInteger(mapId) && mapId >= 0 && mapId < entry.numMaps)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `map ${mapId} does not exist: the shuffle has ${entry.numMaps} map tasks`, where);
  }
}

function abortedError(shuffleId: number, mapId: number): ShuffleError {
  return new ShuffleError('CS_ABORTED', 'stopped waiting for the map output', { shuffle: shuffleId, map: mapId });
}
