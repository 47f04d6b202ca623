import type { FileHandle } from 'node:fs/promises';
import type { RecordBatch, Schema, Vector } from 'apache-arrow';
import { MessageHeader } from 'apache-arrow/enum';
import { Footer } from 'apache-arrow/ipc/metadata/file';
import type { Message } from 'apache-arrow/ipc/metadata/message';
import { ioError, ShuffleError } from '../errors.js';
import { MAX_READ_BYTES, openForReading } from '../reader/byte-source.js';
import { encodeSchemaMessage } from '../format/ipc-message.js';
import { INVALID_IPC_STREAM, readIpcMessageAt, readIpcStream } from '../format/ipc-reader.js';
import { footerCountProblem } from '../format/metadata-counts.js';

/**
 * An Arrow input file, its format told from its bytes (never its extension):
 *
 * ```text
 * file format    "ARROW1" pad(2) | messages | footer | int32 footer length | "ARROW1"
 *                (the footer holds the schema and where each dictionary and record batch lies)
 * stream format  schema message | dictionary and record-batch messages | optional end-of-stream marker
 *                (a message starts with 0xFFFFFFFF, or with its int32 metadata length in the legacy framing)
 * ```
 *
 * Batches are read one message at a time with positional reads, so an input
 * is never loaded whole. Each record-batch message is decoded by the library's
 * own `readIpcStream` (prefixed with the schema and dictionary messages), which
 * decompresses LZ4_FRAME / ZSTD bodies: compressed inputs (e.g. Feather V2
 * files written by pyarrow, LZ4 by default) work in both formats.
 */
export type InputFormat = 'file' | 'stream';

export interface ArrowInput {
  readonly path: string;
  readonly format: InputFormat;
  readonly schema: Schema;
  /** size of the input in bytes */
  readonly size: number;
  /** bytes of the input consumed so far (for progress) */
  readonly position: number;
  /** record batches in the input when known up front (file format), else null */
  readonly totalBatches: number | null;
  batches(): AsyncGenerator<RecordBatch>;
  close(): Promise<void>;
}

const ARROW_MAGIC = Buffer.from('ARROW1');

/** Opens an Arrow IPC file or stream: CS_FILE_NOT_FOUND if it is missing, CS_INPUT_NOT_ARROW if it is something else. */
export async function openArrowInput(path: string, role: 'input' | 'bounds file' = 'input'): Promise<ArrowInput> {
  let handle: FileHandle;
  try {
    handle = await openForReading(path);
  } catch (cause) {
    throw ioError(`open the ${role}`, path, cause);
  }
  try {
    const input = new InputFile(path, handle, role);
    await input.init();
    return input;
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw error;
  }
}

/** One message's place in the input: [start, end) holds its prefix, metadata and body. */
interface MessageAt {
  message: Message;
  start: number;
  end: number;
}

class InputFile implements ArrowInput {
  format: InputFormat = 'stream';
  schema!: Schema;
  size = 0;
  position = 0;
  totalBatches: number | null = null;
  /** a schema message, which prefixes every record batch handed to readIpcStream */
  private schemaBytes: Uint8Array = new Uint8Array(0);
  /** where the messages after the schema start (stream format) */
  private firstMessage = 0;
  private footer: Footer | null = null;
  /** where the footer starts (file format) */
  private footerAt = 0;

  constructor(
    readonly path: string,
    private readonly handle: FileHandle,
    private readonly role: string,
  ) {}

  async init(): Promise<void> {
    const stat = await this.handle.stat().catch((cause: unknown) => {
      throw ioError(`stat the ${this.role}`, this.path, cause);
    });
    if (!stat.isFile()) throw this.notArrow('it is not a regular file');
    this.size = stat.size;
    if (this.size === 0) throw this.notArrow('the file is empty');
    const head = Buffer.from(await this.readAt(0, Math.min(this.size, 8)));
    if (head.byteLength >= 6 && ARROW_MAGIC.equals(head.subarray(0, 6))) {
      // the footer holds the schema (arrow-js writes no schema message into a file's body)
      this.format = 'file';
      await this.readFooter();
      this.schema = this.footer!.schema;
      try {
        this.schemaBytes = encodeSchemaMessage(this.schema);
      } catch (cause) {
        // arrow-js decodes a damaged footer into fields it cannot encode again (a child field of undefined)
        throw this.corrupt(`unreadable schema in the Arrow file footer: ${(cause as Error).message}`, this.footerAt);
      }
      return;
    }
    // the continuation marker: an IPC stream, a broken one if its schema cannot be read (else, anything at all)
    const stream = head.byteLength >= 4 && head.readInt32LE(0) === -1;
    const shown = head.toString('hex').replace(/(..)(?!$)/g, '$1 ');
    const notArrow = () => this.notArrow(`it starts with bytes ${shown}, neither the Arrow file magic "ARROW1" nor an IPC stream schema message`);
    let first: MessageAt | null;
    try {
      first = await this.readMessage(0);
    } catch (error) {
      if (!stream && error instanceof ShuffleError && error.code === 'CS_CORRUPT_DATA' && error.message.startsWith(INVALID_IPC_STREAM)) throw notArrow();
      throw error;
    }
    if (first === null || first.message.headerType !== MessageHeader.Schema) {
      if (!stream) throw notArrow();
      throw this.corrupt(`${INVALID_IPC_STREAM}${first === null ? 'it ends before its schema message' : 'its first message is not a schema'}`, 0);
    }
    this.schema = first.message.header() as Schema;
    this.schemaBytes = await this.readAt(first.start, first.end - first.start);
    this.firstMessage = first.end;
  }

  /**
   * Each message goes to readIpcStream behind the schema message, as a small
   * complete stream; the dictionaries it decodes are kept across messages
   * (every batch carried every dictionary message before it, decoded again:
   * 2,000 batches with a delta each took 423 s).
   *
   * ```text
   * schema message | one dictionary batch or record batch message   (offsets: the message's own in the file)
   * ```
   */
  async *batches(): AsyncGenerator<RecordBatch> {
    const dictionaries = new Map<number, Vector>();
    for await (const at of this.format === 'file' ? this.fileMessages() : this.streamMessages()) {
      this.position = at.end;
      const kind = at.message.headerType;
      if (kind !== MessageHeader.DictionaryBatch && kind !== MessageHeader.RecordBatch) {
        throw this.corrupt(`unexpected ${MessageHeader[kind] ?? kind} message`, at.start);
      }
      const prefixLength = this.schemaBytes.byteLength;
      const stream = new Uint8Array(prefixLength + at.end - at.start);
      stream.set(this.schemaBytes);
      await this.readInto(stream, prefixLength, at.start, at.end - at.start);
      yield* readIpcStream(stream, { file: this.path, offset: at.start - prefixLength }, { dictionaries });
    }
    this.position = this.size;
  }

  async close(): Promise<void> {
    await this.handle.close().catch(() => undefined);
  }

  private async *streamMessages(): AsyncGenerator<MessageAt> {
    for (let next = await this.readMessage(this.firstMessage); next !== null; next = await this.readMessage(next.end)) yield next;
  }

  /** Dictionaries first, then record batches, as the footer lists them. */
  private async *fileMessages(): AsyncGenerator<MessageAt> {
    const footer = this.footer!;
    let blocks: { offset: number; kind: MessageHeader }[];
    try {
      // arrow-js reads each block's 64-bit offset as it lists them, and throws on one beyond 2^53
      blocks = [
        ...[...footer.dictionaryBatches()].map((block) => ({ offset: Number(block.offset), kind: MessageHeader.DictionaryBatch })),
        ...[...footer.recordBatches()].map((block) => ({ offset: Number(block.offset), kind: MessageHeader.RecordBatch })),
      ];
    } catch (cause) {
      throw this.corrupt(`unreadable Arrow file footer: ${(cause as Error).message}`, this.size - 10);
    }
    for (const block of blocks) {
      // Node 20 read a negative position at the descriptor's own, Node 22 throws ERR_OUT_OF_RANGE
      if (block.offset < 0) throw this.corrupt(`the footer points at no message: message offset ${block.offset} is before the start of the file`, block.offset);
      const next = await this.readMessage(block.offset);
      if (next === null) throw this.corrupt('the footer points at no message: end of stream', block.offset);
      // a record batch block at a dictionary message was taken for a dictionary: its rows were lost, silently
      if (next.message.headerType !== block.kind) {
        throw this.corrupt(`the footer lists a ${MessageHeader[block.kind]} block at a ${MessageHeader[next.message.headerType] ?? next.message.headerType} message`, block.offset);
      }
      yield next;
    }
  }

  private async readFooter(): Promise<void> {
    const tailAt = this.size - 10;
    const tail = tailAt >= 8 ? await this.readAt(tailAt, 10) : new Uint8Array(0);
    if (tail.byteLength !== 10 || !ARROW_MAGIC.equals(tail.subarray(4))) {
      throw this.corrupt('the Arrow file does not end with "ARROW1": it is truncated', this.size);
    }
    const length = new DataView(tail.buffer, tail.byteOffset, 4).getInt32(0, true);
    if (length <= 0 || tailAt - length < 8) throw this.corrupt(`the Arrow file footer length ${length} is out of range`, tailAt);
    this.footerAt = tailAt - length;
    const footerBytes = await this.readAt(tailAt - length, length);
    // arrow-js would loop over whatever a corrupted count in the footer claims
    const countProblem = footerCountProblem(footerBytes);
    if (countProblem !== null) throw this.corrupt(`unreadable Arrow file footer: ${countProblem}`, tailAt - length);
    try {
      this.footer = Footer.decode(footerBytes);
    } catch (cause) {
      throw this.corrupt(`unreadable Arrow file footer: ${(cause as Error).message}`, tailAt - length);
    }
    this.totalBatches = this.footer.numRecordBatches;
  }

  /**
   * The message starting at `position` (its body unread), framed and checked
   * to lie within the file by the IPC reader; null at an end-of-stream marker
   * or the end of the file.
   */
  private readMessage(position: number): Promise<MessageAt | null> {
    if (position >= this.size) return Promise.resolve(null);
    return readIpcMessageAt((offset, length) => this.readAt(offset, length), position, this.size, { file: this.path, offset: position });
  }

  private async readAt(position: number, length: number): Promise<Uint8Array> {
    const bytes = new Uint8Array(length);
    await this.readInto(bytes, 0, position, length);
    return bytes;
  }

  /**
   * Reads `length` bytes at `position` into target[offset...]. Every read is
   * within the size the input had when it was opened: fewer bytes mean it
   * shrank since (another process rewrote it), CS_CORRUPT_DATA where it now
   * ends. (The missing bytes were left zero, and decoded as rows of zeros.)
   */
  private async readInto(target: Uint8Array, offset: number, position: number, length: number): Promise<void> {
    let done = 0;
    try {
      while (done < length) {
        const { bytesRead } = await this.handle.read(target, offset + done, Math.min(length - done, MAX_READ_BYTES), position + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
    } catch (cause) {
      throw ioError(`read the ${this.role}`, this.path, cause);
    }
    if (done < length) {
      throw this.corrupt(`the ${this.role} ends at byte ${position + done}, but had ${this.size} bytes when it was opened: it was cut short while it was read`, position + done);
    }
  }

  private notArrow(why: string): ShuffleError {
    return new ShuffleError('CS_INPUT_NOT_ARROW', `not an Arrow IPC file or stream: ${why}`, { file: this.path });
  }

  private corrupt(what: string, offset: number): ShuffleError {
    return new ShuffleError('CS_CORRUPT_DATA', what, { file: this.path, offset });
  }
}
