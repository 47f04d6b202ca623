import type { Field } from 'apache-arrow';
import { columnLayoutOf, type ColumnLayout } from '../writer/column-layout.js';

/**
 * The compact binary row of the sort writer: Velox's CompactRow in spirit
 * (fields at their natural widths, no padding), laid out like Spark's
 * UnsafeRow (a fixed slot per field, then a variable-length section) so that
 * a column can be written into every row of a batch in one loop.
 *
 * ```text
 * row              := u32 LE length | null bitmap | fixed section | variable section | padding
 *                     (length counts the bytes after itself, padding excluded)
 * null bitmap      := ceil(F / 8) bytes; bit f (byte f >> 3, bit f & 7) set: field f is null
 * fixed section    := one slot per field, in schema order, no padding:
 *                       Null                              0 bytes
 *                       Bool                              1 byte, 0 or 1
 *                       fixed width (ints, floats,        the Arrow value's bytes (1, 2, 4, 8, 16,
 *                        decimals, dates, times, ...)      32 or N), little-endian as in Arrow
 *                       Utf8, Binary, LargeUtf8,          u32 LE byte length of the value
 *                        LargeBinary, Utf8View,
 *                        BinaryView
 *                     a null field's slot is all zeros
 * variable section := the bytes of every variable-length field, in schema order (a view
 *                     value's bytes, wherever its view keeps them: a Utf8View row is
 *                     byte for byte the Utf8 row of the same strings)
 * padding          := 0-3 zero bytes: every row starts at a multiple of 4 (as
 *                     UnsafeRow aligns to 8), so that rows are copied a word at a time
 * ```
 *
 * Worked example: schema `{id: Int32, name: Utf8, flag: Bool}` (F = 3: a
 * 1-byte bitmap, slots at 5, 9 and 13, fixed section ends at 14).
 *
 * ```text
 * row (7, "hi", true):        0C 00 00 00 | 00 | 07 00 00 00 | 02 00 00 00 | 01 | 68 69
 *                             length 12     bm   id = 7        name: 2 B      flag  "hi"
 *                             16 bytes: no padding
 * row (null, null, false):    0A 00 00 00 | 03 | 00 00 00 00 | 00 00 00 00 | 00 | 00 00
 *                                           bits 0 and 1: id and name are null  padding to 16
 * ```
 *
 * Nested and dictionary columns use the same layout recursively. A row's
 * bitmap, slots and variable section form a *record* of values; a nested
 * value is a record of its own (or of its elements), stored in the variable
 * section of its parent like a string, with a u32 length slot:
 *
 * ```text
 * record           := bitmap of its K values (ceil(K / 8) bytes, bit set: null) | K slots | variable section
 * slot of a value  := as in the fixed section above (Null 0 bytes, Bool 1, fixed width its width,
 *                     Utf8/Binary/Utf8View/BinaryView a u32 length), and
 *                       List, LargeList, Map, FixedSizeList, Struct, Union
 *                                                          u32 LE byte length of its nested value
 *                       Dictionary                         the slot of its value type: a dictionary value
 *                                                          is stored decoded, exactly as a value of the
 *                                                          dictionary's value type (as Spark's UnsafeRow,
 *                                                          which has no dictionaries, would)
 *                     a null value's slot is zeros and it has no bytes in the variable section
 * nested value     := List, LargeList, Map (a list of key-value structs)
 *                       u32 LE element count N | record of the N elements
 *                     FixedSizeList(S)
 *                       record of the S elements (the count is the type's)
 *                     Struct with C fields
 *                       record of the C field values
 *                     Union (sparse or dense: the same bytes)
 *                       u8 type id | u8 1 if the child value is null, else 0 | slot of the child value |
 *                       its variable section (a union is never null itself: nulls are its children's)
 * ```
 * No padding anywhere inside a row; every length counts exactly the bytes of
 * its value, so a value is canonical (equal values, equal bytes) and the
 * reader can check every length, count and type id against the bytes its
 * parent gives it. A list of fixed-width values without nulls is its bitmap
 * of zeros followed by the Arrow values verbatim.
 *
 * Worked example: `{id: Int32 not null, tags: List<Utf8>, pt: Struct<x: Int16, name: Utf8>}`
 * (F = 3: a 1-byte bitmap, slots at 5, 9 and 13, the variable section from 17).
 *
 * ```text
 * row (7, ["a", null, "bc"], {x: 5, name: null}), 44 bytes:
 *   28 00 00 00 | 00 | 07 00 00 00 | 14 00 00 00 | 07 00 00 00 | tags value (20 B) | pt value (7 B)
 *   length 40     bm   id = 7        tags: 20 B    pt: 7 B
 * tags value:  03 00 00 00 | 02 | 01 00 00 00 | 00 00 00 00 | 02 00 00 00 | 61 | 62 63
 *              3 elements    bit 1: null  "a": 1 B      null: 0       "bc": 2 B    "a"  "bc"
 * pt value:    02 | 05 00 | 00 00 00 00
 *              bit 1: name is null, x = 5, name's slot zeros, no variable bytes
 * ```
 *
 * A union and a dictionary: `{u: DenseUnion<i: Int32 = id 0, s: Utf8 = id 5>, d: Dictionary<Int8, Utf8>}`
 * (slots at 5 and 9; `d` has Utf8's slot, a length):
 *
 * ```text
 * row (u = s: "hi", d = "xyz"), 24 bytes:
 *   14 00 00 00 | 00 | 08 00 00 00 | 03 00 00 00 | 05 00 02 00 00 00 68 69 | 78 79 7A
 *   length 20     bm   u: 8 B        d: 3 B        id 5, not null, "hi"      "xyz" (the value, not its index)
 * ```
 * The reader rebuilds a dictionary per decoded batch from the values it
 * meets, deduplicated by their encoded bytes, in first-seen order.
 */
export type RowField =
  | { readonly kind: 'null'; readonly slot: number }
  | { readonly kind: 'bool'; readonly slot: number }
  | { readonly kind: 'fixed'; readonly slot: number; readonly width: number }
  | { readonly kind: 'variable'; readonly slot: number; readonly offsetWidth: 4 | 8 }
  /** Utf8View, BinaryView: encoded as 'variable' is; decoded into views (row-decoder.ts) */
  | { readonly kind: 'view'; readonly slot: number }
  /** a nested or dictionary column: `width` bytes of slot (slotWidthOf), its value encoded as `nested value` above */
  | { readonly kind: 'tree'; readonly slot: number; readonly width: number; readonly lengthSlot: boolean; readonly layout: ColumnLayout };

export interface RowLayout {
  readonly fields: readonly RowField[];
  /** ceil(F / 8) */
  readonly bitmapBytes: number;
  /** where the variable section starts, from the start of the length prefix: 4 + bitmap + fixed section */
  readonly headerBytes: number;
  /** indexes of the fields whose slot is a u32 length (strings, nested values), in schema order */
  readonly variableFields: readonly number[];
}

/** Bytes of the u32 row length that precedes every row. */
export const ROW_LENGTH_BYTES = 4;

/**
 * The row layout of the given output fields, or CS_UNSUPPORTED_TYPE naming
 * the first column a row cannot hold: exactly what the columnar writer
 * refuses (types columnLayoutOf has no layout for, at any depth, named like
 * `tags.item`, and parameters no reader takes: a Decimal of 16 bits, a
 * negative byte width).
 */
export function rowLayoutOf(fields: readonly Field[]): RowLayout {
  const bitmapBytes = (fields.length + 7) >>> 3;
  let at = ROW_LENGTH_BYTES + bitmapBytes;
  const variableFields: number[] = [];
  const rowFields = fields.map((field, f): RowField => {
    const slot = at;
    const layout = columnLayoutOf(field); // refuses what the columnar writer refuses, naming the column
    const width = slotWidthOf(layout);
    at += width;
    switch (layout.kind) {
      case 'null':
        return { kind: 'null', slot };
      case 'bool':
        return { kind: 'bool', slot };
      case 'fixed-width':
        return { kind: 'fixed', slot, width };
      case 'binary':
        variableFields.push(f);
        return { kind: 'variable', slot, offsetWidth: layout.offsetWidth };
      case 'view':
        variableFields.push(f);
        return { kind: 'view', slot };
      default: {
        const lengthSlot = hasLengthSlot(layout);
        if (lengthSlot) variableFields.push(f);
        return { kind: 'tree', slot, width, lengthSlot, layout };
      }
    }
  });
  return { fields: rowFields, bitmapBytes, headerBytes: at, variableFields };
}

/** Bytes of a value's slot in a record: Null 0, Bool 1, fixed width its width, a dictionary its values', everything else a u32 length. */
export function slotWidthOf(layout: ColumnLayout): number {
  switch (layout.kind) {
    case 'null':
      return 0;
    case 'bool':
      return 1;
    case 'fixed-width':
      return layout.byteWidth;
    case 'dictionary':
      return slotWidthOf(layout.values);
    default:
      return 4;
  }
}

/** Whether a value's slot is a u32 length of bytes in the variable section (strings and nested values, and dictionaries of them). */
export function hasLengthSlot(layout: ColumnLayout): boolean {
  switch (layout.kind) {
    case 'null':
    case 'bool':
    case 'fixed-width':
      return false;
    case 'dictionary':
      return hasLengthSlot(layout.values);
    default:
      return true;
  }
}


