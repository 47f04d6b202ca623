/**
 * The contract of readIpcStream / readIpcSchema (src/format/ipc-reader.ts) at
 * its edges, pinned by a mutation sweep: a stream may end without its
 * end-of-stream marker or with the legacy 4-byte one; a replacement
 * dictionary replaces and a delta extends; every length, offset and prefix
 * taken from the bytes is checked against what is there (at its exact
 * boundary), and the error names the damage and where it is in the file;
 * a `borrowed` read buffer may be reused once the batches are read; and
 * buffers that do not start 8-aligned are still read.
 */
import { describe, expect, test, vi } from 'vitest';
import { Dictionary, Field, FixedSizeBinary, FixedSizeList, Float64, Int32, Int64, List, makeData, RecordBatch, Schema, SparseUnion, Struct, Table, tableToIPC, Union, Utf8, vectorFromArray } from 'apache-arrow';
import { UnionMode } from 'apache-arrow/enum';
import { codecByName } from '../src/format/codec.js';
import { STORE_RAW } from '../src/format/compression-advisor.js';
import { encodeRecordBatchHeader, encodeRecordBatchMessage, encodeSchemaMessage, END_OF_STREAM, type FieldNodeInfo } from '../src/format/ipc-message.js';
import { readIpcSchema, readIpcStream, summarizeIpcStreamAt } from '../src/format/ipc-reader.js';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { concat, failure, INT32_SCHEMA, int32Batch, int32Bytes, readAll, recordedReads, schemaFailure } from './support/int32-streams.js';

const schema = INT32_SCHEMA;

describe('where a stream may end', () => {
  test('without an end-of-stream marker, its last message may end on the last byte', async () => {
    expect(await readAll(concat([encodeSchemaMessage(schema), await int32Batch([1, 2, 3])]))).toEqual([[1, 2, 3]]);
    expect(await readAll(encodeSchemaMessage(schema)), 'a bare schema message is an empty stream').toEqual([]);
    expect(readIpcSchema(encodeSchemaMessage(schema)).fields[0]!.name).toBe('v');
  });

  test('the legacy framing (no continuation marker) ends with a 4-byte zero', async () => {
    // legacy: int32 metadata size, then the flatbuffer (the modern form without its 0xFFFFFFFF)
    const legacy = (framed: Uint8Array) => framed.subarray(4);
    const bytes = concat([legacy(encodeSchemaMessage(schema)), legacy(await int32Batch([7, 8])), new Uint8Array(4)]);
    expect(await readAll(bytes)).toEqual([[7, 8]]);
  });
});

describe('dictionaries', () => {
  const type = new Dictionary(new Utf8(), new Int32(), 0);
  const dictSchema = new Schema([new Field('d', type, false)]);

  async function dictionaryBatch(values: string[], isDelta: boolean): Promise<Uint8Array> {
    const data = Buffer.from(values.join(''));
    const offsets: number[] = [0];
    for (const v of values) offsets.push(offsets[offsets.length - 1]! + Buffer.byteLength(v));
    const message = await encodeRecordBatchMessage(values.length, [{ length: values.length, nullCount: 0 }], [new Uint8Array(0), int32Bytes(offsets), new Uint8Array(data)], null, undefined, { id: 0, isDelta });
    return concat(message.chunks);
  }

  test('a dictionary batch whose column holds fewer values than the batch claims, or whose offsets run past its data, is CS_CORRUPT_DATA', async () => {
    const offsets = int32Bytes([0, 1, 2]);
    const short = await encodeRecordBatchMessage(3, [{ length: 2, nullCount: 0 }], [new Uint8Array(0), offsets, Buffer.from('ab')], null, undefined, { id: 0, isDelta: false });
    const stream = (dictionary: Uint8Array[]) => concat([encodeSchemaMessage(dictSchema), ...dictionary, indexBatch, END_OF_STREAM]);
    const indexBatch = await int32Batch([0]);
    expect(await failure(stream(short.chunks))).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('dictionary batch 0 does not hold its 3 values') });
    const past = await encodeRecordBatchMessage(2, [{ length: 2, nullCount: 0 }], [new Uint8Array(0), int32Bytes([0, 1, 9]), Buffer.from('ab')], null, undefined, { id: 0, isDelta: false });
    expect(await failure(stream(past.chunks))).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('dictionary 0 is inconsistent') });
  });

  test('a dictionary batch that is not a delta replaces the dictionary; a delta extends it', async () => {
    const bytes = concat([
      encodeSchemaMessage(dictSchema),
      await dictionaryBatch(['a', 'b'], false),
      await int32Batch([0, 1]),
      await dictionaryBatch(['x', 'y'], false),
      await int32Batch([0, 1]),
      await dictionaryBatch(['z'], true),
      await int32Batch([2, 0]),
      END_OF_STREAM,
    ]);
    expect(await readAll(bytes)).toEqual([['a', 'b'], ['x', 'y'], ['z', 'x']]);
  });
});

describe('messages and types the reader refuses', () => {
  test('a stream that starts with a record batch is CS_CORRUPT_DATA, not a TypeError', async () => {
    const batchFirst = concat([encodeRecordBatchHeader(2, [{ length: 2, nullCount: 0 }], [0, 0, 0, 8], null, 8), int32Bytes([1, 2]), END_OF_STREAM]);
    expect(await failure(batchFirst)).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('does not start with a schema message') });
  });

  test('a record batch claiming more rows than its column holds is CS_CORRUPT_DATA', async () => {
    const batch = concat([encodeRecordBatchHeader(3, [{ length: 2, nullCount: 0 }], [0, 0, 0, 8], null, 8), int32Bytes([1, 2])]);
    expect(await failure(concat([encodeSchemaMessage(schema), batch, END_OF_STREAM]))).toMatchObject({
      code: 'CS_CORRUPT_DATA',
      message: expect.stringContaining('the record batch has 3 rows but column 0 has 2'),
    });
  });

  test('two columns of one name and different types are CS_CORRUPT_DATA (arrow-js would merge them)', async () => {
    const twins = new Schema([new Field('a', new Int32(), false), new Field('a', new Int64(), false)]);
    const nodes = [{ length: 2, nullCount: 0 }, { length: 2, nullCount: 0 }];
    const message = await encodeRecordBatchMessage(2, nodes, [new Uint8Array(0), int32Bytes([1, 2]), new Uint8Array(0), new Uint8Array(16)], null);
    expect(await failure(concat([encodeSchemaMessage(twins), ...message.chunks, END_OF_STREAM]))).toMatchObject({
      code: 'CS_CORRUPT_DATA',
      message: expect.stringContaining('several columns of the same name'),
    });
  });

  test('a second schema message in the stream is CS_CORRUPT_DATA at its offset, not skipped', async () => {
    const head = concat([encodeSchemaMessage(schema), await int32Batch([1])]);
    const bytes = concat([head, encodeSchemaMessage(schema), await int32Batch([2]), END_OF_STREAM]);
    const error = await failure(bytes);
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('unexpected Schema message'), where: { offset: head.byteLength } });
  });

  test('readIpcSchema of a stream that starts with a record batch is CS_CORRUPT_DATA', async () => {
    const batchFirst = concat([encodeRecordBatchHeader(1, [{ length: 1, nullCount: 0 }], [0, 0, 0, 8], null, 8), new Uint8Array(8), END_OF_STREAM]);
    expect(() => readIpcSchema(batchFirst)).toThrow(expect.objectContaining({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('does not start with a schema message') }));
  });

  test('zero-width fixed-size binary and zero-size fixed-size lists are valid types', () => {
    expect(schemaFailure(new FixedSizeBinary(0))).toBeNull();
    expect(schemaFailure(new FixedSizeList(0, new Field('item', new Int32(), true)))).toBeNull();
  });

  test('a union with a repeated type id is CS_CORRUPT_DATA', () => {
    const union = new Union(UnionMode.Sparse, [3, 3], [new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]);
    expect(schemaFailure(union)).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('a union with type ids 3, 3') });
  });
});

describe('lengths and offsets from the bytes are checked at their exact bounds', () => {
  const nodes: FieldNodeInfo[] = [{ length: 2, nullCount: 0 }];
  /** A record batch of 2 int32 rows whose header claims `regions` over an 8-byte body. */
  const craftedBatch = (regions: number[], bodyLength = 8) => concat([encodeRecordBatchHeader(2, nodes, regions, null, bodyLength), int32Bytes([5, 6]).subarray(0, bodyLength)]);

  test('a buffer reaching even one byte past the message body, or starting before it, is CS_CORRUPT_DATA', async () => {
    const good = concat([encodeSchemaMessage(schema), craftedBatch([0, 0, 0, 8]), END_OF_STREAM]);
    expect(await readAll(good)).toEqual([[5, 6]]);
    for (const regions of [[0, 0, 0, 9], [0, 0, 0, 16], [0, 0, -8, 8]]) {
      const error = await failure(concat([encodeSchemaMessage(schema), craftedBatch(regions), END_OF_STREAM]));
      expect(error, JSON.stringify(regions)).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining(`buffer [${regions[2]}, +${regions[3]}) lies outside the message body`) });
    }
  });

  test('a message whose metadata size or body length is negative is CS_CORRUPT_DATA naming the length', async () => {
    const schemaBytes = encodeSchemaMessage(schema);
    const negativeMetadata = concat([schemaBytes, Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xfb, 0xff, 0xff, 0xff), new Uint8Array(64)]);
    expect(await failure(negativeMetadata)).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('message metadata of -5 bytes runs past the end'), where: { offset: schemaBytes.byteLength } });
    // bodyLength sits at byte 32 of a framed record-batch header (ipc-message.ts: flatbuffer at 8, Message table at 16, bodyLength at +8)
    const batch = await int32Batch([1, 2]);
    const header = encodeRecordBatchHeader(2, nodes, [0, 0, 0, 8], null, 8);
    expect(new DataView(batch.buffer, batch.byteOffset).getBigInt64(32, true)).toBe(8n);
    new DataView(batch.buffer, batch.byteOffset).setBigInt64(32, BigInt(-header.byteLength), true);
    const error = await failure(concat([schemaBytes, batch, END_OF_STREAM]));
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining(`message body of ${-header.byteLength} bytes runs past the end`) });
  });

  test('maxBufferBytes is a limit on the bytes of the buffers, inclusive', async () => {
    const bytes = concat([encodeSchemaMessage(schema), await int32Batch(new Array(1024).fill(1)), END_OF_STREAM]);
    expect((await readAll(bytes, {}, { maxBufferBytes: 4096 }))[0]).toHaveLength(1024);
    expect(await failure(bytes, {}, { maxBufferBytes: 4095 })).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('its buffers hold 4096 bytes, over the maxBufferBytes limit of 4095') });
  });

  test.each([Infinity, 4096.5, -1])('maxBufferBytes %s is refused as an argument (CS_INVALID_ARGUMENT), not blamed on the stream', async (maxBufferBytes) => {
    for (const codec of [null, 'lz4'] as const) {
      const bytes = concat([encodeSchemaMessage(schema), await int32Batch(new Array(1024).fill(1), codec), END_OF_STREAM]);
      expect(await failure(bytes, {}, { maxBufferBytes })).toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: `maxBufferBytes must be an integer >= 0, got ${maxBufferBytes}` });
    }
  });

  test('an error raised while loading is the reader\'s own message, not wrapped in another', async () => {
    const message = await encodeRecordBatchMessage(1024, [{ length: 1024, nullCount: 0 }], [new Uint8Array(0), new Uint8Array(4096)], codecByName('lz4'));
    const error = await failure(concat([encodeSchemaMessage(schema), ...message.chunks, END_OF_STREAM]), {}, { maxBufferBytes: 1000 });
    expect(error.message).toMatch(/^invalid Arrow IPC stream: buffer 1 claims 4096 bytes uncompressed, over the maxBufferBytes limit of 1000 /);
  });
});

describe('compression prefixes', () => {
  /** A one-batch lz4 stream of 1024 int32 zeros whose values-buffer prefix is rewritten to `prefix`. */
  async function withPrefix(prefix: bigint): Promise<Uint8Array> {
    const message = await encodeRecordBatchMessage(1024, [{ length: 1024, nullCount: 0 }], [new Uint8Array(0), new Uint8Array(4096)], codecByName('lz4'));
    const head = encodeSchemaMessage(schema).byteLength + message.chunks[0]!.byteLength;
    const bytes = concat([encodeSchemaMessage(schema), ...message.chunks, END_OF_STREAM]);
    new DataView(bytes.buffer, bytes.byteOffset).setBigInt64(head, prefix, true);
    return bytes;
  }

  test('a negative prefix other than -1 is refused as what it is', async () => {
    expect(await failure(await withPrefix(-5n))).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('buffer 1 claims -5 bytes uncompressed') });
  });

  test('a prefix larger than what the frame holds is refused once decompressed', async () => {
    expect(await failure(await withPrefix(5000n))).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('decompressed to 4096 bytes, its prefix says 5000') });
  });
});

describe('the caller\'s read buffer', () => {
  /** A stream of one nullable int32 column of 16384 rows: its values compress, its random validity bitmap is stored raw. */
  async function mixedStream(): Promise<{ bytes: Uint8Array; values: number[] }> {
    const rows = 16384;
    const values = Array.from({ length: rows }, (_, i) => i % 1000);
    const validity = new Uint8Array(rows / 8).map((_, i) => (Math.imul(i + 1, 2654435761) >>> 24) | 1);
    let nullCount = 0;
    for (let i = 0; i < rows; i++) if ((validity[i >> 3]! & (1 << (i & 7))) === 0) nullCount++;
    const nullable = new Schema([new Field('v', new Int32(), true)]);
    const message = await encodeRecordBatchMessage(rows, [{ length: rows, nullCount }], [validity, int32Bytes(values)], codecByName('lz4'));
    const expected = values.map((v, i) => ((validity[i >> 3]! & (1 << (i & 7))) === 0 ? null : v));
    return { bytes: concat([encodeSchemaMessage(nullable), ...message.chunks, END_OF_STREAM]), values: expected as number[] };
  }

  test.each([
    ['uncompressed', async () => ({ bytes: concat([encodeSchemaMessage(schema), await int32Batch([1, 2, 3, 4]), END_OF_STREAM]), values: [1, 2, 3, 4] })],
    ['a compressed body with a buffer stored raw', mixedStream],
  ] as const)('%s: with `borrowed`, the batches keep their values when the caller overwrites the bytes', async (_, make) => {
    const { bytes, values } = await make();
    const batches = [];
    for await (const batch of readIpcStream(bytes, {}, { borrowed: true })) batches.push(batch);
    bytes.fill(0xee);
    expect(batches.flatMap((b) => [...b.getChildAt(0)!])).toEqual(values);
  });

  test.each([null, 'lz4'] as const)('a stream that does not start 8-aligned in memory reads its 64-bit values (codec %s, buffers stored raw)', async (codec) => {
    const int64 = new Schema([new Field('v', new Int64(), false)]);
    const values = BigInt64Array.from({ length: 64 }, (_, i) => BigInt(i) * 1_000_000_007n);
    const body = [new Uint8Array(0), new Uint8Array(values.buffer)];
    const message = await encodeRecordBatchMessage(64, [{ length: 64, nullCount: 0 }], body, codec === null ? null : codecByName(codec), STORE_RAW);
    const stream = concat([encodeSchemaMessage(int64), ...message.chunks, END_OF_STREAM]);
    const shifted = new Uint8Array(new ArrayBuffer(stream.byteLength + 4), 4);
    shifted.set(stream);
    expect((await readAll(shifted))[0]).toEqual([...values]);
  });

  test("a nested column of a stream that does not start 8-aligned in memory reads too (arrow-js's loader, not the flat one)", async () => {
    const lists = [[1.5, -2], null, [], [3e300]];
    const table = new Table({ l: vectorFromArray(lists, new List(new Field('item', new Float64(), true))) });
    const stream = tableToIPC(table, 'stream');
    const shifted = new Uint8Array(new ArrayBuffer(stream.byteLength + 4), 4);
    shifted.set(stream);
    const read = (await readAll(shifted))[0]!.map((list) => (list === null ? null : [...(list as Iterable<number>)]));
    expect(read).toEqual(lists);
  });

  test.each([1, 2, 3])('a union column of a stream %i bytes off 4-alignment reads: its schema\'s type ids are copied, not refused', async (shift) => {
    const union = new SparseUnion([0, 1], [new Field('a', new Int32(), true), new Field('b', new Int32(), true)]);
    const a = makeData({ type: new Int32(), length: 3, nullCount: 0, data: Int32Array.of(1, 2, 3) });
    const b = makeData({ type: new Int32(), length: 3, nullCount: 0, data: Int32Array.of(4, 5, 6) });
    const column = makeData({ type: union, length: 3, nullCount: 0, typeIds: Int8Array.of(0, 1, 0), children: [a, b] });
    const unionSchema = new Schema([new Field('u', union, true)]);
    const stream = tableToIpcStream(new RecordBatch(unionSchema, makeData({ type: new Struct(unionSchema.fields), length: 3, nullCount: 0, children: [column] })));
    const shifted = new Uint8Array(new ArrayBuffer(stream.byteLength + shift), shift);
    shifted.set(stream);
    expect((await readAll(shifted))[0]).toEqual([1, 5, 3]);
  });
});

describe('error locations', () => {
  test('an error\'s offset is the caller\'s offset of the stream plus the damaged message\'s offset in it', async () => {
    const head = concat([encodeSchemaMessage(schema), await int32Batch([1])]);
    const damaged = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x00, 0x10, 0x00, 0x00);
    const error = await failure(concat([head, damaged]), { file: 'part.data', offset: 1000 });
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: 'part.data', offset: 1000 + head.byteLength } });
  });
});

describe('type bounds, and the smallest buffer stored raw', () => {
  test('a fixed-size binary may be 1 MiB wide, not one byte more', () => {
    expect(schemaFailure(new FixedSizeBinary(1 << 20))).toBeNull();
    expect(schemaFailure(new FixedSizeBinary((1 << 20) + 1))).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining(`has a fixed width of ${(1 << 20) + 1} bytes`) });
  });

  test('union type ids run from 0 to 127: 128 is CS_CORRUPT_DATA', () => {
    const union = (ids: number[]) => new Union(UnionMode.Sparse, ids, [new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]);
    expect(schemaFailure(union([0, 127]))).toBeNull();
    expect(schemaFailure(union([0, 128]))).toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('a union with type ids 0, 128') });
  });

  test('in a compressed body, an 8-byte buffer is a prefix of -1 and no bytes: an empty buffer stored raw', async () => {
    // 0 rows of a non-null int32 column: validity absent, values stored raw as the bare -1 prefix
    const body = new Uint8Array(8);
    new DataView(body.buffer).setBigInt64(0, -1n, true);
    const header = encodeRecordBatchHeader(0, [{ length: 0, nullCount: 0 }], [0, 0, 0, 8], 0 /* LZ4_FRAME */, 8);
    const bytes = concat([encodeSchemaMessage(schema), header, body, await int32Batch([4, 5]), END_OF_STREAM]);
    expect(await readAll(bytes)).toEqual([[], [4, 5]]);
  });
});

describe('several damaged buffers in one batch', () => {
  /** A stream of one batch of two int32 columns, each compressed: buffers 1 and 3 (the validity buffers 0 and 2 are empty). */
  async function twoCompressedBuffers(): Promise<Uint8Array> {
    const two = new Schema([new Field('a', new Int32(), false), new Field('b', new Int32(), false)]);
    const values = Array.from({ length: 1000 }, (_, i) => i % 7);
    const nodes = [{ length: 1000, nullCount: 0 }, { length: 1000, nullCount: 0 }];
    const message = await encodeRecordBatchMessage(1000, nodes, [new Uint8Array(0), int32Bytes(values), new Uint8Array(0), int32Bytes(values)], codecByName('lz4'));
    return concat([encodeSchemaMessage(two), ...message.chunks]);
  }

  test('the first of them, in buffer order, is the one reported: not whichever the thread pool finished first', async () => {
    const stream = await twoCompressedBuffers();
    // both buffers (1 and 3) go to the pool and fail there, buffer 1 later than buffer 3
    const lz4 = codecByName('lz4')!;
    vi.spyOn(lz4, 'decompressSync').mockReturnValue(null);
    let calls = 0;
    vi.spyOn(lz4, 'decompress').mockImplementation(() => {
      const call = ++calls;
      return new Promise((_, reject) => setTimeout(() => reject(new Error(`failure ${call}`)), call === 1 ? 30 : 0));
    });
    try {
      const error = await failure(stream);
      expect(calls).toBe(2);
      expect(error.message).toContain('cannot decompress buffer 1: failure 1');
    } finally {
      vi.restoreAllMocks();
    }
  });

  test('also when the later one is refused before the earlier one has finished decoding', async () => {
    const stream = await twoCompressedBuffers();
    // buffer 1 goes to the pool and fails there later; buffer 3 fails at once, on the calling thread
    const lz4 = codecByName('lz4')!;
    let syncCalls = 0;
    vi.spyOn(lz4, 'decompressSync').mockImplementation(() => {
      if (++syncCalls === 1) return null;
      throw new Error('failure at once');
    });
    vi.spyOn(lz4, 'decompress').mockImplementation(() => new Promise((_, reject) => setTimeout(() => reject(new Error('failure on the pool')), 20)));
    try {
      const error = await failure(stream);
      expect(syncCalls).toBe(2);
      expect(error.message).toContain('cannot decompress buffer 1: failure on the pool');
    } finally {
      vi.restoreAllMocks();
    }
  });
});

describe('summarizeIpcStreamAt (what inspect says of a stream)', () => {
  test('counts record batches and rows, names the first batch\'s codec, and reads frames and metadata only', async () => {
    const many = Array.from({ length: 10_000 }, (_, i) => i);
    const stream = concat([encodeSchemaMessage(schema), await int32Batch([1, 2, 3], 'zstd'), await int32Batch(many), END_OF_STREAM]);
    const { read, reads } = recordedReads(stream);
    const summary = await summarizeIpcStreamAt(read, 0, stream.byteLength);
    expect(summary).toMatchObject({ codec: 'zstd', batches: 2, rows: 10_003 });
    expect(summary.schema?.fields.map((f) => f.name)).toEqual(['v']);
    expect(stream.byteLength).toBeGreaterThan(40_000); // the second batch's body: 10,000 int32 stored raw
    expect(reads.reduce((sum, [, length]) => sum + length, 0)).toBeLessThan(1_000);
  });

  test('a stream of its schema alone has no codec and no batches; one that ends at once has no schema', async () => {
    const alone = concat([encodeSchemaMessage(schema), END_OF_STREAM]);
    expect(await summarizeIpcStreamAt(recordedReads(alone).read, 0, alone.byteLength)).toMatchObject({ codec: null, batches: 0, rows: 0 });
    expect(await summarizeIpcStreamAt(recordedReads(END_OF_STREAM).read, 0, END_OF_STREAM.byteLength)).toEqual({ schema: null, codec: null, batches: 0, rows: 0 });
  });

  test.each([
    ['a metadata size past the end', async () => concat([encodeSchemaMessage(schema), Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x00, 0x10, 0x00, 0x00)])],
    ['a second schema message', async () => concat([encodeSchemaMessage(schema), await int32Batch([1]), encodeSchemaMessage(schema)])],
    ['a stream that starts with a record batch', async () => concat([await int32Batch([1]), END_OF_STREAM])],
    ['a union with a repeated type id', async () => encodeSchemaMessage(new Schema([new Field('u', new Union(UnionMode.Sparse, [3, 3], [new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]), true)]))],
    ['a body that runs past the end', async () => {
      const batch = await int32Batch([1, 2, 3, 4]);
      return concat([encodeSchemaMessage(schema), batch.subarray(0, batch.byteLength - 4)]);
    }],
  ])('fails as a read of the stream fails, in the same words at the same offset: %s', async (_, make) => {
    const stream = await make();
    const where = { file: 'part.data', partition: 3, offset: 1000 };
    const summarizing = await summarizeIpcStreamAt(recordedReads(stream).read, 0, stream.byteLength, where).then(() => null, (error: unknown) => error);
    const reading = await failure(stream, where);
    expect(summarizing).toMatchObject({ code: 'CS_CORRUPT_DATA', message: reading.message, where: reading.where });
  });
});
