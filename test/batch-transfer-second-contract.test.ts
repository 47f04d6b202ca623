/**
 * How batches reach map tasks in worker threads, second contract: the edges of
 * src/shuffle/batch-transfer.ts and src/shuffle/map-task-worker.ts that the
 * second mutation sweep of them found unguarded (see docs/RELIABILITY.md, "The
 * tests notice a broken line: mutation sweeps"): what a slice copies when it
 * starts at row 0 or at an odd bit, which buffers of an unsliced batch move,
 * a dictionary list where the schema has none, and one map task's
 * dictionaries never reaching the next task on the same thread.
 *
 * Expected values are arrow-js's own values of the batches sent (Vector.get,
 * through valueAt), compared with the rebuilt batch on the other side of a real
 * MessageChannel or with the rows read back from the task's output; byte
 * counts come from the layouts the tests build (TransferMode's doc comment:
 * "A slice's copy holds only the bytes of its rows"), never from the code
 * under test.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, test } from 'vitest';
import { Bool, Dictionary, Field, Int32, Int64, List, makeData, RecordBatch, Schema, SparseUnion, Struct, Table, Utf8, Utf8View, Vector, vectorFromArray, type Data } from 'apache-arrow';
import { batchFromTransferable, batchToTransferable, ReceivedDictionaries, SentDictionaries, type TransferMode } from '../src/shuffle/batch-transfer.js';
import { MapTaskPool } from '../src/shuffle/map-task-pool.js';
import { writerSpecOf, type HostMessage, type WorkerMessage } from '../src/shuffle/worker-protocol.js';
import { batchOf } from './support/columns.js';
import { indicesOf, words } from './support/dictionary-columns.js';
import { valueAt } from './support/js-values.js';
import { readBackRows, useMapTaskFixture } from './support/map-task-fixture.js';
import { post } from './support/post-batch.js';
import { rowsOf } from './support/rows.js';


function roundTrip(batch: RecordBatch, mode: TransferMode = 'exclusive') {
  const prepared = batchToTransferable(batch, mode);
  return { prepared, received: batchFromTransferable(post(prepared), batch.schema) };
}

/** Every value of every column, as arrow-js reads it. */
function valuesOf(batch: RecordBatch): unknown[][] {
  return batch.schema.fields.map((_, c) => {
    const column = batch.getChildAt(c)!;
    return Array.from({ length: batch.numRows }, (_, i) => valueAt(column, i));
  });
}

const ROWS = 4000;
/** a bitmap with every third row null: 500 bytes for 4000 rows */
const thirdsNull = () => Uint8Array.from({ length: ROWS / 8 }, (_, i) => [0b10110110, 0b01101101, 0b11011011][i % 3]!);
const nullsIn = (bitmap: Uint8Array) => ROWS - bitmap.reduce((n, byte) => n + [...byte.toString(2)].filter((b) => b === '1').length, 0);

describe("a slice copies the bytes of its rows (TransferMode: \"A slice's copy holds only the bytes of its rows\"), also from row 0 and at every bit offset", () => {
  const int32 = () => {
    const nullBitmap = thirdsNull();
    return makeData({ type: new Int32(), length: ROWS, nullCount: nullsIn(nullBitmap), nullBitmap, data: Int32Array.from({ length: ROWS }, (_, i) => i * 7) });
  };
  const bool = () => {
    const nullBitmap = thirdsNull();
    return makeData({ type: new Bool(), length: ROWS, nullCount: nullsIn(nullBitmap), nullBitmap, data: Uint8Array.from({ length: ROWS / 8 }, (_, i) => (i * 37) & 0xff) });
  };
  /** a sparse union whose type ids are 3 and 7 (not 0..n-1) over a Bool child and an Int32 child */
  const sparse = () => {
    const type = new SparseUnion([3, 7], [new Field('b', new Bool(), true), new Field('n', new Int32(), true)]);
    const typeIds = Int8Array.from({ length: ROWS }, (_, i) => (i % 3 === 0 ? 7 : 3));
    return makeData({ type, length: ROWS, nullCount: 0, typeIds, children: [bool(), int32()] } as never) as Data;
  };
  // an upper bound of the bytes of `n` rows of each column: its values, its bitmaps rounded out to whole bytes at both ends
  const cases: { name: string; make: () => Data; bytes: (n: number) => number }[] = [
    { name: 'int32 with nulls', make: int32, bytes: (n) => 4 * n + 2 + Math.ceil(n / 8) },
    { name: 'sparse union<bool, int32> of type ids 3 and 7', make: sparse, bytes: (n) => n + 3 * (2 + Math.ceil(n / 8)) + 4 * n },
  ];
  for (const { name, make, bytes } of cases) {
    test(`${name}: 5 rows of 4000 copy at most ${bytes(5)} bytes from row 0, 1, 7, 8, 13 and 3995`, () => {
      const column = make();
      const parent = batchOf(new Schema([new Field('v', column.type, true)]), [column], ROWS);
      for (const start of [0, 1, 7, 8, 13, ROWS - 5]) {
        const slice = parent.slice(start, start + 5);
        const { prepared, received } = roundTrip(slice);
        expect(valuesOf(received), `rows ${start}..${start + 5}`).toEqual(valuesOf(slice));
        expect(prepared.copiedBytes, `rows ${start}..${start + 5}`).toBeLessThanOrEqual(bytes(5));
      }
      expect(valuesOf(parent).flat().length, 'the parent keeps its rows').toBe(ROWS);
    });
  }

  test("slices of no rows, at row 0, in the middle and at the end, copy at most the string column's one offset and a byte of each bitmap (the byte holding their bit offset), no values of their parent", () => {
    const nullBitmap = thirdsNull();
    const x = makeData({ type: new Int32(), length: ROWS, nullCount: nullsIn(nullBitmap), nullBitmap, data: Int32Array.from({ length: ROWS }, (_, i) => i) });
    const s = vectorFromArray(Array.from({ length: ROWS }, (_, i) => (i % 3 === 0 ? null : `word ${i}`)), new Utf8()).data[0]!;
    const parent = batchOf(new Schema([new Field('x', x.type, true), new Field('s', s.type, true)]), [x, s], ROWS);
    const before = valuesOf(parent);
    for (const start of [0, 1, 2000, ROWS]) {
      const { prepared, received } = roundTrip(parent.slice(start, start));
      expect(received.numRows, `no rows at ${start}`).toBe(0);
      expect(prepared.copiedBytes, `no rows at ${start}: 4 bytes of offset, 2 of bitmaps`).toBeLessThanOrEqual(6);
    }
    expect(valuesOf(parent), 'the parent is intact').toEqual(before);
  });

  test('a Bool column sliced at a bit offset 1..7 (and 13) copies a byte or two of values and of validity, not the 500 of its parent', () => {
    const column = bool();
    const parent = batchOf(new Schema([new Field('v', column.type, true)]), [column], ROWS);
    const before = valuesOf(parent);
    for (const start of [1, 2, 3, 4, 5, 6, 7, 13, ROWS - 5]) {
      const slice = parent.slice(start, start + 5);
      const { prepared, received } = roundTrip(slice);
      expect(valuesOf(received), `rows ${start}..${start + 5}`).toEqual(valuesOf(slice));
      expect(prepared.copiedBytes, `rows ${start}..${start + 5}`).toBeLessThanOrEqual(4);
    }
    expect(valuesOf(parent), 'the parent, never moved, is intact').toEqual(before);
  });
});

describe("an unsliced batch moves every buffer it alone covers whole (TransferMode 'exclusive'), also where its rows use only part of it", () => {
  test('a list whose child is longer than its offsets reach, and a view column whose data has bytes no row points at: nothing but validity is copied', () => {
    const child = makeData({ type: new Int32(), length: 10, nullCount: 0, data: Int32Array.from({ length: 10 }, (_, i) => 100 + i) });
    // offsets start at 2 and end at 7: child rows 0, 1, 7, 8, 9 are no row's
    const list = makeData({ type: new List(new Field('item', new Int32(), false)), length: 3, nullCount: 0, valueOffsets: Int32Array.of(2, 4, 4, 7), child });
    const long = (c: string) => c.repeat(20);
    const views = vectorFromArray([long('a'), 'short', long('b')], new Utf8View()).data[0]!;
    // the same views over a data buffer with 40 bytes in front that no view points at
    const data = views.variadicBuffers[0]!;
    const padded = new Uint8Array(40 + data.byteLength);
    padded.set(data, 40);
    const viewBytes = new Uint8Array(views.values);
    const dv = new DataView(viewBytes.buffer);
    for (let row = 0; row < 3; row++) if (dv.getInt32(row * 16, true) > 12) dv.setInt32(row * 16 + 12, dv.getInt32(row * 16 + 12, true) + 40, true);
    const view = makeData({ type: new Utf8View(), length: 3, views: viewBytes, variadicBuffers: [padded] } as never) as Data;
    const schema = new Schema([new Field('l', list.type, false), new Field('s', view.type, false)]);
    const batch = batchOf(schema, [list, view], 3);
    const expected = valuesOf(batch).map((column) => column.map((v) => (v instanceof Vector ? [...v] : v)));
    const owned = [list.valueOffsets, child.values, viewBytes, padded].reduce((n, b) => n + b.byteLength, 0);
    const { prepared, received } = roundTrip(batch);
    expect(valuesOf(received).map((column) => column.map((v) => (v instanceof Vector ? [...v] : v)))).toEqual(expected);
    expect(prepared.transferredBytes, 'the offsets, the whole child, the views and the whole data buffer move').toBe(owned);
    expect(prepared.copiedBytes).toBe(0);
    expect([child.values.byteLength, padded.byteLength], "moved: detached at the sender, as 'exclusive' says").toEqual([0, 0]);
  });
});

test("a slice whose rows use every item of a list's child (its later rows are empty) leaves the parent's child intact: the slice's children are copied too", () => {
  const child = makeData({ type: new Int32(), length: 6, nullCount: 0, data: Int32Array.of(1, 2, 3, 4, 5, 6) });
  const type = new List(new Field('item', new Int32(), false));
  const list = makeData({ type, length: 5, nullCount: 0, valueOffsets: Int32Array.of(0, 2, 5, 6, 6, 6), child });
  const parent = batchOf(new Schema([new Field('l', type, false)]), [list], 5);
  const lists = (batch: RecordBatch) => valuesOf(batch)[0]!.map((v) => [...(v as Vector)]);
  const before = lists(parent);
  expect(before).toEqual([[1, 2], [3, 4, 5], [6], [], []]);
  for (const [start, end] of [[0, 3], [0, 4], [1, 3], [3, 5]] as const) {
    const slice = parent.slice(start, end);
    expect(lists(roundTrip(slice).received), `rows ${start}..${end}`).toEqual(before.slice(start, end));
    expect(lists(parent), `the parent, after rows ${start}..${end} were sent`).toEqual(before);
  }
  expect(child.values.byteLength, "the child's values were never moved").toBe(24);
});

test("a dictionary inside a dictionary's values (a struct with a dictionary field) is shared from batch to batch like any other: sent once, found by its id the next batch", () => {
  const innerType = new Dictionary(new Utf8(), new Int32(), 1);
  const inner = new Vector([vectorFromArray(['red', 'blue'], new Utf8()).data[0]!]);
  const valueType = new Struct([new Field('c', innerType, true)]);
  const outerType = new Dictionary(valueType, new Int32(), 2);
  const schema = new Schema([new Field('o', outerType, true)]);
  const outerChunk = (indices: number[]) =>
    makeData({ type: valueType, length: indices.length, nullCount: 0, children: [makeData({ type: innerType, length: indices.length, nullCount: 0, data: Int32Array.from(indices), dictionary: inner })] });
  const batchOver = (chunk: Data<Struct>, indices: number[]) =>
    new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: indices.length, nullCount: 0, children: [makeData({ type: outerType, length: indices.length, nullCount: 0, data: Int32Array.from(indices), dictionary: new Vector([chunk]) })] }));
  const sent = new SentDictionaries();
  const received = new ReceivedDictionaries();
  // two batches whose outer dictionaries differ and whose inner dictionary is one
  const batches = [batchOver(outerChunk([0, 1]), [1, 0, 1]), batchOver(outerChunk([1, 1, 0]), [2, 0])];
  const innerChunksSent: (string | null)[][] = [];
  for (const batch of batches) {
    const expected = valuesOf(batch)[0]!.map((row) => JSON.stringify(row));
    const message = post(batchToTransferable(batch, 'copy', sent));
    sent.commit();
    const outer = message.data.children[0]!.dictionary!;
    innerChunksSent.push(outer.flatMap((chunk) => chunk.data?.children[0]!.dictionary!.map((c) => (c.data === null ? 'id only' : 'data')) ?? []));
    const rebuilt = batchFromTransferable(message, schema, received);
    expect(valuesOf(rebuilt)[0]!.map((row) => JSON.stringify(row))).toEqual(expected);
  }
  expect(innerChunksSent, 'the inner dictionary is sent whole once, then by its id').toEqual([['data'], ['id only']]);
});

test("writerSpecOf keeps every writer option of a spec as it is (each must reach the worker's writer) and nothing else", () => {
  const options = {
    dir: '/x',
    id: { shuffleId: 1, mapId: 2, attempt: 3 },
    spillRoot: '/s',
    writer: 'sort' as const,
    numPartitions: 4,
    partitioning: { kind: 'hash' as const, keys: ['key'] },
    codec: 'lz4' as const,
    maxBatchRows: 5,
    mergeThreshold: 6,
    compressionMinRows: 7,
    minCompressionSavings: 0.5,
    dictionaryUpdates: 'delta' as never,
    pageBytes: 8,
    blockBytes: 9,
  };
  expect(writerSpecOf({ ...options, outputSchema: new Schema([]), onProgress: () => undefined } as never)).toEqual(options);
});

test('a column carrying a dictionary list, even an empty one, where the schema it is rebuilt under has none is CS_SCHEMA_MISMATCH', () => {
  const batch = batchOf(new Schema([new Field('x', new Int32(), false)]), [makeData({ type: new Int32(), length: 2, nullCount: 0, data: Int32Array.of(1, 2) })], 2);
  const message = post(batchToTransferable(batch, 'copy'));
  message.data.children[0]!.dictionary = [];
  expect(() => batchFromTransferable(message, batch.schema)).toThrow(expect.objectContaining({ code: 'CS_SCHEMA_MISMATCH' }));
});

describe('map tasks on one thread, one after the other', () => {
  let dir = '';
  let pool: MapTaskPool;
  useMapTaskFixture({ threads: 1, dirPrefix: 'cs-mut-t3-' }, (fixture) => ({ dir, pool } = fixture));

  test("each task's dictionaries are its own: the second task's column reads its own words, not the first task's (both streams number their chunks from 0)", { timeout: 30_000 }, async () => {
    const type = new Dictionary(words('x', 1).type, new Int32(), 9);
    const schema = new Schema([new Field('key', new Int64(), false), new Field('word', type, true)]);
    const batchOver = (dictionary: Vector, indices: number[]) => {
      const key = makeData({ type: new Int64(), length: indices.length, nullCount: 0, data: BigInt64Array.from(indices, (_, i) => BigInt(i)) });
      return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: indices.length, nullCount: 0, children: [key, indicesOf(type, dictionary, indices)] }));
    };
    const spec = (mapId: number) => ({ dir, id: { shuffleId: 0, mapId, attempt: 0 }, numPartitions: 2, partitioning: { kind: 'hash' as const, keys: ['key'] }, outputSchema: schema });
    const first = [batchOver(words('first', 3), [0, 1, 2, 1])];
    const second = [batchOver(words('second', 3), [2, 2, 0, 1])];
    // read before they are sent: 'exclusive' moves their buffers
    const [expectedFirst, expectedSecond] = [first, second].map((batches) => batches.flatMap((b) => rowsOf(b)).sort());
    expect(valueAt(second[0]!.getChild('word')!, 0)).toBe('second2');
    const one = await pool.run(spec(0), first).status;
    const two = await pool.run(spec(1), second).status;
    expect(await readBackRows([one], 2)).toEqual(expectedFirst);
    expect(await readBackRows([two], 2), 'the second task reads second0..2').toEqual(expectedSecond);
  });

  const emptySpec = (mapId: number, transform: { module: string; export: string }) => ({
    dir,
    id: { shuffleId: 0, mapId, attempt: 0 },
    numPartitions: 2,
    partitioning: { kind: 'hash' as const, keys: ['key'] },
    outputSchema: new Schema([new Field('key', new Int64(), false)]),
    transform,
  });

  test('a transform may return a plain (sync) iterable: one returning an empty array commits an empty output', { timeout: 30_000 }, async () => {
    const module = join(dir, 'sync.mjs');
    await writeFile(module, 'export function none() { return []; }\n');
    const status = await pool.run(emptySpec(2, { module, export: 'none' }), []).status;
    expect(status.metrics.rows).toBe(0);
    expect(await readBackRows([status], 2)).toEqual([]);
  });

  test("a transform module that throws as it loads: CS_INVALID_ARGUMENT located at the task, whose cause is the module's own error, name and message", { timeout: 30_000 }, async () => {
    const module = join(dir, 'broken.mjs');
    await writeFile(module, "throw new RangeError('broken at load');\nexport function never() {}\n");
    const error = await pool.run(emptySpec(3, { module, export: 'never' }), []).status.catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CS_INVALID_ARGUMENT', where: { shuffle: 0, map: 3, attempt: 0 } });
    expect((error as Error).cause).toMatchObject({ name: 'RangeError', message: 'broken at load' });
  });

  test('a batch that reaches the worker before any schema (a host that breaks the protocol) fails the task with CS_INVALID_ARGUMENT, not a TypeError', { timeout: 30_000 }, async () => {
    // the worker thread as MapTaskPool starts it from the sources, driven by hand
    const worker = new Worker(new URL('../src/shuffle/dev-worker-bootstrap.mjs', import.meta.url), { workerData: { entry: new URL('../src/shuffle/map-task-worker.ts', import.meta.url).href } });
    try {
      const failed = new Promise<WorkerMessage>((resolve, reject) => {
        worker.on('message', (message: WorkerMessage) => message.type !== 'taken' && resolve(message));
        worker.on('error', reject);
      });
      const batch = batchOf(new Schema([new Field('key', new Int64(), false)]), [makeData({ type: new Int64(), length: 2, nullCount: 0, data: BigInt64Array.of(1n, 2n) })], 2);
      const start: HostMessage = { type: 'start', task: { dir, id: { shuffleId: 0, mapId: 4, attempt: 0 }, numPartitions: 2, partitioning: { kind: 'hash', keys: ['key'] } }, memoryBytes: 1 << 26 };
      worker.postMessage(start);
      worker.postMessage({ type: 'batch', batch: batchToTransferable(batch, 'copy').batch } satisfies HostMessage);
      const message = await failed;
      expect(message).toMatchObject({ type: 'failed', error: { code: 'CS_INVALID_ARGUMENT' } });
    } finally {
      await worker.terminate();
    }
  });

  describe('what a task spec carries across (worker-protocol.ts writerSpecOf)', () => {
    const schema = new Schema([new Field('key', new Int64(), false)]);
    const keys = () => [batchOf(schema, [makeData({ type: new Int64(), length: 30, nullCount: 0, data: BigInt64Array.from({ length: 30 }, (_, i) => BigInt(i)) })], 30)];
    // README: partition p holds the keys in (bound p - 1, bound p]; keys 0..29 over bounds 10, 20
    const expectedRows = [11, 10, 9];
    const boundsBatch = (values: bigint[]) => batchOf(schema, [makeData({ type: new Int64(), length: values.length, nullCount: 0, data: BigInt64Array.from(values) })], values.length);
    const rangeSpec = (mapId: number, bounds: Table | RecordBatch) => ({ dir, id: { shuffleId: 0, mapId, attempt: 0 }, numPartitions: 3, partitioning: { kind: 'range' as const, keys: ['key'], bounds }, outputSchema: schema });

    test('range bounds given as a table of two batches, or as one RecordBatch, reach the worker whole', { timeout: 30_000 }, async () => {
      const asTable = new Table([boundsBatch([10n]), boundsBatch([20n])]);
      expect(asTable.numRows).toBe(2);
      expect((await pool.run(rangeSpec(5, asTable), keys()).status).partitionRows).toEqual(expectedRows);
      expect((await pool.run(rangeSpec(6, boundsBatch([10n, 20n])), keys()).status).partitionRows).toEqual(expectedRows);
    });

    test('an id with more than its three numbers (here a method) crosses as a plain copy of them: the task runs', { timeout: 30_000 }, async () => {
      const id = { shuffleId: 0, mapId: 7, attempt: 0, toString: () => 'map 7' };
      const status = await pool.run({ dir, id, numPartitions: 2, partitioning: { kind: 'hash', keys: ['key'] }, outputSchema: schema }, keys()).status;
      expect(status.metrics.rows).toBe(30);
    });
  });
});
