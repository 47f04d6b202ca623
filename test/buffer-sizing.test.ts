import { describe, expect, test } from 'vitest';
import { binarySlackBytes, chunkRows, partitionBufferRows, targetCapacity } from '../src/writer/buffer-sizing.js';

const MiB = 1024 * 1024;
const KiB = 1024;

describe('partitionBufferRows follows Gluten: min((max(memLimit, floor) / bytesPerRow / P) >> 2, maxBatchRows)', () => {
  test('the documented worked example: 128 MiB floor, 41 bytes per row, 200 partitions gives 4092 rows', () => {
    expect(partitionBufferRows({ memLimit: 64 * MiB, memLimitFloor: 128 * MiB, bytesPerRow: 41, numPartitions: 200, maxBatchRows: 4096 })).toBe(4092);
  });

  test('4000 partitions get 204 rows each', () => {
    expect(partitionBufferRows({ memLimit: 0, memLimitFloor: 128 * MiB, bytesPerRow: 41, numPartitions: 4000, maxBatchRows: 4096 })).toBe(204);
  });

  test('Gluten\'s published example: 4000 partitions x 100 B/row x 128 MiB is about 83 rows, 2 GiB about 1342', () => {
    expect(partitionBufferRows({ memLimit: 0, memLimitFloor: 128 * MiB, bytesPerRow: 100, numPartitions: 4000, maxBatchRows: 4096 })).toBe(83);
    expect(partitionBufferRows({ memLimit: 2048 * MiB, memLimitFloor: 128 * MiB, bytesPerRow: 100, numPartitions: 4000, maxBatchRows: 4096 })).toBe(1342);
  });

  test('a memory limit above the floor is used as it is', () => {
    expect(partitionBufferRows({ memLimit: 256 * MiB, memLimitFloor: 128 * MiB, bytesPerRow: 1000, numPartitions: 1000, maxBatchRows: 4096 })).toBe(67);
  });

  test('the result never exceeds maxBatchRows', () => {
    expect(partitionBufferRows({ memLimit: 0, memLimitFloor: 128 * MiB, bytesPerRow: 8, numPartitions: 1, maxBatchRows: 4096 })).toBe(4096);
  });
});

describe('binarySlackBytes: Gluten\'s 1 KiB of slack per binary buffer, capped by the per-partition share of memory', () => {
  test('the worked example: 2 MiB, 1000 partitions, 4 string columns get 65 bytes each', () => {
    expect(binarySlackBytes(2 * MiB, 2 * MiB, 1000, 4)).toBe(65);
  });
  test('with the 128 MiB floor and 200 partitions it is the full 1 KiB', () => {
    expect(binarySlackBytes(0, 128 * MiB, 200, 4)).toBe(1024);
  });
  test('the slack of all partitions together never exceeds an eighth of the memory', () => {
    for (const [memory, partitions, columns] of [[1 * MiB, 4000, 1], [2 * MiB, 1000, 4], [8 * MiB, 10000, 16], [64 * KiB, 3, 2]] as const) {
      expect(binarySlackBytes(memory, memory, partitions, columns) * partitions * columns).toBeLessThanOrEqual(memory / 8);
    }
  });
});

describe('targetCapacity resizes only outside the ±25 % band', () => {
  test.each([
    ['within the band: keep the current capacity', 4000, 4500, 100, 4000],
    ['above the band: grow', 4000, 5200, 100, 5200],
    ['below the band: shrink', 4000, 2900, 100, 2900],
    ['at the band edges: keep', 4000, 5000, 100, 4000],
    ['at the lower edge: keep', 4000, 3000, 100, 4000],
    ['never below the incoming rows', 4000, 4500, 4800, 4800],
    ['below the band, with more rows coming than the preferred size: shrinks to hold them', 4000, 2900, 3500, 3500],
    ['a new buffer gets the preferred size', 0, 300, 10, 300],
    ['a new buffer holds at least the incoming rows', 0, 0, 10, 10],
    ['never zero', 0, 0, 0, 1],
  ])('%s', (_, current, preferred, incoming, expected) => {
    expect(targetCapacity(current, preferred, incoming, 0.25)).toBe(expected);
  });

  test.each([
    ['grown to 4800 for a chunk, sized for 4000: kept while the preferred size stays within 3000..5000', 4800, 4000, 100, 4000, 4800],
    ['grown far past the band for a chunk: still kept', 8000, 4000, 100, 4000, 8000],
    ['the preferred size leaves the band of 4000: re-sized to it', 4800, 2900, 100, 4000, 2900],
    ['cut down by a reclaim (sized for 0): re-sized to the preferred size', 700, 4000, 100, 0, 4000],
  ])('%s', (_, current, preferred, incoming, sizedFor, expected) => {
    expect(targetCapacity(current, preferred, incoming, 0.25, sizedFor)).toBe(expected);
  });
});

describe('chunkRows: a batch is split partitionBufferRows x P rows at a time, or a quarter of the memory when not one row per partition fits', () => {
  test('narrow rows: partitionBufferRows for every partition', () => {
    expect(chunkRows({ memLimit: 64 * MiB, memLimitFloor: 128 * MiB, bytesPerRow: 41, numPartitions: 200, maxBatchRows: 4096 })).toBe(4092 * 200);
  });

  test('the documented worked example: 4 MiB, rows of 512 KiB, 8 partitions gives chunks of 2 rows (1 MiB), not 8 (the whole limit)', () => {
    const input = { memLimit: 4 * MiB, memLimitFloor: 4 * MiB, bytesPerRow: 512 * KiB, numPartitions: 8, maxBatchRows: 4096 };
    expect(partitionBufferRows(input)).toBe(0);
    expect(chunkRows(input)).toBe(2);
  });

  test('exactly one row per partition fits (700 B, 1 B a row, 100 partitions): chunks of one row per partition, not a quarter of the memory', () => {
    const input = { memLimit: 700, memLimitFloor: 700, bytesPerRow: 1, numPartitions: 100, maxBatchRows: 4096 };
    expect(partitionBufferRows(input)).toBe(1);
    expect(chunkRows(input)).toBe(100);
  });

  test('rows wider than a quarter of the memory: one row at a time', () => {
    expect(chunkRows({ memLimit: 2 * MiB, memLimitFloor: 2 * MiB, bytesPerRow: MiB, numPartitions: 8, maxBatchRows: 4096 })).toBe(1);
  });
});
