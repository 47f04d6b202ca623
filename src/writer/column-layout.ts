import { DataType, DateUnit, IntervalUnit, Type, type Field } from 'apache-arrow';
import { ShuffleError } from '../errors.js';

/**
 * How a column's buffers are laid out in the Arrow columnar format, which
 * decides the split function that moves it into partition buffers.
 *
 * ```text
 * null         no buffers (every slot is null)
 * fixed-width  [validity][values: byteWidth bytes per row]
 * bool         [validity][values: 1 bit per row]
 * binary       [validity][offsets: int32 or int64, rows + 1][data bytes]
 * ```
 */
export type ColumnLayout =
  | { readonly kind: 'null' }
  | { readonly kind: 'fixed-width'; readonly byteWidth: number }
  | { readonly kind: 'bool' }
  | { readonly kind: 'binary'; readonly offsetWidth: 4 | 8 };

/** The layout of a top-level field, or a CS_UNSUPPORTED_TYPE error naming it. */
export function columnLayoutOf(field: Field): ColumnLayout {
  const type: DataType = field.type;
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
    case Type.Time:
    case Type.TimeSecond:
    case Type.TimeMillisecond:
    case Type.TimeMicrosecond:
    case Type.TimeNanosecond:
    case Type.Decimal:
      return fixed((type as DataType & { bitWidth: number }).bitWidth / 8);
    case Type.Float:
    case Type.Float16:
    case Type.Float32:
    case Type.Float64:
      return fixed([2, 4, 8][(type as DataType & { precision: number }).precision]!);
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
      return fixed((type as DataType & { byteWidth: number }).byteWidth);
    case Type.Utf8:
    case Type.Binary:
      return { kind: 'binary', offsetWidth: 4 };
    case Type.LargeUtf8:
    case Type.LargeBinary:
      return { kind: 'binary', offsetWidth: 8 };
    default:
      throw new ShuffleError(
        'CS_UNSUPPORTED_TYPE',
        `cannot shuffle a column of type ${String(type)}: nested, dictionary and view types are not supported yet`,
        { column: field.name },
      );
  }
}

function fixed(byteWidth: number): ColumnLayout {
  return { kind: 'fixed-width', byteWidth };
}

/**
 * Bytes a row of this column takes in a partition buffer, not counting
 * validity or variable-length data (Gluten's fixedWidthBufferBytes_: a bool
 * counts as a byte; a binary column counts its offset).
 */
export function fixedBytesPerRow(layout: ColumnLayout): number {
  switch (layout.kind) {
    case 'null':
      return 0;
    case 'bool':
      return 1;
    case 'fixed-width':
      return layout.byteWidth;
    case 'binary':
      return layout.offsetWidth;
  }
}
