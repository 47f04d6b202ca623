import { compress as compressBlock, uncompressSync } from 'lz4-napi';

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
export async function compressLz4Frame(input: Uint8Array): Promise<Uint8Array[]> {
  const pending: Promise<Uint8Array>[] = [];
  for (let start = 0; start < input.byteLength; start += MAX_BLOCK) {
    pending.push(compressBlock(input.subarray(start, Math.min(start + MAX_BLOCK, input.byteLength))));
  }
  const compressed = await Promise.all(pending);
  const header = (BLOCK_SIZES.find((b) => input.byteLength <= b.maxBlock) ?? BLOCK_SIZES[3]!).header;
  // one small array holds the frame header, every block size field and the end mark
  const small = new Uint8Array(HEADER_BYTES + 4 * compressed.length + END_MARK_BYTES);
  const view = new DataView(small.buffer);
  small.set(header, 0);
  const pieces: Uint8Array[] = [small.subarray(0, HEADER_BYTES)];
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

/** Frames decoding to at most this many bytes are decoded on the calling thread (decompressSingleBlock). */
export const SYNC_DECODE_MAX_BYTES = 256 * 1024;
const FLG_VERSION_MASK = 0xc2; // version bits 7-6 and the reserved bit 1
const FLG_BLOCK_CHECKSUM = 0x10;
const FLG_CONTENT_SIZE = 0x08;
const FLG_CONTENT_CHECKSUM = 0x04;
const FLG_DICTIONARY_ID = 0x01;
/** lz4-napi's size-prefixed block input: reused, as the decoding is synchronous */
let scratch = new Uint8Array(0);

/**
 * Decodes a frame made of one compressed block, the shape compressLz4Frame
 * (and most LZ4 writers) gives Arrow-sized buffers, on the calling thread,
 * when it decodes to at most SYNC_DECODE_MAX_BYTES: lz4-napi's asynchronous
 * decoder cost the reader 50-90 us of main-thread time per call here (about
 * 1,800 calls per 2 M narrow rows), several times the decoding itself
 * (~1.5 GB/s). lz4-napi's `uncompressSync`, which does not leak, takes the
 * block behind its size as a uint32 LE; the block is copied into a scratch
 * array to get that prefix:
 *
 * ```text
 * frame    04 22 4D 18 | FLG | BD | [content size: 8] | HC | size | block | 00 00 00 00
 * scratch  uint32 LE `size` (the buffer's uncompressed length) | block
 * ```
 * Returns null for any other shape (several blocks, a stored block, block or
 * content checksums, a dictionary, a frame larger than its block): the caller
 * then uses the frame decoder, which also reports malformed frames.
 */
export function decompressSingleBlock(frame: Uint8Array, size: number): Uint8Array | null {
  if (size > SYNC_DECODE_MAX_BYTES || frame.byteLength < HEADER_BYTES + 4 + END_MARK_BYTES) return null;
  if (frame[0] !== MAGIC[0] || frame[1] !== MAGIC[1] || frame[2] !== MAGIC[2] || frame[3] !== MAGIC[3]) return null;
  const flg = frame[4]!;
  if ((flg & FLG_VERSION_MASK) !== 0x40 || (flg & (FLG_BLOCK_CHECKSUM | FLG_CONTENT_CHECKSUM | FLG_DICTIONARY_ID)) !== 0) return null;
  const blockAt = HEADER_BYTES + ((flg & FLG_CONTENT_SIZE) !== 0 ? 8 : 0);
  if (blockAt + 4 > frame.byteLength) return null;
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const blockBytes = view.getUint32(blockAt, true);
  // an LZ4 block of `size` bytes takes at most size + size / 255 + 16: a longer one is damaged, and left to the
  // frame decoder to report (the scratch array, kept between calls, never grows past what a real block needs)
  if ((blockBytes & UNCOMPRESSED_BIT) !== 0 || blockBytes === 0 || blockBytes > size + Math.ceil(size / 255) + 16) return null;
  const endAt = blockAt + 4 + blockBytes;
  if (endAt + END_MARK_BYTES !== frame.byteLength || view.getUint32(endAt, true) !== 0) return null;
  if (scratch.byteLength < 4 + blockBytes) scratch = new Uint8Array(Math.max(4 + blockBytes, 2 * scratch.byteLength, 1024));
  new DataView(scratch.buffer).setUint32(0, size, true);
  scratch.set(frame.subarray(blockAt + 4, endAt), 4);
  return uncompressSync(scratch.subarray(0, 4 + blockBytes));
}

/**
 * What is wrong with `frame` as the LZ4 frame of a buffer of `size` bytes,
 * or null: its shape is checked without decoding it, before either decoder
 * sees it. decompressSingleBlock does not check the header (lz4-napi's frame
 * decoder does, so damage went unnoticed below SYNC_DECODE_MAX_BYTES and was
 * reported above), and lz4-napi's frame decoder takes a frame without its
 * end mark and ignores bytes after it. Arrow C++ refuses an input of less or
 * more than one frame; so does this.
 *
 * ```text
 * magic 04 22 4D 18 | FLG | BD | [content size: 8] | HC | (size | data | [block checksum: 4])* | 00 00 00 00 | [content checksum: 4]
 *   FLG  version 01, reserved bit 1 clear, no dictionary id (bit 0: Arrow's frames use none)
 *   BD   reserved bits clear, block size code 4..7 (64 KiB, 256 KiB, 1 MiB, 4 MiB)
 *   HC   (xxh32(FLG .. content size) >> 8) & 0xFF
 *   each block's data at most the maximum block size; `size` at most blocks × that size
 * ```
 * The checksums themselves are left to the frame decoder (the single-block
 * path takes no frame with any).
 */
export function lz4FrameProblem(frame: Uint8Array, size: number): string | null {
  if (frame.byteLength < HEADER_BYTES) return `an LZ4 frame of ${frame.byteLength} bytes is shorter than its header`;
  if (frame[0] !== MAGIC[0] || frame[1] !== MAGIC[1] || frame[2] !== MAGIC[2] || frame[3] !== MAGIC[3]) return 'the LZ4 frame does not start with its magic number';
  const flg = frame[4]!;
  const bd = frame[5]!;
  if ((flg & FLG_VERSION_MASK) !== 0x40) return `the LZ4 frame's FLG byte 0x${flg.toString(16)} names another version or sets its reserved bit`;
  if ((flg & FLG_DICTIONARY_ID) !== 0) return 'the LZ4 frame needs a dictionary (Arrow uses none)';
  const code = bd >> 4;
  if ((bd & 0x8f) !== 0 || code < 4) return `the LZ4 frame's BD byte 0x${bd.toString(16)} names no block size`;
  const maxBlock = 1 << (8 + 2 * code);
  const hasContentSize = (flg & FLG_CONTENT_SIZE) !== 0;
  const descriptorEnd = 6 + (hasContentSize ? 8 : 0);
  if (frame.byteLength < descriptorEnd + 1) return `an LZ4 frame of ${frame.byteLength} bytes is shorter than its header`;
  if (frame[descriptorEnd] !== headerChecksum(frame, descriptorEnd)) return "the LZ4 frame's header checksum does not match its header";
  if (hasContentSize) {
    const declared = new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getBigUint64(6, true);
    if (declared !== BigInt(size)) return `the LZ4 frame declares ${declared} bytes of content`;
  }
  const blockChecksum = (flg & FLG_BLOCK_CHECKSUM) !== 0 ? 4 : 0;
  let at = descriptorEnd + 1;
  let blocks = 0;
  for (;;) {
    if (at + 4 > frame.byteLength) return 'the LZ4 frame ends before its end mark';
    const field = (frame[at]! | (frame[at + 1]! << 8) | (frame[at + 2]! << 16) | (frame[at + 3]! << 24)) >>> 0;
    at += 4;
    if (field === 0) break;
    const bytes = field & ~UNCOMPRESSED_BIT;
    if (bytes > maxBlock) return `an LZ4 block of ${bytes} bytes is larger than its frame's maximum block size, ${maxBlock}`;
    at += bytes + blockChecksum;
    blocks++;
  }
  const end = at + ((flg & FLG_CONTENT_CHECKSUM) !== 0 ? 4 : 0);
  if (end > frame.byteLength) return 'the LZ4 frame ends before its content checksum';
  if (end < frame.byteLength) return `${frame.byteLength - end} bytes follow the LZ4 frame's end`;
  if (size > blocks * maxBlock) return `${blocks} LZ4 blocks of at most ${maxBlock} bytes cannot hold ${size} bytes`;
  return null;
}

/** The header checksum byte of the descriptor frame[4, end): remembered for descriptors without a content size (FLG, BD). */
function headerChecksum(frame: Uint8Array, end: number): number {
  const key = end === 6 ? (frame[4]! << 8) | frame[5]! : -1;
  let checksum = key >= 0 ? shortDescriptorChecksums.get(key) : undefined;
  if (checksum === undefined) {
    checksum = (xxh32(frame.subarray(4, end), 0) >>> 8) & 0xff;
    if (key >= 0) shortDescriptorChecksums.set(key, checksum);
  }
  return checksum;
}

const shortDescriptorChecksums = new Map<number, number>();

/** The frame as one array (for tests and one-off use). */
export async function compressLz4FrameBytes(input: Uint8Array): Promise<Uint8Array> {
  return Buffer.concat(await compressLz4Frame(input));
}

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

/** xxHash32 for short inputs (< 16 bytes): all the frame header checksum needs. */
export function xxh32(data: Uint8Array, seed: number): number {
  if (data.byteLength >= 16) throw new RangeError('xxh32 here only hashes inputs shorter than 16 bytes');
  let h = (seed + PRIME5 + data.byteLength) | 0;
  let i = 0;
  for (; i + 4 <= data.byteLength; i += 4) {
    const k = data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24);
    h = Math.imul(rotl((h + Math.imul(k, PRIME3)) | 0, 17), PRIME4);
  }
  for (; i < data.byteLength; i++) h = Math.imul(rotl((h + Math.imul(data[i]!, PRIME5)) | 0, 11), PRIME1);
  h ^= h >>> 15;
  h = Math.imul(h, PRIME2);
  h ^= h >>> 13;
  h = Math.imul(h, PRIME3);
  h ^= h >>> 16;
  return h >>> 0;
}
