import {
  Binary,
  Bool,
  DateDay,
  Dictionary,
  Field,
  Float64,
  Int32,
  Int64,
  LargeUtf8,
  List,
  Struct,
  Table,
  TimestampMillisecond,
  Utf8,
  tableToIPC,
  vectorFromArray,
  type DataType,
  type Vector,
} from 'apache-arrow';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { encodeRecordBatchHeader } from '../format/ipc-message.js';
import { decodedMessageObjects, readIpcStream } from '../format/ipc-reader.js';
import { retainShapes } from '../format/retained-shapes.js';

let retaining: Promise<void> | null = null;

/**
 * Once per thread, before the first read: reads a stream of two rows with a
 * column of each common type and layout (with and without nulls) and keeps
 * every object it made, so the maps of arrow-js's messages, schemas, types,
 * Data and RecordBatch objects outlive the reads (retained-shapes.ts).
 * Failing here costs speed only: the error is dropped.
 */
export function retainReaderShapes(): Promise<void> {
  retaining ??= sampleReadObjects().then(
    (objects) => retainShapes(...objects),
    () => undefined,
  );
  return retaining;
}

/** The objects a read of the sample stream makes: its batches, their Data and schemas, its messages and their headers. */
export async function sampleReadObjects(): Promise<unknown[]> {
  const objects: unknown[] = [];
  const column = (values: unknown[], type: DataType): Vector => vectorFromArray(values, type);
  const table = new Table({
    int32: column([1, 2], new Int32()),
    int32Nulls: column([1, null], new Int32()),
    int64: column([1n, null], new Int64()),
    float64: column([0.5, 1.5], new Float64()),
    utf8: column(['a', 'bc'], new Utf8()),
    utf8Nulls: column(['a', null], new Utf8()),
    largeUtf8: column(['a', null], new LargeUtf8()),
    binary: column([Uint8Array.of(1), null], new Binary()),
    bool: column([true, null], new Bool()),
    date: column([new Date(0), null], new DateDay()),
    timestamp: column([0, null], new TimestampMillisecond()),
    dictionary: column(['a', null], new Dictionary(new Utf8(), new Int32())),
    list: column([[1, 2], null], new List(new Field('item', new Int32(), true))),
    struct: column([{ a: 1 }, null], new Struct([new Field('a', new Int32(), true)])),
  });
  const stream = tableToIPC(table, 'stream');
  for await (const batch of readIpcStream(stream)) objects.push(batch, batch.data, batch.schema);
  objects.push(...decodedMessageObjects(stream));
  // a compressed record batch's message (its header has a BodyCompression), with a body of 16 zero bytes
  const header = encodeRecordBatchHeader(1, [{ length: 1, nullCount: 0 }], [0, 0, 0, 16], CompressionType.LZ4_FRAME, 16);
  const compressed = new Uint8Array(header.byteLength + 16);
  compressed.set(header);
  objects.push(...decodedMessageObjects(compressed));
  return objects;
}
