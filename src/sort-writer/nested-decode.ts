import { Field, Vector, type DataType, type Dictionary } from 'apache-arrow';
import type { ShuffleError } from '../errors.js';
import { MAX_INLINE_BYTES, VIEW_BYTES } from '../format/binary-view.js';
import type { FieldNodeInfo } from '../format/ipc-message.js';
import { dataFromBuffers } from '../format/ipc-reader.js';
import { columnLayoutOf, type ColumnLayout, type DictionaryLayout, type UnionLayout } from '../writer/column-layout.js';
import { maxDictionaryIndex } from '../writer/dictionary-indices.js';
import { hasLengthSlot, slotWidthOf } from './row-layout.js';

/**
 * The decoder side of nested and dictionary values (row-layout.ts, "nested
 * value"): one builder per node of a column's type appends the values read
 * from rows to growable buffers, checking every length and count against
 * the bytes its value has before it reads or allocates anything; the
 * buffers come out in Arrow IPC order (nodes and buffers, as a record batch
 * body has them) for arrow-js's VectorLoader. A view column has exactly one
 * variadic buffer, as a flat one does (row-decoder.ts), which its field node says.
 *
 * Dictionaries: values are deduplicated by their encoded bytes (one table
 * per dictionary id, shared by every field of that id); when a new value
 * would need an index the index type cannot hold, the builder throws
 * DICTIONARY_FULL and the decoder ends the batch before that row.
 */
export type Corrupt = (what: string) => ShuffleError;

/** Thrown (not an Error: never escapes the decoder) when a dictionary has no index left for a new value. */
export const DICTIONARY_FULL: unique symbol = Symbol('dictionary full');

/** Thrown when the buffers decoded from one block would exceed the reader's maxBufferBytes (see `startBudget`). */
export const BUFFER_LIMIT: unique symbol = Symbol('buffer limit');

/**
 * Bytes the builders may still append while decoding one range of rows.
 * Values come from the block's bytes, but null fixed-size lists synthesize
 * their children (listSize each, from the header's schema): a header
 * claiming a huge list size must not make the reader allocate without
 * bound, so everything appended counts against the reader's maxBufferBytes,
 * as the buffers of an IPC record batch do. Decoding is synchronous, so one
 * counter serves every decoder.
 */
let budget = Number.POSITIVE_INFINITY;

export function startBudget(maxBufferBytes: number): void {
  budget = maxBufferBytes;
}

function spend(n: number): void {
  budget -= n;
  if (budget < 0) throw BUFFER_LIMIT;
}

/** A growable byte buffer. */
class Buf {
  bytes = new Uint8Array(64);
  view = new DataView(this.bytes.buffer);
  length = 0;

  /** Room for `n` more bytes (callers have checked `n` against the bytes of the block). */
  reserve(n: number): void {
    spend(n);
    const need = this.length + n;
    if (need <= this.bytes.length) return;
    const grown = new Uint8Array(Math.max(need, this.bytes.length * 2));
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
    this.view = new DataView(grown.buffer);
  }

  u32(value: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, value, true);
    this.length += 4;
  }

  /** An offset: 4 bytes, or 8 (value, then a zero high word). */
  offset(value: number, width: 4 | 8): void {
    this.reserve(width);
    this.view.setUint32(this.length, value, true);
    if (width === 8) this.view.setUint32(this.length + 4, 0, true);
    this.length += width;
  }

  copy(src: Uint8Array, from: number, n: number): void {
    this.reserve(n);
    if (n > 32) this.bytes.set(src.subarray(from, from + n), this.length);
    else for (let b = 0; b < n; b++) this.bytes[this.length + b] = src[from + b]!;
    this.length += n;
  }

  get(): Uint8Array {
    return this.bytes.subarray(0, this.length);
  }
}

/** A growable bitmap. */
class Bits {
  bytes = new Uint8Array(8);
  length = 0;

  push(set: boolean): void {
    const i = this.length;
    if ((i & 7) === 0) spend(1);
    if ((i >>> 3) >= this.bytes.length) {
      const grown = new Uint8Array(this.bytes.length * 2);
      grown.set(this.bytes);
      this.bytes = grown;
    }
    if (set) this.bytes[i >>> 3]! |= 1 << (i & 7);
    else this.bytes[i >>> 3]! &= ~(1 << (i & 7));
    this.length = i + 1;
  }

  get(): Uint8Array {
    return this.bytes.subarray(0, (this.length + 7) >>> 3);
  }
}

const EMPTY = new Uint8Array(0);

export abstract class Builder {
  length = 0;
  nulls = 0;
  protected readonly validity = new Bits();
  /** slotWidthOf(layout) */
  readonly slot: number;
  /** hasLengthSlot(layout) */
  readonly lengthSlot: boolean;

  constructor(readonly layout: ColumnLayout) {
    this.slot = slotWidthOf(layout);
    this.lengthSlot = hasLengthSlot(layout);
  }

  appendNull(): void {
    this.validity.push(false);
    this.nulls++;
    this.length++;
    this.pushNullValue();
  }

  protected valid(): void {
    this.validity.push(true);
    this.length++;
  }

  /** What a null row adds besides its validity bit (a zero value, a repeated offset, null children). */
  protected abstract pushNullValue(): void;

  /**
   * Reads a valid value: its slot at `slotAt`, its bytes (if it has a length
   * slot) from `varAt`, which must not run past `end`. Returns the end of its bytes.
   */
  abstract readSlot(bytes: Uint8Array, view: DataView, slotAt: number, varAt: number, end: number, corrupt: Corrupt): number;

  /** Appends this node's (and its children's) field nodes and buffers in IPC order. */
  abstract snapshot(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void;

  reset(): void {
    this.length = 0;
    this.nulls = 0;
    this.validity.length = 0;
  }

  protected node(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void {
    nodes.push({ length: this.length, nullCount: this.nulls });
    buffers.push(this.nulls > 0 ? this.validity.get() : EMPTY);
  }
}

/** A length slot: the u32 at `slotAt`, checked against what is left before `end`. */
function lengthAt(view: DataView, slotAt: number, varAt: number, end: number, corrupt: Corrupt, what: string): number {
  const length = view.getUint32(slotAt, true);
  if (length > end - varAt) throw corrupt(`a ${what} value claims ${length} bytes, ${end - varAt} are left`);
  return length;
}

class NullBuilder extends Builder {
  override appendNull(): void {
    if ((this.length & 7) === 0) spend(1); // a Null column takes nothing, but a huge one must not count forever
    this.length++;
    this.nulls++;
  }
  protected pushNullValue(): void {}
  readSlot(_b: Uint8Array, _v: DataView, _s: number, _at: number, _end: number, corrupt: Corrupt): number {
    throw corrupt('a value of type Null is not marked null');
  }
  snapshot(nodes: FieldNodeInfo[]): void {
    nodes.push({ length: this.length, nullCount: this.length });
  }
}

class BoolBuilder extends Builder {
  private readonly values = new Bits();
  protected pushNullValue(): void {
    this.values.push(false);
  }
  readSlot(bytes: Uint8Array, _v: DataView, slotAt: number, varAt: number, _end: number, corrupt: Corrupt): number {
    const v = bytes[slotAt]!;
    if (v > 1) throw corrupt(`a Bool holds ${v}`);
    this.valid();
    this.values.push(v === 1);
    return varAt;
  }
  snapshot(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void {
    this.node(nodes, buffers);
    buffers.push(this.values.get());
  }
  override reset(): void {
    super.reset();
    this.values.length = 0;
  }
}

class FixedBuilder extends Builder {
  private readonly values = new Buf();
  constructor(layout: ColumnLayout, private readonly width: number) {
    super(layout);
  }
  protected pushNullValue(): void {
    this.values.reserve(this.width);
    this.values.bytes.fill(0, this.values.length, this.values.length + this.width);
    this.values.length += this.width;
  }
  readSlot(bytes: Uint8Array, _v: DataView, slotAt: number, varAt: number): number {
    this.valid();
    this.values.copy(bytes, slotAt, this.width);
    return varAt;
  }
  /** `n` valid values back to back at `at` (a list of them without nulls). */
  copyValues(bytes: Uint8Array, at: number, n: number): void {
    for (let e = 0; e < n; e++) this.validity.push(true);
    this.length += n;
    this.values.copy(bytes, at, n * this.width);
  }
  snapshot(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void {
    this.node(nodes, buffers);
    buffers.push(this.values.get());
  }
  override reset(): void {
    super.reset();
    this.values.length = 0;
  }
}

class BinaryBuilder extends Builder {
  private readonly offsets = new Buf();
  private readonly data = new Buf();
  constructor(layout: ColumnLayout, private readonly offsetWidth: 4 | 8) {
    super(layout);
    this.offsets.offset(0, offsetWidth);
  }
  protected pushNullValue(): void {
    this.offsets.offset(this.data.length, this.offsetWidth);
  }
  readSlot(bytes: Uint8Array, view: DataView, slotAt: number, varAt: number, end: number, corrupt: Corrupt): number {
    const length = lengthAt(view, slotAt, varAt, end, corrupt, 'string');
    this.valid();
    this.data.copy(bytes, varAt, length);
    this.offsets.offset(this.data.length, this.offsetWidth);
    return varAt + length;
  }
  snapshot(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void {
    this.node(nodes, buffers);
    buffers.push(this.offsets.get(), this.data.get());
  }
  override reset(): void {
    super.reset();
    this.offsets.length = 0;
    this.offsets.offset(0, this.offsetWidth);
    this.data.length = 0;
  }
}

/** Utf8View, BinaryView: the views and one variadic buffer, laid out as RowDecoder's comment says. */
class ViewBuilder extends Builder {
  private readonly views = new Buf();
  private readonly data = new Buf();
  protected pushNullValue(): void {
    const views = this.views;
    views.reserve(VIEW_BYTES);
    views.bytes.fill(0, views.length, views.length + VIEW_BYTES);
    views.length += VIEW_BYTES;
  }
  readSlot(bytes: Uint8Array, view: DataView, slotAt: number, varAt: number, end: number, corrupt: Corrupt): number {
    const length = lengthAt(view, slotAt, varAt, end, corrupt, 'view');
    this.valid();
    const views = this.views;
    views.reserve(VIEW_BYTES); // may replace views.bytes and views.view
    const at = views.length;
    views.bytes.fill(0, at, at + VIEW_BYTES); // the buffers are reused: padding and buffer index must be written
    views.view.setInt32(at, length, true);
    if (length <= MAX_INLINE_BYTES) for (let b = 0; b < length; b++) views.bytes[at + 4 + b] = bytes[varAt + b]!;
    else {
      views.view.setInt32(at + 4, view.getInt32(varAt, true), true); // the prefix
      views.view.setInt32(at + 12, this.data.length, true);
      this.data.copy(bytes, varAt, length);
    }
    views.length = at + VIEW_BYTES;
    return varAt + length;
  }
  snapshot(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void {
    nodes.push({ length: this.length, nullCount: this.nulls, variadicBuffers: 1 });
    buffers.push(this.nulls > 0 ? this.validity.get() : EMPTY, this.views.get(), this.data.get());
  }
  override reset(): void {
    super.reset();
    this.views.length = 0;
    this.data.length = 0;
  }
}

/** Builders whose slot is a length and whose value is a nested encoding of exactly [at, end). */
abstract class NestedBuilder extends Builder {
  readSlot(bytes: Uint8Array, view: DataView, slotAt: number, varAt: number, end: number, corrupt: Corrupt): number {
    const length = lengthAt(view, slotAt, varAt, end, corrupt, this.layout.kind);
    this.readValue(bytes, view, varAt, varAt + length, corrupt);
    return varAt + length;
  }
  protected abstract readValue(bytes: Uint8Array, view: DataView, at: number, end: number, corrupt: Corrupt): void;
}

/**
 * `n` elements of `child` at `at` (bitmap, slots, variable bytes), which must
 * end exactly at `end`; the space for the bitmap and slots is checked first.
 */
function readElements(child: Builder, n: number, bytes: Uint8Array, view: DataView, at: number, end: number, corrupt: Corrupt): void {
  const w = child.slot;
  const bitmapBytes = Math.ceil(n / 8);
  const slotsAt = at + bitmapBytes;
  if (bitmapBytes + n * w > end - at) throw corrupt(`${n} elements need ${bitmapBytes + n * w} bytes of bitmap and slots, the value has ${end - at}`);
  let varAt = slotsAt + n * w;
  if (child instanceof FixedBuilder && !anyBitSet(bytes, at, n)) {
    child.copyValues(bytes, slotsAt, n);
  } else {
    let slotAt = slotsAt;
    for (let e = 0; e < n; e++) {
      if ((bytes[at + (e >>> 3)]! & (1 << (e & 7))) !== 0) nullElement(child, corrupt);
      else varAt = child.readSlot(bytes, view, slotAt, varAt, end, corrupt);
      slotAt += w;
    }
  }
  if (varAt !== end) throw corrupt(`${end - varAt} bytes of a value no element accounts for`);
}

function anyBitSet(bytes: Uint8Array, at: number, n: number): boolean {
  const full = n >>> 3;
  for (let b = 0; b < full; b++) if (bytes[at + b] !== 0) return true;
  return (n & 7) !== 0 && (bytes[at + full]! & ((1 << (n & 7)) - 1)) !== 0;
}

function nullElement(child: Builder, corrupt: Corrupt): void {
  if (child.layout.kind === 'union') throw corrupt('a union value is marked null (unions have no nulls of their own)');
  child.appendNull();
}

class ListBuilder extends NestedBuilder {
  private readonly offsets = new Buf();
  constructor(layout: ColumnLayout, private readonly offsetWidth: 4 | 8, private readonly child: Builder) {
    super(layout);
    this.offsets.offset(0, offsetWidth);
  }
  protected pushNullValue(): void {
    this.offsets.offset(this.child.length, this.offsetWidth);
  }
  protected readValue(bytes: Uint8Array, view: DataView, at: number, end: number, corrupt: Corrupt): void {
    if (end - at < 4) throw corrupt(`a list value of ${end - at} bytes has no room for its element count`);
    const n = view.getUint32(at, true);
    readElements(this.child, n, bytes, view, at + 4, end, corrupt);
    this.valid();
    this.offsets.offset(this.child.length, this.offsetWidth);
  }
  snapshot(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void {
    this.node(nodes, buffers);
    buffers.push(this.offsets.get());
    this.child.snapshot(nodes, buffers);
  }
  override reset(): void {
    super.reset();
    this.offsets.length = 0;
    this.offsets.offset(0, this.offsetWidth);
    this.child.reset();
  }
}

class FixedSizeListBuilder extends NestedBuilder {
  constructor(layout: ColumnLayout, private readonly size: number, private readonly child: Builder) {
    super(layout);
  }
  protected pushNullValue(): void {
    for (let e = 0; e < this.size; e++) this.child.appendNull();
  }
  protected readValue(bytes: Uint8Array, view: DataView, at: number, end: number, corrupt: Corrupt): void {
    readElements(this.child, this.size, bytes, view, at, end, corrupt);
    this.valid();
  }
  snapshot(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void {
    this.node(nodes, buffers);
    this.child.snapshot(nodes, buffers);
  }
  override reset(): void {
    super.reset();
    this.child.reset();
  }
}

class StructBuilder extends NestedBuilder {
  private readonly bitmapBytes: number;
  private readonly fixedBytes: number;
  constructor(layout: ColumnLayout, private readonly children: readonly Builder[]) {
    super(layout);
    this.bitmapBytes = (children.length + 7) >>> 3;
    this.fixedBytes = children.reduce((n, c) => n + c.slot, this.bitmapBytes);
  }
  protected pushNullValue(): void {
    for (const child of this.children) child.appendNull();
  }
  protected readValue(bytes: Uint8Array, view: DataView, at: number, end: number, corrupt: Corrupt): void {
    if (this.fixedBytes > end - at) throw corrupt(`a struct value of ${end - at} bytes is shorter than its ${this.fixedBytes} bytes of bitmap and slots`);
    const { children } = this;
    let slotAt = at + this.bitmapBytes;
    let varAt = at + this.fixedBytes;
    for (let c = 0; c < children.length; c++) {
      const child = children[c]!;
      if ((bytes[at + (c >>> 3)]! & (1 << (c & 7))) !== 0) nullElement(child, corrupt);
      else varAt = child.readSlot(bytes, view, slotAt, varAt, end, corrupt);
      slotAt += child.slot;
    }
    if (varAt !== end) throw corrupt(`${end - varAt} bytes of a struct value no field accounts for`);
    this.valid();
  }
  snapshot(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void {
    this.node(nodes, buffers);
    for (const child of this.children) child.snapshot(nodes, buffers);
  }
  override reset(): void {
    super.reset();
    for (const child of this.children) child.reset();
  }
}

class UnionBuilder extends NestedBuilder {
  private readonly typeIds = new Buf();
  private readonly offsets = new Buf();
  private readonly union: UnionLayout;
  constructor(layout: UnionLayout, private readonly children: readonly Builder[], private readonly firstId: number) {
    super(layout);
    this.union = layout;
  }
  /** Unions have no nulls: a "null" row (a sparse sibling's filler) is the first child's null. */
  override appendNull(): void {
    if (this.children.length === 0) {
      this.typeIds.reserve(1);
      this.typeIds.bytes[this.typeIds.length++] = 0;
      this.length++;
      return;
    }
    this.appendChild(this.firstId, 0);
    this.children[0]!.appendNull();
  }
  protected pushNullValue(): void {}
  private appendChild(id: number, c: number): void {
    this.typeIds.reserve(1);
    this.typeIds.bytes[this.typeIds.length++] = id;
    if (this.union.mode === 'dense') this.offsets.u32(this.children[c]!.length);
    else for (let o = 0; o < this.children.length; o++) if (o !== c) this.children[o]!.appendNull();
    this.length++;
  }
  protected readValue(bytes: Uint8Array, view: DataView, at: number, end: number, corrupt: Corrupt): void {
    if (end - at < 2) throw corrupt(`a union value of ${end - at} bytes has no room for its type id and null flag`);
    const id = bytes[at]!;
    const c = id < 128 ? this.union.childIndex[id]! : -1;
    if (c < 0) throw corrupt(`union type id ${id} is not one of the type's`);
    const child = this.children[c]!;
    const flag = bytes[at + 1]!;
    const slotAt = at + 2;
    if (flag > 1) throw corrupt(`a union value's null flag is ${flag}`);
    if (child.slot > end - slotAt) throw corrupt(`a union value of ${end - at} bytes has no room for its ${child.slot}-byte slot`);
    this.appendChild(id, c);
    let varAt = slotAt + child.slot;
    if (flag === 1) nullElement(child, corrupt);
    else varAt = child.readSlot(bytes, view, slotAt, varAt, end, corrupt);
    if (varAt !== end) throw corrupt(`${end - varAt} bytes of a union value no field accounts for`);
  }
  snapshot(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void {
    nodes.push({ length: this.length, nullCount: 0 });
    buffers.push(this.typeIds.get());
    if (this.union.mode === 'dense') buffers.push(this.offsets.get());
    for (const child of this.children) child.snapshot(nodes, buffers);
  }
  override reset(): void {
    super.reset();
    this.typeIds.length = 0;
    this.offsets.length = 0;
    for (const child of this.children) child.reset();
  }
}

/**
 * The values of one dictionary (by id) in the batch being decoded, and a
 * hash table from their encoded bytes (positions in the block being decoded)
 * to their indices.
 */
export class DictionaryValues {
  count = 0;
  private table = new Int32Array(64).fill(-1);
  private starts = new Uint32Array(32);
  private ends = new Uint32Array(32);
  private bytes: Uint8Array = EMPTY;
  vector: Vector | null = null;

  /** `capacity`: the values the narrowest index type among the fields of this id addresses (builderOf lowers it as it meets them) */
  constructor(readonly values: Builder, readonly valueType: DataType, public capacity: number) {}

  reset(bytes: Uint8Array): void {
    if (this.count > 0) this.table.fill(-1);
    this.count = 0;
    this.bytes = bytes;
    this.values.reset();
    this.vector = null;
  }

  /** The index of the value encoded as bytes [from, to), or -1. */
  find(from: number, to: number): number {
    const { table, bytes, starts, ends } = this;
    const mask = table.length - 1;
    for (let h = hashOf(bytes, from, to) & mask; ; h = (h + 1) & mask) {
      const index = table[h]!;
      if (index < 0) return -1;
      const s = starts[index]!;
      if (ends[index]! - s === to - from && sameBytes(bytes, s, from, to - from)) return index;
    }
  }

  /** Records a new value (just appended to `values`) as index `count`. */
  add(from: number, to: number): number {
    const index = this.count++;
    if (index >= this.starts.length) {
      const starts = new Uint32Array(this.starts.length * 2);
      starts.set(this.starts);
      this.starts = starts;
      const ends = new Uint32Array(this.ends.length * 2);
      ends.set(this.ends);
      this.ends = ends;
    }
    this.starts[index] = from;
    this.ends[index] = to;
    if (2 * this.count > this.table.length) this.rehash();
    else this.insert(index);
    return index;
  }

  private insert(index: number): void {
    const { table } = this;
    const mask = table.length - 1;
    let h = hashOf(this.bytes, this.starts[index]!, this.ends[index]!) & mask;
    while (table[h]! >= 0) h = (h + 1) & mask;
    table[h] = index;
  }

  private rehash(): void {
    this.table = new Int32Array(this.table.length * 2).fill(-1);
    for (let i = 0; i < this.count; i++) this.insert(i);
  }

  /** The dictionary of the batch, built once. */
  finish(): Vector {
    if (this.vector === null) {
      const nodes: FieldNodeInfo[] = [];
      const buffers: Uint8Array[] = [];
      this.values.snapshot(nodes, buffers);
      this.vector = new Vector([dataFromBuffers(this.valueType, nodes, buffers)]);
    }
    return this.vector;
  }
}

function hashOf(bytes: Uint8Array, from: number, to: number): number {
  let h = 0x811c9dc5 ^ (to - from);
  for (let b = from; b < to; b++) h = Math.imul(h ^ bytes[b]!, 0x01000193);
  return (h ^ (h >>> 16)) >>> 0;
}

function sameBytes(bytes: Uint8Array, a: number, b: number, n: number): boolean {
  for (let k = 0; k < n; k++) if (bytes[a + k] !== bytes[b + k]) return false;
  return true;
}

class DictionaryBuilder extends Builder {
  private readonly indices = new Buf();
  private readonly width: number;
  constructor(layout: DictionaryLayout, private readonly dictionary: DictionaryValues) {
    super(layout);
    this.width = layout.indexWidth;
  }
  protected pushNullValue(): void {
    this.pushIndex(0);
  }
  private pushIndex(index: number): void {
    const { indices, width } = this;
    indices.reserve(width);
    if (width === 1) indices.bytes[indices.length] = index;
    else if (width === 2) indices.view.setUint16(indices.length, index, true);
    else {
      indices.view.setUint32(indices.length, index, true);
      if (width === 8) indices.view.setUint32(indices.length + 4, 0, true);
    }
    indices.length += width;
  }
  readSlot(bytes: Uint8Array, view: DataView, slotAt: number, varAt: number, end: number, corrupt: Corrupt): number {
    const { dictionary } = this;
    const values = dictionary.values;
    let from = slotAt;
    let to = slotAt + values.slot;
    let next = varAt;
    if (values.lengthSlot) {
      from = varAt;
      to = next = varAt + lengthAt(view, slotAt, varAt, end, corrupt, 'dictionary');
    }
    let index = dictionary.find(from, to);
    if (index < 0) {
      if (dictionary.count >= dictionary.capacity) throw DICTIONARY_FULL;
      if (values.readSlot(bytes, view, slotAt, varAt, end, corrupt) !== next) throw corrupt('a dictionary value ends before its length');
      index = dictionary.add(from, to);
    }
    this.valid();
    this.pushIndex(index);
    return next;
  }
  snapshot(nodes: FieldNodeInfo[], buffers: Uint8Array[]): void {
    this.node(nodes, buffers);
    buffers.push(this.indices.get());
  }
  override reset(): void {
    super.reset();
    this.indices.length = 0;
  }
}

/** How many distinct values indices of this type address: Int8 128, Uint8 256, ... (2^31 at most, as the writers keep to). */
function indexCapacity(layout: DictionaryLayout): number {
  return maxDictionaryIndex(layout) + 1;
}

/**
 * The builder tree of a column of `type`; dictionary builders share the
 * `dictionaries` entry of their id (created here when missing).
 */
export function builderOf(type: DataType, dictionaries: Map<number, DictionaryValues>, layout = columnLayoutOf(new Field('value', type, true))): Builder {
  const childOf = (i: number, child: ColumnLayout) => builderOf(type.children[i]!.type, dictionaries, child);
  switch (layout.kind) {
    case 'null':
      return new NullBuilder(layout);
    case 'bool':
      return new BoolBuilder(layout);
    case 'fixed-width':
      return new FixedBuilder(layout, layout.byteWidth);
    case 'binary':
      return new BinaryBuilder(layout, layout.offsetWidth);
    case 'view':
      return new ViewBuilder(layout);
    case 'list':
      return new ListBuilder(layout, layout.offsetWidth, childOf(0, layout.child));
    case 'fixed-size-list':
      return new FixedSizeListBuilder(layout, layout.listSize, childOf(0, layout.child));
    case 'struct':
      return new StructBuilder(layout, layout.children.map((child, i) => childOf(i, child)));
    case 'union': {
      const firstId = layout.childIndex.indexOf(0);
      return new UnionBuilder(layout, layout.children.map((child, i) => childOf(i, child)), firstId);
    }
    case 'dictionary': {
      let values = dictionaries.get(layout.id);
      if (values === undefined) {
        const valueType = (type as Dictionary).dictionary;
        values = new DictionaryValues(builderOf(valueType, dictionaries, layout.values), valueType, indexCapacity(layout));
        dictionaries.set(layout.id, values);
      }
      // fields sharing the id may index it with narrower types (Int32, then Int8): the dictionary stays within every one's reach
      values.capacity = Math.min(values.capacity, indexCapacity(layout));
      return new DictionaryBuilder(layout, values);
    }
  }
}
