/**
 * Interoperability with another Arrow implementation: polars (nodejs-polars 0.25.2,
 * whose IPC code is polars-arrow in Rust, not arrow-js).
 *  - polars reads each non-empty partition byte range of our data file, for every codec,
 *    and sees exactly the rows our own reader sees;
 *  - polars writes LZ4_FRAME and ZSTD compressed IPC streams, and our reader reads them
 *    with the values polars holds.
 * Rows are compared as JS values, with int64 / timestamp / decimal as exact strings
 * (polars hands int64 to JS as lossy numbers, so it casts them to strings itself).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Dictionary, Field, Int16, makeData, RecordBatch, Schema, Struct, Table, tableToIPC, Utf8, Vector, vectorFromArray } from 'apache-arrow';
import { nestedBatch, NESTED_SCHEMA } from '../src/cli/demo-data.js';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readIpcStream, ShuffleReader, ShuffleWriter, type CodecName, type Partitioning, type ShuffleWriteResult } from '../src/index.js';
import {
  arrowRows,
  asBuffer,
  asBytes,
  degenerateTable,
  firstDifference,
  loadPolars,
  MIXED_COLUMNS,
  mixedTable,
  polarsRows,
  polarsTypes,
  recordBatchCompressions,
  rowKey,
  spliceStreams,
  type Polars,
  type Row,
} from './support/polars.js';

const ROWS = 6_000;
const INPUT_BATCH_ROWS = 1_000;
const NUM_PARTITIONS = 5;

let pl: Polars;
let dir: string;
let table: Table;
let inputRows: Row[];

beforeAll(async () => {
  pl = loadPolars(); // ~0.1 s: loaded once for the whole file
  dir = await mkdtemp(join(tmpdir(), 'interop-polars-'));
  table = mixedTable(ROWS, 7);
  inputRows = arrowRows(table.batches);
});

afterAll(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

async function collect(stream: AsyncIterable<RecordBatch>): Promise<RecordBatch[]> {
  const batches: RecordBatch[] = [];
  for await (const batch of stream) batches.push(batch);
  return batches;
}

/** The input as several (sliced) record batches, the way an upstream operator would hand them over. */
function inputBatches(source: Table, rowsPerBatch: number): RecordBatch[] {
  const batches: RecordBatch[] = [];
  for (let start = 0; start < source.numRows; start += rowsPerBatch) batches.push(...source.slice(start, start + rowsPerBatch).batches);
  return batches;
}

async function shuffle(name: string, codec: CodecName, batches: readonly RecordBatch[], partitioning: Partitioning): Promise<ShuffleWriteResult> {
  const writer = await ShuffleWriter.create({
    numPartitions: NUM_PARTITIONS,
    partitioning,
    outputPrefix: join(dir, name),
    codec,
    maxBatchRows: 400, // several record batches per partition
  });
  for (const batch of batches) await writer.write(batch);
  return writer.finish();
}

/** Row lists are equal, in order; on a difference, the first differing row is shown. */
function expectSameRows(actual: readonly Row[], expected: readonly Row[], what: string): void {
  const at = firstDifference(actual, expected);
  if (at >= 0) expect(actual[at], `${what}: row ${at} (of ${actual.length} vs ${expected.length})`).toEqual(expected[at]);
  expect(actual.length, what).toBe(expected.length);
}

/** The same rows in any order. */
function expectSameRowSet(actual: readonly Row[], expected: readonly Row[], what: string): void {
  const a = actual.map(rowKey).sort();
  const e = expected.map(rowKey).sort();
  const at = a.findIndex((key, i) => key !== e[i]);
  if (at >= 0) expect(a[at], `${what}: sorted row ${at}`).toBe(e[at]);
  expect(a.length, what).toBe(e.length);
}

interface PartitionView {
  p: number;
  ours: Row[];
  theirs: Row[];
  columns: string[];
  types: string[];
}

/** Every non-empty partition of an output, read by our reader and by polars on the same bytes. */
async function readBothWays(name: string): Promise<PartitionView[]> {
  const reader = await ShuffleReader.open(join(dir, name));
  try {
    const views: PartitionView[] = [];
    for (let p = 0; p < reader.numPartitions; p++) {
      const bytes = await reader.partitionBytes(p);
      if (bytes.byteLength === 0) continue;
      const ours = arrowRows(await collect(readIpcStream(bytes)));
      const df = pl.readIPCStream(asBuffer(bytes)); // exactly the partition's byte range
      views.push({ p, ours, theirs: polarsRows(pl, df), columns: df.columns, types: polarsTypes(df) });
    }
    return views;
  } finally {
    await reader.close();
  }
}

const EXPECTED_POLARS_TYPES = [
  'DataType(Int64)',
  'DataType(Float64)',
  'DataType(String)',
  'DataType(String)',
  'DataType(Bool)',
  'DataType(Int32)',
  'DataType(Date)',
  'DataType(Datetime(us,))',
  'DataType(Decimal(30,2))',
];

describe.each(['lz4', 'zstd', 'none'] as const)('polars reads our partitions (codec %s)', (codec) => {
  let result: ShuffleWriteResult;
  let views: PartitionView[];

  beforeAll(async () => {
    result = await shuffle(`out-${codec}`, codec, inputBatches(table, INPUT_BATCH_ROWS), { kind: 'hash', keys: ['i64'] });
    views = await readBothWays(`out-${codec}`);
  });

  it('the output has several non-empty partitions, most of them with several record batches', () => {
    expect(views.length).toBe(result.partitionLengths.filter((length) => length > 0).length);
    expect(views.length).toBeGreaterThanOrEqual(3);
    expect(result.partitionBatches.filter((n) => n > 1).length).toBeGreaterThanOrEqual(3);
    expect(result.partitionRows.reduce((a, b) => a + b, 0)).toBe(ROWS);
  });

  it('polars sees every column with its type: int64, float64, utf8 and large utf8 (String), bool, int32, date, timestamp[us], decimal(30, 2)', () => {
    for (const view of views) {
      expect(view.columns, `partition ${view.p}`).toEqual([...MIXED_COLUMNS]);
      expect(view.types, `partition ${view.p}`).toEqual(EXPECTED_POLARS_TYPES);
    }
  });

  it('polars readIPCStream on exactly each non-empty partition byte range returns the rows our reader returns, in order', () => {
    for (const view of views) {
      expect(view.theirs.length, `partition ${view.p}`).toBe(result.partitionRows[view.p]);
      expectSameRows(view.theirs, view.ours, `partition ${view.p}`);
    }
  });

  it('the partitions, as polars reads them, hold exactly the input rows (nulls included)', () => {
    expectSameRowSet(views.flatMap((view) => view.theirs), inputRows, 'all partitions');
    expect(inputRows.some((row) => row.includes(null))).toBe(true);
  });
});

describe.each(['lz4', 'zstd', 'none'] as const)('polars reads degenerate buffers in our partitions (codec %s)', (codec) => {
  it('null-only and empty-string-only Utf8, all-null Int32 / Bool and a Null column read back the same', async () => {
    const result = await shuffle(`degenerate-${codec}`, codec, degenerateTable(300).batches, { kind: 'hash', keys: ['k'] });
    const views = await readBothWays(`degenerate-${codec}`);
    expect(views.length).toBeGreaterThanOrEqual(3);
    for (const view of views) {
      expect(view.types).toEqual(['DataType(Int32)', 'DataType(String)', 'DataType(String)', 'DataType(Int32)', 'DataType(Bool)', 'DataType(Null)']);
      expectSameRows(view.theirs, view.ours, `partition ${view.p}`);
      expect(view.theirs.every((row) => row[1] === null && row[2] === '' && row[3] === null && row[4] === null && row[5] === null)).toBe(true);
    }
    expect(views.reduce((n, view) => n + view.theirs.length, 0)).toBe(300);
    expect(result.rows).toBe(300);
  });
});

describe.each([
  ['lz4', CompressionType.LZ4_FRAME],
  ['zstd', CompressionType.ZSTD],
] as const)('our reader reads IPC streams polars writes (compression %s)', (compression, arrowType) => {
  /** A polars DataFrame of these batches (handed over as an uncompressed arrow-js stream). */
  function polarsFrame(batches: readonly RecordBatch[]) {
    return pl.readIPCStream(asBuffer(tableToIPC(new Table(batches as RecordBatch[]), 'stream')));
  }

  it('a whole DataFrame: its record batch is compressed with the codec and every value matches', async () => {
    const df = polarsFrame(table.batches);
    const stream = asBytes(df.writeIPCStream({ compression }));
    const compressions = recordBatchCompressions(stream);
    expect(compressions.length).toBeGreaterThanOrEqual(1);
    expect(compressions.every((c) => c === arrowType)).toBe(true);

    const ours = arrowRows(await collect(readIpcStream(stream)));
    expectSameRows(ours, polarsRows(pl, df), 'our reader vs polars');
    expectSameRows(ours, inputRows, 'our reader vs the input');
  });

  it('several polars-encoded record batches (polars writes one per DataFrame: spliced into one stream) are read whole, in order', async () => {
    const parts = [table.slice(0, 2_000), table.slice(2_000, 2_001), table.slice(2_001, ROWS)];
    const stream = spliceStreams(parts.map((part) => asBytes(polarsFrame(part.batches).writeIPCStream({ compression }))));
    expect(recordBatchCompressions(stream)).toEqual([arrowType, arrowType, arrowType]);

    const batches = await collect(readIpcStream(stream));
    expect(batches.map((b) => b.numRows)).toEqual([2_000, 1, ROWS - 2_001]);
    expectSameRows(arrowRows(batches), inputRows, 'our reader');
    expectSameRows(polarsRows(pl, pl.readIPCStream(asBuffer(stream))), inputRows, 'polars, on the spliced stream');
  });

  it('full circle: polars stream → our reader → our shuffle writer → polars reads every partition', async () => {
    const stream = asBytes(polarsFrame(table.batches).writeIPCStream({ compression }));
    const batches = await collect(readIpcStream(stream)); // s arrives as LargeUtf8 (polars' String)
    expect(String(batches[0]!.schema.fields[2]!.type)).toBe('LargeUtf8');
    const result = await shuffle(`circle-${compression}`, compression, batches, { kind: 'round-robin' });
    const views = await readBothWays(`circle-${compression}`);
    for (const view of views) expectSameRows(view.theirs, view.ours, `partition ${view.p}`);
    expect(result.partitionRows.reduce((a, b) => a + b, 0)).toBe(ROWS);
    expectSameRowSet(views.flatMap((view) => view.theirs), inputRows, 'all partitions');
  });
});

describe('nested and dictionary columns: polars reads every partition of the nested shape', () => {
  /** The nested bench shape plus a dictionary column whose dictionary grows between batches. */
  function nestedInput(): RecordBatch[] {
    const type = new Dictionary(new Utf8(), new Int16(), 1);
    const schema = new Schema([...NESTED_SCHEMA.fields, new Field('city', type, true)]);
    let dictionary = vectorFromArray(['Lyon', 'Oslo', 'Lima'], new Utf8());
    return [1, 2, 3, 4].map((seed) => {
      if (seed > 2) dictionary = new Vector([...dictionary.data, vectorFromArray([`Town${seed}`, `City${seed}`], new Utf8()).data[0]!]);
      const base = nestedBatch(700, seed);
      const city = makeData({ type, length: 700, data: Int16Array.from({ length: 700 }, (_, i) => (i * 7 + seed) % dictionary.length), dictionary } as never);
      return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 700, nullCount: 0, children: [...base.data.children, city] }));
    });
  }

  /** Per row: list length, struct field, dictionary value and map size (null where the row is). */
  type Projection = [number | null, number | null, string | null, number | null];

  it.each(['lz4', 'zstd', 'none'] as const)('codec %s, dictionary updates as replacements: the same lists, structs, maps and dictionary values', async (codec) => {
    const writer = await ShuffleWriter.create({ numPartitions: NUM_PARTITIONS, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: join(dir, `nested-${codec}`), codec, maxBatchRows: 300, dictionaryUpdates: 'replacement' });
    for (const batch of nestedInput()) await writer.write(batch);
    await writer.finish();
    const reader = await ShuffleReader.open(join(dir, `nested-${codec}`));
    try {
      for (let p = 0; p < NUM_PARTITIONS; p++) {
        const ours: Projection[] = [];
        for await (const batch of reader.readPartition(p)) {
          for (let i = 0; i < batch.numRows; i++) {
            const tags = batch.getChild('tags')!.get(i) as { length: number } | null;
            const person = batch.getChild('person')!.get(i) as { id: number | null } | null;
            const attributes = batch.getChild('attributes')!.get(i) as { size: number } | null;
            ours.push([tags?.length ?? null, person === null ? null : person.id, batch.getChild('city')!.get(i) as string | null, attributes?.size ?? null]);
          }
        }
        const bytes = await reader.partitionBytes(p);
        if (bytes.byteLength === 0) continue;
        const df = pl.readIPCStream(asBuffer(bytes));
        const theirs = df
          .select(pl.col('tags').lst.lengths(), pl.col('person').struct.field('id'), pl.col('city').cast(pl.Utf8), pl.col('attributes').lst.lengths())
          .rows() as Projection[];
        expect(theirs.length).toBe(ours.length);
        expect(theirs.map((r) => [r[0], r[2], r[3]])).toEqual(ours.map((r) => [r[0], r[2], r[3]]));
        // polars keeps a null struct's field values; compare the fields of valid structs
        expect(theirs.filter((_, i) => ours[i]![1] !== null).map((r) => r[1])).toEqual(ours.filter((r) => r[1] !== null).map((r) => r[1]));
      }
    } finally {
      await reader.close();
    }
  });

  it('with delta dictionary updates (the default) polars refuses the stream, as it refuses deltas from any writer: the reason to choose replacements', async () => {
    const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'nested-delta'), maxBatchRows: 300 });
    for (const batch of nestedInput()) await writer.write(batch);
    await writer.finish();
    const reader = await ShuffleReader.open(join(dir, 'nested-delta'));
    try {
      const bytes = await reader.partitionBytes(0);
      expect(() => pl.readIPCStream(asBuffer(bytes))).toThrow(/delta/);
    } finally {
      await reader.close();
    }
  });
});
