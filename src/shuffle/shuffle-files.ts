import { readdir, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { removeLeftovers } from '../cleanup.js';
import { ioError, ShuffleError } from '../errors.js';
import { removeFile } from '../remove-file.js';
import { outputPaths } from '../format/output-files.js';
import { assertMapOutputId, mapOutputPrefix, mapOutputSpillDir, parseMapOutputName, type MapOutputId } from './map-output-id.js';

/** What follows `shuffle_<s>_<m>_<a>` in the names of a map output's files: final, temporary, spill directory. */
const FILE_SUFFIX = /^\.(?:data|index|checksum\.CRC32C)(?:\.[0-9a-f]{12}\.tmp)?$/;
const SPILL_DIR_SUFFIX = '.spill';

export interface ShuffleFilesOptions {
  /** Where the attempts' spill directories are (MapOutputWriterOptions.spillRoot; default: the shuffle directory). */
  spillRoot?: string;
}

/**
 * Removes everything one attempt of a map task left in `dir`, committed or
 * not: its final-named files (the index first, so the output stops being
 * committed before its data goes), its temporary files, and its spill
 * directory with the spill files in it. For an attempt the runner gave up on
 * (it failed, its worker was killed, or it committed but the runner chose
 * another attempt): afterwards nothing of it is left.
 *
 * It must not run while the attempt's writer is alive. Returns the paths
 * removed, sorted. Errors: CS_FILE_NOT_FOUND when `dir` does not exist, CS_IO.
 */
export async function discardMapOutput(dir: string, id: MapOutputId, options: ShuffleFilesOptions = {}): Promise<string[]> {
  assertMapOutputId(id);
  const prefix = mapOutputPrefix(dir, id);
  const paths = outputPaths(prefix);
  const removed: string[] = [];
  for (const path of [paths.index, paths.data, paths.checksum]) if (await removeFile(path, 'a shuffle file')) removed.push(path);
  removed.push(...(await removeLeftovers({ outputPrefix: prefix })));
  removed.push(...(await removeSpillDir(mapOutputSpillDir(options.spillRoot ?? dir, id))));
  return removed.sort();
}

/**
 * Removes every file of shuffle `shuffleId` from `dir` (and its spill
 * directories from `spillRoot`): the committed outputs of every map task and
 * attempt, temporary files, spill directories. For when the job that used the
 * shuffle is done. Files of other shuffles (`shuffle_12_...` is not shuffle 1's)
 * and files whose names are not a map output's are never touched.
 *
 * It must not run while a writer of that shuffle is alive, nor while a reader
 * still reads it. Returns the paths removed, sorted.
 */
export async function removeShuffleFiles(dir: string, shuffleId: number, options: ShuffleFilesOptions = {}): Promise<string[]> {
  if (!(Number.isSafeInteger(shuffleId) && shuffleId >= 0)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `a shuffle id is a whole number >= 0, got ${JSON.stringify(shuffleId)}`);
  }
  const removed: string[] = [];
  const spillRoot = options.spillRoot ?? dir;
  // indexes first: an output stops being committed before its data is removed
  const files = (await entries(dir))
    .filter((e) => e.isFile() && isFileOf(e.name, shuffleId))
    .map((e) => e.name)
    .sort((a, b) => Number(b.endsWith('.index')) - Number(a.endsWith('.index')));
  for (const name of files) if (await removeFile(join(dir, name), 'a shuffle file')) removed.push(join(dir, name));
  for (const e of await entries(spillRoot)) {
    const parsed = e.isDirectory() ? parseMapOutputName(e.name) : null;
    if (parsed !== null && parsed.id.shuffleId === shuffleId && parsed.suffix === SPILL_DIR_SUFFIX) {
      removed.push(...(await removeSpillDir(join(spillRoot, e.name))));
    }
  }
  return removed.sort();
}

function isFileOf(name: string, shuffleId: number): boolean {
  const parsed = parseMapOutputName(name);
  return parsed !== null && parsed.id.shuffleId === shuffleId && FILE_SUFFIX.test(parsed.suffix);
}

/** The spill files in an attempt's spill directory, then the directory if that left it empty. */
export async function removeSpillDir(spillDir: string): Promise<string[]> {
  let removed: string[];
  try {
    removed = await removeLeftovers({ spillDir });
  } catch (error) {
    if (error instanceof ShuffleError && error.code === 'CS_FILE_NOT_FOUND') return [];
    throw error;
  }
  try {
    await rmdir(spillDir);
    removed.push(spillDir);
  } catch (cause) {
    const errno = (cause as NodeJS.ErrnoException).code;
    // ENOTEMPTY: something that is not a spill file is in it; not ours to remove
    if (errno !== 'ENOENT' && errno !== 'ENOTEMPTY' && errno !== 'EEXIST') throw ioError('remove the spill directory', spillDir, cause);
  }
  return removed;
}

async function entries(dir: string) {
  try {
    return await readdir(dir, { withFileTypes: true });
  } catch (cause) {
    const errno = (cause as NodeJS.ErrnoException).code;
    if (errno === 'ENOENT' || errno === 'ENOTDIR') {
      throw new ShuffleError('CS_FILE_NOT_FOUND', 'the shuffle directory does not exist or is not a directory', { file: dir }, { cause });
    }
    throw ioError('list the shuffle directory', dir, cause);
  }
}
