/**
 * Arrow's binary view layout (Utf8View, BinaryView): a 16-byte view per
 * value, and any number of variadic data buffers holding the values longer
 * than 12 bytes.
 *
 * ```text
 * length <= 12   int32 length | the value, inline, zero padded to 12 bytes
 * length > 12    int32 length | its first 4 bytes (prefix) | int32 buffer index | int32 offset
 * ```
 * A long value is bytes [offset, offset + length) of variadic buffer `buffer
 * index`. In IPC the views are the column's second buffer, after validity;
 * its variadic buffers follow, as many as the record batch's
 * `variadicBufferCounts` says for the column (one count per view column, in
 * schema order, depth first).
 *
 * Both writers keep one data buffer per column and partition: a value the
 * shuffle moves is either copied as its view (inline) or has its bytes
 * appended to that buffer and its view pointed at them (buffer index 0).
 */
export const VIEW_BYTES = 16;
/** Values up to this many bytes are stored inline in their view. */
export const MAX_INLINE_BYTES = 12;

/** Where value `row`'s bytes are: in `views` (inline) or in a variadic buffer. */
export interface ViewValue {
  /** the array holding the bytes: `views` for an inline value */
  bytes: Uint8Array;
  start: number;
  length: number;
}

/**
 * Value `row` of a view column (views as bytes from row 0, with a DataView
 * over the same bytes), or null when the view points outside its buffers
 * (a negative length, a buffer index past `variadic`, a range past the buffer's end).
 */
export function viewValueOf(views: Uint8Array, view: DataView, variadic: readonly Uint8Array[], row: number, out: ViewValue): ViewValue | null {
  const at = row * VIEW_BYTES;
  const length = view.getInt32(at, true);
  if (length < 0) return null;
  if (length <= MAX_INLINE_BYTES) {
    out.bytes = views;
    out.start = at + 4;
    out.length = length;
    return out;
  }
  const buffer = variadic[view.getInt32(at + 8, true)];
  const start = view.getInt32(at + 12, true);
  if (buffer === undefined || start < 0 || start + length > buffer.byteLength) return null;
  out.bytes = buffer;
  out.start = start;
  out.length = length;
  return out;
}
