/**
 * PayloadStore's ordering claim: a partition's payloads reach the data file in the order they
 * were made, whether they were spilled (run by run), evicted straight from buffers into a run, or
 * kept in memory, also when spills are asked for while an earlier one is still on its way.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { DataFileWriter } from '../src/format/output-files.js';
import type { EncodedMessage } from '../src/format/ipc-message.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { PayloadStore } from '../src/spill/payload-store.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-store-')));
afterEach(async () => removeDir(dir));

/** A stand-in message: 8 bytes of `tag` (the merge copies messages verbatim). */
const message = (tag: number): EncodedMessage => ({ chunks: [new Uint8Array(8).fill(tag)], byteLength: 8 });
const SCHEMA = 9;

/** Merges the store into an output (each message 8 bytes of one tag) and reads back the tag of every message, in order. */
async function mergedTags(store: PayloadStore): Promise<{ tags: number[]; partitionLengths: number[] }> {
  const output = await DataFileWriter.create(join(dir, 'out'));
  await store.merge(output, new Uint8Array(8).fill(SCHEMA));
  const { partitionLengths } = await output.commit();
  await store.discard();
  const data = await readFile(join(dir, 'out.data'));
  return { tags: Array.from({ length: data.byteLength / 8 }, (_, i) => data[i * 8]!), partitionLengths: [...partitionLengths] };
}

test('a spill asked for while another is on its way writes the payloads cached when it was asked, then its evicted rows; payloads made later follow them', async () => {
  const pool = new MemoryPool(1 << 20);
  const store = new PayloadStore(1, pool.register('store'), dir, { bufferBytes: 64 << 10, maxHeldBytes: Infinity }, 16 << 10, false);
  store.add(0, message(1), 0);
  const first = store.spill(); // on its way: it creates the spill file first
  store.add(0, message(2), 0);
  const evicted = { encode: async () => ({ messages: [message(3)], batches: 1 }), written: () => undefined };
  const second = store.spill(new Map([[0, evicted]])); // rows evicted now: newer than 2, older than 4
  store.add(0, message(4), 0); // made while both runs wait (it stays in memory)
  await Promise.all([first, second]);
  expect(store.spillCount).toBe(2);

  const { tags } = await mergedTags(store);
  expect(tags).toEqual([SCHEMA, 1, 2, 3, 4, 0xff]); // 0xff: the end-of-stream marker's continuation bytes
});

test('payloads made for partitions in any order, spilled or kept, are merged partition by partition in ascending order; a partition with none stays empty', async () => {
  const pool = new MemoryPool(1 << 20);
  const store = new PayloadStore(5, pool.register('store'), dir, { bufferBytes: 64 << 10, maxHeldBytes: Infinity }, 16 << 10, false);
  store.add(3, message(31), 0);
  store.add(1, message(11), 0);
  const evicted = { encode: async () => ({ messages: [message(21)], batches: 1 }), written: () => undefined };
  await store.spill(new Map([[2, evicted]])); // partition 2 has rows only in this run
  store.add(3, message(32), 0);
  store.add(0, message(1), 0);

  const { tags, partitionLengths } = await mergedTags(store);
  expect(tags).toEqual([SCHEMA, 1, 0xff, SCHEMA, 11, 0xff, SCHEMA, 21, 0xff, SCHEMA, 31, 32, 0xff]);
  expect(partitionLengths).toEqual([24, 24, 24, 32, 0]);
  expect(Array.from(store.batchCounts)).toEqual([1, 1, 1, 2, 0]);
});

test('a spill run that fails (its directory gone) keeps its payloads, ahead of one added while it ran: a later spill and the merge write them all, in order', async () => {
  const pool = new MemoryPool(1 << 20);
  const spillDir = join(dir, 'spill');
  const store = new PayloadStore(2, pool.register('store'), spillDir, { bufferBytes: 64 << 10, maxHeldBytes: Infinity }, 16 << 10, false);
  store.add(0, message(1), 0);
  store.add(1, message(11), 0);
  const failing = store.spill(); // it takes the payloads at once
  store.add(0, message(2), 0); // made while the run is on its way
  await expect(failing).rejects.toMatchObject({ code: 'CS_FILE_NOT_FOUND' });
  expect(store.spillCount).toBe(0);
  await mkdir(spillDir);
  await store.spill();
  store.add(0, message(3), 0);

  const { tags } = await mergedTags(store);
  expect(tags).toEqual([SCHEMA, 1, 2, 3, 0xff, SCHEMA, 11, 0xff]);
});
