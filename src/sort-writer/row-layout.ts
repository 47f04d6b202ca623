import type { Field } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { childLayouts, columnLayoutOf, type ColumnLayout } from '../writer/column-layout.js';

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
 *                        LargeBinary
 *                     a null field's slot is all zeros
 * variable section := the bytes of every variable-length field, in schema order
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
 * Nested types will fit without changing this layout: a nested field gets a
 * u32 length slot like a string, and its value, encoded recursively (child
 * null bitmap, child slots, child variable section), goes into the variable
 * section. Until then nested and dictionary columns are refused.
 */
export type RowField =
  | { readonly kind: 'null'; readonly slot: number }
  | { readonly kind: 'bool'; readonly slot: number }
  | { readonly kind: 'fixed'; readonly slot: number; readonly width: number }
  | { readonly kind: 'variable'; readonly slot: number; readonly offsetWidth: 4 | 8 }
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
 * refuses (view types, at any depth, named like `tags.item`), plus widths no
 * writer makes.
 */
export function rowLayoutOf(fields: readonly Field[]): RowLayout {
  const bitmapBytes = (fields.length + 7) >>> 3;
  let at = ROW_LENGTH_BYTES + bitmapBytes;
  const variableFields: number[] = [];
  const rowFields = fields.map((field, f): RowField => {
    const slot = at;
    const layout = columnLayoutOf(field); // refuses what the columnar writer refuses, naming the column
    assertRowWidths(layout, field);
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

/** A schema read from a file may claim widths no writer makes (a 1-bit Decimal is 1/8 byte): refused at any depth. */
function assertRowWidths(layout: ColumnLayout, field: Field): void {
  if (layout.kind === 'fixed-width' && !(Number.isInteger(layout.byteWidth) && layout.byteWidth > 0)) {
    throw new ShuffleError('CS_UNSUPPORTED_TYPE', `the sort writer cannot shuffle a column of type ${String(field.type)}: a value of ${layout.byteWidth} bytes`, { column: field.name });
  }
  if (layout.kind === 'dictionary') assertRowWidths(layout.values, field);
  for (const child of childLayouts(layout)) assertRowWidths(child, field);
}
