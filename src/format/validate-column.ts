import { Field, Type, type Data, type DataType } from 'apache-arrow';
import { columnLayoutOf, type ColumnLayout } from '../writer/column-layout.js';

/**
 * Checks that a flat column loaded from IPC bytes is consistent with its
 * declared length before anyone indexes into it (arrow-js does not validate;
 * arrow-rs and Arrow C++ do the same checks before handing data out):
 *
 * - validity, when there are nulls, covers offset + length bits;
 * - fixed-width and boolean values cover offset + length rows;
 * - binary offsets cover length + 1 entries, start at or above 0, never
 *   decrease, and stay within the data buffer.
 *
 * Returns why the column is inconsistent, or null. Nested and dictionary
 * columns (which this library does not write yet) are not checked here.
 */
export function columnInconsistency(data: Data): string | null {
  const type = data.type as DataType;
  if (type.typeId === Type.Null) return null;
  let layout: ColumnLayout;
  try {
    layout = columnLayoutOf(new Field('c', type));
  } catch {
    return null; // a type we do not split: arrow-js's own loading is all there is
  }
  const rows = data.offset + data.length;
  if (data.nullCount > 0 && data.nullBitmap !== undefined && data.nullBitmap !== null && data.nullBitmap.byteLength > 0 && data.nullBitmap.byteLength * 8 < rows) {
    return `its validity bitmap holds ${data.nullBitmap.byteLength * 8} bits for ${rows} rows`;
  }
  const values = data.values as ArrayBufferView | undefined;
  const valueBytes = values?.byteLength ?? 0;
  switch (layout.kind) {
    case 'bool':
      return valueBytes * 8 < rows ? `its values hold ${valueBytes * 8} bits for ${rows} rows` : null;
    case 'fixed-width':
      // fixed-width values are already sliced to the data's offset
      return valueBytes < data.length * layout.byteWidth ? `its values hold ${valueBytes} bytes for ${data.length} rows of ${layout.byteWidth}` : null;
    case 'binary': {
      const offsets = data.valueOffsets as Int32Array | BigInt64Array | undefined;
      if (offsets === undefined || offsets.length < data.length + 1) return `it has ${offsets?.length ?? 0} offsets for ${data.length} rows`;
      let previous = Number(offsets[0]!);
      if (previous < 0) return `its first offset is ${previous}`;
      for (let i = 1; i <= data.length; i++) {
        const next = Number(offsets[i]!);
        if (next < previous) return `its offsets decrease at row ${i - 1}`;
        previous = next;
      }
      return previous > valueBytes ? `its last offset ${previous} lies beyond its ${valueBytes} data bytes` : null;
    }
    case 'null':
      return null;
    default:
      return null;
  }
}
