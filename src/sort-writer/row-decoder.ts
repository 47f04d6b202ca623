import type { RecordBatch, Schema } from 'apache-arrow';
import type { ShuffleError } from '../errors.js';
import type { FieldNodeInfo } from '../format/ipc-message.js';
import { recordBatchFromBuffers } from '../format/ipc-reader.js';
import { align4, copyBytes } from './copy-bytes.js';
import { ROW_LENGTH_BYTES, type RowLayout } from './row-layout.js';

const EMPTY = new Uint8Array(0);

/**
 * Turns a block of compact rows (row-layout.ts) back into an Arrow
 * RecordBatch, a column at a time, checking every length against the bytes
 * present: a row that runs past its block, a slot that claims bytes its row
 * does not have, a row with bytes no field accounts for, or a Bool that is
 * neither 0 nor 1 is reported through `corrupt`, never indexed blindly.
 *
 * The per-row scratch arrays grow and are reused across blocks.
 */
export class RowDecoder {
  private rowStart = new Uint32Array(0);
  private rowEnd = new Uint32Array(0);
  private varCursor = new Uint32Array(0);

  constructor(readonly schema: Schema, readonly layout: RowLayout) {}

  /** The `rows` rows held by `bytes` (exactly: no byte before, between or after them is left over). */
  decode(bytes: Uint8Array, rows: number, corrupt: (what: string) => ShuffleError): RecordBatch {
    if (this.rowStart.length < rows) {
      const capacity = Math.max(rows, this.rowStart.length * 2);
      this.rowStart = new Uint32Array(capacity);
      this.rowEnd = new Uint32Array(capacity);
      this.varCursor = new Uint32Array(capacity);
    }
    const { rowStart, rowEnd, varCursor } = this;
    const { fields, headerBytes } = this.layout;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const end = bytes.byteLength;
    let pos = 0;
    for (let i = 0; i < rows; i++) {
      if (pos + ROW_LENGTH_BYTES > end) throw corrupt(`row ${i} of ${rows} starts past the end of the block's ${end} bytes`);
      const length = view.getUint32(pos, true);
      const rowBytes = ROW_LENGTH_BYTES + length;
      const next = pos + align4(rowBytes); // rows are padded to multiples of 4
      if (rowBytes < headerBytes || next > end) {
        throw corrupt(`row ${i} claims ${length} bytes: a row has at least ${headerBytes - ROW_LENGTH_BYTES} and the block ends after ${end - pos - ROW_LENGTH_BYTES}`);
      }
      rowStart[i] = pos;
      rowEnd[i] = pos + rowBytes;
      varCursor[i] = pos + headerBytes;
      pos = next;
    }
    if (pos !== end) throw corrupt(`${end - pos} bytes follow the block's last row`);

    const nodes: FieldNodeInfo[] = [];
    const buffers: Uint8Array[] = [];
    for (let f = 0; f < fields.length; f++) {
      const field = fields[f]!;
      const bitmapAt = ROW_LENGTH_BYTES + (f >>> 3);
      const mask = 1 << (f & 7);
      let nulls = 0;
      for (let i = 0; i < rows; i++) if ((bytes[rowStart[i]! + bitmapAt]! & mask) !== 0) nulls++;
      if (field.kind === 'null') {
        if (nulls !== rows) throw corrupt(`field ${f} is of type Null but ${rows - nulls} rows say it is not null`);
        nodes.push({ length: rows, nullCount: rows });
        continue;
      }
      nodes.push({ length: rows, nullCount: nulls });
      buffers.push(nulls === 0 ? EMPTY : validityOf(bytes, rowStart, rows, bitmapAt, mask));
      switch (field.kind) {
        case 'bool': {
          const values = new Uint8Array((rows + 7) >>> 3);
          for (let i = 0; i < rows; i++) {
            const v = bytes[rowStart[i]! + field.slot]!;
            if (v > 1) throw corrupt(`row ${i}: Bool field ${f} holds ${v}`);
            values[i >>> 3]! |= v << (i & 7);
          }
          buffers.push(values);
          break;
        }
        case 'fixed':
          buffers.push(decodeFixed(bytes, view, rowStart, rows, field.slot, field.width));
          break;
        case 'variable': {
          const [offsets, data] = this.decodeVariable(bytes, view, rows, f, field.slot, field.offsetWidth, bitmapAt, mask, corrupt);
          buffers.push(offsets, data);
          break;
        }
      }
    }
    for (let i = 0; i < rows; i++) {
      if (varCursor[i] !== rowEnd[i]) throw corrupt(`row ${i} has ${rowEnd[i]! - varCursor[i]!} bytes no field accounts for`);
    }
    return recordBatchFromBuffers(this.schema, rows, nodes, buffers);
  }

  /** Arrow offsets (int32, or int64 as low/high words) and data of one variable-length field. */
  private decodeVariable(
    bytes: Uint8Array,
    view: DataView,
    rows: number,
    f: number,
    slot: number,
    offsetWidth: 4 | 8,
    bitmapAt: number,
    mask: number,
    corrupt: (what: string) => ShuffleError,
  ): [Uint8Array, Uint8Array] {
    const { rowStart, rowEnd, varCursor } = this;
    const stride = offsetWidth === 8 ? 2 : 1;
    const offsets = new Int32Array((rows + 1) * stride);
    let total = 0;
    for (let i = 0; i < rows; i++) {
      const start = rowStart[i]!;
      const length = view.getUint32(start + slot, true);
      if (length > 0 && (bytes[start + bitmapAt]! & mask) !== 0) throw corrupt(`row ${i}: null field ${f} claims ${length} bytes`);
      if (varCursor[i]! + length > rowEnd[i]!) throw corrupt(`row ${i}: field ${f} claims ${length} bytes, its row has ${rowEnd[i]! - varCursor[i]!} left`);
      varCursor[i]! += length;
      total += length;
      offsets[(i + 1) * stride] = total;
    }
    const data = new Uint8Array(total);
    const dataView = new DataView(data.buffer);
    let at = 0;
    for (let i = 0; i < rows; i++) {
      const length = offsets[(i + 1) * stride]! - at;
      copyBytes(bytes, view, varCursor[i]! - length, data, dataView, at, length); // cursors already point past the value
      at += length;
    }
    return [new Uint8Array(offsets.buffer), data];
  }
}

/** An Arrow validity bitmap (bit set: valid) from the rows' null bits (bit set: null). */
function validityOf(bytes: Uint8Array, rowStart: Uint32Array, rows: number, bitmapAt: number, mask: number): Uint8Array {
  const validity = new Uint8Array((rows + 7) >>> 3);
  for (let i = 0; i < rows; i++) {
    if ((bytes[rowStart[i]! + bitmapAt]! & mask) === 0) validity[i >>> 3]! |= 1 << (i & 7);
  }
  return validity;
}

/** Fixed-width values gathered from their slots into a fresh (aligned) Arrow values buffer. */
function decodeFixed(bytes: Uint8Array, view: DataView, rowStart: Uint32Array, rows: number, slot: number, width: number): Uint8Array {
  const values = new Uint8Array(rows * width);
  if ((width & 3) === 0) {
    const words = new Int32Array(values.buffer);
    const n = width >>> 2;
    if (n === 1) {
      for (let i = 0; i < rows; i++) words[i] = view.getInt32(rowStart[i]! + slot, true);
    } else if (n === 2) {
      for (let i = 0; i < rows; i++) {
        const at = rowStart[i]! + slot;
        words[2 * i] = view.getInt32(at, true);
        words[2 * i + 1] = view.getInt32(at + 4, true);
      }
    } else {
      for (let i = 0; i < rows; i++) {
        const at = rowStart[i]! + slot;
        for (let w = 0; w < n; w++) words[i * n + w] = view.getInt32(at + 4 * w, true);
      }
    }
  } else if (width === 2) {
    const halves = new Uint16Array(values.buffer);
    for (let i = 0; i < rows; i++) halves[i] = view.getUint16(rowStart[i]! + slot, true);
  } else {
    for (let i = 0; i < rows; i++) {
      const at = rowStart[i]! + slot;
      for (let b = 0; b < width; b++) values[i * width + b] = bytes[at + b]!;
    }
  }
  return values;
}
