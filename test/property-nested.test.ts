/**
 * Property: for random nested schemas (1-3 columns of lists, large lists, fixed-size lists,
 * structs, maps, sparse and dense unions and dictionaries over the flat types, up to 4 deep),
 * random batches (0-400 rows, random null rates at every level, slices, IPC round trips,
 * dictionaries shared, extended or replaced between batches), random partition counts,
 * codecs, partitionings (hash on an int64, a struct or a dictionary key), small buffers and
 * tight memory limits, every partition comes back exactly, in input order:
 *   1. through our reader, and through readPartitions with coalesceRows;
 *   2. through arrow-js's own tableFromIPC on the partition's byte range (a standard stream;
 *      columnar writer only: the sort writer's partitions are blocks of rows);
 *   3. under a memory limit, the pool never exceeds it and no spill file is left.
 * Both writers (the sort writer with random page and block sizes).
 * Seed policy as in property-roundtrip.test.ts: FC_SEED / FC_RUNS override.
 */
import { readdir } from 'node:fs/promises';
import { Dictionary, Field, Int16, Int32, Int64, RecordBatch, Schema, Struct, Utf8, makeData, tableFromIPC, tableToIPC, type DataType } from 'apache-arrow';
import fc from 'fast-check';
import { describe, test } from 'vitest';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import type { Partitioning } from '../src/writer/partitioner.js';
import { buildColumn, containsView } from './support/columns.js';
import { buildAny, randomType, type DictionaryContext } from './support/nested.js';
import { Rng } from './support/random.js';
import { collect, firstDifference, makeTempDir, readWithArrowJs, removeDir, runShuffle, streamedDifference } from './support/shuffle-harness.js';
import { WRITER_KINDS } from '../src/writer-kind.js';

const SEED = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : 0x0e57_ed;
const RUNS = process.env.FC_RUNS !== undefined ? Number(process.env.FC_RUNS) : 80;

interface NestedCase {
  typeSeed: number;
  depth: number;
  columns: number;
  key: 'int64' | 'struct' | 'dictionary' | 'round-robin' | 'single';
  batches: { rows: number; nullRate: number; form: 'plain' | 'sliced' | 'ipc'; sliceA: number; sliceB: number; seed: number; dictionaryMode: 'reuse' | 'extend' | 'new' }[];
  numPartitions: number;
  codec: 'lz4' | 'zstd' | 'none';
  maxBatchRows: number | undefined;
  memoryLimit: number | undefined;
  coalesceRows: number;
  pageBytes: number;
  blockBytes: number;
}

const caseArb: fc.Arbitrary<NestedCase> = fc.record({
  typeSeed: fc.nat(),
  depth: fc.integer({ min: 1, max: 4 }),
  columns: fc.integer({ min: 1, max: 3 }),
  key: fc.constantFrom<NestedCase['key']>('int64', 'int64', 'struct', 'dictionary', 'round-robin', 'single'),
  batches: fc.array(
    fc.record({
      rows: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 400 })),
      nullRate: fc.constantFrom(0, 0.1, 0.3, 1),
      form: fc.constantFrom<'plain' | 'sliced' | 'ipc'>('plain', 'plain', 'sliced', 'ipc'),
      sliceA: fc.nat({ max: 400 }),
      sliceB: fc.nat({ max: 400 }),
      seed: fc.nat(),
      dictionaryMode: fc.constantFrom<'reuse' | 'extend' | 'new'>('reuse', 'extend', 'new'),
    }),
    { minLength: 1, maxLength: 4 },
  ),
  numPartitions: fc.oneof(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 300 })),
  codec: fc.constantFrom<'lz4' | 'zstd' | 'none'>('lz4', 'zstd', 'none'),
  maxBatchRows: fc.oneof(fc.integer({ min: 2, max: 16 }), fc.integer({ min: 1, max: 300 }), fc.constant(undefined)),
  memoryLimit: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.integer({ min: 4 << 20, max: 16 << 20 }) }),
  coalesceRows: fc.integer({ min: 1, max: 500 }),
  pageBytes: fc.constantFrom(1 << 12, 1 << 14, 1 << 20),
  blockBytes: fc.constantFrom(256, 4096, 1 << 16),
});

const KEY_TYPES: Record<'struct' | 'dictionary', () => DataType> = {
  struct: () => new Struct([new Field('id', new Int32(), true), new Field('name', new Utf8(), true)]),
  dictionary: () => new Dictionary(new Utf8(), new Int16()),
};

function build(c: NestedCase): { batches: RecordBatch[]; partitioning: Partitioning } {
  const typeRng = new Rng(c.typeSeed);
  const fields = [new Field('key', c.key === 'struct' || c.key === 'dictionary' ? KEY_TYPES[c.key]() : new Int64(), true)];
  for (let i = 0; i < c.columns; i++) fields.push(new Field(`c${i}`, randomType(typeRng, c.depth, 0.8), true));
  const schema = new Schema(fields);
  const dictionaries: DictionaryContext = new Map();
  const batches = c.batches.map((b) => {
    const rng = new Rng(b.seed);
    const options = { nullRate: b.nullRate === 1 ? 0.9 : b.nullRate, dictionaries, dictionaryMode: b.dictionaryMode };
    const children = fields.map((f, i) => (i === 0 && c.key === 'int64' ? buildColumn(f.type, b.rows, { bitmap: false, nullRate: 0 }, rng) : buildAny(f.type, b.rows, rng, options)));
    const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: b.rows, nullCount: 0, children }));
    const begin = b.sliceA % (b.rows + 1);
    const end = begin + (b.sliceB % (b.rows - begin + 1));
    if (b.form === 'sliced') return batch.slice(begin, end);
    // arrow-js's IPC writer cannot take view columns under lists (containsView)
    if (b.form === 'ipc' && b.rows > 0 && !fields.some((f) => containsView(f.type))) return tableFromIPC(tableToIPC([batch] as never, 'stream')).batches[0] ?? batch;
    return batch;
  });
  const partitioning: Partitioning = c.key === 'round-robin' ? { kind: 'round-robin' } : c.key === 'single' ? { kind: 'single' } : { kind: 'hash', keys: ['key'] };
  return { batches, partitioning };
}

function fail(message: string | null): void {
  if (message !== null) throw new Error(message);
}

describe.each(WRITER_KINDS)('%s writer: shuffle round trip over random nested schemas', (writer) => {
  test(
    'every partition comes back exactly, in order, through our reader (also coalesced, and read a message at a time) and arrow-js, within the memory limit, leaving no spill file',
    async () => {
      console.log(`property-nested (${writer} writer): fast-check seed ${SEED}, ${RUNS} runs (override with FC_SEED / FC_RUNS)`);
      await fc.assert(
        fc.asyncProperty(caseArb, async (c) => {
          const { batches, partitioning } = build(c);
          const dir = await makeTempDir();
          try {
            const pool = c.memoryLimit === undefined ? undefined : new MemoryPool(c.memoryLimit);
            const sizes = writer === 'sort' ? { pageBytes: c.pageBytes, blockBytes: c.blockBytes } : {};
            const options = { numPartitions: c.numPartitions, partitioning, codec: c.codec, maxBatchRows: c.maxBatchRows, memoryPool: pool, spillDir: dir, ...sizes };
            const outcome = await runShuffle(dir, options, batches, 'map', writer);
            outcome.actual.forEach((rows, p) => fail(firstDifference(rows, outcome.expected[p]!, `partition ${p}`)));
            if (writer === 'hash') {
              const viaArrowJs = await readWithArrowJs(outcome.prefix);
              viaArrowJs.forEach((rows, p) => fail(firstDifference(rows, outcome.expected[p]!, `arrow-js tableFromIPC, partition ${p}`)));
            }
            const reader = await ShuffleReader.open(outcome.prefix);
            try {
              const coalesced = await collect(reader.readPartitions(0, c.numPartitions, { coalesceRows: c.coalesceRows }));
              fail(firstDifference(coalesced.rows, outcome.expected.flat(), `readPartitions with coalesceRows ${c.coalesceRows}`));
            } finally {
              await reader.close();
            }
            fail(await streamedDifference(outcome.prefix, outcome.expected));
            if (pool !== undefined) {
              if (pool.peak > pool.limit) throw new Error(`pool peak ${pool.peak} over its limit ${pool.limit}`);
              if (pool.reserved !== 0) throw new Error(`${pool.reserved} bytes still reserved after finish`);
            }
            const left = (await readdir(dir)).filter((name) => name.includes('spill') || name.endsWith('.tmp'));
            if (left.length > 0) throw new Error(`left behind: ${left.join(', ')}`);
          } finally {
            await removeDir(dir);
          }
        }),
        { numRuns: RUNS, seed: SEED },
      );
    },
    300_000,
  );
});
