import type { Data, DataType, Vector } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { childLayouts, type ColumnLayout, type DictionaryLayout } from './column-layout.js';

/**
 * Refuses a column (of `layout`, named `column`) with a dictionary anywhere in
 * it, at any depth, whose valid rows point outside their dictionary: see
 * assertIndicesInDictionary. Both writers check each batch before its rows
 * move (assertInputBatch).
 */
export function assertDictionaryIndices(data: Data, layout: ColumnLayout, column: string): void {
  if (layout.kind === 'dictionary') {
    assertIndicesInDictionary(data, data.dictionary!.length, column);
    return;
  }
  const fields = (data.type as DataType).children ?? [];
  childLayouts(layout).forEach((child, i) => assertDictionaryIndices(data.children[i]!, child, `${column}.${fields[i]?.name ?? i}`));
}

/**
 * Refuses a dictionary column (its indices, `data`) in which a valid row
 * points outside its dictionary of `size` values, with CS_INVALID_ARGUMENT
 * naming the column and the row. The columnar writer moves indices as they
 * are (or through a remap, where such an index would become 0), so without
 * this an input arrow-js accepted would give an output readers refuse, or a
 * wrong value. Null rows' indices may hold anything.
 *
 * ```text
 * dictionary ["a", "b"] (size 2), indices [0, 5, 1], row 1 valid -> refused: row 1 points at value 5 of 2
 * ```
 */
export function assertIndicesInDictionary(data: Data, size: number, column: string): void {
  const values = data.values as ArrayLike<number> | BigInt64Array | BigUint64Array;
  const n = data.length;
  let row = -1;
  if (values instanceof BigInt64Array || values instanceof BigUint64Array) {
    // 64-bit indices as words: in range when the high word is 0 and the low one below size
    const words = new Uint32Array(values.buffer, values.byteOffset, 2 * n);
    for (let i = 0; i < n; i++) {
      if (words[2 * i + 1] !== 0 || words[2 * i]! >= size) {
        if (data.getValid(i)) {
          row = i;
          break;
        }
      }
    }
  } else {
    for (let i = 0; i < n; i++) {
      const index = values[i]!;
      if (!(index >= 0 && index < size) && data.getValid(i)) {
        row = i;
        break;
      }
    }
  }
  if (row >= 0) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `row ${row} of the dictionary column "${column}" points at value ${String(values[row])} of its ${size}-value dictionary`, { column, row });
  }
}

/** The largest index the dictionary's index type (and the int32 remap of split-dictionary.ts) can hold. */
export function maxDictionaryIndex(layout: DictionaryLayout): number {
  const bits = layout.indexWidth * 8 - (layout.indexSigned ? 1 : 0);
  return Math.min(2 ** bits - 1, 0x7fffffff);
}

/**
 * The largest index every field of an id can hold, by dictionary id. Fields
 * may share an id with index types of different widths (Int32 and Int8): the
 * dictionary must stay within the narrowest one's reach, or that field's
 * indices wrap (an Int8 index of 199 reads as -57).
 */
export function maxIndexById(layouts: readonly DictionaryLayout[]): Map<number, number> {
  const limits = new Map<number, number>();
  for (const layout of layouts) limits.set(layout.id, Math.min(limits.get(layout.id) ?? Infinity, maxDictionaryIndex(layout)));
  return limits;
}

/**
 * The dictionary (by id) of every dictionary column in `data`, nested ones
 * included, into `found`; returns an id two of whose columns hold different
 * dictionaries (an IPC stream has one dictionary per id), or null.
 */
export function collectDictionaries(data: Data, layout: ColumnLayout, found: Map<number, Vector>): number | null {
  if (layout.kind === 'dictionary') {
    const seen = found.get(layout.id);
    if (seen !== undefined && seen !== data.dictionary) return layout.id;
    found.set(layout.id, data.dictionary!);
    return null;
  }
  const children = childLayouts(layout);
  for (let i = 0; i < children.length; i++) {
    const conflict = collectDictionaries(data.children[i]!, children[i]!, found);
    if (conflict !== null) return conflict;
  }
  return null;
}

/** collectDictionaries for a writer: CS_UNSUPPORTED_TYPE for two dictionaries of one id (the sort writer committed such rows, and its reader refused them). */
export function collectWritableDictionaries(data: Data, layout: ColumnLayout, found: Map<number, Vector>): void {
  const conflict = collectDictionaries(data, layout, found);
  if (conflict !== null) throw new ShuffleError('CS_UNSUPPORTED_TYPE', `two dictionary columns share dictionary id ${conflict} but hold different dictionaries`);
}
