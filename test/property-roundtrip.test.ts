/**
 * Property, for both writers (the columnar hash writer and the sort-based row writer):
 * for random flat schemas (1-6 columns of any supported type), random
 * batches (0-3000 rows, several per run, with random null rates and validity
 * representations, random slices, some read back from IPC bytes), random partition
 * counts (1-300), codecs, partitionings and small buffer sizes (many evictions and
 * resizes), a shuffle round trip
 *   1. returns exactly the input rows, as a multiset, over all partitions;
 *   2. puts every row in the partition the reference partitioner says;
 *   3. keeps every partition's rows in input order;
 * and the same rows come back through readPartitions with coalesceRows and, for
 * codec none, through arrow-js's own tableFromIPC.
 *
 * Each claim is its own property (seed SEED + 0, 1, 2), so a failure shrinks towards
 * a counterexample of that claim. Seed policy: a fixed base seed (below) so that CI
 * runs are reproducible; FC_SEED=<n> and FC_RUNS=<n> override it for exploration.
 * Each property prints its seed when it starts, and fast-check prints the seed and
 * path of any counterexample (replay it with build() from support/random-case.ts).
 */
import { describe, test } from 'vitest';
import fc from 'fast-check';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { WRITER_KINDS, type WriterKind } from '../src/writer-kind.js';
import { build, caseArb, type RoundTripCase } from './support/random-case.js';
import { collect, firstDifference, makeTempDir, multisetDifference, readWithArrowJs, removeDir, runShuffle, streamedDifference, type ShuffleOutcome } from './support/shuffle-harness.js';

const DEFAULT_SEED = 0x5eed_2024;
/** runs of each of the three properties (about 0.1 s a run on a 2-core machine) */
const DEFAULT_RUNS = 120;
const SEED = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : DEFAULT_SEED;
const RUNS = process.env.FC_RUNS !== undefined ? Number(process.env.FC_RUNS) : DEFAULT_RUNS;

function fail(message: string | null): void {
  if (message !== null) throw new Error(message);
}

/**
 * Runs `check` on the outcome of a random shuffle round trip, as a fast-check property
 * with its own seed (SEED + offset) so that the three claims explore different cases.
 */
async function assertRoundTrip(writer: WriterKind, offset: number, check: (outcome: ShuffleOutcome, c: RoundTripCase) => Promise<void> | void): Promise<void> {
  const seed = SEED + offset;
  console.log(`property-roundtrip (${writer} writer): fast-check seed ${seed}, ${RUNS} runs (override with FC_SEED=<base seed> / FC_RUNS)`);
  await fc.assert(
    fc.asyncProperty(caseArb, async (c) => {
      const { batches, options } = build(c);
      const dir = await makeTempDir();
      try {
        await check(await runShuffle(dir, options, batches, 'map', writer), c);
      } finally {
        await removeDir(dir);
      }
    }),
    { numRuns: RUNS, seed },
  );
}

const TIMEOUT = 120_000;

describe.each(WRITER_KINDS)('%s writer: shuffle round trip over random flat schemas, batches, partitionings and codecs', (writer) => {
  test(
    'no row is lost or duplicated: all partitions together hold exactly the input rows (as a multiset)',
    async () => {
      await assertRoundTrip(writer, 0, ({ actual, input, result, expected }) => {
        fail(multisetDifference(actual.flat(), input, 'all partitions'));
        if (result.rows !== input.length) throw new Error(`result.rows is ${result.rows}, ${input.length} rows were written`);
        const counted = expected.map((rows) => rows.length);
        if (result.partitionRows.some((n, p) => n !== counted[p])) {
          throw new Error(`result.partitionRows ${JSON.stringify(result.partitionRows)}, expected ${JSON.stringify(counted)}`);
        }
      });
    },
    TIMEOUT,
  );

  test(
    'every row lands in the partition the reference partitioner assigns',
    async () => {
      await assertRoundTrip(writer, 1, ({ actual, expected }) => {
        actual.forEach((rows, p) => fail(multisetDifference(rows, expected[p]!, `partition ${p}`)));
      });
    },
    TIMEOUT,
  );

  test(
    `every partition keeps its rows in input order, also through readPartitions with coalesceRows, read a message at a time${writer === 'hash' ? ' and (codec none) arrow-js tableFromIPC' : ''}`,
    async () => {
      await assertRoundTrip(writer, 2, async ({ actual, expected, prefix, options }, c) => {
        actual.forEach((rows, p) => fail(firstDifference(rows, expected[p]!, `partition ${p}`)));
        const reader = await ShuffleReader.open(prefix);
        try {
          const coalesced = await collect(reader.readPartitions(0, options.numPartitions, { coalesceRows: c.coalesceRows }));
          fail(firstDifference(coalesced.rows, expected.flat(), `readPartitions(0, n, { coalesceRows: ${c.coalesceRows} })`));
        } finally {
          await reader.close();
        }
        fail(await streamedDifference(prefix, expected));
        if (options.codec === 'none' && writer === 'hash') {
          const viaArrowJs = await readWithArrowJs(prefix);
          viaArrowJs.forEach((rows, p) => fail(firstDifference(rows, expected[p]!, `arrow-js tableFromIPC, partition ${p}`)));
        }
      });
    },
    TIMEOUT,
  );
});
