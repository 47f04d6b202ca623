import { Type, type Data, type DataType, type Dictionary, type Vector } from 'apache-arrow';
import { IdentityRows } from './append-rows.js';
import { concatenateChunks, gatherRows } from './gather-rows.js';
import { assertHashable, hashColumnInto } from './murmur3.js';
import { ScratchSelections } from './split-plan.js';

/**
 * Hash keys beyond flat columns, as Spark's Murmur3Hash sees them:
 *
 * - a struct hashes its fields in order, each seeded with the hash so far
 *   (so struct<a, b> as a key is the same as a and b as two keys); a null
 *   struct leaves the hash unchanged, like any null;
 * - a dictionary column hashes its decoded values (Spark has no dictionary
 *   type: the value is what it sees).
 *
 * Lists, maps and unions are refused as keys: Spark's HashPartitioning
 * rejects maps, and this library keys only on what the shuffle issue allows
 * (structs of hashable fields).
 */
export function assertHashableKey(type: DataType, column: string): void {
  if (type.typeId === Type.Struct) {
    for (const child of type.children) assertHashableKey(child.type, `${column}.${child.name}`);
    return;
  }
  if (type.typeId === Type.Dictionary) {
    assertHashableKey((type as Dictionary).dictionary, column);
    return;
  }
  assertHashable(type, column);
}

/**
 * hashes[i] = hash(row i of `data`, seed hashes[i]) for every row, nested keys
 * included; null rows leave hashes[i] unchanged. See hashColumnInto.
 */
export function hashKeyInto(data: Data, hashes: Int32Array, column: string, decoded: DecodedDictionaries): void {
  const type = data.type as DataType;
  if (type.typeId === Type.Struct) {
    withNullsUnchanged(data, hashes, () => data.children.forEach((child, i) => hashKeyInto(child, hashes, `${column}.${type.children[i]!.name}`, decoded)));
    return;
  }
  if (type.typeId === Type.Dictionary) {
    // an index's null, and a null value it points at, both leave the hash unchanged (the decoded value is null)
    withNullsUnchanged(data, hashes, () => hashKeyInto(decoded.decode(data), hashes, column, decoded));
    return;
  }
  hashColumnInto(data, hashes, column);
}

/** Runs `hash` and then puts back the hashes of the rows where `data` is null. */
function withNullsUnchanged(data: Data, hashes: Int32Array, hash: () => void): void {
  const bitmap = data.nullBitmap as Uint8Array | null | undefined;
  if (data.nullCount === 0 || bitmap === null || bitmap === undefined || bitmap.byteLength === 0) {
    hash();
    return;
  }
  const nullRows: number[] = [];
  const saved: number[] = [];
  for (let i = 0; i < data.length; i++) {
    const bit = data.offset + i;
    if (((bitmap[bit >>> 3]! >>> (bit & 7)) & 1) === 0) {
      nullRows.push(i);
      saved.push(hashes[i]!);
    }
  }
  hash();
  nullRows.forEach((row, k) => (hashes[row] = saved[k]!));
}

/**
 * Turns dictionary columns into columns of their values (a gather of the
 * values at the indices) for hashing. A dictionary of several chunks is
 * compacted once and kept for the batches that share it.
 */
export class DecodedDictionaries {
  private readonly compacted = new WeakMap<Vector, Data>();
  private readonly identity = new IdentityRows();
  private readonly scratch = new ScratchSelections();
  private indices = new Uint32Array(0);

  /**
   * The values row i of `data` points at, as a column of data.length rows. A
   * null index gives the dictionary's first value (or a null one): callers
   * treat those rows themselves (the hash leaves them unchanged, range ranks them null).
   */
  decode(data: Data): Data {
    const type = data.type as Dictionary;
    const values = this.valuesOf(data.dictionary!, type.dictionary);
    const n = data.length;
    if (this.indices.length < n) this.indices = new Uint32Array(Math.max(n, this.indices.length * 2));
    const indices = this.indices;
    const raw = data.values as ArrayLike<number | bigint>;
    const last = values.length - 1;
    for (let i = 0; i < n; i++) {
      const index = Number(raw[i]!);
      // a null row's index may be anything: point it at value 0 (its hash is put back afterwards)
      indices[i] = index >= 0 && index <= last ? index : 0;
    }
    // an empty dictionary means every row is null: nothing to hash
    return gatherRows(values, type.dictionary, indices, values.length === 0 ? 0 : n, this.scratch);
  }

  private valuesOf(dictionary: Vector, type: DataType): Data {
    const chunks = dictionary.data as Data[];
    if (chunks.length === 1) return chunks[0]!;
    let values = this.compacted.get(dictionary);
    if (values === undefined) {
      values = concatenateChunks(chunks, type, this.identity, this.scratch);
      this.compacted.set(dictionary, values);
    }
    return values;
  }
}
