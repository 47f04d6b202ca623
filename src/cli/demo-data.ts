import { Field, Float64, Int32, Int64, List, makeData, Map_, RecordBatch, Schema, Struct, Utf8 } from 'apache-arrow';
import { batchBufferBytes } from '../writer/input-staging.js';

/**
 * The standard narrow shape: int64 key, float64, utf8 of ~20 bytes, int32 with 10 % nulls.
 * Deterministic (a fixed linear congruential generator), built from raw buffers.
 * Also the shape `npm run bench` measures (bench/run.ts).
 */
export const NARROW_SCHEMA = new Schema([
  new Field('key', new Int64(), false),
  new Field('amount', new Float64(), false),
  new Field('label', new Utf8(), false),
  new Field('quantity', new Int32(), true),
]);

export function narrowBatch(rows: number, seed: number): RecordBatch {
  let state = seed >>> 0 || 1;
  const next = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0);
  const keys = new BigInt64Array(rows);
  const amounts = new Float64Array(rows);
  const quantities = new Int32Array(rows);
  const validity = new Uint8Array((rows + 7) >> 3).fill(0xff);
  const offsets = new Int32Array(rows + 1);
  const text = new Uint8Array(rows * 24);
  let nulls = 0;
  let pos = 0;
  for (let i = 0; i < rows; i++) {
    keys[i] = BigInt(next() % 1_000_000);
    amounts[i] = next() / 1000;
    quantities[i] = next() % 1000;
    if (next() % 10 === 0) {
      validity[i >> 3]! &= ~(1 << (i & 7));
      nulls++;
    }
    const len = 16 + (next() % 9); // 16..24 bytes, ~20 on average
    for (let b = 0; b < len; b++) text[pos++] = 97 + (next() % 26);
    offsets[i + 1] = pos;
  }
  const children = [
    makeData({ type: new Int64(), length: rows, data: keys }),
    makeData({ type: new Float64(), length: rows, data: amounts }),
    makeData({ type: new Utf8(), length: rows, valueOffsets: offsets, data: text.subarray(0, pos) }),
    makeData({ type: new Int32(), length: rows, nullCount: nulls, nullBitmap: validity, data: quantities }),
  ];
  return new RecordBatch(NARROW_SCHEMA, makeData({ type: new Struct(NARROW_SCHEMA.fields), length: rows, children }));
}

/** Bytes of the batch's buffers as Arrow holds them (the uncompressed size of the data), nested children included. */
export const batchBytes: (batch: RecordBatch) => number = batchBufferBytes;

/**
 * The nested shape `npm run bench` measures: int64 key, list<int32> (0-6 items, 10 % null
 * lists), struct<id: int32, name: utf8 ~12 B> (5 % null structs), map<utf8 ~8 B, int64>
 * (0-4 entries). Deterministic, built from raw buffers.
 */
export const NESTED_SCHEMA = new Schema([
  new Field('key', new Int64(), false),
  new Field('tags', new List(new Field('item', new Int32(), true)), true),
  new Field('person', new Struct([new Field('id', new Int32(), true), new Field('name', new Utf8(), true)]), true),
  new Field('attributes', new Map_(new Field('entries', new Struct([new Field('key', new Utf8(), false), new Field('value', new Int64(), true)]), false) as never), true),
]);

export function nestedBatch(rows: number, seed: number): RecordBatch {
  let state = seed >>> 0 || 1;
  const next = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0);
  const text = (length: number, out: number[]) => {
    for (let b = 0; b < length; b++) out.push(97 + (next() % 26));
  };
  const keys = new BigInt64Array(rows);
  const listOffsets = new Int32Array(rows + 1);
  const items: number[] = [];
  const listValidity = new Uint8Array((rows + 7) >> 3).fill(0xff);
  const structValidity = new Uint8Array((rows + 7) >> 3).fill(0xff);
  const ids = new Int32Array(rows);
  const nameOffsets = new Int32Array(rows + 1);
  const names: number[] = [];
  const mapOffsets = new Int32Array(rows + 1);
  const mapKeyOffsets: number[] = [0];
  const mapKeys: number[] = [];
  const mapValues: bigint[] = [];
  let listNulls = 0;
  let structNulls = 0;
  for (let i = 0; i < rows; i++) {
    keys[i] = BigInt(next() % 1_000_000);
    if (next() % 10 === 0) {
      listValidity[i >> 3]! &= ~(1 << (i & 7));
      listNulls++;
    } else {
      for (let n = next() % 7; n > 0; n--) items.push(next() % 100_000);
    }
    listOffsets[i + 1] = items.length;
    if (next() % 20 === 0) {
      structValidity[i >> 3]! &= ~(1 << (i & 7));
      structNulls++;
    }
    ids[i] = next() % 1_000_000;
    text(8 + (next() % 9), names);
    nameOffsets[i + 1] = names.length;
    for (let n = next() % 5; n > 0; n--) {
      text(4 + (next() % 9), mapKeys);
      mapKeyOffsets.push(mapKeys.length);
      mapValues.push(BigInt(next()));
    }
    mapOffsets[i + 1] = mapValues.length;
  }
  const [, tagsField, personField, attributesField] = NESTED_SCHEMA.fields as [Field, Field<List>, Field<Struct>, Field<Map_>];
  const entriesType = attributesField.type.children[0]!.type as Struct;
  const entries = makeData({
    type: entriesType,
    length: mapValues.length,
    nullCount: 0,
    children: [
      makeData({ type: new Utf8(), length: mapValues.length, valueOffsets: Int32Array.from(mapKeyOffsets), data: Uint8Array.from(mapKeys) }),
      makeData({ type: new Int64(), length: mapValues.length, data: BigInt64Array.from(mapValues) }),
    ],
  });
  const children = [
    makeData({ type: new Int64(), length: rows, data: keys }),
    makeData({ type: tagsField.type, length: rows, nullCount: listNulls, nullBitmap: listValidity, valueOffsets: listOffsets, child: makeData({ type: new Int32(), length: items.length, data: Int32Array.from(items) }) }),
    makeData({
      type: personField.type,
      length: rows,
      nullCount: structNulls,
      nullBitmap: structValidity,
      children: [makeData({ type: new Int32(), length: rows, data: ids }), makeData({ type: new Utf8(), length: rows, valueOffsets: nameOffsets, data: Uint8Array.from(names) })],
    }),
    makeData({ type: attributesField.type, length: rows, valueOffsets: mapOffsets, child: entries } as never),
  ];
  return new RecordBatch(NESTED_SCHEMA, makeData({ type: new Struct(NESTED_SCHEMA.fields), length: rows, children }));
}
