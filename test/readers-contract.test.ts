/**
 * The readers' contract at edges a second mutation sweep of them found no test
 * pinning (docs/RELIABILITY.md, "mutation sweeps"): ShuffleReader
 * (src/reader/shuffle-reader.ts), ReduceReader (src/shuffle/reduce-reader.ts),
 * the checks every embedder's source goes through (src/reader/checked-source.ts)
 * and the local file source (src/reader/byte-source.ts).
 */
import { execFileSync } from 'node:child_process';
import { constants } from 'node:fs';
import { open as openFile, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { makeTable, RecordBatch } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { ShuffleError } from '../src/errors.js';
import { outputPaths } from '../src/format/output-files.js';
import { LocalFileSource, type ByteRangeSource } from '../src/reader/byte-source.js';
import { ShuffleReader, type ShuffleOutputSources } from '../src/reader/shuffle-reader.js';
import { MapOutputTracker, MAX_MAPS, type MapOutputLocator } from '../src/shuffle/map-output-tracker.js';
import type { MapStatus } from '../src/shuffle/map-status.js';
import { ReduceReader } from '../src/shuffle/reduce-reader.js';
import { outputOf, PiecewiseSource, streamPieces, u64be } from './support/piecewise-output.js';
import { watchTimersOf } from './support/armed-timers.js';
import { deferred } from './support/deferred.js';
import { writePidOutput } from './support/pid-outputs.js';
import { runShuffle } from './support/shuffle-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';
import { failure } from './support/failure.js';

let dir = '';
beforeAll(async () => (dir = await makeTempDir('cs-readers-contract-')));
afterAll(async () => removeDir(dir));

// ---------------------------------------------------------------- map outputs of a chosen shape

let nextShuffle = 500;

/** One committed map output whose partition p holds rowsPerPartition[p] rows. */
const writeOutput = (shuffleId: number, mapId: number, rowsPerPartition: readonly number[], attempt = 0): Promise<MapStatus> => writePidOutput(dir, { shuffleId, mapId, attempt }, rowsPerPartition);

async function rowsRead(reader: AsyncIterable<RecordBatch>): Promise<number> {
  let rows = 0;
  for await (const batch of reader) rows += batch.numRows;
  return rows;
}

// ---------------------------------------------------------------- ReduceReader

describe('ReduceReader', () => {
  test(`a locator of ${MAX_MAPS} maps (the most a shuffle has) is accepted; one more is refused`, async () => {
    const locator = (numMaps: number): MapOutputLocator => ({ shuffleId: 1, numMaps, waitFor: () => new Promise(() => undefined) });
    expect(() => new ReduceReader({ maps: locator(MAX_MAPS), partitions: 0 })).not.toThrow();
    expect(() => new ReduceReader({ maps: locator(MAX_MAPS + 1), partitions: 0 })).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
  });

  test('an output whose status gives the range bytes but counts no rows there is opened, and its rows checked against that count', async () => {
    const status = await writeOutput(nextShuffle++, 0, [3, 2]);
    const noRows: MapStatus = { ...status, partitionRows: [0, 2] };
    const reader = new ReduceReader({ maps: [noRows], partitions: 0 });
    const error = await failure(rowsRead(reader));
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('hold 3 rows, the map status says 0') });
    expect(reader.metrics.outputsSkipped).toBe(0);
  });

  test('metrics.maxOpen is the most outputs open at once, not how many were open when the last one opened', async () => {
    const shuffle = nextShuffle++;
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(shuffle, 3);
    tracker.registerMapOutput(await writeOutput(shuffle, 0, [3]));
    tracker.registerMapOutput(await writeOutput(shuffle, 1, [3]));
    const reader = new ReduceReader({ maps: tracker.locator(shuffle), partitions: 0, concurrency: 2, waitTimeoutMs: Infinity });
    const reading = rowsRead(reader);
    await vi.waitFor(() => expect(reader.metrics.outputsRead).toBe(2), { timeout: 5000, interval: 5 });
    tracker.registerMapOutput(await writeOutput(shuffle, 2, [3]));
    expect(await reading).toBe(9);
    expect(reader.metrics.maxOpen).toBe(2);
  });

  test('once every map output has come, the timer of the wait is cleared, though reading goes on (it kept the process alive for waitTimeoutMs)', async () => {
    const shuffle = nextShuffle++;
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(shuffle, 2);
    tracker.registerMapOutput(await writeOutput(shuffle, 0, [3]));
    const armed = watchTimersOf(600_000);
    try {
      const reader = new ReduceReader({ maps: tracker.locator(shuffle), partitions: 0, waitTimeoutMs: 600_000 });
      await reader.next();
      expect(armed.size, 'the wait for map 1 is timed').toBe(1);
      tracker.registerMapOutput(await writeOutput(shuffle, 1, [3]));
      const next = await reader.next(); // map 1's status has come by now: this turn takes it
      expect(next.done).toBe(false);
      expect(armed.size, 'nothing left to wait for: no timer').toBe(0);
      await reader.return();
    } finally {
      vi.restoreAllMocks();
    }
  });

  test('with every status given up front, waitMs is 0: waiting for reads is not waiting for map outputs', async () => {
    const shuffle = nextShuffle++;
    const maps = [await writeOutput(shuffle, 0, [400, 1]), await writeOutput(shuffle, 1, [300, 1])];
    const reader = new ReduceReader({ maps, partitions: 0, concurrency: 1 });
    expect(await rowsRead(reader)).toBe(700);
    expect(reader.metrics.waitMs).toBe(0);
  });

  test("an output's error names the attempt read, not attempt 0", async () => {
    const status = await writeOutput(nextShuffle++, 0, [2], 3);
    const gone: MapStatus = { ...status, location: { ...status.location, prefix: join(dir, 'removed') } };
    const error = await failure(rowsRead(new ReduceReader({ maps: [gone], partitions: 0 })));
    expect(error).toMatchObject({ code: 'CS_FILE_NOT_FOUND', where: { shuffle: status.id.shuffleId, map: 0, attempt: 3 } });
  });

  test('an openOutput failing with an error of its own: the CS_IO error keeps it as its cause', async () => {
    const status = await writeOutput(nextShuffle++, 0, [2]);
    const down = new Error('network down');
    const openOutput = async (): Promise<ShuffleOutputSources> => {
      throw down;
    };
    const error = await failure(rowsRead(new ReduceReader({ maps: [status], partitions: 0, openOutput })));
    expect(error.code).toBe('CS_IO');
    expect(error.cause).toBe(down);
  });

  test('a status that counts fewer rows in the range than the output holds is CS_CORRUPT_DATA (rows it never promised came)', async () => {
    const status = await writeOutput(nextShuffle++, 0, [3, 2]);
    const fewer: MapStatus = { ...status, partitionRows: [2, 2] };
    const error = await failure(rowsRead(new ReduceReader({ maps: [fewer], partitions: 0 })));
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('hold 3 rows, the map status says 2') });
  });

  test('files with more partitions than the status says are CS_CORRUPT_DATA naming the index, though the first partitions agree', async () => {
    const status = await writeOutput(nextShuffle++, 0, [3, 2, 4]);
    const shorter: MapStatus = { ...status, numPartitions: 2, partitionLengths: status.partitionLengths.slice(0, 2), partitionRows: status.partitionRows.slice(0, 2) };
    const error = await failure(rowsRead(new ReduceReader({ maps: [shorter], partitions: 0 })));
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('the output has 3 partitions, its map status says 2'), where: { file: `${status.location.prefix}.index` } });
  });

  test("a partition length the index does not give is blamed on the output's index file", async () => {
    const status = await writeOutput(nextShuffle++, 0, [3, 2]);
    const forged: MapStatus = { ...status, partitionLengths: [status.partitionLengths[0]!, status.partitionLengths[1]! + 8] };
    const error = await failure(rowsRead(new ReduceReader({ maps: [forged], partitions: 0 })));
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: `${status.location.prefix}.index`, partition: 1 } });
  });

  test('metrics.batches counts the batches yielded', async () => {
    const shuffle = nextShuffle++;
    const maps = [await writeOutput(shuffle, 0, [3, 1]), await writeOutput(shuffle, 1, [2, 1])];
    const reader = new ReduceReader({ maps, partitions: 0 });
    let batches = 0;
    for await (const batch of reader) batches += batch.numRows > 0 ? 1 : 0;
    expect(batches).toBe(2);
    expect(reader.metrics.batches).toBe(2);
  });

  test('of two map outputs that fail while the reader waits, the first failure is the one thrown', async () => {
    const locator: MapOutputLocator = {
      shuffleId: 1,
      numMaps: 2,
      waitFor: (mapId) => Promise.reject(new ShuffleError('CS_MAP_OUTPUT_FAILED', `map ${mapId} failed`, { shuffle: 1, map: mapId })),
    };
    const error = await failure(rowsRead(new ReduceReader({ maps: locator, partitions: 0 })));
    expect(error).toMatchObject({ code: 'CS_MAP_OUTPUT_FAILED', message: expect.stringMatching(/^map 0 failed/), where: { map: 0 } });
  });

  test('an abort wins over a failure that comes in the same turn: the reader ends with CS_ABORTED', async () => {
    const shuffle = nextShuffle++;
    const m0 = await writeOutput(shuffle, 0, [2]);
    // map 1 is answered with map 0's status: a failure the reader notices once the answer comes
    const locator: MapOutputLocator = { shuffleId: shuffle, numMaps: 2, waitFor: async () => m0 };
    const controller = new AbortController();
    const reader = new ReduceReader({ maps: locator, partitions: 0, signal: controller.signal });
    const next = reader.next();
    controller.abort();
    expect((await failure(next)).code).toBe('CS_ABORTED');
  });

  test('readerOptions reach the readers of outputs openOutput opens, too', async () => {
    const status = await writeOutput(nextShuffle++, 0, [2]);
    const paths = outputPaths(status.location.prefix);
    const openOutput = async (): Promise<ShuffleOutputSources> => ({
      data: await LocalFileSource.open(paths.data),
      index: await LocalFileSource.open(paths.index),
      checksum: await LocalFileSource.open(paths.checksum),
    });
    const error = await failure(rowsRead(new ReduceReader({ maps: [status], partitions: 0, openOutput, readerOptions: { readRunBytes: -1 } })));
    expect(error).toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('readRunBytes') });
  });

  test('return() and then an abort of the signal: a read on its way still finishes before its output closes', async () => {
    const status = await writeOutput(nextShuffle++, 0, [3]);
    const paths = outputPaths(status.location.prefix);
    const gate = deferred();
    const reading = deferred();
    let closes = 0;
    let stall = false;
    const wrap = (source: LocalFileSource, isData: boolean): ByteRangeSource => ({
      name: source.name,
      size: () => source.size(),
      read: async (offset, length) => {
        if (isData && stall) {
          reading.resolve();
          await gate.promise;
        }
        return source.read(offset, length);
      },
      close: async () => {
        closes++;
        await source.close();
      },
    });
    const openOutput = async (): Promise<ShuffleOutputSources> => ({
      data: wrap(await LocalFileSource.open(paths.data), true),
      index: wrap(await LocalFileSource.open(paths.index), false),
      checksum: wrap(await LocalFileSource.open(paths.checksum), false),
    });
    const controller = new AbortController();
    stall = true;
    const reader = new ReduceReader({ maps: [status], partitions: 0, openOutput, signal: controller.signal });
    const next = reader.next();
    await reading.promise; // the partition's read is on its way
    const returned = reader.return();
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(closes, 'nothing closed under the read').toBe(0);
    gate.resolve();
    await next.catch(() => undefined);
    await returned;
    expect(closes).toBe(3);
  });
});

// ---------------------------------------------------------------- the checks every source goes through (CheckedSource)

type Kind = 'data' | 'index' | 'checksum';
type Change = (file: LocalFileSource) => Partial<ByteRangeSource>;

/** A 3-row output of two partitions on disk, and sources over its files, each changed by `change[kind]`; they count their close() calls. */
async function localSources(change: Partial<Record<Kind, Change>> = {}) {
  const status = await writeOutput(nextShuffle++, 0, [3, 0]);
  const paths = outputPaths(status.location.prefix);
  const closes = { data: 0, index: 0, checksum: 0 };
  const opened = async (kind: Kind): Promise<ByteRangeSource> => {
    const file = await LocalFileSource.open(paths[kind]);
    return {
      name: file.name,
      size: () => file.size(),
      read: (offset, length) => file.read(offset, length),
      readInto: (offset, target) => file.readInto(offset, target),
      close: async () => {
        closes[kind]++;
        await file.close();
      },
      ...change[kind]?.(file),
    };
  };
  const sources = { data: await opened('data'), index: await opened('index'), checksum: await opened('checksum') };
  return { sources, closes, paths };
}

describe('CheckedSource', () => {
  test('a readInto that throws a plain Error is CS_IO naming the source and the offset, with the error as its cause', async () => {
    const reset = new Error('connection reset');
    const { sources } = await localSources({ data: () => ({ readInto: async () => Promise.reject(reset) }) });
    const reader = await ShuffleReader.fromSources(sources);
    try {
      const error = await failure(rowsRead(reader.readPartition(0)));
      expect(error).toMatchObject({ code: 'CS_IO', message: expect.stringMatching(/cannot read \d+ bytes at 0: connection reset/), where: { file: sources.data.name, offset: 0 } });
      expect(error.cause).toBe(reset);
    } finally {
      await reader.close();
    }
  });

  test("a ShuffleError a source throws comes through as it is: its code and its location are the source's word", async () => {
    const own = new ShuffleError('CS_FILE_NOT_FOUND', 'the object store has no such key', { file: 's3://bucket/out.data' });
    const { sources } = await localSources({ data: () => ({ read: async () => Promise.reject(own), readInto: undefined }) });
    const reader = await ShuffleReader.fromSources(sources);
    try {
      expect(await failure(rowsRead(reader.readPartition(0)))).toBe(own);
    } finally {
      await reader.close();
    }
  });

  test('a size of -1 is CS_IO: not a byte count', async () => {
    const { sources } = await localSources({ data: () => ({ size: async () => -1 }) });
    await expect(ShuffleReader.fromSources(sources)).rejects.toMatchObject({ code: 'CS_IO', message: expect.stringContaining('reported a size of -1, not a byte count'), where: { file: sources.data.name } });
  });

  test.each<[string, Change, RegExp]>([
    ['more bytes than asked for', (file) => ({
        read: async (offset, length) => {
          const longer = new Uint8Array(length + 1);
          longer.set(await file.read(offset, length));
          return longer;
        },
        readInto: undefined,
      }), /returned \d+ bytes for a read of \d+ bytes/],
    ['an ArrayBuffer of the length asked for', (file) => ({ read: async (offset, length) => (await file.read(offset, length)).buffer as never, readInto: undefined }), /returned object for a read of \d+ bytes/],
  ])('a read that returns %s is CS_IO naming the source and the offset', async (_, change, message) => {
    const { sources } = await localSources({ data: change });
    const reader = await ShuffleReader.fromSources(sources);
    try {
      const error = await failure(rowsRead(reader.readPartition(0)));
      expect(error).toMatchObject({ code: 'CS_IO', message: expect.stringMatching(message), where: { file: sources.data.name, offset: 0 } });
    } finally {
      await reader.close();
    }
  });

  test('a source named by something other than a string (a URL) is named by its text in errors', async () => {
    const url = new URL('https://example.test/out.data');
    const { sources } = await localSources({ data: () => ({ name: url as unknown as string, read: async () => Promise.reject(new Error('gone')), readInto: undefined }) });
    const reader = await ShuffleReader.fromSources(sources);
    try {
      const error = await failure(rowsRead(reader.readPartition(0)));
      expect(error.where.file).toBe('https://example.test/out.data');
    } finally {
      await reader.close();
    }
  });
});

// ---------------------------------------------------------------- LocalFileSource

describe('LocalFileSource', () => {
  test.runIf(process.platform === 'linux')('an index file that is a FIFO with no writer is CS_IO at once: the open does not wait for a writer', async () => {
    const status = await writeOutput(nextShuffle++, 0, [2]);
    const paths = outputPaths(status.location.prefix);
    await rm(paths.index);
    execFileSync('mkfifo', [paths.index]);
    const opening = ShuffleReader.open(status.location.prefix).then(
      async (reader) => {
        await reader.close();
        return 'opened';
      },
      (error: unknown) => error,
    );
    try {
      const outcome = await Promise.race([opening, new Promise((wait) => setTimeout(() => wait('still blocked'), 1000))]);
      expect(outcome).toMatchObject({ code: 'CS_IO', message: expect.stringContaining('not a regular file'), where: { file: paths.index } });
    } finally {
      // a writer (opened non-blocking) releases an open() blocked on the FIFO, so that no thread is left blocked
      const writer = await openFile(paths.index, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => null);
      await opening;
      await writer?.close();
    }
  });

  test('a stat or a read that fails (the source was closed) is CS_IO naming the file', async () => {
    const path = join(dir, 'closed-source');
    await writeFile(path, new Uint8Array(16));
    const source = await LocalFileSource.open(path);
    await source.close();
    await expect(source.size()).rejects.toMatchObject({ code: 'CS_IO', where: { file: path } });
    await expect(source.read(0, 8)).rejects.toMatchObject({ code: 'CS_IO', where: { file: path } });
  });
});

// ---------------------------------------------------------------- ShuffleReader

/** A valid partition: the stream arrow-js writes for `rows` rows, v = 0..rows-1. */
function streamOf(rows: number): Uint8Array {
  return streamPieces(makeTable({ v: Int32Array.from({ length: rows }, (_, i) => i) })).whole;
}

async function valuesOf(batches: AsyncIterable<RecordBatch>): Promise<number[]> {
  const out: number[] = [];
  for await (const batch of batches) for (const v of batch.getChild('v')!.toArray() as Int32Array) out.push(v);
  return out;
}

describe('ShuffleReader', () => {
  test('an index of 20 bytes (not a whole number of entries) is CS_CORRUPT_DATA naming the index file', async () => {
    const part = streamOf(3);
    const output = outputOf([[part], [part]]);
    const index = new PiecewiseSource('mem.index', [u64be([0, part.byteLength]), new Uint8Array(4)]);
    const error = await failure(ShuffleReader.fromSources({ ...output, index }));
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: 'mem.index' } });
  });

  test.each([true, false])('an empty partition is read without asking the source for any bytes (readInto: %s)', async (withReadInto) => {
    const output = outputOf([[streamOf(3)], [], [streamOf(2)]], withReadInto);
    const reader = await ShuffleReader.fromSources(output, { readRunBytes: 0 });
    try {
      const asked = () => output.data.all.length;
      expect(await valuesOf(reader.readPartition(1))).toEqual([]);
      expect(await reader.partitionBytes(1)).toHaveLength(0);
      expect(await reader.readPartitionRange(1, 0, 0)).toHaveLength(0);
      expect(await reader.readPartitionRange(0, 5, 0)).toHaveLength(0);
      expect(asked()).toBe(0);
    } finally {
      await reader.close();
    }
  });

  test('a fractional partition number is CS_INVALID_ARGUMENT wherever a partition is named', async () => {
    const output = outputOf([[streamOf(3)], [streamOf(2)]]);
    const reader = await ShuffleReader.fromSources(output);
    try {
      expect(() => reader.partitionLength(0.5)).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
      await expect(reader.partitionBytes(0.5)).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
      await expect(reader.verifyPartition(0.5)).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
      await expect(reader.readPartitionRange(0.5, 0, 1)).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
      expect(output.data.all).toEqual([]);
    } finally {
      await reader.close();
    }
  });

  test('readPartitionRange reads [offset, offset + length) of the partition, up to its last byte and no further', async () => {
    const a = streamOf(3);
    const b = streamOf(5);
    const output = outputOf([[a], [b]]);
    const reader = await ShuffleReader.fromSources(output);
    try {
      expect([...(await reader.readPartitionRange(1, 8, b.byteLength - 8))]).toEqual([...b.subarray(8)]);
      expect(output.data.reads.at(-1)).toEqual([a.byteLength + 8, b.byteLength - 8]);
      for (const [offset, length] of [
        [1, b.byteLength],
        [b.byteLength, 1],
        [-1, 1],
        [0.5, 1],
        [0, 1.5],
      ] as const) {
        await expect(reader.readPartitionRange(1, offset, length), `[${offset}, +${length})`).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
      }
    } finally {
      await reader.close();
    }
  });

  test('verifyPartition and partitionBytes check every byte of the partition: a damaged last byte is CS_CHECKSUM_MISMATCH naming it', async () => {
    const a = streamOf(3);
    const b = streamOf(5).slice();
    const good = outputOf([[a], [b]]);
    const damaged = b.slice();
    damaged[damaged.byteLength - 1]! ^= 1;
    const reader = await ShuffleReader.fromSources({ ...good, data: outputOf([[a], [damaged]]).data });
    try {
      await reader.verifyPartition(0);
      await expect(reader.verifyPartition(1)).rejects.toMatchObject({ code: 'CS_CHECKSUM_MISMATCH', where: { partition: 1, offset: a.byteLength } });
      expect([...(await reader.partitionBytes(0))]).toEqual([...a]);
      await expect(reader.partitionBytes(1), 'partitionBytes verifies what it returns').rejects.toMatchObject({ code: 'CS_CHECKSUM_MISMATCH', where: { partition: 1 } });
    } finally {
      await reader.close();
    }
  });

  test('a read buffer kept for reuse keeps its whole length: a run longer than the last one, within the first, reuses it', async () => {
    const big = streamOf(400);
    const small = streamOf(2);
    const medium = streamOf(100);
    const output = outputOf([[big], [small], [medium]]);
    const targets: ArrayBufferLike[] = [];
    const readInto = output.data.readInto!;
    output.data.readInto = async (offset, target) => {
      targets.push(target.buffer);
      return readInto(offset, target);
    };
    const reader = await ShuffleReader.fromSources(output, { readRunBytes: 0 });
    try {
      for (let p = 0; p < 3; p++) await valuesOf(reader.readPartition(p));
      expect(targets).toHaveLength(3);
      expect(new Set(targets).size, 'one buffer for all three').toBe(1);
    } finally {
      await reader.close();
    }
  });

  test('partitions of one run that disagree about the schema: the error names the partition that differs', async () => {
    const a = streamOf(3);
    const b = streamPieces(makeTable({ w: Int32Array.of(1, 2) })).whole;
    const output = outputOf([[a], [b]]);
    const reader = await ShuffleReader.fromSources(output);
    try {
      const error = await failure(valuesOf(reader.readPartitions(0, 2)));
      expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: a.byteLength } });
    } finally {
      await reader.close();
    }
  });

  test("schema() names the sort-writer partition whose row header is damaged, not the output's first", async () => {
    const outcome = await runShuffle(dir, { numPartitions: 1, partitioning: { kind: 'round-robin' } }, [makeTable({ v: Int32Array.of(1, 2, 3) }).batches[0]!], 'rows-header', 'sort');
    const rows = new Uint8Array(await readFile(outputPaths(outcome.prefix).data));
    const damaged = rows.slice(0, 12); // the magic, then a header cut short
    const reader = await ShuffleReader.fromSources(outputOf([[], [damaged]]));
    try {
      const error = await failure(reader.schema());
      expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: 'mem.data', partition: 1 } });
    } finally {
      await reader.close();
    }
  });

  test('schema() names the partition whose header is damaged, not the first of the output', async () => {
    const damaged = streamOf(3).slice(0, 12); // the schema message cut short
    const output = outputOf([[], [damaged]]);
    const reader = await ShuffleReader.fromSources(output);
    try {
      const error = await failure(reader.schema());
      expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: 'mem.data', partition: 1 } });
    } finally {
      await reader.close();
    }
  });
});
