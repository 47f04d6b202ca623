/**
 * The sort writer's output at the byte level (docs/FORMAT.md, "Sort writer
 * partitions"): the partition header, the block headers, the rows, the end
 * marker, where blocks are cut (partition boundaries, maxBatchRows, blockBytes,
 * a large row alone), when they are compressed, and the index and checksum
 * files, which are the columnar writer's.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { decompressFrameSync } from 'lz4-napi';
import * as zstd from 'zstd-napi';
import { Field, Int32, makeData, RecordBatch, Schema, Struct, Utf8 } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { CodecName } from '../src/format/codec.js';
import { encodeSchemaMessage } from '../src/format/ipc-message.js';
import { MemoryPool, ShuffleReader, SortShuffleWriter, type SortShuffleWriterOptions } from '../src/index.js';
import { parseRowPartitionHeader } from '../src/sort-writer/row-format.js';
import { rowsOf } from './support/rows.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-sort-format-')));
afterEach(async () => removeDir(dir));

const INPUT = new Schema([new Field('k', new Int32(), false), new Field('s', new Utf8(), true), new Field('p', new Int32(), false)]);
const OUTPUT = new Schema([INPUT.fields[0]!, INPUT.fields[1]!]);

/** A batch of rows (k, s, partition). */
function batch(rows: readonly (readonly [number, string | null, number])[]): RecordBatch {
  const n = rows.length;
  const text = new TextEncoder();
  const pieces = rows.map(([, s]) => text.encode(s ?? ''));
  const offsets = new Int32Array(n + 1);
  pieces.forEach((p, i) => (offsets[i + 1] = offsets[i]! + (rows[i]![1] === null ? 0 : p.byteLength)));
  const data = new Uint8Array(offsets[n]!);
  pieces.forEach((p, i) => rows[i]![1] !== null && data.set(p, offsets[i]!));
  const validity = new Uint8Array((n + 7) >>> 3);
  let nulls = 0;
  rows.forEach(([, s], i) => (s === null ? nulls++ : (validity[i >>> 3]! |= 1 << (i & 7))));
  const children = [
    makeData({ type: new Int32(), length: n, data: Int32Array.from(rows.map((r) => r[0])) }),
    makeData({ type: new Utf8(), length: n, nullCount: nulls, nullBitmap: validity, valueOffsets: offsets, data }),
    makeData({ type: new Int32(), length: n, data: Int32Array.from(rows.map((r) => r[2])) }),
  ];
  return new RecordBatch(INPUT, makeData({ type: new Struct(INPUT.fields), length: n, children }));
}

interface Output {
  data: Uint8Array;
  index: Uint8Array;
  checksum: Uint8Array;
  partitions: Uint8Array[];
  result: Awaited<ReturnType<SortShuffleWriter['finish']>>;
}

async function write(batches: RecordBatch[], options: Partial<SortShuffleWriterOptions> = {}, numPartitions = 3): Promise<Output> {
  const prefix = join(dir, `map-${Math.random().toString(16).slice(2)}`);
  const writer = await SortShuffleWriter.create({ numPartitions, partitioning: { kind: 'partition-id', column: 'p' }, outputPrefix: prefix, codec: 'none', ...options });
  for (const b of batches) await writer.write(b);
  const result = await writer.finish();
  const data = new Uint8Array(await readFile(result.paths.data));
  const partitions: Uint8Array[] = [];
  let at = 0;
  for (const length of result.partitionLengths) {
    partitions.push(data.subarray(at, at + length));
    at += length;
  }
  return { data, index: new Uint8Array(await readFile(result.paths.index)), checksum: new Uint8Array(await readFile(result.paths.checksum)), partitions, result };
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex').replace(/(..)/g, '$1 ').trim();
const u32 = (bytes: Uint8Array, at: number) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(at, true);

/** The bytes every partition of OUTPUT starts with for `codec`. */
function header(codec: CodecName): Uint8Array {
  return Uint8Array.from([0x43, 0x53, 0x52, 0x57, 1, { none: 0, lz4: 1, zstd: 2 }[codec], 0, 0, ...encodeSchemaMessage(OUTPUT)]);
}

/** The blocks of a partition after its header: [rows, rawLength, storedLength, stored bytes]. */
function blocksOf(partition: Uint8Array, codec: CodecName = 'none'): { rows: number; raw: number; stored: Uint8Array }[] {
  let at = header(codec).byteLength;
  const out: { rows: number; raw: number; stored: Uint8Array }[] = [];
  for (;;) {
    const rows = u32(partition, at);
    if (rows === 0) {
      expect(at + 4, 'the end marker is the last 4 bytes').toBe(partition.byteLength);
      return out;
    }
    const raw = u32(partition, at + 4);
    const stored = u32(partition, at + 8);
    out.push({ rows, raw, stored: partition.subarray(at + 12, at + 12 + stored) });
    at += 12 + stored;
  }
}

describe('a small uncompressed output, byte by byte', () => {
  test('partition 0: header, one block of two rows, end marker; partition 1 empty; partition 2 one row', async () => {
    const out = await write([batch([[1, 'ab', 0], [3, 'xyz', 2], [2, null, 0]])]);
    const h = header('none');
    const [p0, p1, p2] = out.partitions;
    expect(hex(p0!.subarray(0, 8))).toBe('43 53 52 57 01 00 00 00'); // magic CSRW, version 1, codec none, reserved
    expect(hex(p0!.subarray(0, h.byteLength))).toBe(hex(h)); // then the schema message, without the partition-id column
    expect(hex(p0!.subarray(h.byteLength))).toBe(
      [
        '02 00 00 00 20 00 00 00 20 00 00 00', // block: 2 rows, 32 bytes of rows, 32 stored (= raw: uncompressed)
        '0b 00 00 00 00 01 00 00 00 02 00 00 00 61 62 00', // (1, "ab"): length 11, bitmap 0, k 1, s 2 bytes, "ab", 1 byte padding
        '09 00 00 00 02 02 00 00 00 00 00 00 00 00 00 00', // (2, null): length 9, bitmap bit 1 (s null), k 2, s 0, padding
        '00 00 00 00', // end marker
      ].join(' '),
    );
    expect(p1!.byteLength).toBe(0);
    expect(hex(p2!.subarray(h.byteLength))).toBe('01 00 00 00 10 00 00 00 10 00 00 00 0c 00 00 00 00 03 00 00 00 03 00 00 00 78 79 7a 00 00 00 00');
    expect(out.result.partitionRows).toEqual([2, 0, 1]);
    expect(out.result.partitionBatches).toEqual([1, 0, 1]);
  });

  test("the index is Spark's: P + 1 big-endian int64 offsets; the checksum file holds each partition's CRC32C", async () => {
    const out = await write([batch([[1, 'ab', 0], [3, 'xyz', 2], [2, null, 0]])]);
    const index = new DataView(out.index.buffer);
    const lengths = out.partitions.map((p) => p.byteLength);
    expect(out.index.byteLength).toBe(4 * 8);
    expect([0, 1, 2, 3].map((i) => Number(index.getBigInt64(i * 8, false)))).toEqual([0, lengths[0]!, lengths[0]!, lengths[0]! + lengths[2]!]);
    const checksums = new DataView(out.checksum.buffer);
    expect([0, 1, 2].map((p) => Number(checksums.getBigInt64(p * 8, false)))).toEqual(out.partitions.map((p) => (p.byteLength === 0 ? 0 : crc32c(p) >>> 0)));
  });

  test('ShuffleReader reads it back: the schema without the partition-id column, one batch per block', async () => {
    const out = await write([batch([[1, 'ab', 0], [3, 'xyz', 2], [2, null, 0]])]);
    const reader = await ShuffleReader.open(out.result.paths.data.replace(/\.data$/, ''));
    try {
      expect((await reader.schema())?.fields.map((f) => `${f.name}: ${String(f.type)}`)).toEqual(['k: Int32', 's: Utf8']);
      const rows: string[][] = [];
      for (let p = 0; p < 3; p++) {
        const batches: RecordBatch[] = [];
        for await (const b of reader.readPartition(p)) batches.push(b);
        rows.push(batches.flatMap((b) => rowsOf(b)));
      }
      expect(rows).toEqual([['01000000|"6162"', '02000000|null'], [], ['03000000|"78797a"']]);
    } finally {
      await reader.close();
    }
  });
});

describe('an output of no rows', () => {
  test.each([[[]], [[batch([])]]] as const)('partition 0 is the header and the end marker, to keep the schema; the others are empty (batches: %j)', async (batches) => {
    const out = await write([...batches], batches.length === 0 ? { schema: INPUT } : {});
    const [p0, p1, p2] = out.partitions;
    expect(hex(p0!)).toBe(`${hex(header('none'))} 00 00 00 00`);
    expect([p1!.byteLength, p2!.byteLength]).toEqual([0, 0]);
    expect(out.result.partitionRows).toEqual([0, 0, 0]);
    expect(out.result.partitionBatches).toEqual([0, 0, 0]);
    const checksums = new DataView(out.checksum.buffer);
    expect([0, 1, 2].map((p) => Number(checksums.getBigInt64(p * 8, false)))).toEqual([crc32c(p0!) >>> 0, 0, 0]);
  });
});

/** 100 rows of partition 0 with strings of `length` bytes. */
function rowsOfLength(count: number, length: number, partition = 0): [number, string, number][] {
  return Array.from({ length: count }, (_, i) => [i, String.fromCharCode(97 + (i % 26)).repeat(length), partition]);
}

describe('where blocks are cut', () => {
  test('at maxBatchRows rows', async () => {
    const out = await write([batch(rowsOfLength(10, 3))], { maxBatchRows: 4 });
    expect(blocksOf(out.partitions[0]!).map((b) => b.rows)).toEqual([4, 4, 2]);
    expect(out.result.partitionBatches[0]).toBe(3);
  });

  test('before a block would exceed blockBytes; a row larger than that is a block of its own', async () => {
    // rows of 13 + 20 = 33 bytes, padded to 36; blocks of at most 100 bytes hold 2 of them
    const rows = rowsOfLength(5, 20);
    rows.splice(2, 0, [99, 'L'.repeat(300), 0]);
    const out = await write([batch(rows)], { blockBytes: 100 });
    const blocks = blocksOf(out.partitions[0]!);
    expect(blocks.map((b) => [b.rows, b.raw])).toEqual([[2, 72], [1, 316], [2, 72], [1, 36]]);
    expect(blocks.every((b) => b.stored.byteLength === b.raw)).toBe(true);
  });

  test('at every partition boundary: a block never mixes partitions', async () => {
    const out = await write([batch([[1, 'a', 1], [2, 'b', 0], [3, 'c', 1], [4, 'd', 0]])]);
    expect(blocksOf(out.partitions[0]!).map((b) => b.rows)).toEqual([2]);
    expect(blocksOf(out.partitions[1]!).map((b) => b.rows)).toEqual([2]);
  });
});

describe('compression', () => {
  const many = () => batch(rowsOfLength(400, 30));

  test.each([
    ['lz4', [0x04, 0x22, 0x4d, 0x18], (b: Uint8Array) => decompressFrameSync(Buffer.from(b))],
    ['zstd', [0x28, 0xb5, 0x2f, 0xfd], (b: Uint8Array) => zstd.decompress(b)],
  ] as const)('%s: each block is one frame of the codec that decompresses to exactly the uncompressed rows', async (codec, magic, decompress) => {
    const plain = blocksOf((await write([many()], { codec: 'none', maxBatchRows: 150 })).partitions[0]!);
    const out = await write([many()], { codec, maxBatchRows: 150 });
    expect(hex(out.partitions[0]!.subarray(0, 8))).toBe(`43 53 52 57 01 0${codec === 'lz4' ? 1 : 2} 00 00`);
    const blocks = blocksOf(out.partitions[0]!, codec);
    expect(blocks.map((b) => b.rows)).toEqual([150, 150, 100]);
    blocks.forEach((b, i) => {
      expect(b.stored.byteLength).toBeLessThan(b.raw);
      expect([...b.stored.subarray(0, 4)]).toEqual(magic);
      expect(hex(new Uint8Array(decompress(b.stored)))).toBe(hex(plain[i]!.stored));
    });
  });

  test('blocks of fewer than compressionMinRows rows are stored as they are, unless they hold 4 KiB or more', async () => {
    const out = await write([batch([...rowsOfLength(150, 30), ...rowsOfLength(50, 30, 1)])], { codec: 'lz4', compressionMinRows: 100 });
    const [big] = blocksOf(out.partitions[0]!, 'lz4');
    const [small] = blocksOf(out.partitions[1]!, 'lz4');
    expect(big!.stored.byteLength).toBeLessThan(big!.raw);
    expect(small!.stored.byteLength).toBe(small!.raw);
    expect(u32(small!.stored, 0)).toBe(13 + 30 - 4); // the first row's length prefix (13 fixed bytes + 30 of text, less the prefix): rows as they are
    // 50 rows of 300-byte strings: few rows, but 15 KiB
    const wide = await write([batch(rowsOfLength(50, 300))], { codec: 'lz4', compressionMinRows: 100 });
    const [block] = blocksOf(wide.partitions[0]!, 'lz4');
    expect(block!.rows).toBe(50);
    expect(block!.raw).toBeGreaterThanOrEqual(4096);
    expect(block!.stored.byteLength).toBeLessThan(block!.raw);
  });
});

describe('spilled blocks', () => {
  test("come first in a partition, run by run, then the rows still in memory: the partition's rows stay in input order", async () => {
    const batches = Array.from({ length: 8 }, (_, b) => batch(Array.from({ length: 500 }, (_, i) => [b * 500 + i, 'x'.repeat(i % 40), i % 3] as [number, string, number])));
    const out = await write(batches, { memoryPool: new MemoryPool(128 * 1024), codec: 'lz4' });
    expect(out.result.spills).toBeGreaterThan(1);
    const reader = await ShuffleReader.open(out.result.paths.data.replace(/\.data$/, ''));
    try {
      for (let p = 0; p < 3; p++) {
        const keys: number[] = [];
        for await (const b of reader.readPartition(p)) for (const k of b.getChildAt(0)!.toArray() as Int32Array) keys.push(k);
        const expected = Array.from({ length: 4000 }, (_, k) => k).filter((k) => (k % 500) % 3 === p);
        expect(keys).toEqual(expected);
        // blocks from different runs are not merged: a partition has at least one block per run it was in
        expect(blocksOf(out.partitions[p]!, 'lz4').length).toBeGreaterThanOrEqual(out.result.spills);
      }
    } finally {
      await reader.close();
    }
  });
});

/**
 * arrow-js merges the columns of one name when it builds a batch: a fuzz case (seed 77001, case
 * 6991) flipped a bit of a column name to another column's, and the batches read back claimed
 * Utf8 over a column of durations (a coalesced read then threw a RangeError). The sort writer
 * takes arrow-js batches, which cannot have two columns of one name, so such a header is corrupt.
 */
describe('a header whose schema has two columns of one name', () => {
  test('is CS_CORRUPT_DATA, at the schema message', () => {
    const twice = new Schema([new Field('k', new Int32(), false), new Field('k', new Utf8(), true)]);
    const bytes = Uint8Array.from([0x43, 0x53, 0x52, 0x57, 1, 0, 0, 0, ...encodeSchemaMessage(twice)]);
    expect(() => parseRowPartitionHeader(bytes, { file: 'x.data', partition: 3, offset: 100 })).toThrow(
      expect.objectContaining({ code: 'CS_CORRUPT_DATA', message: 'invalid sort-writer partition: the schema has several columns of the same name, which the sort writer never writes (file x.data, partition 3, byte offset 108)' }),
    );
    expect(parseRowPartitionHeader(header('none'), {}).schema.fields.map((f) => f.name)).toEqual(['k', 's']);
  });
});
