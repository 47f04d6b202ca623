import { Table, tableToIPC, type Schema, type Vector } from 'apache-arrow';
import { writeFile } from 'node:fs/promises';
import { MetadataVersion } from 'apache-arrow/enum';
import { FileBlock, Footer } from 'apache-arrow/ipc/metadata/file';
import { Message } from 'apache-arrow/ipc/metadata/message';
import { frameOf } from '../../src/cli/ipc-frames.js';

export interface FileLayoutOptions {
  /** the offset a block gives for a message at `offset` (default: where it is) */
  blockOffset?: (offset: number) => number;
  /** list the first record batch as a dictionary block and the first dictionary as a record batch block */
  swapKinds?: boolean;
}

/**
 * An Arrow file of an IPC stream's messages, laid out as they come, with a
 * footer listing each one in its list (dictionaries, record batches):
 *
 * ```text
 * ARROW1 00 00 | dictionary and record batch messages | FF FF FF FF 00 00 00 00 | footer | int32 footer length | ARROW1
 * ```
 */
export function fileOf(stream: Uint8Array, schema: Schema, options: FileLayoutOptions = {}): Uint8Array {
  const blockOffset = options.blockOffset ?? ((offset: number) => offset);
  const parts: Uint8Array[] = [Buffer.from('ARROW1\0\0')];
  const records: FileBlock[] = [];
  const dictionaries: FileBlock[] = [];
  let offset = 8;
  for (let position = 0; ; ) {
    const frame = frameOf(stream.subarray(position, position + 8));
    if (frame.kind !== 'message') break;
    const metadataEnd = position + frame.prefixLength + frame.metadataLength;
    const message = Message.decode(stream.subarray(position + frame.prefixLength, metadataEnd));
    const end = metadataEnd + Number(message.bodyLength);
    if (!message.isSchema()) {
      const block = new FileBlock(frame.prefixLength + frame.metadataLength, message.bodyLength, blockOffset(offset));
      (message.isRecordBatch() ? records : dictionaries).push(block);
      parts.push(stream.subarray(position, end));
      offset += end - position;
    }
    position = end;
  }
  if (options.swapKinds === true) [records[0], dictionaries[0]] = [dictionaries[0]!, records[0]!];
  const footer = Footer.encode(new Footer(schema, MetadataVersion.V5, records, dictionaries));
  const length = new Uint8Array(4);
  new DataView(length.buffer).setInt32(0, footer.byteLength, true);
  return Buffer.concat([...parts, Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]), footer, length, Buffer.from('ARROW1')]);
}

/** Writes a table of `columns` as an Arrow file (arrow-js's writer) at `path`; returns `path`. */
export async function writeArrowFile(path: string, columns: Record<string, Vector>): Promise<string> {
  await writeFile(path, tableToIPC(new Table(columns), 'file'));
  return path;
}
