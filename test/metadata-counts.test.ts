/**
 * arrow-js loops over every element a flatbuffer vector's count claims, synchronously: a fuzz case
 * (seed 5151, case 9185, a spliced partition) gave a field 828 million custom metadata entries, and
 * reading the schema hung for minutes, beyond the reach of any timeout. Every count arrow-js loops
 * over, and the strings it decodes, are checked against the metadata's size first: in the shuffle
 * reader, the CLI's input and its file footers. So are the values of a record batch's variadic buffer
 * counts (seed 31415926, case 17804: a flipped bit made one 8 million, and arrow-js spent 20 s making
 * empty buffers).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Field, Int32, Schema, Struct, Table, tableToIPC, Utf8View, vectorFromArray } from 'apache-arrow';
import { MessageHeader, MetadataVersion } from 'apache-arrow/enum';
import { Message } from 'apache-arrow/ipc/metadata/message';
import { Message as FbMessage } from 'apache-arrow/fb/message';
import { Footer as FbFooter } from 'apache-arrow/fb/footer';
import { RecordBatch as FbRecordBatch } from 'apache-arrow/fb/record-batch';
import { Schema as FbSchema } from 'apache-arrow/fb/schema';
import { ByteBuffer } from 'flatbuffers';
import { footerCountProblem, metadataCountProblem } from '../src/format/metadata-counts.js';
import { readIpcSchema, readIpcStream } from '../src/format/ipc-reader.js';
import { encodeRecordBatchHeader, encodeSchemaMessage, END_OF_STREAM } from '../src/format/ipc-message.js';
import { openArrowInput } from '../src/cli/input.js';
import { ShuffleError } from '../src/errors.js';

const CLAIM = 800_000_000;

/** A schema message with custom metadata on the message, the schema, a struct field and its child. */
function schemaMessage(fieldMetadata = new Map([['fk', 'fv']])): Uint8Array {
  const child = new Field('b', new Int32(), true, fieldMetadata);
  const schema = new Schema([new Field('a', new Struct([child]), true, new Map([['fk', 'fv']]))], new Map([['sk', 'sv']]));
  return Message.encode(new Message(0, MetadataVersion.V5, MessageHeader.Schema, schema, new Map([['mk', 'mv']])));
}

/** A table of the flatbuffer: its ByteBuffer and position. */
interface Table_ {
  bb: ByteBuffer;
  bb_pos: number;
}

/** A copy of `bytes` whose vector in `slot` of the table `locate` finds claims `count` elements. */
function withCount(bytes: Uint8Array, locate: (bb: ByteBuffer) => Table_, slot: number, count: number): Uint8Array {
  const copy = bytes.slice();
  const bb = new ByteBuffer(copy);
  const table = locate(bb);
  const field = bb.__offset(table.bb_pos, slot);
  expect(field, 'the vector is present').not.toBe(0);
  bb.writeInt32(bb.__vector(table.bb_pos + field) - 4, count);
  return copy;
}

const message = (bb: ByteBuffer) => FbMessage.getRootAsMessage(bb) as unknown as Table_;
const schemaOf = (bb: ByteBuffer) => FbMessage.getRootAsMessage(bb).header(new FbSchema()) as FbSchema;
const schemaTable = (bb: ByteBuffer) => schemaOf(bb) as unknown as Table_;
const structField = (bb: ByteBuffer) => schemaOf(bb).fields(0) as unknown as Table_;
const childField = (bb: ByteBuffer) => schemaOf(bb).fields(0)!.children(0) as unknown as Table_;

// vtable slots (Message.fbs / Schema.fbs / File.fbs)
const MESSAGE_CUSTOM_METADATA = 12;
const SCHEMA_FIELDS = 6;
const SCHEMA_CUSTOM_METADATA = 8;
const FIELD_TYPE_TYPE = 8;
const FIELD_CHILDREN = 14;
const FIELD_CUSTOM_METADATA = 16;
const FOOTER_DICTIONARIES = 8;
const FOOTER_RECORD_BATCHES = 10;
const RECORD_BATCH_VARIADIC_COUNTS = 12;

const concatBytes = (parts: Uint8Array[]): Uint8Array => new Uint8Array(Buffer.concat(parts));

const VECTORS: [string, (bb: ByteBuffer) => Table_, number, string][] = [
  ["the message's custom metadata", message, MESSAGE_CUSTOM_METADATA, 'message custom metadata claims 800000000 entries'],
  ["the schema's fields", schemaTable, SCHEMA_FIELDS, 'the schema claims 800000000 fields'],
  ["the schema's custom metadata", schemaTable, SCHEMA_CUSTOM_METADATA, 'schema custom metadata claims 800000000 entries'],
  ["a field's children", structField, FIELD_CHILDREN, 'a field claims 800000000 children'],
  ["a field's custom metadata", structField, FIELD_CUSTOM_METADATA, 'field custom metadata claims 800000000 entries'],
  ["a nested field's custom metadata", childField, FIELD_CUSTOM_METADATA, 'field custom metadata claims 800000000 entries'],
];

describe('a schema message', () => {
  test('as written, passes', () => {
    expect(metadataCountProblem(schemaMessage())).toBeNull();
  });

  test.each(VECTORS)('claiming 800 million elements in %s is refused before arrow-js decodes it', (_, locate, slot, problem) => {
    const corrupt = withCount(schemaMessage(), locate, slot, CLAIM);
    expect(metadataCountProblem(corrupt)).toMatch(new RegExp(`^${problem}`));
    // the shuffle reader's way in: a stream starting with the message
    const stream = new Uint8Array(8 + corrupt.byteLength);
    new DataView(stream.buffer).setInt32(0, -1, true);
    new DataView(stream.buffer).setInt32(4, corrupt.byteLength, true);
    stream.set(corrupt, 8);
    expect(() => readIpcSchema(stream, { file: 'x.data' })).toThrow(expect.objectContaining({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining(problem) }));
  });

  test('custom metadata entries all pointing at one long value are refused: decoding would cost far more than the metadata holds', () => {
    const entries = new Map(Array.from({ length: 64 }, (_, i) => [`k${i}`, i === 0 ? 'v'.repeat(2000) : 'v']));
    const bytes = schemaMessage(entries);
    expect(metadataCountProblem(bytes)).toBeNull();
    const copy = bytes.slice();
    const bb = new ByteBuffer(copy);
    const field = childField(bb);
    const vector = bb.__vector(field.bb_pos + bb.__offset(field.bb_pos, FIELD_CUSTOM_METADATA));
    const entryAt = (i: number) => vector + 4 * i + bb.readInt32(vector + 4 * i);
    // the entry whose value is long (the builder wrote the vector in order)
    const long = entryAt(0);
    for (let i = 1; i < 64; i++) bb.writeInt32(vector + 4 * i, long - (vector + 4 * i));
    expect(metadataCountProblem(copy)).toMatch(/^names and custom metadata add up to more than 4 x the \d+ bytes of metadata$/);
  });

  test.each([
    ['a top-level field', structField],
    ['a nested field', childField],
  ])('%s of type NONE (a damaged or absent type) is refused: arrow-js would read it as a Null column', (_, locate) => {
    const copy = schemaMessage().slice();
    const bb = new ByteBuffer(copy);
    const field = locate(bb);
    const typeType = field.bb_pos + bb.__offset(field.bb_pos, FIELD_TYPE_TYPE);
    expect(bb.readUint8(typeType)).toBeGreaterThan(0); // Struct, Int
    bb.writeUint8(typeType, 0);
    expect(metadataCountProblem(copy)).toBe('a field has type NONE (no type)');
    const stream = new Uint8Array(8 + copy.byteLength);
    new DataView(stream.buffer).setInt32(0, -1, true);
    new DataView(stream.buffer).setInt32(4, copy.byteLength, true);
    stream.set(copy, 8);
    expect(() => readIpcSchema(stream, { file: 'x.data' })).toThrow(expect.objectContaining({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('type NONE') }));
  });

  test("a string whose length runs past the metadata is unreadable", () => {
    const copy = schemaMessage().slice();
    const bb = new ByteBuffer(copy);
    const field = childField(bb);
    const name = field.bb_pos + bb.__offset(field.bb_pos, 4);
    bb.writeInt32(name + bb.readInt32(name), 1 << 30);
    expect(metadataCountProblem(copy)).toMatch(/^the metadata flatbuffer is unreadable: a string of 1073741824 bytes/);
  });
});

describe('an Arrow file footer', () => {
  const file = tableToIPC(new Table({ id: vectorFromArray([1, 2, 3], new Int32()) }), 'file');
  // file layout: ... footer | int32 footer length | "ARROW1"
  const footerLength = new DataView(file.buffer, file.byteOffset + file.byteLength - 10, 4).getInt32(0, true);
  const footerStart = file.byteLength - 10 - footerLength;
  const footer = file.subarray(footerStart, footerStart + footerLength);
  const footerTable = (bb: ByteBuffer) => FbFooter.getRootAsFooter(bb) as unknown as Table_;
  let dir: string;
  beforeAll(async () => (dir = await mkdtemp(join(tmpdir(), 'cs-counts-'))));
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  test('as written, passes', () => {
    expect(footerCountProblem(footer)).toBeNull();
  });

  test.each<[string, (bb: ByteBuffer) => Table_, number, RegExp]>([
    ['record batch blocks', footerTable, FOOTER_RECORD_BATCHES, /^the footer claims 800000000 record batch blocks/],
    ['dictionary blocks', footerTable, FOOTER_DICTIONARIES, /^the footer claims 800000000 dictionary blocks/],
    ["fields in the footer's schema", (bb) => FbFooter.getRootAsFooter(bb).schema() as unknown as Table_, SCHEMA_FIELDS, /^the schema claims 800000000 fields/],
  ])('claiming 800 million %s is refused', (_, locate, slot, problem) => {
    expect(footerCountProblem(withCount(footer, locate, slot, CLAIM))).toMatch(problem);
  });

  test('the CLI refuses an input file whose footer claims too much, as CS_CORRUPT_DATA naming the file', async () => {
    const corrupt = file.slice();
    corrupt.set(withCount(footer, footerTable, FOOTER_RECORD_BATCHES, CLAIM), footerStart);
    const path = join(dir, 'corrupt-footer.arrow');
    await writeFile(path, corrupt);
    const error = await openArrowInput(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringMatching(/footer claims 800000000 record batch blocks.*corrupt-footer\.arrow/) });
  });

  test("the CLI refuses an input stream whose schema claims too much, as CS_CORRUPT_DATA naming the claim", async () => {
    const corrupt = withCount(schemaMessage(), childField, FIELD_CUSTOM_METADATA, CLAIM);
    expect(metadataCountProblem(corrupt), 'the claim is caught (else the read below would hang)').not.toBeNull();
    const stream = new Uint8Array(8 + corrupt.byteLength + 8);
    new DataView(stream.buffer).setInt32(0, -1, true);
    new DataView(stream.buffer).setInt32(4, corrupt.byteLength, true);
    stream.set(corrupt, 8);
    stream.set([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0], 8 + corrupt.byteLength);
    const path = join(dir, 'corrupt-schema.arrows');
    await writeFile(path, stream);
    const error = await openArrowInput(path).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringMatching(/field custom metadata claims 800000000 entries/) });
  });
});

describe('a record batch with a view column', () => {
  // one Utf8View column of two inline values, "ab" and "xyz": validity (none), 32 bytes of views, one (empty) variadic buffer
  const schema = new Schema([new Field('s', new Utf8View(), true)]);
  const views = new Uint8Array(32);
  const viewData = new DataView(views.buffer);
  viewData.setInt32(0, 2, true);
  views.set([0x61, 0x62], 4);
  viewData.setInt32(16, 3, true);
  views.set([0x78, 0x79, 0x7a], 20);

  /** The stream, its variadic count set to `count` (as written: 1). */
  function streamWith(count: bigint): Uint8Array {
    const header = encodeRecordBatchHeader(2, [{ length: 2, nullCount: 0, variadicBuffers: 1 }], [0, 0, 0, 32, 32, 0], null, 32);
    const bb = new ByteBuffer(header.subarray(8));
    const batch = FbMessage.getRootAsMessage(bb).header(new FbRecordBatch()) as FbRecordBatch;
    const table = batch as unknown as Table_;
    bb.writeInt64(bb.__vector(table.bb_pos + bb.__offset(table.bb_pos, RECORD_BATCH_VARIADIC_COUNTS)), count);
    return concatBytes([encodeSchemaMessage(schema), header, views, END_OF_STREAM]);
  }

  async function readAll(stream: Uint8Array): Promise<string[]> {
    const values: string[] = [];
    for await (const batch of readIpcStream(stream, { file: 'x.data', partition: 0 })) {
      for (let i = 0; i < batch.numRows; i++) values.push(String(batch.getChildAt(0)!.get(i)));
    }
    return values;
  }

  test('as written, reads back', async () => {
    expect(await readAll(streamWith(1n))).toEqual(['ab', 'xyz']);
  });

  test.each([
    [8_388_609n, /the record batch claims 8388609 variadic buffers but lists 3 buffers in all/],
    [-1n, /the record batch claims -1 variadic buffers for a column/],
  ])('a variadic count of %s is CS_CORRUPT_DATA before arrow-js decodes it (fuzz seed 31415926, case 17804: a flipped bit made a count of 8,388,609, and the read took 20 s)', async (count, problem) => {
    const error = await readAll(streamWith(count)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringMatching(problem) });
  });
});
