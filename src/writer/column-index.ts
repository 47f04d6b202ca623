import type { Schema } from 'apache-arrow';
import { ShuffleError } from '../errors.js';

/** Index of a named column, or CS_UNKNOWN_COLUMN listing the columns there are. */
export function columnIndex(schema: Schema, name: string): number {
  const index = schema.fields.findIndex((f) => f.name === name);
  if (index < 0) {
    const names = schema.fields.map((f) => f.name).join(', ');
    throw new ShuffleError('CS_UNKNOWN_COLUMN', `no column "${name}" in the input (columns: ${names})`, { column: name });
  }
  return index;
}
