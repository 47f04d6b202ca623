import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';

export async function makeTempDir(prefix = 'cs-test-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export async function listFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).sort();
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/**
 * A temporary directory for each test, with TMPDIR (so os.tmpdir()) pointed at its `tmp` subdirectory
 * while the test runs, for code that makes temporary directories of its own (the CLI's demo): removed
 * after each test, TMPDIR restored. Returns the current test's directory.
 */
export function tempDirWithOwnTmpdirEachTest(prefix: string): () => string {
  let dir = '';
  let savedTmpdir: string | undefined;
  beforeEach(async () => {
    dir = await makeTempDir(prefix);
    savedTmpdir = process.env.TMPDIR;
    process.env.TMPDIR = join(dir, 'tmp');
    await mkdir(join(dir, 'tmp'));
  });
  afterEach(async () => {
    if (savedTmpdir === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmpdir;
    await removeDir(dir);
  });
  return () => dir;
}
