import type { BinaryView, Data, Utf8View } from 'apache-arrow';
import type { FieldNode } from 'apache-arrow/ipc/metadata/message';
import { CompressedVectorLoader } from 'apache-arrow/visitor/vectorloader';

/**
 * arrow-js's loader of a message's columns (the i-th buffer for the i-th
 * region), except that a view column (Utf8View, BinaryView) keeps the null
 * count its field node claims.
 *
 * arrow-js's makeData ignores the count it is given for views and counts the
 * bitmap instead (or takes 0 without one), so validate-column.ts could not
 * compare the claim with the bitmap as it does for every other type: a view
 * claiming 2^38 nulls without a bitmap read as all valid here and as all null
 * in flechette. A count of 0 or less keeps arrow-js's reading (the bitmap
 * dropped, every row valid), as for the other types.
 */
export class NodeCountLoader extends CompressedVectorLoader {
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
