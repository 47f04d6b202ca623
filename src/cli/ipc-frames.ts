/**
 * The framing of one encapsulated Arrow IPC message, for code that takes
 * apart streams it made itself (the read command's batches, tests); input is
 * read through the IPC reader's checks (format/ipc-reader.ts):
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
