/**
 * A partition longer than `wholePartitionBytes` (256 MiB by default) is read
 * in two passes of bounded memory (src/reader/streamed-partition.ts): its
 * checksum over chunked reads, then its batches a message (or row block) at a
 * time. That is how a partition past Node's largest buffer (4 GiB on Node 20)
 * is read at all. That streamed reads come to exactly what whole reads come
 * to, rows and errors alike, is the fuzzer's claim (test/fuzz-reader.test.ts,
 * modes `streamed` and `streamed-checksum`) and the round-trip properties'.
 */
import { constants } from 'node:buffer';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { makeTable, type RecordBatch } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createShuffleWriter, ShuffleReader } from '../src/index.js';
import { crc32cOf } from '../src/format/output-files.js';
import { CHECKSUM_CHUNK_BYTES } from '../src/reader/streamed-partition.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';
import { outputOf, PiecewiseSource, streamPieces, u64be } from './support/piecewise-output.js';
import { failure } from './support/failure.js';

/** Outputs named huge.data, huge.index, huge.checksum. */
const outputOfHuge = (partitions: readonly (readonly Uint8Array[])[], withReadInto = true) => outputOf(partitions, withReadInto, 'huge');

describe('a partition longer than Node\'s largest buffer', () => {
  // 17 batches of 2^26 int32 values (256 MiB each): 4.25 GiB, held as one batch message repeated
  const ROWS = 2 ** 26;
  const COPIES = Math.ceil(constants.MAX_LENGTH / (ROWS * 4));

  test('is read a message at a time, verified first, and the partition after it is read too', async () => {
    const huge = streamPieces(makeTable({ v: Int32Array.from({ length: ROWS }, (_, i) => i) }));
    const small = streamPieces(makeTable({ v: Int32Array.of(7, 8, 9) }));
    const hugePieces = [huge.schema, ...Array.from({ length: COPIES }, () => huge.batches), huge.end];
    const output = outputOfHuge([hugePieces, [small.schema, small.batches, small.end]]);
    expect(output.offsets[1]).toBeGreaterThan(constants.MAX_LENGTH);

    const reader = await ShuffleReader.fromSources(output, { readRunBytes: 2 ** 40 });
    try {
      // partitionBytes returns one buffer: that it cannot, before any byte is read
      const error = await failure(reader.partitionBytes(0));
      expect(error).toMatchObject({ code: 'CS_PARTITION_TOO_LARGE', where: { partition: 0, offset: 0 } });
      expect(output.data.reads).toEqual([]);

      const batches: { rows: number; first: number; last: number }[] = [];
      const tail: number[] = [];
      for await (const batch of reader.readPartitions(0, 2)) {
        const column = batch.getChildAt(0)!;
        if (batch.numRows === ROWS) batches.push({ rows: batch.numRows, first: column.get(0) as number, last: column.get(ROWS - 1) as number });
        else tail.push(...(column.toArray() as Int32Array));
      }
      expect(batches).toEqual(Array.from({ length: COPIES }, () => ({ rows: ROWS, first: 0, last: ROWS - 1 })));
      expect(tail).toEqual([7, 8, 9]);
      // no read asked for more than a batch message's body: the reader never held the partition
      const longest = Math.max(...output.data.reads.map(([, length]) => length), ...output.data.readsInto.map(([, length]) => length));
      expect(longest).toBeLessThanOrEqual(ROWS * 4);
      // the partition after it, past 4 GiB in the file, is read in a run of its own (ahead, while the first is read)
      expect(output.data.readsInto).toContainEqual([output.offsets[1], output.offsets[2]! - output.offsets[1]!]);
    } finally {
      await reader.close();
    }
  }, 120_000);
});

describe('a partition longer than wholePartitionBytes', () => {
  let dir = '';
  let prefix = '';
  /** the one partition of a 300,000-row output, codec none (about 3.6 MB) */
  let partition: Uint8Array;
  const MAX_BATCH_ROWS = 10_000;

  beforeEach(async () => {
    dir = await makeTempDir('cs-streamed-');
    prefix = join(dir, 'out');
    const writer = await createShuffleWriter('hash', { numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: prefix, codec: 'none', maxBatchRows: MAX_BATCH_ROWS });
    const table = makeTable({ v: Int32Array.from({ length: 300_000 }, (_, i) => i), w: Float64Array.from({ length: 300_000 }, (_, i) => i / 2) });
    for (const batch of table.batches) await writer.write(batch as RecordBatch);
    await writer.finish();
    partition = new Uint8Array(await readFile(`${prefix}.data`));
  });
  afterEach(async () => removeDir(dir));

  async function readAll(reader: ShuffleReader): Promise<number[]> {
    const out: number[] = [];
    for await (const batch of reader.readPartition(0)) out.push(...(batch.getChildAt(0)!.toArray() as Int32Array));
    return out;
  }

  test('is verified over reads of at most CHECKSUM_CHUNK_BYTES, then read with each byte read once, no read longer than a message', async () => {
    const chunk = 1 << 20;
    expect(CHECKSUM_CHUNK_BYTES).toBeGreaterThan(chunk); // the chunking below is the first pass's only when the partition is longer than a chunk
    const pieces = Array.from({ length: Math.ceil(partition.byteLength / chunk) }, (_, i) => partition.subarray(i * chunk, (i + 1) * chunk));
    const output = outputOfHuge([pieces]);
    const reader = await ShuffleReader.fromSources(output, { wholePartitionBytes: partition.byteLength - 1 });
    try {
      expect(await readAll(reader)).toEqual(Array.from({ length: 300_000 }, (_, i) => i));
    } finally {
      await reader.close();
    }
    // first pass: readInto the one chunk buffer, [0, length) in order
    const firstPass = output.data.readsInto;
    expect(firstPass.map(([offset]) => offset)).toEqual(Array.from({ length: Math.ceil(partition.byteLength / CHECKSUM_CHUNK_BYTES) }, (_, i) => i * CHECKSUM_CHUNK_BYTES));
    expect(firstPass.reduce((sum, [, length]) => sum + length, 0)).toBe(partition.byteLength);
    // second pass: a 4-byte peek at the start (row partition or IPC stream?), then every byte once, in order
    const [peek, ...messages] = output.data.reads;
    expect(peek).toEqual([0, 4]);
    let at = 0;
    for (const [offset, length] of messages) {
      expect(offset).toBe(at);
      at += length;
    }
    expect(at).toBe(partition.byteLength);
    // a message's body holds MAX_BATCH_ROWS rows of 12 bytes, padded: no read is longer
    expect(Math.max(...messages.map(([, length]) => length))).toBeLessThanOrEqual(MAX_BATCH_ROWS * 12 + 64);
  });

  test('whose bytes do not match its checksum yields no row: CS_CHECKSUM_MISMATCH naming it, before any message is read', async () => {
    const damaged = partition.slice();
    damaged[damaged.byteLength - 100]! ^= 1;
    const output = outputOfHuge([[damaged]]);
    output.checksum = new PiecewiseSource('huge.checksum', [u64be([crc32cOf([partition])])]);
    const reader = await ShuffleReader.fromSources(output, { wholePartitionBytes: 0 });
    try {
      let rows = 0;
      const error = await failure((async () => {
        for await (const batch of reader.readPartition(0)) rows += batch.numRows;
      })());
      expect(error).toMatchObject({ code: 'CS_CHECKSUM_MISMATCH', where: { file: 'huge.data', partition: 0, offset: 0 } });
      expect(rows).toBe(0);
      expect(output.data.reads).toEqual([]); // the first pass reads with readInto only
    } finally {
      await reader.close();
    }
  });

  test('is verified through read() when the source has no readInto', async () => {
    const output = outputOfHuge([[partition]], false);
    const reader = await ShuffleReader.fromSources(output, { wholePartitionBytes: 0 });
    try {
      expect(await readAll(reader)).toEqual(Array.from({ length: 300_000 }, (_, i) => i));
    } finally {
      await reader.close();
    }
    expect(output.data.reads[0]).toEqual([0, partition.byteLength]); // shorter than a chunk: one read
  });

  test('never joins a run, whatever readRunBytes says: its neighbours are read in runs of their own', async () => {
    const small = streamPieces(makeTable({ v: Int32Array.of(1, 2), w: Float64Array.of(0.5, 1) }));
    const smallStream = [small.schema, small.batches, small.end];
    const output = outputOfHuge([smallStream, [partition], smallStream]);
    const reader = await ShuffleReader.fromSources(output, { readRunBytes: 2 ** 40, wholePartitionBytes: partition.byteLength - 1 });
    let rows = 0;
    try {
      for await (const batch of reader.readPartitions(0, 3)) rows += batch.numRows;
    } finally {
      await reader.close();
    }
    expect(rows).toBe(2 + 300_000 + 2);
    const [first, second, third] = output.offsets.slice(1);
    // the streamed partition's one readInto is its checksum's (it is shorter than a chunk); the third run is read ahead
    expect(output.data.readsInto.slice().sort(([a], [b]) => a - b)).toEqual([[0, first], [first, partition.byteLength], [second, third! - second!]]);
  });

  test.each([-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])('wholePartitionBytes %s is CS_INVALID_ARGUMENT, before any file is read', async (bad) => {
    const output = outputOfHuge([[partition]]);
    const error = await failure(ShuffleReader.fromSources(output, { wholePartitionBytes: bad }));
    expect(error.code).toBe('CS_INVALID_ARGUMENT');
    expect(error.message).toContain('wholePartitionBytes');
    expect(output.index.reads).toEqual([]);
  });

  test('of a sort-writer output is read a block at a time: the same rows', async () => {
    const sortPrefix = join(dir, 'sorted');
    const writer = await createShuffleWriter('sort', { numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: sortPrefix, codec: 'lz4', maxBatchRows: MAX_BATCH_ROWS });
    for (const batch of makeTable({ v: Int32Array.from({ length: 50_000 }, (_, i) => i) }).batches) await writer.write(batch as RecordBatch);
    await writer.finish();
    const reader = await ShuffleReader.open(sortPrefix, { wholePartitionBytes: 0 });
    try {
      expect(await readAll(reader)).toEqual(Array.from({ length: 50_000 }, (_, i) => i));
    } finally {
      await reader.close();
    }
  });
});
