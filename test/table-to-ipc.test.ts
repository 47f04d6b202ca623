/**
 * tableToIpcStream (src/format/table-to-ipc.ts) writes any table as an IPC
 * stream that reads back to the same values, sliced view columns included,
 * which arrow-js 21.2.0's own tableToIPC writes wrong. The map-task worker
 * protocol sends range bounds through it, and rangeBoundsOf copies its bounds
 * out of the sample through it, and `columnar-shuffle read` writes each batch
 * through it. Null columns, which arrow-js writes with a null count of -1 when
 * sliced, are written with their length, and buffers that overlap in memory,
 * of which arrow-js writes fewer bytes than its header says, whole.
 */
import {
  BinaryView,
  Date_,
  Dictionary,
  Field,
  Float64,
  Int32,
  LargeList,
  List,
  Map_,
  MessageReader,
  Null,
  RecordBatch,
  Schema,
  Struct,
  Table,
  Utf8,
  Utf8View,
  Vector,
  makeData,
  tableFromIPC,
  tableToIPC,
  vectorFromArray,
  type Data,
} from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import { DateUnit } from 'apache-arrow/enum';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { writerSpecOf } from '../src/shuffle/worker-protocol.js';
import { throughArrowRs } from './support/arrow-rs.js';

const STRINGS = ['short', 'a value longer than twelve bytes', null, 'x', 'another value over twelve bytes', '', null, 'twelve bytes', 'thirteen byte'];
const views = vectorFromArray(STRINGS, new Utf8View());
const valuesOf = (table: Table, column: string) => [...table.getChild(column)!].map((v) => (v instanceof Uint8Array ? [...v] : v));

describe('sliced view columns', () => {
  test("arrow-js's own tableToIPC writes them wrong (the trap this works around)", () => {
    expect(() => [...tableFromIPC(tableToIPC(new Table({ s: views.slice(1, 2) }), 'stream')).getChild('s')!]).toThrow(/too short/);
  });

  test('every slice of a Utf8View column, nulls and long values included, reads back as it was', () => {
    for (let start = 0; start < STRINGS.length; start++) {
      for (let end = start; end <= STRINGS.length; end++) {
        const table = tableFromIPC(tableToIpcStream(new Table({ s: views.slice(start, end) })));
        expect(valuesOf(table, 's'), `rows [${start}, ${end})`).toEqual(STRINGS.slice(start, end));
      }
    }
  });

  test("a slice carries only its own long values, not the column's whole variadic buffers", () => {
    const long = Array.from({ length: 2000 }, (_, i) => `a value long enough to leave its view, ${i}`);
    const column = vectorFromArray(long, new Utf8View());
    const whole = tableToIpcStream(new Table({ s: column })).byteLength;
    const one = tableFromIPC(tableToIpcStream(new Table({ s: column.slice(1500, 1501) })));
    expect(whole).toBeGreaterThan(80_000);
    expect(tableToIpcStream(new Table({ s: column.slice(1500, 1501) })).byteLength).toBeLessThan(1000);
    expect([...one.getChild('s')!]).toEqual([long[1500]]);
  });

  test('a view pointing outside its buffers is refused with CS_INVALID_ARGUMENT naming the row', () => {
    const views = new Uint8Array(32);
    const at = new DataView(views.buffer);
    at.setInt32(0, 3, true); // row 0: "abc" inline
    views.set([97, 98, 99], 4);
    at.setInt32(16, 20, true); // row 1: 20 bytes at offset 100 of buffer 0, which has 30
    at.setInt32(24, 0, true);
    at.setInt32(28, 100, true);
    const column = makeData({ type: new Utf8View(), length: 2, nullCount: 0, views, variadicBuffers: [new Uint8Array(30)] });
    const error = (() => {
      try {
        tableToIpcStream(new Table({ s: new Vector([column]).slice(1, 2) }));
      } catch (e) {
        return e as { code?: string; message: string };
      }
      return null;
    })();
    expect(error?.code).toBe('CS_INVALID_ARGUMENT');
    expect(error?.message).toMatch(/the view of row 0 of a Utf8View column points outside its 1 variadic buffers/);
  });

  test('a BinaryView column sliced inside a struct, and a list of views whose offsets do not start at 0', () => {
    const bytes = STRINGS.map((s) => (s === null ? null : new TextEncoder().encode(s)));
    const binary = vectorFromArray(bytes, new BinaryView()).data[0]!;
    const structType = new Struct([new Field('b', new BinaryView(), true)]);
    const struct = makeData({ type: structType, length: bytes.length, nullCount: 0, children: [binary] });
    const listType = new List(new Field('item', new Utf8View(), true));
    const lists = vectorFromArray([['a value longer than twelve bytes', 'x'], null, ['another value over twelve bytes']], listType);
    const table = new Table({ t: new Vector([struct]).slice(3, 8) });
    const read = tableFromIPC(tableToIpcStream(table));
    expect([...read.getChild('t')!].map((row) => [...(row!.b as Uint8Array | null ?? [])])).toEqual(bytes.slice(3, 8).map((b) => [...(b ?? [])]));
    const readLists = tableFromIPC(tableToIpcStream(new Table({ l: lists.slice(2, 3) })));
    expect([...readLists.getChild('l')!].map((row) => (row === null ? null : [...row]))).toEqual([['another value over twelve bytes']]);
  });

  test('a dictionary of sliced views is rebuilt once for all the batches that share it', () => {
    const type = new Dictionary(new Utf8View(), new Int32());
    const dictionary = new Vector([vectorFromArray(['short', 'a value longer than twelve bytes', 'another value over twelve bytes', 'x'], new Utf8View()).data[0]!.slice(1, 2)]);
    const column = (indices: number[]) => makeData({ type, length: indices.length, nullCount: 0, data: Int32Array.from(indices), dictionary }) as Data<Dictionary>;
    const schema = new Schema([new Field('d', type, false)]);
    const batch = (indices: number[]) => new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: indices.length, nullCount: 0, children: [column(indices)] }));
    const bytes = tableToIpcStream(new Table([batch([0, 1]), batch([1, 1, 0])]));
    const [first, second] = ['a value longer than twelve bytes', 'another value over twelve bytes'];
    expect([...tableFromIPC(bytes).getChild('d')!]).toEqual([first, second, second, second, first]);
    // one dictionary message: the batches still share the dictionary
    expect(Buffer.from(bytes).toString('latin1').split('a value longer than twelve bytes').length - 1).toBe(1);
  });
});

describe('Null columns', () => {
  const nulls = (length: number) => makeData({ type: new Null(), length });
  /** [length, null count] of each field node of each record batch in `stream`, depth first. */
  const nodesOf = (stream: Uint8Array): [number, number][] => {
    const nodes: [number, number][] = [];
    const reader = new MessageReader(stream);
    for (let message = reader.readMessage(); message !== null; message = reader.readMessage()) {
      if (message.isRecordBatch()) nodes.push(...message.header().nodes.map((node): [number, number] => [Number(node.length), Number(node.nullCount)]));
      reader.readMessageBody(message.bodyLength);
    }
    return nodes;
  };
  // a Null column; a list and a map over Null values, whose children arrow-js's writer slices to their values; a struct of a Null
  const entries = new Struct([new Field('key', new Utf8(), false), new Field('value', new Null(), true)]);
  const keys = vectorFromArray(['a', 'b', 'c', 'd', 'e', 'f'], new Utf8()).data[0]!;
  const batch = new RecordBatch(
    new Schema([new Field('n', new Null(), true), new Field('l', new List(new Field('item', new Null(), true))), new Field('m', new Map_(new Field('entries', entries, false))), new Field('s', new Struct([new Field('a', new Null(), true)]))]),
    makeData({
      type: new Struct([new Field('n', new Null(), true), new Field('l', new List(new Field('item', new Null(), true))), new Field('m', new Map_(new Field('entries', entries, false))), new Field('s', new Struct([new Field('a', new Null(), true)]))]),
      length: 4,
      nullCount: 0,
      children: [
        nulls(4),
        makeData({ type: new List(new Field('item', new Null(), true)), length: 4, nullCount: 0, valueOffsets: Int32Array.of(0, 1, 3, 3, 6), child: nulls(6) }),
        makeData({ type: new Map_(new Field('entries', entries, false)), length: 4, nullCount: 0, valueOffsets: Int32Array.of(0, 2, 2, 5, 6), child: makeData({ type: entries, length: 6, nullCount: 0, children: [keys, nulls(6)] }) }),
        makeData({ type: new Struct([new Field('a', new Null(), true)]), length: 4, nullCount: 0, children: [nulls(4)] }),
      ],
    }),
  );
  // depth first: n; l, item; m, entries, key, value; s, a
  const NULL_NODES = [0, 2, 6, 8];

  test("arrow-js's own tableToIPC writes a sliced Null column's null count as -1, which arrow-rs refuses (the trap this works around)", () => {
    const written = tableToIPC(new Table(batch.slice(1, 2)), 'stream');
    expect(nodesOf(written)[0]).toEqual([1, -1]);
    expect(() => throughArrowRs(written)).toThrow(/null_count/);
  });

  test('whole or sliced, every Null column is written with its length as its null count, and arrow-rs reads it', () => {
    for (const [start, length] of [[0, 4], [1, 2], [2, 2], [3, 1]] as const) {
      const part = batch.slice(start, start + length);
      const stream = tableToIpcStream(part);
      const nodes = nodesOf(stream);
      expect(nodes).toHaveLength(9);
      expect(NULL_NODES.map((i) => nodes[i]![1]), `slice(${start}, ${start + length})`).toEqual(NULL_NODES.map((i) => nodes[i]![0]));
      expect(nodes.every(([, nullCount]) => nullCount >= 0)).toBe(true);
      const back = tableFromIPC(throughArrowRs(stream));
      expect(back.numRows).toBe(length);
      expect(back.getChild('l')!.toArray().map((list: { length: number } | null) => list?.length)).toEqual([...part.getChild('l')!].map((list) => list?.length));
    }
  });
});

describe('buffers that overlap in memory', () => {
  const valuesOf64 = (table: Table, column: string) => [...table.getChild(column)!];

  test("arrow-js's own tableToIPC loses bytes of them: a table whose two columns share one vector without nulls (the trap this works around)", () => {
    const values = vectorFromArray([1.5, 2.5, 3.5], new Float64());
    expect(() => tableFromIPC(tableToIPC(new Table({ a: values, b: values }), 'stream'))).toThrow(/Expected to read 48 bytes for message body, but only read 32/);
    const back = tableFromIPC(tableToIpcStream(new Table({ a: values, b: values })));
    expect([valuesOf64(back, 'a'), valuesOf64(back, 'b')]).toEqual([[1.5, 2.5, 3.5], [1.5, 2.5, 3.5]]);
  });

  test('struct children sharing one array, beside the column they share it with, read back as they were', () => {
    const values = vectorFromArray([1.5, 2.5, 3.5], new Float64());
    const struct = makeData({ type: new Struct([new Field('x', new Float64(), true), new Field('y', new Float64(), true)]), length: 3, nullCount: 0, children: [values.data[0]!, values.data[0]!] });
    const table = new Table({ a: values, s: new Vector([struct]) });
    const back = tableFromIPC(tableToIpcStream(table));
    expect(valuesOf64(back, 'a')).toEqual([1.5, 2.5, 3.5]);
    expect([...back.getChild('s')!].map((row) => row?.toJSON())).toEqual([{ x: 1.5, y: 1.5 }, { x: 2.5, y: 2.5 }, { x: 3.5, y: 3.5 }]);
    expect(() => throughArrowRs(tableToIpcStream(table))).not.toThrow();
  });

  test('a validity bitmap overlapping its own values (as our reader makes of a stream whose buffer regions overlap) reads back as it was', () => {
    // one ArrayBuffer: values at [0, 32) as 4 Float64s, the bitmap a view of its first 8 bytes, the first value's
    const bytes = new ArrayBuffer(32);
    const values = new Float64Array(bytes);
    values.set([1, 2, 3, 4]);
    const bitmap = new Uint8Array(bytes, 0, 8);
    bitmap[0] = 0b1011; // rows 0, 1 and 3 valid (and the first value's lowest byte)
    const validity = bitmap[0]!;
    const column = makeData({ type: new Float64(), length: 4, nullCount: 4 - [0, 1, 2, 3].filter((i) => (validity >> i) & 1).length, nullBitmap: bitmap, data: values });
    const expected = [...new Vector([column])];
    const back = tableFromIPC(tableToIpcStream(new Table({ v: new Vector([column]) })));
    expect([...back.getChild('v')!]).toEqual(expected);
    expect([...new Vector([column])]).toEqual(expected); // the batch itself is left as it was
  });
});

test("a dictionary column over arrow-js's empty dictionary of a nested type (no child Data) is written", () => {
  // arrow-js's makeData of a list type alone has no child, and arrow-js's writer failed on it with a TypeError;
  // our reader made such dictionaries for a dictionary column no dictionary batch came for (missing-dictionary.ts)
  const type = new Dictionary(new LargeList(new Field('item', new Date_(DateUnit.DAY), true)), new Int32(), 7);
  const empty = makeData({ type: type.dictionary });
  expect(empty.children[0]).toBeUndefined();
  const column = makeData({ type, length: 2, nullCount: 2, nullBitmap: new Uint8Array(1), data: new Int32Array(2), dictionary: new Vector([empty]) });
  const back = tableFromIPC(tableToIpcStream(new Table({ v: new Vector([column]) })));
  expect([...back.getChild('v')!]).toEqual([null, null]);
});

test('a table without sliced views is written exactly as arrow-js writes it', () => {
  const table = new Table({ s: views, i: vectorFromArray([1, 2, 3, 4, 5, 6, 7, 8, 9], new Int32()).slice(0, 9) });
  expect(Buffer.from(tableToIpcStream(table)).equals(Buffer.from(tableToIPC(table, 'stream')))).toBe(true);
  const sliced = new Table({ i: vectorFromArray([1, 2, 3, 4], new Int32()).slice(1, 2) });
  expect(Buffer.from(tableToIpcStream(sliced)).equals(Buffer.from(tableToIPC(sliced, 'stream')))).toBe(true);
});

test('a map task spec sends range bounds of sliced view columns as IPC bytes that read back to the same bounds', () => {
  const bounds = new Table({ key: views.slice(1, 2) }).concat(new Table({ key: views.slice(4, 5) }));
  const spec = writerSpecOf({ dir: '/tmp', id: { shuffleId: 0, mapId: 0, attempt: 0 }, numPartitions: 3, partitioning: { kind: 'range', keys: ['key'], bounds } });
  const sent = spec.partitioning!;
  expect(sent.kind === 'range' && sent.bounds instanceof Uint8Array).toBe(true);
  expect(valuesOf(tableFromIPC((sent as { bounds: Uint8Array }).bounds), 'key')).toEqual(['a value longer than twelve bytes', 'another value over twelve bytes']);
});
