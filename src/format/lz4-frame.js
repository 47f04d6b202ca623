import { compress as compressBlock } from 'lz4-napi';
/**
 * Builds standard LZ4 frames (the format Arrow's LZ4_FRAME codec requires)
 * around lz4-napi's block compressor, which runs about twice as fast as its
 * frame compressor on the same input (both async, on the libuv pool).
 *
 * ```text
 * frame  := magic 04 22 4D 18 | FLG 0x60 | BD | HC | block* | end mark 00 00 00 00
 *           FLG 0x60: version 01, independent blocks, no block/content checksums, no content size
 *           BD: the smallest maximum block size that holds the input (0x40 64 KiB, 0x50 256 KiB,
 *               0x60 1 MiB, 0x70 4 MiB; larger inputs are cut into 4 MiB blocks). Decoders
 *               allocate a buffer of this size per frame, so small buffers get small blocks.
 *           HC: (xxh32(FLG BD, seed 0) >> 8) & 0xFF
 * block  := uint32 LE size | data      high bit of size set: data is stored uncompressed
 * ```
 * lz4-napi's `compress` returns `uint32 LE uncompressedSize | raw LZ4 block`; the
 * size prefix is dropped.
 */
const PRIME1 = 0x9e3779b1;
const PRIME2 = 0x85ebca77;
const PRIME3 = 0xc2b2ae3d;
const PRIME4 = 0x27d4eb2f;
const PRIME5 = 0x165667b1;
const MAGIC = [0x04, 0x22, 0x4d, 0x18];
const FLG = 0x60;
const MAX_BLOCK = 4 * 1024 * 1024;
const UNCOMPRESSED_BIT = 0x80000000;
/** [maximum block size, frame header] for BD codes 4..7 */
const BLOCK_SIZES = [4, 5, 6, 7].map((code) => {
    const bd = code << 4;
    return { maxBlock: 1 << (8 + 2 * code), header: Uint8Array.of(...MAGIC, FLG, bd, (xxh32(Uint8Array.of(FLG, bd), 0) >>> 8) & 0xff) };
});
const HEADER_BYTES = 7;
const END_MARK_BYTES = 4;
/**
 * The LZ4 frame of `input`, as pieces to be written back to back: the frame
 * header, then per block its 4-byte size and its data (a view into the
 * compressor's output, not copied), then the end mark.
 */
export async function compressLz4Frame(input) {
    const pending = [];
    for (let start = 0; start < input.byteLength; start += MAX_BLOCK) {
        pending.push(compressBlock(input.subarray(start, Math.min(start + MAX_BLOCK, input.byteLength))));
    }
    const compressed = await Promise.all(pending);
    const header = (BLOCK_SIZES.find((b) => input.byteLength <= b.maxBlock) ?? BLOCK_SIZES[3]).header;
    // one small array holds the frame header, every block size field and the end mark
    const small = new Uint8Array(HEADER_BYTES + 4 * compressed.length + END_MARK_BYTES);
    const view = new DataView(small.buffer);
    small.set(header, 0);
    const pieces = [small.subarray(0, HEADER_BYTES)];
    compressed.forEach((prefixed, b) => {
        const raw = input.subarray(b * MAX_BLOCK, Math.min((b + 1) * MAX_BLOCK, input.byteLength));
        const block = prefixed.subarray(4); // drop lz4-napi's uint32 size prefix
        const uncompressed = block.byteLength >= raw.byteLength;
        const data = uncompressed ? raw : block;
        const at = HEADER_BYTES + 4 * b;
        view.setUint32(at, uncompressed ? (data.byteLength | UNCOMPRESSED_BIT) >>> 0 : data.byteLength, true);
        pieces.push(small.subarray(at, at + 4), data);
    });
    pieces.push(small.subarray(small.byteLength - END_MARK_BYTES));
    return pieces;
}
/** The frame as one array (for tests and one-off use). */
export async function compressLz4FrameBytes(input) {
    return Buffer.concat(await compressLz4Frame(input));
}
function rotl(x, r) {
    return (x << r) | (x >>> (32 - r));
}
/** xxHash32 for short inputs (< 16 bytes): all the frame header checksum needs. */
export function xxh32(data, seed) {
    if (data.byteLength >= 16)
        throw new RangeError('xxh32 here only hashes inputs shorter than 16 bytes');
    let h = (seed + PRIME5 + data.byteLength) | 0;
    let i = 0;
    for (; i + 4 <= data.byteLength; i += 4) {
        const k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
        h = Math.imul(rotl((h + Math.imul(k, PRIME3)) | 0, 17), PRIME4);
    }
    for (; i < data.byteLength; i++)
        h = Math.imul(rotl((h + Math.imul(data[i], PRIME5)) | 0, 11), PRIME1);
    h ^= h >>> 15;
    h = Math.imul(h, PRIME2);
    h ^= h >>> 13;
    h = Math.imul(h, PRIME3);
    h ^= h >>> 16;
    return h >>> 0;
}
