import { Message } from 'apache-arrow/ipc/metadata/message';
import { MessageHeader } from 'apache-arrow/enum';
import { metadataCountProblem } from '../format/metadata-counts.js';

/**
 * The framing of one encapsulated Arrow IPC message:
 *
 * ```text
 * 0xFFFFFFFF | int32 LE metadataLength | metadata | body     (prefixLength 8)
 * int32 LE metadataLength | metadata | body                  (prefixLength 4: legacy, before Arrow 0.15)
 * 0xFFFFFFFF 0x00000000   or   0x00000000                    (end of stream)
 * ```
 */
export type Frame =
  | { kind: 'message'; prefixLength: 4 | 8; metadataLength: number }
  | { kind: 'end' }
  | { kind: 'invalid'; reason: string };

/** Bytes to read at a message's start to know its frame (fewer are fine near the end of the input). */
export const FRAME_PEEK = 8;

/** Decodes the prefix of a message from its first (up to) 8 bytes. */
export function frameOf(head: Uint8Array): Frame {
  if (head.byteLength < 4) return { kind: 'invalid', reason: 'truncated message prefix' };
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  let length = view.getInt32(0, true);
  let prefixLength: 4 | 8 = 4;
  if (length === -1) {
    if (head.byteLength < 8) return { kind: 'invalid', reason: 'truncated message prefix' };
    length = view.getInt32(4, true);
    prefixLength = 8;
  }
  if (length === 0) return { kind: 'end' };
  if (length < 0) return { kind: 'invalid', reason: `negative metadata length ${length}` };
  return { kind: 'message', prefixLength, metadataLength: length };
}

/**
 * `Message.decode` with its header decoded, or why the bytes are not a usable
 * flatbuffer Message. Its vector counts are checked first (metadataCountProblem):
 * arrow-js would loop over whatever a corrupted count claims.
 */
export function decodeMessage(metadata: Uint8Array): Message | string {
  const countProblem = metadataCountProblem(metadata);
  if (countProblem !== null) return countProblem;
  try {
    const message = Message.decode(metadata);
    const bodyLength = Number(message.bodyLength);
    if (!Number.isSafeInteger(bodyLength) || bodyLength < 0 || MessageHeader[message.headerType] === undefined) return 'unreadable message metadata';
    if (message.header() === null) return 'message metadata without a header';
    return message;
  } catch (error) {
    return `unreadable message metadata: ${(error as Error).message}`;
  }
}
