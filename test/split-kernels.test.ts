import fc from 'fast-check';
import { expect, test } from 'vitest';
import { appendRows } from '../src/writer/append-column.js';
import { ColumnBuffer } from '../src/writer/column-buffer.js';
import type { ColumnLayout } from '../src/writer/column-layout.js';
import type { SourceColumn } from '../src/writer/source-column.js';
import { gatherBits } from '../src/writer/split-bits.js';
import { splitBinary } from '../src/writer/split-binary.js';
import { splitFixedWidth } from '../src/writer/split-fixed-width.js';
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
test('adjacent row ids are copied as a block, lookalikes are gathered, for fixed-width and binary columns', () => {
  fc.assert(
    fc.property(fc.integer(), fc.constantFrom<4 | 8>(4, 8), fc.constantFrom(1, 8, 16), fc.boolean(), (seed, offsetWidth, width, permuted) => {
      const rng = new Rng(seed);
      const n = rng.int(16, 80);
      const first = rng.int(0, 20);
      const ids = Array.from({ length: n }, (_, i) => first + i);
      if (permuted) {
        // swap two ids strictly inside the stretch: first and last stay where a block would put them
        const a = rng.int(1, n - 3);
        [ids[a], ids[a + 1]] = [ids[a + 1]!, ids[a]!];
      }
      const rowIds = Uint32Array.from([999, ...ids]); // the stretch starts at position 1
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
