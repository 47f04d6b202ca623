import { Schema, type Field } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { columnIndex } from './column-index.js';
import { columnLayoutOf, type ColumnLayout } from './column-layout.js';
import { assertWritableSchema } from './input-batch.js';
import { createPartitioner } from './partitioner.js';
import type { ShuffleWriterOptions } from './writer-options.js';

/**
 * The columns both writers write: the input's, less a partition-id column
 * (partitioning `partition-id`), which only places rows. Worked example: an
 * input (k, pid, v) partitioned by the column pid gives `inputIndices`
 * [0, 2] and the output schema (k, v).
 */
export interface OutputColumns {
  /** Each output column's index in the input batch, in output order. */
  readonly inputIndices: number[];
  /** Each output column's layout (column-layout.ts), in output order. */
  readonly layouts: ColumnLayout[];
  /** The output partitions' schema: the input's own when no column is left out. */
  readonly schema: Schema;
}

/**
 * Everything about an input schema that either writer refuses before any
 * data is touched, in this order: no columns; a schema no writer can write
 * (assertWritableSchema); a partition-id column it does not have; an output
 * column of a type no writer takes (columnLayoutOf, naming the column); the
 * partitioning's keys (createPartitioner). Returns the output columns.
 */
export function checkInputSchema(schema: Schema, options: Pick<ShuffleWriterOptions, 'partitioning' | 'numPartitions'>): OutputColumns {
  if (schema.fields.length === 0) throw new ShuffleError('CS_INVALID_ARGUMENT', 'the input has no columns (an empty schema)');
  assertWritableSchema(schema);
  const pidColumn = options.partitioning.kind === 'partition-id' ? columnIndex(schema, options.partitioning.column) : -1;
  const inputIndices = schema.fields.map((_, i) => i).filter((i) => i !== pidColumn);
  const fields: Field[] = inputIndices.map((i) => schema.fields[i]!);
  const layouts = fields.map((field) => columnLayoutOf(field));
  createPartitioner(options.partitioning, schema, options.numPartitions, 0);
  return { inputIndices, layouts, schema: pidColumn < 0 ? schema : new Schema(fields, schema.metadata) };
}
