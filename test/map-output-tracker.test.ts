/**
 * MapOutputTracker on its own (no files: statuses are plain data). Claims: a
 * shuffle and its map outputs are validated before anything is recorded, and a
 * refused registration changes nothing; a newer attempt replaces the registered
 * one and hands it back to be discarded, a stale one never replaces a newer
 * one; unregistering an output makes readers wait for a new one, and a report
 * about an old attempt does not drop the newer output; waits resolve when the
 * output is registered, fail at once when the shuffle is failed or
 * unregistered, and leave nothing behind when aborted; a locator belongs to
 * one registration of its shuffle.
 */
import { describe, expect, test } from 'vitest';
import { MapOutputTracker } from '../src/shuffle/map-output-tracker.js';
import type { MapStatus } from '../src/shuffle/map-status.js';

function status(mapId: number, attempt = 0, options: { shuffleId?: number; numPartitions?: number } = {}): MapStatus {
  const shuffleId = options.shuffleId ?? 0;
  const numPartitions = options.numPartitions ?? 3;
  return {
    id: { shuffleId, mapId, attempt },
    location: { host: 'host', prefix: `/shuffle/shuffle_${shuffleId}_${mapId}_${attempt}` },
    numPartitions,
    partitionLengths: Array.from({ length: numPartitions }, (_, p) => 100 * (p + 1) + attempt),
    partitionRows: Array.from({ length: numPartitions }, () => 10),
    metrics: { rows: 10 * numPartitions, batches: 1, bytesWritten: 0, spills: 0, spilledBytes: 0, peakMemoryBytes: 0, writeMs: 0 },
  };
}

function trackerOf(numMaps: number, shuffleId = 0): MapOutputTracker {
  const tracker = new MapOutputTracker();
  tracker.registerShuffle(shuffleId, numMaps);
  return tracker;
}

/** Settles within a tick or not at all: 'pending' while the promise waits. */
async function state<T>(promise: Promise<T>): Promise<T | 'pending' | { rejected: unknown }> {
  const pending = Symbol('pending');
  const outcome = await Promise.race([promise.catch((error: unknown) => ({ rejected: error })), new Promise<typeof pending>((resolve) => setTimeout(() => resolve(pending), 10))]);
  return outcome === pending ? 'pending' : (outcome as T | { rejected: unknown });
}

const invalid = expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' });

describe('registerShuffle', () => {
  test('a shuffle id and a map count that are not whole numbers >= 0 are refused', () => {
    const tracker = new MapOutputTracker();
    for (const [shuffleId, numMaps] of [
      [-1, 2],
      [1.5, 2],
      [Number.NaN, 2],
      [0, -1],
      [0, 2.5],
      [0, Number.POSITIVE_INFINITY],
      [0, 2 ** 40], // a RangeError once (a status slot per map)
      [0, 2 ** 24 + 1],
    ] as const) {
      expect(() => tracker.registerShuffle(shuffleId, numMaps), `${shuffleId}, ${numMaps}`).toThrow(invalid);
    }
    expect(() => tracker.statuses(0), 'nothing was registered').toThrow(invalid);
  });

  test('a shuffle registered twice is refused; the first registration stays as it was', () => {
    const tracker = trackerOf(2, 4);
    tracker.registerMapOutput(status(0, 0, { shuffleId: 4 }));
    expect(() => tracker.registerShuffle(4, 5)).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT', where: { shuffle: 4 } }));
    expect(tracker.locator(4).numMaps).toBe(2);
    expect(tracker.statuses(4).map((s) => s.id.mapId)).toEqual([0]);
  });

  test('a new shuffle misses every map; one of no map tasks misses none', () => {
    const tracker = trackerOf(3);
    tracker.registerShuffle(1, 0);
    expect(tracker.missing(0)).toEqual([0, 1, 2]);
    expect(tracker.statuses(0)).toEqual([]);
    expect(tracker.missing(1)).toEqual([]);
    expect(tracker.locator(1)).toMatchObject({ shuffleId: 1, numMaps: 0 });
  });
});

describe('registerMapOutput', () => {
  test('statuses come back in map order, whatever the order they were registered in; missing() names the rest', () => {
    const tracker = trackerOf(4);
    for (const m of [3, 0, 2]) tracker.registerMapOutput(status(m));
    expect(tracker.statuses(0).map((s) => s.id.mapId)).toEqual([0, 2, 3]);
    expect(tracker.missing(0)).toEqual([1]);
  });

  test.each([
    ['a shuffle that is not registered', status(0, 0, { shuffleId: 9 }), { shuffle: 9 }],
    ['a map id beyond the shuffle', status(3), { shuffle: 0, map: 3, attempt: 0 }],
    ['another partition count than the other maps', status(1, 0, { numPartitions: 4 }), { shuffle: 0, map: 1, attempt: 0 }],
    ['partition lengths that do not match the partition count', { ...status(1), partitionLengths: [1, 2] }, { shuffle: 0, map: 1, attempt: 0 }],
    ['a negative row count', { ...status(1), partitionRows: [1, -1, 1] }, { shuffle: 0, map: 1, attempt: 0 }],
    ['no location', { ...status(1), location: { host: 'host', prefix: '' } }, { shuffle: 0, map: 1, attempt: 0 }],
  ] as const)('a status of %s is refused, and changes nothing', async (_, bad, where) => {
    const tracker = trackerOf(3);
    tracker.registerMapOutput(status(0));
    const waiting = tracker.waitFor(0, 1);
    expect(() => tracker.registerMapOutput(bad as MapStatus)).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT', where }));
    expect(tracker.statuses(0).map((s) => s.id)).toEqual([status(0).id]);
    expect(tracker.missing(0)).toEqual([1, 2]);
    expect(await state(waiting), 'the reader of map 1 still waits').toBe('pending');
    expect(tracker.waiting).toBe(1);
    tracker.unregisterShuffle(0);
    await expect(waiting).rejects.toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED' });
  });

  test('a status with an id that is not whole numbers is refused', () => {
    const tracker = trackerOf(2);
    expect(() => tracker.registerMapOutput({ ...status(0), id: { shuffleId: 0, mapId: -1, attempt: 0 } })).toThrow(invalid);
    expect(() => tracker.registerMapOutput({ ...status(0), id: { shuffleId: 0, mapId: 0, attempt: 0.5 } })).toThrow(invalid);
    expect(tracker.missing(0)).toEqual([0, 1]);
  });

  test('the partition count is checked against the other maps only: one map may replace its own output with another count', () => {
    const tracker = trackerOf(1);
    tracker.registerMapOutput(status(0, 0, { numPartitions: 3 }));
    expect(tracker.registerMapOutput(status(0, 1, { numPartitions: 5 }))?.id.attempt).toBe(0);
    expect(tracker.statuses(0)[0]!.numPartitions).toBe(5);
  });
});

describe('attempts', () => {
  test('a newer attempt replaces the registered one and returns it, so that the runner can discard its files', () => {
    const tracker = trackerOf(2);
    expect(tracker.registerMapOutput(status(1, 0)), 'nothing to replace').toBeUndefined();
    const replaced = tracker.registerMapOutput(status(1, 2));
    expect(replaced).toEqual(status(1, 0));
    expect(tracker.statuses(0)).toEqual([status(1, 2)]);
  });

  test('an older attempt committed late never replaces a newer one', () => {
    const tracker = trackerOf(2);
    tracker.registerMapOutput(status(0, 1));
    expect(() => tracker.registerMapOutput(status(0, 0))).toThrow(
      expect.objectContaining({ code: 'CS_INVALID_ARGUMENT', where: { shuffle: 0, map: 0, attempt: 0 }, message: expect.stringContaining('older than the registered attempt 1') }),
    );
    expect(tracker.statuses(0)).toEqual([status(0, 1)]);
  });

  test('the runner goes back to an older attempt by unregistering the newer one first', () => {
    const tracker = trackerOf(1);
    tracker.registerMapOutput(status(0, 1));
    tracker.unregisterMapOutput(0, 0);
    expect(tracker.registerMapOutput(status(0, 0))).toBeUndefined();
    expect(tracker.statuses(0)).toEqual([status(0, 0)]);
  });

  test('the same attempt registered again takes its new status and returns nothing: its files are the registered ones', () => {
    const tracker = trackerOf(1);
    tracker.registerMapOutput(status(0, 3));
    const again = { ...status(0, 3), location: { host: 'other', prefix: '/elsewhere/shuffle_0_0_3' } };
    expect(tracker.registerMapOutput(again)).toBeUndefined();
    expect(tracker.statuses(0)).toEqual([again]);
  });

  test('a reader takes a status once: a replacement reaches the readers that ask after it', async () => {
    const tracker = trackerOf(1);
    const early = tracker.waitFor(0, 0);
    tracker.registerMapOutput(status(0, 0));
    tracker.registerMapOutput(status(0, 1));
    expect((await early).id.attempt).toBe(0);
    expect((await tracker.waitFor(0, 0)).id.attempt).toBe(1);
  });
});

describe('unregisterMapOutput', () => {
  test('forgets the output and returns it; readers that ask later wait for a new one', async () => {
    const tracker = trackerOf(2);
    tracker.registerMapOutput(status(0));
    tracker.registerMapOutput(status(1));
    expect(tracker.unregisterMapOutput(0, 1)).toEqual(status(1));
    expect(tracker.missing(0)).toEqual([1]);
    expect(tracker.statuses(0)).toEqual([status(0)]);
    const waiting = tracker.waitFor(0, 1);
    expect(await state(waiting)).toBe('pending');
    tracker.registerMapOutput(status(1, 1));
    expect((await waiting).id.attempt).toBe(1);
    expect(tracker.unregisterMapOutput(0, 1), 'twice: the new attempt').toEqual(status(1, 1));
    expect(tracker.unregisterMapOutput(0, 1), 'then nothing is registered').toBeUndefined();
  });

  test('with an attempt, only that attempt: a report about a lost old attempt does not drop the newer output', () => {
    const tracker = trackerOf(1);
    tracker.registerMapOutput(status(0, 0));
    tracker.registerMapOutput(status(0, 1));
    expect(tracker.unregisterMapOutput(0, 0, 0)).toBeUndefined();
    expect(tracker.statuses(0)).toEqual([status(0, 1)]);
    expect(tracker.unregisterMapOutput(0, 0, 1)).toEqual(status(0, 1));
    expect(tracker.missing(0)).toEqual([0]);
  });

  test('a map beyond the shuffle, or a shuffle not registered, is refused', () => {
    const tracker = trackerOf(2);
    expect(() => tracker.unregisterMapOutput(0, 2)).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT', where: { shuffle: 0, map: 2 } }));
    expect(() => tracker.unregisterMapOutput(0, -1)).toThrow(invalid);
    expect(() => tracker.unregisterMapOutput(1, 0)).toThrow(invalid);
  });
});

describe('waiting for map outputs', () => {
  test('a registered output is answered at once; a missing one when it is registered, to every reader waiting for it', async () => {
    const tracker = trackerOf(3);
    tracker.registerMapOutput(status(0));
    expect(await tracker.waitFor(0, 0)).toEqual(status(0));
    const first = tracker.waitFor(0, 2);
    const second = tracker.locator(0).waitFor(2, new AbortController().signal);
    expect(tracker.waiting).toBe(2);
    expect(await state(first)).toBe('pending');
    tracker.registerMapOutput(status(1));
    expect(await state(first), 'another map does not wake it').toBe('pending');
    tracker.registerMapOutput(status(2));
    expect(await first).toEqual(status(2));
    expect(await second).toEqual(status(2));
    expect(tracker.waiting).toBe(0);
  });

  test('an aborted wait rejects with CS_ABORTED and leaves no waiter; an already aborted signal waits for nothing', async () => {
    const tracker = trackerOf(2);
    const controller = new AbortController();
    const waiting = tracker.waitFor(0, 1, controller.signal);
    expect(tracker.waiting).toBe(1);
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'CS_ABORTED', where: { shuffle: 0, map: 1 } });
    expect(tracker.waiting).toBe(0);
    await expect(tracker.waitFor(0, 0, controller.signal)).rejects.toMatchObject({ code: 'CS_ABORTED' });
    expect(tracker.waiting).toBe(0);
    tracker.registerMapOutput(status(1)); // nobody left to wake
    expect(await tracker.waitFor(0, 1, controller.signal), 'a registered output is answered even to an aborted signal').toEqual(status(1));
  });

  test('a map beyond the shuffle is CS_INVALID_ARGUMENT; a shuffle not registered CS_MAP_OUTPUT_FAILED', async () => {
    const tracker = trackerOf(2);
    await expect(tracker.waitFor(0, 2)).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
    await expect(tracker.locator(0).waitFor(-1, new AbortController().signal)).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
    await expect(tracker.waitFor(5, 0)).rejects.toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED', where: { shuffle: 5 } });
    expect(() => tracker.locator(5)).toThrow(invalid);
    expect(tracker.waiting).toBe(0);
  });
});

describe('failShuffle', () => {
  test('readers waiting now and later for a missing output fail at once with CS_MAP_OUTPUT_FAILED and the cause; registered outputs are still answered', async () => {
    const tracker = trackerOf(3);
    tracker.registerMapOutput(status(0));
    const waiting = tracker.waitFor(0, 1);
    const cause = new Error('map 1 failed 4 times');
    tracker.failShuffle(0, cause);
    const error = await waiting.catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED', where: { shuffle: 0 }, message: expect.stringContaining('map 1 failed 4 times') });
    expect((error as Error).cause).toBe(cause);
    await expect(tracker.locator(0).waitFor(2, new AbortController().signal)).rejects.toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED' });
    expect(await tracker.waitFor(0, 0)).toEqual(status(0));
    expect(tracker.waiting).toBe(0);
    expect(tracker.missing(0)).toEqual([1, 2]);
  });

  test('only the shuffle failed: readers of another shuffle go on waiting', async () => {
    const tracker = trackerOf(1, 0);
    tracker.registerShuffle(1, 1);
    const other = tracker.waitFor(1, 0);
    tracker.failShuffle(0);
    await expect(tracker.waitFor(0, 0)).rejects.toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED' });
    expect(await state(other)).toBe('pending');
    tracker.registerMapOutput(status(0, 0, { shuffleId: 1 }));
    expect((await other).id.shuffleId).toBe(1);
  });

  test('a shuffle not registered is refused', () => {
    expect(() => new MapOutputTracker().failShuffle(3)).toThrow(invalid);
  });
});

describe('unregisterShuffle', () => {
  test('readers waiting fail with CS_MAP_OUTPUT_FAILED; the shuffle is gone; unregistering it again does nothing', async () => {
    const tracker = trackerOf(2);
    tracker.registerMapOutput(status(0));
    const waiting = tracker.waitFor(0, 1);
    tracker.unregisterShuffle(0);
    await expect(waiting).rejects.toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED', where: { shuffle: 0 } });
    expect(tracker.waiting).toBe(0);
    expect(() => tracker.statuses(0)).toThrow(invalid);
    expect(() => tracker.missing(0)).toThrow(invalid);
    expect(() => tracker.registerMapOutput(status(1))).toThrow(invalid);
    await expect(tracker.waitFor(0, 0)).rejects.toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED' });
    expect(() => tracker.unregisterShuffle(0)).not.toThrow();
  });

  test("a locator belongs to one registration: once its shuffle is unregistered it never answers with the outputs of a shuffle registered again under the id", async () => {
    const tracker = trackerOf(2);
    const old = tracker.locator(0);
    tracker.registerMapOutput(status(0));
    tracker.unregisterShuffle(0);
    tracker.registerShuffle(0, 2);
    tracker.registerMapOutput(status(0, 5));
    const signal = new AbortController().signal;
    await expect(old.waitFor(0, signal)).rejects.toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED', where: { shuffle: 0 } });
    await expect(old.waitFor(1, signal)).rejects.toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED' });
    expect(tracker.waiting, 'the old locator left no waiter in the new shuffle').toBe(0);
    expect((await tracker.locator(0).waitFor(0, signal)).id.attempt).toBe(5);
  });
});
