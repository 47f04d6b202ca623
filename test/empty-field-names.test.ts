/**
 * A field named "" keeps its name through a shuffle. arrow-js writes no name
 * for it (the flatbuffer's absent string, which the format reads as "") and
 * decodes the absent name as null, so without restoreEmptyFieldNames the column
 * came back named "null" from both writers.
 */
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { Dictionary, Field, Int32, List, makeData, RecordBatch, Schema, Struct, Utf8, Vector, vectorFromArray, type DataType } from 'apache-arrow';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { createShuffleWriter, type WriterKind } from '../src/writer-kind.js';
import { makeTempDir, removeDir } from './support/shuffle-harness.js';
import { join } from 'node:path';

const ROWS = 6;

/** {"": int32, s: struct<"": int32>, l: list<"": utf8>, d: dictionary<int32, struct<"": utf8>>} */
function batchWithEmptyNames(): RecordBatch {
  const int32 = (values: number[]) => makeData({ type: new Int32(), length: values.length, data: Int32Array.from(values) });
  const structType = new Struct([new Field('', new Int32(), true)]);
  const listType = new List(new Field('', new Utf8(), true));
  const strings = vectorFromArray(['a', 'bb', 'ccc', 'dddd', 'e', 'ff', 'g', 'hh', 'iii', 'j', 'k', 'l'], new Utf8()).data[0]!;
  const dictionaryValues = makeData({ type: new Struct([new Field('', new Utf8(), true)]), length: 3, children: [vectorFromArray(['x', 'y', 'z'], new Utf8()).data[0]!] });
  const dictionaryType = new Dictionary(dictionaryValues.type, new Int32(), 0);
  const fields = [
    new Field('', new Int32(), false),
    new Field('s', structType, false),
    new Field('l', listType, false),
    new Field('d', dictionaryType, false),
  ];
  const children = [
    int32([0, 1, 2, 3, 4, 5]),
    makeData({ type: structType, length: ROWS, children: [int32([10, 11, 12, 13, 14, 15])] }),
    makeData({ type: listType, length: ROWS, valueOffsets: Int32Array.of(0, 2, 4, 6, 8, 10, 12), child: strings }),
    makeData({ type: dictionaryType, length: ROWS, data: Int32Array.of(0, 1, 2, 2, 1, 0), dictionary: new Vector([dictionaryValues]) }),
  ];
  const schema = new Schema(fields);
  return new RecordBatch(schema, makeData({ type: new Struct(fields), length: ROWS, children }));
}

/** Every field name under a type, depth first (a dictionary's children are its value type's). */
function childNames(type: DataType): string[] {
  return (type.children ?? []).flatMap((f) => [f.name, ...childNames(f.type)]);
}

const namesOf = (schema: Schema) => schema.fields.flatMap((f) => [f.name, ...childNames(f.type)]);

describe('fields named ""', () => {
  let dir = '';
  beforeEach(async () => (dir = await makeTempDir()));
  afterEach(async () => removeDir(dir));

  test.each<WriterKind>(['hash', 'sort'])('keep their names, at every depth, in the schema and the batches the %s writer\'s output reads back as', async (kind) => {
    const input = batchWithEmptyNames();
    expect(namesOf(input.schema)).toEqual(['', 's', '', 'l', '', 'd', '']);
    const prefix = join(dir, kind);
    const writer = await createShuffleWriter(kind, { numPartitions: 2, partitioning: { kind: 'round-robin' }, outputPrefix: prefix });
    await writer.write(input);
    await writer.finish();

    const reader = await ShuffleReader.open(prefix);
    try {
      expect(namesOf((await reader.schema())!)).toEqual(namesOf(input.schema));
      const rows: unknown[] = [];
      for (let p = 0; p < 2; p++) {
        for await (const batch of reader.readPartition(p)) {
          expect(namesOf(batch.schema)).toEqual(namesOf(input.schema));
          for (const row of batch) rows.push(JSON.stringify(row.toJSON()));
        }
      }
      const expected = [...input].map((row) => JSON.stringify(row.toJSON()));
      expect(rows.sort()).toEqual(expected.sort());
      expect(rows[0]).toContain('"":');
    } finally {
      await reader.close();
    }
  });
});
