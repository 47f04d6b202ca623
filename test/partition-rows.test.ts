import fc from 'fast-check';
import { expect, test } from 'vitest';
import { PartitionRows } from '../src/writer/partition-rows.js';

test('the documented worked example: ids [3,1,1,1,2,2,0]', () => {
  const rows = new PartitionRows(4);
  rows.build(Uint32Array.of(3, 1, 1, 1, 2, 2, 0), 7);
  expect([...rows.partition2RowOffset]).toEqual([0, 1, 4, 6, 7]);
  expect([...rows.rowOffset2RowId.subarray(0, 7)]).toEqual([6, 1, 2, 3, 4, 5, 0]);
  expect([...rows.usedPartitions.subarray(0, rows.usedCount)]).toEqual([0, 1, 2, 3]);
  // the writer halves its chunk while one partition gets more than maxBatchRows rows of it
  expect(rows.maxRowCount).toBe(3);
});

test('only partitions that received rows are listed as used', () => {
  const rows = new PartitionRows(10);
  rows.build(Uint32Array.of(7, 2, 7), 3);
  expect([...rows.usedPartitions.subarray(0, rows.usedCount)]).toEqual([2, 7]);
  expect(rows.rowCount(7)).toBe(2);
  expect(rows.rowCount(0)).toBe(0);
});

test('arrays are reused across batches of different sizes', () => {
  const rows = new PartitionRows(3);
  rows.build(Uint32Array.of(0, 1, 2, 0, 1, 2), 6);
  rows.build(Uint32Array.of(2, 2), 2);
  expect([...rows.partition2RowOffset]).toEqual([0, 0, 0, 2]);
  expect([...rows.rowOffset2RowId.subarray(0, 2)]).toEqual([0, 1]);
  expect(rows.usedCount).toBe(1);
});

test('grouping equals a stable sort of row ids by partition id', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 50 }).chain((n) => fc.tuple(fc.constant(n), fc.array(fc.nat(n - 1), { maxLength: 500 }))), ([n, ids]) => {
      const rows = new PartitionRows(n);
      rows.build(Uint32Array.from(ids), ids.length);
      const expected = ids.map((pid, row) => ({ pid, row })).sort((a, b) => a.pid - b.pid || a.row - b.row).map((x) => x.row);
      expect([...rows.rowOffset2RowId.subarray(0, ids.length)]).toEqual(expected);
      for (let p = 0; p < n; p++) expect(rows.rowCount(p)).toBe(ids.filter((x) => x === p).length);
      expect(rows.maxRowCount).toBe(Math.max(0, ...Array.from({ length: n }, (_, p) => ids.filter((x) => x === p).length)));
    }),
  );
});
