import { Field, Float64, Int32, Int64, makeData, RecordBatch, Schema, Struct, Utf8 } from 'apache-arrow';

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

/** Bytes of the batch's buffers as Arrow holds them (the uncompressed size of the data). */
export function batchBytes(batch: RecordBatch): number {
  let total = 0;
  for (const child of batch.data.children) {
    for (const buffer of [child.values, child.valueOffsets, child.nullBitmap]) total += buffer?.byteLength ?? 0;
  }
  return total;
}
