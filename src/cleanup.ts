import { lstat, readdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ioError, ShuffleError } from './errors.js';
import { outputPaths } from './format/output-files.js';
import { removeFile } from './remove-file.js';

/** What {@link removeLeftovers} is asked to clean; at least one field must be given. */
export interface LeftoverLocations {
  /**
   * The `outputPrefix` of one writer (one map task): removes that output's
   * temporary files (`<prefix>.data.<12 hex>.tmp`, `<prefix>.index.<12 hex>.tmp`,
   * `<prefix>.checksum.CRC32C.<12 hex>.tmp`) and an incomplete committed output:
   * `<prefix>.data` and/or `<prefix>.checksum.CRC32C` when `<prefix>.index` does
   * not exist (the writer died between its renames; the index is the commit marker).
   */
  outputPrefix?: string;
  /**
   * A directory of shuffle outputs: removes every output temporary file in it
   * (`<any prefix>.data|index|checksum.CRC32C.<12 hex>.tmp`). Final-named files
   * are never touched in this mode: only `outputPrefix` says which output is meant.
   */
  outputDir?: string;
  /** A writer's spill directory: removes every spill file in it (`columnar-shuffle-spill-<16 hex>.tmp`). */
  spillDir?: string;
}

/** `<kind>.<12 lowercase hex>.tmp`, after `<prefix>.`: the temporary names of DataFileWriter. */
const OUTPUT_TEMP_SUFFIX = /^(?:data|index|checksum\.CRC32C)\.[0-9a-f]{12}\.tmp$/;
/** A whole output temporary file name in a directory, any prefix. */
const OUTPUT_TEMP_NAME = /^.+\.(?:data|index|checksum\.CRC32C)\.[0-9a-f]{12}\.tmp$/;
/** SpillFile's names. */
const SPILL_NAME = /^columnar-shuffle-spill-[0-9a-f]{16}\.tmp$/;

/**
 * The documented cleanup call for what a killed writer process leaves behind
 * (a writer that fails or is aborted removes its own files; one that is killed
 * cannot). Call it before retrying a map task, like Spark's retry of a task
 * attempt, or when a worker starts up.
 *
 * Removes, for each location given (see {@link LeftoverLocations}):
 * - `outputPrefix`: that output's temporary files, and its data and checksum
 *   files when no index file with the final name exists (a crash between the
 *   commit's renames: data, then checksum, then index);
 * - `outputDir`: every output temporary file in the directory;
 * - `spillDir`: every spill file in the directory.
 *
 * Never removes a committed output (an index file with its final name exists:
 * the three files stay, whatever else is there) nor any file whose name does not
 * match exactly (12 or 16 lowercase hex digits, the exact kinds, `.tmp`); only
 * regular files are removed, never directories or symbolic links.
 *
 * It must not run while a writer uses the same prefix or directories: it would
 * delete that writer's files, and could see a commit half done.
 *
 * Returns the paths removed, sorted. Errors are `ShuffleError`s:
 * `CS_INVALID_ARGUMENT` when no location is given or `outputPrefix` ends in a
 * path separator, `CS_FILE_NOT_FOUND` when a
 * directory (`outputDir`, `spillDir`, or the prefix's directory) does not exist
 * or is not a directory (a mistyped path is reported, not taken as "nothing to
 * clean"), `CS_IO` when a file cannot be listed or removed (every other
 * file is still removed first; the error says how many were).
 */
export async function removeLeftovers(locations: LeftoverLocations): Promise<string[]> {
  const { outputPrefix, outputDir, spillDir } = locations ?? {};
  if (outputPrefix === undefined && outputDir === undefined && spillDir === undefined) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', 'removeLeftovers needs an outputPrefix, an outputDir or a spillDir');
  }
  for (const [name, value] of Object.entries({ outputPrefix, outputDir, spillDir })) {
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `removeLeftovers: ${name} must be a non-empty path, got ${JSON.stringify(value)}`);
    }
  }
  // the writer refuses such a prefix too: it names no output, and the directory's own hidden `.data` would be taken for one
  if (outputPrefix !== undefined && /[/\\]$/.test(outputPrefix)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `removeLeftovers: outputPrefix names a directory ('${outputPrefix}'): give the prefix of an output in it, or pass it as outputDir`);
  }
  const doomed = new Set<string>();
  if (outputPrefix !== undefined) {
    const dir = dirname(outputPrefix);
    const base = basename(outputPrefix);
    for (const name of await regularFiles(dir, 'output')) {
      if (name.startsWith(`${base}.`) && OUTPUT_TEMP_SUFFIX.test(name.slice(base.length + 1))) doomed.add(join(dir, name));
    }
    const paths = outputPaths(outputPrefix);
    if (!(await exists(paths.index))) {
      for (const path of [paths.data, paths.checksum]) if (await isRegularFile(path)) doomed.add(path);
    }
  }
  if (outputDir !== undefined) {
    for (const name of await regularFiles(outputDir, 'output')) if (OUTPUT_TEMP_NAME.test(name)) doomed.add(join(outputDir, name));
  }
  if (spillDir !== undefined) {
    for (const name of await regularFiles(spillDir, 'spill')) if (SPILL_NAME.test(name)) doomed.add(join(spillDir, name));
  }
  const removed: string[] = [];
  const failures: ShuffleError[] = [];
  // every file is tried, also after one that cannot be removed; a file gone meanwhile is not ours to report
  for (const path of [...doomed].sort()) {
    try {
      if (await removeFile(path, 'a leftover file')) removed.push(path);
    } catch (error) {
      failures.push(error as ShuffleError);
    }
  }
  if (failures.length > 0) {
    const first = failures[0]!;
    const why = first.cause instanceof Error ? first.cause.message : first.message;
    throw new ShuffleError('CS_IO', `cannot remove ${failures.length} of the ${doomed.size} leftover files (${removed.length} removed); the first: ${why}`, first.where, { cause: first });
  }
  return removed;
}

/** Names of the regular files in `dir`; CS_FILE_NOT_FOUND when it is missing or not a directory. */
async function regularFiles(dir: string, role: string): Promise<string[]> {
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return entries.filter((e) => e.isFile()).map((e) => e.name);
  } catch (cause) {
    const errno = (cause as NodeJS.ErrnoException).code;
    if (errno === 'ENOENT' || errno === 'ENOTDIR') {
      throw new ShuffleError('CS_FILE_NOT_FOUND', `the ${role} directory does not exist or is not a directory`, { file: dir }, { cause });
    }
    throw ioError(`list the ${role} directory`, dir, cause);
  }
}

/** Whether anything (file, directory, link) has this name. */
async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw ioError('look at', path, cause);
  }
}

async function isRegularFile(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isFile();
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw ioError('look at', path, cause);
  }
}
