/**
 * Claims about the format checks at their exact boundaries, pinned by the
 * thirty-fifth mutation sweep (scratch/mut-y2, the second pass over
 * scratch/mut-y): lz4FrameProblem (the LZ4 frame's structure, checked before
 * either decoder sees it), the frame writer and xxh32 (src/format/lz4-frame.ts),
 * the codecs (src/format/codec.ts) and columnInconsistency
 * (src/format/validate-column.ts).
 *
 * Frames are built by hand from the LZ4 frame format specification:
 * ```text
 * magic 04 22 4D 18 | FLG | BD | [content size: 8, LE] | HC | (size | data | [block checksum: 4])* | 00 00 00 00 | [content checksum: 4]
 *   FLG  bits 7-6 version (01), 5 block independence, 4 block checksum, 3 content size, 2 content checksum, 1 reserved, 0 dictionary id
 *   BD   bit 7 reserved, bits 6-4 block maximum size code (4: 64 KiB, 5: 256 KiB, 6: 1 MiB, 7: 4 MiB), bits 3-0 reserved
 *   HC   (xxh32(FLG .. end of descriptor, seed 0) >> 8) & 0xFF
 *   size uint32 LE; its high bit set: the data is stored uncompressed
 * ```
 * Block data are not decoded by lz4FrameProblem, so most frames here carry
 * placeholder bytes: only their structure is under test.
 */
import { Bool, Data, DenseUnion, Dictionary, Field, FixedSizeList, Int32, LargeUtf8, List, makeData, Null, SparseUnion, Struct, Utf8, Utf8View, vectorFromArray } from 'apache-arrow';
import { compressFrame } from 'lz4-napi';
import { describe, expect, test } from 'vitest';
import { compress as zstdCompress } from 'zstd-napi';
import { codecByName } from '../src/format/codec.js';
import { compressLz4FrameBytes, lz4FrameProblem, xxh32 } from '../src/format/lz4-frame.js';
import { columnInconsistency } from '../src/format/validate-column.js';
import { concat, u32, hc, frameHeader } from './support/lz4-frames.js';

const STORED = 0x80000000;
/** A block field and its data: `bytes` placeholder bytes, compressed (as far as the field says) or stored. */
const block = (bytes: number, stored = false): Uint8Array => concat([u32(stored ? (bytes | STORED) >>> 0 : bytes), new Uint8Array(bytes).fill(0x11)]);
const END = u32(0);

describe('lz4FrameProblem: the frame header, field by field', () => {
  test('an input shorter than the 7-byte header is named as such first, whatever its bytes', () => {
    for (const bytes of [[0x04, 0x22, 0x4d, 0x18, 0x60, 0x40], [0, 0, 0, 0, 0, 0], [0x04, 0x22, 0x4d, 0x18, 0x00, 0x00]]) {
      expect(lz4FrameProblem(Uint8Array.from(bytes), 0)).toBe('an LZ4 frame of 6 bytes is shorter than its header');
    }
  });

  test('each of the four magic bytes is checked', () => {
    const good = concat([frameHeader(0x60, 0x40), block(8), END]);
    expect(lz4FrameProblem(good, 8)).toBeNull();
    for (let at = 0; at < 4; at++) {
      const damaged = good.slice();
      damaged[at] = damaged[at]! ^ 0x10;
      expect(lz4FrameProblem(damaged, 8), `magic byte ${at}`).toBe('the LZ4 frame does not start with its magic number');
    }
  });

  test('FLG: version 01 only, the reserved bit 1 clear, no dictionary id; independence and the flags with fields of their own are taken', () => {
    // each frame carries the fields its flags announce
    const frame = (flg: number): Uint8Array =>
      concat([
        frameHeader(flg, 0x40, (flg & 0x08) !== 0 ? 8 : undefined),
        block(8),
        (flg & 0x10) !== 0 ? [1, 2, 3, 4] : [],
        END,
        (flg & 0x04) !== 0 ? [5, 6, 7, 8] : [],
      ]);
    for (const flg of [0x40, 0x60, 0x70, 0x68, 0x64, 0x7c, 0x5c]) expect(lz4FrameProblem(frame(flg), 8), `FLG 0x${flg.toString(16)}`).toBeNull();
    for (const flg of [0x20, 0x00, 0xa0, 0xe0, 0x62, 0x42]) expect(lz4FrameProblem(frame(flg), 8), `FLG 0x${flg.toString(16)}`).toMatch(/FLG byte .* names another version or sets its reserved bit/);
    expect(lz4FrameProblem(frame(0x61), 8)).toBe('the LZ4 frame needs a dictionary (Arrow uses none)');
  });

  test('BD: block size codes 4..7 only, and every reserved bit (7 and 3-0) clear', () => {
    for (const bd of [0x40, 0x50, 0x60, 0x70]) expect(lz4FrameProblem(concat([frameHeader(0x60, bd), block(8), END]), 8), `BD 0x${bd.toString(16)}`).toBeNull();
    for (const bd of [0x00, 0x10, 0x20, 0x30, 0x41, 0x42, 0x44, 0x48, 0xc0, 0xf0, 0x80]) {
      expect(lz4FrameProblem(concat([frameHeader(0x60, bd), block(8), END]), 8), `BD 0x${bd.toString(16)}`).toMatch(/BD byte .* names no block size/);
    }
  });

  test('HC: the second byte of xxh32 over FLG BD, or FLG BD and the 8-byte content size; any other value is refused', () => {
    // FLG 0x60 BD 0x40 has the HC 0x82 every LZ4 writer puts on such frames
    expect(frameHeader(0x60, 0x40)[6]).toBe(0x82);
    for (const header of [frameHeader(0x60, 0x40), frameHeader(0x68, 0x40, 8)]) {
      const at = header.length - 1;
      for (const delta of [1, 0x80]) {
        const damaged = header.slice();
        damaged[at] = (damaged[at]! + delta) & 0xff;
        expect(lz4FrameProblem(concat([damaged, block(8), END]), 8)).toBe("the LZ4 frame's header checksum does not match its header");
      }
    }
  });

  test('HC is computed per descriptor: frames of one FLG BD with different content sizes, and of one BD with different FLGs, are each taken with their own HC', () => {
    for (const size of [8, 9, 300, 8]) {
      expect(lz4FrameProblem(concat([frameHeader(0x68, 0x40, size), block(8), END]), size), `content size ${size}`).toBeNull();
    }
    for (const flg of [0x60, 0x64, 0x40, 0x44, 0x60]) {
      expect(lz4FrameProblem(concat([frameHeader(flg, 0x40), block(8), END, (flg & 0x04) !== 0 ? [5, 6, 7, 8] : []]), 8), `FLG 0x${flg.toString(16)}`).toBeNull();
    }
    // and the HC of one content size is refused under another
    const header = frameHeader(0x68, 0x40, 9);
    header[14] = frameHeader(0x68, 0x40, 8)[14]!;
    expect(hc([0x68, 0x40, 9, 0, 0, 0, 0, 0, 0, 0])).not.toBe(header[14]);
    expect(lz4FrameProblem(concat([header, block(8), END]), 9)).toBe("the LZ4 frame's header checksum does not match its header");
  });

  test('a content size must equal the buffer\'s size exactly: one more or one less is refused; it is 8 bytes little-endian', () => {
    const frame = (declared: number) => concat([frameHeader(0x68, 0x50, declared), block(8), END]);
    expect(lz4FrameProblem(frame(0x0102), 0x0102)).toBeNull();
    expect(lz4FrameProblem(frame(0x0102), 0x0103)).toBe('the LZ4 frame declares 258 bytes of content');
    expect(lz4FrameProblem(frame(0x0102), 0x0101)).toBe('the LZ4 frame declares 258 bytes of content');
    expect(lz4FrameProblem(frame(0x0103), 0x0102)).toBe('the LZ4 frame declares 259 bytes of content');
  });

  test('a header cut inside its content-size field or before its HC is named as short', () => {
    const header = Uint8Array.from(frameHeader(0x68, 0x40, 8));
    expect(lz4FrameProblem(header.subarray(0, 14), 8)).toBe('an LZ4 frame of 14 bytes is shorter than its header');
    expect(lz4FrameProblem(header.subarray(0, 10), 8)).toBe('an LZ4 frame of 10 bytes is shorter than its header');
  });
});

describe('lz4FrameProblem: blocks, the end mark and what follows', () => {
  test('a block of exactly the maximum block size is taken, one byte more is refused (64 KiB and 256 KiB frames)', () => {
    for (const [bd, max] of [[0x40, 65536], [0x50, 262144]] as const) {
      for (const stored of [false, true]) {
        expect(lz4FrameProblem(concat([frameHeader(0x60, bd), block(max, stored), END]), max), `BD 0x${bd.toString(16)} ${stored}`).toBeNull();
        expect(lz4FrameProblem(concat([frameHeader(0x60, bd), block(max + 1, stored), END]), max)).toBe(`an LZ4 block of ${max + 1} bytes is larger than its frame's maximum block size, ${max}`);
      }
    }
  });

  test('n blocks of a frame hold at most n times its maximum block size: exactly that is taken, one byte more is refused', () => {
    const one = concat([frameHeader(0x60, 0x40), block(10), END]);
    expect(lz4FrameProblem(one, 65536)).toBeNull();
    expect(lz4FrameProblem(one, 65537)).toBe('1 LZ4 blocks of at most 65536 bytes cannot hold 65537 bytes');
    const two = concat([frameHeader(0x60, 0x40), block(10), block(20, true), END]);
    expect(lz4FrameProblem(two, 131072)).toBeNull();
    expect(lz4FrameProblem(two, 131073)).toBe('2 LZ4 blocks of at most 65536 bytes cannot hold 131073 bytes');
    const none = concat([frameHeader(0x60, 0x40), END]);
    expect(lz4FrameProblem(none, 0)).toBeNull();
    expect(lz4FrameProblem(none, 1)).toBe('0 LZ4 blocks of at most 65536 bytes cannot hold 1 bytes');
  });

  test('with the block checksum flag, each block is followed by its 4 checksum bytes (not read as the next block\'s size)', () => {
    expect(lz4FrameProblem(concat([frameHeader(0x70, 0x40), block(8), [0xff, 0xff, 0xff, 0x7f], block(9, true), [1, 2, 3, 4], END]), 17)).toBeNull();
    expect(lz4FrameProblem(concat([frameHeader(0x70, 0x40), block(8), END]), 8)).toBe('the LZ4 frame ends before its end mark');
  });

  test('an end mark cut to 3, 2, 1 or 0 bytes is named as missing', () => {
    const body = concat([frameHeader(0x60, 0x40), block(8)]);
    for (let kept = 0; kept < 4; kept++) {
      expect(lz4FrameProblem(concat([body, new Uint8Array(kept)]), 8), `${kept} bytes`).toBe('the LZ4 frame ends before its end mark');
    }
  });

  test('with the content checksum flag, exactly 4 bytes follow the end mark: 0 to 3 are short, 5 one too many', () => {
    const body = concat([frameHeader(0x64, 0x40), block(8), END]);
    expect(lz4FrameProblem(concat([body, [1, 2, 3, 4]]), 8)).toBeNull();
    for (let kept = 0; kept < 4; kept++) expect(lz4FrameProblem(concat([body, new Uint8Array(kept)]), 8), `${kept} bytes`).toBe('the LZ4 frame ends before its content checksum');
    expect(lz4FrameProblem(concat([body, [1, 2, 3, 4, 5]]), 8)).toBe("1 bytes follow the LZ4 frame's end");
  });

  test('a single byte after the end mark is refused, as are several', () => {
    const frame = concat([frameHeader(0x60, 0x40), block(8), END]);
    expect(lz4FrameProblem(concat([frame, [0]]), 8)).toBe("1 bytes follow the LZ4 frame's end");
    expect(lz4FrameProblem(concat([frame, [0, 0, 0, 0, 0]]), 8)).toBe("5 bytes follow the LZ4 frame's end");
  });
});

describe('checksums a frame carries are the frame decoder\'s to check', () => {
  test('a stored block with its right block checksum decodes; with the checksum one off it is refused', async () => {
    const lz4 = codecByName('lz4')!;
    const data = Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const frame = (delta: number) => concat([frameHeader(0x70, 0x40), u32((10 | STORED) >>> 0), data, u32((xxh32(data, 0) + delta) >>> 0), END]);
    expect(lz4.sizeMismatch(frame(0), 10)).toBeNull();
    expect([...(await lz4.decompress(frame(0), 10))]).toEqual([...data]);
    await expect(lz4.decompress(frame(1), 10)).rejects.toThrow();
  });

  test('a frame with its content checksum decodes; with the checksum damaged it is refused', async () => {
    const lz4 = codecByName('lz4')!;
    const input = Buffer.from(Int32Array.from({ length: 1024 }, (_, i) => i % 100).buffer);
    const frame = new Uint8Array(await compressFrame(input, { contentChecksum: true }));
    expect(frame[4]).toBe(0x64);
    expect(Buffer.from(await lz4.decompress(frame, input.byteLength)).equals(input)).toBe(true);
    const damaged = frame.slice();
    damaged[damaged.byteLength - 1] = damaged[damaged.byteLength - 1]! ^ 0xff;
    await expect(lz4.decompress(damaged, input.byteLength)).rejects.toThrow();
  });
});

describe('xxh32 against xxHash\'s published sanity vectors', () => {
  const PRIME32 = 2654435761;
  /** xxHash's sanity buffer (cli/xsum_sanity_check.c): byteGen = PRIME32; byte i = byteGen >> 56; byteGen *= PRIME64 (mod 2^64) */
  const sanity = ((): Uint8Array => {
    const out = new Uint8Array(16);
    let gen = BigInt(PRIME32);
    for (let i = 0; i < out.length; i++) {
      out[i] = Number(gen >> 56n);
      gen = (gen * 11400714785074694797n) & 0xffffffffffffffffn;
    }
    return out;
  })();

  test.each([
    [0, 0, 0x02cc5d05],
    [0, PRIME32, 0x36b78ae7],
    [1, 0, 0xcf65b03e],
    [1, PRIME32, 0xb4545aa4],
    [4, 0, 0xa9de7ce9],
    [14, 0, 0x1208e7e2],
    [14, PRIME32, 0x6af1d1fe],
    [15, 0, 0x6b859e14],
  ])('the first %i bytes of the sanity buffer with seed %i hash to %i', (length, seed, expected) => {
    expect(xxh32(sanity.subarray(0, length), seed)).toBe(expected);
  });

  test('every length 0..15 matches the content checksum a standard LZ4 writer (lz4-napi) puts on the same bytes; 16 and 17 are refused', async () => {
    for (let length = 0; length <= 15; length++) {
      const input = Buffer.from(sanity.subarray(0, length));
      const frame = await compressFrame(input, { contentChecksum: true });
      expect(xxh32(input, 0), `${length} bytes`).toBe(frame.readUInt32LE(frame.byteLength - 4));
    }
    expect(() => xxh32(new Uint8Array(16), 0)).toThrow(RangeError);
    expect(() => xxh32(new Uint8Array(17), 0)).toThrow(RangeError);
  });
});

describe('the frame writer at its smallest inputs', () => {
  test('an empty input is the 11-byte frame 04 22 4D 18 60 40 82 and the end mark: no block', async () => {
    const frame = Uint8Array.from(await compressLz4FrameBytes(new Uint8Array(0)));
    expect([...frame]).toEqual([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82, 0, 0, 0, 0]);
    expect(lz4FrameProblem(frame, 0)).toBeNull();
  });

  test('a 1-byte input is one stored block (an LZ4 block of it would take 2 bytes): 16 bytes in all', async () => {
    const frame = Uint8Array.from(await compressLz4FrameBytes(Uint8Array.of(0x5a)));
    expect([...frame]).toEqual([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82, 0x01, 0, 0, 0x80, 0x5a, 0, 0, 0, 0]);
  });

  test('a 4 MiB + 1 byte input is two blocks under BD 0x70 whose frame passes its own check', async () => {
    const input = new Uint8Array(4 * 1024 * 1024 + 1).fill(3);
    const frame = Uint8Array.from(await compressLz4FrameBytes(input));
    expect(frame[5]).toBe(0x70);
    expect(lz4FrameProblem(frame, input.byteLength)).toBeNull();
  });
});

describe('codec round trips at 0 and 1 bytes', () => {
  test.each(['lz4', 'zstd'] as const)('%s: an empty and a 1-byte buffer compress, pass the size check, and decode to themselves, at once or not', async (name) => {
    const codec = codecByName(name)!;
    for (const input of [new Uint8Array(0), Uint8Array.of(0xa5)]) {
      const frame = new Uint8Array(Buffer.concat(await codec.compress(input)));
      expect(codec.sizeMismatch(frame, input.byteLength)).toBeNull();
      expect([...(await codec.decompress(frame, input.byteLength))]).toEqual([...input]);
      const sync = codec.decompressSync(frame, input.byteLength);
      if (sync !== null) expect([...sync]).toEqual([...input]);
    }
  });

  test('a Zstandard content size is read only behind the whole magic number and only when all its bytes are there', () => {
    const codec = codecByName('zstd')!;
    const frame = zstdCompress(Buffer.alloc(300, 7));
    expect(frame[4]! & 0xe0).toBe(0x60); // FHD: 2-byte size (value - 256), single segment
    expect(codec.sizeMismatch(frame, 300)).toBeNull();
    expect(codec.sizeMismatch(frame, 301)).toBe('the Zstandard frame declares 300 bytes');
    // cut inside its size field: nothing can be told yet (the decoder reports the truncation)
    expect(codec.sizeMismatch(frame.subarray(0, 6), 301)).toBeNull();
    // the last magic byte wrong: not a Zstandard frame, so no size is read from it
    const other = Uint8Array.from(frame);
    other[3] = 0xfc;
    expect(codec.sizeMismatch(other, 301)).toBeNull();
  });

  test('none is no codec', () => {
    expect(codecByName('none')).toBeNull();
  });

  test('a Zstandard frame of a small input declares its size in one byte (single segment), and a size one off is named', () => {
    const codec = codecByName('zstd')!;
    const frame = zstdCompress(Buffer.from('abc'));
    expect(frame[4]! & 0xe0).toBe(0x20); // FHD: size flag 0, single segment
    expect(codec.sizeMismatch(frame, 3)).toBeNull();
    expect(codec.sizeMismatch(frame, 4)).toBe('the Zstandard frame declares 3 bytes');
    expect(codec.sizeMismatch(frame, 2)).toBe('the Zstandard frame declares 3 bytes');
  });
});

describe('columnInconsistency at each layout\'s exact boundaries', () => {
  /** `rows` int32 values with a validity bitmap of `bitmapBytes` bytes, all set */
  const int32s = (rows: number, bitmapBytes: number): Data => makeData({ type: new Int32(), length: rows, nullCount: 0, nullBitmap: new Uint8Array(bitmapBytes).fill(0xff), data: new Int32Array(rows) });
  const item = new Field('item', new Int32(), true);

  test('a Null column, which has no buffers, is consistent (null, not any other value)', () => {
    expect(columnInconsistency(makeData({ type: new Null(), length: 3 }))).toBeNull();
    const type = new Struct([new Field('n', new Null(), true)]);
    expect(columnInconsistency(makeData({ type, length: 3, nullCount: 0, children: [makeData({ type: new Null(), length: 3 })] }))).toBeNull();
  });

  test('a validity bitmap must hold a bit per row: 9 rows need 2 bytes, 1 is refused; 8 rows take 1', () => {
    expect(columnInconsistency(int32s(8, 1))).toBeNull();
    expect(columnInconsistency(int32s(9, 2))).toBeNull();
    expect(columnInconsistency(int32s(9, 1))).toBe('its validity bitmap holds 8 bits for 9 rows');
  });

  test('a sliced column\'s bitmap must cover its offset and length (rows 8..16 of 16 need 2 bytes)', () => {
    expect(columnInconsistency(int32s(16, 2).slice(8, 8))).toBeNull();
    expect(columnInconsistency(int32s(16, 1).slice(8, 8))).toBe('its validity bitmap holds 8 bits for 16 rows');
  });

  test('Bool values: 9 rows need 2 bytes, 1 is refused', () => {
    const bools = (rows: number, bytes: number) => makeData({ type: new Bool(), length: rows, nullCount: 0, data: new Uint8Array(bytes) });
    expect(columnInconsistency(bools(9, 2))).toBeNull();
    expect(columnInconsistency(bools(9, 1))).toBe('its values hold 8 bits for 9 rows');
  });

  test('fixed-width values one byte short are refused (7 bytes for 2 int32 rows)', () => {
    const column = (bytes: number) => new Data(new Int32(), 0, 2, 0, [undefined, new Uint8Array(bytes), undefined] as never);
    expect(columnInconsistency(column(8))).toBeNull();
    expect(columnInconsistency(column(7))).toBe('its values hold 7 bytes for 2 rows of 4');
  });

  test('a list\'s child is checked at its own offset and length (a child sliced to rows 8..16 needs a 2-byte bitmap)', () => {
    const type = new List(item);
    const column = (bitmapBytes: number) => makeData({ type, length: 1, nullCount: 0, valueOffsets: Int32Array.from([0, 8]), child: int32s(16, bitmapBytes).slice(8, 8) } as never) as Data;
    expect(columnInconsistency(column(2))).toBeNull();
    expect(columnInconsistency(column(1))).toBe('its child: its validity bitmap holds 8 bits for 16 rows');
  });

  test('a fixed-size list of 3 rows of 2 takes a child of exactly 6 rows and refuses 5', () => {
    const type = new FixedSizeList(2, item);
    const column = (childRows: number) => makeData({ type, length: 3, nullCount: 0, child: int32s(childRows, 1) } as never) as Data;
    expect(columnInconsistency(column(6))).toBeNull();
    expect(columnInconsistency(column(5))).toBe('its child has 5 rows for 3 lists of 2');
  });

  test('a struct without one of its children is refused, not a TypeError', () => {
    const type = new Struct([new Field('a', new Int32(), true), new Field('b', new Int32(), true)]);
    const column = new Data(type, 0, 2, 0, [] as never, [int32s(2, 1)]);
    expect(columnInconsistency(column)).toBe('it has no child 1');
  });

  test('a struct\'s child is checked at its own offset and length (sliced to rows 8..16, it needs a 2-byte bitmap)', () => {
    const type = new Struct([new Field('a', new Int32(), true)]);
    const column = (bitmapBytes: number) => makeData({ type, length: 8, nullCount: 0, children: [int32s(16, bitmapBytes).slice(8, 8)] });
    expect(columnInconsistency(column(2))).toBeNull();
    expect(columnInconsistency(column(1))).toBe('its child 0: its validity bitmap holds 8 bits for 16 rows');
  });

  test('dictionary indices one byte short are refused (7 bytes for 2 int32 indices)', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const column = (bytes: number) => new Data(type, 0, 2, 0, [undefined, new Uint8Array(bytes), undefined] as never, [], vectorFromArray(['a', 'b'], new Utf8()));
    expect(columnInconsistency(column(7))).toBe('its indices hold 7 bytes for 2 rows of 4');
  });

  test('dictionary indices: the last row is checked too, and an empty dictionary takes no valid row', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const column = (indices: number[], values: string[]) => makeData({ type, length: indices.length, nullCount: 0, data: Int32Array.from(indices), dictionary: vectorFromArray(values, new Utf8()) });
    expect(columnInconsistency(column([0, 1, 1], ['a', 'b']))).toBeNull();
    expect(columnInconsistency(column([0, 1, 2], ['a', 'b']))).toBe('row 2 points at dictionary value 2 of 2');
    expect(columnInconsistency(column([0], []))).toBe('row 0 points at dictionary value 0 of 0');
  });

  test('binary offsets: ending exactly at the data\'s length is taken; a decrease at the very first row is refused', () => {
    const utf8 = (offsets: number[], bytes: number) => makeData({ type: new Utf8(), length: offsets.length - 1, nullCount: 0, valueOffsets: Int32Array.from(offsets), data: new Uint8Array(bytes) });
    expect(columnInconsistency(utf8([2, 5, 8], 8))).toBeNull();
    expect(columnInconsistency(utf8([2, 5, 9], 8))).toBe('its last offset 9 lies beyond its 8 data bytes');
    expect(columnInconsistency(utf8([5, 3, 6], 8))).toBe('its offsets decrease at row 0');
  });

  test('int64 offsets (LargeUtf8) are held to the same bounds: ending at the data\'s length is taken, one past or decreasing by one is refused', () => {
    const large = (offsets: bigint[], bytes: number) => makeData({ type: new LargeUtf8(), length: offsets.length - 1, nullCount: 0, valueOffsets: BigInt64Array.from(offsets), data: new Uint8Array(bytes) });
    expect(columnInconsistency(large([1n, 4n, 8n], 8))).toBeNull();
    expect(columnInconsistency(large([1n, 4n, 9n], 8))).toBe('its last offset 9 lies beyond its 8 data bytes');
    expect(columnInconsistency(large([1n, 4n, 3n], 8))).toBe('its offsets decrease at row 1');
    expect(columnInconsistency(large([-1n, 4n, 8n], 8))).toBe('its first offset is -1');
  });

  /** A 16-byte view: inline (length <= 12) or length, prefix, buffer index, offset. */
  const viewOf = (length: number, buffer = 0, offset = 0): number[] => {
    const bytes = new Uint8Array(16);
    const view = new DataView(bytes.buffer);
    view.setInt32(0, length, true);
    if (length > 12) {
      view.setInt32(8, buffer, true);
      view.setInt32(12, offset, true);
    }
    return [...bytes];
  };
  const views = (rows: number[][], variadic: Uint8Array[], bytes?: number): Data => {
    const all = Uint8Array.from(rows.flat());
    return new Data(new Utf8View(), 0, rows.length, 0, [undefined, bytes === undefined ? all : all.subarray(0, bytes), undefined] as never, [], undefined, variadic);
  };

  test('views: 12 bytes are inline (no buffer needed), 13 need one; a 13-byte value ending exactly at its buffer\'s end is taken, one byte past is refused', () => {
    expect(columnInconsistency(views([viewOf(12), viewOf(0)], []))).toBeNull();
    expect(columnInconsistency(views([viewOf(13, 0, 0)], []))).toBe("row 0's view points outside its 0 variadic buffers");
    expect(columnInconsistency(views([viewOf(13, 0, 7)], [new Uint8Array(20)]))).toBeNull();
    expect(columnInconsistency(views([viewOf(13, 0, 8)], [new Uint8Array(20)]))).toBe("row 0's view points outside its 1 variadic buffers");
    expect(columnInconsistency(views([viewOf(13, 2, 0)], [new Uint8Array(20), new Uint8Array(20)]))).toBe("row 0's view points outside its 2 variadic buffers");
  });

  test('views: the first and the last row are checked, and views one byte short are refused', () => {
    const good = viewOf(13, 0, 0);
    const bad = viewOf(13, 1, 0);
    const buffers = [new Uint8Array(13)];
    expect(columnInconsistency(views([good, good, good], buffers))).toBeNull();
    expect(columnInconsistency(views([bad, good, good], buffers))).toBe("row 0's view points outside its 1 variadic buffers");
    expect(columnInconsistency(views([good, good, bad], buffers))).toBe("row 2's view points outside its 1 variadic buffers");
    expect(columnInconsistency(views([good, good], buffers, 31))).toBe('its views hold 31 bytes for 2 rows of 16');
  });

  const ab = [new Field('a', new Int32(), true), new Field('b', new Int32(), true)];
  test('union type ids must be declared ones, up to the last row (declared 5 and 7: 0 and 6 are refused)', () => {
    const type = new SparseUnion([5, 7], ab);
    const column = (ids: number[]) => new Data(type, 0, ids.length, 0, [undefined, undefined, undefined, Int8Array.from(ids)] as never, [int32s(ids.length, 1), int32s(ids.length, 1)]);
    expect(columnInconsistency(column([5, 7, 7]))).toBeNull();
    expect(columnInconsistency(column([0, 7, 7]))).toBe('row 0 has type id 0, which the union does not declare');
    expect(columnInconsistency(column([5, 7, 6]))).toBe('row 2 has type id 6, which the union does not declare');
  });

  test('a sparse union needs every child as long as itself, the last one too, and checks the last child\'s own buffers', () => {
    const type = new SparseUnion([0, 1], ab);
    const column = (children: Data[]) => new Data(type, 0, 2, 0, [undefined, undefined, undefined, Int8Array.from([0, 1])] as never, children);
    expect(columnInconsistency(column([int32s(2, 1), int32s(2, 1)]))).toBeNull();
    expect(columnInconsistency(column([int32s(2, 1), int32s(1, 1)]))).toBe('its child 1 has 1 rows for 2');
    const shortBitmap = new Data(new Int32(), 0, 9, 0, [undefined, new Int32Array(9), new Uint8Array(1)] as never);
    expect(columnInconsistency(column([int32s(9, 2), shortBitmap]))).toBe('its child 1: its validity bitmap holds 8 bits for 9 rows');
  });

  test('a dense union\'s offsets index the child each row\'s type id names: the child\'s length is one past its end, at the last row too', () => {
    const type = new DenseUnion([0, 5], ab);
    const children = () => [int32s(1, 1), int32s(2, 1)];
    const column = (ids: number[], offsets: number[]) => new Data(type, 0, ids.length, 0, [Int32Array.from(offsets), undefined, undefined, Int8Array.from(ids)] as never, children());
    expect(columnInconsistency(column([0, 5, 5], [0, 0, 1]))).toBeNull();
    expect(columnInconsistency(column([0, 5, 5], [0, 0, 2]))).toBe('row 2 points at row 2 of a child with 2');
    expect(columnInconsistency(column([5, 0], [1, 1]))).toBe('row 1 points at row 1 of a child with 1');
  });
});
