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
import { makeTable, tableToIPC, type RecordBatch, type Table } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createShuffleWriter, ShuffleError, ShuffleReader, type ByteRangeSource } from '../src/index.js';
import { crc32cOf } from '../src/format/output-files.js';
import { CHECKSUM_CHUNK_BYTES } from '../src/reader/streamed-partition.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

/**
 * A data source whose bytes are `pieces` back to back, assembled per read:
 * a file of any length held as a few pieces (one piece may repeat). Records
 * the length of each read and readInto call.
 */
class PiecewiseSource implements ByteRangeSource {
  readonly reads: [offset: number, length: number][] = [];
  readonly readsInto: [offset: number, length: number][] = [];
  private readonly starts: number[] = [];
  private readonly length: number;

  constructor(readonly name: string, private readonly pieces: readonly Uint8Array[], withReadInto = true) {
    let at = 0;
    for (const piece of pieces) {
      this.starts.push(at);
      at += piece.byteLength;
    }
    this.length = at;
    if (!withReadInto) this.readInto = undefined;
  }

  async size(): Promise<number> {
    return this.length;
  }

  async read(offset: number, length: number): Promise<Uint8Array> {
    this.reads.push([offset, length]);
    const bytes = new Uint8Array(length);
    this.copy(offset, bytes);
    return bytes;
  }

  readInto?: (offset: number, target: Uint8Array) => Promise<void> = async (offset, target) => {
    this.readsInto.push([offset, target.byteLength]);
    this.copy(offset, target);
  };

  async close(): Promise<void> {}

  private copy(offset: number, target: Uint8Array): void {
    const end = offset + target.byteLength;
    this.pieces.forEach((piece, i) => {
      const start = this.starts[i]!;
      const from = Math.max(offset, start);
      const to = Math.min(end, start + piece.byteLength);
      if (from < to) target.set(piece.subarray(from - start, to - start), from - offset);
    });
  }
}

function u64be(values: readonly number[]): Uint8Array {
  const bytes = new Uint8Array(values.length * 8);
  const view = new DataView(bytes.buffer);
  values.forEach((v, i) => view.setBigUint64(i * 8, BigInt(v), false));
  return bytes;
}

/** An output's three sources from its partitions, each given as its pieces (the checksum file CRC32C's each, as the writer does). */
function outputOf(partitions: readonly (readonly Uint8Array[])[], withReadInto = true) {
  const offsets = [0];
  for (const pieces of partitions) offsets.push(offsets[offsets.length - 1]! + pieces.reduce((sum, piece) => sum + piece.byteLength, 0));
  return {
    data: new PiecewiseSource('huge.data', partitions.flat(), withReadInto),
    index: new PiecewiseSource('huge.index', [u64be(offsets)]),
    checksum: new PiecewiseSource('huge.checksum', [u64be(partitions.map((pieces) => crc32cOf(pieces)))]),
    offsets,
  };
}

/**
 * An Arrow IPC stream's schema message, record batch message and
 * end-of-stream marker, apart (the stream arrow-js writes for one batch):
 *
 * ```text
 * FF FF FF FF | int32 metadataLength | schema flatbuffer | FF FF FF FF | int32 metadataLength | batch flatbuffer | body | FF FF FF FF 00 00 00 00
 * ```
 */
function streamPieces(table: Table): { schema: Uint8Array; batch: Uint8Array; end: Uint8Array } {
  const stream = tableToIPC(table, 'stream');
  const schemaLength = 8 + new DataView(stream.buffer, stream.byteOffset).getInt32(4, true);
  return { schema: stream.subarray(0, schemaLength), batch: stream.subarray(schemaLength, stream.byteLength - 8), end: stream.subarray(stream.byteLength - 8) };
}

async function failure(promise: Promise<unknown>): Promise<ShuffleError> {
  const error = await promise.then(() => null, (e: unknown) => e);
  expect(error).toBeInstanceOf(ShuffleError);
  return error as ShuffleError;
}

describe('a partition longer than Node\'s largest buffer', () => {
  // 17 batches of 2^26 int32 values (256 MiB each): 4.25 GiB, held as one batch message repeated
  const ROWS = 2 ** 26;
  const COPIES = Math.ceil(constants.MAX_LENGTH / (ROWS * 4));

  test('is read a message at a time, verified first, and the partition after it is read too', async () => {
    const huge = streamPieces(makeTable({ v: Int32Array.from({ length: ROWS }, (_, i) => i) }));
    const small = streamPieces(makeTable({ v: Int32Array.of(7, 8, 9) }));
    const hugePieces = [huge.schema, ...Array.from({ length: COPIES }, () => huge.batch), huge.end];
    const output = outputOf([hugePieces, [small.schema, small.batch, small.end]]);
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
    const output = outputOf([pieces]);
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
    const output = outputOf([[damaged]]);
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
    const output = outputOf([[partition]], false);
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
    const smallStream = [small.schema, small.batch, small.end];
    const output = outputOf([smallStream, [partition], smallStream]);
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
    const output = outputOf([[partition]]);
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
