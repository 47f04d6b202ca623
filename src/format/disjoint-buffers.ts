import { Data } from 'apache-arrow';

/**
 * `data` with no two of its buffers overlapping in memory: a buffer that
 * overlaps another of the same tree (dictionaries apart: they are messages of
 * their own) is copied; `data` itself when none does.
 *
 * arrow-js 21.2.0's IPC writer gathers a message's body buffers as views and
 * joins them at the end, first collapsing each view into the one before it
 * when both view one ArrayBuffer and their ranges touch or overlap. Touching
 * ranges join to the same bytes (padding, a fresh array, comes between a
 * buffer not a multiple of 8 long and the next), but overlapping ones lose
 * bytes, and the message body comes out shorter than its header says:
 *
 * ```text
 * columns a and b hold one Float64Array of 3 values (24 bytes at 0)
 * body regions: a [0, 24)  b [24, 48)     body length 48
 * views:        a [0, 24)  b [0, 24)  ->  collapsed to [0, 24): 24 bytes written
 * ```
 * Readers then refuse the stream (or, further on, read the next message as
 * this one's body). A table whose columns share a vector does this, and so
 * does a batch our reader made from a stream whose buffer regions overlap
 * (arrow-rs reads those; each buffer is a view into one copy of the body).
 */
export function withDisjointBuffers(data: Data): Data {
  const views: ArrayBufferView[] = [];
  collectViews(data, views);
  const overlapping = overlappingViews(views);
  return overlapping.size === 0 ? data : copied(data, overlapping);
}

/** Every non-empty buffer of `data`'s tree (offsets, values, validity, type ids, variadic buffers), not its dictionaries'. */
function collectViews(data: Data, out: ArrayBufferView[]): void {
  for (const view of [data.valueOffsets, data.values, data.nullBitmap, data.typeIds, ...(data.variadicBuffers ?? [])] as (ArrayBufferView | undefined)[]) {
    if (view !== undefined && view !== null && view.byteLength > 0) out.push(view);
  }
  for (const child of data.children ?? []) collectViews(child as Data, out); // (arrow-js's own empty columns are not all whole Data)
}

/**
 * Views to copy so that no two views share bytes: of every two that do (the same view twice
 * included), the one starting later in their buffer, or either when they start together.
 */
function overlappingViews(views: ArrayBufferView[]): Set<ArrayBufferView> {
  const byBuffer = new Map<ArrayBufferLike, ArrayBufferView[]>();
  for (const view of views) {
    const list = byBuffer.get(view.buffer);
    if (list === undefined) byBuffer.set(view.buffer, [view]);
    else list.push(view);
  }
  const overlapping = new Set<ArrayBufferView>();
  for (const list of byBuffer.values()) {
    list.sort((a, b) => a.byteOffset - b.byteOffset);
    // a view starting before the furthest end of the views before it overlaps one of them
    let furthestEnd = 0;
    list.forEach((view, i) => {
      if (i > 0 && view.byteOffset < furthestEnd) overlapping.add(view);
      furthestEnd = Math.max(furthestEnd, view.byteOffset + view.byteLength);
    });
  }
  return overlapping;
}

/** `data` rebuilt with a copy of each of its buffers in `overlapping`, at any depth. */
function copied(data: Data, overlapping: Set<ArrayBufferView>): Data {
  const copy = <T extends ArrayBufferView | undefined>(view: T): T => (view !== undefined && overlapping.has(view) ? ((view as unknown as Uint8Array).slice() as unknown as T) : view);
  const children = (data.children ?? []).map((child) => copied(child as Data, overlapping));
  const buffers = { [0]: copy(data.valueOffsets), [1]: copy(data.values), [2]: copy(data.nullBitmap), [3]: copy(data.typeIds) };
  const variadic = (data.variadicBuffers ?? []).map((buffer) => copy(buffer));
  return new Data(data.type, data.offset, data.length, data.nullCount, buffers, children, data.dictionary, variadic);
}
