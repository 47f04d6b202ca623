/**
 * Random nested Arrow types and columns: lists, large lists, fixed-size
 * lists, structs, maps, sparse and dense unions and dictionaries (any index
 * width, flat or nested values), nested to a given depth over the flat type
 * catalog, built with `makeData` so the test controls every buffer: nulls at
 * every level (a null struct keeps child slots, a null list may still span
 * child rows, as the spec allows), empty lists, zero-length children, list
 * offsets that do not start at 0, children longer than their parents need.
 *
 * Dictionaries: a `DictionaryContext` remembers each dictionary type's last
 * dictionary, so the batches of one case can share it, extend it (an IPC
 * delta: the old chunks plus a new one) or bring an unrelated one.
 */
import {
  DenseUnion,
  Dictionary,
  Field,
  FixedSizeList,
  Int16,
  Int32,
  Int64,
  Int8,
  LargeList,
  List,
  Map_,
  SparseUnion,
  Struct,
  Type,
  Uint16,
  Uint32,
  Uint8,
  Utf8,
  Utf8View,
  Vector,
  makeData,
  type Data,
  type DataType,
} from 'apache-arrow';
import { buildColumn, typeCase, type ValiditySpec } from './columns.js';
import type { Rng } from './random.js';

/** Flat leaves used inside nested types: a spread of widths and kinds (every flat type is covered by the flat suites). */
const LEAVES = ['Null', 'Bool', 'Int8', 'Int32', 'Int64', 'Uint16', 'Float64', 'Decimal128(38,10)', 'DateDay', 'TimestampMicrosecond', 'IntervalMonthDayNano', 'FixedSizeBinary(3)', 'Utf8', 'Binary', 'LargeUtf8', 'Utf8View', 'BinaryView'];
const INDEX_TYPES = [() => new Int8(), () => new Int16(), () => new Int32(), () => new Int64(), () => new Uint8(), () => new Uint16(), () => new Uint32()];

export type NestedKind = 'list' | 'large-list' | 'fixed-size-list' | 'struct' | 'map' | 'sparse-union' | 'dense-union' | 'dictionary';
export const NESTED_KINDS: readonly NestedKind[] = ['list', 'large-list', 'fixed-size-list', 'struct', 'map', 'sparse-union', 'dense-union', 'dictionary'];

/** A random type: flat with probability 1 - nestRate at each level, nested at most `depth` deep. */
export function randomType(rng: Rng, depth: number, nestRate = 0.6, inDictionary = false): DataType {
  if (depth <= 0 || !rng.chance(nestRate)) return typeCase(rng.pick(LEAVES)).make();
  const kinds = inDictionary ? NESTED_KINDS.filter((k) => k !== 'dictionary') : NESTED_KINDS;
  return nestedType(rng.pick(kinds), rng, depth, nestRate, inDictionary);
}

export function nestedType(kind: NestedKind, rng: Rng, depth: number, nestRate = 0.6, inDictionary = false): DataType {
  const child = (name: string) => new Field(name, randomType(rng, depth - 1, nestRate, inDictionary), true);
  switch (kind) {
    case 'list':
      return new List(child('item'));
    case 'large-list':
      return new LargeList(child('item'));
    case 'fixed-size-list':
      return new FixedSizeList(rng.int(1, 3), child('item'));
    case 'struct':
      return new Struct(Array.from({ length: rng.int(1, 3) }, (_, i) => child(`f${i}`)));
    case 'map': {
      const key = new Field('key', rng.chance(0.5) ? (rng.chance(0.7) ? new Utf8() : new Utf8View()) : new Int32(), false);
      const value = child('value');
      return new Map_(new Field('entries', new Struct([key, value]), false) as never, rng.chance(0.3));
    }
    case 'sparse-union':
    case 'dense-union': {
      const count = rng.int(1, 3);
      // type ids need not be 0..n-1: the writer must map them to children
      const ids = rng.chance(0.5) ? Array.from({ length: count }, (_, i) => i) : Array.from({ length: count }, (_, i) => 3 * i + 1);
      const fields = ids.map((id) => child(`u${id}`));
      return kind === 'sparse-union' ? new SparseUnion(ids, fields) : new DenseUnion(ids, fields);
    }
    case 'dictionary': {
      const values = rng.chance(0.7) ? typeCase(rng.pick(['Utf8', 'Int64', 'Float64', 'LargeUtf8', 'FixedSizeBinary(3)', 'Utf8View'])).make() : randomType(rng, depth - 1, nestRate, true);
      return new Dictionary(values, rng.pick(INDEX_TYPES)() as Int32);
    }
  }
}

/** Per dictionary type (by id): the last dictionary built for it. */
export type DictionaryContext = Map<number, Vector>;

export interface NestedOptions {
  /** probability of a null at every level that can hold one */
  readonly nullRate: number;
  readonly dictionaries?: DictionaryContext;
  /** how a batch's dictionary relates to the previous one of its type (default: random) */
  readonly dictionaryMode?: 'reuse' | 'extend' | 'new' | 'random';
}

function validity(rng: Rng, nullRate: number): ValiditySpec {
  return nullRate > 0 || rng.chance(0.3) ? { bitmap: true, nullRate } : { bitmap: false, nullRate: 0 };
}

function bitmapOf(rng: Rng, length: number, nullRate: number): { nullBitmap?: Uint8Array; nullCount: number; valid: boolean[] } {
  const valid = Array.from({ length }, () => !rng.chance(nullRate));
  if (nullRate === 0 && rng.chance(0.5)) return { nullCount: 0, valid };
  const nullBitmap = rng.fill(new Uint8Array(((length + 7) >>> 3) + rng.int(0, 3)));
  let nullCount = 0;
  valid.forEach((v, i) => {
    if (v) nullBitmap[i >>> 3]! |= 1 << (i & 7);
    else {
      nullBitmap[i >>> 3]! &= ~(1 << (i & 7));
      nullCount++;
    }
  });
  return { nullBitmap, nullCount, valid };
}

/** A random column of any type (flat ones through buildColumn) with `length` rows. */
export function buildAny(type: DataType, length: number, rng: Rng, options: NestedOptions): Data {
  const { nullRate } = options;
  switch (type.typeId) {
    case Type.List:
    case Type.LargeList:
    case Type.Map: {
      const { nullBitmap, nullCount, valid } = bitmapOf(rng, length, nullRate);
      const lead = rng.chance(0.3) ? rng.int(1, 3) : 0;
      const offsets = [lead];
      for (let i = 0; i < length; i++) {
        // empty lists often; a null may still span child rows (the spec allows it)
        const n = rng.chance(0.25) ? 0 : valid[i] || rng.chance(0.3) ? rng.int(0, 4) : 0;
        offsets.push(offsets[i]! + n);
      }
      const childLength = offsets[length]! + rng.int(0, 2);
      const childType = type.children[0]!.type;
      const child = type.typeId === Type.Map ? buildMapEntries(childType as Struct, childLength, rng, options) : buildAny(childType, childLength, rng, options);
      const valueOffsets = type.typeId === Type.LargeList ? BigInt64Array.from(offsets, BigInt) : Int32Array.from(offsets);
      return makeData({ type, length, nullCount, nullBitmap, valueOffsets, child } as never);
    }
    case Type.FixedSizeList: {
      const { nullBitmap, nullCount } = bitmapOf(rng, length, nullRate);
      const size = (type as FixedSizeList).listSize;
      return makeData({ type, length, nullCount, nullBitmap, child: buildAny(type.children[0]!.type, length * size, rng, options) } as never);
    }
    case Type.Struct: {
      const { nullBitmap, nullCount } = bitmapOf(rng, length, nullRate);
      const children = type.children.map((f) => buildAny(f.type, length, rng, options));
      return makeData({ type, length, nullCount, nullBitmap, children } as never);
    }
    case Type.Union: {
      const union = type as SparseUnion | DenseUnion;
      const ids = Int8Array.from({ length }, () => rng.pick([...union.typeIds]));
      if (union.mode === 0) {
        const children = union.children.map((f) => buildAny(f.type, length, rng, options));
        return makeData({ type: union, length, typeIds: ids, children } as never);
      }
      const counts = union.children.map(() => 0);
      const offsets = Int32Array.from(ids, (id) => counts[union.typeIdToChildIndex[id]!]!++);
      const children = union.children.map((f, c) => buildAny(f.type, counts[c]! + rng.int(0, 2), rng, options));
      return makeData({ type: union, length, typeIds: ids, valueOffsets: offsets, children } as never);
    }
    case Type.Dictionary:
      return buildDictionary(type as Dictionary, length, rng, options);
    default:
      return buildColumn(type, length, validity(rng, nullRate), rng);
  }
}

/** Map entries: keys never null (the spec), values random. */
function buildMapEntries(type: Struct, length: number, rng: Rng, options: NestedOptions): Data {
  const [keyField, valueField] = type.children as [Field, Field];
  const key = buildColumn(keyField.type, length, { bitmap: false, nullRate: 0 }, rng);
  const value = buildAny(valueField.type, length, rng, options);
  return makeData({ type, length, nullCount: 0, children: [key, value] } as never);
}

function buildDictionary(type: Dictionary, length: number, rng: Rng, options: NestedOptions): Data {
  const context = options.dictionaries ?? new Map<number, Vector>();
  const previous = context.get(type.id);
  const mode = options.dictionaryMode === undefined || options.dictionaryMode === 'random' ? rng.pick(['reuse', 'reuse', 'extend', 'new'] as const) : options.dictionaryMode;
  const values = (n: number) => buildAny(type.dictionary, n, rng, { ...options, nullRate: options.nullRate / 2 });
  let dictionary: Vector;
  if (previous !== undefined && mode === 'reuse') dictionary = previous;
  else if (previous !== undefined && mode === 'extend') dictionary = new Vector([...previous.data, values(rng.int(0, 4))]);
  else dictionary = new Vector([values(rng.int(0, 6))]);
  context.set(type.id, dictionary);
  const { nullBitmap, nullCount, valid } = bitmapOf(rng, length, dictionary.length === 0 ? 1 : options.nullRate);
  const Indices = type.indices.ArrayType as unknown as { new (n: number): Int32Array };
  const indices = new Indices(length);
  for (let i = 0; i < length; i++) {
    const index = valid[i] ? rng.int(0, dictionary.length - 1) : rng.int(0, 200); // garbage under nulls
    indices[i] = (indices instanceof BigInt64Array || indices instanceof BigUint64Array ? BigInt(index) : index) as number;
  }
  return makeData({ type, length, nullCount: dictionary.length === 0 ? length : nullCount, nullBitmap: dictionary.length === 0 ? new Uint8Array((length + 7) >>> 3) : nullBitmap, data: indices, dictionary } as never);
}
