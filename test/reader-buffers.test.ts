import { join } from 'node:path';
import { Dictionary, Int32, Table, Utf8, makeVector, vectorFromArray, type RecordBatch } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createShuffleWriter, ShuffleReader, type CodecName, type WriterKind } from '../src/index.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

/**
 * The reader reads partitions into read buffers it reuses (the one being
 * decoded and the one being read ahead). Batches it has handed out must not
 * view them: a buffer stored raw, an uncompressed body or a dictionary would
 * otherwise be overwritten by the partition read two steps later. Partitions
 * 0 and 1 get a quarter of the rows each, the six others a twelfth: every read
 * after the second lands in a buffer the first two were read into.
 */
const ROWS = 4_000;
const PARTITIONS = 8;

let dir: string;
beforeEach(async () => {
  dir = await makeTempDir();
});
afterEach(async () => removeDir(dir));

/** Rows i = 0..ROWS-1: an id, a float no codec shrinks, a 12-character string and a dictionary-encoded one. */
function input(): RecordBatch {
  const random = new Float64Array(ROWS);
  let seed = 7;
  for (let i = 0; i < ROWS; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    random[i] = seed / 2 ** 32 + i;
  }
  const strings = Array.from({ length: ROWS }, (_, i) => `s-${String(i * 7919).padStart(10, '0')}`.slice(0, 12));
  const colours = Array.from({ length: ROWS }, (_, i) => ['red', 'green', 'blue', 'cyan'][i % 4]!);
  return new Table({
    id: makeVector(Int32Array.from({ length: ROWS }, (_, i) => i)),
    x: makeVector(random),
    s: vectorFromArray(strings, new Utf8()),
    colour: vectorFromArray(colours, new Dictionary(new Utf8(), new Int32())),
  }).batches[0]! as RecordBatch;
}

/** The input with its partition id: rows 0-999 to partition 0, 1000-1999 to 1, the rest round-robin over 2..7. */
function withPartitionIds(batch: RecordBatch): RecordBatch {
  const pid = Int32Array.from({ length: ROWS }, (_, i) => (i < ROWS / 2 ? Math.floor(i / (ROWS / 4)) : 2 + (i % (PARTITIONS - 2))));
  return new Table({ ...Object.fromEntries(batch.schema.fields.map((f, c) => [f.name, batch.getChildAt(c)!])), pid: makeVector(pid) }).batches[0]! as RecordBatch;
}

async function writeOutput(kind: WriterKind, codec: CodecName, prefix: string, maxBatchRows?: number): Promise<void> {
  const writer = await createShuffleWriter(kind, { numPartitions: PARTITIONS, partitioning: { kind: 'partition-id', column: 'pid' }, outputPrefix: prefix, codec, maxBatchRows });
  await writer.write(withPartitionIds(input()));
  await writer.finish();
}

function rowsAsText(batches: readonly RecordBatch[]): string[] {
  const rows: string[] = [];
  for (const batch of batches) for (const row of batch) rows.push(JSON.stringify(row!.toJSON()));
  return rows.sort();
}

const CASES: [WriterKind, CodecName][] = [
  ['hash', 'none'],
  ['hash', 'lz4'],
  ['hash', 'zstd'],
  ['sort', 'lz4'],
  ['sort', 'none'],
];

describe.each(CASES)('the %s writer\'s output with codec %s', (kind, codec) => {
  test('batches handed out stay intact while the reader reads later partitions into its buffers', async () => {
    const prefix = join(dir, 'out');
    await writeOutput(kind, codec, prefix);
    const expected = rowsAsText([input()]);

    const reader = await ShuffleReader.open(prefix);
    const lengths = Array.from({ length: PARTITIONS }, (_, p) => reader.partitionLength(p));
    expect(Math.max(...lengths.slice(2))).toBeLessThan(Math.min(lengths[0]!, lengths[1]!));

    const held: RecordBatch[] = [];
    for await (const b of reader.readPartitions(0, PARTITIONS)) held.push(b);
    expect(rowsAsText(held)).toEqual(expected);

    // one partition at a time, on the same reader (its buffers now warm)
    const oneByOne: RecordBatch[] = [];
    for (let p = 0; p < PARTITIONS; p++) for await (const b of reader.readPartition(p)) oneByOne.push(b);
    expect(rowsAsText(oneByOne)).toEqual(expected);
    expect(rowsAsText(held)).toEqual(expected);
    await reader.close();
  });
});

test('a read abandoned after its first batch leaves later reads correct', async () => {
  const prefix = join(dir, 'out');
  await writeOutput('hash', 'lz4', prefix, 100);
  const reader = await ShuffleReader.open(prefix);
  for await (const first of reader.readPartitions(0, PARTITIONS)) {
    expect(first.numRows).toBe(100);
    break;
  }
  const all: RecordBatch[] = [];
  for await (const b of reader.readPartitions(0, PARTITIONS)) all.push(b);
  expect(rowsAsText(all)).toEqual(rowsAsText([input()]));
  await reader.close();
});

test('the float column really is stored raw under lz4, so the lz4 case reads raw buffers out of the read buffer', async () => {
  const prefix = join(dir, 'out');
  await writeOutput('hash', 'lz4', prefix);
  const reader = await ShuffleReader.open(prefix);
  const bytes = await reader.partitionBytes(0);
  await reader.close();
  // a raw buffer's 8-byte prefix is -1: FF x 8
  const text = Buffer.from(bytes).toString('hex');
  expect(text).toContain('ffffffffffffffff');
});
