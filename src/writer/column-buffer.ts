import type { FieldNodeInfo } from '../format/ipc-message.js';
import type { ColumnLayout } from './column-layout.js';
import type { SourceColumn } from './source-column.js';
import { countZeroBits, setBits } from './split-bits.js';

const EMPTY = new Uint8Array(0);
const EMPTY_VIEW = new DataView(EMPTY.buffer);

/** How many bytes a buffer of `rows` rows takes for this layout, rounded up to whole 32-bit words. */
function valuesBytes(layout: ColumnLayout, rows: number): number {
  switch (layout.kind) {
    case 'null':
      return 0;
    case 'bool':
      return roundUp4((rows + 7) >>> 3);
    case 'fixed-width':
      return roundUp4(rows * layout.byteWidth);
    case 'binary':
      return (rows + 1) * layout.offsetWidth;
  }
}

/** The binary data capacity after growing `current` to hold `needed` bytes. */
export function grownDataCapacity(current: number, needed: number): number {
  return needed <= current ? current : Math.min(0x7fffffff, Math.max(needed, Math.ceil(current * 1.5)));
}

function roundUp4(n: number): number {
  return (n + 3) & ~3;
}

/** One column's buffers inside one partition buffer, pre-allocated for `capacity` rows. */
export class ColumnBuffer {
  readonly layout: ColumnLayout;
  /** validity bits, allocated only once the column has had a null (Gluten's sticky inputHasNull) */
  validity: Uint8Array | null = null;
  /** fixed-width values, boolean bits, or binary offsets */
  values: Uint8Array = EMPTY;
  values16: Uint16Array = new Uint16Array(0);
  values32: Int32Array = new Int32Array(0);
  /** binary value bytes; dataLength of them are used */
  data: Uint8Array = EMPTY;
  /** the same bytes as a DataView, for the word copies of splitBinary */
  dataView: DataView = EMPTY_VIEW;
  dataLength = 0;

  constructor(layout: ColumnLayout) {
    this.layout = layout;
  }

  /** Bytes held by this column's buffers. */
  get allocatedBytes(): number {
    return (this.validity?.byteLength ?? 0) + this.values.byteLength + this.data.byteLength;
  }

  /** What allocatedBytes would be for `capacity` rows, with or without validity, and `dataBytes` of binary data. */
  bytesFor(capacity: number, withValidity: boolean, dataBytes: number): number {
    const validity = withValidity ? roundUp4((capacity + 7) >>> 3) : 0;
    return validity + valuesBytes(this.layout, capacity) + (this.layout.kind === 'binary' ? dataBytes : 0);
  }

  /** Bytes `snapshot(rows)` copies. */
  snapshotBytes(rows: number): number {
    const { layout } = this;
    if (layout.kind === 'null') return 0;
    const validity = this.validity === null ? 0 : (rows + 7) >>> 3;
    switch (layout.kind) {
      case 'bool':
        return validity + ((rows + 7) >>> 3);
      case 'fixed-width':
        return validity + rows * layout.byteWidth;
      case 'binary':
        return validity + (rows + 1) * layout.offsetWidth + this.dataLength;
    }
  }

  /** This buffer's first `rows` rows as a split source (to append them to another buffer). */
  asSource(rows: number): SourceColumn {
    const binary = this.layout.kind === 'binary';
    return {
      layout: this.layout,
      length: rows,
      validity: this.validity !== null && countZeroBits(this.validity, rows) > 0 ? this.validity : null,
      bitOffset: 0,
      bytes: binary ? this.data : this.values,
      words16: this.values16,
      words32: this.values32,
      offsets: binary ? this.values32 : null,
      offsetStride: this.layout.kind === 'binary' && this.layout.offsetWidth === 8 ? 2 : 1,
    };
  }

  /** Drops every buffer (capacity 0); returns the bytes released. */
  release(): number {
    const bytes = this.allocatedBytes;
    this.validity = null;
    this.setValues(EMPTY);
    this.setData(EMPTY);
    this.dataLength = 0;
    return bytes;
  }

  /**
   * Re-sizes every buffer to `capacity` rows keeping the first `keep` rows.
   * Binary data gets `dataBytes` (at least what is kept).
   */
  resize(capacity: number, keep: number, dataBytes: number): void {
    const values = new Uint8Array(valuesBytes(this.layout, capacity));
    values.set(this.values.subarray(0, Math.min(valuesBytes(this.layout, keep), values.byteLength)));
    this.setValues(values);
    if (this.validity !== null) {
      const validity = new Uint8Array(roundUp4((capacity + 7) >>> 3)).fill(0xff);
      validity.set(this.validity.subarray(0, (keep + 7) >>> 3));
      this.validity = validity;
    }
    if (this.layout.kind === 'binary') {
      const data = new Uint8Array(Math.max(dataBytes, this.dataLength));
      data.set(this.data.subarray(0, this.dataLength));
      this.setData(data);
    }
  }

  /** Allocates the validity bitmap with the `filled` rows so far marked valid. */
  ensureValidity(capacity: number): void {
    if (this.validity === null) this.validity = new Uint8Array(roundUp4((capacity + 7) >>> 3)).fill(0xff);
  }

  /** Marks rows [from, from + count) valid (input rows of a batch without nulls). */
  markValid(from: number, count: number): void {
    if (this.validity !== null) setBits(this.validity, from, count);
  }

  /** Grows binary data to hold `bytes`, by at least half again (Gluten grows ×1.5, ×1.25, ...; we keep ×1.5). */
  ensureDataCapacity(bytes: number): void {
    if (bytes > this.data.byteLength) this.setDataCapacity(grownDataCapacity(this.data.byteLength, bytes));
  }

  /** Re-allocates binary data to exactly `bytes` (>= dataLength), keeping what is used. */
  setDataCapacity(bytes: number): void {
    if (bytes > 0x7fffffff) throw new RangeError('a partition buffer would hold more than 2 GiB of binary data');
    const data = new Uint8Array(bytes);
    data.set(this.data.subarray(0, this.dataLength));
    this.setData(data);
  }

  /** Forgets the rows (after they became a payload); buffers are kept for reuse. */
  clear(): void {
    this.dataLength = 0;
  }

  /**
   * The first `rows` rows as Arrow body buffers: copies by default (they may be
   * compressed asynchronously while this buffer is refilled), or views when
   * `copy` is false (written out before this buffer changes again).
   */
  snapshot(rows: number, nodes: FieldNodeInfo[], buffers: Uint8Array[], copy = true): void {
    const take = (array: Uint8Array, bytes: number) => (copy ? array.slice(0, bytes) : array.subarray(0, bytes));
    const { layout } = this;
    if (layout.kind === 'null') {
      nodes.push({ length: rows, nullCount: rows });
      return;
    }
    const nullCount = this.validity === null ? 0 : countZeroBits(this.validity, rows);
    nodes.push({ length: rows, nullCount });
    buffers.push(nullCount === 0 ? EMPTY : take(this.validity!, (rows + 7) >>> 3));
    switch (layout.kind) {
      case 'bool':
        buffers.push(take(this.values, (rows + 7) >>> 3));
        break;
      case 'fixed-width':
        buffers.push(take(this.values, rows * layout.byteWidth));
        break;
      case 'binary':
        buffers.push(take(this.values, (rows + 1) * layout.offsetWidth));
        buffers.push(take(this.data, this.dataLength));
        break;
    }
  }

  private setData(data: Uint8Array): void {
    this.data = data;
    this.dataView = new DataView(data.buffer, data.byteOffset, data.byteLength);
  }

  private setValues(values: Uint8Array): void {
    this.values = values;
    this.values16 = new Uint16Array(values.buffer, 0, values.byteLength >>> 1);
    this.values32 = new Int32Array(values.buffer, 0, values.byteLength >>> 2);
  }
}
