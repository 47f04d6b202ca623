import { DataType, DateUnit, Field, IntervalUnit, Type, UnionMode } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
/**
 * The layout of a field (recursively), or a CS_UNSUPPORTED_TYPE error naming
 * the column (a nested one as `parent.child`) and the type.
 */
export function columnLayoutOf(field, column = field.name) {
    const type = field.type;
    const unsupported = (why) => new ShuffleError('CS_UNSUPPORTED_TYPE', `cannot shuffle a column of type ${String(type)}: ${why}`, { column });
    const childOf = (child) => columnLayoutOf(child, `${column}.${child.name}`);
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
            return fixed(type.bitWidth / 8);
        case Type.Float:
        case Type.Float16:
        case Type.Float32:
        case Type.Float64:
            return fixed([2, 4, 8][type.precision]);
        case Type.Date:
        case Type.DateDay:
        case Type.DateMillisecond:
            return fixed(type.unit === DateUnit.DAY ? 4 : 8);
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
            const unit = type.unit;
            return fixed(unit === IntervalUnit.YEAR_MONTH ? 4 : unit === IntervalUnit.DAY_TIME ? 8 : 16);
        }
        case Type.FixedSizeBinary:
            return fixed(type.byteWidth);
        case Type.Utf8:
        case Type.Binary:
            return { kind: 'binary', offsetWidth: 4 };
        case Type.LargeUtf8:
        case Type.LargeBinary:
            return { kind: 'binary', offsetWidth: 8 };
        case Type.List:
        case Type.Map:
            return { kind: 'list', offsetWidth: 4, child: childOf(type.children[0]) };
        case Type.LargeList:
            return { kind: 'list', offsetWidth: 8, child: childOf(type.children[0]) };
        case Type.FixedSizeList:
            return { kind: 'fixed-size-list', listSize: type.listSize, child: childOf(type.children[0]) };
        case Type.Struct:
            return { kind: 'struct', children: type.children.map(childOf) };
        case Type.Union:
        case Type.DenseUnion:
        case Type.SparseUnion: {
            const union = type;
            const childIndex = new Int8Array(128).fill(-1);
            union.typeIds.forEach((id, c) => {
                if (!(id >= 0 && id < 128))
                    throw unsupported(`union type id ${id} is outside [0, 128)`);
                childIndex[id] = c;
            });
            return { kind: 'union', mode: union.mode === UnionMode.Dense ? 'dense' : 'sparse', childIndex, children: type.children.map(childOf) };
        }
        case Type.Dictionary: {
            const dictionary = type;
            const values = columnLayoutOf(new Field(field.name, dictionary.dictionary, true), column);
            if (containsDictionary(values))
                throw unsupported('a dictionary whose values hold another dictionary');
            const indices = dictionary.indices;
            return {
                kind: 'dictionary',
                id: dictionary.id,
                indexWidth: (indices.bitWidth / 8),
                indexSigned: indices.isSigned,
                values,
                valueType: dictionary.dictionary,
            };
        }
        default:
            throw unsupported('view types (Utf8View, BinaryView, ListView) are not supported');
    }
}
function fixed(byteWidth) {
    return { kind: 'fixed-width', byteWidth };
}
function containsDictionary(layout) {
    return layout.kind === 'dictionary' || childLayouts(layout).some(containsDictionary);
}
/** The layouts nested directly under this one, in IPC order. */
export function childLayouts(layout) {
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
export function dictionaryLayouts(layout, out = []) {
    if (layout.kind === 'dictionary')
        out.push(layout);
    for (const child of childLayouts(layout))
        dictionaryLayouts(child, out);
    return out;
}
/** Whether a layout is one of the flat ones (no children, no dictionary). */
export function isFlat(layout) {
    return layout.kind === 'null' || layout.kind === 'fixed-width' || layout.kind === 'bool' || layout.kind === 'binary';
}
/**
 * Bytes a row of this column takes in a partition buffer, not counting
 * validity, variable-length data or nested children (Gluten's
 * fixedWidthBufferBytes_: a bool counts as a byte; a binary or list column
 * counts its offset; a union its type id and, dense, its offset).
 */
export function fixedBytesPerRow(layout) {
    switch (layout.kind) {
        case 'null':
        case 'struct':
        case 'fixed-size-list':
            return 0;
        case 'bool':
            return 1;
        case 'fixed-width':
            return layout.byteWidth;
        case 'binary':
        case 'list':
            return layout.offsetWidth;
        case 'union':
            return layout.mode === 'dense' ? 5 : 1;
        case 'dictionary':
            return layout.indexWidth;
    }
}
