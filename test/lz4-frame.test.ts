import { randomBytes } from 'node:crypto';
import { decompressFrame } from 'lz4-napi';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { compressLz4FrameBytes, xxh32 } from '../src/format/lz4-frame.js';

describe('xxh32 (for the LZ4 frame header checksum)', () => {
  test.each([
    ['', 0x02cc5d05],
    ['a', 0x550d7456],
    ['abc', 0x32d153ff],
  ])('matches the reference vector for %j', (text, expected) => {
    expect(xxh32(new TextEncoder().encode(text), 0)).toBe(expected);
  });

  test('gives the header checksum byte the lz4 tool writes for FLG 0x64, BD 0x40 (0xA7)', () => {
    expect((xxh32(Uint8Array.of(0x64, 0x40), 0) >>> 8) & 0xff).toBe(0xa7);
  });
});

describe('compressLz4Frame writes standard LZ4 frames', () => {
  test('the frame starts with the magic and the header and ends with the end mark', async () => {
    const frame = await compressLz4FrameBytes(new Uint8Array(1000).fill(7));
    expect([...frame.subarray(0, 6)]).toEqual([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40]);
    expect([...frame.subarray(-4)]).toEqual([0, 0, 0, 0]);
    expect(frame.byteLength).toBeLessThan(100);
  });

  test.each([
    [65536, 0x40],
    [65537, 0x50],
    [1 << 20, 0x60],
    [(1 << 20) + 1, 0x70],
  ])('an input of %i bytes declares block size code %i', async (size, bd) => {
    const frame = await compressLz4FrameBytes(new Uint8Array(size));
    expect(frame[5]).toBe(bd);
    expect(frame[6]).toBe((xxh32(Uint8Array.of(0x60, bd), 0) >>> 8) & 0xff);
  });

  test('incompressible blocks are stored with the uncompressed bit', async () => {
    const input = new Uint8Array(randomBytes(4096));
    const frame = await compressLz4FrameBytes(input);
    const size = new DataView(frame.buffer, frame.byteOffset).getUint32(7, true);
    expect(size >>> 31).toBe(1);
    expect(size & 0x7fffffff).toBe(4096);
    expect(new Uint8Array(await decompressFrame(frame))).toEqual(input);
  });

  test('inputs larger than one 4 MiB block become several blocks and decode whole', async () => {
    const input = new Uint8Array(9 * 1024 * 1024 + 5);
    for (let i = 0; i < input.length; i++) input[i] = (i % 251) ^ (i >>> 12);
    const decoded = await decompressFrame(await compressLz4FrameBytes(input));
    expect(Buffer.compare(decoded, input)).toBe(0);
  });

  test('any input round-trips through a standard frame decoder', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 5000 }), fc.nat(3), async (bytes, repeat) => {
        const input = new Uint8Array(bytes.length * (repeat + 1));
        for (let r = 0; r <= repeat; r++) input.set(bytes, r * bytes.length);
        expect(new Uint8Array(await decompressFrame(await compressLz4FrameBytes(input)))).toEqual(input);
      }),
      { numRuns: 200 },
    );
  });
});
