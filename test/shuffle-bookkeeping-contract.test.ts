/**
 * The shuffle's bookkeeping as a job runner relies on it, at the edges a
 * mutation sweep of map-output-tracker.ts, map-status.ts, map-output-id.ts,
 * shuffle-files.ts, map-output-writer.ts and cut-to-rows.ts found unpinned
 * (scratch/mut-r2). Waits are settled with explicit promises and one turn of
 * the event loop (setImmediate), never with sleeps.
 */
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { Bool, Data, DenseUnion, Field, Int32, LargeUtf8, List, makeData, makeVector, Utf8, Utf8View, vectorFromArray } from 'apache-arrow';
import { narrowBatch } from '../src/cli/demo-data.js';
import { cutToRows } from '../src/shuffle/cut-to-rows.js';
import { columnInconsistency } from '../src/format/validate-column.js';
import { MapOutputWriter } from '../src/shuffle/map-output-writer.js';
import { removeShuffleFiles } from '../src/shuffle/shuffle-files.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { createShuffleWriter } from '../src/writer-kind.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';
import { MapOutputTracker } from '../src/shuffle/map-output-tracker.js';
import { assertMapStatus, type MapStatus } from '../src/shuffle/map-status.js';

function status(mapId: number, attempt = 0, numPartitions = 3, shuffleId = 0): MapStatus {
  return {
    id: { shuffleId, mapId, attempt },
    location: { host: 'host', prefix: `/shuffle/shuffle_${shuffleId}_${mapId}_${attempt}` },
    numPartitions,
    partitionLengths: Array.from({ length: numPartitions }, (_, p) => 100 + p),
    partitionRows: Array.from({ length: numPartitions }, () => 10),
    metrics: { rows: 10 * numPartitions, batches: 1, bytesWritten: 0, spills: 0, spilledBytes: 0, peakMemoryBytes: 0, writeMs: 0 },
  };
}

/** 'pending' unless the promise settled by the next turn of the event loop. */
async function settled<T>(promise: Promise<T>): Promise<T | 'pending' | { rejected: unknown }> {
  const pending = Symbol('pending');
  const turn = new Promise<typeof pending>((resolve) => setImmediate(() => resolve(pending)));
  const outcome = await Promise.race([promise.catch((error: unknown) => ({ rejected: error })), turn]);
  return outcome === pending ? 'pending' : (outcome as T | { rejected: unknown });
}

/** Every unlink of a shuffle file, in order (removeFile is still the real one). */
const unlinked = vi.hoisted(() => [] as string[]);
vi.mock('../src/remove-file.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../src/remove-file.js')>();
  return {
    removeFile: async (path: string, what: string) => {
      unlinked.push(path);
      return actual.removeFile(path, what);
    },
  };
});

const invalid = expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' });

describe('MapOutputTracker', () => {
  test('a reader asking for map 0.5 is refused with CS_INVALID_ARGUMENT, not left waiting for a map that cannot come', async () => {
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(0, 2);
    const signal = new AbortController().signal;
    expect(await settled(tracker.locator(0).waitFor(0.5, signal))).toEqual({ rejected: invalid });
    expect(await settled(tracker.waitFor(0, 1.5))).toEqual({ rejected: invalid });
    expect(tracker.waiting).toBe(0);
  });
});

describe('a map status is validated before the tracker records it', () => {
  test('partitionLengths or partitionRows longer than numPartitions are refused, and nothing is registered', () => {
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(0, 1);
    const s = status(0);
    expect(() => assertMapStatus({ ...s, partitionLengths: [...s.partitionLengths, 7] })).toThrow(invalid);
    expect(() => tracker.registerMapOutput({ ...s, partitionRows: [...s.partitionRows, 7] })).toThrow(
      expect.objectContaining({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('partitionRows must hold 3') }),
    );
    expect(tracker.missing(0)).toEqual([0]);
  });
});

describe('removing files', () => {
  let dir: string;
  let spillRoot: string;
  beforeEach(async () => {
    dir = await makeTempDir('cs-keep-');
    spillRoot = await makeTempDir('cs-keep-spill-');
  });
  afterEach(async () => {
    await removeDir(dir);
    await removeDir(spillRoot);
  });
  const list = async (d: string) => (await readdir(d)).sort();

  test("removeShuffleFiles of shuffle 1 leaves shuffle 10's spill directory and its spill files", async () => {
    for (const name of ['shuffle_1_0_0.spill', 'shuffle_10_0_0.spill']) {
      await mkdir(join(spillRoot, name));
      await writeFile(join(spillRoot, name, 'columnar-shuffle-spill-0123456789abcdef.tmp'), 'x');
    }
    expect((await removeShuffleFiles(dir, 1, { spillRoot })).map((p) => p.slice(spillRoot.length + 1))).toEqual([
      'shuffle_1_0_0.spill',
      'shuffle_1_0_0.spill/columnar-shuffle-spill-0123456789abcdef.tmp',
    ]);
    expect(await list(spillRoot)).toEqual(['shuffle_10_0_0.spill']);
    expect(await list(join(spillRoot, 'shuffle_10_0_0.spill'))).toEqual(['columnar-shuffle-spill-0123456789abcdef.tmp']);
  });

  test("removeShuffleFiles unlinks each output's index before its data and checksum: an output stops being committed first", async () => {
    for (let map = 0; map < 20; map++) {
      for (const suffix of ['.index', '.data', '.checksum.CRC32C']) await writeFile(join(dir, `shuffle_2_${map}_0${suffix}`), 'x');
    }
    unlinked.length = 0;
    expect(await removeShuffleFiles(dir, 2)).toHaveLength(60);
    expect(unlinked).toHaveLength(60);
    for (let map = 0; map < 20; map++) {
      const at = (suffix: string) => unlinked.indexOf(join(dir, `shuffle_2_${map}_0${suffix}`));
      expect(at('.index'), `map ${map}`).toBeLessThan(at('.data'));
      expect(at('.index'), `map ${map}`).toBeLessThan(at('.checksum.CRC32C'));
    }
  });

  test('a regular file named like a spill directory (shuffle_1_0_0.spill) is left alone, and the removal goes on', async () => {
    await writeFile(join(spillRoot, 'shuffle_1_0_0.spill'), 'not a directory');
    await writeFile(join(dir, 'shuffle_1_0_0.data'), 'x');
    expect((await removeShuffleFiles(dir, 1, { spillRoot })).map((p) => p.slice(dir.length + 1))).toEqual(['shuffle_1_0_0.data']);
    expect(await list(spillRoot)).toEqual(['shuffle_1_0_0.spill']);
  });

  test('removeShuffleFiles of a "directory" that is a file is CS_FILE_NOT_FOUND; of shuffle 1.5, CS_INVALID_ARGUMENT', async () => {
    await writeFile(join(dir, 'plain'), 'x');
    await expect(removeShuffleFiles(join(dir, 'plain'), 1)).rejects.toMatchObject({ code: 'CS_FILE_NOT_FOUND' });
    await writeFile(join(dir, 'shuffle_1_0_0.data'), 'x');
    await expect(removeShuffleFiles(dir, 1.5)).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
    await expect(removeShuffleFiles(dir, Number.NaN)).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
    expect(await list(dir)).toEqual(['plain', 'shuffle_1_0_0.data']);
  });

  test("removeShuffleFiles of shuffle 1 leaves a file whose name only ends like a shuffle file's (shuffle_1_0_0.old.data)", async () => {
    const keep = ['shuffle_1_0_0.old.data', 'shuffle_1_0_0.backup.index', 'shuffle_1_0_0.x.checksum.CRC32C', 'shuffle_1_0_0.x.data.0123456789ab.tmp'];
    for (const name of keep) await writeFile(join(dir, name), 'keep');
    await writeFile(join(dir, 'shuffle_1_0_0.data'), 'x');
    expect((await removeShuffleFiles(dir, 1)).map((p) => p.slice(dir.length + 1))).toEqual(['shuffle_1_0_0.data']);
    expect(await list(dir)).toEqual([...keep].sort());
  });
});

describe('MapOutputWriter', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await makeTempDir('cs-mow-');
  });
  afterEach(async () => {
    await removeDir(dir);
  });

  test("a MapStatus's metrics are its writer's: spills, spilled bytes, batches and peak memory as a bare writer of the same input counts them", async () => {
    const options = { numPartitions: 8, partitioning: { kind: 'hash', keys: ['key'] } as const };
    const input = Array.from({ length: 12 }, (_, i) => narrowBatch(4096, i + 1));
    const mow = await MapOutputWriter.create({ ...options, dir, id: { shuffleId: 0, mapId: 1, attempt: 0 }, memoryPool: new MemoryPool(512 * 1024) });
    for (const batch of input) await mow.write(batch);
    const status = await mow.finish();
    const bare = await createShuffleWriter('hash', { ...options, outputPrefix: join(dir, 'bare'), mapId: 1, memoryPool: new MemoryPool(512 * 1024) });
    for (const batch of input) await bare.write(batch);
    const result = await bare.finish();
    expect(result.spills, 'a 512 KiB pool makes it spill').toBeGreaterThan(0);
    const { writeMs, ...metrics } = status.metrics;
    expect(metrics).toEqual({ rows: result.rows, batches: 12, bytesWritten: result.bytesWritten, spills: result.spills, spilledBytes: result.spilledBytes, peakMemoryBytes: result.peakMemoryBytes });
    expect(writeMs).toBeGreaterThan(0);
  });

  test('abort() after finish() and a write after finish() leave the committed output as it is', async () => {
    const mow = await MapOutputWriter.create({ dir, id: { shuffleId: 4, mapId: 0, attempt: 0 }, numPartitions: 2, partitioning: { kind: 'hash', keys: ['key'] } });
    await mow.write(narrowBatch(300, 1));
    await mow.finish();
    const committed = ['shuffle_4_0_0.checksum.CRC32C', 'shuffle_4_0_0.data', 'shuffle_4_0_0.index'];
    expect(await readdir(dir).then((names) => names.sort())).toEqual(committed);
    await mow.abort();
    await expect(mow.write(narrowBatch(10, 2))).rejects.toMatchObject({ code: expect.stringMatching(/^CS_/) });
    await expect(mow.finish()).rejects.toMatchObject({ code: expect.stringMatching(/^CS_/) });
    expect(await readdir(dir).then((names) => names.sort())).toEqual(committed);
  });

  // create() checked that `dir` exists but made the spill directory with mkdir({ recursive: true }), so a
  // spillRoot that does not exist (a typo, an unmounted volume) was created with all its parents, and only the
  // attempt's own `.spill` directory was removed when the attempt ended: `<dir>/no/such` stayed behind.
  test('a spillRoot that does not exist is CS_FILE_NOT_FOUND, before anything is created, as a missing dir is', async () => {
    const created = MapOutputWriter.create({ dir, id: { shuffleId: 0, mapId: 0, attempt: 0 }, numPartitions: 2, partitioning: { kind: 'hash', keys: ['key'] }, spillRoot: join(dir, 'no', 'such') });
    try {
      await expect(created).rejects.toMatchObject({ code: 'CS_FILE_NOT_FOUND' });
    } finally {
      await (await created.catch(() => null))?.abort();
      expect(await readdir(dir), 'nothing is created').toEqual([]);
    }
  });

  test('the map id seeds round-robin partitioning: map 3 deals its rows as a bare writer with mapId 3 does', async () => {
    const options = { numPartitions: 4, partitioning: { kind: 'round-robin' } as const };
    const mow = await MapOutputWriter.create({ ...options, dir, id: { shuffleId: 0, mapId: 3, attempt: 0 } });
    await mow.write(narrowBatch(5, 1));
    const status = await mow.finish();
    const bare = await createShuffleWriter('hash', { ...options, outputPrefix: join(dir, 'bare'), mapId: 3 });
    await bare.write(narrowBatch(5, 1));
    expect(status.partitionRows).toEqual((await bare.finish()).partitionRows);
    const zero = await createShuffleWriter('hash', { ...options, outputPrefix: join(dir, 'zero'), mapId: 0 });
    await zero.write(narrowBatch(5, 1));
    expect(status.partitionRows, 'map 0 would start elsewhere').not.toEqual((await zero.finish()).partitionRows);
  });
});

describe('cutToRows: a slice cut to the bytes of its rows', () => {
  const values = (node: Data) => [...makeVector(node)].map((v) => (v instanceof Object && 'toArray' in v ? [...(v as { toArray(): unknown[] }).toArray()] : v));

  test('bit buffers: every slice of a Bool column keeps its values and nulls in ceil((offset % 8 + length) / 8) bytes', () => {
    const column = vectorFromArray(Array.from({ length: 70 }, (_, i) => (i % 5 === 2 ? null : (i * 7) % 3 === 0)), new Bool()).data[0]!;
    for (let start = 0; start < 20; start++) {
      for (let length = 0; length <= 30; length++) {
        const slice = column.slice(start, length);
        const cut = cutToRows(slice);
        const bytes = ((start % 8) + length + 7) >> 3;
        expect(values(cut), `${start}+${length}`).toEqual(values(slice));
        expect(cut.offset, `${start}+${length}`).toBe(start % 8);
        expect(cut.nullBitmap!.byteLength, `${start}+${length}`).toBe(bytes);
        expect((cut.values as Uint8Array).byteLength, `${start}+${length}`).toBe(bytes);
      }
    }
  });

  test('spans: a Utf8 or LargeUtf8 slice keeps exactly the bytes its offsets cover, its offsets rebased to 0, one per row and one more', () => {
    for (const type of [new Utf8(), new LargeUtf8()]) {
      const column = vectorFromArray(['', 'a', 'bb', 'ccc', 'dddd', 'eeeee', 'ffffff'], type).data[0]!;
      for (const [start, length] of [[0, 3], [1, 1], [1, 3], [2, 5], [6, 1], [3, 0]] as const) {
        const slice = column.slice(start, length);
        const cut = cutToRows(slice);
        const bytes = Number(slice.valueOffsets[length]) - Number(slice.valueOffsets[0]);
        expect(values(cut), `${type} ${start}+${length}`).toEqual(values(slice));
        expect((cut.values as Uint8Array).byteLength, `${type} ${start}+${length}`).toBe(bytes);
        expect([...cut.valueOffsets].map(Number), `${type} ${start}+${length}`).toEqual([...slice.valueOffsets].slice(0, length + 1).map((o) => Number(o) - Number(slice.valueOffsets[0])));
      }
    }
  });

  test("spans: a List slice's child is cut to the items its rows hold", () => {
    const column = vectorFromArray([[1], [2, 3], [], [4, 5, 6], null, [7]], new List(new Field('item', new Int32(), true))).data[0]!;
    for (const [start, length] of [[0, 2], [1, 3], [3, 3], [2, 1], [5, 1]] as const) {
      const slice = column.slice(start, length);
      const cut = cutToRows(slice);
      expect(values(cut), `${start}+${length}`).toEqual(values(slice));
      expect(cut.children[0]!.length, `${start}+${length}`).toBe(slice.valueOffsets[length]! - slice.valueOffsets[0]!);
    }
  });

  test("dense unions: each child is cut to the items the slice's rows use, a child no row uses to none", () => {
    const type = new DenseUnion([0, 5], [new Field('s', new Utf8(), true), new Field('n', new Int32(), true)]);
    const s = vectorFromArray(['a', 'b', 'c', 'd'], new Utf8()).data[0]!;
    const n = makeData({ type: new Int32(), length: 4, nullCount: 0, data: Int32Array.of(10, 11, 12, 13) });
    const typeIds = Int8Array.of(0, 5, 0, 5, 0, 5, 0, 5);
    const valueOffsets = Int32Array.of(0, 0, 1, 1, 2, 2, 3, 3);
    const column = makeData({ type, length: 8, nullCount: 0, typeIds, valueOffsets, children: [s, n] });
    const slice = column.slice(3, 3); // n[1], s[2], n[2]
    const cut = cutToRows(slice);
    expect(values(cut)).toEqual([11, 'c', 12]);
    expect(cut.children.map((c) => c.length)).toEqual([1, 2]);
    expect([...cut.valueOffsets]).toEqual([0, 0, 1]);
    const onlyStrings = cutToRows(column.slice(2, 1));
    expect(values(onlyStrings)).toEqual(['b']);
    expect(onlyStrings.children.map((c) => c.length), 'no row of the slice is a number').toEqual([1, 0]);
  });

  test("view columns: the long values are gathered into one buffer of just their bytes; the parent's views are not rewritten", () => {
    const long = (i: number) => `a value longer than twelve bytes, number ${i}`;
    const strings = Array.from({ length: 40 }, (_, i) => (i % 6 === 5 ? null : i % 3 === 0 ? `s${i}` : i % 3 === 1 ? long(i) : 'twelve bytes'));
    const column = vectorFromArray(strings, new Utf8View()).data[0]!;
    const parentViews = (column.values as Uint8Array).slice();
    for (const [start, length] of [[0, 10], [3, 9], [9, 17], [30, 10]] as const) {
      const slice = column.slice(start, length);
      const cut = cutToRows(slice);
      expect(values(cut), `${start}+${length}`).toEqual(strings.slice(start, start + length));
      const longBytes = strings.slice(start, start + length).reduce((sum, v) => sum + (v !== null && v.length > 12 ? v.length : 0), 0);
      expect(cut.variadicBuffers.map((b) => b.byteLength), `${start}+${length}`).toEqual([longBytes]);
      const views = cut.values as Uint8Array;
      for (let row = 0; row < length; row++) {
        if (strings[start + row] === null) expect([...views.subarray(row * 16, row * 16 + 16)], `null row ${start + row} is an empty value`).toEqual(new Array(16).fill(0));
      }
      expect(columnInconsistency(cut, { dictionaryIndices: false }), `${start}+${length}`).toBeNull();
      expect(column.values as Uint8Array, 'the parent keeps its views').toEqual(parentViews);
      expect(values(column)).toEqual(strings);
    }
  });

  test('view columns: a column whose null count is 0 keeps every value, whatever bits its bitmap holds (arrow-js reads them all as valid)', () => {
    const strings = Array.from({ length: 20 }, (_, i) => `a value longer than twelve bytes, number ${i}`);
    const full = vectorFromArray(strings, new Utf8View()).data[0]!;
    const column = new Data(new Utf8View(), 0, 20, 0, [undefined, full.values, new Uint8Array(3)] as never, [], undefined, full.variadicBuffers as Uint8Array[]);
    expect(values(column)).toEqual(strings);
    const cut = cutToRows(column.slice(3, 10));
    expect(values(cut)).toEqual(strings.slice(3, 13));
  });

  test("view columns: a null row's view is not read: one pointing past the buffers does not keep the slice from being cut, and becomes an empty value", () => {
    const long = (i: number) => `a value longer than twelve bytes, number ${i}`;
    const strings = Array.from({ length: 12 }, (_, i) => (i === 4 ? null : long(i)));
    const built = vectorFromArray(strings, new Utf8View()).data[0]!;
    const views = (built.values as Uint8Array).slice();
    new DataView(views.buffer).setInt32(4 * 16, 100, true); // the null row claims 100 bytes
    new DataView(views.buffer).setInt32(4 * 16 + 12, 1 << 20, true); // at 1 MiB into buffer 0
    const column = new Data(new Utf8View(), 0, 12, 1, [undefined, views, built.nullBitmap] as never, [], undefined, built.variadicBuffers as Uint8Array[]);
    const cut = cutToRows(column.slice(2, 5));
    expect(values(cut)).toEqual(strings.slice(2, 7));
    expect(cut.variadicBuffers.map((b) => b.byteLength)).toEqual([[2, 3, 5, 6].reduce((sum, i) => sum + long(i).length, 0)]);
    expect([...(cut.values as Uint8Array).subarray(2 * 16, 3 * 16)], 'the null row (row 4) becomes an empty value, pointing nowhere').toEqual(new Array(16).fill(0));
    expect(columnInconsistency(cut, { dictionaryIndices: false })).toBeNull();
  });
});

describe('cutToRows leaves malformed input whole, for the writer to refuse', () => {
  const whole = (slice: Data, cut: Data) => {
    expect([...(cut.valueOffsets ?? [])].map(Number)).toEqual([...(slice.valueOffsets ?? [])].map(Number));
    expect((cut.values as Uint8Array | undefined)?.byteLength).toBe((slice.values as Uint8Array | undefined)?.byteLength);
    expect(cut.children.map((c) => c.length)).toEqual(slice.children.map((c) => c.length));
  };

  test('binary offsets going backwards or past the data, list offsets past the child', () => {
    const cases = {
      'utf8 offsets going backwards': makeData({ type: new Utf8(), length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, 6, 2, 4), data: new Uint8Array(8) }),
      'utf8 offsets past the data': makeData({ type: new Utf8(), length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, 2, 4, 90), data: new Uint8Array(8) }),
      'utf8 offsets below 0': makeData({ type: new Utf8(), length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, -2, 4, 6), data: new Uint8Array(8) }),
      'list offsets past the child': makeData({ type: new List(new Field('item', new Int32(), true)), length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, 1, 2, 9), child: makeData({ type: new Int32(), length: 4, nullCount: 0, data: new Int32Array(4) }) }),
    };
    for (const [name, column] of Object.entries(cases)) {
      const slice = column.slice(1, 2);
      expect(() => whole(slice, cutToRows(slice)), name).not.toThrow();
    }
  });

  test('dense union offsets past their child, below 0, or fewer than the rows; a type id no child has', () => {
    const type = new DenseUnion([0], [new Field('n', new Int32(), true)]);
    const child = () => [makeData({ type: new Int32(), length: 2, nullCount: 0, data: new Int32Array(2) })];
    const cases = {
      'an offset one past the child': new Data(type, 0, 3, 0, [Int32Array.of(0, 1, 2), undefined, undefined, Int8Array.of(0, 0, 0)] as never, child()),
      'an offset below 0': new Data(type, 0, 3, 0, [Int32Array.of(0, -1, 1), undefined, undefined, Int8Array.of(0, 0, 0)] as never, child()),
      'fewer offsets than rows': new Data(type, 0, 3, 0, [Int32Array.of(0, 1), undefined, undefined, Int8Array.of(0, 0, 0)] as never, child()),
      'a type id no child has': new Data(type, 0, 3, 0, [Int32Array.of(0, 1, 1), undefined, undefined, Int8Array.of(0, 3, 0)] as never, child()),
    };
    for (const [name, column] of Object.entries(cases)) {
      const cut = cutToRows(column);
      expect([...(cut.valueOffsets as Int32Array)], name).toEqual([...(column.valueOffsets as Int32Array)]);
      expect(cut.children[0]!.length, name).toBe(2);
    }
  });

  test("a view column whose valid row's view points past its buffers: views and variadic buffers as they were", () => {
    const strings = Array.from({ length: 8 }, (_, i) => `a value longer than twelve bytes, number ${i}`);
    const built = vectorFromArray(strings, new Utf8View()).data[0]!;
    const views = (built.values as Uint8Array).slice();
    new DataView(views.buffer).setInt32(3 * 16 + 12, 1 << 20, true); // row 3 at 1 MiB into buffer 0
    const column = new Data(new Utf8View(), 0, 8, 0, [undefined, views, undefined] as never, [], undefined, built.variadicBuffers as Uint8Array[]);
    const cut = cutToRows(column.slice(2, 3));
    expect([...(cut.values as Uint8Array)]).toEqual([...views.subarray(2 * 16, 5 * 16)]);
    expect(cut.variadicBuffers).toEqual(built.variadicBuffers);
  });
});
