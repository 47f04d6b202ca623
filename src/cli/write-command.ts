import { Table, type RecordBatch } from 'apache-arrow';
import { assertDirectory } from '../format/output-files.js';
import { CODEC_NAMES, type CodecName } from '../format/codec.js';
import type { DictionaryUpdates } from '../writer/dictionary-tracker.js';
import { MemoryPool } from '../memory/memory-pool.js';
import { defaultMemoryLimit } from '../memory/system-memory.js';
import { MAX_STAGING_BYTES } from '../writer/input-staging.js';
import { AutoShuffleWriter } from '../auto-writer.js';
import { createShuffleWriter, WRITER_CHOICES, type WriterChoice, type WriterKind } from '../writer-kind.js';
import { MAX_NUM_PARTITIONS, UNBOUNDED_MEM_LIMIT, type ShuffleWriteResult } from '../writer/writer-options.js';
import type { Partitioning } from '../writer/partitioner.js';
import type { RangeKey } from '../writer/range-partitioner.js';
import {
  byteSizeOption,
  choiceOption,
  flag,
  integerOption,
  parseCommandArgs,
  pathOption,
  requiredOption,
  requiredPositional,
  stringOption,
  UsageError,
} from './args.js';
import { abortOnSignal, bytes, count, EXIT_OK, plural, rate, roundMs, seconds, throwIfInterrupted, writeJson, writeLine, type CliContext } from './context.js';
import { openArrowInput, type InputFormat } from './input.js';
import { createProgress } from './progress.js';

const OPTIONS = {
  partitions: { type: 'string', short: 'p' },
  output: { type: 'string', short: 'o' },
  key: { type: 'string', short: 'k', multiple: true },
  partitioning: { type: 'string' },
  bounds: { type: 'string' },
  codec: { type: 'string', short: 'c' },
  'dictionary-updates': { type: 'string' },
  writer: { type: 'string', short: 'w' },
  'map-id': { type: 'string' },
  'memory-limit': { type: 'string' },
  'spill-dir': { type: 'string' },
  overwrite: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const PARTITIONING_KINDS = ['hash', 'range', 'round-robin', 'single'] as const;
const DICTIONARY_UPDATES = ['delta', 'replacement'] as const;

/** The partitioning as the command line gives it: a range partitioning's bounds are a file until they are read. */
type CliPartitioning = Exclude<Partitioning, { kind: 'range' }> | { kind: 'range'; keys: RangeKey[]; bounds: string };

interface WriteArgs {
  input: string;
  numPartitions: number;
  partitioning: CliPartitioning;
  outputPrefix: string;
  codec: CodecName;
  dictionaryUpdates: DictionaryUpdates;
  writer: WriterChoice;
  mapId: number;
  /** bytes the writer may hold, as given; undefined: half the system memory (defaultMemoryLimit) */
  memoryLimit: number | undefined;
  spillDir: string | undefined;
  overwrite: boolean;
  json: boolean;
}

function parse(args: string[]): WriteArgs {
  const parsed = parseCommandArgs('write', args, OPTIONS, 1);
  const input = requiredPositional(parsed, 0, 'the <input> Arrow file', 'write');
  const numPartitions = integerOption(requiredOption(parsed, 'partitions', 'write'), 'partitions', 'write', 1, MAX_NUM_PARTITIONS)!;
  const outputPrefix = requiredOption(parsed, 'output', 'write');
  const keys = ((parsed.values.key ?? []) as string[]).flatMap((k) => k.split(',')).map((k) => k.trim());
  if (keys.some((k) => k.length === 0)) throw new UsageError('--key has an empty column name', 'write');
  const kind = choiceOption(stringOption(parsed, 'partitioning'), 'partitioning', PARTITIONING_KINDS, 'write') ?? (keys.length > 0 ? 'hash' : undefined);
  if (kind === undefined) throw new UsageError('give --key COL for hash partitioning, or --partitioning range|round-robin|single', 'write');
  if ((kind === 'hash' || kind === 'range') && keys.length === 0) throw new UsageError(`${kind} partitioning needs --key COL[,COL...]`, 'write');
  if (kind !== 'hash' && kind !== 'range' && keys.length > 0) throw new UsageError(`--key does not apply to ${kind} partitioning`, 'write');
  const bounds = pathOption(parsed, 'bounds', 'write');
  if (kind === 'range' && bounds === undefined) throw new UsageError('range partitioning needs --bounds FILE (an Arrow file or stream of the key columns)', 'write');
  if (kind !== 'range' && bounds !== undefined) throw new UsageError(`--bounds does not apply to ${kind} partitioning`, 'write');
  return {
    input,
    numPartitions,
    partitioning: kind === 'range' ? { kind, keys: keys.map(rangeKeyOf), bounds: bounds! } : kind === 'hash' ? { kind, keys } : { kind },
    outputPrefix,
    codec: choiceOption(stringOption(parsed, 'codec'), 'codec', CODEC_NAMES, 'write') ?? 'lz4',
    dictionaryUpdates: choiceOption(stringOption(parsed, 'dictionary-updates'), 'dictionary-updates', DICTIONARY_UPDATES, 'write') ?? 'delta',
    writer: choiceOption(stringOption(parsed, 'writer'), 'writer', WRITER_CHOICES, 'write') ?? 'hash',
    mapId: integerOption(stringOption(parsed, 'map-id'), 'map-id', 'write', 0) ?? 0,
    memoryLimit: byteSizeOption(stringOption(parsed, 'memory-limit'), 'memory-limit', 'write'),
    spillDir: spillDirOption(stringOption(parsed, 'spill-dir')),
    overwrite: flag(parsed, 'overwrite'),
    json: flag(parsed, 'json'),
  };
}

/** `COL`, `COL:desc`, `COL:asc:nulls-last`: a range key and its order (Spark's defaults: ascending, nulls first when ascending). */
function rangeKeyOf(spec: string): RangeKey {
  const [column, ...modifiers] = spec.split(':').map((piece) => piece.trim()); // ' k : desc ' as the keys are trimmed
  const key: { column: string; descending?: boolean; nullsFirst?: boolean } = { column: column! };
  for (const modifier of modifiers) {
    if (modifier === 'asc' || modifier === 'desc') key.descending = modifier === 'desc';
    else if (modifier === 'nulls-first' || modifier === 'nulls-last') key.nullsFirst = modifier === 'nulls-first';
    else throw new UsageError(`--key ${spec}: a range key's order is asc, desc, nulls-first or nulls-last, got '${modifier}'`, 'write');
  }
  return key;
}

/** The writer's partitioning: a range partitioning's bounds read from their Arrow file (every batch of it). */
async function partitioningOf(partitioning: CliPartitioning): Promise<Partitioning> {
  if (partitioning.kind !== 'range') return partitioning;
  const input = await openArrowInput(partitioning.bounds, 'bounds file');
  try {
    const batches: RecordBatch[] = [];
    for await (const batch of input.batches()) batches.push(batch);
    return { ...partitioning, bounds: batches.length === 0 ? new Table(input.schema) : new Table(batches) };
  } finally {
    await input.close();
  }
}

export async function writeCommand(args: string[], ctx: CliContext): Promise<number> {
  const options = parse(args);
  const started = performance.now();
  // the writer checks it too, but only once the input is open and the bounds are read: a mistyped --spill-dir fails first
  if (options.spillDir !== undefined) await assertDirectory(options.spillDir, 'spill');
  const partitioning = await partitioningOf(options.partitioning);
  const input = await openArrowInput(options.input);
  const memoryLimit = options.memoryLimit ?? defaultMemoryLimit(ctx.systemMemory);
  const progress = createProgress(ctx.stderr, 'write');
  let written: { result: ShuffleWriteResult; used: WriterKind };
  try {
    const writer = await createShuffleWriter(options.writer, {
      numPartitions: options.numPartitions,
      partitioning,
      outputPrefix: options.outputPrefix,
      codec: options.codec,
      dictionaryUpdates: options.dictionaryUpdates,
      mapId: options.mapId,
      memoryPool: new MemoryPool(memoryLimit),
      // the default limit is a safety net, not a budget to fill: buffers sized and small batches staged as without
      // a limit (sized for 1 GiB, not half the RAM; staging off made narrow rows at P = 4000 write 1.7x slower)
      memLimit: options.memoryLimit === undefined ? Math.min(UNBOUNDED_MEM_LIMIT, memoryLimit) : undefined,
      stagingBytes: options.memoryLimit === undefined ? MAX_STAGING_BYTES : undefined,
      spillDir: options.spillDir,
      overwrite: options.overwrite,
      schema: input.schema, // refuses unknown keys and unsupported types before any batch is read
    });
    written = await abortOnSignal(writer, ctx.signal, async () => {
      let rows = 0;
      let batches = 0;
      for await (const batch of input.batches()) {
        throwIfInterrupted(ctx.signal);
        await writer.write(batch);
        rows += batch.numRows;
        batches++;
        const fraction = input.totalBatches ? batches / input.totalBatches : input.position / input.size;
        progress.update(fraction, `${plural(rows, 'row', 'rows')}, ${plural(batches, 'batch', 'batches')}`);
      }
      throwIfInterrupted(ctx.signal);
      progress.update(null, `${count(rows)} rows: writing ${count(options.numPartitions)} partitions`, true);
      const result = await writer.finish();
      return { result, used: writer instanceof AutoShuffleWriter ? writer.kind : (options.writer as WriterKind) };
    });
  } finally {
    progress.done();
    await input.close();
  }
  report(ctx, options, written.used, memoryLimit, input.format, written.result, performance.now() - started);
  return EXIT_OK;
}

function report(ctx: CliContext, options: WriteArgs, used: WriterKind, memoryLimit: number, format: InputFormat, result: ShuffleWriteResult, elapsedMs: number): void {
  if (options.json) {
    writeJson(ctx.stdout, {
      input: options.input,
      inputFormat: format,
      rows: result.rows,
      batches: result.batches,
      partitions: result.numPartitions,
      partitioning: options.partitioning,
      codec: options.codec,
      writer: used,
      bytesWritten: result.bytesWritten,
      output: result.paths,
      partitionLengths: result.partitionLengths,
      partitionRows: result.partitionRows,
      partitionBatches: result.partitionBatches,
      checksums: result.checksums,
      memoryLimit,
      spills: result.spills,
      spilledBytes: result.spilledBytes,
      peakMemoryBytes: result.peakMemoryBytes,
      elapsedMs: roundMs(elapsedMs),
    });
    return;
  }
  const nonEmpty = result.partitionRows.filter((r) => r > 0);
  const min = nonEmpty.reduce((a, b) => Math.min(a, b), Infinity);
  const max = nonEmpty.reduce((a, b) => Math.max(a, b), 0);
  const { partitioning } = options;
  const how =
    partitioning.kind === 'hash'
      ? `hash(${partitioning.keys.join(', ')})`
      : partitioning.kind === 'range'
        ? `range(${partitioning.keys.map((k) => k.column + (k.descending ? ' desc' : '')).join(', ')}) with the bounds of ${partitioning.bounds}`
        : partitioning.kind;
  writeLine(ctx.stdout, `wrote ${count(result.rows)} rows (${plural(result.batches, 'input batch', 'input batches')}, Arrow ${format}) into ${plural(result.numPartitions, 'partition', 'partitions')} by ${how}`);
  writeLine(ctx.stdout, `  ${result.paths.data}  ${bytes(result.bytesWritten)} (${options.codec}, ${used === 'hash' ? 'columnar hash writer' : 'sort writer: rows'}${options.writer === 'auto' ? ', chosen by auto' : ''})`);
  writeLine(ctx.stdout, `  ${result.paths.index}`);
  writeLine(ctx.stdout, `  ${result.paths.checksum}`);
  writeLine(
    ctx.stdout,
    `  ${plural(nonEmpty.length, 'non-empty partition', 'non-empty partitions')}` +
      (nonEmpty.length > 0 ? `, ${count(min)} to ${count(max)} rows each` : ''),
  );
  if (result.spills > 0 || options.memoryLimit !== undefined) {
    const limit = ` (limit ${bytes(memoryLimit)}${options.memoryLimit === undefined ? ', half the system memory' : ''})`;
    const spills = result.spills > 0 ? `${plural(result.spills, 'spill', 'spills')}, ${bytes(result.spilledBytes)} spilled to disk` : 'no spills';
    writeLine(ctx.stdout, `  ${spills}; peak memory ${bytes(result.peakMemoryBytes)}${limit}`);
  }
  writeLine(ctx.stdout, `  ${seconds(elapsedMs)}, ${rate(result.rows, elapsedMs)}`);
}

function spillDirOption(text: string | undefined): string | undefined {
  if (text !== undefined && text.length === 0) throw new UsageError('--spill-dir is empty', 'write');
  return text;
}

