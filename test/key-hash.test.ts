/**
 * Nested hash keys are hashed as Spark's Murmur3Hash sees them: a struct as its fields
 * in order (each seeded with the hash so far, a null struct leaving the hash unchanged),
 * a dictionary column as its decoded values. Claimed by equivalence with flat keys, whose
 * Spark values test/murmur3.test.ts pins.
 */
import { DenseUnion, Dictionary, Field, Int32, Int64, Int8, List, Map_, RecordBatch, Schema, Struct, Utf8, Vector, makeData, type Data, type DataType } from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import { ShuffleError } from '../src/errors.js';
import { createPartitioner } from '../src/writer/partitioner.js';
import { buildColumn, utf8Column } from './support/columns.js';
import { Rng } from './support/random.js';

function batchOf(fields: Field[], children: Data[], length: number): RecordBatch {
  const schema = new Schema(fields);
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length, nullCount: 0, children }));
}

function partitionIds(batch: RecordBatch, keys: string[], n = 1000): number[] {
  const ids = new Uint32Array(batch.numRows);
  createPartitioner({ kind: 'hash', keys }, batch.schema, n, 0).computePartitionIds(batch, ids, 0);
  return [...ids];
}

/** `data` with nulls wherever `mask` (a struct's validity) is null, as plain bitmaps. */
function withNullsOf(data: Data, struct: Data): Data {
  const rows = data.length;
  const bitmap = new Uint8Array((rows + 7) >>> 3);
  let nullCount = 0;
  for (let i = 0; i < rows; i++) {
    if (struct.getValid(i) && data.getValid(i)) bitmap[i >>> 3]! |= 1 << (i & 7);
    else nullCount++;
  }
  const values = (data.type as DataType).typeId === new Utf8().typeId ? { valueOffsets: data.valueOffsets, data: data.values } : { data: data.values };
  return makeData({ type: data.type, length: rows, nullCount, nullBitmap: bitmap, ...values } as never);
}

describe('a struct key hashes like its fields as consecutive keys', () => {
  test.each([0, 0.2, 1])('struct<int32, utf8> with null rate %s at both levels', (nullRate) => {
    const rng = new Rng(7 + nullRate * 10);
    const rows = 500;
    const a = buildColumn(new Int32(), rows, { bitmap: true, nullRate }, rng);
    const b = buildColumn(new Utf8(), rows, { bitmap: true, nullRate }, rng);
    const type = new Struct([new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]);
    const validity = buildColumn(new Int8(), rows, { bitmap: true, nullRate }, rng);
    const struct = makeData({ type, length: rows, nullCount: validity.nullCount, nullBitmap: validity.nullBitmap, children: [a, b] });
    const nested = batchOf([new Field('k', type, true)], [struct], rows);
    const flat = batchOf([new Field('a', new Int32(), true), new Field('b', new Utf8(), true)], [withNullsOf(a, struct), withNullsOf(b, struct)], rows);
    expect(partitionIds(nested, ['k'])).toEqual(partitionIds(flat, ['a', 'b']));
  });

  test('a struct of a struct and an int64, sliced, hashes like the three leaves in order', () => {
    const rng = new Rng(11);
    const rows = 300;
    const x = buildColumn(new Int64(), rows, { bitmap: false, nullRate: 0 }, rng);
    const y = buildColumn(new Utf8(), rows, { bitmap: true, nullRate: 0.1 }, rng);
    const z = buildColumn(new Int64(), rows, { bitmap: true, nullRate: 0.1 }, rng);
    const innerType = new Struct([new Field('x', new Int64(), true), new Field('y', new Utf8(), true)]);
    const inner = makeData({ type: innerType, length: rows, nullCount: 0, children: [x, y] });
    const outerType = new Struct([new Field('inner', innerType, true), new Field('z', new Int64(), true)]);
    const outer = makeData({ type: outerType, length: rows, nullCount: 0, children: [inner, z] });
    const nested = batchOf([new Field('k', outerType, true)], [outer], rows).slice(17, 250);
    const flat = batchOf([new Field('x', new Int64(), true), new Field('y', new Utf8(), true), new Field('z', new Int64(), true)], [x, y, z], rows).slice(17, 250);
    expect(partitionIds(nested, ['k'])).toEqual(partitionIds(flat, ['x', 'y', 'z']));
  });
});

describe('a dictionary key hashes like its decoded values', () => {
  test.each([
    ['int8 indices, one chunk', new Int8(), 1],
    ['int32 indices, a dictionary of three chunks (IPC deltas)', new Int32(), 3],
    ['int64 indices', new Int64(), 1],
  ] as const)('%s, with null indices and null values', (_name, indexType, chunks) => {
    const rng = new Rng(5);
    const rows = 400;
    const pieces = Array.from({ length: chunks }, () => buildColumn(new Utf8(), 10, { bitmap: true, nullRate: 0.2 }, rng));
    const dictionary = new Vector(pieces);
    const type = new Dictionary(new Utf8(), indexType as Int32);
    const Indices = (indexType as Int32).ArrayType as unknown as new (n: number) => Int32Array;
    const indices = new Indices(rows);
    const validity = buildColumn(new Int8(), rows, { bitmap: true, nullRate: 0.1 }, rng);
    const picked: number[] = [];
    for (let i = 0; i < rows; i++) {
      picked.push(rng.int(0, dictionary.length - 1));
      (indices as unknown as (number | bigint)[])[i] = indices instanceof BigInt64Array ? BigInt(picked[i]!) : picked[i]!;
    }
    const encoded = makeData({ type, length: rows, nullCount: validity.nullCount, nullBitmap: validity.nullBitmap, data: indices, dictionary } as never);
    // the decoded column, built independently: each row's value, null where the index or the value is
    const values = picked.map((index, i) => (validity.getValid(i) ? (dictionary.get(index) as string | null) : null));
    const decoded = new Vector([utf8Column(values)]).data[0]!;
    const nested = batchOf([new Field('k', type, true)], [encoded], rows);
    const flat = batchOf([new Field('k', new Utf8(), true)], [decoded], rows);
    expect(partitionIds(nested, ['k'])).toEqual(partitionIds(flat, ['k']));
  });
});

describe('keys Spark would not hash are refused before any row is read', () => {
  test.each([
    ['a map inside a struct', new Struct([new Field('id', new Int32()), new Field('m', new Map_(new Field('entries', new Struct([new Field('key', new Utf8(), false), new Field('value', new Int32())]), false) as never))]), 's.m'],
    ['a dense union', new DenseUnion([0, 1], [new Field('a', new Int32()), new Field('b', new Utf8())]), 's'],
    ['a dictionary of lists', new Dictionary(new List(new Field('item', new Int32())), new Int32()), 's'],
  ] as const)('%s: CS_UNSUPPORTED_KEY_TYPE naming the column', (_name, type, column) => {
    const schema = new Schema([new Field('s', type as DataType)]);
    let caught: unknown;
    try {
      createPartitioner({ kind: 'hash', keys: ['s'] }, schema, 4, 0);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ShuffleError);
    expect((caught as ShuffleError).code).toBe('CS_UNSUPPORTED_KEY_TYPE');
    expect((caught as ShuffleError).where.column).toBe(column);
  });
});
