/**
 * Batches crossing threads (src/shuffle/batch-transfer.ts), through a real
 * MessageChannel: every flat type arrives intact; an ArrayBuffer that exactly
 * one buffer of the batch covers is moved (detached at the sender: no copy);
 * views into a shared ArrayBuffer (a table read from one IPC file) are copied
 * and the sender's data stays intact; `copy` mode never detaches anything.
 */
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { describe, expect, test } from 'vitest';
import { Bool, Data, DataType, DenseUnion, Dictionary, Field, Int32, LargeBinary, List, makeData, Map_, RecordBatch, Schema, Struct, Table, tableFromIPC, tableToIPC, Utf8, Utf8View, Vector, vectorFromArray } from 'apache-arrow';
import { columnInconsistency } from '../src/format/validate-column.js';
import { assertInputBatch } from '../src/writer/input-batch.js';
import { batchFromTransferable, batchToTransferable, ReceivedDictionaries, SentDictionaries, type TransferableBatch, type TransferMode } from '../src/shuffle/batch-transfer.js';
import fc from 'fast-check';
import { batchOf, buildColumn, containsView, schemaOf, sequenceColumn, TYPE_CASES } from './support/columns.js';
import { buildAny, NESTED_KINDS, nestedType, randomType } from './support/nested.js';
import { Rng } from './support/random.js';
import { rowsOf } from './support/rows.js';

/** Sends the prepared batch through a MessageChannel, as MapTaskPool does, and rebuilds it on the other side. */
function sendThroughChannel(batch: RecordBatch, mode: TransferMode) {
  const { port1, port2 } = new MessageChannel();
  const prepared = batchToTransferable(batch, mode);
  port1.postMessage(prepared.batch, prepared.transfer);
  const received = receiveMessageOnPort(port2)!.message;
  port1.close();
  return { prepared, received: batchFromTransferable(received, batch.schema) };
}

describe('every flat type crosses a MessageChannel intact', () => {
  for (const c of TYPE_CASES) {
    test(c.name, () => {
      const rng = new Rng(0xc0ffee);
      const schema = schemaOf([
        { name: 'id', type: new Int32(), nullable: false },
        { name: 'v', type: c.make() },
      ]);
      const batch = batchOf(schema, [sequenceColumn(0, 300), buildColumn(c.make(), 300, { bitmap: true, nullRate: 0.2 }, rng)], 300);
      const expected = rowsOf(batch);
      const { received } = sendThroughChannel(batch, 'exclusive');
      expect(rowsOf(received)).toEqual(expected);
      expect(received.numRows).toBe(300);
    });
  }
});

test('a buffer that is all of its ArrayBuffer is moved, not copied: the sender sees it detached', () => {
  const values = new Int32Array(1000).map((_, i) => i * 3);
  const schema = new Schema([new Field('x', new Int32(), false)]);
  const batch = batchOf(schema, [makeData({ type: new Int32(), data: values, length: 1000, nullCount: 0 })], 1000);
  const { prepared, received } = sendThroughChannel(batch, 'exclusive');
  expect(prepared.transferredBytes, 'the values buffer is moved').toBe(4000);
  expect(prepared.copiedBytes, 'only the empty validity buffer, if anything, is copied').toBe(0);
  expect(values.byteLength, 'a moved ArrayBuffer is detached at the sender').toBe(0);
  expect(received.getChild('x')!.get(999)).toBe(2997);
});

test("a batch sent with 'exclusive' cannot be sent again: CS_INVALID_ARGUMENT naming 'copy', not a TypeError; 'copy' sends one any number of times", () => {
  const schema = new Schema([new Field('x', new Int32(), false)]);
  const batch = () => batchOf(schema, [makeData({ type: new Int32(), data: new Int32Array(100).map((_, i) => i), length: 100, nullCount: 0 })], 100);
  const moved = batch();
  sendThroughChannel(moved, 'exclusive');
  expect(() => batchToTransferable(moved, 'exclusive')).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining("'copy'") }));
  expect(() => batchToTransferable(moved, 'copy')).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
  const kept = batch();
  sendThroughChannel(kept, 'copy');
  expect(rowsOf(sendThroughChannel(kept, 'copy').received)).toEqual(rowsOf(batch()));
});

test('a buffer of no bytes (not a detached one) crosses as it is: a string column of empty strings', () => {
  const schema = new Schema([new Field('s', new Utf8(), false)]);
  const empty = batchOf(schema, [makeData({ type: new Utf8(), length: 3, nullCount: 0, valueOffsets: new Int32Array(4), data: new Uint8Array(new ArrayBuffer(0)) })], 3);
  expect(rowsOf(sendThroughChannel(empty, 'exclusive').received)).toEqual(rowsOf(empty));
});

describe("slices of one batch, each sent with 'exclusive' in turn, all cross intact and leave their parent intact (arrow-js slices share bitmaps, Bool values, binary data, variadic buffers and list children)", () => {
  const kinds = [...TYPE_CASES.map((c) => ({ name: c.name, make: c.make })), ...NESTED_KINDS.map((kind) => ({ name: kind, make: () => nestedType(kind, new Rng(kind.length), 2) }))];
  for (const { name, make } of kinds) {
    test(name, () => {
      const rng = new Rng(0x51ce);
      const type = make();
      const schema = schemaOf([{ name: 'id', type: new Int32(), nullable: false }, { name: 'v', type }]);
      const column = TYPE_CASES.some((c) => c.name === name) ? buildColumn(type, 300, { bitmap: true, nullRate: 0.2 }, rng) : buildAny(type, 300, rng, { nullRate: 0.2 });
      const parent = batchOf(schema, [sequenceColumn(0, 300), column], 300);
      const before = rowsOf(parent);
      // slices of no rows too: at offset 0, arrow-js cuts their buffers to nothing, and only that tells them apart
      const slices = [parent.slice(0, 0), parent.slice(0, 100), parent.slice(100, 100), parent.slice(100, 250), parent.slice(250, 300), parent.slice(300, 300)];
      const received = slices.map((slice) => sendThroughChannel(slice, 'exclusive').received);
      expect(received.flatMap((b) => rowsOf(b))).toEqual(before);
      expect(rowsOf(parent), 'the parent, never sent, is intact').toEqual(before);
    });
  }

  test("slices cut at every bit alignment cross intact with 'copy' too", () => {
    for (const { name, make } of kinds) {
      const rng = new Rng(0xb175);
      const type = make();
      const schema = schemaOf([{ name: 'v', type }]);
      const column = TYPE_CASES.some((c) => c.name === name) ? buildColumn(type, 300, { bitmap: true, nullRate: 0.3 }, rng) : buildAny(type, 300, rng, { nullRate: 0.3 });
      const parent = batchOf(schema, [column], 300);
      const before = rowsOf(parent);
      const bounds = [0, 3, 11, 12, 29, 160, 299, 300];
      const received = bounds.slice(1).map((end, i) => sendThroughChannel(parent.slice(bounds[i]!, end), 'copy').received);
      expect(received.flatMap((b) => rowsOf(b)), name).toEqual(before);
    }
  });

  test('a bitmap is copied, never moved (a slice of Bool columns alone has no cut buffer to tell it by)', () => {
    const schema = new Schema([new Field('b', new Bool(), true)]);
    const bits = makeData({ type: new Bool(), length: 16, nullCount: 1, nullBitmap: Uint8Array.of(0xff, 0x7f), data: Uint8Array.of(0x0f, 0xf0) });
    const parent = batchOf(schema, [bits], 16);
    const before = rowsOf(parent);
    const first = sendThroughChannel(parent.slice(0, 8), 'exclusive');
    expect(first.prepared.transferredBytes).toBe(0);
    expect(rowsOf(sendThroughChannel(parent.slice(8, 16), 'exclusive').received)).toEqual(before.slice(8));
  });

  test('an unsliced batch still moves what it owns: its values and offsets, its string data', () => {
    const schema = new Schema([new Field('x', new Int32(), false), new Field('s', new Utf8(), false)]);
    const x = makeData({ type: new Int32(), length: 4, nullCount: 0, data: Int32Array.of(1, 2, 3, 4) });
    const s = makeData({ type: new Utf8(), length: 4, nullCount: 0, valueOffsets: Int32Array.of(0, 1, 3, 3, 6), data: new TextEncoder().encode('abbccc') });
    const { prepared } = sendThroughChannel(batchOf(schema, [x, s], 4), 'exclusive');
    expect(prepared.transferredBytes).toBe(16 + 20 + 6);
    expect(prepared.copiedBytes).toBe(0);
  });
});

describe("a slice copies the bytes of its rows, not its parent's (arrow-js leaves bitmaps, Bool values, binary data, variadic buffers and list and dense union children whole)", () => {
  const rows = 4000;
  const word = (i: number) => `row ${i} `.padEnd(48, String.fromCharCode(97 + (i % 26)));
  const strings = (type: Utf8 | LargeBinary) => vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 7 === 3 ? null : DataType.isUtf8(type) ? word(i) : new TextEncoder().encode(word(i)))), type).data[0]!;
  const columns: Record<string, () => Data> = {
    utf8: () => strings(new Utf8()),
    'large binary': () => strings(new LargeBinary()),
    'list<utf8>': () => vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 5 === 1 ? null : [word(i), word(i + 1)])), new List(new Field('item', new Utf8(), true))).data[0]!,
    'map<utf8, int32>': () =>
      vectorFromArray(
        Array.from({ length: rows }, (_, i) => new Map([[word(i), i], [word(i + 2), -i]])),
        new Map_(new Field('entries', new Struct([new Field('key', new Utf8(), false), new Field('value', new Int32(), true)]), false) as never),
      ).data[0]!,
    utf8view: () => vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 7 === 3 ? null : i % 2 === 0 ? `short ${i % 100}` : word(i))), new Utf8View()).data[0]!,
    'dense union<utf8, int32>': () => {
      const type = new DenseUnion([0, 5], [new Field('s', new Utf8(), true), new Field('n', new Int32(), true)]);
      const half = rows / 2;
      const typeIds = Int8Array.from({ length: rows }, (_, i) => (i % 2 === 0 ? 0 : 5));
      const valueOffsets = Int32Array.from({ length: rows }, (_, i) => i >> 1);
      const s = strings(new Utf8()).slice(0, half);
      const n = makeData({ type: new Int32(), length: half, nullCount: 0, data: Int32Array.from({ length: half }, (_, i) => i) });
      return makeData({ type, length: rows, nullCount: 0, typeIds, valueOffsets, children: [s, n] });
    },
    'struct<utf8, bool>': () =>
      vectorFromArray(
        Array.from({ length: rows }, (_, i) => ({ s: word(i), b: i % 3 === 0 })),
        new Struct([new Field('s', new Utf8(), true), new Field('b', new Bool(), true)]),
      ).data[0]!,
  };
  for (const [name, make] of Object.entries(columns)) {
    test(name, () => {
      const column = make();
      const parent = batchOf(new Schema([new Field('v', column.type, true)]), [column], rows);
      const whole = sendThroughChannel(parent, 'copy').prepared.copiedBytes;
      expect(whole, 'the parent holds more than 100 KB').toBeGreaterThan(100_000);
      for (const start of [0, 1, 7, 8, 1999, rows - 5]) {
        const { prepared, received } = sendThroughChannel(parent.slice(start, start + 5), 'exclusive');
        expect(rowsOf(received), `rows ${start}..${start + 5}`).toEqual(rowsOf(parent).slice(start, start + 5));
        expect(prepared.copiedBytes, `rows ${start}..${start + 5}: at most 300 bytes a row`).toBeLessThanOrEqual(5 * 300);
      }
    });
  }
});

test("a slice whose offsets or views point past their data crosses as it is, for the writer to refuse (CS_INVALID_ARGUMENT), not as a RangeError or a quietly cut column", () => {
  const bad = {
    'utf8 offsets past the data': makeData({ type: new Utf8(), length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, 2, 4, 90), data: new Uint8Array(8) }),
    'utf8 offsets going backwards': makeData({ type: new Utf8(), length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, 6, 2, 4), data: new Uint8Array(8) }),
    'list offsets past the child': makeData({ type: new List(new Field('item', new Int32(), true)), length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, 1, 2, 9), child: makeData({ type: new Int32(), length: 4, nullCount: 0, data: new Int32Array(4) }) }),
    'dense union offsets past the child': makeData({ type: new DenseUnion([0], [new Field('n', new Int32(), true)]), length: 3, nullCount: 0, typeIds: Int8Array.of(0, 0, 0), valueOffsets: Int32Array.of(0, 1, 7), children: [makeData({ type: new Int32(), length: 2, nullCount: 0, data: new Int32Array(2) })] }),
    'views shorter than their rows': new Data(new Utf8View(), 0, 3, 0, [undefined, new Uint8Array(20), undefined] as never, [], undefined, [new Uint8Array(64)]),
  };
  for (const [name, column] of Object.entries(bad)) {
    const parent = batchOf(new Schema([new Field('v', column.type, true)]), [column], 3);
    const sent = parent.slice(1, 3);
    const expected = columnInconsistency(sent.data.children[0]!, { dictionaryIndices: false });
    expect(expected, `${name}: the writer's own check finds it`).not.toBeNull();
    const { received } = sendThroughChannel(sent, 'copy');
    expect(columnInconsistency(received.data.children[0]!, { dictionaryIndices: false }), name).toBe(expected);
    expect(() => assertInputBatch(received, 'write'), name).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
  }
});

test('views into one shared ArrayBuffer (a table read from an IPC file) are copied and stay usable at the sender', () => {
  const table = tableFromIPC(
    tableToIPC(new Table({ a: vectorFromArray([1, 2, 3, 4], new Int32()), s: vectorFromArray(['w', 'x', 'y', 'z'], new Utf8()) })),
  );
  const batch = table.batches[0]!;
  const before = rowsOf(batch);
  const { prepared, received } = sendThroughChannel(batch, 'exclusive');
  expect(prepared.transferredBytes, 'nothing of the file bytes is moved').toBe(0);
  expect(prepared.copiedBytes).toBeGreaterThan(0);
  expect(rowsOf(batch), 'the sender batch is untouched').toEqual(before);
  expect(rowsOf(received)).toEqual(before);
});

test('a slice shares its parent buffers: its sub-arrayed views are copied', () => {
  const values = new Int32Array(100).map((_, i) => i);
  const schema = new Schema([new Field('x', new Int32(), false)]);
  const parent = batchOf(schema, [makeData({ type: new Int32(), data: values, length: 100, nullCount: 0 })], 100);
  const slice = parent.slice(10, 20);
  const { prepared, received } = sendThroughChannel(slice, 'exclusive');
  expect(prepared.transferredBytes).toBe(0);
  expect(values.byteLength, "the parent's values are not detached").toBe(400);
  expect([...received.getChild('x')!]).toEqual([10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
});

test('two columns made from the same typed array: both are copied (moving it would empty the other)', () => {
  const values = new Int32Array([5, 6, 7]);
  const schema = new Schema([new Field('a', new Int32(), false), new Field('b', new Int32(), false)]);
  const batch = batchOf(schema, [0, 1].map(() => makeData({ type: new Int32(), data: values, length: 3, nullCount: 0 })), 3);
  const { prepared, received } = sendThroughChannel(batch, 'exclusive');
  expect(prepared.transferredBytes).toBe(0);
  expect(values.byteLength).toBe(12);
  expect([...received.getChild('b')!]).toEqual([5, 6, 7]);
});

test('copy mode moves nothing: the sender keeps a usable batch', () => {
  const values = new Int32Array(64).fill(9);
  const schema = new Schema([new Field('x', new Int32(), false)]);
  const batch = batchOf(schema, [makeData({ type: new Int32(), data: values, length: 64, nullCount: 0 })], 64);
  const { prepared, received } = sendThroughChannel(batch, 'copy');
  expect(prepared.transferredBytes).toBe(0);
  expect(prepared.copiedBytes).toBe(256);
  expect(values.byteLength).toBe(256);
  expect(received.getChild('x')!.get(63)).toBe(9);
});

test('a SharedArrayBuffer is shared as it is, neither copied nor moved', () => {
  const values = new Int32Array(new SharedArrayBuffer(16));
  values.set([1, 2, 3, 4]);
  const schema = new Schema([new Field('x', new Int32(), false)]);
  const batch = batchOf(schema, [makeData({ type: new Int32(), data: values, length: 4, nullCount: 0 })], 4);
  const { prepared, received } = sendThroughChannel(batch, 'exclusive');
  expect(prepared.transferredBytes + prepared.copiedBytes).toBe(0);
  values[0] = 42; // the receiver sees the same memory
  expect(received.getChild('x')!.get(0)).toBe(42);
});

test('a dictionary column arrives with its dictionary', () => {
  const type = new Dictionary(new Utf8(), new Int32());
  const dictionary = vectorFromArray(['red', 'green', 'blue'], new Utf8());
  const indices = Int32Array.of(2, 0, 1, 1, 2);
  const column = makeData({ type, length: 5, nullCount: 0, data: indices, dictionary: new Vector([dictionary.data[0]!]) });
  const schema = new Schema([new Field('color', type, false)]);
  const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 5, nullCount: 0, children: [column] }));
  const { received } = sendThroughChannel(batch, 'exclusive');
  expect([...received.getChild('color')!]).toEqual(['blue', 'red', 'green', 'green', 'blue']);
});

describe('a stream of batches shares its dictionaries as the sender did', () => {
  const TYPE = new Dictionary(new Utf8(), new Int32(), 4);
  const SCHEMA = new Schema([new Field('d', TYPE, true), new Field('e', TYPE, true)]);

  function batchSharing(dictionary: Vector, indices: number[]): RecordBatch {
    const column = () => makeData({ type: TYPE, length: indices.length, nullCount: 0, data: Int32Array.from(indices), dictionary });
    return new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: indices.length, nullCount: 0, children: [column(), column()] }));
  }

  /** A sender and a receiver of one stream, through a real MessageChannel. */
  function stream() {
    const { port1, port2 } = new MessageChannel();
    const sent = new SentDictionaries();
    const received = new ReceivedDictionaries();
    return {
      send(batch: RecordBatch, mode: TransferMode = 'exclusive') {
        const prepared = batchToTransferable(batch, mode, sent);
        port1.postMessage(prepared.batch, prepared.transfer);
        sent.commit();
        const message = receiveMessageOnPort(port2)!.message as TransferableBatch;
        return { message, batch: batchFromTransferable(message, SCHEMA, received) };
      },
      close: () => port1.close(),
    };
  }

  const chunksOf = (message: TransferableBatch, column: number) => message.data.children[column]!.dictionary!.map((c) => (c.data === null ? `#${c.id}` : `${c.id}`));

  test('two columns of one dictionary get one Vector (it was one per column, and a writer in the worker refused them as different dictionaries)', () => {
    const s = stream();
    const { message, batch } = s.send(batchSharing(vectorFromArray(['a', 'b'], new Utf8()), [0, 1, 1]));
    expect(chunksOf(message, 0)).toEqual(['0']);
    expect(chunksOf(message, 1)).toEqual(['#0']); // sent once
    expect(batch.getChild('d')!.data[0]!.dictionary).toBe(batch.getChild('e')!.data[0]!.dictionary);
    expect([...batch.getChild('e')!]).toEqual(['a', 'b', 'b']);
    s.close();
  });

  test('from batch to batch: a dictionary is sent once, an extended one (an IPC delta: old chunks plus new) sends only its new chunks, and the receiver keeps one Vector', () => {
    const s = stream();
    const first = new Vector([vectorFromArray(['a', 'b'], new Utf8()).data[0]!]);
    const extended = new Vector([...first.data, vectorFromArray(['c'], new Utf8()).data[0]!]);
    const one = s.send(batchSharing(first, [0, 1]));
    const two = s.send(batchSharing(first, [1, 1]), 'exclusive'); // the first move did not empty the sender's dictionary
    const three = s.send(batchSharing(extended, [2, 0]));
    expect(chunksOf(two.message, 0)).toEqual(['#0']);
    expect(chunksOf(three.message, 0)).toEqual(['#0', '1']);
    expect(two.batch.getChild('d')!.data[0]!.dictionary).toBe(one.batch.getChild('d')!.data[0]!.dictionary);
    expect(three.batch.getChild('d')!.data[0]!.dictionary!.data[0]).toBe(one.batch.getChild('d')!.data[0]!.dictionary!.data[0]);
    expect([...three.batch.getChild('d')!]).toEqual(['c', 'a']);
    expect([...first]).toEqual(['a', 'b']); // dictionaries are copied, never moved
    s.close();
  });

  test('a chunk the batch before did not carry is sent again in full (the receiver keeps one batch of them)', () => {
    const s = stream();
    const red = vectorFromArray(['red'], new Utf8());
    s.send(batchSharing(red, [0]));
    s.send(batchSharing(vectorFromArray(['blue'], new Utf8()), [0]));
    const again = s.send(batchSharing(red, [0, 0]));
    expect(chunksOf(again.message, 0)).toEqual(['2']);
    expect([...again.batch.getChild('d')!]).toEqual(['red', 'red']);
    s.close();
  });

  test('a reference to a chunk the receiver never got is CS_INVALID_ARGUMENT', () => {
    const prepared = batchToTransferable(batchSharing(vectorFromArray(['x'], new Utf8()), [0]));
    prepared.batch.data.children[0]!.dictionary![0]!.data = null;
    prepared.batch.data.children[1]!.dictionary![0]!.data = null;
    expect(() => batchFromTransferable(prepared.batch, SCHEMA)).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
  });
});

test('an unknown transfer mode is refused with CS_INVALID_ARGUMENT', () => {
  const schema = new Schema([new Field('x', new Int32(), false)]);
  const batch = batchOf(schema, [sequenceColumn(0, 3)], 3);
  expect(() => batchToTransferable(batch, 'move' as TransferMode)).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
});

/**
 * Property: a batch of random nested columns (lists, large lists, fixed-size
 * lists, structs, maps, unions, dictionaries over the flat types, up to 4
 * deep), as built, read from an IPC stream, sliced, or sliced twice, crosses
 * intact in both modes, and a batch the sender keeps (a slice's parent, or
 * any batch sent with 'copy') stays intact. FC_SEED / FC_RUNS override.
 */
test('property: random nested batches, their slices and slices of slices cross intact in both modes', () => {
  const seed = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : 0x7a5f;
  const runs = process.env.FC_RUNS !== undefined ? Number(process.env.FC_RUNS) : 400;
  const caseArb = fc.record({
    typeSeed: fc.nat(),
    depth: fc.integer({ min: 1, max: 4 }),
    columns: fc.integer({ min: 1, max: 3 }),
    rows: fc.oneof(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 300 })),
    nullRate: fc.constantFrom(0, 0.1, 0.5),
    form: fc.constantFrom<'built' | 'ipc'>('built', 'built', 'ipc'),
    cuts: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 2 }),
    mode: fc.constantFrom<TransferMode>('exclusive', 'copy'),
    seed: fc.nat(),
  });
  fc.assert(
    fc.property(caseArb, (c) => {
      const typeRng = new Rng(c.typeSeed);
      const rng = new Rng(c.seed);
      const fields = Array.from({ length: c.columns }, (_, i) => new Field(`c${i}`, randomType(typeRng, c.depth, 0.8), true));
      const schema = new Schema(fields);
      const children = fields.map((f) => buildAny(f.type, c.rows, rng, { nullRate: c.nullRate }));
      let batch = new RecordBatch(schema, makeData({ type: new Struct(fields), length: c.rows, nullCount: 0, children }));
      // arrow-js's IPC writer cannot take view columns under lists (containsView)
      if (c.form === 'ipc' && c.rows > 0 && !fields.some((f) => containsView(f.type))) batch = tableFromIPC(tableToIPC([batch] as never, 'stream')).batches[0]!;
      const parents = [batch];
      let sameAsParent = 0; // a slice of all of its parent's rows is its parent to arrow-js: sending it hands the parent over
      for (const [a, b] of c.cuts) {
        const begin = a % (batch.numRows + 1);
        const end = begin + (b % (batch.numRows - begin + 1));
        sameAsParent = begin === 0 && end === batch.numRows ? sameAsParent + 1 : 0;
        batch = batch.slice(begin, end);
        parents.push(batch);
      }
      const sent = parents.pop()!;
      const kept = c.mode === 'copy' ? [...parents, sent] : parents.slice(0, parents.length - sameAsParent);
      const before = kept.map((b) => rowsOf(b));
      const expected = rowsOf(sent);
      const { received } = sendThroughChannel(sent, c.mode);
      expect(rowsOf(received)).toEqual(expected);
      expect(kept.map((b) => rowsOf(b)), 'what the sender keeps is intact').toEqual(before);
    }),
    { numRuns: runs, seed },
  );
});
