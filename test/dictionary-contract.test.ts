/**
 * The dictionary contract of a partition stream, as README.md's "Dictionaries" bullet states it:
 * dictionary columns keep their indices; every partition's stream carries the dictionary in
 * standard dictionary batches before the record batches that need it; new values that later
 * input batches bring go out as delta dictionary batches, or with `dictionaryUpdates:
 * 'replacement'` as whole replacement dictionaries; and the reduce side's coalescer merges
 * batches with unrelated dictionaries into one dictionary without changing a value.
 *
 * Each test here pins a gap found by a mutation sweep of the dictionary handling
 * (src/writer/dictionary-tracker.ts, src/writer/split-dictionary.ts, src/reader/held-dictionary.ts,
 * src/writer/dictionary-indices.ts): a small change to the source that no earlier test noticed;
 * each test was checked to fail against its change (docs/RELIABILITY.md, "The tests notice a
 * broken line: mutation sweeps").
 *
 * Expected values never come from the code under test: a partition's bytes are decoded by
 * apache-arrow's own reader (tableFromIPC) and compared with the input rows as plain JS values,
 * and the dictionary batches (id, isDelta, length, order) are read by walking the stream with
 * apache-arrow's MessageReader.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Bool, Dictionary, Field, Int16, Int32, Int8, MessageReader, RecordBatch, Schema, Struct, Uint16, Utf8, Utf8View, Vector,
  makeData, tableFromIPC, vectorFromArray, type Data, type DataType,
} from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { BatchCoalescer } from '../src/reader/batch-coalescer.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { DictionaryTracker } from '../src/writer/dictionary-tracker.js';
import { ShuffleWriter } from '../src/writer/shuffle-writer.js';
import { indicesOf, strings, type IndexType } from './support/dictionary-columns.js';

let dir: string;
beforeEach(async () => (dir = await mkdtemp(join(tmpdir(), 'cs-dict-contract-'))));
afterEach(async () => rm(dir, { recursive: true, force: true }));


/** A schema of a partition-id column `pid` (not written) and a dictionary column `d`. */
function schemaOf(type: Dictionary): Schema {
  return new Schema([new Field('pid', new Int32(), false), new Field('d', type, true)]);
}

function dictType(indices: IndexType = new Int32(), values: DataType = new Utf8(), id = 7): Dictionary {
  return new Dictionary(values, indices as Int32, id);
}

/** A batch whose row i has index indices[i] (null: a null row) into `dictionary`, sent to partition pids[i] (0 by default). */
function batchOf(type: Dictionary, dictionary: Vector, indices: readonly (number | null)[], pids?: readonly number[]): RecordBatch {
  const schema = schemaOf(type);
  const n = indices.length;
  const pid = makeData({ type: new Int32(), length: n, data: Int32Array.from({ length: n }, (_, i) => pids?.[i] ?? 0) });
  const d = indicesOf(type, dictionary, indices);
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: [pid, d] }));
}


/** The plain JS values a batch's rows hold in `d`. */
function inputValues(batches: readonly RecordBatch[], p = 0): unknown[] {
  const out: unknown[] = [];
  for (const b of batches) {
    const pids = b.getChild('pid')!;
    const d = b.getChild('d')!;
    const dictionary = d.data[0]!.dictionary!;
    const indices = d.data[0]!.values as ArrayLike<number | bigint>;
    for (let i = 0; i < b.numRows; i++) {
      if (pids.get(i) !== p) continue;
      out.push(d.isValid(i) ? plain(dictionary.get(Number(indices[i]!))) : null);
    }
  }
  return out;
}

function plain(v: unknown): unknown {
  if (v !== null && typeof v === 'object' && 'toJSON' in v) return JSON.parse(JSON.stringify(v));
  if (typeof v === 'bigint') return Number(v);
  return v;
}

interface Written {
  bytes: Uint8Array[];
  pool: MemoryPool;
}

/** Writes `batches` with partition ids from `pid`, uncompressed (apache-arrow reads no compressed IPC unaided); returns every partition's bytes. */
async function write(batches: readonly RecordBatch[], numPartitions = 1, options: Record<string, unknown> = {}): Promise<Written> {
  const prefix = join(dir, 'out');
  const pool = (options.memoryPool as MemoryPool | undefined) ?? new MemoryPool();
  const writer = await ShuffleWriter.create({ numPartitions, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, overwrite: true, memoryPool: pool, codec: 'none', ...options });
  for (const b of batches) await writer.write(b);
  await writer.finish();
  const reader = await ShuffleReader.open(prefix);
  try {
    const bytes: Uint8Array[] = [];
    for (let p = 0; p < numPartitions; p++) bytes.push(await reader.partitionBytes(p));
    return { bytes, pool };
  } finally {
    await reader.close();
  }
}

/** What apache-arrow reads in column `d` of a partition's stream, as plain JS values. */
function arrowValues(bytes: Uint8Array): unknown[] {
  if (bytes.byteLength === 0) return [];
  return [...tableFromIPC(bytes).getChild('d')!].map(plain);
}

interface Msg {
  kind: 'schema' | 'dictionary' | 'batch';
  id?: number;
  isDelta?: boolean;
  length?: number;
}

/** The stream's messages in order, walked with apache-arrow's MessageReader. */
function messagesOf(bytes: Uint8Array): Msg[] {
  const reader = new MessageReader(bytes);
  const out: Msg[] = [];
  for (let guard = 0; guard < 10_000; guard++) {
    const r = reader.next();
    if (r.done) break;
    const msg = r.value;
    if (msg.isSchema()) out.push({ kind: 'schema' });
    else if (msg.isDictionaryBatch()) {
      const h = msg.header();
      out.push({ kind: 'dictionary', id: Number(h.id), isDelta: h.isDelta, length: Number(h.data.length) });
    } else if (msg.isRecordBatch()) out.push({ kind: 'batch', length: Number(msg.header().length) });
    reader.readMessageBody(Number(msg.bodyLength));
  }
  return out;
}

function dictionaries(bytes: Uint8Array): Msg[] {
  return messagesOf(bytes).filter((m) => m.kind === 'dictionary');
}

/** An Int32 vector whose null slots hold `garbage` underneath (arrow leaves a null slot's bytes unspecified). */
function int32s(values: readonly (number | null)[], garbage = 0): Vector {
  const n = values.length;
  const bitmap = new Uint8Array((n + 7) >>> 3);
  values.forEach((v, i) => v !== null && (bitmap[i >>> 3]! |= 1 << (i & 7)));
  const nulls = values.filter((v) => v === null).length;
  const data = Int32Array.from(values, (v) => v ?? garbage);
  return new Vector([makeData({ type: new Int32(), length: n, nullCount: nulls, nullBitmap: nulls > 0 ? bitmap : null, data } as never) as Data]);
}

/** A Utf8View vector of short (inline) strings. */
function views(values: readonly string[]): Vector {
  const n = values.length;
  const bytes = new Uint8Array(16 * n);
  const dv = new DataView(bytes.buffer);
  values.forEach((v, i) => {
    const b = new TextEncoder().encode(v);
    if (b.length > 12) throw new Error('inline views only');
    dv.setInt32(16 * i, b.length, true);
    bytes.set(b, 16 * i + 4);
  });
  return new Vector([makeData({ type: new Utf8View(), length: n, views: bytes, variadicBuffers: [] } as never) as Data]);
}

/** Writes `batches` (one partition, one batch a payload) and checks that apache-arrow reads back every input value. */
async function roundTrip(batches: readonly RecordBatch[], options: Record<string, unknown> = {}): Promise<Msg[]> {
  const { bytes } = await write(batches, 1, { maxBatchRows: 1, ...options });
  expect(arrowValues(bytes[0]!)).toEqual(inputValues(batches));
  return dictionaries(bytes[0]!);
}

const DICT = (isDelta: boolean, length: number, id = 7): Msg => ({ kind: 'dictionary', id, isDelta, length });

describe('the writer: a dictionary that extends the previous one sends only its new values; any other is appended whole, its indices remapped', () => {
  test('a delta of a dictionary that was itself remapped (an unrelated dictionary, then its IPC extension) keeps pointing at the appended values', async () => {
    const type = dictType();
    const other = strings(['x', 'y']);
    const extended = new Vector([...other.data, ...strings(['z']).data]);
    const batches = [batchOf(type, strings(['a', 'b']), [1, 0]), batchOf(type, other, [1, 0]), batchOf(type, extended, [2, 0, 1])];
    expect(await roundTrip(batches)).toEqual([DICT(false, 2), DICT(true, 2), DICT(true, 1)]);
  });

  test('an extension by several chunks at once (arrow-js concatenates each IPC delta) sends each new value once, in order', async () => {
    const type = dictType();
    const first = strings(['a', 'b']);
    const extended = new Vector([...first.data, ...strings(['c', 'd']).data, ...strings(['e', 'f', 'g']).data]);
    const batches = [batchOf(type, first, [0, 1]), batchOf(type, extended, [2, 3, 4, 5, 6, 1])];
    expect(await roundTrip(batches)).toEqual([DICT(false, 2), DICT(true, 5)]);
  });

  test('a first dictionary of several chunks is sent whole, every chunk in place', async () => {
    const type = dictType();
    const chunked = new Vector([...strings(['a', 'b']).data, ...strings(['c']).data, ...strings(['d', 'e']).data]);
    expect(await roundTrip([batchOf(type, chunked, [4, 3, 2, 1, 0])])).toEqual([DICT(false, 5)]);
  });

  test('a new vector of the same values sends no dictionary batch at all (no empty delta)', async () => {
    const type = dictType();
    const batches = [0, 1, 2].map((b) => batchOf(type, strings(['a', 'b']), [b % 2, 1 - (b % 2)]));
    expect(await roundTrip(batches)).toEqual([DICT(false, 2)]);
  });

  test('a dictionary whose first chunk has the held one\'s length but other values is not an extension', async () => {
    const type = dictType();
    const next = new Vector([...strings(['x', 'y']).data, ...strings(['z']).data]);
    const batches = [batchOf(type, strings(['a', 'b']), [0, 1]), batchOf(type, next, [0, 1, 2])];
    expect(await roundTrip(batches)).toEqual([DICT(false, 2), DICT(true, 3)]);
  });

  describe('a rebuilt single-chunk dictionary counts as an extension only when every leading value is equal', () => {
    test('utf8: a prefix ("ab" then "abc") and a value of the same length ("ab" then "xy") are other values', async () => {
      const type = dictType();
      const batches = [
        batchOf(type, strings(['ab', 'c']), [0, 1]),
        batchOf(type, strings(['abc', 'c', 'd']), [0, 1, 2]),
        batchOf(type, strings(['xy', 'c', 'd', 'e']), [0, 3]),
      ];
      const sent = await roundTrip(batches);
      expect(sent[0]).toEqual(DICT(false, 2));
      expect(sent.slice(1).every((m) => m.isDelta === true)).toBe(true);
    });

    test('utf8: equal values but a null where a value was (and the other way round) are other values', async () => {
      const type = dictType();
      const batches = [batchOf(type, strings(['a', null]), [0, 1]), batchOf(type, strings(['a', 'x', 'y']), [1, 2, 0]), batchOf(type, strings(['a', null, 'y', 'q']), [1, 3])];
      await roundTrip(batches);
    });

    test('int32: values that differ only in a high byte (2 then 258) are other values', async () => {
      const type = dictType(new Int32(), new Int32());
      await roundTrip([batchOf(type, int32s([1, 2]), [0, 1]), batchOf(type, int32s([1, 258, 7]), [1, 2, 0])]);
    });

    test('int32: the bytes under a null value do not matter: a rebuilt dictionary with other garbage under its null sends only its new value', async () => {
      const type = dictType(new Int32(), new Int32());
      const sent = await roundTrip([batchOf(type, int32s([1, null], 5), [0, 1]), batchOf(type, int32s([1, null, 3], 9), [2, 1, 0])]);
      expect(sent).toEqual([DICT(false, 2), DICT(true, 1)]);
    });

    test('bool: [true, false] then [false, true, true] are other values', async () => {
      const type = dictType(new Int32(), new Bool());
      const bools = (v: boolean[]) => vectorFromArray(v, new Bool());
      await roundTrip([batchOf(type, bools([true, false]), [0, 1]), batchOf(type, bools([false, true, true]), [0, 1, 2])]);
    });

    test('utf8view: a prefix ("ab" then "abc") and a value of the same length ("ab" then "xy") are other values', async () => {
      const type = dictType(new Int32(), new Utf8View());
      await roundTrip([batchOf(type, views(['ab', 'c']), [0, 1]), batchOf(type, views(['abc', 'c', 'd']), [0, 1, 2]), batchOf(type, views(['xy', 'c', 'd', 'e']), [0, 3])]);
      await roundTrip([batchOf(type, views(['ab', 'c']), [0, 1]), batchOf(type, views(['xy', 'c', 'd']), [0, 1, 2])]);
    });

    test('utf8view: a rebuilt vector whose leading values are equal is an extension: only its new value goes out, as a delta', async () => {
      const type = dictType(new Int32(), new Utf8View());
      const sent = await roundTrip([batchOf(type, views(['ab', 'c']), [0, 1]), batchOf(type, views(['ab', 'c', 'd']), [2, 0])]);
      expect(sent).toEqual([DICT(false, 2), DICT(true, 1)]);
    });

    test('a shorter dictionary is never an extension, even a slice whose buffers go on with the held values', async () => {
      const type = dictType();
      const abc = strings(['a', 'b', 'c']);
      const batches = [batchOf(type, strings(['a', 'b', 'c']), [2]), batchOf(type, abc.slice(0, 2), [1, 0]), batchOf(type, strings(['x']), [0])];
      await roundTrip(batches);
    });

    test('a shorter dictionary of nulls is not an extension of a longer one (rows past its end are not read as nulls)', async () => {
      const type = dictType();
      await roundTrip([batchOf(type, strings([null, null]), [0, 1]), batchOf(type, strings([null]), [0]), batchOf(type, strings(['x']), [0])]);
    });

    test('a dictionary of several chunks is not an extension when only its first, shorter chunk matches the held values so far', async () => {
      const type = dictType();
      const next = new Vector([...strings([null]).data, ...strings(['x']).data]);
      await roundTrip([batchOf(type, strings([null, null]), [0, 1]), batchOf(type, next, [1, 0])]);
    });

    test('a dictionary of several chunks is compared whole: a first chunk sliced from buffers that go on with the held values is no extension', async () => {
      const type = dictType();
      const ab = strings(['a', 'b']);
      const next = new Vector([...ab.slice(0, 1).data, ...strings(['z', 'c']).data]);
      await roundTrip([batchOf(type, strings(['a', 'b']), [1, 0]), batchOf(type, next, [1, 2, 0])]);
    });

    test('struct values are never compared as flat: another struct dictionary of as many values is appended and remapped', async () => {
      const valueType = new Struct([new Field('n', new Int32(), true)]);
      const type = dictType(new Int32(), valueType);
      const structs = (ns: number[]) => vectorFromArray(ns.map((n) => ({ n })), valueType);
      await roundTrip([batchOf(type, structs([1, 2]), [0, 1]), batchOf(type, structs([3, 4, 5]), [0, 1, 2])]);
    });
  });

  test('uint16 indices: an unrelated dictionary of 40,000 values after one of 1, its rows at indices 32,768 and over remapped right (not read as negative)', async () => {
    const type = dictType(new Uint16());
    const big = strings(Array.from({ length: 40_000 }, (_, i) => `v${i}`));
    await roundTrip([batchOf(type, strings(['a']), [0]), batchOf(type, big, [39_999, 32_768, 32_767, 0])], { maxBatchRows: 8 });
  });

  test('int8 indices: remapped dictionaries that together hold exactly 128 values share one epoch; 129 start a new one (a replacement)', async () => {
    const type = dictType(new Int8());
    const words = (tag: string, n: number) => strings(Array.from({ length: n }, (_, i) => `${tag}${i}`));
    expect(await roundTrip([batchOf(type, words('a', 100), [99, 0]), batchOf(type, words('b', 28), [27, 0])])).toEqual([DICT(false, 100), DICT(true, 28)]);
    expect(await roundTrip([batchOf(type, words('a', 100), [99, 0]), batchOf(type, words('b', 29), [28, 0])])).toEqual([DICT(false, 100), DICT(false, 29)]);
  });

  test('int8 indices: after a start-over the dictionary counts from 0 again: a later unrelated dictionary is appended right after the new epoch\'s values', async () => {
    const type = dictType(new Int8());
    const words = (tag: string, n: number) => strings(Array.from({ length: n }, (_, i) => `${tag}${i}`));
    const batches = [batchOf(type, words('a', 100), [99, 0]), batchOf(type, words('b', 29), [28, 0]), batchOf(type, words('c', 5), [4, 0, 2])];
    expect(await roundTrip(batches)).toEqual([DICT(false, 100), DICT(false, 29), DICT(true, 5)]);
  });
});

describe('the reduce side: the coalescer merges batches with unrelated dictionaries into one dictionary, every value kept', () => {
  /** Coalesces `batches` (target `rows` rows) and returns the values of `d` per output batch. */
  function coalesce(batches: readonly RecordBatch[], rows: number): unknown[][] {
    const coalescer = new BatchCoalescer(batches[0]!.schema, rows);
    const out = batches.flatMap((b) => coalescer.push(b));
    const last = coalescer.finish();
    if (last !== null) out.push(last);
    return out.map((b) => [...b.getChild('d')!].map(plain));
  }

  test('two unrelated dictionaries of the same length are merged, not taken as one (indices remapped)', () => {
    const type = dictType();
    const batches = [batchOf(type, strings(['a', 'b']), [0, 1]), batchOf(type, strings(['x', 'y']), [1, 0])];
    expect(coalesce(batches, 100).flat()).toEqual(inputValues(batches));
  });

  test('a dictionary that shares only its first chunk with the held one is merged, not taken as its extension', () => {
    const type = dictType();
    const head = strings(['a']);
    const held = new Vector([...head.data, ...strings(['b']).data]);
    const other = new Vector([...head.data, ...strings(['z']).data]);
    const batches = [batchOf(type, held, [0, 1]), batchOf(type, other, [1, 0])];
    expect(coalesce(batches, 100).flat()).toEqual(inputValues(batches));
  });

  test('a dictionary of several chunks is gathered chunk after chunk', () => {
    const type = dictType();
    const chunked = new Vector([...strings(['p', 'q']).data, ...strings(['r']).data, ...strings(['s', 't']).data]);
    const batches = [batchOf(type, strings(['a', 'b']), [0, 1]), batchOf(type, chunked, [4, 3, 2, 1, 0])];
    expect(coalesce(batches, 100).flat()).toEqual(inputValues(batches));
  });

  test('after a flush, the next held dictionary is gathered before an unrelated one is appended to it', () => {
    const type = dictType();
    const words = ['a', 'b', 'c', 'd', 'e', 'f'];
    // target 4 rows: batches 0 and 1 merge and flush when batch 2 comes; batches 2 and 3 merge again
    const batches = words.map((w, i) => batchOf(type, strings([`${w}0`, `${w}1`]), [i % 2, 1 - (i % 2)]));
    const out = coalesce(batches, 4);
    expect(out.flat()).toEqual(inputValues(batches));
    expect(out.length).toBeLessThan(batches.length);
  });

  test('held values gathered again after a flush carry no nulls or bytes of the previous ones', () => {
    const type = dictType();
    const long = 'x'.repeat(40);
    const dictionaries = [[`${long}1`, null, `${long}2`], ['p', 'q'], ['r', null], ['s'], [null, 't'], ['u', 'v']];
    const batches = dictionaries.map((d, i) => batchOf(type, strings(d), [0, d.length - 1, i % d.length]));
    const out = coalesce(batches, 6);
    expect(out.flat()).toEqual(inputValues(batches));
    expect(out.length).toBeLessThan(batches.length);
  });
});

describe('every partition stream gets the dictionary before the record batches that need it', () => {
  test('a first batch whose dictionary is empty (every row null) still sends a dictionary batch before its record batch', async () => {
    const type = dictType();
    const batches = [batchOf(type, strings([]), [null, null]), batchOf(type, strings(['a']), [0, null])];
    const { bytes } = await write(batches, 1, { maxBatchRows: 1 });
    const kinds = messagesOf(bytes[0]!);
    expect(kinds.slice(0, 3)).toEqual([{ kind: 'schema' }, DICT(false, 0), { kind: 'batch', length: 1 }]);
    expect(arrowValues(bytes[0]!)).toEqual([null, null, 'a', null]);
  });

  test.each(['delta', 'replacement'] as const)('%s updates: a partition that first receives rows after the dictionary grew twice gets it whole, once, before its first batch', async (updates) => {
    const type = dictType();
    const first = strings(['a']);
    const second = new Vector([...first.data, ...strings(['b']).data]);
    const third = new Vector([...second.data, ...strings(['c']).data]);
    const batches = [batchOf(type, first, [0], [0]), batchOf(type, second, [1], [0]), batchOf(type, third, [2, 0, 1], [0, 1, 1])];
    const { bytes } = await write(batches, 2, { maxBatchRows: 1, dictionaryUpdates: updates });
    for (let p = 0; p < 2; p++) expect(arrowValues(bytes[p]!)).toEqual(inputValues(batches, p));
    // the late partition: the dictionary as it is now, then its one record batch
    const whole = updates === 'delta' ? [DICT(false, 1), DICT(true, 1), DICT(true, 1)] : [DICT(false, 3)];
    const late = messagesOf(bytes[1]!);
    expect(late.slice(0, 1 + whole.length)).toEqual([{ kind: 'schema' }, ...whole]);
    expect(late.slice(1 + whole.length).map((m) => m.kind)).toEqual(late.slice(1 + whole.length).map(() => 'batch'));
    expect(late.length).toBeGreaterThan(1 + whole.length);
    // the early partition: each value sent once (deltas), or every update a whole dictionary, each longer than the last
    const early = dictionaries(bytes[0]!);
    if (updates === 'delta') expect(early).toEqual([DICT(false, 1), DICT(true, 1), DICT(true, 1)]);
    else {
      expect(early.every((m) => m.isDelta === false)).toBe(true);
      expect(early.map((m) => m.length)).toEqual([...new Set(early.map((m) => m.length))].sort());
      expect(early.at(-1)).toEqual(DICT(false, 3));
    }
  });

  test('replacement updates: a dictionary that does not change is not sent again before later batches', async () => {
    const type = dictType();
    const dictionary = strings(['a', 'b']);
    const batches = [0, 1, 0, 1].map((i) => batchOf(type, dictionary, [i]));
    const { bytes } = await write(batches, 1, { maxBatchRows: 1, dictionaryUpdates: 'replacement' });
    expect(dictionaries(bytes[0]!)).toEqual([DICT(false, 2)]);
    expect(arrowValues(bytes[0]!)).toEqual(['a', 'b', 'a', 'b']);
  });

  test('two dictionary columns of different ids: each has its own dictionary batches, both before the first record batch', async () => {
    const t1 = dictType(new Int32(), new Utf8(), 1);
    const t2 = dictType(new Int16(), new Utf8(), 2);
    const schema = new Schema([new Field('pid', new Int32(), false), new Field('d', t1, true), new Field('e', t2, true)]);
    const make = (d1: Vector, i1: number[], d2: Vector, i2: number[]) => {
      const n = i1.length;
      const pid = makeData({ type: new Int32(), length: n, data: new Int32Array(n) });
      const a = makeData({ type: t1, length: n, data: Int32Array.from(i1), dictionary: d1 } as never) as Data;
      const b = makeData({ type: t2, length: n, data: Int16Array.from(i2), dictionary: d2 } as never) as Data;
      return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: [pid, a, b] }));
    };
    const batches = [make(strings(['a', 'b']), [1, 0], strings(['x']), [0, 0]), make(strings(['c']), [0, 0], strings(['y', 'z']), [1, 0])];
    const { bytes } = await write(batches, 1, { maxBatchRows: 2 });
    const table = tableFromIPC(bytes[0]!);
    expect([...table.getChild('d')!]).toEqual(['b', 'a', 'c', 'c']);
    expect([...table.getChild('e')!]).toEqual(['x', 'x', 'z', 'y']);
    const msgs = messagesOf(bytes[0]!);
    const firstBatch = msgs.findIndex((m) => m.kind === 'batch');
    expect(new Set(msgs.slice(1, firstBatch).map((m) => m.id))).toEqual(new Set([1, 2]));
  });
});

describe('the writer refuses dictionary input it cannot write', () => {
  test('of several valid rows pointing outside their dictionary, the first is named (row 1, not row 3)', async () => {
    const type = dictType();
    const batch = batchOf(type, strings(['a', 'b']), [0, 5, 1, 9]);
    const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: join(dir, 'out') });
    await expect(writer.write(batch)).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('row 1 of the dictionary column "d" points at value 5') });
    await writer.abort();
  });

  test('two fields of one struct that share a dictionary id but hold different dictionaries are CS_UNSUPPORTED_TYPE', async () => {
    const inner = dictType(new Int32(), new Utf8(), 5);
    const structType = new Struct([new Field('x', inner, true), new Field('y', inner, true)]);
    const schema = new Schema([new Field('pid', new Int32(), false), new Field('s', structType, true)]);
    const column = (values: string[]) => makeData({ type: inner, length: 2, data: Int32Array.of(0, 1), dictionary: strings(values) } as never) as Data;
    const s = makeData({ type: structType, length: 2, nullCount: 0, children: [column(['a', 'b']), column(['p', 'q'])] });
    const pid = makeData({ type: new Int32(), length: 2, data: new Int32Array(2) });
    const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 2, nullCount: 0, children: [pid, s] }));
    const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: join(dir, 'out') });
    await expect(writer.write(batch)).rejects.toMatchObject({ code: 'CS_UNSUPPORTED_TYPE', message: expect.stringContaining('share dictionary id 5') });
    await writer.abort();
  });
});

describe('memory: the dictionary batches and gathered values are let go', () => {
  test('replacement updates with a start-over every few batches under a 256 KiB pool: each epoch\'s gathered values are released at the start-over', async () => {
    const pool = new MemoryPool(256 * 1024);
    const type = dictType(new Int8());
    const long = 'a long dictionary value '.repeat(12);
    const batches = Array.from({ length: 500 }, (_, b) => batchOf(type, strings([`${b}a ${long}`, `${b}b ${long}`, `${b}c ${long}`]), [0, 1, 2, 1], [0, 1, 2, 3]));
    const { bytes } = await write(batches, 4, { memoryPool: pool, dictionaryUpdates: 'replacement' });
    for (let p = 0; p < 4; p++) expect(arrowValues(bytes[p]!)).toEqual(inputValues(batches, p));
    expect(pool.reserved).toBe(0);
  });

  test('inside finish, the writer\'s reservation stops counting the dictionary batches when the tracker lets them go (200 KB of values)', async () => {
    const pool = new MemoryPool();
    const type = dictType();
    const values = Array.from({ length: 2000 }, (_, i) => `${i} ${'x'.repeat(100)}`);
    const batches = [batchOf(type, strings(values.slice(0, 1000)), [0, 999]), batchOf(type, strings(values.slice(1000)), [0, 999])];
    const seen: number[] = [];
    const release = DictionaryTracker.prototype.release;
    DictionaryTracker.prototype.release = async function (this: DictionaryTracker) {
      seen.push(pool.reserved);
      await release.call(this);
      seen.push(pool.reserved);
    };
    try {
      const { bytes } = await write(batches, 1, { memoryPool: pool });
      expect(arrowValues(bytes[0]!)).toEqual(inputValues(batches));
    } finally {
      DictionaryTracker.prototype.release = release;
    }
    expect(seen).toHaveLength(2);
    expect(seen[0]! - seen[1]!).toBeGreaterThanOrEqual(2000 * 100);
  });
});
