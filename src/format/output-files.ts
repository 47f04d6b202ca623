import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, lstat, open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { ioError, ShuffleError } from '../errors.js';
import { removeFile } from '../remove-file.js';
import { runEveryStep } from '../run-every-step.js';
import { writeChunks } from './write-chunks.js';

/**
 * The three files of one shuffle output (one map task):
 *
 * ```text
 * <prefix>.data             partitions 0..P-1 back to back; partition p is a complete
 *                           Arrow IPC stream, or nothing when p received no rows
 * <prefix>.index            (P + 1) int64 big-endian offsets into .data: 0, end of p0, ..., file length
 *                           (Spark's IndexShuffleBlockResolver layout)
 * <prefix>.checksum.CRC32C  P int64 big-endian values: CRC32C of each partition's bytes
 *                           (Spark's checksum file layout; 0 for an empty partition)
 * ```
 */
export interface OutputPaths {
  data: string;
  index: string;
  checksum: string;
}

export const CHECKSUM_ALGORITHM = 'CRC32C';

export function outputPaths(prefix: string): OutputPaths {
  return { data: `${prefix}.data`, index: `${prefix}.index`, checksum: `${prefix}.checksum.${CHECKSUM_ALGORITHM}` };
}

/**
 * Whether a writer writes partition p (a stream, or a sort-writer header and
 * end marker), given what p holds (rows or batches) and whether the output
 * holds nothing at all: a partition with something in it, and partition 0 of
 * an empty output, which keeps the schema (docs/FORMAT.md, "Index file").
 * Every other partition is empty: no bytes.
 */
export function writesPartition(p: number, holds: number, outputEmpty: boolean): boolean {
  return holds > 0 || (p === 0 && outputEmpty);
}

/** Serializes partition lengths as Spark's index file: cumulative offsets, big-endian int64. */
export function encodeIndex(partitionLengths: readonly number[]): Uint8Array {
  const bytes = new Uint8Array((partitionLengths.length + 1) * 8);
  const view = new DataView(bytes.buffer);
  let offset = 0;
  partitionLengths.forEach((length, p) => {
    offset += length;
    view.setBigInt64((p + 1) * 8, BigInt(offset), false);
  });
  return bytes;
}

/** Serializes per-partition checksums as big-endian int64 values. */
export function encodeChecksums(checksums: readonly number[]): Uint8Array {
  const bytes = new Uint8Array(checksums.length * 8);
  const view = new DataView(bytes.buffer);
  checksums.forEach((c, p) => view.setBigInt64(p * 8, BigInt(c >>> 0), false));
  return bytes;
}

/** A CRC32C over a sequence of chunks. */
export function crc32cOf(chunks: Iterable<Uint8Array>, initial = 0): number {
  let crc = initial;
  for (const chunk of chunks) crc = crc32c(chunk, crc);
  return crc >>> 0;
}

const MAX_IOVECS = 512; // chunks gathered before a writev
const WRITE_BYTES = 1 << 20; // bytes gathered before a write

/**
 * Writes the data file partition by partition under a temporary name, then
 * commits all three files by rename (index last: an index file with its final
 * name means the output is complete; an older output is moved aside first, and
 * back if the commit fails). On any failure, and on abort, every temporary
 * file is removed and no file with a final name is left behind.
 *
 * Protocol: `create`, then for p = 0..P-1 in ascending order one
 * `beginPartition(p)`, any number of `append`, one `endPartition()`; then
 * `commit()` or `abort()`. Appended bytes must stay unchanged until a
 * `flush()` (or the commit) has settled.
 *
 * Appended chunks are gathered and written with writev, one write at a time,
 * in the background: `append` starts a write of what it gathered and returns
 * (waiting only for the write before it), so the caller goes on gathering (and
 * waiting for the compressions of the next payloads) while the file system
 * copies. A write that fails is reported by the next `append`, `flush` or `commit`.
 */
export class DataFileWriter {
  readonly paths: OutputPaths;
  private readonly temp: OutputPaths;
  private handle: FileHandle | null;
  private position = 0;
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  /** the write on its way, if any (its bytes are counted in `position` already) */
  private writing: Promise<void> | null = null;
  /** the commit on its way or done, which an abort() waits for */
  private committing: Promise<void> | null = null;
  private partition = -1;
  private partitionStart = 0;
  private crc = 0;
  readonly partitionLengths: number[] = [];
  readonly checksums: number[] = [];

  private constructor(
    paths: OutputPaths,
    temp: OutputPaths,
    handle: FileHandle,
    private readonly overwrite: boolean,
  ) {
    this.paths = paths;
    this.temp = temp;
    this.handle = handle;
  }

  static async create(prefix: string, overwrite = false): Promise<DataFileWriter> {
    const paths = outputPaths(prefix);
    await assertDirectory(dirname(paths.data));
    if (!overwrite && (await exists(paths.index))) {
      throw new ShuffleError('CS_OUTPUT_EXISTS', 'a committed shuffle output already exists here; pass overwrite to replace it', { file: paths.index });
    }
    const tag = randomBytes(6).toString('hex');
    const temp: OutputPaths = {
      data: `${paths.data}.${tag}.tmp`,
      index: `${paths.index}.${tag}.tmp`,
      checksum: `${paths.checksum}.${tag}.tmp`,
    };
    let handle: FileHandle;
    try {
      handle = await open(temp.data, 'wx');
    } catch (cause) {
      throw ioError('create the data file', temp.data, cause);
    }
    return new DataFileWriter(paths, temp, handle, overwrite);
  }

  /** Starts partition p; partitions must come in ascending order, skipping none. */
  beginPartition(p: number): void {
    if (p !== this.partition + 1) throw new Error(`partitions must be written in order: expected ${this.partition + 1}, got ${p}`);
    this.partition = p;
    this.partitionStart = this.position + this.pendingBytes;
    this.crc = 0;
  }

  async append(chunk: Uint8Array): Promise<void> {
    if (chunk.byteLength === 0) return;
    this.crc = crc32c(chunk, this.crc);
    this.pending.push(chunk);
    this.pendingBytes += chunk.byteLength;
    if (this.pending.length >= MAX_IOVECS || this.pendingBytes >= WRITE_BYTES) await this.startWrite();
  }

  /** Appends and writes at once, so the caller may reuse `chunk`'s memory when this returns. */
  async appendNow(chunk: Uint8Array): Promise<void> {
    await this.append(chunk);
    await this.flush();
  }

  endPartition(): void {
    this.partitionLengths.push(this.position + this.pendingBytes - this.partitionStart);
    this.checksums.push(this.crc >>> 0);
  }

  get bytesWritten(): number {
    return this.position + this.pendingBytes;
  }

  /** Writes everything appended so far: the appended chunks' memory may be reused when it returns. */
  async flush(): Promise<void> {
    await this.startWrite();
    await this.writing;
    this.writing = null;
  }

  /** Waits for the write on its way (throwing its error), then starts writing what is gathered. */
  private async startWrite(): Promise<void> {
    await this.writing;
    if (this.pending.length === 0) return;
    const chunks = this.pending;
    const position = this.position;
    this.pending = [];
    this.position += this.pendingBytes;
    this.pendingBytes = 0;
    const handle = this.handle!;
    const path = this.temp.data;
    this.writing = writeChunks(handle, chunks, position).then(
      () => undefined,
      (cause: unknown) => {
        throw ioError('write the data file', path, cause);
      },
    );
    this.writing.catch(() => undefined); // reported where it is awaited next, not as an unhandled rejection
  }

  /** Writes the index and checksum files and renames all three into place. */
  async commit(): Promise<{ partitionLengths: number[]; checksums: number[]; bytesWritten: number }> {
    const committing = (async () => {
      try {
        await this.flush();
        await this.handle!.close();
        this.handle = null;
        await writeWhole(this.temp.checksum, encodeChecksums(this.checksums));
        await writeWhole(this.temp.index, encodeIndex(this.partitionLengths));
        await oneCommitAtATime(resolve(this.paths.index), () => this.renameIntoPlace()); // one key per file, however the prefix was spelled
      } catch (error) {
        await this.removeTemporaryFiles().catch(() => undefined); // why the commit failed is the error to report
        throw error;
      }
    })();
    this.committing = committing;
    await committing;
    return { partitionLengths: this.partitionLengths, checksums: this.checksums, bytesWritten: this.position };
  }

  /**
   * Renames the three files into place, the index (the commit marker) last.
   * An output another writer committed at this prefix since create() is
   * replaced only with `overwrite` (CS_OUTPUT_EXISTS otherwise: create()'s
   * check alone let a second writer of one prefix replace the first's output).
   *
   * An older output is first moved aside under temporary names (its index
   * first, so it stops being committed before its data moves), and put back
   * if any rename fails: a failed replacement left no output at all (its index
   * was removed first). A crash in between leaves an uncommitted output and
   * temporary files, which removeLeftovers cleans, never an old index over new data.
   *
   * ```text
   * old: out.index out.data out.checksum  ->  out.index.<tag>.tmp ... (aside)
   * new: out.data.<tag>.tmp ...           ->  out.data, out.checksum, out.index
   * then the old files aside are removed, or on failure renamed back (index last)
   * ```
   */
  private async renameIntoPlace(): Promise<void> {
    if (!this.overwrite && (await exists(this.paths.index))) {
      throw new ShuffleError('CS_OUTPUT_EXISTS', 'another writer committed a shuffle output here after this one was created; pass overwrite to replace it', { file: this.paths.index });
    }
    const tag = randomBytes(6).toString('hex');
    const aside: [from: string, to: string][] = [];
    const placed: string[] = [];
    try {
      for (const key of ['index', 'data', 'checksum'] as const) {
        const found = await lstat(this.paths[key]).catch(() => null);
        if (found === null) continue;
        // only an output's own files are replaced: a directory in the way stays, and the commit fails
        if (!found.isFile()) throw new ShuffleError('CS_IO', 'cannot replace it: it is not a regular file', { file: this.paths[key] });
        const to = `${this.paths[key]}.${tag}.tmp`;
        const moved = await rename(this.paths[key], to).then(
          () => true,
          (cause: NodeJS.ErrnoException) => {
            if (cause.code === 'ENOENT') return false;
            throw ioError('move the existing shuffle output aside', this.paths[key], cause);
          },
        );
        if (moved) aside.push([this.paths[key], to]);
      }
      for (const key of ['data', 'checksum', 'index'] as const) {
        await rename(this.temp[key], this.paths[key]).catch((cause: unknown) => {
          throw ioError('commit the shuffle output', this.paths[key], cause);
        });
        placed.push(this.paths[key]);
      }
    } catch (error) {
      // a file that cannot be removed must not hide why the commit failed: it is a leftover for removeLeftovers
      await Promise.all(placed.map((path) => rm(path, { force: true }).catch(() => undefined)));
      // back in the reverse order: the index, the commit marker, last
      const stranded: string[] = [];
      for (const [path, movedTo] of aside.reverse()) await rename(movedTo, path).catch(() => stranded.push(movedTo));
      throw stranded.length === 0 ? error : withStranded(error, stranded);
    }
    // committed: a file aside that cannot be removed is a leftover for removeLeftovers, not a failure
    await Promise.all(aside.map(([, movedTo]) => rm(movedTo, { force: true }).catch(() => undefined)));
  }

  /**
   * Closes and removes the temporary files; safe to call more than once. During
   * a commit it comes too late: it waits for the commit, and a commit that
   * succeeds stands (removing its temporary files while they were renamed left
   * either outcome to chance).
   */
  async abort(): Promise<void> {
    if (this.committing !== null && (await this.committing.then(() => true, () => false))) return;
    await this.removeTemporaryFiles();
  }

  private async removeTemporaryFiles(): Promise<void> {
    await this.writing?.catch(() => undefined); // the descriptor must outlive the write on its way
    this.writing = null;
    const handle = this.handle;
    this.handle = null;
    await handle?.close().catch(() => undefined);
    await runEveryStep(Object.values(this.temp).map((path: string) => () => removeFile(path, 'a temporary output file')));
  }
}

/**
 * A failed commit's error, saying where the files of the output it was
 * replacing are when putting them back failed too (a second failed rename):
 * under temporary names, which removeLeftovers would remove.
 */
function withStranded(error: unknown, stranded: readonly string[]): unknown {
  if (!(error instanceof ShuffleError)) return error;
  const told = new ShuffleError(error.code, '', error.where, { cause: error.cause });
  told.message = `${error.message}; the output it was replacing could not be put back either: its files are still at ${stranded.join(', ')} (rename them back by hand; removeLeftovers would remove them)`;
  return told;
}

/** The commits running in this process, by index path: two writers of one prefix commit one after the other, never interleaved. */
const commits = new Map<string, Promise<void>>();

async function oneCommitAtATime(indexPath: string, commit: () => Promise<void>): Promise<void> {
  const before = commits.get(indexPath) ?? Promise.resolve();
  const mine = before.then(commit, commit);
  const settled = mine.catch(() => undefined);
  commits.set(indexPath, settled);
  try {
    await mine;
  } finally {
    if (commits.get(indexPath) === settled) commits.delete(indexPath);
  }
}

async function writeWhole(path: string, bytes: Uint8Array): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(path, 'wx');
    await handle.writeFile(bytes);
  } catch (cause) {
    throw ioError('write', path, cause);
  } finally {
    await handle?.close();
  }
}

/**
 * CS_FILE_NOT_FOUND unless `dir` exists and is a directory, CS_IO unless it is
 * writable (a read-only file system refuses even root); `role` names it ("output", "spill").
 */
export async function assertDirectory(dir: string, role = 'output'): Promise<void> {
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(dir)).isDirectory();
  } catch (cause) {
    throw new ShuffleError('CS_FILE_NOT_FOUND', `the ${role} directory does not exist`, { file: dir }, { cause });
  }
  if (!isDirectory) throw new ShuffleError('CS_FILE_NOT_FOUND', `the ${role} directory is not a directory`, { file: dir });
  try {
    await access(dir, constants.W_OK);
  } catch (cause) {
    throw new ShuffleError('CS_IO', `the ${role} directory is not writable: ${(cause as Error).message}`, { file: dir }, { cause });
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
