/**
 * What both writers check of their options and their input before any data moves, second pass
 * (src/writer/writer-options.ts, src/writer-kind.ts, src/writer/input-batch.ts,
 * src/writer/same-schema.ts, src/writer/output-columns.ts). The first pass is
 * test/writer-inputs-contract.test.ts.
 *
 * Each test here fails against a mutant of those files that the other tests let through (a check
 * narrowed to the values a caller of TypeScript would pass, a null-safe step made unsafe, a branch
 * of the partitioning switch dropped): see docs/RELIABILITY.md, "The tests notice a broken line:
 * mutation sweeps". Expected values come from README.md (the options' documented domains, "every
 * error is a ShuffleError with a stable code and a where"), the options' doc comments and
 * hand-written batches; never from the code under test. Nothing here measures time.
 */
import { join } from 'node:path';
import { Bool, Data, type DataType, Decimal, Dictionary, Field, FixedSizeList, Int32, LargeList, makeData, makeTable, Map_, RecordBatch, Schema, Struct, Union, UnionMode, Utf8, vectorFromArray } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createShuffleWriter, ShuffleError, WRITER_KINDS, type ShuffleWriterOptions, type WriterKind } from '../src/index.js';
import { batchOf, sequenceColumn } from './support/columns.js';
import { failure } from './support/failure.js';
import { readKeys } from './support/shuffle-harness.js';
import { describeType, sameSchema, schemaDifference } from '../src/writer/same-schema.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => {
  dir = await makeTempDir('cs-inputs2-');
});
afterEach(async () => {
  await removeDir(dir);
});

function options(overrides: Partial<ShuffleWriterOptions> = {}): ShuffleWriterOptions {
  return { numPartitions: 4, partitioning: { kind: 'hash', keys: ['k'] }, outputPrefix: join(dir, 'out'), spillDir: dir, ...overrides };
}

function ints(name: string, values: number[]): RecordBatch {
  return makeTable({ [name]: Int32Array.from(values) }).batches[0]!;
}

/** The ShuffleError a call rejects with, of this code (and message); a call that resolves fails the test (support/failure.ts). */
async function refusal(call: Promise<unknown>, code: string, message?: RegExp): Promise<ShuffleError> {
  const error = await failure(call);
  expect(error.code).toBe(code);
  if (message) expect(error.message).toMatch(message);
  return error;
}

describe.each(WRITER_KINDS)('%s writer', (kind: WriterKind) => {
  describe('an option of the wrong JavaScript type is CS_INVALID_ARGUMENT naming it, before any file exists (options may come from JSON or another thread)', () => {
    test.each<[string, Record<string, unknown>, RegExp]>([
      ['dictionaryUpdates true (delta or replacement, strings)', { dictionaryUpdates: true }, /dictionaryUpdates/],
      ['dictionaryUpdates 1', { dictionaryUpdates: 1 }, /dictionaryUpdates/],
      ['mapId "3" (a number, not its digits)', { mapId: '3' }, /mapId/],
      // null is not "unset" (JSON's absent value is a missing key): it is outside every option's domain
      ['maxBatchRows null', { maxBatchRows: null }, /maxBatchRows/],
      ['dictionaryUpdates null', { dictionaryUpdates: null }, /dictionaryUpdates/],
      ['mapId null', { mapId: null }, /mapId/],
      ['schema null (an Arrow Schema or nothing)', { schema: null }, /schema/],
      ['concurrentTasks 2^31 (past the integers the message names, [1, 2^31 - 1])', { concurrentTasks: 2 ** 31 }, /concurrentTasks/],
    ])('%s', async (_, overrides, names) => {
      await refusal(createShuffleWriter(kind, { ...options(), ...overrides } as never), 'CS_INVALID_ARGUMENT', names);
      expect(await listFiles(dir)).toEqual([]);
    });

    test('a partitioning JSON cannot print (a BigInt in it) is still CS_INVALID_ARGUMENT, not the TypeError of printing it', async () => {
      await refusal(createShuffleWriter(kind, options({ partitioning: { kind: 'bucket', n: 1n } as never })), 'CS_INVALID_ARGUMENT', /partitioning/);
      expect(await listFiles(dir)).toEqual([]);
    });

    test('a partitioning that refers to itself is CS_INVALID_ARGUMENT too', async () => {
      const partitioning: Record<string, unknown> = { kind: 'bucket' };
      partitioning.self = partitioning;
      await refusal(createShuffleWriter(kind, options({ partitioning: partitioning as never })), 'CS_INVALID_ARGUMENT', /partitioning/);
    });
  });

  describe("range partitioning (README: { kind: 'range', keys, bounds }) is one of the kinds a writer takes", () => {
    test('with the schema given up front and 3 bounds for 4 partitions, every row lands by its bounds', async () => {
      const schema = new Schema([new Field('k', new Int32(), false)]);
      const bounds = ints('k', [10, 20, 30]);
      const writer = await createShuffleWriter(kind, options({ schema, numPartitions: 4, partitioning: { kind: 'range', keys: ['k'], bounds } }));
      await writer.write(batchOf(schema, [makeData({ type: new Int32(), length: 6, nullCount: 0, data: Int32Array.of(35, 5, 25, 10, 15, 31) })], 6));
      const result = await writer.finish();
      // a row goes to the partition numbered by how many bounds sort before it (a row equal to bound j goes to j)
      expect(result.partitionRows).toEqual([2, 1, 1, 2]);
      expect(await readKeys(join(dir, 'out'))).toEqual([5, 10, 15, 25, 31, 35]);
    });
  });
});

describe.each(WRITER_KINDS)('%s writer: a batch without rows is read for its schema alone (input-batch.ts)', (kind: WriterKind) => {
  test('its columns are taken whatever their buffers hold (a Bool column 16 rows past its one byte), and the rows of later batches are written', async () => {
    const schema = new Schema([new Field('k', new Int32(), false), new Field('b', new Bool(), true)]);
    const pastItsByte = new Data(new Bool(), 16, 0, 0, [undefined, Uint8Array.of(0)] as never); // 0 rows from offset 16 of 8 bits
    const writer = await createShuffleWriter(kind, options());
    await writer.write(batchOf(schema, [sequenceColumn(0, 0), pastItsByte], 0));
    await writer.write(batchOf(schema, [sequenceColumn(1, 2), vectorFromArray([true, false], new Bool()).data[0]!], 2));
    expect((await writer.finish()).rows).toBe(2);
    expect(await readKeys(join(dir, 'out'))).toEqual([1, 2]);
  });
});

describe.each(WRITER_KINDS)('%s writer: write() refuses with CS_INVALID_ARGUMENT, not a TypeError, and stays usable', (kind: WriterKind) => {
  test('an object without a prototype (no constructor to name)', async () => {
    const writer = await createShuffleWriter(kind, options());
    await refusal(writer.write(Object.create(null) as never), 'CS_INVALID_ARGUMENT', /RecordBatch/);
    await writer.write(ints('k', [5]));
    expect((await writer.finish()).rows).toBe(1);
  });

  test('a batch holding one column more than its schema names', async () => {
    const schema = new Schema([new Field('k', new Int32(), false)]);
    const batch = batchOf(schema, [sequenceColumn(0, 3)], 3);
    (batch.data as { children: Data[] }).children = [sequenceColumn(0, 3), sequenceColumn(100, 3)]; // the schema says one column, the batch holds two
    const writer = await createShuffleWriter(kind, options());
    await refusal(writer.write(batch), 'CS_INVALID_ARGUMENT', /2 columns but its schema 1/);
    await writer.write(batchOf(schema, [sequenceColumn(0, 3)], 3));
    expect((await writer.finish()).rows).toBe(3);
  });

  test('a column that is undefined is named in where.column', async () => {
    const schema = new Schema([new Field('k', new Int32(), false), new Field('v', new Int32(), true)]);
    const batch = batchOf(schema, [sequenceColumn(0, 2), sequenceColumn(0, 2)], 2);
    (batch.data as { children: (Data | undefined)[] }).children = [sequenceColumn(0, 2), undefined];
    const writer = await createShuffleWriter(kind, options());
    const error = await refusal(writer.write(batch), 'CS_INVALID_ARGUMENT', /column "v" of the batch is undefined, not Arrow Data/);
    expect(error.where.column).toBe('v');
    await writer.write(batchOf(schema, [sequenceColumn(0, 2), sequenceColumn(7, 2)], 2));
    expect((await writer.finish()).rows).toBe(2);
  });

  test('a struct child that is undefined is named by its path', async () => {
    const struct = new Struct([new Field('a', new Int32(), true)]);
    const schema = new Schema([new Field('k', new Int32(), false), new Field('s', struct, true)]);
    const s = makeData({ type: struct, length: 2, nullCount: 0, children: [sequenceColumn(0, 2)] });
    (s as { children: (Data | undefined)[] }).children = [undefined];
    const writer = await createShuffleWriter(kind, options());
    const error = await refusal(writer.write(batchOf(schema, [sequenceColumn(0, 2), s], 2)), 'CS_INVALID_ARGUMENT', /column "s\.a" of the batch is undefined/);
    expect(error.where.column).toBe('s.a');
    await writer.abort();
  });
});

describe('describeType names the bit width of a decimal inside every container, which arrow-js leaves out (error messages, `inspect`)', () => {
  const d = (bits: number) => new Decimal(2, 9, bits);
  const decimalEntries = () => new Field('entries', new Struct([new Field('key', new Utf8(), false), new Field('value', d(32), true)]), false);
  test.each<[string, DataType, string]>([
    ['a map whose values are decimals', new Map_(decimalEntries()), 'Map<{key:Utf8, value:Decimal32[9e+2]}>'],
    ['a fixed-size list of decimals', new FixedSizeList(2, new Field('item', d(64), true)), 'FixedSizeList[2]<Decimal64[9e+2]>'],
    ['a large list of decimals', new LargeList(new Field('item', d(256), true)), 'LargeList<Decimal256[9e+2]>'],
    ['a union with a decimal member', new Union(UnionMode.Dense, [0, 1], [new Field('i', new Int32(), true), new Field('d', d(32), true)]), 'Union<Int32 | Decimal32[9e+2]>'],
  ])('%s', (_, type, described) => {
    expect(String(type)).toMatch(/Decimal\[/); // arrow-js alone does not say the width
    expect(describeType(type)).toBe(described);
  });
});

describe('schemaDifference says what the later schema has, then what was expected, for the parameters arrow-js does not print', () => {
  const one = (type: DataType) => new Schema([new Field('c', type, true)]);
  const members = () => [new Field('i', new Int32(), true), new Field('s', new Utf8(), true)];
  const entries = () => new Field('entries', new Struct([new Field('key', new Utf8(), false), new Field('value', new Int32(), true)]), false);
  test.each<[string, DataType, DataType, RegExp]>([
    ['a union mode', new Union(UnionMode.Sparse, [0, 1], members()), new Union(UnionMode.Dense, [0, 1], members()), /a dense union, expected sparse/],
    ["a union's type ids", new Union(UnionMode.Sparse, [0, 1], members()), new Union(UnionMode.Sparse, [3, 7], members()), /union type ids \[3,7\], expected \[0,1\]/],
    ["a map's keysSorted", new Map_(entries(), true), new Map_(entries(), false), /a map without sorted keys, expected with/],
    ["a dictionary's isOrdered", new Dictionary(new Utf8(), new Int32(), 0, false), new Dictionary(new Utf8(), new Int32(), 0, true), /an ordered dictionary, expected an unordered one/],
  ])('%s', (_, expected, got, says) => {
    expect(schemaDifference(one(expected), one(got))).toMatch(says);
  });
});

describe.each(WRITER_KINDS)('%s writer: CS_SCHEMA_MISMATCH names the batch that differs by its number from 0', (kind: WriterKind) => {
  test('the second batch is batch 1', async () => {
    const writer = await createShuffleWriter(kind, options());
    await writer.write(ints('k', [1]));
    await refusal(writer.write(makeTable({ k: Int32Array.of(2), v: Int32Array.of(3) }).batches[0]!), 'CS_SCHEMA_MISMATCH', /^batch 1 has schema/);
    await writer.abort();
  });
});

describe('sameSchema: structs of other child counts differ, either way round (not a TypeError)', () => {
  const structOf = (...names: string[]) => new Schema([new Field('s', new Struct(names.map((n) => new Field(n, new Int32(), true))), true)]);
  test('fewer children than expected, and more', () => {
    expect(sameSchema(structOf('a', 'b'), structOf('a'))).toBe(false);
    expect(sameSchema(structOf('a'), structOf('a', 'b'))).toBe(false);
    expect(schemaDifference(structOf('a', 'b'), structOf('a'))).toMatch(/1 children, expected 2/);
  });

  test.each(WRITER_KINDS)('%s writer: a batch whose struct lost a child is CS_SCHEMA_MISMATCH, and the writer stays usable', async (kind) => {
    const struct = (n: number) => new Struct(Array.from({ length: n }, (_, i) => new Field(`c${i}`, new Int32(), true)));
    const batch = (n: number) => {
      const schema = new Schema([new Field('k', new Int32(), false), new Field('s', struct(n), true)]);
      const s = makeData({ type: struct(n), length: 2, nullCount: 0, children: Array.from({ length: n }, () => sequenceColumn(0, 2)) });
      return batchOf(schema, [sequenceColumn(0, 2), s], 2);
    };
    const writer = await createShuffleWriter(kind, options());
    await writer.write(batch(2));
    await refusal(writer.write(batch(1)), 'CS_SCHEMA_MISMATCH', /column 1 \("s"\)/);
    await writer.write(batch(2));
    expect((await writer.finish()).rows).toBe(4);
  });
});

// Found beside the sweep (reading validateOptions, which checks the type of dictionaryUpdates and mapId because
// options "may come from JSON or another thread"), and fixed: overwrite, spillDir and memoryPool were not checked.
describe.each(WRITER_KINDS)('%s writer: overwrite, spillDir and memoryPool are checked like the other options', (kind: WriterKind) => {
  /** What create() gives: the error, or the writer, aborted so that it leaves nothing. */
  async function created(given: Record<string, unknown>): Promise<unknown> {
    const made = await createShuffleWriter(kind, given as never).catch((e: unknown) => e);
    if (!(made instanceof Error)) await (made as { abort(): Promise<void> }).abort();
    return made;
  }

  // overwrite: 'false' is truthy: the new writer is made over a committed output and would replace it, which
  // the option's default (CS_OUTPUT_EXISTS: "an attempt never clobbers another's output by accident") is there to stop
  test.each(['false', 0, 1, null])("overwrite %j is CS_INVALID_ARGUMENT, not leave to replace a committed output ('false' is truthy)", async (overwrite) => {
    const first = await createShuffleWriter(kind, options());
    await first.write(ints('k', [1, 2]));
    await first.finish();
    const made = await created({ ...options(), overwrite });
    expect(made).toBeInstanceOf(ShuffleError);
    expect((made as ShuffleError).code).toBe('CS_INVALID_ARGUMENT');
    expect((made as ShuffleError).message).toMatch(/overwrite/);
  });

  test('overwrite true and false are taken', async () => {
    for (const overwrite of [false, true]) await created({ ...options(), overwrite }).then((made) => expect(made).not.toBeInstanceOf(Error));
  });

  // spillDir: 42 was CS_FILE_NOT_FOUND naming "file 42", typed but not saying the type was wrong
  test.each([42, '', null])('a spillDir that is not a path (%j) is CS_INVALID_ARGUMENT', async (spillDir) => {
    const made = await created({ ...options(), spillDir });
    expect(made).toBeInstanceOf(ShuffleError);
    expect((made as ShuffleError).code).toBe('CS_INVALID_ARGUMENT');
    expect((made as ShuffleError).message).toMatch(/spillDir/);
  });

  // memoryPool: {} gave a plain TypeError ("pool.share is not a function"), not a ShuffleError (README, Errors)
  test.each([{}, null, 64 << 20, 'pool'])('a memoryPool that is not a MemoryPool (%j) is CS_INVALID_ARGUMENT', async (memoryPool) => {
    const made = await created({ ...options(), memoryPool });
    expect(made).toBeInstanceOf(ShuffleError);
    expect((made as ShuffleError).code).toBe('CS_INVALID_ARGUMENT');
    expect((made as ShuffleError).message).toMatch(/memoryPool/);
  });
});

// The reader refuses a null count above 0 without a validity bitmap (validate-column.ts); a writer's input is read
// as arrow-js reads it, every row valid, so that a batch arrow-js's makeData made so is still taken.
describe.each(WRITER_KINDS)('%s writer: an input column with a null count but no validity bitmap', (kind: WriterKind) => {
  test('is taken, and its rows are written as arrow-js reads them: all valid', async () => {
    const k = makeData({ type: new Int32(), length: 3, nullCount: 2, data: Int32Array.of(1, 2, 3) });
    expect([k.getValid(0), k.getValid(1), k.getValid(2)]).toEqual([true, true, true]);
    const writer = await createShuffleWriter(kind, options());
    await writer.write(batchOf(new Schema([new Field('k', new Int32(), true)]), [k], 3));
    expect((await writer.finish()).rows).toBe(3);
    expect(await readKeys(join(dir, 'out'))).toEqual([1, 2, 3]);
  });
});
