/**
 * The memory pool's contract, claim by claim (the twenty-sixth mutation sweep, a second pass over
 * src/memory/memory-pool.ts): reservations and their bounds, the rounds of reclaim a grow runs and
 * when it gives up, which error it keeps, and what a MemoryLimitError says. The consumers here are
 * stand-ins whose reclaims the test settles itself: no sleeps, no writers.
 */
import { describe, expect, test } from 'vitest';
import { defaultMemoryPool } from '../src/memory/default-pool.js';
import { MemoryLimitError, MemoryPool, type MemoryReservation } from '../src/memory/memory-pool.js';
import { deferred } from './support/deferred.js';

/** Lets every pending promise continuation run (a macrotask turn; no timer is waited for). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A reclaimable consumer whose reclaim does what `act` says; every ask is logged as "name asked n". */
function consumer(pool: MemoryPool, name: string, log: string[], act: (bytes: number, self: MemoryReservation, call: number) => Promise<number> | number) {
  let call = 0;
  const self: MemoryReservation = pool.register(name, {
    reclaim: async (bytes) => {
      log.push(`${name} asked ${bytes}`);
      return act(bytes, self, ++call);
    },
  });
  return self;
}

/** Gives back what it is asked for, as far as it holds it. */
const spills = (bytes: number, self: MemoryReservation) => {
  const freed = Math.min(bytes, self.size);
  self.shrink(freed);
  return freed;
};

describe('the pool is built with numbers', () => {
  test('a limit that is not a number (NaN) is refused, as a non-positive one is', () => {
    expect(() => new MemoryPool(Number.NaN)).toThrow(/positive/);
  });

  test('maxIdleBytes NaN is refused', () => {
    expect(() => new MemoryPool(1 << 20, { maxIdleBytes: Number.NaN })).toThrow(/maxIdleBytes/);
  });

  test('the idle buffers of a pool of an odd limit are at most half of it, rounded down', () => {
    expect(new MemoryPool(8193).recycler.maxIdleBytes).toBe(4096);
  });

  test('the default pool has no limit', () => {
    expect(defaultMemoryPool().limit).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('reservations', () => {
  test('tryGrow and shrink take whole numbers of bytes >= 0: -1, 1.5 and NaN are RangeErrors, 0 is granted', () => {
    const pool = new MemoryPool(100);
    const r = pool.register('r');
    r.tryGrow(10);
    expect(() => r.tryGrow(-1)).toThrow(RangeError);
    expect(() => r.tryGrow(1.5)).toThrow(RangeError);
    expect(() => r.tryGrow(Number.NaN)).toThrow(RangeError);
    expect(() => r.shrink(-1)).toThrow(RangeError);
    expect(() => r.shrink(0.5)).toThrow(RangeError);
    expect(r.tryGrow(0)).toBe(true);
    expect(r.size).toBe(10);
    expect(pool.reserved).toBe(10);
  });

  test('grow reserves at once, before it yields, when the pool has the bytes', () => {
    const pool = new MemoryPool(100);
    const r = pool.register('r');
    void r.grow(60);
    expect(r.size).toBe(60);
    expect(pool.register('late').tryGrow(41)).toBe(false);
  });

  test('tryResize sets the reservation to exactly the size asked, up or down, and refuses past the limit', () => {
    const pool = new MemoryPool(100);
    const r = pool.register('r');
    r.tryGrow(30);
    expect(r.tryResize(50)).toBe(true);
    expect(r.size).toBe(50);
    expect(r.tryResize(20)).toBe(true);
    expect(r.size).toBe(20);
    expect(r.tryResize(21)).toBe(true);
    expect(r.size).toBe(21);
    expect(pool.reserved).toBe(21);
    expect(r.tryResize(101)).toBe(false);
    expect(r.size).toBe(21);
    expect(pool.reserved).toBe(21);
  });

  test('tryGrowUpTo with a share rounds down: half of 101 free bytes is 50', () => {
    const pool = new MemoryPool(101);
    const r = pool.register('r');
    expect(r.tryGrowUpTo(1000, 0.5)).toBe(50);
    expect(pool.reserved).toBe(50);
  });

  test("consumers() gives each consumer's reserved and peak bytes, largest reservation first", () => {
    const pool = new MemoryPool(100);
    pool.register('small').tryGrow(10);
    const big = pool.register('big');
    big.tryGrow(70);
    big.shrink(20);
    pool.register('middle').tryGrow(30);
    expect(pool.consumers()).toEqual([
      { name: 'big', reserved: 50, peak: 70 },
      { name: 'middle', reserved: 30, peak: 30 },
      { name: 'small', reserved: 10, peak: 10 },
    ]);
  });

  test('a reservation that lets idle buffers go never leaves the pool holding more than its limit, not by one byte, nor its peak', () => {
    const pool = new MemoryPool(16384, { releaseIdleAfterMs: Infinity });
    const a = pool.register('a');
    a.tryGrow(4096);
    a.recycler.give(a.recycler.take(4096));
    a.shrink(4096);
    expect(pool.idle).toBe(4096);
    // 12,289 reserved and 4,096 idle would be one byte over the limit: the idle buffer goes
    expect(pool.register('b').tryGrow(16384 - 4096 + 1)).toBe(true);
    expect(pool.idle).toBe(0);
    expect(pool.held).toBe(12289);
    expect(pool.peak).toBe(12289);
  });
});

describe('a grow asks reclaimable consumers, round after round, until it is granted or nothing more can be freed', () => {
  test('consumers holding nothing are not asked', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    consumer(pool, 'empty', log, () => 0);
    consumer(pool, 'full', log, () => 0).tryGrow(90);
    await expect(pool.register('r').grow(20)).rejects.toBeInstanceOf(MemoryLimitError);
    expect(log).toEqual(['full asked 10']);
  });

  test('each consumer is asked for what is still missing after the ones before it: 30, then 20 after 10 were freed, then 20 after none', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    consumer(pool, 'a', log, (_bytes, self) => (self.shrink(10), 10)).tryGrow(40);
    consumer(pool, 'b', log, () => 0).tryGrow(30);
    consumer(pool, 'c', log, spills).tryGrow(20);
    pool.register('n').tryGrow(10);
    const r = pool.register('r');
    await r.grow(30);
    expect(log).toEqual(['a asked 30', 'b asked 20', 'c asked 20']);
    expect(r.size).toBe(30);
  });

  test('a round stops asking once it has freed what it asked for, even when a third consumer took those bytes first; the next round asks again', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    const n = pool.register('n');
    n.tryGrow(10);
    consumer(pool, 'a', log, (bytes, self, call) => {
      spills(bytes, self);
      if (call === 1) n.tryGrow(bytes); // a consumer that goes on working takes what was freed
      return bytes;
    }).tryGrow(60);
    consumer(pool, 'b', log, spills).tryGrow(30);
    const r = pool.register('r');
    await r.grow(20);
    expect(log).toEqual(['a asked 20', 'a asked 20']);
    expect(r.size).toBe(20);
  });

  test('a round that freed nothing while another consumer freed memory (that a third took) is not the end: the next round asks again', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    const n = pool.register('n');
    n.tryGrow(20);
    const m = pool.register('m');
    m.tryGrow(30);
    consumer(pool, 'x', log, (bytes, self, call) => {
      if (call > 1) return spills(bytes, self);
      n.shrink(20); // freed by someone else while x looked for something to give...
      m.tryGrow(20); // ...and taken at once by a third
      return 0;
    }).tryGrow(50);
    const r = pool.register('r');
    await r.grow(10);
    expect(log).toEqual(['x asked 10', 'x asked 10']);
    expect(r.size).toBe(10);
  });

  test('memory a consumer that cannot be asked frees while the grow looks for some is granted', async () => {
    const pool = new MemoryPool(100);
    const n = pool.register('n');
    n.tryGrow(100);
    const r = pool.register('r');
    const grown = r.grow(30);
    n.shrink(50);
    await grown;
    expect(r.size).toBe(30);
  });

  test('a round that freed nothing and moved nothing ends the grow: the consumer is asked once, and the grow is a MemoryLimitError', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    consumer(pool, 'x', log, () => 0).tryGrow(90);
    await expect(pool.register('r').grow(20)).rejects.toBeInstanceOf(MemoryLimitError);
    expect(log).toEqual(['x asked 10']);
  });

  test('a grow for more than the whole limit is a MemoryLimitError at once: no consumer is made to spill for it', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    consumer(pool, 'x', log, spills).tryGrow(60);
    const requester = pool.register('r');
    await expect(requester.grow(101)).rejects.toMatchObject({ code: 'CS_MEMORY_LIMIT', requested: 101 });
    expect(log).toEqual([]);
    expect(pool.reserved).toBe(60);
    await requester.grow(100); // the whole limit can still be had: x spills all it holds
    expect(log).toEqual(['x asked 60']);
  });

  test('a grow that can never get enough gives up after eight rounds, even while a consumer keeps taking memory as it is asked', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    consumer(pool, 'busy', log, (_bytes, self) => (self.tryGrow(1), 0)).tryGrow(50);
    const r = pool.register('r');
    await expect(r.grow(60)).rejects.toBeInstanceOf(MemoryLimitError);
    expect(log).toHaveLength(8);
    expect(r.size).toBe(0);
  });

  test('a consumer whose reclaim failed is asked again in the next round, and what it frees then is granted', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    consumer(pool, 'x', log, (bytes, self, call) => {
      if (call === 1) throw new Error('disk full');
      return spills(bytes, self);
    }).tryGrow(90);
    const r = pool.register('r');
    await r.grow(20);
    expect(log).toEqual(['x asked 10', 'x asked 10']);
    expect(r.size).toBe(20);
  });

  test("another consumer's failing reclaim is the cause of the MemoryLimitError, the first of them (of eight rounds), and named in its message", async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    const errors: Error[] = [];
    consumer(pool, 'x', log, (bytes, self, call) => {
      if (call > 8) return spills(bytes, self); // a grow that did not give up would be granted at last
      const error = new Error(`spill ${call} failed`);
      errors.push(error);
      throw error;
    }).tryGrow(90);
    const error = (await pool.register('r').grow(20).catch((e: unknown) => e)) as MemoryLimitError;
    expect(error).toBeInstanceOf(MemoryLimitError);
    expect(errors).toHaveLength(8);
    expect(error.cause).toBe(errors[0]);
    expect(error.message).toMatch(/; a reclaim failed: spill 1 failed$/);
  });

  test('a consumer already reclaiming for one grow is waited for by another, not asked twice at once; both are granted', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    const pending: (() => void)[] = [];
    const x = consumer(pool, 'x', log, (bytes, self) => {
      const done = deferred<number>();
      pending.push(() => {
        self.shrink(bytes);
        done.resolve(bytes);
      });
      return done.promise;
    });
    x.tryGrow(90);
    const r1 = pool.register('r1');
    const r2 = pool.register('r2');
    const grown = Promise.all([r1.grow(20), r2.grow(20)]);
    await settle();
    expect(log).toEqual(['x asked 10']);
    while (pending.length > 0) {
      pending.shift()!();
      await settle();
    }
    await grown;
    expect(r1.size + r2.size).toBe(40);
    expect(log.length).toBeGreaterThan(1);
  });

  test.each([
    ['freed enough for both, is granted at once, without asking anyone else', 40, ['x asked 20']],
    ['freed part of what it needs (30: r1 takes 20, r2 is 10 short), asks the next consumer only for the rest', 30, ['x asked 20', 'y asked 10']],
  ] as [string, number, string[]][])('a grow that waited for another grow\'s reclaim, which %s', async (_, freed, asked) => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    const done = deferred<number>();
    consumer(pool, 'x', log, (_bytes, self) => done.promise.then((n) => (self.shrink(n), n))).tryGrow(60);
    consumer(pool, 'y', log, spills).tryGrow(30);
    pool.register('n').tryGrow(10);
    const r1 = pool.register('r1');
    const r2 = pool.register('r2');
    const grown = Promise.all([r1.grow(20), r2.grow(20)]);
    await settle();
    done.resolve(freed);
    await grown;
    expect(log).toEqual(asked);
    expect([r1.size, r2.size]).toEqual([20, 20]);
  });

  test("a reclaim another grow started and that fails is waited for, and its error is not the waiting grow's: that grow goes on and is granted", async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    const first = deferred<number>();
    consumer(pool, 'x', log, (_bytes, self, call) => (call === 1 ? first.promise : spills(40, self))).tryGrow(90);
    const r1 = pool.register('r1');
    const r2 = pool.register('r2');
    const g1 = r1.grow(20);
    const g2 = r2.grow(20);
    await settle();
    first.reject(new Error('disk full'));
    await Promise.all([g1, g2]);
    expect([r1.size, r2.size]).toEqual([20, 20]);
  });

  test('a grow whose round freed nothing goes on while another consumer is still reclaiming (memory may free up), and is granted in a later round', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    const xFirst = deferred<number>();
    const yFirst = deferred<number>();
    const x = consumer(pool, 'x', log, (bytes, self, call) => (call === 1 ? xFirst.promise : spills(bytes, self)));
    x.tryGrow(50);
    const y = consumer(pool, 'y', log, () => yFirst.promise);
    y.tryGrow(5);
    const n = pool.register('n');
    n.tryGrow(45);
    const r3 = pool.register('r3');
    const r2 = pool.register('r2');
    const g3 = r3.grow(10); // asks x, which takes its time; y is next in its round
    y.shrink(5); // y lets its memory go on its own, and n takes it
    n.tryGrow(5);
    const g2 = r2.grow(10); // y holds nothing now: r2 only waits for x
    xFirst.resolve(0); // x freed nothing; r3 goes on to ask y, which is still reclaiming when r2's round ends
    await g2;
    expect(r2.size).toBe(10);
    yFirst.resolve(0);
    await g3;
    expect(r3.size).toBe(10);
    expect(log).toEqual(['x asked 10', 'y asked 10', 'x asked 10', 'x asked 10']);
  });
});

describe('MemoryLimitError says who asked, for how much, and who holds the memory', () => {
  test('the requester, what it asked for and holds, what is left counting idle buffers as available, and the three largest consumers by reservation', async () => {
    const pool = new MemoryPool(16384, { releaseIdleAfterMs: Infinity });
    const a = pool.register('a');
    a.tryGrow(4096);
    a.recycler.give(a.recycler.take(4096));
    a.shrink(4096);
    a.free();
    const big = pool.register('big');
    big.tryGrow(10500);
    big.shrink(500);
    pool.register('middle').tryGrow(50);
    pool.register('tiny').tryGrow(10);
    const r = pool.register('requester');
    r.tryGrow(100);
    const error = (await r.grow(8000).catch((e: unknown) => e)) as MemoryLimitError;
    expect(error).toBeInstanceOf(MemoryLimitError);
    expect(error.name).toBe('MemoryLimitError');
    expect(error.requester).toBe('requester');
    expect(error.requested).toBe(8000);
    expect(error.cause).toBeUndefined();
    expect(error.message).toBe(
      `requester asked for 8000 more bytes (holding 100) but the pool has ${16384 - 10160} of 16384 left ` +
        'and nothing more could be freed (largest consumers: big 10000, requester 100, middle 50)',
    );
  });
});
