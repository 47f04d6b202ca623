/**
 * Batches crossing threads (src/shuffle/batch-transfer.ts), through a real
 * MessageChannel: every flat type arrives intact; an ArrayBuffer that exactly
 * one buffer of the batch covers is moved (detached at the sender: no copy);
 * views into a shared ArrayBuffer (a table read from one IPC file) are copied
 * and the sender's data stays intact; `copy` mode never detaches anything.
 */
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { describe, expect, test } from 'vitest';
import { Dictionary, Field, Int32, makeData, RecordBatch, Schema, Struct, Table, tableFromIPC, tableToIPC, Utf8, Vector, vectorFromArray } from 'apache-arrow';
import { batchFromTransferable, batchToTransferable, type TransferMode } from '../src/shuffle/batch-transfer.js';
import { batchOf, buildColumn, schemaOf, sequenceColumn, TYPE_CASES } from './support/columns.js';
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

test('an unknown transfer mode is refused with CS_INVALID_ARGUMENT', () => {
  const schema = new Schema([new Field('x', new Int32(), false)]);
  const batch = batchOf(schema, [sequenceColumn(0, 3)], 3);
  expect(() => batchToTransferable(batch, 'move' as TransferMode)).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
});
