/**
 * How the reader loads a batch's columns, second pass: the flat column loader
 * (src/format/flat-loader.ts), the empty field names arrow-js loses
 * (src/format/empty-field-names.ts), the objects kept for V8's sake
 * (src/format/retained-shapes.ts, src/reader/reader-shapes.ts), the schema
 * message cache (src/format/schema-message-cache.ts) and the body codecs
 * (src/format/codec.ts).
 *
 * Each test here fails against a mutant of those files that the other tests let
 * through (sweep 43; see docs/RELIABILITY.md, "The tests notice a broken line:
 * mutation sweeps"). Expected values come from apache-arrow's own encoder and
 * loader (tableToIPC, tableFromIPC, VectorLoader), zstd-napi's and lz4-napi's
 * compressors, hand-written Zstandard frame headers (RFC 8878) or the rows
 * written; never from the code under test. Nothing here measures time.
 */
import {
  Dictionary,
  Field,
  Int16,
  Int32,
  Int8,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  tableFromIPC,
  tableToIPC,
  Uint16,
  Utf8,
  vectorFromArray,
  type DataType,
} from 'apache-arrow';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { BufferRegion, FieldNode } from 'apache-arrow/ipc/metadata/message';
import { VectorLoader } from 'apache-arrow/visitor/vectorloader';
import { compressFrame } from 'lz4-napi';
import { compress as zstdCompress } from 'zstd-napi';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { codecByArrowType, codecByName, knownCodecByArrowType } from '../src/format/codec.js';
import { ShuffleError } from '../src/errors.js';
import { flatKindsOf, loadFlatColumns } from '../src/format/flat-loader.js';
import { SchemaMessageCache, type DecodedSchemaMessage } from '../src/format/schema-message-cache.js';
import { dataShapeOf, readBatches } from './support/ipc-batches.js';

afterEach(() => {
  vi.restoreAllMocks();
  vi.doUnmock('../src/format/retained-shapes.js');
  vi.doUnmock('apache-arrow/fb/Message_generated');
  vi.doUnmock('apache-arrow/fb/Schema_generated');
  vi.doUnmock('flatbuffers');
  vi.doUnmock('lz4-napi');
  vi.resetModules();
});

/** `bytes` as a Node Buffer over the same memory (as files are read): 8-aligned, so the reader views it in place. */
const asBuffer = (bytes: Uint8Array): Buffer => {
  const own = bytes.slice();
  return Buffer.from(own.buffer, own.byteOffset, own.byteLength);
};

// ---------------------------------------------------------------------------------------------------------------------
// the flat loader
// ---------------------------------------------------------------------------------------------------------------------

describe('flat columns, as arrow-js loads them', () => {
  test('each column takes its own field node: a column with nulls after one without keeps its nulls', async () => {
    const table = new Table({
      a: vectorFromArray([1, 2, 3, 4], new Int32()),
      b: vectorFromArray([null, 6, null, 8], new Int32()),
      c: vectorFromArray(['x', null, 'z', null], new Utf8()),
    });
    const [batch] = await readBatches(tableToIPC(table, 'stream'));
    expect(batch!.toArray().map((row) => row.toJSON())).toEqual(table.toArray().map((row) => row.toJSON()));
    expect(batch!.data.children.map((child) => child.nullCount)).toEqual([0, 2, 2]);
  });

  test('two dictionary columns each get their own dictionary (looked up by the column\'s dictionary id)', async () => {
    const table = new Table({
      colour: vectorFromArray(['red', 'blue', 'red'], new Dictionary(new Utf8(), new Int32())),
      shape: vectorFromArray(['square', 'circle', 'circle'], new Dictionary(new Utf8(), new Int32())),
    });
    const ids = table.schema.fields.map((field) => (field.type as Dictionary).id);
    expect(new Set(ids).size).toBe(2);
    const [batch] = await readBatches(tableToIPC(table, 'stream'));
    expect(batch!.getChild('colour')!.toArray()).toEqual(['red', 'blue', 'red']);
    expect(batch!.getChild('shape')!.toArray()).toEqual(['square', 'circle', 'circle']);
  });

  test.each<[string, () => DataType]>([
    ['int8', () => new Int8()],
    ['int16', () => new Int16()],
    ['uint16', () => new Uint16()],
  ])('dictionary indices of type %s are read as that type\'s array, as arrow-js reads them', async (_, indexType) => {
    const values = ['a', 'b', null, 'c', 'a', 'b', 'c', 'a', null];
    const table = new Table({ d: vectorFromArray(values, new Dictionary(new Utf8(), indexType() as Int8)) });
    const stream = tableToIPC(table, 'stream');
    const [ours] = await readBatches(stream);
    const theirs = tableFromIPC(stream).batches[0]!;
    expect(dataShapeOf(ours!.data.children[0]!)).toEqual(dataShapeOf(theirs.data.children[0]!));
    expect(ours!.getChild('d')!.toArray()).toEqual(values);
  });

  test('field nodes beyond the columns are left alone, as arrow-js\'s VectorLoader leaves them', () => {
    const type = new Int32();
    const values = new Uint8Array(Int32Array.of(7, 8).buffer);
    const [ours, ...rest] = loadFlatColumns([type], flatKindsOf([type])!, [{ length: 2, nullCount: 0 }, { length: 5, nullCount: 1 }], [new Uint8Array(0), values], new Map());
    const theirs = new VectorLoader(values, [new FieldNode(2, 0), new FieldNode(5, 1)], [new BufferRegion(0, 0), new BufferRegion(0, 8)], new Map()).visit(type);
    expect(rest).toEqual([]);
    expect(dataShapeOf(ours!)).toEqual(dataShapeOf(theirs));
  });

  test('a stream read from a Node Buffer gives columns of plain typed arrays, as arrow-js gives them (not Buffer views)', async () => {
    const table = new Table({
      n: vectorFromArray([1, null, 3, null, 5], new Int32()),
      s: vectorFromArray(['one', null, 'three', 'four', null], new Utf8()),
    });
    const bytes = asBuffer(tableToIPC(table, 'stream'));
    const [ours] = await readBatches(bytes);
    const theirs = tableFromIPC(bytes).batches[0]!;
    ours!.data.children.forEach((child, c) => expect(dataShapeOf(child)).toEqual(dataShapeOf(theirs.data.children[c]!)));
    for (const child of ours!.data.children) {
      for (const array of [child.values, child.valueOffsets, child.nullBitmap]) {
        if (array !== undefined) expect(Buffer.isBuffer(array)).toBe(false);
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// fields named ""
// ---------------------------------------------------------------------------------------------------------------------

/** Every field name of a schema, depth first. */
function namesOf(fields: readonly Field[]): unknown[] {
  return fields.flatMap((field) => [field.name, ...namesOf(field.type.children ?? [])]);
}

test('fields named "" keep their names at any depth and in any position: a struct in a struct, a second child', async () => {
  const int32 = (values: number[]) => makeData({ type: new Int32(), length: values.length, data: Int32Array.from(values) });
  const inner = new Struct([new Field('x', new Int32(), true), new Field('', new Int32(), true)]);
  const outer = new Struct([new Field('', inner, true)]);
  const innerData = makeData({ type: inner, length: 2, children: [int32([1, 2]), int32([3, 4])] });
  const fields = [new Field('o', outer, true), new Field('', new Int32(), true)];
  const children = [makeData({ type: outer, length: 2, children: [innerData] }), int32([5, 6])];
  const batch = new RecordBatch(new Schema(fields), makeData({ type: new Struct(fields), length: 2, children }));
  expect(namesOf(batch.schema.fields)).toEqual(['o', '', 'x', '', '']);

  const [read] = await readBatches(tableToIPC(new Table([batch]), 'stream'));
  expect(namesOf(read!.schema.fields)).toEqual(['o', '', 'x', '', '']);
});

// ---------------------------------------------------------------------------------------------------------------------
// the reader's sample read (reader-shapes.ts)
// ---------------------------------------------------------------------------------------------------------------------

test('retained-shapes.ts makes one empty object of every flatbuffers class of the Message and Schema modules, and a ByteBuffer, and keeps them alive', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  vi.resetModules();
  const made: { from: string; ref: WeakRef<object> }[] = [];
  // a flatbuffers table class as the generated modules export them: a constructor with an __init method
  const probe = (from: string) =>
    class Probe {
      constructor() {
        made.push({ from, ref: new WeakRef(this) });
      }
      __init(): this {
        return this;
      }
    };
  vi.doMock('apache-arrow/fb/Message_generated', async (importOriginal) => ({ ...(await importOriginal<object>()), ProbeInMessage: probe('Message') }));
  vi.doMock('apache-arrow/fb/Schema_generated', async (importOriginal) => ({ ...(await importOriginal<object>()), ProbeInSchema: probe('Schema') }));
  vi.doMock('flatbuffers', async (importOriginal) => {
    const real = await importOriginal<typeof import('flatbuffers')>();
    class RecordedByteBuffer extends real.ByteBuffer {
      constructor(bytes: Uint8Array) {
        super(bytes);
        made.push({ from: 'ByteBuffer', ref: new WeakRef(this) });
      }
    }
    return { ...real, ByteBuffer: RecordedByteBuffer };
  });
  await import('../src/format/retained-shapes.js');
  expect(new Set(made.map((m) => m.from))).toEqual(new Set(['Message', 'Schema', 'ByteBuffer']));
  await new Promise((resolve) => setImmediate(resolve)); // a WeakRef holds its target until the job that made it ends
  gc();
  expect(made.filter((m) => m.ref.deref() === undefined).map((m) => m.from)).toEqual([]);
});

describe('the sample read keeps what it made (reader-shapes.ts)', () => {
  test('retainReaderShapes hands the sample read\'s objects to retainShapes: its batches among them', async () => {
    vi.resetModules();
    const kept: unknown[] = [];
    vi.doMock('../src/format/retained-shapes.js', () => ({ retainShapes: (...objects: unknown[]) => kept.push(...objects) }));
    const { retainReaderShapes } = await import('../src/reader/reader-shapes.js');
    const { RecordBatch: FreshRecordBatch } = await import('apache-arrow');
    await retainReaderShapes();
    const batches = kept.filter((o): o is RecordBatch => o instanceof FreshRecordBatch);
    expect(batches.map((b) => b.numRows)).toEqual([2, 2, 32]);
  });

  test('the sample stream\'s batch is kept with its Data and its schema', async () => {
    const { sampleReadObjects } = await import('../src/reader/reader-shapes.js');
    const arrow = await import('apache-arrow');
    const objects = await sampleReadObjects();
    const stream = objects.find((o): o is RecordBatch => o instanceof arrow.RecordBatch)!;
    expect(objects).toContain(stream.data);
    expect(objects).toContain(stream.schema);
  });

  test('the sample\'s last message is a compressed record batch: its header names LZ4_FRAME in a BodyCompression', async () => {
    const { sampleReadObjects } = await import('../src/reader/reader-shapes.js');
    const { Message } = await import('apache-arrow/ipc/metadata/message');
    const messages = (await sampleReadObjects()).filter((o): o is InstanceType<typeof Message> => o instanceof Message);
    const last = messages.at(-1)!.header() as { compression?: { type: number } | null };
    expect(last.compression?.type).toBe(CompressionType.LZ4_FRAME);
  });

  test('the header cache it keeps is the one the partition\'s read parsed its header with', async () => {
    const { sampleReadObjects } = await import('../src/reader/reader-shapes.js');
    const { RowHeaderCache } = await import('../src/sort-writer/row-reader.js');
    const parse = vi.spyOn(RowHeaderCache.prototype, 'parse');
    const objects = await sampleReadObjects();
    const kept = objects.find((o) => o instanceof RowHeaderCache);
    expect(kept).toBeDefined();
    expect(parse.mock.contexts).toContain(kept);
  });

  test('the sort-writer partition\'s read leaves its header cache, its read, its block cursor and both its blocks, and the loader objects', async () => {
    const { sampleReadObjects, sampleRowReadObjects } = await import('../src/reader/reader-shapes.js');
    const { BlockCursor, RowHeaderCache } = await import('../src/sort-writer/row-reader.js');
    const { VectorLoader: Loader } = await import('apache-arrow/visitor/vectorloader');
    const message = await import('apache-arrow/ipc/metadata/message');
    const arrow = await import('apache-arrow');
    const stream = (await sampleReadObjects()).find((o): o is RecordBatch => o instanceof arrow.RecordBatch)!;
    const objects = await sampleRowReadObjects(stream);
    const count = (type: abstract new (...args: never[]) => unknown) => objects.filter((o) => o instanceof type).length;
    expect(count(RowHeaderCache)).toBe(1);
    expect(count(BlockCursor)).toBe(1);
    expect(count(Loader)).toBe(1);
    expect(count(message.FieldNode)).toBe(1);
    expect(count(message.BufferRegion)).toBe(1);
    // the read itself (an async generator)
    expect(objects.filter((o) => typeof (o as { [Symbol.asyncIterator]?: unknown } | null)?.[Symbol.asyncIterator] === 'function')).toHaveLength(1);
    // the cursor's two blocks: the rows as they are (2 of them), then 16 copies LZ4-compressed
    const blocks = objects.filter((o): o is { rows: number; payload: Uint8Array } => typeof (o as { rows?: unknown }).rows === 'number' && (o as { payload?: unknown }).payload instanceof Uint8Array);
    expect(blocks.map((block) => block.rows)).toEqual([2, 32]);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// the schema message cache
// ---------------------------------------------------------------------------------------------------------------------

test('the schema cache hands out its entry only for metadata equal to what it was given, byte for byte (the first and last too)', () => {
  const cache = new SchemaMessageCache();
  const metadata = Uint8Array.from({ length: 40 }, (_, i) => i + 1);
  const decoded = { message: {}, schema: {} } as unknown as DecodedSchemaMessage;
  cache.remember(metadata.slice(), decoded);
  expect(cache.lookup(metadata)).toBe(decoded);
  for (const at of [0, 39]) {
    const other = metadata.slice();
    other[at] = other[at]! ^ 0xff;
    expect(cache.lookup(other)).toBeNull();
  }
  expect(cache.lookup(metadata.subarray(0, 39))).toBeNull();
});

// ---------------------------------------------------------------------------------------------------------------------
// the body codecs
// ---------------------------------------------------------------------------------------------------------------------

describe('lz4', () => {
  const lz4 = codecByName('lz4')!;

  test('a small one-block frame of ours decodes on the calling thread (decompressSync gives the bytes, not null)', async () => {
    const input = Buffer.from(Array.from({ length: 300 }, (_, i) => `row ${i}`).join(','));
    const frame = Buffer.concat(await lz4.compress(input));
    const out = lz4.decompressSync(frame, input.length);
    expect(out).not.toBeNull();
    expect(Buffer.from(out!).equals(input)).toBe(true);
  });

  test('a small one-block frame decoded through the async call does not reach lz4-napi\'s frame decoder (which leaks, lz4-napi#678)', async () => {
    vi.resetModules();
    const decoded: number[] = [];
    vi.doMock('lz4-napi', async (importOriginal) => {
      const real = await importOriginal<typeof import('lz4-napi')>();
      return { ...real, decompressFrame: (input: Uint8Array) => (decoded.push(input.length), real.decompressFrame(input as Buffer)) };
    });
    const fresh = (await import('../src/format/codec.js')).codecByName('lz4')!;
    const input = Buffer.from(Array.from({ length: 300 }, (_, i) => `row ${i}`).join(','));
    const frame = Buffer.concat(await fresh.compress(input));
    expect(Buffer.from(await fresh.decompress(frame, input.length)).equals(input)).toBe(true);
    expect(decoded).toEqual([]);
  });

  test('the size check reads the frame\'s own headers too: bytes without its magic number, or with bytes after its end, are refused', async () => {
    expect(lz4.sizeMismatch(new Uint8Array(20), 5)).toBe('the LZ4 frame does not start with its magic number');
    const input = Buffer.from('some bytes to compress, some bytes to compress');
    const frame = await compressFrame(input);
    expect(lz4.sizeMismatch(frame, input.length)).toBeNull();
    expect(lz4.sizeMismatch(Buffer.concat([frame, Buffer.of(0)]), input.length)).toBe("1 bytes follow the LZ4 frame's end");
  });

  test('a size no LZ4 frame of that length can hold (over 255:1) is refused before decoding, though the frame declares no size', async () => {
    const zeros = Buffer.alloc(1024);
    const frame = await compressFrame(zeros); // lz4-napi: no content size, blocks of up to 64 KiB
    expect(lz4.sizeMismatch(frame, zeros.length)).toBeNull();
    expect(lz4.sizeMismatch(frame, frame.length * 255 + 64)).toBeNull(); // at the bound: 255:1 and 64 bytes of headers
    const tooMuch = frame.length * 255 + 65;
    expect(tooMuch).toBeLessThan(64 * 1024); // one block could hold it, as far as the frame's own headers tell
    expect(lz4.sizeMismatch(frame, tooMuch)).toBe(`${frame.length} bytes of LZ4 cannot hold ${tooMuch} bytes`);
  });
});

describe('zstd: the frame header\'s content size (RFC 8878)', () => {
  const zstd = codecByName('zstd')!;

  test('a single-segment frame with a 1-byte content size (what zstd writes for a small buffer) declares that size', () => {
    const input = Buffer.from('a small buffer of a few bytes');
    const frame = zstdCompress(input, { compressionLevel: 1 });
    expect(frame[4]! >>> 6).toBe(0); // Frame_Content_Size_flag 0 ...
    expect((frame[4]! >>> 5) & 1).toBe(1); // ... with Single_Segment_flag: a 1-byte size
    expect(zstd.sizeMismatch(frame, input.length)).toBeNull();
    expect(zstd.sizeMismatch(frame, input.length + 1)).toBe(`the Zstandard frame declares ${input.length} bytes`);
  });

  test('a header that ends with its 1-byte content size (6 bytes) is read to its last byte', () => {
    const header = Uint8Array.of(0x28, 0xb5, 0x2f, 0xfd, 1 << 5, 5);
    expect(zstd.sizeMismatch(header, 6)).toBe('the Zstandard frame declares 5 bytes');
    expect(zstd.sizeMismatch(header, 5)).toBeNull();
  });

  test.each([
    ['its first', 0],
    ['its second', 1],
    ['its third', 2],
    ['its last', 3],
  ])('bytes whose magic number differs in %s byte are not read as a Zstandard header', (_, at) => {
    const bytes = Uint8Array.of(0x28, 0xb5, 0x2f, 0xfd, 1 << 5, 5, 0, 0);
    bytes[at] = bytes[at]! ^ 0xff;
    expect(zstd.sizeMismatch(bytes, 6)).toBeNull();
  });
});

test('a body compression type this library does not know is CS_UNSUPPORTED_CODEC, naming the type', () => {
  const codeOf = (run: () => unknown): unknown => {
    try {
      run();
      return 'no error';
    } catch (error) {
      return error instanceof ShuffleError ? [error.code, error.message] : error;
    }
  };
  expect(codeOf(() => codecByArrowType(7 as CompressionType))).toEqual(['CS_UNSUPPORTED_CODEC', 'IPC body compression type 7 is not supported']);
  expect(knownCodecByArrowType(7 as CompressionType)).toBeNull();
});
