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
  type RecordBatch,
  type Vector,
} from 'apache-arrow';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { BufferRegion, FieldNode } from 'apache-arrow/ipc/metadata/message';
import { VectorLoader } from 'apache-arrow/visitor/vectorloader';
import { codecByName } from '../format/codec.js';
import { encodeRecordBatchHeader } from '../format/ipc-message.js';
import { decodedMessageObjects, DEFAULT_MAX_BUFFER_BYTES, readIpcStream } from '../format/ipc-reader.js';
import { retainShapes } from '../format/retained-shapes.js';
import { RowEncoder } from '../sort-writer/row-encoder.js';
import { BLOCK_HEADER_BYTES, encodeRowPartitionHeader, ROW_END, writeBlockHeader } from '../sort-writer/row-format.js';
import { rowLayoutOf } from '../sort-writer/row-layout.js';
import { BlockCursor, readRowPartition, RowHeaderCache } from '../sort-writer/row-reader.js';
import { columnLayoutOf } from '../writer/column-layout.js';
import { prepareSourceColumn } from '../writer/source-column.js';

let retaining: Promise<void> | null = null;

/**
 * Once per thread, before the first read: reads a stream of two rows with a
 * column of each common type and layout (with and without nulls), and the
 * same rows as a sort-writer partition, and keeps every object it made, so
 * the maps of arrow-js's messages, schemas, types, Data and RecordBatch
 * objects and of the row decoder's objects outlive the reads
 * (retained-shapes.ts). Failing here costs speed only: the error is dropped.
 */
export function retainReaderShapes(): Promise<void> {
  retaining ??= sampleReadObjects().then(
    (objects) => retainShapes(...objects),
    () => undefined,
  );
  return retaining;
}

/**
 * The objects a read of the sample stream makes (its batches, their Data and
 * schemas, its messages and their headers), then those a read of the same
 * rows as a sort-writer partition makes.
 */
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
  for await (const batch of readIpcStream(stream)) {
    objects.push(batch, batch.data, batch.schema);
    objects.push(...(await sampleRowReadObjects(batch)));
  }
  objects.push(...decodedMessageObjects(stream));
  // a compressed record batch's message (its header has a BodyCompression), with a body of 16 zero bytes
  const header = encodeRecordBatchHeader(1, [{ length: 1, nullCount: 0 }], [0, 0, 0, 16], CompressionType.LZ4_FRAME, 16);
  const compressed = new Uint8Array(header.byteLength + 16);
  compressed.set(header);
  objects.push(...decodedMessageObjects(compressed));
  return objects;
}

/** Copies of the sample rows in the sample partition's compressed block: enough for LZ4 to shrink them */
const COMPRESSED_COPIES = 16;

/**
 * The objects a read of `batch` as a sort-writer partition makes: its header
 * cache and decoder, the batches of its two blocks (the rows as they are, then
 * COMPRESSED_COPIES copies of them LZ4-compressed), their Data, the arrow-js
 * loader objects the decoder makes per batch, and the block cursor's objects.
 * The sort writer's reader (row-reader.ts, row-decoder.ts) makes these per
 * block and drops them, as the columnar reader does its messages: without
 * them, a full collection between two reads cost the next ~12 deoptimizations
 * (decodeRange, walkRows, decodeVariable, arrow-js's VectorLoader visits), and
 * reading the sort writer's 200 partitions of 2 M narrow rows right after one
 * took 251-291 ms against 240-258 with them (wide rows 231-261 against 211-218;
 * each variant in processes of its own, alternating).
 */
export async function sampleRowReadObjects(batch: RecordBatch): Promise<unknown[]> {
  const { partition, bodyStart, layout } = await sampleRowPartition(batch);
  const headers = new RowHeaderCache();
  const read = readRowPartition(partition, {}, {}, headers);
  const objects: unknown[] = [headers, read];
  for await (const rows of read) objects.push(rows, rows.data);
  const cursor = new BlockCursor(partition, bodyStart, layout, 'lz4', {}, DEFAULT_MAX_BUFFER_BYTES);
  for (let block = cursor.next(); block !== null; block = cursor.next()) objects.push(block);
  objects.push(cursor, new VectorLoader(new Uint8Array(0), [], [], new Map()), new FieldNode(0, 0), new BufferRegion(0, 0));
  return objects;
}

/**
 * `batch` as a whole sort-writer partition (row-format.ts): its header, a
 * block of its rows as they are, a block of COMPRESSED_COPIES copies of
 * them as one LZ4 frame, the end marker.
 */
async function sampleRowPartition(batch: RecordBatch) {
  const layout = rowLayoutOf(batch.schema.fields);
  const sources = batch.schema.fields.map((field, c) => prepareSourceColumn(batch.data.children[c]!, columnLayoutOf(field)));
  const n = batch.numRows;
  const encoder = new RowEncoder(layout);
  const rowBytes = new Uint32Array(n);
  const rowsLength = encoder.measure(sources, n, rowBytes);
  // the sample rows, then copies of them: every row starts at a multiple of 4
  const copies = new Uint8Array(rowsLength * COMPRESSED_COPIES);
  const rowStart = new Uint32Array(n);
  for (let i = 1; i < n; i++) rowStart[i] = rowStart[i - 1]! + ((rowBytes[i - 1]! + 3) & ~3);
  const ids = Uint32Array.from({ length: n }, (_, i) => i);
  encoder.encode(sources, ids, 0, n, copies, new DataView(copies.buffer), rowStart, rowBytes, new Uint32Array(n));
  const rows = copies.slice(0, rowsLength);
  for (let c = 1; c < COMPRESSED_COPIES; c++) copies.set(rows, c * rowsLength);
  const frame = Buffer.concat(await codecByName('lz4')!.compress(copies));

  const header = encodeRowPartitionHeader(batch.schema, 'lz4');
  const partition = new Uint8Array(header.byteLength + 2 * BLOCK_HEADER_BYTES + rowsLength + frame.byteLength + ROW_END.byteLength);
  const view = new DataView(partition.buffer);
  partition.set(header);
  let at = header.byteLength;
  writeBlockHeader(view, at, n, rowsLength, rowsLength);
  partition.set(rows, at + BLOCK_HEADER_BYTES);
  at += BLOCK_HEADER_BYTES + rowsLength;
  writeBlockHeader(view, at, n * COMPRESSED_COPIES, copies.byteLength, frame.byteLength);
  partition.set(frame, at + BLOCK_HEADER_BYTES);
  partition.set(ROW_END, partition.byteLength - ROW_END.byteLength);
  return { partition, bodyStart: header.byteLength, layout };
}
