import type { Data, RecordBatch } from 'apache-arrow';
import { readIpcStream } from '../../src/format/ipc-reader.js';
import type { SchemaMessageCache } from '../../src/format/schema-message-cache.js';

/** Every batch of an IPC stream as the reader's `readIpcStream` reads it (through `cache` when given). */
export async function readBatches(stream: Uint8Array, cache?: SchemaMessageCache): Promise<RecordBatch[]> {
  const batches: RecordBatch[] = [];
  for await (const batch of readIpcStream(stream, {}, {}, cache)) batches.push(batch);
  return batches;
}

/** What a column's Data holds, in a form toEqual compares: its type, length, null count, and its buffers' array kinds and contents. */
export function dataShapeOf(data: Data): { [key: string]: unknown } {
  const array = (view: ArrayBufferView | undefined) => (view === undefined ? undefined : { kind: view.constructor.name, items: Array.from(view as unknown as ArrayLike<unknown>) });
  return {
    type: String(data.type),
    length: data.length,
    nullCount: data.nullCount,
    values: array(data.values as ArrayBufferView | undefined),
    valueOffsets: array(data.valueOffsets as ArrayBufferView | undefined),
    nullBitmap: array(data.nullBitmap as ArrayBufferView | undefined),
  };
}
