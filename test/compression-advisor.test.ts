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

  test('STORE_RAW never compresses', () => {
    expect(STORE_RAW.shouldCompress(0)).toBe(false);
  });
});
