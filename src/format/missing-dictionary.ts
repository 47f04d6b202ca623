import { vectorFromArray, type Dictionary, type Vector } from 'apache-arrow';

/**
 * The dictionary a dictionary column is read with when no dictionary batch of
 * its id came before its record batch. The format wants one first; arrow-js
 * reads such a stream over an empty dictionary, and so does this reader, so
 * the column's rows can be read where they are null.
 *
 * An empty vector from a builder, whole at every level: arrow-js's own (makeData
 * of the value type alone) has no child Data for a nested value type, and the
 * coalescer and arrow-js's writer (`read`) failed on it with TypeErrors (a damaged
 * schema made a column a dictionary of lists; found by differential-flechette).
 */
export function missingDictionary(type: Dictionary): Vector {
  return vectorFromArray([], type.dictionary);
}
