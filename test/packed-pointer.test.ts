/**
 * The sort writer's packed pointers (partition | page | offset in two 32-bit
 * words) and their radix sort on the partition bits: every field survives
 * packing at its limits, and the sort orders by partition, keeps insertion
 * order within a partition (stability is what keeps a partition's rows in
 * input order), and skips only the bytes on which every pointer agrees.
 */
import { describe, expect, test } from 'vitest';
import fc from 'fast-check';
import {
  MAX_PAGE_OFFSET,
  MAX_PAGES,
  MAX_PARTITIONS,
  offsetOf,
  packHi,
  packLo,
  pageOf,
  partitionOf,
  PointerArray,
  radixSortByPartition,
} from '../src/sort-writer/packed-pointer.js';

describe('packing', () => {
  test('the worked example of the doc comment: partition 3, page 37, offset 1000', () => {
    expect(packHi(3, 37)).toBe(0x301);
    expect(packLo(37, 1000)).toBe(0x280003e8);
  });

  test.each([
    [0, 0, 0],
    [MAX_PARTITIONS - 1, MAX_PAGES - 1, MAX_PAGE_OFFSET],
    [1, 31, 1],
    [255, 32, 4],
    [65_536, 8191, 0],
    [12_345_678, 4097, 99_999_996],
  ])('partition %i, page %i, offset %i come back unchanged', (partition, page, offset) => {
    const hi = packHi(partition, page);
    const lo = packLo(page, offset);
    expect(partitionOf(hi)).toBe(partition);
    expect(pageOf(hi, lo)).toBe(page);
    expect(offsetOf(lo)).toBe(offset);
    expect(hi).toBeLessThanOrEqual(0xffffffff);
    expect(lo).toBeLessThanOrEqual(0xffffffff);
    expect(hi).toBeGreaterThanOrEqual(0);
    expect(lo).toBeGreaterThanOrEqual(0);
  });

  test('the u64 the two words make is partition << 40 | page << 27 | offset (Spark\'s PackedRecordPointer)', () => {
    fc.assert(
      fc.property(fc.nat({ max: MAX_PARTITIONS - 1 }), fc.nat({ max: MAX_PAGES - 1 }), fc.nat({ max: MAX_PAGE_OFFSET }), (partition, page, offset) => {
        const words = Uint32Array.of(packLo(page, offset), packHi(partition, page));
        const u64 = new BigUint64Array(words.buffer)[0]!; // little-endian: lo word first
        return u64 === ((BigInt(partition) << 40n) | (BigInt(page) << 27n) | BigInt(offset));
      }),
    );
  });
});

/** Pointers for (partition, tag) pairs: page and offset carry the tag, so that order within a partition can be checked. */
function pointersOf(pairs: readonly (readonly [number, number])[]): PointerArray {
  const array = new PointerArray();
  array.resize(Math.max(1, pairs.length));
  for (const [partition, tag] of pairs) array.append(packHi(partition, tag % MAX_PAGES), packLo(tag % MAX_PAGES, Math.floor(tag / MAX_PAGES)));
  return array;
}

function pairsOf(words: Uint32Array, count: number): [number, number][] {
  const out: [number, number][] = [];
  for (let r = 0; r < count; r++) {
    const lo = words[2 * r]!;
    const hi = words[2 * r + 1]!;
    out.push([partitionOf(hi), pageOf(hi, lo) + offsetOf(lo) * MAX_PAGES]);
  }
  return out;
}

/** A stable sort by partition, the reference. */
function referenceSort(pairs: readonly (readonly [number, number])[]): [number, number][] {
  return pairs.map((p, i) => ({ p, i })).sort((a, b) => a.p[0] - b.p[0] || a.i - b.i).map(({ p }) => [p[0], p[1]]);
}

describe('radix sort on the partition bits', () => {
  test('the worked example of the doc comment sorts to 1:b 1:e 3:a 3:d 258:c', () => {
    const input: [number, number][] = [[3, 0], [1, 1], [258, 2], [3, 3], [1, 4]]; // a..e
    const array = pointersOf(input);
    expect(pairsOf(array.sortByPartition(), 5)).toEqual([[1, 1], [1, 4], [3, 0], [3, 3], [258, 2]]);
  });

  test('random pointers come out ordered by partition, each partition in insertion order (stable), for partition ids of 1, 2 and 3 bytes', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(1, 7, 200, 256, 257, 4000, 65_536, 65_537, MAX_PARTITIONS),
        fc.array(fc.nat(), { maxLength: 2000 }),
        (numPartitions, raw) => {
          const pairs = raw.map((r, i) => [r % numPartitions, i] as const);
          const array = pointersOf(pairs);
          expect(pairsOf(array.sortByPartition(), pairs.length)).toEqual(referenceSort(pairs));
        },
      ),
      { numRuns: 200 },
    );
  });

  test('pointers that agree on every partition byte stay where they are (no pass runs, the input array is returned)', () => {
    const array = pointersOf([[5, 9], [5, 1], [5, 4]]);
    const sorted = array.sortByPartition();
    expect(sorted).toBe(array.words);
    expect(pairsOf(sorted, 3)).toEqual([[5, 9], [5, 1], [5, 4]]);
  });

  test('a byte on which all pointers agree is skipped, the others sorted: ids differing only in their top byte', () => {
    const ids = [0x030000, 0x010000, 0x020000, 0x010000];
    const pairs = ids.map((p, i) => [p, i] as const);
    const array = pointersOf(pairs);
    const sorted = array.sortByPartition();
    expect(sorted).not.toBe(array.words); // one pass: the result is in the scratch array
    expect(pairsOf(sorted, 4)).toEqual(referenceSort(pairs));
  });

  test('only the first `count` pointers are sorted; nothing is read beyond them', () => {
    const words = new Uint32Array(8);
    const scratch = new Uint32Array(8);
    words.set([packLo(0, 1), packHi(2, 0), packLo(0, 2), packHi(1, 0), packLo(0, 3), packHi(0, 0), 0xdead, 0xbeef]);
    const sorted = radixSortByPartition(words, scratch, 3);
    expect(pairsOf(sorted, 3).map(([p]) => p)).toEqual([0, 1, 2]);
  });

  test('resize keeps the pointers; release empties the array', () => {
    const array = pointersOf([[4, 1], [2, 2]]);
    array.resize(64);
    expect(array.capacity).toBe(64);
    expect(array.allocatedBytes).toBe(64 * 16);
    expect(pairsOf(array.words, 2)).toEqual([[4, 1], [2, 2]]);
    array.count = 0;
    array.release();
    expect(array.capacity).toBe(0);
    expect(array.allocatedBytes).toBe(0);
  });
});
