/**
 * The input shapes of the benchmark suite, generated deterministically (a
 * linear congruential generator) from raw buffers, in batches of 8192 rows.
 *
 * - narrow: the standard narrow shape of the demo (int64 key, float64,
 *   utf8 of ~20 bytes, int32 with 10 % nulls).
 * - wide: a 16-column row shaped like TPC-H lineitem (three integer keys, a
 *   line number, four decimal128(15,2), a one-letter flag, a bool, three
 *   dates, two short strings from small vocabularies and a 10-43 byte
 *   comment made of words, 2 % null), keyed on the order key (about four
 *   lines per order).
 * - nested: the demo's nested shape (int64 key, list<int32> of 0-6 items with
 *   10 % null lists, struct<int32, utf8 of 8-16 B> with 5 % nulls,
 *   map<utf8 of 4-12 B, int64> of 0-4 entries).
 */
import { Bool, DateDay, Decimal, Field, Int32, Int64, makeData, RecordBatch, Schema, Struct, Utf8, type Data } from 'apache-arrow';
import { batchBytes, NARROW_SCHEMA, narrowBatch, NESTED_SCHEMA, nestedBatch } from '../src/cli/demo-data.js';

export const BATCH_ROWS = 8192;

export interface Shape {
  name: string;
  /** the hash-partitioning key */
  key: string;
  schema: Schema;
  batch(rows: number, seed: number): RecordBatch;
}

const decimal = () => new Decimal(2, 15, 128);

export const WIDE_SCHEMA = new Schema([
  new Field('l_orderkey', new Int64(), false),
  new Field('l_partkey', new Int64(), false),
  new Field('l_suppkey', new Int32(), false),
  new Field('l_linenumber', new Int32(), false),
  new Field('l_quantity', decimal(), false),
  new Field('l_extendedprice', decimal(), false),
  new Field('l_discount', decimal(), false),
  new Field('l_tax', decimal(), false),
  new Field('l_returnflag', new Utf8(), false),
  new Field('l_isopen', new Bool(), false),
  new Field('l_shipdate', new DateDay(), false),
  new Field('l_commitdate', new DateDay(), false),
  new Field('l_receiptdate', new DateDay(), false),
  new Field('l_shipinstruct', new Utf8(), false),
  new Field('l_shipmode', new Utf8(), false),
  new Field('l_comment', new Utf8(), true),
]);

const FLAGS = ['A', 'N', 'R'];
const INSTRUCTIONS = ['DELIVER IN PERSON', 'COLLECT COD', 'NONE', 'TAKE BACK RETURN'];
const MODES = ['REG AIR', 'AIR', 'RAIL', 'SHIP', 'TRUCK', 'MAIL', 'FOB'];
const WORDS = ['furiously', 'quickly', 'carefully', 'blithely', 'slyly', 'final', 'ironic', 'pending', 'regular', 'express', 'deposits', 'accounts', 'packages', 'requests', 'theodolites', 'foxes', 'pinto', 'beans', 'sleep', 'nag', 'haggle', 'among', 'above', 'the'];
const encoder = new TextEncoder();
const encoded = (words: readonly string[]) => words.map((w) => encoder.encode(w));
const FLAG_BYTES = encoded(FLAGS);
const INSTRUCTION_BYTES = encoded(INSTRUCTIONS);
const MODE_BYTES = encoded(MODES);
const WORD_BYTES = encoded(WORDS);

/** Raw buffers of a Utf8 column being filled. */
class StringColumn {
  private readonly offsets: Int32Array;
  private bytes: Uint8Array;
  private at = 0;
  private row = 0;
  private validity: Uint8Array | null = null;
  private nulls = 0;

  constructor(private readonly rows: number, bytesPerRow: number) {
    this.offsets = new Int32Array(rows + 1);
    this.bytes = new Uint8Array(rows * bytesPerRow);
  }

  push(...pieces: Uint8Array[]): void {
    for (const [k, piece] of pieces.entries()) {
      if (k > 0) this.bytes[this.at++] = 0x20;
      this.bytes.set(piece, this.at);
      this.at += piece.byteLength;
    }
    this.offsets[++this.row] = this.at;
  }

  pushNull(): void {
    this.validity ??= new Uint8Array((this.rows + 7) >>> 3).fill(0xff);
    this.validity[this.row >>> 3]! &= ~(1 << (this.row & 7));
    this.nulls++;
    this.offsets[++this.row] = this.at;
  }

  data(): Data<Utf8> {
    const validity = this.validity === null ? {} : { nullCount: this.nulls, nullBitmap: this.validity };
    return makeData({ type: new Utf8(), length: this.rows, valueOffsets: this.offsets, data: this.bytes.subarray(0, this.at), ...validity });
  }
}

export function wideBatch(rows: number, seed: number): RecordBatch {
  let state = seed >>> 0 || 1;
  const next = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0);
  const orderKeys = new BigInt64Array(rows);
  const partKeys = new BigInt64Array(rows);
  const suppKeys = new Int32Array(rows);
  const lineNumbers = new Int32Array(rows);
  const decimals = [0, 1, 2, 3].map(() => new Uint32Array(rows * 4));
  const open = new Uint8Array((rows + 7) >>> 3);
  const dates = [0, 1, 2].map(() => new Int32Array(rows));
  const flags = new StringColumn(rows, 1);
  const instructions = new StringColumn(rows, 17);
  const modes = new StringColumn(rows, 7);
  const comments = new StringColumn(rows, 48);
  // orders of 1-7 lines with consecutive keys, as lineitem has them
  let order = (seed * 2_000_003) % 6_000_000;
  let line = 0;
  let lines = 1;
  for (let i = 0; i < rows; i++) {
    if (line === lines) {
      order = (order + 1 + (next() % 3)) % 60_000_000;
      line = 0;
      lines = 1 + (next() % 7);
    }
    line++;
    orderKeys[i] = BigInt(order);
    partKeys[i] = BigInt(next() % 2_000_000);
    suppKeys[i] = next() % 100_000;
    lineNumbers[i] = line;
    const quantity = 1 + (next() % 50);
    const price = 90_000 + (next() % 11_000_000); // cents
    // decimal128(15, 2): the unscaled value in the low word (all values here are positive and < 2^32)
    decimals[0]![4 * i] = quantity * 100;
    decimals[1]![4 * i] = (quantity * price) % 0x100000000;
    decimals[2]![4 * i] = next() % 11;
    decimals[3]![4 * i] = next() % 9;
    if (next() % 2 === 0) open[i >>> 3]! |= 1 << (i & 7);
    const ship = 8000 + (next() % 2500);
    dates[0]![i] = ship;
    dates[1]![i] = ship - 30 + (next() % 60);
    dates[2]![i] = ship + 1 + (next() % 30);
    flags.push(FLAG_BYTES[next() % 3]!);
    instructions.push(INSTRUCTION_BYTES[next() % 4]!);
    modes.push(MODE_BYTES[next() % 7]!);
    if (next() % 50 === 0) comments.pushNull();
    else {
      const words: Uint8Array[] = [];
      let length = 0;
      const target = 10 + (next() % 34);
      while (length < target) {
        const word = WORD_BYTES[next() % WORD_BYTES.length]!;
        if (length + word.byteLength + 1 > 43) break;
        words.push(word);
        length += word.byteLength + 1;
      }
      comments.push(...(words.length > 0 ? words : [WORD_BYTES[0]!]));
    }
  }
  const fixed = <T extends Int32 | Int64 | Decimal | DateDay>(type: T, data: T['TArray']) => makeData({ type, length: rows, data } as never) as Data;
  const children: Data[] = [
    fixed(new Int64(), orderKeys),
    fixed(new Int64(), partKeys),
    fixed(new Int32(), suppKeys),
    fixed(new Int32(), lineNumbers),
    ...decimals.map((d) => fixed(decimal(), d)),
    flags.data(),
    makeData({ type: new Bool(), length: rows, data: open }),
    ...dates.map((d) => fixed(new DateDay(), d)),
    instructions.data(),
    modes.data(),
    comments.data(),
  ];
  return new RecordBatch(WIDE_SCHEMA, makeData({ type: new Struct(WIDE_SCHEMA.fields), length: rows, children }));
}

export type ShapeName = 'narrow' | 'wide' | 'nested';

export const SHAPES: Record<ShapeName, Shape> = {
  narrow: { name: 'narrow', key: 'key', schema: NARROW_SCHEMA, batch: narrowBatch },
  wide: { name: 'wide', key: 'l_orderkey', schema: WIDE_SCHEMA, batch: wideBatch },
  nested: { name: 'nested', key: 'key', schema: NESTED_SCHEMA, batch: nestedBatch },
};

/** `rows` rows of the shape in batches of BATCH_ROWS (seeds 1, 2, ...). */
export function batchesOf(shape: Shape, rows: number): RecordBatch[] {
  return Array.from({ length: Math.ceil(rows / BATCH_ROWS) }, (_, i) => shape.batch(Math.min(BATCH_ROWS, rows - i * BATCH_ROWS), i + 1));
}

/** Bytes of the batches' Arrow buffers (the input MB of the MB/s figures). */
export function inputBytesOf(batches: readonly RecordBatch[]): number {
  return batches.reduce((sum, b) => sum + batchBytes(b), 0);
}
