import type { Data, DataType } from 'apache-arrow';
import { layoutOfType, type ColumnLayout } from '../writer/column-layout.js';
import { countZeroBitsAt } from '../writer/split-bits.js';
import { MAX_BATCH_ROWS } from '../writer/writer-options.js';
import { VIEW_BYTES, viewValueOf, type ViewValue } from './binary-view.js';

/**
 * Checks that a column loaded from IPC bytes is consistent with its declared
 * length before anyone indexes into it (arrow-js does not validate; arrow-rs
 * and Arrow C++ do the same checks before handing data out), at every nesting
 * level:
 *
 * - validity, when present (not empty), covers offset + length bits;
 * - fixed-width values and dictionary indices cover offset + length rows, booleans bits;
 * - binary and list offsets cover length + 1 entries, start at or above 0,
 *   never decrease, and stay within the data buffer or the child;
 * - views cover length rows, and each valid row's view has a length >= 0 and,
 *   for a long value, points inside one of its variadic buffers;
 * - a struct's and a sparse union's children, and a fixed-size list's child
 *   (x listSize), are at least as long as the parent needs;
 * - union type ids are ones the type declares, dense offsets lie within the child;
 * - dictionary indices of valid rows lie within the dictionary;
 * - no column holds more than 2^31 - 1 rows (the length most implementations
 *   take, and the most arrow-js writes);
 * - a null count is at most the column's length, and one above 0 comes with
 *   a validity bitmap holding exactly that many null rows (arrow-js reads
 *   rows by the bitmap alone, or as valid without one, arrow-rs and Arrow
 *   C++ refuse such columns, and arrow-js's IPC writer writes the count as it
 *   is, so other readers then read other nulls): not checked for a writer's
 *   input, where arrow-js's reading is the one that counts.
 *
 * Returns why the column is inconsistent, or null. A column whose type this
 * library does not split is left to arrow-js's own loading.
 */
export function columnInconsistency(data: Data, options: { dictionaryIndices?: boolean; nullCounts?: boolean } = {}): string | null {
  const layout = layoutOfType(data.type as DataType);
  const checks: Checks = { indices: options.dictionaryIndices ?? true, nullCounts: options.nullCounts ?? true };
  return layout === null ? null : check(data, layout, data.offset + data.length, checks);
}

/**
 * `indices`: whether to check dictionary indices against their dictionaries
 * (the writers check them on their own, naming the row); `nullCounts`:
 * whether to check null counts against the length and the bitmap.
 */
interface Checks {
  indices: boolean;
  nullCounts: boolean;
}

/** `rows`: how many rows of `data` (counting from its buffers' start) are reachable. */
function check(data: Data, layout: ColumnLayout, rows: number, checks: Checks): string | null {
  const length = data.length;
  // (a Null column has no buffers to bound its length: a union's Null child claimed 2^32 rows, and arrow-js's
  // writer, `columnar-shuffle read`, threw an untyped RangeError on it)
  if (length > MAX_BATCH_ROWS) return `its ${length} rows are more than an Arrow array holds (2^31 - 1)`;
  if (layout.kind === 'null') return null;
  const bitmap = data.nullBitmap;
  // before anything reads data.nullCount: a null count the message left unknown (negative) makes arrow-js
  // count the bitmap's zero bits, and a short bitmap throws a RangeError there. A bitmap that is present
  // must cover the rows whatever the null count says (as Arrow C++'s ValidateArray checks buffer sizes).
  const hasBitmap = bitmap !== undefined && bitmap !== null && bitmap.byteLength > 0;
  if (hasBitmap && bitmap.byteLength * 8 < rows) {
    return `its validity bitmap holds ${bitmap.byteLength * 8} bits for ${rows} rows`;
  }
  // (a union's null count is its children's, checked with them)
  if (checks.nullCounts && layout.kind !== 'union') {
    const nullCount = data.nullCount;
    if (nullCount > length) return `its null count ${nullCount} is more than its ${length} rows`;
    if (nullCount > 0 && !hasBitmap) return `its null count is ${nullCount} but it has no validity bitmap`;
    // (a count the message left unknown was counted from the bitmap; 0 drops the bitmap when loaded)
    if (nullCount > 0 && hasBitmap) {
      const zeros = countZeroBitsAt(bitmap, data.offset, length);
      if (zeros !== nullCount) return `its null count is ${nullCount} but its validity bitmap has ${zeros} null rows`;
    }
  }
  const values = data.values as ArrayBufferView | undefined;
  const valueBytes = values?.byteLength ?? 0;
  switch (layout.kind) {
    case 'bool':
      return valueBytes * 8 < rows ? `its values hold ${valueBytes * 8} bits for ${rows} rows` : null;
    case 'fixed-width':
      // fixed-width values are already sliced to the data's offset
      return valueBytes < length * layout.byteWidth ? `its values hold ${valueBytes} bytes for ${length} rows of ${layout.byteWidth}` : null;
    case 'binary':
      return offsetsProblem(data, valueBytes, 'data bytes');
    case 'view':
      return viewsProblem(data, values);
    case 'list': {
      const child = data.children[0];
      if (child === undefined) return 'it has no child';
      const problem = offsetsProblem(data, child.length, 'child rows');
      return problem ?? within('its child', check(child, layout.child, child.offset + child.length, checks));
    }
    case 'fixed-size-list': {
      const child = data.children[0];
      if (child === undefined) return 'it has no child';
      if (child.length < length * layout.listSize) return `its child has ${child.length} rows for ${length} lists of ${layout.listSize}`;
      return within('its child', check(child, layout.child, child.offset + child.length, checks));
    }
    case 'struct':
      for (let c = 0; c < layout.children.length; c++) {
        const child = data.children[c];
        if (child === undefined) return `it has no child ${c}`;
        if (child.length < length) return `its child ${c} has ${child.length} rows for ${length}`;
        const problem = check(child, layout.children[c]!, child.offset + child.length, checks);
        if (problem !== null) return within(`its child ${c}`, problem);
      }
      return null;
    case 'union':
      return unionProblem(data, layout, checks);
    case 'dictionary': {
      if (valueBytes < length * layout.indexWidth) return `its indices hold ${valueBytes} bytes for ${length} rows of ${layout.indexWidth}`;
      if (!checks.indices) return null;
      const size = data.dictionary?.length ?? 0;
      const values = data.values as unknown as ArrayLike<number | bigint>;
      for (let i = 0; i < length; i++) {
        if (!data.getValid(i)) continue;
        const index = Number(values[i]!);
        if (!(index >= 0 && index < size)) return `row ${i} points at dictionary value ${index} of ${size}`;
      }
      return null;
    }
  }
}

/** Views are sliced to the data, like fixed-width values. */
function viewsProblem(data: Data, values: ArrayBufferView | undefined): string | null {
  const length = data.length;
  const bytes = values === undefined ? new Uint8Array(0) : new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  if (bytes.byteLength < length * VIEW_BYTES) return `its views hold ${bytes.byteLength} bytes for ${length} rows of ${VIEW_BYTES}`;
  const variadic = (data.variadicBuffers ?? []) as readonly Uint8Array[];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const value: ViewValue = { bytes, start: 0, length: 0 };
  for (let i = 0; i < length; i++) {
    if (!data.getValid(i)) continue;
    if (viewValueOf(bytes, view, variadic, i, value) === null) return `row ${i}'s view points outside its ${variadic.length} variadic buffers`;
  }
  return null;
}

function within(where: string, problem: string | null): string | null {
  return problem === null ? null : `${where}: ${problem}`;
}

/** Offsets (sliced to the data) must cover length + 1 entries, start >= 0, never decrease and end within `limit`. */
function offsetsProblem(data: Data, limit: number, what: string): string | null {
  const offsets = data.valueOffsets as Int32Array | BigInt64Array | undefined;
  const length = data.length;
  // no offsets at all is fine for no rows (the spec tolerates it; arrow-js's makeData gives it), but one that is
  // there must lie within the data too: a first offset of -2^56 under no rows passed, and the coalescer's int64
  // offsets check later threw a RangeError on it
  if (length === 0 && (offsets === undefined || offsets.length === 0)) return null;
  if (offsets === undefined || offsets.length < length + 1) return `it has ${offsets?.length ?? 0} offsets for ${length} rows`;
  let previous = Number(offsets[0]!);
  if (previous < 0) return `its first offset is ${previous}`;
  for (let i = 1; i <= length; i++) {
    const next = Number(offsets[i]!);
    if (next < previous) return `its offsets decrease at row ${i - 1}`;
    previous = next;
  }
  return previous > limit ? `its last offset ${previous} lies beyond its ${limit} ${what}` : null;
}

function unionProblem(data: Data, layout: Extract<ColumnLayout, { kind: 'union' }>, checks: Checks): string | null {
  const length = data.length;
  const typeIds = data.typeIds as Int8Array | undefined;
  if (typeIds === undefined || typeIds.length < length) return `it has ${typeIds?.length ?? 0} type ids for ${length} rows`;
  for (let i = 0; i < length; i++) {
    const id = typeIds[i]!;
    if (id < 0 || layout.childIndex[id] === -1) return `row ${i} has type id ${id}, which the union does not declare`;
  }
  const children = data.children;
  if (children.length < layout.children.length) return `it has ${children.length} children for ${layout.children.length}`;
  if (layout.mode === 'dense') {
    const offsets = data.valueOffsets as Int32Array | undefined;
    if (offsets === undefined || offsets.length < length) return `it has ${offsets?.length ?? 0} offsets for ${length} rows`;
    for (let i = 0; i < length; i++) {
      const child = children[layout.childIndex[typeIds[i]!]!]!;
      if (!(offsets[i]! >= 0 && offsets[i]! < child.length)) return `row ${i} points at row ${offsets[i]} of a child with ${child.length}`;
    }
  } else {
    for (let c = 0; c < layout.children.length; c++) {
      if (children[c]!.length < length) return `its child ${c} has ${children[c]!.length} rows for ${length}`;
    }
  }
  for (let c = 0; c < layout.children.length; c++) {
    const child = children[c]!;
    const problem = check(child, layout.children[c]!, child.offset + child.length, checks);
    if (problem !== null) return within(`its child ${c}`, problem);
  }
  return null;
}
