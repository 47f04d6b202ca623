import type { Schema } from 'apache-arrow';
import {
  BodyCompression,
  BufferRegion,
  DictionaryBatch as DictionaryBatchHeader,
  FieldNode,
  Message,
  RecordBatch as RecordBatchHeader,
} from 'apache-arrow/ipc/metadata/message';
import type { CompressionType } from 'apache-arrow/fb/compression-type';
import type { Codec } from './codec.js';
import type { CompressionPolicy } from './compression-advisor.js';

/**
 * Arrow IPC encapsulated messages, written by hand around arrow-js's flatbuffer
 * metadata encoder (apache-arrow 21.2.0's own writer puts the compressed length
 * in the body-buffer prefix; the spec and every other reader want the
 * uncompressed one).
 *
 * ```text
 * message      := 0xFFFFFFFF | int32 LE metadataSize | metadata | pad-to-8 | body
 *                 (metadataSize counts the flatbuffer and its padding, so the body starts 8-aligned)
 * body         := for each buffer: bytes, padded with zeros to a multiple of 8
 * compressed   := int64 LE uncompressedLength | LZ4 frame or Zstandard frame
 * stored raw   := int64 LE -1                 | the uncompressed bytes   (compression did not shrink it)
 * empty buffer := nothing (length 0, no prefix)
 * end of stream:= 0xFFFFFFFF 0x00000000
 * ```
 */

export const CONTINUATION_MARKER = 0xffffffff;
export const END_OF_STREAM: Uint8Array = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
/** Prefix value of a compressed-body buffer that was stored uncompressed. */
export const LENGTH_NO_COMPRESSED_DATA = -1n;
const PREFIX_BYTES = 8;

/** Bytes needed to pad `length` up to the next multiple of 8. */
export function padding8(length: number): number {
  return (8 - (length & 7)) & 7;
}

/** Frames a flatbuffer `Message` as an encapsulated IPC message header (without its body). */
function frameMetadata(metadata: Uint8Array): Uint8Array {
  const metadataSize = metadata.byteLength + padding8(metadata.byteLength);
  const framed = new Uint8Array(8 + metadataSize);
  const view = new DataView(framed.buffer);
  view.setUint32(0, CONTINUATION_MARKER, true);
  view.setInt32(4, metadataSize, true);
  framed.set(metadata, 8);
  return framed;
}

/** The schema message that opens every partition's IPC stream. */
export function encodeSchemaMessage(schema: Schema): Uint8Array {
  return frameMetadata(Message.encode(Message.from(schema)));
}

/**
 * One field node of a record batch: a column's (or child's) length and null
 * count; for a view column (Utf8View, BinaryView) also how many variadic data
 * buffers follow its views, which the record batch's variadicBufferCounts
 * lists (one per view node, in node order).
 */
export interface FieldNodeInfo {
  length: number;
  nullCount: number;
  variadicBuffers?: number;
}

/** How many of these nodes are view nodes (entries of variadicBufferCounts). */
export function variadicCountOf(nodes: readonly FieldNodeInfo[]): number {
  let count = 0;
  for (const node of nodes) if (node.variadicBuffers !== undefined) count++;
  return count;
}

/** The record batch's variadicBufferCounts for these nodes: the view nodes' counts, in node order. */
export function variadicBufferCountsOf(nodes: readonly FieldNodeInfo[]): number[] {
  const counts: number[] = [];
  for (const node of nodes) if (node.variadicBuffers !== undefined) counts.push(node.variadicBuffers);
  return counts;
}

/**
 * An encoded record-batch message as a list of chunks to be written in order
 * (header, then body pieces), so that compressed outputs are never copied again.
 */
export interface EncodedMessage {
  chunks: Uint8Array[];
  byteLength: number;
  /** bytes of ArrayBuffers the message keeps alive, when more than byteLength (an arena with slack) */
  heldBytes?: number;
  /** the array the body lives in, when it came from the caller's `allocate` (to be given back once the message is written) */
  arena?: Uint8Array;
}

/** Where an encoder gets the array it lays a message out in: zeroed, at least `bytes` long. */
export type Allocate = (bytes: number) => Uint8Array;
const allocateNew: Allocate = (bytes) => new Uint8Array(bytes);

const ZEROS = new Uint8Array(8);

/** Upper bound of a record-batch message's header and length prefixes beyond its body buffers. */
const MESSAGE_OVERHEAD_BYTES = 4096;

/** Most bytes the encoded form of `raw` body bytes can take next to them: frames, prefixes, header. */
export function compressionBound(raw: number): number {
  return raw + Math.ceil(raw / 128) + MESSAGE_OVERHEAD_BYTES;
}

/** Makes a record-batch body a dictionary batch: the values of dictionary `id`, replacing it or (delta) appended to it. */
export interface DictionaryTarget {
  id: number;
  isDelta: boolean;
}

/**
 * Encodes a record-batch message (or, with `dictionary`, a dictionary-batch
 * message) whose body holds `buffers` in order (validity,
 * offsets, values... as the Arrow columnar format lays them out per field).
 * With a codec, each non-empty buffer is compressed on its own and prefixed
 * with its uncompressed length; a buffer that does not shrink, or that the
 * advisor says is not worth trying, is stored raw with prefix -1. The caller must keep `buffers` unchanged until this settles.
 * Without a codec the buffers are referenced, not copied: copy them first if
 * they will be reused.
 */
export async function encodeRecordBatchMessage(
  rows: number,
  nodes: readonly FieldNodeInfo[],
  buffers: readonly Uint8Array[],
  codec: Codec | null,
  advisor?: CompressionPolicy,
  dictionary?: DictionaryTarget,
): Promise<EncodedMessage> {
  const bodyParts: Uint8Array[][] = codec === null
    ? buffers.map((b) => [b])
    : await Promise.all(buffers.map((b, position) => compressBodyBuffer(b, codec, advisor, position)));

  const regions: number[] = []; // offset, length per buffer
  const body: Uint8Array[] = [];
  let offset = 0;
  for (const parts of bodyParts) {
    let length = 0;
    for (const part of parts) {
      if (part.byteLength > 0) body.push(part);
      length += part.byteLength;
    }
    regions.push(offset, length);
    const pad = padding8(length);
    if (pad > 0) body.push(ZEROS.subarray(0, pad));
    offset += length + pad;
  }

  // dictionary batches are rare: arrow-js's encoder lays out their header; record batches take the direct one
  const framed = dictionary === undefined ? encodeRecordBatchHeader(rows, nodes, regions, codec === null ? null : codec.arrowType, offset) : encodeDictionaryBatchHeader(rows, nodes, regions, codec, offset, dictionary);
  body.unshift(framed);
  return { chunks: body, byteLength: framed.byteLength + offset };
}

/** The framed metadata of a dictionary-batch message, through arrow-js's flatbuffer encoder. */
function encodeDictionaryBatchHeader(
  rows: number,
  nodes: readonly FieldNodeInfo[],
  regions: readonly number[],
  codec: Codec | null,
  bodyLength: number,
  dictionary: DictionaryTarget,
): Uint8Array {
  const buffers: BufferRegion[] = [];
  for (let i = 0; i < regions.length; i += 2) buffers.push(new BufferRegion(regions[i]!, regions[i + 1]!));
  const batch = new RecordBatchHeader(
    rows,
    nodes.map((n) => new FieldNode(n.length, n.nullCount)),
    buffers,
    codec === null ? null : new BodyCompression(codec.arrowType),
    variadicBufferCountsOf(nodes),
  );
  return frameMetadata(Message.encode(Message.from(new DictionaryBatchHeader(batch, dictionary.id, dictionary.isDelta), bodyLength)));
}

/**
 * The framed metadata of a record-batch message (continuation marker, size,
 * flatbuffer, padding), laid out directly instead of through arrow-js's
 * generic flatbuffer Builder, which cost 10-20 µs per message (BigInts, a
 * fresh 1 KiB builder, objects per node and buffer); under a tight memory
 * limit the writer encodes tens of thousands of small batches.
 *
 * The flatbuffer (Arrow's Message.fbs), every field present, each vtable just
 * before its table, offsets relative to the flatbuffer's first byte:
 *
 * ```text
 *   0  u32 root: 16 (the Message table)
 *   4  Message vtable: u16 12, u16 20, then field offsets version 16, headerType 18, header 4, bodyLength 8
 *  16  Message table: i32 12 (to its vtable), u32 header -> 48, i64 bodyLength, i16 version 4 (V5), u8 headerType 3 (RecordBatch), pad
 *  36  RecordBatch vtable: u16 12, u16 24, then length 16, nodes 4, buffers 8, compression 12 (0: absent)
 *  48  RecordBatch table: i32 12, u32 nodes, u32 buffers, u32 compression or 0, i64 length
 *  72  BodyCompression vtable: u16 8, u16 8, codec 4, method 5          (only with compression)
 *  80  BodyCompression table: i32 8, i8 codec, i8 method 0 (BUFFER), pad (only with compression)
 *   N  nodes vector: [pad to N+4 = 0 mod 8], u32 count, count x {i64 length, i64 nullCount}
 *   B  buffers vector: u32 count, count x {i64 offset, i64 length}  (B + 4 = 0 mod 8)
 * ```
 * With view columns the RecordBatch table has its fifth field,
 * variadicBufferCounts, and everything from its vtable on moves:
 *
 * ```text
 *  36  RecordBatch vtable: u16 14, u16 28, then length 20, nodes 4, buffers 8, compression 12 (or 0), variadic 16; 2 bytes pad
 *  52  RecordBatch table: i32 16, u32 nodes, u32 buffers, u32 compression or 0, u32 variadic, i64 length
 *  80  BodyCompression vtable, 88 its table (only with compression)
 *   N  nodes vector, B buffers vector: as above, 8 bytes later
 *   V  variadicBufferCounts vector: u32 count, count x i64   (V + 4 = 0 mod 8)
 * ```
 * Every int64 and every struct vector element sits 8-aligned (the flatbuffer
 * starts at byte 8 of the framed message, which starts 8-aligned), as
 * flatbuffer verifiers require.
 */
export function encodeRecordBatchHeader(
  rows: number,
  nodes: readonly FieldNodeInfo[],
  regions: readonly number[],
  compression: CompressionType | null,
  bodyLength: number,
): Uint8Array {
  const framed = new Uint8Array(recordBatchHeaderBytes(nodes, regions.length >>> 1, compression !== null));
  writeRecordBatchHeader(framed, rows, nodes, regions, compression, bodyLength);
  return framed;
}

/** Bytes of the framed record-batch header `encodeRecordBatchHeader` writes (a multiple of 8). */
export function recordBatchHeaderBytes(nodes: readonly FieldNodeInfo[], bufferCount: number, withCompression: boolean): number {
  const variadic = variadicCountOf(nodes);
  const end = variadic === 0 ? headerBuffersAt(nodes.length, withCompression, false) + 4 + 16 * bufferCount : headerVariadicAt(nodes.length, bufferCount, withCompression) + 4 + 8 * variadic;
  return 8 + end + padding8(end);
}

/** Where the nodes vector's count sits in the flatbuffer: after the tables, and the compression table if any. */
function headerNodesAt(withCompression: boolean, withVariadic: boolean): number {
  return (withCompression ? 92 : 76) + (withVariadic ? 8 : 0); // the count; elements follow 8-aligned
}

function headerBuffersAt(nodeCount: number, withCompression: boolean, withVariadic: boolean): number {
  return headerNodesAt(withCompression, withVariadic) + 4 + 16 * nodeCount + 4;
}

function headerVariadicAt(nodeCount: number, bufferCount: number, withCompression: boolean): number {
  return headerBuffersAt(nodeCount, withCompression, true) + 4 + 16 * bufferCount + 4;
}

/** Writes the framed header at the start of `framed` (zeroed, at least recordBatchHeaderBytes long). */
function writeRecordBatchHeader(
  framed: Uint8Array,
  rows: number,
  nodes: readonly FieldNodeInfo[],
  regions: readonly number[],
  compression: CompressionType | null,
  bodyLength: number,
): void {
  const bufferCount = regions.length >>> 1;
  const withCompression = compression !== null;
  const variadic = variadicCountOf(nodes);
  const withVariadic = variadic > 0;
  const nodesAt = headerNodesAt(withCompression, withVariadic);
  const buffersAt = headerBuffersAt(nodes.length, withCompression, withVariadic);
  const metadataSize = recordBatchHeaderBytes(nodes, bufferCount, withCompression) - 8;
  // the RecordBatch table and what follows it move by `shift` when it has its variadicBufferCounts field
  const shift = withVariadic ? 4 : 0;
  const table = 48 + shift;
  const compressionAt = 72 + 2 * shift;
  const view = new DataView(framed.buffer, framed.byteOffset, framed.byteLength);
  view.setUint32(0, CONTINUATION_MARKER, true);
  view.setInt32(4, metadataSize, true);
  u32(view, 0, 16);
  // Message vtable and table
  u16(view, 4, 12), u16(view, 6, 20), u16(view, 8, 16), u16(view, 10, 18), u16(view, 12, 4), u16(view, 14, 8);
  u32(view, 16, 12);
  u32(view, 20, table - 20);
  i64(view, 24, bodyLength);
  u16(view, 32, 4); // MetadataVersion.V5
  framed[FLATBUFFER_AT + 34] = 3; // MessageHeader.RecordBatch
  // RecordBatch vtable and table
  u16(view, 36, 12 + shift / 2), u16(view, 38, 24 + shift), u16(view, 40, 16 + shift), u16(view, 42, 4), u16(view, 44, 8), u16(view, 46, withCompression ? 12 : 0);
  if (withVariadic) u16(view, 48, 16);
  u32(view, table, table - 36);
  u32(view, table + 4, nodesAt - (table + 4));
  u32(view, table + 8, buffersAt - (table + 8));
  if (withCompression) u32(view, table + 12, compressionAt + 8 - (table + 12));
  if (withVariadic) u32(view, table + 16, headerVariadicAt(nodes.length, bufferCount, withCompression) - (table + 16));
  i64(view, table + 16 + shift, rows);
  if (withCompression) {
    u16(view, compressionAt, 8), u16(view, compressionAt + 2, 8), u16(view, compressionAt + 4, 4), u16(view, compressionAt + 6, 5);
    u32(view, compressionAt + 8, 8);
    framed[FLATBUFFER_AT + compressionAt + 12] = compression;
    framed[FLATBUFFER_AT + compressionAt + 13] = 0; // BodyCompressionMethod.BUFFER
  }
  u32(view, nodesAt, nodes.length);
  for (let i = 0, pos = nodesAt + 4; i < nodes.length; i++, pos += 16) {
    i64(view, pos, nodes[i]!.length);
    i64(view, pos + 8, nodes[i]!.nullCount);
  }
  u32(view, buffersAt, bufferCount);
  for (let i = 0, pos = buffersAt + 4; i < regions.length; i += 2, pos += 16) {
    i64(view, pos, regions[i]!);
    i64(view, pos + 8, regions[i + 1]!);
  }
  if (withVariadic) {
    const variadicAt = headerVariadicAt(nodes.length, bufferCount, withCompression);
    u32(view, variadicAt, variadic);
    let pos = variadicAt + 4;
    for (const node of nodes) {
      if (node.variadicBuffers === undefined) continue;
      i64(view, pos, node.variadicBuffers);
      pos += 8;
    }
  }
}

/** Where the flatbuffer starts in a framed message: after the continuation marker and the metadata size. */
const FLATBUFFER_AT = 8;
// module-level, not closures: a header is written per payload, and tsx wraps every named closure it creates
function u16(view: DataView, pos: number, v: number): void {
  view.setUint16(FLATBUFFER_AT + pos, v, true);
}
function u32(view: DataView, pos: number, v: number): void {
  view.setUint32(FLATBUFFER_AT + pos, v, true);
}
function i64(view: DataView, pos: number, v: number): void {
  view.setUint32(FLATBUFFER_AT + pos, v >>> 0, true);
  view.setUint32(FLATBUFFER_AT + pos + 4, Math.floor(v / 4294967296), true);
}

/** Most bytes `encodeRecordBatchPayload` puts in its arena for body buffers of `rawBytes` bytes in all, `count` of them. */
export function payloadArenaBound(rawBytes: number, count: number): number {
  return rawBytes + count * (PREFIX_BYTES + 7);
}

/**
 * Like `encodeRecordBatchMessage`, but the body lives in one new ArrayBuffer
 * (the arena) and the message is two chunks, header and body. `buffers` are
 * copied into the arena before this returns, so the caller may reuse them at
 * once; compression then runs on the arena's copies and its output replaces
 * them in place.
 *
 * A cached payload used to keep ten to twenty small objects alive (length
 * prefixes, frame pieces, views, the compressor's output buffers) until the
 * final merge; they survived young-generation collections and made each one
 * copy megabytes. Now it keeps the arena and the header.
 *
 * Arena layout while compressing: one slot per non-empty buffer, in body
 * order, each `8 (prefix) + length + padding to 8`, the raw bytes after the
 * prefix. Afterwards the body is compacted towards the front: each buffer's
 * prefix, then its compressed frame (shorter than the raw bytes) or its raw
 * bytes, then zero padding. Worked example, two buffers of 20 and 100 bytes,
 * the second compressing to 30:
 *
 * ```text
 * slots   [0, 8+20+4 = 32)  [32, 32+8+100+4 = 144)
 * body    [0, 32): prefix -1, 20 raw bytes, 4 zeros
 *         [32, 72): prefix 100, 30 bytes of frame, 2 zeros   (moved left from 144 as the slot allows)
 * ```
 * No write ever passes the start of a later slot, so the raw bytes still to
 * be moved are never overwritten. Without a codec, or with a policy that never
 * compresses, the body is laid out at once by `encodeRawPayload`.
 *
 * The arena comes from `allocate` (a recycled buffer, possibly longer than
 * asked, and not necessarily zeroed: every byte of the body is written, the
 * padding included) and is the message's `arena`.
 */
export function encodeRecordBatchPayload(
  rows: number,
  nodes: readonly FieldNodeInfo[],
  buffers: readonly Uint8Array[],
  codec: Codec | null,
  advisor?: CompressionPolicy,
  allocate: Allocate = allocateNew,
): Promise<EncodedMessage> {
  if (codec === null || advisor?.neverCompresses === true) {
    // encodeRawPayload writes the header into the arena, and leaves its gaps and the padding as they are
    return Promise.resolve(encodeRawPayload(rows, nodes, buffers, codec, (bytes) => allocate(bytes).fill(0, 0, bytes)));
  }
  const slots: number[] = [];
  let arenaBytes = 0;
  for (const b of buffers) {
    slots.push(arenaBytes);
    if (b.byteLength > 0) arenaBytes += PREFIX_BYTES + b.byteLength + padding8(b.byteLength);
  }
  const arena = allocate(arenaBytes);
  buffers.forEach((b, i) => {
    if (b.byteLength > 0) arena.set(b, slots[i]! + PREFIX_BYTES); // an empty buffer has no slot (it may sit past the end)
  });
  return compressArena(rows, nodes, buffers.map((b) => b.byteLength), slots, arena, codec, advisor);
}

/** Bytes of the message `encodeRawPayload` makes of these body buffers. */
export function rawPayloadBytes(nodes: readonly FieldNodeInfo[], buffers: readonly Uint8Array[], codec: Codec | null): number {
  const prefix = codec === null ? 0 : PREFIX_BYTES;
  let bytes = recordBatchHeaderBytes(nodes, buffers.length, codec !== null);
  for (const b of buffers) if (b.byteLength > 0) bytes += prefix + b.byteLength + padding8(prefix + b.byteLength);
  return bytes;
}

/**
 * `encodeRecordBatchPayload` when nothing is compressed, done at once: the
 * header and the body buffers copied into one array (`into`: zeroed, exactly
 * rawPayloadBytes long, such as a slab range; or got from an `Allocate`, then
 * possibly longer, and the message's `arena`), each buffer after
 * the -1 prefix of a buffer stored raw when the stream is compressed
 * (`codec`), or as it is without one. Tiny payloads (a tight memory limit,
 * thousands of partitions) take this path by the ten thousand: a promise per
 * buffer, or a second allocation for the header, cost more than the copy.
 *
 * ```text
 * codec:    header | [-1 (8 B) | bytes | pad to 8] per non-empty buffer
 * no codec: header | [bytes | pad to 8] per non-empty buffer
 * ```
 */
export function encodeRawPayload(
  rows: number,
  nodes: readonly FieldNodeInfo[],
  buffers: readonly Uint8Array[],
  codec: Codec | null,
  into: Uint8Array | Allocate = allocateNew,
): EncodedMessage {
  const prefix = codec === null ? 0 : PREFIX_BYTES;
  const regions: number[] = [];
  let bodyBytes = 0;
  for (const b of buffers) {
    regions.push(bodyBytes, b.byteLength === 0 ? 0 : prefix + b.byteLength);
    if (b.byteLength > 0) bodyBytes += prefix + b.byteLength + padding8(prefix + b.byteLength);
  }
  const headerBytes = recordBatchHeaderBytes(nodes, buffers.length, codec !== null);
  const arena = typeof into === 'function' ? into(headerBytes + bodyBytes) : null;
  const message = arena === null ? (into as Uint8Array) : arena.subarray(0, headerBytes + bodyBytes);
  writeRecordBatchHeader(message, rows, nodes, regions, codec === null ? null : codec.arrowType, bodyBytes);
  let cursor = headerBytes;
  for (const b of buffers) {
    if (b.byteLength === 0) continue;
    if (prefix > 0) message.fill(0xff, cursor, cursor + PREFIX_BYTES); // int64 -1: LENGTH_NO_COMPRESSED_DATA
    message.set(b, cursor + prefix);
    cursor += prefix + b.byteLength + padding8(prefix + b.byteLength); // the padding is the array's zeros
  }
  if (arena === null) return { chunks: [message], byteLength: message.byteLength };
  return { chunks: [message], byteLength: message.byteLength, heldBytes: arena.byteLength, arena };
}

async function compressArena(
  rows: number,
  nodes: readonly FieldNodeInfo[],
  lengths: readonly number[],
  slots: readonly number[],
  arena: Uint8Array,
  codec: Codec,
  advisor: CompressionPolicy | undefined,
): Promise<EncodedMessage> {
  const outcomes = await Promise.all(
    lengths.map(async (length, position) => {
      if (length === 0) return null;
      for (let wait = advisor?.settled?.(position); wait !== undefined; wait = advisor?.settled?.(position)) await wait;
      if (!(advisor?.shouldCompress(position) ?? true)) return null;
      const raw = arena.subarray(slots[position]! + PREFIX_BYTES, slots[position]! + PREFIX_BYTES + length);
      let pieces: Uint8Array[];
      try {
        pieces = await codec.compress(raw);
      } catch (error) {
        advisor?.abandon?.(position);
        throw error;
      }
      let bytes = 0;
      for (const piece of pieces) bytes += piece.byteLength;
      advisor?.record(position, length, bytes);
      return bytes < length ? pieces : null;
    }),
  );
  const view = new DataView(arena.buffer, arena.byteOffset, arena.byteLength);
  const regions: number[] = [];
  let cursor = 0;
  lengths.forEach((length, position) => {
    if (length === 0) {
      regions.push(cursor, 0);
      return;
    }
    const pieces = outcomes[position];
    let written: number;
    if (pieces === null || pieces === undefined) {
      setInt64(view, cursor, -1); // LENGTH_NO_COMPRESSED_DATA
      const from = slots[position]! + PREFIX_BYTES;
      if (cursor + PREFIX_BYTES !== from) arena.copyWithin(cursor + PREFIX_BYTES, from, from + length);
      written = length;
    } else {
      setInt64(view, cursor, length);
      written = 0;
      for (const piece of pieces) {
        arena.set(piece, cursor + PREFIX_BYTES + written);
        written += piece.byteLength;
      }
    }
    const regionLength = PREFIX_BYTES + written;
    regions.push(cursor, regionLength);
    const end = cursor + regionLength;
    cursor = end + padding8(regionLength);
    arena.fill(0, end, cursor);
  });
  const framed = encodeRecordBatchHeader(rows, nodes, regions, codec.arrowType, cursor);
  return { chunks: [framed, arena.subarray(0, cursor)], byteLength: framed.byteLength + cursor, heldBytes: framed.byteLength + arena.byteLength, arena };
}

/** Writes a little-endian int64 (a safe integer, possibly -1) without BigInt. */
function setInt64(view: DataView, at: number, value: number): void {
  view.setUint32(at, value >>> 0, true);
  view.setInt32(at + 4, Math.floor(value / 4294967296), true);
}

/** `[prefix, frame]` for one body buffer; an empty buffer stays empty (as Arrow C++ and arrow-rs write it). */
async function compressBodyBuffer(buffer: Uint8Array, codec: Codec, advisor: CompressionPolicy | undefined, position: number): Promise<Uint8Array[]> {
  if (buffer.byteLength === 0) return [];
  const prefix = new Uint8Array(PREFIX_BYTES);
  const view = new DataView(prefix.buffer);
  for (let wait = advisor?.settled?.(position); wait !== undefined; wait = advisor?.settled?.(position)) await wait;
  const tryIt = advisor?.shouldCompress(position) ?? true;
  let compressed: Uint8Array[] = [buffer];
  if (tryIt) {
    try {
      compressed = await codec.compress(buffer);
    } catch (error) {
      advisor?.abandon?.(position);
      throw error;
    }
  }
  let compressedBytes = 0;
  for (const piece of compressed) compressedBytes += piece.byteLength;
  if (tryIt) advisor?.record(position, buffer.byteLength, compressedBytes);
  if (compressedBytes < buffer.byteLength) {
    view.setBigInt64(0, BigInt(buffer.byteLength), true);
    return [prefix, ...compressed];
  }
  view.setBigInt64(0, LENGTH_NO_COMPRESSED_DATA, true);
  return [prefix, buffer];
}
