/**
 * Every error this library throws is a `ShuffleError` with a stable, machine-readable `code`
 * and a `where` that says what it was about (file, partition, byte offset, column, row).
 * Codes never change meaning; scripts and job runners may switch on them.
 */
export type ShuffleErrorCode =
  /** an option or argument is out of its domain (partitions < 1, unknown codec, ...) */
  | 'CS_INVALID_ARGUMENT'
  /** a key column named by the caller does not exist in the schema */
  | 'CS_UNKNOWN_COLUMN'
  /** a column's Arrow type cannot be shuffled (yet) */
  | 'CS_UNSUPPORTED_TYPE'
  /** a key column's Arrow type cannot be hashed */
  | 'CS_UNSUPPORTED_KEY_TYPE'
  /** a batch's schema differs from the writer's schema */
  | 'CS_SCHEMA_MISMATCH'
  /** a precomputed partition id is null, negative or >= numPartitions */
  | 'CS_PARTITION_ID_OUT_OF_RANGE'
  /** the writer was used after finish() or abort() */
  | 'CS_WRITER_CLOSED'
  /** write() or finish() was called while another write() or finish() of the same writer was still running (one call at a time) */
  | 'CS_WRITER_BUSY'
  /** an input file is not an Arrow IPC file or stream */
  | 'CS_INPUT_NOT_ARROW'
  /** a file or directory to read or write does not exist or cannot be accessed */
  | 'CS_FILE_NOT_FOUND'
  /** a committed output already exists at the prefix and `overwrite` was not asked for */
  | 'CS_OUTPUT_EXISTS'
  /** an I/O operation failed (disk full, permission, device error) */
  | 'CS_IO'
  /** stored bytes do not match their checksum */
  | 'CS_CHECKSUM_MISMATCH'
  /** stored bytes are not a valid shuffle output (bad index, malformed IPC, bad compression) */
  | 'CS_CORRUPT_DATA'
  /** a compressed buffer uses a codec this build cannot decode */
  | 'CS_UNSUPPORTED_CODEC'
  /** a partition is longer than one buffer can be on this Node.js (`buffer.constants.MAX_LENGTH`), and was asked for in one (`ShuffleReader.partitionBytes`); `readPartition` reads it a message at a time */
  | 'CS_PARTITION_TOO_LARGE'
  /** a memory reservation could not be granted even after spilling everything that could be spilled */
  | 'CS_MEMORY_LIMIT'
  /** a reduce-side reader waited longer than its timeout for map outputs that were not committed */
  | 'CS_MAP_OUTPUT_TIMEOUT'
  /** a map output a reader waits for will never come: its shuffle was failed or unregistered */
  | 'CS_MAP_OUTPUT_FAILED'
  /** a map task's own code (its transform, its input) threw an error that is not a ShuffleError; `cause` holds it */
  | 'CS_MAP_TASK_FAILED'
  /** the worker thread running a map task exited (terminated, crashed) before the task finished */
  | 'CS_WORKER_EXITED'
  /** the operation was cancelled through its AbortSignal or by closing what ran it */
  | 'CS_ABORTED';

/** Where an error happened; every field is optional and only set when known. */
export interface ErrorLocation {
  file?: string;
  partition?: number;
  offset?: number;
  column?: string;
  row?: number;
  /** the map output concerned: shuffle id, map id, attempt number */
  shuffle?: number;
  map?: number;
  attempt?: number;
}

export class ShuffleError extends Error {
  override name = 'ShuffleError';
  readonly code: ShuffleErrorCode;
  readonly where: ErrorLocation;

  constructor(code: ShuffleErrorCode, message: string, where: ErrorLocation = {}, options?: { cause?: unknown }) {
    super(withLocation(message, where), options);
    this.code = code;
    this.where = where;
  }
}

function withLocation(message: string, where: ErrorLocation): string {
  const parts: string[] = [];
  if (where.shuffle !== undefined) parts.push(`shuffle ${where.shuffle}`);
  if (where.map !== undefined) parts.push(`map ${where.map}`);
  if (where.attempt !== undefined) parts.push(`attempt ${where.attempt}`);
  if (where.file !== undefined) parts.push(`file ${where.file}`);
  if (where.partition !== undefined) parts.push(`partition ${where.partition}`);
  if (where.offset !== undefined) parts.push(`byte offset ${where.offset}`);
  if (where.column !== undefined) parts.push(`column "${where.column}"`);
  if (where.row !== undefined) parts.push(`row ${where.row}`);
  return parts.length === 0 ? message : `${message} (${parts.join(', ')})`;
}

/**
 * `error` with the map output it concerns added to its location (an error a
 * map task's worker raised, passed on by the pool): the same code, cause and
 * stack, the ids appended to its message unless it had them.
 */
export function atMapOutput(error: ShuffleError, id: { shuffle: number; map: number; attempt: number }): ShuffleError {
  if (error.where.shuffle !== undefined) return error;
  const located = new ShuffleError(error.code, '', { ...id, ...error.where }, { cause: error.cause });
  located.message = `${error.message} (shuffle ${id.shuffle}, map ${id.map}, attempt ${id.attempt})`;
  if (error.stack !== undefined) located.stack = error.stack;
  return located;
}

/** Wraps a Node.js file-system error in a `ShuffleError` that names the file. */
export function ioError(action: string, file: string, cause: unknown): ShuffleError {
  const errno = (cause as NodeJS.ErrnoException | undefined)?.code;
  const code: ShuffleErrorCode = errno === 'ENOENT' || errno === 'ENOTDIR' ? 'CS_FILE_NOT_FOUND' : 'CS_IO';
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new ShuffleError(code, `cannot ${action}: ${reason}`, { file }, { cause });
}

/** An error as plain data, so that it can cross a thread (postMessage) or process boundary. */
export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
  code?: string;
  where?: ErrorLocation;
  cause?: SerializedError;
}

/** Turns any thrown value into plain data; a ShuffleError keeps its code and location, causes are kept 4 deep. */
export function serializeError(error: unknown, depth = 4): SerializedError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const out: SerializedError = { name: error.name, message: error.message };
  if (error.stack !== undefined) out.stack = error.stack;
  if (error instanceof ShuffleError) {
    out.code = error.code;
    out.where = { ...error.where };
  }
  if (error.cause !== undefined && depth > 1) out.cause = serializeError(error.cause, depth - 1);
  return out;
}

/**
 * Rebuilds an error from serializeError's data: a ShuffleError (same code, location and
 * message) when it had a `CS_` code, a plain Error otherwise; name, stack and causes are kept.
 */
export function deserializeError(data: SerializedError): Error {
  const cause = data.cause === undefined ? undefined : deserializeError(data.cause);
  const options = cause === undefined ? undefined : { cause };
  let error: Error;
  if (typeof data.code === 'string' && data.code.startsWith('CS_')) {
    // the message already names the location: build without one, then attach it
    error = new ShuffleError(data.code as ShuffleErrorCode, data.message, {}, options);
    Object.defineProperty(error, 'where', { value: { ...data.where }, enumerable: true });
  } else {
    error = new Error(data.message, options);
  }
  error.name = data.name;
  if (data.stack !== undefined) error.stack = data.stack;
  return error;
}
