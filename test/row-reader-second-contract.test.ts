/**
 * The sort writer's partition reader, second pass: what test/row-reader-contract.test.ts leaves out
 * of src/sort-writer/row-reader.ts (inspect's summary of a partition, the header cache's key) and
 * the sort writer's check of columns sharing a dictionary id (src/sort-writer/shared-dictionaries.ts,
 * never swept before).
 *
 * Each test fails against a mutant of those files that the other tests let through (docs/RELIABILITY.md,
 * "The tests notice a broken line: mutation sweeps"). Partitions are written by hand from docs/FORMAT.md,
 * "Sort writer partitions" (the schema message is apache-arrow's own); the counts of values a row may
 * hold are worked by hand from the index types (Int8 indexes 128 values, Int16 32,768, Int32 2^31 - 1).
 * Nothing here measures time.
 */
import { Dictionary, Field, FixedSizeList, Int16, Int32, Int8, List, Schema, SparseUnion, Struct, Table, tableToIPC, Utf8, type DataType } from 'apache-arrow';
import { compressFrameSync } from 'lz4-napi';
import { describe, expect, test } from 'vitest';
import { ShuffleError, ShuffleReader } from '../src/index.js';
import { unreadableSharedDictionary } from '../src/sort-writer/shared-dictionaries.js';
import { summarizeRowPartitionAt } from '../src/sort-writer/row-reader.js';
import { outputOf, PiecewiseSource } from './support/piecewise-output.js';

// ---------------------------------------------------------------------------------------------------------------------
// Partitions by hand (docs/FORMAT.md, "Sort writer partitions")
// ---------------------------------------------------------------------------------------------------------------------

/** The encapsulated schema message apache-arrow writes: its IPC stream of no batches less the 8-byte end-of-stream marker. */
function schemaMessage(schema: Schema): Uint8Array {
  const stream = tableToIPC(new Table(schema), 'stream');
  return stream.subarray(0, stream.byteLength - 8);
}

const CODEC_ID = { none: 0, lz4: 1 } as const;
/** 43 53 52 57 "CSRW" | version 1 | codec | reserved 0 0 | schema message. */
function header(schema: Schema, codec: keyof typeof CODEC_ID = 'none'): number[] {
  return [0x43, 0x53, 0x52, 0x57, 1, CODEC_ID[codec], 0, 0, ...schemaMessage(schema)];
}
const u32 = (n: number) => [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, n >>> 24];
const END = [0, 0, 0, 0];

/** One Int8 column, not null: a row is u32 length 1 | bitmap 00 | the value, padded to 8 bytes. */
const ONE_INT8 = (name: string) => new Schema([new Field(name, new Int8(), false)]);
/** A block stored as it is (storedLength = rawLength) of rows holding `values` in ONE_INT8's layout. */
function int8Block(values: readonly number[]): number[] {
  const rows = values.flatMap((v) => [...u32(2), 0, v & 0xff, 0, 0]);
  return [...u32(values.length), ...u32(rows.length), ...u32(rows.length), ...rows];
}

/** A dictionary of structs holding a dictionary: a schema apache-arrow writes, but no writer takes, so rows cannot hold it. */
const DICT_OF_DICT = new Schema([new Field('u', new Dictionary(new Struct([new Field('d', new Dictionary(new Utf8(), new Int32(), 7), true)]), new Int32(), 8), true)]);

// ---------------------------------------------------------------------------------------------------------------------
// Partitions read through a reader, whole and a block at a time
// ---------------------------------------------------------------------------------------------------------------------

const MODES = [
  ['whole', {}],
  ['a block at a time', { wholePartitionBytes: 0 }],
] as const;

/** Partition 1 of an output of `[first, partition]` (so offsets in the data file are past `first`), read in `mode`: its values, or its ShuffleError. */
async function readSecond(partition: readonly number[], options: { wholePartitionBytes?: number }): Promise<number[] | ShuffleError> {
  const first = [...header(ONE_INT8('a')), ...int8Block([7]), ...END];
  const reader = await ShuffleReader.fromSources(outputOf([[Uint8Array.from(first)], [Uint8Array.from(partition)]]), options);
  const values: number[] = [];
  try {
    for await (const batch of reader.readPartition(1)) values.push(...(batch.getChildAt(0)!.toArray() as Int8Array));
    return values;
  } catch (error) {
    if (error instanceof ShuffleError) return error;
    throw error;
  } finally {
    await reader.close();
  }
}
const FIRST_LENGTH = header(ONE_INT8('a')).length + int8Block([7]).length + END.length;

describe('the end of a partition: its end marker must be its last four bytes, and no block may run into or past it', () => {
  const schema = ONE_INT8('a');
  const body = [...header(schema), ...int8Block([1, 2, 3])];

  test.each(MODES)('the partition as written reads back (%s)', async (_mode, options) => {
    expect(await readSecond([...body, ...END], options)).toEqual([1, 2, 3]);
  });

  test.each([1, 4])('%i byte(s) after the end marker: CS_CORRUPT_DATA at the marker, naming how many follow it', async (extra) => {
    for (const [mode, options] of MODES) {
      const outcome = await readSecond([...body, ...END, ...new Array<number>(extra).fill(0)], options);
      expect(outcome, mode).toBeInstanceOf(ShuffleError);
      expect(outcome, mode).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: FIRST_LENGTH + body.length }, message: expect.stringContaining(`${extra} bytes follow the end marker`) });
    }
  });

  test('no end marker at all (the last block ends the partition): CS_CORRUPT_DATA where the marker should start', async () => {
    for (const [mode, options] of MODES) {
      const outcome = await readSecond(body, options);
      expect(outcome, mode).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: FIRST_LENGTH + body.length }, message: expect.stringContaining('ends without its end marker') });
    }
  });

  test.each([1, 4])('a last block whose stored bytes run %i byte(s) past the end of the partition (into where its end marker is not): CS_CORRUPT_DATA at that block', async (past) => {
    const rows = int8Block([1, 2]).slice(12); // 16 bytes
    const claimed = rows.length + past;
    const partition = [...header(schema), ...u32(2), ...u32(claimed), ...u32(claimed), ...rows];
    for (const [mode, options] of MODES) {
      const outcome = await readSecond(partition, options);
      expect(outcome, mode).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: FIRST_LENGTH + header(schema).length }, message: expect.stringContaining(`a block of ${claimed} stored bytes runs past the end of the partition`) });
    }
  });
});

/** A data file held in memory that, like a file, returns fewer bytes than asked for a read past its end (the reader's source check makes that CS_IO). */
class FileLikeSource extends PiecewiseSource {
  override async read(offset: number, length: number): Promise<Uint8Array> {
    return (await super.read(offset, length)).subarray(0, Math.max(0, Math.min(length, (await this.size()) - offset)));
  }
}

describe('a streamed partition at the end of the data file is never read past its end', () => {
  test.each([1, 2, 3])('a last partition of %i byte(s), read a block at a time: CS_CORRUPT_DATA for its bytes, not CS_IO for a read past the file', async (length) => {
    const first = Uint8Array.from([...header(ONE_INT8('a')), ...int8Block([7]), ...END]);
    const last = Uint8Array.from([0x43, 0x53, 0x52].slice(0, length));
    const sources = outputOf([[first], [last]]);
    const reader = await ShuffleReader.fromSources({ ...sources, data: new FileLikeSource('mem.data', [first, last], false) }, { wholePartitionBytes: 0 });
    try {
      const error = await (async () => {
        for await (const batch of reader.readPartition(1)) void batch;
      })().then(() => null, (e: unknown) => e);
      expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1 } });
    } finally {
      await reader.close();
    }
  });
});

describe("schema() of an output whose first partition is a row partition cut short at the end of the data file", () => {
  test('a 10-byte partition (magic, version, codec, reserved bytes, two of its schema message): CS_CORRUPT_DATA at partition 0, not CS_IO for a read past the file', async () => {
    const cut = Uint8Array.from(header(ONE_INT8('a')).slice(0, 10));
    const sources = outputOf([[cut]]);
    const reader = await ShuffleReader.fromSources({ ...sources, data: new FileLikeSource('mem.data', [cut], false) });
    try {
      const error = await reader.schema().then(() => null, (e: unknown) => e);
      expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 0 } });
    } finally {
      await reader.close();
    }
  });
});

describe('block headers are refused from their counts alone, before the rows of any block are handed out', () => {
  const schema = ONE_INT8('a');

  test('under codec none, a second block storing one byte fewer than its rows: CS_CORRUPT_DATA at its header, and not one row of the first block is yielded', async () => {
    const rows = int8Block([3, 4]).slice(12); // 16 bytes
    const short = [...u32(2), ...u32(rows.length), ...u32(rows.length - 1), ...rows.slice(0, rows.length - 1)];
    const first = int8Block([1, 2]);
    const partition = Uint8Array.from([...header(schema), ...first, ...short, ...END]);
    for (const [mode, options] of MODES) {
      const reader = await ShuffleReader.fromSources(outputOf([[partition]]), options);
      const yielded: number[] = [];
      try {
        const error = await (async () => {
          for await (const batch of reader.readPartition(0)) yielded.push(...(batch.getChildAt(0)!.toArray() as Int8Array));
        })().then(() => null, (e: unknown) => e);
        expect(error, mode).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 0, offset: header(schema).length + first.length }, message: expect.stringContaining('compressed but the partition header says codec none') });
        expect(yielded, mode).toEqual([]);
      } finally {
        await reader.close();
      }
    }
  });

  test('a block claiming 2^32 - 1 stored bytes (a length that is negative as an int32) runs past the end of the partition: CS_CORRUPT_DATA at that block', async () => {
    const partition = [...header(schema), ...u32(2), ...u32(16), ...u32(0xffffffff), ...int8Block([1, 2]).slice(12), ...END];
    for (const [mode, options] of MODES) {
      expect(await readSecond(partition, options), mode).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: FIRST_LENGTH + header(schema).length }, message: expect.stringContaining('a block of 4294967295 stored bytes runs past the end of the partition') });
    }
  });
});

describe('a block that does not decompress is CS_CORRUPT_DATA carrying the codec\'s own error', () => {
  test.each(MODES)('an LZ4 frame with compressed bytes overwritten: the error names the block and the codec, says why, and has the cause (%s)', async (_mode, options) => {
    const schema = ONE_INT8('a');
    const values = Array.from({ length: 40 }, (_, i) => i % 3);
    const rows = int8Block(values).slice(12);
    const frame = [...compressFrameSync(Buffer.from(rows))];
    expect(frame.length).toBeLessThan(rows.length);
    frame.splice(11, 4, 0xff, 0xff, 0xff, 0xff); // past the 7-byte frame header and the 4-byte block size: the compressed rows
    const partition = [...header(schema, 'lz4'), ...u32(values.length), ...u32(rows.length), ...u32(frame.length), ...frame, ...END];
    const outcome = await readSecond(partition, options);
    expect(outcome).toBeInstanceOf(ShuffleError);
    const error = outcome as ShuffleError;
    expect(error).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: FIRST_LENGTH + header(schema, 'lz4').length } });
    expect(error.message).toMatch(/cannot decompress the lz4 block at \d+: ./);
    expect(error.cause).toBeInstanceOf(Error);
    expect(error.message).toContain((error.cause as Error).message);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// inspect's summary (summarizeRowPartitionAt)
// ---------------------------------------------------------------------------------------------------------------------

describe("inspect's summary of a row partition refuses what the reader refuses under its default limits, with the reader's error", () => {
  const where = { file: 'mem:data', partition: 2, offset: 500 };
  const summarize = async (partition: readonly number[]) => {
    const bytes = Uint8Array.from(partition);
    return summarizeRowPartitionAt(async (offset, length) => bytes.slice(offset, offset + length), 0, bytes.byteLength, where).then(
      (summary) => ({ blocks: summary.blocks, rows: summary.rows }),
      (e: unknown) => (e instanceof ShuffleError ? { code: e.code, where: e.where, message: e.message } : { untyped: String(e) }),
    );
  };

  test('a block claiming 2^31 bytes of rows (one over the default maxBufferBytes, 2^31 - 1) is CS_CORRUPT_DATA at that block, though nothing of it is decompressed', async () => {
    const schema = ONE_INT8('a');
    const first = int8Block([1, 2]);
    // an LZ4 block of 2 rows whose 16 stored bytes claim 2^31 bytes of rows: only its header is read
    const huge = [...u32(2), ...u32(2 ** 31), ...u32(16), ...new Array<number>(16).fill(0)];
    const partition = [...header(schema, 'lz4'), ...first, ...huge, ...END];
    expect(await summarize(partition)).toEqual({
      code: 'CS_CORRUPT_DATA',
      where: { file: 'mem:data', partition: 2, offset: 500 + header(schema, 'lz4').length + first.length },
      message: expect.stringMatching(/claims 2147483648 bytes of rows, over the maxBufferBytes limit of 2147483647/),
    });
    // one byte less is within the limit: the summary counts it
    huge.splice(4, 4, ...u32(2 ** 31 - 1));
    expect(await summarize([...header(schema, 'lz4'), ...first, ...huge, ...END])).toEqual({ blocks: 2, rows: 4 });
  });

  test('a header whose schema rows cannot hold (a dictionary of structs of a dictionary) is CS_CORRUPT_DATA, as the reader says, not another error', async () => {
    const outcome = await summarize([...header(DICT_OF_DICT), ...END]);
    expect(outcome).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { file: 'mem:data', partition: 2 }, message: expect.stringMatching(/its schema has a column rows cannot hold/) });
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// The sort writer's check of columns sharing a dictionary id
// ---------------------------------------------------------------------------------------------------------------------

describe('the sort writer refuses a schema whose columns share a dictionary id with index types of different widths only when one row may hold more values than the narrowest indexes', () => {
  const values = new Utf8();
  const int32 = (id = 1) => new Dictionary(values, new Int32(), id);
  const int16 = (id = 1) => new Dictionary(values, new Int16(), id);
  const int8 = (id = 1) => new Dictionary(values, new Int8(), id);
  const list = (name: string, type: DataType) => new List(new Field(name, type, true));

  test('128 one-value columns (127 Int8, 1 Int16) may hold 128 values a row, as many as Int8 indexes: taken; 129 (128 Int8) are refused', () => {
    const fields = (narrow: number) => [...Array.from({ length: narrow }, (_, i) => new Field(`n${i}`, int8(), true)), new Field('w', int16(), true)];
    expect(unreadableSharedDictionary(fields(127))).toBeNull();
    expect(unreadableSharedDictionary(fields(128))).toMatchObject({ code: 'CS_UNSUPPORTED_TYPE', message: expect.stringMatching(/narrowest \(128 values\)/) });
  });

  test('an Int32 column inside a fixed-size list of one inside a list holds as many values a row as the list has items: refused beside an Int8 column', () => {
    const fields = [new Field('l', list('fixed', new FixedSizeList(1, new Field('d', int32(), true))), true), new Field('b', int8(), true)];
    expect(unreadableSharedDictionary(fields)).toMatchObject({ code: 'CS_UNSUPPORTED_TYPE', message: expect.stringMatching(/"l\.fixed\.d", "b" share dictionary id 1/) });
  });

  test('an Int32 column inside a union inside a list holds as many values a row as the list has items: refused beside an Int8 column', () => {
    const union = new SparseUnion([0, 1], [new Field('i', new Int32(), true), new Field('d', int32(), true)]);
    const fields = [new Field('l', list('item', union), true), new Field('b', int8(), true)];
    expect(unreadableSharedDictionary(fields)).toMatchObject({ code: 'CS_UNSUPPORTED_TYPE', message: expect.stringMatching(/"l\.item\.d", "b" share dictionary id 1/) });
  });

  test('every id is checked: a first id that fits (one index type) does not let a second that does not through', () => {
    const fields = [new Field('a', list('item', int8(1)), true), new Field('b', int8(1), true), new Field('c', list('item', int32(2)), true), new Field('d', int8(2), true)];
    expect(unreadableSharedDictionary(fields)).toMatchObject({ code: 'CS_UNSUPPORTED_TYPE', message: expect.stringMatching(/"c\.item", "d" share dictionary id 2/) });
  });

  test("the refusal names the id's first column in where.column", () => {
    const fields = [new Field('x', new Int32(), true), new Field('tags', list('item', int32()), true), new Field('b', int8(), true)];
    expect(unreadableSharedDictionary(fields)?.where).toEqual({ column: 'tags.item' });
  });
});
