import fc from 'fast-check';
import { expect, test } from 'vitest';
import { appendRows } from '../src/writer/append-column.js';
import { ColumnBuffer } from '../src/writer/column-buffer.js';
import type { ColumnLayout } from '../src/writer/column-layout.js';
import type { SourceColumn } from '../src/writer/source-column.js';
import { countZeroBits, countZeroBitsAt, gatherBits } from '../src/writer/split-bits.js';
import { splitBinary } from '../src/writer/split-binary.js';
import { splitRemappedIndices } from '../src/writer/split-dictionary.js';
import { isContiguous, splitFixedWidth } from '../src/writer/split-fixed-width.js';
import { splitView } from '../src/writer/split-view.js';
import { pmod } from '../src/writer/murmur3.js';
import { pmodInto } from '../src/writer/partitioner.js';
import { Rng } from './support/random.js';

/**
 * The split kernels against one-line references, on the edges the fast paths
 * must get right: values ending at the last byte of the source buffer, a
 * destination filled to its last byte, unaligned views, long values, int64
 * offsets, bit positions that are not byte-aligned.
 */

function binarySource(values: Uint8Array[], offsetWidth: 4 | 8, byteOffset: number): SourceColumn {
  const total = values.reduce((s, v) => s + v.byteLength, 0);
  // the data sits at the very end of its ArrayBuffer, starting at an odd offset
  const data = new Uint8Array(new ArrayBuffer(byteOffset + total), byteOffset, total);
  const stride = offsetWidth === 8 ? 2 : 1;
  const offsets = new Int32Array((values.length + 1) * stride);
  let pos = 0;
  values.forEach((v, i) => {
    data.set(v, pos);
    pos += v.byteLength;
    offsets[(i + 1) * stride] = pos;
  });
  return {
    layout: { kind: 'binary', offsetWidth },
    length: values.length,
    validity: null,
    bitOffset: 0,
    bytes: data,
    words16: null,
    words32: null,
    offsets,
    children: [],
    dictionary: null,
    variadic: [],
    offsetStride: stride,
  };
}

/** A fixed-width source over `bytes`, with word views where they are aligned (as prepareSourceColumn makes them). */
function fixedWidthSource(bytes: Uint8Array, width: number): SourceColumn {
  const aligned = (k: number) => bytes.byteOffset % k === 0;
  return {
    layout: { kind: 'fixed-width', byteWidth: width },
    length: bytes.byteLength / width,
    validity: null,
    bitOffset: 0,
    bytes,
    words16: aligned(2) ? new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 1) : null,
    words32: aligned(4) ? new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2) : null,
    offsets: null,
    offsetStride: 1,
    children: [],
    dictionary: null,
    variadic: [],
  };
}

function readBinary(buffer: ColumnBuffer, rows: number, stride: 1 | 2): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i < rows; i++) out.push(buffer.data.slice(buffer.values32[i * stride]!, buffer.values32[(i + 1) * stride]!));
  return out;
}

test('splitBinary: values of every length land in order, whatever the source and destination slack', () => {
  fc.assert(
    fc.property(fc.integer(), fc.constantFrom<4 | 8>(4, 8), fc.integer({ min: 0, max: 7 }), fc.integer({ min: 0, max: 8 }), (seed, width, byteOffset, slack) => {
      const rng = new Rng(seed);
      const n = rng.int(1, 60);
      const values = Array.from({ length: n }, () => Uint8Array.from({ length: rng.int(0, rng.int(0, 1) === 0 ? 9 : 300) }, () => rng.int(0, 255)));
      const src = binarySource(values, width, byteOffset);
      const stride = width === 8 ? 2 : 1;
      // two appends: rows picked at random (the last source row always among them), then the rest
      const picked = Array.from({ length: n }, (_, i) => i).filter((i) => i === n - 1 || rng.int(0, 1) === 0);
      const rest = Array.from({ length: n }, (_, i) => i).filter((i) => !picked.includes(i));
      const rowIds = Uint32Array.from([...picked, ...rest]);
      const expected = [...rowIds].map((r) => values[r]!);
      const bytes = expected.reduce((s, v) => s + v.byteLength, 0);
      const layout: ColumnLayout = { kind: 'binary', offsetWidth: width };
      const dst = new ColumnBuffer(layout);
      dst.resize(n, 0, bytes + slack);
      splitBinary(src, rowIds, 0, picked.length, dst, 0);
      splitBinary(src, rowIds, picked.length, n, dst, picked.length);
      expect(dst.dataLength).toBe(bytes);
      expect(readBinary(dst, n, stride)).toEqual(expected);
      if (stride === 2) for (let i = 0; i <= n; i++) expect(dst.values32[i * 2 + 1]).toBe(0);
    }),
    { numRuns: 150 },
  );
});

test('splitBinary grows a destination too small for the rows (a caller that did not size it)', () => {
  const values = Array.from({ length: 20 }, (_, i) => new Uint8Array(i * 3).fill(i));
  const src = binarySource(values, 4, 1);
  const dst = new ColumnBuffer({ kind: 'binary', offsetWidth: 4 });
  dst.resize(20, 0, 5);
  splitBinary(src, Uint32Array.from({ length: 20 }, (_, i) => 19 - i), 0, 20, dst, 0);
  expect(readBinary(dst, 20, 1)).toEqual([...values].reverse());
});

test('gatherBits: any source offset, any destination bit, bits around the written range kept', () => {
  fc.assert(
    fc.property(fc.integer(), (seed) => {
      const rng = new Rng(seed);
      const srcBits = rng.int(1, 200);
      const srcOffset = rng.int(0, 20);
      const src = Uint8Array.from({ length: (srcOffset + srcBits + 7) >>> 3 }, () => rng.int(0, 255));
      const count = rng.int(0, srcBits);
      const rowIds = Uint32Array.from({ length: count }, () => rng.int(0, srcBits - 1));
      const dstBit = rng.int(0, 40);
      const dst = Uint8Array.from({ length: ((dstBit + count + 7) >>> 3) + 2 }, () => rng.int(0, 255));
      const bit = (a: Uint8Array, i: number) => (a[i >>> 3]! >>> (i & 7)) & 1;
      const expected = Array.from({ length: dst.byteLength * 8 }, (_, i) => (i >= dstBit && i < dstBit + count ? bit(src, srcOffset + rowIds[i - dstBit]!) : bit(dst, i)));
      gatherBits(src, srcOffset, rowIds, 0, count, dst, dstBit);
      expect(Array.from({ length: dst.byteLength * 8 }, (_, i) => bit(dst, i))).toEqual(expected);
    }),
    { numRuns: 500 },
  );
});

test('splitFixedWidth: every width, aligned and unaligned sources', () => {
  for (const width of [1, 2, 3, 4, 8, 12, 16, 32]) {
    for (const byteOffset of [0, 1, 2, 4]) {
      const rng = new Rng(width * 31 + byteOffset);
      const n = 50;
      const bytes = new Uint8Array(new ArrayBuffer(byteOffset + n * width), byteOffset, n * width).map(() => rng.int(0, 255));
      const src = fixedWidthSource(bytes, width);
      const rowIds = Uint32Array.from({ length: n }, () => rng.int(0, n - 1));
      const dst = new ColumnBuffer({ kind: 'fixed-width', byteWidth: width });
      dst.resize(n + 3, 0, 0);
      splitFixedWidth(src, width, rowIds, 0, 20, dst, 3);
      splitFixedWidth(src, width, rowIds, 20, n, dst, 23);
      for (let j = 0; j < n; j++) {
        expect([...dst.values.subarray((3 + j) * width, (4 + j) * width)]).toEqual([...bytes.subarray(rowIds[j]! * width, (rowIds[j]! + 1) * width)]);
      }
    }
  }
});

test('pmodInto equals pmod for every hash, including the extremes, for small and huge partition counts', () => {
  const extremes = [0, 1, -1, 2147483647, -2147483648, -2147483647, 199, 200, -199, -200, -201];
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 2147483647 }), fc.array(fc.integer({ min: -2147483648, max: 2147483647 }), { maxLength: 200 }), (n, random) => {
      const multiples = [1, 2, 3, 1000].flatMap((k) => [k * n, -k * n, k * n - 1, -k * n + 1]).filter((h) => h >= -2147483648 && h <= 2147483647);
      const hashes = Int32Array.from([...extremes, ...multiples, ...random]);
      const ids = new Uint32Array(hashes.length);
      pmodInto(hashes, hashes.length, n, ids);
      expect([...ids]).toEqual([...hashes].map((h) => pmod(h, n)));
    }),
    { numRuns: 2000 },
  );
});

test('appendRows: every layout, onto a buffer already holding rows at an odd bit position', () => {
  const layouts: ColumnLayout[] = [
    { kind: 'fixed-width', byteWidth: 1 },
    { kind: 'fixed-width', byteWidth: 8 },
    { kind: 'fixed-width', byteWidth: 3 },
    { kind: 'bool' },
    { kind: 'binary', offsetWidth: 4 },
    { kind: 'binary', offsetWidth: 8 },
  ];
  const identity = Uint32Array.from({ length: 64 }, (_, i) => i);
  for (const layout of layouts) {
    for (const nulls of [false, true]) {
      const rng = new Rng(layouts.indexOf(layout) * 2 + (nulls ? 1 : 0));
      // reference rows: [valid, bytes]
      const make = (n: number) => Array.from({ length: n }, () => ({ valid: !nulls || rng.int(0, 3) > 0, bytes: Uint8Array.from({ length: layout.kind === 'binary' ? rng.int(0, 12) : layout.kind === 'bool' ? 1 : (layout as { byteWidth: number }).byteWidth }, () => (layout.kind === 'bool' ? rng.int(0, 1) : rng.int(0, 255))) }));
      const fill = (rows: ReturnType<typeof make>) => {
        const b = new ColumnBuffer(layout);
        b.resize(64, 0, 1024);
        if (nulls) b.ensureValidity(64);
        rows.forEach((row, i) => {
          if (!row.valid) b.validity![i >>> 3]! &= ~(1 << (i & 7));
          if (layout.kind === 'fixed-width') b.values.set(row.bytes, i * layout.byteWidth);
          else if (layout.kind === 'bool') b.values[i >>> 3] = (b.values[i >>> 3]! & ~(1 << (i & 7))) | (row.bytes[0]! << (i & 7));
          else if (layout.kind === 'binary') {
            const stride = layout.offsetWidth === 8 ? 2 : 1;
            b.data.set(row.bytes, b.dataLength);
            b.dataLength += row.bytes.byteLength;
            b.values32[(i + 1) * stride] = b.dataLength;
          }
        });
        return b;
      };
      const first = make(13);
      const second = make(30);
      const dst = fill(first);
      appendRows(fill(second).asSource(second.length), second.length, dst, first.length, 64, identity);
      const all = [...first, ...second];
      all.forEach((row, i) => {
        const valid = dst.validity === null || ((dst.validity[i >>> 3]! >>> (i & 7)) & 1) === 1;
        expect(valid, `${layout.kind} row ${i} validity`).toBe(row.valid);
        let bytes: number[];
        if (layout.kind === 'fixed-width') bytes = [...dst.values.subarray(i * layout.byteWidth, (i + 1) * layout.byteWidth)];
        else if (layout.kind === 'bool') bytes = [(dst.values[i >>> 3]! >>> (i & 7)) & 1];
        else {
          const stride = (layout as { offsetWidth: number }).offsetWidth === 8 ? 2 : 1;
          bytes = [...dst.data.subarray(dst.values32[i * stride]!, dst.values32[(i + 1) * stride]!)];
          expect((layout as { offsetWidth: number }).offsetWidth === 8 ? dst.values32[(i + 1) * 2 + 1] : 0).toBe(0);
        }
        expect(bytes, `${layout.kind} row ${i}`).toEqual([...row.bytes]);
      });
    }
  }
});

/**
 * A stretch of adjacent source rows (every partition at P = 1) is one block copy; ids whose first
 * and last are a stretch apart but that are not adjacent in between (a permutation inside it)
 * are still gathered one by one. Both give the reference rows.
 */
test('pmodInto: every multiple of n (the float quotient may fall just below it: 18473 / 49 = 377 gave 376.99999999999994)', () => {
  expect(18473 * (1 / 49)).toBeLessThan(377);
  for (let n = 1; n <= 300; n++) {
    const hashes = Int32Array.from({ length: 2001 }, (_, k) => (k - 1000) * n);
    const ids = new Uint32Array(hashes.length);
    pmodInto(hashes, hashes.length, n, ids);
    expect(ids.every((id) => id === 0), `n = ${n}`).toBe(true);
  }
});

test('countZeroBits counts the zeros among exactly the first `bits` bits, for every count up to 40', () => {
  const rng = new Rng(5);
  const bitmap = Uint8Array.from({ length: 6 }, () => rng.int(0, 255));
  for (let bits = 0; bits <= 40; bits++) {
    let zeros = 0;
    for (let i = 0; i < bits; i++) if (((bitmap[i >> 3]! >> (i & 7)) & 1) === 0) zeros++;
    expect(countZeroBits(bitmap, bits), `${bits} bits`).toBe(zeros);
  }
  // the bit after the counted ones is a zero: a count that took it in would be one too many
  expect(countZeroBits(Uint8Array.of(0xff, 0b1111_1101), 9)).toBe(0);
});

test('countZeroBitsAt counts the zeros among exactly bits [offset, offset + bits), for every offset and count within 48 bits', () => {
  const rng = new Rng(6);
  const bitmap = Uint8Array.from({ length: 6 }, () => rng.int(0, 255));
  const zeroAt = (i: number) => ((bitmap[i >> 3]! >> (i & 7)) & 1) === 0;
  for (let offset = 0; offset <= 48; offset++) {
    for (let bits = 0; offset + bits <= 48; bits++) {
      let zeros = 0;
      for (let i = offset; i < offset + bits; i++) if (zeroAt(i)) zeros++;
      expect(countZeroBitsAt(bitmap, offset, bits), `[${offset}, ${offset + bits})`).toBe(zeros);
    }
  }
});

test('adjacent row ids are copied as a block, lookalikes are gathered, for fixed-width and binary columns', () => {
  fc.assert(
    fc.property(fc.integer(), fc.constantFrom<4 | 8>(4, 8), fc.constantFrom(1, 8, 16), fc.constantFrom('block', 'swapped', 'repeated'), (seed, offsetWidth, width, kind) => {
      const rng = new Rng(seed);
      const n = rng.int(16, 80);
      const first = rng.int(0, 20);
      const ids = Array.from({ length: n }, (_, i) => first + i);
      // first and last stay where a block would put them: two ids strictly inside swapped, or one
      // inside (up to the one before the last) repeating the id before it (ids a dense union's offsets may give)
      if (kind === 'swapped') {
        const a = rng.int(1, n - 3);
        [ids[a], ids[a + 1]] = [ids[a + 1]!, ids[a]!];
      } else if (kind === 'repeated') {
        const a = rng.int(1, n - 2);
        ids[a] = ids[a - 1]!;
      }
      const rowIds = Uint32Array.from([999, ...ids]); // the stretch starts at position 1
      expect(isContiguous(rowIds, 1, n + 1)).toBe(kind === 'block');
      const rows = first + n;
      const values = Array.from({ length: rows }, () => Uint8Array.from({ length: rng.int(0, 30) }, () => rng.int(0, 255)));
      const binary = new ColumnBuffer({ kind: 'binary', offsetWidth });
      binary.resize(n + 2, 0, 0);
      binary.dataLength = 5; // rows already held: two rows of 2 and 3 bytes
      const stride = offsetWidth === 8 ? 2 : 1;
      binary.values32[stride] = 2;
      binary.values32[2 * stride] = 5;
      splitBinary(binarySource(values, offsetWidth, 3), rowIds, 1, n + 1, binary, 2);
      expect(readBinary(binary, n + 2, stride).slice(2)).toEqual(ids.map((r) => values[r]!));
      if (stride === 2) for (let i = 0; i <= n + 2; i++) expect(binary.values32[i * 2 + 1]).toBe(0);

      const bytes = Uint8Array.from({ length: rows * width }, () => rng.int(0, 255));
      const src = fixedWidthSource(bytes, width);
      const fixed = new ColumnBuffer({ kind: 'fixed-width', byteWidth: width });
      fixed.resize(n + 2, 0, 0);
      splitFixedWidth(src, width, rowIds, 1, n + 1, fixed, 2);
      ids.forEach((r, j) => expect([...fixed.values.subarray((2 + j) * width, (3 + j) * width)]).toEqual([...bytes.subarray(r * width, (r + 1) * width)]));
    }),
    { numRuns: 300 },
  );
});

test('isContiguous: the id before the last repeated (first and last where a block has them) is no block', () => {
  const ids = Uint32Array.from({ length: 16 }, (_, i) => i);
  expect(isContiguous(ids, 0, 16)).toBe(true);
  ids[14] = 13;
  expect(isContiguous(ids, 0, 16)).toBe(false);
});

test('splitRemappedIndices: every index width and sign, up to the largest index the type holds, through the remap', () => {
  const cases: [1 | 2 | 4 | 8, boolean, number][] = [
    [1, false, 255],
    [1, true, 127],
    [2, false, 65535],
    [2, true, 32767],
    [4, false, 70000],
    [4, true, 70000],
    [8, false, 70000],
    [8, true, 70000],
  ];
  for (const [width, signed, max] of cases) {
    // remap i -> max - i: every value fits the type, and a wrong source index gives another value
    const remap = Int32Array.from({ length: max + 1 }, (_, i) => max - i);
    const indices = [0, 1, 127, 128, 255, 256, 32767, 32768, 65535, max - 1, max].filter((i) => i <= max);
    const bytes = new Uint8Array(indices.length * width);
    const view = new DataView(bytes.buffer);
    indices.forEach((index, r) => (width === 8 ? view.setBigUint64(r * 8, BigInt(index), true) : width === 4 ? view.setUint32(r * 4, index, true) : width === 2 ? view.setUint16(r * 2, index, true) : view.setUint8(r, index)));
    const rowIds = Uint32Array.from(indices.keys()).reverse();
    const dst = new ColumnBuffer({ kind: 'dictionary', id: 0, indexWidth: width, indexSigned: signed, values: { kind: 'binary', offsetWidth: 4 }, valueType: null as never });
    dst.resize(indices.length + 1, 0, 0);
    splitRemappedIndices(fixedWidthSource(bytes, width), width, signed, remap, rowIds, 0, rowIds.length, dst, 1);
    const out = new DataView(dst.values.buffer, dst.values.byteOffset);
    const read = (row: number) => (width === 8 ? Number(out.getBigUint64(row * 8, true)) : width === 4 ? out.getUint32(row * 4, true) : width === 2 ? out.getUint16(row * 2, true) : out.getUint8(row));
    expect(
      [...rowIds].map((_, j) => read(1 + j)),
      `${signed ? 'int' : 'uint'}${8 * width}`,
    ).toEqual([...rowIds].map((r) => max - indices[r]!));
  }
});

/** A view column of `values` (null: a null row), its long values in one variadic buffer. */
function viewSource(values: (Uint8Array | null)[]): SourceColumn {
  const views = new Uint8Array(values.length * 16);
  const view = new DataView(views.buffer);
  const validity = new Uint8Array(Math.ceil(values.length / 8));
  const long = values.filter((v) => v !== null && v.byteLength > 12) as Uint8Array[];
  const data = new Uint8Array(long.reduce((n, v) => n + v.byteLength, 0));
  let at = 0;
  values.forEach((v, r) => {
    if (v === null) {
      view.setUint32(r * 16, 0xdeadbeef, true); // a null row's view may hold anything
      return;
    }
    validity[r >> 3]! |= 1 << (r & 7);
    view.setInt32(r * 16, v.byteLength, true);
    if (v.byteLength <= 12) views.set(v, r * 16 + 4);
    else {
      views.set(v.subarray(0, 4), r * 16 + 4);
      view.setInt32(r * 16 + 8, 0, true);
      view.setInt32(r * 16 + 12, at, true);
      data.set(v, at);
      at += v.byteLength;
    }
  });
  return { layout: { kind: 'view' }, length: values.length, validity, bitOffset: 0, bytes: views, words16: null, words32: null, offsets: null, offsetStride: 1, children: [], dictionary: null, variadic: [data] };
}

/** The values a view buffer holds in rows [0, rows), null for an all-zero view (a null row's). */
function readViews(dst: ColumnBuffer, rows: number): (Uint8Array | null)[] {
  const words = dst.values32;
  return Array.from({ length: rows }, (_, r) => {
    const [length, w1, w2, w3] = [words[4 * r]!, words[4 * r + 1]!, words[4 * r + 2]!, words[4 * r + 3]!];
    if (length === 0 && w1 === 0 && w2 === 0 && w3 === 0) return null;
    if (length <= 12) return dst.values.slice(16 * r + 4, 16 * r + 4 + length);
    expect(w2).toBe(0); // the one variadic buffer
    return dst.data.slice(w3, w3 + length);
  });
}

test('splitView: a null row gets an all-zero view, also over a reused buffer holding other views', () => {
  const values = [new Uint8Array(20).fill(1), null, Uint8Array.of(2, 2), null, new Uint8Array(13).fill(3), null];
  const dst = new ColumnBuffer({ kind: 'view' });
  dst.resize(values.length, 0, 64);
  dst.values.fill(0x5a); // what earlier rows left in a recycled buffer
  splitView(viewSource(values), Uint32Array.from(values.keys()), 0, values.length, dst, 0);
  expect(readViews(dst, values.length)).toEqual(values.map((v) => (v === null ? null : new Uint8Array(v))));
  for (const r of [1, 3, 5]) expect([...dst.values.subarray(16 * r, 16 * r + 16)]).toEqual(new Array(16).fill(0));
});

test('splitView grows a destination whose data is too small for the long values (a caller that did not size it)', () => {
  const values = Array.from({ length: 20 }, (_, i) => new Uint8Array(13 + i * 3).fill(i));
  const dst = new ColumnBuffer({ kind: 'view' });
  dst.resize(20, 0, 5);
  splitView(viewSource(values), Uint32Array.from({ length: 20 }, (_, i) => 19 - i), 0, 20, dst, 0);
  expect(readViews(dst, 20)).toEqual([...values].reverse());
});
