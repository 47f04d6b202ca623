/**
 * The on-disk formats as other readers see them, pinned where a mutation sweep found a change no
 * test noticed (docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps"):
 *  - Arrow IPC encapsulated messages (ipc-message.ts): the schema message padded to 8, compressed
 *    body buffers prefixed with their uncompressed length as int64 LE, buffers that do not shrink
 *    stored raw behind the prefix -1, body buffers at 8-aligned offsets, struct vectors of the
 *    record-batch flatbuffer 8-aligned, the compression method BUFFER;
 *  - the index and checksum files (output-files.ts): big-endian int64, cumulative offsets, the
 *    unsigned CRC32C in the low half; the commit's renames (data, checksum, then the index; an older
 *    output moved aside index first, put back index last), temporary names a crash leaves being
 *    the ones removeLeftovers knows, and a failed first commit leaving no file with a final name;
 *  - writeChunks (write-chunks.ts): at most 512 buffers per writev, short writes resumed at the
 *    right byte, groups written back to back, a write that accepts nothing refused;
 *  - metadata-counts.ts: the exact limits (a count of exactly the bytes there are passes, one more
 *    is refused), counts totalled over the whole message, keys and field names counted, dictionary
 *    batches checked like record batches;
 *  - removeLeftovers (cleanup.ts): what it must not remove, and its errors.
 *
 * Expected bytes never come from the code under test: they come from the Arrow IPC specification
 * (encapsulated message: 0xFFFFFFFF, int32 LE metadata size including the padding to 8, flatbuffer,
 * body padded to 8; compressed buffer: int64 LE uncompressed length, or -1 when stored raw),
 * from apache-arrow's flatbuffer reader, from hand-computed little/big-endian layouts, and from an
 * independent table-driven CRC32C checked first against the standard check value.
 */
import { lstat, mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { FileHandle } from 'node:fs/promises';
import { Field, Int32, Schema, Struct, Utf8 } from 'apache-arrow';
import { MessageHeader, MetadataVersion } from 'apache-arrow/enum';
import { Message, type RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import { BodyCompression as FbBodyCompression } from 'apache-arrow/fb/body-compression';
import { BodyCompressionMethod } from 'apache-arrow/fb/body-compression-method';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { DictionaryBatch as FbDictionaryBatch } from 'apache-arrow/fb/dictionary-batch';
import { Message as FbMessage } from 'apache-arrow/fb/message';
import { RecordBatch as FbRecordBatch } from 'apache-arrow/fb/record-batch';
import { Schema as FbSchema } from 'apache-arrow/fb/schema';
import { ByteBuffer } from 'flatbuffers';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { removeLeftovers } from '../src/cleanup.js';
import { ShuffleError } from '../src/errors.js';
import type { Codec } from '../src/format/codec.js';
import { encodeRecordBatchHeader, encodeRecordBatchMessage, encodeRecordBatchPayload, encodeSchemaMessage, END_OF_STREAM } from '../src/format/ipc-message.js';
import { metadataCountProblem } from '../src/format/metadata-counts.js';
import { crc32cOf, DataFileWriter, encodeChecksums, encodeIndex, writesPartition } from '../src/format/output-files.js';
import { writeChunks } from '../src/format/write-chunks.js';
import { commitOnePartition } from './support/one-partition-output.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

// rename and unlink pass through unless a test says otherwise (recording the commit's renames, a file that will not go)
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  return { ...actual, open: vi.fn(actual.open), rename: vi.fn(actual.rename), unlink: vi.fn(actual.unlink) };
});
const fsp = await import('node:fs/promises');
const real = await vi.importActual<typeof import('node:fs/promises')>('node:fs/promises');

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-format-contract-')));
afterEach(async () => {
  vi.mocked(fsp.open).mockReset().mockImplementation(real.open);
  vi.mocked(fsp.rename).mockReset().mockImplementation(real.rename);
  vi.mocked(fsp.unlink).mockReset().mockImplementation(real.unlink);
  await removeDir(dir);
});

// ---------------------------------------------------------------- independent references

/** CRC32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven, bit by bit to build the table. */
const CRC32C_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();
function referenceCrc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const b of bytes) crc = CRC32C_TABLE[(crc ^ b) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const concat = (parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));
/** int64 little-endian, as the IPC body-buffer prefix is written */
const i64le = (v: bigint) => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigInt64(0, v, true);
  return b;
};
/** int64 big-endian, as the index and checksum files are written */
const i64be = (v: bigint) => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigInt64(0, v, false);
  return b;
};

test('the reference CRC32C gives the standard check value: crc32c("123456789") = 0xE3069283', () => {
  expect(referenceCrc32c(new TextEncoder().encode('123456789'))).toBe(0xe3069283);
});

/**
 * A codec that "compresses" by a rule the test chooses, so that the expected body can be laid out by
 * hand: `frame(input)` is the frame (or null: give the input back unchanged, as long as the raw bytes).
 */
function fakeCodec(frame: (input: Uint8Array) => Uint8Array | null): Codec {
  return {
    name: 'lz4',
    arrowType: CompressionType.LZ4_FRAME,
    compress: async (input: Uint8Array) => [frame(input) ?? input.slice()],
  } as unknown as Codec;
}
/** The frame is the input's first byte repeated 3 times for inputs of 8 bytes or more; shorter inputs come back as they are. */
const shrinkLong = (input: Uint8Array) => (input.byteLength >= 8 ? new Uint8Array(3).fill(input[0]!) : null);

/** Splits an encapsulated message into its flatbuffer and body, checking the framing the spec asks for. */
function unframe(message: Uint8Array): { metadata: Uint8Array; body: Uint8Array } {
  const view = new DataView(message.buffer, message.byteOffset, message.byteLength);
  expect(view.getUint32(0, true), 'continuation marker').toBe(0xffffffff);
  const metadataSize = view.getInt32(4, true);
  expect((8 + metadataSize) % 8, 'the body starts 8-aligned').toBe(0);
  return { metadata: message.subarray(8, 8 + metadataSize), body: message.subarray(8 + metadataSize) };
}

// ---------------------------------------------------------------- IPC messages

describe('Arrow IPC encapsulated messages', () => {
  test('the end-of-stream marker is FF FF FF FF 00 00 00 00', () => {
    expect(hex(END_OF_STREAM)).toBe('ffffffff00000000');
  });

  test('a schema message is padded to 8: 0xFFFFFFFF, int32 LE size of the flatbuffer plus its padding, whatever the names', () => {
    for (let n = 1; n <= 8; n++) {
      const message = encodeSchemaMessage(new Schema([new Field('x'.repeat(n), new Int32(), true)]));
      expect(message.byteLength % 8, `field name of ${n} characters`).toBe(0);
      const { metadata, body } = unframe(message);
      expect(body.byteLength).toBe(0);
      const decoded = Message.decode(metadata);
      expect(decoded.headerType).toBe(MessageHeader.Schema);
      expect(decoded.version).toBe(MetadataVersion.V5);
    }
  });

  test('an uncompressed body lays buffers of 3, 0 and 13 bytes at offsets 0, 8, 8, each padded with zeros to 8 (24 bytes)', async () => {
    const a = Uint8Array.of(1, 2, 3);
    const c = new Uint8Array(13).map((_, i) => 100 + i);
    const encoded = await encodeRecordBatchMessage(3, [{ length: 3, nullCount: 0 }], [a, new Uint8Array(0), c], null);
    const message = concat(encoded.chunks);
    expect(encoded.byteLength, 'byteLength is the bytes of the chunks').toBe(message.byteLength);
    const { metadata, body } = unframe(message);
    const decoded = Message.decode(metadata);
    expect(decoded.bodyLength).toBe(24);
    const header = decoded.header() as RecordBatchHeader;
    expect(header.buffers.map((b) => [b.offset, b.length])).toEqual([[0, 3], [8, 0], [8, 13]]);
    expect(hex(body)).toBe(hex(concat([a, new Uint8Array(5), c, new Uint8Array(3)])));
  });

  /**
   * Compressed bodies, through both encoders: a buffer that shrinks is int64 LE uncompressed length,
   * then the frame (apache-arrow 21.2.0's writer puts the compressed length there: the spec and other
   * readers want the uncompressed one); one that does not shrink (the frame as long as the raw bytes
   * counts as not shrinking) is int64 LE -1, then the raw bytes; an empty buffer has no bytes at all;
   * every region starts 8-aligned, the padding zeros.
   */
  test.each(['encodeRecordBatchMessage', 'encodeRecordBatchPayload'] as const)('%s: compressed body buffers are [uncompressed length | frame] or [-1 | raw bytes], 8-aligned', async (encoder) => {
    const raw5 = Uint8Array.of(9, 8, 7, 6, 5); // stays raw (shorter than 8: the fake codec gives it back)
    const big = new Uint8Array(20).fill(0x41); // shrinks to 41 41 41
    const raw11 = new Uint8Array(11).map((_, i) => i + 1); // the frame would be as long as the input: stored raw
    const codec = fakeCodec((input) => (input.byteLength === 11 ? new Uint8Array(11).fill(0xee) : shrinkLong(input)));
    const buffers = [raw5, new Uint8Array(0), big, raw11];
    const encode = encoder === 'encodeRecordBatchMessage' ? encodeRecordBatchMessage : encodeRecordBatchPayload;
    // an arena full of garbage: every byte of the body must be written
    const encoded = encoder === 'encodeRecordBatchMessage' ? await encode(4, [{ length: 4, nullCount: 1 }], buffers, codec) : await encodeRecordBatchPayload(4, [{ length: 4, nullCount: 1 }], buffers, codec, undefined, (n) => new Uint8Array(n + 8).fill(0xaa));
    const message = concat(encoded.chunks);
    expect(encoded.byteLength).toBe(message.byteLength);
    const { metadata, body } = unframe(message);
    const decoded = Message.decode(metadata);
    const header = decoded.header() as RecordBatchHeader;
    expect(header.compression?.type).toBe(CompressionType.LZ4_FRAME);
    const expectedRegions = [
      [0, 13], // -1 | 5 bytes, then 3 zeros
      [16, 0],
      [16, 11], // 20 | 3 bytes of frame, then 5 zeros
      [32, 19], // -1 | 11 bytes, then 5 zeros
    ];
    expect(header.buffers.map((b) => [b.offset, b.length])).toEqual(expectedRegions);
    expect(decoded.bodyLength).toBe(56);
    const expectedBody = concat([
      i64le(-1n), raw5, new Uint8Array(3),
      i64le(20n), Uint8Array.of(0x41, 0x41, 0x41), new Uint8Array(5),
      i64le(-1n), raw11, new Uint8Array(5),
    ]);
    expect(hex(body)).toBe(hex(expectedBody));
  });

  test('encodeRecordBatchPayload: a buffer stored raw after ones that shrank is moved up behind them (no gap, no stale bytes)', async () => {
    const first = new Uint8Array(40).fill(0x51); // shrinks to 3 bytes
    const second = new Uint8Array(30).fill(0x52); // shrinks
    const third = Uint8Array.of(1, 2, 3, 4, 5, 6, 7); // raw
    const encoded = await encodeRecordBatchPayload(1, [{ length: 1, nullCount: 0 }], [first, second, third], fakeCodec(shrinkLong), undefined, (n) => new Uint8Array(n).fill(0xcc));
    const { metadata, body } = unframe(concat(encoded.chunks));
    const header = Message.decode(metadata).header() as RecordBatchHeader;
    expect(header.buffers.map((b) => [b.offset, b.length])).toEqual([[0, 11], [16, 11], [32, 15]]);
    expect(hex(body)).toBe(hex(concat([
      i64le(40n), new Uint8Array(3).fill(0x51), new Uint8Array(5),
      i64le(30n), new Uint8Array(3).fill(0x52), new Uint8Array(5),
      i64le(-1n), third, new Uint8Array(1),
    ])));
  });

  test('a dictionary batch of a view column lists its variadic buffer count, 0 included, and its body length', async () => {
    const views = new Uint8Array(32);
    const encoded = await encodeRecordBatchMessage(2, [{ length: 2, nullCount: 0, variadicBuffers: 0 }], [new Uint8Array(0), views], null, undefined, { id: 7, isDelta: true });
    const { metadata, body } = unframe(concat(encoded.chunks));
    const decoded = Message.decode(metadata);
    expect(decoded.headerType).toBe(MessageHeader.DictionaryBatch);
    expect(decoded.bodyLength).toBe(32);
    expect(body.byteLength).toBe(32);
    const dictionary = decoded.header() as unknown as { id: number; isDelta: boolean; data: RecordBatchHeader };
    expect([dictionary.id, dictionary.isDelta]).toEqual([7, true]);
    expect(dictionary.data.variadicBufferCounts).toEqual([0]);
  });

  test('the compression of a record batch is BodyCompression { codec, method: BUFFER }, read straight from the flatbuffer', () => {
    const framed = encodeRecordBatchHeader(1, [{ length: 1, nullCount: 0 }], [0, 16], CompressionType.ZSTD, 16);
    const message = FbMessage.getRootAsMessage(new ByteBuffer(framed.subarray(8)));
    const compression = (message.header(new FbRecordBatch()) as FbRecordBatch).compression(new FbBodyCompression());
    expect(compression?.codec()).toBe(CompressionType.ZSTD);
    expect(compression?.method()).toBe(BodyCompressionMethod.BUFFER);
  });

  /** Flatbuffer verifiers (Arrow C++, arrow-rs) want every struct vector's elements at their alignment, 8 for FieldNode and Buffer. */
  test.each([
    ['no compression, no views', null, undefined],
    ['compression', CompressionType.LZ4_FRAME, undefined],
    ['views', null, 2],
    ['compression and views', CompressionType.ZSTD, 0],
  ] as const)('record batch header (%s): the nodes, buffers and variadic counts vectors start 8-aligned, and the message length is a multiple of 8', (_, compression, variadic) => {
    for (let nodeCount = 0; nodeCount <= 3; nodeCount++) {
      const nodes = Array.from({ length: nodeCount }, (_, i) => ({ length: 5 + i, nullCount: i, ...(variadic === undefined ? {} : { variadicBuffers: variadic }) }));
      const framed = encodeRecordBatchHeader(5, nodes, [0, 8, 8, 0, 8, 16], compression, 24);
      expect(framed.byteLength % 8).toBe(0);
      const bb = new ByteBuffer(framed.subarray(8)); // the flatbuffer starts at byte 8 of an 8-aligned message
      const batch = FbMessage.getRootAsMessage(bb).header(new FbRecordBatch()) as FbRecordBatch;
      const table = batch as unknown as { bb_pos: number };
      for (const slot of [6, 8, ...(variadic === undefined || nodeCount === 0 ? [] : [12])]) {
        const field = bb.__offset(table.bb_pos, slot);
        expect(field, `slot ${slot} present`).not.toBe(0);
        expect(bb.__vector(table.bb_pos + field) % 8, `slot ${slot} elements 8-aligned (${nodeCount} nodes)`).toBe(0);
      }
      expect(batch.nodesLength()).toBe(nodeCount);
      expect(batch.variadicBufferCountsLength()).toBe(variadic === undefined ? 0 : nodeCount);
    }
  });
});

// ---------------------------------------------------------------- index and checksum files

describe('index and checksum files', () => {
  test('the index is (P + 1) big-endian int64 cumulative offsets from 0 (docs/FORMAT.md example: 0, 1048, 1048, 2216)', () => {
    expect(hex(encodeIndex([1048, 0, 1168]))).toBe(hex(concat([0n, 1048n, 1048n, 2216n].map(i64be))));
  });

  test('a checksum is the unsigned CRC32C in the low half of a big-endian int64, also when its top bit is set', () => {
    expect(hex(encodeChecksums([0xe3069283, 0, 0x7fffffff]))).toBe('00000000e3069283' + '0000000000000000' + '000000007fffffff');
  });

  test('a partition of no rows has no bytes, except partition 0 of an output without any row (it keeps the schema: docs/FORMAT.md, "Index file")', () => {
    expect(writesPartition(0, 0, true)).toBe(true);
    expect(writesPartition(0, 0, false)).toBe(false);
    expect(writesPartition(1, 0, true)).toBe(false);
    expect(writesPartition(0, 3, false)).toBe(true);
    expect(writesPartition(2, 1, false)).toBe(true);
  });

  test('crc32cOf chains chunks in order from an initial value: the CRC32C of their concatenation', () => {
    const a = new TextEncoder().encode('1234');
    const b = new TextEncoder().encode('56789');
    expect(crc32cOf([a, b])).toBe(0xe3069283);
    expect(crc32cOf([b], crc32cOf([a]))).toBe(0xe3069283);
    expect(crc32cOf([b, a])).toBe(referenceCrc32c(concat([b, a])));
  });

  test("a committed output's files: the checksum file holds each partition's CRC32C (reference implementation), the index its ends", async () => {
    const parts = [[Uint8Array.of(1, 2, 3), new TextEncoder().encode('123456789')], [], [new Uint8Array(1000).map((_, i) => i * 7)]];
    const writer = await DataFileWriter.create(join(dir, 'out'));
    for (const [p, chunks] of parts.entries()) {
      writer.beginPartition(p);
      for (const chunk of chunks) await writer.append(chunk);
      writer.endPartition();
    }
    await writer.commit();
    const whole = parts.map(concat);
    const crcs = whole.map((bytes) => (bytes.byteLength === 0 ? 0 : referenceCrc32c(bytes)));
    expect(hex(await readFile(join(dir, 'out.checksum.CRC32C')))).toBe(hex(concat(crcs.map((c) => i64be(BigInt(c))))));
    expect(hex(await readFile(join(dir, 'out.index')))).toBe(hex(concat([0n, 12n, 12n, 1012n].map(i64be))));
    expect(hex(await readFile(join(dir, 'out.data')))).toBe(hex(concat(whole)));
  });
});

// ---------------------------------------------------------------- the commit

/** The three final names, and the temporary names of docs/FORMAT.md: `<final name>.<12 hex digits>.tmp`. */
const FINAL = new Set(['out.data', 'out.index', 'out.checksum.CRC32C']);
const TEMP = /^out\.(?:data|index|checksum\.CRC32C)\.[0-9a-f]{12}\.tmp$/;

const commitOutput = (bytes: Uint8Array, overwrite: boolean) => commitOnePartition(join(dir, 'out'), bytes, overwrite);

/** Records the commit's renames as [from, to] base names, and every name in the directory before each. */
function recordRenames(): { renames: [string, string][]; seen: Set<string> } {
  const renames: [string, string][] = [];
  const seen = new Set<string>();
  vi.mocked(fsp.rename).mockImplementation(async (from, to) => {
    for (const name of await readdir(dir)) seen.add(name);
    renames.push([String(from).slice(dir.length + 1), String(to).slice(dir.length + 1)]);
    return real.rename(from, to);
  });
  return { renames, seen };
}
const kindOf = (name: string) => /^out\.(data|index|checksum\.CRC32C)/.exec(name)![1];

describe('the commit', () => {
  test('renames data, then checksum, then the index (the commit marker) last', async () => {
    const { renames } = recordRenames();
    await commitOutput(Uint8Array.of(1), false);
    expect(renames.map(([, to]) => to)).toEqual(['out.data', 'out.checksum.CRC32C', 'out.index']);
    for (const [from, to] of renames) expect(from).toMatch(new RegExp(`^${to.replace(/\./g, '\\.')}\\.[0-9a-f]{12}\\.tmp$`));
  });

  test('an overwrite moves the old index aside first, and every name in the directory meanwhile is final or a temporary name removeLeftovers knows', async () => {
    await commitOutput(Uint8Array.of(1), false);
    const { renames, seen } = recordRenames();
    await commitOutput(Uint8Array.of(2, 2), true);
    const asides = renames.filter(([from]) => FINAL.has(from));
    expect(asides.map(([from]) => from)).toEqual(['out.index', 'out.data', 'out.checksum.CRC32C']);
    for (const name of seen) expect(FINAL.has(name) || TEMP.test(name), name).toBe(true);
    for (const [, to] of asides) expect(to).toMatch(TEMP);
    expect((await readdir(dir)).sort()).toEqual([...FINAL].sort());
  });

  test('an overwrite that fails puts the old files back with the index last', async () => {
    await commitOutput(Uint8Array.of(1), false);
    const { renames } = recordRenames();
    const recording = vi.mocked(fsp.rename).getMockImplementation()!;
    let failed = false; // the new checksum's rename into place fails, once
    vi.mocked(fsp.rename).mockImplementation(async (from, to) => {
      if (!failed && String(to).endsWith('out.checksum.CRC32C') && (failed = true)) throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' });
      return recording(from, to);
    });
    await expect(commitOutput(Uint8Array.of(2, 2), true)).rejects.toMatchObject({ code: 'CS_IO' });
    const asideNames = new Set(renames.filter(([from]) => FINAL.has(from)).map(([, to]) => to));
    expect(renames.filter(([from]) => asideNames.has(from)).map(([, to]) => to)).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
    expect((await readdir(dir)).sort()).toEqual([...FINAL].sort());
    expect(hex(await readFile(join(dir, 'out.data')))).toBe('01');
  });

  test("an overwrite that fails, and whose old index cannot be put back either, says where the old index is (its error named only the first failure)", async () => {
    await commitOutput(Uint8Array.of(1), false);
    const { renames } = recordRenames();
    const recording = vi.mocked(fsp.rename).getMockImplementation()!;
    let failed = false; // the new checksum's rename into place fails once, and so does every rename back to out.index
    vi.mocked(fsp.rename).mockImplementation(async (from, to) => {
      if (!failed && String(to).endsWith('out.checksum.CRC32C') && (failed = true)) throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' });
      if (failed && String(to).endsWith('out.index')) throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' });
      return recording(from, to);
    });
    const error = (await commitOutput(Uint8Array.of(2, 2), true).catch((e: unknown) => e)) as ShuffleError;
    const oldIndex = join(dir, renames.find(([from]) => from === 'out.index')![1]);
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error.code).toBe('CS_IO');
    expect(error.message).toMatch(/^cannot commit the shuffle output: EIO/);
    expect(error.message).toContain(`could not be put back either: its files are still at ${oldIndex} (rename them back by hand`);
    expect(hex(await readFile(oldIndex))).toBe(hex(concat([0n, 1n].map(i64be)))); // the old output's index, one partition of 1 byte
    expect((await readdir(dir)).sort()).toEqual(['out.checksum.CRC32C', 'out.data', basename(oldIndex)].sort());
  });

  test('a first commit whose index rename fails leaves no file at all: no final name without an index', async () => {
    vi.mocked(fsp.rename).mockImplementation(async (from, to) => {
      if (String(to).endsWith('out.index')) throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' });
      return real.rename(from, to);
    });
    await expect(commitOutput(Uint8Array.of(1), false)).rejects.toMatchObject({ code: 'CS_IO' });
    expect(await readdir(dir)).toEqual([]);
  });

  test('an index file that cannot be written fails the commit with CS_IO naming it, and leaves no file', async () => {
    vi.mocked(fsp.open).mockImplementation((async (path: string, flags?: string, mode?: number) => {
      const handle = await real.open(path, flags, mode);
      if (String(path).includes('out.index.')) {
        handle.writeFile = async () => {
          throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
        };
      }
      return handle;
    }) as never);
    await expect(commitOutput(Uint8Array.of(1), false)).rejects.toMatchObject({ code: 'CS_IO', where: { file: expect.stringMatching(/out\.index\.[0-9a-f]{12}\.tmp$/) } });
    expect(await readdir(dir)).toEqual([]);
  });

  test('a directory in the way of the data file fails the commit with CS_IO; the directory stays where it is', async () => {
    await mkdir(join(dir, 'out.data'));
    await writeFile(join(dir, 'out.data', 'keep'), 'x');
    await expect(commitOutput(Uint8Array.of(1), true)).rejects.toMatchObject({ code: 'CS_IO', message: expect.stringContaining('not a regular file') });
    expect(await readdir(dir)).toEqual(['out.data']);
    expect(await readdir(join(dir, 'out.data'))).toEqual(['keep']);
  });

  test("a writer's temporary files, as a crash would leave them, are all removed by removeLeftovers({ outputPrefix })", async () => {
    let leftovers: string[] = [];
    vi.mocked(fsp.rename).mockImplementation(async (from, to) => {
      if (leftovers.length === 0) leftovers = (await readdir(dir)).sort(); // before the first rename: the three temporary files
      return real.rename(from, to);
    });
    await commitOutput(Uint8Array.of(1), false);
    expect(leftovers.map(kindOf)).toEqual(['checksum.CRC32C', 'data', 'index']);
    for (const name of leftovers) expect(name).toMatch(TEMP);
    await rm(join(dir, 'out.index')); // as if the crash came before the index
    for (const name of leftovers) await writeFile(join(dir, name), 'x');
    const removed = await removeLeftovers({ outputPrefix: join(dir, 'out') });
    expect(removed.length).toBe(5);
    expect(await readdir(dir)).toEqual([]);
  });
});

// ---------------------------------------------------------------- writeChunks

/** A FileHandle whose writev writes at most `most` bytes per call into `file`, and records the buffers it was given. */
function fakeHandle(most: number, file: Uint8Array) {
  const calls: { buffers: number; position: number; written: number }[] = [];
  const handle = {
    writev: async (buffers: Uint8Array[], position: number) => {
      let written = 0;
      for (const b of buffers) {
        const take = Math.min(b.byteLength, most - written);
        file.set(b.subarray(0, take), position + written);
        written += take;
        if (written === most) break;
      }
      calls.push({ buffers: buffers.length, position, written });
      if (calls.length > 100_000) throw new Error('looping');
      return { bytesWritten: written, buffers };
    },
  };
  return { handle: handle as unknown as FileHandle, calls };
}

describe('writeChunks', () => {
  const chunks = Array.from({ length: 1300 }, (_, i) => new Uint8Array(i % 6).fill((i * 31) & 0xff)); // empty ones included
  const total = chunks.reduce((n, c) => n + c.byteLength, 0);

  test('1,300 chunks in short writes of 7 bytes reach the file back to back at the position given; no writev gets more than 512 buffers', async () => {
    const file = new Uint8Array(100 + total);
    const { handle, calls } = fakeHandle(7, file);
    expect(await writeChunks(handle, chunks, 100)).toBe(total);
    expect(hex(file.subarray(100))).toBe(hex(concat(chunks)));
    expect(hex(file.subarray(0, 100))).toBe(hex(new Uint8Array(100)));
    expect(Math.max(...calls.map((c) => c.buffers))).toBeLessThanOrEqual(512);
  });

  test('writes that take everything: three writev calls (groups of 512, 512 and 276 chunks), each right after the one before', async () => {
    const file = new Uint8Array(total);
    const { handle, calls } = fakeHandle(Number.MAX_SAFE_INTEGER, file);
    await writeChunks(handle, chunks, 0);
    const bytesOf = (from: number, to: number) => chunks.slice(from, to).reduce((n, c) => n + c.byteLength, 0);
    expect(calls.map((c) => [c.position, c.written])).toEqual([[0, bytesOf(0, 512)], [bytesOf(0, 512), bytesOf(512, 1024)], [bytesOf(0, 1024), bytesOf(1024, 1300)]]);
    expect(hex(file)).toBe(hex(concat(chunks)));
  });

  test('a writev that accepts no bytes is an error, not a loop', async () => {
    const { handle } = fakeHandle(0, new Uint8Array(16));
    await expect(writeChunks(handle, [Uint8Array.of(1)], 0)).rejects.toThrow(/accepted no bytes/);
  });
});

// ---------------------------------------------------------------- metadata counts

/** The flatbuffer of a record-batch message of `nodes` nodes and `buffers` buffers (our header, unframed). */
function recordBatchMetadata(nodes: number, buffers: number, variadic = false): Uint8Array {
  const ns = Array.from({ length: nodes }, (_, i) => ({ length: 1, nullCount: 0, ...(variadic && i === 0 ? { variadicBuffers: 0 } : {}) }));
  const framed = encodeRecordBatchHeader(1, ns, Array.from({ length: 2 * buffers }, () => 0), null, 0);
  return framed.slice(8);
}
/** Sets the element count of the vector in `slot` of the RecordBatch table (6 nodes, 8 buffers, 12 variadic counts). */
function setCount(metadata: Uint8Array, slot: number, count: number, header: (bb: ByteBuffer) => object = (bb) => FbMessage.getRootAsMessage(bb).header(new FbRecordBatch()) as FbRecordBatch): Uint8Array {
  const copy = metadata.slice();
  const bb = new ByteBuffer(copy);
  const table = header(bb) as unknown as { bb_pos: number };
  bb.writeInt32(bb.__vector(table.bb_pos + bb.__offset(table.bb_pos, slot)) - 4, count);
  return copy;
}

describe('metadata counts: the limits are exact', () => {
  test('nodes and buffers: 16 bytes each; a count of exactly size / 16 passes, one more is refused', () => {
    const metadata = recordBatchMetadata(1, 1, true); // with a view node: 112 bytes, a multiple of 16
    expect(metadata.byteLength % 16).toBe(0);
    const limit = metadata.byteLength / 16;
    expect(metadataCountProblem(setCount(metadata, 6, limit))).toBeNull();
    expect(metadataCountProblem(setCount(metadata, 6, limit + 1))).toMatch(/claims \d+ field nodes/);
    expect(metadataCountProblem(setCount(metadata, 8, limit))).toBeNull();
    expect(metadataCountProblem(setCount(metadata, 8, limit + 1))).toMatch(/claims \d+ buffers/);
  });

  test('variadic counts: 8 bytes each; size / 8 + 1 is refused', () => {
    const metadata = recordBatchMetadata(1, 1, true);
    expect(metadataCountProblem(metadata)).toBeNull();
    expect(metadataCountProblem(setCount(metadata, 12, metadata.byteLength / 8 + 1))).toMatch(/variadic counts/);
  });

  test('the variadic buffers may add up to the buffers listed, not one more', () => {
    const framed = encodeRecordBatchHeader(1, [{ length: 1, nullCount: 0, variadicBuffers: 3 }], [0, 0, 0, 0, 0, 0], null, 0);
    expect(metadataCountProblem(framed.subarray(8))).toBeNull();
    const four = encodeRecordBatchHeader(1, [{ length: 1, nullCount: 0, variadicBuffers: 4 }], [0, 0, 0, 0, 0, 0], null, 0);
    expect(metadataCountProblem(four.subarray(8))).toMatch(/claims 4 variadic buffers but lists 3 buffers/);
  });

  test('a dictionary batch is checked like a record batch', async () => {
    const encoded = await encodeRecordBatchMessage(1, [{ length: 1, nullCount: 0 }], [Uint8Array.of(1, 0, 0, 0)], null, undefined, { id: 0, isDelta: false });
    const { metadata } = unframe(concat(encoded.chunks));
    expect(metadataCountProblem(metadata)).toBeNull();
    const dictionaryData = (bb: ByteBuffer) => (FbMessage.getRootAsMessage(bb).header(new FbDictionaryBatch()) as FbDictionaryBatch).data()!;
    expect(metadataCountProblem(setCount(metadata, 6, 800_000_000, dictionaryData))).toMatch(/claims 800000000 field nodes/);
  });

  /** A schema message of 64 fields named f0..f63 and one long-named field last, with 8 custom metadata entries. */
  function schemaMetadata(longName: string, metadata: Map<string, string>): Uint8Array {
    const fields = [...Array.from({ length: 64 }, (_, i) => new Field(`f${i}`, new Int32(), true)), new Field(longName, new Utf8(), true)];
    return Message.encode(new Message(0, MetadataVersion.V5, MessageHeader.Schema, new Schema(fields, metadata)));
  }
  const schemaTable = (bb: ByteBuffer) => FbMessage.getRootAsMessage(bb).header(new FbSchema()) as FbSchema;
  /** Points every element of the vector in `slot` of the schema table at element `target`. */
  function pointAllAt(bytes: Uint8Array, slot: number, target: number): Uint8Array {
    const copy = bytes.slice();
    const bb = new ByteBuffer(copy);
    const table = schemaTable(bb) as unknown as { bb_pos: number };
    const vector = bb.__vector(table.bb_pos + bb.__offset(table.bb_pos, slot));
    const count = bb.readInt32(vector - 4);
    const at = vector + 4 * target + bb.readInt32(vector + 4 * target);
    for (let i = 0; i < count; i++) bb.writeInt32(vector + 4 * i, at - (vector + 4 * i));
    return copy;
  }

  test('field names count towards the 4 x budget: 65 fields all pointing at the one with a 2,000-character name are refused', () => {
    const bytes = schemaMetadata('n'.repeat(2000), new Map());
    expect(metadataCountProblem(bytes)).toBeNull();
    expect(metadataCountProblem(pointAllAt(bytes, 6, 64))).toMatch(/^names and custom metadata add up to more than 4 x/);
  });

  test('custom metadata keys count towards the 4 x budget too (all entries pointing at the one with a 2,000-character key)', () => {
    const entries = new Map(Array.from({ length: 64 }, (_, i) => [i === 0 ? 'k'.repeat(2000) : `k${i}`, 'v']));
    const bytes = schemaMetadata('x', entries);
    expect(metadataCountProblem(bytes)).toBeNull();
    // find the long entry: the builder keeps the map's order
    expect(metadataCountProblem(pointAllAt(bytes, 8, 0))).toMatch(/^names and custom metadata add up to more than 4 x/);
  });

  test('table offsets are totalled over the message: fields and custom metadata that fit each alone but not together are refused', () => {
    const bytes = schemaMetadata('x', new Map([['a', 'b']]));
    const quarter = bytes.byteLength / 4;
    const fields = setCount(bytes, 6, Math.floor(quarter) - 1, schemaTable);
    expect(metadataCountProblem(setCount(fields, 8, 2, schemaTable))).toMatch(/^schema custom metadata claims 2 entries/);
  });

  test('a string running past the end of the metadata by 1 to 4 bytes is unreadable', () => {
    const bytes = schemaMetadata('x', new Map());
    for (let over = 1; over <= 4; over++) {
      const copy = bytes.slice();
      const bb = new ByteBuffer(copy);
      const field = schemaTable(bb).fields(0) as unknown as { bb_pos: number };
      const name = field.bb_pos + bb.__offset(field.bb_pos, 4);
      const start = name + bb.readInt32(name);
      bb.writeInt32(start, copy.byteLength - start - 4 + over);
      expect(metadataCountProblem(copy), `${over} bytes past`).toMatch(/^the metadata flatbuffer is unreadable/);
    }
  });

  test('fields nest 64 deep, not 65', () => {
    const nested = (depth: number): Field => (depth === 1 ? new Field('leaf', new Int32(), true) : new Field(`s${depth}`, new Struct([nested(depth - 1)]), true));
    const encode = (depth: number) => Message.encode(new Message(0, MetadataVersion.V5, MessageHeader.Schema, new Schema([nested(depth)])));
    expect(metadataCountProblem(encode(64))).toBeNull();
    expect(metadataCountProblem(encode(65))).toMatch(/nest deeper than 64/);
  });
});

// ---------------------------------------------------------------- removeLeftovers

describe('removeLeftovers', () => {
  const HEX12 = '0123456789ab';
  const touch = async (...names: string[]) => {
    for (const name of names) await writeFile(join(dir, name), 'x');
  };

  test('the prefix is followed by a dot: `outxdata.<12 hex>.tmp` is not a leftover of prefix `out`', async () => {
    await touch(`outxdata.${HEX12}.tmp`, `out.data.${HEX12}.tmp`);
    expect(await removeLeftovers({ outputPrefix: join(dir, 'out') })).toEqual([join(dir, `out.data.${HEX12}.tmp`)]);
    expect(await readdir(dir)).toEqual([`outxdata.${HEX12}.tmp`]);
  });

  test('in a directory, a temporary name needs a prefix: `.data.<12 hex>.tmp` stays', async () => {
    await touch(`.data.${HEX12}.tmp`, `a.data.${HEX12}.tmp`);
    expect(await removeLeftovers({ outputDir: dir })).toEqual([join(dir, `a.data.${HEX12}.tmp`)]);
    expect(await readdir(dir)).toEqual([`.data.${HEX12}.tmp`]);
  });

  test('anything named like the index (here a symbolic link) marks the output committed: its data file stays', async () => {
    await touch('out.data', 'target');
    await symlink(join(dir, 'target'), join(dir, 'out.index'));
    expect(await removeLeftovers({ outputPrefix: join(dir, 'out') })).toEqual([]);
    expect((await lstat(join(dir, 'out.data'))).isFile()).toBe(true);
  });

  test('when whether the index exists cannot be told (its name is too long), nothing is removed and CS_IO names the index', async () => {
    const base = 'p'.repeat(250); // `<base>.data` is 255 bytes, `<base>.index` 256: ENAMETOOLONG
    await touch(`${base}.data`);
    await expect(removeLeftovers({ outputPrefix: join(dir, base) })).rejects.toMatchObject({ code: 'CS_IO', where: { file: join(dir, `${base}.index`) } });
    expect(await readdir(dir)).toEqual([`${base}.data`]);
  });

  test('one leftover that cannot be removed is CS_IO (the others still go)', async () => {
    await touch(`a.data.${HEX12}.tmp`, `b.data.${HEX12}.tmp`);
    vi.mocked(fsp.unlink).mockImplementation(async (path) => {
      if (String(path).endsWith(`a.data.${HEX12}.tmp`)) throw Object.assign(new Error('EACCES: permission denied, unlink'), { code: 'EACCES' });
      return real.unlink(path);
    });
    await expect(removeLeftovers({ outputDir: dir })).rejects.toMatchObject({ code: 'CS_IO', message: expect.stringContaining('cannot remove 1 of the 2 leftover files (1 removed)') });
    expect(await readdir(dir)).toEqual([`a.data.${HEX12}.tmp`]);
  });

  test('a leftover gone before it could be removed (another cleaner) is not in the result', async () => {
    await touch(`a.data.${HEX12}.tmp`, `b.data.${HEX12}.tmp`);
    vi.mocked(fsp.unlink).mockImplementation(async (path) => {
      if (String(path).endsWith(`a.data.${HEX12}.tmp`)) await real.unlink(path); // someone else was first
      return real.unlink(path);
    });
    expect(await removeLeftovers({ outputDir: dir })).toEqual([join(dir, `b.data.${HEX12}.tmp`)]);
  });

  test('a prefix ending in a backslash (a separator on Windows) is CS_INVALID_ARGUMENT on every platform, and nothing is removed', async () => {
    await touch('.data');
    await expect(removeLeftovers({ outputPrefix: `${dir}\\` })).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
    expect(await readdir(dir)).toEqual(['.data']);
  });

  test('a location that is not a string is CS_INVALID_ARGUMENT, not a TypeError', async () => {
    const error = await removeLeftovers({ outputDir: 42 as unknown as string }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error).toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
  });
});
