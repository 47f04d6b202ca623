import { makeData, MetadataVersion, RecordBatch, Struct, type Data, type DataType, type Schema, type Vector } from 'apache-arrow';
import { BufferRegion, FieldNode } from 'apache-arrow/ipc/metadata/message';
import { VectorLoader } from 'apache-arrow/visitor/vectorloader';
import type { ShuffleError } from '../errors.js';
import { MAX_INLINE_BYTES, VIEW_BYTES } from '../format/binary-view.js';
import type { FieldNodeInfo } from '../format/ipc-message.js';
import { dataFromBuffers, DEFAULT_MAX_BUFFER_BYTES } from '../format/ipc-reader.js';
import { align4, copyBytes } from './copy-bytes.js';
import { BUFFER_LIMIT, builderOf, DICTIONARY_FULL, startBudget, type Builder, type DictionaryValues } from './nested-decode.js';
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
 *                                      or views (rows x 16) and one variadic buffer (views, below)
 *         each buffer padded to a multiple of 8
 * ```
 * A view column (Utf8View, BinaryView) always gets exactly one variadic
 * buffer, empty when no value is longer than 12 bytes, so that its buffer
 * count depends on its type alone (nested ones too, nested-decode.ts):
 *
 * ```text
 * view of a null row            16 zero bytes (length 0)
 * value of <= 12 bytes          int32 length | the value, zero padded to 12 bytes
 * value of > 12 bytes           int32 length | its first 4 bytes | int32 0 (the buffer) | int32 offset
 * the variadic buffer           the values of > 12 bytes, back to back in row order
 * ```
 * The per-row scratch arrays grow and are reused across blocks.
 */
export class RowDecoder {
  private rowStart = new Uint32Array(0);
  private varCursor = new Uint32Array(0);
  private readonly variableBytes: number[];
  /** per field: the builder of a nested or dictionary field, else null */
  private readonly builders: (Builder | null)[];
  private readonly dictionaries = new Map<number, DictionaryValues>();
  private maxBufferBytes = DEFAULT_MAX_BUFFER_BYTES;

  constructor(readonly schema: Schema, readonly layout: RowLayout) {
    this.variableBytes = layout.fields.map(() => 0);
    this.builders = layout.fields.map((field, f) => (field.kind === 'tree' ? builderOf(schema.fields[f]!.type, this.dictionaries, field.layout) : null));
  }

  /**
   * The `rows` rows held by `bytes` (exactly: no byte before, between or
   * after them is left over): one batch, or several when a dictionary
   * column's distinct values would not fit its index type in one (each batch
   * gets a dictionary of its own values).
   */
  decode(bytes: Uint8Array, rows: number, corrupt: (what: string) => ShuffleError, maxBufferBytes = DEFAULT_MAX_BUFFER_BYTES): RecordBatch[] {
    this.maxBufferBytes = maxBufferBytes;
    if (this.rowStart.length < rows) {
      const capacity = Math.max(rows, this.rowStart.length * 2);
      this.rowStart = new Uint32Array(capacity);
      this.varCursor = new Uint32Array(capacity);
    }
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.walkRows(bytes, view, rows, corrupt);
    if (rows === 0) {
      this.decodeNested(bytes, view, 0, 0, corrupt);
      return [this.decodeRange(bytes, view, 0, 0, corrupt)];
    }
    const out: RecordBatch[] = [];
    let from = 0;
    do {
      // A dictionary that fills up at row `fit` ends the batch there: the rows before it, again. Fields are
      // decoded one after another, so where two share a dictionary, the later one may fill it before `fit`
      // with values of the rows before it (at the first row: then half the rows are tried). Each pass
      // tries fewer rows, and the first that fits is the batch.
      let to = rows;
      for (let fit = this.decodeNested(bytes, view, from, to, corrupt); fit !== to; fit = this.decodeNested(bytes, view, from, to, corrupt)) {
        if (to === from + 1) throw corrupt(`row ${from} alone holds more distinct values of a dictionary than its index type can address`);
        to = fit > from ? fit : from + ((to - from) >>> 1);
      }
      out.push(this.decodeRange(bytes, view, from, to, corrupt));
      from = to;
    } while (from < rows);
    return out;
  }

  /**
   * Decodes the nested and dictionary fields of rows [from, to) into their
   * builders; returns `to`, or the row at which a dictionary ran out of indices.
   */
  private decodeNested(bytes: Uint8Array, view: DataView, from: number, to: number, corrupt: (what: string) => ShuffleError): number {
    const { headerBytes } = this.layout;
    const { builders, rowStart, varCursor } = this;
    if (builders.every((b) => b === null)) return to;
    for (const values of this.dictionaries.values()) values.reset(bytes);
    for (const builder of builders) builder?.reset();
    for (let i = from; i < to; i++) varCursor[i] = rowStart[i]! + headerBytes;
    startBudget(this.maxBufferBytes);
    try {
      return this.decodeNestedFields(bytes, view, from, to, corrupt);
    } catch (error) {
      if (error === BUFFER_LIMIT) throw corrupt(`rows ${from} to ${to} decode to more than the ${this.maxBufferBytes}-byte buffer limit`);
      throw error;
    } finally {
      startBudget(Number.POSITIVE_INFINITY);
    }
  }

  private decodeNestedFields(bytes: Uint8Array, view: DataView, from: number, to: number, corrupt: (what: string) => ShuffleError): number {
    const { fields } = this.layout;
    const { builders, rowStart, varCursor } = this;
    for (let f = 0; f < fields.length; f++) {
      const field = fields[f]!;
      const bitmapAt = ROW_LENGTH_BYTES + (f >>> 3);
      const mask = 1 << (f & 7);
      if (field.kind === 'variable' || field.kind === 'view') {
        for (let i = from; i < to; i++) varCursor[i]! += view.getUint32(rowStart[i]! + field.slot, true);
        continue;
      }
      const builder = builders[f];
      if (builder === null || builder === undefined || field.kind !== 'tree') continue;
      let row = from;
      const fail = (what: string) => corrupt(`row ${row}: field ${f}: ${what}`);
      for (; row < to; row++) {
        const start = rowStart[row]!;
        if ((bytes[start + bitmapAt]! & mask) !== 0) {
          if (field.layout.kind === 'union') throw fail('a union column is marked null (unions have no nulls of their own)');
          builder.appendNull();
          continue;
        }
        const at = varCursor[row]!;
        const end = field.lengthSlot ? at + view.getUint32(start + field.slot, true) : at; // lengths checked by walkRows
        try {
          if (builder.readSlot(bytes, view, start + field.slot, at, end, fail) !== end) throw fail('a value ends before its length');
        } catch (error) {
          if (error === DICTIONARY_FULL) return row;
          throw error;
        }
        varCursor[row] = end;
      }
    }
    return to;
  }

  /** The batch of rows [from, to): the flat fields decoded here, the nested ones from their builders (decodeNested). */
  private decodeRange(bytes: Uint8Array, view: DataView, from: number, to: number, corrupt: (what: string) => ShuffleError): RecordBatch {
    const rows = to - from;
    const rowStart = this.rowStart.subarray(from, to);
    const varCursor = this.varCursor.subarray(from, to);
    const { fields, headerBytes } = this.layout;
    // the bytes of each variable-length field in these rows
    const { variableBytes } = this;
    for (const f of this.layout.variableFields) {
      let total = 0;
      const slot = fields[f]!.slot;
      if (fields[f]!.kind === 'view') {
        // only the long values take bytes outside the views
        for (let i = 0; i < rows; i++) {
          const length = view.getUint32(rowStart[i]! + slot, true);
          if (length > MAX_INLINE_BYTES) total += length;
        }
      } else for (let i = 0; i < rows; i++) total += view.getUint32(rowStart[i]! + slot, true);
      variableBytes[f] = total;
    }
    for (let i = 0; i < rows; i++) varCursor[i] = rowStart[i]! + headerBytes;

    // the body: every flat field's buffers at 8-aligned offsets
    const bitmapBytes = pad8((rows + 7) >>> 3);
    let size = 0;
    for (let f = 0; f < fields.length; f++) {
      const field = fields[f]!;
      if (field.kind === 'null' || field.kind === 'tree') continue;
      size += bitmapBytes;
      if (field.kind === 'bool') size += bitmapBytes;
      else if (field.kind === 'fixed') size += pad8(rows * field.width);
      else if (field.kind === 'view') size += pad8(rows * VIEW_BYTES) + pad8(variableBytes[f]!);
      else size += pad8((rows + 1) * field.offsetWidth) + pad8(variableBytes[f]!);
    }
    const body = new Uint8Array(size);
    const bodyView = new DataView(body.buffer);
    const nodes: FieldNode[] = [];
    const regions: BufferRegion[] = [];
    const flatTypes: DataType[] = [];
    const variadicCounts: number[] = [];
    let at = 0;
    for (let f = 0; f < fields.length; f++) {
      const field = fields[f]!;
      const bitmapAt = ROW_LENGTH_BYTES + (f >>> 3);
      const mask = 1 << (f & 7);
      if (field.kind === 'tree') {
        if (field.lengthSlot) for (let i = 0; i < rows; i++) varCursor[i]! += view.getUint32(rowStart[i]! + field.slot, true);
        continue;
      }
      flatTypes.push(this.schema.fields[f]!.type);
      if (field.kind === 'null') {
        for (let i = 0; i < rows; i++) {
          if ((bytes[rowStart[i]! + bitmapAt]! & mask) === 0) throw corrupt(`row ${from + i}: field ${f} is of type Null but its null bit is clear`);
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
            if (v > 1) throw corrupt(`row ${from + i}: Bool field ${f} holds ${v}`);
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
          const total = variableBytes[f]!;
          decodeVariable(body, bodyView, at, at + pad8(offsetBytes), bytes, view, rowStart, varCursor, rows, field.slot, field.offsetWidth);
          regions.push(new BufferRegion(at, offsetBytes), new BufferRegion(at + pad8(offsetBytes), total));
          at += pad8(offsetBytes) + pad8(total);
          break;
        }
        case 'view': {
          const viewBytes = rows * VIEW_BYTES;
          const total = variableBytes[f]!;
          decodeView(body, bodyView, at, at + pad8(viewBytes), bytes, view, rowStart, varCursor, rows, field.slot);
          regions.push(new BufferRegion(at, viewBytes), new BufferRegion(at + pad8(viewBytes), total));
          variadicCounts.push(1);
          at += pad8(viewBytes) + pad8(total);
          break;
        }
      }
    }
    const flat = new VectorLoader(body, nodes, regions, new Map(), MetadataVersion.V5, variadicCounts).visitMany(flatTypes);
    const vectors = new Map<number, Vector>();
    for (const [id, values] of this.dictionaries) vectors.set(id, values.finish());
    let next = 0;
    const children = fields.map((field, f): Data => {
      if (field.kind !== 'tree') return flat[next++]!;
      const treeNodes: FieldNodeInfo[] = [];
      const buffers: Uint8Array[] = [];
      this.builders[f]!.snapshot(treeNodes, buffers);
      return dataFromBuffers(this.schema.fields[f]!.type, treeNodes, buffers, vectors);
    });
    return new RecordBatch(this.schema, makeData({ type: new Struct(this.schema.fields), length: rows, nullCount: 0, children }));
  }

  /**
   * Finds every row, checks its length and its strings' lengths against the
   * bytes it has, and sums each variable-length field's bytes.
   */
  private walkRows(bytes: Uint8Array, view: DataView, rows: number, corrupt: (what: string) => ShuffleError): void {
    const { rowStart } = this;
    const { fields, headerBytes, variableFields } = this.layout;
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
      }
      if (left !== 0) throw corrupt(`row ${i} has ${left} bytes no field accounts for`);
      rowStart[i] = pos;
      pos = next;
    }
    if (pos !== end) throw corrupt(`${end - pos} bytes follow the block's last row`);
  }

}

/** Arrow offsets (int32, or int64 as low and high words) at `offsetsAt` and the values at `dataAt`. */
function decodeVariable(body: Uint8Array, bodyView: DataView, offsetsAt: number, dataAt: number, bytes: Uint8Array, view: DataView, rowStart: Uint32Array, varCursor: Uint32Array, rows: number, slot: number, offsetWidth: 4 | 8): void {
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

/**
 * A view column's views at `viewsAt` and its one variadic buffer at `dataAt`
 * (the layout in RowDecoder's comment). The body is zeroed: a null or empty
 * value's view is left as it is, as are the padding and buffer index 0.
 */
function decodeView(body: Uint8Array, bodyView: DataView, viewsAt: number, dataAt: number, bytes: Uint8Array, view: DataView, rowStart: Uint32Array, varCursor: Uint32Array, rows: number, slot: number): void {
  let total = 0;
  for (let i = 0; i < rows; i++) {
    const length = view.getUint32(rowStart[i]! + slot, true);
    if (length === 0) continue;
    const from = varCursor[i]!;
    const at = viewsAt + i * VIEW_BYTES;
    bodyView.setInt32(at, length, true);
    if (length <= MAX_INLINE_BYTES) copyBytes(bytes, view, from, body, bodyView, at + 4, length);
    else {
      bodyView.setInt32(at + 4, view.getInt32(from, true), true); // the prefix
      bodyView.setInt32(at + 12, total, true);
      copyBytes(bytes, view, from, body, bodyView, dataAt + total, length);
      total += length;
    }
    varCursor[i] = from + length;
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
