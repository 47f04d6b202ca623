import { BodyCompression, BufferRegion, DictionaryBatch as DictionaryBatchHeader, FieldNode, Message, RecordBatch as RecordBatchHeader, } from 'apache-arrow/ipc/metadata/message';
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
export const END_OF_STREAM = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
/** Prefix value of a compressed-body buffer that was stored uncompressed. */
export const LENGTH_NO_COMPRESSED_DATA = -1n;
const PREFIX_BYTES = 8;
/** Bytes needed to pad `length` up to the next multiple of 8. */
export function padding8(length) {
    return (8 - (length & 7)) & 7;
}
/** Frames a flatbuffer `Message` as an encapsulated IPC message header (without its body). */
function frameMetadata(metadata) {
    const metadataSize = metadata.byteLength + padding8(metadata.byteLength);
    const framed = new Uint8Array(8 + metadataSize);
    const view = new DataView(framed.buffer);
    view.setUint32(0, CONTINUATION_MARKER, true);
    view.setInt32(4, metadataSize, true);
    framed.set(metadata, 8);
    return framed;
}
/** The schema message that opens every partition's IPC stream. */
export function encodeSchemaMessage(schema) {
    return frameMetadata(Message.encode(Message.from(schema)));
}
const ZEROS = new Uint8Array(8);
/** Upper bound of a record-batch message's header and length prefixes beyond its body buffers. */
export const MESSAGE_OVERHEAD_BYTES = 4096;
/** Most bytes the encoded form of `raw` body bytes can take next to them: frames, prefixes, header. */
export function compressionBound(raw) {
    return raw + Math.ceil(raw / 128) + MESSAGE_OVERHEAD_BYTES;
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
export async function encodeRecordBatchMessage(rows, nodes, buffers, codec, advisor, dictionary) {
    const bodyParts = codec === null
        ? buffers.map((b) => [b])
        : await Promise.all(buffers.map((b, position) => compressBodyBuffer(b, codec, advisor, position)));
    const regions = [];
    const body = [];
    let offset = 0;
    for (const parts of bodyParts) {
        let length = 0;
        for (const part of parts) {
            if (part.byteLength > 0)
                body.push(part);
            length += part.byteLength;
        }
        regions.push(new BufferRegion(offset, length));
        const pad = padding8(length);
        if (pad > 0)
            body.push(ZEROS.subarray(0, pad));
        offset += length + pad;
    }
    const batch = new RecordBatchHeader(rows, nodes.map((n) => new FieldNode(n.length, n.nullCount)), regions, codec === null ? null : new BodyCompression(codec.arrowType));
    const header = dictionary === undefined ? batch : new DictionaryBatchHeader(batch, dictionary.id, dictionary.isDelta);
    const framed = frameMetadata(Message.encode(Message.from(header, offset)));
    return { chunks: [framed, ...body], byteLength: framed.byteLength + offset };
}
/** `[prefix, frame]` for one body buffer; an empty buffer stays empty (as Arrow C++ and arrow-rs write it). */
async function compressBodyBuffer(buffer, codec, advisor, position) {
    if (buffer.byteLength === 0)
        return [];
    const prefix = new Uint8Array(PREFIX_BYTES);
    const view = new DataView(prefix.buffer);
    const tryIt = advisor?.shouldCompress(position) ?? true;
    const compressed = tryIt ? await codec.compress(buffer) : [buffer];
    let compressedBytes = 0;
    for (const piece of compressed)
        compressedBytes += piece.byteLength;
    if (tryIt)
        advisor?.record(position, buffer.byteLength, compressedBytes);
    if (compressedBytes < buffer.byteLength) {
        view.setBigInt64(0, BigInt(buffer.byteLength), true);
        return [prefix, ...compressed];
    }
    view.setBigInt64(0, LENGTH_NO_COMPRESSED_DATA, true);
    return [prefix, buffer];
}
