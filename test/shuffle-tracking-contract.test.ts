/**
 * What a batch job runner relies on in the shuffle's bookkeeping, at its edges
 * (pinned by a mutation sweep of map-output-tracker.ts, map-status.ts,
 * map-output-id.ts, shuffle-files.ts and map-output-writer.ts): the tracker's
 * bounds and the listeners it leaves on a caller's signal; a status of no
 * partitions is refused before anything is recorded; names parse back only to
 * the id they were made from; removing an attempt or a shuffle takes the index
 * first, finds spill directories under `spillRoot`, and leaves directories that
 * are not an attempt's spill directory alone.
 */
import { getEventListeners } from 'node:events';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { narrowBatch } from '../src/cli/demo-data.js';
import { MapOutputTracker, MAX_MAPS } from '../src/shuffle/map-output-tracker.js';
import { parseMapOutputName } from '../src/shuffle/map-output-id.js';
import type { MapStatus } from '../src/shuffle/map-status.js';
import { MapOutputWriter } from '../src/shuffle/map-output-writer.js';
import { discardMapOutput, removeShuffleFiles } from '../src/shuffle/shuffle-files.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const invalid = expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' });
const HASH = { kind: 'hash', keys: ['key'] } as const;

function status(mapId: number, attempt = 0, numPartitions = 3): MapStatus {
  return {
    id: { shuffleId: 0, mapId, attempt },
    location: { host: 'host', prefix: `/shuffle/shuffle_0_${mapId}_${attempt}` },
    numPartitions,
    partitionLengths: Array.from({ length: numPartitions }, (_, p) => 100 + p),
    partitionRows: Array.from({ length: numPartitions }, () => 10),
    metrics: { rows: 10 * numPartitions, batches: 1, bytesWritten: 0, spills: 0, spilledBytes: 0, peakMemoryBytes: 0, writeMs: 0 },
  };
}

describe('MapOutputTracker', () => {
  test(`a shuffle may have exactly MAX_MAPS (2^24) map tasks`, () => {
    const tracker = new MapOutputTracker();
    expect(MAX_MAPS).toBe(2 ** 24);
    tracker.registerShuffle(0, MAX_MAPS);
    expect(tracker.locator(0).numMaps).toBe(MAX_MAPS);
    tracker.unregisterShuffle(0);
    expect(() => tracker.registerShuffle(0, MAX_MAPS + 1)).toThrow(invalid);
  });

  test("a wait that ends, answered or failed, leaves no listener on the caller's signal", async () => {
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(0, 2);
    const controller = new AbortController(); // one signal for the whole job, as a runner keeps it
    const answered = tracker.waitFor(0, 0, controller.signal);
    const failed = tracker.waitFor(0, 1, controller.signal);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(2);
    tracker.registerMapOutput(status(0));
    expect(await answered).toEqual(status(0));
    expect(getEventListeners(controller.signal, 'abort'), 'answered').toHaveLength(1);
    tracker.failShuffle(0);
    await expect(failed).rejects.toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED' });
    expect(getEventListeners(controller.signal, 'abort'), 'failed').toHaveLength(0);
  });
});

describe('a map status is validated before the tracker records it', () => {
  test('a status of no partitions is CS_INVALID_ARGUMENT, and nothing is registered', () => {
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(0, 1);
    expect(() => tracker.registerMapOutput({ ...status(0), numPartitions: 0, partitionLengths: [], partitionRows: [] })).toThrow(
      expect.objectContaining({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('numPartitions must be an integer >= 1, got 0') }),
    );
    expect(tracker.missing(0)).toEqual([0]);
  });
});

describe('map output names', () => {
  test('a name whose numbers are past 2^53 is not parsed: it would give back an id that is not its own', () => {
    expect(parseMapOutputName('shuffle_9007199254740993_0_0.data')).toBeNull();
    expect(parseMapOutputName('shuffle_0_9007199254740993_0.data')).toBeNull();
    expect(parseMapOutputName('shuffle_0_0_9007199254740993.index')).toBeNull();
    expect(parseMapOutputName('shuffle_0_0_9007199254740991.index')).toEqual({ id: { shuffleId: 0, mapId: 0, attempt: 9007199254740991 }, suffix: '.index' });
  });
});

describe('removing files', () => {
  let dir: string;
  let spillRoot: string;
  beforeEach(async () => {
    dir = await makeTempDir('cs-track-');
    spillRoot = await makeTempDir('cs-track-spill-');
  });
  afterEach(async () => {
    await removeDir(dir);
    await removeDir(spillRoot);
  });
  const list = async (d: string) => (await readdir(d)).sort();

  async function commit(shuffleId: number, mapId: number, attempt: number): Promise<MapStatus> {
    const writer = await MapOutputWriter.create({ dir, id: { shuffleId, mapId, attempt }, numPartitions: 2, partitioning: HASH, spillRoot });
    await writer.write(narrowBatch(200, mapId + 1));
    return writer.finish();
  }

  test('discardMapOutput takes the index first: when the data cannot be removed, the output is no longer committed', async () => {
    await writeFile(join(dir, 'shuffle_2_0_0.index'), 'x');
    await mkdir(join(dir, 'shuffle_2_0_0.data')); // unlink refuses a directory: the removal fails at the data file
    await writeFile(join(dir, 'shuffle_2_0_0.data', 'held'), 'x');
    await expect(discardMapOutput(dir, { shuffleId: 2, mapId: 0, attempt: 0 })).rejects.toMatchObject({ code: 'CS_IO' });
    expect(await list(dir), 'the index went first').toEqual(['shuffle_2_0_0.data']);
  });

  test("an attempt's spill directory is found under spillRoot: by discardMapOutput and by removeShuffleFiles", async () => {
    for (const name of ['shuffle_3_0_0.spill', 'shuffle_3_1_0.spill']) {
      await mkdir(join(spillRoot, name));
      await writeFile(join(spillRoot, name, 'columnar-shuffle-spill-0123456789abcdef.tmp'), 'x');
    }
    expect((await discardMapOutput(dir, { shuffleId: 3, mapId: 0, attempt: 0 }, { spillRoot })).map((p) => p.slice(spillRoot.length + 1))).toEqual([
      'shuffle_3_0_0.spill',
      'shuffle_3_0_0.spill/columnar-shuffle-spill-0123456789abcdef.tmp',
    ]);
    expect(await list(spillRoot)).toEqual(['shuffle_3_1_0.spill']);
    await commit(3, 2, 0);
    const removed = await removeShuffleFiles(dir, 3, { spillRoot });
    expect(removed.map((p) => p.slice(p.startsWith(spillRoot) ? spillRoot.length + 1 : dir.length + 1)).sort()).toEqual([
      'shuffle_3_1_0.spill',
      'shuffle_3_1_0.spill/columnar-shuffle-spill-0123456789abcdef.tmp',
      'shuffle_3_2_0.checksum.CRC32C',
      'shuffle_3_2_0.data',
      'shuffle_3_2_0.index',
    ]);
    expect(await list(spillRoot)).toEqual([]);
    expect(await list(dir)).toEqual([]);
  });

  test("removeShuffleFiles leaves a directory named like the shuffle's files that is not a spill directory", async () => {
    await mkdir(join(dir, 'shuffle_5_0_0.keep'));
    await mkdir(join(dir, 'shuffle_5_0_0.data.0123456789ab.tmp'));
    await commit(5, 0, 1);
    expect((await removeShuffleFiles(dir, 5)).map((p) => p.slice(dir.length + 1))).toEqual(['shuffle_5_0_1.checksum.CRC32C', 'shuffle_5_0_1.data', 'shuffle_5_0_1.index']);
    expect(await list(dir)).toEqual(['shuffle_5_0_0.data.0123456789ab.tmp', 'shuffle_5_0_0.keep']);
  });

  test('a finish() that fails aborts the attempt: its spill directory under spillRoot is gone too', async () => {
    const writer = await MapOutputWriter.create({ dir, id: { shuffleId: 7, mapId: 0, attempt: 0 }, numPartitions: 2, partitioning: HASH, spillRoot });
    await writer.write(narrowBatch(200, 1));
    expect(await list(spillRoot)).toEqual(['shuffle_7_0_0.spill']);
    await removeDir(dir); // the shuffle directory vanishes under the attempt: its commit cannot happen
    await expect(writer.finish()).rejects.toMatchObject({ code: expect.stringMatching(/^CS_(FILE_NOT_FOUND|IO)$/) });
    expect(await list(spillRoot)).toEqual([]);
  });
});
