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
  /** a memory reservation could not be granted even after spilling everything that could be spilled */
  | 'CS_MEMORY_LIMIT';

/** Where an error happened; every field is optional and only set when known. */
export interface ErrorLocation {
  file?: string;
  partition?: number;
  offset?: number;
  column?: string;
  row?: number;
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
  if (where.file !== undefined) parts.push(`file ${where.file}`);
  if (where.partition !== undefined) parts.push(`partition ${where.partition}`);
  if (where.offset !== undefined) parts.push(`byte offset ${where.offset}`);
  if (where.column !== undefined) parts.push(`column "${where.column}"`);
  if (where.row !== undefined) parts.push(`row ${where.row}`);
  return parts.length === 0 ? message : `${message} (${parts.join(', ')})`;
}

/** Wraps a Node.js file-system error in a `ShuffleError` that names the file. */
export function ioError(action: string, file: string, cause: unknown): ShuffleError {
  const errno = (cause as NodeJS.ErrnoException | undefined)?.code;
  const code: ShuffleErrorCode = errno === 'ENOENT' || errno === 'ENOTDIR' ? 'CS_FILE_NOT_FOUND' : 'CS_IO';
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new ShuffleError(code, `cannot ${action}: ${reason}`, { file }, { cause });
}
