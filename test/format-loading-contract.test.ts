/**
 * How record batches become IPC bodies and come back, and the reader's byte sources: the flat
 * column loader (src/format/flat-loader.ts), tableToIpcStream and its view compaction
 * (src/format/table-to-ipc.ts, src/format/binary-view.ts), the objects kept for V8's sake
 * (src/format/retained-shapes.ts, src/reader/reader-shapes.ts), the schema message cache
 * (src/format/schema-message-cache.ts), the body codecs (src/format/codec.ts) and the checked
 * byte source (src/reader/checked-source.ts, src/reader/byte-source.ts).
 *
 * Each test here fails against a mutant of those files that the other tests let through (a
 * boundary moved by one, a check, a copy or a cache update dropped, a header field read from the
 * wrong byte): see docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps".
 * Expected values come from apache-arrow's own encoder and decoder (tableToIPC, tableFromIPC),
 * lz4-napi's and zstd-napi's own compressors, hand-written byte layouts (the Arrow IPC format's
 * FieldNode and Buffer structs, RFC 8878's Zstandard frame header), docs/FORMAT.md, or rows read
 * back compared with the rows written; never from the code under test. Nothing here measures time.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  DenseUnion,
  Field,
  Float64,
  Int32,
  Int64,
  LargeList,
  List,
  Map_,
  RecordBatch,
  Schema,
  Struct,
  Table,
  Utf8View,
  Vector,
  makeData,
  tableFromIPC,
  tableToIPC,
  vectorFromArray,
  type Data,
  type DataType,
} from 'apache-arrow';
import { compressFrame } from 'lz4-napi';
import { compress as zstdCompress } from 'zstd-napi';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { codecByName } from '../src/format/codec.js';
import { retainShapes } from '../src/format/retained-shapes.js';
import { SchemaMessageCache } from '../src/format/schema-message-cache.js';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { ShuffleError } from '../src/errors.js';
import { retainReaderShapes } from '../src/reader/reader-shapes.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { outputOf } from './support/piecewise-output.js';
import { streamedZstdFrame } from './support/zstd-stream.js';
import { dataShapeOf, readBatches } from './support/ipc-batches.js';

afterEach(() => {
  vi.restoreAllMocks();
  vi.doUnmock('../src/sort-writer/row-encoder.js');
  vi.resetModules();
});

const LONG_1 = 'a value longer than twelve bytes'; // 32 bytes
const LONG_2 = 'another value over twelve bytes'; // 31 bytes

const rowsOf = (table: Table) => JSON.stringify(table.toArray().map((row) => row?.toJSON()), (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
const codeOf = (run: () => unknown) => {
  try {
    run();
    return 'done';
  } catch (error) {
    return error instanceof ShuffleError ? error.code : `untyped ${String(error)}`;
  }
};

/** `bytes` with the one occurrence of the 16 bytes `int64 LE a | int64 LE b` replaced by `a | c` (an IPC FieldNode or Buffer struct). */
function patchPair(bytes: Uint8Array, a: number, b: number, c: number): Uint8Array {
  const pattern = Buffer.alloc(16);
  pattern.writeBigInt64LE(BigInt(a), 0);
  pattern.writeBigInt64LE(BigInt(b), 8);
  const at = Buffer.from(bytes).indexOf(pattern);
  expect(at).toBeGreaterThan(0);
  expect(Buffer.from(bytes).indexOf(pattern, at + 1)).toBe(-1);
  const patched = bytes.slice();
  new DataView(patched.buffer).setBigInt64(at + 8, BigInt(c), true);
  return patched;
}

// ---------------------------------------------------------------------------------------------------------------------
// the flat loader: the Data arrow-js's own loader makes, for streams other writers may send
// ---------------------------------------------------------------------------------------------------------------------

describe('flat columns read from streams arrow-js does not write itself, as arrow-js reads them', () => {
  test('a validity buffer sent with a null count of 0 is not kept (arrow-js keeps a bitmap only when the node counts nulls)', async () => {
    const values = Array.from({ length: 37 }, (_, i) => (i % 3 === 0 ? null : i));
    const stream = tableToIPC(new Table({ k: vectorFromArray(values, new Int32()) }), 'stream');
    // the column's FieldNode {length 37, null_count 13} says 0 nulls; its 8-byte validity buffer stays
    const patched = patchPair(stream, 37, 13, 0);
    const [ours] = await readBatches(patched);
    const theirs = tableFromIPC(patched).batches[0]!;
    expect(dataShapeOf(ours!.data.children[0]!)).toEqual(dataShapeOf(theirs.data.children[0]!));
    expect((ours!.data.children[0]!.nullBitmap as Uint8Array).byteLength).toBe(0);
  });

  test('a values buffer whose length is not a whole number of values holds only its whole values (arrow-js: floor)', async () => {
    const stream = tableToIPC(new Table({ k: vectorFromArray(Array.from({ length: 37 }, (_, i) => i), new Int32()) }), 'stream');
    // arrow-js writes the values Buffer {offset 0, length 152} (37 x 4, padded to 8); made 150 bytes long, 37.5 values
    const patched = patchPair(stream, 0, 152, 150);
    const [ours] = await readBatches(patched);
    const theirs = tableFromIPC(patched).batches[0]!;
    expect(dataShapeOf(ours!.data.children[0]!)).toEqual(dataShapeOf(theirs.data.children[0]!));
    expect((ours!.data.children[0]!.values as Int32Array).length).toBe(37);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// tableToIpcStream
// ---------------------------------------------------------------------------------------------------------------------

/** A Utf8View column from hand-written views (16 bytes each: length, then the inline value or prefix, buffer index, offset). */
function viewColumn(views: { length: number; inline?: string; buffer?: number; offset?: number }[], variadic: Uint8Array[], nullBitmap?: Uint8Array): Data<Utf8View> {
  const bytes = new Uint8Array(views.length * 16);
  const at = new DataView(bytes.buffer);
  views.forEach((view, i) => {
    at.setInt32(i * 16, view.length, true);
    if (view.inline !== undefined) bytes.set(new TextEncoder().encode(view.inline), i * 16 + 4);
    if (view.buffer !== undefined) at.setInt32(i * 16 + 8, view.buffer, true);
    if (view.offset !== undefined) at.setInt32(i * 16 + 12, view.offset, true);
  });
  const nulls = nullBitmap === undefined ? 0 : views.length - [...views.keys()].filter((i) => (nullBitmap[i >> 3]! >> (i & 7)) & 1).length;
  return makeData({ type: new Utf8View(), length: views.length, nullCount: nulls, nullBitmap, views: bytes, variadicBuffers: variadic });
}

describe('tableToIpcStream writes what arrow-js reads back as the rows given', () => {
  test('a list of views sliced where its offsets do not start at 0 keeps its null rows', () => {
    const type = new List(new Field('item', new Utf8View(), true));
    const lists = vectorFromArray([[LONG_1], ['x'], null, [LONG_2, 'y'], null, ['z']], type);
    const read = tableFromIPC(tableToIpcStream(new Table({ l: lists.slice(1, 5) })));
    expect(rowsOf(read)).toBe(JSON.stringify([{ l: ['x'] }, { l: null }, { l: [LONG_2, 'y'] }, { l: null }]));
  });

  test('a struct sliced with null rows keeps them where they were when its view child is rebuilt', () => {
    const type = new Struct([new Field('s', new Utf8View(), true)]);
    const structs = vectorFromArray([{ s: LONG_1 }, null, { s: 'x' }, null, { s: LONG_2 }], type);
    const read = tableFromIPC(tableToIpcStream(new Table({ t: structs.slice(1, 4) })));
    expect(rowsOf(read)).toBe(JSON.stringify([{ t: null }, { t: { s: 'x' } }, { t: null }]));
  });

  describe('a dense union with a view child', () => {
    const type = new DenseUnion([0, 1], [new Field('a', new Int32(), true), new Field('s', new Utf8View(), true)]);
    const schema = new Schema([new Field('u', type, true)]);
    const union = () => {
      const a = makeData({ type: new Int32(), length: 1, nullCount: 0, data: Int32Array.of(7) });
      const s = vectorFromArray([LONG_1, 'x'], new Utf8View()).data[0]!;
      const column = makeData({ type, length: 3, nullCount: 0, typeIds: Int8Array.of(1, 0, 1), valueOffsets: Int32Array.of(0, 0, 1), children: [a, s] });
      return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 3, nullCount: 0, children: [column] }));
    };

    test('not sliced: written and read back', () => {
      expect([...tableFromIPC(tableToIpcStream(union())).getChild('u')!]).toEqual([LONG_1, 7, 'x']);
    });

    test('sliced: CS_UNSUPPORTED_TYPE, as documented (the IPC writer would cut its children again)', () => {
      expect(codeOf(() => tableToIpcStream(new Table([union()]).slice(1, 3)))).toBe('CS_UNSUPPORTED_TYPE');
    });
  });

  test('a column whose one variadic buffer holds bytes no view points at is rebuilt: only the long value its rows hold is written', () => {
    const long = new TextEncoder().encode(LONG_1);
    const held = new Uint8Array(1000);
    held.set(long, 100);
    const column = viewColumn([{ length: long.length, inline: LONG_1.slice(0, 4), buffer: 0, offset: 100 }, { length: 1, inline: 'x' }], [held]);
    const read = tableFromIPC(tableToIpcStream(new Table({ s: new Vector([column]) })));
    expect([...read.getChild('s')!]).toEqual([LONG_1, 'x']);
    // arrow-js reads the variadic buffer as written: the 32 bytes of the long value, not the 1000 held
    expect(read.getChild('s')!.data[0]!.variadicBuffers.map((buffer) => buffer.byteLength)).toEqual([32]);
  });

  test("a null row's view is never looked at: one pointing nowhere is written as a null row", () => {
    // row 1 is null, its view claims 40 bytes of variadic buffer 9 (there is none)
    const column = viewColumn([{ length: 1, inline: 'a' }, { length: 40, buffer: 9, offset: 5 }, { length: 1, inline: 'b' }], [], Uint8Array.of(0b101));
    const read = tableFromIPC(tableToIpcStream(new Table({ s: new Vector([column]).slice(1, 3) })));
    expect([...read.getChild('s')!]).toEqual([null, 'b']);
    // and the null row's view is zeros (docs/FORMAT.md: "a null row's view is all zeros")
    const views = read.getChild('s')!.data[0]!.values as Uint8Array;
    expect([...views.subarray(0, 16)]).toEqual(new Array(16).fill(0));
  });

  test.each([
    ['a negative length', { length: -1, buffer: 0, offset: 0 }],
    ['a negative offset', { length: 20, buffer: 0, offset: -4 }],
    ['a buffer index past its buffers', { length: 20, buffer: 1, offset: 0 }],
  ])('a valid row whose view has %s is CS_INVALID_ARGUMENT naming the row', (_, view) => {
    const column = viewColumn([{ length: 1, inline: 'a' }, view], [new Uint8Array(30)]);
    let error: unknown = null;
    try {
      tableToIpcStream(new Table({ s: new Vector([column]).slice(1, 2) }));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error).toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('the view of row 0 of a Utf8View column points outside its 1 variadic buffers') });
  });

  test('a sliced list without views is written exactly as arrow-js writes it ("everything else goes as it is")', () => {
    const table = new Table({ l: vectorFromArray([[1, 2], [3], [4, 5, 6]], new List(new Field('item', new Int32(), true))).slice(1, 3) });
    expect(Buffer.from(tableToIpcStream(table)).equals(Buffer.from(tableToIPC(table, 'stream')))).toBe(true);
  });

  test.each<[string, () => Vector, string]>([
    ['a map with view keys', () => vectorFromArray([new Map([[LONG_1, 1]]), new Map([['k', 2], [LONG_2, 3]]), new Map([['z', 4]])], new Map_(new Field('entries', new Struct([new Field('key', new Utf8View(), false), new Field('value', new Int32(), true)]), false) as never)), JSON.stringify([{ c: { k: 2, [LONG_2]: 3 } }, { c: { z: 4 } }])],
    ['a large list of views', () => vectorFromArray([[LONG_1], [LONG_2, 'y'], ['z']], new LargeList(new Field('item', new Utf8View(), true)) as unknown as DataType), JSON.stringify([{ c: [LONG_2, 'y'] }, { c: ['z'] }])],
    ['a list of structs of views', () => vectorFromArray([[{ s: LONG_1 }], [{ s: LONG_2 }, { s: 'y' }], [{ s: 'z' }]], new List(new Field('item', new Struct([new Field('s', new Utf8View(), true)]), true))), JSON.stringify([{ c: [{ s: LONG_2 }, { s: 'y' }] }, { c: [{ s: 'z' }] }])],
  ])('%s, sliced where its offsets do not start at 0, reads back as the rows of the slice', (_, make, expected) => {
    expect(rowsOf(tableFromIPC(tableToIpcStream(new Table({ c: make().slice(1, 3) }))))).toBe(expected);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// objects kept alive for V8's sake, and the sample read that makes them
// ---------------------------------------------------------------------------------------------------------------------

describe('retained shapes (retained-shapes.ts, reader-shapes.ts)', () => {
  test('an object handed to retainShapes outlives a full garbage collection (keeping it alive is the point)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const kept = (() => {
      const object = { a: 1 };
      retainShapes(object);
      return new WeakRef(object);
    })();
    const dropped = (() => new WeakRef({ b: 2 }))();
    await new Promise((resolve) => setImmediate(resolve)); // a WeakRef holds its target until the job that made it ends
    gc();
    expect(dropped.deref()).toBeUndefined(); // the collection did run
    expect(kept.deref()).toEqual({ a: 1 });
  });

  test('the sample read happens once per thread: every call gives the same promise', () => {
    expect(retainReaderShapes()).toBe(retainReaderShapes());
  });

  test('a sample read that fails costs speed only: retainReaderShapes resolves, and the error is dropped', async () => {
    vi.resetModules();
    vi.doMock('../src/sort-writer/row-encoder.js', () => ({
      RowEncoder: class {
        constructor() {
          throw new Error('no row encoder in this test');
        }
      },
    }));
    const { retainReaderShapes: fresh } = await import('../src/reader/reader-shapes.js');
    await expect(fresh()).resolves.toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// the schema message cache
// ---------------------------------------------------------------------------------------------------------------------

test('the schema cache hands out the schema of the bytes it was last given: streams v, w, then w again read as v, w, w', async () => {
  const cache = new SchemaMessageCache();
  const stream = (name: string) => tableToIPC(new Table({ [name]: vectorFromArray([1], new Int32()) }), 'stream');
  const names: string[] = [];
  for (const name of ['v', 'w', 'w']) {
    const [batch] = await readBatches(stream(name), cache);
    names.push(batch!.schema.fields[0]!.name);
  }
  expect(names).toEqual(['v', 'w', 'w']);
});

// ---------------------------------------------------------------------------------------------------------------------
// the body codecs
// ---------------------------------------------------------------------------------------------------------------------

describe('lz4: what a real frame holds is never refused as impossible', () => {
  test('4 MiB of zeros, compressed by lz4-napi to about 1/254.6 of its size, passes the size check and decodes', async () => {
    const zeros = Buffer.alloc(4 * 1024 * 1024);
    const frame = await compressFrame(zeros);
    expect(zeros.length / frame.length).toBeGreaterThan(254); // LZ4 sequences expand at most 255:1
    const lz4 = codecByName('lz4')!;
    expect(lz4.sizeMismatch(frame, zeros.length)).toBeNull();
    expect(Buffer.from(await lz4.decompress(frame, zeros.length)).equals(zeros)).toBe(true);
  });
});

/** A Zstandard frame header (RFC 8878, 3.1.1.1): magic, Frame_Header_Descriptor, then the optional fields, then a few body bytes. */
function zstdHeader(descriptor: number, fields: number[]): Uint8Array {
  return Uint8Array.of(0x28, 0xb5, 0x2f, 0xfd, descriptor, ...fields, 0, 0, 0, 0);
}

describe('zstd: the content size a frame header declares (RFC 8878), checked against the length prefix', () => {
  const zstd = codecByName('zstd')!;

  test.each<[string, Uint8Array, number]>([
    // descriptor bits 7-6 FCS flag, 5 single segment, 1-0 dictionary id flag
    ['single segment, a 4-byte dictionary id, a 4-byte size', zstdHeader((2 << 6) | (1 << 5) | 3, [0xaa, 0xbb, 0xcc, 0xdd, 0x40, 0xe2, 0x01, 0x00]), 123_456],
    ['single segment, an 8-byte size past 2^32', zstdHeader((3 << 6) | (1 << 5), [0x05, 0, 0, 0, 0x01, 0, 0, 0]), 2 ** 32 + 5],
    ['a window descriptor, then a 2-byte size (plus 256)', zstdHeader(1 << 6, [0x58, 0x10, 0x00]), 16 + 256],
  ])('%s: that size passes, one more is refused naming it', (_, frame, size) => {
    expect(zstd.sizeMismatch(frame, size)).toBeNull();
    expect(zstd.sizeMismatch(frame, size + 1)).toBe(`the Zstandard frame declares ${size} bytes`);
  });

  test('a frame that declares no content size (a streaming compressor\'s) passes the check and decodes to the size given', async () => {
    const input = Buffer.from(Uint8Array.from({ length: 50_000 }, (_, i) => (i * 7) % 251));
    const frame = await streamedZstdFrame(input);
    expect(zstd.sizeMismatch(frame, input.length)).toBeNull();
    expect(Buffer.from(zstd.decompressSync(frame, input.length)!).equals(input)).toBe(true);
  });

  test('compresses at level 1 (docs/FORMAT.md: "Zstandard (level 1)"): the bytes zstd-napi writes at level 1', async () => {
    const input = Buffer.from(Array.from({ length: 4000 }, (_, i) => `row ${i % 97} ${(i * 31) % 1000}`).join('\n'));
    const ours = Buffer.concat(await zstd.compress(input));
    expect(ours.equals(zstdCompress(input, { compressionLevel: 1 }))).toBe(true);
    expect(ours.equals(zstdCompress(input, { compressionLevel: 3 }))).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// the reader's byte sources
// ---------------------------------------------------------------------------------------------------------------------

/** Three partitions of arrow-js streams (int64 and float64 columns: arrow-js views them in place, 8-aligned), and their rows. */
function threePartitions() {
  const table = (start: number) => new Table({ k: vectorFromArray([BigInt(start), BigInt(start + 1), null], new Int64()), x: vectorFromArray([start + 0.5, null, start + 2.5], new Float64()) });
  const tables = [table(0), table(10), table(20)];
  return { partitions: tables.map((t) => [tableToIPC(t, 'stream')]), rows: tables.map(rowsOf) };
}

async function readAll(reader: ShuffleReader): Promise<string[]> {
  const rows: string[] = [];
  for (let p = 0; p < reader.numPartitions; p++) {
    const batches: RecordBatch[] = [];
    for await (const batch of reader.readPartition(p)) batches.push(batch);
    rows.push(rowsOf(new Table(batches)));
  }
  return rows;
}

const errorOf = (call: Promise<unknown>) => call.then(() => null, (error: unknown) => error);

describe('a source as the reader checks it (CheckedSource)', () => {
  test('a source with readInto is read through it, into the reader\'s buffers', async () => {
    const { partitions, rows } = threePartitions();
    const output = outputOf(partitions);
    const reader = await ShuffleReader.fromSources(output);
    expect(await readAll(reader)).toEqual(rows);
    await reader.close();
    expect(output.data.readsInto.length).toBeGreaterThan(0);
  });

  test.each([
    ['a plain Error', () => new Error('connection reset'), /cannot read \d+ bytes at \d+: connection reset/],
    ['a string', () => 'gone', /cannot read \d+ bytes at \d+: gone/],
  ])('readInto throwing %s: CS_IO naming the source and the offset asked for', async (_, thrown, message) => {
    const { partitions } = threePartitions();
    const output = outputOf(partitions);
    const asked: number[] = [];
    output.data.readInto = async (offset) => {
      asked.push(offset);
      throw thrown();
    };
    const reader = await ShuffleReader.fromSources(output);
    const error = await errorOf(readAll(reader));
    await reader.close();
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error).toMatchObject({ code: 'CS_IO', message: expect.stringMatching(message), where: { file: 'mem.data', offset: asked[0] } });
  });

  test("a source's own ShuffleError comes out as it is, not wrapped as CS_IO", async () => {
    const { partitions } = threePartitions();
    const output = outputOf(partitions, false);
    const own = new ShuffleError('CS_CORRUPT_DATA', 'the object store says the object is damaged', { file: 'mem.data', offset: 0 });
    output.data.read = async () => Promise.reject(own);
    const reader = await ShuffleReader.fromSources(output);
    const error = await errorOf(readAll(reader));
    await reader.close();
    expect(error).toBe(own);
  });

  test('an output of empty partitions only: a data source of size 0 reads as no rows', async () => {
    const output = outputOf([[], [], []]);
    expect(await output.data.size()).toBe(0);
    const reader = await ShuffleReader.fromSources(output);
    expect(await readAll(reader)).toEqual(['[]', '[]', '[]']);
    await reader.close();
  });

  test.each([
    ['a fraction', 32.5, '32.5'],
    ['past 2^53', 2 ** 53 + 2, String(2 ** 53 + 2)],
  ])('an index size that is %s is CS_IO naming the source, on opening', async (_, size, shown) => {
    const output = outputOf(threePartitions().partitions);
    output.index.size = async () => size;
    await expect(ShuffleReader.fromSources(output)).rejects.toMatchObject({ code: 'CS_IO', message: expect.stringContaining(`reported a size of ${shown}, not a byte count`), where: { file: 'mem.index' } });
  });

  test('a read returning more bytes than asked is CS_IO at that offset (the reader would take bytes past the range for its own)', async () => {
    const { partitions } = threePartitions();
    const output = outputOf(partitions, false);
    const read = output.data.read.bind(output.data);
    output.data.read = async (offset, length) => {
      const bytes = await read(offset, length + 1);
      return bytes;
    };
    const reader = await ShuffleReader.fromSources(output);
    const error = await errorOf(readAll(reader));
    await reader.close();
    expect(error).toMatchObject({ code: 'CS_IO', message: expect.stringMatching(/the source returned (\d+) bytes for a read of \d+ bytes/), where: { file: 'mem.data', offset: expect.any(Number) } });
  });

  test('a read returning an ArrayBuffer of the right length is CS_IO, not a TypeError later', async () => {
    const { partitions } = threePartitions();
    const output = outputOf(partitions, false);
    const read = output.data.read.bind(output.data);
    output.data.read = async (offset, length) => (await read(offset, length)).buffer as unknown as Uint8Array;
    const reader = await ShuffleReader.fromSources(output);
    const error = await errorOf(readAll(reader));
    await reader.close();
    expect(error).toMatchObject({ code: 'CS_IO', message: expect.stringContaining('the source returned object for a read of') });
  });

  test.each([4, 1])('partitionBytes over a source returning its bytes at byteOffset %d (mod 8): 8-aligned, so arrow-js views their 64-bit values in place', async (shift) => {
    const { partitions, rows } = threePartitions();
    const output = outputOf(partitions, false);
    const read = output.data.read.bind(output.data);
    output.data.read = async (offset, length) => {
      const bytes = await read(offset, length);
      const moved = new Uint8Array(length + 8);
      moved.set(bytes, shift);
      return moved.subarray(shift, shift + length);
    };
    const reader = await ShuffleReader.fromSources(output);
    expect(await readAll(reader)).toEqual(rows);
    const bytes = await reader.partitionBytes(1);
    await reader.close();
    expect(bytes.byteOffset % 8).toBe(0);
    const table = tableFromIPC(bytes);
    expect(rowsOf(table)).toBe(rows[1]);
    // arrow-js copies a misaligned buffer; an aligned one it views where it lies
    expect(table.getChild('k')!.data[0]!.values.buffer).toBe(bytes.buffer);
  });
});
