/**
 * The recycling of memory and the sort writer's packed pointers, second pass (sweep 38): what
 * test/memory-recycling-contract.test.ts and the other tests let through in
 * src/memory/buffer-recycler.ts, src/memory/slab-allocator.ts and src/sort-writer/packed-pointer.ts.
 *
 * - The pointer's field widths as packed-pointer.ts's doc comment states them ("24 bits", "13 bits",
 *   "27 bits"; README: "`numPartitions` is at most 2^24"): every other test derives its cases from
 *   the exported constants, so a constant changed moved the tests with it.
 * - The radix sort's skip of a byte on which every pointer agrees, for digits that differ only in
 *   their top bit.
 * - The slab allocator after releaseAll, and allocate(0).
 * - BufferRecycler.drop releasing only what it is asked for, and refusing a negative or NaN count
 *   (two defects this sweep found, described where they are tested).
 *
 * Each test fails against a mutant that the other tests let through: see docs/RELIABILITY.md, "The
 * tests notice a broken line: mutation sweeps". Expected values come from the doc comments and hand
 * arithmetic, never from the code under test. Nothing here waits or measures time.
 */
import { describe, expect, test } from 'vitest';
import { BufferRecycler } from '../src/memory/buffer-recycler.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { SlabAllocator } from '../src/memory/slab-allocator.js';
import { MAX_PAGE_OFFSET, MAX_PAGES, MAX_PARTITIONS, packHi, packLo, pageOf, partitionOf, offsetOf, PointerArray } from '../src/sort-writer/packed-pointer.js';
import { RowPages } from '../src/sort-writer/row-pages.js';

/** Slabs large enough for the recycler to keep (it keeps nothing under 4 KiB, its MIN_BYTES). */
const SLAB = 16 * 1024;

describe('the packed pointer\'s fields have the widths its doc comment gives them (partition 24 bits, page 13, offset 27)', () => {
  test('MAX_PARTITIONS is 2^24, Spark\'s MAX_SHUFFLE_OUTPUT_PARTITIONS_FOR_SERIALIZED_MODE, and partition 2^24 - 1 fills the top 24 bits of the u64', () => {
    expect(MAX_PARTITIONS).toBe(16_777_216);
    const hi = packHi(16_777_215, 0);
    expect(hi).toBe(0xffffff00);
    expect(partitionOf(hi)).toBe(16_777_215);
  });

  test('MAX_PAGES is 2^13 and MAX_PAGE_OFFSET 2^27 - 1 (a page holds at most 128 MiB)', () => {
    expect(MAX_PAGES).toBe(8192);
    expect(MAX_PAGE_OFFSET).toBe(128 * 1024 * 1024 - 1);
    const [hi, lo] = [packHi(0, 8191), packLo(8191, 134_217_727)];
    expect([hi, lo]).toEqual([0xff, 0xffffffff]);
    expect([pageOf(hi, lo), offsetOf(lo)]).toEqual([8191, 134_217_727]);
  });

  test('a sort writer\'s page table holds 8,192 pages, one for each page number: the 8,193rd page asked for is "full"', () => {
    const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: Infinity });
    const pages = new RowPages(8, pool.register('pages'));
    for (let i = 0; i < 8192; i++) expect(pages.tryOpen(8)).toBe('ok');
    expect(pages.current, 'the last page number, 2^13 - 1').toBe(8191);
    expect(pages.tryOpen(8)).toBe('full');
    expect(pages.pageCount).toBe(8192);
  });
});

describe('the radix sort tells apart partition ids whose digits differ only in their top bit', () => {
  test('ids 0x808080, 0x80, 0, 0x8000, 0x800000, 0 (every byte 0x00 or 0x80) come out in order, ties in input order', () => {
    const ids = [0x808080, 0x80, 0, 0x8000, 0x800000, 0];
    const array = new PointerArray();
    array.resize(ids.length);
    ids.forEach((id, row) => array.append(packHi(id, 0), packLo(0, row)));
    const sorted = array.sortByPartition();
    const out = ids.map((_, r) => [partitionOf(sorted[2 * r + 1]!), offsetOf(sorted[2 * r]!)]);
    // by hand: 0 (rows 2 and 5, in that order), 0x80 (row 1), 0x8000 (row 3), 0x800000 (row 4), 0x808080 (row 0)
    expect(out).toEqual([[0, 2], [0, 5], [0x80, 1], [0x8000, 3], [0x800000, 4], [0x808080, 0]]);
  });
});

describe('SlabAllocator.allocate returns null only in the two cases its doc names (more than an eighth of a slab, or no room in the pool)', () => {
  test('allocate(0) hands out an empty range of the slab, and releasing it empties the slab being filled', () => {
    const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: Infinity });
    const slabs = new SlabAllocator(pool.register('payloads'), SLAB);
    const empty = slabs.allocate(0);
    expect(empty).not.toBeNull();
    expect(empty!.bytes.byteLength).toBe(0);
    expect(slabs.release(empty!)).toBe(0); // the slab being filled is kept, empty
    expect(slabs.trim()).toBe(SLAB);
  });
});

describe('SlabAllocator.releaseAll leaves the allocator holding nothing (doc: "Releases every slab")', () => {
  test('after releaseAll, a trim (a reclaim arriving late) releases nothing, and the slab is idle in the recycler once', () => {
    const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: Infinity });
    const slabs = new SlabAllocator(pool.register('payloads'), SLAB);
    slabs.release(slabs.allocate(100)!); // the slab being filled, empty again
    expect(slabs.releaseAll()).toBe(SLAB);
    expect([pool.reserved, pool.idle]).toEqual([0, SLAB]);
    expect(slabs.trim()).toBe(0);
    expect([slabs.reservedBytes, pool.reserved, pool.idle]).toEqual([0, 0, SLAB]);
  });

  test('an allocation after releaseAll reserves a slab again before it hands out a range of it', () => {
    const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: Infinity });
    const slabs = new SlabAllocator(pool.register('payloads'), SLAB);
    const first = slabs.allocate(100)!;
    slabs.releaseAll();
    const next = slabs.allocate(100)!;
    expect([slabs.reservedBytes, pool.reserved, pool.idle], 'the slab is reserved again, no longer idle').toEqual([SLAB, SLAB, 0]);
    expect(next.bytes.buffer, 'the same array, back from the recycler').toBe(first.bytes.buffer);
  });
});

/** Leaves `count` idle arrays of 4 KiB in `pool`, following the recycler's protocol (take after reserving, give before releasing). */
function leaveIdle(pool: MemoryPool, count: number): void {
  const r = pool.register('task');
  expect(r.tryGrow(count * 4096)).toBe(true);
  const arrays = Array.from({ length: count }, () => r.recycler.take(4096));
  for (const array of arrays) r.recycler.give(array);
  r.free();
}

describe('BufferRecycler.drop lets go only what it is asked for (doc: "until `bytes` are released")', () => {
  test('drop(12 KiB) over one array of 4 KiB (given first) and two of 8 KiB lets go the 4 KiB one and one of 8 KiB: 12 KiB, one 8 KiB array stays', () => {
    const recycler = new BufferRecycler(1024 * 1024);
    const small = new Uint8Array(4096);
    const [big1, big2] = [new Uint8Array(8192), new Uint8Array(8192)];
    recycler.give(small);
    recycler.give(big1);
    recycler.give(big2);
    expect(recycler.drop(12 * 1024)).toBe(12 * 1024);
    expect(recycler.bytes).toBe(8192);
    expect(recycler.take(8192).buffer, 'the newer of the two stays').toBe(big2.buffer);
  });

  test('a reservation that would not fit lets go only the idle arrays it needs: 4 KiB over the limit costs one 8 KiB array, not both', () => {
    const pool = new MemoryPool(32 * 1024, { releaseIdleAfterMs: Infinity, maxIdleBytes: 32 * 1024 });
    const r = pool.register('task');
    expect(r.tryGrow(20 * 1024)).toBe(true);
    const arrays = [r.recycler.take(4096), r.recycler.take(8192), r.recycler.take(8192)];
    for (const array of arrays) r.recycler.give(array);
    r.shrink(20 * 1024);
    expect([pool.reserved, pool.idle]).toEqual([0, 20 * 1024]);
    expect(r.tryGrow(24 * 1024)).toBe(true); // held would be 44 KiB: 12 KiB over, so the 4 KiB array and one of 8 KiB go
    expect([pool.reserved, pool.idle, pool.held]).toEqual([24 * 1024, 8192, 32 * 1024]);
  });
});

describe('BufferRecycler.drop counts only what exists (pool.idle and pool.held are "what exists")', () => {
  // Sweep 38 found: drop() took any number. For bytes < 0, Math.ceil((bytes - released) / length) is negative,
  // splice(0, negative) removed nothing, and `released` went negative: drop(-5000) over two idle arrays of 4 KiB
  // returned -4096 and pool.idle and pool.held counted 4 KiB that no array held. drop(NaN) made them NaN for good,
  // and since `NaN > maxIdleBytes` is false, give() never let anything go again (the failure the fourteenth sweep
  // fixed for maxIdleBytes: NaN, reached through the recycler's public drop()). Both are refused now, as the
  // pool's other byte counts are (tryGrow, shrink: RangeError).
  test.each([-5000, -1, Number.NaN, -Infinity])('drop(%s) is a RangeError and lets nothing go', (bytes) => {
    const pool = new MemoryPool(64 * 1024, { releaseIdleAfterMs: Infinity });
    leaveIdle(pool, 2);
    expect(() => pool.recycler.drop(bytes)).toThrow(RangeError);
    expect([pool.idle, pool.held]).toEqual([8192, 8192]);
    for (let i = 0; i < 20; i++) leaveIdle(pool, 1);
    expect(pool.idle).toBeLessThanOrEqual(pool.recycler.maxIdleBytes);
  });

  test('drop(0) lets nothing go, and drop(Infinity) lets everything go', () => {
    const pool = new MemoryPool(64 * 1024, { releaseIdleAfterMs: Infinity });
    leaveIdle(pool, 2);
    expect(pool.recycler.drop(0)).toBe(0);
    expect(pool.idle).toBe(8192);
    expect(pool.recycler.drop(Infinity)).toBe(8192);
    expect([pool.idle, pool.held]).toEqual([0, 0]);
  });
});
