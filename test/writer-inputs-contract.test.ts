/**
 * What both writers check of their options and their input before any data moves: every option's
 * domain (src/writer/writer-options.ts, validateOptions, and the writer choice of src/writer-kind.ts),
 * the input batch against its own schema and a schema no writer can write (src/writer/input-batch.ts),
 * the comparison of a later batch's schema with the first one's (src/writer/same-schema.ts) and the
 * output columns of an input schema (src/writer/output-columns.ts).
 *
 * Each test here fails against a mutant of those files that the other tests let through (a bound moved
 * by one, a check dropped, a type parameter left out of the comparison, an error's location dropped):
 * see docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps". Expected values come from
 * README.md (the options' documented domains, "every error is a ShuffleError with a stable code and a
 * where"), the options' doc comments, the Arrow type definitions and hand-written schemas; never from
 * the code under test. Nothing here measures time.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Data, DataType, DateDay, DateMillisecond, Dictionary, Duration, Field, FixedSizeBinary, FixedSizeList, Float32, Float64, Int32, Int8, makeData, makeTable, Map_, RecordBatch, Schema, Struct, Timestamp, TimeUnit, Uint32, Utf8, vectorFromArray } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createShuffleWriter, ShuffleError, ShuffleReader, WRITER_KINDS, type ShuffleWriterOptions, type WriterKind } from '../src/index.js';
import { readKeys } from './support/shuffle-harness.js';
import { sameSchema, schemaDifference } from '../src/writer/same-schema.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => {
  dir = await makeTempDir('cs-inputs-');
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

/** The ShuffleError a call rejects with (a test fails on anything else: an untyped error, or no error). */
async function refusal(call: Promise<unknown>): Promise<ShuffleError> {
  const error = await call.then(
    async (made: unknown) => {
      // a writer made where a refusal was due: abort it, so that it leaves no temporary file behind
      if (typeof (made as { abort?: unknown } | null)?.abort === 'function') await (made as { abort(): Promise<void> }).abort();
      return null;
    },
    (e: unknown) => e,
  );
  expect(error, 'a ShuffleError').toBeInstanceOf(ShuffleError);
  return error as ShuffleError;
}

async function expectRefused(call: Promise<unknown>, code: string, message?: RegExp): Promise<ShuffleError> {
  const error = await refusal(call);
  expect(error.code).toBe(code);
  if (message) expect(error.message).toMatch(message);
  return error;
}


describe.each(WRITER_KINDS)('%s writer', (kind: WriterKind) => {
  describe('an option outside its domain is CS_INVALID_ARGUMENT naming it, before any file exists (README, ShuffleWriterOptions)', () => {
    test.each<[string, Record<string, unknown> | null, RegExp]>([
      ['options null (typeof null is "object")', null, /options object/],
      ['schema that is not an Arrow Schema (a look-alike with its fields)', { schema: { fields: [new Field('k', new Int32(), false)], metadata: new Map() } }, /schema/],
      ['maxBatchRows 0 (the fewest rows a batch holds is 1)', { maxBatchRows: 0 }, /maxBatchRows/],
      ['concurrentTasks 0 (limit / 0 writers)', { concurrentTasks: 0 }, /concurrentTasks/],
      ['concurrentTasks -1', { concurrentTasks: -1 }, /concurrentTasks/],
      ...(['memLimit', 'memLimitFloor', 'resizeThreshold', 'mergeThreshold', 'compressionMinRows', 'stagingBytes'] as const).flatMap((name) => [
        [`${name} -1`, { [name]: -1 }, new RegExp(name)] as [string, Record<string, unknown>, RegExp],
        [`${name} NaN`, { [name]: Number.NaN }, new RegExp(name)] as [string, Record<string, unknown>, RegExp],
        [`${name} Infinity (a byte count or share, not a limit's absence)`, { [name]: Number.POSITIVE_INFINITY }, new RegExp(name)] as [string, Record<string, unknown>, RegExp],
      ]),
      ['mergeThreshold 1.5 (a share of maxBatchRows, in [0, 1])', { mergeThreshold: 1.5 }, /mergeThreshold/],
      ['minCompressionSavings 1.5 (a share of a buffer, in [0, 1])', { minCompressionSavings: 1.5 }, /minCompressionSavings/],
      ['minCompressionSavings -0.1', { minCompressionSavings: -0.1 }, /minCompressionSavings/],
      ['minCompressionSavings NaN', { minCompressionSavings: Number.NaN }, /minCompressionSavings/],
      ['mapId 1.5 (a map task id is an integer)', { mapId: 1.5 }, /mapId/],
      ['mapId 2^53 (past the integers a number holds exactly)', { mapId: 2 ** 53 }, /mapId/],
      ['mapId NaN', { mapId: Number.NaN }, /mapId/],
      ['dictionaryUpdates "full" (delta or replacement)', { dictionaryUpdates: 'full' }, /dictionaryUpdates/],
      ['outputPrefix empty', { outputPrefix: '' }, /outputPrefix/],
      ["outputPrefix ending in a backslash (a directory on Windows; removeLeftovers takes it as one)", { outputPrefix: 'IN_DIR:out\\' }, /outputPrefix/],
      ['outputPrefix not a string', { outputPrefix: 42 }, /outputPrefix/],
      ['partition-id partitioning whose column is not a string', { partitioning: { kind: 'partition-id', column: 3 } }, /partitioning/],
      ['range partitioning without keys', { partitioning: { kind: 'range', bounds: [] } }, /partitioning/],
    ])('%s', async (_, overrides, names) => {
      const given = overrides === null ? null : ({ ...options(), ...overrides } as Record<string, unknown>);
      if (given !== null && typeof given.outputPrefix === 'string' && given.outputPrefix.startsWith('IN_DIR:')) given.outputPrefix = join(dir, given.outputPrefix.slice('IN_DIR:'.length));
      await expectRefused(createShuffleWriter(kind, given as never), 'CS_INVALID_ARGUMENT', names);
      expect(await listFiles(dir)).toEqual([]);
    });
  });

  describe('an option at the edge of its domain is taken, and the writer writes every row', () => {
    test.each([
      ['maxBatchRows 1', { maxBatchRows: 1 }],
      ['numPartitions 1', { numPartitions: 1 }],
      ['concurrentTasks 1', { concurrentTasks: 1 }],
      ['memLimit 0 and memLimitFloor 0', { memLimit: 0, memLimitFloor: 0 }],
      ['resizeThreshold 0', { resizeThreshold: 0 }],
      ['mergeThreshold 0 (merging off)', { mergeThreshold: 0 }],
      ['mergeThreshold 1', { mergeThreshold: 1 }],
      ['compressionMinRows 0', { compressionMinRows: 0 }],
      ['stagingBytes 0 (every batch split as it comes)', { stagingBytes: 0 }],
      ['minCompressionSavings 0 (whatever shrinks is kept)', { minCompressionSavings: 0 }],
      ['minCompressionSavings 1 (everything raw after the first tries)', { minCompressionSavings: 1 }],
      ['mapId 0', { mapId: 0 }],
      ['mapId 2^53 - 1 (the largest exact integer)', { mapId: Number.MAX_SAFE_INTEGER }],
      ['dictionaryUpdates delta', { dictionaryUpdates: 'delta' }],
      ['dictionaryUpdates replacement', { dictionaryUpdates: 'replacement' }],
      ['single partitioning', { partitioning: { kind: 'single' } }],
      ['round-robin partitioning', { partitioning: { kind: 'round-robin' } }],
    ])('%s', async (_, overrides) => {
      const writer = await createShuffleWriter(kind, options(overrides as Partial<ShuffleWriterOptions>));
      await writer.write(ints('k', [3, 1, 2]));
      expect((await writer.finish()).rows).toBe(3);
      expect(await readKeys(join(dir, 'out'))).toEqual([1, 2, 3]);
    });
  });
});

describe.each(WRITER_KINDS)('%s writer: a later batch of another schema is CS_SCHEMA_MISMATCH, and the writer stays usable', (kind: WriterKind) => {
  const batchOf = (columns: Record<string, Data>) => new RecordBatch(columns);
  const k = (values: number[]) => ints('k', values).data.children[0]!;

  test.each([
    ['one column more than the first batch', () => batchOf({ k: k([4]), v: k([5]) }), /2 columns, expected 1/],
    ['one column fewer than the first batch', () => batchOf({ k: k([4]) }), /1 columns, expected 2/],
  ])('%s', async (name, later, why) => {
    const first = name.includes('more') ? batchOf({ k: k([1, 2, 3]) }) : batchOf({ k: k([1, 2, 3]), v: k([7, 8, 9]) });
    const writer = await createShuffleWriter(kind, options());
    await writer.write(first);
    await expectRefused(writer.write(later()), 'CS_SCHEMA_MISMATCH', why);
    await writer.write(first);
    expect((await writer.finish()).rows).toBe(6);
  });
});

describe('sameSchema: two types are the same only with the same parameters, printed or not (Arrow Schema.fbs)', () => {
  const one = (type: DataType) => new Schema([new Field('c', type, true)]);
  test.each<[string, DataType, DataType]>([
    ["Float32 and Float64 (a Float's precision)", new Float32(), new Float64()],
    ['Int32 and Uint32 (signedness)', new Int32(), new Uint32()],
    ['FixedSizeBinary(3) and FixedSizeBinary(4)', new FixedSizeBinary(3), new FixedSizeBinary(4)],
    ['timestamps of seconds and of milliseconds', new Timestamp(TimeUnit.SECOND), new Timestamp(TimeUnit.MILLISECOND)],
    ['a timestamp in UTC and one without a timezone', new Timestamp(TimeUnit.SECOND, 'UTC'), new Timestamp(TimeUnit.SECOND)],
    ['durations of seconds and of microseconds', new Duration(TimeUnit.SECOND), new Duration(TimeUnit.MICROSECOND)],
    ['Date32 and Date64', new DateDay(), new DateMillisecond()],
    ['fixed-size lists of 2 and of 3', new FixedSizeList(2, new Field('item', new Int32(), true)), new FixedSizeList(3, new Field('item', new Int32(), true))],
    ['dictionaries of Int32 and of Int8 indices', new Dictionary(new Utf8(), new Int32()), new Dictionary(new Utf8(), new Int8())],
  ])('%s differ', (_, a, b) => {
    expect(sameSchema(one(a), one(b))).toBe(false);
    expect(schemaDifference(one(a), one(b))).not.toBeNull();
    expect(sameSchema(one(a), one(a))).toBe(true);
  });
});

describe.each(WRITER_KINDS)("%s writer: an input refused for one column names it in the error's where.column (README, Errors)", (kind: WriterKind) => {
  test('a column whose data is not its schema\'s type', async () => {
    const schema = new Schema([new Field('k', new Int32()), new Field('s', new Utf8())]);
    const k = ints('k', [1, 2]).data.children[0]!;
    const lying = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 2, nullCount: 0, children: [k, k] }));
    const writer = await createShuffleWriter(kind, options());
    const error = await expectRefused(writer.write(lying), 'CS_INVALID_ARGUMENT');
    expect(error.where.column).toBe('s');
    await writer.abort();
  });

  test('a column whose buffers do not hold its rows', async () => {
    const short = new Data(new Int32(), 0, 4, 0, [undefined, Int32Array.of(1, 2)] as never); // 4 rows, values for 2
    const schema = new Schema([new Field('k', new Int32()), new Field('v', new Int32())]);
    const k = makeData({ type: new Int32(), length: 4, nullCount: 0, data: Int32Array.of(0, 1, 2, 3) });
    const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 4, nullCount: 0, children: [k, short] }));
    const writer = await createShuffleWriter(kind, options());
    const error = await expectRefused(writer.write(batch), 'CS_INVALID_ARGUMENT');
    expect(error.where.column).toBe('v');
    await writer.abort();
  });

  test('a schema with two columns of one name names that column', async () => {
    const schema = new Schema([new Field('k', new Int32()), new Field('dup', new Int32()), new Field('dup', new Utf8())]);
    const error = await expectRefused(createShuffleWriter(kind, options({ schema })), 'CS_INVALID_ARGUMENT', /two columns named "dup"/);
    expect(error.where.column).toBe('dup');
    expect(await listFiles(dir)).toEqual([]);
  });
});

describe('sameSchema: a dictionary column and a plain column of its value type differ (not a TypeError)', () => {
  const plain = new Schema([new Field('c', new Utf8(), true)]);
  const encoded = new Schema([new Field('c', new Dictionary(new Utf8(), new Int32()), true)]);
  test('either way round', () => {
    expect(sameSchema(encoded, plain)).toBe(false);
    expect(sameSchema(plain, encoded)).toBe(false);
    expect(schemaDifference(encoded, plain)).toMatch(/column 0 \("c"\)/);
  });

  test.each(WRITER_KINDS)('%s writer: a plain Utf8 batch after a dictionary one is CS_SCHEMA_MISMATCH, and the writer stays usable', async (kind) => {
    const dictionary = () => new RecordBatch({ k: ints('k', [1, 2]).data.children[0]!, c: vectorFromArray(['a', 'b'], new Dictionary(new Utf8(), new Int32())).data[0]! });
    const writer = await createShuffleWriter(kind, options());
    await writer.write(dictionary());
    await expectRefused(writer.write(new RecordBatch({ k: ints('k', [3]).data.children[0]!, c: vectorFromArray(['c'], new Utf8()).data[0]! })), 'CS_SCHEMA_MISMATCH');
    await writer.write(dictionary());
    expect((await writer.finish()).rows).toBe(4);
  });
});

// A map's keysSorted and a dictionary's isOrdered are type parameters (Schema.fbs: Map.keysSorted,
// DictionaryEncoding.isOrdered; arrow-js prints neither); typeDifference compared neither (found by the sweep, fixed).
describe('sameSchema: parameters arrow-js does not print, a map\'s keysSorted and a dictionary\'s isOrdered', () => {
  const entries = () => new Field('entries', new Struct([new Field('key', new Utf8(), false), new Field('value', new Int32(), true)]), false);
  const mapOf = (keysSorted: boolean) => new Schema([new Field('m', new Map_(entries(), keysSorted), true)]);
  const dictionaryOf = (isOrdered: boolean) => new Schema([new Field('d', new Dictionary(new Utf8(), new Int32(), 0, isOrdered), true)]);

  test('a map with sorted keys and one without are not the same type', () => {
    expect(sameSchema(mapOf(true), mapOf(false))).toBe(false);
  });

  test('an ordered dictionary and an unordered one are not the same type', () => {
    expect(sameSchema(dictionaryOf(true), dictionaryOf(false))).toBe(false);
  });

  test.each(WRITER_KINDS)('%s writer: a batch whose map says its keys are not sorted, after one that says they are, is CS_SCHEMA_MISMATCH', async (kind) => {
    const batchOf = (keysSorted: boolean) =>
      new RecordBatch({ k: ints('k', [1]).data.children[0]!, m: vectorFromArray([null], new Map_(entries(), keysSorted)).data[0]! });
    const writer = await createShuffleWriter(kind, options());
    try {
      await writer.write(batchOf(true));
      await expectRefused(writer.write(batchOf(false)), 'CS_SCHEMA_MISMATCH');
    } finally {
      await writer.abort();
    }
  });
});

describe('createShuffleWriter: a writer choice that is not one of hash, sort or auto (README) is CS_INVALID_ARGUMENT', () => {
  test.each([42, null, undefined, ['hash'], 'Hash'])('%o', async (choice) => {
    await expectRefused(createShuffleWriter(choice as never, options()), 'CS_INVALID_ARGUMENT', /unknown writer/);
    expect(await listFiles(dir)).toEqual([]);
  });
});

describe.each(WRITER_KINDS)('%s writer: write() takes an Arrow RecordBatch whose columns are what its schema says, or nothing', (kind: WriterKind) => {
  test.each([
    ['a Table (not one of its batches)', () => makeTable({ k: Int32Array.of(1, 2) })],
    ['a plain object shaped like a batch', () => ({ schema: ints('k', [1]).schema, numRows: 1, data: ints('k', [1]).data })],
    ['a number', () => 7],
  ])('%s is CS_INVALID_ARGUMENT, and the writer stays usable', async (_, input) => {
    const writer = await createShuffleWriter(kind, options());
    await expectRefused(writer.write(input() as never), 'CS_INVALID_ARGUMENT', /RecordBatch/);
    await writer.write(ints('k', [5]));
    expect((await writer.finish()).rows).toBe(1);
  });

  test.each([0, 2])('a batch of %i rows with fewer columns than its schema is CS_INVALID_ARGUMENT, and the writer stays usable', async (rows) => {
    const schema = new Schema([new Field('k', new Int32()), new Field('v', new Int32())]);
    const column = () => makeData({ type: new Int32(), length: rows, nullCount: 0, data: Int32Array.from({ length: rows }, (_, i) => i) });
    const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children: [column(), column()] }));
    (batch.data as { children: Data[] }).children = [column()]; // the schema says two columns, the batch holds one
    const writer = await createShuffleWriter(kind, options());
    await expectRefused(writer.write(batch), 'CS_INVALID_ARGUMENT');
    await writer.write(new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children: [column(), column()] })));
    expect((await writer.finish()).rows).toBe(rows);
  });
});

describe.each(WRITER_KINDS)('%s writer: types made by another copy of apache-arrow are CS_INVALID_ARGUMENT naming where they are', (kind: WriterKind) => {
  const foreign = createRequire(import.meta.url)('apache-arrow') as typeof import('apache-arrow');

  test('a dictionary whose value type is another copy\'s (the dictionary itself this copy\'s)', async () => {
    expect(new foreign.Utf8()).not.toBeInstanceOf(Utf8); // two copies indeed
    const schema = new Schema([new Field('k', new Int32()), new Field('d', new Dictionary(new foreign.Utf8() as never, new Int32()))]);
    const error = await expectRefused(createShuffleWriter(kind, options({ schema })), 'CS_INVALID_ARGUMENT', /dictionary value type made by another copy of apache-arrow/);
    expect(error.where.column).toBe('d');
    expect(await listFiles(dir)).toEqual([]);
  });

  test('a struct field of another copy\'s type is named by its path', async () => {
    const schema = new Schema([new Field('k', new Int32()), new Field('s', new Struct([new Field('a', new foreign.Int64() as never)]))]);
    const error = await expectRefused(createShuffleWriter(kind, options({ schema })), 'CS_INVALID_ARGUMENT', /column "s\.a" has a type made by another copy/);
    expect(error.where.column).toBe('s.a');
  });

  test('a dictionary column whose dictionary is a RecordBatch, not a Vector, is refused as one without its dictionary', async () => {
    const values = new RecordBatch({ v: vectorFromArray(['a'], new Utf8()).data[0]! });
    const d = new Data(new Dictionary(new Utf8(), new Int32()), 0, 2, 0, [undefined, Int32Array.of(0, 0)] as never, [], values as never);
    const writer = await createShuffleWriter(kind, options());
    const error = await expectRefused(writer.write(new RecordBatch({ k: ints('k', [1, 2]).data.children[0]!, d })), 'CS_INVALID_ARGUMENT', /column "d" of the batch is a dictionary column without its dictionary/);
    expect(error.where.column).toBe('d');
    await writer.abort();
  });
});

describe.each(WRITER_KINDS)("%s writer: the output's schema is the input's, less a partition-id column", (kind: WriterKind) => {
  test.each([
    ['hash partitioning: every column', { kind: 'hash', keys: ['k'] } as const, ['k', 'pid']],
    ['partition-id partitioning: the id column left out, the schema metadata kept', { kind: 'partition-id', column: 'pid' } as const, ['k']],
  ])('%s', async (_, partitioning, names) => {
    const schema = new Schema([new Field('k', new Int32(), false), new Field('pid', new Int32(), false)], new Map([['origin', 'writer-inputs-contract']]));
    const column = (values: number[]) => makeData({ type: new Int32(), length: values.length, nullCount: 0, data: Int32Array.from(values) });
    const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 4, nullCount: 0, children: [column([10, 11, 12, 13]), column([0, 1, 1, 0])] }));
    const writer = await createShuffleWriter(kind, options({ numPartitions: 2, partitioning }));
    await writer.write(batch);
    await writer.finish();
    const reader = await ShuffleReader.open(join(dir, 'out'));
    let rows = 0;
    try {
      for await (const read of reader.readPartitions(0, 2)) {
        expect(read.schema.fields.map((f) => f.name)).toEqual(names);
        expect(read.schema.metadata.get('origin')).toBe('writer-inputs-contract');
        rows += read.numRows;
      }
    } finally {
      await reader.close();
    }
    expect(rows).toBe(4);
  });
});
