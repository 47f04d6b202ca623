import type { Schema } from 'apache-arrow';
import { ShuffleError, type ErrorLocation } from '../errors.js';
import { codecByName, type Codec, type CodecName } from '../format/codec.js';
import { CONTINUATION_MARKER, encodeSchemaMessage } from '../format/ipc-message.js';
import { readIpcSchema } from '../format/ipc-reader.js';

/**
 * The byte range of one partition written by the sort writer (docs/FORMAT.md,
 * "Sort writer partitions"). It starts with a magic number where an Arrow IPC
 * stream starts with FF FF FF FF, so a reader tells the two apart from the
 * first four bytes.
 *
 * ```text
 * partition := header | block* | end
 * header    := 43 53 52 57 ("CSRW") | u8 version (1) | u8 codec | u16 LE 0 | schema message
 *              codec: 0 none, 1 LZ4 frame, 2 Zstandard
 *              schema message: an encapsulated Arrow IPC schema message,
 *              FF FF FF FF | int32 LE metadataSize | flatbuffer padded to metadataSize
 * block     := u32 LE rowCount (>= 1) | u32 LE rawLength | u32 LE storedLength | stored bytes
 *              storedLength < rawLength: one frame of the codec (LZ4 frame or Zstandard frame)
 *                                        that decompresses to rawLength bytes of rows
 *              storedLength = rawLength: the rows as they are (codec none, fewer rows than the
 *                                        compression threshold, or compression did not shrink them)
 *              the rows: rowCount compact rows (row-layout.ts) back to back
 * end       := u32 LE 0
 * ```
 * Blocks never split a row and never mix partitions; the writer closes a
 * block at a partition boundary (as Gluten's sort writer flushes its
 * compressed stream per partition), at maxBatchRows rows, or before it would
 * exceed its byte size. A reader turns each block into one RecordBatch.
 */
export const ROW_MAGIC: readonly number[] = [0x43, 0x53, 0x52, 0x57];
export const ROW_FORMAT_VERSION = 1;
/** magic, version, codec, reserved */
export const ROW_PREAMBLE_BYTES = 8;
export const BLOCK_HEADER_BYTES = 12;
export const ROW_END: Uint8Array = new Uint8Array(4);

const CODEC_IDS: Record<CodecName, number> = { none: 0, lz4: 1, zstd: 2 };
const CODEC_BY_ID: readonly CodecName[] = ['none', 'lz4', 'zstd'];

/** Whether a partition's bytes are a sort-writer partition (else they should be an Arrow IPC stream). */
export function isRowPartition(bytes: Uint8Array): boolean {
  return bytes.byteLength >= 4 && bytes[0] === ROW_MAGIC[0] && bytes[1] === ROW_MAGIC[1] && bytes[2] === ROW_MAGIC[2] && bytes[3] === ROW_MAGIC[3];
}

/** The header every non-empty partition of one output starts with. */
export function encodeRowPartitionHeader(schema: Schema, codec: CodecName): Uint8Array {
  const message = encodeSchemaMessage(schema);
  const header = new Uint8Array(ROW_PREAMBLE_BYTES + message.byteLength);
  header.set(ROW_MAGIC, 0);
  header[4] = ROW_FORMAT_VERSION;
  header[5] = CODEC_IDS[codec];
  header.set(message, ROW_PREAMBLE_BYTES);
  return header;
}

/** Writes a block header at `at`. */
export function writeBlockHeader(view: DataView, at: number, rows: number, rawLength: number, storedLength: number): void {
  view.setUint32(at, rows, true);
  view.setUint32(at + 4, rawLength, true);
  view.setUint32(at + 8, storedLength, true);
}

export interface RowPartitionHeader {
  schema: Schema;
  codecName: CodecName;
  codec: Codec | null;
  /** where the first block starts */
  bodyStart: number;
}

/**
 * How many bytes of a partition to read to reach the end of its header,
 * given at least its first 16 bytes; null when they are not a row header.
 */
export function rowHeaderLength(head: Uint8Array): number | null {
  if (!isRowPartition(head) || head.byteLength < ROW_PREAMBLE_BYTES + 8) return null;
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  if (view.getUint32(ROW_PREAMBLE_BYTES, true) !== CONTINUATION_MARKER) return null;
  const metadataSize = view.getInt32(ROW_PREAMBLE_BYTES + 4, true);
  return metadataSize > 0 ? ROW_PREAMBLE_BYTES + 8 + metadataSize : null;
}

/** Parses and checks a partition's header; CS_CORRUPT_DATA (located by `where`) if it is not a valid one. */
export function parseRowPartitionHeader(bytes: Uint8Array, where: ErrorLocation): RowPartitionHeader {
  const corrupt = (what: string, at: number) => corruptRows(what, where, at);
  if (!isRowPartition(bytes)) throw corrupt('the partition does not start with the row magic CSRW', 0);
  if (bytes.byteLength < ROW_PREAMBLE_BYTES + 8) throw corrupt('the partition ends inside its header', 0);
  if (bytes[4] !== ROW_FORMAT_VERSION) throw corrupt(`unknown row format version ${bytes[4]}`, 4);
  const codecName = CODEC_BY_ID[bytes[5]!];
  if (codecName === undefined) throw new ShuffleError('CS_UNSUPPORTED_CODEC', `row blocks use codec id ${bytes[5]}, which this build does not know`, { ...where, offset: (where.offset ?? 0) + 5 });
  if (bytes[6] !== 0 || bytes[7] !== 0) throw corrupt('the reserved header bytes are not zero', 6);
  const length = rowHeaderLength(bytes);
  if (length === null || length > bytes.byteLength) throw corrupt('the schema message is missing or runs past the end of the partition', ROW_PREAMBLE_BYTES);
  // readIpcSchema checks the flatbuffer and refuses impossible types; offsets in its errors are from the message
  const schema = readIpcSchema(bytes.subarray(ROW_PREAMBLE_BYTES, length), { ...where, offset: (where.offset ?? 0) + ROW_PREAMBLE_BYTES });
  // the sort writer takes arrow-js batches, which cannot have two columns of one name: arrow-js would merge them in the
  // batches read back (a bit flipped in a name gave a batch whose schema says Utf8 over a column of durations)
  const names = new Set(schema.fields.map((field) => field.name));
  if (names.size !== schema.fields.length) throw corrupt('the schema has several columns of the same name, which the sort writer never writes', ROW_PREAMBLE_BYTES);
  return { schema, codecName, codec: codecByName(codecName), bodyStart: length };
}

/** A CS_CORRUPT_DATA error about a row partition, at byte `at` of it. */
export function corruptRows(what: string, where: ErrorLocation, at: number): ShuffleError {
  return new ShuffleError('CS_CORRUPT_DATA', `invalid sort-writer partition: ${what}`, { ...where, offset: (where.offset ?? 0) + at });
}
