import type { DataType, Field, Schema } from 'apache-arrow';

/**
 * Gives back the empty names arrow-js's schema decoding loses.
 *
 * A field's name is an optional flatbuffer string, and an absent one means ""
 * (Arrow C++, arrow-rs and polars read it so). arrow-js writes no name for a
 * field named "" and decodes an absent one as null, which its RecordBatch then
 * prints as the column "null". Our reader decodes every schema it hands out
 * freshly, so the null names are set to "" in place: at every depth (children of
 * structs, lists, maps, unions and dictionary value types).
 */
export function restoreEmptyFieldNames(schema: Schema): Schema {
  for (const field of schema.fields) restoreField(field);
  return schema;
}

function restoreField(field: Field): void {
  if (field.name === null || field.name === undefined) (field as { name: string }).name = '';
  restoreType(field.type);
}

/** A dictionary type's children are its value type's (arrow-js's Dictionary.children). */
function restoreType(type: DataType): void {
  for (const child of type.children ?? []) restoreField(child);
}
