/**
 * Nested and dictionary columns go through the shuffle and come back exactly, through both
 * writers (the columnar one buffer by buffer, the sort writer as compact rows): every nested
 * kind, nulls at every level, sliced parents, through our reader and (columnar writer: its
 * partitions are IPC streams) through arrow-js's own tableFromIPC on each partition's byte range.
 */
import { Field, Int64, List, RecordBatch, Schema, Struct, makeData, tableFromIPC, tableToIPC, type DataType } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { buildColumn, containsView } from './support/columns.js';
import { buildAny, NESTED_KINDS, nestedType, type DictionaryContext, type NestedKind } from './support/nested.js';
import { Rng } from './support/random.js';
import { firstDifference, makeTempDir, readWithArrowJs, removeDir, runShuffle } from './support/shuffle-harness.js';
import { WRITER_KINDS, type WriterKind } from '../src/writer-kind.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

/** Batches of (key int64, value of `type`), some sliced, some read back from IPC. */
function batchesOf(type: DataType, rng: Rng, count: number, rows: () => number, nullRate = 0.2): RecordBatch[] {
  const schema = new Schema([new Field('key', new Int64(), false), new Field('value', type, true)]);
  const dictionaries: DictionaryContext = new Map();
  return Array.from({ length: count }, () => {
    const n = rows();
    const key = buildColumn(new Int64(), n, { bitmap: false, nullRate: 0 }, rng);
    const value = buildAny(type, n, rng, { nullRate, dictionaries });
    let batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children: [key, value] }));
    const form = rng.int(0, 3);
    if (form === 1 && n > 2) {
      const begin = rng.int(0, n - 1);
      batch = batch.slice(begin, rng.int(begin, n));
    } else if (form === 2 && !hasDictionary(type) && !containsView(type)) {
      batch = tableFromIPC(tableToIPC([batch] as never, 'stream')).batches[0]!;
    }
    return batch;
  });
}

function hasDictionary(type: DataType): boolean {
  return type.typeId === -1 || (type.children ?? []).some((f) => hasDictionary(f.type));
}

async function roundTrip(writer: WriterKind, type: DataType, seed: number, numPartitions: number, codec: 'lz4' | 'zstd' | 'none', maxBatchRows?: number): Promise<void> {
  const rng = new Rng(seed);
  const batches = batchesOf(type, rng, rng.int(1, 4), () => rng.int(0, 300));
  // the sort writer with small pages and blocks, so rows cross pages and partitions span blocks
  const sizes = writer === 'sort' ? { pageBytes: 1 << 14, blockBytes: rng.pick([256, 4096]) } : {};
  const outcome = await runShuffle(dir, { numPartitions, partitioning: { kind: 'hash', keys: ['key'] }, codec, maxBatchRows, overwrite: true, ...sizes }, batches, 'map', writer);
  outcome.actual.forEach((rows, p) => {
    const difference = firstDifference(rows, outcome.expected[p]!, `${String(type)} partition ${p}`);
    if (difference !== null) throw new Error(difference);
  });
  if (writer === 'sort') return;
  const viaArrowJs = await readWithArrowJs(outcome.prefix);
  viaArrowJs.forEach((rows, p) => {
    const difference = firstDifference(rows, outcome.expected[p]!, `arrow-js tableFromIPC, ${String(type)} partition ${p}`);
    if (difference !== null) throw new Error(difference);
  });
}

describe.each(WRITER_KINDS)('%s writer: every nested kind round-trips exactly, through our reader (and arrow-js tableFromIPC)', (writer) => {
  for (const kind of NESTED_KINDS) {
    test.each([1, 2, 3, 4, 5, 6])(`${kind} (seed %i)`, async (seed) => {
      const rng = new Rng(seed * 7919 + NESTED_KINDS.indexOf(kind));
      const type = nestedType(kind as NestedKind, rng, rng.int(1, 3));
      await roundTrip(writer, type, seed, rng.pick([1, 3, 16, 200]), rng.pick(['lz4', 'zstd', 'none'] as const), rng.pick([undefined, 7, 64]));
    });
  }
});

test('nested bytes enter the buffer sizing: rows of a 100-item list<int64> get partition buffers of about 80 rows, not maxBatchRows (Gluten #8088)', async () => {
  const rows = 20_000;
  const items = 100;
  const type = new List(new Field('item', new Int64(), true));
  const child = makeData({ type: new Int64(), length: rows * items, data: new BigInt64Array(rows * items) });
  const lists = makeData({ type, length: rows, valueOffsets: Int32Array.from({ length: rows + 1 }, (_, i) => i * items), child });
  const schema = new Schema([new Field('l', type, true)]);
  const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children: [lists] }));
  // memLimit 1 MiB over 4 partitions: (1 MiB / (4 + 800) B / 4) >> 2 = 81 rows per partition buffer
  const outcome = await runShuffle(dir, { numPartitions: 4, partitioning: { kind: 'round-robin' }, memLimit: 1 << 20, memLimitFloor: 0, mergeThreshold: 0 }, [batch]);
  const sizes = outcome.actualBatchRows.flat();
  expect(Math.max(...sizes)).toBeLessThanOrEqual(81);
  expect(Math.max(...sizes)).toBeGreaterThanOrEqual(60);
  expect(sizes.reduce((a, b) => a + b, 0)).toBe(rows);
});
