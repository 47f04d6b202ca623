import type { RecordBatch, Schema } from 'apache-arrow';
import { ShuffleError, type ErrorLocation } from '../errors.js';
import type { Codec, CodecName } from '../format/codec.js';
import { DEFAULT_MAX_BUFFER_BYTES, type IpcReadOptions } from '../format/ipc-reader.js';
import { RowDecoder } from './row-decoder.js';
import { BLOCK_HEADER_BYTES, corruptRows, parseRowPartitionHeader, rowHeaderLength, type RowPartitionHeader } from './row-format.js';
import { rowLayoutOf, type RowLayout } from './row-layout.js';

/**
 * Reads one sort-writer partition (row-format.ts) held in memory: one
 * RecordBatch per block (more when a block's dictionary values do not fit
 * their index type in one), with the schema of the partition's header.
 * Every length is checked against the bytes present before anything is
 * allocated or decompressed: a block claiming more than `maxBufferBytes`, or
 * more rows than its bytes can hold, is refused (CS_CORRUPT_DATA with the
 * file offset of the block); the next block is decompressed while the
 * current one is decoded.
 */
export async function* readRowPartition(bytes: Uint8Array, where: ErrorLocation = {}, options: IpcReadOptions = {}, headers = new RowHeaderCache()): AsyncGenerator<RecordBatch> {
  const maxBufferBytes = options.maxBufferBytes ?? DEFAULT_MAX_BUFFER_BYTES;
  const { header, layout, decoder } = headers.parse(bytes, where);
  const blocks = new BlockCursor(bytes, header.bodyStart, layout, header.codecName, where, maxBufferBytes);
  const start = (block: BlockRef | null) => (block === null ? null : { block, raw: storedRows(block, header.codec, where) });
  let next = start(blocks.next());
  while (next !== null) {
    const { block, raw } = next;
    const rows = await raw;
    next = start(blocks.next()); // the next block decompresses while this one is decoded
    next?.raw.catch(() => undefined); // awaited in its turn; must not go unhandled if this one fails first
    // one batch per block, or several when a dictionary's values would overflow its index type
    yield* decoder.decode(rows, block.rows, (what) => corruptRows(`block at ${block.at}: ${what}`, where, block.at), maxBufferBytes);
  }
}

interface ParsedHeader {
  header: RowPartitionHeader;
  layout: RowLayout;
  decoder: RowDecoder;
}

/**
 * The parsed header of the last row partition seen: the partitions of one
 * output start with the same header bytes, so a reader going through
 * thousands of partitions decodes the schema message once, not per
 * partition. Decoding is synchronous per block, so concurrent reads may
 * share the decoder.
 */
export class RowHeaderCache {
  private bytes: Uint8Array | null = null;
  private parsed: ParsedHeader | null = null;

  parse(partition: Uint8Array, where: ErrorLocation): ParsedHeader {
    const length = rowHeaderLength(partition);
    const cached = this.bytes;
    if (cached !== null && length === cached.byteLength && length <= partition.byteLength && Buffer.compare(cached, partition.subarray(0, length)) === 0) return this.parsed!;
    const header = parseRowPartitionHeader(partition, where);
    const layout = layoutOrCorrupt(header.schema, where);
    this.parsed = { header, layout, decoder: new RowDecoder(header.schema, layout) };
    this.bytes = partition.slice(0, header.bodyStart);
    return this.parsed;
  }
}

export interface RowPartitionSummary {
  schema: Schema;
  codec: CodecName;
  blocks: number;
  rows: number;
}

/** What the headers of a sort-writer partition say (nothing is decompressed); CS_CORRUPT_DATA if its framing is broken. */
export function summarizeRowPartition(bytes: Uint8Array, where: ErrorLocation = {}): RowPartitionSummary {
  const header = parseRowPartitionHeader(bytes, where);
  const blocks = new BlockCursor(bytes, header.bodyStart, layoutOrCorrupt(header.schema, where), header.codecName, where, DEFAULT_MAX_BUFFER_BYTES);
  const summary: RowPartitionSummary = { schema: header.schema, codec: header.codecName, blocks: 0, rows: 0 };
  for (let block = blocks.next(); block !== null; block = blocks.next()) {
    summary.blocks++;
    summary.rows += block.rows;
  }
  return summary;
}

function layoutOrCorrupt(schema: Schema, where: ErrorLocation): RowLayout {
  try {
    return rowLayoutOf(schema.fields);
  } catch (cause) {
    throw new ShuffleError('CS_CORRUPT_DATA', `invalid sort-writer partition: its schema has a column rows cannot hold: ${(cause as Error).message}`, where, { cause });
  }
}

interface BlockRef {
  rows: number;
  rawLength: number;
  /** the stored bytes: the rows, or their compressed frame when shorter than rawLength */
  payload: Uint8Array;
  /** offset of the block header in the partition */
  at: number;
}

/** A block's rows: the payload itself, or its decompression, checked against the sizes the header claims. */
async function storedRows(block: BlockRef, codec: Codec | null, where: ErrorLocation): Promise<Uint8Array> {
  const { payload, rawLength, at } = block;
  if (payload.byteLength === rawLength) return payload;
  const corrupt = (what: string) => corruptRows(`the block at ${at} ${what}`, where, at);
  if (codec === null) throw corrupt('is compressed but the partition header says codec none');
  // sizes are checked before anything is decompressed: a decompression bomb is refused, not attempted
  const mismatch = codec.sizeMismatch(payload, rawLength);
  if (mismatch !== null) throw corrupt(`claims ${rawLength} bytes of rows but ${mismatch}`);
  let raw: Uint8Array;
  try {
    raw = await codec.decompress(payload, rawLength);
  } catch (cause) {
    throw new ShuffleError('CS_CORRUPT_DATA', `invalid sort-writer partition: cannot decompress the ${codec.name} block at ${at}: ${(cause as Error).message}`, { ...where, offset: (where.offset ?? 0) + at }, { cause });
  }
  if (raw.byteLength !== rawLength) throw corrupt(`decompressed to ${raw.byteLength} bytes, its header says ${rawLength}`);
  return raw;
}

/** Walks the block headers of a partition, checking each against the bytes present. */
export class BlockCursor {
  private position: number;
  private readonly view: DataView;
  private ended = false;

  constructor(
    private readonly bytes: Uint8Array,
    start: number,
    private readonly layout: RowLayout,
    private readonly codecName: CodecName,
    private readonly where: ErrorLocation,
    private readonly maxBufferBytes: number,
  ) {
    this.position = start;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** The next block, or null after the end marker (which must be the partition's last bytes). */
  next(): BlockRef | null {
    if (this.ended) return null;
    const { bytes, view } = this;
    const at = this.position;
    const corrupt = (what: string) => corruptRows(what, this.where, at);
    if (at + 4 > bytes.byteLength) throw corrupt('the partition ends without its end marker');
    const rows = view.getUint32(at, true);
    if (rows === 0) {
      if (at + 4 !== bytes.byteLength) throw corrupt(`${bytes.byteLength - at - 4} bytes follow the end marker`);
      this.ended = true;
      return null;
    }
    if (at + BLOCK_HEADER_BYTES > bytes.byteLength) throw corrupt('the partition ends inside a block header');
    const rawLength = view.getUint32(at + 4, true);
    const storedLength = view.getUint32(at + 8, true);
    const start = at + BLOCK_HEADER_BYTES;
    if (start + storedLength > bytes.byteLength) throw corrupt(`a block of ${storedLength} stored bytes runs past the end of the partition`);
    if (storedLength > rawLength) throw corrupt(`a block stores ${storedLength} bytes for ${rawLength} bytes of rows`);
    if (storedLength < rawLength && this.codecName === 'none') throw corrupt('a block is compressed but the partition header says codec none');
    if (rawLength > this.maxBufferBytes) throw corrupt(`a block claims ${rawLength} bytes of rows, over the maxBufferBytes limit of ${this.maxBufferBytes} (a damaged length, or a limit too low for this block)`);
    if (rows > rawLength / this.layout.headerBytes) throw corrupt(`a block claims ${rows} rows in ${rawLength} bytes; a row takes at least ${this.layout.headerBytes}`);
    this.position = start + storedLength;
    return { rows, rawLength, payload: bytes.subarray(start, start + storedLength), at };
  }
}
