/**
 * The recycling of memory, as the documentation states it: the buffer recycler's idle lists
 * (src/memory/buffer-recycler.ts), the slab allocator's slabs going back to it
 * (src/memory/slab-allocator.ts), the pool's idle bytes and their release once nothing has been
 * reserved for `releaseIdleAfterMs` (src/memory/memory-pool.ts), the thread's default pool
 * (src/memory/default-pool.ts), and the sort writer's packed pointers and their radix sort by
 * partition (src/sort-writer/packed-pointer.ts).
 *
 * Each test here fails against a mutant of those files that the other tests let through (a limit
 * moved by one, a release and a give swapped, an unref or a zeroing dropped, a digit count too
 * narrow): see docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps". Expected
 * values come from the doc comments (their worked examples, limits and protocols) and hand
 * arithmetic, or from a stable sort by partition written here; never from the code under test.
 * Nothing here measures time: the idle release runs on vitest's fake timers.
 */
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { BufferRecycler } from '../src/memory/buffer-recycler.js';
import { defaultMemoryPool } from '../src/memory/default-pool.js';
import { MemoryPool, type MemoryReservation } from '../src/memory/memory-pool.js';
import { SlabAllocator } from '../src/memory/slab-allocator.js';
import { packHi, packLo, pageOf, partitionOf, offsetOf, PointerArray, POINTER_SLOT_BYTES, radixSortByPartition } from '../src/sort-writer/packed-pointer.js';

const KiB = 1024;
const MiB = 1024 * KiB;
/** The recycler's smallest kept length, as its doc comment states it: 4 KiB. */
const LARGE = 4 * KiB;

/** Takes and gives back `count` buffers of `bytes` through `r`, leaving them idle and r's reservation as it was. */
function leaveIdle(r: MemoryReservation, count: number, bytes = LARGE): Uint8Array[] {
  expect(r.tryGrow(count * bytes)).toBe(true);
  const arrays = Array.from({ length: count }, () => r.recycler.take(bytes));
  for (const array of arrays) r.recycler.give(array);
  r.shrink(count * bytes);
  return arrays;
}

// ---------------------------------------------------------------------------------------------------------------------
// BufferRecycler
// ---------------------------------------------------------------------------------------------------------------------

describe('BufferRecycler: what give() keeps (doc: "a whole large buffer of at most maxIdleBytes")', () => {
  test('recycledLength rounds from MIN_BYTES up ("eight size classes per power of two from MIN_BYTES up"): between 4 KiB and 8 KiB the classes step by 4096 / 8 = 512', () => {
    expect(BufferRecycler.recycledLength(4097)).toBe(9 * 512); // 4,608
    expect(BufferRecycler.recycledLength(5000)).toBe(10 * 512); // 5,120
    expect(BufferRecycler.recycledLength(8191)).toBe(16 * 512); // 8,192
    expect(BufferRecycler.recycledLength(8193)).toBe(9 * 1024); // from 8 KiB the step is 1,024: 9,216
  });

  test('an array of exactly maxIdleBytes is kept, and comes back to the next take of its length', () => {
    const recycler = new BufferRecycler(2 * LARGE);
    const array = new Uint8Array(2 * LARGE);
    recycler.give(array);
    expect(recycler.bytes).toBe(2 * LARGE);
    expect(recycler.take(2 * LARGE).buffer).toBe(array.buffer);
  });

  test('an array larger than maxIdleBytes is let go at once, and the idle arrays stay', () => {
    const recycler = new BufferRecycler(4 * LARGE);
    const kept = new Uint8Array(LARGE);
    recycler.give(kept);
    recycler.give(new Uint8Array(5 * LARGE)); // over the limit: let go, nothing else
    expect(recycler.bytes).toBe(LARGE);
    expect(recycler.take(LARGE).buffer).toBe(kept.buffer);
  });

  test('when the idle buffers are full, the oldest array of the length given back longest ago goes (drop: "the oldest of each"), compared by identity', () => {
    const recycler = new BufferRecycler(2 * LARGE);
    const [a, b] = [new Uint8Array(LARGE), new Uint8Array(LARGE)];
    recycler.give(a);
    recycler.give(b);
    recycler.give(new Uint8Array(LARGE)); // 3 x 4 KiB > 8 KiB: one array of the (only) length goes, the oldest: a
    expect(recycler.bytes).toBe(2 * LARGE);
    const left = [recycler.take(LARGE).buffer, recycler.take(LARGE).buffer];
    expect(left.includes(a.buffer), 'a, given first, went').toBe(false);
    expect(left.includes(b.buffer), 'b stayed').toBe(true);
  });

  test('drop(n) lets the oldest arrays go first, by identity: of a, b, c given in that order, drop(4 KiB) leaves b and c', () => {
    const recycler = new BufferRecycler(16 * MiB);
    const arrays = [0, 1, 2].map(() => new Uint8Array(LARGE));
    for (const array of arrays) recycler.give(array);
    expect(recycler.drop(1)).toBe(LARGE);
    const left = new Set([recycler.take(LARGE).buffer, recycler.take(LARGE).buffer]);
    // (identity, not toEqual: two zeroed ArrayBuffers of one length are equal to toEqual)
    expect([left.has(arrays[0]!.buffer), left.has(arrays[1]!.buffer), left.has(arrays[2]!.buffer)]).toEqual([false, true, true]);
  });

  test('clear() lets every idle array go and returns the bytes it let go: 4 KiB + 8 KiB + 8 KiB = 20 KiB', () => {
    const recycler = new BufferRecycler(16 * MiB);
    recycler.give(new Uint8Array(LARGE));
    recycler.give(new Uint8Array(2 * LARGE));
    recycler.give(new Uint8Array(2 * LARGE));
    expect(recycler.clear()).toBe(5 * LARGE);
    expect(recycler.bytes).toBe(0);
    expect(recycler.clear()).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// SlabAllocator
// ---------------------------------------------------------------------------------------------------------------------

/** Slabs large enough for the recycler to keep (it keeps nothing under 4 KiB). */
const SLAB = 4 * LARGE;

describe('SlabAllocator: slabs go back to the pool\'s recycler, and ranges are zeroed whatever the slab held before', () => {
  test('a slab that comes back from the recycler is zeroed: ranges handed out from it read 0', () => {
    const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: Infinity });
    const slabs = new SlabAllocator(pool.register('payloads'), SLAB);
    // fill the first slab with ranges of SLAB / 8 and write into each; the ninth range starts a second slab
    const first = Array.from({ length: 8 }, () => slabs.allocate(SLAB / 8)!);
    for (const range of first) range.bytes.fill(0xee);
    const second = slabs.allocate(SLAB / 8)!;
    expect(second.slab).not.toBe(first[0]!.slab);
    // the first slab is no longer the one being filled: its last range going gives it, as it was, to the recycler
    for (const range of first) slabs.release(range);
    expect([pool.reserved, pool.idle]).toEqual([SLAB, SLAB]);
    // fill the second slab, so that the next range needs a third: it is the first slab's array again
    for (let i = 0; i < 7; i++) expect(slabs.allocate(SLAB / 8)).not.toBeNull();
    const third = slabs.allocate(SLAB / 8)!;
    expect(third.bytes.buffer).toBe(first[0]!.bytes.buffer);
    expect(third.bytes.every((b) => b === 0), 'doc: "A range of a slab, zeroed when handed out"').toBe(true);
    expect(new Uint8Array(third.bytes.buffer).every((b) => b === 0), 'the whole slab').toBe(true);
  });

  test('releaseAll gives the slab being filled back to the recycler: the next allocator on the pool gets the same array', () => {
    const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: Infinity });
    const slabs = new SlabAllocator(pool.register('payloads'), SLAB);
    const range = slabs.allocate(100)!;
    expect(slabs.releaseAll()).toBe(SLAB);
    expect([pool.reserved, pool.idle]).toEqual([0, SLAB]);
    const next = new SlabAllocator(pool.register('payloads 2'), SLAB);
    expect(next.allocate(100)!.bytes.buffer).toBe(range.bytes.buffer);
  });

  describe('a slab is given to the recycler before its reservation is released, so a pool left with nothing reserved lets it go after releaseIdleAfterMs', () => {
    beforeEach(() => void vi.useFakeTimers());
    afterEach(() => void vi.useRealTimers());

    test.each(['trim', 'release', 'releaseAll'] as const)('%s', (how) => {
      const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: 1000 });
      const slabs = new SlabAllocator(pool.register('payloads'), SLAB);
      const range = slabs.allocate(8)!;
      if (how === 'trim') {
        slabs.release(range); // the slab being filled is kept when it empties...
        expect(pool.reserved).toBe(SLAB);
        expect(slabs.trim()).toBe(SLAB); // ...until trim() lets it go
      } else if (how === 'release') {
        const more = Array.from({ length: 7 }, () => slabs.allocate(SLAB / 8)!); // 8 + 7 x 2048 bytes: the first slab is full
        const second = slabs.allocate(SLAB / 8)!; // a second slab
        slabs.release(second);
        expect(slabs.trim()).toBe(SLAB); // the second slab goes; the first still has ranges out
        for (const r of more) slabs.release(r);
        expect(pool.reserved).toBe(SLAB);
        expect(slabs.release(range), 'the last range of a slab that is not being filled').toBe(SLAB);
      } else {
        expect(slabs.releaseAll()).toBe(SLAB);
      }
      expect(pool.reserved).toBe(0);
      expect(pool.idle).toBeGreaterThanOrEqual(SLAB);
      vi.advanceTimersByTime(1000);
      expect([pool.idle, pool.held]).toEqual([0, 0]);
    });
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// MemoryPool: idle bytes and their release
// ---------------------------------------------------------------------------------------------------------------------

describe('MemoryPool: idle buffers count as available ("a reservation that would not fit lets idle buffers go first")', () => {
  test('tryGrowUpTo grants what is not reserved, idle buffers included: 4 x 4 KiB idle in a pool of 32 KiB give 32 KiB', () => {
    const pool = new MemoryPool(8 * LARGE, { releaseIdleAfterMs: Infinity });
    const r = pool.register('consumer');
    leaveIdle(r, 4);
    expect([pool.reserved, pool.idle]).toEqual([0, 4 * LARGE]);
    expect(r.tryGrowUpTo(8 * LARGE)).toBe(8 * LARGE);
    expect([pool.reserved, pool.idle, pool.held]).toEqual([8 * LARGE, 0, 8 * LARGE]);
  });

  test('tryGrowUpTo with a share: half of 32 KiB - 8 KiB reserved = 12 KiB, though 12 KiB of it are idle buffers', () => {
    const pool = new MemoryPool(8 * LARGE, { releaseIdleAfterMs: Infinity });
    const r = pool.register('consumer');
    expect(r.tryGrow(2 * LARGE)).toBe(true);
    leaveIdle(r, 3);
    expect([pool.reserved, pool.idle]).toEqual([2 * LARGE, 3 * LARGE]);
    expect(r.tryGrowUpTo(100 * LARGE, 0.5)).toBe(3 * LARGE);
    expect(pool.held).toBeLessThanOrEqual(8 * LARGE);
  });
});

describe('MemoryPool: maxIdleBytes (doc: "the most the recycler keeps idle")', () => {
  // found by the sweep of 2026-12-07 and fixed: NaN bounded nothing (every buffer given back was kept: 64 MiB idle
  // after 64 buffers of 1 MiB), a negative value kept nothing; the limit and releaseIdleAfterMs already refused such values
  test.each([Number.NaN, -1])('maxIdleBytes %s is refused (CS_INVALID_ARGUMENT), as releaseIdleAfterMs is; 0 and Infinity are taken', (bad) => {
    expect(() => new MemoryPool(Infinity, { maxIdleBytes: bad })).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('maxIdleBytes') }));
    expect(new MemoryPool(Infinity, { maxIdleBytes: 0 }).recycler.maxIdleBytes).toBe(0);
    expect(new MemoryPool(Infinity, { maxIdleBytes: Infinity }).recycler.maxIdleBytes).toBe(Infinity);
  });
});

describe('MemoryPool: releaseIdleAfterMs (doc: "a number of milliseconds >= 0"; "Infinity (or longer than a timer can wait): kept")', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => {
    vi.restoreAllMocks();
    vi.useRealTimers();
  });

  test('0 is allowed: idle buffers go at the next timer tick after the pool falls idle', () => {
    const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: 0 });
    leaveIdle(pool.register('task'), 2);
    expect(pool.idle, 'not in the same synchronous step').toBe(2 * LARGE);
    vi.advanceTimersByTime(0);
    expect(pool.idle).toBe(0);
  });

  test.each([Number.NaN, -0.5, -Infinity])('%s is refused (CS_INVALID_ARGUMENT)', (ms) => {
    expect(() => new MemoryPool(Infinity, { releaseIdleAfterMs: ms })).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
  });

  test('2^31 - 1 ms, the longest delay setTimeout takes, is waited for: kept until then, let go after', () => {
    const longest = 2 ** 31 - 1;
    const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: longest });
    leaveIdle(pool.register('task'), 1);
    vi.advanceTimersByTime(longest - 1);
    expect(pool.idle).toBe(LARGE);
    vi.advanceTimersByTime(1);
    expect(pool.idle).toBe(0);
  });

  test('2^31 ms, longer than a timer can wait, keeps them (a timer would fire after 1 ms)', () => {
    const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: 2 ** 31 });
    leaveIdle(pool.register('task'), 1);
    vi.advanceTimersByTime(24 * 3600 * 1000);
    expect(pool.idle).toBe(LARGE);
  });

  test('the countdown never keeps the process alive (its timer is unref\'d)', () => {
    const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout');
    const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: 1000 });
    leaveIdle(pool.register('task'), 1);
    expect(setTimeoutSpy).toHaveBeenCalledTimes(1);
    const timer = setTimeoutSpy.mock.results[0]!.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    vi.advanceTimersByTime(1000);
    expect(pool.idle).toBe(0);
  });
});

describe('the default pool (doc: "Idle buffers are bounded by the recycler\'s 512 MiB and let go 2 s after the last writer released its memory")', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  test('it keeps at most 512 MiB idle, and lets them go 2 s after nothing is reserved', () => {
    const pool = defaultMemoryPool();
    expect(pool.recycler.maxIdleBytes).toBe(512 * MiB);
    pool.recycler.clear();
    const r = pool.register('task');
    leaveIdle(r, 2);
    r.free();
    vi.advanceTimersByTime(1999);
    expect(pool.idle).toBe(2 * LARGE);
    vi.advanceTimersByTime(1);
    expect(pool.idle).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// Packed pointers and their radix sort
// ---------------------------------------------------------------------------------------------------------------------

/** A stable sort by partition, the reference: [partition, tag] pairs in input order within each partition. */
function referenceSort(pairs: readonly (readonly [number, number])[]): [number, number][] {
  return pairs.map((p, i) => ({ p, i })).sort((a, b) => a.p[0] - b.p[0] || a.i - b.i).map(({ p }) => [p[0], p[1]]);
}

/** A pointer array of (partition, tag) pairs, the tag in the offset (page 0). */
function pointersOf(pairs: readonly (readonly [number, number])[], capacity = pairs.length): PointerArray {
  const array = new PointerArray();
  array.resize(Math.max(1, capacity));
  for (const [partition, tag] of pairs) array.append(packHi(partition, 0), packLo(0, tag));
  return array;
}

function pairsOf(words: Uint32Array, count: number): [number, number][] {
  const out: [number, number][] = [];
  for (let r = 0; r < count; r++) out.push([partitionOf(words[2 * r + 1]!), offsetOf(words[2 * r]!)]);
  return out;
}

describe('radix sort by partition', () => {
  test('more than 65,535 pointers with one digit (a 16-bit count would wrap): 100,000 rows, 80,000 of them in partition 1', () => {
    const partitionOfRow = (i: number) => (i % 10 === 0 ? 2 : i % 10 === 5 ? 0 : 1);
    const array = new PointerArray();
    array.resize(100_000);
    for (let i = 0; i < 100_000; i++) array.append(packHi(partitionOfRow(i), 0), packLo(0, i));
    const sorted = array.sortByPartition();
    // the reference: the rows of partition 0 in input order (5, 15, ...), then those of 1, then those of 2 (0, 10, ...)
    const expected = [0, 1, 2].flatMap((p) => Array.from({ length: 100_000 }, (_, i) => i).filter((i) => partitionOfRow(i) === p));
    expect(expected.filter((i) => partitionOfRow(i) === 1).length).toBe(80_000);
    let wrong = -1;
    for (let r = 0; r < 100_000 && wrong < 0; r++) if (offsetOf(sorted[2 * r]!) !== expected[r] || partitionOf(sorted[2 * r + 1]!) !== partitionOfRow(expected[r]!)) wrong = r;
    expect(wrong, 'the first position holding another row than the stable order by partition').toBe(-1);
  });

  test('a byte of the partition id on which every pointer agrees is skipped: ids 0x100, 0x300, 0x200 differ only in their second byte, one pass sorts them (the result is in the scratch array)', () => {
    const pairs: [number, number][] = [[0x300, 0], [0x100, 1], [0x200, 2], [0x100, 3]];
    const array = pointersOf(pairs);
    const sorted = array.sortByPartition();
    expect(sorted, 'one pass (an odd number): the result is in the scratch array, not the pointer array').not.toBe(array.words);
    expect(pairsOf(sorted, 4)).toEqual(referenceSort(pairs)); // [0x100, 1], [0x100, 3], [0x200, 2], [0x300, 0]
  });

  test('sortByPartition sorts the pointers appended (count), not the capacity: 3 pointers in room for 10', () => {
    const pairs: [number, number][] = [[7, 1], [2, 2], [7, 3]];
    const array = pointersOf(pairs, 10);
    expect(array.capacity).toBe(10);
    expect(pairsOf(array.sortByPartition(), 3)).toEqual(referenceSort(pairs)); // [2, 2], [7, 1], [7, 3]
  });

  test('a pointer slot is what a pointer costs in memory: its 8 bytes and its 8 bytes of sort scratch (16)', () => {
    const array = new PointerArray();
    array.resize(1000);
    expect(array.allocatedBytes, 'two Uint32Arrays of 2 x 1000 words').toBe(1000 * 2 * 4 * 2);
    expect(POINTER_SLOT_BYTES * 1000).toBe(array.allocatedBytes);
  });

  test('page and offset survive the sort with their partition: the u64 of each pointer comes back whole', () => {
    const pairs = [[5, 8191, 1], [1, 37, 1000], [5, 31, (1 << 27) - 1], [1, 0, 0]] as const;
    const words = new Uint32Array(8);
    pairs.forEach(([p, page, offset], r) => words.set([packLo(page, offset), packHi(p, page)], 2 * r));
    const sorted = radixSortByPartition(words, new Uint32Array(8), 4);
    const back = [0, 1, 2, 3].map((r) => [partitionOf(sorted[2 * r + 1]!), pageOf(sorted[2 * r + 1]!, sorted[2 * r]!), offsetOf(sorted[2 * r]!)]);
    expect(back).toEqual([[1, 37, 1000], [1, 0, 0], [5, 8191, 1], [5, 31, (1 << 27) - 1]]);
  });
});
