/**
 * Hand-built IPC streams of one non-null int32 column `v`, for tests of the
 * IPC reader's edges: the record-batch messages, reading every batch back or
 * the error it fails with, and reads of a source that record what they read.
 */
import { Field, Int32, Schema, type DataType } from 'apache-arrow';
import { codecByName } from '../../src/format/codec.js';
import { encodeRecordBatchMessage, encodeSchemaMessage } from '../../src/format/ipc-message.js';
import { readIpcSchema, readIpcStream, type IpcReadOptions } from '../../src/format/ipc-reader.js';
import type { ErrorLocation, ShuffleError } from '../../src/errors.js';

export const INT32_SCHEMA = new Schema([new Field('v', new Int32(), false)]);

export const concat = (parts: readonly Uint8Array[]): Uint8Array => new Uint8Array(Buffer.concat(parts));
export const int32Bytes = (values: readonly number[]): Uint8Array => new Uint8Array(Int32Array.from(values).buffer);

/** A record-batch message of the one column holding `values`, compressed with `codec` when given. */
export async function int32Batch(values: readonly number[], codec: 'lz4' | 'zstd' | null = null): Promise<Uint8Array> {
  const message = await encodeRecordBatchMessage(values.length, [{ length: values.length, nullCount: 0 }], [new Uint8Array(0), int32Bytes(values)], codec === null ? null : codecByName(codec));
  return concat(message.chunks);
}

/** The rows of every batch, as arrays of the first column's values. */
export async function readAll(bytes: Uint8Array, where: ErrorLocation = {}, options: IpcReadOptions = {}): Promise<unknown[][]> {
  const out: unknown[][] = [];
  for await (const batch of readIpcStream(bytes, where, options)) out.push([...batch.getChildAt(0)!]);
  return out;
}

/** What reading every batch throws; fails the test when the stream reads. */
export async function failure(bytes: Uint8Array, where: ErrorLocation = {}, options: IpcReadOptions = {}): Promise<ShuffleError> {
  try {
    await readAll(bytes, where, options);
  } catch (error) {
    return error as ShuffleError;
  }
  throw new Error('the stream was read without an error');
}

/** What readIpcSchema throws for a schema of one nullable column of `type`, or null. */
export function schemaFailure(type: DataType): unknown {
  try {
    readIpcSchema(encodeSchemaMessage(new Schema([new Field('v', type, true)])));
  } catch (error) {
    return error;
  }
  return null;
}

/** Reads of `bytes` that record what they read (offset, length), each into memory of its own. */
export function recordedReads(bytes: Uint8Array): { read: (offset: number, length: number) => Promise<Uint8Array>; reads: [number, number][] } {
  const reads: [number, number][] = [];
  const read = async (offset: number, length: number) => {
    reads.push([offset, length]);
    return bytes.slice(offset, offset + length);
  };
  return { read, reads };
}
