/**
 * The second contract of the IPC message encoders (src/format/ipc-message.ts) and the per-partition
 * column buffers (src/writer/column-buffer.ts), from the thirty-second mutation sweep (a second pass
 * over both files; see docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps").
 *
 * Each test fails against a mutant the other tests let through. Expected values come from the Arrow
 * IPC specification and the doc comments' worked layouts (worked by hand here), from apache-arrow's
 * own flatbuffer reader and stream reader, or from the bytes of the arrays a test hands in; never
 * from the code under test. Nothing here is random or measures time.
 */
import { Bool, DenseUnion, Dictionary, Field, FixedSizeBinary, Int16, Int32, List, makeData, Schema, SparseUnion, Struct, tableFromIPC, Utf8, Utf8View, type Data, type DataType } from 'apache-arrow';
import { MessageHeader, MetadataVersion } from 'apache-arrow/enum';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { Message, type DictionaryBatch as DictionaryBatchHeader, type RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import { describe, expect, test } from 'vitest';
import type { Codec } from '../src/format/codec.js';
import type { CompressionPolicy } from '../src/format/compression-advisor.js';
import {
  encodeRawPayload,
  encodeRecordBatchHeader,
  encodeRecordBatchMessage,
  encodeRecordBatchPayload,
  encodeSchemaMessage,
  END_OF_STREAM,
  payloadArenaBound,
  type FieldNodeInfo,
} from '../src/format/ipc-message.js';
import { onePartition, planAppend, splitAppend } from '../src/writer/append-rows.js';
import { BufferGrowth } from '../src/writer/buffer-growth.js';
import { binaryDataFits, ColumnBuffer, MAX_DATA_BYTES } from '../src/writer/column-buffer.js';
import { columnLayoutOf } from '../src/writer/column-layout.js';
import { prepareSourceColumn } from '../src/writer/source-column.js';
import { ScratchSelections } from '../src/writer/split-plan.js';
import { buildAny } from './support/nested.js';
import { Rng } from './support/random.js';

// ---------------------------------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------------------------------

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const concat = (parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));
const layoutOf = (type: DataType) => columnLayoutOf(new Field('value', type, true));

/** A codec whose "frame" of an input of 8 bytes or more is its first byte 3 times (shorter inputs come back as they are); it logs what it is given. */
function fakeCodec(log: number[] = []): Codec {
  return {
    name: 'lz4',
    arrowType: CompressionType.LZ4_FRAME,
    compress: async (input: Uint8Array) => {
      log.push(input.byteLength);
      return [input.byteLength >= 8 ? new Uint8Array(3).fill(input[0]!) : input.slice()];
    },
  } as unknown as Codec;
}

/** A compression policy that says `yes(position)` and logs every call. */
function loggingPolicy(yes: (position: number) => boolean): CompressionPolicy & { asked: number[]; recorded: [number, number, number][] } {
  const asked: number[] = [];
  const recorded: [number, number, number][] = [];
  return {
    asked,
    recorded,
    shouldCompress: (position) => (asked.push(position), yes(position)),
    record: (position, raw, compressed) => void recorded.push([position, raw, compressed]),
  };
}

/** Bytes of the distinct ArrayBuffers a message's chunks keep alive. */
function bytesKeptAlive(chunks: readonly Uint8Array[]): number {
  return [...new Set(chunks.map((c) => c.buffer))].reduce((sum, b) => sum + b.byteLength, 0);
}

/** The flatbuffer of an encapsulated message (after 0xFFFFFFFF and the int32 size). */
function metadataOf(message: Uint8Array): Uint8Array {
  const size = new DataView(message.buffer, message.byteOffset, message.byteLength).getInt32(4, true);
  return message.subarray(8, 8 + size);
}

const ids = (n: number) => Uint32Array.from({ length: n }, (_, i) => i);

/** Appends all rows of `data` after row `filled` of `column` (plan, growth, split: the protocol of append-rows.ts), at `capacity` rows. */
function append(column: ColumnBuffer, data: Data, filled: number, capacity: number): BufferGrowth {
  const plan = planAppend([prepareSourceColumn(data, column.layout)], [column], onePartition(ids(data.length), 0, data.length), filled, capacity, new ScratchSelections());
  plan.growth.apply();
  splitAppend(plan.plans, [column], filled);
  return plan.growth;
}

/** Bytes of the arrays a buffer (and its children) really holds. */
function held(node: ColumnBuffer): number {
  let bytes = (node.validity?.byteLength ?? 0) + node.values.byteLength + node.data.byteLength + node.unionOffsets.byteLength;
  for (const child of node.children) bytes += held(child);
  return bytes;
}

/** The snapshot of the first `rows` rows: field nodes and body buffers (copies). */
function snap(column: ColumnBuffer, rows: number): { nodes: FieldNodeInfo[]; buffers: Uint8Array[] } {
  const nodes: FieldNodeInfo[] = [];
  const buffers: Uint8Array[] = [];
  column.snapshot(rows, nodes, buffers);
  return { nodes, buffers };
}

// ---------------------------------------------------------------------------------------------------------------------
// column buffers
// ---------------------------------------------------------------------------------------------------------------------

describe('column buffers (src/writer/column-buffer.ts)', () => {
  /*
   * binaryDataFits: "whether `to` can take all of `from`'s binary data ... without a buffer over
   * MAX_DATA_BYTES, at every depth". Only the data lengths matter, so no 2 GiB is allocated: the test
   * sets the lengths the buffers say they use.
   */
  test('binaryDataFits: a buffer may reach exactly 2^31 - 1 bytes of binary data, not one more, at the top and in a nested child', () => {
    expect(MAX_DATA_BYTES).toBe(2 ** 31 - 1);
    const top = (to: number, from: number) => {
      const a = new ColumnBuffer(layoutOf(new Utf8()));
      const b = new ColumnBuffer(layoutOf(new Utf8()));
      a.dataLength = to;
      b.dataLength = from;
      return binaryDataFits(a, b);
    };
    expect(top(2 ** 31 - 11, 10), 'top level, exactly 2^31 - 1').toBe(true);
    expect(top(2 ** 31 - 11, 11), 'top level, 2^31').toBe(false);
    const nested = (to: number, from: number) => {
      const type = new List(new Field('item', new Utf8(), true));
      const a = new ColumnBuffer(layoutOf(type));
      const b = new ColumnBuffer(layoutOf(type));
      a.children[0]!.dataLength = to;
      b.children[0]!.dataLength = from;
      return binaryDataFits(a, b);
    };
    expect(nested(2 ** 31 - 11, 10), 'list child, exactly 2^31 - 1').toBe(true);
    expect(nested(2 ** 31 - 11, 11), 'list child, 2^31').toBe(false);
  });

  /*
   * A bitmap is roundUp4(ceil(capacity / 8)) bytes (whole 32-bit words): for 33 rows ceil(33 / 8) = 5,
   * so 8 bytes; for 5 rows 1, so 4 bytes. A growth that keeps the capacity and only adds the bitmap
   * (the first null arrives) costs exactly that: the pool is reserved with the growth's figures.
   */
  test.each([
    { capacity: 33, bitmap: 8 },
    { capacity: 5, bitmap: 4 },
  ])('a growth that keeps the capacity ($capacity rows) and only adds a validity bitmap costs exactly the bitmap, $bitmap bytes', ({ capacity, bitmap }) => {
    const column = new ColumnBuffer(layoutOf(new Int32()));
    append(column, makeData({ type: new Int32(), length: 2, nullCount: 0, data: Int32Array.of(1, 2) }), 0, capacity);
    expect(column.validity).toBeNull();
    const before = held(column);
    const growth = append(column, makeData({ type: new Int32(), length: 2, nullCount: 1, nullBitmap: Uint8Array.of(0b01), data: Int32Array.of(3, 4) }), 2, capacity);
    expect(column.capacity).toBe(capacity);
    expect(held(column) - before, 'the bitmap allocated').toBe(bitmap);
    expect(growth.bytesAfter - growth.bytesBefore, 'what the growth says it costs').toBe(bitmap);
  });

  /*
   * A buffer reused after clear() (the writer clears each partition's buffers once their rows became a
   * payload) snapshots its new rows only: every body buffer has exactly its Arrow length (validity
   * ceil(rows / 8), values rows x width, type ids rows, offsets rows + 1, data the last offset), the bits
   * past the last row are zero, and nothing of the rows before the clear() shows. Each column is filled
   * with 5 rows, cleared, filled with 3, cleared, filled with 1; the expected bytes are worked by hand.
   * A union has no validity bitmap (Arrow columnar format, "Union Layout"): its field node's null count is 0.
   */
  test('buffers reused after clear(): int16, fixed-size binary(3), bool, utf8 and a dense union (null count 0: unions have no bitmap) snapshot exactly their new rows (3 rows, then 1)', () => {
    const bits = (valid: boolean[]) => {
      const out = new Uint8Array((valid.length + 7) >> 3);
      valid.forEach((v, i) => v && (out[i >> 3]! |= 1 << (i & 7)));
      return out;
    };
    const nullsOf = (valid: boolean[]) => ({ nullCount: valid.filter((v) => !v).length, nullBitmap: bits(valid) });
    const i16 = (values: number[], valid: boolean[]) => makeData({ type: new Int16(), length: values.length, ...nullsOf(valid), data: Int16Array.from(values) });
    const fsb = (values: number[][], valid: boolean[]) => makeData({ type: new FixedSizeBinary(3), length: values.length, ...nullsOf(valid), data: Uint8Array.from(values.flat()) });
    const bool = (values: boolean[], valid: boolean[]) => makeData({ type: new Bool(), length: values.length, ...nullsOf(valid), data: bits(values) });
    const str = (values: string[], valid: boolean[]) => {
      const bytes = values.map((v) => new TextEncoder().encode(v));
      const offsets = new Int32Array(values.length + 1);
      bytes.forEach((b, i) => (offsets[i + 1] = offsets[i]! + b.byteLength));
      return makeData({ type: new Utf8(), length: values.length, ...nullsOf(valid), valueOffsets: offsets, data: concat(bytes) });
    };
    const unionType = new DenseUnion([0, 1], [new Field('i', new Int32(), true), new Field('b', new Bool(), true)]);
    const union = (typeIds: number[]) => {
      const ints = typeIds.filter((t) => t === 0).length;
      const bools = typeIds.length - ints;
      const offsets = Int32Array.from(typeIds, (t, i) => typeIds.slice(0, i).filter((u) => u === t).length);
      return makeData({
        type: unionType, length: typeIds.length, nullCount: 0, typeIds: Int8Array.from(typeIds), valueOffsets: offsets,
        children: [makeData({ type: new Int32(), length: ints, nullCount: 0, data: Int32Array.from({ length: ints }, (_, i) => 100 + i) }), makeData({ type: new Bool(), length: bools, nullCount: 0, data: new Uint8Array(1).fill(0xff) })],
      });
    };
    const T = true;
    const F = false;
    const cases: { name: string; type: DataType; fills: Data[]; expected: [FieldNodeInfo[], number[][]][] }[] = [
      {
        name: 'int16',
        type: new Int16(),
        fills: [i16([1, 2, 3, 4, 5], [T, T, T, T, T]), i16([7, 0, 9], [T, F, T]), i16([0], [F])],
        expected: [
          [[{ length: 3, nullCount: 1 }], [[0b101], [7, 0, 0, 0, 9, 0]]],
          [[{ length: 1, nullCount: 1 }], [[0], [0, 0]]],
        ],
      },
      {
        name: 'fixed-size binary(3)',
        type: new FixedSizeBinary(3),
        fills: [fsb([[1, 1, 1], [2, 2, 2], [3, 3, 3], [4, 4, 4], [5, 5, 5]], [F, T, T, T, T]), fsb([[7, 7, 7], [0, 0, 0], [9, 9, 9]], [T, F, T]), fsb([[0, 0, 0]], [F])],
        expected: [
          [[{ length: 3, nullCount: 1 }], [[0b101], [7, 7, 7, 0, 0, 0, 9, 9, 9]]],
          [[{ length: 1, nullCount: 1 }], [[0], [0, 0, 0]]],
        ],
      },
      {
        name: 'bool',
        type: new Bool(),
        fills: [bool([T, T, T, T, T], [T, T, T, T, T]), bool([T, F, T], [T, F, T]), bool([T], [T])],
        expected: [
          [[{ length: 3, nullCount: 1 }], [[0b101], [0b101]]],
          [[{ length: 1, nullCount: 0 }], [[], [0b1]]],
        ],
      },
      {
        name: 'utf8',
        type: new Utf8(),
        fills: [str(['hello', 'world', '', 'x', 'yz'], [T, T, T, T, T]), str(['ab', '', 'c'], [T, F, T]), str(['d'], [T])],
        expected: [
          [[{ length: 3, nullCount: 1 }], [[0b101], [0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0], [0x61, 0x62, 0x63]]],
          [[{ length: 1, nullCount: 0 }], [[], [0, 0, 0, 0, 1, 0, 0, 0], [0x64]]],
        ],
      },
      {
        name: 'dense union<int32, bool> (type ids, offsets)',
        type: unionType,
        fills: [union([0, 1, 0, 1, 1]), union([1, 0, 0]), union([1])],
        expected: [
          [[{ length: 3, nullCount: 0 }, { length: 2, nullCount: 0 }, { length: 1, nullCount: 0 }], [[1, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], [], [100, 0, 0, 0, 101, 0, 0, 0], [], [0b1]]],
          [[{ length: 1, nullCount: 0 }, { length: 0, nullCount: 0 }, { length: 1, nullCount: 0 }], [[1], [0, 0, 0, 0], [], [], [], [0b1]]],
        ],
      },
    ];
    for (const { name, type, fills, expected } of cases) {
      const column = new ColumnBuffer(layoutOf(type));
      append(column, fills[0]!, 0, 5);
      column.clear();
      append(column, fills[1]!, 0, 5);
      const three = snap(column, 3);
      column.clear();
      append(column, fills[2]!, 0, 5);
      const one = snap(column, 1);
      expect(three.nodes, `${name}: 3 rows, nodes`).toEqual(expected[0]![0]);
      expect(three.buffers.map((b) => [...b]), `${name}: 3 rows, buffers (a snapshot is a copy: the refill did not change it)`).toEqual(expected[0]![1]);
      expect(one.nodes, `${name}: 1 row, nodes`).toEqual(expected[1]![0]);
      expect(one.buffers.map((b) => [...b]), `${name}: 1 row, buffers`).toEqual(expected[1]![1]);
    }
  });

  /*
   * Utf8View (binary-view.ts): a view is int32 length | 12 bytes: the value inline (zero padded) when at
   * most 12 bytes, else a 4-byte prefix, the variadic buffer's index and the offset in it. A partition
   * column has one variadic buffer (index 0); after clear() the next payload's data starts over at 0.
   */
  test('Utf8View after clear(): inline and out-of-line views laid out by hand, one variadic buffer holding exactly the long values, nothing of the rows before', () => {
    const enc = (v: string) => new TextEncoder().encode(v);
    const viewsOf = (values: string[], data: Uint8Array[]) => {
      const views = new Uint8Array(16 * values.length);
      const dv = new DataView(views.buffer);
      let at = 0;
      values.forEach((v, i) => {
        const bytes = enc(v);
        dv.setInt32(16 * i, bytes.byteLength, true);
        if (bytes.byteLength <= 12) views.set(bytes, 16 * i + 4);
        else {
          views.set(bytes.subarray(0, 4), 16 * i + 4);
          dv.setInt32(16 * i + 8, 0, true);
          dv.setInt32(16 * i + 12, at, true);
          at += bytes.byteLength;
        }
      });
      return makeData({ type: new Utf8View(), length: values.length, nullCount: 0, views, variadicBuffers: [concat(data)] } as never) as Data;
    };
    const column = new ColumnBuffer(layoutOf(new Utf8View()));
    const first = ['a long value of 30 bytes......', 'x', 'another long value, 29 bytes.'];
    append(column, viewsOf(first, [enc(first[0]!), enc(first[2]!)]), 0, 8);
    column.clear();
    const second = ['b', '0123456789abcdefgh'];
    append(column, viewsOf(second, [enc(second[1]!)]), 0, 8);
    const { nodes, buffers } = snap(column, 2);
    expect(nodes).toEqual([{ length: 2, nullCount: 0, variadicBuffers: 1 }]);
    const views = new Uint8Array(32);
    const dv = new DataView(views.buffer);
    dv.setInt32(0, 1, true);
    views[4] = 'b'.charCodeAt(0); // then 11 zeros
    dv.setInt32(16, 18, true);
    views.set(enc('0123'), 20);
    dv.setInt32(24, 0, true); // variadic buffer 0
    dv.setInt32(28, 0, true); // at offset 0 of it: the data starts over after clear()
    expect(buffers.map(hex)).toEqual([hex(new Uint8Array(0)), hex(views), hex(enc('0123456789abcdefgh'))]);
  });

  /*
   * snapshotBytes(rows): "bytes snapshot(rows) copies, children included" (the dictionary tracker's
   * compression bound is taken from it): never fewer than the snapshot's buffers hold.
   */
  test.each([
    { name: 'utf8 view with long values', type: () => new Utf8View() },
    { name: 'dense union<int32, utf8>', type: () => new DenseUnion([0, 1], [new Field('i', new Int32(), true), new Field('s', new Utf8(), true)]) },
    { name: 'sparse union<int32, utf8>', type: () => new SparseUnion([0, 1], [new Field('i', new Int32(), true), new Field('s', new Utf8(), true)]) },
    { name: 'list<utf8>', type: () => new List(new Field('item', new Utf8(), true)) },
    { name: 'struct<int32, utf8>', type: () => new Struct([new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]) },
  ])('$name: snapshotBytes(rows) is at least the bytes snapshot(rows) copies', ({ type: make }) => {
    const type = make();
    const rng = new Rng(32);
    const column = new ColumnBuffer(layoutOf(type));
    const data = buildAny(type, 60, rng, { nullRate: 0.2 });
    append(column, data, 0, 64);
    for (const rows of [0, 1, 60]) {
      const { buffers } = snap(column, rows);
      expect(column.snapshotBytes(rows), `${rows} rows`).toBeGreaterThanOrEqual(buffers.reduce((sum, b) => sum + b.byteLength, 0));
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// IPC messages
// ---------------------------------------------------------------------------------------------------------------------

describe('IPC messages (src/format/ipc-message.ts)', () => {
  const nodes: FieldNodeInfo[] = [{ length: 4, nullCount: 1 }];
  /** Buffers 0 and 2 are empty (no slot, nothing to compress), 1 shrinks (20 bytes -> 3), 3 does not (5 bytes). */
  const buffers = () => [new Uint8Array(0), new Uint8Array(20).fill(0x41), new Uint8Array(0), Uint8Array.of(1, 2, 3, 4, 5)];

  test.each(['encodeRecordBatchMessage', 'encodeRecordBatchPayload'] as const)(
    '%s: the policy is asked about, and told the outcome of, every non-empty buffer it allows, as (position, raw bytes, compressed bytes); empty buffers reach neither the policy nor the codec',
    async (encoder) => {
      const log: number[] = [];
      const policy = loggingPolicy((position) => position === 1);
      if (encoder === 'encodeRecordBatchMessage') await encodeRecordBatchMessage(4, nodes, buffers(), fakeCodec(log), policy);
      else await encodeRecordBatchPayload(4, nodes, buffers(), fakeCodec(log), policy);
      expect([...policy.asked].sort()).toEqual([1, 3]);
      expect(policy.recorded).toEqual([[1, 20, 3]]); // position 3 was not tried: no outcome to record
      expect(log, 'inputs the codec was given').toEqual([20]);
    },
  );

  /*
   * CompressionPolicy (compression-advisor.ts): while settled(position) gives a promise, deciding now
   * would be a guess: shouldCompress is asked only after it settles; an attempt the policy allowed that
   * fails (the codec throws) is abandon()ed, so the policy does not wait for its outcome for ever.
   */
  test.each(['encodeRecordBatchMessage', 'encodeRecordBatchPayload'] as const)('%s: shouldCompress is asked only once settled() stops giving a promise; a failed compression is abandoned', async (encoder) => {
    const events: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let open = false;
    void gate.then(() => (open = true));
    const policy: CompressionPolicy = {
      settled: (position) => (open ? undefined : (events.push(`wait ${position}`), gate)),
      shouldCompress: (position) => (events.push(`ask ${position} ${open ? 'after' : 'before'} the outcome`), true),
      record: (position) => void events.push(`record ${position}`),
      abandon: (position) => void events.push(`abandon ${position}`),
    };
    const encode = (codec: Codec) => (encoder === 'encodeRecordBatchMessage' ? encodeRecordBatchMessage(1, nodes, [new Uint8Array(20).fill(1)], codec, policy) : encodeRecordBatchPayload(1, nodes, [new Uint8Array(20).fill(1)], codec, policy));
    const done = encode(fakeCodec());
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(events, 'nothing asked while settled() gives a promise').toEqual(['wait 0']);
    release();
    await done;
    expect(events).toEqual(['wait 0', 'ask 0 after the outcome', 'record 0']);
    events.length = 0;
    const failing = { ...fakeCodec(), compress: async () => Promise.reject(new Error('codec failed')) } as unknown as Codec;
    await expect(encode(failing)).rejects.toThrow('codec failed');
    expect(events).toEqual(['ask 0 after the outcome', 'abandon 0']);
  });

  test('encodeRecordBatchPayload: heldBytes counts the whole arena it was given (slack included) and the header', async () => {
    const encoded = await encodeRecordBatchPayload(4, nodes, buffers(), fakeCodec(), undefined, (n) => new Uint8Array(n + 40));
    expect(encoded.heldBytes).toBe(bytesKeptAlive(encoded.chunks));
    expect(encoded.heldBytes).toBeGreaterThan(encoded.byteLength);
    const raw = encodeRawPayload(4, nodes, buffers(), fakeCodec(), (n) => new Uint8Array(n + 40));
    expect(raw.heldBytes).toBe(bytesKeptAlive(raw.chunks));
    expect(raw.heldBytes).toBe(raw.byteLength + 40);
  });

  /*
   * payloadArenaBound(raw, count): "most bytes encodeRecordBatchPayload puts in its arena": by the doc
   * comment's layout, a slot is 8 (prefix) + length + padding to 8; a 1-byte buffer takes 16.
   */
  test('payloadArenaBound is at least the arena encodeRecordBatchPayload asks for: 8 + length + padding to 8 a buffer', async () => {
    for (const lengths of [[1], [1, 1, 1], [9, 17, 0, 3], [8, 16], [7, 0, 15, 2, 1]]) {
      let asked = 0;
      const bufs = lengths.map((n) => new Uint8Array(n).fill(7));
      await encodeRecordBatchPayload(1, [{ length: 1, nullCount: 0 }], bufs, fakeCodec(), undefined, (n) => ((asked = n), new Uint8Array(n)));
      const byHand = lengths.reduce((sum, n) => sum + (n === 0 ? 0 : 8 + n + ((8 - (n % 8)) % 8)), 0);
      expect(asked, `buffers of ${lengths.join(', ')} bytes`).toBe(byHand);
      expect(payloadArenaBound(lengths.reduce((a, b) => a + b, 0), lengths.length)).toBeGreaterThanOrEqual(byHand);
    }
  });
  /*
   * The record-batch header as encodeRecordBatchHeader's doc comment lays it out (offsets in the
   * flatbuffer): the Message vtable at 4, the RecordBatch vtable at 36 (12 bytes, table 24; with view
   * columns 14 bytes and a 28-byte table, the fifth field at 16), the BodyCompression vtable at 72 (80
   * with views): 8 bytes, table 8, codec at 4, method at 5, and the method BUFFER (0).
   */
  test.each([
    { shape: 'plain', views: false, compression: null, recordBatch: [12, 24, 16, 4, 8, 0], bodyCompressionAt: null },
    { shape: 'compressed', views: false, compression: CompressionType.ZSTD, recordBatch: [12, 24, 16, 4, 8, 12], bodyCompressionAt: 72 },
    { shape: 'views', views: true, compression: null, recordBatch: [14, 28, 20, 4, 8, 0, 16], bodyCompressionAt: null },
    { shape: 'views, compressed', views: true, compression: CompressionType.LZ4_FRAME, recordBatch: [14, 28, 20, 4, 8, 12, 16], bodyCompressionAt: 80 },
  ])('record batch header ($shape): the vtables and tables sit where the doc comment puts them', ({ views, compression, recordBatch, bodyCompressionAt }) => {
    const node: FieldNodeInfo = views ? { length: 3, nullCount: 1, variadicBuffers: 1 } : { length: 3, nullCount: 1 };
    const framed = encodeRecordBatchHeader(3, [node], [0, 8, 8, 16], compression, 24);
    const fb = metadataOf(framed);
    const view = new DataView(fb.buffer, fb.byteOffset, fb.byteLength);
    const u16s = (at: number, count: number) => Array.from({ length: count }, (_, i) => view.getUint16(at + 2 * i, true));
    expect(view.getUint32(0, true), 'root: the Message table').toBe(16);
    expect(u16s(4, 6), 'Message vtable').toEqual([12, 20, 16, 18, 4, 8]);
    expect(view.getInt16(32, true), 'version V5').toBe(4);
    expect(fb[34], 'headerType RecordBatch').toBe(3);
    expect(u16s(36, recordBatch.length), 'RecordBatch vtable').toEqual(recordBatch);
    const table = views ? 52 : 48;
    expect(view.getInt32(table, true), 'RecordBatch table -> its vtable at 36').toBe(table - 36);
    if (bodyCompressionAt !== null) {
      expect(u16s(bodyCompressionAt, 4), 'BodyCompression vtable').toEqual([8, 8, 4, 5]);
      expect(view.getInt32(bodyCompressionAt + 8, true)).toBe(8);
      expect([fb[bodyCompressionAt + 12], fb[bodyCompressionAt + 13]], 'codec, method BUFFER').toEqual([compression, 0]);
    }
    // and apache-arrow's reader agrees
    const header = Message.decode(fb).header() as RecordBatchHeader;
    expect(header.length).toBe(3);
    expect(header.nodes.map((n) => [n.length, n.nullCount])).toEqual([[3, 1]]);
    expect(header.variadicBufferCounts).toEqual(views ? [1] : []);
    expect(header.compression?.type ?? null).toBe(compression);
  });

  /*
   * A dictionary batch (Arrow IPC: DictionaryBatch { id, data: RecordBatch, isDelta }) of the values
   * ["a", null, "ccc"], hand-laid: validity 0b101, offsets 0 1 1 4, data "accc"; then a record batch of
   * int32 indices [2, 1, 0, null]. apache-arrow's stream reader must find dictionary 7 and its null.
   */
  test('a dictionary batch carries its id, its values\' null count and (compressed) its BodyCompression; apache-arrow reads the stream', async () => {
    const type = new Dictionary(new Utf8(), new Int32(), 7);
    const schema = new Schema([new Field('d', type, true)]);
    const values = [Uint8Array.of(0b101), new Uint8Array(Int32Array.of(0, 1, 1, 4).buffer), new TextEncoder().encode('accc')];
    const dictionary = await encodeRecordBatchMessage(3, [{ length: 3, nullCount: 1 }], values, null, undefined, { id: 7, isDelta: false });
    const batch = await encodeRecordBatchMessage(4, [{ length: 4, nullCount: 1 }], [Uint8Array.of(0b0111), new Uint8Array(Int32Array.of(2, 1, 0, 0).buffer)], null);
    const stream = concat([encodeSchemaMessage(schema), ...dictionary.chunks, ...batch.chunks, END_OF_STREAM]);
    const decoded = Message.decode(metadataOf(concat(dictionary.chunks)));
    expect(decoded.headerType).toBe(MessageHeader.DictionaryBatch);
    expect(decoded.version).toBe(MetadataVersion.V5);
    const header = decoded.header() as DictionaryBatchHeader;
    expect(header.id).toBe(7);
    expect(header.isDelta).toBe(false);
    expect(header.data.nodes.map((n) => [n.length, n.nullCount])).toEqual([[3, 1]]);
    expect(header.data.compression).toBeNull();
    const table = tableFromIPC(stream);
    expect(table.getChild('d')!.toArray()).toEqual(['ccc', null, 'a', null]);
    // compressed: the dictionary batch's RecordBatch has the BodyCompression too (else its body would be read as raw)
    const compressed = await encodeRecordBatchMessage(3, [{ length: 3, nullCount: 1 }], values, fakeCodec(), undefined, { id: 7, isDelta: true });
    const compressedHeader = Message.decode(metadataOf(concat(compressed.chunks))).header() as DictionaryBatchHeader;
    expect(compressedHeader.data.compression?.type).toBe(CompressionType.LZ4_FRAME);
    expect(compressedHeader.isDelta).toBe(true);
    expect(compressedHeader.id).toBe(7);
  });
});
