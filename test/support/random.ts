/**
 * A small deterministic PRNG (mulberry32) so that a column is a pure function of
 * (type, length, options, seed): fast-check only has to generate the seed and the
 * structure, and a failing case can be rebuilt from the printed counterexample.
 */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  /** A uniformly random unsigned 32-bit integer. */
  u32(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    return this.u32() / 4294967296;
  }

  /** An integer in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.int(0, items.length - 1)]!;
  }

  fill(bytes: Uint8Array): Uint8Array {
    let i = 0;
    for (; i + 4 <= bytes.length; i += 4) {
      const v = this.u32();
      bytes[i] = v;
      bytes[i + 1] = v >>> 8;
      bytes[i + 2] = v >>> 16;
      bytes[i + 3] = v >>> 24;
    }
    for (; i < bytes.length; i++) bytes[i] = this.u32();
    return bytes;
  }

  /** A fresh seed for a sub-generator. */
  fork(): Rng {
    return new Rng(this.u32());
  }
}
