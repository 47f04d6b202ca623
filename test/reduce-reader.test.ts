/**
 * ReduceReader: a partition (or range) read across every map output of a
 * shuffle as one stream. Claims: every row comes, each map output's rows in
 * their order; at most `concurrency` outputs are open; a slow output does not
 * hold back the others; coalescing merges across outputs; stopping early closes
 * every file; only the attempts named are read, and files that are not what
 * their status says are refused; a reducer started before the map tasks finish
 * reads the finished outputs, then waits for the rest or fails with a typed
 * timeout, never hangs.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Dictionary, Field, Int32, makeData, RecordBatch, Schema, Struct, Utf8, Vector, vectorFromArray } from 'apache-arrow';
import { LocalFileSource, type ByteRangeSource } from '../src/reader/byte-source.js';
import { ShuffleReader, type ShuffleOutputSources } from '../src/reader/shuffle-reader.js';
import { MapOutputTracker } from '../src/shuffle/map-output-tracker.js';
import { MapOutputWriter } from '../src/shuffle/map-output-writer.js';
import type { MapStatus } from '../src/shuffle/map-status.js';
import { ReduceReader, type ReduceReaderOptions } from '../src/shuffle/reduce-reader.js';
import { outputPaths } from '../src/format/output-files.js';
import { batchOf, schemaOf, sequenceColumn } from './support/columns.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const SCHEMA = schemaOf([
  { name: 'map', type: new Int32(), nullable: false },
  { name: 'seq', type: new Int32(), nullable: false },
]);
const PARTITIONS = 4;
const MAPS = 5;
const ROWS_PER_MAP = 3000;

let dir: string;
let statuses: MapStatus[];

/** Rows `map = tag`, `seq = 0..rows-1`, hashed on seq, in batches of `batchRows`. */
function mapBatches(tag: number, rows: number, batchRows: number): RecordBatch[] {
  const out: RecordBatch[] = [];
  for (let start = 0; start < rows; start += batchRows) {
    const n = Math.min(batchRows, rows - start);
    const tags = makeData({ type: new Int32(), data: new Int32Array(n).fill(tag), length: n, nullCount: 0 });
    out.push(batchOf(SCHEMA, [tags, sequenceColumn(start, n)], n));
  }
  return out;
}

async function writeMap(mapId: number, attempt: number, options: { tag?: number; rows?: number; maxBatchRows?: number; shuffleId?: number } = {}): Promise<MapStatus> {
  const writer = await MapOutputWriter.create({
    dir,
    id: { shuffleId: options.shuffleId ?? 0, mapId, attempt },
    numPartitions: PARTITIONS,
    partitioning: { kind: 'hash', keys: ['seq'] },
    schema: SCHEMA,
    maxBatchRows: options.maxBatchRows ?? 256,
  });
  for (const batch of mapBatches(options.tag ?? mapId, options.rows ?? ROWS_PER_MAP, 500)) await writer.write(batch);
  return writer.finish();
}

/** (map, seq) of every row, in the order read. */
function pairsOf(batches: readonly RecordBatch[]): [number, number][] {
  const out: [number, number][] = [];
  for (const b of batches) {
    const maps = b.getChild('map')!;
    const seqs = b.getChild('seq')!;
    for (let i = 0; i < b.numRows; i++) out.push([maps.get(i) as number, seqs.get(i) as number]);
  }
  return out;
}

async function readAll(options: ReduceReaderOptions): Promise<{ batches: RecordBatch[]; reader: ReduceReader }> {
  const reader = new ReduceReader(options);
  const batches: RecordBatch[] = [];
  for await (const batch of reader) batches.push(batch);
  return { batches, reader };
}

/** What one output holds in partitions [start, end), read with a plain ShuffleReader. */
async function expectedPairs(status: MapStatus, start: number, end: number): Promise<[number, number][]> {
  const reader = await ShuffleReader.open(status.location.prefix);
  const batches: RecordBatch[] = [];
  for await (const batch of reader.readPartitions(start, end)) batches.push(batch);
  await reader.close();
  return pairsOf(batches);
}

/** Sources that count opens and closes, and may delay every read of chosen maps. */
function countingOpener(delayMs: (mapId: number) => number = () => 0) {
  const state = { opened: 0, closed: 0, open: 0, maxOpen: 0, openedMaps: [] as number[] };
  const wrap = (source: ByteRangeSource, mapId: number, counted: boolean): ByteRangeSource => ({
    name: source.name,
    size: () => source.size(),
    read: async (offset, length) => {
      const ms = delayMs(mapId);
      if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
      return source.read(offset, length);
    },
    close: async () => {
      if (counted) {
        state.closed++;
        state.open--;
      }
      await source.close();
    },
  });
  const openOutput = async (status: MapStatus): Promise<ShuffleOutputSources> => {
    const paths = outputPaths(status.location.prefix);
    state.opened++;
    state.open++;
    state.maxOpen = Math.max(state.maxOpen, state.open);
    state.openedMaps.push(status.id.mapId);
    const m = status.id.mapId;
    return {
      data: wrap(await LocalFileSource.open(paths.data), m, true),
      index: wrap(await LocalFileSource.open(paths.index), m, false),
      checksum: wrap(await LocalFileSource.open(paths.checksum), m, false),
    };
  };
  return { state, openOutput };
}

beforeAll(async () => {
  dir = await makeTempDir('cs-reduce-');
  statuses = [];
  for (let m = 0; m < MAPS; m++) statuses.push(await writeMap(m, 0));
});
afterAll(async () => {
  await removeDir(dir);
});

describe('reading a partition across map outputs', () => {
  test('every row of the partition comes, from every map output, each output in its written order', async () => {
    for (let p = 0; p < PARTITIONS; p++) {
      const { batches, reader } = await readAll({ maps: statuses, partitions: p, concurrency: 3 });
      const got = pairsOf(batches);
      for (const status of statuses) {
        const fromMap = got.filter(([m]) => m === status.id.mapId);
        expect(fromMap, `map ${status.id.mapId}, partition ${p}`).toEqual(await expectedPairs(status, p, p + 1));
      }
      expect(got.length).toBe(statuses.reduce((sum, s) => sum + s.partitionRows[p]!, 0));
      expect(reader.metrics.outputsRead).toBe(MAPS);
      expect(reader.metrics.rows).toBe(got.length);
    }
  });

  test('a range of partitions reads each output partition by partition', async () => {
    const { batches, reader } = await readAll({ maps: statuses, partitions: { start: 1, end: 3 } });
    const got = pairsOf(batches);
    for (const status of statuses) expect(got.filter(([m]) => m === status.id.mapId)).toEqual(await expectedPairs(status, 1, 3));
    expect(reader.metrics.bytesRead).toBe(statuses.reduce((sum, s) => sum + s.partitionLengths[1]! + s.partitionLengths[2]!, 0));
  });

  test('at most `concurrency` outputs are open at once, and that many are', async () => {
    for (const concurrency of [1, 2, 3]) {
      const { state, openOutput } = countingOpener(() => 2);
      const { reader } = await readAll({ maps: statuses, partitions: 0, concurrency, openOutput });
      expect(state.maxOpen, `concurrency ${concurrency}`).toBe(concurrency);
      expect(reader.metrics.maxOpen).toBe(concurrency);
      expect(state.opened).toBe(MAPS);
      expect(state.closed).toBe(MAPS);
    }
  });

  test('with concurrency 1 the outputs come one after another, whole', async () => {
    const { batches } = await readAll({ maps: statuses, partitions: 2, concurrency: 1 });
    const order = pairsOf(batches).map(([m]) => m);
    const runs = order.filter((m, i) => i === 0 || order[i - 1] !== m);
    expect(runs).toEqual([0, 1, 2, 3, 4]);
  });

  test('batches are yielded as they are ready: a slow output does not hold back the others', async () => {
    const { openOutput } = countingOpener((m) => (m === 0 ? 150 : 0));
    const { batches } = await readAll({ maps: statuses, partitions: 0, concurrency: MAPS, openOutput });
    const order = pairsOf(batches).map(([m]) => m);
    const firstOfSlow = order.indexOf(0);
    expect(firstOfSlow, 'rows of the fast outputs come before the slow one').toBeGreaterThan(0);
    expect(new Set(order.slice(0, firstOfSlow)).size, 'several fast outputs were read meanwhile').toBeGreaterThan(1);
  });

  test('coalescing merges small batches across outputs into batches of the target size', async () => {
    const { batches } = await readAll({ maps: statuses, partitions: 1, coalesceRows: 1000 });
    const total = statuses.reduce((sum, s) => sum + s.partitionRows[1]!, 0);
    // stored batches hold at most 256 rows (maxBatchRows): a merged batch is flushed before it would pass 1000
    for (const b of batches.slice(0, -1)) expect(b.numRows).toBeGreaterThan(1000 - 256);
    for (const b of batches) expect(b.numRows).toBeLessThanOrEqual(1000);
    expect(batches.reduce((sum, b) => sum + b.numRows, 0)).toBe(total);
    const got = pairsOf(batches);
    for (const status of statuses) expect(got.filter(([m]) => m === status.id.mapId)).toEqual(await expectedPairs(status, 1, 2));
    const stored = statuses.reduce((sum, s) => sum + s.metrics.batches, 0);
    expect(batches.length, 'fewer batches than stored').toBeLessThan(stored);
  });

  test('coalescing outputs whose schemas give their dictionaries other ids: every value right (one id shared by two columns took one column\'s dictionary for both)', async () => {
    const shuffleDir = await makeTempDir('cs-reduce-dict-');
    try {
      const batchWith = (ids: [number, number], x: string[], y: string[], base: number) => {
        const tx = new Dictionary(new Utf8(), new Int32(), ids[0]);
        const ty = ids[1] === ids[0] ? tx : new Dictionary(new Utf8(), new Int32(), ids[1]);
        const schema = new Schema([new Field('k', new Int32(), false), new Field('x', tx, true), new Field('y', ty, true)]);
        const vx = new Vector([vectorFromArray(x, new Utf8()).data[0]!]);
        const vy = y === x ? vx : new Vector([vectorFromArray(y, new Utf8()).data[0]!]);
        const column = (type: Dictionary, dictionary: Vector, shift: number) => makeData({ type, length: 10, nullCount: 0, data: Int32Array.from({ length: 10 }, (_, i) => (i + shift) % 3), dictionary });
        const k = makeData({ type: new Int32(), length: 10, nullCount: 0, data: Int32Array.from({ length: 10 }, (_, i) => base + i) });
        return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 10, nullCount: 0, children: [k, column(tx, vx, 0), column(ty, vy, 1)] }));
      };
      const shared = ['a', 'b', 'c'];
      const maps: MapStatus[] = [];
      for (const [m, batch] of [batchWith([7, 7], shared, shared, 0), batchWith([7, 8], ['X0', 'X1', 'X2'], ['Y0', 'Y1', 'Y2'], 100)].entries()) {
        const writer = await MapOutputWriter.create({ dir: shuffleDir, id: { shuffleId: 0, mapId: m, attempt: 0 }, numPartitions: 1, partitioning: { kind: 'single' } });
        await writer.write(batch);
        maps.push(await writer.finish());
      }
      const rows = async (options: Partial<ReduceReaderOptions>) => {
        const out: string[] = [];
        for await (const b of new ReduceReader({ maps, partitions: 0, concurrency: 1, ...options })) for (const r of b) out.push(`${r!.k}:${r!.x}/${r!.y}`);
        return out;
      };
      const plain = await rows({});
      expect(plain).toContain('100:X0/Y1');
      expect(await rows({ coalesceRows: 1000 })).toEqual(plain);
    } finally {
      await removeDir(shuffleDir);
    }
  });

  test('outputs with nothing in the range are not opened', async () => {
    const empty = await writeMap(0, 0, { shuffleId: 7, rows: 1 }); // one row: one partition has it
    const p = empty.partitionRows.findIndex((r) => r === 0);
    const { state, openOutput } = countingOpener();
    const { batches, reader } = await readAll({ maps: [empty], partitions: p, openOutput });
    expect(batches).toEqual([]);
    expect(state.opened).toBe(0);
    expect(reader.metrics.outputsSkipped).toBe(1);
  });
});

describe('stopping early', () => {
  test('break after the first batch closes every output opened, and no file descriptor is left', async () => {
    const fds = async () => (await readdir('/proc/self/fd')).length;
    const before = await fds();
    const { state, openOutput } = countingOpener();
    let seen = 0;
    for await (const batch of new ReduceReader({ maps: statuses, partitions: 0, concurrency: 3, openOutput })) {
      seen += batch.numRows;
      break; // a LIMIT that has its rows
    }
    expect(seen).toBeGreaterThan(0);
    expect(state.opened).toBeGreaterThan(1);
    expect(state.opened, 'outputs not reached are never opened').toBeLessThan(MAPS);
    expect(state.closed, 'every output opened is closed').toBe(state.opened);
    expect(await fds()).toBe(before);
  });

  test('the same through the default local files: descriptors go back to where they were', async () => {
    const fds = async () => (await readdir('/proc/self/fd')).length;
    const before = await fds();
    const reader = new ReduceReader({ maps: statuses, partitions: 3, concurrency: 4 });
    await reader.next();
    expect(await fds(), 'outputs are open while reading').toBeGreaterThan(before);
    await reader.return();
    expect(await fds()).toBe(before);
    expect(await reader.next()).toEqual({ done: true, value: undefined });
  });

  test('an abort signal stops the reader with CS_ABORTED and closes its files', async () => {
    const { state, openOutput } = countingOpener(() => 5);
    const controller = new AbortController();
    const reader = new ReduceReader({ maps: statuses, partitions: 0, openOutput, signal: controller.signal });
    await reader.next();
    controller.abort();
    await expect(reader.next()).rejects.toMatchObject({ code: 'CS_ABORTED' });
    expect(state.closed).toBe(state.opened);
  });
});

describe('attempts', () => {
  test('only the attempt named is read, though another attempt of the map committed too', async () => {
    const a0 = await writeMap(0, 0, { shuffleId: 1, tag: 100 });
    const a1 = await writeMap(0, 1, { shuffleId: 1, tag: 101 });
    const other = await writeMap(1, 0, { shuffleId: 1, tag: 200 });
    for (const [named, tag] of [
      [a1, 101],
      [a0, 100],
    ] as const) {
      const { batches, reader } = await readAll({ maps: [named, other], partitions: 0 });
      const tags = new Set(pairsOf(batches).map(([m]) => m));
      expect([...tags].sort()).toEqual([tag, 200]);
      expect(reader.metrics.attemptsRead.map((id) => id.attempt).sort()).toEqual([0, named.id.attempt].sort());
    }
  });

  test('two attempts of one map in the statuses are refused: the runner must name one', async () => {
    const a0 = await writeMap(0, 0, { shuffleId: 2 });
    const a1 = await writeMap(0, 1, { shuffleId: 2 });
    expect(() => new ReduceReader({ maps: [a0, a1], partitions: 0 })).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
  });

  test('files that are not the output the status describes are refused with CS_CORRUPT_DATA', async () => {
    const a0 = await writeMap(0, 0, { shuffleId: 3, tag: 1 });
    const a1 = await writeMap(0, 1, { shuffleId: 3, tag: 2, rows: 2000 });
    const forged: MapStatus = { ...a0, location: a1.location };
    await expect(readAll({ maps: [forged], partitions: 0 })).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA' });
  });

  test('an output whose files were removed is CS_FILE_NOT_FOUND, naming the map output as well as the file', async () => {
    const gone: MapStatus = { ...statuses[0]!, location: { host: 'x', prefix: join(dir, 'shuffle_0_0_9') } };
    await expect(readAll({ maps: [gone], partitions: 0 })).rejects.toMatchObject({ code: 'CS_FILE_NOT_FOUND', where: { shuffle: 0, map: 0, attempt: 0 } });
  });

  test('an openOutput that fails with an error of its own is CS_IO naming the map output (it came through untyped)', async () => {
    const openOutput = async (): Promise<ShuffleOutputSources> => {
      throw new Error('network down');
    };
    await expect(readAll({ maps: [statuses[1]!], partitions: 0, openOutput })).rejects.toMatchObject({ code: 'CS_IO', message: expect.stringContaining('network down'), where: { map: 1 } });
  });
});

describe('a reducer that starts before every map task has finished', () => {
  test('reads the finished outputs, never the unfinished one, and fails with CS_MAP_OUTPUT_TIMEOUT', async () => {
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(4, 2);
    const finished = await writeMap(0, 0, { shuffleId: 4 });
    tracker.registerMapOutput(finished);
    // map 1 is still writing: its temporary data file exists
    const unfinished = await MapOutputWriter.create({ dir, id: { shuffleId: 4, mapId: 1, attempt: 0 }, numPartitions: PARTITIONS, partitioning: { kind: 'hash', keys: ['seq'] } });
    await unfinished.write(mapBatches(1, 500, 500)[0]!);
    const { state, openOutput } = countingOpener();
    const reader = new ReduceReader({ maps: tracker.locator(4), partitions: 0, waitTimeoutMs: 300, openOutput });
    const batches: RecordBatch[] = [];
    const started = performance.now();
    let error: unknown;
    try {
      for await (const batch of reader) batches.push(batch);
    } catch (e) {
      error = e;
    }
    const elapsed = performance.now() - started;
    expect(error).toMatchObject({ code: 'CS_MAP_OUTPUT_TIMEOUT', where: { shuffle: 4, map: 1 } });
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(5000);
    expect(pairsOf(batches)).toEqual(await expectedPairs(finished, 0, 1));
    expect(state.openedMaps, 'only the committed output was opened').toEqual([0]);
    expect(tracker.waiting, 'the reader left no waiter behind').toBe(0);
    await unfinished.abort();
  });

  test('waits for outputs that commit later and then reads them', async () => {
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(5, 3);
    const reader = new ReduceReader({ maps: tracker.locator(5), partitions: 2, waitTimeoutMs: 10_000, coalesceRows: 500 });
    const collected = (async () => {
      const batches: RecordBatch[] = [];
      for await (const batch of reader) batches.push(batch);
      return batches;
    })();
    const written: MapStatus[] = [];
    for (const m of [2, 0, 1]) {
      await new Promise((resolve) => setTimeout(resolve, 30));
      const status = await writeMap(m, 0, { shuffleId: 5 });
      written.push(status);
      tracker.registerMapOutput(status);
    }
    const got = pairsOf(await collected);
    for (const status of written) expect(got.filter(([m]) => m === status.id.mapId)).toEqual(await expectedPairs(status, 2, 3));
    expect(reader.metrics.outputsRead).toBe(3);
    expect(reader.metrics.waitMs).toBeGreaterThan(0);
  });

  test('waitTimeoutMs Infinity waits as long as it takes (no timer)', async () => {
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(9, 1);
    const reader = new ReduceReader({ maps: tracker.locator(9), partitions: 1, waitTimeoutMs: Infinity });
    const collected = (async () => {
      const batches: RecordBatch[] = [];
      for await (const batch of reader) batches.push(batch);
      return batches;
    })();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const status = await writeMap(0, 0, { shuffleId: 9 });
    tracker.registerMapOutput(status);
    expect(pairsOf(await collected)).toEqual(await expectedPairs(status, 1, 2));
  });

  test('a shuffle failed while a reader waits fails it with CS_MAP_OUTPUT_FAILED at once', async () => {
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(6, 2);
    const reader = new ReduceReader({ maps: tracker.locator(6), partitions: 0, waitTimeoutMs: 60_000 });
    const pending = reader.next();
    setTimeout(() => tracker.failShuffle(6, new Error('map 1 failed 4 times')), 20);
    const started = performance.now();
    await expect(pending).rejects.toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED' });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(tracker.waiting).toBe(0);
  });

  test('return() while a next() waits for a map output ends both at once (it waited for the output or the timeout, 120 s by default)', async () => {
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(21, 2);
    const committed = await writeMap(0, 0, { shuffleId: 21 });
    tracker.registerMapOutput(committed);
    const reader = new ReduceReader({ maps: tracker.locator(21), partitions: 0, waitTimeoutMs: Infinity });
    for (let rows = 0; rows < committed.partitionRows[0]!; ) rows += ((await reader.next()).value as RecordBatch).numRows;
    const waiting = reader.next(); // the committed map is done: this one waits for the other
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(tracker.waiting).toBe(1);
    const closed = await Promise.race([reader.return().then(() => 'closed'), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2000))]);
    expect(closed).toBe('closed');
    expect(await waiting).toEqual({ done: true, value: undefined });
    expect(tracker.waiting).toBe(0);
  });

  test('closing a waiting reader drops its waits', async () => {
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(8, 3);
    tracker.registerMapOutput(await writeMap(0, 0, { shuffleId: 8 }));
    const reader = new ReduceReader({ maps: tracker.locator(8), partitions: 0 });
    await reader.next();
    expect(tracker.waiting).toBe(2);
    await reader.return();
    expect(tracker.waiting).toBe(0);
  });
});

test('options out of their domain are refused with CS_INVALID_ARGUMENT', () => {
  for (const options of [
    { partitions: -1 },
    { partitions: { start: 2, end: 2 } },
    { partitions: PARTITIONS },
    { partitions: 0, concurrency: 0 },
    { partitions: 0, coalesceRows: 0.5 },
    { partitions: 0, waitTimeoutMs: -1 },
    { partitions: 0, waitTimeoutMs: 2 ** 31 }, // setTimeout would fire at once: it timed out in 1 ms
    { partitions: 0, waitTimeoutMs: 3e9 },
    { partitions: 0, maps: null },
    { partitions: 0, maps: 'statuses' },
    { partitions: 0, maps: { shuffleId: 0, numMaps: NaN, waitFor: async () => statuses[0] } }, // read nothing
    { partitions: 0, maps: { shuffleId: 0, numMaps: 2.5, waitFor: async () => statuses[0] } }, // read three maps
    { partitions: 0, maps: { shuffleId: 0, numMaps: Infinity, waitFor: async () => statuses[0] } },
  ]) {
    expect(() => new ReduceReader({ maps: statuses, ...options } as ReduceReaderOptions), JSON.stringify(options)).toThrow(
      expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }),
    );
  }
});
