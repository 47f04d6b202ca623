import type { RecordBatch, Schema } from 'apache-arrow';
import type { FieldNodeInfo } from '../format/ipc-message.js';
import { recordBatchFromBuffers } from '../format/ipc-reader.js';
import { ColumnBuffer } from '../writer/column-buffer.js';
import { columnLayoutOf } from '../writer/column-layout.js';
import { prepareSourceColumn } from '../writer/source-column.js';
import { splitColumn } from '../writer/split-column.js';

/**
 * Merges small batches into batches of about `targetRows` rows (after a
 * shuffle, partitions often arrive as many small batches: Gluten #9035).
 * It appends rows with the writer's own split functions, reading every row
 * in order. A batch that is already large enough passes through untouched.
 *
 * Protocol: `push` each batch and emit what it returns, then emit `finish()`.
 */
export class BatchCoalescer {
  private readonly columns: ColumnBuffer[];
  private filled = 0;
  private capacity = 0;
  private identity = new Uint32Array(0);

  constructor(private readonly schema: Schema, private readonly targetRows: number) {
    this.columns = schema.fields.map((field) => new ColumnBuffer(columnLayoutOf(field)));
  }

  push(batch: RecordBatch): RecordBatch[] {
    const out: RecordBatch[] = [];
    const rows = batch.numRows;
    if (rows === 0) return out;
    if (this.filled > 0 && this.filled + rows > this.targetRows) out.push(this.flush());
    if (rows >= this.targetRows) {
      out.push(batch);
      return out;
    }
    this.append(batch);
    return out;
  }

  finish(): RecordBatch | null {
    return this.filled > 0 ? this.flush() : null;
  }

  private append(batch: RecordBatch): void {
    const rows = batch.numRows;
    if (this.filled + rows > this.capacity) {
      // grow by doubling up to the target, so a huge target does not allocate up front
      const capacity = Math.min(this.targetRows, Math.max(this.capacity * 2, this.filled + rows, 1024));
      this.columns.forEach((column) => column.resize(capacity, this.filled, Math.max(1024, column.dataLength * 2)));
      this.capacity = capacity;
    }
    if (this.identity.length < rows) this.identity = Uint32Array.from({ length: Math.max(rows, 1024) }, (_, i) => i);
    this.columns.forEach((column, c) => {
      const src = prepareSourceColumn(batch.data.children[c]!, column.layout);
      splitColumn(src, this.identity, 0, rows, column, this.filled, this.capacity);
    });
    this.filled += rows;
  }

  private flush(): RecordBatch {
    const nodes: FieldNodeInfo[] = [];
    const buffers: Uint8Array[] = [];
    for (const column of this.columns) {
      column.snapshot(this.filled, nodes, buffers);
      column.clear();
    }
    const batch = recordBatchFromBuffers(this.schema, this.filled, nodes, buffers);
    this.filled = 0;
    return batch;
  }
}
