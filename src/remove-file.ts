import { unlink } from 'node:fs/promises';
import { ioError } from './errors.js';

/**
 * Removes a file: true when it did, false when the file was already gone; any
 * other failure is CS_IO naming it ("cannot remove <what>: ..."). (fs.rm with
 * `force` hides ENOENT only, and when unlink is refused with EPERM it tries the
 * path as a directory and reports that scan's ENOTDIR.)
 */
export async function removeFile(path: string, what: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw ioError(`remove ${what}`, path, cause);
  }
}
