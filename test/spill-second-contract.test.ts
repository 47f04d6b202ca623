/**
 * Spilling's second contract, from a second mutation sweep (the thirty-fourth) of
 * src/spill/spill-file.ts, src/spill/payload-store.ts and src/reader/streamed-partition.ts,
 * aimed at what the first (test/spill-contract.test.ts) did not try: the merge's read
 * buffer and windows at their exact sizes, a run read ahead through its window, the
 * boundaries at which the store spills before it merges, evicted messages (dictionary
 * batches among them) in a run, partitions ordered as numbers, an empty store's
 * output, the spill file's name as cleanup knows it, and the checksum error's wording.
 *
 * Expected values come from the inputs: stand-in messages of 8 bytes of one tag
 * (the merge copies messages verbatim), read back from the data file tag by tag.
 */
import { stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { makeTable, tableToIPC } from 'apache-arrow';
import { readFile } from 'node:fs/promises';
import { removeLeftovers } from '../src/cleanup.js';
import { ShuffleError, ShuffleReader } from '../src/index.js';
import type { EncodedMessage } from '../src/format/ipc-message.js';
import { crc32cOf, DataFileWriter, encodeChecksums, encodeIndex, outputPaths } from '../src/format/output-files.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { PayloadStore } from '../src/spill/payload-store.js';
import { mergeBufferBytes, MERGE_WINDOW_BYTES, reserveMergeWindows, SpillFile, type MergeSink } from '../src/spill/spill-file.js';
import { checksumOf } from '../src/reader/streamed-partition.js';
import type { CheckedSource } from '../src/reader/checked-source.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-spill2-')));
afterEach(async () => {
  vi.restoreAllMocks();
  await removeDir(dir);
});

const KiB = 1024;
const MiB = 1024 * KiB;
const SCHEMA = 9;
const EOS = 0xff; // the end-of-stream marker's first byte (its 8 bytes read as one tag here)

/** A stand-in message: 8 bytes of `tag`. */
const message = (tag: number): EncodedMessage => ({ chunks: [new Uint8Array(8).fill(tag)], byteLength: 8 });
/** Evicted rows as the writer hands them to a spill. */
const evicted = (tags: number[], batches: number) => ({ encode: async () => ({ messages: tags.map(message), batches }), written: () => undefined });

function storeOf(partitions: number, pool = new MemoryPool(16 * MiB), memory = { bufferBytes: 64 * KiB, maxHeldBytes: Infinity }) {
  const reservation = pool.register('store');
  return { store: new PayloadStore(partitions, reservation, dir, memory, 16 * KiB, false), reservation, pool };
}

/** Merges the store, discards it, and reads the data file back as tags, partition by partition. */
async function merged(store: PayloadStore): Promise<number[][]> {
  const output = await DataFileWriter.create(join(dir, 'out'));
  await store.merge(output, new Uint8Array(8).fill(SCHEMA));
  const { partitionLengths } = await output.commit();
  await store.discard();
  const data = await readFile(join(dir, 'out.data'));
  const tags: number[][] = [];
  let at = 0;
  for (const length of partitionLengths) {
    tags.push(Array.from({ length: length / 8 }, (_, i) => data[at + i * 8]!));
    at += length;
  }
  return tags;
}

/** A sink that keeps what is appended and counts its flushes; more than `maxAppends` appends (a merge going round in circles) fail. */
function countingSink(maxAppends = 10_000): { sink: MergeSink; bytes: () => number[]; flushes: () => number } {
  let pending: Uint8Array[] = [];
  const got: number[] = [];
  let flushes = 0;
  let appends = 0;
  return {
    sink: {
      append: async (bytes) => {
        if (++appends > maxAppends) throw new Error(`more than ${maxAppends} appends`);
        pending.push(bytes);
      },
      flush: async () => {
        flushes++;
        for (const bytes of pending) got.push(...bytes);
        pending = [];
      },
    },
    bytes: () => got,
    flushes: () => flushes,
  };
}

describe('the merge\'s read buffer', () => {
  test('mergeBufferBytes is an eighth of the share, at least 64 KiB and at most 1 MiB', () => {
    expect(mergeBufferBytes(0)).toBe(64 * KiB);
    expect(mergeBufferBytes(256 * KiB)).toBe(64 * KiB);
    expect(mergeBufferBytes(512 * KiB)).toBe(64 * KiB);
    expect(mergeBufferBytes(1 * MiB)).toBe(128 * KiB);
    expect(mergeBufferBytes(8 * MiB)).toBe(1 * MiB);
    expect(mergeBufferBytes(64 * MiB)).toBe(1 * MiB);
  });

  test('reserveMergeWindows adds to the buffer what makes a window per run, not a window per run more', () => {
    const pool = new MemoryPool(16 * MiB);
    const reservation = pool.register('merge');
    reservation.tryGrow(64 * KiB); // the merge buffer, reserved first
    expect(reserveMergeWindows(reservation, 4, 64 * KiB, Infinity)).toBe(4 * MERGE_WINDOW_BYTES - 64 * KiB);
    expect(reservation.size).toBe(4 * MERGE_WINDOW_BYTES);
  });

  test('the merge reads through all it reserves: copyPartition gets a buffer as long as the merge holds (a 64 KiB window per run)', async () => {
    const { store, reservation } = storeOf(3);
    for (let run = 0; run < 4; run++) {
      store.add(run % 3, message(run + 1), 0);
      await store.spill();
    }
    expect(store.spillCount).toBe(4);
    const seen: { buffer: number; held: number }[] = [];
    const original = SpillFile.prototype.copyPartition;
    vi.spyOn(SpillFile.prototype, 'copyPartition').mockImplementation(function (this: SpillFile, p, buffer, sink) {
      seen.push({ buffer: buffer.byteLength, held: reservation.size });
      return original.call(this, p, buffer, sink);
    });
    expect(await merged(store)).toEqual([[SCHEMA, 1, 4, EOS], [SCHEMA, 2, EOS], [SCHEMA, 3, EOS]]);
    expect(seen).toEqual(Array.from({ length: 3 }, () => ({ buffer: 4 * MERGE_WINDOW_BYTES, held: 4 * MERGE_WINDOW_BYTES })));
    expect(reservation.size).toBe(0);
  });
});

describe('a spill file', () => {
  test('a partition handed over in two pieces is one segment: the merge copies both pieces, in order', async () => {
    const file = await SpillFile.create(dir);
    file.beginRun();
    await file.writeSegment(0, [Uint8Array.of(1, 2)]);
    await file.writeSegment(0, [Uint8Array.of(3)]);
    await file.writeSegment(1, [Uint8Array.of(4)]);
    await file.flushRun();
    expect(file.endRun()).toBe(4);
    const { sink, bytes } = countingSink();
    for (let p = 0; p < 2; p++) await file.copyPartition(p, new Uint8Array(64 * KiB), sink);
    await sink.flush();
    expect(bytes()).toEqual([1, 2, 3, 4]);
    await file.delete();
  });

  test('a window is filled with the run ahead of the segment asked for: a run of small segments is read by one refill (one flush of the sink)', async () => {
    const file = await SpillFile.create(dir);
    file.beginRun();
    const expected: number[] = [];
    for (let p = 0; p < 8; p++) {
      const segment = new Uint8Array(100).fill(p + 1);
      expected.push(...segment);
      await file.writeSegment(p, [segment]);
    }
    await file.flushRun();
    file.endRun();
    const { sink, bytes, flushes } = countingSink();
    for (let p = 0; p < 8; p++) await file.copyPartition(p, new Uint8Array(64 * KiB), sink);
    expect(flushes()).toBe(1);
    await sink.flush();
    expect(bytes()).toEqual(expected);
    await file.delete();
  });

  test('windows of 256 bytes (10 runs in 2560) are windows: four small segments per run are read by one refill, not streamed one by one', async () => {
    const file = await SpillFile.create(dir);
    const expected: number[][] = [[], [], [], []];
    for (let r = 0; r < 10; r++) {
      file.beginRun();
      for (let p = 0; p < 4; p++) {
        const segment = new Uint8Array(20).fill(r * 4 + p);
        expected[p]!.push(...segment);
        await file.writeSegment(p, [segment]);
      }
      await file.flushRun();
      file.endRun();
    }
    const { sink, bytes, flushes } = countingSink();
    const buffer = new Uint8Array(2560);
    for (let p = 0; p < 4; p++) await file.copyPartition(p, buffer, sink);
    expect(flushes()).toBe(1);
    await sink.flush();
    expect(bytes()).toEqual(expected.flat());
    await file.delete();
  });

  test('300 runs sharing a buffer of 256 bytes each plus one: every run gets a window of its own, none empty, and every segment comes back', async () => {
    const file = await SpillFile.create(dir);
    const expected: number[] = [];
    for (let r = 0; r < 300; r++) {
      file.beginRun();
      await file.writeSegment(0, [Uint8Array.of(r & 0xff, (r >> 8) & 0xff)]);
      expected.push(r & 0xff, (r >> 8) & 0xff);
      await file.flushRun();
      file.endRun();
    }
    const { sink, bytes } = countingSink(300); // a piece per run at most: each 2-byte segment fits its window
    await file.copyPartition(0, new Uint8Array(256 * 300 + 1), sink);
    await sink.flush();
    expect(bytes()).toEqual(expected);
    await file.delete();
  });

  test('segments gathered up to exactly 4 MiB are written at once, before flushRun; fewer bytes wait for it', async () => {
    const file = await SpillFile.create(dir);
    file.beginRun();
    await file.writeSegment(0, [new Uint8Array(100)]);
    expect((await stat(file.path)).size).toBe(0);
    await file.writeSegment(1, [new Uint8Array(4 * MiB - 100)]);
    expect((await stat(file.path)).size).toBe(4 * MiB);
    await file.flushRun();
    expect(file.endRun()).toBe(4 * MiB);
    await file.delete();
  });

  test('its name is one that removeLeftovers recognises: a spill file a killed writer left is removed', async () => {
    const file = await SpillFile.create(dir);
    file.beginRun();
    await file.writeSegment(0, [Uint8Array.of(1)]);
    await file.flushRun();
    expect(await removeLeftovers({ spillDir: dir })).toEqual([file.path]);
    expect(await listFiles(dir)).toEqual([]);
    await file.delete(); // safe when the file is gone
  });
});

describe('a payload store', () => {
  test('a spill with nothing to write creates no file and counts no run', async () => {
    const { store } = storeOf(2);
    expect(await store.spill()).toBe(0);
    expect(store.spillCount).toBe(0);
    expect(store.spilledBytes).toBe(0);
    expect(await listFiles(dir)).toEqual([]);
    store.add(1, message(1), 0);
    expect(await merged(store)).toEqual([[], [SCHEMA, 1, EOS]]);
  });

  test('an empty store still writes partition 0 as a stream (schema and end marker), the others empty', async () => {
    const { store } = storeOf(3);
    expect(await merged(store)).toEqual([[SCHEMA, EOS], [], []]);
  });

  test('evicted messages keep their order (a dictionary batch before the batch that uses it), and only record batches count', async () => {
    const { store } = storeOf(1);
    store.add(0, message(1), 0);
    await store.spill(new Map([[0, evicted([5, 6, 7], 2)]])); // 5: a dictionary batch, 6 and 7: record batches
    expect(Array.from(store.batchCounts)).toEqual([3]);
    expect(await merged(store)).toEqual([[SCHEMA, 1, 5, 6, 7, EOS]]);
  });

  test('rows evicted from one partition go to that partition alone, not to the partitions after it in the run', async () => {
    const { store } = storeOf(3);
    store.add(1, message(11), 0);
    store.add(2, message(21), 0);
    await store.spill(new Map([[0, evicted([1], 1)]]));
    expect(Array.from(store.batchCounts)).toEqual([1, 1, 1]);
    expect(await merged(store)).toEqual([[SCHEMA, 1, EOS], [SCHEMA, 11, EOS], [SCHEMA, 21, EOS]]);
  });

  test('partitions are ordered as numbers in a run: partition 10 after partition 2', async () => {
    const { store } = storeOf(12);
    store.add(10, message(100), 0);
    store.add(2, message(20), 0);
    store.add(11, message(110), 0);
    await store.spill();
    const tags = await merged(store);
    expect(tags[2]).toEqual([SCHEMA, 20, EOS]);
    expect(tags[10]).toEqual([SCHEMA, 100, EOS]);
    expect(tags[11]).toEqual([SCHEMA, 110, EOS]);
  });

  test('a spill asked for once the merge has begun, with evicted rows, is refused (the rows would be lost), and the merge writes what it had', async () => {
    const { store } = storeOf(1);
    store.add(0, message(1), 0);
    const output = await DataFileWriter.create(join(dir, 'out'));
    const merging = store.merge(output, new Uint8Array(8).fill(SCHEMA));
    while (!store.merging) await Promise.resolve();
    await expect(store.spill(new Map([[0, evicted([2], 1)]]))).rejects.toThrow(/evicted after the merge began/);
    await merging;
    await output.commit();
    await store.discard();
    expect(Array.from(await readFile(join(dir, 'out.data'))).filter((_, i) => i % 8 === 0)).toEqual([SCHEMA, 1, EOS]);
  });

  test('a partition with spilled runs and payloads still in memory: the runs first, then every chunk of the payloads kept, in the order made', async () => {
    const { store } = storeOf(2);
    store.add(0, message(1), 0);
    await store.spill(new Map([[0, evicted([2], 1)]]));
    store.add(0, { chunks: [new Uint8Array(8).fill(3), new Uint8Array(8).fill(4)], byteLength: 16 }, 0); // one payload in two chunks
    store.add(1, message(11), 0);
    expect(await merged(store)).toEqual([[SCHEMA, 1, 2, 3, 4, EOS], [SCHEMA, 11, EOS]]);
  });

  test('discard removes the spill file and forgets it: no file is left, and the store counts no run', async () => {
    const { store } = storeOf(1);
    store.add(0, message(1), 0);
    await store.spill();
    expect(store.spillCount).toBe(1);
    expect((await listFiles(dir)).length).toBe(1);
    await store.discard();
    expect(await listFiles(dir)).toEqual([]);
    expect(store.spillCount).toBe(0);
  });

  test('discard waits for payloads still encoding: it returns only once none is at work (none then reads memory the writer gives back)', async () => {
    const { store } = storeOf(1);
    let finish!: (m: EncodedMessage) => void;
    store.add(0, new Promise<EncodedMessage>((resolve) => (finish = resolve)), 0);
    let discarded = false;
    const discarding = store.discard().then(() => (discarded = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(discarded).toBe(false);
    finish(message(1));
    await discarding;
    expect(discarded).toBe(true);
  });

  describe('prepareMerge spills what it holds', () => {
    test('when the windows (64 KiB per run) would be more than half of what the pool has: not at exactly half', async () => {
      const { store, reservation } = storeOf(1);
      store.add(0, message(1), 0);
      await store.spill();
      reservation.tryGrow(8);
      store.add(0, message(2), 8); // 8 bytes held
      await store.prepareMerge(2 * MERGE_WINDOW_BYTES); // one run: 64 KiB wanted, exactly half of 128 KiB
      expect(store.spillCount).toBe(1);
      await store.prepareMerge(2 * MERGE_WINDOW_BYTES - 2);
      expect(store.spillCount).toBe(2);
      expect(await merged(store)).toEqual([[SCHEMA, 1, 2, EOS]]);
    });

    test('when what it holds plus the merge buffer would be over its share: not when it is exactly the share', async () => {
      const { store, reservation } = storeOf(1, new MemoryPool(16 * MiB), { bufferBytes: 64 * KiB, maxHeldBytes: 100 * KiB });
      reservation.tryGrow(36 * KiB);
      store.add(0, { ...message(1), heldBytes: 36 * KiB }, 36 * KiB); // 36 KiB held + 64 KiB buffer = the share
      await store.prepareMerge(16 * MiB);
      expect(store.spillCount).toBe(0);
      expect(reservation.size).toBe(36 * KiB);
      reservation.tryGrow(8);
      store.add(0, message(2), 8); // 8 bytes over
      await store.prepareMerge(16 * MiB);
      expect(store.spillCount).toBe(1);
      expect(reservation.size).toBe(0);
      expect(await merged(store)).toEqual([[SCHEMA, 1, 2, EOS]]);
    });
  });
});

describe('a streamed partition\'s checksum pass', () => {
  test('reads into a buffer no longer than the partition when the partition is shorter than a chunk', async () => {
    const data = Uint8Array.from({ length: 100 }, (_, i) => i * 7);
    const buffers: number[] = [];
    const source = {
      read: async (offset: number, bytes: number) => data.slice(offset, offset + bytes),
      readInto: async (offset: number, target: Uint8Array) => {
        buffers.push(target.buffer.byteLength);
        target.set(data.subarray(offset, offset + target.byteLength));
      },
    } as unknown as CheckedSource;
    expect(await checksumOf(source, 0, 100)).toBe(crc32cOf([data]));
    expect(buffers).toEqual([100]);
  });
});

describe('a streamed partition that fails its checksum', () => {
  test('names both checksums as 8 hex digits, leading zeros kept', async () => {
    const ipc = tableToIPC(makeTable({ v: Int32Array.of(1, 2, 3) }), 'stream');
    const prefix = join(dir, 'out');
    const paths = outputPaths(prefix);
    await writeFile(paths.data, ipc);
    await writeFile(paths.index, encodeIndex([ipc.byteLength]));
    expect(crc32cOf([ipc])).not.toBe(0x12);
    await writeFile(paths.checksum, encodeChecksums([0x12]));
    const reader = await ShuffleReader.open(prefix, { wholePartitionBytes: 0 });
    try {
      const error = await (async () => {
        try {
          for await (const _ of reader.readPartition(0)) void _;
        } catch (e) {
          return e;
        }
        return null;
      })();
      expect(error).toBeInstanceOf(ShuffleError);
      expect((error as ShuffleError).code).toBe('CS_CHECKSUM_MISMATCH');
      const actual = crc32cOf([ipc]).toString(16).padStart(8, '0');
      expect((error as ShuffleError).message).toContain(`CRC32C 0x${actual}, the checksum file says 0x00000012`);
    } finally {
      await reader.close();
    }
  });
});
