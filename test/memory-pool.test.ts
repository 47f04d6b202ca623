import { describe, expect, test } from 'vitest';
import { MemoryLimitError, MemoryPool, type Reclaimable } from '../src/memory/memory-pool.js';

describe('MemoryPool accounting', () => {
  test('reserved and peak follow every grow and shrink', () => {
    const pool = new MemoryPool(100);
    const a = pool.register('a');
    const b = pool.register('b');
    expect(a.tryGrow(60)).toBe(true);
    expect(b.tryGrow(30)).toBe(true);
    expect(pool.reserved).toBe(90);
    a.shrink(50);
    expect(pool.reserved).toBe(40);
    expect(pool.peak).toBe(90);
    expect(a.peak).toBe(60);
    b.free();
    expect(pool.reserved).toBe(10);
    expect(pool.consumers().map((c) => c.name)).toEqual(['a']);
  });

  test('peak counts idle recycled buffers too: what the pool holds, not only what is reserved', () => {
    const pool = new MemoryPool(1 << 30, { releaseIdleAfterMs: Infinity });
    const a = pool.register('a');
    const bytes = 1 << 20;
    a.tryGrow(bytes);
    a.recycler.give(a.recycler.take(bytes));
    a.shrink(bytes); // 1 MiB idle in the recycler, nothing reserved
    expect(pool.idle).toBe(bytes);
    pool.register('b').tryGrow(4096);
    expect(pool.held).toBe(bytes + 4096);
    expect(pool.peak).toBe(bytes + 4096);
  });

  test('tryGrow past the limit returns false and changes nothing', () => {
    const pool = new MemoryPool(100);
    const a = pool.register('a');
    expect(a.tryGrow(80)).toBe(true);
    expect(a.tryGrow(21)).toBe(false);
    expect(a.size).toBe(80);
    expect(pool.reserved).toBe(80);
  });

  test('shrinking more than is held is refused', () => {
    const a = new MemoryPool(100).register('a');
    a.tryGrow(10);
    expect(() => a.shrink(11)).toThrow(RangeError);
  });

  test('an unbounded pool grants everything and still counts', () => {
    const pool = new MemoryPool();
    const a = pool.register('a');
    expect(a.tryGrow(2 ** 40)).toBe(true);
    expect(pool.reserved).toBe(2 ** 40);
  });

  test('a non-positive limit is refused', () => {
    expect(() => new MemoryPool(0)).toThrow(/positive/);
  });
});

describe('MemoryPool reclaim protocol', () => {
  function spiller(pool: MemoryPool, name: string, log: string[]) {
    const holder: { reservation?: ReturnType<MemoryPool['register']> } = {};
    const reclaimable: Reclaimable = {
      async reclaim(bytes) {
        const freed = Math.min(bytes, holder.reservation!.size);
        log.push(`${name} asked ${bytes} freed ${freed}`);
        holder.reservation!.shrink(freed);
        return freed;
      },
    };
    holder.reservation = pool.register(name, reclaimable);
    return holder.reservation;
  }

  test('grow asks the largest reclaimable consumer to free what is missing, then succeeds', async () => {
    const log: string[] = [];
    const pool = new MemoryPool(100);
    const small = spiller(pool, 'small', log);
    const big = spiller(pool, 'big', log);
    small.tryGrow(20);
    big.tryGrow(70);
    const requester = pool.register('requester');
    await requester.grow(40);
    expect(log).toEqual(['big asked 30 freed 30']);
    expect(requester.size).toBe(40);
    expect(pool.reserved).toBe(100);
  });

  test('the requester is asked last, after the others', async () => {
    const log: string[] = [];
    const pool = new MemoryPool(100);
    const self = spiller(pool, 'self', log);
    const other = spiller(pool, 'other', log);
    self.tryGrow(60);
    other.tryGrow(30);
    await self.grow(50);
    expect(log).toEqual(['other asked 40 freed 30', 'self asked 10 freed 10']);
  });

  test('a consumer that freed nothing but took memory while it was asked is asked again (a shared-pool fuzz found a grow refused while its writer held spillable payloads)', async () => {
    const pool = new MemoryPool(100);
    const log: string[] = [];
    let rounds = 0;
    const busy: Reclaimable = {
      async reclaim(bytes) {
        rounds++;
        if (rounds === 1) {
          // its last spill had just taken everything; meanwhile it went on and cached what the pool had left
          busyReservation.tryGrow(10);
          log.push(`busy asked ${bytes} freed 0`);
          return 0;
        }
        const freed = Math.min(bytes, busyReservation.size);
        busyReservation.shrink(freed);
        log.push(`busy asked ${bytes} freed ${freed}`);
        return freed;
      },
    };
    const busyReservation = pool.register('busy', busy);
    busyReservation.tryGrow(60);
    const requester = pool.register('requester');
    requester.tryGrow(30);
    await requester.grow(20);
    expect(log).toEqual(['busy asked 10 freed 0', 'busy asked 20 freed 20']);
    expect(requester.size).toBe(50);
  });

  test('memory freed by a reclaim this grow waited for is granted at once, before a consumer that goes on working takes it back', async () => {
    const pool = new MemoryPool(100);
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    // a writer that spills half of what it holds, and whose writing fills the pool again a moment later
    const greedy: Reclaimable = {
      async reclaim() {
        await sleep(1);
        greedyReservation.shrink(40);
        setTimeout(() => greedyReservation.tryGrow(pool.available), 2);
        return 40;
      },
    };
    const greedyReservation = pool.register('greedy', greedy);
    greedyReservation.tryGrow(80);
    // another that takes long to find it has nothing to give
    const slow: Reclaimable = { reclaim: async () => (await sleep(20), 0) };
    pool.register('slow', slow).tryGrow(5);
    const first = pool.register('first');
    first.tryGrow(5);
    const requester = pool.register('requester');
    requester.tryGrow(10);
    // the pool is full: first's grow starts greedy's reclaim, and requester's waits for it
    await Promise.all([first.grow(1), requester.grow(15)]);
    expect(requester.size).toBe(25);
    expect(first.size).toBe(6);
  });

  // Regression: the consumer's abort freed its reservation while its grow waited for another consumer's spill; the grow
  // was then granted to the reservation that had left the pool, and those bytes stayed reserved for good.
  test('a reservation freed while its grow waits for a reclaim is not granted: the grow fails with CS_ABORTED and the pool keeps nothing of it', async () => {
    const pool = new MemoryPool(100);
    const requester = pool.register('requester');
    requester.tryGrow(10);
    const slow: Reclaimable = {
      async reclaim(bytes) {
        requester.free(); // the requester is aborted while this consumer spills
        await new Promise((resolve) => setTimeout(resolve, 5));
        other.shrink(bytes);
        return bytes;
      },
    };
    const other = pool.register('other', slow);
    other.tryGrow(90);
    await expect(requester.grow(50)).rejects.toMatchObject({ code: 'CS_ABORTED' });
    expect(pool.reserved).toBe(90 - 50);
    expect(pool.consumers().map((c) => c.name)).toEqual(['other']);
    expect(() => requester.tryGrow(1)).toThrow(/left the pool/);
    requester.shrink(10); // what a step still on its way releases was released by free(): nothing changes
    expect(pool.reserved).toBe(40);
  });

  test("a requester whose own reclaim frees memory and then throws gets its error, and is not granted the grow (it kept the bytes it asked for)", async () => {
    const pool = new MemoryPool(100);
    const spiller = pool.register('spiller', {
      reclaim: async () => {
        spiller.shrink(60); // spilled some, then the disk filled
        throw new Error('disk full');
      },
    });
    spiller.tryGrow(90);
    await expect(spiller.grow(50)).rejects.toThrow('disk full');
    expect(spiller.size).toBe(30);
    expect(pool.reserved).toBe(30);
  });

  test('a requester whose own reclaim frees memory and then throws undefined fails all the same: what it throws is a failure whatever it is', async () => {
    const pool = new MemoryPool(100);
    const spiller = pool.register('spiller', {
      reclaim: async () => {
        spiller.shrink(60);
        throw undefined;
      },
    });
    spiller.tryGrow(90);
    const outcome = await spiller.grow(50).then(
      () => 'granted',
      (thrown: unknown) => ({ thrown }),
    );
    expect(outcome).toEqual({ thrown: undefined });
    expect(spiller.size).toBe(30);
  });

  test('when nothing can be freed, grow fails with a MemoryLimitError that says who, how much and what remains', async () => {
    const pool = new MemoryPool(100);
    const holder = pool.register('ShuffleWriter[3]');
    holder.tryGrow(90);
    const error = await holder.grow(20).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MemoryLimitError);
    expect((error as MemoryLimitError).code).toBe('CS_MEMORY_LIMIT');
    expect((error as Error).message).toMatch(/ShuffleWriter\[3\] asked for 20 more bytes \(holding 90\) but the pool has 10 of 100 left/);
    expect(holder.size).toBe(90);
  });
});

describe('MemoryPool.share: what each of n consumers running at once sizes itself for', () => {
  test('limit / n, rounded down; Infinity without a limit', () => {
    expect(new MemoryPool(4 * 1024 * 1024).share()).toBe(4 * 1024 * 1024);
    expect(new MemoryPool(10).share(3)).toBe(3);
    expect(new MemoryPool().share(4)).toBe(Number.POSITIVE_INFINITY);
  });

  test('a number of tasks that is not an integer >= 1 is a RangeError, not a share of Infinity or NaN bytes', () => {
    for (const tasks of [0, -1, 1.5, Number.NaN, '2' as unknown as number]) expect(() => new MemoryPool(10).share(tasks), String(tasks)).toThrow(RangeError);
  });
});
