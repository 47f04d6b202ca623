/**
 * Boundaries of the reduce side and of the CLI's Arrow input reader that a
 * mutation sweep found no test pinning (docs/RELIABILITY.md, "mutation sweeps").
 *
 * ReduceReader (src/shuffle/reduce-reader.ts): the defaults and the bounds of
 * its options, an already-aborted signal, a range whose first partition is
 * empty in some output, a locator's last map committing last, statuses that
 * disagree with one another or with their files, and cleanup that leaves no
 * open source, listener or timer behind, also when the reader stops while an
 * output is still being opened.
 *
 * openArrowInput (src/cli/input.ts): files at the edges of each format (the
 * magic alone, a lone continuation marker, a last message ending at the end of
 * the file), the progress position, a stream that is not one, and error
 * locations.
 */
import { getEventListeners } from 'node:events';
import { readdir, readFile, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Field, Int32, makeData, RecordBatch, Schema, Struct, Table, tableToIPC, vectorFromArray } from 'apache-arrow';
import { openArrowInput } from '../src/cli/input.js';
import { encodeSchemaMessage } from '../src/format/ipc-message.js';
import { outputPaths } from '../src/format/output-files.js';
import { LocalFileSource, type ByteRangeSource } from '../src/reader/byte-source.js';
import type { ShuffleOutputSources } from '../src/reader/shuffle-reader.js';
import { MapOutputTracker, type MapOutputLocator } from '../src/shuffle/map-output-tracker.js';
import type { MapStatus } from '../src/shuffle/map-status.js';
import { DEFAULT_REDUCE_CONCURRENCY, ReduceReader } from '../src/shuffle/reduce-reader.js';
import { fileOf } from './support/arrow-file.js';
import { watchTimersOf } from './support/armed-timers.js';
import { deferred } from './support/deferred.js';
import { PID_SCHEMA, writePidOutput } from './support/pid-outputs.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir = '';
beforeAll(async () => (dir = await makeTempDir('cs-rr-input-')));
afterAll(async () => removeDir(dir));

// ---------------------------------------------------------------- map outputs of a chosen shape

const SCHEMA = PID_SCHEMA;

let nextShuffle = 100;

/** One committed map output whose partition p holds rowsPerPartition[p] rows. */
const writeOutput = (shuffleId: number, mapId: number, rowsPerPartition: readonly number[], schema = SCHEMA): Promise<MapStatus> => writePidOutput(dir, { shuffleId, mapId }, rowsPerPartition, schema);

/** The `v` of every row the map outputs hold in partitions [start, end), sorted. */
function expectedValues(maps: readonly { mapId: number; rows: readonly number[] }[], start: number, end: number): number[] {
  const out: number[] = [];
  for (const { mapId, rows } of maps) for (let p = start; p < end; p++) for (let i = 0; i < rows[p]!; i++) out.push(100_000 * mapId + 1000 * p + i);
  return out.sort((a, b) => a - b);
}

async function valuesRead(reader: AsyncIterable<RecordBatch>): Promise<number[]> {
  const out: number[] = [];
  for await (const batch of reader) for (const v of batch.getChild('v')!.toArray() as Int32Array) out.push(v);
  return out.sort((a, b) => a - b);
}

/** Local-file sources that count close() calls once each has finished. */
function closeCounting() {
  const state = { opened: 0, closed: 0 };
  const counted = (source: ByteRangeSource): ByteRangeSource => ({
    name: source.name,
    size: () => source.size(),
    read: (offset, length) => source.read(offset, length),
    close: async () => {
      await source.close();
      state.closed++;
    },
  });
  const sourcesOf = async (status: MapStatus): Promise<ShuffleOutputSources> => {
    const paths = outputPaths(status.location.prefix);
    state.opened += 3;
    return {
      data: counted(await LocalFileSource.open(paths.data)),
      index: counted(await LocalFileSource.open(paths.index)),
      checksum: counted(await LocalFileSource.open(paths.checksum)),
    };
  };
  return { state, sourcesOf };
}

/** Lets every pending promise callback run (no I/O is waited for). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('ReduceReader: options at their bounds', () => {
  let statuses: MapStatus[];
  const SHUFFLE = nextShuffle++;
  const ROWS = [[5, 3, 0], [2, 0, 4], [0, 6, 1], [1, 1, 1], [4, 0, 2]];
  beforeAll(async () => {
    statuses = [];
    for (const [m, rows] of ROWS.entries()) statuses.push(await writeOutput(SHUFFLE, m, rows));
  });

  it(`by default ${DEFAULT_REDUCE_CONCURRENCY} outputs are open at once`, async () => {
    // every output has rows in [0, 3): the first turn opens as many as the default allows
    const reader = new ReduceReader({ maps: statuses, partitions: { start: 0, end: 3 } });
    expect(await valuesRead(reader)).toEqual(expectedValues(ROWS.map((rows, mapId) => ({ mapId, rows })), 0, 3));
    expect(reader.metrics.maxOpen).toBe(DEFAULT_REDUCE_CONCURRENCY);
  });

  it('waitTimeoutMs may be 0 or 2^31 - 1, the longest timer Node keeps', async () => {
    for (const waitTimeoutMs of [0, 2 ** 31 - 1]) {
      const reader = new ReduceReader({ maps: statuses, partitions: 1, waitTimeoutMs });
      expect(await valuesRead(reader), `waitTimeoutMs ${waitTimeoutMs}`).toEqual(expectedValues(ROWS.map((rows, mapId) => ({ mapId, rows })), 1, 2));
    }
  });

  it('a signal aborted before reading begins fails the first next() with CS_ABORTED and opens nothing', async () => {
    const { state, sourcesOf } = closeCounting();
    const reader = new ReduceReader({ maps: statuses, partitions: 0, signal: AbortSignal.abort(), openOutput: sourcesOf });
    await expect(reader.next()).rejects.toMatchObject({ code: 'CS_ABORTED' });
    expect(state.opened).toBe(0);
  });

  it('a range whose first partition is empty in an output still reads that output', async () => {
    // map 1 has no rows in partition 1, map 2 none in partition 0: neither may be skipped for [0, 2) or [1, 3)
    for (const [start, end] of [
      [0, 2],
      [1, 3],
    ] as const) {
      const reader = new ReduceReader({ maps: statuses, partitions: { start, end }, concurrency: 2 });
      expect(await valuesRead(reader), `[${start}, ${end})`).toEqual(expectedValues(ROWS.map((rows, mapId) => ({ mapId, rows })), start, end));
      expect(reader.metrics.outputsSkipped).toBe(0);
    }
  });

  it('a range ending at the last partition reads its rows', async () => {
    const reader = new ReduceReader({ maps: statuses, partitions: 2 });
    expect(await valuesRead(reader)).toEqual(expectedValues(ROWS.map((rows, mapId) => ({ mapId, rows })), 2, 3));
    expect(reader.metrics.outputsSkipped).toBe(1); // map 0 has no row in partition 2
  });
});

describe('ReduceReader: statuses that do not fit together or with their files', () => {
  it('statuses of two shuffles, or with different partition counts, are refused with CS_INVALID_ARGUMENT', async () => {
    const shuffle = nextShuffle++;
    const a = await writeOutput(shuffle, 0, [1, 1, 1]);
    const otherShuffle = await writeOutput(nextShuffle++, 1, [1, 1, 1]);
    const fourPartitions = await writeOutput(shuffle, 2, [1, 1, 1, 1]);
    for (const maps of [
      [a, otherShuffle],
      [a, fourPartitions],
    ]) {
      expect(() => new ReduceReader({ maps, partitions: 0 })).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
    }
  });

  it("a locator that answers with another map's status, or with another partition count, fails the read with CS_INVALID_ARGUMENT", async () => {
    const shuffle = nextShuffle++;
    const m0 = await writeOutput(shuffle, 0, [2, 2]);
    const m1 = await writeOutput(shuffle, 1, [3, 3]);
    const m1Wide = await writeOutput(nextShuffle++, 1, [3, 3, 3]);
    const wide: MapStatus = { ...m1Wide, id: { ...m1Wide.id, shuffleId: shuffle } };
    for (const [answer, why] of [
      [m0, /asked for map 1, got a status of map 0/],
      [wide, /the output has 3 partitions, others have 2/],
    ] as const) {
      const locator: MapOutputLocator = { shuffleId: shuffle, numMaps: 2, waitFor: async (mapId) => (mapId === 0 ? m0 : answer) };
      await expect(valuesRead(new ReduceReader({ maps: locator, partitions: 0 }))).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringMatching(why) });
    }
    // the same locator answering right reads both
    const right: MapOutputLocator = { shuffleId: shuffle, numMaps: 2, waitFor: async (mapId) => (mapId === 0 ? m0 : m1) };
    expect(await valuesRead(new ReduceReader({ maps: right, partitions: 0 }))).toEqual(expectedValues([{ mapId: 0, rows: [2, 2] }, { mapId: 1, rows: [3, 3] }], 0, 1));
  });

  it('outputs that disagree about the schema are CS_SCHEMA_MISMATCH naming the data file of the one that differs', async () => {
    const shuffle = nextShuffle++;
    const renamed = new Schema([SCHEMA.fields[0]!, new Field('w', new Int32(), false)]);
    const m0 = await writeOutput(shuffle, 0, [2, 1]);
    const m1 = await writeOutput(shuffle, 1, [2, 1], renamed);
    await expect(valuesRead(new ReduceReader({ maps: [m0, m1], partitions: 0, concurrency: 1 }))).rejects.toMatchObject({
      code: 'CS_SCHEMA_MISMATCH',
      where: { shuffle, map: 1, file: `${m1.location.prefix}.data` },
    });
  });

  it('a status that counts more rows in the range than the output holds is CS_CORRUPT_DATA (the rows it promised are lost)', async () => {
    const status = await writeOutput(nextShuffle++, 0, [3, 2]);
    const promised: MapStatus = { ...status, partitionRows: [4, 2] };
    await expect(valuesRead(new ReduceReader({ maps: [promised], partitions: 0 }))).rejects.toMatchObject({
      code: 'CS_CORRUPT_DATA',
      message: expect.stringContaining('hold 3 rows, the map status says 4'),
    });
  });

  it("a status whose last partition's length is not the index's is CS_CORRUPT_DATA naming that partition", async () => {
    const status = await writeOutput(nextShuffle++, 0, [3, 2, 4]);
    const lengths = [...status.partitionLengths];
    lengths[2]! += 8;
    const forged: MapStatus = { ...status, partitionLengths: lengths };
    await expect(valuesRead(new ReduceReader({ maps: [forged], partitions: 0 }))).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 2 } });
  });
});

describe('ReduceReader: a reducer started before every map task has finished', () => {
  it("the locator's last map committing last is still read", async () => {
    const shuffle = nextShuffle++;
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(shuffle, 2);
    // map 0 has nothing in partition 1: it is skipped, and the reader must go on waiting for map 1
    tracker.registerMapOutput(await writeOutput(shuffle, 0, [4, 0]));
    const reader = new ReduceReader({ maps: tracker.locator(shuffle), partitions: 1, waitTimeoutMs: Infinity });
    const reading = valuesRead(reader);
    await settle();
    tracker.registerMapOutput(await writeOutput(shuffle, 1, [1, 5]));
    expect(await reading).toEqual(expectedValues([{ mapId: 1, rows: [1, 5] }], 1, 2));
    expect(reader.metrics.outputsSkipped).toBe(1);
    expect(reader.metrics.outputsRead).toBe(1);
  });

  it('the timeout error names the lowest map still missing', async () => {
    const shuffle = nextShuffle++;
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(shuffle, 4);
    tracker.registerMapOutput(await writeOutput(shuffle, 1, [2, 2]));
    const reader = new ReduceReader({ maps: tracker.locator(shuffle), partitions: 0, waitTimeoutMs: 50 });
    await expect(valuesRead(reader)).rejects.toMatchObject({
      code: 'CS_MAP_OUTPUT_TIMEOUT',
      message: expect.stringContaining('(maps 0, 2, 3)'),
      where: { shuffle, map: 0 },
    });
    expect(tracker.waiting).toBe(0);
  });
});

describe('ReduceReader: nothing is left behind', () => {
  let statuses: MapStatus[];
  const SHUFFLE = nextShuffle++;
  beforeAll(async () => {
    statuses = [];
    for (let m = 0; m < 3; m++) statuses.push(await writeOutput(SHUFFLE, m, [3, 3]));
  });

  it('every output read to its end is closed before the iteration ends', async () => {
    const { state, sourcesOf } = closeCounting();
    const values = await valuesRead(new ReduceReader({ maps: statuses, partitions: 0, concurrency: 1, openOutput: sourcesOf }));
    expect(values).toHaveLength(9);
    expect(state.opened).toBe(9);
    expect(state.closed, 'every source closed by the time the last next() returned').toBe(9);
  });

  it("a reader that ends, fails or is stopped leaves no listener on the caller's signal", async () => {
    const controller = new AbortController();
    const { signal } = controller;
    const listeners = () => getEventListeners(signal, 'abort').length;
    await valuesRead(new ReduceReader({ maps: statuses, partitions: 0, signal }));
    expect(listeners(), 'after reading to the end').toBe(0);
    const stopped = new ReduceReader({ maps: statuses, partitions: 0, signal });
    await stopped.next();
    await stopped.return();
    expect(listeners(), 'after return()').toBe(0);
    const promised: MapStatus = { ...statuses[0]!, partitionRows: [4, 3] };
    await expect(valuesRead(new ReduceReader({ maps: [promised], partitions: 0, signal }))).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA' });
    expect(listeners(), 'after an error').toBe(0);
  });

  it('stopped while waiting for a map output, the reader leaves no timer armed', async () => {
    const shuffle = nextShuffle++;
    const tracker = new MapOutputTracker();
    tracker.registerShuffle(shuffle, 2);
    tracker.registerMapOutput(await writeOutput(shuffle, 0, [3, 3]));
    // the timers of the wait: the reader's 600 s one
    const armed = watchTimersOf(600_000);
    try {
      const reader = new ReduceReader({ maps: tracker.locator(shuffle), partitions: 0, waitTimeoutMs: 600_000 });
      await reader.next();
      expect(armed.size, 'the wait for map 1 is timed').toBe(1);
      await reader.return();
      expect(armed.size, 'its timer was cleared').toBe(0);
    } finally {
      vi.restoreAllMocks();
    }
    expect(tracker.waiting).toBe(0);
  });

  /** An openOutput that hands over counted sources (closeCounting) once `opening` is resolved. */
  function stalledOpening() {
    const { state, sourcesOf } = closeCounting();
    const opening = deferred<void>();
    const openOutput = async (status: MapStatus) => {
      await opening.promise;
      return sourcesOf(status);
    };
    return { state, opening, openOutput };
  }

  it('return() while an output is still being opened closes it once it opens (it stayed open)', async () => {
    const { state, opening, openOutput } = stalledOpening();
    const reader = new ReduceReader({ maps: statuses.slice(0, 1), partitions: 0, openOutput });
    const next = reader.next();
    await settle();
    const returned = reader.return();
    opening.resolve();
    await expect(next).resolves.toEqual({ done: true, value: undefined });
    await returned;
    expect(state.opened).toBe(3);
    expect(state.closed).toBe(3);
  });

  it('aborted while an output is still being opened: CS_ABORTED at once, and the output is closed once it opens', async () => {
    const { state, opening, openOutput } = stalledOpening();
    const controller = new AbortController();
    const reader = new ReduceReader({ maps: statuses.slice(0, 1), partitions: 0, openOutput, signal: controller.signal });
    const next = reader.next();
    await settle();
    controller.abort();
    await expect(next).rejects.toMatchObject({ code: 'CS_ABORTED' });
    opening.resolve();
    await vi.waitFor(() => expect(state.closed).toBe(3), { timeout: 5000, interval: 5 });
    expect(state.opened).toBe(3);
  });
});

// ---------------------------------------------------------------- the CLI's Arrow input reader

describe('openArrowInput', () => {
  const TABLE = new Table({ v: vectorFromArray(Int32Array.from({ length: 50 }, (_, i) => i + 1)) });

  async function inputFile(name: string, bytes: Uint8Array): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, bytes);
    return path;
  }

  async function readAllOf(path: string): Promise<{ values: number[]; positions: number[]; final: number; size: number; totalBatches: number | null }> {
    const input = await openArrowInput(path);
    try {
      const values: number[] = [];
      const positions: number[] = [];
      for await (const batch of input.batches()) {
        for (const v of batch.getChild('v')!.toArray() as Int32Array) values.push(v);
        positions.push(input.position);
      }
      return { values, positions, final: input.position, size: input.size, totalBatches: input.totalBatches };
    } finally {
      await input.close();
    }
  }

  it('an empty file is CS_INPUT_NOT_ARROW saying it is empty; another file shows its first 8 bytes', async () => {
    const empty = await inputFile('empty.arrow', new Uint8Array(0));
    await expect(openArrowInput(empty)).rejects.toMatchObject({ code: 'CS_INPUT_NOT_ARROW', message: expect.stringContaining('the file is empty'), where: { file: empty } });
    const csv = await inputFile('table.csv', Buffer.from('id,name\n1,one\n'));
    await expect(openArrowInput(csv)).rejects.toMatchObject({ code: 'CS_INPUT_NOT_ARROW', message: expect.stringContaining('it starts with bytes 69 64 2c 6e 61 6d 65 0a,') });
  });

  it('a file of the magic "ARROW1" alone is a truncated Arrow file (CS_CORRUPT_DATA), not some other input', async () => {
    const path = await inputFile('magic-only.arrow', Buffer.from('ARROW1'));
    await expect(openArrowInput(path)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('truncated'), where: { file: path, offset: 6 } });
  });

  it('a file of a lone continuation marker is a broken IPC stream (CS_CORRUPT_DATA at 0), not "not Arrow"', async () => {
    const path = await inputFile('marker-only.arrows', Buffer.from([0xff, 0xff, 0xff, 0xff]));
    await expect(openArrowInput(path)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('invalid Arrow IPC stream'), where: { file: path, offset: 0 } });
  });

  it('an 18-byte file (magic, a footer length of 0, magic) says its footer length is out of range, at byte 8', async () => {
    const path = await inputFile('no-footer.arrow', Buffer.concat([Buffer.from('ARROW1\0\0'), Buffer.alloc(4), Buffer.from('ARROW1')]));
    await expect(openArrowInput(path)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('footer length 0 is out of range'), where: { offset: 8 } });
  });

  it('a footer length of 0, or one reaching into the leading magic, is out of range', async () => {
    const file = Buffer.from(tableToIPC(TABLE, 'file'));
    const tailAt = file.byteLength - 10;
    for (const length of [0, tailAt - 4]) {
      const bytes = Buffer.from(file);
      bytes.writeInt32LE(length, tailAt);
      const path = await inputFile(`footer-${length}.arrow`, bytes);
      await expect(openArrowInput(path), `length ${length}`).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining(`footer length ${length} is out of range`), where: { offset: tailAt } });
    }
  });

  it('a file cut short says so at its end: the offset is its size', async () => {
    const file = Buffer.from(tableToIPC(TABLE, 'file'));
    const path = await inputFile('cut.arrow', file.subarray(0, file.byteLength - 3));
    await expect(openArrowInput(path)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', where: { offset: file.byteLength - 3 } });
  });

  it('a stream whose last message ends exactly at the end of the file, with no end-of-stream marker, reads every batch (an empty last batch too)', async () => {
    const schema = TABLE.schema;
    const empty = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 0, nullCount: 0, children: [makeData({ type: new Int32(), length: 0, nullCount: 0, data: new Int32Array(0) })] }));
    for (const [name, table] of [
      ['no-eos.arrows', TABLE],
      ['no-eos-empty-last.arrows', new Table([TABLE.batches[0]!, empty])],
    ] as const) {
      const stream = tableToIPC(table, 'stream');
      const path = await inputFile(name, stream.subarray(0, stream.byteLength - 8));
      const read = await readAllOf(path);
      expect(read.values, name).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
      expect(read.final).toBe(read.size);
    }
  });

  it("position advances to each batch's message end, and is the input's size after the last", async () => {
    const table = new Table([TABLE.batches[0]!, TABLE.batches[0]!.slice(0, 10)]);
    for (const format of ['stream', 'file'] as const) {
      const path = await inputFile(`positions.${format}`, tableToIPC(table, format));
      const read = await readAllOf(path);
      expect(read.values).toHaveLength(60);
      expect(read.positions).toHaveLength(2);
      expect(read.positions[0]!, format).toBeGreaterThan(0);
      expect(read.positions[1]!, format).toBeGreaterThan(read.positions[0]!);
      // the stream's end-of-stream marker, the file's footer: after the last batch's message
      expect(read.positions[1]!, format).toBeLessThan(read.size);
      expect(read.final, format).toBe(read.size);
      expect(read.totalBatches, format).toBe(format === 'file' ? 2 : null);
    }
  });

  it("a stream whose first message is a record batch, not a schema, is CS_CORRUPT_DATA saying so", async () => {
    const stream = Buffer.from(tableToIPC(TABLE, 'stream'));
    const schemaLength = encodeSchemaMessage(TABLE.schema).byteLength;
    const path = await inputFile('no-schema.arrows', stream.subarray(schemaLength));
    await expect(openArrowInput(path)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('its first message is not a schema'), where: { offset: 0 } });
  });

  it('a stream with a second schema message is CS_CORRUPT_DATA at that message', async () => {
    const stream = Buffer.from(tableToIPC(TABLE, 'stream'));
    const body = stream.subarray(0, stream.byteLength - 8);
    const path = await inputFile('two-schemas.arrows', Buffer.concat([body, encodeSchemaMessage(TABLE.schema), stream.subarray(stream.byteLength - 8)]));
    await expect(readAllOf(path)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('unexpected Schema message'), where: { offset: body.byteLength } });
  });

  it('an invalid message in the middle of a stream is CS_CORRUPT_DATA at that message, the batches before it read', async () => {
    const stream = Buffer.from(tableToIPC(new Table([TABLE.batches[0]!, TABLE.batches[0]!]), 'stream'));
    const input = await openArrowInput(await inputFile('probe.arrows', stream));
    const batchAt: number[] = [];
    for await (const _ of input.batches()) batchAt.push(input.position);
    await input.close();
    // the second batch's message, from its first metadata byte on, garbage
    const bytes = Buffer.from(stream);
    bytes.fill(0x7f, batchAt[0]! + 4, batchAt[0]! + 16);
    const path = await inputFile('garbage.arrows', bytes);
    const reading = openArrowInput(path);
    const opened = await reading;
    const values: number[] = [];
    try {
      const error = await (async () => {
        for await (const batch of opened.batches()) for (const v of batch.getChild('v')!.toArray() as Int32Array) values.push(v);
      })().then(() => null, (e: unknown) => e);
      expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: path, offset: batchAt[0] } });
    } finally {
      await opened.close();
    }
    expect(values).toHaveLength(50);
  });

  it('a footer block pointing at no message is CS_CORRUPT_DATA at the offset the block gives', async () => {
    const stream = tableToIPC(TABLE, 'stream');
    const plain = Buffer.from(fileOf(stream, TABLE.schema));
    // the block points at the end-of-stream marker before the footer
    const footerLength = plain.readInt32LE(plain.byteLength - 10);
    const eosAt = plain.byteLength - 10 - footerLength - 8;
    const path = await inputFile('eos-block.arrow', fileOf(stream, TABLE.schema, { blockOffset: () => eosAt }));
    await expect(readAllOf(path)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('the footer points at no message'), where: { offset: eosAt } });
  });

  it('an input refused on opening leaves no file descriptor behind', async () => {
    const fds = async () => (await readdir('/proc/self/fd')).length;
    const path = await inputFile('not-arrow.txt', Buffer.from('id,name\n1,one\n'));
    const before = await fds();
    for (let i = 0; i < 5; i++) await expect(openArrowInput(path)).rejects.toMatchObject({ code: 'CS_INPUT_NOT_ARROW' });
    expect(await fds()).toBe(before);
  });

  it('a read that fails (the input closed under it) is CS_IO naming the file, not a bare Node error', async () => {
    const path = await inputFile('closed.arrows', tableToIPC(TABLE, 'stream'));
    const input = await openArrowInput(path);
    await input.close();
    const error = await (async () => {
      for await (const _ of input.batches());
    })().then(() => null, (e: unknown) => e);
    expect(error).toMatchObject({ code: 'CS_IO', message: expect.stringContaining('cannot read the input'), where: { file: path } });
  });

  it('an input cut short after it was opened ends its read (a short read is not retried for ever)', { timeout: 20_000 }, async () => {
    const file = tableToIPC(TABLE, 'file');
    const path = await inputFile('shrinks.arrow', file);
    const input = await openArrowInput(path);
    try {
      const valuesAt = (await readFile(path)).indexOf(Buffer.from(Int32Array.from({ length: 50 }, (_, i) => i + 1).buffer));
      await truncate(path, valuesAt + 10 * 4); // inside the body of the only batch
      const outcome = await (async () => {
        let rows = 0;
        for await (const batch of input.batches()) rows += batch.numRows;
        return rows;
      })().then(
        () => 'ended',
        () => 'failed',
      );
      expect(['ended', 'failed']).toContain(outcome);
    } finally {
      await input.close();
    }
  });

  // InputFile.batches() ignored how many bytes readInto() read: a file cut short after it was
  // opened (or rewritten shorter) gave batches whose missing bytes were zeros, and no error
  it('an input cut inside a batch after it was opened is CS_CORRUPT_DATA where it now ends, not rows of zeros', async () => {
    const file = tableToIPC(TABLE, 'file');
    const path = await inputFile('cut-later.arrow', file);
    const input = await openArrowInput(path);
    const values: number[] = [];
    try {
      const valuesAt = (await readFile(path)).indexOf(Buffer.from(Int32Array.from({ length: 50 }, (_, i) => i + 1).buffer));
      expect(valuesAt).toBeGreaterThan(0);
      await truncate(path, valuesAt + 19 * 4); // the body of the only batch ends after value 19
      const error = await (async () => {
        for await (const batch of input.batches()) for (const v of batch.getChild('v')!.toArray() as Int32Array) values.push(v);
      })().then(() => null, (e: unknown) => e);
      expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: path, offset: valuesAt + 19 * 4 } });
    } finally {
      await input.close();
    }
    expect(values, 'no row of the cut batch').toEqual([]);
  });
});
