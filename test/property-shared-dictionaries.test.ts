/**
 * Property (fixed seed): columns that share one dictionary id, with any index types (Int8 to
 * Int64, signed or not, the 8-bit ones most often), at the top level or inside a list or a struct, over batches whose
 * dictionary is the one before, an extension of it, or an unrelated one of up to 300 values
 * (so a shared dictionary must start over where its narrowest index type ends), come back
 * whole from both writers: read by our reader as written and coalesced, and, for the columnar
 * writer, by arrow-js. The sort writer refuses exactly the schemas one row of which could not
 * be read back (index types of different reach, and a list among the columns).
 *
 * Random schemas elsewhere (test/support/nested.ts) give every dictionary an id of its own:
 * the thirtieth mutation sweep found the defect of shared ids by reading the code
 * (docs/RELIABILITY.md). Expected rows are arrow-js's own values of the input
 * (test/support/js-values.ts). Seed policy as in property-roundtrip.test.ts: FC_SEED / FC_RUNS override.
 */
import { join } from 'node:path';
import { Dictionary, Field, Int16, Int32, Int64, Int8, List, makeData, RecordBatch, Schema, Struct, tableFromIPC, Uint16, Uint32, Uint8, Utf8, Vector, type Data } from 'apache-arrow';
import fc from 'fast-check';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { createShuffleWriter } from '../src/writer-kind.js';
import { indicesOf, words, type IndexType } from './support/dictionary-columns.js';
import { expectedByPid, jsRows } from './support/js-values.js';
import { Rng } from './support/random.js';
import { registerArrowJsDecoders } from './support/shuffle-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const SEED = process.env.FC_SEED !== undefined ? Number(process.env.FC_SEED) : 20261207;
const RUNS = process.env.FC_RUNS !== undefined ? Number(process.env.FC_RUNS) : 60;

const INDEX_TYPES: readonly (() => IndexType)[] = [() => new Int8(), () => new Uint8(), () => new Int16(), () => new Uint16(), () => new Int32(), () => new Uint32(), () => new Int64()];
/** How many dictionary values an index type reaches (the writers cap indices at 2^31 - 1). */
const reachOf = (type: IndexType) => Math.min(2 ** (type.bitWidth - (type.isSigned ? 1 : 0)), 2 ** 31);

type Placement = 'top' | 'list' | 'struct';
type Mode = 'reuse' | 'extend' | 'new';

const caseArb = fc.record({
  columns: fc.array(fc.record({ index: fc.oneof({ arbitrary: fc.constantFrom(0, 1), weight: 2 }, { arbitrary: fc.nat({ max: INDEX_TYPES.length - 1 }), weight: 1 }), placement: fc.constantFrom<Placement>('top', 'list', 'struct') }), { minLength: 2, maxLength: 3 }),
  batches: fc.array(fc.record({ mode: fc.constantFrom<Mode>('reuse', 'extend', 'new'), added: fc.integer({ min: 1, max: 300 }), rows: fc.integer({ min: 1, max: 60 }) }), { minLength: 1, maxLength: 5 }),
  numPartitions: fc.integer({ min: 1, max: 3 }),
  maxBatchRows: fc.integer({ min: 1, max: 64 }),
  coalesceRows: fc.integer({ min: 1, max: 50 }),
  seed: fc.integer(),
});
type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

registerArrowJsDecoders(); // arrow-js reads our lz4 partitions

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-shared-dict-')));
afterEach(async () => removeDir(dir));

/** The schema (pid first) and the batches of a case: every column's values from the one dictionary its batch brings. */
function build(c: Case): { schema: Schema; batches: RecordBatch[]; mixedWithList: boolean } {
  const rng = new Rng(c.seed);
  const values = new Utf8();
  const types = c.columns.map(({ index }) => new Dictionary(values, INDEX_TYPES[index]!() as Int32, 1));
  const outer = (type: Dictionary, placement: Placement) =>
    placement === 'top' ? type : placement === 'list' ? new List(new Field('item', type, true)) : new Struct([new Field('d', type, true)]);
  const fields = c.columns.map(({ placement }, i) => new Field(`c${i}`, outer(types[i]!, placement), true));
  const schema = new Schema([new Field('pid', new Int32(), false), ...fields]);
  const reaches = types.map((t) => reachOf(t.indices as IndexType));
  const mixedWithList = new Set(reaches).size > 1 && c.columns.some((col) => col.placement === 'list');

  let dictionary: Vector | null = null;
  const batches = c.batches.map(({ mode, added, rows }, b) => {
    const tag = `b${b}_`;
    dictionary = dictionary === null || mode === 'new' ? words(tag, added) : mode === 'extend' ? new Vector([...dictionary.data, ...words(tag, added).data]) : dictionary;
    const d = dictionary;
    const indexFor = (i: number) => (rng.chance(0.1) ? null : rng.int(0, Math.min(d.length, reaches[i]!) - 1));
    const columns = c.columns.map(({ placement }, i): Data => {
      const type = types[i]!;
      if (placement === 'top') return indicesOf(type, d, Array.from({ length: rows }, () => indexFor(i)));
      if (placement === 'struct') {
        const nulls = Array.from({ length: rows }, () => rng.chance(0.1));
        const bitmap = Uint8Array.from({ length: (rows + 7) >>> 3 }, (_, k) => nulls.slice(8 * k, 8 * k + 8).reduce((bits, isNull, j) => (isNull ? bits : bits | (1 << j)), 0));
        const child = indicesOf(type, d, Array.from({ length: rows }, () => indexFor(i)));
        return makeData({ type: fields[i]!.type as Struct, length: rows, nullCount: nulls.filter(Boolean).length, nullBitmap: bitmap, children: [child] } as never) as Data;
      }
      const lengths = Array.from({ length: rows }, () => rng.int(0, 4));
      const offsets = Int32Array.from({ length: rows + 1 }, (_, k) => lengths.slice(0, k).reduce((a, n) => a + n, 0));
      const items = indicesOf(type, d, Array.from({ length: offsets[rows]! }, () => indexFor(i)));
      return makeData({ type: fields[i]!.type as List, length: rows, nullCount: 0, valueOffsets: offsets, child: items } as never) as Data;
    });
    const pid = makeData({ type: new Int32(), length: rows, data: Int32Array.from({ length: rows }, () => rng.int(0, c.numPartitions - 1)) });
    return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children: [pid, ...columns] }));
  });
  return { schema, batches, mixedWithList };
}

async function collect(batches: AsyncIterable<RecordBatch>): Promise<RecordBatch[]> {
  const out: RecordBatch[] = [];
  for await (const b of batches) out.push(b);
  return out;
}

test('property (fixed seed): columns sharing a dictionary id come back whole from both writers, and the sort writer refuses only the schemas it could not read back', async () => {
  await fc.assert(
    fc.asyncProperty(caseArb, async (c) => {
      const { batches, mixedWithList } = build(c);
      const expected = expectedByPid(batches, c.numPartitions);
      for (const kind of ['hash', 'sort'] as const) {
        const prefix = join(dir, `${kind}-out`);
        const writer = await createShuffleWriter(kind, { numPartitions: c.numPartitions, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, overwrite: true, codec: 'lz4', maxBatchRows: c.maxBatchRows });
        const refused = await (async () => {
          for (const b of batches) await writer.write(b);
          await writer.finish();
        })().then(() => null, (error: unknown) => error);
        if (kind === 'sort' && mixedWithList) {
          expect(refused).toMatchObject({ code: 'CS_UNSUPPORTED_TYPE' });
          await writer.abort();
          continue;
        }
        expect(refused).toBeNull();
        const reader = await ShuffleReader.open(prefix);
        try {
          for (let p = 0; p < c.numPartitions; p++) {
            expect((await collect(reader.readPartition(p))).flatMap(jsRows), `${kind}, partition ${p}`).toEqual(expected[p]);
            expect((await collect(reader.readPartition(p, { coalesceRows: c.coalesceRows }))).flatMap(jsRows), `${kind}, partition ${p}, coalesced`).toEqual(expected[p]);
            if (kind === 'hash') {
              const bytes = await reader.partitionBytes(p);
              expect(bytes.byteLength === 0 ? [] : tableFromIPC(bytes).batches.flatMap(jsRows), `arrow-js, partition ${p}`).toEqual(expected[p]);
            }
          }
        } finally {
          await reader.close();
        }
      }
    }),
    { seed: SEED, numRuns: RUNS },
  );
});
