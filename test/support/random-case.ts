/**
 * The random round-trip case of property-roundtrip.test.ts: its fast-check arbitrary and
 * the function that turns a case into batches and writer options (kept here so that a
 * counterexample can be replayed from a script or another test).
 */
import fc from 'fast-check';
import { Int16, Int32, Int8, Table, Uint8, makeData, tableFromIPC, tableToIPC, type Data, type DataType, type RecordBatch, type Schema } from 'apache-arrow';
import type { CodecName } from '../../src/format/codec.js';
import type { Partitioning } from '../../src/writer/partitioner.js';
import type { RangeKey } from '../../src/writer/range-partitioner.js';
import { batchOf, buildColumn, containsView, NO_BITMAP, schemaOf, TYPE_CASES, type ColumnSpec, type ValiditySpec } from './columns.js';
import { Rng } from './random.js';
import { boundsFrom } from './reference-range.js';
import type { WriterOptions } from './shuffle-harness.js';

// ---------------------------------------------------------------------------------------------
// the generated case

export type BatchForm = 'plain' | 'sliced' | 'ipc' | 'ipc-then-sliced' | 'sliced-then-ipc';
type PartitioningKind = Partitioning['kind'];

export interface BatchCase {
  rows: number;
  nullRate: number;
  form: BatchForm;
  /** raw numbers turned into a slice [begin, end) of the built rows */
  sliceA: number;
  sliceB: number;
  /** per column: 0 no bitmap, 1 bitmap with the batch's null rate, 2 bitmap with every bit set */
  validityModes: number[];
  /** variable-width values of 1-6 KB */
  longValues: boolean;
  seed: number;
}

export interface RoundTripCase {
  columns: { typeIndex: number; nullable: boolean }[];
  batches: BatchCase[];
  numPartitions: number;
  codec: CodecName;
  partitioning: PartitioningKind;
  /** raw picks of hash and range key columns (mapped onto the hashable columns) */
  keyPicks: number[];
  /** per range key: bit 0 descending, bit 1 the null order opposite to Spark's default for the direction */
  keyOrders: number[];
  pidPosition: number;
  mapId: number;
  maxBatchRows: number | undefined;
  memLimitFloor: number | undefined;
  resizeThreshold: number | undefined;
  /** 0 stops the payload merger, 1 parks every eviction: either way full small buffers are topped up */
  mergeThreshold: number | undefined;
  /** the hash writer's staging of small batches: default, 0 (off), or a budget of a few rows */
  stagingBytes: number | undefined;
  coalesceRows: number;
  /** the writer's schema: 0 from the first batch, 1 the in-memory schema, 2 the schema as read back from IPC */
  schemaBinding: number;
}

const rowsArb = fc.oneof(
  { weight: 1, arbitrary: fc.constant(0) },
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 64 }) },
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 3000 }) },
);

export const batchArb: fc.Arbitrary<BatchCase> = fc.record({
  rows: rowsArb,
  nullRate: fc.constantFrom(0, 0.1, 0.5, 1),
  form: fc.constantFrom<BatchForm>('plain', 'plain', 'sliced', 'ipc', 'ipc-then-sliced', 'sliced-then-ipc'),
  sliceA: fc.nat({ max: 3000 }),
  sliceB: fc.nat({ max: 3000 }),
  validityModes: fc.array(fc.nat({ max: 2 }), { minLength: 7, maxLength: 7 }),
  longValues: fc.oneof({ weight: 6, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  seed: fc.nat(),
});

export const caseArb: fc.Arbitrary<RoundTripCase> = fc.record({
  columns: fc.array(fc.record({ typeIndex: fc.nat({ max: TYPE_CASES.length - 1 }), nullable: fc.boolean() }), { minLength: 1, maxLength: 6 }),
  batches: fc.array(batchArb, { minLength: 0, maxLength: 4 }),
  numPartitions: fc.oneof(
    fc.integer({ min: 1, max: 8 }),
    fc.constantFrom(1, 2, 4, 16, 64, 128, 256),
    fc.integer({ min: 1, max: 300 }),
  ),
  codec: fc.constantFrom<CodecName>('lz4', 'zstd', 'none'),
  partitioning: fc.constantFrom<PartitioningKind>('hash', 'hash', 'round-robin', 'single', 'partition-id', 'range'),
  keyPicks: fc.array(fc.nat({ max: 5 }), { minLength: 1, maxLength: 3 }),
  keyOrders: fc.array(fc.nat({ max: 3 }), { minLength: 3, maxLength: 3 }),
  pidPosition: fc.nat({ max: 6 }),
  mapId: fc.nat({ max: 100_000 }),
  // small buffers force many evictions and resizes; 1-row buffers cost a payload per row, so they are rarer
  maxBatchRows: fc.oneof(
    { weight: 2, arbitrary: fc.integer({ min: 2, max: 16 }) },
    { weight: 3, arbitrary: fc.integer({ min: 1, max: 300 }) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  ),
  // small floors shrink the preferred buffer size with the row width and partition count (resizes)
  memLimitFloor: fc.constantFrom(undefined, 1 << 16, 1 << 20),
  resizeThreshold: fc.constantFrom(undefined, 0, 0.25, 2),
  mergeThreshold: fc.constantFrom(undefined, undefined, 0, 1),
  stagingBytes: fc.constantFrom(undefined, undefined, 0, 4096),
  coalesceRows: fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 5000 })),
  schemaBinding: fc.nat({ max: 2 }),
});

// ---------------------------------------------------------------------------------------------
// turning a case into batches and writer options

export interface Built {
  schema: Schema;
  batches: RecordBatch[];
  options: WriterOptions;
}

export function throughIpc(batch: RecordBatch): RecordBatch {
  const back = tableFromIPC(tableToIPC(new Table([batch]))).batches;
  if (back.length > 1) throw new Error(`IPC round trip gave ${back.length} batches`);
  return back[0] ?? batch; // arrow-js may write no batch at all for zero rows

}

function pidType(n: number, pick: number): DataType {
  if (n <= 127 && pick % 3 === 0) return new Int8();
  if (n <= 255 && pick % 3 === 1) return new Uint8();
  return pick % 2 === 0 ? new Int16() : new Int32();
}

/** `adjust` may change each column's values in place before the batches are formed (and range bounds drawn from them). */
export function build(c: RoundTripCase, adjust: (column: Data) => void = () => undefined): Built {
  const specs: ColumnSpec[] = c.columns.map((col, i) => ({ name: `c${i}`, type: TYPE_CASES[col.typeIndex]!.make(), nullable: col.nullable }));
  let partitioning: Partitioning;
  let pidIndex = -1;
  const hashable = specs.map((s, i) => (TYPE_CASES[c.columns[i]!.typeIndex]!.hashable ? s.name : null)).filter((n): n is string => n !== null);
  if (c.partitioning === 'hash' && hashable.length > 0) {
    partitioning = { kind: 'hash', keys: c.keyPicks.map((k) => hashable[k % hashable.length]!) };
  } else if (c.partitioning === 'partition-id') {
    pidIndex = Math.min(c.pidPosition, specs.length);
    specs.splice(pidIndex, 0, { name: 'pid', type: pidType(c.numPartitions, c.mapId), nullable: c.mapId % 2 === 0 });
    partitioning = { kind: 'partition-id', column: 'pid' };
  } else if (c.partitioning === 'range' && hashable.length > 0 && c.batches.length > 0) {
    partitioning = { kind: 'range', keys: [], bounds: new Uint8Array(0) }; // bounds drawn from the batches, below
  } else if (c.partitioning === 'single') {
    partitioning = { kind: 'single' };
  } else {
    partitioning = { kind: 'round-robin' };
  }
  const schema = schemaOf(specs);

  const batches = c.batches.map((b) => {
    const rng = new Rng(b.seed);
    const children = specs.map((spec, i) => {
      if (i === pidIndex) return pidColumn(spec.type, b.rows, c.numPartitions, rng, b.validityModes[i]! === 2);
      const mode = b.validityModes[i]!;
      const validity: ValiditySpec = !spec.nullable || mode === 0 ? (mode === 2 ? { bitmap: true, nullRate: 0 } : NO_BITMAP) : mode === 1 ? { bitmap: true, nullRate: b.nullRate } : { bitmap: true, nullRate: 0 };
      const column = buildColumn(spec.type, b.rows, validity, rng, { longValues: b.longValues && b.rows <= 300 }); // at most ~2 MB a column
      adjust(column);
      return column;
    });
    const batch = batchOf(schema, children, b.rows);
    const begin = b.sliceA % (b.rows + 1);
    const end = begin + (b.sliceB % (b.rows - begin + 1));
    switch (b.form) {
      case 'plain':
        return batch;
      case 'sliced':
        return batch.slice(begin, end);
      case 'ipc':
        return throughIpc(batch);
      case 'ipc-then-sliced':
        return throughIpc(batch).slice(begin, end);
      case 'sliced-then-ipc':
        // arrow-js's IPC writer cannot take sliced view columns (containsView)
        return schema.fields.some((f) => containsView(f.type)) ? throughIpc(batch).slice(begin, end) : throughIpc(batch.slice(begin, end));
    }
  });

  if (partitioning.kind === 'range') {
    // orderable keys are the hashable ones: the same types
    const keys = c.keyPicks.map((k, j): RangeKey => {
      const order = c.keyOrders[j]!;
      const descending = (order & 1) === 1;
      return { column: hashable[k % hashable.length]!, descending, ...((order & 2) === 2 ? { nullsFirst: descending } : {}) };
    });
    const rng = new Rng(c.mapId);
    const pick = (rows: number) => Array.from({ length: Math.min(rows, rng.int(0, 40)) }, () => rng.int(0, rows - 1));
    partitioning = { kind: 'range', keys, bounds: boundsFrom(batches, keys, c.numPartitions - 1, pick) };
  }

  // in-memory and IPC-read batches mix, whichever schema object the writer is bound to
  // (without batches there is no first batch: finish() needs the schema option)
  const binding = batches.length === 0 && c.schemaBinding === 0 ? 1 : c.schemaBinding;
  const boundSchema = binding === 0 ? undefined : binding === 1 ? schema : tableFromIPC(tableToIPC(new Table(schema))).schema;
  const options: WriterOptions = {
    numPartitions: c.numPartitions,
    partitioning,
    codec: c.codec,
    mapId: c.mapId,
    ...(boundSchema !== undefined ? { schema: boundSchema } : {}),
    ...(c.maxBatchRows !== undefined ? { maxBatchRows: c.maxBatchRows } : {}),
    ...(c.memLimitFloor !== undefined ? { memLimitFloor: c.memLimitFloor } : {}),
    ...(c.resizeThreshold !== undefined ? { resizeThreshold: c.resizeThreshold } : {}),
    ...(c.mergeThreshold !== undefined ? { mergeThreshold: c.mergeThreshold } : {}),
    ...(c.stagingBytes !== undefined ? { stagingBytes: c.stagingBytes } : {}),
    // the sort writer's page and block sizes, derived from mapId so that the columnar writer's cases stay as they were:
    // tiny pages and blocks spread rows over many pages and give long values pages and blocks of their own
    ...SORT_SIZES[c.mapId % SORT_SIZES.length]!,
  };
  return { schema, batches, options };
}

const SORT_SIZES: readonly { pageBytes?: number; blockBytes?: number }[] = [
  {},
  { pageBytes: 256, blockBytes: 64 },
  { pageBytes: 4096, blockBytes: 1024 },
  { pageBytes: 65536 },
  { blockBytes: 200 },
];

/** A valid partition-id column: values in [0, n), no nulls (optionally with an all-set bitmap). */
function pidColumn(type: DataType, rows: number, n: number, rng: Rng, withBitmap: boolean) {
  const ctor = (type as DataType & { ArrayType: new (length: number) => Int8Array | Uint8Array | Int16Array | Int32Array }).ArrayType;
  const values = new ctor(rows);
  for (let i = 0; i < rows; i++) values[i] = rng.int(0, n - 1);
  const bitmap = withBitmap ? new Uint8Array((rows + 7) >>> 3).fill(0xff) : undefined;
  return makeData({ type: type as Int32, data: values as Int32Array, length: rows, nullCount: 0, ...(bitmap ? { nullBitmap: bitmap } : {}) });
}

