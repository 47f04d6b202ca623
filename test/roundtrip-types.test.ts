/**
 * Round trip of every supported flat type through both writers (the columnar hash
 * writer and the sort-based row writer) and ShuffleReader, with every codec and with
 * hash (when the type can be a key) and round-robin partitioning. Each scenario writes the same kinds of batches: bitmaps with a few
 * nulls, half nulls, no bitmap at all, a bitmap with every bit set, an all-null
 * batch, a zero-row batch, a one-row batch, a batch sliced at an odd offset, a batch
 * read back from IPC bytes (padded buffers), a slice of such a batch, a batch
 * bigger than maxBatchRows and (for the variable-width types) a batch of 1-6 KB values. Two columns: the typed column `k` and a row id, so a
 * value that travels with the wrong row is caught too. The sort writer runs with small
 * pages and blocks in two of its scenarios, so rows spread over many pages, the 1-6 KB
 * rows get pages and blocks of their own, and partitions have many blocks.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Int32, Table, tableFromIPC, tableToIPC, type RecordBatch, type Schema } from 'apache-arrow';
import type { CodecName } from '../src/format/codec.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import type { Partitioning } from '../src/writer/partitioner.js';
import { isRowPartition } from '../src/sort-writer/row-format.js';
import { WRITER_KINDS, type WriterKind } from '../src/writer-kind.js';
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

interface Scenario {
  label: string;
  codec: CodecName;
  partitioning: Partitioning;
  numPartitions: number;
  maxBatchRows?: number;
  mapId?: number;
}

/**
 * One scenario per codec. Hashable types: lz4 hashes into 7 partitions (the pmod path),
 * zstd goes round-robin, none hashes into 8 (the power-of-two mask path); small
 * maxBatchRows force many evictions. Other types go round-robin with every codec.
 */
function scenariosFor(tc: TypeCase): Scenario[] {
  const hash = (codec: CodecName, numPartitions: number, maxBatchRows: number): Scenario => ({
    label: `${codec}, hash on k into ${numPartitions}, maxBatchRows ${maxBatchRows}`,
    codec,
    partitioning: { kind: 'hash', keys: ['k'] },
    numPartitions,
    maxBatchRows,
  });
  const roundRobin = (codec: CodecName, numPartitions: number, mapId: number, maxBatchRows?: number): Scenario => ({
    label: `${codec}, round-robin into ${numPartitions} (mapId ${mapId})${maxBatchRows ? `, maxBatchRows ${maxBatchRows}` : ''}`,
    codec,
    partitioning: { kind: 'round-robin' },
    numPartitions,
    mapId,
    ...(maxBatchRows !== undefined ? { maxBatchRows } : {}),
  });
  if (tc.hashable) return [hash('lz4', 7, 64), roundRobin('zstd', 5, 3), hash('none', 8, 200)];
  return [roundRobin('lz4', 7, 11, 64), roundRobin('zstd', 5, 3), roundRobin('none', 8, 0, 200)];
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

function inputBatches(tc: TypeCase, rng: Rng): { inMemory: Schema; fromIpc: Schema; batches: RecordBatch[] } {
  const type = tc.make();
  const schema = schemaOf([{ name: 'k', type }, { name: 'id', type: new Int32(), nullable: false }]);
  let nextId = 0;
  const make = (length: number, validity: ValiditySpec, longValues = false): RecordBatch => {
    const batch = batchOf(schema, [buildColumn(type, length, validity, rng, { longValues }), sequenceColumn(nextId, length)], length);
    nextId += length;
    return batch;
  };
  const batches = [
    make(300, { bitmap: true, nullRate: 0.1 }),
    make(0, { bitmap: true, nullRate: 0.1 }),
    make(700, { bitmap: true, nullRate: 0.5 }).slice(137, 650),
    make(200, NO_BITMAP),
    throughIpc(make(400, { bitmap: true, nullRate: 0.3 })),
    make(150, { bitmap: true, nullRate: 1 }),
    throughIpc(make(500, { bitmap: true, nullRate: 0.2 })).slice(3, 333),
    make(1, { bitmap: true, nullRate: 0 }),
    make(0, NO_BITMAP),
    make(1200, NO_BITMAP).slice(1, 1200),
    make(64, { bitmap: true, nullRate: 0 }),
    make(40, { bitmap: true, nullRate: 0.1 }, true), // 1-6 KB strings: far above the running average
  ];
  return { inMemory: schema, fromIpc: batches[4]!.schema, batches };
}

/** Page and block sizes of the sort writer per codec: small ones for lz4 and none, the defaults for zstd. */
const SORT_SIZES: Record<CodecName, { pageBytes?: number; blockBytes?: number }> = {
  lz4: { pageBytes: 4096, blockBytes: 2048 },
  zstd: {},
  none: { pageBytes: 65536, blockBytes: 512 },
};

describe.each(WRITER_KINDS)('%s writer', (writer: WriterKind) => {
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
      const { inMemory, fromIpc, batches } = inputBatches(tc, new Rng(seedOf(`${tc.name}/${scenario.label}`)));
      // the writer binds its schema from the first batch (lz4), from the in-memory schema (zstd) or from
      // the schema as arrow-js's IPC reader builds it (none): every batch must be accepted either way
      const schema = scenario.codec === 'lz4' ? undefined : scenario.codec === 'zstd' ? inMemory : fromIpc;
      const options: WriterOptions = {
        numPartitions: scenario.numPartitions,
        partitioning: scenario.partitioning,
        codec: scenario.codec,
        ...(schema !== undefined ? { schema } : {}),
        ...(scenario.maxBatchRows !== undefined ? { maxBatchRows: scenario.maxBatchRows } : {}),
        ...(scenario.mapId !== undefined ? { mapId: scenario.mapId } : {}),
        ...(writer === 'sort' ? SORT_SIZES[scenario.codec] : {}),
      };
      outcome = await runShuffle(dir, options, batches, 'map', writer);
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
      expect(result.batches).toBe(12);
      expect(result.partitionRows).toEqual(expected.map((rows) => rows.length));
      expect(result.partitionBatches).toEqual(actualBatchRows.map((sizes) => sizes.length));
      expect(actualBatchRows.flat().every((n) => n > 0)).toBe(true);
      expect(result.partitionLengths.map((len) => len > 0)).toEqual(expected.map((rows) => rows.length > 0));
      expect(result.partitionLengths.reduce((a, b) => a + b, 0)).toBe(result.bytesWritten);
    });

    test('the reader reports the schema that was written (names, types, nullability)', async () => {
      const { prefix, schema } = run();
      const reader = await ShuffleReader.open(prefix);
      try {
        const fieldsOf = (schema: Schema | null | undefined) => schema?.fields.map((f) => `${f.name}: ${String(f.type)}${f.nullable ? '' : ' not null'}`);
        expect(fieldsOf(await reader.schema())).toEqual(fieldsOf(schema));
      } finally {
        await reader.close();
      }
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

    test('coalesceRows keeps every row in order and merges neighbouring small batches', async () => {
      const { prefix, expected, actualBatchRows } = run();
      const stored = new Set(actualBatchRows.flat());
      const reader = await ShuffleReader.open(prefix);
      try {
        for (const target of [1, 50, 1000, 10_000]) {
          const { rows, sizes } = await collect(reader.readPartitions(0, scenario.numPartitions, { coalesceRows: target }));
          expect(firstDifference(rows, expected.flat(), `coalesceRows ${target}`)).toBeNull();
          for (const size of sizes) {
            expect(size).toBeGreaterThan(0);
            // a batch is either coalesced (at most the target) or a stored batch passed through whole
            if (size > target) expect(stored.has(size)).toBe(true);
          }
          // two neighbours that together fit the target would have been merged
          for (let i = 0; i + 1 < sizes.length; i++) expect(sizes[i]! + sizes[i + 1]!).toBeGreaterThan(target);
        }
        for (let p = 0; p < scenario.numPartitions; p++) {
          const one = await collect(reader.readPartition(p, { coalesceRows: 100 }));
          expect(firstDifference(one.rows, expected[p]!, `partition ${p}, coalesceRows 100`)).toBeNull();
        }
      } finally {
        await reader.close();
      }
    });

    // the format tests differ: the columnar writer's partitions are Arrow IPC streams, the sort writer's are not
    if (writer === 'hash') test("every partition's byte range is an IPC stream arrow-js's tableFromIPC reads to the same rows", async () => {
      const { prefix, expected } = run();
      const viaArrowJs = await readWithArrowJs(prefix);
      viaArrowJs.forEach((rows, p) => expect(firstDifference(rows, expected[p]!, `partition ${p}`)).toBeNull());
    });

    if (writer === 'sort') test("every non-empty partition's byte range is a row partition (magic CSRW) and no empty one has bytes", async () => {
      const { prefix, expected } = run();
      const reader = await ShuffleReader.open(prefix);
      try {
        for (let p = 0; p < scenario.numPartitions; p++) {
          const bytes = await reader.partitionBytes(p);
          expect(bytes.byteLength > 0, `partition ${p} has bytes`).toBe(expected[p]!.length > 0);
          if (bytes.byteLength > 0) expect(isRowPartition(bytes), `partition ${p} starts with the row magic`).toBe(true);
        }
      } finally {
        await reader.close();
      }
    });
  });
});
});
