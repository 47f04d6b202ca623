/**
 * Byte-level claims about every on-disk format, checked by parsing the files by hand
 * with DataView (only the flatbuffer message headers are decoded with arrow-js's
 * `Message.decode`); nothing here goes through our reader.
 *
 * ```text
 * <prefix>.data             partition 0 | partition 1 | ... ; each non-empty one a complete Arrow IPC stream:
 *                           schema message, record-batch messages, FF FF FF FF 00 00 00 00; an empty one: 0 bytes
 * message                   FF FF FF FF | int32 LE metadataSize | metadata (8 + metadataSize ≡ 0 mod 8) | body
 * compressed body buffer    int64 LE uncompressedLength | LZ4 frame / Zstandard frame
 *                           int64 LE -1 | raw bytes          (did not shrink)
 *                           nothing, region length 0          (empty buffer)
 * <prefix>.index            (P + 1) int64 BE: 0, end of p0, ..., data file size
 * <prefix>.checksum.CRC32C  P int64 BE: CRC32C of each partition's bytes
 * ```
 */
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { Bool, Dictionary, Int32, Int64, List, makeData, RecordBatch, Schema, Field, Struct, Utf8, Vector, type Data } from 'apache-arrow';
import { MessageHeader } from 'apache-arrow/enum';
import { BodyCompressionMethod } from 'apache-arrow/fb/body-compression-method';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { Message, type DictionaryBatch as DictionaryBatchHeader, type RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import { decompressFrame } from 'lz4-napi';
import * as zstd from 'zstd-napi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShuffleError, ShuffleWriter, type CodecName, type ShuffleWriteResult, type ShuffleWriterOptions } from '../src/index.js';
import { prng } from './support/polars.js';

const EOS = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
const LZ4_MAGIC = [0x04, 0x22, 0x4d, 0x18];
const ZSTD_MAGIC = [0x28, 0xb5, 0x2f, 0xfd];

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'format-bytes-'));
});
afterAll(async () => {
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

let dirs = 0;
async function freshDir(): Promise<string> {
  const dir = join(root, `d${dirs++}`);
  await mkdir(dir);
  return dir;
}

// ---------------------------------------------------------------------------
// Input: pid (dropped), seq Int64 (compressible), rnd Int32 (random: incompressible),
// name Utf8 with nulls (compressible), flag Bool. pid uses partitions 0, 1 and 3 of 4.
// ---------------------------------------------------------------------------

const NUM_PARTITIONS = 4;
const USED_PARTITIONS = [0, 1, 3];
const EMPTY_PARTITION = 2;
const OUTPUT_COLUMNS = ['seq', 'rnd', 'name', 'flag'];
/** Body buffers of one record batch, in order: per column validity then values (offsets, data for name). */
const BUF = { seqValidity: 0, seqValues: 1, rndValidity: 2, rndValues: 3, nameValidity: 4, nameOffsets: 5, nameData: 6, flagValidity: 7, flagValues: 8 } as const;
const BUFFERS_PER_BATCH = 9;

interface Input {
  pid: number[];
  seq: bigint[];
  rnd: number[];
  name: (string | null)[];
  flag: boolean[];
}

function makeInput(rows: number, seed: number): Input {
  const random = prng(seed);
  const input: Input = { pid: [], seq: [], rnd: [], name: [], flag: [] };
  for (let i = 0; i < rows; i++) {
    input.pid.push(USED_PARTITIONS[Math.floor(random() * USED_PARTITIONS.length)]!);
    input.seq.push(BigInt(i) + 1_000_000n);
    input.rnd.push((random() * 2 ** 32) | 0);
    input.name.push(i % 5 === 0 ? null : `name-${i % 50}`);
    input.flag.push(i % 3 === 0);
  }
  return input;
}

const schema = new Schema([
  new Field('pid', new Int32(), false),
  new Field('seq', new Int64(), false),
  new Field('rnd', new Int32(), false),
  new Field('name', new Utf8(), true),
  new Field('flag', new Bool(), false),
]);

function bits(values: readonly boolean[]): Uint8Array {
  const out = new Uint8Array(Math.ceil(values.length / 8));
  values.forEach((v, i) => {
    if (v) out[i >>> 3]! |= 1 << (i & 7);
  });
  return out;
}

/** Rows [start, end) of the input as one record batch built from raw buffers. */
function batchOf(input: Input, start: number, end: number): RecordBatch {
  const length = end - start;
  const names = input.name.slice(start, end);
  const encoder = new TextEncoder();
  const encoded = names.map((s) => encoder.encode(s ?? ''));
  const offsets = new Int32Array(length + 1);
  encoded.forEach((b, i) => (offsets[i + 1] = offsets[i]! + b.byteLength));
  const data = new Uint8Array(offsets[length]!);
  encoded.forEach((b, i) => data.set(b, offsets[i]!));
  const nullCount = names.filter((s) => s === null).length;
  const children: Data[] = [
    makeData({ type: new Int32(), length, data: Int32Array.from(input.pid.slice(start, end)) }),
    makeData({ type: new Int64(), length, data: BigInt64Array.from(input.seq.slice(start, end)) }),
    makeData({ type: new Int32(), length, data: Int32Array.from(input.rnd.slice(start, end)) }),
    makeData({ type: new Utf8(), length, nullCount, nullBitmap: bits(names.map((s) => s !== null)), valueOffsets: offsets, data }),
    makeData({ type: new Bool(), length, data: bits(input.flag.slice(start, end)) }),
  ];
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length, nullCount: 0, children }));
}

interface Output {
  dir: string;
  prefix: string;
  result: ShuffleWriteResult;
  data: Uint8Array;
  index: Uint8Array;
  checksum: Uint8Array;
}

async function writeOutput(input: Input, options: Partial<ShuffleWriterOptions> & { codec: CodecName }, batchRows = 1_500): Promise<Output> {
  const dir = await freshDir();
  const prefix = join(dir, 'out');
  const writer = await ShuffleWriter.create({
    numPartitions: NUM_PARTITIONS,
    partitioning: { kind: 'partition-id', column: 'pid' },
    outputPrefix: prefix,
    maxBatchRows: 1_000,
    ...options,
  });
  for (let start = 0; start < input.pid.length; start += batchRows) {
    await writer.write(batchOf(input, start, Math.min(input.pid.length, start + batchRows)));
  }
  const result = await writer.finish();
  const [data, index, checksum] = await Promise.all(
    [result.paths.data, result.paths.index, result.paths.checksum].map(async (path) => new Uint8Array(await readFile(path))),
  );
  return { dir, prefix, result, data: data!, index: index!, checksum: checksum! };
}

// ---------------------------------------------------------------------------
// Hand parsing
// ---------------------------------------------------------------------------

function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

interface ParsedMessage {
  /** offset of the continuation marker, relative to the partition start */
  start: number;
  metadataSize: number;
  bodyStart: number;
  bodyLength: number;
  message: Message;
  body: Uint8Array;
}

interface ParsedStream {
  messages: ParsedMessage[];
  /** offset of the end-of-stream marker */
  eosStart: number;
}

/** Walks one partition's bytes message by message, asserting the framing as it goes. */
function parseStream(bytes: Uint8Array, what: string): ParsedStream {
  const view = viewOf(bytes);
  const messages: ParsedMessage[] = [];
  let position = 0;
  for (;;) {
    expect(position + 8, `${what}: a message prefix at ${position} lies inside the partition`).toBeLessThanOrEqual(bytes.byteLength);
    expect(view.getUint32(position, true), `${what}: continuation marker at ${position}`).toBe(0xffffffff);
    const metadataSize = view.getInt32(position + 4, true);
    if (metadataSize === 0) break;
    expect(metadataSize, `${what}: metadata size at ${position + 4}`).toBeGreaterThan(0);
    expect((8 + metadataSize) % 8, `${what}: 8 + metadata size (${metadataSize}) is a multiple of 8`).toBe(0);
    const message = Message.decode(bytes.subarray(position + 8, position + 8 + metadataSize));
    const bodyStart = position + 8 + metadataSize;
    const bodyLength = Number(message.bodyLength);
    expect(bodyStart + bodyLength, `${what}: body of the message at ${position} ends inside the partition`).toBeLessThanOrEqual(bytes.byteLength);
    messages.push({ start: position, metadataSize, bodyStart, bodyLength, message, body: bytes.subarray(bodyStart, bodyStart + bodyLength) });
    position = bodyStart + bodyLength;
  }
  expect(position + 8, `${what}: the end-of-stream marker is the last 8 bytes`).toBe(bytes.byteLength);
  expect(Array.from(bytes.subarray(position)), `${what}: end-of-stream marker`).toEqual(EOS);
  return { messages, eosStart: position };
}

/** Partition p's bytes, cut out of the data file with the index file. */
function partitionBytes(output: Output, p: number): Uint8Array {
  const index = viewOf(output.index);
  return output.data.subarray(Number(index.getBigInt64(p * 8, false)), Number(index.getBigInt64((p + 1) * 8, false)));
}

type BufferKind = 'empty' | 'plain' | 'compressed' | 'raw';

interface BodyBuffer {
  kind: BufferKind;
  /** the buffer's uncompressed bytes */
  bytes: Uint8Array;
  /** the int64 prefix, for compressed bodies */
  prefix?: bigint;
}

/** xxHash32, written from the xxHash spec (for the LZ4 frame header checksum). */
function xxh32(data: Uint8Array, seed = 0): number {
  const P1 = 0x9e3779b1, P2 = 0x85ebca77, P3 = 0xc2b2ae3d, P4 = 0x27d4eb2f, P5 = 0x165667b1;
  const rotl = (x: number, r: number) => (x << r) | (x >>> (32 - r));
  const u32 = (at: number) => (data[at]! | (data[at + 1]! << 8) | (data[at + 2]! << 16) | (data[at + 3]! << 24)) >>> 0;
  const round = (acc: number, lane: number) => Math.imul(rotl((acc + Math.imul(lane, P2)) | 0, 13), P1);
  let i = 0;
  let h: number;
  if (data.byteLength >= 16) {
    let v1 = (seed + P1 + P2) | 0, v2 = (seed + P2) | 0, v3 = seed | 0, v4 = (seed - P1) | 0;
    for (; i + 16 <= data.byteLength; i += 16) {
      v1 = round(v1, u32(i));
      v2 = round(v2, u32(i + 4));
      v3 = round(v3, u32(i + 8));
      v4 = round(v4, u32(i + 12));
    }
    h = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) | 0;
  } else {
    h = (seed + P5) | 0;
  }
  h = (h + data.byteLength) | 0;
  for (; i + 4 <= data.byteLength; i += 4) h = Math.imul(rotl((h + Math.imul(u32(i), P3)) | 0, 17), P4);
  for (; i < data.byteLength; i++) h = Math.imul(rotl((h + Math.imul(data[i]!, P5)) | 0, 11), P1);
  h = Math.imul(h ^ (h >>> 15), P2);
  h = Math.imul(h ^ (h >>> 13), P3);
  return (h ^ (h >>> 16)) >>> 0;
}

interface Lz4FrameInfo {
  blockMaxBytes: number;
  blocks: { bytes: number; stored: boolean }[];
}

/**
 * Walks an LZ4 frame by the LZ4 frame format spec: magic, FLG (version 01, reserved bit 0),
 * BD (reserved bits 0, block max size code 4..7), header checksum = second byte of
 * xxh32(descriptor), blocks (uint32 LE size, high bit = stored uncompressed, each within the
 * block max size), end mark, optional content checksum; nothing after it.
 */
function checkLz4Frame(frame: Uint8Array, what: string): Lz4FrameInfo {
  const view = viewOf(frame);
  expect(Array.from(frame.subarray(0, 4)), `${what}: LZ4 frame magic`).toEqual(LZ4_MAGIC);
  const flg = frame[4]!;
  const bd = frame[5]!;
  expect(flg >>> 6, `${what}: FLG version`).toBe(1);
  expect(flg & 0x02, `${what}: FLG reserved bit`).toBe(0);
  expect(bd & 0x8f, `${what}: BD reserved bits`).toBe(0);
  const code = (bd >>> 4) & 7;
  expect(code, `${what}: BD block max size code`).toBeGreaterThanOrEqual(4);
  const blockMaxBytes = 1 << (8 + 2 * code);
  const blockChecksum = (flg & 0x10) !== 0;
  const contentSize = (flg & 0x08) !== 0;
  const contentChecksum = (flg & 0x04) !== 0;
  const dictId = (flg & 0x01) !== 0;
  const descriptorEnd = 6 + (contentSize ? 8 : 0) + (dictId ? 4 : 0);
  expect(frame[descriptorEnd], `${what}: header checksum`).toBe((xxh32(frame.subarray(4, descriptorEnd)) >>> 8) & 0xff);
  const blocks: Lz4FrameInfo['blocks'] = [];
  let at = descriptorEnd + 1;
  for (;;) {
    expect(at + 4, `${what}: block header inside the frame`).toBeLessThanOrEqual(frame.byteLength);
    const word = view.getUint32(at, true);
    at += 4;
    if (word === 0) break; // end mark
    const bytes = word & 0x7fffffff;
    expect(bytes, `${what}: block ${blocks.length} within the block max size`).toBeLessThanOrEqual(blockMaxBytes);
    blocks.push({ bytes, stored: word >>> 31 === 1 });
    at += bytes + (blockChecksum ? 4 : 0);
  }
  if (contentChecksum) at += 4;
  expect(at, `${what}: the frame ends exactly at the end of its buffer region`).toBe(frame.byteLength);
  return { blockMaxBytes, blocks };
}

/** Decodes every body buffer of a record-batch message by hand, checking the compressed-buffer layout. */
async function bodyBuffers(parsed: ParsedMessage, codec: CodecName, what: string): Promise<BodyBuffer[]> {
  const header = parsed.message.header() as RecordBatchHeader;
  const view = viewOf(parsed.body);
  const out: BodyBuffer[] = [];
  for (const [i, region] of header.buffers.entries()) {
    const bytes = parsed.body.subarray(region.offset, region.offset + region.length);
    if (region.length === 0) {
      out.push({ kind: 'empty', bytes });
      continue;
    }
    if (codec === 'none') {
      out.push({ kind: 'plain', bytes });
      continue;
    }
    expect(region.length, `${what} buffer ${i}: holds at least its 8-byte prefix`).toBeGreaterThanOrEqual(8);
    const prefix = view.getBigInt64(region.offset, true);
    const payload = bytes.subarray(8);
    if (prefix === -1n) {
      out.push({ kind: 'raw', bytes: payload, prefix });
      continue;
    }
    expect(Array.from(payload.subarray(0, 4)), `${what} buffer ${i}: frame magic`).toEqual(codec === 'lz4' ? LZ4_MAGIC : ZSTD_MAGIC);
    if (codec === 'lz4') checkLz4Frame(payload, `${what} buffer ${i}`);
    const decompressed = codec === 'lz4' ? await decompressFrame(payload) : zstd.decompress(payload);
    expect(prefix, `${what} buffer ${i}: the prefix is the UNCOMPRESSED length`).toBe(BigInt(decompressed.byteLength));
    out.push({ kind: 'compressed', bytes: new Uint8Array(decompressed), prefix });
  }
  return out;
}

function recordBatches(stream: ParsedStream): ParsedMessage[] {
  return stream.messages.slice(1);
}

function headerOf(parsed: ParsedMessage): RecordBatchHeader {
  return parsed.message.header() as RecordBatchHeader;
}

/** A fresh, aligned copy (typed-array views need their element alignment). */
function aligned(bytes: Uint8Array): ArrayBuffer {
  return bytes.slice().buffer;
}

function bit(bytes: Uint8Array, i: number): boolean {
  return ((bytes[i >>> 3]! >>> (i & 7)) & 1) === 1;
}

/** The rows of one record batch, decoded from its (uncompressed) body buffers by hand. */
function decodeRows(buffers: BodyBuffer[], rows: number): Pick<Input, 'seq' | 'rnd' | 'name' | 'flag'> {
  const b = (k: number) => buffers[k]!.bytes;
  const seq = Array.from(new BigInt64Array(aligned(b(BUF.seqValues)), 0, rows));
  const rnd = Array.from(new Int32Array(aligned(b(BUF.rndValues)), 0, rows));
  const offsets = new Int32Array(aligned(b(BUF.nameOffsets)), 0, rows + 1);
  const decoder = new TextDecoder();
  const validity = b(BUF.nameValidity);
  const name = Array.from({ length: rows }, (_, i) =>
    validity.byteLength > 0 && !bit(validity, i) ? null : decoder.decode(b(BUF.nameData).subarray(offsets[i]!, offsets[i + 1]!)),
  );
  const flag = Array.from({ length: rows }, (_, i) => bit(b(BUF.flagValues), i));
  return { seq, rnd, name, flag };
}

/** The input rows partition p should hold, in input order. */
function expectedRows(input: Input, p: number): Pick<Input, 'seq' | 'rnd' | 'name' | 'flag'> {
  const rows = input.pid.map((pid, i) => (pid === p ? i : -1)).filter((i) => i >= 0);
  return { seq: rows.map((i) => input.seq[i]!), rnd: rows.map((i) => input.rnd[i]!), name: rows.map((i) => input.name[i]!), flag: rows.map((i) => input.flag[i]!) };
}

// ---------------------------------------------------------------------------
// The data file: partitions as IPC streams
// ---------------------------------------------------------------------------

const ROWS = 9_000;

describe.each(['lz4', 'zstd', 'none'] as const)('data file, codec %s', (codec) => {
  const input = makeInput(ROWS, 11);
  let output: Output;
  let streams: (ParsedStream | null)[];

  beforeAll(async () => {
    output = await writeOutput(input, { codec });
    streams = Array.from({ length: NUM_PARTITIONS }, (_, p) => {
      const bytes = partitionBytes(output, p);
      return bytes.byteLength === 0 ? null : parseStream(bytes, `partition ${p}`);
    });
  });

  it('an empty partition is zero bytes; the others are not', () => {
    expect(output.result.partitionLengths[EMPTY_PARTITION]).toBe(0);
    expect(output.result.partitionRows[EMPTY_PARTITION]).toBe(0);
    for (const p of USED_PARTITIONS) expect(output.result.partitionLengths[p], `partition ${p}`).toBeGreaterThan(0);
  });

  it('each non-empty partition is: schema message, record-batch messages, end-of-stream marker as its last 8 bytes', () => {
    for (const p of USED_PARTITIONS) {
      const stream = streams[p]!;
      expect(stream.messages[0]!.start, `partition ${p}`).toBe(0);
      expect(stream.messages[0]!.message.headerType, `partition ${p} first message`).toBe(MessageHeader.Schema);
      expect(stream.messages[0]!.bodyLength, `partition ${p} schema body`).toBe(0);
      const batches = recordBatches(stream);
      expect(batches.length, `partition ${p}: one message per payload`).toBe(output.result.partitionBatches[p]);
      expect(batches.length, `partition ${p}: several batches (maxBatchRows 1000)`).toBeGreaterThan(1);
      for (const m of batches) expect(m.message.headerType, `partition ${p} message at ${m.start}`).toBe(MessageHeader.RecordBatch);
      expect(stream.eosStart + 8).toBe(output.result.partitionLengths[p]);
    }
  });

  it('the schema message holds the output schema: the partition-id column is left out', () => {
    for (const p of USED_PARTITIONS) {
      const decoded = streams[p]!.messages[0]!.message.header() as Schema;
      expect(decoded.fields.map((f) => f.name)).toEqual(OUTPUT_COLUMNS);
      expect(decoded.fields.map((f) => String(f.type))).toEqual(['Int64', 'Int32', 'Utf8', 'Bool']);
    }
  });

  it('record-batch lengths and field nodes add up to the rows of each partition', () => {
    for (const p of USED_PARTITIONS) {
      const expected = expectedRows(input, p);
      let rows = 0;
      for (const m of recordBatches(streams[p]!)) {
        const header = headerOf(m);
        expect(header.nodes.length).toBe(OUTPUT_COLUMNS.length);
        for (const node of header.nodes) expect(node.length).toBe(Number(header.length));
        rows += Number(header.length);
      }
      expect(rows, `partition ${p}`).toBe(output.result.partitionRows[p]);
      expect(rows, `partition ${p}`).toBe(expected.seq.length);
    }
  });

  it('every message and every body starts 8-aligned relative to the partition start, and so does every partition in the file', () => {
    const index = viewOf(output.index);
    for (let p = 0; p < NUM_PARTITIONS; p++) expect(Number(index.getBigInt64(p * 8, false)) % 8, `partition ${p} start`).toBe(0);
    for (const p of USED_PARTITIONS) {
      for (const m of streams[p]!.messages) {
        expect(m.start % 8, `partition ${p} message at ${m.start}`).toBe(0);
        expect(m.bodyStart % 8, `partition ${p} body at ${m.bodyStart}`).toBe(0);
        expect(m.bodyLength % 8, `partition ${p} body length at ${m.start}`).toBe(0);
      }
      expect(streams[p]!.eosStart % 8).toBe(0);
    }
  });

  it('every buffer region has an offset that is a multiple of 8, regions come in order without overlap, and padding is zero', () => {
    for (const p of USED_PARTITIONS) {
      for (const m of recordBatches(streams[p]!)) {
        const regions = headerOf(m).buffers;
        expect(regions.length).toBe(BUFFERS_PER_BATCH);
        let end = 0;
        for (const [i, region] of regions.entries()) {
          const what = `partition ${p} message at ${m.start} buffer ${i}`;
          expect(region.offset % 8, what).toBe(0);
          expect(region.offset, what).toBeGreaterThanOrEqual(end);
          expect(Array.from(m.body.subarray(end, region.offset)).every((x) => x === 0), `${what}: padding before it is zero`).toBe(true);
          end = region.offset + region.length;
          expect(end, what).toBeLessThanOrEqual(m.bodyLength);
        }
        expect(Array.from(m.body.subarray(end)).every((x) => x === 0), 'trailing padding is zero').toBe(true);
        expect(m.bodyLength - end, 'the body has at most 7 bytes of trailing padding').toBeLessThan(8);
      }
    }
  });

  it('a column without nulls has a zero-length validity region and null count 0; a column with nulls has a bitmap', () => {
    for (const p of USED_PARTITIONS) {
      for (const m of recordBatches(streams[p]!)) {
        const header = headerOf(m);
        for (const k of [BUF.seqValidity, BUF.rndValidity, BUF.flagValidity]) expect(header.buffers[k]!.length).toBe(0);
        expect(header.nodes.map((n) => Number(n.nullCount))).toEqual([0, 0, expect.any(Number), 0]);
        const nameNulls = Number(header.nodes[2]!.nullCount);
        expect(nameNulls).toBeGreaterThan(0); // every fifth input row is null: every batch has some
        expect(header.buffers[BUF.nameValidity]!.length).toBeGreaterThan(0);
      }
    }
  });

  it('decoding the body buffers by hand gives back exactly the rows of each partition, in input order', async () => {
    for (const p of USED_PARTITIONS) {
      const got: Pick<Input, 'seq' | 'rnd' | 'name' | 'flag'> = { seq: [], rnd: [], name: [], flag: [] };
      for (const m of recordBatches(streams[p]!)) {
        const header = headerOf(m);
        const rows = Number(header.length);
        const buffers = await bodyBuffers(m, codec, `partition ${p} message at ${m.start}`);
        // uncompressed sizes: exactly what the rows need
        expect(buffers[BUF.seqValues]!.bytes.byteLength).toBe(8 * rows);
        expect(buffers[BUF.rndValues]!.bytes.byteLength).toBe(4 * rows);
        expect(buffers[BUF.nameOffsets]!.bytes.byteLength).toBe(4 * (rows + 1));
        expect(buffers[BUF.nameValidity]!.bytes.byteLength).toBe(Math.ceil(rows / 8));
        expect(buffers[BUF.flagValues]!.bytes.byteLength).toBe(Math.ceil(rows / 8));
        const decoded = decodeRows(buffers, rows);
        for (const key of ['seq', 'rnd', 'name', 'flag'] as const) (got[key] as unknown[]).push(...decoded[key]);
        const nullsInBitmap = Array.from({ length: rows }, (_, i) => bit(buffers[BUF.nameValidity]!.bytes, i)).filter((v) => !v).length;
        expect(nullsInBitmap, 'the name field node null count matches its bitmap').toBe(Number(header.nodes[2]!.nullCount));
      }
      expect(got, `partition ${p}`).toEqual(expectedRows(input, p));
    }
  });

  if (codec === 'none') {
    it('codec none: no BodyCompression in any record-batch header, buffers stored as plain bytes', () => {
      for (const p of USED_PARTITIONS) {
        for (const m of recordBatches(streams[p]!)) {
          expect(headerOf(m).compression).toBeNull();
          const rows = Number(headerOf(m).length);
          expect(headerOf(m).buffers[BUF.seqValues]!.length).toBe(8 * rows);
        }
      }
    });
  } else {
    const arrowType = codec === 'lz4' ? CompressionType.LZ4_FRAME : CompressionType.ZSTD;

    it(`codec ${codec}: every record-batch header has BodyCompression { codec ${CompressionType[arrowType]}, method BUFFER }`, () => {
      for (const p of USED_PARTITIONS) {
        for (const m of recordBatches(streams[p]!)) {
          const compression = headerOf(m).compression;
          expect(compression).not.toBeNull();
          expect(compression!.type).toBe(arrowType);
          expect(compression!.method).toBe(BodyCompressionMethod.BUFFER);
        }
      }
    });

    it(`codec ${codec}: compressed buffers are int64 LE uncompressed length + a ${codec} frame; the incompressible int32 column is stored as -1 + raw bytes`, async () => {
      const kinds = new Map<number, Set<BufferKind>>();
      for (const p of USED_PARTITIONS) {
        for (const m of recordBatches(streams[p]!)) {
          const buffers = await bodyBuffers(m, codec, `partition ${p} message at ${m.start}`);
          buffers.forEach((b, k) => {
            if (!kinds.has(k)) kinds.set(k, new Set());
            kinds.get(k)!.add(b.kind);
            if (b.kind === 'raw') expect(headerOf(m).buffers[k]!.length).toBe(8 + b.bytes.byteLength);
          });
        }
      }
      const of = (k: number) => [...(kinds.get(k) ?? [])];
      expect(of(BUF.seqValues)).toEqual(['compressed']); // sequential int64: shrinks
      expect(of(BUF.nameData)).toEqual(['compressed']); // 50 distinct strings: shrinks
      expect(of(BUF.rndValues)).toEqual(['raw']); // random int32: does not shrink
      expect(of(BUF.seqValidity)).toEqual(['empty']);
      expect(of(BUF.rndValidity)).toEqual(['empty']);
      expect(of(BUF.flagValidity)).toEqual(['empty']);
    });

    it(`codec ${codec}: the raw (-1) int32 buffer holds exactly the input values, little-endian`, async () => {
      const p = USED_PARTITIONS[0]!;
      const expected = expectedRows(input, p).rnd;
      const got: number[] = [];
      for (const m of recordBatches(streams[p]!)) {
        const region = headerOf(m).buffers[BUF.rndValues]!;
        const view = new DataView(m.body.buffer, m.body.byteOffset + region.offset, region.length);
        expect(view.getBigInt64(0, true)).toBe(-1n);
        for (let at = 8; at < region.length; at += 4) got.push(view.getInt32(at, true));
      }
      expect(got).toEqual(expected);
    });

    it(`codec ${codec}: tiny buffers that a frame cannot shrink are stored raw with prefix -1`, async () => {
      const tiny = makeInput(3, 5);
      tiny.pid.fill(0);
      const small = await writeOutput(tiny, { codec });
      const stream = parseStream(partitionBytes(small, 0), 'tiny partition');
      const [m] = recordBatches(stream);
      const buffers = await bodyBuffers(m!, codec, 'tiny');
      expect(buffers.map((b) => b.kind)).toEqual(['empty', 'raw', 'empty', 'raw', 'raw', 'raw', 'raw', 'empty', 'raw']);
      expect(buffers.every((b) => b.kind === 'empty' || b.prefix === -1n)).toBe(true);
      const rows = decodeRows(buffers, 3);
      expect(rows.seq).toEqual(tiny.seq);
      expect(rows.rnd).toEqual(tiny.rnd);
      expect(rows.name).toEqual(tiny.name);
      expect(rows.flag).toEqual(tiny.flag);
    });
  }
});

describe.each(['none', 'lz4'] as const)('a data file larger than the writer\'s 1 MiB / 512-chunk write batches (codec %s)', (codec) => {
  it('is still framed, indexed and checksummed correctly, and every row decodes by hand', async () => {
    const input = makeInput(60_000, 17);
    const output = await writeOutput(input, { codec, maxBatchRows: 100 }, 240);
    if (codec === 'none') expect(output.data.byteLength).toBeGreaterThan(1 << 20);
    const index = viewOf(output.index);
    const checksums = viewOf(output.checksum);
    expect(Number(index.getBigInt64(NUM_PARTITIONS * 8, false))).toBe(output.data.byteLength);
    for (const p of USED_PARTITIONS) {
      const bytes = partitionBytes(output, p);
      expect(Number(checksums.getBigInt64(p * 8, false)), `partition ${p} CRC32C`).toBe(crc32c(bytes) >>> 0);
      const stream = parseStream(bytes, `partition ${p}`);
      const batches = recordBatches(stream);
      expect(batches.length, `partition ${p}: hundreds of messages`).toBeGreaterThan(150);
      const got: Pick<Input, 'seq' | 'rnd' | 'name' | 'flag'> = { seq: [], rnd: [], name: [], flag: [] };
      for (const m of batches) {
        expect(m.bodyStart % 8).toBe(0);
        const decoded = decodeRows(await bodyBuffers(m, codec, `partition ${p} message at ${m.start}`), Number(headerOf(m).length));
        for (const key of ['seq', 'rnd', 'name', 'flag'] as const) (got[key] as unknown[]).push(...decoded[key]);
      }
      expect(got, `partition ${p}`).toEqual(expectedRows(input, p));
    }
  });
});

describe('LZ4 frames (codec lz4)', () => {
  it('the xxh32 used to check frame headers matches the reference test vectors', () => {
    const ascii = (text: string) => new TextEncoder().encode(text);
    expect(xxh32(ascii(''))).toBe(0x02cc5d05);
    expect(xxh32(ascii('a'))).toBe(0x550d7456);
    expect(xxh32(ascii('abc'))).toBe(0x32d153ff);
    expect(xxh32(ascii('Nobody inspects the spammish repetition'))).toBe(0xe2293b2f);
  });

  it('a buffer above 4 MiB is one frame of several blocks, each within the declared block max size, and decompresses to its prefix', async () => {
    const rows = 600_000; // seq values: 4.8 MB
    const input = makeInput(rows, 29);
    input.pid.fill(0);
    const output = await writeOutput(input, { codec: 'lz4', maxBatchRows: rows }, rows);
    const [m, ...more] = recordBatches(parseStream(partitionBytes(output, 0), 'partition 0'));
    expect(more).toEqual([]);
    const header = headerOf(m!);
    const region = header.buffers[BUF.seqValues]!;
    const prefix = new DataView(m!.body.buffer, m!.body.byteOffset + region.offset, 8).getBigInt64(0, true);
    expect(prefix).toBe(BigInt(8 * rows));
    const frame = m!.body.subarray(region.offset + 8, region.offset + region.length);
    const info = checkLz4Frame(frame, 'seq values');
    expect(info.blockMaxBytes).toBe(4 << 20);
    expect(info.blocks.length).toBe(2);
    const values = new Uint8Array(await decompressFrame(frame));
    expect(values.byteLength).toBe(8 * rows);
    const expected = new Uint8Array(BigInt64Array.from(input.seq).buffer);
    expect(Buffer.compare(values, expected)).toBe(0);
  });
});

describe('record-batch size', () => {
  // maxBatchRows bounds every record batch, also when one input batch brings a partition more rows.
  it('no record-batch message holds more than maxBatchRows rows, even for a large input batch', async () => {
    const input = makeInput(9_000, 23);
    const output = await writeOutput(input, { codec: 'none', maxBatchRows: 1_000 }, 9_000);
    for (const p of USED_PARTITIONS) {
      for (const m of recordBatches(parseStream(partitionBytes(output, p), `partition ${p}`))) {
        expect(Number(headerOf(m).length), `partition ${p} message at ${m.start}`).toBeLessThanOrEqual(1_000);
      }
    }
  });
});

// ---------------------------------------------------------------------------
// Index and checksum files
// ---------------------------------------------------------------------------

describe('index file', () => {
  it('holds (P + 1) big-endian int64 offsets: 0 first, never decreasing, the data file size last, differences = partitionLengths', async () => {
    const output = await writeOutput(makeInput(3_000, 3), { codec: 'lz4' });
    expect(output.index.byteLength).toBe((NUM_PARTITIONS + 1) * 8);
    const view = viewOf(output.index);
    const offsets = Array.from({ length: NUM_PARTITIONS + 1 }, (_, i) => view.getBigInt64(i * 8, false));
    expect(offsets[0]).toBe(0n);
    for (let i = 1; i < offsets.length; i++) expect(offsets[i]! >= offsets[i - 1]!, `offset ${i}`).toBe(true);
    expect(offsets[NUM_PARTITIONS]).toBe(BigInt((await stat(output.result.paths.data)).size));
    expect(offsets[NUM_PARTITIONS]).toBe(BigInt(output.result.bytesWritten));
    expect(offsets.slice(1).map((o, p) => Number(o - offsets[p]!))).toEqual(output.result.partitionLengths);
    expect(offsets[EMPTY_PARTITION + 1]).toBe(offsets[EMPTY_PARTITION]); // the empty partition
  });

  it('is big-endian: a small offset sits in the last bytes of its 8', async () => {
    const output = await writeOutput(makeInput(10, 3), { codec: 'none' });
    const first = output.result.partitionLengths[0]!;
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThan(1 << 16);
    expect(Array.from(output.index.subarray(8, 16))).toEqual([0, 0, 0, 0, 0, 0, first >>> 8, first & 0xff]);
  });
});

describe('checksum file', () => {
  it('CRC32C of "123456789" is 0xE3069283 (the check value of the algorithm used)', () => {
    expect(crc32c(new TextEncoder().encode('123456789')) >>> 0).toBe(0xe3069283);
    expect(crc32c('123456789') >>> 0).toBe(0xe3069283);
  });

  it('is <prefix>.checksum.CRC32C with P big-endian int64 values: CRC32C of each partition byte range (0 when empty)', async () => {
    for (const codec of ['lz4', 'zstd', 'none'] as const) {
      const output = await writeOutput(makeInput(3_000, 9), { codec });
      expect(output.result.paths.checksum).toBe(`${output.prefix}.checksum.CRC32C`);
      expect(output.checksum.byteLength).toBe(NUM_PARTITIONS * 8);
      const view = viewOf(output.checksum);
      for (let p = 0; p < NUM_PARTITIONS; p++) {
        const stored = view.getBigInt64(p * 8, false);
        expect(stored >> 32n, `partition ${p}: the CRC fills only the low 32 bits`).toBe(0n);
        const bytes = partitionBytes(output, p);
        const expected = bytes.byteLength === 0 ? 0 : crc32c(bytes) >>> 0;
        expect(Number(stored), `${codec} partition ${p}`).toBe(expected);
        expect(output.result.checksums[p]).toBe(expected);
      }
      expect(Number(view.getBigInt64(EMPTY_PARTITION * 8, false))).toBe(0);
    }
  });
});

describe('an output with a schema and no rows', () => {
  it('keeps its schema in partition 0, a stream of the schema message and the end marker; the other partitions are empty', async () => {
    const dir = await freshDir();
    const writer = await ShuffleWriter.create({
      numPartitions: 3,
      partitioning: { kind: 'partition-id', column: 'pid' },
      outputPrefix: join(dir, 'out'),
      schema,
    });
    const result = await writer.finish();
    const data = new Uint8Array(await readFile(result.paths.data));
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    // FF FF FF FF | int32 LE metadataLength | Message flatbuffer (a Schema, no body) | FF FF FF FF 00 00 00 00
    expect(view.getUint32(0, true)).toBe(0xffffffff);
    const metadataLength = view.getInt32(4, true);
    expect(metadataLength % 8).toBe(0);
    const message = Message.decode(data.subarray(8, 8 + metadataLength));
    expect(message.headerType).toBe(MessageHeader.Schema);
    expect(Number(message.bodyLength)).toBe(0);
    expect((message.header() as Schema).fields.map((f) => f.name)).toEqual(schema.fields.filter((f) => f.name !== 'pid').map((f) => f.name));
    expect(Array.from(data.subarray(8 + metadataLength))).toEqual([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    expect(result.partitionLengths).toEqual([data.byteLength, 0, 0]);
    expect(result.partitionRows).toEqual([0, 0, 0]);
    const index = new DataView((await readFile(result.paths.index)).buffer);
    expect([0, 1, 2, 3].map((i) => Number(index.getBigInt64(i * 8, false)))).toEqual([0, data.byteLength, data.byteLength, data.byteLength]);
    const checksums = new DataView((await readFile(result.paths.checksum)).buffer);
    expect([0, 1, 2].map((p) => Number(checksums.getBigInt64(p * 8, false)))).toEqual([crc32c(data) >>> 0, 0, 0]);
  });
});

// ---------------------------------------------------------------------------
// Atomic commit
// ---------------------------------------------------------------------------

async function listing(dir: string): Promise<string[]> {
  return (await readdir(dir)).sort();
}

function baseOptions(dir: string): ShuffleWriterOptions {
  return { numPartitions: NUM_PARTITIONS, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: join(dir, 'out'), codec: 'lz4' };
}

async function rejection(promise: Promise<unknown>): Promise<ShuffleError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ShuffleError);
  return error as ShuffleError;
}

describe('atomic commit', () => {
  const input = makeInput(4_000, 21);

  it('after finish, the directory holds exactly the three final files (no *.tmp)', async () => {
    const output = await writeOutput(input, { codec: 'zstd' });
    expect(await listing(output.dir)).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
  });

  it('before finish, no file has a final name', async () => {
    const dir = await freshDir();
    const writer = await ShuffleWriter.create(baseOptions(dir));
    await writer.write(batchOf(input, 0, 2_000));
    const files = await listing(dir);
    expect(files.length).toBeGreaterThan(0);
    expect(files.every((f) => f.endsWith('.tmp')), files.join(', ')).toBe(true);
    await writer.abort();
  });

  it('after abort(), no file at all remains', async () => {
    const dir = await freshDir();
    const writer = await ShuffleWriter.create({ ...baseOptions(dir), maxBatchRows: 100 });
    await writer.write(batchOf(input, 0, 2_000));
    await writer.write(batchOf(input, 2_000, 4_000));
    await writer.abort();
    expect(await listing(dir)).toEqual([]);
  });

  it('after a schema-mismatch batch and abort(), no file at all remains', async () => {
    const dir = await freshDir();
    const writer = await ShuffleWriter.create(baseOptions(dir));
    await writer.write(batchOf(input, 0, 1_000));
    const other = new RecordBatch(
      new Schema([new Field('pid', new Int32(), false)]),
      makeData({ type: new Struct([new Field('pid', new Int32(), false)]), length: 1, nullCount: 0, children: [makeData({ type: new Int32(), length: 1, data: new Int32Array([0]) })] }),
    );
    expect((await rejection(writer.write(other))).code).toBe('CS_SCHEMA_MISMATCH');
    await writer.abort();
    expect(await listing(dir)).toEqual([]);
  });

  it('an unknown key column at create (schema given) fails create and leaves no file', async () => {
    const dir = await freshDir();
    const error = await rejection(ShuffleWriter.create({ ...baseOptions(dir), partitioning: { kind: 'hash', keys: ['nope'] }, schema }));
    expect(error.code).toBe('CS_UNKNOWN_COLUMN');
    expect(await listing(dir)).toEqual([]);
  });

  it('an unknown key column found at the first write, then abort(): no file remains', async () => {
    const dir = await freshDir();
    const writer = await ShuffleWriter.create({ ...baseOptions(dir), partitioning: { kind: 'hash', keys: ['nope'] } });
    expect((await rejection(writer.write(batchOf(input, 0, 10)))).code).toBe('CS_UNKNOWN_COLUMN');
    await writer.abort();
    expect(await listing(dir)).toEqual([]);
  });

  it('a partition id out of range, then abort(): no file remains', async () => {
    const dir = await freshDir();
    const writer = await ShuffleWriter.create({ ...baseOptions(dir), numPartitions: 2 }); // pid 3 is out of range
    expect((await rejection(writer.write(batchOf(input, 0, 1_000)))).code).toBe('CS_PARTITION_ID_OUT_OF_RANGE');
    await writer.abort();
    expect(await listing(dir)).toEqual([]);
  });

  it('a finish() that fails (no batch, no schema) leaves no file, without an explicit abort', async () => {
    const dir = await freshDir();
    const writer = await ShuffleWriter.create(baseOptions(dir));
    expect((await rejection(writer.finish())).code).toBe('CS_INVALID_ARGUMENT');
    expect(await listing(dir)).toEqual([]);
  });

  it('a commit that fails at the last rename (the index name is taken by a directory) leaves none of its files', async () => {
    const dir = await freshDir();
    await mkdir(join(dir, 'out.index'));
    const writer = await ShuffleWriter.create({ ...baseOptions(dir), overwrite: true });
    await writer.write(batchOf(input, 0, 1_000));
    const error = await rejection(writer.finish());
    expect(error.code).toBe('CS_IO');
    expect(await listing(dir)).toEqual(['out.index']);
    expect(await readdir(join(dir, 'out.index'))).toEqual([]);
  });

  it('finishing over an existing output replaces its three files and leaves nothing else', async () => {
    const first = await writeOutput(input, { codec: 'lz4' });
    const writer = await ShuffleWriter.create({ ...baseOptions(first.dir), codec: 'none', overwrite: true });
    await writer.write(batchOf(input, 0, 100));
    const result = await writer.finish();
    expect(await listing(first.dir)).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
    expect((await stat(result.paths.data)).size).toBe(result.bytesWritten);
    expect(result.bytesWritten).not.toBe(first.result.bytesWritten);
  });
});

// ---------------------------------------------------------------------------
// Nested columns and dictionary batches (docs/FORMAT.md's worked examples)
// ---------------------------------------------------------------------------

describe('nested columns and dictionary batches, byte by byte', () => {
  async function singlePartition(batch: RecordBatch, codec: CodecName): Promise<ParsedStream> {
    const dir = await freshDir();
    const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'out'), codec, compressionMinRows: 0 });
    await writer.write(batch);
    await writer.finish();
    const bytes = new Uint8Array(await readFile(join(dir, 'out.data')));
    return parseStream(bytes, 'partition 0');
  }

  it.each(['none', 'lz4'] as const)('codec %s: a List<Int32> column [1, 2], null, [3] is its validity and offsets, then its child, as the worked example says', async (codec) => {
    const type = new List(new Field('item', new Int32(), true));
    const child = makeData({ type: new Int32(), length: 3, data: Int32Array.of(1, 2, 3) });
    const list = makeData({ type, length: 3, nullCount: 1, nullBitmap: Uint8Array.of(0b101), valueOffsets: Int32Array.of(0, 2, 2, 3), child });
    const schema = new Schema([new Field('l', type, true)]);
    const stream = await singlePartition(new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 3, nullCount: 0, children: [list] })), codec);
    const [batch] = recordBatches(stream);
    const header = headerOf(batch!);
    expect(header.nodes.map((n) => [Number(n.length), Number(n.nullCount)])).toEqual([[3, 1], [3, 0]]);
    const buffers = await bodyBuffers(batch!, codec, 'the list batch');
    expect(buffers.map((b) => Array.from(b.bytes))).toEqual([
      [0b101],
      [0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0],
      [],
      [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0],
    ]);
  });

  it('a dictionary column: the schema names the dictionary id, a dictionary batch (not a delta) holds the values, the record batch the indices', async () => {
    const type = new Dictionary(new Utf8(), new Int32(), 42);
    const values = makeData({ type: new Utf8(), length: 2, valueOffsets: Int32Array.of(0, 1, 3), data: Uint8Array.of(0x61, 0x62, 0x63) });
    const column = makeData({ type, length: 3, data: Int32Array.of(1, 0, 1), dictionary: new Vector([values]) } as never);
    const schema = new Schema([new Field('d', type, true)]);
    const stream = await singlePartition(new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 3, nullCount: 0, children: [column] })), 'none');
    expect(stream.messages.map((m) => m.message.headerType)).toEqual([MessageHeader.Schema, MessageHeader.DictionaryBatch, MessageHeader.RecordBatch]);
    const decodedSchema = stream.messages[0]!.message.header() as Schema;
    expect((decodedSchema.fields[0]!.type as Dictionary).id).toBe(42);
    const dictionary = stream.messages[1]!;
    const dictionaryHeader = dictionary.message.header() as DictionaryBatchHeader;
    expect(dictionaryHeader.id).toBe(42);
    expect(dictionaryHeader.isDelta).toBe(false);
    expect(Number(dictionaryHeader.data.length)).toBe(2);
    const regions = dictionaryHeader.data.buffers;
    const at = (i: number) => Array.from(dictionary.body.subarray(regions[i]!.offset, regions[i]!.offset + regions[i]!.length));
    expect([at(0), at(1), at(2)]).toEqual([[], [0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0], [0x61, 0x62, 0x63]]);
    const batch = await bodyBuffers(stream.messages[2]!, 'none', 'the indices batch');
    expect(batch.map((b) => Array.from(b.bytes))).toEqual([[], [1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]]);
  });
});
