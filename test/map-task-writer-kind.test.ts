/**
 * A map task chooses its writer: `hash` (the default, the columnar writer),
 * `sort` (the row writer) or `auto` (either), on the calling thread (MapOutputWriter) and in a
 * worker (MapTaskPool). Claims: the writer named is the one that writes (its
 * partitions' first bytes say which); both commit the same three files under
 * the id and a MapStatus of the same shape, with the same rows per partition
 * for the same input; the writer's own options arrive (`pageBytes`,
 * `blockBytes`, `dictionaryUpdates`); a sort attempt that fails or spills
 * leaves what a hash attempt leaves; and a ReduceReader reads one shuffle
 * whose map outputs were written by both writers.
 */
import { readdir } from 'node:fs/promises';
import { describe, expect, test } from 'vitest';
import { Dictionary, Field, Int32, RecordBatch, Schema, Struct, Utf8, Vector, makeData } from 'apache-arrow';
import { MessageHeader } from 'apache-arrow/enum';
import { Message, type DictionaryBatch } from 'apache-arrow/ipc/metadata/message';
import { narrowBatch, NARROW_SCHEMA } from '../src/cli/demo-data.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { MapOutputWriter, type MapOutputWriterOptions } from '../src/shuffle/map-output-writer.js';
import type { MapStatus } from '../src/shuffle/map-status.js';
import { MapTaskPool, type MapTaskSpec } from '../src/shuffle/map-task-pool.js';
import { ReduceReader } from '../src/shuffle/reduce-reader.js';
import type { WriterKind } from '../src/writer-kind.js';
import { utf8Column } from './support/columns.js';
import { rowsOf } from './support/rows.js';
import { useMapTaskFixture } from './support/map-task-fixture.js';

const PARTITIONS = 6;
const HASH = { kind: 'hash', keys: ['key'] } as const;

let dir: string;
let pool: MapTaskPool;

useMapTaskFixture({ threads: 2, dirPrefix: 'cs-writer-kind-' }, (fixture) => ({ dir, pool } = fixture));

const files = async () => (await readdir(dir)).sort();
const committed = (mapId: number, attempt: number) =>
  [`shuffle_0_${mapId}_${attempt}.checksum.CRC32C`, `shuffle_0_${mapId}_${attempt}.data`, `shuffle_0_${mapId}_${attempt}.index`];

function batches(count: number, rows: number, seed: number): RecordBatch[] {
  return Array.from({ length: count }, (_, i) => narrowBatch(rows, seed * 1000 + i + 1));
}

const sortedRows = (input: readonly RecordBatch[]) => input.flatMap((b) => rowsOf(b)).sort();

async function writeOnThisThread(mapId: number, input: readonly RecordBatch[], options: Partial<MapOutputWriterOptions> = {}): Promise<MapStatus> {
  const writer = await MapOutputWriter.create({ dir, id: { shuffleId: 0, mapId, attempt: 0 }, numPartitions: PARTITIONS, partitioning: HASH, ...options });
  for (const batch of input) await writer.write(batch);
  return writer.finish();
}

function spec(mapId: number, extra: Partial<MapTaskSpec> = {}): MapTaskSpec {
  return { dir, id: { shuffleId: 0, mapId, attempt: 0 }, numPartitions: PARTITIONS, partitioning: HASH, outputSchema: NARROW_SCHEMA, ...extra };
}

/** The writer whose bytes each non-empty partition holds: an Arrow IPC stream (FF FF FF FF) or sort-writer rows ("CSRW"). */
async function writersOf(status: MapStatus): Promise<Set<WriterKind>> {
  const reader = await ShuffleReader.open(status.location.prefix);
  try {
    const kinds = new Set<WriterKind>();
    for (let p = 0; p < status.numPartitions; p++) {
      if (status.partitionLengths[p] === 0) continue;
      const head = Buffer.from((await reader.partitionBytes(p)).subarray(0, 4));
      if (head.equals(Buffer.from([0xff, 0xff, 0xff, 0xff]))) kinds.add('hash');
      else if (head.toString('latin1') === 'CSRW') kinds.add('sort');
      else throw new Error(`partition ${p} starts with ${head.toString('hex')}`);
    }
    return kinds;
  } finally {
    await reader.close();
  }
}

/** Batches per partition as stored (a sort-writer block is one batch). */
async function storedBatches(status: MapStatus): Promise<number> {
  const reader = await ShuffleReader.open(status.location.prefix);
  let n = 0;
  try {
    for (let p = 0; p < status.numPartitions; p++) for await (const batch of reader.readPartition(p)) n += batch.numRows > 0 ? 1 : 0;
  } finally {
    await reader.close();
  }
  return n;
}

/** The keys of a value, recursively, with the type of each leaf: what "the same shape" means. */
function shapeOf(value: unknown): unknown {
  if (Array.isArray(value)) return `array of ${value.length}`;
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, shapeOf((value as Record<string, unknown>)[k])]));
  }
  return typeof value;
}

async function readShuffle(maps: MapStatus[], options: { coalesceRows?: number } = {}): Promise<string[]> {
  const rows: string[] = [];
  for await (const batch of new ReduceReader({ maps, partitions: { start: 0, end: PARTITIONS }, ...options })) rows.push(...rowsOf(batch));
  return rows.sort();
}

// ------------------------------------------------------------ dictionaries

const DICTIONARY_SCHEMA = new Schema([new Field('key', new Int32(), false), new Field('d', new Dictionary(new Utf8(), new Int32(), 3), true)]);

/** Each batch with a dictionary of its own values: every batch after the first brings new ones. */
function dictionaryBatches(count: number, rows: number): RecordBatch[] {
  return Array.from({ length: count }, (_, b) => {
    const dictionary = new Vector([utf8Column(Array.from({ length: 8 }, (_, i) => `batch${b}-value${i}`))]);
    const keys = makeData({ type: new Int32(), length: rows, data: Int32Array.from({ length: rows }, (_, i) => b * rows + i) });
    const d = makeData({ type: DICTIONARY_SCHEMA.fields[1]!.type, length: rows, data: Int32Array.from({ length: rows }, (_, i) => i % 8), dictionary } as never);
    return new RecordBatch(DICTIONARY_SCHEMA, makeData({ type: new Struct(DICTIONARY_SCHEMA.fields), length: rows, nullCount: 0, children: [keys, d] }));
  });
}

/** isDelta of every dictionary batch of partition p's IPC stream, in order. */
async function dictionaryDeltas(status: MapStatus, p: number): Promise<boolean[]> {
  const reader = await ShuffleReader.open(status.location.prefix);
  const bytes = await reader.partitionBytes(p).finally(() => reader.close());
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const deltas: boolean[] = [];
  for (let at = 0; at < bytes.byteLength; ) {
    const size = view.getInt32(at + 4, true);
    if (size === 0) break;
    const message = Message.decode(bytes.subarray(at + 8, at + 8 + size));
    if (message.headerType === MessageHeader.DictionaryBatch) deltas.push((message.header() as DictionaryBatch).isDelta);
    at += 8 + size + Number(message.bodyLength);
  }
  return deltas;
}

function busiestPartition(status: MapStatus): number {
  return status.partitionRows.indexOf(Math.max(...status.partitionRows));
}

describe('on the calling thread (MapOutputWriter)', () => {
  test("`sort` writes sort-writer partitions under the id; the default is the hash writer; same files, same status shape, same rows per partition", async () => {
    const input = () => batches(3, 2000, 1);
    const hash = await writeOnThisThread(0, input());
    const sort = await writeOnThisThread(1, input(), { writer: 'sort' });
    expect(await writersOf(hash)).toEqual(new Set(['hash']));
    expect(await writersOf(sort)).toEqual(new Set(['sort']));
    expect(await files()).toEqual([...committed(0, 0), ...committed(1, 0)].sort());
    expect(shapeOf(sort)).toEqual(shapeOf(hash));
    expect(sort.partitionRows, 'both writers partition alike').toEqual(hash.partitionRows);
    expect(sort.metrics).toMatchObject({ rows: 6000, batches: 3, bytesWritten: sort.partitionLengths.reduce((a, b) => a + b, 0) });
    expect(await readShuffle([sort])).toEqual(sortedRows(input()));
  });

  test('a sort attempt spills into its own spill directory, within its pool, and commits nothing else', async () => {
    const status = await writeOnThisThread(2, batches(12, 4096, 2), { writer: 'sort', memoryPool: new MemoryPool(512 * 1024) });
    expect(status.metrics.spills, 'a 512 KiB pool must make it spill').toBeGreaterThan(0);
    expect(status.metrics.peakMemoryBytes).toBeLessThanOrEqual(512 * 1024);
    expect(await writersOf(status)).toEqual(new Set(['sort']));
    expect(await files()).toEqual(committed(2, 0));
    expect(await readShuffle([status])).toEqual(sortedRows(batches(12, 4096, 2)));
  });

  test('a sort attempt whose batch is refused is over, and leaves nothing (the sort writer alone would stay usable)', async () => {
    const writer = await MapOutputWriter.create({ dir, id: { shuffleId: 0, mapId: 3, attempt: 0 }, numPartitions: PARTITIONS, partitioning: HASH, writer: 'sort' });
    await writer.write(narrowBatch(500, 1));
    expect(await files()).toContain('shuffle_0_3_0.spill');
    await expect(writer.write(narrowBatch(10, 2).select(['key']))).rejects.toMatchObject({ code: 'CS_SCHEMA_MISMATCH' });
    expect(await files()).toEqual([]);
  });

  test('an unknown writer is CS_INVALID_ARGUMENT before anything is created', async () => {
    await expect(writeOnThisThread(4, [], { writer: 'radix' as WriterKind })).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('unknown writer "radix"') });
    expect(await files()).toEqual([]);
  });

  test('pageBytes and blockBytes reach the sort writer (and are no business of the hash writer)', async () => {
    await expect(writeOnThisThread(5, [], { writer: 'sort', pageBytes: 65 })).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('pageBytes') });
    expect(await files()).toEqual([]);
    const large = await writeOnThisThread(5, batches(2, 3000, 5), { writer: 'sort' });
    const small = await writeOnThisThread(6, batches(2, 3000, 5), { writer: 'sort', blockBytes: 4096, pageBytes: 64 * 1024 });
    expect(await storedBatches(small), 'blocks of 4 KiB: many more of them').toBeGreaterThan(4 * (await storedBatches(large)));
    const hash = await writeOnThisThread(7, batches(1, 100, 7), { pageBytes: 65, blockBytes: 1 });
    expect(await writersOf(hash)).toEqual(new Set(['hash']));
  });

  test('dictionaryUpdates reaches the hash writer: replacements instead of deltas', async () => {
    // small batches: each partition is flushed between input batches, so later ones send dictionary updates
    const deltas = await writeOnThisThread(8, dictionaryBatches(3, 400), { maxBatchRows: 64 });
    const replacements = await writeOnThisThread(9, dictionaryBatches(3, 400), { maxBatchRows: 64, dictionaryUpdates: 'replacement' });
    expect(await dictionaryDeltas(deltas, busiestPartition(deltas))).toContain(true);
    expect(await dictionaryDeltas(replacements, busiestPartition(replacements))).toEqual([false, false, false]);
  });
});

describe('in a worker thread (MapTaskPool)', () => {
  test('the spec chooses the writer; the status has the hash task\'s shape and partitions', async () => {
    const [hash, sort] = await Promise.all([pool.run(spec(0), batches(3, 2000, 10)).status, pool.run(spec(1, { writer: 'sort' }), batches(3, 2000, 10)).status]);
    expect(await writersOf(hash)).toEqual(new Set(['hash']));
    expect(await writersOf(sort)).toEqual(new Set(['sort']));
    expect(shapeOf(sort)).toEqual(shapeOf(hash));
    expect(sort.metrics).toMatchObject({ inputRows: 6000, inputBatches: 3, rows: 6000 });
    expect(sort.partitionRows).toEqual(hash.partitionRows);
    expect(await readShuffle([sort])).toEqual(sortedRows(batches(3, 2000, 10)));
    expect(await files()).toEqual([...committed(0, 0), ...committed(1, 0)].sort());
  });

  test("a sort task's writer gets the task's memory share, spills in it and stays within it", async () => {
    const small = new MapTaskPool({ threads: 1, memoryBytes: 1024 * 1024 });
    try {
      const status = await small.run(spec(2, { writer: 'sort', numPartitions: 16 }), batches(8, 8192, 11)).status;
      expect(status.metrics.spills, 'a 1 MiB share must make the writer spill').toBeGreaterThan(0);
      expect(status.metrics.peakMemoryBytes).toBeLessThanOrEqual(1024 * 1024);
      expect(await writersOf(status)).toEqual(new Set(['sort']));
      expect(await files()).toEqual(committed(2, 0));
    } finally {
      await small.close();
    }
  });

  test('`auto` crosses to the worker: the sort writer when the task\'s 1 MiB leaves 300 partition buffers a few rows each, the hash writer with memory to spare', async () => {
    const small = new MapTaskPool({ threads: 1, memoryBytes: 1024 * 1024 });
    try {
      // narrow rows of ~41 bytes: 1048576 / 41 / 300 = 85, / 4 = 21 rows per buffer, under auto's 32
      const tight = await small.run(spec(7, { writer: 'auto', numPartitions: 300 }), batches(4, 8192, 14)).status;
      expect(await writersOf(tight)).toEqual(new Set(['sort']));
      expect(tight.metrics).toMatchObject({ rows: 4 * 8192, batches: 4 });
      expect(tight.partitionRows.reduce((a, b) => a + b, 0)).toBe(4 * 8192);
    } finally {
      await small.close();
    }
    const roomy = await pool.run(spec(8, { writer: 'auto' }), batches(2, 2000, 15)).status;
    expect(await writersOf(roomy)).toEqual(new Set(['hash']));
    expect(await readShuffle([roomy])).toEqual(sortedRows(batches(2, 2000, 15)));
    expect(await files()).toEqual([...committed(7, 0), ...committed(8, 0)].sort());
  });

  test('the writer options cross to the worker: an unknown writer and a bad pageBytes fail the task and leave nothing; blockBytes and dictionaryUpdates take effect', async () => {
    await expect(pool.run(spec(3, { writer: 'radix' as WriterKind }), batches(1, 10, 12)).status).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT', where: {} });
    await expect(pool.run(spec(3, { writer: 'sort', pageBytes: 65 }), batches(1, 10, 12)).status).rejects.toMatchObject({
      code: 'CS_INVALID_ARGUMENT',
      message: expect.stringContaining('pageBytes'),
    });
    expect(await files()).toEqual([]);
    const [large, small] = await Promise.all([
      pool.run(spec(4, { writer: 'sort' }), batches(2, 3000, 13)).status,
      pool.run(spec(5, { writer: 'sort', blockBytes: 4096 }), batches(2, 3000, 13)).status,
    ]);
    expect(await storedBatches(small)).toBeGreaterThan(4 * (await storedBatches(large)));
    const replacements = await pool.run(spec(6, { outputSchema: DICTIONARY_SCHEMA, maxBatchRows: 64, dictionaryUpdates: 'replacement' }), dictionaryBatches(3, 400)).status;
    expect(await dictionaryDeltas(replacements, busiestPartition(replacements))).toEqual([false, false, false]);
  });
});

describe('one shuffle written by both writers', () => {
  test('a ReduceReader reads map outputs of both kinds, from both paths, as one stream: every row, once', async () => {
    const inputs = [0, 1, 2, 3].map((m) => batches(3, 1500, 20 + m));
    const expected = sortedRows(inputs.flat()); // before sending: the batches are handed over
    const kinds: WriterKind[] = ['hash', 'sort', 'sort', 'hash'];
    const statuses = await Promise.all([
      pool.run(spec(0, { writer: kinds[0] }), inputs[0]!).status,
      pool.run(spec(1, { writer: kinds[1] }), inputs[1]!).status,
      writeOnThisThread(2, inputs[2]!, { writer: kinds[2] }),
      writeOnThisThread(3, inputs[3]!, { writer: kinds[3] }),
    ]);
    for (const [m, status] of statuses.entries()) expect(await writersOf(status), `map ${m}`).toEqual(new Set([kinds[m]]));
    expect(await readShuffle(statuses)).toEqual(expected);
    expect(await readShuffle(statuses, { coalesceRows: 1000 }), 'coalesced across outputs of both kinds').toEqual(expected);
    for (let p = 0; p < PARTITIONS; p++) {
      const reader = new ReduceReader({ maps: statuses, partitions: p, concurrency: 2 });
      let rows = 0;
      for await (const batch of reader) rows += batch.numRows;
      expect(rows, `partition ${p}`).toBe(statuses.reduce((sum, s) => sum + s.partitionRows[p]!, 0));
      expect(reader.metrics.outputsRead).toBe(4);
    }
  });
});
