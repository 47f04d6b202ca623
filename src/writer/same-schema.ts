import { Type, type DataType, type Decimal, type Dictionary, type Field, type Schema } from 'apache-arrow';
import { ShuffleError } from '../errors.js';

/**
 * Whether two schemas describe the same columns: names, nullability and types.
 * arrow-js's `compareSchemas` also compares representation details that differ
 * between a schema built in memory and the same schema read back from IPC (field
 * metadata maps, a timezone of `undefined` vs `null`), so equal inputs were refused.
 * Schema-level and field-level metadata are ignored on purpose.
 */
export function sameSchema(a: Schema, b: Schema): boolean {
  return a === b || schemaDifference(a, b) === null;
}

/**
 * CS_SCHEMA_MISMATCH when the batch numbered `batch` (from 0) has a schema
 * other than the writer's input schema (`expected`), saying what differs.
 */
export function assertBatchSchema(expected: Schema, got: Schema, batch: number): void {
  if (sameSchema(expected, got)) return;
  throw new ShuffleError('CS_SCHEMA_MISMATCH', `batch ${batch} has schema ${describeSchema(got)}, expected ${describeSchema(expected)}: ${schemaDifference(expected, got)}`);
}

/**
 * What first differs between the `expected` schema and the one `got`, in
 * words (`column "a.item": nullable, expected not nullable`), or null when
 * they are the same (sameSchema). Printed whole, two schemas that differ in
 * a nested field's nullability or name, a decimal's bit width or a union's
 * mode looked alike.
 */
export function schemaDifference(expected: Schema, got: Schema): string | null {
  if (expected.fields.length !== got.fields.length) return `${got.fields.length} columns, expected ${expected.fields.length}`;
  for (const [i, field] of expected.fields.entries()) {
    const difference = fieldDifference(field, got.fields[i]!, `column ${i} ("${field.name}")`);
    if (difference !== null) return difference;
  }
  return null;
}

/** "{a: Int32, b: Utf8 not null}" */
export function describeSchema(schema: Schema): string {
  return `{${schema.fields.map((f) => `${f.name}: ${describeType(f.type)}${f.nullable ? '' : ' not null'}`).join(', ')}}`;
}

/**
 * arrow-js's String(type) with each decimal's bit width, which it leaves out:
 * "Struct<{d:Decimal[9e+2]}>" becomes "Struct<{d:Decimal32[9e+2]}>", so a
 * decimal32 and a decimal128 column no longer print alike. Containers are
 * printed as arrow-js prints them, around their children described alike.
 */
export function describeType(type: DataType): string {
  const t = type as DataType & { children?: Field[]; valueType?: DataType; listSize?: number; dictionary?: DataType; indices?: DataType };
  const fields = (children: readonly Field[]) => children.map((f) => `${f.name}:${describeType(f.type)}`).join(', ');
  switch (type.typeId) {
    case Type.Decimal:
      return String(type).replace('Decimal[', `Decimal${(type as Decimal).bitWidth}[`);
    case Type.List:
      return `List<${describeType(t.valueType!)}>`;
    case Type.LargeList:
      return `LargeList<${describeType(t.valueType!)}>`;
    case Type.FixedSizeList:
      return `FixedSizeList[${t.listSize}]<${describeType(t.valueType!)}>`;
    case Type.Struct:
      return `Struct<{${fields(t.children!)}}>`;
    case Type.Map:
      return `Map<{${fields(t.children![0]!.type.children)}}>`;
    case Type.Union:
      return `${(type as { [Symbol.toStringTag]: string })[Symbol.toStringTag]}<${t.children!.map((f) => describeType(f.type)).join(' | ')}>`;
    case Type.Dictionary:
      return `Dictionary<${String(t.indices)}, ${describeType(t.dictionary!)}>`;
    default:
      return String(type);
  }
}

function fieldDifference(a: Field, b: Field, path: string): string | null {
  if (a.name !== b.name) return `${path}: named "${b.name}", expected "${a.name}"`;
  if (a.nullable !== b.nullable) return `${path}: ${b.nullable ? 'nullable' : 'not nullable'}, expected ${a.nullable ? 'nullable' : 'not nullable'}`;
  return typeDifference(a.type, b.type, path);
}

/**
 * Same type id and the same parameters. arrow-js's toString names every
 * parameter of a flat type except a Decimal's bit width, and no union's mode
 * or type ids, map's keysSorted or dictionary's isOrdered: those are compared
 * on their own (a sparse and a dense union of the same children print alike
 * but lay their buffers out differently).
 */
export function sameType(a: DataType, b: DataType): boolean {
  return typeDifference(a, b, '') === null;
}

/** The children first, so that the difference is named where it is (the parents print differently too). */
function typeDifference(a: DataType, b: DataType, path: string): string | null {
  const different = () => `${path}: ${describeType(b)}, expected ${describeType(a)}`;
  if (a.typeId !== b.typeId) return different();
  const ac = a.children ?? [];
  const bc = b.children ?? [];
  if (ac.length !== bc.length) return `${path}: ${bc.length} children, expected ${ac.length}`;
  for (const [i, child] of ac.entries()) {
    const difference = fieldDifference(child, bc[i]!, `${path}.${child.name}`);
    if (difference !== null) return difference;
  }
  // a dictionary's children are its value type's: the value type's own parameters (a decimal's width, which String
  // leaves out) are compared here; a decimal32 dictionary was taken for a decimal128 one
  if (a.typeId === Type.Dictionary && typeDifference((a as Dictionary).dictionary, (b as Dictionary).dictionary, path) !== null) return different();
  if (String(a) !== String(b)) return different();
  const x = a as UnprintedParameters;
  const y = b as UnprintedParameters;
  if (x.bitWidth !== y.bitWidth) return different(); // a decimal's, which String leaves out
  if (x.mode !== y.mode) return `${path}: a ${UNION_MODES[y.mode!] ?? y.mode} union, expected ${UNION_MODES[x.mode!] ?? x.mode}`;
  if (String(x.typeIds) !== String(y.typeIds)) return `${path}: union type ids [${String(y.typeIds)}], expected [${String(x.typeIds)}]`;
  if (x.keysSorted !== y.keysSorted) return `${path}: a map ${y.keysSorted ? 'with' : 'without'} sorted keys, expected ${x.keysSorted ? 'with' : 'without'}`;
  if (x.isOrdered !== y.isOrdered) return `${path}: ${y.isOrdered ? 'an ordered' : 'an unordered'} dictionary, expected ${x.isOrdered ? 'an ordered' : 'an unordered'} one`;
  return null;
}

const UNION_MODES: Record<number, string> = { 0: 'sparse', 1: 'dense' };

/** The parameters arrow-js's toString leaves out (a typed array of type ids prints as "0,1"). */
interface UnprintedParameters {
  bitWidth?: number;
  mode?: number;
  typeIds?: Int32Array | null;
  /** a map's (Schema.fbs Map.keysSorted) */
  keysSorted?: boolean;
  /** a dictionary's (DictionaryEncoding.isOrdered); its id is not compared: a schema read back numbers them anew */
  isOrdered?: boolean;
}
