import { createRequire } from 'node:module';
import { join } from 'node:path';
import { BinaryView, Data, Decimal, Dictionary, Field, FixedSizeBinary, FixedSizeList, Int, Int32, Int64, List, makeData, makeTable, RecordBatch, Schema, Struct, Time, TimeUnit, Utf8, Utf8View, vectorFromArray } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createShuffleWriter, MemoryPool, ShuffleError, ShuffleReader, SortShuffleWriter, WRITER_KINDS, type ShuffleWriterOptions, type WriterKind } from '../src/index.js';
import { readKeys } from './support/shuffle-harness.js';
import { MAX_PARTITIONS } from '../src/sort-writer/packed-pointer.js';
import { MAX_NUM_PARTITIONS } from '../src/writer/writer-options.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

function ints(name: string, values: number[]): RecordBatch {
  return makeTable({ [name]: Int32Array.from(values) }).batches[0]!;
}

function options(overrides: Partial<ShuffleWriterOptions> = {}): ShuffleWriterOptions {
  return { numPartitions: 4, partitioning: { kind: 'hash', keys: ['k'] }, outputPrefix: join(dir, 'out'), ...overrides };
}


async function expectCode(promise: Promise<unknown>, code: string, message?: RegExp): Promise<ShuffleError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ShuffleError);
  expect((error as ShuffleError).code).toBe(code);
  if (message) expect((error as ShuffleError).message).toMatch(message);
  return error as ShuffleError;
}

/** Every claim holds for both writers: the columnar hash writer and the sort-based row writer. */
describe.each(WRITER_KINDS)('%s writer', (kind: WriterKind) => {
describe('options are refused before anything is written', () => {
  test.each([0, -1, 1.5, Number.NaN])('numPartitions %s is CS_INVALID_ARGUMENT', async (n) => {
    await expectCode(createShuffleWriter(kind, options({ numPartitions: n })), 'CS_INVALID_ARGUMENT', /numPartitions/);
    expect(await listFiles(dir)).toEqual([]);
  });

  test('an unknown codec is CS_INVALID_ARGUMENT', async () => {
    await expectCode(createShuffleWriter(kind, options({ codec: 'snappy' as never })), 'CS_INVALID_ARGUMENT', /codec/);
  });

  test('an output directory that does not exist is CS_FILE_NOT_FOUND naming it', async () => {
    const error = await expectCode(createShuffleWriter(kind, options({ outputPrefix: join(dir, 'missing', 'out') })), 'CS_FILE_NOT_FOUND');
    expect(error.where.file).toBe(join(dir, 'missing'));
  });

  test('an unknown key column is CS_UNKNOWN_COLUMN naming the column and listing the real ones', async () => {
    const schema = new Schema([new Field('a', new Int32())]);
    const error = await expectCode(createShuffleWriter(kind, options({ schema })), 'CS_UNKNOWN_COLUMN', /columns: a/);
    expect(error.where.column).toBe('k');
    expect(await listFiles(dir)).toEqual([]);
  });

  test('hash partitioning without keys is CS_INVALID_ARGUMENT', async () => {
    await expectCode(createShuffleWriter(kind, options({ partitioning: { kind: 'hash', keys: [] }, schema: new Schema([new Field('k', new Int32())]) })), 'CS_INVALID_ARGUMENT');
  });
});

describe('bad batches are refused with a typed error and the output is never half-written', () => {
  test('a view pointing outside its buffers (a valid row) is CS_INVALID_ARGUMENT naming the row, and nothing is written', async () => {
    const writer = await createShuffleWriter(kind, options({ partitioning: { kind: 'single' } }));
    const schema = new Schema([new Field('tags', new List(new Field('item', new Utf8View(), true)))]);
    // row 1 of the child: a 20-byte value in variadic buffer 3, which does not exist
    const views = new Uint8Array(32);
    new DataView(views.buffer).setInt32(0, 2, true);
    views.set([104, 105], 4);
    new DataView(views.buffer).setInt32(16, 20, true);
    new DataView(views.buffer).setInt32(24, 3, true);
    const child = makeData({ type: new Utf8View(), length: 2, views, variadicBuffers: [new Uint8Array(64)] } as never);
    const lists = makeData({ type: schema.fields[0]!.type, length: 1, valueOffsets: Int32Array.of(0, 2), child } as never);
    const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 1, children: [lists] }));
    const error = await expectCode(writer.write(batch), 'CS_INVALID_ARGUMENT', /column 0 \("tags"\) of the batch is inconsistent: its child: row 1's view points outside its 1 variadic buffers/);
    expect(error.where.column).toBe('tags');
    await writer.abort();
    expect(await listFiles(dir)).toEqual([]);
  });

  test('the same view in a null row is never read: the row comes back null', async () => {
    const writer = await createShuffleWriter(kind, options({ partitioning: { kind: 'single' } }));
    const schema = new Schema([new Field('s', new BinaryView(), true)]);
    const views = new Uint8Array(32);
    new DataView(views.buffer).setInt32(16, 20, true);
    new DataView(views.buffer).setInt32(24, 3, true);
    const column = makeData({ type: new BinaryView(), length: 2, nullCount: 1, nullBitmap: Uint8Array.of(0b01), views, variadicBuffers: [] } as never);
    await writer.write(new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 2, children: [column] })));
    await writer.finish();
    const reader = await ShuffleReader.open(join(dir, 'out'));
    const values: unknown[] = [];
    for await (const batch of reader.readPartition(0)) for (let i = 0; i < batch.numRows; i++) values.push(batch.getChild('s')!.get(i));
    await reader.close();
    expect(values).toEqual([new Uint8Array(0), null]);
  });

  test('a list key is CS_UNSUPPORTED_KEY_TYPE naming it, before anything is written', async () => {
    const list = vectorFromArray([[1], [2, 3]], new List(new Field('item', new Int32(), true)));
    const schema = new Schema([new Field('k', list.type)]);
    const error = await expectCode(createShuffleWriter(kind, options({ schema })), 'CS_UNSUPPORTED_KEY_TYPE');
    expect(error.where.column).toBe('k');
    expect(await listFiles(dir)).toEqual([]);
  });

  test('a struct key with a list field is CS_UNSUPPORTED_KEY_TYPE naming the field', async () => {
    const type = new Struct([new Field('id', new Int32()), new Field('tags', new List(new Field('item', new Int32())))]);
    const schema = new Schema([new Field('k', type)]);
    const error = await expectCode(createShuffleWriter(kind, options({ schema })), 'CS_UNSUPPORTED_KEY_TYPE');
    expect(error.where.column).toBe('k.tags');
  });

  test('a batch whose schema differs from the first is CS_SCHEMA_MISMATCH and the writer stays usable', async () => {
    const writer = await createShuffleWriter(kind, options());
    await writer.write(ints('k', [1, 2, 3]));
    await expectCode(writer.write(ints('other', [1])), 'CS_SCHEMA_MISMATCH', /expected \{k: Int32 not null\}/);
    await writer.write(ints('k', [4]));
    const result = await writer.finish();
    expect(result.rows).toBe(4);
  });

  test.each([
    ['a list child nullable where the first had it not null', new List(new Field('item', new Int32(), false)), new List(new Field('item', new Int32(), true)), /column 1 \("l"\)\.item: nullable, expected not nullable/],
    ['a list child of another name', new List(new Field('item', new Int32(), true)), new List(new Field('element', new Int32(), true)), /column 1 \("l"\)\.item: named "element", expected "item"/],
    ['a struct field of another type', new Struct([new Field('a', new Int32())]), new Struct([new Field('a', new Utf8())]), /column 1 \("l"\)\.a: Utf8, expected Int32/],
  ])('CS_SCHEMA_MISMATCH names what differs, where both schemas print alike: %s', async (_, first, then, difference) => {
    const batchOf = (type: List | Struct) => new RecordBatch({ k: ints('k', [1]).data.children[0]!, l: vectorFromArray([null], type).data[0]! });
    const writer = await createShuffleWriter(kind, options());
    await writer.write(batchOf(first));
    await expectCode(writer.write(batchOf(then)), 'CS_SCHEMA_MISMATCH', difference);
    await writer.abort();
  });

  test('write after finish, finish twice and write after abort are CS_WRITER_CLOSED', async () => {
    const writer = await createShuffleWriter(kind, options());
    await writer.write(ints('k', [1]));
    await writer.finish();
    await expectCode(writer.write(ints('k', [1])), 'CS_WRITER_CLOSED');
    await expectCode(writer.finish(), 'CS_WRITER_CLOSED');
    const aborted = await createShuffleWriter(kind, options({ outputPrefix: join(dir, 'second') }));
    await aborted.abort();
    await expectCode(aborted.write(ints('k', [1])), 'CS_WRITER_CLOSED');
  });

  test('finish without any batch and without a schema is refused and leaves nothing behind', async () => {
    const writer = await createShuffleWriter(kind, options());
    await expectCode(writer.finish(), 'CS_INVALID_ARGUMENT', /schema/);
    expect(await listFiles(dir)).toEqual([]);
  });

  test('finish without any batch but with a schema writes an output of no rows that keeps the schema in partition 0, the others empty', async () => {
    const schema = new Schema([new Field('k', new Int32()), new Field('s', new Utf8())]);
    const writer = await createShuffleWriter(kind, options({ schema }));
    const result = await writer.finish();
    expect(result.partitionLengths[0]).toBeGreaterThan(0);
    expect(result.partitionLengths.slice(1)).toEqual([0, 0, 0]);
    expect(result.partitionRows).toEqual([0, 0, 0, 0]);
    expect(await listFiles(dir)).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
    const reader = await ShuffleReader.open(join(dir, 'out'));
    try {
      expect((await reader.schema())?.fields.map((f) => `${f.name}: ${String(f.type)}`)).toEqual(['k: Int32', 's: Utf8']);
      for (let p = 0; p < 4; p++) for await (const batch of reader.readPartition(p)) expect(batch.numRows).toBe(0);
    } finally {
      await reader.close();
    }
  });

  test('abort removes every temporary file', async () => {
    const writer = await createShuffleWriter(kind, options());
    await writer.write(ints('k', [1, 2, 3]));
    expect((await listFiles(dir)).length).toBe(1); // the temporary data file
    await writer.abort();
    expect(await listFiles(dir)).toEqual([]);
  });
});

describe('precomputed partition ids', () => {
  test('an out-of-range id is CS_PARTITION_ID_OUT_OF_RANGE naming the column and the row across batches', async () => {
    const writer = await createShuffleWriter(kind, options({ partitioning: { kind: 'partition-id', column: 'pid' } }));
    await writer.write(ints('pid', [0, 1, 2]));
    const error = await expectCode(writer.write(ints('pid', [3, 4, 1])), 'CS_PARTITION_ID_OUT_OF_RANGE', /partition id 4 is outside \[0, 4\)/);
    expect(error.where).toMatchObject({ column: 'pid', row: 4 });
    await writer.abort();
  });

  test('a null id is CS_PARTITION_ID_OUT_OF_RANGE', async () => {
    const writer = await createShuffleWriter(kind, options({ partitioning: { kind: 'partition-id', column: 'pid' } }));
    const batch = makeTable({ pid: vectorFromArray([1, null], new Int32()) } as never).batches[0]! as unknown as RecordBatch;
    const error = await expectCode(writer.write(batch), 'CS_PARTITION_ID_OUT_OF_RANGE', /null/);
    expect(error.where.row).toBe(1);
    await writer.abort();
  });

  test('after an out-of-range id the writer stays usable: the refused batch left nothing behind', async () => {
    const writer = await createShuffleWriter(kind, options({ partitioning: { kind: 'partition-id', column: 'pid' } }));
    await writer.write(ints('pid', [0, 1]));
    await expectCode(writer.write(ints('pid', [2, 9])), 'CS_PARTITION_ID_OUT_OF_RANGE');
    await writer.write(ints('pid', [3]));
    const result = await writer.finish();
    expect(result.rows).toBe(3);
    expect(result.partitionRows).toEqual([1, 1, 0, 1]);
  });

  test('a non-integer id column is CS_UNSUPPORTED_KEY_TYPE', async () => {
    const schema = new Schema([new Field('pid', new Utf8())]);
    await expectCode(createShuffleWriter(kind, options({ schema, partitioning: { kind: 'partition-id', column: 'pid' } })), 'CS_UNSUPPORTED_KEY_TYPE');
  });
});

describe('more misuse', () => {
  test('an empty schema is CS_INVALID_ARGUMENT', async () => {
    await expectCode(createShuffleWriter(kind, options({ partitioning: { kind: 'round-robin' }, schema: new Schema([]) })), 'CS_INVALID_ARGUMENT', /no columns/);
    const writer = await createShuffleWriter(kind, options({ partitioning: { kind: 'round-robin' } }));
    const empty = new RecordBatch(new Schema([]), makeData({ type: new Struct([]), length: 3, children: [] }));
    await expectCode(writer.write(empty), 'CS_INVALID_ARGUMENT', /no columns/);
    await writer.abort();
  });

  test('a spill directory that is a file is CS_FILE_NOT_FOUND naming it', async () => {
    const file = join(dir, 'not-a-dir');
    await (await import('node:fs/promises')).writeFile(file, 'x');
    const error = await expectCode(createShuffleWriter(kind, options({ spillDir: file })), 'CS_FILE_NOT_FOUND', /spill directory/);
    expect(error.where.file).toBe(file);
  });
});

describe('an existing output', () => {
  test('is not overwritten by default: CS_OUTPUT_EXISTS naming its index, and the old output is untouched', async () => {
    const first = await createShuffleWriter(kind, options());
    await first.write(ints('k', [1, 2, 3]));
    await first.finish();
    const before = await listFiles(dir);
    const error = await expectCode(createShuffleWriter(kind, options()), 'CS_OUTPUT_EXISTS');
    expect(error.where.file).toBe(join(dir, 'out.index'));
    expect(await listFiles(dir)).toEqual(before);
  });

  test('is replaced when overwrite is asked for, and only when the new one commits', async () => {
    const first = await createShuffleWriter(kind, options());
    await first.write(ints('k', [1, 2, 3]));
    const old = await first.finish();
    const aborted = await createShuffleWriter(kind, options({ overwrite: true }));
    await aborted.write(ints('k', [4]));
    await aborted.abort();
    expect(await listFiles(dir)).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
    const second = await createShuffleWriter(kind, options({ overwrite: true }));
    await second.write(ints('k', [5, 6]));
    await second.finish();
    const reader = await ShuffleReader.open(join(dir, 'out'));
    const values: number[] = [];
    for await (const batch of reader.readPartitions(0, reader.numPartitions)) for (const row of batch) values.push(row!.k as number);
    await reader.close();
    expect(values.sort()).toEqual([5, 6]);
    expect(old.rows).toBe(3);
  });

  test('two writers created for one prefix before either commits: the second commit is CS_OUTPUT_EXISTS, the first output intact', async () => {
    const first = await createShuffleWriter(kind, options());
    const second = await createShuffleWriter(kind, options());
    await first.write(ints('k', [1, 2, 3]));
    await second.write(ints('k', [4]));
    expect((await first.finish()).rows).toBe(3);
    await expectCode(second.finish(), 'CS_OUTPUT_EXISTS', /another writer committed/);
    expect(await listFiles(dir)).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
    expect(await readKeys(join(dir, 'out'))).toEqual([1, 2, 3]);
  });

  test('finishing at the same time (the prefix spelled two ways): one commits, the other is CS_OUTPUT_EXISTS, and the output is whole (never one\'s index over the other\'s data)', async () => {
    for (let round = 0; round < 5; round++) {
      await removeDir(dir);
      dir = await makeTempDir();
      const writers = await Promise.all([createShuffleWriter(kind, options()), createShuffleWriter(kind, options({ outputPrefix: `${dir}/./out` }))]);
      await writers[0]!.write(ints('k', [1, 2, 3]));
      await writers[1]!.write(ints('k', [7, 8]));
      const outcomes = await Promise.allSettled(writers.map((w) => w.finish()));
      const committed = outcomes.flatMap((o, i) => (o.status === 'fulfilled' ? [i] : []));
      expect(committed).toHaveLength(1);
      expect(outcomes.find((o) => o.status === 'rejected')!.status === 'rejected' && ((outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult).reason as ShuffleError).code).toBe('CS_OUTPUT_EXISTS');
      expect(await readKeys(join(dir, 'out'))).toEqual(committed[0] === 0 ? [1, 2, 3] : [7, 8]);
      expect(await listFiles(dir)).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
    }
  });
});

describe('one call at a time', () => {
  test('a second finish() while the first runs is CS_WRITER_CLOSED; the first commits', async () => {
    const writer = await createShuffleWriter(kind, options());
    await writer.write(ints('k', [1, 2, 3]));
    const [first, second] = await Promise.allSettled([writer.finish(), writer.finish()]);
    expect(first.status).toBe('fulfilled');
    expect(second.status === 'rejected' && (second.reason as ShuffleError).code).toBe('CS_WRITER_CLOSED');
    expect(await readKeys(join(dir, 'out'))).toEqual([1, 2, 3]);
  });

  test('finish() while a write() runs is CS_WRITER_BUSY, and the write and a later finish() go through', async () => {
    const writer = await createShuffleWriter(kind, options());
    const writing = writer.write(ints('k', [1, 2, 3]));
    await expectCode(writer.finish(), 'CS_WRITER_BUSY', /write\(\) is still running/);
    await expectCode(writer.write(ints('k', [9])), 'CS_WRITER_BUSY');
    await writing;
    expect((await writer.finish()).rows).toBe(3);
    expect(await readKeys(join(dir, 'out'))).toEqual([1, 2, 3]);
  });

  test('abort() while finish() runs: finish() is CS_WRITER_CLOSED and nothing is left behind', async () => {
    const writer = await createShuffleWriter(kind, options());
    await writer.write(ints('k', Array.from({ length: 5000 }, (_, i) => i)));
    const finishing = writer.finish().then(() => null, (e: unknown) => e);
    await writer.abort();
    const error = await finishing;
    // the abort may land after the commit: then finish() succeeded and abort() had nothing left to do
    if (error !== null) {
      expect((error as ShuffleError).code).toBe('CS_WRITER_CLOSED');
      expect(await listFiles(dir)).toEqual([]);
    }
  });

  test('a second abort() while the first runs resolves once the files are gone (it returned at once, and a CLI exited with them in place)', async () => {
    const writer = await createShuffleWriter(kind, options());
    await writer.write(ints('k', Array.from({ length: 5000 }, (_, i) => i)));
    void writer.abort();
    await writer.abort();
    expect(await listFiles(dir)).toEqual([]);
  });
});

describe('what is not a batch, or not the batch its schema says, is refused', () => {
  test.each([
    ['null', null],
    ['a Table', makeTable({ k: Int32Array.of(1) })],
    ['Data', makeTable({ k: Int32Array.of(1) }).batches[0]!.data],
    ['a plain object', { numRows: 1 }],
  ])('write(%s) is CS_INVALID_ARGUMENT and the writer stays usable', async (_, value) => {
    const writer = await createShuffleWriter(kind, options());
    await expectCode(writer.write(value as never), 'CS_INVALID_ARGUMENT', /write\(\) takes an Arrow RecordBatch/);
    await writer.write(ints('k', [5]));
    expect((await writer.finish()).rows).toBe(1);
  });

  test('a schema with two columns of one name is CS_INVALID_ARGUMENT (no Arrow reader could read it back)', async () => {
    const schema = new Schema([new Field('k', new Int32()), new Field('k', new Utf8())]);
    await expectCode(createShuffleWriter(kind, options({ schema })), 'CS_INVALID_ARGUMENT', /two columns named "k"/);
    expect(await listFiles(dir)).toEqual([]);
  });

  test("a batch whose column data is not its schema's type (what arrow-js makes of duplicate names) is CS_INVALID_ARGUMENT naming the column", async () => {
    const writer = await createShuffleWriter(kind, options({ partitioning: { kind: 'round-robin' } }));
    const schema = new Schema([new Field('k', new Int32()), new Field('s', new Utf8())]);
    const lying = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 2, nullCount: 0, children: [ints('k', [1, 2]).data.children[0]!, ints('x', [3, 4]).data.children[0]!] }));
    await expectCode(writer.write(lying), 'CS_INVALID_ARGUMENT', /column 1 \("s"\) of the batch holds Int32 data, its schema says Utf8/);
    await writer.abort();
  });

  test.each([
    ['Utf8 with fewer offsets than rows (the columnar writer reported rows: NaN and wrote none)', () => new Data(new Utf8(), 0, 4, 0, [Int32Array.of(0, 1, 2), new TextEncoder().encode('ab')] as never), /column 1 \("v"\) of the batch is inconsistent: it has 3 offsets for 4 rows/],
    ['Int32 values shorter than the rows (the missing rows came back as 0)', () => new Data(new Int32(), 0, 4, 0, [undefined, Int32Array.of(1, 2)] as never), /its values hold 8 bytes for 4 rows of 4/],
    ['Utf8View without its views, hashed on (a plain RangeError)', () => new Data(new Utf8View(), 0, 4, 0, [undefined, new Uint8Array(0)] as never, [], undefined, []), /is inconsistent: .*views/],
  ])('%s is CS_INVALID_ARGUMENT before any row moves, and the writer stays usable', async (_, column, message) => {
    const v = column();
    const schema = new Schema([new Field('k', new Int32()), new Field('v', v.type)]);
    const batchOf = (data: Data) => new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: data.length, nullCount: 0, children: [makeData({ type: new Int32(), length: data.length, nullCount: 0, data: Int32Array.from({ length: data.length }, (_, i) => i) }), data] }));
    const writer = await createShuffleWriter(kind, options({ partitioning: { kind: 'hash', keys: ['k', 'v'] } }));
    await expectCode(writer.write(batchOf(v)), 'CS_INVALID_ARGUMENT', message);
    await writer.write(batchOf(makeData({ type: v.type as never, length: 0, nullCount: 0 })));
    expect((await writer.finish()).rows).toBe(0);
  });

  test("a batch without rows whose columns arrow-js's makeTable left as Vectors is taken (only its schema is read)", async () => {
    const empty = makeTable({ k: new Int32Array(0) }).batches[0]!;
    expect(empty.data.children[0]).not.toBeInstanceOf(Data); // what arrow-js makes of empty arrays
    const writer = await createShuffleWriter(kind, options());
    await writer.write(empty);
    const one = makeData({ type: new Int32(), length: 1, nullCount: 0, data: Int32Array.of(1) });
    await writer.write(new RecordBatch(empty.schema, makeData({ type: new Struct(empty.schema.fields), length: 1, nullCount: 0, children: [one] })));
    expect((await writer.finish()).rows).toBe(1);
  });

  test('a schema or batch made by another copy of apache-arrow (require() beside import) is CS_INVALID_ARGUMENT saying so (its Int64 was written as Uint0)', async () => {
    const foreign = createRequire(import.meta.url)('apache-arrow') as typeof import('apache-arrow');
    const table = new foreign.Table({ k: foreign.vectorFromArray([1n, 2n], new foreign.Int64()) });
    expect(table.getChild('k')!.type).not.toBeInstanceOf(Int64); // two copies indeed
    await expectCode(createShuffleWriter(kind, options({ schema: table.schema as never })), 'CS_INVALID_ARGUMENT', /column "k" has a type made by another copy of apache-arrow/);
    const writer = await createShuffleWriter(kind, options());
    await expectCode(writer.write(table.batches[0] as never), 'CS_INVALID_ARGUMENT', /another copy of apache-arrow/);
    await writer.abort();
    expect(await listFiles(dir)).toEqual([]);
  });

  test.each([
    ['a batch made of Vectors (the RecordBatch constructor takes them as they are; both writers threw a TypeError)', () => new RecordBatch({ k: vectorFromArray([1, 2], new Int32()) } as never), /column "k" of the batch is a Vector, not Arrow Data \(.*vector\.data\[0\]\)/],
    [
      'a struct column with a Vector child',
      () => {
        const type = new Struct([new Field('a', new Int32())]);
        const s = makeData({ type, length: 2, nullCount: 0, children: [vectorFromArray([1, 2], new Int32()) as never] });
        return new RecordBatch({ k: ints('k', [1, 2]).data.children[0]!, s });
      },
      /column "s\.a" of the batch is a Vector/,
    ],
    [
      'a dictionary column without its dictionary (Data made by its constructor, not makeData)',
      () => new RecordBatch({ k: ints('k', [1, 2]).data.children[0]!, d: new Data(new Dictionary(new Utf8(), new Int32()), 0, 2, 0, [undefined, Int32Array.of(0, 0)]) }),
      /column "d" of the batch is a dictionary column without its dictionary/,
    ],
  ])('%s is CS_INVALID_ARGUMENT naming the column, and the writer stays usable', async (_, batch, message) => {
    const writer = await createShuffleWriter(kind, options({ partitioning: { kind: 'round-robin' } }));
    await expectCode(writer.write(batch()), 'CS_INVALID_ARGUMENT', message);
    await writer.write(ints('k', [5]));
    expect((await writer.finish()).rows).toBe(1);
  });
});

describe('types arrow-js builds with parameters no reader takes are CS_UNSUPPORTED_TYPE naming the column', () => {
  test.each([
    ['FixedSizeBinary(-1) (a plain RangeError from the pool)', new FixedSizeBinary(-1), 'f', /a byte width of -1/],
    ['FixedSizeList(-2) in a struct', new Struct([new Field('l', new FixedSizeList(-2, new Field('item', new Int32())))]), 'f.l', /a list size of -2/],
    ['Decimal of 16 bits (written, then unreadable)', new Decimal(2, 4, 16), 'f', /a bit width of 16 \(one of 32, 64, 128, 256\)/],
    ['Int of 12 bits', new Int(true, 12 as never), 'f', /a bit width of 12/],
    ['Time32 of nanoseconds (the spec pairs them with 64 bits: other readers refuse it)', new Time(TimeUnit.NANOSECOND, 32), 'f', /a bit width of 32 \(one of 64\)/],
    ['a dictionary of 12-bit indices', new Dictionary(new Utf8(), new Int(true, 12 as never) as never), 'f', /a bit width of 12/],
  ])('%s', async (_, type, column, why) => {
    const schema = new Schema([new Field('k', new Int32()), new Field('f', type)]);
    const error = await expectCode(createShuffleWriter(kind, options({ schema })), 'CS_UNSUPPORTED_TYPE', why);
    expect(error.where.column).toBe(column);
    expect(await listFiles(dir)).toEqual([]);
  });
});

describe('options outside their domain are CS_INVALID_ARGUMENT naming them', () => {
  test.each([
    ['no options object', undefined],
    ['partitioning missing', { partitioning: undefined }],
    ['partitioning null', { partitioning: null }],
    ['an unknown partitioning kind', { partitioning: { kind: 'bucket' } }],
    ['hash keys as a string', { partitioning: { kind: 'hash', keys: 'k' } }],
    ['partition-id without a column', { partitioning: { kind: 'partition-id' } }],
    ['maxBatchRows 1.5 (it hung the columnar writer)', { maxBatchRows: 1.5 }],
    ['maxBatchRows 2^31', { maxBatchRows: 2 ** 31 }],
    ['numPartitions 2^24 + 1', { numPartitions: 2 ** 24 + 1 }],
    ['concurrentTasks 1.5', { concurrentTasks: 1.5 }],
    ['minCompressionSavings as a string', { minCompressionSavings: '0.5' }],
    ["an outputPrefix that names a directory ('out/' made hidden files out/.data, out/.index)", { outputPrefix: 'out/' }],
  ])('%s', async (_, overrides) => {
    const given = overrides === undefined ? undefined : { ...options(), ...overrides };
    await expectCode(createShuffleWriter(kind, given as never), 'CS_INVALID_ARGUMENT');
    expect(await listFiles(dir)).toEqual([]);
  });

  test('maxBatchRows 2^31 - 1 works within a 64 MiB pool (nothing is sized by the option alone: row ids for it were 8 GiB)', async () => {
    const writer = await createShuffleWriter(kind, options({ maxBatchRows: 2 ** 31 - 1, memoryPool: new MemoryPool(64 * 1024 * 1024) }));
    await writer.write(ints('k', Array.from({ length: 1000 }, (_, i) => i)));
    const result = await writer.finish();
    expect(result.rows).toBe(1000);
    expect(await readKeys(join(dir, 'out'))).toEqual(Array.from({ length: 1000 }, (_, i) => i));
  });
});

describe("the writer's memory for its partitions is reserved in its pool", () => {
  test('from create() on: the pool holds it before any batch, and gives it back at finish', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await createShuffleWriter(kind, options({ numPartitions: 100_000, partitioning: { kind: 'round-robin' }, memoryPool: pool }));
    expect(pool.reserved).toBeGreaterThanOrEqual(100_000 * (kind === 'hash' ? 64 : 16));
    await writer.write(ints('k', [1, 2, 3]));
    await writer.finish();
    expect(pool.reserved).toBe(0);
  });

  test.runIf(kind === 'hash')('each dictionary column adds its own per-partition state, held from the first batch on', async () => {
    const pool = new MemoryPool(64 * 1024 * 1024);
    const writer = await createShuffleWriter(kind, options({ numPartitions: 100_000, partitioning: { kind: 'round-robin' }, memoryPool: pool }));
    const words = () => vectorFromArray(['a', 'b', 'a'], new Dictionary(new Utf8(), new Int32())).data[0]!;
    await writer.write(new RecordBatch({ k: vectorFromArray([1, 2, 3], new Int32()).data[0]!, d1: words(), d2: words(), d3: words() }));
    expect(pool.reserved).toBeGreaterThanOrEqual(100_000 * (64 + 3 * 8));
    await writer.finish();
    expect(pool.reserved).toBe(0);
  });

  test('more partitions than the pool can keep state for is CS_MEMORY_LIMIT at create(), leaving nothing', async () => {
    const pool = new MemoryPool(1024 * 1024);
    await expectCode(createShuffleWriter(kind, options({ numPartitions: 1_000_000, partitioning: { kind: 'round-robin' }, memoryPool: pool })), 'CS_MEMORY_LIMIT');
    expect(pool.reserved).toBe(0);
    expect(await listFiles(dir)).toEqual([]);
  });
});
});

describe('sort writer limits', () => {
  test("more partitions than its pointers' 24-bit fields hold (Spark's limit, every writer's) is CS_INVALID_ARGUMENT, before any file exists", async () => {
    expect(MAX_PARTITIONS).toBe(MAX_NUM_PARTITIONS);
    await expectCode(SortShuffleWriter.create(options({ numPartitions: 2 ** 24 + 1 })), 'CS_INVALID_ARGUMENT', /numPartitions must be an integer in \[1, 16777216\]/);
    expect(await listFiles(dir)).toEqual([]);
    const largest = await SortShuffleWriter.create(options({ numPartitions: 2 ** 24, partitioning: { kind: 'round-robin' } }));
    await largest.abort();
  });

  test.each([
    ['pageBytes', { pageBytes: 10 }],
    ['pageBytes', { pageBytes: 4098 }],
    ['pageBytes', { pageBytes: 2 ** 28 }],
    ['blockBytes', { blockBytes: 0 }],
  ])('%s out of range (%o) is CS_INVALID_ARGUMENT naming it', async (name, sizes) => {
    await expectCode(SortShuffleWriter.create({ ...options(), ...sizes }), 'CS_INVALID_ARGUMENT', new RegExp(name));
  });
});
