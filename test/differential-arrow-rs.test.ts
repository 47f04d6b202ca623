/**
 * Our reader against arrow-rs on damaged bytes: uncompressed partitions of random flat and nested
 * types (support/nested.ts's buildAny), each damaged by one or two random byte changes (a bit
 * flipped, a byte set, an aligned int32 set to a small number) and committed with the checksum of
 * the damaged bytes, so that the reader parses them. arrow-rs (support/arrow-rs.ts) validates every
 * array it builds. For every damaged partition:
 *   1. if both read it, they read the same rows;
 *   2. whatever our reader reads, `columnar-shuffle read` can hand out: its batches written through
 *      table-to-ipc.ts read back as the same rows;
 *   3. our reader ends in a ShuffleError or rows, never another exception.
 * Either may refuse what the other reads: arrow-rs checks UTF-8, views' prefixes and the
 * flatbuffers' own layout, which our reader leaves to arrow-js; our reader checks what it needs
 * before indexing.
 *
 * The first runs found three defects, all fixed: a null count above the length or without a bitmap
 * (read as valid here, as nulls by others once `read` wrote it out), a union's Null child of 2^32
 * rows (`read` failed untyped), and buffers overlapping in memory (`read` wrote fewer bytes than its
 * header said). DIFF_SEED and DIFF_CASES override the seed and the number of partitions.
 */
import { Field, Int32, makeData, Schema, tableFromIPC, type DataType } from 'apache-arrow';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { ShuffleError, ShuffleReader, ShuffleWriter } from '../src/index.js';
import { throughArrowRs } from './support/arrow-rs.js';
import { batchOf, TYPE_CASES } from './support/columns.js';
import { forEachDamagedPartition } from './support/damage.js';
import { buildAny, NESTED_KINDS, nestedType, type DictionaryContext } from './support/nested.js';
import { commitOnePartition, partitionBytesOf } from './support/one-partition-output.js';
import { Rng } from './support/random.js';
import { rowsOf } from './support/rows.js';
import { firstDifference } from './support/shuffle-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const SEED = Number(process.env.DIFF_SEED ?? 20261207);
const CASES = Number(process.env.DIFF_CASES ?? 80);
/** damaged copies of each partition */
const DAMAGES = 20;

let dir: string;
beforeAll(async () => (dir = await makeTempDir('cs-differential-')));
afterAll(async () => removeDir(dir));

/** One uncompressed partition of up to 60 rows of a random flat or nested type (and a partition id column, dropped). */
async function partitionOf(rng: Rng, name: string): Promise<{ type: DataType; bytes: Uint8Array }> {
  const type = rng.chance(0.5) ? rng.pick(TYPE_CASES).make() : nestedType(rng.pick(NESTED_KINDS), rng, rng.int(1, 3));
  const schema = new Schema([new Field('v', type, true), new Field('p', new Int32(), false)]);
  const rows = rng.int(1, 60);
  const dictionaries: DictionaryContext = new Map();
  const batch = batchOf(schema, [buildAny(type, rows, rng, { nullRate: 0.2, dictionaries }), makeData({ type: new Int32(), length: rows, nullCount: 0, data: new Int32Array(rows) })], rows);
  const prefix = join(dir, name);
  const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'partition-id', column: 'p' }, outputPrefix: prefix, codec: 'none' });
  await writer.write(batch);
  await writer.finish();
  return { type, bytes: await partitionBytesOf(prefix) };
}

/** Our reader's rows of `bytes` as the one partition of the output at `prefix` (replacing the one there), and those of its batches written as `read` writes them; or its ShuffleError. */
async function oursOf(bytes: Uint8Array, prefix: string): Promise<{ rows: string[]; handedOut: string[] } | ShuffleError> {
  await commitOnePartition(prefix, bytes, true);
  const rows: string[] = [];
  const handedOut: string[] = [];
  let reader: ShuffleReader | undefined;
  try {
    reader = await ShuffleReader.open(prefix);
    for await (const batch of reader.readPartition(0)) {
      rows.push(...rowsOf(batch));
      for (const written of tableFromIPC(tableToIpcStream(batch)).batches) handedOut.push(...rowsOf(written));
    }
    return { rows, handedOut };
  } catch (error) {
    if (error instanceof ShuffleError) return error;
    throw error;
  } finally {
    await reader?.close();
  }
}

/** arrow-rs's rows of `bytes`, read back from its own encoding of them; null when it refuses them. */
function arrowRsRows(bytes: Uint8Array): string[] | null {
  let encoded: Uint8Array;
  try {
    encoded = throughArrowRs(bytes);
  } catch {
    return null;
  }
  return tableFromIPC(encoded).batches.flatMap((batch) => rowsOf(batch));
}

test(`our reader and arrow-rs read ${CASES} x ${DAMAGES} damaged uncompressed partitions alike, and what ours reads, read hands out (seed ${SEED})`, async () => {
  const tally = { bothRead: 0, oursOnly: 0, arrowRsOnly: 0, neither: 0 };
  await forEachDamagedPartition(CASES, DAMAGES, (c) => new Rng(SEED * 7919 + c), partitionOf, async (changed) => {
    const ours = await oursOf(changed, join(dir, 'damaged'));
    const theirs = arrowRsRows(changed);
    if (!(ours instanceof ShuffleError)) {
      expect(firstDifference(ours.handedOut, ours.rows, "read's output")).toBeNull();
      if (theirs !== null) expect(firstDifference(ours.rows, theirs, 'our reader against arrow-rs')).toBeNull();
    }
    const key = ours instanceof ShuffleError ? (theirs === null ? 'neither' : 'arrowRsOnly') : theirs === null ? 'oursOnly' : 'bothRead';
    tally[key]++;
  });
  console.log(`differential-arrow-rs (seed ${SEED}): ${JSON.stringify(tally)}`);
  expect(tally.bothRead).toBeGreaterThan(0);
}, 600_000);
