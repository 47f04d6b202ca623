/**
 * Map output identity and files: names as Spark's (shuffle_<s>_<m>_<a>), a
 * MapOutputWriter's status matching what is on disk, an attempt that fails
 * leaving nothing, an attempt number used once, discardMapOutput removing all
 * of one attempt and removeShuffleFiles all of one shuffle and nothing else.
 */
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { narrowBatch, NARROW_SCHEMA } from '../src/cli/demo-data.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { mapOutputName, mapOutputPrefix, mapOutputSpillDir, parseMapOutputName } from '../src/shuffle/map-output-id.js';
import { MapOutputWriter } from '../src/shuffle/map-output-writer.js';
import { discardMapOutput, removeShuffleFiles } from '../src/shuffle/shuffle-files.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => {
  dir = await makeTempDir('cs-map-files-');
});
afterEach(async () => {
  await removeDir(dir);
});

const list = async (d = dir) => (await readdir(d)).sort();
const HASH = { kind: 'hash', keys: ['key'] } as const;

async function writeAttempt(shuffleId: number, mapId: number, attempt: number, batches = 2) {
  const writer = await MapOutputWriter.create({ dir, id: { shuffleId, mapId, attempt }, numPartitions: 4, partitioning: HASH });
  for (let i = 0; i < batches; i++) await writer.write(narrowBatch(1000, mapId * 10 + i + 1));
  return writer.finish();
}

describe('names', () => {
  test('shuffle_<shuffle>_<map>_<attempt>, parsed back', () => {
    const id = { shuffleId: 3, mapId: 17, attempt: 1 };
    expect(mapOutputName(id)).toBe('shuffle_3_17_1');
    expect(mapOutputPrefix('/d', id)).toBe('/d/shuffle_3_17_1');
    expect(mapOutputSpillDir('/s', id)).toBe('/s/shuffle_3_17_1.spill');
    expect(parseMapOutputName('shuffle_3_17_1.index')).toEqual({ id, suffix: '.index' });
    expect(parseMapOutputName('shuffle_3_17_1.data.0123456789ab.tmp')).toEqual({ id, suffix: '.data.0123456789ab.tmp' });
  });

  test('names that are not a map output are not parsed', () => {
    for (const name of ['shuffle_3_17.data', 'shuffle_3_17_1', 'shuffle_03_1_0.data', 'shuffle_-1_0_0.data', 'Shuffle_1_0_0.data', 'xshuffle_1_0_0.data', 'shuffle_1_0_0x.data']) {
      expect(parseMapOutputName(name), name).toBeNull();
    }
  });

  test.each([
    [{ shuffleId: -1, mapId: 0, attempt: 0 }],
    [{ shuffleId: 0, mapId: 1.5, attempt: 0 }],
    [{ shuffleId: 0, mapId: 0, attempt: Number.NaN }],
    [{ shuffleId: 0, mapId: 0 }],
  ])('an id with a part that is not a whole number >= 0 is refused: %j', (id) => {
    expect(() => mapOutputName(id as never)).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
  });
});

describe('MapOutputWriter', () => {
  test('commits the three files under the id, and its status gives what the files hold', async () => {
    const status = await writeAttempt(2, 5, 0);
    expect(await list()).toEqual(['shuffle_2_5_0.checksum.CRC32C', 'shuffle_2_5_0.data', 'shuffle_2_5_0.index']);
    expect(status.id).toEqual({ shuffleId: 2, mapId: 5, attempt: 0 });
    expect(status.location.prefix).toBe(join(dir, 'shuffle_2_5_0'));
    expect(status.metrics.rows).toBe(2000);
    expect(status.partitionRows.reduce((a, b) => a + b, 0)).toBe(2000);
    const reader = await ShuffleReader.open(status.location.prefix);
    try {
      for (let p = 0; p < 4; p++) {
        expect(reader.partitionLength(p)).toBe(status.partitionLengths[p]);
        let rows = 0;
        for await (const batch of reader.readPartition(p)) rows += batch.numRows;
        expect(rows).toBe(status.partitionRows[p]);
      }
    } finally {
      await reader.close();
    }
    expect(status.metrics.bytesWritten).toBe(status.partitionLengths.reduce((a, b) => a + b, 0));
  });

  test('an attempt number is used once: writing it again is CS_OUTPUT_EXISTS and leaves the committed output alone', async () => {
    const first = await writeAttempt(0, 0, 0);
    await expect(writeAttempt(0, 0, 0)).rejects.toMatchObject({ code: 'CS_OUTPUT_EXISTS' });
    expect(await list()).toEqual(['shuffle_0_0_0.checksum.CRC32C', 'shuffle_0_0_0.data', 'shuffle_0_0_0.index']);
    const reader = await ShuffleReader.open(first.location.prefix);
    expect(reader.offsets.slice(1)).toEqual(first.partitionLengths.map((_, p) => first.partitionLengths.slice(0, p + 1).reduce((a, b) => a + b, 0)));
    await reader.close();
  });

  test('spills into its own spill directory, removed when it commits', async () => {
    const writer = await MapOutputWriter.create({
      dir,
      id: { shuffleId: 0, mapId: 1, attempt: 0 },
      numPartitions: 8,
      partitioning: HASH,
      memoryPool: new MemoryPool(512 * 1024),
    });
    expect(await list()).toContain('shuffle_0_1_0.spill');
    for (let i = 0; i < 12; i++) await writer.write(narrowBatch(4096, i + 1));
    const status = await writer.finish();
    expect(status.metrics.spills, 'a 512 KiB pool must make it spill').toBeGreaterThan(0);
    expect(await list()).toEqual(['shuffle_0_1_0.checksum.CRC32C', 'shuffle_0_1_0.data', 'shuffle_0_1_0.index']);
  });

  test('a write that fails aborts the attempt: nothing of it is left, spill directory included', async () => {
    const writer = await MapOutputWriter.create({ dir, id: { shuffleId: 0, mapId: 2, attempt: 0 }, numPartitions: 4, partitioning: HASH });
    await writer.write(narrowBatch(500, 1));
    // a refused batch leaves a bare ShuffleWriter usable; a map task's attempt is over
    await expect(writer.write(narrowBatch(10, 2).select(['key']))).rejects.toMatchObject({ code: 'CS_SCHEMA_MISMATCH' });
    expect(await list()).toEqual([]);
    await expect(writer.write(narrowBatch(10, 3))).rejects.toMatchObject({ code: 'CS_WRITER_CLOSED' });
  });

  test('abort() removes everything of the attempt', async () => {
    const writer = await MapOutputWriter.create({ dir, id: { shuffleId: 0, mapId: 3, attempt: 1 }, numPartitions: 4, partitioning: HASH, schema: NARROW_SCHEMA });
    await writer.write(narrowBatch(500, 1));
    expect((await list()).length).toBeGreaterThan(0);
    await writer.abort();
    expect(await list()).toEqual([]);
  });

  test('a missing shuffle directory is CS_FILE_NOT_FOUND, before anything is created', async () => {
    await expect(MapOutputWriter.create({ dir: join(dir, 'nope'), id: { shuffleId: 0, mapId: 0, attempt: 0 }, numPartitions: 2, partitioning: HASH })).rejects.toMatchObject({
      code: 'CS_FILE_NOT_FOUND',
    });
    expect(await list()).toEqual([]);
  });
});

describe('discardMapOutput', () => {
  test('removes a committed attempt, its temporary files and its spill directory, and nothing of other attempts', async () => {
    await writeAttempt(1, 0, 0);
    await writeAttempt(1, 0, 1);
    // what a killed attempt 2 leaves: temporary files, a spill file, a data file renamed before the index
    await writeFile(join(dir, 'shuffle_1_0_2.data.0123456789ab.tmp'), 'x');
    await writeFile(join(dir, 'shuffle_1_0_2.index.0123456789ab.tmp'), 'x');
    await writeFile(join(dir, 'shuffle_1_0_2.data'), 'x');
    await mkdir(join(dir, 'shuffle_1_0_2.spill'));
    await writeFile(join(dir, 'shuffle_1_0_2.spill', 'columnar-shuffle-spill-0123456789abcdef.tmp'), 'x');

    const removed0 = await discardMapOutput(dir, { shuffleId: 1, mapId: 0, attempt: 0 });
    expect(removed0.map((p) => p.slice(dir.length + 1))).toEqual(['shuffle_1_0_0.checksum.CRC32C', 'shuffle_1_0_0.data', 'shuffle_1_0_0.index']);
    const removed2 = await discardMapOutput(dir, { shuffleId: 1, mapId: 0, attempt: 2 });
    expect(removed2.map((p) => p.slice(dir.length + 1))).toEqual([
      'shuffle_1_0_2.data',
      'shuffle_1_0_2.data.0123456789ab.tmp',
      'shuffle_1_0_2.index.0123456789ab.tmp',
      'shuffle_1_0_2.spill',
      'shuffle_1_0_2.spill/columnar-shuffle-spill-0123456789abcdef.tmp',
    ]);
    expect(await list()).toEqual(['shuffle_1_0_1.checksum.CRC32C', 'shuffle_1_0_1.data', 'shuffle_1_0_1.index']);
    expect(await discardMapOutput(dir, { shuffleId: 1, mapId: 0, attempt: 2 }), 'a second call finds nothing').toEqual([]);
  });
});

describe('removeShuffleFiles', () => {
  test("removes every file of the shuffle and only the shuffle's: not shuffle 10's, not look-alikes", async () => {
    await writeAttempt(1, 0, 0);
    await writeAttempt(1, 1, 3);
    await writeAttempt(10, 0, 0);
    await writeAttempt(0, 1, 0);
    await writeFile(join(dir, 'shuffle_1_2_0.data.0123456789ab.tmp'), 'x');
    await mkdir(join(dir, 'shuffle_1_2_0.spill'));
    await writeFile(join(dir, 'shuffle_1_2_0.spill', 'columnar-shuffle-spill-0123456789abcdef.tmp'), 'x');
    const lookalikes = ['shuffle_1_0_0.parquet', 'shuffle_1_0_0.data.bak', 'shuffle_1_0.data', 'notes.txt', 'shuffle_1_0_0.data.0123456789AB.tmp'];
    for (const name of lookalikes) await writeFile(join(dir, name), 'keep');

    const removed = await removeShuffleFiles(dir, 1);
    expect(removed.map((p) => p.slice(dir.length + 1))).toEqual([
      'shuffle_1_0_0.checksum.CRC32C',
      'shuffle_1_0_0.data',
      'shuffle_1_0_0.index',
      'shuffle_1_1_3.checksum.CRC32C',
      'shuffle_1_1_3.data',
      'shuffle_1_1_3.index',
      'shuffle_1_2_0.data.0123456789ab.tmp',
      'shuffle_1_2_0.spill',
      'shuffle_1_2_0.spill/columnar-shuffle-spill-0123456789abcdef.tmp',
    ]);
    expect(await list()).toEqual(
      [
        ...lookalikes,
        'shuffle_0_1_0.checksum.CRC32C',
        'shuffle_0_1_0.data',
        'shuffle_0_1_0.index',
        'shuffle_10_0_0.checksum.CRC32C',
        'shuffle_10_0_0.data',
        'shuffle_10_0_0.index',
      ].sort(),
    );
  });

  test('a spill directory holding something else is kept, with that file', async () => {
    await mkdir(join(dir, 'shuffle_4_0_0.spill'));
    await writeFile(join(dir, 'shuffle_4_0_0.spill', 'mine.txt'), 'keep');
    expect(await removeShuffleFiles(dir, 4)).toEqual([]);
    expect(await list(join(dir, 'shuffle_4_0_0.spill'))).toEqual(['mine.txt']);
  });

  test('a missing directory is CS_FILE_NOT_FOUND; a bad shuffle id CS_INVALID_ARGUMENT', async () => {
    await expect(removeShuffleFiles(join(dir, 'nope'), 1)).rejects.toMatchObject({ code: 'CS_FILE_NOT_FOUND' });
    await expect(removeShuffleFiles(dir, -1)).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
  });
});
