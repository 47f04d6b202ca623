import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ioError, ShuffleError } from '../errors.js';
import { CODEC_NAMES, type CodecName } from '../format/codec.js';
import { ShuffleReader } from '../reader/shuffle-reader.js';
import { MemoryPool } from '../memory/memory-pool.js';
import { createShuffleWriter, WRITER_KINDS, type WriterKind } from '../writer-kind.js';
import { MAX_NUM_PARTITIONS, type ShuffleWriteResult } from '../writer/writer-options.js';
import { byteSizeOption, choiceOption, integerOption, parseCommandArgs, pathOption, stringOption } from './args.js';
import { abortOnSignal, bytes, count, EXIT_OK, plural, rate, seconds, throwIfInterrupted, writeLine, type CliContext } from './context.js';
import { batchBytes, NARROW_SCHEMA, narrowBatch } from './demo-data.js';
import { ShuffleVerifier } from './demo-verify.js';
import { createProgress, type Progress } from './progress.js';

const OPTIONS = {
  rows: { type: 'string', short: 'n' },
  partitions: { type: 'string', short: 'p' },
  dir: { type: 'string', short: 'd' },
  codec: { type: 'string', short: 'c' },
  writer: { type: 'string', short: 'w' },
  'memory-limit': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const BATCH_ROWS = 8192;
const KEY = 'key';

interface DemoArgs {
  rows: number;
  numPartitions: number;
  dir: string | undefined;
  codec: CodecName;
  writer: WriterKind;
  memoryLimit: number | undefined;
}

interface Timings {
  inputBytes: number;
  writeMs: number;
  readMs: number;
}

export async function demoCommand(args: string[], ctx: CliContext): Promise<number> {
  const parsed = parseCommandArgs('demo', args, OPTIONS, 0);
  const options: DemoArgs = {
    rows: integerOption(stringOption(parsed, 'rows'), 'rows', 'demo', 1) ?? 1_000_000,
    numPartitions: integerOption(stringOption(parsed, 'partitions'), 'partitions', 'demo', 1, MAX_NUM_PARTITIONS) ?? 200,
    dir: pathOption(parsed, 'dir', 'demo'),
    codec: choiceOption(stringOption(parsed, 'codec'), 'codec', CODEC_NAMES, 'demo') ?? 'lz4',
    writer: choiceOption(stringOption(parsed, 'writer'), 'writer', WRITER_KINDS, 'demo') ?? 'hash',
    memoryLimit: byteSizeOption(stringOption(parsed, 'memory-limit'), 'memory-limit', 'demo'),
  };
  const dir = await demoDirectory(options.dir);
  const progress = createProgress(ctx.stderr, 'demo');
  try {
    const prefix = join(dir, 'demo');
    const verifier = new ShuffleVerifier(NARROW_SCHEMA, KEY, options.numPartitions);
    const timings: Timings = { inputBytes: 0, writeMs: 0, readMs: 0 };
    const result = await generateAndWrite(options, prefix, verifier, timings, progress, ctx.signal);
    await readBack(result, prefix, verifier, timings, progress, ctx.signal);
    progress.done();
    const problems = verifier.problems(result.partitionRows);
    summarize(ctx, options, result, timings, problems);
    if (options.dir !== undefined) writeLine(ctx.stdout, `output kept: ${prefix}.data, .index, .checksum.CRC32C`);
    if (problems.length > 0) throw new ShuffleError('CS_CORRUPT_DATA', `demo verification failed: ${problems.join('; ')}`);
    return EXIT_OK;
  } finally {
    progress.done();
    if (options.dir === undefined) await rm(dir, { recursive: true, force: true });
  }
}

/** `--dir`, created if needed, or a new temporary directory. */
async function demoDirectory(given: string | undefined): Promise<string> {
  if (given === undefined) {
    const under = join(tmpdir(), 'columnar-shuffle-demo-');
    return mkdtemp(under).catch((cause: unknown) => {
      throw ioError('create a temporary directory', under, cause);
    });
  }
  await mkdir(given, { recursive: true }).catch((cause: unknown) => {
    throw ioError('create the --dir directory', given, cause);
  });
  return given;
}

async function generateAndWrite(
  options: DemoArgs,
  prefix: string,
  verifier: ShuffleVerifier,
  timings: Timings,
  progress: Progress,
  signal: AbortSignal,
): Promise<ShuffleWriteResult> {
  let started = performance.now();
  const writer = await createShuffleWriter(options.writer, {
    numPartitions: options.numPartitions,
    partitioning: { kind: 'hash', keys: [KEY] },
    outputPrefix: prefix,
    overwrite: true, // --dir may hold an earlier demo's output
    codec: options.codec,
    schema: NARROW_SCHEMA,
    memoryPool: options.memoryLimit === undefined ? undefined : new MemoryPool(options.memoryLimit),
  });
  timings.writeMs += performance.now() - started;
  return abortOnSignal(writer, signal, async () => {
    for (let done = 0, seed = 1; done < options.rows; seed++) {
      throwIfInterrupted(signal);
      const batch = narrowBatch(Math.min(BATCH_ROWS, options.rows - done), seed);
      verifier.addInput(batch);
      timings.inputBytes += batchBytes(batch);
      started = performance.now();
      await writer.write(batch); // only the writer's calls are timed, not generating or fingerprinting
      timings.writeMs += performance.now() - started;
      done += batch.numRows;
      progress.update(done / options.rows, `generate and write: ${count(done)} of ${count(options.rows)} rows`);
    }
    progress.update(null, `write: finishing ${count(options.numPartitions)} partitions`, true);
    started = performance.now();
    const result = await writer.finish();
    timings.writeMs += performance.now() - started;
    return result;
  });
}

async function readBack(
  result: ShuffleWriteResult,
  prefix: string,
  verifier: ShuffleVerifier,
  timings: Timings,
  progress: Progress,
  signal: AbortSignal,
): Promise<void> {
  let started = performance.now();
  const reader = await ShuffleReader.open(prefix);
  timings.readMs += performance.now() - started;
  try {
    for (let p = 0; p < reader.numPartitions; p++) {
      throwIfInterrupted(signal);
      const batches = reader.readPartition(p);
      for (;;) {
        started = performance.now();
        const next = await batches.next(); // only reading is timed, not verifying
        timings.readMs += performance.now() - started;
        if (next.done) break;
        verifier.addOutput(p, next.value);
      }
      progress.update((p + 1) / reader.numPartitions, `read and verify: partition ${count(p + 1)} of ${count(result.numPartitions)}`);
    }
  } finally {
    await reader.close();
  }
}

function summarize(ctx: CliContext, options: DemoArgs, result: ShuffleWriteResult, timings: Timings, problems: string[]): void {
  const out = (line: string) => writeLine(ctx.stdout, line);
  const ratio = result.bytesWritten > 0 ? timings.inputBytes / result.bytesWritten : 0;
  const outBatches = result.partitionBatches.reduce((a, b) => a + b, 0);
  out(`columnar-shuffle demo: ${count(options.rows)} rows (int64 key, float64, utf8 ~20 B, int32 10 % nulls)`);
  out(`  shuffle     hash(key) into ${count(result.numPartitions)} partitions, ${options.codec}, ${options.writer} writer`);
  out(`  input       ${plural(result.batches, 'batch', 'batches')} of up to ${count(BATCH_ROWS)} rows, ${bytes(timings.inputBytes)} of Arrow buffers`);
  out(`  written     ${bytes(result.bytesWritten)} in ${count(outBatches)} record batches, compression ratio ${ratio.toFixed(2)}x`);
  out(`  write       ${seconds(timings.writeMs)}, ${rate(result.rows, timings.writeMs)}`);
  out(`  read        ${seconds(timings.readMs)}, ${rate(result.rows, timings.readMs)}`);
  if (options.memoryLimit !== undefined || result.spills > 0) {
    const limit = options.memoryLimit === undefined ? 'no limit' : `limit ${bytes(options.memoryLimit)}`;
    const spills = result.spills > 0 ? `${plural(result.spills, 'spill', 'spills')} (${bytes(result.spilledBytes)})` : 'no spills';
    out(`  memory      ${limit}, peak ${bytes(result.peakMemoryBytes)}, ${spills}`);
  }
  out(problems.length === 0 ? '  verdict     verified: every row read back, each in its key\'s partition, all values intact' : `  verdict     FAILED`);
  for (const problem of problems) out(`              - ${problem}`);
}
