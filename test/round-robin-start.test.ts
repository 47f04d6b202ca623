import { describe, expect, test } from 'vitest';
import { roundRobinStart, scalaBytesHash, XorShiftRandom } from '../src/writer/round-robin-start.js';

describe('scala MurmurHash3.bytesHash is standard murmur3_x86_32 (the seed hash of XORShiftRandom)', () => {
  test.each([
    ['', 0, 0x00000000],
    ['', 1, 0x514e28b7],
    ['test', 0, 0xba6bd213],
    ['Hello, world!', 1234, 0xfaf6cdb3],
    ['The quick brown fox jumps over the lazy dog', 0, 0x2e4ff723],
  ])('murmur3_x86_32(%j, seed %i) = %i', (text, seed, expected) => {
    expect(scalaBytesHash(new TextEncoder().encode(text), seed) >>> 0).toBe(expected);
  });
});

describe('XORShiftRandom.nextInt follows java.util.Random.nextInt(bound) over the xorshift step', () => {
  // Printed by java.util.Random with next(bits) overridden by Spark's xorshift step (OpenJDK 17),
  // started from the raw state: two nextInt(bound) calls per bound.
  const bounds = [1, 2, 3, 7, 8, 200, 1000, 4096, 10007, 2147483647];
  test.each([
    [123456789n, '0,0 1,0 1,0 3,6 7,3 130,181 130,381 3912,1856 8116,7358 2051463130,973578381'],
    [-987654321987n, '0,0 1,0 1,1 2,3 6,1 50,102 450,702 3553,521 5162,3273 1863148450,273664702'],
  ])('state %i', (state, expected) => {
    const got = bounds.map((bound) => {
      const random = new XorShiftRandom(state);
      return `${random.nextInt(bound)},${random.nextInt(bound)}`;
    });
    expect(got.join(' ')).toBe(expected);
  });
});

describe('roundRobinStart', () => {
  // Printed by OpenJDK 17: Spark's XORShiftRandom (its hashSeed over ByteBuffer.putLong's big-endian
  // bytes, Scala's MurmurHash3.bytesHash, the xorshift next(bits)) transcribed into a java.util.Random
  // subclass, and the JDK's own nextInt(bound): new XORShiftRandom(mapId).nextInt(n)
  const ns = [1, 7, 200, 1000, 4096, 10000];
  test.each([
    [0, '0 2 28 28 993 8028'],
    [1, '0 5 103 703 977 8703'],
    [2, '0 1 28 828 3907 8828'],
    [3, '0 6 47 447 2976 6447'],
    [17, '0 3 180 380 380 6380'],
    [1000, '0 4 98 698 2180 5698'],
    [123456, '0 0 46 646 2153 4646'],
    [2147483647, '0 2 80 880 1612 1880'],
  ])("map %i starts where Spark's new XORShiftRandom(mapId).nextInt(n) does, for n = 1, 7, 200, 1000, 4096, 10000", (mapId, expected) => {
    expect(ns.map((n) => roundRobinStart(mapId, n)).join(' ')).toBe(expected);
  });


  test('is deterministic per map task and within [0, n)', () => {
    for (const n of [1, 2, 7, 200, 1000]) {
      for (let mapId = 0; mapId < 50; mapId++) {
        const start = roundRobinStart(mapId, n);
        expect(start).toBe(roundRobinStart(mapId, n));
        expect(start >= 0 && start < n).toBe(true);
      }
    }
  });

  test('spreads the starts of different map tasks', () => {
    const starts = new Set(Array.from({ length: 100 }, (_, mapId) => roundRobinStart(mapId, 200)));
    expect(starts.size).toBeGreaterThan(50);
  });
});
