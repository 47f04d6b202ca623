import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ShuffleError, ShuffleWriter } from '../src/index.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

// A read-only tmpfs refuses writes even to root, so this runs as CI runs (root) and means it.
let readOnly: string;
let out: string;
beforeAll(async () => {
  readOnly = await makeTempDir('cs-ro-');
  out = await makeTempDir();
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,ro', 'tmpfs', readOnly], { stdio: 'pipe' });
});
afterAll(async () => {
  execFileSync('umount', [readOnly], { stdio: 'pipe' });
  await removeDir(readOnly);
  await removeDir(out);
});

test('a spill directory that is not writable is CS_IO at create(), naming it, and nothing is left behind', async () => {
  const error = await ShuffleWriter.create({
    numPartitions: 2,
    partitioning: { kind: 'round-robin' },
    outputPrefix: join(out, 'x'),
    spillDir: readOnly,
  }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(ShuffleError);
  expect((error as ShuffleError).code).toBe('CS_IO');
  expect((error as ShuffleError).message).toMatch(/spill directory is not writable/);
  expect((error as ShuffleError).where.file).toBe(readOnly);
  expect(await listFiles(out)).toEqual([]);
});

test('an output directory that is not writable is CS_IO at create()', async () => {
  const error = await ShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'round-robin' }, outputPrefix: join(readOnly, 'x') }).catch((e: unknown) => e);
  expect((error as ShuffleError).code).toBe('CS_IO');
});
