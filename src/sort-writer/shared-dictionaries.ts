import type { DataType, Field } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { columnLayoutOf, type ColumnLayout } from '../writer/column-layout.js';
import { maxDictionaryIndex } from '../writer/dictionary-indices.js';

/**
 * A CS_UNSUPPORTED_TYPE error for a schema whose rows the sort writer's
 * reader could not always turn back into batches, or null.
 *
 * Rows hold dictionary values decoded, and the reader rebuilds one
 * dictionary per id per batch, ending a batch before the row that would take
 * it past the narrowest index type among the columns sharing that id. One row
 * must fit on its own. Where columns share an id with index types of
 * different widths, the values of that id one row holds number at most
 *
 * ```text
 * the sum over the columns of the id of   1                 (a value per row)
 *                                    or   its index reach   (inside a list or map: many values)
 * ```
 *
 * which may pass the narrowest reach: an Int32 column's list of 200 values
 * beside an Int8 column of the same id. Such schemas are refused before
 * anything is written; the columnar writer takes them (and `auto` picks it).
 * One index type, or columns of one value each, always fit: a row's values
 * come from one input batch, whose indices reach no further.
 */
export function unreadableSharedDictionary(fields: readonly Field[]): ShuffleError | null {
  const byId = new Map<number, { names: string[]; narrowest: number; widest: number; perRow: number }>();
  const visit = (layout: ColumnLayout, type: DataType, name: string, inList: boolean): void => {
    if (layout.kind === 'dictionary') {
      const reach = maxDictionaryIndex(layout) + 1;
      const id = byId.get(layout.id) ?? { names: [], narrowest: Infinity, widest: 0, perRow: 0 };
      id.names.push(name);
      id.narrowest = Math.min(id.narrowest, reach);
      id.widest = Math.max(id.widest, reach);
      id.perRow += inList ? reach : 1;
      byId.set(layout.id, id);
      return;
    }
    const child = (i: number) => type.children[i]!;
    if (layout.kind === 'list' || layout.kind === 'fixed-size-list') {
      visit(layout.child, child(0).type, `${name}.${child(0).name}`, inList || layout.kind === 'list' || layout.listSize > 1);
    } else if (layout.kind === 'struct' || layout.kind === 'union') {
      layout.children.forEach((c, i) => visit(c, child(i).type, `${name}.${child(i).name}`, inList));
    }
  };
  for (const field of fields) visit(columnLayoutOf(field), field.type, field.name, false);
  for (const [id, { names, narrowest, widest, perRow }] of byId) {
    if (narrowest === widest || perRow <= narrowest) continue;
    return new ShuffleError(
      'CS_UNSUPPORTED_TYPE',
      `columns ${names.map((n) => `"${n}"`).join(', ')} share dictionary id ${id} with index types of different widths, and one row may hold ` +
        `more of its values than the narrowest (${narrowest} values) indexes: the sort writer could not read such a row back; write with the columnar (hash) writer`,
      { column: names[0] },
    );
  }
  return null;
}
