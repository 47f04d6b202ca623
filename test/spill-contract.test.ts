/**
 * Claims about spilling that the eighteenth mutation sweep (docs/RELIABILITY.md, "The tests notice a
 * broken line: mutation sweeps") found no other test pinned: the spill file's runs and segments
 * (src/spill/spill-file.ts), the payload store (src/spill/payload-store.ts), and the two writers'
 * calls into them for spilling (src/writer/shuffle-writer.ts, src/sort-writer/sort-shuffle-writer.ts).
 * Every test is deterministic: spills are forced through reclaim(), failures through a spill
 * directory that is removed or a stand-in that throws.
 */
import { stat, truncate, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Field, Int32, makeData, RecordBatch, Schema, Struct } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { DataFileWriter } from '../src/format/output-files.js';
import type { EncodedMessage } from '../src/format/ipc-message.js';
import { MemoryPool, ShuffleError, ShuffleReader, ShuffleWriter, SortShuffleWriter, type ShuffleWriterOptions } from '../src/index.js';
import { PayloadStore } from '../src/spill/payload-store.js';
import { mergeBufferBytes, reserveMergeWindows, SpillFile, type MergeSink } from '../src/spill/spill-file.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-spill-contract-')));
afterEach(async () => removeDir(dir));

const spillFiles = async (where = dir) => (await listFiles(where)).filter((f) => f.startsWith('columnar-shuffle-spill-'));

/** Copies every partition of `file` through one sink that takes the bytes at once; returns them per partition. */
async function copyAll(file: SpillFile, partitions: number, bufferBytes = 64 << 10): Promise<Buffer[]> {
  const got: Buffer[][] = Array.from({ length: partitions }, () => []);
  let current = 0;
  const sink: MergeSink = { append: async (bytes) => void got[current]!.push(Buffer.from(bytes)), flush: async () => undefined };
  const buffer = new Uint8Array(bufferBytes);
  for (let p = 0; p < partitions; p++) {
    current = p;
    await file.copyPartition(p, buffer, sink);
  }
  return got.map((pieces) => Buffer.concat(pieces));
}

const bytesOf = (length: number, value: number) => new Uint8Array(length).fill(value);

describe('SpillFile', () => {
  test("endRun returns the bytes of that run alone, not of the file so far (they add up to the writers' spilledBytes)", async () => {
    const file = await SpillFile.create(dir);
    try {
      for (const length of [100, 250, 40]) {
        file.beginRun();
        await file.writeSegment(0, [bytesOf(length, 1)]);
        await file.flushRun();
        expect(file.endRun()).toBe(length);
      }
      expect(file.bytesWritten).toBe(390);
    } finally {
      await file.delete();
    }
  });

  test("a run abandoned before it was flushed leaves nothing: the next run's segments hold only its own bytes, and the file only those", async () => {
    const file = await SpillFile.create(dir);
    try {
      file.beginRun();
      await file.writeSegment(0, [bytesOf(100, 7)]); // gathered, not written
      file.abandonRun();
      file.beginRun();
      await file.writeSegment(0, [bytesOf(50, 1)]);
      await file.writeSegment(1, [bytesOf(30, 2)]);
      await file.flushRun();
      expect(file.endRun()).toBe(80);
      expect(await copyAll(file, 2)).toEqual([Buffer.alloc(50, 1), Buffer.alloc(30, 2)]);
      expect((await stat(file.path)).size).toBe(80);
    } finally {
      await file.delete();
    }
  });

  test("a run abandoned after part of it reached the disk is overwritten by the next run: the file grows by the runs kept, not by failed ones", async () => {
    const file = await SpillFile.create(dir);
    try {
      file.beginRun();
      await file.writeSegment(0, [bytesOf(5 << 20, 7)]); // past the 4 MiB flush threshold: on disk at once
      file.abandonRun();
      file.beginRun();
      await file.writeSegment(0, [bytesOf(5 << 20, 1)]);
      await file.flushRun();
      expect(file.endRun()).toBe(5 << 20);
      expect(file.bytesWritten).toBe(5 << 20);
      expect((await stat(file.path)).size).toBe(5 << 20);
    } finally {
      await file.delete();
    }
  });

  test('a segment of a lower partition than the one before it in the run is refused (the merge, reading partitions in order, would never find it)', async () => {
    const file = await SpillFile.create(dir);
    try {
      file.beginRun();
      await file.writeSegment(3, [bytesOf(10, 3)]);
      await expect(file.writeSegment(1, [bytesOf(10, 1)])).rejects.toThrow(/ascend/);
    } finally {
      await file.delete();
    }
  });

  test('a spill file cut short under the merge is CS_IO naming the file, not a hang or a short partition', async () => {
    const file = await SpillFile.create(dir);
    try {
      file.beginRun();
      await file.writeSegment(0, [bytesOf(1000, 1)]);
      await file.writeSegment(1, [bytesOf(1000, 2)]);
      await file.flushRun();
      file.endRun();
      await truncate(file.path, 1500); // another process cut it
      const error = await copyAll(file, 2, 512).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ShuffleError);
      expect(error).toMatchObject({ code: 'CS_IO', where: { file: file.path } });
    } finally {
      await file.delete();
    }
  }, 10_000); // (a reader that ignores the end of the file loops: a short timeout says so sooner)

  test('a write the file system refuses is CS_IO naming the spill file (not the bare system error)', async () => {
    const file = await SpillFile.create(dir);
    try {
      await (file as unknown as { handle: FileHandle }).handle.close(); // every write now fails (EBADF)
      file.beginRun();
      await file.writeSegment(0, [bytesOf(10, 1)]);
      const error = await file.flushRun().then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(ShuffleError);
      expect(error).toMatchObject({ code: 'CS_IO', where: { file: file.path } });
    } finally {
      await file.delete();
    }
  });

  test('a read the file system refuses during the merge is CS_IO naming the spill file', async () => {
    const file = await SpillFile.create(dir);
    try {
      file.beginRun();
      await file.writeSegment(0, [bytesOf(10, 1)]);
      await file.flushRun();
      file.endRun();
      await (file as unknown as { handle: FileHandle }).handle.close(); // every read now fails
      const error = await copyAll(file, 1).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(ShuffleError);
      expect(error).toMatchObject({ code: 'CS_IO', where: { file: file.path } });
    } finally {
      await file.delete();
    }
  });

  test('delete() closes the file before removing it: no descriptor of the deleted file stays open', async () => {
    const file = await SpillFile.create(dir);
    file.beginRun();
    await file.writeSegment(0, [bytesOf(10, 1)]);
    await file.flushRun();
    file.endRun();
    await file.delete();
    expect(await spillFiles()).toEqual([]);
    expect(await openDescriptorsOf(file.path)).toEqual([]);
  });
});

/** The descriptors of this process open on `path` (Linux /proc; a deleted file shows as "<path> (deleted)"). */
async function openDescriptorsOf(path: string): Promise<string[]> {
  const { readdir, readlink } = await import('node:fs/promises');
  const out: string[] = [];
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (target === path || target === `${path} (deleted)`) out.push(fd);
  }
  return out;
}

describe('reserveMergeWindows', () => {
  test("the merge's read windows keep the writer within its share: what it already holds counts", () => {
    const pool = new MemoryPool(64 << 20);
    const reservation = pool.register('writer');
    expect(reservation.tryGrow(3 << 20)).toBe(true); // held (merge buffer included)
    const extra = reserveMergeWindows(reservation, 200, 1 << 20, 4 << 20); // 200 runs want 12.5 MiB of windows; the share is 4 MiB
    expect(extra).toBe(1 << 20);
    expect(reservation.size).toBe(4 << 20);
  });
});

test('a run larger than the flush threshold (written in pieces before it ends) reads back exactly, segment by segment', async () => {
  const file = await SpillFile.create(dir);
  try {
    file.beginRun();
    await file.writeSegment(0, [bytesOf(5 << 20, 1)]); // written at once, before the run ends
    await file.writeSegment(1, [bytesOf(100, 2)]);
    await file.writeSegment(2, [bytesOf(3 << 20, 3), bytesOf(2 << 20, 4)]); // written at once again
    await file.writeSegment(3, [bytesOf(10, 5)]);
    await file.flushRun();
    expect(file.endRun()).toBe((10 << 20) + 110);
    const got = await copyAll(file, 4, 1 << 20);
    expect(got.map((bytes) => bytes.length)).toEqual([5 << 20, 100, 5 << 20, 10]);
    expect(got[0]!.equals(Buffer.alloc(5 << 20, 1))).toBe(true);
    expect(got[1]).toEqual(Buffer.alloc(100, 2));
    expect(got[2]!.equals(Buffer.concat([Buffer.alloc(3 << 20, 3), Buffer.alloc(2 << 20, 4)]))).toBe(true);
    expect(got[3]).toEqual(Buffer.alloc(10, 5));
  } finally {
    await file.delete();
  }
});

// ---- PayloadStore

/** A stand-in message: 8 bytes of `tag` (the merge copies messages verbatim). */
const message = (tag: number): EncodedMessage => ({ chunks: [new Uint8Array(8).fill(tag)], byteLength: 8 });
const SCHEMA = 9;
const EOS = 0xff; // the first byte of the end-of-stream marker

/**
 * A stand-in for the data file: records each partition's message tags (first byte of every 8), what
 * was appended but not yet flushed, and lets a test act when a partition begins.
 */
class RecordingOutput {
  readonly tags: number[][] = [];
  unflushed = 0;
  onBegin: (p: number) => void = () => undefined;
  private current = -1;
  private pending: { p: number; bytes: Uint8Array }[] = [];
  beginPartition(p: number): void {
    this.current = p;
    this.tags[p] = [];
    this.onBegin(p);
  }
  async append(bytes: Uint8Array): Promise<void> {
    this.pending.push({ p: this.current, bytes });
    this.unflushed++;
  }
  async flush(): Promise<void> {
    for (const { p, bytes } of this.pending) for (let i = 0; i < bytes.byteLength; i += 8) this.tags[p]!.push(bytes[i]!);
    this.pending = [];
    this.unflushed = 0;
  }
  endPartition(): void {}
  /** as the data file does at commit: whatever is still appended gets written */
  async close(): Promise<number[][]> {
    await this.flush();
    return this.tags;
  }
}

function newStore(partitions: number, pool: MemoryPool, memory: { bufferBytes?: number; maxHeldBytes?: number } = {}, spillDir = dir) {
  const reservation = pool.register('store');
  const store = new PayloadStore(partitions, reservation, spillDir, { bufferBytes: memory.bufferBytes ?? 64 << 10, maxHeldBytes: memory.maxHeldBytes ?? Infinity }, 16 << 10, false);
  return { store, reservation };
}

/** Adds a payload that holds `bytes` (reserved here first, as the writer does; its heldBytes keep them reserved once it settles). */
function addReserved(store: PayloadStore, reservation: ReturnType<MemoryPool['register']>, p: number, tag: number, bytes: number): void {
  expect(reservation.tryGrow(bytes)).toBe(true);
  store.add(p, { ...message(tag), heldBytes: bytes }, bytes);
}

const merged = async (store: PayloadStore, output = new RecordingOutput()) => {
  await store.merge(output as unknown as DataFileWriter, new Uint8Array(8).fill(SCHEMA));
  return output.close();
};

describe('PayloadStore', () => {
  test('a spill asked for once the merge has begun frees nothing and writes no run: every payload still reaches the output', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store } = newStore(3, pool);
    store.add(0, message(1), 0);
    store.add(1, message(2), 0);
    store.add(2, message(3), 0);
    const output = new RecordingOutput();
    let during: Promise<number> | null = null;
    output.onBegin = (p) => {
      if (p === 1) during = store.spill();
    };
    const tags = await merged(store, output);
    expect(await during).toBe(0);
    expect(store.spillCount).toBe(0);
    expect(tags).toEqual([[SCHEMA, 1, EOS], [SCHEMA, 2, EOS], [SCHEMA, 3, EOS]]);
    await store.discard();
    expect(await spillFiles()).toEqual([]);
  });

  test('a merge begun while a spill run is on its way waits for it: the payloads that run took are in the output', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store } = newStore(2, pool);
    store.add(0, message(1), 0);
    store.add(1, message(2), 0);
    const spilling = store.spill(); // not awaited: it still has to create the spill file
    const tags = await merged(store);
    await spilling;
    expect(store.spillCount).toBe(1);
    expect(tags).toEqual([[SCHEMA, 1, EOS], [SCHEMA, 2, EOS]]);
    await store.discard();
  });

  test('discard() waits for a spill run on its way: the file it writes is deleted too, none is left behind', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store } = newStore(1, pool);
    store.add(0, message(1), 0);
    const spilling = store.spill();
    await store.discard();
    await spilling.catch(() => undefined);
    expect(await spillFiles()).toEqual([]);
  });

  test('a spill run that fails part-way (an evicted partition cannot be encoded) is dropped whole: the payloads it took are written once, by the next run', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store } = newStore(2, pool);
    store.add(0, message(1), 0);
    const failing = { encode: () => Promise.reject(new Error('encoding failed')), written: () => undefined };
    await expect(store.spill(new Map([[1, failing]]))).rejects.toThrow('encoding failed');
    expect(store.spillCount).toBe(0);
    expect(await store.spill()).toBe(0);
    expect(store.spillCount).toBe(1);
    const tags = await merged(store);
    expect(tags).toEqual([[SCHEMA, 1, EOS], []]);
    await store.discard();
  });

  test('prepareMerge spills what is cached when the pool has no read window to give each spill run (their memory becomes the windows)', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store, reservation } = newStore(1, pool);
    addReserved(store, reservation, 0, 1, 1000);
    await store.spill();
    addReserved(store, reservation, 0, 2, 1000);
    await store.prepareMerge(1000); // one run wants a 64 KiB window; half of 1000 bytes is free
    expect(store.spillCount).toBe(2);
    expect(store.memoryBytes).toBe(0);
    await store.prepareMerge(1000); // nothing left to spill: no empty run
    expect(store.spillCount).toBe(2);
    await store.discard();
  });

  test('prepareMerge spills what is cached when holding it with the merge buffer would take the writer past its share', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store, reservation } = newStore(1, pool, { bufferBytes: 64 << 10, maxHeldBytes: 96 << 10 });
    addReserved(store, reservation, 0, 1, 40 << 10); // 40 KiB + the 64 KiB buffer > 96 KiB
    await store.prepareMerge(Number.MAX_SAFE_INTEGER);
    expect(store.spillCount).toBe(1);
    const { store: within, reservation: r2 } = newStore(1, pool, { bufferBytes: 64 << 10, maxHeldBytes: 96 << 10 });
    addReserved(within, r2, 0, 1, 16 << 10); // 80 KiB: within the share, nothing to spill
    await within.prepareMerge(Number.MAX_SAFE_INTEGER);
    expect(within.spillCount).toBe(0);
    await store.discard();
    await within.discard();
  });

  test("the merge holds its read buffer and windows in the reservation while it runs, and gives exactly them back: what the payloads hold stays", async () => {
    const pool = new MemoryPool(64 << 20);
    const { store, reservation } = newStore(1, pool);
    for (let run = 0; run < 3; run++) {
      store.add(0, message(run + 1), 0);
      await store.spill();
    }
    addReserved(store, reservation, 0, 4, 1000); // kept in memory
    const before = reservation.size;
    const output = new RecordingOutput();
    let during = 0;
    output.onBegin = () => (during = reservation.size);
    expect(await merged(store, output)).toEqual([[SCHEMA, 1, 2, 3, 4, EOS]]);
    expect(during).toBe(before + 3 * (64 << 10)); // the 64 KiB buffer, and a window per run beyond it
    expect(reservation.size).toBe(before);
    await store.discard();
    expect(reservation.size).toBe(0);
  });

  test('merge() returns with everything it appended flushed: nothing may point into its read buffer once that is released', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store } = newStore(2, pool);
    store.add(0, message(1), 0);
    await store.spill();
    store.add(1, message(2), 0);
    const output = new RecordingOutput();
    await store.merge(output as unknown as DataFileWriter, new Uint8Array(8).fill(SCHEMA));
    expect(output.unflushed).toBe(0);
    await store.discard();
  });

  test('discard() gives back the memory of every payload still cached', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store, reservation } = newStore(2, pool);
    addReserved(store, reservation, 0, 1, 1000);
    addReserved(store, reservation, 1, 2, 3000);
    expect(store.memoryBytes).toBe(4000);
    await store.discard();
    expect(reservation.size).toBe(0);
    expect(pool.reserved).toBe(0);
  });

  test('memoryBytes counts what cached payloads hold (reserved bytes and slab ranges), and a spill brings it to 0', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store, reservation } = newStore(1, pool);
    addReserved(store, reservation, 0, 1, 1000);
    const range = store.allocate(8)!;
    range.bytes.fill(2);
    store.add(0, { chunks: [range.bytes], byteLength: 8 }, 0, true, range);
    expect(store.memoryBytes).toBe(1000 + range.bytes.byteLength);
    await store.spill();
    expect(store.memoryBytes).toBe(0);
    expect(await merged(store)).toEqual([[SCHEMA, 1, 2, EOS]]);
    await store.discard();
  });

  test('what a spill returns is what the reservation gave back, slabs included (a full one dropped, the one being filled trimmed)', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store, reservation } = newStore(1, pool);
    // 2 KiB ranges (an eighth of a 16 KiB slab): nine of them fill one slab and open a second
    for (let i = 0; i < 9; i++) {
      const range = store.allocate(2048)!;
      store.add(0, { chunks: [range.bytes], byteLength: 2048 }, 0, true, range);
    }
    expect(reservation.size).toBe(32 << 10);
    const released = await store.spill();
    expect(released).toBe(32 << 10);
    expect(reservation.size).toBe(0);
    await store.discard();
  });

  test('a dictionary batch is not counted among its partition\'s record batches', async () => {
    const pool = new MemoryPool(64 << 20);
    const { store } = newStore(1, pool);
    store.add(0, message(5), 0, false);
    store.add(0, message(1), 0);
    expect(Array.from(store.batchCounts)).toEqual([1]);
    await store.discard();
  });
});

// ---- the writers' spills

const ROWS_SCHEMA = new Schema([new Field('v', new Int32(), false), new Field('p', new Int32(), false)]);

/** `count` rows: v = first, first + 1, ...; p = v % partitions. */
function rowsBatch(first: number, count: number, partitions: number): RecordBatch {
  const v = makeData({ type: new Int32(), length: count, data: Int32Array.from({ length: count }, (_, i) => first + i) });
  const p = makeData({ type: new Int32(), length: count, data: Int32Array.from({ length: count }, (_, i) => (first + i) % partitions) });
  return new RecordBatch(ROWS_SCHEMA, makeData({ type: new Struct(ROWS_SCHEMA.fields), length: count, children: [v, p] }));
}

function writerOptions(pool: MemoryPool, extra: Partial<ShuffleWriterOptions> = {}): ShuffleWriterOptions {
  return { numPartitions: 4, partitioning: { kind: 'partition-id', column: 'p' }, outputPrefix: join(dir, 'out'), spillDir: dir, memoryPool: pool, codec: 'none', stagingBytes: 0, ...extra };
}

const KINDS = ['hash', 'sort'] as const;
type Kind = (typeof KINDS)[number];

async function createWriter(kind: Kind, options: ShuffleWriterOptions): Promise<ShuffleWriter | SortShuffleWriter> {
  return kind === 'hash' ? ShuffleWriter.create(options) : SortShuffleWriter.create(options);
}

/** Every partition's v values in the order read. */
async function valuesOf(prefix: string): Promise<number[][]> {
  const reader = await ShuffleReader.open(prefix);
  try {
    const out: number[][] = [];
    for (let p = 0; p < reader.numPartitions; p++) {
      const values: number[] = [];
      for await (const batch of reader.readPartition(p)) for (const row of batch) values.push(row!.v as number);
      out.push(values);
    }
    return out;
  } finally {
    await reader.close();
  }
}

/** What each partition should hold, in order, for rows 0 .. n - 1. */
const expectedValues = (n: number, partitions: number) => Array.from({ length: partitions }, (_, p) => Array.from({ length: n }, (_, i) => i).filter((v) => v % partitions === p));

describe.each(KINDS)('%s writer', (kind) => {
  test('spilledBytes counts each spilled byte once: over three spill runs it is more than 0 and no more than the data file, which holds every spilled segment verbatim', async () => {
    const pool = new MemoryPool(64 << 20);
    const writer = await createWriter(kind, writerOptions(pool));
    for (let run = 0; run < 3; run++) {
      await writer.write(rowsBatch(run * 2000, 2000, 4));
      await writer.reclaim(Number.MAX_SAFE_INTEGER);
    }
    const result = await writer.finish();
    expect(result.spills).toBe(3);
    expect(result.spilledBytes).toBeGreaterThanOrEqual(6000 * 4); // every row spilled: its 4-byte v at least
    expect(result.spilledBytes).toBeLessThanOrEqual(result.bytesWritten);
    expect(await valuesOf(join(dir, 'out'))).toEqual(expectedValues(6000, 4));
    expect(await spillFiles()).toEqual([]);
    expect(pool.reserved).toBe(0);
  });
  test("finish() spills what the writer holds beyond its share of the pool before it merges (held through the merge, it could starve another writer)", async () => {
    const pool = new MemoryPool(16 << 20);
    const writer = await createWriter(kind, writerOptions(pool, { concurrentTasks: 16 })); // a share of 1 MiB
    for (let b = 0; b < 8; b++) await writer.write(rowsBatch(b * 50_000, 50_000, 4)); // 1.6 MB of v alone, the pool has room for it
    expect(pool.reserved).toBeGreaterThan(1 << 20);
    const result = await writer.finish();
    expect(result.spills).toBe(1);
    expect(await valuesOf(join(dir, 'out'))).toEqual(expectedValues(400_000, 4));
    expect(pool.reserved).toBe(0);
  });
  test('a finish() that comes while a reclaim\'s spill run is on its way waits for it: every row is written once', async () => {
    const pool = new MemoryPool(64 << 20);
    const writer = await createWriter(kind, writerOptions(pool));
    await writer.write(rowsBatch(0, 3000, 4));
    await writer.reclaim(Number.MAX_SAFE_INTEGER); // the spill file exists: the next run does not wait to create it
    await writer.write(rowsBatch(3000, 3000, 4));
    const reclaiming = writer.reclaim(Number.MAX_SAFE_INTEGER); // not awaited
    const result = await writer.finish();
    await reclaiming;
    expect(result.spills).toBe(2);
    expect(await valuesOf(join(dir, 'out'))).toEqual(expectedValues(6000, 4));
    expect(await spillFiles()).toEqual([]);
    expect(pool.reserved).toBe(0);
  });

  test('a reclaim with no rows in memory writes no spill run', async () => {
    const pool = new MemoryPool(64 << 20);
    const writer = await createWriter(kind, writerOptions(pool));
    await writer.write(rowsBatch(0, 3000, 4));
    await writer.reclaim(Number.MAX_SAFE_INTEGER);
    await writer.reclaim(Number.MAX_SAFE_INTEGER); // nothing left to write out
    const result = await writer.finish();
    expect(result.spills).toBe(1);
    expect(await valuesOf(join(dir, 'out'))).toEqual(expectedValues(3000, 4));
  });

  test("a reclaim while finish() copies spilled runs into the data file writes no new run: the rows it is writing out are written once", async () => {
    const pool = new MemoryPool(64 << 20);
    const writer = await createWriter(kind, writerOptions(pool));
    await writer.write(rowsBatch(0, 3000, 4));
    await writer.reclaim(Number.MAX_SAFE_INTEGER);
    await writer.write(rowsBatch(3000, 3000, 4)); // in memory at finish()
    const copy = SpillFile.prototype.copyPartition;
    const during: Promise<number>[] = [];
    const spy = vi.spyOn(SpillFile.prototype, 'copyPartition').mockImplementation(function (this: SpillFile, ...args: Parameters<SpillFile['copyPartition']>) {
      if (during.length === 0) during.push(writer.reclaim(Number.MAX_SAFE_INTEGER));
      return copy.apply(this, args);
    });
    try {
      const result = await writer.finish();
      await Promise.all(during);
      expect(during).toHaveLength(1);
      expect(result.spills).toBe(1);
    } finally {
      spy.mockRestore();
    }
    expect(await valuesOf(join(dir, 'out'))).toEqual(expectedValues(6000, 4));
    expect(await spillFiles()).toEqual([]);
    expect(pool.reserved).toBe(0);
  });

  test("finish() reserves the merge's read buffer from the pool while it copies spilled runs", async () => {
    const pool = new MemoryPool(64 << 20); // a share of 64 MiB: a 1 MiB read buffer
    const writer = await createWriter(kind, writerOptions(pool));
    await writer.write(rowsBatch(0, 3000, 4));
    await writer.reclaim(Number.MAX_SAFE_INTEGER);
    const copy = SpillFile.prototype.copyPartition;
    let reserved = -1;
    const spy = vi.spyOn(SpillFile.prototype, 'copyPartition').mockImplementation(function (this: SpillFile, ...args: Parameters<SpillFile['copyPartition']>) {
      reserved = Math.max(reserved, pool.reserved);
      return copy.apply(this, args);
    });
    try {
      await writer.finish();
    } finally {
      spy.mockRestore();
    }
    expect(reserved).toBeGreaterThanOrEqual(1 << 20);
    expect(pool.reserved).toBe(0);
  });
});

test('PayloadStore: evicted rows are told written only once their run is on disk (their buffers back the bytes until the write completes)', async () => {
  const { readdirSync, statSync } = await import('node:fs');
  const pool = new MemoryPool(64 << 20);
  const { store } = newStore(2, pool);
  store.add(0, message(1), 0);
  let onDiskWhenTold = -1;
  const evicted = {
    encode: async () => ({ messages: [message(2)], batches: 1 }),
    written: () => {
      const [name] = readdirSync(dir).filter((f) => f.startsWith('columnar-shuffle-spill-'));
      onDiskWhenTold = statSync(join(dir, name!)).size;
    },
  };
  await store.spill(new Map([[1, evicted]]));
  expect(onDiskWhenTold).toBe(16);
  expect(await merged(store)).toEqual([[SCHEMA, 1, EOS], [SCHEMA, 2, EOS]]);
  await store.discard();
});

test('hash writer: a reclaim that cached payloads alone can satisfy writes them out as a spill run and frees their memory', async () => {
  const pool = new MemoryPool(64 << 20);
  const writer = await ShuffleWriter.create(writerOptions(pool, { maxBatchRows: 100, mergeThreshold: 0 }));
  for (let b = 0; b < 30; b++) await writer.write(rowsBatch(b * 4000, 4000, 4)); // payloads of 100 rows: more than half of what the writer holds
  const before = pool.reserved;
  const freed = await writer.reclaim(1); // half of what it holds: the payloads cover it, no buffer need go
  expect(freed).toBeGreaterThan(before / 2);
  expect(pool.reserved).toBe(before - freed);
  const result = await writer.finish();
  expect(result.spills).toBe(1);
  expect(await valuesOf(join(dir, 'out'))).toEqual(expectedValues(120_000, 4));
});

test("sort writer: finish() counts the merge's read buffer in what it would hold: rows that fit the share alone, but not with the buffer, are spilled first", async () => {
  const pool = new MemoryPool(16 << 20);
  const share = 1 << 20; // 16 tasks
  const writer = await SortShuffleWriter.create(writerOptions(pool, { concurrentTasks: 16 }));
  await writer.write(rowsBatch(0, 1000, 4));
  await writer.reclaim(Number.MAX_SAFE_INTEGER); // a spill file: the merge will need its read buffer
  let rows = 1000;
  while (pool.reserved <= share - mergeBufferBytes(share)) {
    await writer.write(rowsBatch(rows, 1000, 4));
    rows += 1000;
  }
  expect(pool.reserved).toBeLessThanOrEqual(share); // within the share without the buffer
  const result = await writer.finish();
  expect(result.spills).toBe(2);
  expect(await valuesOf(join(dir, 'out'))).toEqual(expectedValues(rows, 4));
});

test("sort writer: finish() makes room for its read buffer by spilling its own rows before it asks another consumer of the pool to give memory back", async () => {
  const pool = new MemoryPool(64 << 20); // a share of 64 MiB: a 1 MiB read buffer
  let asked = 0;
  const other = pool.register('another writer', {
    reclaim: async (bytes: number) => {
      asked++;
      const freed = Math.min(bytes, other.size);
      other.shrink(freed);
      return freed;
    },
  });
  const writer = await SortShuffleWriter.create(writerOptions(pool));
  await writer.write(rowsBatch(0, 5000, 4));
  await writer.reclaim(Number.MAX_SAFE_INTEGER); // a spill file: the merge will need its read buffer
  for (let b = 1; b < 40; b++) await writer.write(rowsBatch(b * 5000, 5000, 4)); // rows in memory again, MiBs of pages (small batches: little scratch for finish() to let go)
  expect(other.tryGrow(pool.available - (512 << 10))).toBe(true); // 512 KiB left: enough windows for two runs, not the buffer
  const result = await writer.finish();
  expect(asked).toBe(0);
  expect(result.spills).toBe(2);
  expect(await valuesOf(join(dir, 'out'))).toEqual(expectedValues(200_000, 4));
  other.free();
});

/**
 * A failed run once left the encodings it had not reached unawaited: one that rejected later (in the
 * writer: a compression error, or CS_ABORTED once an abort freed the reservation while it compressed)
 * was an unhandled rejection, which ends a Node process by default.
 */
test('PayloadStore: a spill run that fails handles every eviction encoding it started (one left unhandled can end the process when it rejects)', async () => {
  const pool = new MemoryPool(64 << 20);
  const { store } = newStore(2, pool);
  store.add(0, Promise.reject(new Error('payload encoding failed')), 0); // (add() gives it a handler: no unhandled rejection here)
  let handled = false;
  class Tracked<T> extends Promise<T> {
    override then<A = T, B = never>(onFulfilled?: ((value: T) => A | PromiseLike<A>) | null, onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B> {
      handled = true;
      return super.then(onFulfilled, onRejected);
    }
  }
  const late = {
    // resolves (never rejects, so this test leaves no unhandled rejection of its own) once the run has failed
    encode: () => new Tracked<{ messages: EncodedMessage[]; batches: number }>((resolve) => setTimeout(() => resolve({ messages: [], batches: 0 }), 20)),
    written: () => undefined,
  };
  await expect(store.spill(new Map([[1, late]]))).rejects.toThrow('payload encoding failed');
  await new Promise((resolve) => setTimeout(resolve, 40));
  expect(handled).toBe(true);
});

/**
 * An eviction the pool cannot give memory for is retried as a spill of the partition's rows; an
 * eviction that fails otherwise (here the allocation of a compressed payload's arena) is a failure
 * of the writer, not a memory limit, and is reported, not retried.
 */
test('hash writer: an eviction that fails with an error other than CS_MEMORY_LIMIT fails the write and aborts the writer (it is not retried as a spill)', async () => {
  const pool = new MemoryPool(64 << 20);
  const writer = await ShuffleWriter.create(writerOptions(pool, { codec: 'lz4', maxBatchRows: 1000, mergeThreshold: 0 }));
  const failure = new RangeError('Array buffer allocation failed');
  const take = vi.spyOn(pool.recycler, 'takeUnzeroed').mockImplementationOnce(() => {
    throw failure;
  });
  await expect(writer.write(rowsBatch(0, 20_000, 4))).rejects.toBe(failure);
  expect(take).toHaveBeenCalledTimes(1);
  await expect(writer.write(rowsBatch(20_000, 10, 4))).rejects.toMatchObject({ code: 'CS_WRITER_CLOSED' });
  expect(await listFiles(dir)).toEqual([]);
  expect(pool.reserved).toBe(0);
});
