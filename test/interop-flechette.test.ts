/**
 * A second Arrow implementation reads the columnar writer's partitions: flechette
 * (@uwdata/flechette), an Arrow IPC decoder written apart from arrow-js, decodes every
 * partition of every supported type, flat and nested, whole and sliced, for each codec.
 * What it decodes must be what it decodes from the input itself, each input batch written
 * by arrow-js's IPC writer as a stream of its own (through src/format/table-to-ipc.ts, which
 * rebuilds the view columns arrow-js 21.2.0 writes wrong), so neither side's bytes come from
 * our writers or our reader.
 * Every buffer that shrinks is compressed (compressionMinRows and minCompressionSavings 0), and
 * each compressed buffer's length prefix must be its decoded length.
 *
 * polars (interop-polars.test.ts) reads the types it has; flechette also has unions,
 * intervals, every decimal width and both view types. The sort writer's partitions are
 * row blocks of its own format, read only by our reader, so they are not here. flechette is
 * pinned at 2.6.0: 2.7.0 depends on @uwdata/wk-geojson, which the npm registry does not have.
 */
import { Field, Int32, makeData, RecordBatch, Schema, type Data, type DataType } from 'apache-arrow';
import { CompressionType, tableFromIPC, tableToIPC } from '@uwdata/flechette';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { openArrowInput } from '../src/cli/input.js';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { ShuffleReader, ShuffleWriter, type CodecName, type DictionaryUpdates } from '../src/index.js';
import { batchOf, buildColumn, TYPE_CASES } from './support/columns.js';
import { buildAny, NESTED_KINDS, nestedType, type DictionaryContext, type NestedKind } from './support/nested.js';
import { Rng } from './support/random.js';
import { cli } from './support/cli-run.js';
import { DECODE, registerFlechetteCodecs, rowsOf, withinNumbers } from './support/flechette.js';
import { asBytes } from './support/polars.js';
import { firstDifference } from './support/shuffle-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const PARTITIONS = 3;
const CODECS: readonly CodecName[] = ['lz4', 'zstd', 'none'];

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-flechette-')));
afterEach(async () => removeDir(dir));

beforeAll(registerFlechetteCodecs);

/** Writes `batches` (column `p` the partition id) with the columnar writer, then decodes each partition's bytes with flechette. */
async function shuffleAndDecode(batches: Iterable<RecordBatch> | AsyncIterable<RecordBatch>, codec: CodecName, dictionaryUpdates?: DictionaryUpdates): Promise<string[][]> {
  const prefix = await shuffle(batches, codec, dictionaryUpdates);
  const reader = await ShuffleReader.open(prefix);
  try {
    const partitions: string[][] = [];
    for (let p = 0; p < PARTITIONS; p++) partitions.push(rowsOf(tableFromIPC(await reader.partitionBytes(p), DECODE)));
    return partitions;
  } finally {
    await reader.close();
  }
}

/** Writes `batches` (column `p` the partition id) with the columnar writer; returns the output's prefix. */
async function shuffle(batches: Iterable<RecordBatch> | AsyncIterable<RecordBatch>, codec: CodecName, dictionaryUpdates?: DictionaryUpdates): Promise<string> {
  const prefix = join(dir, 'map');
  const writer = await ShuffleWriter.create({ numPartitions: PARTITIONS, partitioning: { kind: 'partition-id', column: 'p' }, outputPrefix: prefix, overwrite: true, codec, dictionaryUpdates, maxBatchRows: 40, compressionMinRows: 0, minCompressionSavings: 0 });
  for await (const batch of batches) await writer.write(batch);
  await writer.finish();
  return prefix;
}

/** What each partition should hold: flechette's rows of each input batch (written alone by arrow-js), less `p`, in input order. */
function expectedPartitions(batches: RecordBatch[]): string[][] {
  const expected: string[][] = Array.from({ length: PARTITIONS }, () => []);
  for (const batch of batches) {
    const rows = rowsOf(tableFromIPC(tableToIpcStream(batch), DECODE), 'p');
    const ids = batch.getChild('p')!;
    rows.forEach((row, i) => expected[ids.get(i) as number]!.push(row));
  }
  return expected;
}

/** Each partition's rows against what it should hold: the first difference, or null. */
function difference(got: string[][], expected: string[][], type: DataType): string | null {
  for (let p = 0; p < PARTITIONS; p++) {
    const found = firstDifference(got[p]!, expected[p]!, `${String(type)}, partition ${p}`);
    if (found !== null) return found;
  }
  return null;
}

/** Batches of (value of `type`, p): `count` batches of 0-150 rows, half of them slices, the partition ids random. */
function batchesOf(type: DataType, rng: Rng, makeValues: (rows: number) => Data, count = rng.int(1, 3)): RecordBatch[] {
  const schema = new Schema([new Field('v', type, true), new Field('p', new Int32(), false)]);
  return Array.from({ length: count }, () => {
    const rows = rng.int(0, 150);
    const p = Int32Array.from({ length: rows }, () => rng.int(0, PARTITIONS - 1));
    const batch = batchOf(schema, [withinNumbers(makeValues(rows)), makeData({ type: new Int32(), length: rows, nullCount: 0, data: p })], rows);
    if (rows < 2 || rng.chance(0.5)) return batch;
    // a slice: offsets, bitmaps and views the writer must cut or shift at any bit
    const begin = rng.int(1, rows - 1);
    return batch.slice(begin, rng.int(begin, rows));
  });
}

describe.each(CODECS)('flechette decodes the columnar writer\'s partitions as it decodes the input (codec %s)', (codec) => {
  test.each(TYPE_CASES.map((c) => [c.name, c] as const))('%s', async (_name, typeCase) => {
    const rng = new Rng(1000 + TYPE_CASES.indexOf(typeCase) * 7 + CODECS.indexOf(codec));
    const type = typeCase.make();
    const batches = batchesOf(type, rng, (rows) => buildColumn(type, rows, { bitmap: true, nullRate: rng.pick([0, 0.2, 1]) }, rng));
    const got = await shuffleAndDecode(batches, codec);
    expect(difference(got, expectedPartitions(batches), type)).toBeNull();
    expect(got.flat().length).toBe(batches.reduce((sum, b) => sum + b.numRows, 0));
  });

  for (const kind of NESTED_KINDS) {
    test.each([1, 2, 3])(`${kind}, nested (seed %i)`, async (seed) => {
      const rng = new Rng(seed * 104729 + NESTED_KINDS.indexOf(kind) * 31 + CODECS.indexOf(codec));
      const type = nestedType(kind, rng, rng.int(1, 3));
      const dictionaries: DictionaryContext = new Map();
      const batches = batchesOf(type, rng, (rows) => buildAny(type, rows, rng, { nullRate: 0.2, dictionaries }));
      const got = await shuffleAndDecode(batches, codec, kind === 'dictionary' ? 'replacement' : undefined);
      expect(difference(got, expectedPartitions(batches), type)).toBeNull();
    });
  }
});

test('flechette reads dictionary deltas too: a partition whose dictionary grows over three batches', async () => {
  const rng = new Rng(77);
  const type = nestedType('dictionary', rng, 1);
  const dictionaries: DictionaryContext = new Map();
  const batches = batchesOf(type, rng, (rows) => buildAny(type, rows, rng, { nullRate: 0.1, dictionaries, dictionaryMode: 'extend' }), 3);
  expect(difference(await shuffleAndDecode(batches, 'lz4', 'delta'), expectedPartitions(batches), type)).toBeNull();
});

/** [name, type maker] for every flat type and one random type of each nested kind (nested `depthOf` deep). */
function typeCases(depthOf = (_kind: NestedKind, rng: Rng) => rng.int(1, 3)): (readonly [string, (rng: Rng) => DataType])[] {
  return [
    ...TYPE_CASES.map((c) => [c.name, () => c.make()] as const),
    ...NESTED_KINDS.map((kind) => [`${kind}, nested`, (rng: Rng) => nestedType(kind, rng, depthOf(kind, rng))] as const),
  ];
}

/**
 * The other way round: what flechette's own IPC encoder writes (its layouts, its choice of
 * compressing or storing each buffer) is what the command line's input reader and the writer
 * take. flechette re-encodes the input it decoded, as a file or a stream, compressed with each
 * codec; our partitions of it decode to the rows its own bytes decode to.
 */
const FLECHETTE_CODECS = [
  ['lz4', CompressionType.LZ4_FRAME],
  ['zstd', CompressionType.ZSTD],
  ['none', null],
] as const;

describe.each(FLECHETTE_CODECS)('an input flechette encodes (codec %s) is read and shuffled as flechette reads it', (_name, flechetteCodec) => {
  // (dictionaries of flat values only: flechette 2.6.0 cannot read back its own encoding of a dictionary of nested values)
  const cases = typeCases((kind, rng) => (kind === 'dictionary' ? 1 : rng.int(1, 3)));
  test.each(cases)('%s', async (name, makeType) => {
    const rng = new Rng(5000 + cases.findIndex(([n]) => n === name) * 13 + FLECHETTE_CODECS.findIndex(([, c]) => c === flechetteCodec));
    const type = makeType(rng);
    const dictionaries: DictionaryContext = new Map();
    const [batch] = batchesOf(type, rng, (rows) => buildAny(type, rows, rng, { nullRate: 0.2, dictionaries }), 1);
    const decoded = tableFromIPC(tableToIpcStream(batch!), DECODE);
    for (const format of ['file', 'stream'] as const) {
      const path = join(dir, `input.${format}.arrow`);
      const bytes = tableToIPC(decoded, { format, codec: flechetteCodec });
      await writeFile(path, bytes!);
      const expected: string[][] = Array.from({ length: PARTITIONS }, () => []);
      const fromFlechette = tableFromIPC(bytes!, DECODE);
      const ids = fromFlechette.getChild('p')!;
      rowsOf(fromFlechette, 'p').forEach((row, i) => expected[ids.at(i) as number]!.push(row));
      const input = await openArrowInput(path);
      try {
        expect(input.format).toBe(format);
        expect(difference(await shuffleAndDecode(input.batches(), 'lz4'), expected, type)).toBeNull();
      } finally {
        await input.close();
      }
    }
  });
});

/**
 * What `columnar-shuffle read` hands to other tools: each partition as one uncompressed stream
 * (our reader's batches, each written by arrow-js's IPC writer through table-to-ipc.ts, with its
 * dictionaries). flechette decodes it to the rows it decodes from the partition's own bytes.
 */
describe("the command line's read output is what flechette reads in the partition itself", () => {
  const cases = typeCases();
  test.each(cases)('%s', async (name, makeType) => {
    const rng = new Rng(9000 + cases.findIndex(([n]) => n === name) * 17);
    const type = makeType(rng);
    const dictionaries: DictionaryContext = new Map();
    const batches = batchesOf(type, rng, (rows) => buildAny(type, rows, rng, { nullRate: 0.2, dictionaries }));
    const prefix = await shuffle(batches, 'lz4');
    const reader = await ShuffleReader.open(prefix);
    try {
      for (let p = 0; p < PARTITIONS; p++) {
        const output = join(dir, `partition-${p}.arrow`);
        const run = await cli(['read', prefix, '--partition', String(p), '--output', output]);
        expect(run.code, run.stderr).toBe(0);
        const fromCli = rowsOf(tableFromIPC(asBytes(await readFile(output)), DECODE));
        const found = firstDifference(fromCli, rowsOf(tableFromIPC(await reader.partitionBytes(p), DECODE)), `${String(type)}, partition ${p}`);
        expect(found).toBeNull();
      }
    } finally {
      await reader.close();
    }
  });
});
