import type { RecordBatch, Schema } from 'apache-arrow';
import { ShuffleError, type ErrorLocation } from '../errors.js';
import type { Codec, CodecName } from '../format/codec.js';
import { DEFAULT_MAX_BUFFER_BYTES, type IpcReadOptions, type ReadBytes } from '../format/ipc-reader.js';
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
  const parsed = headers.parse(bytes, where);
  const { header, layout } = parsed;
  yield* decodeBlocks(new BlockCursor(bytes, header.bodyStart, layout, header.codecName, where, maxBufferBytes), parsed, where, maxBufferBytes);
}

/**
 * Reads the sort-writer partition of `length` bytes at `start` of a source a
 * block at a time, as readRowPartition reads one in memory (the same checks,
 * the same errors at the same offsets): for a partition too long to hold
 * whole. It holds the block being decoded and the next one.
 */
export async function* readRowPartitionAt(read: ReadBytes, start: number, length: number, where: ErrorLocation = {}, options: IpcReadOptions = {}, headers = new RowHeaderCache()): AsyncGenerator<RecordBatch> {
  const maxBufferBytes = options.maxBufferBytes ?? DEFAULT_MAX_BUFFER_BYTES;
  const parsed = headers.parse(await readRowHeaderAt(read, start, length), where);
  const { header, layout } = parsed;
  yield* decodeBlocks(new RangeBlockCursor(read, start, length, header.bodyStart, layout, header.codecName, where, maxBufferBytes), parsed, where, maxBufferBytes);
}

/**
 * The bytes of the header of the row partition of `length` bytes at `start`
 * (or as many as there are, for its parsing to refuse): its length is in its
 * first 16 bytes (`head`, when the caller has read them already).
 */
export async function readRowHeaderAt(read: ReadBytes, start: number, length: number, head?: Uint8Array): Promise<Uint8Array> {
  head ??= await read(start, Math.min(16, length));
  const headerLength = rowHeaderLength(head) ?? head.byteLength;
  return headerLength <= head.byteLength ? head : read(start, Math.min(length, headerLength));
}

/** One batch per block, or several when a dictionary's values would overflow its index type. */
async function* decodeBlocks(blocks: BlockSource, { header, decoder }: ParsedHeader, where: ErrorLocation, maxBufferBytes: number): AsyncGenerator<RecordBatch> {
  let block = await blocks.next();
  let raw = block === null ? null : storedRows(block, header.codec, where);
  while (block !== null) {
    const rows = await raw!;
    // the next block decompresses while this one is decoded; its framing is checked first, before this block's rows
    const following = await blocks.next();
    const followingRaw = following === null ? null : storedRows(following, header.codec, where);
    followingRaw?.catch(() => undefined); // awaited in its turn; must not go unhandled if this one fails first
    const at = block.at;
    yield* decoder.decode(rows, block.rows, (what) => corruptRows(`block at ${at}: ${what}`, where, at), maxBufferBytes);
    block = following;
    raw = followingRaw;
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

/**
 * What the headers of the sort-writer partition of `length` bytes at `start`
 * say (nothing is decompressed); CS_CORRUPT_DATA if its framing is broken.
 * It holds one block at a time.
 */
export async function summarizeRowPartitionAt(read: ReadBytes, start: number, length: number, where: ErrorLocation = {}): Promise<RowPartitionSummary> {
  const header = parseRowPartitionHeader(await readRowHeaderAt(read, start, length), where);
  const blocks = new RangeBlockCursor(read, start, length, header.bodyStart, layoutOrCorrupt(header.schema, where), header.codecName, where, DEFAULT_MAX_BUFFER_BYTES);
  const summary: RowPartitionSummary = { schema: header.schema, codec: header.codecName, blocks: 0, rows: 0 };
  for (let block = await blocks.next(); block !== null; block = await blocks.next()) {
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

/** Where decodeBlocks gets a partition's blocks from: the next one, or null after the end marker. */
interface BlockSource {
  next(): BlockRef | null | Promise<BlockRef | null>;
}

/**
 * Walks the block headers of a partition of `length` bytes, checking each
 * against the partition's length before its payload is touched: the
 * subclasses' shared step, so a partition read in memory and one read from a
 * source fail alike, at the same offsets.
 */
abstract class BlockWalker implements BlockSource {
  protected position: number;
  protected ended = false;

  constructor(
    protected readonly length: number,
    start: number,
    private readonly layout: RowLayout,
    private readonly codecName: CodecName,
    private readonly where: ErrorLocation,
    private readonly maxBufferBytes: number,
  ) {
    this.position = start;
  }

  abstract next(): BlockRef | null | Promise<BlockRef | null>;

  /**
   * The counts of the block at `at` (the position), from `head`: the
   * partition's bytes from `at`, 12 of them, or fewer where it ends sooner.
   * Null at the end marker (which must be the partition's last bytes); else
   * the position moves past the block.
   */
  protected blockHeader(head: DataView, headOffset: number, at: number): { rows: number; rawLength: number; storedLength: number } | null {
    const { length } = this;
    const corrupt = (what: string) => corruptRows(what, this.where, at);
    if (at + 4 > length) throw corrupt('the partition ends without its end marker');
    const rows = head.getUint32(headOffset, true);
    if (rows === 0) {
      if (at + 4 !== length) throw corrupt(`${length - at - 4} bytes follow the end marker`);
      this.ended = true;
      return null;
    }
    if (at + BLOCK_HEADER_BYTES > length) throw corrupt('the partition ends inside a block header');
    const rawLength = head.getUint32(headOffset + 4, true);
    const storedLength = head.getUint32(headOffset + 8, true);
    const start = at + BLOCK_HEADER_BYTES;
    if (start + storedLength > length) throw corrupt(`a block of ${storedLength} stored bytes runs past the end of the partition`);
    if (storedLength > rawLength) throw corrupt(`a block stores ${storedLength} bytes for ${rawLength} bytes of rows`);
    if (storedLength < rawLength && this.codecName === 'none') throw corrupt('a block is compressed but the partition header says codec none');
    if (rawLength > this.maxBufferBytes) throw corrupt(`a block claims ${rawLength} bytes of rows, over the maxBufferBytes limit of ${this.maxBufferBytes} (a damaged length, or a limit too low for this block)`);
    if (rows > rawLength / this.layout.headerBytes) throw corrupt(`a block claims ${rows} rows in ${rawLength} bytes; a row takes at least ${this.layout.headerBytes}`);
    this.position = start + storedLength;
    return { rows, rawLength, storedLength };
  }
}

/** The blocks of a partition held in memory: their payloads are views into it. */
export class BlockCursor extends BlockWalker {
  private readonly view: DataView;

  constructor(private readonly bytes: Uint8Array, start: number, layout: RowLayout, codecName: CodecName, where: ErrorLocation, maxBufferBytes: number) {
    super(bytes.byteLength, start, layout, codecName, where, maxBufferBytes);
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  next(): BlockRef | null {
    if (this.ended) return null;
    const at = this.position;
    const block = this.blockHeader(this.view, at, at);
    if (block === null) return null;
    const start = at + BLOCK_HEADER_BYTES;
    return { rows: block.rows, rawLength: block.rawLength, payload: this.bytes.subarray(start, start + block.storedLength), at };
  }
}

/** The blocks of a partition of `length` bytes at `offset` of a source: each block's header, then its payload, read in turn. */
class RangeBlockCursor extends BlockWalker {
  constructor(private readonly read: ReadBytes, private readonly offset: number, length: number, start: number, layout: RowLayout, codecName: CodecName, where: ErrorLocation, maxBufferBytes: number) {
    super(length, start, layout, codecName, where, maxBufferBytes);
  }

  async next(): Promise<BlockRef | null> {
    if (this.ended) return null;
    const at = this.position;
    const head = at >= this.length ? new Uint8Array(0) : await this.read(this.offset + at, Math.min(BLOCK_HEADER_BYTES, this.length - at));
    const block = this.blockHeader(new DataView(head.buffer, head.byteOffset, head.byteLength), 0, at);
    if (block === null) return null;
    const payload = block.storedLength === 0 ? new Uint8Array(0) : await this.read(this.offset + at + BLOCK_HEADER_BYTES, block.storedLength);
    return { rows: block.rows, rawLength: block.rawLength, payload, at };
  }
}
