import type { Schema } from 'apache-arrow';
import type { ErrorLocation } from '../errors.js';
import { describeType } from '../writer/same-schema.js';
import { outputPaths } from '../format/output-files.js';
import { DEFAULT_WHOLE_PARTITION_BYTES, ShuffleReader } from '../reader/shuffle-reader.js';
import { isRowPartition } from '../sort-writer/row-format.js';
import { summarizeRowPartitionAt } from '../sort-writer/row-reader.js';
import { summarizeIpcStreamAt, type ReadBytes } from '../format/ipc-reader.js';
import { flag, parseCommandArgs, requiredPositional } from './args.js';
import { bytes, count, describeSchema, EXIT_OK, plural, throwIfInterrupted, writeJson, writeLine, type CliContext } from './context.js';

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/**
 * What the headers of one partition say (bodies are not decoded): of an IPC
 * stream (the hash writer's) its messages, of a row partition (the sort
 * writer's) its blocks, which are counted as batches (the reader yields one
 * batch per block).
 */
interface StreamSummary {
  writer: 'hash' | 'sort' | null;
  schema: Schema | null;
  codec: string | null;
  batches: number;
  rows: number;
}

export async function inspectCommand(args: string[], ctx: CliContext): Promise<number> {
  const parsed = parseCommandArgs('inspect', args, OPTIONS, 1);
  const prefix = requiredPositional(parsed, 0, 'the shuffle output <prefix>', 'inspect');
  const paths = outputPaths(prefix);
  const reader = await ShuffleReader.open(prefix);
  const summaries: StreamSummary[] = [];
  try {
    for (let p = 0; p < reader.numPartitions; p++) {
      throwIfInterrupted(ctx.signal);
      const location = { file: paths.data, partition: p, offset: reader.offsets[p]! };
      summaries.push(await summarize(await partitionReads(reader, p), reader.partitionLength(p), location));
    }
  } finally {
    await reader.close();
  }
  const first = summaries.find((s) => s.schema !== null);
  const schema = first?.schema ?? null;
  const codec = summaries.find((s) => s.codec !== null)?.codec ?? null;
  const writers = [...new Set(summaries.map((s) => s.writer).filter((w) => w !== null))];
  const writer = writers.length === 0 ? null : writers.length === 1 ? writers[0]! : 'mixed';
  const lengths = summaries.map((_, p) => reader.partitionLength(p));
  const total = (pick: (s: StreamSummary) => number) => summaries.reduce((sum, s) => sum + pick(s), 0);

  if (flag(parsed, 'json')) {
    writeJson(ctx.stdout, {
      prefix,
      paths,
      writer,
      schema: schema?.fields.map((f) => ({ name: f.name, type: describeType(f.type), nullable: f.nullable })) ?? null,
      codec,
      partitions: reader.numPartitions,
      bytes: lengths.reduce((a, b) => a + b, 0),
      batches: total((s) => s.batches),
      rows: total((s) => s.rows),
      partitionLengths: lengths,
      partitionBatches: summaries.map((s) => s.batches),
      partitionRows: summaries.map((s) => s.rows),
      checksums: reader.checksums,
    });
    return EXIT_OK;
  }
  // (empty: no rows; another writer's stream may hold batches of none)
  const empty = summaries.filter((s) => s.rows === 0).length;
  writeLine(ctx.stdout, `shuffle output  ${prefix} (.data, .index, .checksum.CRC32C)`);
  writeLine(ctx.stdout, `writer          ${writer === null ? '(none: every partition is empty)' : writer === 'hash' ? 'hash (columnar: Arrow IPC streams)' : writer === 'sort' ? 'sort (row blocks)' : 'mixed (hash and sort partitions)'}`);
  writeLine(ctx.stdout, `schema          ${schema === null ? '(none: every partition is empty)' : describeSchema(schema)}`);
  writeLine(ctx.stdout, `codec           ${codec ?? '(no record batches)'}`);
  writeLine(ctx.stdout, `partitions      ${count(reader.numPartitions)} (${count(empty)} empty), checksums verified`);
  writeLine(ctx.stdout, `total           ${bytes(lengths.reduce((a, b) => a + b, 0))}, ${plural(total((s) => s.batches), 'batch', 'batches')}, ${plural(total((s) => s.rows), 'row', 'rows')}`);
  writeLine(ctx.stdout);
  const rows = summaries.map((s, p) => [String(p), count(lengths[p]!), count(s.batches), count(s.rows)]);
  const header = ['partition', 'bytes', 'batches', 'rows'];
  const widths = header.map((h, c) => rows.reduce((w, r) => Math.max(w, r[c]!.length), h.length));
  for (const row of [header, ...rows]) writeLine(ctx.stdout, row.map((cell, c) => cell.padStart(widths[c]!)).join('  '));
  return EXIT_OK;
}

/**
 * Reads of partition p's bytes, verified first: a partition the reader would
 * hold whole is read whole, one longer is verified over chunked reads and
 * then read a header at a time (memory stays bounded; past 4 GiB one
 * buffer could not hold it).
 */
async function partitionReads(reader: ShuffleReader, p: number): Promise<ReadBytes> {
  if (reader.partitionLength(p) > DEFAULT_WHOLE_PARTITION_BYTES) {
    await reader.verifyPartition(p);
    return (offset, length) => reader.readPartitionRange(p, offset, length);
  }
  const bytes = await reader.partitionBytes(p);
  return async (offset, length) => bytes.subarray(offset, offset + length);
}

/** Walks the headers of one partition of `length` bytes (messages or row blocks); an empty partition has none. */
async function summarize(read: ReadBytes, length: number, where: ErrorLocation): Promise<StreamSummary> {
  if (length === 0) return { writer: null, schema: null, codec: null, batches: 0, rows: 0 };
  if (isRowPartition(await read(0, Math.min(4, length)))) {
    const rows = await summarizeRowPartitionAt(read, 0, length, where);
    return { writer: 'sort', schema: rows.schema, codec: rows.codec, batches: rows.blocks, rows: rows.rows };
  }
  return { writer: 'hash', ...(await summarizeIpcStreamAt(read, 0, length, where)) };
}
