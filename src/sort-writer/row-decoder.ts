import { makeData, RecordBatch, Struct, type Schema } from 'apache-arrow';
import { BufferRegion, FieldNode } from 'apache-arrow/ipc/metadata/message';
import { VectorLoader } from 'apache-arrow/visitor/vectorloader';
import type { ShuffleError } from '../errors.js';
import { align4, copyBytes } from './copy-bytes.js';
import { ROW_LENGTH_BYTES, type RowLayout } from './row-layout.js';

/**
 * Turns a block of compact rows (row-layout.ts) back into an Arrow
 * RecordBatch, a column at a time, checking every length against the bytes
 * present: a row that runs past its block, a string that claims bytes its
 * row does not have, a row with bytes no field accounts for, or a Bool that
 * is neither 0 nor 1 is reported through `corrupt`, never indexed blindly.
 *
 * The columns are decoded straight into one freshly allocated Arrow body
 * (every buffer 8-aligned), which arrow-js's VectorLoader then wraps without
 * copying, as it does for an uncompressed IPC record batch:
 *
 * ```text
 * body := per field, in schema order:  validity (ceil(rows / 8) bytes, used only when the field has nulls)
 *                                      values (Bool: bits; fixed width: rows x width)
 *                                      or offsets (rows + 1, int32 or int64) and data (variable length)
 *         each buffer padded to a multiple of 8
 * ```
 * The per-row scratch arrays grow and are reused across blocks.
 */
export class RowDecoder {
  private rowStart = new Uint32Array(0);
  private varCursor = new Uint32Array(0);
  private readonly variableBytes: number[];

  constructor(readonly schema: Schema, readonly layout: RowLayout) {
    this.variableBytes = layout.fields.map(() => 0);
  }

  /** The `rows` rows held by `bytes` (exactly: no byte before, between or after them is left over). */
  decode(bytes: Uint8Array, rows: number, corrupt: (what: string) => ShuffleError): RecordBatch {
    if (this.rowStart.length < rows) {
      const capacity = Math.max(rows, this.rowStart.length * 2);
      this.rowStart = new Uint32Array(capacity);
      this.varCursor = new Uint32Array(capacity);
    }
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.walkRows(bytes, view, rows, corrupt);

    // the body: every field's buffers at 8-aligned offsets
    const { fields } = this.layout;
    const bitmapBytes = pad8((rows + 7) >>> 3);
    let size = 0;
    for (let f = 0; f < fields.length; f++) {
      const field = fields[f]!;
      if (field.kind === 'null') continue;
      size += bitmapBytes;
      if (field.kind === 'bool') size += bitmapBytes;
      else if (field.kind === 'fixed') size += pad8(rows * field.width);
      else size += pad8((rows + 1) * field.offsetWidth) + pad8(this.variableBytes[f]!);
    }
    const body = new Uint8Array(size);
    const bodyView = new DataView(body.buffer);
    const nodes: FieldNode[] = [];
    const regions: BufferRegion[] = [];
    const { rowStart } = this;
    let at = 0;
    for (let f = 0; f < fields.length; f++) {
      const field = fields[f]!;
      const bitmapAt = ROW_LENGTH_BYTES + (f >>> 3);
      const mask = 1 << (f & 7);
      if (field.kind === 'null') {
        for (let i = 0; i < rows; i++) {
          if ((bytes[rowStart[i]! + bitmapAt]! & mask) === 0) throw corrupt(`row ${i}: field ${f} is of type Null but its null bit is clear`);
        }
        nodes.push(new FieldNode(rows, rows));
        continue;
      }
      const nulls = validityInto(body, at, bytes, rowStart, rows, bitmapAt, mask);
      nodes.push(new FieldNode(rows, nulls));
      regions.push(new BufferRegion(at, nulls === 0 ? 0 : (rows + 7) >>> 3));
      at += bitmapBytes;
      switch (field.kind) {
        case 'bool': {
          for (let i = 0; i < rows; i++) {
            const v = bytes[rowStart[i]! + field.slot]!;
            if (v > 1) throw corrupt(`row ${i}: Bool field ${f} holds ${v}`);
            body[at + (i >>> 3)]! |= v << (i & 7);
          }
          regions.push(new BufferRegion(at, (rows + 7) >>> 3));
          at += bitmapBytes;
          break;
        }
        case 'fixed':
          decodeFixed(body, at, bytes, view, rowStart, rows, field.slot, field.width);
          regions.push(new BufferRegion(at, rows * field.width));
          at += pad8(rows * field.width);
          break;
        case 'variable': {
          const offsetBytes = (rows + 1) * field.offsetWidth;
          const total = this.variableBytes[f]!;
          this.decodeVariable(body, bodyView, at, at + pad8(offsetBytes), bytes, view, rows, field.slot, field.offsetWidth);
          regions.push(new BufferRegion(at, offsetBytes), new BufferRegion(at + pad8(offsetBytes), total));
          at += pad8(offsetBytes) + pad8(total);
          break;
        }
      }
    }
    const children = new VectorLoader(body, nodes, regions, new Map()).visitMany(this.schema.fields.map((field) => field.type));
    return new RecordBatch(this.schema, makeData({ type: new Struct(this.schema.fields), length: rows, nullCount: 0, children }));
  }

  /**
   * Finds every row, checks its length and its strings' lengths against the
   * bytes it has, and sums each variable-length field's bytes.
   */
  private walkRows(bytes: Uint8Array, view: DataView, rows: number, corrupt: (what: string) => ShuffleError): void {
    const { rowStart, varCursor, variableBytes } = this;
    const { fields, headerBytes, variableFields } = this.layout;
    for (const f of variableFields) variableBytes[f] = 0;
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
      let left = rowBytes - headerBytes;
      for (const f of variableFields) {
        const valueBytes = view.getUint32(pos + fields[f]!.slot, true);
        if (valueBytes > 0 && (bytes[pos + ROW_LENGTH_BYTES + (f >>> 3)]! & (1 << (f & 7))) !== 0) throw corrupt(`row ${i}: null field ${f} claims ${valueBytes} bytes`);
        if (valueBytes > left) throw corrupt(`row ${i}: field ${f} claims ${valueBytes} bytes, its row has ${left} left`);
        left -= valueBytes;
        variableBytes[f]! += valueBytes;
      }
      if (left !== 0) throw corrupt(`row ${i} has ${left} bytes no field accounts for`);
      rowStart[i] = pos;
      varCursor[i] = pos + headerBytes;
      pos = next;
    }
    if (pos !== end) throw corrupt(`${end - pos} bytes follow the block's last row`);
  }

  /** Arrow offsets (int32, or int64 as low and high words) at `offsetsAt` and the values at `dataAt`. */
  private decodeVariable(body: Uint8Array, bodyView: DataView, offsetsAt: number, dataAt: number, bytes: Uint8Array, view: DataView, rows: number, slot: number, offsetWidth: 4 | 8): void {
    const { rowStart, varCursor } = this;
    const stride = offsetWidth === 8 ? 2 : 1;
    const offsets = new Int32Array(body.buffer, offsetsAt, (rows + 1) * stride);
    let total = 0;
    for (let i = 0; i < rows; i++) {
      const length = view.getUint32(rowStart[i]! + slot, true);
      const from = varCursor[i]!;
      copyBytes(bytes, view, from, body, bodyView, dataAt + total, length);
      varCursor[i] = from + length;
      total += length;
      offsets[(i + 1) * stride] = total;
    }
  }
}

function pad8(n: number): number {
  return n + ((8 - (n & 7)) & 7);
}

/** Writes the Arrow validity bitmap (bit set: valid) of one field from the rows' null bits into `body` at `at`; returns the nulls. */
function validityInto(body: Uint8Array, at: number, bytes: Uint8Array, rowStart: Uint32Array, rows: number, bitmapAt: number, mask: number): number {
  let nulls = 0;
  for (let i = 0; i < rows; i++) {
    if ((bytes[rowStart[i]! + bitmapAt]! & mask) === 0) body[at + (i >>> 3)]! |= 1 << (i & 7);
    else nulls++;
  }
  return nulls;
}

/** Fixed-width values gathered from their slots into the body at `at` (8-aligned). */
function decodeFixed(body: Uint8Array, at: number, bytes: Uint8Array, view: DataView, rowStart: Uint32Array, rows: number, slot: number, width: number): void {
  if ((width & 3) === 0) {
    const n = width >>> 2;
    const words = new Int32Array(body.buffer, at, rows * n);
    if (n === 1) {
      for (let i = 0; i < rows; i++) words[i] = view.getInt32(rowStart[i]! + slot, true);
    } else if (n === 2) {
      for (let i = 0; i < rows; i++) {
        const from = rowStart[i]! + slot;
        words[2 * i] = view.getInt32(from, true);
        words[2 * i + 1] = view.getInt32(from + 4, true);
      }
    } else {
      for (let i = 0; i < rows; i++) {
        const from = rowStart[i]! + slot;
        for (let w = 0; w < n; w++) words[i * n + w] = view.getInt32(from + 4 * w, true);
      }
    }
  } else if (width === 2) {
    const halves = new Uint16Array(body.buffer, at, rows);
    for (let i = 0; i < rows; i++) halves[i] = view.getUint16(rowStart[i]! + slot, true);
  } else {
    for (let i = 0; i < rows; i++) {
      const from = rowStart[i]! + slot;
      for (let b = 0; b < width; b++) body[at + i * width + b] = bytes[from + b]!;
    }
  }
}
