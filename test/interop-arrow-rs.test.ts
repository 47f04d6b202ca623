/**
 * arrow-rs reads our partitions: the Rust implementation DataFusion, Comet, Ballista and Sail
 * read shuffles with (parquet-wasm 0.8.0, arrow-rs 59.3, support/arrow-rs.ts). Its IPC reader
 * validates every array it builds: offsets within their data, UTF-8, views within their
 * variadic buffers, union type ids, dictionary indices within their dictionary.
 *
 * It is built without its LZ4 and ZSTD features, so it reads uncompressed streams here:
 *   1. the columnar writer's partitions written with codec none, every type, flat and nested,
 *      sliced, with dictionary deltas and with replacements;
 *   2. what `columnar-shuffle read` hands out (always uncompressed) from either writer's
 *      partitions, lz4-compressed.
 * What arrow-rs reads, written back by arrow-rs and decoded by flechette, must be what
 * flechette decodes from the same bytes (interop-flechette.test.ts checks those against the
 * input). Compressed partitions are read by flechette and polars (interop-*.test.ts).
 *
 * The other way round, what arrow-rs writes (its layouts, 64-byte buffer alignment, dictionaries
 * sent again when they change) is what our reader reads as a partition, and what the command
 * line's input reader and both writers take.
 */
import { Field, Int32, List, makeData, Map_, Null, Schema, Struct, Table, Utf8, type DataType, type RecordBatch } from 'apache-arrow';
import { tableFromIPC } from '@uwdata/flechette';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { openArrowInput } from '../src/cli/input.js';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { createShuffleWriter, ShuffleReader, type DictionaryUpdates } from '../src/index.js';
import { WRITER_KINDS, type WriterKind } from '../src/writer-kind.js';
import { throughArrowRs } from './support/arrow-rs.js';
import { cli } from './support/cli-run.js';
import { batchOf, TYPE_CASES } from './support/columns.js';
import { DECODE, registerFlechetteCodecs, rowsOf, withinNumbers } from './support/flechette.js';
import { buildAny, NESTED_KINDS, nestedType, type DictionaryContext } from './support/nested.js';
import { commitOnePartition } from './support/one-partition-output.js';
import { asBytes } from './support/polars.js';
import { Rng } from './support/random.js';
import { firstDifference } from './support/shuffle-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const PARTITIONS = 3;

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-arrow-rs-')));
afterEach(async () => removeDir(dir));
beforeAll(registerFlechetteCodecs);

/**
 * [name, type maker] for every flat type, three random types of each nested kind (1-3 deep), and
 * a list and a map of Null values (arrow-js's IPC writer slices their children: table-to-ipc.ts).
 */
const TYPES: (readonly [string, (rng: Rng) => DataType])[] = [
  ...TYPE_CASES.map((c) => [c.name, () => c.make()] as const),
  ['list of Null', () => new List(new Field('item', new Null(), true))],
  ['map of Utf8 to Null', () => new Map_(new Field('entries', new Struct<{ key: Utf8; value: Null }>([new Field('key', new Utf8(), false), new Field('value', new Null(), true)]), false))],
  ...NESTED_KINDS.flatMap((kind) => [1, 2, 3].map((seed) => [`${kind}, nested (seed ${seed})`, (rng: Rng) => nestedType(kind, rng, rng.int(1, 3))] as const)),
];

/** Three batches of (value of `type`, p), 0-150 rows each, most of them slices unless `sliced` is false; dictionaries extended from batch to batch. */
function batchesOf(type: DataType, rng: Rng, sliced = true): RecordBatch[] {
  const schema = new Schema([new Field('v', type, true), new Field('p', new Int32(), false)]);
  const dictionaries: DictionaryContext = new Map();
  return Array.from({ length: 3 }, () => {
    const rows = rng.int(0, 150);
    const p = Int32Array.from({ length: rows }, () => rng.int(0, PARTITIONS - 1));
    const values = withinNumbers(buildAny(type, rows, rng, { nullRate: 0.2, dictionaries, dictionaryMode: 'extend' }));
    const batch = batchOf(schema, [values, makeData({ type: new Int32(), length: rows, nullCount: 0, data: p })], rows);
    return rows < 3 || !sliced ? batch : batch.slice(1, rng.int(2, rows));
  });
}

async function shuffle(batches: Iterable<RecordBatch> | AsyncIterable<RecordBatch>, writer: WriterKind, codec: 'none' | 'lz4', dictionaryUpdates: DictionaryUpdates = 'delta'): Promise<string> {
  const prefix = join(dir, `${writer}-${codec}-${dictionaryUpdates}`);
  const options = { numPartitions: PARTITIONS, partitioning: { kind: 'partition-id', column: 'p' } as const, outputPrefix: prefix, codec, dictionaryUpdates, maxBatchRows: 40 };
  const mapWriter = await createShuffleWriter(writer, options);
  for await (const batch of batches) await mapWriter.write(batch);
  await mapWriter.finish();
  return prefix;
}

/** The first difference between arrow-rs's reading of `stream` and flechette's, or null. */
function arrowRsDifference(stream: Uint8Array, what: string): string | null {
  return firstDifference(rowsOf(tableFromIPC(throughArrowRs(stream), DECODE)), rowsOf(tableFromIPC(stream, DECODE)), what);
}

describe('arrow-rs reads every uncompressed partition of the columnar writer as flechette reads it', () => {
  test.each(TYPES)('%s', async (name, makeType) => {
    const rng = new Rng(4000 + TYPES.findIndex(([n]) => n === name) * 11);
    const type = makeType(rng);
    const batches = batchesOf(type, rng);
    for (const updates of ['delta', 'replacement'] as const) {
      const reader = await ShuffleReader.open(await shuffle(batches, 'hash', 'none', updates));
      try {
        let rows = 0;
        for (let p = 0; p < PARTITIONS; p++) {
          const bytes = await reader.partitionBytes(p);
          if (bytes.byteLength === 0) continue; // (an empty partition has no bytes at all)
          expect(arrowRsDifference(bytes, `${String(type)}, dictionary updates ${updates}, partition ${p}`)).toBeNull();
          rows += tableFromIPC(bytes, DECODE).numRows;
        }
        expect(rows).toBe(batches.reduce((sum, b) => sum + b.numRows, 0));
      } finally {
        await reader.close();
      }
    }
  });
});

describe.each(WRITER_KINDS)("arrow-rs reads what `columnar-shuffle read` hands out of the %s writer's partitions", (writer) => {
  test.each(TYPES)('%s', async (name, makeType) => {
    const rng = new Rng(6000 + TYPES.findIndex(([n]) => n === name) * 13 + WRITER_KINDS.indexOf(writer));
    const type = makeType(rng);
    const batches = batchesOf(type, rng);
    const prefix = await shuffle(batches, writer, 'lz4');
    let rows = 0;
    for (let p = 0; p < PARTITIONS; p++) {
      const output = join(dir, `partition-${p}.arrows`);
      const run = await cli(['read', prefix, '--partition', String(p), '--output', output]);
      expect(run.code, run.stderr).toBe(0);
      const stream = asBytes(await readFile(output));
      expect(arrowRsDifference(stream, `${String(type)}, partition ${p}`)).toBeNull();
      rows += tableFromIPC(stream, DECODE).numRows;
    }
    expect(rows).toBe(batches.reduce((sum, b) => sum + b.numRows, 0));
  });
});

describe('what arrow-rs writes is read by our reader as a partition, and taken by the input reader and both writers', () => {
  test.each(TYPES)('%s', async (name, makeType) => {
    const rng = new Rng(8000 + TYPES.findIndex(([n]) => n === name) * 17);
    const type = makeType(rng);
    const batches = batchesOf(type, rng, false); // (table-to-ipc.ts cannot write a sliced dense union of views)
    const stream = throughArrowRs(tableToIpcStream(new Table(batches)));
    const rows = rowsOf(tableFromIPC(stream, DECODE));
    expect(rows.length).toBe(batches.reduce((sum, b) => sum + b.numRows, 0));

    // arrow-rs's stream as the one partition of an output
    const asPartition = join(dir, 'arrow-rs-partition');
    await commitOnePartition(asPartition, stream, false);
    const reader = await ShuffleReader.open(asPartition);
    try {
      const read: string[] = [];
      for await (const batch of reader.readPartition(0)) read.push(...rowsOf(tableFromIPC(tableToIpcStream(batch), DECODE)));
      expect(firstDifference(read, rows, `our reader of arrow-rs's stream of ${String(type)}`)).toBeNull();
    } finally {
      await reader.close();
    }

    // arrow-rs's stream as the input of a shuffle: each partition holds its rows, in order
    const expected: string[][] = Array.from({ length: PARTITIONS }, () => []);
    const decoded = tableFromIPC(stream, DECODE);
    const ids = decoded.getChild('p')!;
    rowsOf(decoded, 'p').forEach((row, i) => expected[ids.at(i) as number]!.push(row));
    const path = join(dir, 'input.arrows');
    await writeFile(path, stream);
    for (const writer of WRITER_KINDS) {
      const input = await openArrowInput(path);
      let prefix: string;
      try {
        prefix = await shuffle(input.batches(), writer, 'lz4');
      } finally {
        await input.close();
      }
      const output = await ShuffleReader.open(prefix);
      try {
        for (let p = 0; p < PARTITIONS; p++) {
          const got: string[] = [];
          for await (const batch of output.readPartition(p)) got.push(...rowsOf(tableFromIPC(tableToIpcStream(batch), DECODE)));
          expect(firstDifference(got, expected[p]!, `${writer} writer, ${String(type)}, partition ${p}`)).toBeNull();
        }
      } finally {
        await output.close();
      }
    }
  });
});
