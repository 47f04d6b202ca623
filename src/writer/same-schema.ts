import type { DataType, Field, Schema } from 'apache-arrow';

/**
 * Whether two schemas describe the same columns: names, nullability and types.
 * arrow-js's `compareSchemas` also compares representation details that differ
 * between a schema built in memory and the same schema read back from IPC (field
 * metadata maps, a timezone of `undefined` vs `null`), so equal inputs were refused.
 * Schema-level and field-level metadata are ignored on purpose.
 */
export function sameSchema(a: Schema, b: Schema): boolean {
  if (a === b) return true;
  if (a.fields.length !== b.fields.length) return false;
  return a.fields.every((field, i) => sameField(field, b.fields[i]!));
}

function sameField(a: Field, b: Field): boolean {
  return a.name === b.name && a.nullable === b.nullable && sameType(a.type, b.type);
}

/**
 * Same type id and the same parameters. arrow-js's toString names every
 * parameter of a flat type except a Decimal's bit width, and no union's mode
 * or type ids: those are compared on their own (a sparse and a dense union of
 * the same children print alike but lay their buffers out differently).
 */
export function sameType(a: DataType, b: DataType): boolean {
  if (a.typeId !== b.typeId || String(a) !== String(b)) return false;
  const x = a as UnprintedParameters;
  const y = b as UnprintedParameters;
  if (x.bitWidth !== y.bitWidth || x.mode !== y.mode || String(x.typeIds) !== String(y.typeIds)) return false;
  const ac = a.children ?? [];
  const bc = b.children ?? [];
  return ac.length === bc.length && ac.every((child, i) => sameField(child, bc[i]!));
}

/** The parameters arrow-js's toString leaves out (a typed array of type ids prints as "0,1"). */
interface UnprintedParameters {
  bitWidth?: number;
  mode?: number;
  typeIds?: Int32Array | null;
}
