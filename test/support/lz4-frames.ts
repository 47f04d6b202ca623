/**
 * LZ4 frames built byte by byte from the frame format's specification
 * (https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md):
 *
 * ```text
 * 04 22 4D 18 | FLG | BD | [content size: 8] | HC = (xxh32(FLG BD [size]) >> 8) & 0xFF
 * ```
 */
import { xxh32 } from '../../src/format/lz4-frame.js';

/** The parts, bytes or byte lists, one after another. */
export const concat = (parts: readonly (Uint8Array | readonly number[])[]): Uint8Array => new Uint8Array(Buffer.concat(parts.map((p) => Uint8Array.from(p))));

/** `n` as 4 little-endian bytes. */
export const u32 = (n: number): number[] => [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff];

/** The header checksum byte of a frame descriptor. */
export const hc = (descriptor: readonly number[]): number => (xxh32(Uint8Array.from(descriptor), 0) >>> 8) & 0xff;

/** magic, FLG, BD, [content size], HC */
export function frameHeader(flg: number, bd: number, contentSize?: number): number[] {
  const descriptor = [flg, bd];
  if (contentSize !== undefined) {
    const size = new Uint8Array(8);
    new DataView(size.buffer).setBigUint64(0, BigInt(contentSize), true);
    descriptor.push(...size);
  }
  return [0x04, 0x22, 0x4d, 0x18, ...descriptor, hc(descriptor)];
}
