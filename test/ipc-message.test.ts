import fc from 'fast-check';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { MessageHeader, MetadataVersion } from 'apache-arrow/enum';
import { Message, type RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import { expect, test } from 'vitest';
import { codecByName } from '../src/format/codec.js';
import { STORE_RAW } from '../src/format/compression-advisor.js';
import { encodeRawPayload, encodeRecordBatchHeader, encodeRecordBatchMessage, encodeRecordBatchPayload, rawPayloadBytes } from '../src/format/ipc-message.js';

/** The hand-laid record-batch header decodes, through arrow-js's flatbuffer reader, to what was encoded (view nodes: their variadicBufferCounts too). */
test('encodeRecordBatchHeader round-trips through Message.decode', () => {
  const size = fc.oneof(fc.nat(300), fc.integer({ min: 0, max: 2 ** 40 }));
  fc.assert(
    fc.property(
      size,
      fc.array(fc.record({ length: size, nullCount: size, variadicBuffers: fc.nat(2 ** 40) }, { requiredKeys: ['length', 'nullCount'] }), { maxLength: 20 }),
      fc.array(fc.tuple(size, size), { maxLength: 40 }),
      fc.constantFrom(null, CompressionType.LZ4_FRAME, CompressionType.ZSTD),
      size,
      (rows, nodes, regions, compression, bodyLength) => {
        const framed = encodeRecordBatchHeader(rows, nodes, regions.flat(), compression, bodyLength);
        const view = new DataView(framed.buffer);
        expect(view.getUint32(0, true)).toBe(0xffffffff);
        const metadataSize = view.getInt32(4, true);
        expect(metadataSize % 8).toBe(0);
        expect(framed.byteLength).toBe(8 + metadataSize);
        const message = Message.decode(framed.subarray(8));
        expect(message.headerType).toBe(MessageHeader.RecordBatch);
        expect(message.version).toBe(MetadataVersion.V5);
        expect(message.bodyLength).toBe(bodyLength);
        const header = message.header() as RecordBatchHeader;
        expect(header.length).toBe(rows);
        expect(header.nodes.map((n) => ({ length: n.length, nullCount: n.nullCount }))).toEqual(nodes.map(({ length, nullCount }) => ({ length, nullCount })));
        expect(header.buffers.map((b) => [b.offset, b.length])).toEqual(regions);
        expect(header.variadicBufferCounts).toEqual(nodes.flatMap((n) => (n.variadicBuffers === undefined ? [] : [n.variadicBuffers])));
        if (compression === null) expect(header.compression).toBeNull();
        else expect(header.compression?.type).toBe(compression);
      },
    ),
    { numRuns: 500 },
  );
});

test.each([null, 'lz4'] as const)('encodeRecordBatchPayload (codec %s): empty buffers anywhere, also last (a nested column\'s empty child), keep their place and length 0', async (codecName) => {
  const codec = codecName === null ? null : codecByName(codecName);
  const buffers = [new Uint8Array(0), Uint8Array.of(1, 2, 3), new Uint8Array(0), new Uint8Array(20).fill(7), new Uint8Array(0)];
  const message = await encodeRecordBatchPayload(3, [{ length: 3, nullCount: 0 }], buffers, codec);
  const bytes = Buffer.concat(message.chunks);
  const metadataSize = new DataView(bytes.buffer, bytes.byteOffset).getInt32(4, true);
  const header = Message.decode(bytes.subarray(8, 8 + metadataSize)).header() as RecordBatchHeader;
  expect(header.buffers.map((b) => b.length === 0)).toEqual([true, false, true, false, true]);
  const body = bytes.subarray(8 + metadataSize);
  const stored = (i: number) => body.subarray(header.buffers[i]!.offset, header.buffers[i]!.offset + header.buffers[i]!.length);
  if (codec === null) expect([...stored(1)]).toEqual([1, 2, 3]);
  else expect(new DataView(stored(3).buffer, stored(3).byteOffset).getBigInt64(0, true)).not.toBe(0n);
});

/**
 * A payload's arena may come unzeroed (a recycled one keeps its last user's bytes): the message
 * is byte for byte the one a zeroed arena gives, padding and header gaps included, whether
 * buffers are compressed, stored raw by the policy, or laid out by the raw path (STORE_RAW).
 */
test('encodeRecordBatchPayload writes the same bytes into an arena full of garbage as into a zeroed one', async () => {
  const bytesOf = fc.oneof(fc.uint8Array({ maxLength: 40 }), fc.integer({ min: 0, max: 300 }).map((n) => new Uint8Array(n).fill(3)));
  await fc.assert(
    fc.asyncProperty(
      fc.array(bytesOf, { maxLength: 8 }),
      fc.array(fc.record({ length: fc.nat(100), nullCount: fc.nat(100) }), { maxLength: 4 }),
      fc.constantFrom('lz4', 'zstd'),
      fc.boolean(),
      async (buffers, nodes, codecName, storeRaw) => {
        const codec = codecByName(codecName);
        const policy = storeRaw ? STORE_RAW : undefined;
        const zeroed = await encodeRecordBatchPayload(7, nodes, buffers, codec, policy, (bytes) => new Uint8Array(bytes + 16));
        const garbage = await encodeRecordBatchPayload(7, nodes, buffers, codec, policy, (bytes) => new Uint8Array(bytes + 16).fill(0xaa));
        expect(Buffer.concat(garbage.chunks)).toEqual(Buffer.concat(zeroed.chunks));
      },
    ),
    { numRuns: 300 },
  );
});

/**
 * The synchronous raw path (tiny payloads, codec none) lays out exactly the bytes the general
 * encoder writes when it stores every buffer raw, whether it allocates or writes into a given
 * zeroed array (a slab range).
 */
test('encodeRawPayload writes the bytes of encodeRecordBatchMessage storing every buffer raw, into a new or a given array', async () => {
  const bytesOf = fc.uint8Array({ maxLength: 40 });
  await fc.assert(
    fc.asyncProperty(
      fc.array(bytesOf, { maxLength: 8 }),
      fc.array(fc.record({ length: fc.nat(100), nullCount: fc.nat(100) }), { maxLength: 4 }),
      fc.constantFrom(null, 'lz4', 'zstd'),
      async (buffers, nodes, codecName) => {
        const codec = codecName === null ? null : codecByName(codecName);
        const expected = Buffer.concat((await encodeRecordBatchMessage(7, nodes, buffers, codec, STORE_RAW)).chunks);
        const fresh = encodeRawPayload(7, nodes, buffers, codec);
        expect(fresh.byteLength).toBe(expected.byteLength);
        expect(Buffer.concat(fresh.chunks)).toEqual(expected);
        const target = new Uint8Array(rawPayloadBytes(nodes, buffers, codec) + 16).subarray(8, 8 + rawPayloadBytes(nodes, buffers, codec));
        const given = encodeRawPayload(7, nodes, buffers, codec, target);
        expect(given.chunks).toEqual([target]);
        expect(Buffer.from(target)).toEqual(expected);
      },
    ),
    { numRuns: 300 },
  );
});
