import { Data, Vector, type DataType, type Dictionary } from 'apache-arrow';
import { layoutOfType, type ColumnLayout } from '../writer/column-layout.js';
import { missingDictionary } from './missing-dictionary.js';
import { negativeNullCount } from './column-loader.js';

/**
 * How the IPC buffers of a column without children become arrow-js Data:
 *
 * ```text
 * kind         buffers (IPC order)          Data buffers [offsets, values, validity]
 * null         none                         -
 * values       validity, values             values as the type's ArrayType
 * offsets32    validity, offsets, data      Int32Array offsets, Uint8Array data
 * offsets64    validity, offsets, data      BigInt64Array offsets, Uint8Array data
 * dictionary   validity, indices            indices as the index type's ArrayType, + the dictionary
 * ```
 */
export type FlatKind = 'null' | 'values' | 'offsets32' | 'offsets64' | 'dictionary';

/**
 * Each column's kind when every column of a schema is flat, else null (views,
 * lists, structs, maps, unions, and types this library does not split:
 * arrow-js's VectorLoader loads those). Read from the column layouts the
 * writer splits by (layoutOfType), so both agree on what a flat column is.
 */
export function flatKindsOf(types: readonly DataType[]): FlatKind[] | null {
  const kinds: FlatKind[] = [];
  for (const type of types) {
    const kind = flatKindOf(layoutOfType(type));
    if (kind === null) return null;
    kinds.push(kind);
  }
  return kinds;
}

function flatKindOf(layout: ColumnLayout | null): FlatKind | null {
  switch (layout?.kind) {
    case 'null':
      return 'null';
    case 'fixed-width':
    case 'bool':
      return 'values';
    case 'binary':
      return layout.offsetWidth === 4 ? 'offsets32' : 'offsets64';
    case 'dictionary':
      return 'dictionary';
    default:
      return null;
  }
}

/** A field node as arrow-js decodes it from a record batch header. */
interface FieldNodeLike {
  length: number;
  nullCount: number;
}

/**
 * The columns of a record batch whose columns are all flat (`kinds` from
 * flatKindsOf), from its field nodes and its buffers in IPC order, made the
 * way arrow-js's VectorLoader and makeData make them, without their visitors:
 * for a batch of a few rows, dispatching on the type twice per column, and
 * the typed-array conversions around it, cost more than the rows (a third of
 * reading 23,800 small batches of 16 columns). A validity bitmap is kept only
 * when the node counts nulls, as arrow-js does.
 */
export function loadFlatColumns(
  types: readonly DataType[],
  kinds: readonly FlatKind[],
  nodes: readonly FieldNodeLike[],
  buffers: readonly Uint8Array[],
  dictionaries: Map<number, Vector>,
): Data[] {
  if (nodes.length < types.length) throw new Error(`the record batch has ${nodes.length} field nodes for ${types.length} columns`);
  const columns: Data[] = [];
  let b = 0;
  const next = (): Uint8Array => {
    const bytes = buffers[b++];
    if (bytes === undefined) throw new Error(`the record batch has ${buffers.length} buffers, its columns need more`);
    return bytes;
  };
  for (let c = 0; c < types.length; c++) {
    const type = types[c]!;
    const { length, nullCount } = nodes[c]!;
    const kind = kinds[c]!;
    if (kind === 'null') {
      columns.push(new Data(type, 0, length, length));
      continue;
    }
    if (nullCount < 0) throw new Error(negativeNullCount(type, nullCount)); // (column-loader.ts)
    const validity = next();
    const nullBitmap = nullCount > 0 ? new Uint8Array(validity.buffer, validity.byteOffset, validity.byteLength) : new Uint8Array(0);
    switch (kind) {
      case 'values':
        columns.push(new Data(type, 0, length, nullCount, [undefined, asView(type.ArrayType, next()), nullBitmap]));
        break;
      case 'offsets32':
      case 'offsets64': {
        const offsets = asView(kind === 'offsets32' ? Int32Array : BigInt64Array, next());
        columns.push(new Data(type, 0, length, nullCount, [offsets, asView(Uint8Array, next()), nullBitmap]));
        break;
      }
      case 'dictionary': {
        const dictionary = type as Dictionary;
        const indices = asView(dictionary.indices.ArrayType, next());
        const values = dictionaries.get(dictionary.id) ?? missingDictionary(dictionary);
        columns.push(new Data(type, 0, length, nullCount, [undefined, indices, nullBitmap], [], values));
        break;
      }
    }
  }
  return columns;
}

/** A typed array constructor: arrow-js's ArrayType of a type. */
interface ViewConstructor {
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): ArrayBufferView;
  readonly BYTES_PER_ELEMENT: number;
}

/** `bytes` seen as `View` elements (arrow-js's toArrayBufferView for a Uint8Array: whole elements only). */
function asView(View: ViewConstructor, bytes: Uint8Array): ArrayBufferView {
  return new View(bytes.buffer, bytes.byteOffset, Math.floor(bytes.byteLength / View.BYTES_PER_ELEMENT));
}
