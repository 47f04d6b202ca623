/**
 * Dictionary columns made by hand for tests: index columns of any index
 * type over a given dictionary vector, with null rows whose index holds
 * garbage, and dictionaries of generated words.
 */
import { Utf8, makeData, vectorFromArray, type Data, type Dictionary, type Int16, type Int32, type Int64, type Int8, type Uint16, type Uint32, type Uint64, type Uint8, type Vector } from 'apache-arrow';

export type IndexType = Int8 | Int16 | Int32 | Int64 | Uint8 | Uint16 | Uint32 | Uint64;

/** A utf8 vector of `values`. */
export function strings(values: readonly (string | null)[]): Vector {
  return vectorFromArray(values as string[], new Utf8());
}

/** `n` distinct words `${tag}0` ... `${tag}${n - 1}`. */
export function words(tag: string, n: number): Vector {
  return strings(Array.from({ length: n }, (_, i) => `${tag}${i}`));
}

/**
 * Dictionary indices of `type`: row i points at indices[i], or is null (its index then holds
 * `garbage`, which any reader must ignore).
 */
export function indicesOf(type: Dictionary, dictionary: Vector, indices: readonly (number | null)[], garbage = 0): Data {
  const n = indices.length;
  const Indices = type.indices.ArrayType as unknown as new (length: number) => { [i: number]: number | bigint };
  const raw = new Indices(n);
  const wide = (type.indices.bitWidth as number) === 64;
  const bitmap = new Uint8Array((n + 7) >>> 3);
  let nullCount = 0;
  indices.forEach((v, i) => {
    if (v === null) nullCount++;
    else bitmap[i >>> 3]! |= 1 << (i & 7);
    const index = v ?? garbage;
    raw[i] = wide ? BigInt.asUintN(64, BigInt(index)) : index;
    if (wide && type.indices.isSigned) raw[i] = BigInt.asIntN(64, BigInt(index));
  });
  return makeData({ type, length: n, nullCount, nullBitmap: nullCount > 0 ? bitmap : null, data: raw, dictionary } as never) as Data;
}
