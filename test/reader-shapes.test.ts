/**
 * The sample stream the reader reads once per thread (reader-shapes.ts) to keep
 * arrow-js's hidden classes and the row decoder's alive between reads: it must
 * read, both as an Arrow IPC stream and as a sort-writer partition, or the
 * reader silently goes without (retainReaderShapes drops its error).
 */
import { MessageHeader, RecordBatch, Type } from 'apache-arrow';
import { Message } from 'apache-arrow/ipc/metadata/message';
import { expect, test } from 'vitest';
import { sampleReadObjects } from '../src/reader/reader-shapes.js';

const rowsOf = (batch: RecordBatch) => batch.toArray().map((row) => JSON.stringify(row.toJSON(), (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)));

test('the sample stream reads back: one batch of two rows with a column of each sampled type, and every message of it', async () => {
  const objects = await sampleReadObjects();
  const batch = objects.find((o): o is RecordBatch => o instanceof RecordBatch)!;
  expect(batch.numRows).toBe(2);
  expect(batch.schema.fields.map((f) => Type[f.type.typeId])).toEqual([
    'Int', 'Int', 'Int', 'Float', 'Utf8', 'Utf8', 'LargeUtf8', 'Binary', 'Bool', 'Date', 'Timestamp', 'Dictionary', 'List', 'Struct',
  ]);
  expect(batch.getChild('int32Nulls')!.toArray()).toEqual(Int32Array.of(1, 0));
  expect(batch.getChild('int32Nulls')!.get(1)).toBeNull();
  expect(batch.getChild('utf8')!.get(1)).toBe('bc');
  expect(batch.getChild('dictionary')!.get(0)).toBe('a');
  // schema, dictionary batch, record batch, and the compressed record batch header
  const headers = objects.filter((o): o is Message => o instanceof Message).map((m) => MessageHeader[m.headerType]);
  expect(headers).toEqual(['Schema', 'DictionaryBatch', 'RecordBatch', 'RecordBatch']);
});

test('the same rows read back from the sample sort-writer partition: its raw block as they are, its compressed block as 16 copies', async () => {
  const batches = (await sampleReadObjects()).filter((o): o is RecordBatch => o instanceof RecordBatch);
  expect(batches.map((b) => b.numRows)).toEqual([2, 2, 32]);
  const [stream, raw, compressed] = batches as [RecordBatch, RecordBatch, RecordBatch];
  expect(raw.schema.fields.map((f) => String(f.type))).toEqual(stream.schema.fields.map((f) => String(f.type)));
  expect(rowsOf(raw)).toEqual(rowsOf(stream));
  expect(rowsOf(compressed)).toEqual(Array.from({ length: 16 }, () => rowsOf(stream)).flat());
});
