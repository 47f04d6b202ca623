/**
 * The sort writer's partition reader (src/sort-writer/row-reader.ts) and the lines of the shuffle
 * reader (src/reader/shuffle-reader.ts, src/reader/streamed-partition.ts) that call it: the checks on
 * a partition's framing, the size limits, where an error is located, the header cache, and the
 * batches a partition's blocks become, read whole and a block at a time (`wholePartitionBytes: 0`).
 *
 * Each test here fails against a mutant of those files that the other tests let through (a check
 * dropped, a boundary moved by one, a location or a read option lost on the way): see
 * docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps". The partitions are written
 * by hand from docs/FORMAT.md, "Sort writer partitions" (the schema message is apache-arrow's own,
 * cut from a stream it writes; LZ4 frames are lz4-napi's), and the rows read back are compared with
 * the rows written; nothing is taken from the code under test. Nothing here measures time.
 */
import { crc32c } from '@node-rs/crc32';
import { compressFrameSync } from 'lz4-napi';
import { Dictionary, Field, FixedSizeList, Int32, Int8, Schema, Struct, Table, tableToIPC, Utf8, type RecordBatch } from 'apache-arrow';
import { describe, expect, test } from 'vitest';
import { ShuffleError, ShuffleReader, type ByteRangeSource, type OpenOptions } from '../src/index.js';
import { summarizeRowPartitionAt } from '../src/sort-writer/row-reader.js';

// ---------------------------------------------------------------------------------------------------------------------
// Partitions by hand (docs/FORMAT.md, "Sort writer partitions")
// ---------------------------------------------------------------------------------------------------------------------

/** Three Int8 columns, not null: a row is u32 length 4 | a 1-byte null bitmap | three 1-byte slots = 8 bytes, no padding. */
const ABC = new Schema([new Field('a', new Int8(), false), new Field('b', new Int8(), false), new Field('c', new Int8(), false)]);
const XYZ = new Schema([new Field('x', new Int8(), false), new Field('y', new Int8(), false), new Field('z', new Int8(), false)]);
/** A dictionary of structs holding a dictionary: a schema apache-arrow writes and the IPC reader's schema checks take, but no writer takes (the columnar and the sort writer refuse "a dictionary whose values hold another dictionary"), so rows cannot hold it. */
const DICT_OF_DICT = new Schema([new Field('u', new Dictionary(new Struct([new Field('d', new Dictionary(new Utf8(), new Int32(), 7), true)]), new Int32(), 8), true)]);
type Row = readonly [number, number, number];

/** The encapsulated schema message apache-arrow writes: its IPC stream of no batches less the 8-byte end-of-stream marker. */
function schemaMessage(schema: Schema): Uint8Array {
  const stream = tableToIPC(new Table(schema), 'stream');
  return stream.subarray(0, stream.byteLength - 8);
}

const CODEC_ID = { none: 0, lz4: 1 } as const;
/** 43 53 52 57 "CSRW" | version 1 | codec | reserved 0 0 | schema message. */
function header(codec: keyof typeof CODEC_ID = 'none', schema: Schema = ABC): number[] {
  return [0x43, 0x53, 0x52, 0x57, 1, CODEC_ID[codec], 0, 0, ...schemaMessage(schema)];
}

const u32 = (n: number) => [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, n >>> 24];
/** The rows of a block: each is u32 length 4 | bitmap 00 | a | b | c (8 bytes, a multiple of 4: no padding). */
function rowBytes(rows: readonly Row[]): number[] {
  return rows.flatMap(([a, b, c]) => [...u32(4), 0, a & 0xff, b & 0xff, c & 0xff]);
}
/** A block stored as it is: u32 rowCount | u32 rawLength | u32 storedLength (= rawLength) | the rows. */
function rawBlock(rows: readonly Row[], claims: { count?: number; raw?: number; stored?: number } = {}): number[] {
  const bytes = rowBytes(rows);
  return [...u32(claims.count ?? rows.length), ...u32(claims.raw ?? bytes.length), ...u32(claims.stored ?? bytes.length), ...bytes];
}
/** A block stored as one LZ4 frame of its rows (lz4-napi's sync compressor leaks about its input's size: a few hundred bytes here). */
function lz4Block(rows: readonly Row[], claims: { count?: number; raw?: number } = {}): number[] {
  const bytes = rowBytes(rows);
  const frame = [...compressFrameSync(Buffer.from(bytes))];
  expect(frame.length, 'the frame is shorter than the rows (else the block is stored as it is)').toBeLessThan(bytes.length);
  return [...u32(claims.count ?? rows.length), ...u32(claims.raw ?? bytes.length), ...u32(frame.length), ...frame];
}
const END = [0, 0, 0, 0];

/** `n` rows, row i = (i, -i, i * 3) as Int8s. */
const rowsFrom = (start: number, n: number): Row[] => Array.from({ length: n }, (_, i) => [(start + i) << 24 >> 24, -(start + i) << 24 >> 24, ((start + i) * 3) << 24 >> 24]);

// ---------------------------------------------------------------------------------------------------------------------
// An output in memory, read whole and a block at a time
// ---------------------------------------------------------------------------------------------------------------------

class MemorySource implements ByteRangeSource {
  readonly reads: [number, number][] = [];
  constructor(readonly name: string, private readonly bytes: Uint8Array) {}
  async size() {
    return this.bytes.byteLength;
  }
  async read(offset: number, length: number) {
    this.reads.push([offset, length]);
    return this.bytes.slice(offset, offset + length);
  }
  async close() {}
}

/** A source that reads into the reader's buffers, as a file does: the reader then reuses its read buffers. */
class BufferedMemorySource extends MemorySource {
  constructor(name: string, private readonly all: Uint8Array) {
    super(name, all);
  }
  async readInto(offset: number, target: Uint8Array) {
    this.reads.push([offset, target.byteLength]);
    target.set(this.all.subarray(offset, offset + target.byteLength));
  }
}

/** Data, index (P + 1 big-endian int64 offsets) and, unless `checksums` is false, the CRC32C of each partition. */
function output(partitions: readonly (readonly number[])[], checksums = true, buffered = false) {
  const data = Uint8Array.from(partitions.flat());
  const index = new Uint8Array((partitions.length + 1) * 8);
  const sums = new Uint8Array(partitions.length * 8);
  let at = 0;
  partitions.forEach((p, i) => {
    new DataView(index.buffer).setBigInt64((i + 1) * 8, BigInt((at += p.length)), false);
    new DataView(sums.buffer).setBigInt64(i * 8, BigInt(crc32c(Buffer.from(p))), false);
  });
  return {
    data: buffered ? new BufferedMemorySource('mem:data', data) : new MemorySource('mem:data', data),
    index: new MemorySource('mem:index', index),
    ...(checksums ? { checksum: new MemorySource('mem:checksum', sums) } : {}),
  };
}

type Outcome = { rows: Row[]; batches: number[]; names: string[][] } | { code: string; message: string; partition?: number; offset?: number; yielded: number; error: unknown };

const MODES = [
  ['whole', {}],
  ['a block at a time', { wholePartitionBytes: 0 }],
] as const;

/** Partition `p` (or the range [p, end)) of an output made of `partitions`, read with `options`: its rows and batch lengths, or its error. */
async function readOut(partitions: readonly (readonly number[])[], options: OpenOptions = {}, p = 0, end = p + 1, checksums = true): Promise<Outcome> {
  const reader = await ShuffleReader.fromSources(output(partitions, checksums), options);
  const rows: Row[] = [];
  const batches: number[] = [];
  const names: string[][] = [];
  try {
    for await (const batch of reader.readPartitions(p, end)) collect(batch, rows, batches, names);
    return { rows, batches, names };
  } catch (error) {
    if (!(error instanceof ShuffleError)) return { code: `untyped ${String(error)}`, message: '', yielded: rows.length, error };
    return { code: error.code, message: error.message, partition: error.where.partition, offset: error.where.offset, yielded: rows.length, error };
  } finally {
    await reader.close();
  }
}

function collect(batch: RecordBatch, rows: Row[], batches: number[], names: string[][]): void {
  batches.push(batch.numRows);
  names.push(batch.schema.fields.map((f) => f.name));
  const columns = [0, 1, 2].map((i) => batch.getChildAt(i)!.toArray() as Int8Array);
  for (let i = 0; i < batch.numRows; i++) rows.push([columns[0]![i]!, columns[1]![i]!, columns[2]![i]!]);
}

/** Both modes must give CS_CORRUPT_DATA at `offset` of the data file in partition `p`, with a message matching `message`. */
async function expectCorrupt(partitions: readonly (readonly number[])[], offset: number, message: RegExp, p = 0, options: OpenOptions = {}): Promise<void> {
  for (const [mode, extra] of MODES) {
    const outcome = await readOut(partitions, { ...options, ...extra }, p);
    expect(outcome, mode).toMatchObject({ code: 'CS_CORRUPT_DATA', partition: p, offset });
    expect((outcome as { message: string }).message, mode).toMatch(message);
  }
}

const H = header().length;

// ---------------------------------------------------------------------------------------------------------------------
// The hand-made partitions are read as written
// ---------------------------------------------------------------------------------------------------------------------

describe('hand-made partitions read back as written', () => {
  test.each(MODES)('raw and LZ4 blocks, one batch per block, rows in order (%s)', async (_mode, options) => {
    const rows = [rowsFrom(0, 10), rowsFrom(10, 40), rowsFrom(50, 3)];
    const partition = [...header('lz4'), ...rawBlock(rows[0]!), ...lz4Block(rows[1]!), ...rawBlock(rows[2]!), ...END];
    expect(await readOut([partition], options)).toEqual({ rows: rows.flat(), batches: [10, 40, 3], names: [['a', 'b', 'c'], ['a', 'b', 'c'], ['a', 'b', 'c']] });
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// maxBufferBytes
// ---------------------------------------------------------------------------------------------------------------------

describe("maxBufferBytes (OpenOptions) bounds a block's rows: a block claiming more is refused at its header", () => {
  // 10 rows of 8 bytes: rawLength 80
  const partition = [...header(), ...rawBlock(rowsFrom(0, 10)), ...END];

  test.each(MODES)('a block of exactly maxBufferBytes (80) bytes of rows is read (%s)', async (_mode, options) => {
    expect(await readOut([partition], { ...options, maxBufferBytes: 80 })).toMatchObject({ rows: rowsFrom(0, 10), batches: [10] });
  });

  test('a block of 80 bytes of rows under maxBufferBytes 79 is CS_CORRUPT_DATA at the block, read whole and a block at a time', async () => {
    await expectCorrupt([partition], H, /over the maxBufferBytes limit of 79/, 0, { maxBufferBytes: 79 });
  });

  test('the limit is the reader\'s for every partition of a range, the second one too (and read a block at a time)', async () => {
    const first = [...header(), ...rawBlock(rowsFrom(0, 2)), ...END];
    await expectCorrupt([first, partition], first.length + H, /over the maxBufferBytes limit of 79/, 1, { maxBufferBytes: 79 });
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// Block framing
// ---------------------------------------------------------------------------------------------------------------------

describe('block framing: every count and length is checked against the bytes present', () => {
  test('a block of rows that each take exactly the fixed part (8 bytes, rawLength / 8 rows) is read', async () => {
    for (const [mode, options] of MODES) expect(await readOut([[...header(), ...rawBlock(rowsFrom(0, 7)), ...END]], options), mode).toMatchObject({ rows: rowsFrom(0, 7) });
  });

  test('a block claiming 2^32 - 1 rows in 8 bytes is CS_CORRUPT_DATA at the block, before anything is allocated for its rows', async () => {
    await expectCorrupt([[...header(), ...rawBlock(rowsFrom(0, 1), { count: 0xffffffff }), ...END]], H, /4294967295 rows in 8 bytes/);
  });

  test.each([1, 2, 3])('a partition whose end marker is cut to %i bytes: CS_CORRUPT_DATA where the marker starts', async (kept) => {
    const body = [...header(), ...rawBlock(rowsFrom(0, 2))];
    await expectCorrupt([[...body, ...END.slice(0, kept)]], body.length, /ends without its end marker/);
  });

  test.each([8, 9, 10, 11])('a partition that ends %i bytes into a block header: CS_CORRUPT_DATA at that header', async (kept) => {
    const body = [...header(), ...rawBlock(rowsFrom(0, 2))];
    const next = rawBlock(rowsFrom(2, 2));
    await expectCorrupt([[...body, ...next.slice(0, kept)]], body.length, /ends inside a block header/);
  });

  test('a block storing one byte more than its rows take (storedLength = rawLength + 1) is CS_CORRUPT_DATA at the block', async () => {
    const rows = rowBytes(rowsFrom(0, 2));
    const block = [...u32(2), ...u32(rows.length), ...u32(rows.length + 1), ...rows, 0];
    await expectCorrupt([[...header('lz4'), ...block, ...END]], H, /stores 17 bytes for 16 bytes of rows/);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// The header cache
// ---------------------------------------------------------------------------------------------------------------------

/** Each partition of an output read by one reader, one readPartition() after the other: the column names of its batches. */
async function namesOneByOne(partitions: readonly (readonly number[])[], options: OpenOptions, buffered: boolean): Promise<string[][]> {
  const reader = await ShuffleReader.fromSources(output(partitions, true, buffered), options);
  const names: string[][] = [];
  try {
    for (let p = 0; p < partitions.length; p++) for await (const batch of reader.readPartition(p)) names.push(batch.schema.fields.map((f) => f.name));
  } finally {
    await reader.close();
  }
  return names;
}

describe('the header cache: a partition whose header differs from the last one read gets its own schema', () => {
  // two outputs' partitions side by side: headers of one length (one-letter names), other names
  const abc = [...header('none', ABC), ...rawBlock(rowsFrom(0, 2)), ...END];
  const xyz = [...header('none', XYZ), ...rawBlock(rowsFrom(2, 2)), ...END];

  test.each([
    ['whole, fresh reads', {}, false],
    ['whole, into reused read buffers', {}, true],
    ['a block at a time', { wholePartitionBytes: 0 }, false],
  ] as const)('headers of the same length, other column names: each partition reads with its own (%s)', async (_mode, options, buffered) => {
    expect(header('none', ABC).length).toBe(header('none', XYZ).length);
    expect(await namesOneByOne([abc, xyz, abc], options, buffered)).toEqual([['a', 'b', 'c'], ['x', 'y', 'z'], ['a', 'b', 'c']]);
  });

  test('a header whose schema rows cannot hold (a dictionary of structs of a dictionary) is CS_CORRUPT_DATA at every partition that has it, not only the first', async () => {
    const bad = [...header('none', DICT_OF_DICT), ...END];
    for (const [mode, options] of MODES) {
      const reader = await ShuffleReader.fromSources(output([abc, bad, bad]), options);
      try {
        for (const p of [0, 1, 2]) {
          const outcome = await (async () => {
            for await (const batch of reader.readPartition(p)) void batch;
          })().then(() => 'read', (e: unknown) => (e instanceof ShuffleError ? `${e.code} ${e.where.partition} ${/its schema has a column rows cannot hold/.test(e.message)}` : `untyped ${String(e)}`));
          expect(outcome, `${mode}, partition ${p}`).toBe(p === 0 ? 'read' : `CS_CORRUPT_DATA ${p} true`);
        }
      } finally {
        await reader.close();
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// Where errors are located: the data file's offset of the block at fault
// ---------------------------------------------------------------------------------------------------------------------

describe('an error inside a block is located at that block (in the data file), whichever block of the partition it is', () => {
  const first = [...header(), ...rawBlock(rowsFrom(0, 2)), ...END]; // partition 0: the offsets below are past it
  const blocks = [rawBlock(rowsFrom(0, 3)), lz4Block(rowsFrom(3, 40)), rawBlock(rowsFrom(43, 2))];
  const at = (b: number) => first.length + H + blocks.slice(0, b).reduce((n, block) => n + block.length, 0);
  const partition = (edit: (blocks: number[][]) => void) => {
    const copy = blocks.map((block) => block.slice());
    edit(copy);
    return [...header('lz4'), ...copy.flat(), ...END];
  };

  test('a row of the third block claiming more bytes than its block holds', async () => {
    const damaged = partition((b) => b[2]!.splice(12 + 8, 4, ...u32(200))); // the second row's length
    await expectCorrupt([first, damaged], at(2), /block at/, 1);
  });

  test('a row of the first block claiming more bytes than its block holds', async () => {
    const damaged = partition((b) => b[0]!.splice(12, 4, ...u32(200)));
    await expectCorrupt([first, damaged], at(0), /block at/, 1);
  });

  test("the second block's LZ4 frame with four of its compressed bytes overwritten (it does not decompress to its rows)", async () => {
    // the LZ4 frame's first data byte after the 7-byte frame header and 4-byte block size: the compressed rows
    const damaged = partition((b) => b[1]!.splice(12 + 11, 4, 0xff, 0xff, 0xff, 0xff));
    await expectCorrupt([first, damaged], at(1), /block at/, 1);
  });

  test('a second block claiming 1 GiB of rows in its few LZ4 bytes is refused from its sizes, before anything is decompressed', async () => {
    const damaged = partition((b) => b[1]!.splice(4, 4, ...u32(1 << 30)));
    await expectCorrupt([first, damaged], at(1), /claims 1073741824 bytes of rows but/, 1);
  });
});

describe("the next block's framing is checked before this block's rows are decoded (row-reader.ts: it decompresses while this one is decoded)", () => {
  test('a first block whose rows do not decode, before a block whose stored bytes run past the partition: the second block\'s framing error', async () => {
    const block0 = rawBlock(rowsFrom(0, 3));
    block0.splice(12, 4, ...u32(200)); // its first row claims 200 bytes
    const block1 = rawBlock(rowsFrom(3, 2), { stored: 1 << 20 });
    await expectCorrupt([[...header(), ...block0, ...block1, ...END]], H + block0.length, /runs past the end of the partition/);
  });
});

describe('maxBufferBytes also bounds what a block decodes to', () => {
  // FixedSizeList<Int32>(1000), nullable: a null row is u32 length 5 | bitmap 01 | a zero u32 length slot | 3 bytes of padding
  // = 12 bytes, and decodes to 1000 child values of 4 bytes: 10 rows are 120 bytes in the block, 40,000 decoded
  const FSL = new Schema([new Field('l', new FixedSizeList(1000, new Field('item', new Int32(), true)), true)]);
  const nullRow = [...u32(5), 1, 0, 0, 0, 0, 0, 0, 0];
  const partition = [0x43, 0x53, 0x52, 0x57, 1, 0, 0, 0, ...schemaMessage(FSL), ...u32(10), ...u32(120), ...u32(120), ...Array.from({ length: 10 }, () => nullRow).flat(), ...END];
  const at = 8 + schemaMessage(FSL).length;

  test.each(MODES)('10 null rows of FixedSizeList(1000) read back under the default limit (%s)', async (_mode, options) => {
    const reader = await ShuffleReader.fromSources(output([partition]), options);
    try {
      const lengths: number[] = [];
      for await (const batch of reader.readPartition(0)) lengths.push(batch.numRows, batch.getChildAt(0)!.nullCount);
      expect(lengths).toEqual([10, 10]);
    } finally {
      await reader.close();
    }
  });

  test('under maxBufferBytes 1000 they are CS_CORRUPT_DATA at the block (120 bytes of rows, 40,000 decoded)', async () => {
    await expectCorrupt([partition], at, /buffer limit/, 0, { maxBufferBytes: 1000 });
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// inspect's summary of a row partition (summarizeRowPartitionAt)
// ---------------------------------------------------------------------------------------------------------------------

describe("inspect's summary of a row partition locates its errors as the reader does: the caller's file and partition, offsets from the caller's", () => {
  const where = { file: 'mem:data', partition: 3, offset: 1000 };
  const summarize = async (partition: readonly number[]) => {
    const bytes = Uint8Array.from(partition);
    return summarizeRowPartitionAt(async (offset, length) => bytes.slice(offset, offset + length), 0, bytes.byteLength, where).then(
      (summary) => ({ blocks: summary.blocks, rows: summary.rows }),
      (e: unknown) => (e instanceof ShuffleError ? { code: e.code, where: e.where, message: e.message } : { untyped: String(e) }),
    );
  };

  test('a valid partition: its blocks and rows, from the block headers', async () => {
    expect(await summarize([...header('lz4'), ...rawBlock(rowsFrom(0, 3)), ...lz4Block(rowsFrom(3, 40)), ...END])).toEqual({ blocks: 2, rows: 43 });
  });

  test('an unknown format version: CS_CORRUPT_DATA at byte 4 of the partition', async () => {
    const partition = header();
    partition[4] = 9;
    expect(await summarize([...partition, ...END])).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: 'mem:data', partition: 3, offset: 1004 } });
  });

  test("a block whose stored bytes run past the partition: CS_CORRUPT_DATA at the block's header", async () => {
    const block = rawBlock(rowsFrom(0, 2), { stored: 1 << 20 });
    expect(await summarize([...header(), ...rawBlock(rowsFrom(0, 1)), ...block, ...END])).toMatchObject({
      code: 'CS_CORRUPT_DATA',
      where: { file: 'mem:data', partition: 3, offset: 1000 + H + 20 },
      message: expect.stringMatching(/runs past the end of the partition/),
    });
  });
});

describe('a compressed block must decompress to exactly the rawLength its header claims', () => {
  test('an LZ4 frame of 20 rows (160 bytes) in a block claiming 168: CS_CORRUPT_DATA at the block, though its 20 rows would decode', async () => {
    const same = Array.from({ length: 20 }, (): Row => [1, 2, 3]);
    const first = rawBlock(rowsFrom(0, 2));
    const partition = [...header('lz4'), ...first, ...lz4Block(same, { raw: 168 }), ...END];
    await expectCorrupt([partition], H + first.length, /decompressed to 160 bytes, its header says 168/);
  });

  test('the same frame in a block claiming its 160 bytes reads back its 20 rows', async () => {
    const same = Array.from({ length: 20 }, (): Row => [1, 2, 3]);
    for (const [mode, options] of MODES) {
      expect(await readOut([[...header('lz4'), ...lz4Block(same), ...END]], options), mode).toMatchObject({ rows: same, batches: [20] });
    }
  });
});

describe('block headers are checked against the partition header and the row layout before any block is decoded', () => {
  test('under codec none, a block storing fewer bytes than its rows (compressed) is refused at its header, before the rows of the block before it', async () => {
    const first = rawBlock(rowsFrom(0, 2));
    const rows = rowBytes(rowsFrom(2, 4));
    const compressed = [...u32(4), ...u32(rows.length), ...u32(rows.length - 8), ...rows.slice(0, rows.length - 8)];
    const partition = [...header('none'), ...first, ...compressed, ...END];
    for (const [mode, options] of MODES) {
      expect(await readOut([partition], options), mode).toMatchObject({ code: 'CS_CORRUPT_DATA', partition: 0, offset: H + first.length, yielded: 0 });
    }
  });

  test('a block claiming 3 rows in 16 bytes of rows of 3 Int8 (at least 4 + 1 + 3 = 8 bytes a row) is refused from its header', async () => {
    await expectCorrupt([[...header(), ...rawBlock(rowsFrom(0, 2), { count: 3 }), ...END]], H, /3 rows in 16 bytes; a row takes at least 8/);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// How a block's rows become batches
// ---------------------------------------------------------------------------------------------------------------------

describe("a block whose dictionary values do not fit the index type is split into several batches, and every row comes back (FORMAT.md)", () => {
  // d: Dictionary<Int8 values, Int8 indices>: a row is u32 length 2 | bitmap | the value (1 byte), padded to 8
  const DICT = new Schema([new Field('d', new Dictionary(new Int8(), new Int8(), 0), true)]);
  const values = Array.from({ length: 200 }, (_, i) => (i - 100) << 24 >> 24); // 200 distinct values: more than 128
  const rows = values.flatMap((v) => [...u32(2), 0, v & 0xff, 0, 0]);
  const partition = [0x43, 0x53, 0x52, 0x57, 1, 0, 0, 0, ...schemaMessage(DICT), ...u32(200), ...u32(rows.length), ...u32(rows.length), ...rows, ...END];

  test.each(MODES)('200 distinct values in one block: batches of 128 and 72 rows, every value in order (%s)', async (_mode, options) => {
    const reader = await ShuffleReader.fromSources(output([partition]), options);
    try {
      const batches: number[] = [];
      const read: (number | null)[] = [];
      for await (const batch of reader.readPartition(0)) {
        batches.push(batch.numRows);
        for (let i = 0; i < batch.numRows; i++) read.push(batch.getChildAt(0)!.get(i) as number | null);
      }
      expect(batches).toEqual([128, 72]);
      expect(read).toEqual(values);
    } finally {
      await reader.close();
    }
  });
});

describe("schema() of a sort output whose first non-empty partition has a damaged header", () => {
  test('an unknown format version in partition 1 (partition 0 empty): CS_CORRUPT_DATA naming partition 1, at its byte 4', async () => {
    const partition = [...header(), ...rawBlock(rowsFrom(0, 2)), ...END];
    partition[4] = 9;
    const reader = await ShuffleReader.fromSources(output([[], partition]));
    try {
      const error = await reader.schema().then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(ShuffleError);
      expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: 'mem:data', partition: 1, offset: 4 } });
    } finally {
      await reader.close();
    }
  });
});
