/**
 * Large inputs made cheaply, and an exact check of what a shuffle of them gave back,
 * for the spill matrix (test/spill-matrix.test.ts, and test/support/memory-probe.ts
 * in a child process).
 *
 * An input is a few distinct SOURCE batches (int64 key, float64, utf8 of a chosen
 * length, int32 with 10 % nulls) written over and over: batch j is source j % k (or,
 * for tiny batches, a 1-10 row slice of it) plus a fresh int32 `seq` column holding
 * the global row number. Only the sources and one seq column are ever in memory, so
 * an input of hundreds of MB costs a few MB, and still every output row names the
 * input row it must be: the check (`checkOutput`) reads every partition back and
 * asserts, for every row, that its seq was not seen before, is larger than the
 * previous seq of its partition (input order within a partition), belongs in that
 * partition by the reference partitioner, and that its other cells are the source
 * row's bytes; then that every seq came back. That is "every row exactly once, the
 * same per-partition order", without holding the expected rows.
 */
import { Field, Float64, Int32, Int64, makeData, RecordBatch, Schema, Struct, Utf8, type Data } from 'apache-arrow';
import { ShuffleReader } from '../../src/reader/shuffle-reader.js';
import type { Partitioning } from '../../src/writer/partitioner.js';
import { Rng } from './random.js';
import { ReferencePartitioner } from './reference-partitioner.js';
import { isValidRow } from './rows.js';

export const MATRIX_SCHEMA = new Schema([
  new Field('key', new Int64(), false),
  new Field('amount', new Float64(), false),
  new Field('label', new Utf8(), true),
  new Field('quantity', new Int32(), true),
  new Field('seq', new Int32(), false),
]);
const SOURCE_FIELDS = MATRIX_SCHEMA.fields.slice(0, 4);
const SEQ = 4;

export const MATRIX_PARTITIONING: Partitioning = { kind: 'hash', keys: ['key'] };

export interface MatrixSpec {
  /** distinct source batches */
  sources: number;
  /** rows per source batch */
  sourceRows: number;
  /** batches written */
  batches: number;
  /** label lengths, inclusive range (bytes) */
  label: [number, number];
  /** keys: uniform over a million values; half the rows one key; every row the same key */
  keys?: 'uniform' | 'half-one-key' | 'one-key';
  /** each written batch is a 1-10 row slice of a source (at a moving offset) instead of the whole source */
  tiny?: boolean;
  seed?: number;
}

function sourceBatch(spec: MatrixSpec, index: number): RecordBatch {
  const rows = spec.sourceRows;
  const rng = new Rng((spec.seed ?? 1) * 7919 + index);
  const keys = new BigInt64Array(rows);
  const amounts = new Float64Array(rows);
  const quantities = new Int32Array(rows);
  const validity = new Uint8Array((rows + 7) >> 3).fill(0xff);
  const labelValidity = new Uint8Array((rows + 7) >> 3).fill(0xff);
  const offsets = new Int32Array(rows + 1);
  const lengths = Array.from({ length: rows }, () => rng.int(spec.label[0], spec.label[1]));
  const text = new Uint8Array(lengths.reduce((a, b) => a + b, 0));
  let nulls = 0;
  let labelNulls = 0;
  let pos = 0;
  for (let i = 0; i < rows; i++) {
    const mode = spec.keys ?? 'uniform';
    keys[i] = mode === 'one-key' || (mode === 'half-one-key' && i % 2 === 0) ? 42n : BigInt(rng.int(0, 999_999));
    amounts[i] = rng.next() * 1e6;
    quantities[i] = rng.int(0, 999);
    if (rng.chance(0.1)) {
      validity[i >> 3]! &= ~(1 << (i & 7));
      nulls++;
    }
    const len = lengths[i]!;
    if (len < 64 && rng.chance(0.02)) {
      // a few null labels among the short ones (their slots stay empty)
      labelValidity[i >> 3]! &= ~(1 << (i & 7));
      labelNulls++;
    } else {
      const chunk = text.subarray(pos, pos + len);
      if (len >= 4096) rng.fill(chunk); // long labels: random bytes, cheap to make, incompressible
      else for (let b = 0; b < len; b++) chunk[b] = 97 + (rng.u32() % 26);
      pos += len;
    }
    offsets[i + 1] = pos;
  }
  const children = [
    makeData({ type: new Int64(), length: rows, data: keys }),
    makeData({ type: new Float64(), length: rows, data: amounts }),
    makeData({ type: new Utf8(), length: rows, nullCount: labelNulls, nullBitmap: labelValidity, valueOffsets: offsets, data: text.subarray(0, pos) }),
    makeData({ type: new Int32(), length: rows, nullCount: nulls, nullBitmap: validity, data: quantities }),
  ];
  const schema = new Schema(SOURCE_FIELDS);
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children }));
}

/** Bytes of a Data's buffers as the batch holds them (a slice counts its share only roughly: whole views). */
function dataBytes(data: Data): number {
  let total = 0;
  for (const b of [data.values, data.valueOffsets, data.nullBitmap] as (ArrayBufferView | undefined)[]) total += b?.byteLength ?? 0;
  return total;
}

export class MatrixInput {
  readonly sources: RecordBatch[];
  /** per batch: its source, the first source row, the row count, the seq of its first row */
  private readonly plan: { source: number; offset: number; rows: number; base: number }[] = [];
  readonly totalRows: number;
  /** Arrow bytes of all written batches (the sum of what write() is handed; slices count their rows' share) */
  readonly inputBytes: number;
  /** the largest written batch's Arrow bytes */
  readonly largestBatchBytes: number;

  constructor(readonly spec: MatrixSpec) {
    this.sources = Array.from({ length: spec.sources }, (_, i) => sourceBatch(spec, i));
    const perRow = this.sources.map((s) => s.data.children.reduce((sum, c) => sum + dataBytes(c), 0) / s.numRows + 4); // + seq
    const rng = new Rng(spec.seed ?? 1);
    let base = 0;
    let bytes = 0;
    let largest = 0;
    for (let j = 0; j < spec.batches; j++) {
      const source = j % spec.sources;
      const rows = spec.tiny === true ? rng.int(1, 10) : spec.sourceRows;
      const offset = spec.tiny === true ? rng.int(0, spec.sourceRows - rows) : 0;
      this.plan.push({ source, offset, rows, base });
      base += rows;
      const b = spec.tiny === true ? this.sliceBytes(source, offset, rows) : perRow[source]! * rows;
      bytes += b;
      largest = Math.max(largest, b);
    }
    this.totalRows = base;
    this.inputBytes = Math.round(bytes);
    this.largestBatchBytes = Math.round(largest);
  }

  private sliceBytes(source: number, offset: number, rows: number): number {
    const offsets = (this.sources[source]!.data.children[2] as Data).valueOffsets as Int32Array;
    return rows * (8 + 8 + 4 + 4 + 4) + (offsets[offset + rows]! - offsets[offset]!);
  }

  get numBatches(): number {
    return this.plan.length;
  }

  /** Batch j, made now (only its seq column is new memory). */
  batch(j: number): RecordBatch {
    const { source, offset, rows, base } = this.plan[j]!;
    const src = this.sources[source]!;
    const slice = offset === 0 && rows === src.numRows ? src : src.slice(offset, offset + rows);
    const seq = new Int32Array(rows);
    for (let i = 0; i < rows; i++) seq[i] = base + i;
    const children = [...slice.data.children, makeData({ type: new Int32(), length: rows, nullCount: 0, data: seq })];
    return new RecordBatch(MATRIX_SCHEMA, makeData({ type: new Struct(MATRIX_SCHEMA.fields), length: rows, nullCount: 0, children }));
  }

  *batches(): Generator<RecordBatch> {
    for (let j = 0; j < this.plan.length; j++) yield this.batch(j);
  }

  /** The batch and source row of global row `seq`, or null when there is no such row. */
  locate(seq: number): { batch: number; source: number; row: number } | null {
    if (!Number.isInteger(seq) || seq < 0 || seq >= this.totalRows) return null;
    if (this.spec.tiny !== true) {
      const batch = Math.floor(seq / this.spec.sourceRows);
      return { batch, source: batch % this.spec.sources, row: seq - batch * this.spec.sourceRows };
    }
    let lo = 0;
    let hi = this.plan.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.plan[mid]!.base <= seq) lo = mid;
      else hi = mid - 1;
    }
    const p = this.plan[lo]!;
    return { batch: lo, source: p.source, row: p.offset + (seq - p.base) };
  }

  /** Per source, the partition of each of its rows (the reference partitioner; hash partitioning has no state across batches). */
  partitionsOfSources(numPartitions: number, partitioning: Partitioning = MATRIX_PARTITIONING): Int32Array[] {
    if (partitioning.kind !== 'hash' && partitioning.kind !== 'single') throw new Error('the matrix input is checked for hash or single partitioning only');
    return this.sources.map((s) => Int32Array.from(new ReferencePartitioner(partitioning, s.schema, numPartitions).partitionsOf(s)));
  }

  /** Rows per partition, as the reference partitioner sends them. */
  expectedPartitionRows(numPartitions: number, partitioning: Partitioning = MATRIX_PARTITIONING): number[] {
    const pids = this.partitionsOfSources(numPartitions, partitioning);
    const counts = new Array<number>(numPartitions).fill(0);
    for (const p of this.plan) {
      const ids = pids[p.source]!;
      for (let i = p.offset; i < p.offset + p.rows; i++) counts[ids[i]!]!++;
    }
    return counts;
  }
}

export interface OutputCheck {
  /** rows read back */
  rows: number;
  /** per partition, rows read back */
  partitionRows: number[];
  /** what is wrong (at most a few descriptions, then a count); empty when the output is exact */
  problems: string[];
}

function sameBytes(a: Uint8Array, aStart: number, b: Uint8Array, bStart: number, length: number): boolean {
  for (let i = 0; i < length; i++) if (a[aStart + i] !== b[bStart + i]) return false;
  return true;
}

const bytesOf = (v: ArrayBufferView) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

/** A column's buffers, prepared once per batch: row r's validity and value bytes. */
interface ColumnView {
  data: Data;
  /** fixed width in bytes, or null for utf8 */
  width: number | null;
  bytes: Uint8Array;
  offsets: Int32Array | null;
}

function viewOf(data: Data, width: number | null): ColumnView {
  return { data, width, bytes: bytesOf(data.values as ArrayBufferView), offsets: width === null ? (data.valueOffsets as Int32Array) : null };
}

/** Row r of `out` against row i of the source column `src`: same validity, and (when valid) the same bytes. */
function cellsEqual(out: ColumnView, r: number, src: ColumnView, i: number): boolean {
  const valid = isValidRow(out.data, r);
  if (valid !== isValidRow(src.data, i)) return false;
  if (!valid) return true;
  const width = out.width;
  if (width !== null) return sameBytes(out.bytes, r * width, src.bytes, i * width, width);
  const oo = out.offsets!;
  const so = src.offsets!;
  const length = oo[r + 1]! - oo[r]!;
  if (length !== so[i + 1]! - so[i]!) return false;
  return sameBytes(out.bytes, oo[r]!, src.bytes, so[i]!, length);
}

const WIDTHS = [8, 8, null, 4];

/** Reads every partition of the output at `prefix` and checks it row by row against `input` (see the file comment). */
export async function checkOutput(prefix: string, input: MatrixInput, numPartitions: number, partitioning: Partitioning = MATRIX_PARTITIONING): Promise<OutputCheck> {
  const pids = input.partitionsOfSources(numPartitions, partitioning);
  const sourceViews = input.sources.map((s) => (s.data.children as Data[]).map((c, i) => viewOf(c, WIDTHS[i]!)));
  const seen = new Uint8Array(input.totalRows);
  const problems: string[] = [];
  let problemCount = 0;
  const problem = (text: string) => {
    if (problemCount++ < 5) problems.push(text);
  };
  const partitionRows: number[] = [];
  let rows = 0;
  const reader = await ShuffleReader.open(prefix);
  try {
    if (reader.numPartitions !== numPartitions) problem(`${reader.numPartitions} partitions, expected ${numPartitions}`);
    for (let p = 0; p < reader.numPartitions; p++) {
      let last = -1;
      let count = 0;
      for await (const batch of reader.readPartition(p)) {
        const columns = batch.data.children as Data[];
        if (columns.length !== MATRIX_SCHEMA.fields.length) {
          problem(`partition ${p}: ${columns.length} columns`);
          continue;
        }
        const seqs = columns[SEQ]!.values as Int32Array;
        const views = columns.slice(0, SEQ).map((c, i) => viewOf(c, WIDTHS[i]!));
        for (let r = 0; r < batch.numRows; r++, count++) {
          const seq = seqs[r]!;
          const at = input.locate(seq);
          if (at === null) {
            problem(`partition ${p} row ${count}: seq ${seq} is no input row`);
            continue;
          }
          if (seen[seq] === 1) problem(`partition ${p} row ${count}: seq ${seq} again (a duplicate)`);
          seen[seq] = 1;
          if (seq <= last) problem(`partition ${p} row ${count}: seq ${seq} after ${last} (out of input order)`);
          last = seq;
          const expected = pids[at.source]![at.row]!;
          if (expected !== p) problem(`partition ${p} row ${count}: seq ${seq} belongs in partition ${expected}`);
          const source = sourceViews[at.source]!;
          for (let c = 0; c < SEQ; c++) {
            if (!cellsEqual(views[c]!, r, source[c]!, at.row)) problem(`partition ${p} row ${count} (seq ${seq}): column ${MATRIX_SCHEMA.fields[c]!.name} differs from the input row`);
          }
        }
      }
      partitionRows.push(count);
      rows += count;
    }
  } finally {
    await reader.close();
  }
  let missing = 0;
  let firstMissing = -1;
  for (let s = 0; s < seen.length; s++) {
    if (seen[s] === 0) {
      if (missing++ === 0) firstMissing = s;
    }
  }
  if (missing > 0) problem(`${missing} input row(s) never came back, the first seq ${firstMissing}`);
  if (problemCount > problems.length) problems.push(`... ${problemCount - problems.length} more`);
  return { rows, partitionRows, problems };
}
