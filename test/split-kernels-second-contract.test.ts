/**
 * The split kernels' second contract (thirty-third sweep): the boundaries of their fast paths,
 * stated as claims about what arrow-js reads back. Rows are gathered in an order the test picks
 * (gatherRows: one partition, any row ids) or appended chunk after chunk (concatenateChunks: each
 * chunk lands at the row the previous ones filled), or written through a shuffle writer, and every
 * output row is compared with arrow-js's own value of the input row it came from (`Vector.get`,
 * made canonical by test/support/js-values.ts), never with what the code under test computes.
 */
import {
  Binary,
  Bool,
  Field,
  Decimal,
  FixedSizeBinary,
  Int16,
  Int32,
  Int64,
  Int8,
  LargeBinary,
  LargeUtf8,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  makeVector,
  Utf8,
  Utf8View,
  type Data,
  type DataType,
} from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { dataFromBuffers } from '../src/format/ipc-reader.js';
import type { FieldNodeInfo } from '../src/format/ipc-message.js';
import { IdentityRows } from '../src/writer/append-rows.js';
import { ColumnBuffer } from '../src/writer/column-buffer.js';
import { columnLayoutOf } from '../src/writer/column-layout.js';
import { prepareSourceColumn } from '../src/writer/source-column.js';
import { setBits } from '../src/writer/split-bits.js';
import { splitColumn } from '../src/writer/split-column.js';
import { concatenateChunks, gatherRows } from '../src/writer/gather-rows.js';
import { ScratchSelections } from '../src/writer/split-plan.js';
import { buildColumn } from './support/columns.js';
import { canonical, valueAt } from './support/js-values.js';
import { Rng } from './support/random.js';
import { firstDifference, makeTempDir, removeDir, runShuffle } from './support/shuffle-harness.js';
import { viewData } from './support/view-columns.js';

/** Row i of `data` as arrow-js reads it, canonical. */
function jsOf(data: Data): (i: number) => string {
  const vector = makeVector(data);
  return (i) => canonical(valueAt(vector, i));
}

/** Gathers `rowIds` of `data` through the writer's split and requires each row to read back as arrow-js reads the input row. */
function expectGathered(data: Data, rowIds: readonly number[]): void {
  const out = gatherRows(data, data.type, Uint32Array.from(rowIds), rowIds.length, new ScratchSelections());
  expect(out.length).toBe(rowIds.length);
  const got = jsOf(out);
  const want = jsOf(data);
  expect(rowIds.map((_, i) => got(i))).toEqual(rowIds.map((r) => want(r)));
}

/** Appends `chunks` one after another through the writer's split and requires the rows to read back as arrow-js reads the chunks'. */
function expectConcatenated(chunks: readonly Data[]): void {
  const type = chunks[0]!.type;
  const out = concatenateChunks(chunks, type, new IdentityRows(), new ScratchSelections());
  const want = chunks.flatMap((c) => {
    const get = jsOf(c);
    return Array.from({ length: c.length }, (_, i) => get(i));
  });
  expect(out.length).toBe(want.length);
  const got = jsOf(out);
  expect(Array.from({ length: want.length }, (_, i) => got(i))).toEqual(want);
}

const range = (from: number, count: number): number[] => Array.from({ length: count }, (_, i) => from + i);

/** Row-id patterns around the 16-row block threshold: runs, runs broken at one id, runs of one. */
const PATTERNS: [string, number[]][] = [
  ['a run of 20 adjacent ids', range(5, 20)],
  ['a run of exactly 16', range(9, 16)],
  ['a run of 15 (just under the block size)', range(9, 15)],
  ['a run of 20 whose second id is out of place', [5, 9, ...range(7, 18)]],
  ['a run of 20 whose next-to-last id is out of place', [...range(5, 18), 3, 24]],
  ['a run of 20 whose last id is far off', [...range(5, 19), 40]],
  ['a run of 20 off by one at its last id', [...range(5, 19), 25]],
  ['a run of 20 in descending order', range(5, 20).reverse()],
  ['runs of one id', [40, 0, 33, 1, 17, 2, 44, 3]],
  ['a run of 17 at the very end of the column', range(47 - 17, 17)],
  ['one id repeated 18 times', new Array(18).fill(12)],
  ['every row then every row again', [...range(0, 47), ...range(0, 47)]],
];

describe('rows gathered in a given order: adjacent runs copied as blocks, near-runs row by row', () => {
  const types: DataType[] = [
    new Int8(),
    new Int16(),
    new Int32(),
    new Int64(),
    new Decimal(2, 38, 128),
    new Decimal(0, 76, 256),
    new FixedSizeBinary(3),
    new FixedSizeBinary(5),
    new FixedSizeBinary(6),
    new FixedSizeBinary(7),
    new FixedSizeBinary(10),
    new FixedSizeBinary(12),
    new Bool(),
    new Utf8(),
    new LargeBinary(),
    new Utf8View(),
  ];
  test.each(types)('%s: every pattern of row ids reads back the input rows it names, whole and from a slice', (type) => {
    const rng = new Rng(101);
    const whole = buildColumn(type, 50, { bitmap: true, nullRate: 0.25 }, rng);
    for (const data of [whole.slice(0, 47), whole.slice(3, 47)]) {
      for (const [, ids] of PATTERNS) expectGathered(data, ids);
    }
  });
});

describe('chunks appended at every bit of a byte, each a slice starting at every bit of a byte', () => {
  // chunk lengths 1..9 put each chunk's first row at a destination bit that walks through 0..7;
  // each chunk is a slice starting at bit (k * 3) % 8 of its own bitmap and values
  const lengths = [3, 1, 2, 5, 7, 1, 9, 4, 8, 6, 1, 1, 17, 2, 3, 20, 5];
  const types: DataType[] = [new Bool(), new Int8(), new Int16(), new Int32(), new Int64(), new Decimal(2, 38, 128), new Decimal(0, 76, 256), new Utf8(), new LargeUtf8(), new Utf8View(), new FixedSizeBinary(5)];
  test.each(types)('%s: with nulls, without a bitmap, and the two alternating', (type) => {
    const rng = new Rng(202);
    for (const mode of ['nulls', 'no bitmap', 'alternating'] as const) {
      const chunks = lengths.map((n, k) => {
        const skip = (k * 3) % 8;
        const nulls = mode === 'nulls' || (mode === 'alternating' && k % 2 === 0);
        const whole = buildColumn(type, n + skip + 2, nulls ? { bitmap: true, nullRate: 0.4 } : { bitmap: false, nullRate: 0 }, rng);
        return whole.slice(skip, n);
      });
      expectConcatenated(chunks);
    }
  });
});

/**
 * Rows `rowIds` of `data` split straight into a fresh partition buffer whose data buffer has only
 * `dataBytes` bytes (a caller that did not size it: the kernels grow it on the way), read back
 * by arrow-js from the buffer's snapshot.
 */
function splitUnsized(data: Data, rowIds: readonly number[], dataBytes: number): Data {
  const layout = columnLayoutOf(new Field('v', data.type, true));
  const dst = new ColumnBuffer(layout);
  dst.resize(rowIds.length, 0, dataBytes);
  splitColumn(prepareSourceColumn(data, layout), Uint32Array.from(rowIds), 0, rowIds.length, dst, 0, rowIds.length);
  const nodes: FieldNodeInfo[] = [];
  const buffers: Uint8Array[] = [];
  dst.snapshot(rowIds.length, nodes, buffers, true);
  return dataFromBuffers(data.type, nodes, buffers);
}

const encoder = new TextEncoder();

/** A Utf8 / Binary / Large* column of these values, its data buffer exactly their bytes (no slack after the last value). */
function binaryData(type: DataType, values: readonly string[]): Data {
  const bytes = values.map((v) => encoder.encode(v));
  const data = new Uint8Array(bytes.reduce((n, b) => n + b.byteLength, 0));
  const ends: number[] = [0];
  let at = 0;
  for (const b of bytes) data.set(b, at), (at += b.byteLength), ends.push(at);
  const large = type instanceof LargeUtf8 || type instanceof LargeBinary;
  const valueOffsets = large ? BigInt64Array.from(ends, BigInt) : Int32Array.from(ends);
  return makeData({ type: type as Utf8, data, valueOffsets: valueOffsets as Int32Array, length: values.length, nullCount: 0 });
}

/** Value i: `length` bytes, each distinct from its neighbours (so a byte copied from the wrong place shows). */
const valueOf = (i: number, length: number): string => Array.from({ length }, (_, j) => String.fromCharCode(33 + ((i * 7 + j) % 90))).join('');

describe('binary values copied into a data buffer too small for them (grown on the way)', () => {
  // lengths 0..9 (one or two words, or none), 126..131 around the 128-byte word-loop limit, a 300-byte value
  const lengths = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 126, 127, 128, 129, 130, 131, 300, 3, 5, 1];
  const values = lengths.map((n, i) => valueOf(i, n));
  test.each([new Utf8(), new Binary(), new LargeUtf8(), new LargeBinary()])('%s: every value reads back whole, gathered in reverse and every other row, from a buffer of 0, 5 or 40 bytes', (type) => {
    const data = binaryData(type, values);
    const orders = [[...values.keys()].reverse(), [...values.keys()].filter((i) => i % 2 === 0), [...values.keys()].filter((i) => i % 2 === 1)];
    for (const ids of orders) {
      for (const dataBytes of [0, 5, 40]) {
        const out = jsOf(splitUnsized(data, ids, dataBytes));
        const want = jsOf(data);
        expect(ids.map((_, j) => out(j))).toEqual(ids.map((r) => want(r)));
      }
    }
  });
});


describe('view values: inline ones (up to 12 bytes) copied as their views, long ones from any variadic buffer', () => {
  const values = [...Array.from({ length: 14 }, (_, n) => valueOf(n, n)), valueOf(20, 13), valueOf(21, 40), valueOf(22, 12), valueOf(23, 200), valueOf(24, 9)];
  test.each([1, 3])('values of 0 to 13 bytes and longer, from %i variadic buffers, gathered in reverse, every other row and from a data buffer of 0 bytes', (buffers) => {
    const data = viewData(values, buffers);
    const want = jsOf(data);
    for (const ids of [[...values.keys()].reverse(), [...values.keys()].filter((i) => i % 2 === 1), [...values.keys()]]) {
      for (const out of [gatherRows(data, data.type, Uint32Array.from(ids), ids.length, new ScratchSelections()), splitUnsized(data, ids, 0)]) {
        const got = jsOf(out);
        expect(ids.map((_, j) => got(j))).toEqual(ids.map((r) => want(r)));
      }
    }
  });
});

describe('the columnar writer: a partition whose rows are adjacent but for the last', () => {
  let dir: string;
  beforeEach(async () => (dir = await makeTempDir()));
  afterEach(async () => removeDir(dir));

  test.each([15, 16, 30])('%i adjacent rows to partition 0, then rows to partition 1, then one row far off to partition 0: partition 0 reads that far row last, not its neighbour', async (run) => {
    const n = run + 20;
    const pids = Array.from({ length: n }, (_, i) => (i < run || i === n - 1 ? 0 : 1));
    const rng = new Rng(303);
    const types: DataType[] = [new Int64(), new Int32(), new Utf8(), new LargeBinary(), new FixedSizeBinary(6), new Bool()];
    const columns = types.map((type) => buildColumn(type, n, { bitmap: true, nullRate: 0.2 }, rng));
    const fields = [new Field('pid', new Int32(), false), ...types.map((type, c) => new Field(`c${c}`, type, true))];
    const pid = makeData({ type: new Int32(), data: Int32Array.from(pids), length: n, nullCount: 0 });
    const batch = new RecordBatch(new Schema(fields), makeData({ type: new Struct(fields), length: n, nullCount: 0, children: [pid, ...columns] }));
    const outcome = await runShuffle(dir, { numPartitions: 2, partitioning: { kind: 'partition-id', column: 'pid' }, codec: 'none' }, [batch]);
    outcome.actual.forEach((rows, p) => expect(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)).toBeNull());
    expect(outcome.actual[0]!.length).toBe(run + 1);
  });
});

describe('setBits (rows marked valid)', () => {
  test('sets exactly bits [from, from + count) for every start bit 0 to 16 and every count 0 to 20, and no bit around them', () => {
    for (let from = 0; from <= 16; from++) {
      for (let count = 0; count <= 20; count++) {
        const bits = new Uint8Array(8);
        setBits(bits, from, count);
        const set = Array.from({ length: 64 }, (_, b) => (bits[b >>> 3]! >>> (b & 7)) & 1);
        expect(set, `from ${from}, count ${count}`).toEqual(Array.from({ length: 64 }, (_, b) => (b >= from && b < from + count ? 1 : 0)));
      }
    }
  });
});

describe('gatherRows and concatenateChunks (dictionary decoding, range bounds)', () => {
  test.each([new Int32(), new Utf8(), new Utf8View(), new Bool()])('%s: gatherRows takes rows rowIds[0, count) only, however long the row-id array (a reused, larger scratch array)', (type) => {
    const data = buildColumn(type, 30, { bitmap: true, nullRate: 0.3 }, new Rng(404));
    const rowIds = Uint32Array.from([7, 3, 3, 29, 0, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]);
    for (const count of [0, 1, 4, 20]) {
      const out = gatherRows(data, type, rowIds, count, new ScratchSelections());
      expect(out.length).toBe(count);
      const got = jsOf(out);
      const want = jsOf(data);
      expect(Array.from({ length: count }, (_, i) => got(i))).toEqual(Array.from(rowIds.subarray(0, count), (r) => want(r)));
    }
  });
});
