/**
 * BatchCoalescer with dictionary columns: batches with unrelated dictionaries
 * (the sort writer's blocks, other map outputs) are merged too. The merged
 * batch has one dictionary chunk, the held values then the batch's, and the
 * batch's indices shifted past the held values; a batch whose dictionary the
 * index type cannot address together with the held one comes after a flush.
 */
import { Dictionary, Field, Int32, Int8, List, RecordBatch, Schema, Struct, Uint8, Utf8, Vector, makeData, type Data } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { BatchCoalescer } from '../src/reader/batch-coalescer.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { utf8Column } from './support/columns.js';
import { collect, firstDifference, makeTempDir, removeDir, runShuffle } from './support/shuffle-harness.js';

const TYPE = new Dictionary(new Utf8(), new Int32(), 3);
const SCHEMA = new Schema([new Field('d', TYPE, true)]);

/** A batch of one dictionary column: dictionary[indices[i]], null where `nulls` has i (its index is then garbage). */
function batch(values: string[], indices: number[], nulls: number[] = [], schema = SCHEMA): RecordBatch {
  const type = schema.fields[0]!.type as Dictionary;
  const Indices = type.indices.ArrayType as unknown as new (values: number[]) => Int32Array;
  const nullBitmap = new Uint8Array(Math.ceil(indices.length / 8)).fill(0xff);
  for (const i of nulls) nullBitmap[i >> 3]! &= ~(1 << (i & 7));
  const d = makeData({ type, length: indices.length, nullCount: nulls.length, nullBitmap, data: new Indices(indices), dictionary: new Vector([utf8Column(values)]) } as never);
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: indices.length, nullCount: 0, children: [d] }));
}

function coalesce(batches: RecordBatch[], targetRows = 1000): RecordBatch[] {
  const coalescer = new BatchCoalescer(batches[0]!.schema, targetRows);
  const out = batches.flatMap((b) => coalescer.push(b));
  const last = coalescer.finish();
  return last === null ? out : [...out, last];
}

function dictionaryColumn(b: RecordBatch): Data {
  return b.getChildAt(0)!.data[0]!;
}

const valuesOf = (b: RecordBatch) => [...b.getChildAt(0)!].map((v) => (v === null ? null : String(v)));

describe('BatchCoalescer: batches with unrelated dictionaries', () => {
  test('worked example: [a, b] 0 1 1 then [b, c, d] 2 0 give one batch, dictionary [a, b, b, c, d], indices 0 1 1 4 2', () => {
    const out = coalesce([batch(['a', 'b'], [0, 1, 1]), batch(['b', 'c', 'd'], [2, 0])]);
    expect(out).toHaveLength(1);
    const data = dictionaryColumn(out[0]!);
    expect([...(data.values as Int32Array)]).toEqual([0, 1, 1, 4, 2]);
    // one chunk: an IPC writer sends it as one dictionary batch, no delta
    expect(data.dictionary!.data).toHaveLength(1);
    expect([...data.dictionary!]).toEqual(['a', 'b', 'b', 'c', 'd']);
    expect(valuesOf(out[0]!)).toEqual(['a', 'b', 'b', 'd', 'b']);
  });

  test('a third batch is appended after the gathered values; null rows stay null whatever their index', () => {
    const out = coalesce([batch(['a'], [0, 0]), batch(['b', 'c'], [1, 9, 0], [1]), batch(['d'], [0, -5], [1])]);
    expect(out).toHaveLength(1);
    expect([...dictionaryColumn(out[0]!).dictionary!]).toEqual(['a', 'b', 'c', 'd']);
    expect(valuesOf(out[0]!)).toEqual(['a', 'a', 'c', null, 'b', 'd', null]);
  });

  test('a batch whose dictionary extends the held one (a delta) keeps its indices and its dictionary vector', () => {
    const first = batch(['a', 'b'], [0, 1]);
    const held = dictionaryColumn(first).dictionary!;
    const extended = held.concat(new Vector([utf8Column(['c'])]));
    const second = new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: 2, nullCount: 0, children: [makeData({ type: TYPE, length: 2, data: Int32Array.of(2, 0), dictionary: extended } as never)] }));
    const out = coalesce([first, second]);
    expect(out).toHaveLength(1);
    expect(dictionaryColumn(out[0]!).dictionary).toBe(extended);
    expect(valuesOf(out[0]!)).toEqual(['a', 'b', 'c', 'a']);
  });

  test('a dictionary that is another Vector over the same chunks keeps its indices: nothing is appended', () => {
    const first = batch(['a', 'b'], [0, 1]);
    const same = new Vector(dictionaryColumn(first).dictionary!.data);
    const second = new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: 2, nullCount: 0, children: [makeData({ type: TYPE, length: 2, data: Int32Array.of(1, 0), dictionary: same } as never)] }));
    const out = coalesce([first, second]);
    expect(out).toHaveLength(1);
    expect(dictionaryColumn(out[0]!).dictionary!.length).toBe(2);
    expect(valuesOf(out[0]!)).toEqual(['a', 'b', 'b', 'a']);
  });

  test('int8 indices address 128 values: 100 and 28 merge, 100 and 29 are flushed apart, every value right', () => {
    const schema = new Schema([new Field('d', new Dictionary(new Utf8(), new Int8(), 3), true)]);
    const values = (tag: string, n: number) => Array.from({ length: n }, (_, i) => `${tag}${i}`);
    const a = batch(values('a', 100), [99, 0], [], schema);
    const fits = batch(values('b', 28), [27, 1], [], schema);
    const tooMany = batch(values('c', 29), [28, 2], [], schema);
    const merged = coalesce([a, fits]);
    expect(merged.map((b) => b.numRows)).toEqual([4]);
    expect(dictionaryColumn(merged[0]!).dictionary!.length).toBe(128);
    expect(valuesOf(merged[0]!)).toEqual(['a99', 'a0', 'b27', 'b1']);
    const apart = coalesce([a, tooMany]);
    expect(apart.map((b) => b.numRows)).toEqual([2, 2]);
    expect(apart.flatMap(valuesOf)).toEqual(['a99', 'a0', 'c28', 'c2']);
    expect(dictionaryColumn(apart[1]!).dictionary!.length).toBe(29);
  });

  test('uint8 indices: a batch of 200 values after a held one of 10 keeps its rows at indices 128 and over', () => {
    const schema = new Schema([new Field('d', new Dictionary(new Utf8(), new Uint8(), 3), true)]);
    const values = (tag: string, n: number) => Array.from({ length: n }, (_, i) => `${tag}${i}`);
    const out = coalesce([batch(values('a', 10), [9], [], schema), batch(values('b', 200), [150, 199, 128, 127], [], schema)]);
    expect(out).toHaveLength(1);
    expect(valuesOf(out[0]!)).toEqual(['a9', 'b150', 'b199', 'b128', 'b127']);
  });

  test('a dictionary nested in a list of structs merges the same way', () => {
    const inner = new Field('s', new Struct([new Field('d', TYPE, true)]), true);
    const schema = new Schema([new Field('l', new List(inner), true)]);
    const listOf = (values: string[], indices: number[], lengths: number[]) => {
      const d = makeData({ type: TYPE, length: indices.length, data: Int32Array.from(indices), dictionary: new Vector([utf8Column(values)]) } as never);
      const s = makeData({ type: inner.type, length: indices.length, nullCount: 0, children: [d] });
      const valueOffsets = Int32Array.from({ length: lengths.length + 1 }, (_, i) => lengths.slice(0, i).reduce((x, y) => x + y, 0));
      const l = makeData({ type: schema.fields[0]!.type, length: lengths.length, nullCount: 0, valueOffsets, child: s } as never);
      return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: lengths.length, nullCount: 0, children: [l] }));
    };
    const out = coalesce([listOf(['x', 'y'], [1, 0, 1], [2, 1]), listOf(['z'], [0, 0], [0, 2])]);
    expect(out).toHaveLength(1);
    const rows = [...out[0]!.getChildAt(0)!].map((list) => (list === null ? null : [...list].map((s) => String(s.d))));
    expect(rows).toEqual([['y', 'x'], ['y'], [], ['z', 'z']]);
  });
});

describe('reading with coalesceRows', () => {
  let dir = '';
  beforeEach(async () => (dir = await makeTempDir()));
  afterEach(async () => removeDir(dir));

  test("the sort writer's blocks, each with a dictionary of its own, come back as one batch with every value right", async () => {
    const schema = new Schema([new Field('k', new Int32(), false), new Field('d', TYPE, true)]);
    const input = Array.from({ length: 8 }, (_, b) => {
      const rows = 500;
      const keys = makeData({ type: new Int32(), length: rows, data: Int32Array.from({ length: rows }, (_, i) => b * rows + i) });
      const d = makeData({ type: TYPE, length: rows, data: Int32Array.from({ length: rows }, (_, i) => (i * 7) % 50), dictionary: new Vector([utf8Column(Array.from({ length: 50 }, (_, i) => `v${b}-${i}`))]) } as never);
      return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children: [keys, d] }));
    });
    // small blocks: the partition is stored as many blocks
    const outcome = await runShuffle(dir, { numPartitions: 1, partitioning: { kind: 'single' }, blockBytes: 4096 }, input, 'map', 'sort');
    const reader = await ShuffleReader.open(outcome.prefix);
    try {
      const plain = await collect(reader.readPartition(0));
      expect(plain.sizes.length).toBeGreaterThan(4);
      const { rows, sizes } = await collect(reader.readPartition(0, { coalesceRows: 10_000 }));
      expect(firstDifference(rows, outcome.expected[0]!)).toBeNull();
      expect(sizes).toEqual([4000]);
    } finally {
      await reader.close();
    }
  });
});
