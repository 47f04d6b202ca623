/**
 * removeLeftovers when a leftover cannot be removed: every other one is still
 * removed, and the error (CS_IO, naming the first that failed) says how many
 * failed and how many went. (Failures are injected: as root, a file's
 * permissions cannot keep unlink from it.)
 */
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { ioError } from '../src/errors.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

vi.mock('../src/remove-file.js', async (original) => {
  const real = await original<typeof import('../src/remove-file.js')>();
  return {
    removeFile: async (path: string, what: string) => {
      if (path.includes('stuck')) throw ioError(`remove ${what}`, path, Object.assign(new Error(`EACCES: permission denied, unlink '${path}'`), { code: 'EACCES' }));
      return real.removeFile(path, what);
    },
  };
});

const { removeLeftovers } = await import('../src/cleanup.js');

let dir = '';
beforeEach(async () => (dir = await makeTempDir('cs-cleanup-')));
afterEach(async () => removeDir(dir));

test('two leftovers that cannot be removed among four: the other two go, and CS_IO names the first and counts them (it stopped at the first)', async () => {
  const names = ['a.data.0123456789ab.tmp', 'b-stuck.data.0123456789ab.tmp', 'c-stuck.index.0123456789ab.tmp', 'd.index.0123456789ab.tmp'];
  for (const name of names) await writeFile(join(dir, name), 'x');
  await expect(removeLeftovers({ outputDir: dir })).rejects.toMatchObject({
    code: 'CS_IO',
    message: expect.stringContaining('cannot remove 2 of the 4 leftover files (2 removed); the first: EACCES'),
    where: { file: join(dir, names[1]!) },
  });
  expect((await readdir(dir)).sort()).toEqual([names[1], names[2]]);
});
