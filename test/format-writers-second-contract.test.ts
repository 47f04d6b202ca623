/**
 * A second pass over the code that writes the on-disk formats (docs/RELIABILITY.md, "The tests
 * notice a broken line: mutation sweeps"): each claim below was pinned where a mutant of
 * `output-files.ts`, `write-chunks.ts` or the encoding half of `ipc-message.ts` changed something
 * no test noticed, beyond what `test/format-writers-contract.test.ts` (the ninth sweep) and
 * `test/format-buffers-second-contract.test.ts` already pin.
 *
 *  - DataFileWriter: what marks an output committed is its index, not its data file; partitions
 *    come in order skipping none; `appendNow` writes before it returns; `bytesWritten` counts what
 *    is gathered; no descriptor outlives a commit or an abort;
 *  - the record-batch header is the layout its doc comment draws, with no byte more;
 *  - the encoders' sizes and memory: compressionBound, rawPayloadBytes, heldBytes.
 *
 * Expected bytes and sizes are worked by hand from the Arrow IPC specification and the layouts the
 * doc comments draw, never taken from the code under test.
 */
import { access, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CompressionType } from 'apache-arrow/fb/compression-type';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { ShuffleError } from '../src/errors.js';
import { codecByName } from '../src/format/codec.js';
import { STORE_RAW } from '../src/format/compression-advisor.js';
import { compressionBound, encodeRawPayload, encodeRecordBatchHeader, encodeRecordBatchMessage, encodeRecordBatchPayload, rawPayloadBytes, recordBatchHeaderBytes } from '../src/format/ipc-message.js';
import { DataFileWriter } from '../src/format/output-files.js';
import { writeChunks } from '../src/format/write-chunks.js';
import { deferred } from './support/deferred.js';
import { openFilesUnder } from './support/open-files.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

// writeChunks passes through unless a test makes a write fail
vi.mock('../src/format/write-chunks.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../src/format/write-chunks.js')>();
  return { ...actual, writeChunks: vi.fn(actual.writeChunks) };
});
const realWriteChunks = (await vi.importActual<typeof import('../src/format/write-chunks.js')>('../src/format/write-chunks.js')).writeChunks;
// rename, rm and access pass through unless a test records them or makes one fail
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  return { ...actual, rename: vi.fn(actual.rename), rm: vi.fn(actual.rm), access: vi.fn(actual.access) };
});
const realFs = await vi.importActual<typeof import('node:fs/promises')>('node:fs/promises');
const realRename = realFs.rename;

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-format-second-')));
afterEach(async () => {
  vi.mocked(writeChunks).mockReset().mockImplementation(realWriteChunks);
  vi.mocked(rename).mockReset().mockImplementation(realRename);
  vi.mocked(rm).mockReset().mockImplementation(realFs.rm);
  vi.mocked(access).mockReset().mockImplementation(realFs.access);
  await removeDir(dir);
});

const MiB = 1 << 20;
const enospc = () => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
/** One turn of the event loop: what Node waits before it calls a rejection nobody handled unhandled. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
/** int64 big-endian, as the index and checksum files are written */
const i64be = (v: bigint) => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigInt64(0, v, false);
  return b;
};
const concat = (parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

// ---------------------------------------------------------------- DataFileWriter

describe('DataFileWriter', () => {
  test('an index file alone marks an output committed: create() without overwrite refuses it with CS_OUTPUT_EXISTS naming the index', async () => {
    await writeFile(join(dir, 'out.index'), new Uint8Array(8));
    const error = await DataFileWriter.create(join(dir, 'out')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error).toMatchObject({ code: 'CS_OUTPUT_EXISTS', where: { file: join(dir, 'out.index') } });
    expect(await readdir(dir)).toEqual(['out.index']);
  });

  test('a data file without an index is not a committed output: create() without overwrite goes ahead, and the commit replaces it', async () => {
    await writeFile(join(dir, 'out.data'), 'left by a crash');
    const writer = await DataFileWriter.create(join(dir, 'out'));
    writer.beginPartition(0);
    await writer.append(Uint8Array.of(7, 7));
    writer.endPartition();
    await writer.commit();
    expect(hex(await readFile(join(dir, 'out.data')))).toBe('0707');
    expect((await readdir(dir)).sort()).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
  });

  test('an output directory that is a file is CS_FILE_NOT_FOUND ("not a directory"), not an I/O error of the open', async () => {
    await writeFile(join(dir, 'plain'), 'x');
    await expect(DataFileWriter.create(join(dir, 'plain', 'out'))).rejects.toMatchObject({ code: 'CS_FILE_NOT_FOUND', message: expect.stringContaining('is not a directory') });
  });

  test('an output directory the process may not write is CS_IO saying so, before any file is made (access refused: root passes every permission check)', async () => {
    vi.mocked(access).mockImplementation(async () => {
      throw Object.assign(new Error('EACCES: permission denied, access'), { code: 'EACCES' });
    });
    await expect(DataFileWriter.create(join(dir, 'out'))).rejects.toMatchObject({ code: 'CS_IO', message: expect.stringContaining('is not writable: EACCES') });
    expect(await readdir(dir)).toEqual([]);
  });

  test('partitions come in order skipping none: beginPartition(2) after partition 0 throws, and so does beginning partition 0 twice', async () => {
    const writer = await DataFileWriter.create(join(dir, 'out'));
    writer.beginPartition(0);
    writer.endPartition();
    expect(() => writer.beginPartition(2)).toThrow(/partitions must be written in order: expected 1, got 2/);
    expect(() => writer.beginPartition(0)).toThrow(/expected 1, got 0/);
    await writer.abort();
  });

  test('appendNow has written the chunk when it returns: its memory may be reused at once', async () => {
    const writer = await DataFileWriter.create(join(dir, 'out'));
    writer.beginPartition(0);
    const chunk = Uint8Array.of(1, 2, 3, 4);
    await writer.appendNow(chunk);
    chunk.fill(0xee); // reused by the caller
    await writer.append(Uint8Array.of(5));
    writer.endPartition();
    await writer.commit();
    expect(hex(await readFile(join(dir, 'out.data')))).toBe('0102030405');
  });

  test('bytesWritten counts the bytes gathered but not yet written, and the commit reports the data file length', async () => {
    const writer = await DataFileWriter.create(join(dir, 'out'));
    writer.beginPartition(0);
    await writer.append(new Uint8Array(10));
    expect(writer.bytesWritten).toBe(10);
    await writer.appendNow(new Uint8Array(3));
    expect(writer.bytesWritten).toBe(13);
    writer.endPartition();
    expect((await writer.commit()).bytesWritten).toBe(13);
  });

  test('no descriptor under the output directory stays open after a commit, an abort, or a commit that failed', async () => {
    const committed = await DataFileWriter.create(join(dir, 'a'));
    committed.beginPartition(0);
    await committed.append(Uint8Array.of(1));
    committed.endPartition();
    await committed.commit();
    expect(openFilesUnder(dir), 'after a commit').toEqual([]);

    const aborted = await DataFileWriter.create(join(dir, 'b'));
    aborted.beginPartition(0);
    await aborted.appendNow(Uint8Array.of(1));
    await aborted.abort();
    expect(openFilesUnder(dir), 'after an abort').toEqual([]);

    await mkdir(join(dir, 'c.index')); // in the way of the index: the commit fails
    const failed = await DataFileWriter.create(join(dir, 'c'), true);
    failed.beginPartition(0);
    await failed.append(Uint8Array.of(1));
    failed.endPartition();
    await expect(failed.commit()).rejects.toMatchObject({ code: 'CS_IO' });
    expect(openFilesUnder(dir), 'after a failed commit').toEqual([]);
    expect((await readdir(dir)).sort()).toEqual(['a.checksum.CRC32C', 'a.data', 'a.index', 'c.index']);
  });

  test('appendNow reports a write of its own that fails (CS_IO naming the data file), rather than leaving it for no one', async () => {
    vi.mocked(writeChunks).mockImplementationOnce(async () => {
      throw enospc();
    });
    const writer = await DataFileWriter.create(join(dir, 'out'));
    writer.beginPartition(0);
    const error = await writer.appendNow(Uint8Array.of(1, 2, 3)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error).toMatchObject({ code: 'CS_IO', where: { file: expect.stringMatching(/out\.data\.[0-9a-f]{12}\.tmp$/) } });
    await writer.abort();
    expect(await readdir(dir)).toEqual([]);
  });

  test('a write that fails while nobody is waiting for it is no unhandled rejection; the next call reports it', async () => {
    const failed = deferred();
    vi.mocked(writeChunks).mockImplementationOnce(async () => {
      failed.resolve();
      throw enospc();
    });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const writer = await DataFileWriter.create(join(dir, 'out'));
      writer.beginPartition(0);
      await writer.append(new Uint8Array(MiB)); // a whole MiB gathered: its write starts, and fails on its way
      await failed.promise;
      await turn();
      await turn();
      expect(unhandled).toEqual([]);
      await expect(writer.flush()).rejects.toMatchObject({ code: 'CS_IO' });
      await writer.abort();
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(await readdir(dir)).toEqual([]);
  });
});

describe('the commit', () => {
  test('an output another writer committed after create() is not replaced without overwrite: CS_OUTPUT_EXISTS at the commit, the first output stands, no temporary file stays', async () => {
    const first = await DataFileWriter.create(join(dir, 'out'));
    const second = await DataFileWriter.create(join(dir, 'out')); // no output yet: both may begin
    for (const [writer, byte] of [[first, 1], [second, 2]] as const) {
      writer.beginPartition(0);
      await writer.append(Uint8Array.of(byte));
      writer.endPartition();
    }
    await first.commit();
    await expect(second.commit()).rejects.toMatchObject({ code: 'CS_OUTPUT_EXISTS', where: { file: join(dir, 'out.index') } });
    expect((await readdir(dir)).sort()).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
    expect(hex(await readFile(join(dir, 'out.data')))).toBe('01');
  });

  /** Commits one partition of `bytes` at dir/out. */
  async function commitOut(bytes: Uint8Array, overwrite: boolean): Promise<void> {
    const writer = await DataFileWriter.create(join(dir, 'out'), overwrite);
    writer.beginPartition(0);
    await writer.append(bytes);
    writer.endPartition();
    await writer.commit();
  }
  const enoent = () => Object.assign(new Error('ENOENT: no such file or directory, rename'), { code: 'ENOENT' });

  test('an old file gone between its lstat and its move aside (another cleaner) is no failure: the overwrite commits', async () => {
    await commitOut(Uint8Array.of(1), false);
    vi.mocked(rename).mockImplementation(async (from, to) => {
      if (String(from) === join(dir, 'out.checksum.CRC32C')) throw enoent(); // as if removed just before
      return realRename(from, to);
    });
    await commitOut(Uint8Array.of(2, 2), true);
    expect(hex(await readFile(join(dir, 'out.data')))).toBe('0202');
    expect((await readdir(dir)).sort()).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
  });

  test('a failed overwrite whose old index cannot be put back keeps the first failure as its cause', async () => {
    await commitOut(Uint8Array.of(1), false);
    let failed = false;
    vi.mocked(rename).mockImplementation(async (from, to) => {
      if (!failed && String(to) === join(dir, 'out.checksum.CRC32C') && (failed = true)) throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' });
      if (failed && String(to) === join(dir, 'out.index')) throw Object.assign(new Error('EPERM: operation not permitted, rename'), { code: 'EPERM' });
      return realRename(from, to);
    });
    const error = (await commitOut(Uint8Array.of(2, 2), true).catch((e: unknown) => e)) as ShuffleError;
    expect(error.message).toContain('could not be put back either');
    expect((error.cause as { code?: string }).code).toBe('EIO');
    expect(error.where.file).toBe(join(dir, 'out.checksum.CRC32C'));
  });

  const eacces = () => Object.assign(new Error('EACCES: permission denied, rm'), { code: 'EACCES' });

  test('an overwrite that commits is no failure when an old file moved aside cannot be removed (a leftover for removeLeftovers)', async () => {
    await commitOut(Uint8Array.of(1), false);
    vi.mocked(rm).mockImplementation(async (path, options) => {
      if (/out\.data\.[0-9a-f]{12}\.tmp$/.test(String(path))) throw eacces();
      return realFs.rm(path, options);
    });
    await commitOut(Uint8Array.of(2, 2), true);
    expect(hex(await readFile(join(dir, 'out.data')))).toBe('0202');
  });

  test('a first commit that fails at its index reports why, also when a file it placed cannot be removed', async () => {
    vi.mocked(rename).mockImplementation(async (from, to) => {
      if (String(to) === join(dir, 'out.index')) throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' });
      return realRename(from, to);
    });
    vi.mocked(rm).mockImplementation(async (path, options) => {
      if (String(path) === join(dir, 'out.data')) throw eacces();
      return realFs.rm(path, options);
    });
    await expect(commitOut(Uint8Array.of(1), false)).rejects.toMatchObject({ code: 'CS_IO', message: expect.stringMatching(/^cannot commit the shuffle output: EIO/) });
  });

  test('a failed overwrite puts back only the old files it moved: one that was gone is not reported as stranded', async () => {
    await commitOut(Uint8Array.of(1), false);
    let indexFailed = false;
    vi.mocked(rename).mockImplementation(async (from, to) => {
      if (String(from) === join(dir, 'out.checksum.CRC32C')) throw enoent();
      // the new index cannot be placed (the old one can be put back)
      if (!indexFailed && String(to) === join(dir, 'out.index') && (indexFailed = true)) throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' });
      return realRename(from, to);
    });
    const error = (await commitOut(Uint8Array.of(2, 2), true).catch((e: unknown) => e)) as ShuffleError;
    expect(error).toBeInstanceOf(ShuffleError);
    expect(error.code).toBe('CS_IO');
    expect(error.message).not.toContain('could not be put back');
    expect((error.cause as { code?: string }).code).toBe('EIO');
    expect(hex(await readFile(join(dir, 'out.data'))), 'the old output is back').toBe('01');
  });
});

describe('two writers of one output in one process', () => {
  /** A writer of one partition of `bytes` at `prefix` (overwriting), ready to commit. */
  async function readyAt(prefix: string, bytes: Uint8Array): Promise<DataFileWriter> {
    const writer = await DataFileWriter.create(prefix, true);
    writer.beginPartition(0);
    await writer.append(bytes);
    writer.endPartition();
    return writer;
  }

  test('commit one after the other, never interleaved, however the prefix is spelled (out, ./out): the last output stands whole', async () => {
    await (await readyAt(join(dir, 'out'), Uint8Array.of(0))).commit(); // an old output for both to replace
    const writers = [await readyAt(join(dir, 'out'), new Uint8Array(10).fill(1)), await readyAt(`${dir}/./out`, new Uint8Array(20).fill(2))];
    const renames: string[] = [];
    const spelledWithDot = (rename: string) => rename.startsWith('./');
    vi.mocked(rename).mockImplementation(async (from, to) => {
      const name = `${String(from).slice(dir.length + 1)} -> ${String(to).slice(dir.length + 1)}`;
      renames.push(name);
      // the first rename waits until the other writer has written its temporary index (it has reached the commit's
      // renames: a commit not queued behind this one starts renaming), then for up to 50 directory listings more, or
      // until the other writer renames something
      if (renames.length === 1) {
        const tempIndexes = async () => (await readdir(dir)).filter((file) => /^out\.index\.[0-9a-f]{12}\.tmp$/.test(file)).length;
        while ((await tempIndexes()) < 2 && renames.length === 1);
        for (let i = 0; i < 50 && !renames.some((other) => spelledWithDot(other) !== spelledWithDot(name)); i++) await readdir(dir);
      }
      return realRename(from, to);
    });
    await Promise.all(writers.map((writer) => writer.commit()));
    // each commit: 3 files of the older output aside, 3 new files into place; the two commits' renames do not mix
    const spellings = renames.map((name) => (spelledWithDot(name) ? './out' : 'out'));
    expect(spellings, renames.join('\n')).toEqual([...Array(6).fill(spellings[0]), ...Array(6).fill(spellings[0] === 'out' ? './out' : 'out')]);
    const data = await readFile(join(dir, 'out.data'));
    expect(hex(await readFile(join(dir, 'out.index')))).toBe(hex(concat([0n, BigInt(data.byteLength)].map(i64be))));
    expect((await readdir(dir)).sort()).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
  });
});

// ---------------------------------------------------------------- record-batch messages

/*
 * The framed record-batch header's length, worked from encodeRecordBatchHeader's doc comment (offsets
 * in the flatbuffer, which starts at byte 8): the tables end at 72 (80 with a view node), or 88 (96)
 * with a BodyCompression table; then the nodes vector (its u32 count 4 bytes before an 8-aligned
 * element, 16 bytes an element), the buffers vector (the same), and with view nodes the variadic
 * counts vector (8 bytes an element). Each vector's count sits at the first offset after the one
 * before with count + 4 = 0 mod 8, so no more than 4 bytes of padding before a count:
 *
 *   plain:        8 + 72 + 8 + 16n + 8 + 16b                 = 96 + 16n + 16b
 *   compression:  8 + 88 + 8 + 16n + 8 + 16b                 = 112 + 16n + 16b
 *   views:        8 + 80 + 8 + 16n + 8 + 16b + 8 + 8v        = 112 + 16n + 16b + 8v
 *   both:         8 + 96 + 8 + 16n + 8 + 16b + 8 + 8v        = 128 + 16n + 16b + 8v
 */
describe('record-batch messages', () => {
  test.each([
    ['plain', null, false, (n: number, b: number) => 96 + 16 * n + 16 * b],
    ['compression', CompressionType.LZ4_FRAME, false, (n: number, b: number) => 112 + 16 * n + 16 * b],
    ['views', null, true, (n: number, b: number) => 112 + 16 * n + 16 * b + 8 * n],
    ['compression and views', CompressionType.ZSTD, true, (n: number, b: number) => 128 + 16 * n + 16 * b + 8 * n],
  ] as const)('the header (%s) is the doc comment\'s layout and not a byte longer: its length and metadata size by hand, for 1 to 3 nodes and 0 to 3 buffers', (_, compression, views, bytes) => {
    for (let n = 1; n <= 3; n++) {
      for (let b = 0; b <= 3; b++) {
        const nodes = Array.from({ length: n }, () => (views ? { length: 2, nullCount: 0, variadicBuffers: 1 } : { length: 2, nullCount: 0 }));
        const framed = encodeRecordBatchHeader(2, nodes, Array.from({ length: 2 * b }, () => 0), compression, 0);
        expect(framed.byteLength, `${n} nodes, ${b} buffers`).toBe(bytes(n, b));
        expect(recordBatchHeaderBytes(nodes, b, compression !== null)).toBe(bytes(n, b));
        expect(new DataView(framed.buffer, framed.byteOffset).getInt32(4, true)).toBe(bytes(n, b) - 8);
      }
    }
  });

  test('with a policy that never compresses, a payload is laid out at once: one chunk, header and body in one allocation of exactly its bytes', async () => {
    const asked: number[] = [];
    const buffers = [Uint8Array.of(1, 2, 3), new Uint8Array(0), new Uint8Array(9).fill(4)];
    const encoded = await encodeRecordBatchPayload(3, [{ length: 3, nullCount: 0 }], buffers, codecByName('lz4'), STORE_RAW, (n) => (asked.push(n), new Uint8Array(n + 16)));
    // header (with compression) 112 + 16 + 48 = 176; body: -1 | 3 bytes | 5 zeros, -1 | 9 bytes | 7 zeros = 16 + 24
    expect(encoded.byteLength).toBe(216);
    expect(asked).toEqual([216]);
    expect(encoded.chunks.length).toBe(1);
    expect(encoded.chunks[0]!.buffer).toBe(encoded.arena!.buffer);
    expect(encoded.heldBytes).toBe(232);
  });

  test('encodeRawPayload into a given array: its byteLength is the array\'s, which is rawPayloadBytes', () => {
    const buffers = [Uint8Array.of(1), new Uint8Array(0), new Uint8Array(12).fill(9)];
    const nodes = [{ length: 1, nullCount: 0 }];
    // header 96 + 16 + 48 = 160; body: 1 byte + 7 zeros, 12 bytes + 4 zeros
    expect(rawPayloadBytes(nodes, buffers, null)).toBe(184);
    const target = new Uint8Array(184);
    const encoded = encodeRawPayload(1, nodes, buffers, null, target);
    expect(encoded.byteLength).toBe(184);
    expect(encoded.chunks).toEqual([target]);
  });

  test('compressionBound covers a whole message of incompressible bytes, header and prefixes included, from 1 byte up', async () => {
    const codec = codecByName('lz4');
    for (const n of [1, 7, 100, 5000]) {
      const bytes = new Uint8Array(n).map((_, i) => (i * 2654435761) >>> 24);
      const encoded = await encodeRecordBatchMessage(n, [{ length: n, nullCount: 0 }], [bytes], codec);
      expect(encoded.byteLength, `${n} bytes`).toBeLessThanOrEqual(compressionBound(n));
    }
  });
});
