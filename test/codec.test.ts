/**
 * The body codecs (src/format/codec.ts) decode into exactly the size the
 * caller was told, and a damaged buffer fails alone: it leaves nothing behind
 * that breaks the next one.
 */
import { describe, expect, test } from 'vitest';
import { compress } from 'zstd-napi';
import { codecByName } from '../src/format/codec.js';
import { streamedZstdFrame } from './support/zstd-stream.js';

const INPUT = Buffer.from(Uint8Array.from({ length: 100_000 }, (_, i) => (i * 31) % 251));

describe('zstd', () => {
  const codec = codecByName('zstd')!;

  test('a frame with and without a content size, and two frames back to back, decode to their bytes', async () => {
    const framed = compress(INPUT);
    const streamed = await streamedZstdFrame(INPUT);
    expect(Buffer.from(await codec.decompress(framed, INPUT.length))).toEqual(INPUT);
    expect(Buffer.from(codec.decompressSync(streamed, INPUT.length)!)).toEqual(INPUT);
    expect(Buffer.from(codec.decompressSync(Buffer.concat([framed, streamed]), 2 * INPUT.length)!)).toEqual(Buffer.concat([INPUT, INPUT]));
  });

  test('frames holding more or fewer bytes than the size given throw', () => {
    const framed = compress(INPUT);
    expect(() => codec.decompressSync(framed, INPUT.length - 1)).toThrow();
    expect(() => codec.decompressSync(framed, INPUT.length + 1)).toThrow(`the Zstandard frames hold ${INPUT.length} bytes, not ${INPUT.length + 1}`);
  });

  test('a truncated frame without a content size throws, and the next good frame still decodes (it broke every later zstd read of the process)', async () => {
    const streamed = await streamedZstdFrame(INPUT);
    expect(() => codec.decompressSync(streamed.subarray(0, streamed.length >> 1), INPUT.length)).toThrow();
    expect(Buffer.from(codec.decompressSync(compress(INPUT), INPUT.length)!)).toEqual(INPUT);
    expect(Buffer.from(await codec.decompress(streamed, INPUT.length))).toEqual(INPUT);
  });

  test('the output has an ArrayBuffer of its own (8-aligned, not a view into the shared Buffer pool)', () => {
    const small = Buffer.from('a small buffer of a few bytes');
    const out = codecByName('zstd')!.decompressSync(compress(small), small.length)!;
    expect(out.byteOffset).toBe(0);
    expect(out.buffer.byteLength).toBe(small.length);
  });
});
