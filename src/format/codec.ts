import { createRequire } from 'node:module';
import { decompressFrame } from 'lz4-napi';
import * as zstd from 'zstd-napi';
import type * as ZstdBinding from 'zstd-napi/binding.js';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { ShuffleError } from '../errors.js';
import { compressLz4Frame, decompressSingleBlock, lz4FrameProblem } from './lz4-frame.js';

/** The body compressions a shuffle output can use; `none` writes uncompressed IPC. */
export type CodecName = 'lz4' | 'zstd' | 'none';
export const CODEC_NAMES: readonly CodecName[] = ['lz4', 'zstd', 'none'];

/**
 * One Arrow IPC body codec. Buffers are compressed one by one, each into a
 * complete standard frame (LZ4 frame format or a Zstandard frame), as the
 * Arrow spec's BodyCompression requires.
 *
 * Both calls may complete asynchronously; the caller must keep `input`
 * unchanged until the returned promise settles (lz4 runs on the libuv pool).
 */
export interface Codec {
  readonly name: Exclude<CodecName, 'none'>;
  /** The value written in the IPC `BodyCompression.codec` field. */
  readonly arrowType: CompressionType;
  /** The compressed frame, possibly as several pieces to be written back to back (saves a copy). */
  compress(input: Uint8Array): Promise<Uint8Array[]>;
  /** `size`: the uncompressed length the buffer's prefix declares (lz4 decodes small frames at once, zstd into a buffer of that size) */
  decompress(input: Uint8Array, size: number): Promise<Uint8Array>;
  /**
   * The same, on the calling thread, when that is the faster way (a small
   * one-block LZ4 frame; any Zstandard frame, as zstd-napi has no async call),
   * else null: then `decompress`. A small batch has dozens of buffers, and a
   * promise for each cost more than decoding them.
   */
  decompressSync(input: Uint8Array, size: number): Uint8Array | null;
  /**
   * Why `input` cannot decompress to `declared` bytes as far as its own headers
   * tell (a frame declaring another size, or too few bytes for that much), or
   * null; checked before anything is decompressed or allocated.
   */
  sizeMismatch(input: Uint8Array, declared: number): string | null;
}

// lz4-napi's sync compressors and frame decoder leak ~1 MB per MB processed (antoniomuso/lz4-napi#678): compression is
// async; small one-block frames are decoded with uncompressSync, which does not leak, and the rest asynchronously.
// Frames are assembled around its block compressor (lz4-frame.ts), which is about twice as fast.
const lz4: Codec = {
  name: 'lz4',
  arrowType: CompressionType.LZ4_FRAME,
  compress: compressLz4Frame,
  decompress: async (input, size) => decompressSingleBlock(input, size) ?? decompressFrame(input),
  decompressSync: decompressSingleBlock,
  // an LZ4 sequence expands at most 255:1; frame headers and block sizes only add to the input
  sizeMismatch: (input, declared) =>
    declared > input.byteLength * 255 + 64 ? `${input.byteLength} bytes of LZ4 cannot hold ${declared} bytes` : lz4FrameProblem(input, declared),
};

// zstd-napi has no async one-shot API; its calls are short for shuffle-sized buffers.
const ZSTD_LEVEL = 1; // spark.io.compression.zstd.level default
const zstdCodec: Codec = {
  name: 'zstd',
  arrowType: CompressionType.ZSTD,
  compress: async (input) => [zstd.compress(input, { compressionLevel: ZSTD_LEVEL })],
  decompress: async (input, size) => decompressZstd(input, size),
  decompressSync: decompressZstd,
  sizeMismatch: (input, declared) => {
    const size = zstdFrameContentSize(input);
    return size !== null && size !== declared ? `the Zstandard frame declares ${size} bytes` : null;
  },
};

/** zstd-napi's low-level binding (a documented module of the package): one decompression context, used one-shot. */
const zstdBinding = createRequire(import.meta.url)('zstd-napi/binding.js') as typeof ZstdBinding;
let zstdContext: ZstdBinding.DCtx | null = null;

/**
 * Decompresses Zstandard frames into a buffer of the `size` bytes the
 * caller was told, in one ZSTD_decompressDCtx call (which starts afresh each
 * time). zstd-napi's `decompress` shares one context and streams a frame that
 * declares no content size: a truncated one returned what it had and left the
 * context mid-frame, and every later call in the process then failed
 * ("Operation not authorized at current processing stage"), good data too.
 */
function decompressZstd(input: Uint8Array, size: number): Uint8Array {
  zstdContext ??= new zstdBinding.DCtx();
  const out = Buffer.allocUnsafeSlow(size); // an ArrayBuffer of its own: 8-aligned, not the shared pool's
  const written = zstdContext.decompress(out, input);
  if (written !== size) throw new Error(`the Zstandard frames hold ${written} bytes, not ${size}`);
  return out;
}

/**
 * The Frame_Content_Size a Zstandard frame header declares, or null when absent.
 * ```text
 * magic 28 B5 2F FD | FHD | [window descriptor] | [dictionary id: 0/1/2/4 B] | [content size: 0/1/2/4/8 B]
 * FHD bits 7-6: size flag, bit 5: single segment, bits 1-0: dictionary id flag
 * ```
 */
function zstdFrameContentSize(input: Uint8Array): number | null {
  if (input.byteLength < 6 || input[0] !== 0x28 || input[1] !== 0xb5 || input[2] !== 0x2f || input[3] !== 0xfd) return null;
  const fhd = input[4]!;
  const sizeFlag = fhd >>> 6;
  const singleSegment = (fhd >>> 5) & 1;
  const dictionaryBytes = [0, 1, 2, 4][fhd & 3]!;
  const sizeBytes = [singleSegment ? 1 : 0, 2, 4, 8][sizeFlag]!;
  if (sizeBytes === 0) return null;
  const at = 5 + (singleSegment ? 0 : 1) + dictionaryBytes;
  if (at + sizeBytes > input.byteLength) return null;
  let size = 0;
  for (let i = sizeBytes - 1; i >= 0; i--) size = size * 256 + input[at + i]!;
  if (sizeBytes === 2) size += 256;
  return size;
}

/** The codec for a name, or null for `none`. */
export function codecByName(name: CodecName): Codec | null {
  switch (name) {
    case 'lz4':
      return lz4;
    case 'zstd':
      return zstdCodec;
    case 'none':
      return null;
    default:
      throw new ShuffleError('CS_INVALID_ARGUMENT', `unknown codec "${String(name)}": expected one of ${CODEC_NAMES.join(', ')}`);
  }
}

/** The codec an IPC message names in its BodyCompression field, or null for a type this library does not know. */
export function knownCodecByArrowType(type: CompressionType): Codec | null {
  if (type === CompressionType.LZ4_FRAME) return lz4;
  if (type === CompressionType.ZSTD) return zstdCodec;
  return null;
}

/** The codec an IPC message names in its BodyCompression field; CS_UNSUPPORTED_CODEC for a type not known. */
export function codecByArrowType(type: CompressionType): Codec {
  const codec = knownCodecByArrowType(type);
  if (codec === null) throw new ShuffleError('CS_UNSUPPORTED_CODEC', `IPC body compression type ${String(type)} is not supported`);
  return codec;
}
