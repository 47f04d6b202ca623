/**
 * DataFileWriter's claims: appended chunks reach the data file in order, whatever
 * the writes they are gathered into, and the index and checksums describe each
 * partition; `append` starts a write and returns without waiting for it (the
 * merge goes on meanwhile), one write at a time; a write that fails is reported
 * by the next call as CS_IO naming the file; abort waits for the write on its way
 * before it closes the file, and leaves nothing behind; an overwrite whose
 * commit fails leaves the older output as it was.
 */
import { readdir, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { ShuffleError } from '../src/errors.js';
import { DataFileWriter } from '../src/format/output-files.js';
import { writeChunks } from '../src/format/write-chunks.js';
import { commitOnePartition } from './support/one-partition-output.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

vi.mock('../src/format/write-chunks.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../src/format/write-chunks.js')>();
  return { ...actual, writeChunks: vi.fn(actual.writeChunks) };
});
const realWriteChunks = (await vi.importActual<typeof import('../src/format/write-chunks.js')>('../src/format/write-chunks.js')).writeChunks;
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  return { ...actual, rename: vi.fn(actual.rename) };
});
const realRename = (await vi.importActual<typeof import('node:fs/promises')>('node:fs/promises')).rename;

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-data-file-')));
afterEach(async () => {
  vi.mocked(writeChunks).mockReset().mockImplementation(realWriteChunks);
  vi.mocked(rename).mockReset().mockImplementation(realRename);
  await removeDir(dir);
});

const MiB = 1 << 20;

/** Deterministic bytes: chunk i of a partition is filled from a small PRNG. */
function chunkOf(seed: number, bytes: number): Uint8Array {
  const chunk = new Uint8Array(bytes);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < bytes; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    chunk[i] = x & 0xff;
  }
  return chunk;
}

/** A promise and the functions that settle it. */
function gate(): { promise: Promise<void>; open: () => void; fail: (error: Error) => void } {
  let open!: () => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

test('chunks appended across many writes reach the data file in order; the index and checksums describe each partition', async () => {
  // partition 0: large chunks (writes of more than a MiB each), 1: empty, 2: 1,500 small chunks (more than one writev takes)
  const partitions: Uint8Array[][] = [
    [300_000, 900_000, 1, 2 * MiB, 77, 650_000].map((bytes, i) => chunkOf(i + 1, bytes)),
    [],
    Array.from({ length: 1500 }, (_, i) => chunkOf(1000 + i, 1 + ((i * 37) % 700))),
  ];
  const writer = await DataFileWriter.create(join(dir, 'out'));
  for (const [p, chunks] of partitions.entries()) {
    writer.beginPartition(p);
    for (const chunk of chunks) await writer.append(chunk);
    writer.endPartition();
  }
  const { partitionLengths, checksums, bytesWritten } = await writer.commit();

  const expected = partitions.map((chunks) => Buffer.concat(chunks));
  const data = new Uint8Array(await readFile(join(dir, 'out.data')));
  expect(data.byteLength).toBe(bytesWritten);
  expect(Buffer.compare(data, Buffer.concat(expected))).toBe(0);
  expect(partitionLengths).toEqual(expected.map((bytes) => bytes.byteLength));
  expect(checksums).toEqual(expected.map((bytes) => (bytes.byteLength === 0 ? 0 : crc32c(Buffer.from(bytes)) >>> 0)));
  const index = new DataView((await readFile(join(dir, 'out.index'))).buffer);
  const offsets = Array.from({ length: 4 }, (_, i) => Number(index.getBigInt64(i * 8, false)));
  expect(offsets).toEqual([0, expected[0]!.byteLength, expected[0]!.byteLength, data.byteLength]);
  expect(vi.mocked(writeChunks).mock.calls.length, 'writes').toBeGreaterThan(4);
});

test('append starts a write and returns before it completes; the next write waits for it, so one write is on its way at a time', async () => {
  const first = gate();
  vi.mocked(writeChunks).mockImplementationOnce(async (...args) => {
    await first.promise;
    return realWriteChunks(...args);
  });
  const writer = await DataFileWriter.create(join(dir, 'out'));
  writer.beginPartition(0);
  const a = chunkOf(1, MiB);
  await writer.append(a); // gathers a MiB: starts the first write, held at the gate
  expect(vi.mocked(writeChunks)).toHaveBeenCalledTimes(1);

  const b = chunkOf(2, MiB);
  let secondReturned = false;
  const second = writer.append(b).then(() => (secondReturned = true)); // must wait for the first write
  await new Promise((resolve) => setTimeout(resolve, 20));
  expect(secondReturned, 'an append that starts a write while one is on its way waits for it').toBe(false);
  expect(vi.mocked(writeChunks)).toHaveBeenCalledTimes(1);

  first.open();
  await second;
  expect(vi.mocked(writeChunks)).toHaveBeenCalledTimes(2);
  writer.endPartition();
  await writer.commit();
  expect(Buffer.compare(await readFile(join(dir, 'out.data')), Buffer.concat([a, b]))).toBe(0);
});

test('a write that fails in the background is reported by the next call as CS_IO naming the data file; abort then leaves nothing', async () => {
  vi.mocked(writeChunks).mockImplementationOnce(async () => {
    throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
  });
  const writer = await DataFileWriter.create(join(dir, 'out'));
  writer.beginPartition(0);
  await writer.append(chunkOf(1, MiB)); // its write fails on its way
  const error = await writer.flush().then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ShuffleError);
  expect((error as ShuffleError).code).toBe('CS_IO');
  expect((error as ShuffleError).message).toMatch(/ENOSPC/);
  expect((error as ShuffleError).where.file).toMatch(/out\.data\.[0-9a-f]+\.tmp$/);
  await writer.abort();
  expect(await readdir(dir)).toEqual([]);
});

test('abort waits for the write on its way before it closes the file, then removes it', async () => {
  const held = gate();
  let writeSettled = false;
  vi.mocked(writeChunks).mockImplementationOnce(async (...args) => {
    await held.promise;
    const written = await realWriteChunks(...args); // on a closed descriptor this would fail (EBADF)
    writeSettled = true;
    return written;
  });
  const writer = await DataFileWriter.create(join(dir, 'out'));
  writer.beginPartition(0);
  await writer.append(chunkOf(1, MiB));
  let aborted = false;
  const abort = writer.abort().then(() => (aborted = true));
  await new Promise((resolve) => setTimeout(resolve, 20));
  expect(aborted, 'abort returned while a write was still on its way').toBe(false);
  held.open();
  await abort;
  expect(writeSettled, 'the write completed on an open descriptor').toBe(true);
  expect(await readdir(dir)).toEqual([]);
});

describe('an overwrite whose commit fails leaves the older output as it was (its index used to be removed first)', () => {
  /** A committed output of one partition holding `bytes`. */
  const commitOutput = (bytes: Uint8Array, overwrite: boolean) => commitOnePartition(join(dir, 'out'), bytes, overwrite);

  const files = async () => Object.fromEntries(await Promise.all((await readdir(dir)).sort().map(async (name) => [name, Buffer.from(await readFile(join(dir, name))).toString('hex')])));

  test.each([
    // (the first rename that matches fails)
    ['the new index cannot be renamed into place', (from: string, to: string) => from.includes('.index.') && to.endsWith('out.index')],
    ['the new data file cannot be renamed into place', (from: string, to: string) => from.includes('.data.') && to.endsWith('out.data')],
    ['the old data file cannot be moved aside', (from: string) => from.endsWith('out.data')],
  ])('%s: CS_IO, and the old three files are back, byte for byte, with no temporary file left', async (_, fails) => {
    await commitOutput(chunkOf(1, 1000), false);
    const before = await files();
    let failed = false;
    vi.mocked(rename).mockImplementation(async (from, to) => {
      if (!failed && (failed = fails(String(from), String(to)))) throw Object.assign(new Error(`EPERM: operation not permitted, rename '${String(from)}'`), { code: 'EPERM', syscall: 'rename' });
      return realRename(from, to);
    });
    const error = await commitOutput(chunkOf(2, 2000), true).catch((e: unknown) => e);
    expect((error as ShuffleError).code).toBe('CS_IO');
    expect(await files()).toEqual(before);
  });

  test('when it succeeds, the new output replaces the old one and nothing else is left', async () => {
    await commitOutput(chunkOf(1, 1000), false);
    await commitOutput(chunkOf(2, 2000), true);
    expect(await readdir(dir)).toEqual(['out.checksum.CRC32C', 'out.data', 'out.index']);
    expect(Buffer.compare(await readFile(join(dir, 'out.data')), chunkOf(2, 2000))).toBe(0);
  });
});
