import { unlink } from 'node:fs/promises';
import { ioError } from './errors.js';

/**
 * Removes a file; one already gone is fine, any other failure is CS_IO naming
 * it. (fs.rm with `force` hides ENOENT only, and when unlink is refused with
 * EPERM it tries the path as a directory and reports that scan's ENOTDIR.)
 */
export async function removeFile(path: string, what: string): Promise<void> {
  try {
    await unlink(path);
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw ioError(`remove ${what}`, path, cause);
  }
}

/**
 * Runs every step of a teardown in order, each one also when a step before it
 * failed (a spill file that cannot be deleted must not keep the output's
 * temporary files or the pool's memory), then throws the first failure.
 */
export async function runEveryStep(steps: readonly (() => unknown)[]): Promise<void> {
  let failure: { error: unknown } | null = null;
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      failure ??= { error };
    }
  }
  if (failure !== null) throw failure.error;
}
