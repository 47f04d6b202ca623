import { randomBytes } from 'node:crypto';
import { constants, open as openFd } from 'node:fs';
import { lstat, open, readlink, realpath, rename, rm, stat } from 'node:fs/promises';
import { Socket } from 'node:net';
import { basename, dirname, join, resolve } from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Schema, type RecordBatch } from 'apache-arrow';
import { ioError, ShuffleError } from '../errors.js';
import { outputPaths, type OutputPaths } from '../format/output-files.js';
import { encodeSchemaMessage, END_OF_STREAM } from '../format/ipc-message.js';
import { tableToIpcStream } from '../format/table-to-ipc.js';
import { ShuffleReader } from '../reader/shuffle-reader.js';
import { integerOption, parseCommandArgs, pathOption, requiredOption, requiredPositional, UsageError } from './args.js';
import { bytes, count, EXIT_OK, plural, isTTY, throwIfInterrupted, writeLine, type CliContext } from './context.js';
import { frameOf } from './ipc-frames.js';

const OPTIONS = {
  partition: { type: 'string', short: 'P' },
  output: { type: 'string', short: 'o' },
  help: { type: 'boolean', short: 'h' },
} as const;

export async function readCommand(args: string[], ctx: CliContext): Promise<number> {
  const parsed = parseCommandArgs('read', args, OPTIONS, 1);
  const prefix = requiredPositional(parsed, 0, 'the shuffle output <prefix>', 'read');
  const partition = integerOption(requiredOption(parsed, 'partition', 'read'), 'partition', 'read', 0)!;
  const output = pathOption(parsed, 'output', 'read');
  if (output === undefined && isTTY(ctx.stdout)) {
    throw new UsageError('refusing to write binary Arrow data to a terminal: give --output FILE or pipe stdout', 'read');
  }

  const reader = await ShuffleReader.open(prefix);
  try {
    if (partition >= reader.numPartitions) {
      const which = reader.numPartitions === 1 ? 'only partition 0' : `partitions 0 to ${reader.numPartitions - 1}`;
      throw new UsageError(`--partition ${partition} does not exist: ${prefix} has ${which}`, 'read');
    }
    const batches = reader.readPartition(partition);
    const first = await batches.next();
    let schema = first.done ? await reader.schema() : first.value.schema;
    if (schema === null) {
      // (an output without rows keeps its schema in partition 0 since 2026-12-07; an older one, or another
      // writer's, may not.) Still a stream, so that `read -o FILE && use FILE` holds: no rows, and no columns
      writeLine(ctx.stderr, `columnar-shuffle: every partition of ${prefix} is empty and it stores no schema (it was written before 2026-12-07): the stream has no columns`);
      schema = new Schema([]);
    }
    const stats = { rows: 0, batches: 0, bytes: 0 };
    const stream = ipcStream(schema, first.done ? [] : [first.value], batches, stats, ctx.signal);
    if (output === undefined) {
      try {
        await pipeline(Readable.from(stream, { objectMode: false }), ctx.stdout, { end: false });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EPIPE') return EXIT_OK; // e.g. `| head`: the reader has seen enough
        // file-system errors carry a syscall (a full disk); anything else (a damaged partition) passes through
        throw (error as NodeJS.ErrnoException).syscall !== undefined ? ioError('write to stdout', '<stdout>', error) : error;
      }
      return EXIT_OK;
    }
    await writeOutputFile(output, outputPaths(prefix), stream, ctx);
    writeLine(ctx.stdout, `partition ${partition}: ${count(stats.rows)} rows in ${plural(stats.batches, 'batch', 'batches')} -> ${output} (${bytes(stats.bytes)})`);
    return EXIT_OK;
  } finally {
    await reader.close();
  }
}

/** The partition as one uncompressed IPC stream: schema message, record-batch messages, end-of-stream marker. */
async function* ipcStream(
  schema: Schema,
  head: RecordBatch[],
  rest: AsyncIterable<RecordBatch>,
  stats: { rows: number; batches: number; bytes: number },
  signal: AbortSignal,
): AsyncGenerator<Uint8Array> {
  const emit = (chunk: Uint8Array) => {
    stats.bytes += chunk.byteLength;
    return chunk;
  };
  yield emit(encodeSchemaMessage(schema));
  for (const batches of [head, rest]) {
    for await (const batch of batches) {
      throwIfInterrupted(signal);
      stats.rows += batch.numRows;
      stats.batches++;
      yield emit(batchMessages(batch));
    }
  }
  yield emit(END_OF_STREAM);
}

/** arrow-js encodes the batch as a whole stream (schema, batch, EOS); keep what lies between. */
function batchMessages(batch: RecordBatch): Uint8Array {
  const whole = tableToIpcStream(batch);
  const frame = frameOf(whole.subarray(0, 8));
  if (frame.kind !== 'message') throw new Error('arrow-js wrote a stream without a schema message');
  return whole.subarray(frame.prefixLength + frame.metadataLength, whole.byteLength - END_OF_STREAM.byteLength);
}

/**
 * Writes `--output`: a regular file (or a new one) under a temporary name
 * then renamed, so it is either complete or untouched, with the mode the
 * file had; through a symbolic link, the file it points at (created when it
 * is not there yet); a FIFO, a device or a socket as it is (the rename
 * replaced /dev/null with a regular file). Never one of the shuffle output's
 * own files.
 */
async function writeOutputFile(path: string, own: OutputPaths, chunks: AsyncIterable<Uint8Array>, ctx: CliContext): Promise<void> {
  const target = await linkTarget(path);
  const ownFiles = await Promise.all([own.data, own.index, own.checksum].map((file) => realpath(file).catch(() => resolve(file))));
  if (ownFiles.includes(target)) throw new UsageError(`--output ${path} is a file of the shuffle output itself`, 'read');
  const found = await stat(target).catch(() => null);
  if (found?.isDirectory()) throw new ShuffleError('CS_IO', 'cannot write the output file: it is a directory', { file: path });
  if (found?.isFIFO()) return writeToFifo(target, chunks, ctx.signal);
  if (found !== null && !found.isFile()) return writeInPlace(target, chunks, ctx.signal);
  return writeFileAtomically(target, chunks, ctx, found === null ? undefined : found.mode & 0o7777);
}

/**
 * The file `path` names once its symbolic links are followed, also when the
 * last one points at a file that is not there yet (realpath fails then: the
 * link itself was replaced by the rename, and its target never written).
 */
async function linkTarget(path: string): Promise<string> {
  const real = await realpath(path).catch(() => null);
  if (real !== null) return real;
  let current = resolve(path);
  for (let hops = 0; hops < 40; hops++) {
    const link = await lstat(current).catch(() => null);
    if (link === null || !link.isSymbolicLink()) {
      // not there yet: its directory as realpath gives it, so that the own-files check compares like with like
      const directory = await realpath(dirname(current)).catch(() => dirname(current));
      return join(directory, basename(current));
    }
    current = resolve(dirname(current), await readlink(current));
  }
  throw new ShuffleError('CS_IO', 'cannot write the output file: too many levels of symbolic links', { file: path });
}

async function writeInPlace(path: string, chunks: AsyncIterable<Uint8Array>, signal: AbortSignal): Promise<void> {
  let handle;
  try {
    handle = await open(path, 'w');
  } catch (cause) {
    throw ioError('open the output file', path, cause);
  }
  await writeAll(handle.createWriteStream(), chunks, path, signal);
}

/** How long a FIFO with no reader waits between attempts to open it. */
const FIFO_RETRY_MS = 50;

/**
 * Writes into a FIFO once something reads it. A plain open() of a FIFO
 * without a reader blocks a libuv thread until one comes, and a process with
 * such a thread cannot exit: no signal ended the command. Opened
 * non-blocking, it fails with ENXIO until a reader comes, so the signal is
 * looked at between tries; the writes then go through a pipe stream, which
 * waits for a full pipe on the event loop, not in a thread.
 */
async function writeToFifo(path: string, chunks: AsyncIterable<Uint8Array>, signal: AbortSignal): Promise<void> {
  let fd: number | undefined;
  while (fd === undefined) {
    throwIfInterrupted(signal);
    try {
      fd = await openFile(path, constants.O_WRONLY | constants.O_NONBLOCK);
    } catch (cause) {
      if ((cause as NodeJS.ErrnoException).code !== 'ENXIO') throw ioError('open the output file', path, cause);
      await sleep(FIFO_RETRY_MS, undefined, { signal }).catch(() => undefined);
    }
  }
  const pipe = new Socket({ fd, readable: false, writable: true });
  try {
    await writeAll(pipe, chunks, path, signal);
  } finally {
    pipe.destroy();
  }
}

const openFile = promisify(openFd);

/**
 * Writes `chunks` into `sink` (ended, and a file stream's handle closed, at the end); an aborted `signal`
 * stops it (Interrupted); file-system errors carry a syscall, anything else (a damaged partition) passes through.
 */
async function writeAll(sink: Writable, chunks: AsyncIterable<Uint8Array>, path: string, signal: AbortSignal): Promise<void> {
  try {
    await pipeline(Readable.from(chunks, { objectMode: false }), sink, { signal });
  } catch (cause) {
    throwIfInterrupted(signal);
    throw (cause as NodeJS.ErrnoException).syscall !== undefined ? ioError('write the output file', path, cause) : cause;
  }
}

/**
 * Writes under a temporary name and renames, so FILE is either complete or
 * untouched; `mode`: the permissions of the file it replaces, kept (a
 * private file stays private). The temporary name is in
 * `ctx.temporaryFiles` meanwhile, for a second signal to remove it.
 */
async function writeFileAtomically(path: string, chunks: AsyncIterable<Uint8Array>, ctx: CliContext, mode: number | undefined): Promise<void> {
  const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const { temporaryFiles } = ctx;
  temporaryFiles.add(temp);
  let handle;
  try {
    try {
      handle = await open(temp, 'wx', mode ?? 0o666);
    } catch (cause) {
      throw ioError('create the output file', path, cause);
    }
    try {
      if (mode !== undefined) await handle.chmod(mode);
      await writeAll(handle.createWriteStream(), chunks, path, ctx.signal);
      await rename(temp, path).catch((cause: unknown) => {
        throw ioError('rename the output file into place', path, cause);
      });
    } catch (error) {
      await handle.close().catch(() => undefined); // (writeAll closes it, but not a chmod that failed)
      await rm(temp, { force: true });
      throw error;
    }
  } finally {
    temporaryFiles.delete(temp);
  }
}
