/**
 * A spill or temporary file the file system will not remove fails the write
 * with CS_IO naming it, before anything is committed, and the rest of the
 * teardown still runs: the other files go and the pool gets its memory back.
 * (Here the file is replaced by a non-empty directory, which unlink refuses; the
 * writer keeps reading and writing the file through its open descriptor.)
 *
 * Regression: fs.rm's error, a misleading untyped ENOTDIR, escaped from
 * finish() after the output had been committed, and from abort() before the
 * output's temporary files were removed and the reservation freed.
 */
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { narrowBatch } from '../src/cli/demo-data.js';
import { ShuffleError } from '../src/errors.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { createShuffleWriter, type AnyShuffleWriter, type WriterKind } from '../src/writer-kind.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir = '';
let out = '';
let spill = '';
beforeEach(async () => {
  dir = await makeTempDir();
  out = join(dir, 'out');
  spill = join(dir, 'spill');
  await mkdir(out);
  await mkdir(spill);
});
afterEach(async () => removeDir(dir));

/** A writer under a 1 MiB pool that has spilled. */
async function spilledWriter(kind: WriterKind, pool: MemoryPool): Promise<AnyShuffleWriter> {
  const writer = await createShuffleWriter(kind, { numPartitions: 8, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: join(out, 'o'), spillDir: spill, memoryPool: pool });
  for (let i = 0; (await readdir(spill)).length === 0 || i < 4; i++) {
    if (i === 200) throw new Error('the writer never spilled');
    await writer.write(narrowBatch(4096, i));
  }
  return writer;
}

/** Puts a non-empty directory where the file was: unlink refuses it (EISDIR). */
async function makeUndeletable(path: string): Promise<void> {
  await rm(path);
  await mkdir(path);
  await writeFile(join(path, 'keep'), '');
}

function expectCannotRemove(error: unknown, what: RegExp, file: string): void {
  expect(error).toBeInstanceOf(ShuffleError);
  expect((error as ShuffleError).code).toBe('CS_IO');
  expect((error as ShuffleError).message).toMatch(what);
  expect((error as ShuffleError).where.file).toBe(file);
}

describe.each<WriterKind>(['hash', 'sort'])('the %s writer, when a file cannot be removed', (kind) => {
  test('a spill file: finish() fails with CS_IO naming it, and commits nothing, leaves no output file and frees the pool', async () => {
    const pool = new MemoryPool(1024 * 1024);
    const writer = await spilledWriter(kind, pool);
    const [spillFile] = await listFiles(spill);
    await makeUndeletable(join(spill, spillFile!));

    expectCannotRemove(await writer.finish().catch((e: unknown) => e), /cannot remove a spill file/, join(spill, spillFile!));
    expect(await listFiles(out)).toEqual([]);
    expect(pool.reserved).toBe(0);
    // abort() reports the file still there, and changes nothing else
    expectCannotRemove(await writer.abort().catch((e: unknown) => e), /cannot remove a spill file/, join(spill, spillFile!));
    expect(await listFiles(out)).toEqual([]);
  });

  test('a spill file: abort() fails with CS_IO naming it, after removing the output\'s temporary files and freeing the pool', async () => {
    const pool = new MemoryPool(1024 * 1024);
    const writer = await spilledWriter(kind, pool);
    const [spillFile] = await listFiles(spill);
    await makeUndeletable(join(spill, spillFile!));
    expect((await listFiles(out)).length).toBeGreaterThan(0); // the temporary data file

    expectCannotRemove(await writer.abort().catch((e: unknown) => e), /cannot remove a spill file/, join(spill, spillFile!));
    expect(await listFiles(out)).toEqual([]);
    expect(pool.reserved).toBe(0);
  });

  test('a temporary output file: abort() fails with CS_IO naming it, after removing the spill file and freeing the pool', async () => {
    const pool = new MemoryPool(1024 * 1024);
    const writer = await spilledWriter(kind, pool);
    const [temp] = await listFiles(out);
    expect(temp).toMatch(/^o\.data\.[0-9a-f]{12}\.tmp$/);
    await makeUndeletable(join(out, temp!));

    expectCannotRemove(await writer.abort().catch((e: unknown) => e), /cannot remove a temporary output file/, join(out, temp!));
    expect(await listFiles(spill)).toEqual([]);
    expect(pool.reserved).toBe(0);
  });
});
