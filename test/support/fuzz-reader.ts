/**
 * The reader fuzzer shared by test/fuzz-reader.test.ts (a short run) and
 * scripts/fuzz.ts (the long run): valid shuffle outputs of every flat type
 * (lz4, zstd, none; a few partitions; written by the columnar writer, and,
 * in a third of the bases, by the sort writer, whose row partitions the
 * reader parses with its own code), random mutations of their bytes, and
 * the judgement of what the reader does with them.
 *
 * A case is `{ base, mutations }`: `base` picks one of the base outputs built
 * from the run's seed, `mutations` are raw numbers mapped onto the base's
 * files when applied (so one arbitrary serves every base). Both are plain
 * JSON, so a case can be printed and replayed.
 *
 * Each mutated output is read twice, every partition:
 *  - mode `checksum`: `ShuffleReader.open(prefix)` with the checksum file;
 *    each partition must end in a ShuffleError or yield exactly its original rows;
 *  - mode `no-checksum`: `ShuffleReader.fromSources({ data, index })`, which
 *    hands the corrupt bytes to the IPC parser; each partition must end in a
 *    ShuffleError or yield rows. Rows that differ cannot always be detected
 *    without a checksum (a flipped bit in a value), so they are counted, not
 *    failed; batches that break Arrow's own invariants (offsets past the data,
 *    buffers too short for the row count, a null count the bitmap denies) are
 *    counted apart as `invalid-batch`.
 * In both modes any other exception, or a read that does not settle within
 * the per-case timeout, is a violation.
 *
 * Both reads are then made again with `wholePartitionBytes: 0`, which reads
 * every partition a message (or row block) at a time instead of whole
 * (modes `streamed-checksum` and `streamed`): each read must come to exactly
 * what the whole read came to (the same rows, or the same error: code, words
 * and location), else it is a violation of kind `disagrees`.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { Type, type Data, type RecordBatch } from 'apache-arrow';
import { ShuffleError } from '../../src/errors.js';
import type { CodecName } from '../../src/format/codec.js';
import { outputPaths } from '../../src/format/output-files.js';
import { LocalFileSource } from '../../src/reader/byte-source.js';
import { ShuffleReader } from '../../src/reader/shuffle-reader.js';
import { rowLayoutOf } from '../../src/sort-writer/row-layout.js';
import { createShuffleWriter, type WriterKind } from '../../src/writer-kind.js';
import { Schema } from 'apache-arrow';
import { batchOf, buildColumn, fixedByteWidth, isLargeOffsets, isVariableWidth, isView, NO_BITMAP, schemaOf, sequenceColumn, TYPE_CASES, type ColumnSpec, type ValiditySpec } from './columns.js';
import { buildAny, randomType, type DictionaryContext } from './nested.js';
import { Rng } from './random.js';
import { rowsOf } from './rows.js';

// ---------------------------------------------------------------------------------------------
// base outputs

/** One length-like field of the IPC framing, located in the data file. */
export interface LengthField {
  /** byte offset in the data file */
  at: number;
  /** 4: int32 LE, 8: int64 LE */
  width: 4 | 8;
  kind:
    | 'metadata-size' | 'body-length' | 'batch-length' | 'node-length' | 'node-null-count' | 'buffer-offset' | 'buffer-length' | 'compression-prefix'
    // the sort writer's row partitions: block headers, and in uncompressed blocks every row's length and string lengths
    | 'block-rows' | 'block-raw-length' | 'block-stored-length' | 'row-length' | 'row-value-length';
  partition: number;
}

export interface BaseOutput {
  label: string;
  writer: WriterKind;
  codec: CodecName;
  types: string[];
  numPartitions: number;
  data: Uint8Array;
  index: Uint8Array;
  checksum: Uint8Array;
  /** String(type) of every column */
  schemaTypes: string[];
  /** per partition, the canonical rows the unmutated output yields */
  rows: string[][];
  fields: LengthField[];
  /** compressed-buffer length prefixes with a real frame behind them (not -1); of a row partition: raw lengths of compressed blocks */
  compressedPrefixes: LengthField[];
}

const CODECS: readonly CodecName[] = ['lz4', 'zstd', 'none'];

/**
 * `count` base outputs made from `seed`: every flat type appears (in column
 * sets of 3-5 types plus a row id), each codec in turn, 1-4 partitions, a
 * few batches per partition (maxBatchRows 48), compression even of small
 * batches (compressionMinRows 0) so that compressed buffers abound. Every
 * third base (b % 3 == 1, so each codec has some) is written by the sort
 * writer, with small pages and blocks.
 */
export async function buildBases(dir: string, seed: number, count = 36): Promise<BaseOutput[]> {
  const rng = new Rng(seed);
  const order = TYPE_CASES.map((_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const bases: BaseOutput[] = [];
  let next = 0;
  for (let b = 0; b < count; b++) {
    const width = rng.int(3, 5);
    const typeIndexes: number[] = [];
    for (let k = 0; k < width; k++) typeIndexes.push(order[next++ % order.length]!);
    const codec = CODECS[b % CODECS.length]!;
    const numPartitions = rng.int(1, 4);
    const specs: ColumnSpec[] = [
      { name: 'id', type: sequenceColumn(0, 0).type, nullable: false },
      ...typeIndexes.map((t, i) => ({ name: `c${i}`, type: TYPE_CASES[t]!.make(), nullable: true })),
    ];
    const kind: WriterKind = Math.floor(b / 3) % 3 === 1 ? 'sort' : 'hash';
    // every third columnar base also has a nested (or dictionary) column
    if (b % 3 === 2 && kind === 'hash') specs.push({ name: 'nested', type: randomType(rng, 3, 0.9), nullable: true });
    const dictionaries: DictionaryContext = new Map();
    const schema = schemaOf(specs);
    const batches: RecordBatch[] = [];
    let rowId = 0;
    const batchCount = rng.int(1, 3);
    for (let k = 0; k < batchCount; k++) {
      const rows = rng.chance(0.15) ? rng.int(0, 3) : rng.int(4, 220);
      const nullRate = rng.pick([0, 0.1, 0.5, 1]);
      const children = specs.map((spec, i) => {
        if (i === 0) return sequenceColumn(rowId, rows);
        if (spec.name === 'nested') return buildAny(spec.type, rows, rng, { nullRate: Math.min(nullRate, 0.5), dictionaries });
        const validity: ValiditySpec = rng.chance(0.3) ? NO_BITMAP : { bitmap: true, nullRate };
        return buildColumn(spec.type, rows, validity, rng);
      });
      rowId += rows;
      batches.push(batchOf(schema, children as Data[], rows));
    }
    const prefix = join(dir, `base-${b}`);
    const writer = await createShuffleWriter(kind, {
      outputPrefix: prefix,
      numPartitions,
      partitioning: { kind: 'round-robin' },
      codec,
      mapId: b,
      maxBatchRows: 48,
      compressionMinRows: 0,
      pageBytes: 4096,
      blockBytes: 2048,
    });
    for (const batch of batches) await writer.write(batch);
    const result = await writer.finish();
    const paths = outputPaths(prefix);
    const data = new Uint8Array(await readFile(paths.data));
    const index = new Uint8Array(await readFile(paths.index));
    const checksum = new Uint8Array(await readFile(paths.checksum));
    const reader = await ShuffleReader.open(prefix);
    const rows: string[][] = [];
    try {
      for (let p = 0; p < numPartitions; p++) {
        const out: string[] = [];
        for await (const batch of reader.readPartition(p)) for (const r of rowsOf(batch)) out.push(r);
        rows.push(out);
      }
    } finally {
      await reader.close();
    }
    await Promise.all(Object.values(paths).map((p: string) => rm(p, { force: true })));
    const fields = kind === 'hash' ? locateLengthFields(data, result.partitionLengths) : locateRowLengthFields(data, result.partitionLengths, schema);
    bases.push({
      label: `base ${b}: ${kind} writer, ${codec}, P=${numPartitions}, ${[...typeIndexes.map((t) => TYPE_CASES[t]!.name), ...specs.filter((s) => s.name === 'nested').map((s) => String(s.type))].join(', ')}, rows ${rows.map((r) => r.length).join('/')}`,
      writer: kind,
      codec,
      types: typeIndexes.map((t) => TYPE_CASES[t]!.name),
      schemaTypes: schema.fields.map((f) => String(f.type)),
      numPartitions,
      data,
      index,
      checksum,
      rows,
      fields,
      compressedPrefixes: fields.filter((f) => (f.kind === 'compression-prefix' && readField(data, f) !== -1n) || (f.kind === 'block-raw-length' && isCompressedBlock(data, f))),
    });
  }
  return bases;
}

// ---------------------------------------------------------------------------------------------
// the IPC framing, walked by hand (docs/FORMAT.md) to find every length field

function readField(bytes: Uint8Array, f: LengthField): bigint {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return f.width === 4 ? BigInt(view.getInt32(f.at, true)) : view.getBigInt64(f.at, true);
}

/** The absolute position of field `i` of the flatbuffer table at `table`, or null when absent. */
function fbField(view: DataView, table: number, i: number): number | null {
  const vtable = table - view.getInt32(table, true);
  const vtableSize = view.getUint16(vtable, true);
  if (4 + 2 * i + 2 > vtableSize) return null;
  const rel = view.getUint16(vtable + 4 + 2 * i, true);
  return rel === 0 ? null : table + rel;
}

function fbDeref(view: DataView, at: number): number {
  return at + view.getUint32(at, true);
}

/** Every length field of every message of every partition (metadata sizes, body lengths, nodes, buffers, compression prefixes). */
export function locateLengthFields(data: Uint8Array, partitionLengths: readonly number[]): LengthField[] {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const fields: LengthField[] = [];
  let partitionStart = 0;
  partitionLengths.forEach((length, partition) => {
    const end = partitionStart + length;
    let pos = partitionStart;
    while (pos + 8 <= end) {
      const continued = view.getInt32(pos, true) === -1;
      const sizeAt = continued ? pos + 4 : pos;
      const metadataSize = view.getInt32(sizeAt, true);
      fields.push({ at: sizeAt, width: 4, kind: 'metadata-size', partition });
      if (metadataSize === 0) break;
      const meta = sizeAt + 4;
      const root = fbDeref(view, meta);
      const bodyAt = fbField(view, root, 3);
      const bodyLength = bodyAt === null ? 0 : Number(view.getBigInt64(bodyAt, true));
      if (bodyAt !== null) fields.push({ at: bodyAt, width: 8, kind: 'body-length', partition });
      const headerType = fbField(view, root, 1);
      const headerAt = fbField(view, root, 2);
      const bodyStart = meta + metadataSize;
      if (headerType !== null && view.getUint8(headerType) === 3 && headerAt !== null) {
        // RecordBatch: 0 length, 1 nodes, 2 buffers, 3 compression
        const rb = fbDeref(view, headerAt);
        const lengthAt = fbField(view, rb, 0);
        if (lengthAt !== null) fields.push({ at: lengthAt, width: 8, kind: 'batch-length', partition });
        const nodesAt = fbField(view, rb, 1);
        if (nodesAt !== null) {
          const vec = fbDeref(view, nodesAt);
          const n = view.getUint32(vec, true);
          for (let k = 0; k < n; k++) {
            fields.push({ at: vec + 4 + 16 * k, width: 8, kind: 'node-length', partition });
            fields.push({ at: vec + 4 + 16 * k + 8, width: 8, kind: 'node-null-count', partition });
          }
        }
        const compressed = fbField(view, rb, 3) !== null;
        const buffersAt = fbField(view, rb, 2);
        if (buffersAt !== null) {
          const vec = fbDeref(view, buffersAt);
          const n = view.getUint32(vec, true);
          for (let k = 0; k < n; k++) {
            const entry = vec + 4 + 16 * k;
            fields.push({ at: entry, width: 8, kind: 'buffer-offset', partition });
            fields.push({ at: entry + 8, width: 8, kind: 'buffer-length', partition });
            const bufLength = Number(view.getBigInt64(entry + 8, true));
            if (compressed && bufLength >= 8) {
              fields.push({ at: bodyStart + Number(view.getBigInt64(entry, true)), width: 8, kind: 'compression-prefix', partition });
            }
          }
        }
      }
      pos = bodyStart + bodyLength;
    }
    partitionStart = end;
  });
  return fields;
}

/** Whether the block whose raw-length field is `f` stores fewer bytes than that (is compressed). */
function isCompressedBlock(data: Uint8Array, f: LengthField): boolean {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  return view.getUint32(f.at + 4, true) < view.getUint32(f.at, true);
}

/**
 * Every length field of the sort writer's row partitions (docs/FORMAT.md): the
 * schema message's metadata size, each block's row count, raw and stored
 * lengths, and in uncompressed blocks each row's length and variable-length
 * slots.
 */
export function locateRowLengthFields(data: Uint8Array, partitionLengths: readonly number[], schema: Schema): LengthField[] {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const layout = rowLayoutOf(schema.fields);
  const fields: LengthField[] = [];
  let partitionStart = 0;
  partitionLengths.forEach((length, partition) => {
    const end = partitionStart + length;
    if (length > 0) {
      fields.push({ at: partitionStart + 12, width: 4, kind: 'metadata-size', partition });
      let pos = partitionStart + 16 + view.getInt32(partitionStart + 12, true);
      for (;;) {
        const rows = view.getUint32(pos, true);
        fields.push({ at: pos, width: 4, kind: 'block-rows', partition });
        if (rows === 0) break;
        fields.push({ at: pos + 4, width: 4, kind: 'block-raw-length', partition }, { at: pos + 8, width: 4, kind: 'block-stored-length', partition });
        const raw = view.getUint32(pos + 4, true);
        const stored = view.getUint32(pos + 8, true);
        if (stored === raw) {
          let row = pos + 12;
          for (let r = 0; r < rows; r++) {
            fields.push({ at: row, width: 4, kind: 'row-length', partition });
            for (const f of layout.variableFields) fields.push({ at: row + layout.fields[f]!.slot, width: 4, kind: 'row-value-length', partition });
            row += (4 + view.getUint32(row, true) + 3) & ~3;
          }
        }
        pos += 12 + stored;
      }
    }
    partitionStart = end;
  });
  return fields;
}

// ---------------------------------------------------------------------------------------------
// mutations

export type Mutation =
  | { kind: 'bit-flip'; pos: number; bit: number }
  | { kind: 'byte-set'; pos: number; value: number }
  | { kind: 'truncate-data'; keep: number }
  | { kind: 'truncate-index'; keep: number }
  | { kind: 'splice'; from: number; to: number; length: number }
  | { kind: 'length-field'; pick: number; value: number; random: number }
  | { kind: 'compression-prefix'; pick: number; value: number; random: number }
  | { kind: 'index-entry'; entry: number; value: number; random: number };

export interface FuzzCase {
  base: number;
  mutations: Mutation[];
}

const pos = fc.nat({ max: 0x7fffffff });
export const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('bit-flip' as const), pos, bit: fc.nat({ max: 7 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('byte-set' as const), pos, value: fc.constantFrom(0, 0xff, 0x7f, 0x80, 1) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('truncate-data' as const), keep: pos }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('truncate-index' as const), keep: pos }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('splice' as const), from: pos, to: pos, length: fc.oneof(fc.integer({ min: 1, max: 16 }), fc.integer({ min: 1, max: 600 })) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('length-field' as const), pick: pos, value: fc.nat({ max: 19 }), random: fc.integer() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('compression-prefix' as const), pick: pos, value: fc.nat({ max: 19 }), random: fc.integer() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('index-entry' as const), entry: pos, value: fc.nat({ max: 11 }), random: fc.integer() }) },
);

export function caseArb(baseCount: number): fc.Arbitrary<FuzzCase> {
  return fc.record({ base: fc.nat({ max: baseCount - 1 }), mutations: fc.array(mutationArb, { minLength: 1, maxLength: 3 }) });
}

/** The interesting values a length field is rewritten to (value index 0..19). */
function lengthValue(original: bigint, width: 4 | 8, value: number, random: number): bigint {
  const v = [
    0n, -1n, 1n, 7n, 8n, original - 1n, original + 1n, original - 8n, original + 8n, original * 2n, original / 2n,
    2n ** 31n - 1n, -(2n ** 31n), 2n ** 32n, 2n ** 40n, 2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n), BigInt(random), BigInt(random) * 4096n,
  ][value % 20]!;
  return width === 4 ? BigInt.asIntN(32, v) : BigInt.asIntN(64, v);
}

export interface MutatedOutput {
  data: Uint8Array;
  index: Uint8Array;
  checksum: Uint8Array;
  /** what was done, readable */
  applied: string[];
}

export function applyMutations(base: BaseOutput, mutations: readonly Mutation[]): MutatedOutput {
  let data = base.data.slice();
  let index = base.index.slice();
  const applied: string[] = [];
  for (const m of mutations) {
    switch (m.kind) {
      case 'bit-flip': {
        if (data.byteLength === 0) break;
        const at = m.pos % data.byteLength;
        data[at]! ^= 1 << m.bit;
        applied.push(`flip bit ${m.bit} of data byte ${at}`);
        break;
      }
      case 'byte-set': {
        if (data.byteLength === 0) break;
        const at = m.pos % data.byteLength;
        data[at] = m.value;
        applied.push(`set data byte ${at} to 0x${m.value.toString(16)}`);
        break;
      }
      case 'truncate-data': {
        const keep = m.keep % (data.byteLength + 1);
        data = data.slice(0, keep);
        applied.push(`truncate data to ${keep} bytes`);
        break;
      }
      case 'truncate-index': {
        const keep = m.keep % (index.byteLength + 1);
        index = index.slice(0, keep);
        applied.push(`truncate index to ${keep} bytes`);
        break;
      }
      case 'splice': {
        if (data.byteLength === 0) break;
        const from = m.from % data.byteLength;
        const to = m.to % data.byteLength;
        const length = Math.min(m.length, data.byteLength - from, data.byteLength - to);
        data.copyWithin(to, from, from + length);
        applied.push(`copy data [${from}, +${length}) over [${to}, +${length})`);
        break;
      }
      case 'length-field':
      case 'compression-prefix': {
        const pool = m.kind === 'length-field' ? base.fields : base.fields.filter((f) => f.kind === 'compression-prefix');
        if (pool.length === 0) break;
        const f = pool[m.pick % pool.length]!;
        if (f.at + f.width > data.byteLength) break;
        const original = readField(data, f);
        const v = lengthValue(original, f.width, m.value, m.random);
        const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
        if (f.width === 4) view.setInt32(f.at, Number(v), true);
        else view.setBigInt64(f.at, v, true);
        applied.push(`rewrite ${f.kind} (partition ${f.partition}, data byte ${f.at}, int${8 * f.width}) from ${original} to ${v}`);
        break;
      }
      case 'index-entry': {
        const entries = Math.floor(index.byteLength / 8);
        if (entries === 0) break;
        const e = m.entry % entries;
        const view = new DataView(index.buffer, index.byteOffset, index.byteLength);
        const original = view.getBigInt64(e * 8, false);
        const at = (k: number) => (k >= 0 && k < entries ? view.getBigInt64(k * 8, false) : original);
        const v = [
          0n, -1n, original + 1n, original - 1n, original + 8n, original - 8n, at(e - 1), at(e + 1),
          BigInt(data.byteLength), BigInt(data.byteLength) + 8n, 2n ** 53n + 1n, BigInt(m.random),
        ][m.value % 12]!;
        view.setBigInt64(e * 8, BigInt.asIntN(64, v), false);
        applied.push(`rewrite index entry ${e} from ${original} to ${BigInt.asIntN(64, v)}`);
        break;
      }
    }
  }
  return { data, index, checksum: base.checksum, applied };
}

// ---------------------------------------------------------------------------------------------
// reading a mutated output and judging the outcome

export type Mode = 'checksum' | 'no-checksum' | 'streamed-checksum' | 'streamed';

/** The mode each streamed mode must agree with: the same files, read whole. */
const WHOLE_MODE = { 'streamed-checksum': 'checksum', streamed: 'no-checksum' } as const;

/** What one read of one partition (or of the whole output) came to. */
export type Outcome =
  | { kind: 'identical' }
  | { kind: 'shuffle-error'; code: string; message: string }
  /** rows differ from the original ones without an error (a violation only with the checksum) */
  | { kind: 'differs'; detail: string }
  /** a batch that breaks Arrow's invariants was yielded without an error */
  | { kind: 'invalid-batch'; detail: string }
  /** anything but a ShuffleError escaped: always a violation */
  | { kind: 'foreign-error'; name: string; message: string; stack: string }
  | { kind: 'timeout'; ms: number }
  /** a streamed read came to something else than the same read of whole partitions: always a violation */
  | { kind: 'disagrees'; detail: string };

export interface ReadReport {
  mode: Mode;
  /** 'open', 'schema', 'partition p', or 'coalesced' */
  what: string;
  outcome: Outcome;
}

export interface CaseResult {
  reports: ReadReport[];
  violations: ReadReport[];
  applied: string[];
}

export function isViolation(r: ReadReport): boolean {
  const k = r.outcome.kind;
  if (k === 'foreign-error' || k === 'timeout' || k === 'disagrees') return true;
  return (r.mode === 'checksum' || r.mode === 'streamed-checksum') && (k === 'differs' || k === 'invalid-batch');
}

export function outcomeKey(r: ReadReport): string {
  const o = r.outcome;
  return `${r.mode} ${o.kind === 'shuffle-error' ? `error ${o.code}` : o.kind}`;
}

function classify(error: unknown): Outcome {
  if (error instanceof ShuffleError) return { kind: 'shuffle-error', code: error.code, message: error.message };
  const e = error instanceof Error ? error : new Error(String(error));
  return { kind: 'foreign-error', name: e.name, message: e.message, stack: e.stack ?? '' };
}

class Timeout extends Error {}

/**
 * `work`'s answer, or a Timeout when it takes longer than `ms`. The timer
 * cannot fire while the code under test loops synchronously, so an answer
 * (or an error) that comes late is a Timeout too: a corrupted count once kept
 * arrow-js busy for 20 s, and the read then returned the right rows.
 */
async function withTimeout<T>(ms: number, work: () => Promise<T>): Promise<T> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  let answer: { ok: true; value: T } | { ok: false; error: unknown };
  try {
    const value = await Promise.race([
      work(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Timeout(`no answer within ${ms} ms`)), ms);
      }),
    ]);
    answer = { ok: true, value };
  } catch (error) {
    answer = { ok: false, error };
  } finally {
    clearTimeout(timer);
  }
  const elapsed = Date.now() - started;
  const timedOut = !answer.ok && answer.error instanceof Timeout;
  if (elapsed > ms && !timedOut) throw new Timeout(`answered after ${elapsed} ms, over the ${ms} ms allowed`);
  if (!answer.ok) throw answer.error;
  return answer.value;
}

/** Structural problems of one column of a yielded batch, or null. */
function columnProblem(data: Data, rows: number): string | null {
  if (data.length !== rows) return `column length ${data.length}, batch ${rows}`;
  const type = data.type;
  // a union has no validity (Arrow V5); arrow-js's nullCount of one is the sum of its children's
  if (type.typeId === Type.Null || type.typeId === Type.Union) return null;
  const bitmap = data.nullBitmap as Uint8Array | null | undefined;
  const nullCount = data.nullCount;
  if (nullCount < 0 || nullCount > rows) return `null count ${nullCount} for ${rows} rows`;
  if (bitmap && bitmap.byteLength > 0) {
    if (bitmap.byteLength * 8 < data.offset + rows) return `validity bitmap of ${bitmap.byteLength} bytes for ${rows} rows`;
    let nulls = 0;
    for (let i = 0; i < rows; i++) if (((bitmap[(data.offset + i) >>> 3]! >>> ((data.offset + i) & 7)) & 1) === 0) nulls++;
    if (nulls !== nullCount) return `null count ${nullCount}, the bitmap has ${nulls}`;
  } else if (nullCount > 0) {
    return `null count ${nullCount} without a validity bitmap`;
  }
  const values = data.values as ArrayBufferView | undefined;
  if (type.typeId === Type.Bool) {
    if (!values || values.byteLength * 8 < data.offset + rows) return `bool values of ${values?.byteLength ?? 0} bytes for ${rows} rows`;
    return null;
  }
  const width = fixedByteWidth(type);
  if (width !== null) {
    if (!values || values.byteLength < rows * width) return `values of ${values?.byteLength ?? 0} bytes for ${rows} rows of ${width} bytes`;
    return null;
  }
  if (isView(type)) {
    if (!values || values.byteLength < rows * 16) return `views of ${values?.byteLength ?? 0} bytes for ${rows} rows`;
    const view = new DataView(values.buffer, values.byteOffset, values.byteLength);
    for (let i = 0; i < rows; i++) {
      if (!data.getValid(i)) continue;
      const length = view.getInt32(i * 16, true);
      if (length < 0) return `row ${i}'s view has length ${length}`;
      if (length <= 12) continue;
      const buffer = data.variadicBuffers[view.getInt32(i * 16 + 8, true)];
      const at = view.getInt32(i * 16 + 12, true);
      if (buffer === undefined || at < 0 || at + length > buffer.byteLength) return `row ${i}'s view points outside its ${data.variadicBuffers.length} variadic buffers`;
    }
    return null;
  }
  if (isVariableWidth(type)) {
    const offsets = data.valueOffsets as unknown as ArrayLike<number | bigint> | undefined;
    if (!offsets || offsets.length < rows + 1) return `${offsets?.length ?? 0} offsets for ${rows} rows`;
    const size = values?.byteLength ?? 0;
    let previous = Number(offsets[0]!);
    if (previous < 0 || previous > size) return `first offset ${previous} outside the ${size}-byte data`;
    for (let i = 1; i <= rows; i++) {
      const o = Number(offsets[i]!);
      if (o < previous || o > size) return `offset ${i} is ${o} after ${previous} (data ${size} bytes${isLargeOffsets(type) ? ', int64' : ''})`;
      previous = o;
    }
  }
  return null;
}

function batchProblem(batch: RecordBatch, fieldCount: number): string | null {
  const children = batch.data.children;
  if (children.length !== fieldCount) return `${children.length} columns, the schema has ${fieldCount}`;
  for (let c = 0; c < children.length; c++) {
    const problem = columnProblem(children[c]!, batch.numRows);
    if (problem !== null) return `column ${c} (${String(children[c]!.type)}): ${problem}`;
  }
  return null;
}

/** Reads one batch stream to the end, returning its rows or the outcome that stopped it. */
async function drain(batches: AsyncIterable<RecordBatch>, expected: readonly string[], fieldCount: number, schemaTypes?: readonly string[]): Promise<Outcome> {
  const rows: string[] = [];
  try {
    for await (const batch of batches) {
      // a batch far longer than the partition is wrong already: do not materialize its rows
      if (rows.length + batch.numRows > expected.length) {
        return { kind: 'differs', detail: `a batch of ${batch.numRows} rows after ${rows.length}, the partition has ${expected.length}` };
      }
      const types = batch.schema.fields.map((f) => String(f.type));
      if (schemaTypes !== undefined && types.join() !== schemaTypes.join()) {
        return { kind: 'differs', detail: `the batch's schema is (${types.join(', ')}), not (${schemaTypes.join(', ')})` };
      }
      const problem = batchProblem(batch, fieldCount);
      if (problem !== null) return { kind: 'invalid-batch', detail: problem };
      for (const r of rowsOf(batch)) rows.push(r);
    }
  } catch (error) {
    return classify(error);
  }
  if (rows.length !== expected.length) return { kind: 'differs', detail: `${rows.length} rows, expected ${expected.length}` };
  for (let i = 0; i < rows.length; i++) {
    if (rows[i] !== expected[i]) return { kind: 'differs', detail: `row ${i} differs: ${rows[i]!.slice(0, 120)} vs ${expected[i]!.slice(0, 120)}` };
  }
  return { kind: 'identical' };
}

async function readAll(reader: ShuffleReader, base: BaseOutput, mode: Mode, reports: ReadReport[], timeoutMs: number): Promise<void> {
  const fieldCount = base.schemaTypes.length;
  const guarded = async (what: string, work: () => Promise<Outcome>) => {
    let outcome: Outcome;
    const started = Date.now();
    try {
      outcome = await withTimeout(timeoutMs, work);
    } catch (error) {
      outcome = error instanceof Timeout ? { kind: 'timeout', ms: Date.now() - started } : classify(error);
    }
    reports.push({ mode, what, outcome });
  };
  await guarded('schema', async () => {
    await reader.schema();
    return { kind: 'identical' };
  });
  for (let p = 0; p < base.numPartitions; p++) {
    if (p >= reader.numPartitions) {
      reports.push({ mode, what: `partition ${p}`, outcome: base.rows[p]!.length === 0 ? { kind: 'identical' } : { kind: 'differs', detail: `partition ${p} is missing: the index has ${reader.numPartitions} partitions` } });
      continue;
    }
    await guarded(`partition ${p}`, () => drain(reader.readPartition(p), base.rows[p]!, fieldCount, base.schemaTypes));
  }
  if ((mode === 'no-checksum' || mode === 'streamed') && reader.numPartitions === base.numPartitions) {
    // the coalescer on whatever the parser accepted
    await guarded('coalesced', () => drain(reader.readPartitions(0, reader.numPartitions, { coalesceRows: 37 }), base.rows.flat(), fieldCount, base.schemaTypes));
  }
}

/** Writes the mutated files under `dir`, reads them in every mode, and judges every read. */
export async function runCase(dir: string, base: BaseOutput, mutations: readonly Mutation[], timeoutMs = 5000): Promise<CaseResult> {
  const mutated = applyMutations(base, mutations);
  const prefix = join(dir, 'case');
  const paths = outputPaths(prefix);
  await Promise.all([writeFile(paths.data, mutated.data), writeFile(paths.index, mutated.index), writeFile(paths.checksum, mutated.checksum)]);
  const reports: ReadReport[] = [];
  for (const wholePartitionBytes of [undefined, 0]) {
    const streamed = wholePartitionBytes === 0;
    // with the checksum file
    await readMode(streamed ? 'streamed-checksum' : 'checksum', async () => ({ reader: await ShuffleReader.open(prefix, { wholePartitionBytes }), sources: [] }));
    // without it: the IPC parser meets the corrupt bytes
    await readMode(streamed ? 'streamed' : 'no-checksum', async () => {
      const sources: LocalFileSource[] = [];
      try {
        const data = await LocalFileSource.open(paths.data);
        sources.push(data);
        const index = await LocalFileSource.open(paths.index);
        sources.push(index);
        return { reader: await ShuffleReader.fromSources({ data, index }, { wholePartitionBytes }), sources };
      } catch (error) {
        await Promise.all(sources.map((s) => s.close()));
        throw error;
      }
    });
  }
  const disagreements = reports.flatMap((r): ReadReport[] => {
    if (r.mode !== 'streamed' && r.mode !== 'streamed-checksum') return [];
    const whole = reports.find((w) => w.mode === WHOLE_MODE[r.mode as keyof typeof WHOLE_MODE] && w.what === r.what);
    const [mine, theirs] = [JSON.stringify(comparable(r.outcome)), JSON.stringify(whole === undefined ? null : comparable(whole.outcome))];
    return mine === theirs ? [] : [{ mode: r.mode, what: r.what, outcome: { kind: 'disagrees', detail: `streamed: ${mine}; whole: ${theirs}` } }];
  });
  return { reports, violations: [...reports.filter(isViolation), ...disagreements], applied: mutated.applied };

  async function readMode(mode: Mode, open: () => Promise<{ reader: ShuffleReader; sources: LocalFileSource[] }>): Promise<void> {
    let opened: { reader: ShuffleReader; sources: LocalFileSource[] } | null = null;
    try {
      opened = await withTimeout(timeoutMs, open);
    } catch (error) {
      reports.push({ mode, what: 'open', outcome: error instanceof Timeout ? { kind: 'timeout', ms: timeoutMs } : classify(error) });
    }
    if (opened === null) return;
    try {
      await readAll(opened.reader, base, mode, reports, timeoutMs);
    } finally {
      await (opened.sources.length > 0 ? Promise.all(opened.sources.map((s) => s.close())) : opened.reader.close());
    }
  }
}

/** An outcome as two reads of the same bytes must agree on it (a stack, a timing may differ). */
function comparable(outcome: Outcome): unknown {
  if (outcome.kind === 'foreign-error') return { kind: outcome.kind, name: outcome.name, message: outcome.message };
  if (outcome.kind === 'timeout') return { kind: outcome.kind };
  return outcome;
}

/** A readable account of a violation. */
export function describeViolation(r: ReadReport): string {
  const o = r.outcome;
  switch (o.kind) {
    case 'foreign-error':
      return `[${r.mode}] ${r.what}: ${o.name}: ${o.message}\n${o.stack}`;
    case 'timeout':
      return `[${r.mode}] ${r.what}: no answer within ${o.ms} ms`;
    case 'differs':
    case 'invalid-batch':
    case 'disagrees':
      return `[${r.mode}] ${r.what}: ${o.kind}: ${o.detail}`;
    default:
      return `[${r.mode}] ${r.what}: ${o.kind}`;
  }
}

/** Tallies of outcome keys. */
export class Tally {
  readonly counts = new Map<string, number>();
  add(key: string, n = 1): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + n);
  }
  merge(other: Iterable<[string, number]>): void {
    for (const [k, n] of other) this.add(k, n);
  }
  format(): string {
    return [...this.counts.entries()].sort((a, b) => a[0].localeCompare(b[0])).map(([k, n]) => `  ${k.padEnd(48)} ${n}`).join('\n');
  }
}

/** The seed of a run: FUZZ_SEED, else the time. */
export function seedFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env['FUZZ_SEED'];
  if (raw !== undefined && raw !== '') {
    const n = Number(raw);
    if (!Number.isInteger(n)) throw new Error(`FUZZ_SEED must be an integer, got ${raw}`);
    return n | 0;
  }
  return Date.now() & 0x7fffffff;
}
