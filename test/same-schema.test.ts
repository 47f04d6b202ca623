/**
 * sameSchema decides whether a writer takes a batch after its first one, and whether the partitions
 * of one output agree (a coalescing read lays every batch out by the first one's layout). arrow-js
 * prints a sparse and a dense union of the same children alike, and does not print type ids: a fuzz
 * case (seed 31337, case 7038) gave one partition's union another mode, and the coalesced read
 * threw a TypeError. Those are compared on their own.
 */
import { Bool, Decimal, Dictionary, Field, Int32, List, Schema, Struct, Union, Utf8, type DataType } from 'apache-arrow';
import { UnionMode } from 'apache-arrow/enum';
import { expect, test } from 'vitest';
import { describeSchema, describeType, sameSchema, schemaDifference } from '../src/writer/same-schema.js';

const children = () => [new Field('i', new Int32(), true), new Field('s', new Utf8(), true)];
const schemaOf = (type: DataType) => new Schema([new Field('u', type, true)]);

test('two unions built alike are the same', () => {
  expect(sameSchema(schemaOf(new Union(UnionMode.Dense, [0, 1], children())), schemaOf(new Union(UnionMode.Dense, [0, 1], children())))).toBe(true);
});

test('a sparse and a dense union of the same children are not, though arrow-js prints them alike', () => {
  const sparse = new Union(UnionMode.Sparse, [0, 1], children());
  const dense = new Union(UnionMode.Dense, [0, 1], children());
  expect(String(sparse)).toBe(String(dense));
  expect(sameSchema(schemaOf(sparse), schemaOf(dense))).toBe(false);
});

test('unions whose children have other type ids are not', () => {
  expect(sameSchema(schemaOf(new Union(UnionMode.Sparse, [0, 1], children())), schemaOf(new Union(UnionMode.Sparse, [3, 7], children())))).toBe(false);
});

test('decimals of one precision and scale but other bit widths are not', () => {
  expect(sameSchema(schemaOf(new Decimal(2, 18, 128)), schemaOf(new Decimal(2, 18, 256)))).toBe(false);
});

test('other names, nullability or types are not', () => {
  const base = new Schema([new Field('a', new Bool(), true)]);
  expect(sameSchema(base, new Schema([new Field('b', new Bool(), true)]))).toBe(false);
  expect(sameSchema(base, new Schema([new Field('a', new Bool(), false)]))).toBe(false);
  expect(sameSchema(base, new Schema([new Field('a', new Int32(), true)]))).toBe(false);
});

test('describeType names each decimal\'s bit width, which arrow-js leaves out, at every depth and in dictionaries', () => {
  const d = (bits: number) => new Decimal(2, 9, bits);
  expect(String(d(32))).toBe(String(d(128))); // why describeType exists
  expect(describeType(d(32))).toBe('Decimal32[9e+2]');
  expect(describeType(d(256))).toBe('Decimal256[9e+2]');
  const nested = new Struct([new Field('a', d(64)), new Field('b', new List(new Field('item', d(128)))), new Field('c', new Dictionary(d(32), new Int32()))]);
  expect(describeType(nested)).toBe(String(nested).replace('Decimal[', 'Decimal64[').replace('Decimal[', 'Decimal128[').replace('Decimal[', 'Decimal32['));
  expect(describeType(new Int32())).toBe('Int32');
});

test('a schema difference names the decimal widths that differ', () => {
  const a = new Schema([new Field('k', new Struct([new Field('x', new Decimal(2, 9, 32))]))]);
  const b = new Schema([new Field('k', new Struct([new Field('x', new Decimal(2, 9, 64))]))]);
  expect(schemaDifference(a, b)).toContain('Decimal64[9e+2]');
  expect(describeSchema(a)).toBe('{k: Struct<{x:Decimal32[9e+2]}> not null}');
});

test('describeType prints containers as arrow-js does, with the widths of the decimals inside, whatever the field names hold', () => {
  const d = (bits: number) => new Decimal(2, 9, bits);
  // the width once went onto a field name holding "Decimal[" (the printed type was patched as text)
  expect(describeType(new Struct([new Field('Decimal[x', new Int32()), new Field('d', d(64))]))).toBe('Struct<{Decimal[x:Int32, d:Decimal64[9e+2]}>');
  const types: DataType[] = [new List(new Field('item', new Utf8())), new Struct([new Field('a', new Int32()), new Field('b', new Bool())]), new Dictionary(new Utf8(), new Int32())];
  for (const type of types) expect(describeType(type)).toBe(String(type));
});

test('dictionaries of decimals of other widths are not the same type (a decimal32 dictionary was taken for a decimal128 one, and its values read back wrong)', () => {
  const dictionaryOf = (bits: number) => new Dictionary(new Decimal(2, 9, bits), new Int32());
  expect(sameSchema(new Schema([new Field('d', dictionaryOf(128))]), new Schema([new Field('d', dictionaryOf(32))]))).toBe(false);
  expect(schemaDifference(new Schema([new Field('d', dictionaryOf(128))]), new Schema([new Field('d', dictionaryOf(32))]))).toContain('Dictionary<Int32, Decimal32[9e+2]>, expected Dictionary<Int32, Decimal128[9e+2]>');
  expect(sameSchema(new Schema([new Field('d', dictionaryOf(64))]), new Schema([new Field('d', dictionaryOf(64))]))).toBe(true);
});
