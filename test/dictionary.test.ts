/**
 * Dictionary columns: every partition's IPC stream carries standard dictionary batches
 * before the record batches that need them — the whole dictionary first, then deltas as
 * input batches bring new values, and a replacement when the indices would outgrow their
 * type — and every row decodes to its input value (our reader and arrow-js).
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Dictionary, Field, Int16, Int32, Int64, Int8, List, RecordBatch, Schema, Struct, Uint16, Uint32, Uint8, Utf8, Vector, makeData } from 'apache-arrow';
import { MessageHeader } from 'apache-arrow/enum';
import { Message, type DictionaryBatch } from 'apache-arrow/ipc/metadata/message';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { ShuffleWriter } from '../src/writer/shuffle-writer.js';
import { createShuffleWriter } from '../src/writer-kind.js';
import { buildColumn, utf8Column } from './support/columns.js';
import { buildAny } from './support/nested.js';
import { Rng } from './support/random.js';
import { collect, firstDifference, makeTempDir, readWithArrowJs, removeDir, runShuffle } from './support/shuffle-harness.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const TYPE = new Dictionary(new Utf8(), new Int32(), 7);
const SCHEMA = new Schema([new Field('k', new Int32(), false), new Field('d', TYPE, true)]);

/** A batch of rows (k = i, d = dictionary[indices[i]]). */
function batch(dictionary: Vector, indices: number[], schema = SCHEMA): RecordBatch {
  const type = schema.fields[1]!.type as Dictionary;
  const Indices = type.indices.ArrayType as unknown as new (values: number[]) => Int32Array;
  const keys = makeData({ type: new Int32(), length: indices.length, data: Int32Array.from(indices, (_, i) => i) });
  const d = makeData({ type, length: indices.length, data: new Indices(indices), dictionary } as never);
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: indices.length, nullCount: 0, children: [keys, d] }));
}

interface StreamMessage {
  type: 'schema' | 'dictionary' | 'batch';
  isDelta?: boolean;
  id?: number;
  rows?: number;
}

/** The messages of one IPC stream, in order (a byte-level walk of the encapsulated messages). */
function messagesOf(bytes: Uint8Array): StreamMessage[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: StreamMessage[] = [];
  for (let at = 0; at < bytes.byteLength; ) {
    expect(view.getUint32(at, true)).toBe(0xffffffff);
    const size = view.getInt32(at + 4, true);
    if (size === 0) break;
    const message = Message.decode(bytes.subarray(at + 8, at + 8 + size));
    if (message.headerType === MessageHeader.Schema) out.push({ type: 'schema' });
    else if (message.headerType === MessageHeader.DictionaryBatch) {
      const header = message.header() as DictionaryBatch;
      out.push({ type: 'dictionary', isDelta: header.isDelta, id: header.id, rows: header.length });
    } else out.push({ type: 'batch', rows: (message.header() as { length: number }).length });
    at += 8 + size + Number(message.bodyLength);
  }
  return out;
}

async function write(batches: RecordBatch[], numPartitions = 1, maxBatchRows?: number): Promise<string> {
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({ numPartitions, partitioning: numPartitions === 1 ? { kind: 'single' } : { kind: 'hash', keys: ['k'] }, outputPrefix: prefix, maxBatchRows, overwrite: true });
  for (const b of batches) await writer.write(b);
  await writer.finish();
  return prefix;
}

async function partitionMessages(prefix: string, p = 0): Promise<StreamMessage[]> {
  const reader = await ShuffleReader.open(prefix);
  try {
    return messagesOf(await reader.partitionBytes(p));
  } finally {
    await reader.close();
  }
}

async function decoded(prefix: string, p = 0): Promise<(string | null)[]> {
  const reader = await ShuffleReader.open(prefix);
  const out: (string | null)[] = [];
  try {
    for await (const b of reader.readPartition(p)) for (const v of b.getChild('d')!) out.push(v as string | null);
  } finally {
    await reader.close();
  }
  return out;
}

describe('the dictionary batches of a partition stream', () => {
  test('a dictionary every batch shares is sent once, whole, before the first record batch', async () => {
    const dictionary = new Vector([utf8Column(['a', 'b', 'c'])]);
    const prefix = await write([batch(dictionary, [0, 1, 2, 1]), batch(dictionary, [2, 2])], 1, 4);
    expect(await partitionMessages(prefix)).toEqual([
      { type: 'schema' },
      { type: 'dictionary', isDelta: false, id: 7, rows: 3 },
      { type: 'batch', rows: 4 },
      { type: 'batch', rows: 2 },
    ]);
    expect(await decoded(prefix)).toEqual(['a', 'b', 'c', 'b', 'c', 'c']);
  });

  test('a dictionary extended by a later batch (an IPC delta: the old chunks plus new ones) sends only the new values, as a delta', async () => {
    const first = new Vector([utf8Column(['a', 'b'])]);
    const extended = new Vector([...first.data, utf8Column(['c', 'd', 'e'])]);
    const prefix = await write([batch(first, [0, 1, 0, 1]), batch(extended, [4, 2, 0, 3])], 1, 4);
    const messages = await partitionMessages(prefix);
    expect(messages.filter((m) => m.type === 'dictionary')).toEqual([
      { type: 'dictionary', isDelta: false, id: 7, rows: 2 },
      { type: 'dictionary', isDelta: true, id: 7, rows: 3 },
    ]);
    // a batch's rows are emitted when its buffer fills, so the delta may come before or after the first batch, never after the second
    expect(messages[1]).toEqual({ type: 'dictionary', isDelta: false, id: 7, rows: 2 });
    expect(messages.findIndex((m) => m.isDelta === true)).toBeLessThan(messages.map((m) => m.type).lastIndexOf('batch'));
    expect(await decoded(prefix)).toEqual(['a', 'b', 'a', 'b', 'e', 'c', 'a', 'd']);
  });

  test('a rebuilt dictionary holding the same leading values is treated as an extension too (no values sent twice)', async () => {
    const prefix = await write([batch(new Vector([utf8Column(['a', 'b'])]), [1, 0]), batch(new Vector([utf8Column(['a', 'b', 'z'])]), [2, 1])], 1, 2);
    const dictionaries = (await partitionMessages(prefix)).filter((m) => m.type === 'dictionary');
    expect(dictionaries).toEqual([
      { type: 'dictionary', isDelta: false, id: 7, rows: 2 },
      { type: 'dictionary', isDelta: true, id: 7, rows: 1 },
    ]);
    expect(await decoded(prefix)).toEqual(['b', 'a', 'z', 'b']);
  });

  test('an unrelated dictionary is appended whole and its indices remapped', async () => {
    const prefix = await write([batch(new Vector([utf8Column(['a', 'b'])]), [1, 0]), batch(new Vector([utf8Column(['x', null, 'y'])]), [2, 0, 1])], 1, 2);
    const dictionaries = (await partitionMessages(prefix)).filter((m) => m.type === 'dictionary');
    expect(dictionaries).toEqual([
      { type: 'dictionary', isDelta: false, id: 7, rows: 2 },
      { type: 'dictionary', isDelta: true, id: 7, rows: 3 },
    ]);
    expect(await decoded(prefix)).toEqual(['b', 'a', 'y', 'x', null]);
  });

  test('uint8 indices: an unrelated dictionary of 200 values after one of 10, its rows at indices 128 and over remapped right (not read as negative)', async () => {
    const schema = new Schema([new Field('k', new Int32(), false), new Field('d', new Dictionary(new Utf8(), new Uint8(), 7), true)]);
    const values = (tag: string, n: number) => new Vector([utf8Column(Array.from({ length: n }, (_, i) => `${tag}${i}`))]);
    const prefix = await write([batch(values('a', 10), [9, 0], schema), batch(values('b', 200), [150, 199, 3, 128, 127], schema)]);
    expect(await decoded(prefix)).toEqual(['a9', 'a0', 'b150', 'b199', 'b3', 'b128', 'b127']);
  });

  test('a partition that first receives rows late still gets the whole dictionary first (replacement, then deltas)', async () => {
    const first = new Vector([utf8Column(['a', 'b'])]);
    const extended = new Vector([...first.data, utf8Column(['c'])]);
    // partition of k: keys 0..n-1 hash somewhere; partition 1 of 2 gets rows only from the second batch
    const schema = SCHEMA;
    const b1 = batch(first, [0, 1], schema);
    const b2 = batch(extended, [2, 2, 1, 0, 2, 1], schema);
    const outcome = await runShuffle(dir, { numPartitions: 3, partitioning: { kind: 'hash', keys: ['k'] }, maxBatchRows: 2 }, [b1, b2]);
    outcome.actual.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)).toBeNull());
    for (let p = 0; p < 3; p++) {
      if (outcome.result.partitionLengths[p] === 0) continue;
      const messages = await partitionMessages(outcome.prefix, p);
      const firstDictionary = messages.findIndex((m) => m.type === 'dictionary');
      expect(messages[firstDictionary]!.isDelta).toBe(false);
      expect(firstDictionary).toBeLessThan(messages.findIndex((m) => m.type === 'batch'));
    }
    const viaArrowJs = await readWithArrowJs(outcome.prefix);
    viaArrowJs.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `arrow-js partition ${p}`)).toBeNull());
  });

  test('int8 indices: dictionaries that together outgrow 127 values start over with a replacement dictionary batch, and every row stays right', async () => {
    const schema = new Schema([new Field('k', new Int32(), false), new Field('d', new Dictionary(new Utf8(), new Int8(), 3), true)]);
    const batches = Array.from({ length: 5 }, (_, b) => {
      const values = Array.from({ length: 60 }, (_, i) => `batch${b}-value${i}`);
      return batch(new Vector([utf8Column(values)]), Array.from({ length: 100 }, (_, i) => (i * 7 + b) % 60), schema);
    });
    const outcome = await runShuffle(dir, { numPartitions: 2, partitioning: { kind: 'hash', keys: ['k'] }, maxBatchRows: 64 }, batches);
    outcome.actual.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)).toBeNull());
    const viaArrowJs = await readWithArrowJs(outcome.prefix);
    viaArrowJs.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `arrow-js partition ${p}`)).toBeNull());
    const messages = await partitionMessages(outcome.prefix, 0);
    const replacements = messages.filter((m) => m.type === 'dictionary' && m.isDelta === false);
    expect(replacements.length).toBeGreaterThan(1); // the first dictionary, then at least one start-over
    for (const m of messages.filter((m) => m.type === 'dictionary')) expect(m.rows).toBeLessThanOrEqual(128);
  });
});

describe('dictionaries that outgrow their index type, or change on every batch', () => {
  const int8 = new Schema([new Field('k', new Int32(), false), new Field('d', new Dictionary(new Utf8(), new Int8(), 3), true)]);
  const words = (n: number, tag: string) => new Vector([utf8Column(Array.from({ length: n }, (_, i) => `${tag}${i}`))]);

  test.each(['hash', 'sort'] as const)('%s writer: an int8 dictionary of 129 values (its last one out of reach) keeps its rows: the columnar writer committed an empty dictionary', async (writer) => {
    const outcome = await runShuffle(dir, { numPartitions: 2, partitioning: { kind: 'hash', keys: ['k'] } }, [batch(words(129, 'w'), [0, 1, 127], int8)], 'map', writer);
    outcome.actual.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)).toBeNull());
  });

  test('an int8 dictionary extended past 128 values keeps the indices the batches use, with no new epoch', async () => {
    const first = words(100, 'a');
    const extended = new Vector([...first.data, ...words(100, 'b').data]);
    const prefix = await write([batch(first, [0, 99], int8), batch(extended, [127, 5], int8)]);
    expect((await partitionMessages(prefix)).filter((m) => m.type === 'dictionary')).toEqual([
      { type: 'dictionary', isDelta: false, id: 3, rows: 100 },
      { type: 'dictionary', isDelta: true, id: 3, rows: 100 },
    ]);
    expect(await decoded(prefix)).toEqual(['a0', 'a99', 'b27', 'a5']);
  });

  test('an unrelated dictionary each batch under a 256 KiB pool: every start-over lets its old dictionary batches go once spilled (their bytes stayed reserved until CS_MEMORY_LIMIT)', async () => {
    const pool = new MemoryPool(256 * 1024);
    const batches = Array.from({ length: 1200 }, (_, b) => batch(words(3, `batch ${b}: ${'a long dictionary value '.repeat(12)}`), [0, 1, 2, 1], int8));
    const outcome = await runShuffle(dir, { numPartitions: 4, partitioning: { kind: 'hash', keys: ['k'] }, memoryPool: pool }, batches);
    outcome.actual.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)).toBeNull());
    expect(outcome.result.spills).toBeGreaterThan(0);
    expect(pool.reserved).toBe(0);
  });

  test('replacement updates of a dictionary that grows by one value a batch: the memory held stays linear (the gathered values grew 1.5x a batch, 126 MB after 40)', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'out'), dictionaryUpdates: 'replacement', memoryPool: pool });
    const all = words(60, 'v');
    let peak = 0;
    for (let b = 1; b <= 60; b++) {
      await writer.write(batch(new Vector([all.data[0]!.slice(0, b)]), [b - 1]));
      peak = Math.max(peak, pool.reserved);
    }
    await writer.finish();
    expect(peak).toBeLessThan(4 * 1024 * 1024);
    expect(await decoded(join(dir, 'out'))).toEqual(Array.from({ length: 60 }, (_, i) => `v${i}`));
  });
});

test('Int16 indices and a dictionary nested in a struct round-trip with the same machinery', async () => {
  const inner = new Dictionary(new Utf8(), new Int16(), 9);
  const structType = new Struct([new Field('tag', inner, true), new Field('n', new Int32(), true)]);
  const schema = new Schema([new Field('k', new Int32(), false), new Field('s', structType, true)]);
  const dictionary = new Vector([utf8Column(['red', 'green', 'blue'])]);
  const rows = 50;
  const tags = makeData({ type: inner, length: rows, data: Int16Array.from({ length: rows }, (_, i) => i % 3), dictionary } as never);
  const ns = makeData({ type: new Int32(), length: rows, data: Int32Array.from({ length: rows }, (_, i) => i * i) });
  const s = makeData({ type: structType, length: rows, nullCount: 0, children: [tags, ns] });
  const keys = makeData({ type: new Int32(), length: rows, data: Int32Array.from({ length: rows }, (_, i) => i) });
  const b = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children: [keys, s] }));
  const outcome = await runShuffle(dir, { numPartitions: 4, partitioning: { kind: 'hash', keys: ['k'] } }, [b, b.slice(10, 30)]);
  outcome.actual.forEach((r, p) => expect(firstDifference(r, outcome.expected[p]!, `partition ${p}`)).toBeNull());
});

/**
 * The sort writer stores a dictionary column's decoded values in its rows; its reader gives
 * the column back with the schema's Dictionary type, a dictionary per batch of the block's
 * distinct values (deduplicated by their encoded bytes), and splits a block into several
 * batches when those would not fit the index type.
 */
describe('sort writer: dictionary columns come back as dictionaries', () => {
  async function sortShuffle(batches: RecordBatch[], numPartitions: number, extra: Record<string, unknown> = {}) {
    return runShuffle(dir, { numPartitions, partitioning: numPartitions === 1 ? { kind: 'single' } : { kind: 'hash', keys: ['k'] }, ...extra }, batches, 'map', 'sort');
  }

  async function batchesOf(prefix: string, p = 0): Promise<RecordBatch[]> {
    const reader = await ShuffleReader.open(prefix);
    const out: RecordBatch[] = [];
    try {
      for await (const b of reader.readPartition(p)) out.push(b);
    } finally {
      await reader.close();
    }
    return out;
  }

  test('the schema type, one dictionary of the distinct values (duplicates in the input dictionary merged), null rows and null values null', async () => {
    const dictionary = new Vector([utf8Column(['a', 'b', 'a', null, 'c'])]);
    const outcome = await sortShuffle([batch(dictionary, [0, 1, 2, 3, 1]), batch(dictionary, [4, 0])], 1);
    outcome.actual.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)).toBeNull());
    const [out] = await batchesOf(outcome.prefix);
    const d = out!.getChild('d')!;
    expect(String(d.type)).toBe(String(TYPE));
    expect((d.type as Dictionary).id).toBe(7);
    expect([...d]).toEqual(['a', 'b', 'a', null, 'b', 'c', 'a']);
    expect([...d.data[0]!.dictionary!]).toEqual(['a', 'b', 'c']); // first-seen order, each value once
  });

  test('int8 indices: a block of more than 128 distinct values is split into batches whose dictionaries each fit, every row right', async () => {
    const schema = new Schema([new Field('k', new Int32(), false), new Field('d', new Dictionary(new Utf8(), new Int8(), 3), true)]);
    const batches = Array.from({ length: 5 }, (_, b) => {
      const values = Array.from({ length: 100 }, (_, i) => `batch${b}-value${i}`);
      return batch(new Vector([utf8Column(values)]), Array.from({ length: 100 }, (_, i) => (i * 7 + b) % 100), schema);
    });
    // one partition, one block of all 500 rows (500 distinct values)
    const outcome = await sortShuffle(batches, 1, { maxBatchRows: 4096, blockBytes: 1 << 20 });
    expect(outcome.result.partitionBatches[0]).toBe(1);
    outcome.actual.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)).toBeNull());
    const out = await batchesOf(outcome.prefix);
    expect(out.map((b) => b.numRows)).toEqual([128, 128, 128, 116]);
    for (const b of out) {
      const dictionary = b.getChild('d')!.data[0]!.dictionary!;
      expect(dictionary.length).toBeLessThanOrEqual(128);
      expect(b.getChild('d')!.type.indices.bitWidth).toBe(8);
    }
  });

  test('uint8 indices split at 256 distinct values; repeated values do not count twice', async () => {
    const schema = new Schema([new Field('k', new Int32(), false), new Field('d', new Dictionary(new Utf8(), new Uint8(), 4), true)]);
    const values = Array.from({ length: 255 }, (_, i) => `v${i}`);
    const b1 = batch(new Vector([utf8Column(values)]), Array.from({ length: 600 }, (_, i) => i % 255), schema);
    const b2 = batch(new Vector([utf8Column(['new-1', 'new-2'])]), [0, 1, 0], schema);
    const outcome = await sortShuffle([b1, b2], 1, { maxBatchRows: 4096, blockBytes: 1 << 20 });
    outcome.actual.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)).toBeNull());
    // 600 rows of 255 values, then new-1 (the 256th value) still fits, new-2 does not
    expect((await batchesOf(outcome.prefix)).map((b) => b.numRows)).toEqual([601, 2]);
  });

  test('two columns of one dictionary id share one dictionary per batch; the coalescer may merge within it', async () => {
    const schema = new Schema([new Field('k', new Int32(), false), new Field('d', TYPE, true), new Field('e', TYPE, true)]);
    const dictionary = new Vector([utf8Column(['x', 'y', 'z'])]);
    const rows = 40;
    const keys = makeData({ type: new Int32(), length: rows, data: Int32Array.from({ length: rows }, (_, i) => i) });
    const d = makeData({ type: TYPE, length: rows, data: Int32Array.from({ length: rows }, (_, i) => i % 3), dictionary } as never);
    const e = makeData({ type: TYPE, length: rows, data: Int32Array.from({ length: rows }, (_, i) => (i + 1) % 2), dictionary } as never);
    const b = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children: [keys, d, e] }));
    const outcome = await sortShuffle([b], 3);
    outcome.actual.forEach((r, p) => expect(firstDifference(r, outcome.expected[p]!, `partition ${p}`)).toBeNull());
    for (let p = 0; p < 3; p++) {
      for (const out of await batchesOf(outcome.prefix, p)) expect(out.getChild('d')!.data[0]!.dictionary).toBe(out.getChild('e')!.data[0]!.dictionary);
    }
    const reader = await ShuffleReader.open(outcome.prefix);
    try {
      const coalesced = await collect(reader.readPartitions(0, 3, { coalesceRows: 1000 }));
      expect(firstDifference(coalesced.rows, outcome.expected.flat(), 'coalesced')).toBeNull();
    } finally {
      await reader.close();
    }
  });

  test.each(['hash', 'sort'] as const)('%s writer: two columns of one dictionary id holding different dictionaries are CS_UNSUPPORTED_TYPE before any row moves (the sort writer committed rows its reader refused)', async (writer) => {
    const schema = new Schema([new Field('k', new Int32(), false), new Field('d', TYPE, true), new Field('e', TYPE, true)]);
    const column = (values: string[]) => makeData({ type: TYPE, length: 2, data: Int32Array.of(0, 1), dictionary: new Vector([utf8Column(values)]) } as never);
    const keys = makeData({ type: new Int32(), length: 2, data: Int32Array.of(1, 2) });
    const b = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 2, nullCount: 0, children: [keys, column(['a', 'b']), column(['x', 'y'])] }));
    const w = await createShuffleWriter(writer, { numPartitions: 2, partitioning: { kind: 'hash', keys: ['k'] }, outputPrefix: join(dir, 'out') });
    await expect(w.write(b)).rejects.toMatchObject({ code: 'CS_UNSUPPORTED_TYPE', message: expect.stringContaining('share dictionary id 7 but hold different dictionaries') });
    await w.abort();
    expect(await readdir(dir)).toEqual([]);
  });

  test('dictionaries of nested values and nested in lists and structs, every index width', async () => {
    const rng = new Rng(77);
    for (const Index of [Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32]) {
      const valueType = new Struct([new Field('a', new Int32(), true), new Field('b', new List(new Field('item', new Utf8(), true)), true)]);
      const dict = new Dictionary(valueType, new Index() as Int32);
      const type = new List(new Field('item', new Struct([new Field('t', dict, true), new Field('u', new Dictionary(new Int64(), new Index() as Int32), true)]), true));
      const schema = new Schema([new Field('k', new Int64(), false), new Field('v', type, true)]);
      const dictionaries = new Map();
      const batches = [0, 1, 2].map(() => {
        const n = rng.int(1, 200);
        const k = buildColumn(new Int64(), n, { bitmap: false, nullRate: 0 }, rng);
        const v = buildAny(type, n, rng, { nullRate: 0.2, dictionaries });
        return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: [k, v] }));
      });
      const outcome = await sortShuffle(batches, 3, { overwrite: true, blockBytes: 1024 });
      outcome.actual.forEach((r, p) => expect(firstDifference(r, outcome.expected[p]!, `${Index.name} partition ${p}`)).toBeNull());
    }
  });
});

describe('a valid row whose index points outside its dictionary is refused by both writers, naming the column and row', () => {
  const abc = new Vector([makeData({ type: new Utf8(), length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, 1, 2, 3), data: new TextEncoder().encode('abc') })]);

  async function refusal(kind: 'hash' | 'sort', batches: RecordBatch[]): Promise<{ code?: string; message: string; files: string[] }> {
    const writer = await createShuffleWriter(kind, { numPartitions: 2, partitioning: { kind: 'hash', keys: ['k'] }, outputPrefix: join(dir, kind) });
    let error: { code?: string; message: string } = { message: 'no error' };
    try {
      for (const b of batches) await writer.write(b);
      await writer.finish();
    } catch (e) {
      error = e as { code?: string; message: string };
      await writer.abort(); // (the refused batch left the writer usable)
    }
    return { ...error, message: error.message, files: await readdir(dir) };
  }

  for (const kind of ['hash', 'sort'] as const) {
    test(`${kind}: past the end, negative, and after an unrelated dictionary (whose indices are remapped: it would have become value 0)`, async () => {
      for (const [batches, message] of [
        [[batch(abc, [0, 3, 1])], /row 1 of the dictionary column "d" points at value 3 of its 3-value dictionary/],
        [[batch(abc, [2, 0, -1])], /row 2 of the dictionary column "d" points at value -1 of its 3-value dictionary/],
        [[batch(abc, [0, 1]), batch(new Vector([utf8Column(['x', 'y'])]), [1, 0, 2])], /row 2 of the dictionary column "d" points at value 2 of its 2-value dictionary/],
      ] as const) {
        const outcome = await refusal(kind, [...batches]);
        expect(outcome.code, outcome.message).toBe('CS_INVALID_ARGUMENT');
        expect(outcome.message).toMatch(message);
        expect(outcome.files, 'nothing left behind').toEqual([]);
      }
    });

    test(`${kind}: a null row's index may hold anything; 64-bit indices and a dictionary in a struct are checked too`, async () => {
      const nullable = makeData({ type: TYPE, length: 3, nullCount: 1, nullBitmap: Uint8Array.of(0b101), data: Int32Array.of(2, 99, 0), dictionary: abc });
      const keys = makeData({ type: new Int32(), length: 3, data: Int32Array.of(0, 1, 2) });
      const ok = new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: 3, nullCount: 0, children: [keys, nullable] }));
      const outcome = await refusal(kind, [ok]);
      expect(outcome.message).toBe('no error');

      const wide = new Dictionary(new Utf8(), new Int64() as unknown as Int32, 8);
      const inner = new Struct([new Field('e', wide, true)]);
      const schema = new Schema([new Field('k', new Int32(), false), new Field('s', inner, true)]);
      const e = makeData({ type: wide, length: 3, nullCount: 0, data: BigInt64Array.of(0n, 2n, 2n ** 32n), dictionary: abc } as never);
      const s = makeData({ type: inner, length: 3, nullCount: 0, children: [e] });
      const nested = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 3, nullCount: 0, children: [keys, s] }));
      await removeDir(dir);
      dir = await makeTempDir();
      const refused = await refusal(kind, [nested]);
      expect(refused.code, refused.message).toBe('CS_INVALID_ARGUMENT');
      expect(refused.message).toMatch(/row 2 of the dictionary column "s.e" points at value 4294967296 of its 3-value dictionary/);
      expect(refused.files).toEqual([]);
    });
  }
});
