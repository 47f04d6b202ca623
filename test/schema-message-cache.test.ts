/**
 * A reader decodes the schema message its partitions share once
 * (src/format/schema-message-cache.ts), from a copy of its bytes: what it
 * hands out is the schema of the bytes read, views none of them, and a
 * schema that failed its checks is never reused.
 */
import { describe, expect, test } from 'vitest';
import { Field, Int32, makeData, RecordBatch, Schema, SparseUnion, Struct, Table, Union, Utf8, vectorFromArray, type DataType } from 'apache-arrow';
import { UnionMode } from 'apache-arrow/enum';
import { encodeSchemaMessage } from '../src/format/ipc-message.js';
import { SchemaMessageCache } from '../src/format/schema-message-cache.js';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { outputOf, streamPieces } from './support/piecewise-output.js';
import { readBatches } from './support/ipc-batches.js';

const int32Table = (name: string, values: number[]) => new Table({ [name]: vectorFromArray(values, new Int32()) });

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** A stream of one batch of a sparse union column with type ids 0 and 1 (the schema holds them as an int32 vector). */
function unionStream(): Uint8Array {
  const union = new SparseUnion([0, 1], [new Field('a', new Int32(), true), new Field('b', new Int32(), true)]);
  const child = (values: number[]) => makeData({ type: new Int32(), length: 3, nullCount: 0, data: Int32Array.from(values) });
  const column = makeData({ type: union, length: 3, nullCount: 0, typeIds: Int8Array.of(0, 1, 0), children: [child([1, 2, 3]), child([4, 5, 6])] });
  const schema = new Schema([new Field('u', union, true)]);
  return tableToIpcStream(new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 3, nullCount: 0, children: [column] })));
}

describe('a reader decodes its partitions\' schema message once', () => {
  test.each([
    ['read whole', {}],
    ['read a message at a time', { wholePartitionBytes: 0 }],
  ])('every batch of every partition has the same field objects (%s)', async (_, options) => {
    const partitions = [[1, 2], [3], [4, 5, 6], [7]].map((values) => [tableToIpcStream(int32Table('v', values))]);
    const reader = await ShuffleReader.fromSources(outputOf(partitions), options);
    const batches: RecordBatch[] = [];
    for await (const batch of reader.readPartitions(0, reader.numPartitions)) batches.push(batch);
    await reader.close();
    expect(batches.flatMap((batch) => [...batch.getChildAt(0)!])).toEqual([1, 2, 3, 4, 5, 6, 7]);
    // (arrow-js gives each batch a Schema object of its own, over the fields it is handed)
    expect(new Set(batches.map((batch) => batch.schema.fields[0]!.type)).size).toBe(1);
  });

  test('two readers decode it each: they share no field objects', async () => {
    const typeOf = async () => {
      const reader = await ShuffleReader.fromSources(outputOf([[tableToIpcStream(int32Table('v', [1]))]]));
      const [batch] = await collect(reader.readPartition(0));
      await reader.close();
      return batch!.schema.fields[0]!.type;
    };
    expect(await typeOf()).not.toBe(await typeOf());
  });
});

describe('what the cache hands out', () => {
  test('is the schema of the bytes read: streams whose schema messages differ in one byte each get their own', async () => {
    const cache = new SchemaMessageCache();
    const [v, w] = [tableToIpcStream(int32Table('v', [1])), tableToIpcStream(int32Table('w', [2]))];
    expect(v.byteLength).toBe(w.byteLength); // the same length: only the name's byte tells them apart
    for (const [stream, name] of [[v, 'v'], [w, 'w'], [v, 'v']] as const) {
      const [batch] = await readBatches(stream, cache);
      expect(batch!.schema.fields.map((f) => f.name)).toEqual([name]);
    }
  });

  test('views none of the stream: overwriting it after the read leaves the union\'s type ids as they were', async () => {
    const cache = new SchemaMessageCache();
    const stream = unionStream();
    const [batch] = await readBatches(stream, cache);
    stream.fill(0x7f);
    expect([...(batch!.schema.fields[0]!.type as Union).typeIds]).toEqual([0, 1]);
    // and it serves the next stream with the same schema message
    const [again] = await readBatches(unionStream(), cache);
    expect(again!.schema.fields[0]!.type).toBe(batch!.schema.fields[0]!.type);
    expect([...again!.getChildAt(0)!]).toEqual([1, 5, 3]);
  });

  test('never holds a schema that failed its checks: the same bytes fail again, read through the same cache', async () => {
    const cache = new SchemaMessageCache();
    const repeated: DataType = new Union(UnionMode.Sparse, [3, 3], [new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]);
    const stream = encodeSchemaMessage(new Schema([new Field('u', repeated, true)]));
    for (let read = 0; read < 2; read++) {
      await expect(readBatches(stream, cache)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('a union with type ids 3, 3') });
    }
  });

  test('after a schema message cached, a damaged one in the next partition fails at that partition\'s offset', async () => {
    const good = tableToIpcStream(int32Table('v', [1]));
    const damaged = good.slice();
    damaged.fill(0xee, 12, 40); // inside the schema flatbuffer (the frame's 8 bytes are left whole)
    const reader = await ShuffleReader.fromSources(outputOf([[good], [damaged]]));
    expect((await collect(reader.readPartition(0))).length).toBe(1);
    await expect(collect(reader.readPartition(1))).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: good.byteLength } });
    await reader.close();
  });
});

describe('ShuffleReader.schema()', () => {
  test('reads the first partition\'s frame and schema metadata, nothing after them, and its schema serves the reads', async () => {
    const { schema, batches, end } = streamPieces(int32Table('v', [1, 2, 3]));
    const output = outputOf([[], [schema, batches, end]]);
    const reader = await ShuffleReader.fromSources(output);
    output.data.reads.length = 0;
    const found = await reader.schema();
    expect(found?.fields.map((f) => f.name)).toEqual(['v']);
    expect(Math.max(...output.data.reads.map(([offset, length]) => offset + length))).toBe(schema.byteLength);
    const [batch] = await collect(reader.readPartition(1));
    expect(batch!.schema.fields[0]!.type).toBe(found!.fields[0]!.type);
    await reader.close();
  });

  test('a schema metadata size past the partition\'s end fails as the partition\'s read fails: CS_CORRUPT_DATA, the same words, at the partition', async () => {
    const { schema, batches, end } = streamPieces(int32Table('v', [1]));
    const damaged = schema.slice();
    new DataView(damaged.buffer).setInt32(4, 1 << 20, true); // the metadata size, after the continuation marker
    const reader = await ShuffleReader.fromSources(outputOf([[], [damaged, batches, end]], true));
    const schemaError = await reader.schema().then(() => null, (error: unknown) => error);
    const readError = await collect(reader.readPartition(1)).then(() => null, (error: unknown) => error);
    await reader.close();
    expect(schemaError).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('runs past the end of the stream'), where: { partition: 1, offset: 0 } });
    expect((schemaError as Error).message).toBe((readError as Error).message);
  });
});
