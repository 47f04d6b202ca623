/**
 * Property: two Arrow implementations written apart from arrow-js and from us decode every
 * partition the columnar writer writes, for random schemas, to the rows they decode from our
 * reader's batches of that partition written by arrow-js's IPC writer (through
 * src/format/table-to-ipc.ts):
 *   - flechette (@uwdata/flechette), for every codec;
 *   - arrow-rs (support/arrow-rs.ts), which validates every array it builds, for codec none
 *     (it is built without its LZ4 and ZSTD features here), and for every codec, what
 *     `columnar-shuffle read` hands out (our batches written through table-to-ipc.ts).
 * Our reader's rows are checked against the input by the other property tests; this one checks
 * that the bytes we write mean the same to other readers: every layout (offsets, bitmaps, views
 * and their variadic buffers, union type ids, dictionary batches and deltas, compressed buffers
 * and their length prefixes) for
 *   1. random flat schemas, batches, slices, partitionings and codecs (support/random-case.ts);
 *   2. random nested schemas, up to 4 deep, with dictionaries extended or replaced between batches,
 *      some under a memory limit (spilled and merged).
 * The sort writer's partitions are row blocks of its own format, read only by our reader.
 *
 * flechette refuses a date in milliseconds or a month-day-nano interval past 2^53, so the input
 * keeps those values within it (withinNumbers, before range bounds are drawn from it). Seed
 * policy as in property-roundtrip.test.ts: FC_SEED / FC_RUNS override.
 */
import { Field, Int64, makeData, RecordBatch, Schema, Struct } from 'apache-arrow';
import { tableFromIPC } from '@uwdata/flechette';
import fc from 'fast-check';
import { beforeAll, describe, test } from 'vitest';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import type { CodecName, DictionaryUpdates } from '../src/index.js';
import { buildColumn } from './support/columns.js';
import { throughArrowRs } from './support/arrow-rs.js';
import { DECODE, registerFlechetteCodecs, rowsOf, withinNumbers } from './support/flechette.js';
import { buildAny, randomType, type DictionaryContext } from './support/nested.js';
import { build, caseArb } from './support/random-case.js';
import { Rng } from './support/random.js';
import { firstDifference, makeTempDir, removeDir, runShuffle, type WriterOptions } from './support/shuffle-harness.js';

const SEED = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : 0xf1ec_4e77;
const RUNS = process.env.FC_RUNS !== undefined ? Number(process.env.FC_RUNS) : 60;
const TIMEOUT = 300_000;

beforeAll(registerFlechetteCodecs);

function fail(message: string | null): void {
  if (message !== null) throw new Error(message);
}

/**
 * Writes `batches` with the columnar writer (checking our reader's rows on the way), then
 * compares flechette's reading of each partition, and arrow-rs's of each uncompressed one,
 * with flechette's reading of our reader's batches.
 */
async function otherReadersAgree(options: WriterOptions, batches: RecordBatch[]): Promise<void> {
  const dir = await makeTempDir();
  try {
    const outcome = await runShuffle(dir, options, batches, 'map', 'hash');
    outcome.actual.forEach((rows, p) => fail(firstDifference(rows, outcome.expected[p]!, `our reader, partition ${p}`)));
    const reader = await ShuffleReader.open(outcome.prefix);
    try {
      for (let p = 0; p < options.numPartitions; p++) {
        const expected: string[] = [];
        const handedOut: string[] = []; // what `columnar-shuffle read` hands out, as arrow-rs reads it
        for await (const batch of reader.readPartition(p)) {
          const stream = tableToIpcStream(batch);
          expected.push(...rowsOf(tableFromIPC(stream, DECODE)));
          handedOut.push(...rowsOf(tableFromIPC(throughArrowRs(stream), DECODE)));
        }
        fail(firstDifference(handedOut, expected, `arrow-rs reading read's output, partition ${p} of ${options.numPartitions}`));
        const bytes = await reader.partitionBytes(p);
        const got = bytes.byteLength === 0 ? [] : rowsOf(tableFromIPC(bytes, DECODE));
        fail(firstDifference(got, expected, `flechette, partition ${p} of ${options.numPartitions} (codec ${options.codec})`));
        if (options.codec === 'none' && bytes.byteLength > 0) {
          fail(firstDifference(rowsOf(tableFromIPC(throughArrowRs(bytes), DECODE)), expected, `arrow-rs, partition ${p} of ${options.numPartitions}`));
        }
      }
    } finally {
      await reader.close();
    }
  } finally {
    await removeDir(dir);
  }
}

interface NestedCase {
  typeSeed: number;
  depth: number;
  columns: number;
  batches: { rows: number; nullRate: number; sliceA: number; sliceB: number; seed: number; dictionaryMode: 'reuse' | 'extend' | 'new' }[];
  numPartitions: number;
  codec: CodecName;
  maxBatchRows: number | undefined;
  dictionaryUpdates: DictionaryUpdates;
  hashed: boolean;
  memoryLimit: number | undefined;
}

const nestedCaseArb: fc.Arbitrary<NestedCase> = fc.record({
  typeSeed: fc.nat(),
  depth: fc.integer({ min: 1, max: 4 }),
  columns: fc.integer({ min: 1, max: 3 }),
  batches: fc.array(
    fc.record({
      rows: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 300 })),
      nullRate: fc.constantFrom(0, 0.1, 0.3, 0.9),
      sliceA: fc.nat({ max: 300 }),
      sliceB: fc.nat({ max: 300 }),
      seed: fc.nat(),
      dictionaryMode: fc.constantFrom<'reuse' | 'extend' | 'new'>('reuse', 'extend', 'new'),
    }),
    { minLength: 1, maxLength: 4 },
  ),
  numPartitions: fc.oneof(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 100 })),
  codec: fc.constantFrom<CodecName>('lz4', 'zstd', 'none'),
  maxBatchRows: fc.oneof(fc.integer({ min: 2, max: 16 }), fc.constant(undefined)),
  dictionaryUpdates: fc.constantFrom<DictionaryUpdates>('delta', 'replacement'),
  hashed: fc.boolean(),
  memoryLimit: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.integer({ min: 4 << 20, max: 16 << 20 }) }),
});

/** Batches of an int64 `key` and `columns` random nested columns; half of them (at random) slices. */
function nestedBatches(c: NestedCase): RecordBatch[] {
  const typeRng = new Rng(c.typeSeed);
  const fields: Field[] = [new Field('key', new Int64(), true)];
  for (let i = 0; i < c.columns; i++) fields.push(new Field(`c${i}`, randomType(typeRng, c.depth, 0.8), true));
  const schema = new Schema(fields);
  const dictionaries: DictionaryContext = new Map();
  return c.batches.map((b) => {
    const rng = new Rng(b.seed);
    const options = { nullRate: b.nullRate, dictionaries, dictionaryMode: b.dictionaryMode };
    const children = fields.map((f, i) => (i === 0 ? buildColumn(f.type, b.rows, { bitmap: false, nullRate: 0 }, rng) : withinNumbers(buildAny(f.type, b.rows, rng, options))));
    const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: b.rows, nullCount: 0, children }));
    if (b.sliceA % 2 === 0) return batch;
    const begin = b.sliceA % (b.rows + 1);
    return batch.slice(begin, begin + (b.sliceB % (b.rows - begin + 1)));
  });
}

describe('flechette (any codec) and arrow-rs (codec none) decode every partition of the columnar writer as the rows our reader gives', () => {
  test(
    'random flat schemas, batches, slices, partitionings and codecs',
    async () => {
      console.log(`property-other-readers (flat): fast-check seed ${SEED}, ${RUNS} runs (override with FC_SEED / FC_RUNS)`);
      await fc.assert(
        fc.asyncProperty(caseArb, async (c) => {
          const { batches, options } = build(c, withinNumbers);
          await otherReadersAgree(options, batches);
        }),
        { numRuns: RUNS, seed: SEED },
      );
    },
    TIMEOUT,
  );

  test(
    'random nested schemas, with dictionaries extended or replaced between batches (as deltas or replacements), some under a memory limit',
    async () => {
      console.log(`property-other-readers (nested): fast-check seed ${SEED + 1}, ${RUNS} runs (override with FC_SEED / FC_RUNS)`);
      await fc.assert(
        fc.asyncProperty(nestedCaseArb, async (c) => {
          const options: WriterOptions = {
            numPartitions: c.numPartitions,
            partitioning: c.hashed ? { kind: 'hash', keys: ['key'] } : { kind: 'round-robin' },
            codec: c.codec,
            dictionaryUpdates: c.dictionaryUpdates,
            ...(c.maxBatchRows !== undefined ? { maxBatchRows: c.maxBatchRows } : {}),
            ...(c.memoryLimit !== undefined ? { memoryPool: new MemoryPool(c.memoryLimit) } : {}),
          };
          await otherReadersAgree(options, nestedBatches(c));
        }),
        { numRuns: RUNS, seed: SEED + 1 },
      );
    },
    TIMEOUT,
  );
});
