/**
 * Interoperability with another Arrow implementation (polars, through nodejs-polars,
 * whose IPC code is polars-arrow, not arrow-js):
 *  - polars reads each non-empty partition byte range of our data file, for every codec,
 *    and sees exactly the rows our own reader sees;
 *  - polars writes LZ4_FRAME and ZSTD compressed IPC streams, and our reader reads them
 *    with the values polars holds.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Table, tableToIPC, type RecordBatch } from 'apache-arrow';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readIpcStream, ShuffleReader, ShuffleWriter, type CodecName, type Partitioning, type ShuffleWriteResult } from '../src/index.js';
import {
  arrowRows,
  asBuffer,
  asBytes,
  degenerateTable,
  loadPolars,
  MIXED_COLUMNS,
  mixedTable,
  polarsRows,
  polarsTypes,
  recordBatchCompressions,
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
  pl = loadPolars();
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

/** The input as several record batches, the way an upstream operator would hand them over. */
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

function sortedRows(rows: readonly Row[]): string[] {
  return rows.map((row) => JSON.stringify(row)).sort();
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
  let reader: ShuffleReader;

  beforeAll(async () => {
    result = await shuffle(`out-${codec}`, codec, inputBatches(table, INPUT_BATCH_ROWS), { kind: 'hash', keys: ['i64'] });
    reader = await ShuffleReader.open(join(dir, `out-${codec}`));
  });

  afterAll(async () => {
    await reader?.close();
  });

  it('the output has several non-empty partitions, most of them with several record batches', () => {
    const nonEmpty = result.partitionLengths.filter((length) => length > 0).length;
    expect(nonEmpty).toBeGreaterThanOrEqual(3);
    expect(result.partitionBatches.filter((n) => n > 1).length).toBeGreaterThanOrEqual(3);
    expect(result.partitionRows.reduce((a, b) => a + b, 0)).toBe(ROWS);
  });

  it('polars readIPCStream on exactly each non-empty partition byte range returns the rows our reader returns, in order', async () => {
    let checked = 0;
    for (let p = 0; p < NUM_PARTITIONS; p++) {
      const bytes = await reader.partitionBytes(p);
      if (bytes.byteLength === 0) continue;
      const ours = arrowRows(await collect(readIpcStream(bytes)));
      const df = pl.readIPCStream(asBuffer(bytes));
      expect(df.columns, `partition ${p} columns`).toEqual([...MIXED_COLUMNS]);
      expect(polarsTypes(df), `partition ${p} types`).toEqual(EXPECTED_POLARS_TYPES);
      expect(df.height, `partition ${p} rows`).toBe(result.partitionRows[p]);
      expect(polarsRows(pl, df), `partition ${p} values`).toEqual(ours);
      checked++;
    }
    expect(checked).toBe(result.partitionLengths.filter((length) => length > 0).length);
  });

  it('the partitions, as polars reads them, hold exactly the input rows', async () => {
    const all: Row[] = [];
    for (let p = 0; p < NUM_PARTITIONS; p++) {
      const bytes = await reader.partitionBytes(p);
      if (bytes.byteLength > 0) all.push(...polarsRows(pl, pl.readIPCStream(asBuffer(bytes))));
    }
    expect(sortedRows(all)).toEqual(sortedRows(inputRows));
  });
});

describe.each(['lz4', 'zstd', 'none'] as const)('polars reads degenerate buffers in our partitions (codec %s)', (codec) => {
  it('null-only and empty-string-only columns, all-null Int32 / Bool and a Null column read back the same', async () => {
    const degenerate = degenerateTable(300);
    const result = await shuffle(`degenerate-${codec}`, codec, degenerate.batches, { kind: 'hash', keys: ['k'] });
    const reader = await ShuffleReader.open(join(dir, `degenerate-${codec}`));
    try {
      let rows = 0;
      for (let p = 0; p < NUM_PARTITIONS; p++) {
        const bytes = await reader.partitionBytes(p);
        if (bytes.byteLength === 0) continue;
        const ours = arrowRows(await collect(readIpcStream(bytes)));
        const df = pl.readIPCStream(asBuffer(bytes));
        expect(polarsTypes(df)).toEqual(['DataType(Int32)', 'DataType(String)', 'DataType(String)', 'DataType(Int32)', 'DataType(Bool)', 'DataType(Null)']);
        const theirs = polarsRows(pl, df);
        expect(theirs, `partition ${p}`).toEqual(ours);
        expect(theirs.every((row) => row[1] === null && row[2] === '' && row[3] === null && row[4] === null && row[5] === null)).toBe(true);
        rows += theirs.length;
      }
      expect(rows).toBe(300);
      expect(result.partitionRows.reduce((a, b) => a + b, 0)).toBe(300);
    } finally {
      await reader.close();
    }
  });
});

describe.each([
  ['lz4', CompressionType.LZ4_FRAME],
  ['zstd', CompressionType.ZSTD],
] as const)('our reader reads IPC streams polars writes (compression %s)', (compression, arrowType) => {
  function polarsFrame(batches: readonly RecordBatch[]) {
    return pl.readIPCStream(asBuffer(tableToIPC(new Table(batches as RecordBatch[]), 'stream')));
  }

  it('a single-chunk DataFrame: every record batch is compressed with the codec and every value matches', async () => {
    const df = polarsFrame(table.batches);
    const stream = asBytes(df.writeIPCStream({ compression }));
    const compressions = recordBatchCompressions(stream);
    expect(compressions.length).toBeGreaterThanOrEqual(1);
    expect(compressions.every((c) => c === arrowType)).toBe(true);

    const ours = arrowRows(await collect(readIpcStream(stream)));
    expect(ours).toEqual(polarsRows(pl, df));
    expect(ours).toEqual(inputRows);
  });

  it('a stream of several polars-encoded record batches (one per DataFrame, spliced) is read whole, in order', async () => {
    // polars rechunks a DataFrame before writing it: one record batch per write, so batches are taken from three writes
    const parts = [table.slice(0, 2_000), table.slice(2_000, 2_001), table.slice(2_001, ROWS)];
    const stream = spliceStreams(parts.map((part) => asBytes(polarsFrame(part.batches).writeIPCStream({ compression }))));
    expect(recordBatchCompressions(stream)).toEqual([arrowType, arrowType, arrowType]);

    const batches = await collect(readIpcStream(stream));
    expect(batches.map((b) => b.numRows)).toEqual([2_000, 1, ROWS - 2_001]);
    expect(arrowRows(batches)).toEqual(inputRows);
    expect(polarsRows(pl, pl.readIPCStream(asBuffer(stream)))).toEqual(inputRows); // and polars agrees the splice is valid
  });

  it('full circle: polars stream → our reader → our shuffle writer → polars reads every partition', async () => {
    const stream = asBytes(polarsFrame(table.batches).writeIPCStream({ compression }));
    const batches = await collect(readIpcStream(stream)); // s arrives as LargeUtf8 (polars' String)
    const result = await shuffle(`circle-${compression}`, compression, batches, { kind: 'round-robin' });
    const reader = await ShuffleReader.open(join(dir, `circle-${compression}`));
    try {
      const all: Row[] = [];
      for (let p = 0; p < NUM_PARTITIONS; p++) {
        const bytes = await reader.partitionBytes(p);
        if (bytes.byteLength === 0) continue;
        const theirs = polarsRows(pl, pl.readIPCStream(asBuffer(bytes)));
        expect(theirs, `partition ${p}`).toEqual(arrowRows(await collect(readIpcStream(bytes))));
        all.push(...theirs);
      }
      expect(result.partitionRows.reduce((a, b) => a + b, 0)).toBe(ROWS);
      expect(sortedRows(all)).toEqual(sortedRows(inputRows));
    } finally {
      await reader.close();
    }
  });
});
