/**
 * `minCompressionSavings`: a buffer position (the sort writer: its blocks) whose
 * compressed buffers keep saving less than this share of their size is stored raw,
 * read from the bytes of the data file. The narrow demo rows have a column of each
 * kind under LZ4: `key` (int64 < 1,000,000) saves ~40 %, `amount` (random float64)
 * ~12 %, `label` (random letters) nothing.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { MessageReader, type RecordBatch } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { narrowBatch } from '../src/cli/demo-data.js';
import { DEFAULT_MIN_SAVINGS } from '../src/format/compression-advisor.js';
import { createShuffleWriter, ShuffleError, ShuffleReader, type WriterKind } from '../src/index.js';
import { parseRowPartitionHeader } from '../src/sort-writer/row-format.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const PARTITIONS = 2;
/** 8 input batches of 4,096 rows at 2,048 rows per output batch: ~16 record batches per partition */
const INPUT = Array.from({ length: 8 }, (_, i) => narrowBatch(4096, i + 1));
const MAX_BATCH_ROWS = 2048;
/** body buffer positions of a narrow record batch: validity then values per column; label has offsets and data */
const KEY_VALUES = 1;
const AMOUNT_VALUES = 3;
/** buffers compressed at a position that keeps missing (compression-advisor.ts): four tries, then 16 skipped, then one probe */
const TRIES = 4 + 1;

let dir: string;
beforeAll(async () => {
  dir = await makeTempDir('cs-savings-');
});
afterAll(async () => {
  await removeDir(dir);
});

let outputs = 0;
async function write(kind: WriterKind, minCompressionSavings?: number): Promise<{ prefix: string; data: Uint8Array; index: DataView }> {
  const prefix = join(dir, `out${outputs++}`);
  const writer = await createShuffleWriter(kind, { numPartitions: PARTITIONS, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: prefix, codec: 'lz4', maxBatchRows: MAX_BATCH_ROWS, minCompressionSavings });
  for (const batch of INPUT) await writer.write(batch);
  const result = await writer.finish();
  const data = new Uint8Array(await readFile(result.paths.data));
  const index = new Uint8Array(await readFile(result.paths.index));
  return { prefix, data, index: new DataView(index.buffer, index.byteOffset, index.byteLength) };
}

function partitionBytes(output: { data: Uint8Array; index: DataView }, p: number): Uint8Array {
  return output.data.subarray(Number(output.index.getBigInt64(p * 8, false)), Number(output.index.getBigInt64((p + 1) * 8, false)));
}

/** For every record batch of every partition, the int64 prefix of each body buffer (-1n: stored raw). */
function bufferPrefixes(output: { data: Uint8Array; index: DataView }): bigint[][] {
  const batches: bigint[][] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    const reader = new MessageReader(partitionBytes(output, p));
    for (let message = reader.readMessage(); message !== null; message = reader.readMessage()) {
      const body = reader.readMessageBody(message.bodyLength);
      if (!message.isRecordBatch()) continue;
      const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
      batches.push(message.header().buffers.map((region) => (region.length === 0 ? 0n : view.getBigInt64(region.offset, true))));
    }
  }
  return batches;
}

/**
 * Per block of every partition that the writer may compress (at least 100 rows, compressionMinRows,
 * or 4 KiB): whether it is stored compressed (storedLength < rawLength, row-format.ts).
 */
function blocksCompressed(output: { data: Uint8Array; index: DataView }): boolean[] {
  const compressed: boolean[] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    const bytes = partitionBytes(output, p);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let at = parseRowPartitionHeader(bytes, {}).bodyStart; view.getUint32(at, true) !== 0; ) {
      const rows = view.getUint32(at, true);
      const raw = view.getUint32(at + 4, true);
      const stored = view.getUint32(at + 8, true);
      if (rows >= 100 || raw >= 4096) compressed.push(stored < raw);
      at += 12 + stored;
    }
  }
  return compressed;
}

async function rowsRead(prefix: string): Promise<number> {
  const reader = await ShuffleReader.open(prefix);
  let rows = 0;
  try {
    for await (const batch of reader.readPartitions(0, reader.numPartitions)) rows += (batch as RecordBatch).numRows;
  } finally {
    await reader.close();
  }
  return rows;
}

const compressedAt = (batches: bigint[][], position: number) => batches.filter((prefixes) => prefixes[position]! > 0n).length;

describe('the hash writer', () => {
  test(`by default (${DEFAULT_MIN_SAVINGS}), random float64 values (~12 % savings) are stored raw after four tries; int64 keys (~40 %) are compressed in every batch`, async () => {
    const output = await write('hash');
    const batches = bufferPrefixes(output);
    expect(batches.length).toBeGreaterThanOrEqual(16);
    expect(compressedAt(batches, AMOUNT_VALUES)).toBeLessThanOrEqual(TRIES);
    expect(batches.filter((prefixes) => prefixes[AMOUNT_VALUES] === -1n).length).toBeGreaterThanOrEqual(batches.length - TRIES);
    expect(compressedAt(batches, KEY_VALUES)).toBe(batches.length);
    expect(await rowsRead(output.prefix)).toBe(INPUT.length * 4096);
  });

  test('at 0.05 the float64 values are compressed in every batch', async () => {
    const batches = bufferPrefixes(await write('hash', 0.05));
    expect(compressedAt(batches, AMOUNT_VALUES)).toBe(batches.length);
  });

  test('at 0.5 the int64 keys are stored raw too, after their tries', async () => {
    const output = await write('hash', 0.5);
    const batches = bufferPrefixes(output);
    expect(compressedAt(batches, KEY_VALUES)).toBeLessThanOrEqual(TRIES);
    expect(compressedAt(batches, AMOUNT_VALUES)).toBeLessThanOrEqual(TRIES);
    expect(await rowsRead(output.prefix)).toBe(INPUT.length * 4096);
  });
});

describe('the sort writer', () => {
  test('at 0 every block that shrinks is compressed; at 1 blocks are stored raw after their tries, and read back the same', async () => {
    const all = blocksCompressed(await write('sort', 0));
    expect(all.length).toBeGreaterThanOrEqual(16);
    expect(all.every((c) => c)).toBe(true);
    const output = await write('sort', 1);
    const none = blocksCompressed(output);
    expect(none.length).toBe(all.length);
    expect(none.filter((c) => c).length).toBeLessThanOrEqual(TRIES);
    expect(await rowsRead(output.prefix)).toBe(INPUT.length * 4096);
  });
});

test.each(['hash', 'sort'] as const)('the %s writer refuses a minCompressionSavings outside [0, 1]', async (kind) => {
  for (const value of [-0.1, 1.5, Number.NaN]) {
    const error = await createShuffleWriter(kind, { numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'refused'), minCompressionSavings: value }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error).toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('minCompressionSavings') });
  }
});
