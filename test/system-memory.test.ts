/** The memory a command-line write limits itself to when not told: half the machine's, or its container's. */
import { totalmem } from 'node:os';
import { afterEach, expect, test, vi } from 'vitest';
import { defaultMemoryLimit, systemMemory } from '../src/memory/system-memory.js';

const GiB = 1024 ** 3;
afterEach(() => vi.restoreAllMocks());

test('without a container limit, the system memory is the machine memory', () => {
  vi.spyOn(process, 'constrainedMemory').mockReturnValue(0);
  expect(systemMemory()).toBe(totalmem());
});

test("cgroup v2's `max` (reported as 2^64) is no limit", () => {
  vi.spyOn(process, 'constrainedMemory').mockReturnValue(2 ** 64);
  expect(systemMemory()).toBe(totalmem());
});

test("a container limit below the machine's memory is the system memory", () => {
  vi.spyOn(process, 'constrainedMemory').mockReturnValue(Math.floor(totalmem() / 3));
  expect(systemMemory()).toBe(Math.floor(totalmem() / 3));
});

test('the default limit is half of it, in whole bytes, and never 0', () => {
  expect(defaultMemoryLimit(8 * GiB)).toBe(4 * GiB);
  expect(defaultMemoryLimit(3)).toBe(1);
  expect(defaultMemoryLimit(1)).toBe(1);
  vi.spyOn(process, 'constrainedMemory').mockReturnValue(2 * GiB);
  expect(defaultMemoryLimit()).toBe(Math.min(GiB, Math.floor(totalmem() / 2)));
});
