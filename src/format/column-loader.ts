import { DataType, type BinaryView, type Data, type Dictionary, type Utf8View, type Vector } from 'apache-arrow';
import type { BufferRegion, FieldNode } from 'apache-arrow/ipc/metadata/message';
import { CompressedVectorLoader } from 'apache-arrow/visitor/vectorloader';
import { missingDictionary } from './missing-dictionary.js';

/**
 * The reader's loader of a message's columns when they are not all flat
 * (flat-loader.ts): arrow-js's CompressedVectorLoader (the i-th buffer for the
 * i-th region), but for what it would lose or get wrong:
 *
 * - A view column (Utf8View, BinaryView) keeps the null count its node claims.
 *   arrow-js's makeData ignores it for views and counts the bitmap instead
 *   (0 without one), so validate-column.ts could not compare the claim with
 *   the bitmap as it does for every other type: a view claiming 2^38 nulls
 *   without a bitmap read as all valid here and as all null in flechette. A
 *   count of 0 keeps arrow-js's reading (the bitmap dropped, every row valid).
 * - A column with a validity bitmap may not claim a negative count. arrow-js
 *   takes it for "unknown" and, skipping the bitmap, reads every row as valid,
 *   where flechette reads the bitmap (differential-flechette: -4294967292 for
 *   a column with 4 nulls). arrow-js's own writer writes -1 only for a Null
 *   column (no bitmap) and the unions over one, which keep reading.
 * - A dictionary column no dictionary batch came for gets missing-dictionary.ts's
 *   empty dictionary, whole at every level, as the flat loader gives it.
 */
export class ColumnLoader extends CompressedVectorLoader {
  protected override readNullBitmap<T extends DataType>(type: T, nullCount: number, buffer?: BufferRegion): Uint8Array {
    if (nullCount < 0 && !DataType.isUnion(type)) throw new Error(negativeNullCount(type, nullCount));
    return super.readNullBitmap(type, nullCount, buffer); // (undefined: arrow-js's default, the next region)
  }

  protected override readDictionary<T extends Dictionary>(type: T): Vector<T['dictionary']> {
    return (super.readDictionary(type) as Vector<T['dictionary']> | undefined) ?? (missingDictionary(type) as Vector<T['dictionary']>);
  }

  override visitUtf8View<T extends Utf8View>(type: T, node: FieldNode = this.nextFieldNode()): Data<T> {
    return withClaimedNullCount(super.visitUtf8View(type, node), node);
  }

  override visitBinaryView<T extends BinaryView>(type: T, node: FieldNode = this.nextFieldNode()): Data<T> {
    return withClaimedNullCount(super.visitBinaryView(type, node), node);
  }
}

function withClaimedNullCount<T extends Utf8View | BinaryView>(data: Data<T>, node: FieldNode): Data<T> {
  return node.nullCount > 0 ? data.clone(data.type, data.offset, data.length, node.nullCount) : data;
}

/** Why a column's field node cannot be read: its null count is negative. */
export function negativeNullCount(type: DataType, nullCount: number): string {
  return `the field node of a column of type ${String(type)} claims a null count of ${nullCount}`;
}
