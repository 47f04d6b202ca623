/**
 * Utf8View and BinaryView through the columnar writer, its files and its
 * reader: what the type round trips (test/roundtrip-types.test.ts and the
 * property suites, which hold both types) do not show on their own. The sort
 * writer's row format is covered in test/sort-writer-views.test.ts.
 */
import { join } from 'node:path';
import { BinaryView, Field, Int32, List, Table, tableFromIPC, tableToIPC, Utf8View, type RecordBatch } from 'apache-arrow';
import { MessageHeader } from 'apache-arrow/enum';
import { Message, type RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createShuffleWriter, MemoryPool, readIpcStream, ShuffleError, ShuffleReader, type CodecName } from '../src/index.js';
import { batchOf, buildColumn, schemaOf, sequenceColumn } from './support/columns.js';
import { buildAny } from './support/nested.js';
import { asBuffer, loadPolars, streamMessages } from './support/polars.js';
import { Rng } from './support/random.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeAll(async () => (dir = await makeTempDir('cs-views-')));
afterAll(async () => removeDir(dir));

const TAGS = new List(new Field('item', new Utf8View(), true));
const SCHEMA = schemaOf([
  { name: 'id', type: new Int32(), nullable: false },
  { name: 's', type: new Utf8View() },
  { name: 'tags', type: TAGS },
  { name: 'b', type: new BinaryView() },
]);

function viewBatch(rng: Rng, rows: number, first: number): RecordBatch {
  return batchOf(
    SCHEMA,
    [
      sequenceColumn(first, rows),
      buildColumn(new Utf8View(), rows, { bitmap: true, nullRate: 0.2 }, rng),
      buildAny(TAGS, rows, rng, { nullRate: 0.2 }),
      buildColumn(new BinaryView(), rows, { bitmap: true, nullRate: 0.1 }, rng),
    ],
    rows,
  );
}

async function writeViews(name: string, codec: CodecName, memoryLimit?: number): Promise<{ prefix: string; input: RecordBatch[]; spills: number }> {
  const rng = new Rng(4242);
  const input = [viewBatch(rng, 700, 0), viewBatch(rng, 900, 700).slice(50, 800)];
  const prefix = join(dir, name);
  const writer = await createShuffleWriter('hash', {
    numPartitions: 5,
    partitioning: { kind: 'hash', keys: ['s'] },
    outputPrefix: prefix,
    codec,
    spillDir: dir,
    ...(memoryLimit === undefined ? {} : { memoryPool: new MemoryPool(memoryLimit), maxBatchRows: 64 }),
  });
  for (const batch of input) await writer.write(batch);
  const result = await writer.finish();
  return { prefix, input, spills: result.spills };
}

/** Every row as a string of its JS values (views read the arrow-js way), by id. */
function rowsById(batches: Iterable<RecordBatch>): Map<number, string> {
  const rows = new Map<number, string>();
  for (const batch of batches) {
    for (let i = 0; i < batch.numRows; i++) {
      const row = batch.get(i)!.toJSON() as Record<string, unknown>;
      rows.set(row.id as number, JSON.stringify(row, (_, v) => (v instanceof Uint8Array ? [...v] : v && typeof v === 'object' && 'toArray' in v ? [...(v as { toArray(): unknown[] }).toArray()] : v)));
    }
  }
  return rows;
}

async function readAll(prefix: string): Promise<RecordBatch[]> {
  const reader = await ShuffleReader.open(prefix);
  const out: RecordBatch[] = [];
  for await (const batch of reader.readPartitions(0, reader.numPartitions)) out.push(batch);
  await reader.close();
  return out;
}

describe.each(['lz4', 'zstd', 'none'] as const)('codec %s', (codec) => {
  test('the output keeps the view types and every value, keyed on a view column', async () => {
    const { prefix, input } = await writeViews(`out-${codec}`, codec);
    const output = await readAll(prefix);
    expect(output[0]!.schema.fields.map((f) => String(f.type))).toEqual(SCHEMA.fields.map((f) => String(f.type)));
    expect(rowsById(output)).toEqual(rowsById(input));
  });

  test('each record batch lists one variadic buffer per view node, depth first, and the long values of a view sit in it back to back', async () => {
    const reader = await ShuffleReader.open(join(dir, `out-${codec}`));
    let batches = 0;
    for (let p = 0; p < reader.numPartitions; p++) {
      const messages = streamMessages(await reader.partitionBytes(p)).filter((m) => m.headerType === MessageHeader.RecordBatch);
      for (const m of messages) {
        const size = new DataView(m.bytes.buffer, m.bytes.byteOffset).getInt32(4, true);
        const header = Message.decode(m.bytes.subarray(8, 8 + size)).header() as RecordBatchHeader;
        // s, tags.item, b: three view nodes; 4 columns + 1 child = 5 field nodes; buffers 2 + 3 (s) + 2 + 3 (tags.item) + 3 (b)
        expect(header.variadicBufferCounts).toEqual([1, 1, 1]);
        expect(header.nodes).toHaveLength(5);
        expect(header.buffers).toHaveLength(13);
        batches++;
      }
    }
    await reader.close();
    expect(batches).toBeGreaterThan(0);
    for await (const batch of readIpcStream(await partitionOf(join(dir, `out-${codec}`), 0))) {
      const data = batch.getChild('s')!.data[0]!;
      expect(data.variadicBuffers).toHaveLength(1);
      const views = new DataView(data.values.buffer, data.values.byteOffset, data.values.byteLength);
      let next = 0;
      for (let i = 0; i < batch.numRows; i++) {
        if (!data.getValid(i) || views.getInt32(i * 16, true) <= 12) continue;
        expect([views.getInt32(i * 16 + 8, true), views.getInt32(i * 16 + 12, true)]).toEqual([0, next]);
        next += views.getInt32(i * 16, true);
      }
      expect(next).toBe(data.variadicBuffers[0]!.byteLength);
    }
  });

  test('polars reads every partition to the values our reader returns', async () => {
    const pl = loadPolars();
    const prefix = join(dir, `out-${codec}`);
    const reader = await ShuffleReader.open(prefix);
    for (let p = 0; p < reader.numPartitions; p++) {
      const bytes = await reader.partitionBytes(p);
      if (bytes.byteLength === 0) continue;
      const ours: (string | null)[] = [];
      for await (const batch of reader.readPartition(p)) for (let i = 0; i < batch.numRows; i++) ours.push(batch.getChild('s')!.get(i));
      const df = pl.readIPCStream(asBuffer(bytes));
      expect(String(df.getColumn('s').dtype)).toContain('String');
      expect(df.getColumn('s').toArray()).toEqual(ours);
    }
    await reader.close();
  });
});

test('under a tight memory limit the view columns spill and come back exactly, leaving no spill file', async () => {
  const { prefix, input, spills } = await writeViews('tight', 'lz4', 96 * 1024);
  expect(spills).toBeGreaterThan(0);
  expect(rowsById(await readAll(prefix))).toEqual(rowsById(input));
  expect((await listFiles(dir)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
});

test('the reader refuses a view pointing past its variadic buffer: CS_CORRUPT_DATA, no batch', async () => {
  const bytes = (await partitionOf(join(dir, 'out-none'), 1)).slice();
  const messages = streamMessages(bytes);
  const batch = messages.find((m) => m.headerType === MessageHeader.RecordBatch)!;
  const size = new DataView(batch.bytes.buffer, batch.bytes.byteOffset).getInt32(4, true);
  const header = Message.decode(batch.bytes.subarray(8, 8 + size)).header() as RecordBatchHeader;
  // column s: buffers 2 (validity), 3 (views), 4 (its variadic buffer); make its first long value point at buffer 7
  const body = batch.bytes.byteOffset - bytes.byteOffset + 8 + size;
  const views = new DataView(bytes.buffer, bytes.byteOffset + body + header.buffers[3]!.offset, header.buffers[3]!.length);
  let row = 0;
  while (views.getInt32(row * 16, true) <= 12) row++;
  views.setInt32(row * 16 + 8, 7, true);
  const read = async () => {
    for await (const _ of readIpcStream(bytes, { file: 'out-none.data', partition: 1 })) void _;
  };
  const error = await read().then(() => null, (e: unknown) => e);
  expect(error).toBeInstanceOf(ShuffleError);
  expect((error as ShuffleError).code).toBe('CS_CORRUPT_DATA');
  expect((error as ShuffleError).message).toMatch(new RegExp(`row ${row}'s view points outside`));
  expect((error as ShuffleError).where.partition).toBe(1);
});

/**
 * Pins a bug of arrow-js 21.2 (its VectorAssembler cuts a sliced view
 * column's views a second time): its IPC writer writes no views for a view
 * column with an offset, so the test suites never pass sliced view batches,
 * or view columns under lists, through it (support/columns.ts containsView).
 * When this fails, arrow-js has fixed it and those detours can go.
 */
test('arrow-js 21.2 IPC writer: a sliced view column comes back without its views (why the suites avoid it)', () => {
  const rng = new Rng(5);
  const schema = schemaOf([{ name: 's', type: new Utf8View() }]);
  const sliced = batchOf(schema, [buildColumn(new Utf8View(), 40, { bitmap: false, nullRate: 0 }, rng)], 40).slice(10, 20);
  const back = tableFromIPC(tableToIPC(new Table([sliced]))).batches[0]!;
  expect(back.getChild('s')!.data[0]!.values.byteLength).toBe(0);
});

async function partitionOf(prefix: string, p: number): Promise<Uint8Array> {
  const reader = await ShuffleReader.open(prefix);
  const bytes = await reader.partitionBytes(p);
  await reader.close();
  return bytes;
}
