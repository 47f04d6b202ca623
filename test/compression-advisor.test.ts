import { describe, expect, test } from 'vitest';
import { CompressionAdvisor, STORE_RAW } from '../src/format/compression-advisor.js';

const MISS = [1000, 990] as const; // saves 1 %
const HIT = [1000, 500] as const;

describe('CompressionAdvisor', () => {
  test('keeps compressing a position whose buffers shrink', () => {
    const advisor = new CompressionAdvisor();
    for (let i = 0; i < 100; i++) {
      expect(advisor.shouldCompress(0)).toBe(true);
      advisor.record(0, ...HIT);
    }
  });

  test('after four misses it skips 16 buffers, then probes once, and doubles the skip after another miss', () => {
    const advisor = new CompressionAdvisor();
    for (let i = 0; i < 4; i++) {
      expect(advisor.shouldCompress(1)).toBe(true);
      advisor.record(1, ...MISS);
    }
    const decisions = Array.from({ length: 17 }, () => advisor.shouldCompress(1));
    expect(decisions.slice(0, 16).every((d) => !d)).toBe(true);
    expect(decisions[16]).toBe(true); // the probe
    expect(advisor.shouldCompress(1)).toBe(false); // while the probe is out, nothing else is tried
    advisor.record(1, ...MISS);
    const next = Array.from({ length: 33 }, () => advisor.shouldCompress(1));
    expect(next.filter((d) => d).length).toBe(1);
    expect(next[32]).toBe(true);
  });

  test('a probe that shrinks brings the position back to compressing every buffer', () => {
    const advisor = new CompressionAdvisor();
    for (let i = 0; i < 4; i++) {
      advisor.shouldCompress(2);
      advisor.record(2, ...MISS);
    }
    for (let i = 0; i < 16; i++) advisor.shouldCompress(2);
    expect(advisor.shouldCompress(2)).toBe(true);
    advisor.record(2, ...HIT);
    expect(Array.from({ length: 10 }, () => advisor.shouldCompress(2)).every((d) => d)).toBe(true);
  });

  test('positions are independent', () => {
    const advisor = new CompressionAdvisor();
    for (let i = 0; i < 4; i++) {
      advisor.shouldCompress(0);
      advisor.record(0, ...MISS);
    }
    expect(advisor.shouldCompress(0)).toBe(false);
    expect(advisor.shouldCompress(1)).toBe(true);
  });

  test('by default a buffer must save 15 %: 12 % is a miss, 15 % a hit; the bar is a constructor argument', () => {
    const misses = (advisor: CompressionAdvisor, compressed: number) => {
      for (let i = 0; i < 4; i++) {
        advisor.shouldCompress(0);
        advisor.record(0, 1000, compressed);
      }
      return !advisor.shouldCompress(0);
    };
    expect(misses(new CompressionAdvisor(), 880)).toBe(true);
    expect(misses(new CompressionAdvisor(), 850)).toBe(false);
    expect(misses(new CompressionAdvisor(0.1), 880)).toBe(false);
    expect(misses(new CompressionAdvisor(0), 999)).toBe(false);
    expect(misses(new CompressionAdvisor(0), 1000)).toBe(false); // saving nothing still meets a bar of 0
  });

  test('STORE_RAW never compresses', () => {
    expect(STORE_RAW.shouldCompress(0)).toBe(false);
  });

  test('until a position has an outcome, at most four attempts are out; later callers wait for one', async () => {
    const advisor = new CompressionAdvisor();
    for (let i = 0; i < 4; i++) {
      expect(advisor.settled(5)).toBeUndefined();
      expect(advisor.shouldCompress(5)).toBe(true);
    }
    const wait = advisor.settled(5);
    expect(wait).toBeInstanceOf(Promise);
    let woken = false;
    void wait!.then(() => (woken = true));
    advisor.record(5, ...MISS);
    await Promise.resolve();
    expect(woken).toBe(true);
    expect(advisor.settled(5)).toBeDefined(); // one miss known, three out: still a guess
    for (let i = 0; i < 3; i++) advisor.record(5, ...MISS);
    expect(advisor.settled(5)).toBeUndefined(); // four misses: skipping, no need to wait
    expect(advisor.shouldCompress(5)).toBe(false);
  });

  test('after a hit nobody waits, and an abandoned attempt frees its place', () => {
    const advisor = new CompressionAdvisor();
    for (let i = 0; i < 4; i++) advisor.shouldCompress(6);
    expect(advisor.settled(6)).toBeDefined();
    advisor.abandon(6);
    expect(advisor.settled(6)).toBeUndefined();
    advisor.shouldCompress(6);
    advisor.record(6, ...HIT);
    for (let i = 0; i < 10; i++) advisor.shouldCompress(6);
    expect(advisor.settled(6)).toBeUndefined();
  });
});
