import { randomBytes } from 'node:crypto';
import { compressFrame, decompressFrame } from 'lz4-napi';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { compressLz4FrameBytes, decompressSingleBlock, SYNC_DECODE_MAX_BYTES, xxh32 } from '../src/format/lz4-frame.js';

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

describe('decompressSingleBlock decodes one-block frames on the calling thread, and declines every other shape', () => {
  /** 1 KiB of text-like bytes repeated: compresses into one block */
  const compressible = (size: number) => Uint8Array.from({ length: size }, (_, i) => 97 + ((i * 7) % 26));

  test('any frame compressLz4Frame makes of up to SYNC_DECODE_MAX_BYTES bytes decodes to its input', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 3000 }), fc.nat(40), async (bytes, repeat) => {
        const input = new Uint8Array(bytes.length * (repeat + 1));
        for (let r = 0; r <= repeat; r++) input.set(bytes, r * bytes.length);
        const frame = await compressLz4FrameBytes(input);
        const decoded = decompressSingleBlock(frame, input.byteLength);
        // a block that did not shrink is stored, and stored blocks are left to the frame decoder
        const stored = (new DataView(frame.buffer, frame.byteOffset).getUint32(7, true) >>> 31) === 1;
        if (stored) expect(decoded).toBeNull();
        else expect(new Uint8Array(decoded!)).toEqual(input);
      }),
      { numRuns: 200 },
    );
  });

  test('declines frames it does not decode itself: over the size limit, stored blocks, several blocks, content checksums', async () => {
    const big = compressible(SYNC_DECODE_MAX_BYTES + 1);
    expect(decompressSingleBlock(await compressLz4FrameBytes(big), big.byteLength)).toBeNull();
    const random = new Uint8Array(randomBytes(4096));
    expect(decompressSingleBlock(await compressLz4FrameBytes(random), random.byteLength)).toBeNull();
    // two blocks: the first frame's block, then the second's, then the end mark
    const [a, b] = [compressible(3000), compressible(5000)];
    const [frameA, frameB] = [await compressLz4FrameBytes(a), await compressLz4FrameBytes(b)];
    const twoBlocks = Buffer.concat([frameA.subarray(0, -4), frameB.subarray(7)]);
    expect(new Uint8Array(await decompressFrame(twoBlocks))).toEqual(new Uint8Array(Buffer.concat([a, b])));
    expect(decompressSingleBlock(twoBlocks, 8000)).toBeNull();
    const small = compressible(4096);
    expect(decompressSingleBlock(await compressFrame(small, { contentChecksum: true }), small.byteLength)).toBeNull();
    // the same frame without the checksum is one block it decodes
    expect(new Uint8Array(decompressSingleBlock(await compressFrame(small), small.byteLength)!)).toEqual(small);
  });

  /** `frame` (one of compressLz4FrameBytes's: header FLG BD HC at bytes 4-6) with its FLG byte set to `flg` and, if given, a content-size field. */
  function withHeader(frame: Uint8Array, flg: number, contentSize?: number): Uint8Array {
    const descriptor = [flg, frame[5]!];
    if (contentSize !== undefined) {
      const size = new Uint8Array(8);
      new DataView(size.buffer).setBigUint64(0, BigInt(contentSize), true);
      descriptor.push(...size);
    }
    const checksum = (xxh32(Uint8Array.from(descriptor), 0) >>> 8) & 0xff;
    return Uint8Array.from([...frame.subarray(0, 4), ...descriptor, checksum, ...frame.subarray(7)]);
  }

  test('a frame with the content-size field (FLG bit 3) is decoded past those 8 bytes', async () => {
    const input = compressible(4096);
    const frame = await compressLz4FrameBytes(input);
    const sized = withHeader(frame, frame[4]! | 0x08, input.byteLength);
    expect(new Uint8Array(await decompressFrame(Buffer.from(sized)))).toEqual(input); // a valid frame for the reference decoder
    expect(new Uint8Array(decompressSingleBlock(sized, input.byteLength)!)).toEqual(input);
  });

  test.each([
    ['version 00', 0x20],
    ['version 10', 0xa0],
    ['the reserved bit 1 set', 0x62],
  ])('a frame with %s in its FLG byte is left to the frame decoder (which refuses it)', async (_, flg) => {
    const input = compressible(4096);
    const frame = withHeader(await compressLz4FrameBytes(input), flg);
    expect(decompressSingleBlock(frame, input.byteLength)).toBeNull();
    await expect(decompressFrame(Buffer.from(frame))).rejects.toThrow();
  });

  test('a frame whose block is damaged throws instead of decoding to other bytes of the declared size', async () => {
    const input = compressible(4096);
    const frame = await compressLz4FrameBytes(input);
    // the first token promises more literals than the block holds
    const damaged = frame.slice();
    damaged[11] = 0xff;
    damaged[12] = 0xff;
    expect(() => decompressSingleBlock(damaged, input.byteLength)).toThrow();
  });

  test('a block longer than any LZ4 block of the declared size is left to the frame decoder', () => {
    // header, a 100,000-byte "block", end mark: a real block of 10 bytes takes at most 10 + 1 + 16
    const frame = new Uint8Array(7 + 4 + 100_000 + 4);
    frame.set([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, (xxh32(Uint8Array.of(0x60, 0x40), 0) >>> 8) & 0xff]);
    new DataView(frame.buffer).setUint32(7, 100_000, true);
    expect(decompressSingleBlock(frame, 10)).toBeNull();
  });

  test('a declared size smaller than what the block decodes to throws', async () => {
    const input = compressible(4096);
    const frame = await compressLz4FrameBytes(input);
    expect(() => decompressSingleBlock(frame, 1000)).toThrow();
  });
});
