/**
 * The contract of the IPC reader (src/format/ipc-reader.ts) at edges a second
 * mutation sweep found unpinned: streams that end at once or start with a
 * dictionary, a batch whose column is longer than the batch, a delta before
 * any dictionary, type checks of children, lists, maps and unions, frames cut
 * inside their header or metadata, the maxBufferBytes argument and its
 * default, compressed buffers too short for their prefix, the limit across
 * compressed buffers, and what a borrowed body's batches keep.
 */
import { describe, expect, it, vi } from 'vitest';
import { Field, FixedSizeList, Int, Int32, Map_, Schema, SparseUnion, Struct, Union, Dictionary, Utf8 } from 'apache-arrow';
import { UnionMode } from 'apache-arrow/enum';
import { codecByName } from '../src/format/codec.js';
import { encodeRecordBatchHeader, encodeRecordBatchMessage, encodeSchemaMessage, END_OF_STREAM } from '../src/format/ipc-message.js';
import { readIpcSchemaAt, readIpcStream, readIpcStreamAt } from '../src/format/ipc-reader.js';
import { ShuffleError } from '../src/errors.js';
import { concat, failure, INT32_SCHEMA, int32Batch, int32Bytes, readAll, recordedReads, schemaFailure } from './support/int32-streams.js';

const schema = INT32_SCHEMA;

/** A stream of one int32 column whose single batch is compressed with `codec`, its values-buffer prefix rewritten to `prefix`. */
async function withPrefix(codec: 'lz4' | 'zstd', prefix: bigint): Promise<Uint8Array> {
  const message = await encodeRecordBatchMessage(1024, [{ length: 1024, nullCount: 0 }], [new Uint8Array(0), new Uint8Array(4096)], codecByName(codec));
  const head = encodeSchemaMessage(schema).byteLength + message.chunks[0]!.byteLength;
  const bytes = concat([encodeSchemaMessage(schema), ...message.chunks, END_OF_STREAM]);
  new DataView(bytes.buffer, bytes.byteOffset).setBigInt64(head, prefix, true);
  return bytes;
}

describe('where a stream starts and ends', () => {
  it('a stream of no bytes, or of its end-of-stream marker alone, yields no batches', async () => {
    expect(await readAll(new Uint8Array(0))).toEqual([]);
    expect(await readAll(END_OF_STREAM)).toEqual([]);
  });

  it('a stream that starts with a dictionary batch is CS_CORRUPT_DATA: it does not start with a schema message', async () => {
    const values = await encodeRecordBatchMessage(1, [{ length: 1, nullCount: 0 }], [new Uint8Array(0), int32Bytes([0, 1]), Buffer.from('a')], null, undefined, { id: 0, isDelta: false });
    const error = await failure(concat([...values.chunks, END_OF_STREAM]));
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('does not start with a schema message') });
  });

  it.each([1, 2, 3])('a continuation marker followed by %i of the 4 bytes of its size is CS_CORRUPT_DATA (a truncated header), not a RangeError', async (kept) => {
    const head = concat([encodeSchemaMessage(schema), await int32Batch([1])]);
    const error = await failure(concat([head, Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x10, 0, 0).subarray(0, 4 + kept)]));
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('truncated message header'), where: { offset: head.byteLength } });
  });

  it('metadata one byte longer than the stream has is CS_CORRUPT_DATA naming its size', async () => {
    const bare = encodeSchemaMessage(schema);
    const error = await failure(bare.subarray(0, bare.byteLength - 1));
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining(`message metadata of ${bare.byteLength - 8} bytes runs past the end of the stream`) });
  });
});

describe('record batches and dictionaries', () => {
  it('a record batch claiming fewer rows than its column holds is CS_CORRUPT_DATA', async () => {
    const batch = concat([encodeRecordBatchHeader(1, [{ length: 2, nullCount: 0 }], [0, 0, 0, 8], null, 8), int32Bytes([1, 2])]);
    expect(await failure(concat([encodeSchemaMessage(schema), batch, END_OF_STREAM]))).toMatchObject({
      code: 'CS_CORRUPT_DATA',
      message: expect.stringContaining('the record batch has 1 rows but column 0 has 2'),
    });
  });

  it('a delta dictionary batch before any dictionary of its id is the dictionary', async () => {
    const dictSchema = new Schema([new Field('d', new Dictionary(new Utf8(), new Int32(), 0), false)]);
    const delta = await encodeRecordBatchMessage(2, [{ length: 2, nullCount: 0 }], [new Uint8Array(0), int32Bytes([0, 1, 2]), Buffer.from('pq')], null, undefined, { id: 0, isDelta: true });
    expect(await readAll(concat([encodeSchemaMessage(dictSchema), ...delta.chunks, await int32Batch([1, 0]), END_OF_STREAM]))).toEqual([['q', 'p']]);
  });

  it('a buffer region of negative length is CS_CORRUPT_DATA naming the region', async () => {
    const batch = concat([encodeRecordBatchHeader(2, [{ length: 2, nullCount: 0 }], [0, 0, 8, -8], null, 8), int32Bytes([5, 6])]);
    expect(await failure(concat([encodeSchemaMessage(schema), batch, END_OF_STREAM]))).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('buffer [8, +-8) lies outside the message body') });
  });
});

describe('types the schema check refuses', () => {
  it('a problem in a struct\'s child is found, naming the field', () => {
    const struct = new Struct([new Field('a', new Int(true, 128 as 64), true)]);
    expect(schemaFailure(struct)).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('field "a" has a bit width of 128') });
  });

  it('a fixed-size list of -1 items is CS_CORRUPT_DATA', () => {
    expect(schemaFailure(new FixedSizeList(-1, new Field('item', new Int32(), true)))).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('has a list size of -1') });
  });

  it('a map whose entries are a struct of three fields, or a union of two, is CS_CORRUPT_DATA', () => {
    const three = new Struct([new Field('k', new Int32(), false), new Field('v', new Int32(), true), new Field('w', new Int32(), true)]);
    const union = new SparseUnion([0, 1], [new Field('k', new Int32(), true), new Field('v', new Int32(), true)]);
    for (const entries of [three, union]) {
      const map = new Map_(new Field('entries', entries as unknown as Struct, false));
      expect(schemaFailure(map), String(entries)).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('a map whose entries are not a struct of key and value') });
    }
  });

  it('a union of two children with one type id is CS_CORRUPT_DATA', () => {
    const union = new Union(UnionMode.Sparse, [0], [new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]);
    expect(schemaFailure(union)).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('a union of 2 children with 1 type ids') });
  });
});

describe('maxBufferBytes', () => {
  it('0 is a limit: a batch of no rows reads, one of a row is refused', async () => {
    const empty = concat([encodeSchemaMessage(schema), await int32Batch([]), END_OF_STREAM]);
    expect(await readAll(empty, {}, { maxBufferBytes: 0 })).toEqual([[]]);
    const one = concat([encodeSchemaMessage(schema), await int32Batch([1]), END_OF_STREAM]);
    expect(await failure(one, {}, { maxBufferBytes: 0 })).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('over the maxBufferBytes limit of 0') });
  });

  it('an integer past 2^53 is refused as an argument', async () => {
    const bytes = concat([encodeSchemaMessage(schema), await int32Batch([1]), END_OF_STREAM]);
    expect(await failure(bytes, {}, { maxBufferBytes: 2 ** 60 })).toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
  });

  it('by default a buffer claiming 2^31 bytes is over the limit of 2^31 - 1', async () => {
    expect(await failure(await withPrefix('zstd', 2n ** 31n))).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('claims 2147483648 bytes uncompressed, over the maxBufferBytes limit of 2147483647') });
  });

  it('a compressed buffer claiming exactly the limit reads', async () => {
    expect((await readAll(await withPrefix('lz4', 4096n), {}, { maxBufferBytes: 4096 }))[0]).toHaveLength(1024);
  });

  it('the limit is on the sum of a batch\'s compressed buffers, not each alone', async () => {
    const two = new Schema([new Field('a', new Int32(), false), new Field('b', new Int32(), false)]);
    const zeros = new Uint8Array(4000);
    const message = await encodeRecordBatchMessage(1000, [{ length: 1000, nullCount: 0 }, { length: 1000, nullCount: 0 }], [new Uint8Array(0), zeros, new Uint8Array(0), zeros], codecByName('lz4'));
    const bytes = concat([encodeSchemaMessage(two), ...message.chunks, END_OF_STREAM]);
    expect(await readAll(bytes, {}, { maxBufferBytes: 8000 })).toHaveLength(1);
    expect(await failure(bytes, {}, { maxBufferBytes: 5000 })).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('buffer 3 claims 4000 bytes uncompressed, over the maxBufferBytes limit of 5000') });
  });
});

describe('compressed buffers', () => {
  it('a compressed buffer of 4 bytes is shorter than its length prefix: CS_CORRUPT_DATA', async () => {
    const header = encodeRecordBatchHeader(1, [{ length: 1, nullCount: 0 }], [0, 0, 0, 4], 0 /* LZ4_FRAME */, 8);
    const bytes = concat([encodeSchemaMessage(schema), header, new Uint8Array(8), END_OF_STREAM]);
    expect(await failure(bytes)).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('compressed buffer 1 is shorter than its length prefix') });
  });

  it('a buffer that fails to decompress on the calling thread is CS_CORRUPT_DATA naming it, with the codec\'s error as its cause', async () => {
    const bytes = await withPrefix('lz4', 4096n); // 1024 zeros, compressed
    const cause = new Error('damaged block');
    vi.spyOn(codecByName('lz4')!, 'decompressSync').mockImplementation(() => {
      throw cause;
    });
    try {
      const error = await failure(bytes);
      expect(error).toBeInstanceOf(ShuffleError);
      expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('cannot decompress buffer 1: damaged block') });
      expect(error.cause).toBe(cause);
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('with `borrowed`, a small buffer stored raw beside larger compressed ones keeps its values when the caller overwrites the bytes', async () => {
    // a random validity bitmap (2 KiB, stored raw) beside three columns of 16384 values with a period of 1000 (about 4 KiB each compressed)
    const rows = 16384;
    const values = int32Bytes(Array.from({ length: rows }, (_, i) => i % 1000));
    let state = 0x9e3779b9; // xorshift32: bytes LZ4 cannot shorten
    const validity = new Uint8Array(rows / 8).map(() => {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      return (state >>> 24) | 1;
    });
    let nullCount = 0;
    for (let i = 0; i < rows; i++) if ((validity[i >> 3]! & (1 << (i & 7))) === 0) nullCount++;
    const fields = [new Field('n', new Int32(), true), new Field('a', new Int32(), false), new Field('b', new Int32(), false), new Field('c', new Int32(), false)];
    const nodes = [{ length: rows, nullCount }, ...[0, 1, 2].map(() => ({ length: rows, nullCount: 0 }))];
    const none = new Uint8Array(0);
    const message = await encodeRecordBatchMessage(rows, nodes, [validity, values, none, values, none, values, none, values], codecByName('lz4'));
    const bytes = concat([encodeSchemaMessage(new Schema(fields)), ...message.chunks, END_OF_STREAM]);
    const batches = [];
    for await (const batch of readIpcStream(bytes, {}, { borrowed: true })) batches.push(batch);
    bytes.fill(0);
    const expected = Array.from({ length: rows }, (_, i) => ((validity[i >> 3]! & (1 << (i & 7))) === 0 ? null : i % 1000));
    expect([...batches[0]!.getChild('n')!]).toEqual(expected);
  });
});

describe('reads from a source', () => {
  it('readIpcStreamAt never asks its source for 0 bytes (a schema message has no body)', async () => {
    const stream = concat([encodeSchemaMessage(schema), await int32Batch([1, 2]), END_OF_STREAM]);
    const { read, reads } = recordedReads(stream);
    const rows: unknown[] = [];
    for await (const batch of readIpcStreamAt(read, 0, stream.byteLength)) rows.push(...batch.getChildAt(0)!);
    expect(rows).toEqual([1, 2]);
    expect(reads.filter(([, length]) => length === 0)).toEqual([]);
  });

  it('readIpcSchemaAt of a stream that starts with a record batch fails without reading its body', async () => {
    const batch = await int32Batch(Array.from({ length: 1000 }, (_, i) => i));
    const stream = concat([batch, END_OF_STREAM]);
    const { read, reads } = recordedReads(stream);
    await expect(readIpcSchemaAt(read, 0, stream.byteLength)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('does not start with a schema message') });
    expect(reads.reduce((sum, [, length]) => sum + length, 0)).toBeLessThan(1000);
  });
});

