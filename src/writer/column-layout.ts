import { DataType, DateUnit, Field, IntervalUnit, TimeUnit, Type, UnionMode, type Dictionary, type Union } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { VIEW_BYTES } from '../format/binary-view.js';

/**
 * How a column's buffers are laid out in the Arrow columnar format, which
 * decides the split function that moves it into partition buffers. Nested
 * layouts hold their children's layouts; a column is a tree of them.
 *
 * ```text
 * null             no buffers (every slot is null)
 * fixed-width      [validity][values: byteWidth bytes per row]
 * bool             [validity][values: 1 bit per row]
 * binary           [validity][offsets: int32 or int64, rows + 1][data bytes]
 * view             [validity][views: 16 bytes per row][variadic data buffers]*
 *                  (Utf8View, BinaryView; see binary-view.ts)
 * list             [validity][offsets: int32 or int64, rows + 1]  child: offsets[rows] rows
 *                  (List, LargeList, and Map, whose child is a struct of key and value)
 * fixed-size-list  [validity]                                      child: rows x listSize rows
 * struct           [validity]                                      children: rows rows each
 * union (sparse)   [type ids: int8]                                children: rows rows each
 * union (dense)    [type ids: int8][offsets: int32]                children: as many rows as point at each
 * dictionary       [validity][indices: indexWidth bytes per row]   values: in dictionary batches
 * ```
 * Unions have no validity buffer (Arrow format V5): nulls live in the children.
 */
export type ColumnLayout =
  | { readonly kind: 'null' }
  | { readonly kind: 'fixed-width'; readonly byteWidth: number }
  | { readonly kind: 'bool' }
  | { readonly kind: 'binary'; readonly offsetWidth: 4 | 8 }
  | { readonly kind: 'view' }
  | { readonly kind: 'list'; readonly offsetWidth: 4 | 8; readonly child: ColumnLayout }
  | { readonly kind: 'fixed-size-list'; readonly listSize: number; readonly child: ColumnLayout }
  | { readonly kind: 'struct'; readonly children: readonly ColumnLayout[] }
  | UnionLayout
  | DictionaryLayout;

export interface UnionLayout {
  readonly kind: 'union';
  readonly mode: 'sparse' | 'dense';
  /** child index of each type id (0..127); -1 for ids the type does not declare */
  readonly childIndex: Int8Array;
  readonly children: readonly ColumnLayout[];
}

export interface DictionaryLayout {
  readonly kind: 'dictionary';
  /** the dictionary id of the field (the schema's; several fields may share one dictionary) */
  readonly id: number;
  readonly indexWidth: 1 | 2 | 4 | 8;
  readonly indexSigned: boolean;
  /** the layout of the dictionary's values */
  readonly values: ColumnLayout;
  readonly valueType: DataType;
}

/** Layouts by type object (null: a type this library does not split); see layoutOfType. */
const layoutsByType = new WeakMap<DataType, ColumnLayout | null>();

/**
 * The layout of a column of `type`, or null for a type this library does not
 * split; cached by type object, as the batches a reader loads from one stream
 * share their schema's types (validated and loaded per batch, per column).
 */
export function layoutOfType(type: DataType): ColumnLayout | null {
  let layout = layoutsByType.get(type);
  if (layout === undefined) {
    try {
      layout = columnLayoutOf(new Field('c', type));
    } catch {
      layout = null;
    }
    layoutsByType.set(type, layout);
  }
  return layout;
}

/**
 * The layout of a field (recursively), or a CS_UNSUPPORTED_TYPE error naming
 * the column (a nested one as `parent.child`) and the type.
 */
export function columnLayoutOf(field: Field, column = field.name): ColumnLayout {
  const type: DataType = field.type;
  const unsupported = (why: string) =>
    new ShuffleError('CS_UNSUPPORTED_TYPE', `cannot shuffle a column of type ${String(type)}: ${why}`, { column });
  const childOf = (child: Field) => columnLayoutOf(child, `${column}.${child.name}`);
  // arrow-js builds types of any parameters (Decimal of 16 bits, a negative byte width); a writer took
  // them, and wrote outputs no reader could read, or failed with a plain RangeError
  const bitsOf = (of: DataType, allowed: readonly number[]) => {
    const bits = (of as DataType & { bitWidth: number }).bitWidth;
    if (!allowed.includes(bits)) throw unsupported(`a bit width of ${String(bits)} (one of ${allowed.join(', ')})`);
    return bits;
  };
  const count = (value: number, what: string) => {
    if (!(Number.isInteger(value) && value >= 0 && value <= 0x7fffffff)) throw unsupported(`a ${what} of ${String(value)}`);
    return value;
  };
  switch (type.typeId) {
    case Type.Null:
      return { kind: 'null' };
    case Type.Bool:
      return { kind: 'bool' };
    case Type.Int:
    case Type.Int8:
    case Type.Int16:
    case Type.Int32:
    case Type.Int64:
    case Type.Uint8:
    case Type.Uint16:
    case Type.Uint32:
    case Type.Uint64:
      return fixed(bitsOf(type, [8, 16, 32, 64]) / 8);
    case Type.Time:
    case Type.TimeSecond:
    case Type.TimeMillisecond:
    case Type.TimeMicrosecond:
    case Type.TimeNanosecond: {
      // the spec pairs the unit with the width: seconds and milliseconds in 32 bits, finer units in 64
      const unit = (type as DataType & { unit: TimeUnit }).unit;
      return fixed(bitsOf(type, unit === TimeUnit.SECOND || unit === TimeUnit.MILLISECOND ? [32] : [64]) / 8);
    }
    case Type.Decimal:
      return fixed(bitsOf(type, [32, 64, 128, 256]) / 8);
    case Type.Float:
    case Type.Float16:
    case Type.Float32:
    case Type.Float64: {
      const width = [2, 4, 8][(type as DataType & { precision: number }).precision];
      if (width === undefined) throw unsupported('a float precision other than half, single or double');
      return fixed(width);
    }
    case Type.Date:
    case Type.DateDay:
    case Type.DateMillisecond:
      return fixed((type as DataType & { unit: DateUnit }).unit === DateUnit.DAY ? 4 : 8);
    case Type.Timestamp:
    case Type.TimestampSecond:
    case Type.TimestampMillisecond:
    case Type.TimestampMicrosecond:
    case Type.TimestampNanosecond:
    case Type.Duration:
    case Type.DurationSecond:
    case Type.DurationMillisecond:
    case Type.DurationMicrosecond:
    case Type.DurationNanosecond:
      return fixed(8);
    case Type.Interval:
    case Type.IntervalDayTime:
    case Type.IntervalYearMonth:
    case Type.IntervalMonthDayNano: {
      const unit = (type as DataType & { unit: IntervalUnit }).unit;
      return fixed(unit === IntervalUnit.YEAR_MONTH ? 4 : unit === IntervalUnit.DAY_TIME ? 8 : 16);
    }
    case Type.FixedSizeBinary:
      return fixed(count((type as DataType & { byteWidth: number }).byteWidth, 'byte width'));
    case Type.Utf8:
    case Type.Binary:
      return { kind: 'binary', offsetWidth: 4 };
    case Type.LargeUtf8:
    case Type.LargeBinary:
      return { kind: 'binary', offsetWidth: 8 };
    case Type.Utf8View:
    case Type.BinaryView:
      return { kind: 'view' };
    case Type.List:
    case Type.Map:
      return { kind: 'list', offsetWidth: 4, child: childOf(type.children[0]!) };
    case Type.LargeList:
      return { kind: 'list', offsetWidth: 8, child: childOf(type.children[0]!) };
    case Type.FixedSizeList:
      return { kind: 'fixed-size-list', listSize: count((type as DataType & { listSize: number }).listSize, 'list size'), child: childOf(type.children[0]!) };
    case Type.Struct:
      return { kind: 'struct', children: type.children.map(childOf) };
    case Type.Union:
    case Type.DenseUnion:
    case Type.SparseUnion: {
      const union = type as Union;
      const childIndex = new Int8Array(128).fill(-1);
      union.typeIds.forEach((id, c) => {
        if (!(id >= 0 && id < 128)) throw unsupported(`union type id ${id} is outside [0, 128)`);
        childIndex[id] = c;
      });
      return { kind: 'union', mode: union.mode === UnionMode.Dense ? 'dense' : 'sparse', childIndex, children: type.children.map(childOf) };
    }
    case Type.Dictionary: {
      const dictionary = type as Dictionary;
      const values = columnLayoutOf(new Field(field.name, dictionary.dictionary, true), column);
      if (containsDictionary(values)) throw unsupported('a dictionary whose values hold another dictionary');
      const indices = dictionary.indices;
      bitsOf(indices, [8, 16, 32, 64]);
      return {
        kind: 'dictionary',
        id: dictionary.id,
        indexWidth: (indices.bitWidth / 8) as 1 | 2 | 4 | 8,
        indexSigned: indices.isSigned,
        values,
        valueType: dictionary.dictionary,
      };
    }
    default:
      throw unsupported('this type is not supported');
  }
}

function fixed(byteWidth: number): ColumnLayout {
  return { kind: 'fixed-width', byteWidth };
}

function containsDictionary(layout: ColumnLayout): boolean {
  return layout.kind === 'dictionary' || childLayouts(layout).some(containsDictionary);
}

/** The layouts nested directly under this one, in IPC order. */
export function childLayouts(layout: ColumnLayout): readonly ColumnLayout[] {
  switch (layout.kind) {
    case 'list':
    case 'fixed-size-list':
      return [layout.child];
    case 'struct':
    case 'union':
      return layout.children;
    default:
      return [];
  }
}

/** Every dictionary layout in a column, in pre-order. */
export function dictionaryLayouts(layout: ColumnLayout, out: DictionaryLayout[] = []): DictionaryLayout[] {
  if (layout.kind === 'dictionary') out.push(layout);
  for (const child of childLayouts(layout)) dictionaryLayouts(child, out);
  return out;
}

/** Whether a layout is one of the flat ones (no children, no dictionary). */
export function isFlat(layout: ColumnLayout): layout is Extract<ColumnLayout, { kind: 'null' | 'fixed-width' | 'bool' | 'binary' | 'view' }> {
  return layout.kind === 'null' || layout.kind === 'fixed-width' || layout.kind === 'bool' || layout.kind === 'binary' || layout.kind === 'view';
}

/**
 * Bytes a row of this column takes in a partition buffer, not counting
 * validity, variable-length data or nested children (Gluten's
 * fixedWidthBufferBytes_: a bool counts as a byte; a binary or list column
 * counts its offset, a view column its 16-byte view; a union its type id
 * and, dense, its offset).
 */
export function fixedBytesPerRow(layout: ColumnLayout): number {
  switch (layout.kind) {
    case 'null':
    case 'struct':
    case 'fixed-size-list':
      return 0;
    case 'bool':
      return 1;
    case 'fixed-width':
      return layout.byteWidth;
    case 'view':
      return VIEW_BYTES;
    case 'binary':
    case 'list':
      return layout.offsetWidth;
    case 'union':
      return layout.mode === 'dense' ? 5 : 1;
    case 'dictionary':
      return layout.indexWidth;
  }
}
