import type { RecordBatch } from 'apache-arrow';
import { ShuffleError, type ErrorLocation } from '../errors.js';
import { readIpcStreamAt, type IpcReadOptions } from '../format/ipc-reader.js';
import { crc32cOf } from '../format/output-files.js';
import { isRowPartition } from '../sort-writer/row-format.js';
import { readRowPartitionAt, type RowHeaderCache } from '../sort-writer/row-reader.js';
import type { SchemaMessageCache } from '../format/schema-message-cache.js';
import type { CheckedSource } from './checked-source.js';

/**
 * A partition too long to hold whole (OpenOptions.wholePartitionBytes) is
 * read in two passes of bounded memory:
 *
 * 1. its CRC32C (checksumOf), over reads of up to CHECKSUM_CHUNK_BYTES into
 *    one buffer, so a damaged partition still yields no row
 *    (ShuffleReader.verifyPartition);
 * 2. its batches, a message (or a row block) at a time: the one handed out
 *    and the next one are held, each in memory of its own (this function).
 *
 * The bytes are read twice. That is the price of the promise that a
 * partition is verified before its first batch: a partition this long is
 * rare (a skewed key, or `single` partitioning), and reading it whole needed
 * its length in one buffer, which Node cannot give past 4 GiB.
 */
export async function* readStreamedPartition(
  source: CheckedSource,
  start: number,
  length: number,
  where: ErrorLocation,
  options: IpcReadOptions,
  headers: { rows: RowHeaderCache; schemas: SchemaMessageCache },
): AsyncGenerator<RecordBatch> {
  const read = (offset: number, bytes: number) => source.read(offset, bytes);
  const head = await source.read(start, Math.min(4, length));
  yield* isRowPartition(head) ? readRowPartitionAt(read, start, length, where, options, headers.rows) : readIpcStreamAt(read, start, length, where, options, headers.schemas);
}

/** CS_CHECKSUM_MISMATCH, located by `where`, unless the partition's bytes have the CRC32C the checksum file gives. */
export function assertChecksum(actual: number, expected: number, where: ErrorLocation): void {
  if (actual !== expected) {
    throw new ShuffleError('CS_CHECKSUM_MISMATCH', `partition bytes have CRC32C ${hex(actual)}, the checksum file says ${hex(expected)}`, where);
  }
}

/** Bytes read per call when a streamed partition's checksum is computed: one buffer of this size, reused (when the source can read into one). */
export const CHECKSUM_CHUNK_BYTES = 8 * 1024 * 1024;

/** The CRC32C of the `length` bytes at `start`, over reads of up to CHECKSUM_CHUNK_BYTES (into one buffer, when the source can read into one). */
export async function checksumOf(source: CheckedSource, start: number, length: number): Promise<number> {
  const buffer = source.readInto === undefined ? null : new Uint8Array(Math.min(length, CHECKSUM_CHUNK_BYTES));
  let crc = 0;
  for (let done = 0; done < length; ) {
    const size = Math.min(length - done, CHECKSUM_CHUNK_BYTES);
    let chunk: Uint8Array;
    if (buffer === null) {
      chunk = await source.read(start + done, size);
    } else {
      chunk = buffer.subarray(0, size);
      await source.readInto!(start + done, chunk);
    }
    crc = crc32cOf([chunk], crc);
    done += size;
  }
  return crc;
}

function hex(n: number): string {
  return `0x${(n >>> 0).toString(16).padStart(8, '0')}`;
}
