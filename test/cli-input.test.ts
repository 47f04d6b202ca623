/**
 * The CLI's reader of Arrow input files (src/cli/input.ts) on damaged and
 * unusual files: a typed error saying what is wrong and where, never an
 * untyped one, never rows silently lost, never a hang.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { open, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { Dictionary, Field, Int32, List, makeData, RecordBatch, RecordBatchStreamWriter, Schema, Struct, Table, tableToIPC, Utf8, vectorFromArray, type Vector } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ShuffleError } from '../src/errors.js';
import { encodeRecordBatchMessage, encodeSchemaMessage } from '../src/format/ipc-message.js';
import { readIpcStream } from '../src/format/ipc-reader.js';
import { openArrowInput } from '../src/cli/input.js';
import { main } from '../src/cli/main.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { fileOf } from './support/arrow-file.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir = '';
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const NESTED = new Table({
  id: vectorFromArray(Int32Array.from({ length: 9 }, (_, i) => i)),
  l: vectorFromArray(
    Array.from({ length: 9 }, (_, i) => (i % 4 === 0 ? null : Array.from({ length: i % 3 }, (_, j) => i + j))),
    new List(new Field('item', new Int32(), true)),
  ),
  s: vectorFromArray(
    Array.from({ length: 9 }, (_, i) => (i % 6 === 0 ? null : { a: i, b: `s${i}` })),
    new Struct([new Field('a', new Int32(), true), new Field('b', new Utf8(), true)]),
  ),
});

const DICTIONARY = new Table({
  id: vectorFromArray(Int32Array.from({ length: 10 }, (_, i) => i)),
  d: vectorFromArray(
    Array.from({ length: 10 }, (_, i) => ['x', 'yy', 'zzz'][i % 3]!),
    new Dictionary(new Utf8(), new Int32()),
  ),
});

/** Every row the input reader gives, as text. */
async function rowsOf(path: string): Promise<string[]> {
  const input = await openArrowInput(path);
  try {
    const rows: string[] = [];
    for await (const batch of input.batches()) for (const row of batch) rows.push(JSON.stringify(row?.toJSON()));
    return rows;
  } finally {
    await input.close();
  }
}

describe('a damaged Arrow file footer', () => {
  test('any one footer word set to 0 or all ones gives the rows or a typed error, never an untyped one (a null child field threw a TypeError), located at the footer', async () => {
    const file = tableToIPC(NESTED, 'file');
    const footerLength = new DataView(file.buffer, file.byteOffset + file.byteLength - 10, 4).getInt32(0, true);
    const footerAt = file.byteLength - 10 - footerLength;
    const messages = new Map<string, number>();
    for (let at = footerAt; at + 4 <= footerAt + footerLength; at += 4) {
      for (const word of [0, 0xffffffff]) {
        const bytes = Buffer.from(file);
        bytes.writeUInt32LE(word, at);
        const path = join(dir, 'damaged.arrow');
        await writeFile(path, bytes);
        try {
          await rowsOf(path);
        } catch (error) {
          if (!(error instanceof ShuffleError)) throw new Error(`footer word at ${at} set to ${word}: ${String(error)}`);
          // a schema arrow-js decodes but cannot encode again is located at the footer's first byte
          if (error.message.startsWith('unreadable schema in the Arrow file footer')) expect(error.where, `word at ${at} set to ${word}`).toMatchObject({ file: path, offset: footerAt });
          const key = `${error.code}: ${error.message.replace(/[-\d]+/g, 'N').slice(0, 60)}`;
          messages.set(key, (messages.get(key) ?? 0) + 1);
        }
      }
    }
    expect([...messages.keys()].some((m) => m.startsWith('CS_CORRUPT_DATA: unreadable schema in the Arrow file footer'))).toBe(true);
  });

  test('a record batch block at a dictionary message (and a dictionary block at a record batch) is CS_CORRUPT_DATA, not a file of no rows', async () => {
    const stream = tableToIPC(DICTIONARY, 'stream');
    const good = join(dir, 'good.arrow');
    await writeFile(good, fileOf(stream, DICTIONARY.schema));
    expect(await rowsOf(good)).toHaveLength(10);
    const swapped = join(dir, 'swapped.arrow');
    await writeFile(swapped, fileOf(stream, DICTIONARY.schema, { swapKinds: true }));
    await expect(rowsOf(swapped)).rejects.toMatchObject({
      code: 'CS_CORRUPT_DATA',
      // dictionary blocks are read first: the first one listed is the record batch's message, after the dictionary's
      message: expect.stringContaining('the footer lists a DictionaryBatch block at a RecordBatch message'),
      where: { file: swapped, offset: expect.any(Number) },
    });
    // the command fails and leaves nothing (it wrote an empty output and exited 0)
    const before = await readdir(dir);
    const code = await main(['write', swapped, '-p', '2', '-k', 'id', '-o', join(dir, 'out')], { stdout: devNull(), stderr: devNull(), signal: new AbortController().signal });
    expect(code).toBe(1);
    expect(await readdir(dir)).toEqual(before);
  });
});

function devNull(): Writable {
  return new Writable({ write: (_chunk, _encoding, done) => done() });
}

describe('a FIFO with nothing writing to it', () => {
  /** Runs `opening` on a new FIFO; a reader blocked in open() is let go afterwards, so a failure cannot hang the test process. */
  async function withFifo<T>(name: string, opening: (path: string) => Promise<T>): Promise<T | string> {
    const path = join(dir, name);
    await promisify(execFile)('mkfifo', [path]);
    let timer: NodeJS.Timeout | undefined;
    try {
      const stuck = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still opening after 3 s'), 3000)));
      return await Promise.race([opening(path), stuck]);
    } finally {
      clearTimeout(timer);
      // a writer that comes and goes ends any open() still waiting for one
      const writer = await open(path, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => null);
      await writer?.close();
    }
  }

  test.runIf(process.platform !== 'win32')('as the input is refused at once as not a regular file (open() blocked for good, and no signal could end the process)', async () => {
    const error = await withFifo('input.arrow', (path) => openArrowInput(path).then(() => null, (e: unknown) => e));
    expect(error).toMatchObject({ code: 'CS_INPUT_NOT_ARROW', message: expect.stringContaining('not a regular file') });
  });

  test.runIf(process.platform !== 'win32')("as a shuffle output's index file is refused at once with CS_IO", async () => {
    await writeFile(join(dir, 'out.data'), '');
    await writeFile(join(dir, 'out.checksum.CRC32C'), '');
    const error = await withFifo('out.index', () => ShuffleReader.open(join(dir, 'out')).then(() => null, (e: unknown) => e));
    expect(error).toMatchObject({ code: 'CS_IO', message: expect.stringContaining('not a regular file'), where: { file: join(dir, 'out.index') } });
  });
});

describe('dictionary messages', () => {
  const TYPE = new Dictionary(new Utf8(), new Int32(), 0);
  const SCHEMA = new Schema([new Field('id', new Int32(), false), new Field('d', TYPE, true)]);

  function batchOver(dictionary: Vector, b: number): RecordBatch {
    const rows = 3;
    const id = makeData({ type: new Int32(), length: rows, data: Int32Array.from({ length: rows }, (_, i) => 3 * b + i) });
    const d = makeData({ type: TYPE, length: rows, data: Int32Array.from({ length: rows }, (_, i) => (b + i) % dictionary.length), dictionary });
    return new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: rows, nullCount: 0, children: [id, d] }));
  }

  test('a stream whose every batch brings a delta: each batch\'s dictionary extends the one before (each message decoded once: 2,000 such batches took 423 s)', async () => {
    const writer = new RecordBatchStreamWriter();
    writer.reset(undefined, SCHEMA);
    let dictionary = vectorFromArray(['v0'], new Utf8());
    const expected: string[] = [];
    for (let b = 0; b < 20; b++) {
      if (b > 0) dictionary = dictionary.concat(vectorFromArray([`v${b}`], new Utf8()));
      const batch = batchOver(dictionary, b);
      for (const row of batch) expected.push(JSON.stringify(row?.toJSON()));
      writer.write(batch);
    }
    writer.finish();
    const path = join(dir, 'deltas.arrows');
    await writeFile(path, writer.toUint8Array(true));
    const input = await openArrowInput(path);
    const rows: string[] = [];
    let previous: Vector | null = null;
    for await (const batch of input.batches()) {
      for (const row of batch) rows.push(JSON.stringify(row?.toJSON()));
      const current = batch.getChild('d')!.data[0]!.dictionary!;
      if (previous !== null) expect(previous.data.every((chunk, i) => chunk === current.data[i])).toBe(true);
      previous = current;
    }
    await input.close();
    expect(rows).toEqual(expected);
    expect(previous!.length).toBe(20);
  });

  test("a dictionary message of an id the schema does not have is CS_CORRUPT_DATA at that message's own offset", async () => {
    const schema = encodeSchemaMessage(SCHEMA);
    const values = new TextEncoder().encode('ab');
    const message = await encodeRecordBatchMessage(2, [{ length: 2, nullCount: 0 }], [new Uint8Array(0), Uint8Array.from(new Int32Array([0, 1, 2]).buffer as never), values], null, undefined, { id: 99, isDelta: false });
    const path = join(dir, 'unknown-id.arrows');
    await writeFile(path, Buffer.concat([schema, ...message.chunks, Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])]));
    const input = await openArrowInput(path);
    const reading = (async () => {
      for await (const _ of input.batches());
    })();
    await expect(reading).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('unknown dictionary id 99'), where: { file: path, offset: schema.byteLength } });
    await input.close();
  });
});

describe("a damaged message in a stream input fails as the shuffle reader's IPC reader fails on it", () => {
  // the input reader frames messages with readIpcMessageAt, the IPC reader's own checks: the same words at the same offset
  const TABLE = new Table({ id: vectorFromArray(Int32Array.from({ length: 20 }, (_, i) => i)), s: vectorFromArray(Array.from({ length: 20 }, (_, i) => `v${i}`), new Utf8()) });

  async function inputError(bytes: Uint8Array): Promise<ShuffleError> {
    const path = join(dir, 'damaged.arrows');
    await writeFile(path, bytes);
    const error = await (async () => {
      const input = await openArrowInput(path);
      try {
        for await (const _ of input.batches());
      } finally {
        await input.close();
      }
    })().then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(ShuffleError);
    return error as ShuffleError;
  }

  async function readerError(bytes: Uint8Array): Promise<ShuffleError> {
    const error = await (async () => {
      for await (const _ of readIpcStream(bytes, { file: join(dir, 'damaged.arrows') }));
    })().then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(ShuffleError);
    return error as ShuffleError;
  }

  const stream = () => tableToIPC(TABLE, 'stream');
  const batchAt = (bytes: Uint8Array) => 8 + new DataView(bytes.buffer, bytes.byteOffset).getInt32(4, true); // after the schema message
  test.each([
    ['a metadata length past the end', (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset).setInt32(batchAt(bytes) + 4, 1 << 20, true)],
    ['a negative metadata length', (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset).setInt32(batchAt(bytes) + 4, -8, true)],
    ['a body cut short', (bytes: Uint8Array) => bytes.subarray(0, bytes.byteLength - 24)],
    ['metadata of noise', (bytes: Uint8Array) => bytes.fill(0x5a, batchAt(bytes) + 8, batchAt(bytes) + 40)],
  ] as const)('%s: CS_CORRUPT_DATA in the same words, at the same offset', async (_, damage) => {
    const bytes = stream();
    const damaged = damage(bytes) ?? bytes;
    const [input, reader] = [await inputError(damaged), await readerError(damaged)];
    expect(input.code).toBe('CS_CORRUPT_DATA');
    expect({ message: input.message, where: input.where }).toEqual({ message: reader.message, where: reader.where });
  });
});
