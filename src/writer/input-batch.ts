import { Data, DataType, RecordBatch, type Field, type Schema } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { columnInconsistency } from '../format/validate-column.js';
import { layoutOfType } from './column-layout.js';
import { assertDictionaryIndices } from './dictionary-indices.js';
import { describeType, sameType } from './same-schema.js';

/**
 * Refuses, with CS_INVALID_ARGUMENT, what a writer cannot take as an input
 * batch: anything but an arrow-js RecordBatch (a Table, its Data, a plain
 * object), and a batch whose columns are not what its own schema says. The
 * latter is what arrow-js's RecordBatch constructor makes of a schema with
 * two columns of one name: it merges their fields by name, so a column of
 * Int32 data is described as Utf8, and the writers would read it as such.
 * Also refused: a column, or a child of one, that is not Data (the
 * constructor's object form, `new RecordBatch({ k: vector })`, takes Vectors
 * as they are), a dictionary column without its dictionary, and a column
 * whose buffers do not hold its rows (the checks the reader makes of what it
 * loads, format/validate-column.ts): arrow-js builds such Data without a
 * word, and the writers read past its buffers. Utf8 offsets shorter than the
 * rows gave `rows: NaN` and no row; short Int32 values, rows of 0. About 8 us
 * per 8,192 narrow rows, under 1 % of a write.
 */
export function assertInputBatch(batch: unknown, call: string): asserts batch is RecordBatch {
  if (!(batch instanceof RecordBatch)) {
    const what = batch === null ? 'null' : typeof batch === 'object' ? (batch.constructor?.name ?? 'an object') : typeof batch;
    throw new ShuffleError('CS_INVALID_ARGUMENT', `${call}() takes an Arrow RecordBatch, got ${what}`);
  }
  const { fields } = batch.schema;
  const columns = batch.data.children as Data[];
  if (columns.length !== fields.length) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `the batch has ${columns.length} columns but its schema ${fields.length}`);
  }
  // a batch without rows is read for its schema alone (arrow-js's makeTable of empty arrays keeps Vectors as its columns)
  const hasRows = batch.numRows > 0;
  fields.forEach((field, i) => {
    if (hasRows) assertColumnData(columns[i], field.name);
    const type = columns[i]!.type as DataType;
    if (type !== field.type && !sameType(type, field.type as DataType)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `column ${i} ("${field.name}") of the batch holds ${describeType(type)} data, its schema says ${describeType(field.type as DataType)}`, { column: field.name });
    }
    const layout = hasRows ? layoutOfType(type) : null; // (null for a type no writer takes: refused with the schema)
    if (layout === null) return;
    // the buffers first (the indices are then safe to read), then the indices, in a pass of their own whose error names the row
    const problem = columnInconsistency(columns[i]!, { dictionaryIndices: false, nullCounts: false });
    if (problem !== null) throw new ShuffleError('CS_INVALID_ARGUMENT', `column ${i} ("${field.name}") of the batch is inconsistent: ${problem}`, { column: field.name });
    assertDictionaryIndices(columns[i]!, layout, field.name);
  });
}

/**
 * Why an Arrow type of another copy of apache-arrow is refused: arrow-js
 * tells types apart with instanceof, which it lets work across copies for
 * Schema, Field, Data, RecordBatch and Table but not for DataType, so such
 * types read as unknown ones here.
 */
const OTHER_ARROW_COPY =
  'made by another copy of apache-arrow than the one this library loads (a require() and an import of it in one process load two): make it with the same copy';

/** Refuses a column tree with a node that is not Data, or a dictionary without its dictionary. */
function assertColumnData(data: unknown, path: string): void {
  if (!(data instanceof Data)) {
    const what = data === null || data === undefined ? String(data) : `a ${(data as object).constructor?.name ?? typeof data}`;
    const hint = what === 'a Vector' ? ` (a RecordBatch made of Vectors: pass their Data, vector.data[0])` : '';
    throw new ShuffleError('CS_INVALID_ARGUMENT', `column "${path}" of the batch is ${what}, not Arrow Data${hint}`, { column: path });
  }
  if (DataType.isDictionary(data.type) && !isDictionaryVector(data.dictionary)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `column "${path}" of the batch is a dictionary column without its dictionary`, { column: path });
  }
  const fields = (data.type as DataType).children ?? [];
  data.children.forEach((child, i) => assertColumnData(child, `${path}.${fields[i]?.name ?? i}`));
}

function isDictionaryVector(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Array.isArray((value as { data?: unknown }).data);
}

/**
 * Refuses, with CS_INVALID_ARGUMENT, a schema no writer can write:
 * - two columns of one name: Arrow IPC readers merge them, so no reader could read the output;
 * - a type made by another copy of apache-arrow (see OTHER_ARROW_COPY): the
 *   writers wrote an Int64 column as Uint0 and a Float64 one as Float16.
 */
export function assertWritableSchema(schema: Schema): void {
  const seen = new Set<string>();
  for (const field of schema.fields) {
    if (seen.has(field.name)) throw new ShuffleError('CS_INVALID_ARGUMENT', `the schema has two columns named "${field.name}"`, { column: field.name });
    seen.add(field.name);
    assertOwnTypes(field, field.name);
  }
}

function assertOwnTypes(field: Field, path: string): void {
  const type: unknown = field.type;
  if (!(type instanceof DataType)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `column "${path}" has a type ${OTHER_ARROW_COPY}`, { column: path });
  }
  if (DataType.isDictionary(type) && !(type.dictionary instanceof DataType)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `column "${path}" has a dictionary value type ${OTHER_ARROW_COPY}`, { column: path });
  }
  for (const child of (DataType.isDictionary(type) ? type.dictionary.children : type.children) ?? []) assertOwnTypes(child, `${path}.${child.name}`);
}
