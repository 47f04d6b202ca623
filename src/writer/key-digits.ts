import { Field, Struct, Type, type Data, type DataType, type Dictionary } from 'apache-arrow';
import type { DecodedDictionaries } from './key-hash.js';
import { assertOrderableKey, fillNulls, KeyRanks, type KeyOrder } from './key-ranks.js';

/**
 * One range-partitioning key column as the integers ("digits") its rows
 * compare by, first to last:
 *
 * - a flat column is one digit, its value's rank among the bounds' values
 *   (key-ranks.ts); a dictionary column the rank of the value it points at;
 * - a struct is a digit for whether it is null (0 when it is not; -1 or 1
 *   when it is, as its null order says), then its fields' digits in order:
 *   Spark compares structs field by field, each ascending with nulls first,
 *   and reverses the whole comparison when the key is descending (so the
 *   fields of a descending struct go descending with nulls last).
 *
 * Below a null struct every digit is UNDER_NULL: all null structs compare
 * equal, whatever their fields hold. Worked example, key struct<a: int32,
 * b: utf8> ascending, bound values a in {1, 5}, b in {"x"}: the row {a: 5,
 * b: null} has digits [0, 3, -1], a null row [-1, UNDER_NULL, UNDER_NULL].
 * A dictionary of structs is the struct its index points at (a null index a
 * null struct): its digits are the struct's, taken from the decoded rows.
 */
export class KeyDigits {
  private readonly digits: Digit[];
  /** for error messages: the column (or struct field path) of each digit */
  readonly columns: string[];

  constructor(type: DataType, boundChunks: readonly Data[], order: KeyOrder, column: string, private readonly decoded: DecodedDictionaries) {
    this.digits = digitsOf(type, [], order, boundChunks, column, decoded);
    this.columns = this.digits.map((d) => d.column);
  }

  get count(): number {
    return this.digits.length;
  }

  /** The largest value the first digit takes: 2D + 1 for a value's rank (key-ranks.ts), 1 for a struct's null digit. */
  get firstDigitMax(): number {
    const first = this.digits[0]!;
    return first.kind === 'value' ? 2 * first.ranks.distinct + 1 : 1;
  }

  /** out[first + d][i] = digit d of row i of `column` (this key's column of a batch, or a chunk of its bounds). */
  digitsInto(column: Data, out: Int32Array[], first: number): void {
    const decodedHere = new Map<Data, Data>(); // a dictionary of structs is decoded once for all its digits
    const decode = (data: Data) => {
      let values = decodedHere.get(data);
      if (values === undefined) decodedHere.set(data, (values = this.decoded.decode(data)));
      return values;
    };
    this.digits.forEach((digit, d) => digitInto(digit, column, out[first + d]!, decode));
  }
}

/**
 * The digits of every row of a table's key columns (per key, its column's
 * chunks), row j's at [j * digits, (j + 1) * digits).
 */
export function rowDigitsOf(keys: readonly KeyDigits[], chunks: readonly (readonly Data[])[], rows: number): Int32Array {
  const digits = keys.reduce((n, key) => n + key.count, 0);
  const out = new Int32Array(rows * digits);
  const scratch = Array.from({ length: digits }, () => new Int32Array(rows));
  let first = 0;
  keys.forEach((key, k) => {
    let row = 0;
    for (const chunk of chunks[k]!) {
      key.digitsInto(chunk, scratch, first);
      for (let d = first; d < first + key.count; d++) for (let i = 0; i < chunk.length; i++) out[(row + i) * digits + d] = scratch[d]![i]!;
      row += chunk.length;
    }
    first += key.count;
  });
  return out;
}

/** The digit of rows below a null struct. */
export const UNDER_NULL = -2;

/** A step of a digit's path: decode the dictionary there (a dictionary of structs); other steps are child indices. */
const DECODE = -1;

type Digit =
  | { kind: 'struct'; path: number[]; column: string; nullRank: number }
  | { kind: 'value'; path: number[]; column: string; ranks: KeyRanks };

function digitsOf(type: DataType, path: number[], order: KeyOrder, boundChunks: readonly Data[], column: string, decoded: DecodedDictionaries): Digit[] {
  const decodedChunks = () => boundChunks.map((chunk) => ((chunk.type as DataType).typeId === Type.Dictionary ? decoded.decode(chunk) : chunk));
  if (type.typeId === Type.Struct) {
    // the fields compare ascending with nulls first, the whole reversed for a descending key
    const fieldOrder: KeyOrder = { descending: order.descending, nullsFirst: !order.descending };
    return [
      { kind: 'struct', path, column, nullRank: order.nullsFirst ? -1 : 1 },
      ...type.children.flatMap((field, i) =>
        digitsOf(field.type, [...path, i], fieldOrder, boundChunks.map((chunk) => chunk.children[i]!), `${column}.${field.name}`, decoded),
      ),
    ];
  }
  if (type.typeId === Type.Dictionary && (type as Dictionary).dictionary.typeId === Type.Struct) {
    // bounds may hold the struct itself or a dictionary of it; rows decoded with a null index are made null in digitInto
    return digitsOf((type as Dictionary).dictionary, [...path, DECODE], order, decodedChunks(), column, decoded);
  }
  const valueType = type.typeId === Type.Dictionary ? (type as Dictionary).dictionary : type;
  assertOrderableKey(valueType, column);
  return [{ kind: 'value', path, column, ranks: new KeyRanks(valueType, decodedChunks(), order) }];
}

/**
 * out[i] = the digit of row i. The path leads from the key column to the
 * digit's own column through levels: a struct field starts a level, a
 * dictionary decoded stays on it (its null index is the decoded row's null).
 * The digit's own level gives its null rank (a struct's level holds the
 * dictionary and the struct decoded from it); a null on any level above
 * makes it UNDER_NULL.
 */
function digitInto(digit: Digit, column: Data, out: Int32Array, decode: (dictionary: Data) => Data): void {
  let data = column;
  let level: Data[] = [column];
  const above: Data[] = [];
  for (const step of digit.path) {
    if (step === DECODE) {
      if ((data.type as DataType).typeId !== Type.Dictionary) continue; // bounds given as the struct itself
      data = decode(data);
      level.push(data);
    } else {
      above.push(...level);
      data = data.children[step]!;
      level = [data];
    }
  }
  if (digit.kind === 'struct') {
    out.fill(0, 0, data.length);
    for (const nulls of level) fillNulls(nulls, digit.nullRank, out);
  } else if ((data.type as DataType).typeId === Type.Dictionary) {
    // a flat dictionary: a null index is a null key; a valid index may point at a null value
    digit.ranks.ranksInto(decode(data), out);
    digit.ranks.nullsInto(data, out);
  } else {
    digit.ranks.ranksInto(data, out);
  }
  // below a null struct the digit is a constant
  for (const nulls of above) fillNulls(nulls, UNDER_NULL, out);
}

/** `type` with every dictionary replaced by its values' type (what bounds for it may hold instead). */
export function valueTypeOf(type: DataType): DataType {
  if (type.typeId === Type.Dictionary) return valueTypeOf((type as Dictionary).dictionary);
  if (type.typeId === Type.Struct) return new Struct(type.children.map((f) => new Field(f.name, valueTypeOf(f.type), f.nullable, f.metadata)));
  return type;
}
