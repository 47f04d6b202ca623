/**
 * ReduceReader's `readerOptions` reach the ShuffleReader of every map output it
 * opens, whichever writer wrote it: a `maxBufferBytes` below what a batch
 * claims refuses the output with CS_CORRUPT_DATA, and closes what was opened.
 */
import { readdir } from 'node:fs/promises';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { narrowBatch } from '../src/cli/demo-data.js';
import { MapOutputWriter } from '../src/shuffle/map-output-writer.js';
import type { MapStatus } from '../src/shuffle/map-status.js';
import { ReduceReader, type ReduceReaderOptions } from '../src/shuffle/reduce-reader.js';
import type { WriterKind } from '../src/writer-kind.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
const statuses = new Map<WriterKind, MapStatus>();

beforeAll(async () => {
  dir = await makeTempDir('cs-reduce-options-');
  for (const [mapId, writer] of (['hash', 'sort'] as const).entries()) {
    const map = await MapOutputWriter.create({ dir, id: { shuffleId: 0, mapId, attempt: 0 }, numPartitions: 2, partitioning: { kind: 'hash', keys: ['key'] }, writer });
    await map.write(narrowBatch(4000, mapId + 1));
    statuses.set(writer, await map.finish());
  }
});
afterAll(async () => {
  await removeDir(dir);
});

async function rowsRead(options: ReduceReaderOptions): Promise<number> {
  let rows = 0;
  for await (const batch of new ReduceReader(options)) rows += batch.numRows;
  return rows;
}

test.each(['hash', 'sort'] as const)('%s output: maxBufferBytes below a batch refuses it; the default reads it', async (writer) => {
  const status = statuses.get(writer)!;
  const fds = async () => (await readdir('/proc/self/fd')).length;
  const before = await fds();
  await expect(rowsRead({ maps: [status], partitions: 0, readerOptions: { maxBufferBytes: 1024 } })).rejects.toMatchObject({
    code: 'CS_CORRUPT_DATA',
    message: expect.stringContaining('over the maxBufferBytes limit of 1024'),
  });
  expect(await fds(), 'the refused output was closed').toBe(before);
  expect(await rowsRead({ maps: [status], partitions: 0 })).toBe(status.partitionRows[0]);
  expect(await rowsRead({ maps: [status], partitions: 0, readerOptions: { maxBufferBytes: 1 << 20 } })).toBe(status.partitionRows[0]);
});
