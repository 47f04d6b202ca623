import type { FieldNodeInfo } from '../format/ipc-message.js';
import { VIEW_BYTES } from '../format/binary-view.js';
import type { BufferRecycler } from '../memory/buffer-recycler.js';
import type { ColumnLayout } from './column-layout.js';
import type { SourceColumn } from './source-column.js';
import { countZeroBits, setBits } from './split-bits.js';

const EMPTY = new Uint8Array(0);
const EMPTY32 = new Int32Array(0);
/** The offsets of an empty binary or list node that was never allocated: a single 0 (Arrow wants rows + 1 offsets). */
const ZERO_OFFSETS = new Uint8Array(8);
const EMPTY_VIEW = new DataView(EMPTY.buffer);
const NO_BUFFERS: readonly Uint8Array[] = Object.freeze([]);

/** How many bytes the values buffer of `rows` rows takes for this layout, rounded up to whole 32-bit words. */
function valuesBytes(layout: ColumnLayout, rows: number): number {
  switch (layout.kind) {
    case 'null':
    case 'struct':
    case 'fixed-size-list':
      return 0;
    case 'bool':
      return roundUp4((rows + 7) >>> 3);
    case 'fixed-width':
      return roundUp4(rows * layout.byteWidth);
    case 'dictionary':
      return roundUp4(rows * layout.indexWidth);
    case 'union':
      return roundUp4(rows); // int8 type ids
    case 'binary':
    case 'list':
      return (rows + 1) * layout.offsetWidth;
    case 'view':
      return rows * VIEW_BYTES;
  }
}

/** Whether the layout keeps value bytes in a data buffer (binary data, the long values of a view column). */
export function hasData(layout: ColumnLayout): boolean {
  return layout.kind === 'binary' || layout.kind === 'view';
}

/** Bytes of a dense union's int32 offsets for `rows` rows. */
function unionOffsetBytes(layout: ColumnLayout, rows: number): number {
  return layout.kind === 'union' && layout.mode === 'dense' ? rows * 4 : 0;
}

/** Whether the layout has a validity bitmap at all (unions and the null type do not). */
export function hasValidity(layout: ColumnLayout): boolean {
  return layout.kind !== 'null' && layout.kind !== 'union';
}

/** Most bytes of binary data one buffer holds: int32 offsets address them (and readers refuse larger buffers). */
export const MAX_DATA_BYTES = 0x7fffffff;

/** The binary data capacity after growing `current` to hold `needed` bytes. */
export function grownDataCapacity(current: number, needed: number): number {
  return needed <= current ? current : Math.min(MAX_DATA_BYTES, Math.max(needed, Math.ceil(current * 1.5)));
}

/** Whether `to` can take all of `from`'s binary data (the same column's buffers) without a buffer over MAX_DATA_BYTES, at every depth. */
export function binaryDataFits(to: ColumnBuffer, from: ColumnBuffer): boolean {
  if (to.dataLength + from.dataLength > MAX_DATA_BYTES) return false;
  for (let i = 0; i < to.children.length; i++) if (!binaryDataFits(to.children[i]!, from.children[i]!)) return false;
  return true;
}

function roundUp4(n: number): number {
  return (n + 3) & ~3;
}

/**
 * How many rows child i of a node holding `rows` rows has: its own count for
 * the children with lengths of their own (list, dense union), the parent's
 * rows for struct and sparse union children, rows x listSize for a
 * fixed-size list.
 */
export function childRowsOf(node: ColumnBuffer, i: number, rows: number): number {
  const { layout } = node;
  if (layout.kind === 'list' || (layout.kind === 'union' && layout.mode === 'dense')) return node.childRows[i]!;
  if (layout.kind === 'fixed-size-list') return rows * layout.listSize;
  return rows;
}

/** Whether child i's length is its own (list, dense union) rather than derived from the parent's rows. */
export function hasOwnLength(layout: ColumnLayout): boolean {
  return layout.kind === 'list' || (layout.kind === 'union' && layout.mode === 'dense');
}

/**
 * One column's buffers inside one partition buffer (or one node of a nested
 * column), pre-allocated for `capacity` rows. A nested column is a tree of
 * them: `children` parallel to the layout's children. Children whose length
 * is their own (a list's child, a dense union's children) keep it in the
 * parent's `childRows`; the others have as many rows as the parent (struct,
 * sparse union) or rows x listSize (fixed-size list).
 */
export class ColumnBuffer {
  readonly layout: ColumnLayout;
  /** rows the buffers are allocated for */
  capacity = 0;
  /** validity bits, allocated only once the column has had a null (Gluten's sticky inputHasNull) */
  validity: Uint8Array | null = null;
  /** fixed-width values, boolean bits, binary or list offsets, views, dictionary indices or union type ids */
  values: Uint8Array = EMPTY;
  values16: Uint16Array = new Uint16Array(0);
  values32: Int32Array = EMPTY32;
  /** binary value bytes, or a view column's long values; dataLength of them are used */
  data: Uint8Array = EMPTY;
  /** the same bytes as a DataView, for the word copies of splitBinary */
  dataView: DataView = EMPTY_VIEW;
  dataLength = 0;
  /** dense union offsets into each child */
  unionOffsets: Int32Array = EMPTY32;
  readonly children: ColumnBuffer[];
  /** rows used in each child with a length of its own (list, dense union); unused otherwise */
  readonly childRows: number[];

  /**
   * `recycler`: where values, validity and binary data come from and go back to
   * (the owner's memory pool: the caller reserves before every change and
   * releases after, as `BufferGrowth` and `release` say); null: plain allocations.
   */
  constructor(
    layout: ColumnLayout,
    private readonly recycler: BufferRecycler | null = null,
  ) {
    this.layout = layout;
    const childLayouts = layout.kind === 'list' || layout.kind === 'fixed-size-list' ? [layout.child] : layout.kind === 'struct' || layout.kind === 'union' ? layout.children : [];
    this.children = childLayouts.map((child) => new ColumnBuffer(child, recycler));
    this.childRows = this.children.map(() => 0);
  }

  /** Bytes held by this column's buffers, children included. */
  get allocatedBytes(): number {
    let bytes = this.ownBytes;
    for (const child of this.children) bytes += child.allocatedBytes;
    return bytes;
  }

  /** Bytes held by this node's own buffers (not its children's). */
  get ownBytes(): number {
    return (this.validity?.byteLength ?? 0) + this.values.byteLength + this.data.byteLength + this.unionOffsets.byteLength;
  }

  /** What ownBytes would be for `capacity` rows, with or without validity, and `dataBytes` of binary data. */
  bytesFor(capacity: number, withValidity: boolean, dataBytes: number): number {
    const validity = withValidity ? roundUp4((capacity + 7) >>> 3) : 0;
    return validity + valuesBytes(this.layout, capacity) + unionOffsetBytes(this.layout, capacity) + (hasData(this.layout) ? dataBytes : 0);
  }

  /**
   * What ownBytes would be at the same capacity, with or without validity, and
   * `dataBytes` of binary data: the values stay as they are. (A node never
   * allocated holds no offsets, though bytesFor counts one for 0 rows.)
   */
  bytesAtCapacity(withValidity: boolean, dataBytes: number): number {
    const validity = withValidity ? (this.validity?.byteLength ?? roundUp4((this.capacity + 7) >>> 3)) : 0;
    return validity + this.values.byteLength + this.unionOffsets.byteLength + (hasData(this.layout) ? dataBytes : 0);
  }

  /** What allocatedBytes would be after `shrinkTo(rows)`. */
  fittedBytes(rows: number): number {
    let bytes = this.bytesFor(rows, this.validity !== null, this.dataLength);
    this.children.forEach((child, i) => (bytes += child.fittedBytes(childRowsOf(this, i, rows))));
    return bytes;
  }

  /** Cuts every buffer, children included, down to what `rows` rows use (reclaim's shrink). */
  shrinkTo(rows: number): void {
    this.children.forEach((child, i) => child.shrinkTo(childRowsOf(this, i, rows)));
    this.resize(rows, rows, this.dataLength);
  }

  /** Bytes `snapshot(rows)` copies, children included. */
  snapshotBytes(rows: number): number {
    const { layout } = this;
    const validity = this.validity === null ? 0 : (rows + 7) >>> 3;
    let bytes = 0;
    switch (layout.kind) {
      case 'null':
        return 0;
      case 'bool':
        bytes = validity + ((rows + 7) >>> 3);
        break;
      case 'fixed-width':
        bytes = validity + rows * layout.byteWidth;
        break;
      case 'dictionary':
        bytes = validity + rows * layout.indexWidth;
        break;
      case 'binary':
        bytes = validity + (rows + 1) * layout.offsetWidth + this.dataLength;
        break;
      case 'view':
        bytes = validity + rows * VIEW_BYTES + this.dataLength;
        break;
      case 'list':
        bytes = validity + (rows + 1) * layout.offsetWidth;
        break;
      case 'fixed-size-list':
      case 'struct':
        bytes = validity;
        break;
      case 'union':
        bytes = rows + unionOffsetBytes(layout, rows);
        break;
    }
    this.children.forEach((child, i) => (bytes += child.snapshotBytes(childRowsOf(this, i, rows))));
    return bytes;
  }

  /** This buffer's first `rows` rows as a split source (to append them to another buffer). */
  asSource(rows: number): SourceColumn {
    const { layout } = this;
    const offsetStride = (layout.kind === 'binary' || layout.kind === 'list') && layout.offsetWidth === 8 ? 2 : 1;
    const offsets = layout.kind === 'binary' || layout.kind === 'list' ? this.values32 : layout.kind === 'union' && layout.mode === 'dense' ? this.unionOffsets : null;
    return {
      layout,
      length: rows,
      validity: this.validity !== null && countZeroBits(this.validity, rows) > 0 ? this.validity : null,
      bitOffset: 0,
      bytes: layout.kind === 'binary' ? this.data : this.values,
      variadic: layout.kind === 'view' ? [this.data] : NO_BUFFERS,
      words16: this.values16,
      words32: this.values32,
      offsets,
      offsetStride,
      children: this.children.map((child, i) => child.asSource(childRowsOf(this, i, rows))),
      dictionary: null,
    };
  }

  /**
   * Drops every buffer (capacity 0), children included, giving them to the
   * recycler; returns their bytes, for the caller to release at once. Nothing
   * may still read them (a spill writing their views has finished).
   */
  release(): number {
    let bytes = this.ownBytes;
    for (const child of this.children) bytes += child.release();
    this.recycle(this.values);
    this.recycle(this.data);
    if (this.validity !== null) this.recycle(this.validity);
    this.capacity = 0;
    this.validity = null;
    this.setValues(EMPTY);
    this.setData(EMPTY);
    this.dataLength = 0;
    this.unionOffsets = EMPTY32;
    this.childRows.fill(0);
    return bytes;
  }

  /**
   * Re-sizes this node's own buffers to `capacity` rows keeping the first
   * `keep` rows (children are re-sized on their own). Binary data gets
   * `dataBytes` (at least what is kept).
   */
  resize(capacity: number, keep: number, dataBytes: number): void {
    const values = this.allocate(valuesBytes(this.layout, capacity));
    values.set(this.values.subarray(0, Math.min(valuesBytes(this.layout, keep), values.byteLength)));
    this.recycle(this.values);
    this.setValues(values);
    if (this.validity !== null) {
      const validity = this.allocate(roundUp4((capacity + 7) >>> 3)).fill(0xff);
      validity.set(this.validity.subarray(0, Math.min((keep + 7) >>> 3, validity.byteLength)));
      this.recycle(this.validity);
      this.validity = validity;
    }
    if (hasData(this.layout)) this.setDataCapacity(Math.max(dataBytes, this.dataLength));
    if (this.layout.kind === 'union' && this.layout.mode === 'dense') {
      const offsets = new Int32Array(capacity);
      offsets.set(this.unionOffsets.subarray(0, Math.min(keep, capacity)));
      this.unionOffsets = offsets;
    }
    this.capacity = capacity;
  }

  /** Allocates the validity bitmap with the `filled` rows so far marked valid. */
  ensureValidity(capacity: number): void {
    if (this.validity === null) this.validity = this.allocate(roundUp4((capacity + 7) >>> 3)).fill(0xff);
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
    if (bytes > MAX_DATA_BYTES) throw new RangeError('a partition buffer would hold more than 2 GiB of binary data');
    const data = this.allocate(bytes);
    data.set(this.data.subarray(0, this.dataLength));
    this.recycle(this.data);
    this.setData(data);
  }

  /** Forgets the rows (after they became a payload); buffers are kept for reuse. */
  clear(): void {
    this.dataLength = 0;
    this.childRows.fill(0);
    for (const child of this.children) child.clear();
  }

  /**
   * The first `rows` rows as Arrow body buffers and field nodes, in IPC order
   * (this node, then its children depth first): copies by default (they may be
   * compressed asynchronously while this buffer is refilled), or views when
   * `copy` is false (written out before this buffer changes again).
   */
  snapshot(rows: number, nodes: FieldNodeInfo[], buffers: Uint8Array[], copy = true): void {
    const { layout } = this;
    if (layout.kind === 'null') {
      nodes.push({ length: rows, nullCount: rows });
      return;
    }
    if (layout.kind === 'union') {
      nodes.push({ length: rows, nullCount: 0 });
      buffers.push(take(copy, this.values, rows));
      if (layout.mode === 'dense') buffers.push(take(copy, new Uint8Array(this.unionOffsets.buffer, this.unionOffsets.byteOffset, rows * 4), rows * 4));
    } else {
      const nullCount = this.validity === null ? 0 : countZeroBits(this.validity, rows);
      nodes.push(layout.kind === 'view' ? { length: rows, nullCount, variadicBuffers: 1 } : { length: rows, nullCount });
      buffers.push(nullCount === 0 ? EMPTY : bitmap(copy, this.validity!, rows));
      switch (layout.kind) {
        case 'bool':
          buffers.push(bitmap(copy, this.values, rows));
          break;
        case 'fixed-width':
          buffers.push(take(copy, this.values, rows * layout.byteWidth));
          break;
        case 'dictionary':
          buffers.push(take(copy, this.values, rows * layout.indexWidth));
          break;
        case 'binary':
          buffers.push(this.capacity === 0 ? ZERO_OFFSETS.subarray(0, layout.offsetWidth) : take(copy, this.values, (rows + 1) * layout.offsetWidth));
          buffers.push(take(copy, this.data, this.dataLength));
          break;
        case 'list':
          buffers.push(this.capacity === 0 ? ZERO_OFFSETS.subarray(0, layout.offsetWidth) : take(copy, this.values, (rows + 1) * layout.offsetWidth));
          break;
        case 'view':
          // views, then the column's one variadic buffer (the record batch's variadicBufferCounts says 1)
          buffers.push(take(copy, this.values, rows * VIEW_BYTES));
          buffers.push(take(copy, this.data, this.dataLength));
          break;
      }
    }
    this.children.forEach((child, i) => child.snapshot(childRowsOf(this, i, rows), nodes, buffers, copy));
  }

  private allocate(bytes: number): Uint8Array {
    return this.recycler?.take(bytes) ?? new Uint8Array(bytes);
  }

  /** Gives a buffer this node no longer uses to the recycler (which keeps only whole large ones). */
  private recycle(array: Uint8Array): void {
    this.recycler?.give(array);
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

/** The first `bytes` bytes of `array`: a copy, or a view. */
function take(copy: boolean, array: Uint8Array, bytes: number): Uint8Array {
  return copy ? array.slice(0, bytes) : array.subarray(0, bytes);
}

/** The bitmap of the first `rows` rows, bits past the last row zeroed, as the Arrow format recommends (they hold 1s and stale rows here). */
function bitmap(copy: boolean, array: Uint8Array, rows: number): Uint8Array {
  const out = take(copy, array, (rows + 7) >>> 3);
  if ((rows & 7) !== 0) out[out.length - 1]! &= (1 << (rows & 7)) - 1;
  return out;
}
