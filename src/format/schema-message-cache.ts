import type { Schema } from 'apache-arrow';
import type { Message } from 'apache-arrow/ipc/metadata/message';

/** A schema message as the IPC reader decoded and checked it. */
export interface DecodedSchemaMessage {
  message: Message;
  schema: Schema;
}

/**
 * The last schema message a reader decoded, by its metadata bytes. Every
 * partition of one output starts with the same schema message, so a reader
 * going through thousands of partitions decodes it once, not per partition
 * (as RowHeaderCache does for the sort writer's header). Streams whose
 * metadata differs replace the entry.
 *
 * The bytes kept are the copy the schema was decoded from (ipc-reader.ts
 * copies a stream's first metadata before decoding it), so the cached
 * schema views no caller's memory. Batches of all partitions share one
 * Schema object. Reads are synchronous here, so concurrent reads may share
 * the cache.
 */
export class SchemaMessageCache {
  private bytes: Uint8Array | null = null;
  private decoded: DecodedSchemaMessage | null = null;

  /** The schema message decoded from metadata equal to `metadata`, or null. */
  lookup(metadata: Uint8Array): DecodedSchemaMessage | null {
    const cached = this.bytes;
    if (cached === null || cached.byteLength !== metadata.byteLength || Buffer.compare(cached, metadata) !== 0) return null;
    return this.decoded;
  }

  /** Remembers a schema message that was decoded from `metadata` (which the cache now owns) and found usable. */
  remember(metadata: Uint8Array, decoded: DecodedSchemaMessage): void {
    this.bytes = metadata;
    this.decoded = decoded;
  }
}
