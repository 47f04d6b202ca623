import { join } from 'node:path';
import { makeTable, type RecordBatch } from 'apache-arrow';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { ShuffleReader, ShuffleWriter, type ShuffleWriterOptions } from '../src/index.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const batches = Array.from({ length: 40 }, (_, b) => makeTable({ v: Int32Array.from({ length: 1000 }, (_, i) => b * 1000 + i) }).batches[0]! as RecordBatch);

async function shuffle(name: string, options: Partial<ShuffleWriterOptions>) {
  const prefix = join(dir, name);
  const writer = await ShuffleWriter.create({ numPartitions: 4, partitioning: { kind: 'round-robin' }, outputPrefix: prefix, ...options });
  for (const batch of batches) await writer.write(batch);
  const result = await writer.finish();
  const reader = await ShuffleReader.open(prefix);
  const partitions: { rows: number[]; sizes: number[] }[] = [];
  for (let p = 0; p < 4; p++) {
    const rows: number[] = [];
    const sizes: number[] = [];
    for await (const batch of reader.readPartition(p)) {
      sizes.push(batch.numRows);
      for (const row of batch) rows.push(row!.v as number);
    }
    partitions.push({ rows, sizes });
  }
  await reader.close();
  return { result, partitions };
}

test('small evictions are merged into batches of up to maxBatchRows, with the same rows in the same order', async () => {
  // 200 rows per partition buffer (memLimit formula), so every eviction is small
  const small = { memLimit: 1, memLimitFloor: 200 * 4 * 4 * 4, maxBatchRows: 1000 };
  const merged = await shuffle('merged', small);
  const unmerged = await shuffle('unmerged', { ...small, mergeThreshold: 0 });
  expect(merged.partitions.map((p) => p.rows)).toEqual(unmerged.partitions.map((p) => p.rows));
  expect(Math.max(...unmerged.partitions.flatMap((p) => p.sizes))).toBeLessThanOrEqual(200);
  expect(Math.max(...merged.partitions.flatMap((p) => p.sizes))).toBe(1000);
  expect(merged.result.partitionBatches.reduce((a, b) => a + b)).toBeLessThan(unmerged.result.partitionBatches.reduce((a, b) => a + b) / 4);
});

test('batches under compressionMinRows are stored uncompressed, larger ones compressed', async () => {
  const zeros = [makeTable({ v: new Int32Array(4 * 50) }).batches[0]! as RecordBatch];
  const write = async (name: string, compressionMinRows: number) => {
    const writer = await ShuffleWriter.create({ numPartitions: 4, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, name), codec: 'lz4', compressionMinRows });
    for (const batch of zeros) await writer.write(batch);
    return (await writer.finish()).bytesWritten;
  };
  const raw = await write('raw', 100); // 50 rows per partition: below the threshold
  const compressed = await write('compressed', 10);
  expect(raw).toBeGreaterThan(compressed);
});

test('merge and compression thresholds are validated', async () => {
  await expect(ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'x'), mergeThreshold: 2 })).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
  await expect(ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'x'), compressionMinRows: -1 })).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
});
