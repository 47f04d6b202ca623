/**
 * Round trip of every supported flat type through ShuffleWriter and ShuffleReader,
 * with every codec and with hash (when the type can be a key) and round-robin
 * partitioning. Each scenario writes the same kinds of batches: bitmaps with a few
 * nulls, half nulls, no bitmap at all, a bitmap with every bit set, an all-null
 * batch, a zero-row batch, a one-row batch, a batch sliced at an odd offset, a batch
 * read back from IPC bytes (padded buffers), a slice of such a batch, and a batch
 * bigger than maxBatchRows. Two columns: the typed column `k` and a row id, so a
 * value that travels with the wrong row is caught too.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Int32, Table, tableFromIPC, tableToIPC, type RecordBatch, type Schema } from 'apache-arrow';
import type { CodecName } from '../src/format/codec.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import type { Partitioning } from '../src/writer/partitioner.js';
import { batchOf, buildColumn, NO_BITMAP, schemaOf, sequenceColumn, TYPE_CASES, type TypeCase, type ValiditySpec } from './support/columns.js';
import { Rng } from './support/random.js';
import {
  collect,
  firstDifference,
  makeTempDir,
  multisetDifference,
  readWithArrowJs,
  removeDir,
  runShuffle,
  type ShuffleOutcome,
  type WriterOptions,
} from './support/shuffle-harness.js';

const CODECS: readonly CodecName[] = ['lz4', 'zstd', 'none'];

interface Scenario {
  label: string;
  codec: CodecName;
  partitioning: Partitioning;
  numPartitions: number;
  maxBatchRows?: number;
  mapId?: number;
}

function scenariosFor(tc: TypeCase): Scenario[] {
  const out: Scenario[] = [];
  for (const codec of CODECS) {
    if (tc.hashable) {
      // 7 partitions takes the pmod path, 8 the power-of-two mask path
      const numPartitions = codec === 'zstd' ? 8 : 7;
      out.push({ label: `${codec}, hash on k into ${numPartitions}`, codec, partitioning: { kind: 'hash', keys: ['k'] }, numPartitions, maxBatchRows: 64 });
    }
    out.push({ label: `${codec}, round-robin into 5 (mapId 3)`, codec, partitioning: { kind: 'round-robin' }, numPartitions: 5, mapId: 3 });
  }
  return out;
}

function seedOf(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The batch after an IPC round trip through arrow-js: same rows, buffers as an IPC reader lays them out. */
function throughIpc(batch: RecordBatch): RecordBatch {
  const back = tableFromIPC(tableToIPC(new Table([batch]))).batches;
  if (back.length !== 1) throw new Error(`IPC round trip gave ${back.length} batches`);
  return back[0]!;
}

function inputBatches(tc: TypeCase, rng: Rng): { schema: Schema; batches: RecordBatch[] } {
  const type = tc.make();
  const schema = schemaOf([{ name: 'k', type }, { name: 'id', type: new Int32(), nullable: false }]);
  let nextId = 0;
  const make = (length: number, validity: ValiditySpec): RecordBatch => {
    const batch = batchOf(schema, [buildColumn(type, length, validity, rng), sequenceColumn(nextId, length)], length);
    nextId += length;
    return batch;
  };
  const batches = [
    make(700, { bitmap: true, nullRate: 0.1 }),
    make(0, { bitmap: true, nullRate: 0.1 }),
    make(1500, { bitmap: true, nullRate: 0.5 }).slice(137, 1300),
    make(400, NO_BITMAP),
    throughIpc(make(900, { bitmap: true, nullRate: 0.3 })),
    make(300, { bitmap: true, nullRate: 1 }),
    throughIpc(make(1000, { bitmap: true, nullRate: 0.2 })).slice(3, 777),
    make(1, { bitmap: true, nullRate: 0 }),
    make(0, NO_BITMAP),
    make(2500, NO_BITMAP).slice(1, 2500),
    make(64, { bitmap: true, nullRate: 0 }),
  ];
  // The writer is bound to the schema as arrow-js's IPC reader builds it (generic type classes):
  // bound to the in-memory schema it would refuse the IPC-read batches (see roundtrip-schema.test.ts).
  return { schema: batches[4]!.schema, batches };
}

describe.each(TYPE_CASES)('$name', (tc) => {
  describe.each(scenariosFor(tc))('$label', (scenario) => {
    let dir = '';
    let outcome: ShuffleOutcome | undefined;
    const run = (): ShuffleOutcome => {
      if (outcome === undefined) throw new Error('the shuffle did not run (see the beforeAll error)');
      return outcome;
    };

    beforeAll(async () => {
      dir = await makeTempDir();
      const { schema, batches } = inputBatches(tc, new Rng(seedOf(`${tc.name}/${scenario.label}`)));
      const options: WriterOptions = {
        numPartitions: scenario.numPartitions,
        partitioning: scenario.partitioning,
        codec: scenario.codec,
        schema,
        ...(scenario.maxBatchRows !== undefined ? { maxBatchRows: scenario.maxBatchRows } : {}),
        ...(scenario.mapId !== undefined ? { mapId: scenario.mapId } : {}),
      };
      outcome = await runShuffle(dir, options, batches);
    });

    afterAll(async () => {
      if (dir !== '') await removeDir(dir);
    });

    test('the rows of all partitions together are exactly the input rows (as a multiset)', () => {
      const { actual, input } = run();
      expect(multisetDifference(actual.flat(), input)).toBeNull();
    });

    test('every row lands in the partition the reference partitioner assigns', () => {
      const { actual, expected } = run();
      actual.forEach((rows, p) => expect(multisetDifference(rows, expected[p]!, `partition ${p}`)).toBeNull());
    });

    test('every partition holds its rows in input order', () => {
      const { actual, expected } = run();
      actual.forEach((rows, p) => expect(firstDifference(rows, expected[p]!, `partition ${p}`)).toBeNull());
    });

    test('the write result counts the rows, batches and bytes of every partition', () => {
      const { result, expected, input, actualBatchRows } = run();
      expect(result.rows).toBe(input.length);
      expect(result.batches).toBe(11);
      expect(result.partitionRows).toEqual(expected.map((rows) => rows.length));
      expect(result.partitionBatches).toEqual(actualBatchRows.map((sizes) => sizes.length));
      expect(actualBatchRows.flat().every((n) => n > 0)).toBe(true);
      expect(result.partitionLengths.map((len) => len > 0)).toEqual(expected.map((rows) => rows.length > 0));
      expect(result.partitionLengths.reduce((a, b) => a + b, 0)).toBe(result.bytesWritten);
    });

    test('readPartitions(0, n) yields every partition, one after the other', async () => {
      const { prefix, expected } = run();
      const reader = await ShuffleReader.open(prefix);
      try {
        const all = await collect(reader.readPartitions(0, scenario.numPartitions));
        expect(firstDifference(all.rows, expected.flat())).toBeNull();
        const middle = await collect(reader.readPartitions(1, scenario.numPartitions - 1));
        expect(firstDifference(middle.rows, expected.slice(1, -1).flat(), 'partitions [1, n-1)')).toBeNull();
        const none = await collect(reader.readPartitions(2, 2));
        expect(none.rows).toEqual([]);
      } finally {
        await reader.close();
      }
    });

    test.each([1, 50, 1000, 1_000_000])('coalesceRows %i keeps every row in order and merges small batches', async (target) => {
      const { prefix, expected, actualBatchRows } = run();
      const stored = new Set(actualBatchRows.flat());
      const reader = await ShuffleReader.open(prefix);
      try {
        const { rows, sizes } = await collect(reader.readPartitions(0, scenario.numPartitions, { coalesceRows: target }));
        expect(firstDifference(rows, expected.flat())).toBeNull();
        for (const size of sizes) {
          expect(size).toBeGreaterThan(0);
          // a batch is either coalesced (at most the target) or a stored batch passed through whole
          if (size > target) expect(stored.has(size)).toBe(true);
        }
        // two neighbours that together fit the target would have been merged
        for (let i = 0; i + 1 < sizes.length; i++) expect(sizes[i]! + sizes[i + 1]!).toBeGreaterThan(target);

        for (let p = 0; p < scenario.numPartitions; p++) {
          const one = await collect(reader.readPartition(p, { coalesceRows: target }));
          expect(firstDifference(one.rows, expected[p]!, `partition ${p}`)).toBeNull();
        }
      } finally {
        await reader.close();
      }
    });

    test("every partition's byte range is an IPC stream arrow-js's tableFromIPC reads to the same rows", async () => {
      const { prefix, expected } = run();
      const viaArrowJs = await readWithArrowJs(prefix);
      viaArrowJs.forEach((rows, p) => expect(firstDifference(rows, expected[p]!, `partition ${p}`)).toBeNull());
    });
  });
});
