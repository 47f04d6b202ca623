import type { RecordBatch } from 'apache-arrow';
import { RowEncoder } from '../../src/sort-writer/row-encoder.js';
import { rowLayoutOf } from '../../src/sort-writer/row-layout.js';
import { columnLayoutOf } from '../../src/writer/column-layout.js';
import { prepareSourceColumn } from '../../src/writer/source-column.js';

/**
 * Every row of `batch` encoded back to back (each 4-aligned), as the sort
 * writer's pages hold them, into the page `allocate` gives for the bytes
 * they take (default: a fresh one; a reused page is dirty); returns those
 * bytes. The rows are encoded in reverse id order: the encoder takes row
 * ids in any order and places each row where its start says.
 */
export function encodeRows(batch: RecordBatch, allocate: (bytes: number) => Uint8Array = (bytes) => new Uint8Array(bytes)): Uint8Array {
  const fields = batch.schema.fields;
  const encoder = new RowEncoder(rowLayoutOf(fields));
  const sources = fields.map((f, c) => prepareSourceColumn(batch.data.children[c]!, columnLayoutOf(f)));
  const n = batch.numRows;
  const rowBytes = new Uint32Array(n);
  const total = encoder.measure(sources, n, rowBytes);
  const target = allocate(total);
  const rowStart = new Uint32Array(n);
  let at = 0;
  for (let i = 0; i < n; i++) {
    rowStart[i] = at;
    at += (rowBytes[i]! + 3) & ~3;
  }
  if (at !== total) throw new Error(`measure() said ${total} bytes, the rows' starts say ${at}`);
  const ids = Uint32Array.from({ length: n }, (_, i) => n - 1 - i);
  encoder.encode(sources, ids, 0, n, target, new DataView(target.buffer, target.byteOffset, target.byteLength), rowStart, rowBytes, new Uint32Array(n));
  return target.subarray(0, total);
}
