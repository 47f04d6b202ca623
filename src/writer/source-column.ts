import type { Data } from 'apache-arrow';
import type { ColumnLayout } from './column-layout.js';

/**
 * One input column prepared for splitting: typed views over its buffers,
 * built once per batch so the per-partition loops only index.
 *
 * arrow-js slices buffers unevenly (see the platform notes): fixed-width
 * values and binary offsets are sub-arrayed to the slice, while validity and
 * boolean values are not (row i is bit `offset + i`) and binary offsets stay
 * absolute into the unsliced data.
 */
export interface SourceColumn {
  readonly layout: ColumnLayout;
  readonly length: number;
  /** validity bitmap, or null when the column has no nulls in this batch */
  readonly validity: Uint8Array | null;
  /** bit index of row 0 in `validity` and in boolean `bits` */
  readonly bitOffset: number;
  /** fixed-width values as bytes starting at row 0; boolean values as bits; binary data bytes */
  readonly bytes: Uint8Array;
  /** the same values as 16/32-bit words when aligned, for the wide copy loops */
  readonly words16: Uint16Array | null;
  readonly words32: Int32Array | null;
  /** binary offsets as int32 words: offset of row i is offsets[i * stride] (stride 2 for int64 offsets, low word) */
  readonly offsets: Int32Array | null;
  readonly offsetStride: 1 | 2;
}

export function prepareSourceColumn(data: Data, layout: ColumnLayout): SourceColumn {
  const validity = data.nullCount > 0 && data.nullBitmap && data.nullBitmap.byteLength > 0 ? data.nullBitmap : null;
  const base = {
    layout,
    length: data.length,
    validity,
    bitOffset: data.offset,
    words16: null,
    words32: null,
    offsets: null,
    offsetStride: 1 as const,
  };
  switch (layout.kind) {
    case 'null':
      return { ...base, bytes: new Uint8Array(0) };
    case 'bool':
      return { ...base, bytes: asBytes(data.values) };
    case 'fixed-width': {
      const bytes = asBytes(data.values);
      const words16 = bytes.byteOffset % 2 === 0 ? new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 1) : null;
      const words32 = bytes.byteOffset % 4 === 0 ? new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2) : null;
      return { ...base, bytes, words16, words32 };
    }
    case 'binary': {
      const offsetBytes = asBytes(data.valueOffsets);
      const offsets = new Int32Array(offsetBytes.buffer, offsetBytes.byteOffset, offsetBytes.byteLength >>> 2);
      const stride = layout.offsetWidth === 8 ? 2 : 1;
      if (stride === 2) assertOffsetsFitInt32(offsets, data.length);
      return { ...base, bytes: asBytes(data.values), offsets, offsetStride: stride };
    }
  }
}

function asBytes(view: ArrayBufferView | null | undefined): Uint8Array {
  if (!view) return new Uint8Array(0);
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/** Int64 offsets are read through their low words; offsets are ascending, so checking the last one suffices. */
function assertOffsetsFitInt32(offsets: Int32Array, length: number): void {
  const high = offsets[length * 2 + 1] ?? 0;
  const low = offsets[length * 2] ?? 0;
  if (high !== 0 || low < 0) {
    throw new RangeError('a large binary column holds more than 2 GiB of data in one batch; split the batch');
  }
}
