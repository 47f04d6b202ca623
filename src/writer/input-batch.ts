import { DataType, util, type Data, type RecordBatch, type Schema } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { sameType } from './same-schema.js';

/**
 * Refuses, with CS_INVALID_ARGUMENT, what a writer cannot take as an input
 * batch: anything but an arrow-js RecordBatch (a Table, its Data, a plain
 * object), and a batch whose columns are not what its own schema says. The
 * latter is what arrow-js's RecordBatch constructor makes of a schema with
 * two columns of one name: it merges their fields by name, so a column of
 * Int32 data is described as Utf8, and the writers would read it as such.
 * Also refused: a column, or a child of one, that is not Data (the
 * constructor's object form, `new RecordBatch({ k: vector })`, takes Vectors
 * as they are), and a dictionary column without its dictionary.
 */
export function assertInputBatch(batch: unknown, call: string): asserts batch is RecordBatch {
  if (!util.isArrowRecordBatch(batch)) {
    const what = batch === null ? 'null' : typeof batch === 'object' ? (batch.constructor?.name ?? 'an object') : typeof batch;
    throw new ShuffleError('CS_INVALID_ARGUMENT', `${call}() takes an Arrow RecordBatch, got ${what}`);
  }
  const { fields } = batch.schema;
  const columns = batch.data.children as Data[];
  if (columns.length !== fields.length) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `the batch has ${columns.length} columns but its schema ${fields.length}`);
  }
  fields.forEach((field, i) => {
    assertColumnData(columns[i], field.name);
    const type = columns[i]!.type as DataType;
    if (type !== field.type && !sameType(type, field.type as DataType)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `column ${i} ("${field.name}") of the batch holds ${String(type)} data, its schema says ${String(field.type)}`, { column: field.name });
    }
  });
}

/** Refuses a column tree with a node that is not Data, or a dictionary without its dictionary. */
function assertColumnData(data: unknown, path: string): void {
  if (!isData(data)) {
    const what = data === null || data === undefined ? String(data) : ((data as object).constructor?.name ?? typeof data);
    const hint = what === 'Vector' ? ` (a RecordBatch made of Vectors: pass their Data, vector.data[0])` : '';
    throw new ShuffleError('CS_INVALID_ARGUMENT', `column "${path}" of the batch is a ${what}, not Arrow Data${hint}`, { column: path });
  }
  if (DataType.isDictionary(data.type) && !isDictionaryVector(data.dictionary)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `column "${path}" of the batch is a dictionary column without its dictionary`, { column: path });
  }
  const fields = (data.type as DataType).children ?? [];
  data.children.forEach((child, i) => assertColumnData(child, `${path}.${fields[i]?.name ?? i}`));
}

/** Data by its shape: apache-arrow may be loaded twice (as util.isArrowRecordBatch allows), and a Vector has neither. */
function isData(value: unknown): value is Data {
  const data = value as Partial<Data> | null | undefined;
  return typeof data === 'object' && data !== null && Array.isArray(data.children) && typeof data.offset === 'number' && data.type instanceof Object;
}

function isDictionaryVector(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Array.isArray((value as { data?: unknown }).data);
}

/** Refuses a schema with two columns of one name (CS_INVALID_ARGUMENT): Arrow IPC readers merge them, so no reader could read the output. */
export function assertDistinctNames(schema: Schema): void {
  const seen = new Set<string>();
  for (const field of schema.fields) {
    if (seen.has(field.name)) throw new ShuffleError('CS_INVALID_ARGUMENT', `the schema has two columns named "${field.name}"`, { column: field.name });
    seen.add(field.name);
  }
}
