import { compress as zstdCompress } from 'zstd-napi';
import { describe, expect, test } from 'vitest';
import { readIpcStream } from '../src/format/ipc-reader.js';
import { codecByName } from '../src/format/codec.js';
import { encodeRecordBatchMessage, encodeSchemaMessage, END_OF_STREAM } from '../src/format/ipc-message.js';
import { Field, Int32, Schema } from 'apache-arrow';

const schema = new Schema([new Field('v', new Int32(), false)]);

/** A one-batch stream of 1024 int32 zeros, compressed with `codec`, whose values-buffer prefix is then rewritten. */
async function streamWithPrefix(codec: 'lz4' | 'zstd', prefix: bigint | null): Promise<Uint8Array> {
  const values = new Uint8Array(4096);
  const message = await encodeRecordBatchMessage(1024, [{ length: 1024, nullCount: 0 }], [new Uint8Array(0), values], codecByName(codec));
  const bytes = Buffer.concat([encodeSchemaMessage(schema), ...message.chunks, END_OF_STREAM]);
  if (prefix !== null) {
    // the values buffer is the only non-empty one: its prefix opens the record batch body
    const schemaBytes = encodeSchemaMessage(schema).byteLength;
    const header = message.chunks[0]!.byteLength;
    new DataView(bytes.buffer, bytes.byteOffset).setBigInt64(schemaBytes + header, prefix, true);
  }
  return new Uint8Array(bytes);
}

async function failure(bytes: Uint8Array, options = {}): Promise<{ code: string; message: string }> {
  try {
    for await (const _ of readIpcStream(bytes, {}, options)) void _;
  } catch (error) {
    return error as { code: string; message: string };
  }
  throw new Error('the stream was read without an error');
}

describe('readIpcStream refuses lengths it cannot trust before allocating', () => {
  test.each(['lz4', 'zstd'] as const)('an intact %s stream reads back', async (codec) => {
    const rows: number[] = [];
    for await (const batch of readIpcStream(await streamWithPrefix(codec, null))) rows.push(batch.numRows);
    expect(rows).toEqual([1024]);
  });

  test.each(['lz4', 'zstd'] as const)('a %s buffer claiming 2^40 bytes (a decompression bomb) is CS_CORRUPT_DATA', async (codec) => {
    const error = await failure(await streamWithPrefix(codec, 2n ** 40n));
    expect(error.code).toBe('CS_CORRUPT_DATA');
    expect(error.message).toMatch(/claims 1099511627776 bytes uncompressed/);
  });

  test('a claim over the caller\'s maxBufferBytes is refused', async () => {
    const error = await failure(await streamWithPrefix('lz4', null), { maxBufferBytes: 1000 });
    expect(error.message).toMatch(/over the 1000-byte limit/);
  });

  test('an LZ4 buffer claiming more than 255 times its compressed size is refused', async () => {
    const error = await failure(await streamWithPrefix('lz4', 10_000_000n));
    expect(error.message).toMatch(/cannot hold/);
  });

  test('a Zstandard frame declaring another size than the prefix is refused', async () => {
    expect(zstdCompress(new Uint8Array(4096))[4]! >>> 6).toBeGreaterThan(0); // zstd-napi writes the content size
    const error = await failure(await streamWithPrefix('zstd', 5000n));
    expect(error.message).toMatch(/Zstandard frame declares 4096 bytes/);
  });

  test('a negative prefix other than -1 is refused', async () => {
    expect((await failure(await streamWithPrefix('lz4', -5n))).code).toBe('CS_CORRUPT_DATA');
  });
});
