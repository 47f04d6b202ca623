import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { Dictionary, Int32, Table, Utf8, makeVector, vectorFromArray, type Data, type RecordBatch } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createShuffleWriter, DEFAULT_READ_RUN_BYTES, LocalFileSource, outputPaths, ShuffleError, ShuffleReader, type CodecName, type OpenOptions, type WriterKind } from '../src/index.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

/**
 * The reader reads partitions into read buffers it reuses (the one being
 * decoded and the one being read ahead). Batches it has handed out must not
 * view them: a buffer stored raw, an uncompressed body or a dictionary would
 * otherwise be overwritten by the partition read two steps later. Partitions
 * 0 and 1 get a quarter of the rows each, the six others a twelfth: every read
 * after the second lands in a buffer the first two were read into.
 */
const ROWS = 4_000;
const PARTITIONS = 8;

let dir: string;
beforeEach(async () => {
  dir = await makeTempDir();
});
afterEach(async () => removeDir(dir));

/** Rows i = 0..ROWS-1: an id, a float no codec shrinks, a 12-character string and a dictionary-encoded one. */
function input(): RecordBatch {
  const random = new Float64Array(ROWS);
  let seed = 7;
  for (let i = 0; i < ROWS; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    random[i] = seed / 2 ** 32 + i;
  }
  const strings = Array.from({ length: ROWS }, (_, i) => `s-${String(i * 7919).padStart(10, '0')}`.slice(0, 12));
  const colours = Array.from({ length: ROWS }, (_, i) => ['red', 'green', 'blue', 'cyan'][i % 4]!);
  return new Table({
    id: makeVector(Int32Array.from({ length: ROWS }, (_, i) => i)),
    x: makeVector(random),
    s: vectorFromArray(strings, new Utf8()),
    colour: vectorFromArray(colours, new Dictionary(new Utf8(), new Int32())),
  }).batches[0]! as RecordBatch;
}

/** Row i's partition: rows 0-999 go to partition 0, 1000-1999 to 1, the rest round-robin over 2..7. */
function partitionOf(i: number): number {
  return i < ROWS / 2 ? Math.floor(i / (ROWS / 4)) : 2 + (i % (PARTITIONS - 2));
}

/** The input with a partition id column: row i goes to partitionOf(i). */
function withPartitionIds(batch: RecordBatch, partitionOf: (i: number) => number): RecordBatch {
  const pid = Int32Array.from({ length: ROWS }, (_, i) => partitionOf(i));
  return new Table({ ...Object.fromEntries(batch.schema.fields.map((f, c) => [f.name, batch.getChildAt(c)!])), pid: makeVector(pid) }).batches[0]! as RecordBatch;
}

async function writeOutput(kind: WriterKind, codec: CodecName, prefix: string, maxBatchRows?: number, compressionMinRows?: number): Promise<void> {
  const writer = await createShuffleWriter(kind, { numPartitions: PARTITIONS, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, codec, maxBatchRows, compressionMinRows });
  await writer.write(withPartitionIds(input(), partitionOf));
  await writer.finish();
}

function rowsAsText(batches: readonly RecordBatch[]): string[] {
  const rows: string[] = [];
  for (const batch of batches) for (const row of batch) rows.push(JSON.stringify(row!.toJSON()));
  return rows.sort();
}

const CASES: [WriterKind, CodecName][] = [
  ['hash', 'none'],
  ['hash', 'lz4'],
  ['hash', 'zstd'],
  ['sort', 'lz4'],
  ['sort', 'none'],
];

describe.each(CASES)('the %s writer\'s output with codec %s', (kind, codec) => {
  test('batches handed out stay intact while the reader reads later partitions into its buffers', async () => {
    const prefix = join(dir, 'out');
    await writeOutput(kind, codec, prefix);
    const expected = rowsAsText([input()]);

    const reader = await ShuffleReader.open(prefix);
    const lengths = Array.from({ length: PARTITIONS }, (_, p) => reader.partitionLength(p));
    expect(Math.max(...lengths.slice(2))).toBeLessThan(Math.min(lengths[0]!, lengths[1]!));

    const held: RecordBatch[] = [];
    for await (const b of reader.readPartitions(0, PARTITIONS)) held.push(b);
    expect(rowsAsText(held)).toEqual(expected);

    // in runs of two small partitions: every run after the second lands in a buffer an earlier run was read into
    const inRuns = await ShuffleReader.open(prefix, { readRunBytes: 2 * Math.max(...lengths.slice(2)) });
    const heldFromRuns: RecordBatch[] = [];
    for await (const b of inRuns.readPartitions(0, PARTITIONS)) heldFromRuns.push(b);
    await inRuns.close();
    expect(rowsAsText(heldFromRuns)).toEqual(expected);

    // one partition at a time, on the same reader (its buffers now warm)
    const oneByOne: RecordBatch[] = [];
    for (let p = 0; p < PARTITIONS; p++) for await (const b of reader.readPartition(p)) oneByOne.push(b);
    expect(rowsAsText(oneByOne)).toEqual(expected);
    expect(rowsAsText(held)).toEqual(expected);
    expect(rowsAsText(heldFromRuns)).toEqual(expected);
    await reader.close();
  });
});

test('a read abandoned after its first batch leaves later reads correct', async () => {
  const prefix = join(dir, 'out');
  await writeOutput('hash', 'lz4', prefix, 100);
  const reader = await ShuffleReader.open(prefix);
  for await (const first of reader.readPartitions(0, PARTITIONS)) {
    expect(first.numRows).toBe(100);
    break;
  }
  const all: RecordBatch[] = [];
  for await (const b of reader.readPartitions(0, PARTITIONS)) all.push(b);
  expect(rowsAsText(all)).toEqual(rowsAsText([input()]));
  await reader.close();
});

test('the float column really is stored raw under lz4, so the lz4 case reads raw buffers out of the read buffer', async () => {
  const prefix = join(dir, 'out');
  await writeOutput('hash', 'lz4', prefix);
  const reader = await ShuffleReader.open(prefix);
  const bytes = await reader.partitionBytes(0);
  await reader.close();
  // a raw buffer's 8-byte prefix is -1: FF x 8
  const text = Buffer.from(bytes).toString('hex');
  expect(text).toContain('ffffffffffffffff');
});

/** The distinct ArrayBuffers behind a column's buffers (values, offsets, validity), children included. */
function arrayBuffersOf(data: Data, found = new Set<ArrayBufferLike>()): Set<ArrayBufferLike> {
  for (const view of [data.values, data.valueOffsets, data.nullBitmap] as (ArrayBufferView | undefined)[]) {
    if (view !== undefined && view.byteLength > 0) found.add(view.buffer);
  }
  for (const child of data.children) arrayBuffersOf(child, found);
  return found;
}

test('a batch stored uncompressed in an lz4 stream is copied out of the read buffer in one piece: its columns share one array', async () => {
  // every batch below compressionMinRows is stored raw: 40 buffers of a 16-column batch were 40 arrays, one per buffer
  const prefix = join(dir, 'out');
  await writeOutput('hash', 'lz4', prefix, 100, 1_000_000);
  const reader = await ShuffleReader.open(prefix);
  const held: RecordBatch[] = [];
  for await (const b of reader.readPartitions(0, PARTITIONS)) held.push(b);
  await reader.close();
  expect(rowsAsText(held)).toEqual(rowsAsText([input()]));
  for (const batch of held) {
    const arrays = new Set<ArrayBufferLike>();
    for (const column of batch.data.children.slice(0, 3)) arrayBuffersOf(column, arrays); // the dictionary column's values live with its dictionary
    expect(arrays.size).toBe(1);
  }
});

test('a raw buffer in a body that is mostly compressed gets an array of its own, not a copy of the whole body', async () => {
  // 100 rows: random floats (stored raw, 800 bytes) beside 64 KiB strings that compress to far more than that
  const rows = 100;
  const x = Float64Array.from({ length: rows }, (_, i) => Math.sin(i * 12.9898) * 43758.5453);
  const s = Array.from({ length: rows }, (_, i) => `${'ab'.repeat(32 * 1024)}${i}`);
  const batch = new Table({ x: makeVector(x), s: vectorFromArray(s, new Utf8()) }).batches[0]! as RecordBatch;
  const prefix = join(dir, 'out');
  const writer = await createShuffleWriter('hash', { numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: prefix, codec: 'lz4' });
  await writer.write(batch);
  await writer.finish();
  const reader = await ShuffleReader.open(prefix);
  const read: RecordBatch[] = [];
  for await (const b of reader.readPartition(0)) read.push(b);
  await reader.close();
  expect(read).toHaveLength(1);
  const floats = read[0]!.getChild('x')!.data[0]!.values as Float64Array;
  expect([...floats]).toEqual([...x]);
  expect(floats.buffer.byteLength).toBe(rows * 8);
  expect(read[0]!.getChild('s')!.get(rows - 1)).toBe(s[rows - 1]);
});

/** A reader over the output at `prefix` whose data source records every readInto as [offset, length]. */
async function countingReader(prefix: string, options: OpenOptions = {}): Promise<{ reader: ShuffleReader; reads: [number, number][] }> {
  const paths = outputPaths(prefix);
  const data = await LocalFileSource.open(paths.data);
  const reads: [number, number][] = [];
  const readInto = data.readInto.bind(data);
  data.readInto = (offset, target) => {
    reads.push([offset, target.byteLength]);
    return readInto(offset, target);
  };
  const reader = await ShuffleReader.fromSources({ data, index: await LocalFileSource.open(paths.index), checksum: await LocalFileSource.open(paths.checksum) }, options);
  return { reader, reads };
}

/** The byte ranges [offset, length] of runs of partitions [start, end): neighbours joined while within `limit`, a larger one alone. */
function expectedRuns(offsets: readonly number[], start: number, end: number, limit: number): [number, number][] {
  const runs: [number, number][] = [];
  for (let first = start; first < end; ) {
    let last = first + 1;
    while (last < end && offsets[last + 1]! - offsets[first]! <= limit) last++;
    if (offsets[last]! > offsets[first]!) runs.push([offsets[first]!, offsets[last]! - offsets[first]!]);
    first = last;
  }
  return runs;
}

describe('a range is read in runs of neighbouring partitions', () => {
  test('by default the eight partitions (far under 4 MiB) come in one read', async () => {
    const prefix = join(dir, 'out');
    await writeOutput('hash', 'lz4', prefix);
    const { reader, reads } = await countingReader(prefix);
    const batches: RecordBatch[] = [];
    for await (const b of reader.readPartitions(0, PARTITIONS)) batches.push(b);
    const size = reader.offsets[PARTITIONS]!;
    await reader.close();
    expect(size).toBeLessThan(DEFAULT_READ_RUN_BYTES);
    expect(reads).toEqual([[0, size]]);
    expect(rowsAsText(batches)).toEqual(rowsAsText([input()]));
  });

  test.each([
    ['0: one partition per read', () => 0],
    ['just under partition 0: the two large partitions alone, the small ones together', (lengths: number[]) => lengths[0]! - 1],
    ['three small partitions', (lengths: number[]) => 3 * Math.max(...lengths.slice(2))],
  ])('readRunBytes %s', async (_, limitOf) => {
    const prefix = join(dir, 'out');
    await writeOutput('sort', 'lz4', prefix);
    const probe = await ShuffleReader.open(prefix);
    const lengths = Array.from({ length: PARTITIONS }, (_, p) => probe.partitionLength(p));
    await probe.close();
    const limit = limitOf(lengths);
    const { reader, reads } = await countingReader(prefix, { readRunBytes: limit });
    const batches: RecordBatch[] = [];
    for await (const b of reader.readPartitions(1, PARTITIONS)) batches.push(b);
    const runs = expectedRuns(reader.offsets, 1, PARTITIONS, limit);
    await reader.close();
    expect(reads).toEqual(runs);
    if (limit === 0) expect(reads).toHaveLength(PARTITIONS - 1);
    else expect(reads.length).toBeLessThan(PARTITIONS - 1);
    const expected = rowsAsText([input()]).filter((row) => partitionOf(JSON.parse(row).id) !== 0);
    expect(rowsAsText(batches)).toEqual(expected);
  });

  test('empty partitions inside and at the ends of a run are verified and skipped', async () => {
    const prefix = join(dir, 'out');
    const batch = input();
    const writer = await createShuffleWriter('hash', { numPartitions: PARTITIONS, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, codec: 'lz4' });
    await writer.write(withPartitionIds(batch, (i) => [1, 4, 5][i % 3]!));
    await writer.finish();
    const { reader, reads } = await countingReader(prefix);
    expect([0, 2, 3, 6, 7].map((p) => reader.partitionLength(p))).toEqual([0, 0, 0, 0, 0]);
    const all: RecordBatch[] = [];
    for await (const b of reader.readPartitions(0, PARTITIONS)) all.push(b);
    const none: RecordBatch[] = [];
    for await (const b of reader.readPartitions(6, PARTITIONS)) none.push(b);
    await reader.close();
    expect(rowsAsText(all)).toEqual(rowsAsText([batch]));
    expect(none).toEqual([]);
    expect(reads).toHaveLength(1); // the empty range [6, 8) reads nothing
  });

  test('a damaged partition in the middle of a run: the partitions before it come whole, then CS_CHECKSUM_MISMATCH names it', async () => {
    const prefix = join(dir, 'out');
    await writeOutput('hash', 'lz4', prefix);
    const probe = await ShuffleReader.open(prefix);
    const at = probe.offsets[3]! + Math.floor(probe.partitionLength(3) / 2);
    await probe.close();
    const file = await open(outputPaths(prefix).data, 'r+');
    const byte = new Uint8Array(1);
    await file.read(byte, 0, 1, at);
    await file.write(Uint8Array.of(byte[0]! ^ 0xff), 0, 1, at);
    await file.close();

    const { reader, reads } = await countingReader(prefix);
    const batches: RecordBatch[] = [];
    let failure: unknown = null;
    try {
      for await (const b of reader.readPartitions(0, PARTITIONS)) batches.push(b);
    } catch (error) {
      failure = error;
    }
    await reader.close();
    expect(reads).toHaveLength(1);
    expect(failure).toBeInstanceOf(ShuffleError);
    expect((failure as ShuffleError).code).toBe('CS_CHECKSUM_MISMATCH');
    expect((failure as ShuffleError).where).toMatchObject({ partition: 3 });
    const firstThree = rowsAsText([input()]).filter((row) => partitionOf(JSON.parse(row).id) < 3);
    expect(rowsAsText(batches)).toEqual(firstThree);
  });

  test('readRunBytes must be an integer >= 0', async () => {
    const prefix = join(dir, 'out');
    await writeOutput('hash', 'none', prefix);
    for (const bad of [-1, 1.5, Number.NaN]) {
      await expect(ShuffleReader.open(prefix, { readRunBytes: bad })).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('readRunBytes') });
    }
  });

  test('maxBufferBytes must be an integer >= 0 (NaN read intact outputs as corrupt, or turned the limit off)', async () => {
    const prefix = join(dir, 'out');
    await writeOutput('hash', 'none', prefix);
    for (const bad of [-1, 1.5, Number.NaN, 'big']) {
      await expect(ShuffleReader.open(prefix, { maxBufferBytes: bad as number })).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('maxBufferBytes') });
    }
  });
});
