/**
 * Our reader against flechette on damaged compressed bytes, as differential-arrow-rs.test.ts is
 * against arrow-rs on uncompressed ones (arrow-rs here is built without LZ4 and ZSTD): partitions
 * of random flat and nested types written with lz4 or zstd in small batches (every buffer
 * compressed, dictionaries sent as deltas or replacements), each damaged by one or two random byte
 * changes and committed with the checksum of the damaged bytes. For every damaged partition:
 *   1. our reader ends in a ShuffleError or rows, never another exception;
 *   2. whatever it reads, `columnar-shuffle read` hands out a stream flechette reads (rows are
 *      compared as flechette decodes both sides), unless flechette meets a limit of its own there
 *      and on the damaged partition too (flechettesOwnLimit);
 *   3. if flechette reads the damaged partition too, it reads the same rows.
 * flechette runs in a child process with a heap of its own (support/flechette-process.ts): on
 * one damaged partition it ran out of memory, which kept this test a scratch script until then.
 *
 * A scratch version of it (400 partitions x 20) found that a view column's null count was never
 * checked and that a field of type NONE was read as a Null column; its first run of 300 partitions
 * (seed 777), that a negative null count on a column with a bitmap read every row as valid, and
 * one of seed 778, that a nanosecond time of 32 bits was read as 32-bit values, and one of seed
 * 781, that `read` (and the coalescer) failed on a dictionary of lists no dictionary batch came
 * for (all fixed, 2026-12-07; pinned in ipc-reader-bounds.test.ts, metadata-counts.test.ts,
 * table-to-ipc.test.ts and missing-dictionary.test.ts). DIFF_SEED
 * and DIFF_CASES override the seed and the number of partitions.
 */
import { Field, Int32, makeData, Schema, type DataType } from 'apache-arrow';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { ShuffleError, ShuffleReader, ShuffleWriter } from '../src/index.js';
import { batchOf, TYPE_CASES } from './support/columns.js';
import { forEachDamagedPartition } from './support/damage.js';
import { withinNumbers } from './support/flechette.js';
import { FlechetteProcess, type FlechetteReading } from './support/flechette-process.js';
import { buildAny, NESTED_KINDS, nestedType, type DictionaryContext } from './support/nested.js';
import { commitOnePartition, partitionBytesOf } from './support/one-partition-output.js';
import { Rng } from './support/random.js';
import { firstDifference } from './support/shuffle-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const SEED = Number(process.env.DIFF_SEED ?? 20261207);
const CASES = Number(process.env.DIFF_CASES ?? 40);
/** damaged copies of each partition */
const DAMAGES = 20;
/** flechette's refusal of a value it would give as a JS number beyond 2^53 (support/flechette.ts's withinNumbers) */
const BEYOND_NUMBERS = /BigInt exceeds integer number representation/;
/** flechette's process ran out of memory or time (a decimal's scale damaged to 33554434: it computes 10^scale) */
const ENDED = /flechette's process ended|no answer in/;

/**
 * Whether flechette refused `read`'s output of a damaged partition for a limit of its own, which it
 * met on the damaged partition too: a value past 2^53 (damage makes such values), or memory or time
 * (a scale of 33554434 is a valid decimal here and for Arrow C++, which checks only the precision).
 */
function flechettesOwnLimit(handedOut: string, damaged: string): boolean {
  return BEYOND_NUMBERS.test(handedOut) || (ENDED.test(handedOut) && ENDED.test(damaged));
}

let dir: string;
const flechette = new FlechetteProcess();
beforeAll(async () => (dir = await makeTempDir('cs-differential-flechette-')));
afterAll(async () => {
  await flechette.close();
  await removeDir(dir);
});

/** One partition of a random flat or nested type, in 1 to 3 batches of up to 40 rows, every buffer compressed with lz4 or zstd. */
async function partitionOf(rng: Rng, name: string): Promise<{ type: DataType; bytes: Uint8Array }> {
  const type = rng.chance(0.5) ? rng.pick(TYPE_CASES).make() : nestedType(rng.pick(NESTED_KINDS), rng, rng.int(1, 3));
  const schema = new Schema([new Field('v', type, true), new Field('p', new Int32(), false)]);
  const dictionaries: DictionaryContext = new Map();
  const prefix = join(dir, name);
  const writer = await ShuffleWriter.create({
    numPartitions: 1,
    partitioning: { kind: 'partition-id', column: 'p' },
    outputPrefix: prefix,
    codec: rng.pick(['lz4', 'zstd'] as const),
    compressionMinRows: 0,
    minCompressionSavings: 0,
    maxBatchRows: rng.pick([8, 20, 1000]),
    dictionaryUpdates: rng.pick(['delta', 'replacement'] as const),
  });
  for (let b = rng.int(1, 3); b > 0; b--) {
    const rows = rng.int(1, 40);
    const values = withinNumbers(buildAny(type, rows, rng, { nullRate: 0.2, dictionaries, dictionaryMode: 'extend' }));
    await writer.write(batchOf(schema, [values, makeData({ type: new Int32(), length: rows, nullCount: 0, data: new Int32Array(rows) })], rows));
  }
  await writer.finish();
  return { type, bytes: await partitionBytesOf(prefix) };
}

/** What our reader makes of `bytes` as the one partition at `prefix`: the streams `read` hands out for its batches, or its ShuffleError. */
async function oursOf(bytes: Uint8Array, prefix: string): Promise<Uint8Array[] | ShuffleError> {
  await commitOnePartition(prefix, bytes, true);
  const handedOut: Uint8Array[] = [];
  let reader: ShuffleReader | undefined;
  try {
    reader = await ShuffleReader.open(prefix);
    for await (const batch of reader.readPartition(0)) handedOut.push(tableToIpcStream(batch));
    return handedOut;
  } catch (error) {
    if (error instanceof ShuffleError) return error;
    throw error;
  } finally {
    await reader?.close();
  }
}

/** flechette's rows of every stream, in order, or its first refusal. */
async function rowsOfAll(streams: readonly Uint8Array[]): Promise<FlechetteReading> {
  const rows: string[] = [];
  for (const stream of streams) {
    const reading = await flechette.read(stream);
    if ('refused' in reading) return reading;
    rows.push(...reading.rows);
  }
  return { rows };
}

test(`our reader and flechette read ${CASES} x ${DAMAGES} damaged compressed partitions alike, and what ours reads, read hands out (seed ${SEED})`, async () => {
  const tally = { bothRead: 0, oursOnly: 0, flechetteOnly: 0, neither: 0 };
  await forEachDamagedPartition(CASES, DAMAGES, (c) => new Rng(SEED * 100003 + c), partitionOf, async (changed) => {
    const ours = await oursOf(changed, join(dir, 'damaged'));
    const theirs = await flechette.read(changed);
    if (!(ours instanceof ShuffleError)) {
      const handedOut = await rowsOfAll(ours);
      const refused = 'refused' in handedOut && !('refused' in theirs && flechettesOwnLimit(handedOut.refused, theirs.refused));
      expect(refused ? `flechette refused read's output: ${(handedOut as { refused: string }).refused}` : null).toBeNull();
      if ('rows' in handedOut && 'rows' in theirs) expect(firstDifference(handedOut.rows, theirs.rows, 'our reader against flechette')).toBeNull();
    }
    const key = ours instanceof ShuffleError ? ('refused' in theirs ? 'neither' : 'flechetteOnly') : 'refused' in theirs ? 'oursOnly' : 'bothRead';
    tally[key]++;
  });
  console.log(`differential-flechette (seed ${SEED}): ${JSON.stringify(tally)}, flechette's process replaced ${flechette.replaced} times`);
  expect(tally.bothRead).toBeGreaterThan(0);
}, 600_000);
