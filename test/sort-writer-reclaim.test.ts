/**
 * What the sort writer's reclaim() returns is what the pool got back: the
 * pool stops asking other consumers once the bytes freed cover its request,
 * so a reclaim that under-reports makes them spill for nothing. Rows larger
 * than a page get a page of their own, which a spill drops (standard pages
 * become spares, which reclaim drops too); both count.
 */
import { join } from 'node:path';
import { Field, Int32, makeData, RecordBatch, Schema, Struct, Utf8 } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { MemoryPool, ShuffleReader, SortShuffleWriter } from '../src/index.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

const PAGE_BYTES = 4096;
const schema = new Schema([new Field('s', new Utf8(), false), new Field('p', new Int32(), false)]);

/** One row per string, each to partition (index % 2). */
function batchOf(strings: readonly string[]): RecordBatch {
  const bytes = new TextEncoder().encode(strings.join(''));
  const offsets = new Int32Array(strings.length + 1);
  strings.forEach((s, i) => (offsets[i + 1] = offsets[i]! + s.length));
  const s = makeData({ type: new Utf8(), length: strings.length, valueOffsets: offsets, data: bytes });
  const p = makeData({ type: new Int32(), length: strings.length, data: Int32Array.from(strings, (_, i) => i % 2) });
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: strings.length, children: [s, p] }));
}

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-sort-reclaim-')));
afterEach(async () => removeDir(dir));

describe('SortShuffleWriter.reclaim returns exactly the bytes its reservation gave back', () => {
  test.each([
    ['rows smaller than a page', ['a'.repeat(100), 'b'.repeat(2000), 'c'.repeat(50)]],
    ['a row larger than a page (a page of its own)', ['x'.repeat(9000)]],
    ['small rows and rows larger than a page together', ['a'.repeat(100), 'y'.repeat(9000), 'b'.repeat(3000), 'z'.repeat(20_000)]],
  ])('%s', async (_, strings) => {
    const pool = new MemoryPool();
    const prefix = join(dir, 'out');
    const writer = await SortShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'partition-id', column: 'p' }, outputPrefix: prefix, spillDir: dir, memoryPool: pool, pageBytes: PAGE_BYTES, codec: 'none' });
    await writer.write(batchOf(strings));
    const before = pool.reserved;
    const freed = await writer.reclaim(1);
    expect(freed).toBeGreaterThan(0);
    expect(freed).toBe(before - pool.reserved);

    const result = await writer.finish();
    expect(result.spills).toBe(1);
    const reader = await ShuffleReader.open(prefix);
    const read: string[] = [];
    for (let p = 0; p < 2; p++) for await (const batch of reader.readPartition(p)) for (const row of batch) read.push(row!.s as string);
    await reader.close();
    expect(read.sort()).toEqual([...strings].sort());
    expect(await listFiles(dir)).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
  });
});
