/**
 * How batches reach map tasks in worker threads, at the edges a mutation sweep found unguarded:
 * src/shuffle/batch-transfer.ts (which buffers move and which are copied, slices, dictionaries
 * sent once per stream and rebuilt as the sender shared them), src/shuffle/map-task-worker.ts
 * (the thread's kept memory pool, progress, an interrupted transform) and what
 * src/shuffle/map-task-pool.ts does around them that test/worker-protocol-contract.test.ts does not
 * pin (the input window and the input's cleanup after a task settled, a late input failure, a
 * batch of another schema, a dead idle thread, the abort listener, the status's input counts).
 *
 * Each test here fails against a mutant of those files that the other tests let through: see
 * docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps". Expected values come from
 * the rows written compared with the rows read back (or rebuilt on the other side of a real
 * MessageChannel), from arrow-js's own structures (a slice's offset and shared bitmap, a detached
 * ArrayBuffer's length 0), from README.md ("Embedding: the map-side shuffle of a job runner") and
 * the TransferMode / SentDictionaries doc comments; never from the code under test. Nothing here
 * measures time: where a test waits, it waits for an event, and a mutant makes it wait forever.
 * The sweep found one defect, fixed and pinned here: slices of one batch share a bitmap or string
 * data that each covers whole, and the first sent in exclusive mode moved it.
 */
import { getEventListeners } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, test } from 'vitest';
import { Dictionary, Field, Int32, Int64, List, makeData, RecordBatch, Schema, Utf8, Utf8View, Vector, vectorFromArray } from 'apache-arrow';
import { batchFromTransferable, batchToTransferable, ReceivedDictionaries, SentDictionaries, type TransferableBatch, type TransferMode } from '../src/shuffle/batch-transfer.js';
import { narrowBatch, NARROW_SCHEMA } from '../src/cli/demo-data.js';
import { MapTaskPool, type MapTaskProgress, type MapTaskSpec } from '../src/shuffle/map-task-pool.js';
import type { MapStatus } from '../src/shuffle/map-status.js';
import { runChildModule } from './support/child-module.js';
import { batchOf } from './support/columns.js';
import { narrowTaskSpec, readBackRows, useMapTaskFixture } from './support/map-task-fixture.js';
import { post } from './support/post-batch.js';
import { rowsOf } from './support/rows.js';


function roundTrip(batch: RecordBatch, mode: TransferMode = 'exclusive') {
  const prepared = batchToTransferable(batch, mode);
  const received = batchFromTransferable(post(prepared), batch.schema);
  return { prepared, received };
}

const int32Batch = (values: Int32Array, nullBitmap?: Uint8Array, nullCount = 0) =>
  batchOf(new Schema([new Field('x', new Int32(), nullBitmap !== undefined)]), [makeData({ type: new Int32(), data: values, length: values.length, nullCount, ...(nullBitmap ? { nullBitmap } : {}) })], values.length);

describe('which buffers move and which are copied (TransferMode)', () => {
  test('a buffer copied for the worker is itself moved by the post, not cloned a second time: the copies are detached after it, the sender keeps its own', () => {
    const values = Int32Array.from({ length: 256 }, (_, i) => i);
    const prepared = batchToTransferable(int32Batch(values), 'copy');
    const sentValues = prepared.batch.data.children[0]!.buffers[1]!;
    expect(sentValues.byteLength).toBe(1024);
    const received = batchFromTransferable(post(prepared), int32Batch(new Int32Array(0)).schema);
    expect(sentValues.byteLength, 'the copy was on the transfer list: moved, so detached here').toBe(0);
    expect(values.byteLength, 'copy mode leaves the sender its buffer').toBe(1024);
    expect([...received.getChild('x')!]).toEqual([...values]);
  });

  test("a slice from row 0 is a view of the start of its parent's buffer: it is copied, and the parent keeps every value", () => {
    const values = Int32Array.from({ length: 100 }, (_, i) => i * 7);
    const parent = int32Batch(values);
    const slice = parent.slice(0, 10);
    expect(slice.getChild('x')!.data[0]!.values.byteOffset, 'arrow-js sub-arrays the values at offset 0').toBe(0);
    const { prepared, received } = roundTrip(slice);
    expect(prepared.transferredBytes).toBe(0);
    expect(values.byteLength, "the parent's values are not detached").toBe(400);
    expect([...parent.getChild('x')!]).toEqual([...values]);
    expect([...received.getChild('x')!]).toEqual([0, 7, 14, 21, 28, 35, 42, 49, 56, 63]);
  });

  test("a slice of a batch without nulls sent in exclusive mode leaves its sibling slice whole: the empty validity buffer they share is not moved", () => {
    const values = Int32Array.from({ length: 16 }, (_, i) => 100 + i);
    const parent = int32Batch(values);
    const bitmaps = [parent.slice(0, 8), parent.slice(8, 16)].map((b) => b.getChild('x')!.data[0]!.nullBitmap);
    expect(bitmaps[0]!.byteLength, 'arrow-js gives a column without nulls an empty bitmap, which its slices share').toBe(0);
    expect(bitmaps[0]).toBe(bitmaps[1]);
    const first = roundTrip(parent.slice(0, 8)).received; // values sub-arrayed (copied); nothing of the sibling's moves
    const second = roundTrip(parent.slice(8, 16), 'copy').received; // copied: it read a detached buffer when the empty one moved
    expect([...first.getChild('x')!, ...second.getChild('x')!]).toEqual([...values]);
  });

  test("a slice with nulls keeps its null rows where they are: arrow-js keeps the parent's bitmap and the slice's offset into it", () => {
    // rows 0..15; null at 1, 4, 9, 12 (bits cleared)
    const values = Int32Array.from({ length: 16 }, (_, i) => 100 + i);
    const bitmap = Uint8Array.of(0b1110_1101, 0b1110_1101);
    const parent = int32Batch(values, bitmap, 4);
    const slice = parent.slice(3, 13); // rows 3..12
    expect(slice.getChild('x')!.data[0]!.offset, "arrow-js: a slice's Data keeps its offset into the parent's bitmap").toBe(3);
    const expected = [103, null, 105, 106, 107, 108, null, 110, 111, null];
    expect([...slice.getChild('x')!]).toEqual(expected);
    expect(slice.getChild('x')!.data[0]!.nullBitmap, 'and the whole bitmap, not a sub-array').toBe(parent.getChild('x')!.data[0]!.nullBitmap);
    for (const mode of ['copy', 'exclusive'] as const) { // exclusive last: it moves the bitmap the parent and the slice share
      const { received } = roundTrip(slice, mode);
      expect([...received.getChild('x')!], mode).toEqual(expected);
    }
  });

  test("a view column's variadic data buffers move like any other buffer the batch alone holds", () => {
    const strings = ['a value longer than twelve bytes', 'short', 'another value past the inline twelve'];
    const view = vectorFromArray(strings, new Utf8View()).data[0]!;
    const variadic = view.variadicBuffers[0]!;
    expect(variadic.byteOffset === 0 && variadic.byteLength === variadic.buffer.byteLength, 'arrow-js gives the long values a buffer of their own').toBe(true);
    const bytes = variadic.byteLength;
    const batch = batchOf(new Schema([new Field('s', new Utf8View(), true)]), [view], 3);
    const { prepared, received } = roundTrip(batch);
    expect(variadic.byteLength, 'the variadic buffer was moved').toBe(0);
    expect(prepared.transferredBytes).toBeGreaterThanOrEqual(bytes);
    expect([...received.getChild('s')!]).toEqual(strings);
  });
});

describe('dictionaries are copied, never taken from the sender (TransferMode, SentDictionaries)', () => {
  test("a dictionary of list values is copied with its children: the sender's dictionary stays whole", () => {
    const lt = new List(new Field('item', new Int32(), true));
    const type = new Dictionary(lt, new Int32());
    const items = Int32Array.of(1, 2, 3);
    const values = makeData({ type: lt, length: 2, nullCount: 0, valueOffsets: Int32Array.of(0, 2, 3), child: makeData({ type: new Int32(), data: items, length: 3, nullCount: 0 }) });
    const dictionary = new Vector([values]);
    const column = makeData({ type, length: 3, nullCount: 0, data: Int32Array.of(1, 0, 1), dictionary });
    const batch = batchOf(new Schema([new Field('d', type, false)]), [column], 3);
    const { received } = roundTrip(batch);
    expect(items.byteLength, "the dictionary's child values stay at the sender").toBe(12);
    expect([...dictionary].map((v) => [...(v as Iterable<number>)])).toEqual([[1, 2], [3]]);
    expect([...received.getChild('d')!].map((v) => [...(v as Iterable<number>)])).toEqual([[3], [1, 2], [3]]);
  });

  test("a column whose buffers are also a dictionary's is copied: moving it would take the dictionary from the sender", () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const text = new TextEncoder().encode('redgreenblue');
    const offsets = Int32Array.of(0, 3, 8, 12);
    const names = makeData({ type: new Utf8(), length: 3, nullCount: 0, valueOffsets: offsets, data: text });
    const dictionary = new Vector([names]);
    const schema = new Schema([new Field('name', new Utf8(), false), new Field('d', type, false)]);
    const batch = batchOf(schema, [names, makeData({ type, length: 4, nullCount: 0, data: Int32Array.of(2, 2, 0, 1), dictionary }).slice(0, 3)], 3);
    const { received } = roundTrip(batch);
    expect(text.byteLength, "the dictionary's bytes stay at the sender").toBe(12);
    expect([...dictionary]).toEqual(['red', 'green', 'blue']);
    expect([...received.getChild('name')!]).toEqual(['red', 'green', 'blue']);
    expect([...received.getChild('d')!]).toEqual(['blue', 'blue', 'red']);
  });

  /** A sender and a receiver of one stream through a real MessageChannel, each batch committed once posted. */
  function stream(schema: Schema) {
    const sent = new SentDictionaries();
    const received = new ReceivedDictionaries();
    return {
      send(batch: RecordBatch, edit?: (message: TransferableBatch) => void): RecordBatch {
        const prepared = batchToTransferable(batch, 'copy', sent);
        const message = post(prepared);
        sent.commit();
        edit?.(message);
        return batchFromTransferable(message, schema, received);
      },
    };
  }

  test('two columns whose dictionaries are different sequences of chunks get their own Vectors (chunks 1,12 and 11,2)', () => {
    const type = new Dictionary(new Utf8(), new Int32(), 1);
    const schema = new Schema([new Field('d', type, false), new Field('e', type, false)]);
    const chunks = Array.from({ length: 13 }, (_, i) => vectorFromArray([`c${i}`], new Utf8()).data[0]!);
    const column = (ids: number[], length = ids.length) => makeData({ type, length, nullCount: 0, data: Int32Array.from({ length }, (_, i) => i % ids.length), dictionary: new Vector(ids.map((i) => chunks[i]!)) });
    const s = stream(schema);
    const all = Array.from({ length: 13 }, (_, i) => i);
    s.send(batchOf(schema, [column(all), column(all)], 13)); // chunk i gets id i
    const second = s.send(batchOf(schema, [column([1, 12]), column([11, 2])], 2));
    expect([...second.getChild('d')!]).toEqual(['c1', 'c12']);
    expect([...second.getChild('e')!]).toEqual(['c11', 'c2']);
  });

  test('the receiver keeps the chunks of the batch before only: a reference to one sent two batches back is CS_INVALID_ARGUMENT', () => {
    const type = new Dictionary(new Utf8(), new Int32(), 2);
    const schema = new Schema([new Field('d', type, false)]);
    const one = (values: string[]) => batchOf(schema, [makeData({ type, length: 1, nullCount: 0, data: Int32Array.of(0), dictionary: new Vector([vectorFromArray(values, new Utf8()).data[0]!]) })], 1);
    const s = stream(schema);
    expect([...s.send(one(['red'])).getChild('d')!]).toEqual(['red']); // chunk 0
    expect([...s.send(one(['blue'])).getChild('d')!]).toEqual(['blue']); // chunk 1
    // a third batch that names chunk 0 without its data: the receiver no longer has it
    let error: unknown = null;
    try {
      s.send(one(['green']), (message) => (message.data.children[0]!.dictionary = [{ id: 0, data: null }]));
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
  });

  test('a batch with a dictionary where the schema it is rebuilt under has none is CS_SCHEMA_MISMATCH, not a TypeError', () => {
    const type = new Dictionary(new Utf8(), new Int32());
    const batch = batchOf(new Schema([new Field('d', type, false)]), [makeData({ type, length: 2, nullCount: 0, data: Int32Array.of(0, 0), dictionary: new Vector([vectorFromArray(['x'], new Utf8()).data[0]!]) })], 2);
    const message = post(batchToTransferable(batch));
    expect(() => batchFromTransferable(message, new Schema([new Field('d', new Int32(), false)]))).toThrow(expect.objectContaining({ code: 'CS_SCHEMA_MISMATCH' }));
  });
});

describe('slices of one batch share buffers that each slice covers whole (found by the sweep of 2026-12-07, fixed)', () => {
  // arrow-js slices do not sub-array a validity bitmap or a string column's data: every slice holds the parent's whole
  // buffer, so the first slice sent in exclusive mode moved it, and the next slice (not sent yet) was left detached
  test('two slices of one batch built by vectorFromArray, sent one after the other in exclusive mode: the second crosses intact', () => {
    const schema = new Schema([new Field('s', new Utf8(), false), new Field('x', new Int32(), true)]);
    const s = vectorFromArray(['aa', 'bb', 'cc', 'dd'], new Utf8()).data[0]!;
    const x = vectorFromArray([1, null, 3, 4], new Int32()).data[0]!;
    const parent = batchOf(schema, [s, x], 4);
    const first = parent.slice(0, 2);
    const second = parent.slice(2, 4);
    const expected = rowsOf(second);
    roundTrip(first); // the first slice is handed over, as README says a batch sent is
    // the second was not sent: it must cross intact (it threw "Cannot perform Construct on a detached ArrayBuffer")
    expect(rowsOf(roundTrip(second).received)).toEqual(expected);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// map tasks in a worker thread: one thread for the whole file, so each task after the first reuses or replaces it
// ---------------------------------------------------------------------------------------------------------------------

const TRANSFORMS = new URL('./support/map-transforms.ts', import.meta.url);
const PARTITIONS = 3;
/** A transform module given as source (a data: URL the worker imports). */
const moduleOf = (source: string) => `data:text/javascript,${encodeURIComponent(source)}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let dir: string;
let pool: MapTaskPool;
useMapTaskFixture({ threads: 1, dirPrefix: 'cs-mtt-' }, (fixture) => ({ dir, pool } = fixture));

const spec = (mapId: number, extra: Partial<MapTaskSpec> = {}): MapTaskSpec => narrowTaskSpec(dir, mapId, PARTITIONS, extra);
const readBack = (status: MapStatus): Promise<string[]> => readBackRows([status], PARTITIONS);

const inputOf = (count: number, rows: number, seed: number) => Array.from({ length: count }, (_, i) => narrowBatch(rows, seed * 100 + i + 1));
const rowsIn = (batches: RecordBatch[]) => batches.flatMap((b) => rowsOf(b)).sort();

describe('what a task reports (README: onProgress, the status metrics)', () => {
  test('the status counts the input batches and rows the worker took; onProgress reports them as they are taken, also for a transform that writes nothing', { timeout: 30_000 }, async () => {
    const seen: MapTaskProgress[] = [];
    const status = await pool.run(spec(1, { transform: { module: TRANSFORMS, export: 'dropAll' } }), inputOf(5, 100, 1), { onProgress: (p) => seen.push(p) }).status;
    expect(status.metrics).toMatchObject({ inputBatches: 5, inputRows: 500, rows: 0 });
    expect(seen.map((p) => p.inputRows)).toEqual([100, 200, 300, 400, 500]);
    expect(seen.at(-1)).toEqual({ inputBatches: 5, inputRows: 500, batches: 0, rows: 0 });
  });

  test("onProgress's batches and rows reach what the task wrote", { timeout: 30_000 }, async () => {
    const input = inputOf(4, 250, 2);
    const expected = rowsIn(input);
    let last: MapTaskProgress | null = null;
    const status = await pool.run(spec(2), input, { onProgress: (p) => (last = p) }).status;
    expect(last).toEqual({ inputBatches: 4, inputRows: 1000, batches: 4, rows: 1000 });
    expect(status.metrics).toMatchObject({ inputBatches: 4, inputRows: 1000, rows: 1000 });
    expect(await readBack(status)).toEqual(expected);
  });

  test('reusedBuffers counts what this task got back from its thread, not what the tasks before it did: a task that writes nothing reuses fewer than one that writes 49,152 rows', { timeout: 30_000 }, async () => {
    const big = await pool.run(spec(3, { numPartitions: 2 }), inputOf(6, 8192, 3)).status;
    const again = await pool.run(spec(4, { numPartitions: 2 }), inputOf(6, 8192, 3)).status;
    expect(again.metrics.reusedBuffers, `the second of two like tasks reuses (${big.metrics.reusedBuffers}, ${again.metrics.reusedBuffers})`).toBeGreaterThan(0);
    const none = await pool.run(spec(5, { transform: { module: TRANSFORMS, export: 'dropAll' } }), inputOf(2, 100, 5)).status;
    expect(none.metrics.rows).toBe(0);
    expect(none.metrics.reusedBuffers, `${big.metrics.reusedBuffers}, ${again.metrics.reusedBuffers}, ${none.metrics.reusedBuffers}`).toBeLessThan(again.metrics.reusedBuffers!);
  });
});

describe('the input, around the end of its task', () => {
  test('a dictionary that the batch before did not carry is sent again: batches of dictionaries X, Y, X are all written', { timeout: 30_000 }, async () => {
    const type = new Dictionary(new Utf8(), new Int32(), 5);
    const schema = new Schema([new Field('key', new Int64(), false), new Field('d', type, false)]);
    const x = new Vector([vectorFromArray(['red', 'green'], new Utf8()).data[0]!]);
    const y = new Vector([vectorFromArray(['blue', 'grey'], new Utf8()).data[0]!]);
    const input = [x, y, x].map((dictionary, b) => {
      const n = 200;
      const key = makeData({ type: new Int64(), length: n, nullCount: 0, data: BigInt64Array.from({ length: n }, (_, i) => BigInt(b * n + i)) });
      const d = makeData({ type, length: n, nullCount: 0, data: Int32Array.from({ length: n }, (_, i) => (i + b) % 2), dictionary });
      return batchOf(schema, [key, d], n);
    });
    const expected = rowsIn(input);
    const status = await pool.run(spec(21, { outputSchema: schema }), input).status;
    expect(await readBack(status)).toEqual(expected);
  });

  test('a batch of another schema than the first fails the task with CS_SCHEMA_MISMATCH; it is not rebuilt under the first schema', { timeout: 30_000 }, async () => {
    const renamed = new Schema(NARROW_SCHEMA.fields.map((f, i) => (i === 0 ? new Field('id', f.type, f.nullable) : f)));
    const other = new RecordBatch(renamed, narrowBatch(100, 7).data);
    const task = pool.run(spec(6, { partitioning: { kind: 'hash', keys: ['amount'] } }), [narrowBatch(100, 6), other]);
    await expect(task.status).rejects.toMatchObject({ code: 'CS_SCHEMA_MISMATCH', where: { shuffle: 0, map: 6, attempt: 0 } });
    expect(await readdir(dir)).toEqual([]);
  });

  test('the input is read two batches ahead of the worker and no further, also once its task has settled: aborted with one batch taken, three were pulled', { timeout: 30_000 }, async () => {
    let pulled = 0;
    function* input(): Generator<RecordBatch> {
      for (let i = 0; i < 20; i++) {
        pulled++;
        yield narrowBatch(100, 700 + i);
      }
    }
    const controller = new AbortController();
    const task = pool.run(spec(7, { transform: { module: TRANSFORMS, export: 'stallAfter', args: { batches: 1 } } }), input(), {
      signal: controller.signal,
      onProgress: (p) => p.batches === 1 && controller.abort(),
    });
    await expect(task.status).rejects.toMatchObject({ code: 'CS_ABORTED' });
    await sleep(50);
    // README: "The input is read at most two batches ahead of the worker"; MapTaskPoolOptions: "at most 2 per task" in flight
    expect(pulled, 'one taken plus a window of two, and nothing after the task settled').toBe(3);
  });

  test("a failed task's input waiting for the window is closed: its generator's finally runs", { timeout: 30_000 }, async () => {
    let closed = false;
    function* input(): Generator<RecordBatch> {
      try {
        for (let i = 0; i < 20; i++) yield narrowBatch(200, 800 + i);
      } finally {
        closed = true;
      }
    }
    const task = pool.run(spec(8, { transform: { module: TRANSFORMS, export: 'throwAfter', args: { batches: 1 } } }), input());
    await expect(task.status).rejects.toMatchObject({ code: 'CS_MAP_TASK_FAILED' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(true);
  });

  test('an input that fails after its task failed does not touch the next task on the thread', { timeout: 30_000 }, async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    async function* inputA(): AsyncGenerator<RecordBatch> {
      yield narrowBatch(100, 901);
      await gate;
      throw new Error('the scan failed late');
    }
    const inputB = inputOf(6, 200, 9);
    const expected = rowsIn(inputB);
    async function* slowB(): AsyncGenerator<RecordBatch> {
      for (const [i, batch] of inputB.entries()) {
        yield batch;
        if (i === 0) release(); // A's input fails now, while B runs on the thread A had
        await sleep(20);
      }
    }
    const a = pool.run(spec(9, { transform: { module: TRANSFORMS, export: 'throwAfter', args: { batches: 0 } } }), inputA());
    const b = pool.run(spec(10), slowB());
    await expect(a.status).rejects.toMatchObject({ code: 'CS_MAP_TASK_FAILED' });
    const status = await b.status;
    expect(await readBack(status)).toEqual(expected);
  });

  test("a signal shared by many tasks keeps no listener of a task once it settled", { timeout: 30_000 }, async () => {
    const controller = new AbortController();
    for (let m = 11; m < 14; m++) await pool.run(spec(m), inputOf(1, 10, m), { signal: controller.signal }).status;
    await new Promise((resolve) => setImmediate(resolve));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  test("a failed task stops its transform's reads of the input: a read still waiting ends with the error", { timeout: 30_000 }, async () => {
    const marker = join(dir, 'stopped');
    // reads the input in a loop of its own, and hands the writer something that is not a batch
    const PREFETCH = moduleOf(`import { writeFileSync } from 'node:fs';
      export async function* prefetch(input, args) {
        let got = 0;
        void (async () => { try { for await (const b of input) got += b.numRows; } catch { /* the task failed */ } finally { writeFileSync(args.marker, 'stopped'); } })();
        while (got === 0) await new Promise((r) => setTimeout(r, 5));
        yield { notABatch: true };
      }`);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    async function* input(): AsyncGenerator<RecordBatch> {
      yield narrowBatch(50, 24);
      await gate; // no more input until the test ends: the transform's read waits
    }
    try {
      const task = pool.run(spec(24, { transform: { module: PREFETCH, export: 'prefetch', args: { marker } } }), input());
      await expect(task.status).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT' });
      for (let i = 0; i < 100 && !existsSync(marker); i++) await sleep(50);
      expect(existsSync(marker), "the transform's waiting read ended").toBe(true);
    } finally {
      release();
    }
  });
});

describe('aborts and the thread', () => {
  test('an interrupted transform is told to return: its finally runs once its pending step is over', { timeout: 30_000 }, async () => {
    const marker = join(dir, 'returned');
    // yields each batch twice, 100 ms apart, from its own hands: only return() ends it at the second yield
    const TWICE = moduleOf(`import { writeFileSync } from 'node:fs';
      export async function* twice(input, args) {
        try { for await (const b of input) { yield b; await new Promise((r) => setTimeout(r, 100)); yield b; } }
        finally { writeFileSync(args.marker, 'returned'); }
      }`);
    const controller = new AbortController();
    const task = pool.run(spec(14, { transform: { module: TWICE, export: 'twice', args: { marker } } }), inputOf(3, 50, 14), {
      signal: controller.signal,
      onProgress: (p) => p.batches === 1 && controller.abort(),
    });
    const error = (await task.status.catch((e: unknown) => e)) as Error;
    expect(error).toMatchObject({ code: 'CS_ABORTED' });
    for (let i = 0; i < 100 && !existsSync(marker); i++) await sleep(50);
    expect(existsSync(marker), "the transform's finally ran").toBe(true);
  });

  test('a task waiting behind one whose thread is ended after the abort grace period runs on the new thread', { timeout: 30_000 }, async () => {
    const SPIN = moduleOf('export async function* spinAfter(input) { for await (const b of input) { yield b; for (;;) {} } }');
    const controller = new AbortController();
    const spinning = pool.run(spec(15, { transform: { module: SPIN, export: 'spinAfter' } }), inputOf(2, 50, 15), {
      signal: controller.signal,
      onProgress: (p) => p.batches === 1 && controller.abort(),
    });
    const input = inputOf(2, 100, 16);
    const expected = rowsIn(input);
    const waiting = pool.run(spec(16), input); // queued before the abort: only the pool can start it
    await expect(spinning.status).rejects.toMatchObject({ code: 'CS_ABORTED' });
    expect(await readBack(await waiting.status)).toEqual(expected);
  });

  test('a task aborted and then terminated fails as terminated: CS_WORKER_EXITED (README: "the thread was terminated, e.g. task.terminate()")', { timeout: 30_000 }, async () => {
    const SPIN = moduleOf('export async function* spinAfter(input) { for await (const b of input) { yield b; for (;;) {} } }');
    const controller = new AbortController();
    let task: ReturnType<MapTaskPool['run']> | null = null;
    let terminated: Promise<void> | null = null;
    task = pool.run(spec(22, { transform: { module: SPIN, export: 'spinAfter' } }), inputOf(2, 50, 22), {
      signal: controller.signal,
      onProgress: (p) => {
        if (p.batches === 1 && terminated === null) {
          controller.abort(); // the spinning thread cannot see it...
          terminated = task!.terminate(); // ...and is terminated at once, before the grace period ends it
        }
      },
    });
    await expect(task.status).rejects.toMatchObject({ code: 'CS_WORKER_EXITED', message: expect.stringContaining('was terminated') });
    await terminated;
    expect(await readdir(dir)).toEqual([]);
  });

  test("a thread that crashes on an uncaught error: CS_WORKER_EXITED whose cause is that error", { timeout: 30_000 }, async () => {
    const CRASH = moduleOf(`export async function* crash(input) { for await (const b of input) { yield b; setTimeout(() => { throw new Error('native crash'); }); await new Promise(() => {}); } }`);
    const error = (await pool.run(spec(17, { transform: { module: CRASH, export: 'crash' } }), inputOf(2, 50, 17)).status.catch((e: unknown) => e)) as Error;
    expect(error).toMatchObject({ code: 'CS_WORKER_EXITED', message: expect.stringContaining('native crash') });
    expect(error.cause).toMatchObject({ message: 'native crash' });
    expect(await readdir(dir)).toEqual([]);
  });
});

describe('the pool', () => {
  test('an idle thread that dies is not given the next task: a new thread runs it', { timeout: 30_000 }, async () => {
    // the transform has its thread exit 200 ms after the task ends, while it is idle; the test sees the 'exit' event
    const LATE_EXIT = moduleOf('export async function* exitLater(input) { for await (const b of input) yield b; setTimeout(() => process.exit(5), 200); }');
    const emit = Worker.prototype.emit;
    let exits = 0;
    Worker.prototype.emit = function (this: Worker, event: string | symbol, ...args: unknown[]) {
      const result = emit.call(this, event, ...args);
      if (event === 'exit') exits++;
      return result;
    } as typeof emit;
    try {
      const first = await pool.run(spec(19, { transform: { module: LATE_EXIT, export: 'exitLater' } }), inputOf(1, 50, 19)).status;
      expect(first.metrics.rows).toBe(50);
      for (let i = 0; i < 200 && exits === 0; i++) await sleep(25);
      expect(exits, 'the idle thread exited').toBe(1);
    } finally {
      Worker.prototype.emit = emit;
    }
    const input = inputOf(2, 100, 20);
    const expected = rowsIn(input);
    expect(await readBack(await pool.run(spec(20), input).status)).toEqual(expected);
  });

  test('a transform given without an export name is its module\'s default export', { timeout: 30_000 }, async () => {
    const DEFAULT = moduleOf('export default async function* (input) { for await (const b of input) yield b; }\nexport async function* main() {}');
    const input = inputOf(2, 100, 18);
    const expected = rowsIn(input);
    const status = await pool.run(spec(18, { transform: { module: DEFAULT } }), input).status;
    expect(await readBack(status)).toEqual(expected);
  });

  test("a transform given as an absolute path is imported from that file, also when the path has '#' and '%' in it (a URL would cut it there)", { timeout: 30_000 }, async () => {
    const folder = join(dir, 'tasks #1 100%');
    await mkdir(folder);
    const file = join(folder, 'pass.mjs');
    await writeFile(file, 'export async function* pass(input) { for await (const b of input) yield b; }\n');
    const input = inputOf(2, 100, 23);
    const expected = rowsIn(input);
    const status = await pool.run(spec(23, { transform: { module: file, export: 'pass' } }), input).status;
    expect(await readBack(status)).toEqual(expected);
  });

  test('each task gets floor(memoryBytes / threads)', async () => {
    const odd = new MapTaskPool({ threads: 3, memoryBytes: 10 });
    expect(odd.memoryPerTask).toBe(3);
    await odd.close();
  });

  test('a thread running its second task keeps the process alive until the task is done (the pool unrefs it only while idle)', { timeout: 60_000 }, async () => {
    const poolModule = new URL('../src/shuffle/map-task-pool.ts', import.meta.url).href;
    const demo = new URL('../src/cli/demo-data.ts', import.meta.url).href;
    const out = join(dir, 'out');
    const script = [
      `import { MapTaskPool } from ${JSON.stringify(poolModule)};`,
      `import { narrowBatch, NARROW_SCHEMA } from ${JSON.stringify(demo)};`,
      `await (await import('node:fs/promises')).mkdir(${JSON.stringify(out)});`,
      'const pool = new MapTaskPool({ threads: 1 });',
      `const spec = (mapId) => ({ dir: ${JSON.stringify(out)}, id: { shuffleId: 0, mapId, attempt: 0 }, numPartitions: 2, partitioning: { kind: 'hash', keys: ['key'] }, outputSchema: NARROW_SCHEMA });`,
      'const first = await pool.run(spec(0), [narrowBatch(100, 1)]).status;',
      'const second = await pool.run(spec(1), [narrowBatch(200, 2), narrowBatch(200, 3)]).status;',
      'console.log(`rows ${first.metrics.rows} ${second.metrics.rows}`);',
    ];
    expect(await runChildModule(dir, script)).toEqual({ code: 0, signal: null, out: 'rows 100 400' });
  });
});
