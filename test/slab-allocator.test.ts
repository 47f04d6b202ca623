import { describe, expect, test } from 'vitest';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { SlabAllocator, type SlabRange } from '../src/memory/slab-allocator.js';

const SLAB = 1024;

function setup(limit = 10 * SLAB) {
  const pool = new MemoryPool(limit);
  const reservation = pool.register('payloads');
  return { pool, reservation, slabs: new SlabAllocator(reservation, SLAB) };
}

describe('SlabAllocator', () => {
  test('ranges are zeroed, 8-aligned, of the size asked, and never overlap', () => {
    const { slabs } = setup();
    const ranges: SlabRange[] = [];
    for (const bytes of [1, 7, 8, 9, 100, 128, 3, 64]) {
      const range = slabs.allocate(bytes)!;
      expect(range.bytes.byteLength).toBe(bytes);
      expect(range.bytes.byteOffset % 8).toBe(0);
      expect(range.bytes.every((b) => b === 0)).toBe(true);
      range.bytes.fill(0xab);
      ranges.push(range);
    }
    // each range still holds its own bytes only: none was written over by a later one
    for (const range of ranges) expect(range.bytes.every((b) => b === 0xab)).toBe(true);
  });

  test('a slab is reserved whole when it is started, and released with its last range', () => {
    const { pool, slabs } = setup();
    const first = slabs.allocate(100)!;
    expect(pool.reserved).toBe(SLAB);
    const sameSlab = slabs.allocate(100)!;
    expect(sameSlab.slab).toBe(first.slab);
    expect(pool.reserved).toBe(SLAB);
    // ranges of 100 take 104 bytes: 9 fit in a slab of 1024, the 10th starts a second one
    const more = Array.from({ length: 8 }, () => slabs.allocate(100)!);
    expect(more.at(-1)!.slab).not.toBe(first.slab);
    expect(pool.reserved).toBe(2 * SLAB);
    // the first slab goes when its last range does, not before
    const firstSlabRanges = [first, sameSlab, ...more].filter((r) => r.slab === first.slab);
    firstSlabRanges.slice(1).forEach((r) => expect(slabs.release(r)).toBe(0));
    expect(pool.reserved).toBe(2 * SLAB);
    expect(slabs.release(firstSlabRanges[0]!)).toBe(SLAB);
    expect(pool.reserved).toBe(SLAB);
    expect(slabs.reservedBytes).toBe(SLAB);
  });

  test('the slab being filled starts over, zeroed, when its ranges are all released', () => {
    const { pool, slabs } = setup();
    const a = slabs.allocate(64)!;
    a.bytes.fill(7);
    expect(slabs.release(a)).toBe(0);
    expect(pool.reserved).toBe(SLAB); // kept for reuse
    const b = slabs.allocate(64)!;
    expect(b.slab).toBe(a.slab);
    expect(b.bytes.byteOffset).toBe(a.bytes.byteOffset); // from the start again
    expect(b.bytes.every((x) => x === 0)).toBe(true);
  });

  test('a range larger than an eighth of a slab is not carved: null, nothing reserved', () => {
    const { pool, slabs } = setup();
    expect(slabs.allocate(SLAB / 8 + 1)).toBeNull();
    expect(slabs.allocate(SLAB / 8)).not.toBeNull();
    expect(pool.reserved).toBe(SLAB);
  });

  test('when the pool has no room for another slab, allocate returns null at once (no reclaim, no wait)', () => {
    let asked = 0;
    const pool = new MemoryPool(SLAB + SLAB / 2);
    pool.register('other', { reclaim: async () => (asked++, 0) });
    const slabs = new SlabAllocator(pool.register('payloads'), SLAB);
    const ranges = Array.from({ length: 8 }, () => slabs.allocate(SLAB / 8)!);
    expect(ranges.every((r) => r !== null)).toBe(true);
    expect(slabs.allocate(8)).toBeNull(); // the first slab is full, a second does not fit in the pool
    expect(asked).toBe(0);
    expect(pool.reserved).toBe(SLAB);
  });

  test('trim releases the slab being filled only when nothing is out', () => {
    const { pool, slabs } = setup();
    const a = slabs.allocate(64)!;
    expect(slabs.trim()).toBe(0);
    expect(pool.reserved).toBe(SLAB);
    slabs.release(a);
    expect(slabs.trim()).toBe(SLAB);
    expect(pool.reserved).toBe(0);
    expect(slabs.trim()).toBe(0);
    // and it starts a new slab afterwards
    expect(slabs.allocate(8)!.slab).not.toBe(a.slab);
    expect(pool.reserved).toBe(SLAB);
  });

  test('releaseAll gives back every slab, ranges out or not', () => {
    const { pool, slabs } = setup();
    for (let i = 0; i < 20; i++) slabs.allocate(100);
    expect(pool.reserved).toBe(3 * SLAB);
    expect(slabs.releaseAll()).toBe(3 * SLAB);
    expect(pool.reserved).toBe(0);
    expect(slabs.reservedBytes).toBe(0);
  });
});
