import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function makeTempDir(prefix = 'cs-test-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export async function listFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).sort();
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}
