import { makeData, Utf8View, type Data } from 'apache-arrow';

const encoder = new TextEncoder();

/**
 * A Utf8View column of these values (null: a null row, its view garbage: a
 * long view pointing nowhere, which no reader may follow). Values of up to 12
 * bytes are inline; longer ones are dealt over `buffers` variadic buffers in
 * turn, each after 3 bytes of garbage (so no value starts a buffer).
 */
export function viewData(values: readonly (string | null)[], buffers: number): Data {
  const views = new Uint8Array(values.length * 16);
  const view = new DataView(views.buffer);
  const parts: number[][] = Array.from({ length: buffers }, () => []);
  const validity = new Uint8Array((values.length + 7) >>> 3);
  let next = 0;
  values.forEach((v, r) => {
    if (v === null) {
      view.setInt32(r * 16, 1000 + r, true);
      view.setInt32(r * 16 + 8, 7, true);
      return;
    }
    validity[r >>> 3]! |= 1 << (r & 7);
    const bytes = encoder.encode(v);
    view.setInt32(r * 16, bytes.byteLength, true);
    if (bytes.byteLength <= 12) return views.set(bytes, r * 16 + 4);
    views.set(bytes.subarray(0, 4), r * 16 + 4);
    const b = next++ % buffers;
    parts[b]!.push(0xee, 0xee, 0xee);
    view.setInt32(r * 16 + 8, b, true);
    view.setInt32(r * 16 + 12, parts[b]!.length, true);
    parts[b]!.push(...bytes);
  });
  const nulls = values.filter((v) => v === null).length;
  return makeData({ type: new Utf8View(), views, variadicBuffers: parts.map((p) => Uint8Array.from(p)), length: values.length, nullCount: nulls, nullBitmap: validity } as never) as Data;
}
