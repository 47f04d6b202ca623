/**
 * The columnar-shuffle CLI, run in-process through `main(argv, { stdout, stderr })`
 * on files in a temporary directory, and once as the built binary.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import {
  Field,
  Float64,
  Int32,
  Int64,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  tableFromIPC,
  tableToIPC,
  Utf8,
  vectorFromArray,
} from 'apache-arrow';
import { Message } from 'apache-arrow/ipc/metadata/message';
import { main, USAGE, type MainOptions } from '../src/cli/main.js';
import { ShuffleWriter } from '../src/writer/shuffle-writer.js';
import { SortShuffleWriter } from '../src/sort-writer/sort-shuffle-writer.js';
import { parseByteSize } from '../src/cli/args.js';
import { ShuffleVerifier } from '../src/cli/demo-verify.js';
import { narrowBatch, NARROW_SCHEMA } from '../src/cli/demo-data.js';
import { createProgress, render } from '../src/cli/progress.js';
import { frameOf } from '../src/cli/ipc-frames.js';
import { hashColumnInto, pmod, SPARK_HASH_SEED } from '../src/writer/murmur3.js';
import { defaultMemoryLimit, systemMemory } from '../src/memory/system-memory.js';
import { fileOf } from './support/arrow-file.js';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));

// ---------------------------------------------------------------- helpers

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  stdoutBytes: Buffer;
}

function sink(): { stream: Writable; chunks: Buffer[] } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(Buffer.from(chunk));
      callback();
    },
  });
  return { stream, chunks };
}

async function cli(...argv: string[]): Promise<Run> {
  return cliWith({}, ...argv);
}

/** A run on a machine with `machine.systemMemory` bytes of memory. */
async function cliWith(machine: Pick<MainOptions, 'systemMemory' | 'signal'>, ...argv: string[]): Promise<Run> {
  const out = sink();
  const err = sink();
  const code = await main(argv, { stdout: out.stream, stderr: err.stream, signal: new AbortController().signal, ...machine });
  const stdoutBytes = Buffer.concat(out.chunks);
  return { code, stdout: stdoutBytes.toString('utf8'), stderr: Buffer.concat(err.chunks).toString('utf8'), stdoutBytes };
}

/** The one JSON object a --json run prints. */
function json(run: Run): Record<string, unknown> & WriteJson {
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout) as Record<string, unknown> & WriteJson;
}

interface WriteJson {
  rows: number;
  memoryLimit: number;
  spills: number;
  spilledBytes: number;
  peakMemoryBytes: number;
  batches: number;
  partitions: number;
  bytesWritten: number;
  elapsedMs: number;
  codec: string;
  writer: string;
  inputFormat: string;
  partitionLengths: number[];
  partitionRows: number[];
  partitionBatches: number[];
  output: { data: string; index: string; checksum: string };
}

/** Stderr of a failed run: exactly one line, in the documented shape, without a stack trace. */
function errorLine(run: Run): string {
  const lines = run.stderr.split('\n').filter((l) => l.length > 0);
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^columnar-shuffle: error CS_[A-Z_]+: /);
  expect(run.stderr).not.toMatch(/\n\s+at /);
  return lines[0]!;
}

const SCHEMA = new Schema([
  new Field('id', new Int64(), false),
  new Field('name', new Utf8(), true),
  new Field('amount', new Float64(), false),
  new Field('qty', new Int32(), true),
]);

/** Rows [start, start + n): id, a name (null every 7th row), amount = id / 4, qty (null every 5th row). */
function batch(start: number, n: number): RecordBatch {
  const ids = Array.from({ length: n }, (_, i) => start + i);
  const children = [
    vectorFromArray(BigInt64Array.from(ids, BigInt)).data[0]!,
    vectorFromArray(ids.map((id) => (id % 7 === 0 ? null : `name-${id}`)), new Utf8()).data[0]!,
    vectorFromArray(Float64Array.from(ids, (id) => id / 4)).data[0]!,
    vectorFromArray(ids.map((id) => (id % 5 === 0 ? null : id % 1000)), new Int32()).data[0]!,
  ];
  return new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: n, children }));
}

const INPUT = new Table([batch(0, 3000), batch(3000, 5000), batch(8000, 1)]);
const INPUT_ROWS = 8001;

/** Rows of a table as plain objects, sorted by id. */
function rowsOf(table: Table): unknown[] {
  return table
    .toArray()
    .map((row) => row.toJSON())
    .sort((a, b) => Number(a.id) - Number(b.id));
}

/** The record-batch messages of an IPC stream, and how many of them have a compressed body. */
function recordBatchMessages(stream: Uint8Array): { batches: number; compressed: number } {
  const counts = { batches: 0, compressed: 0 };
  for (let position = 0; ; ) {
    const frame = frameOf(stream.subarray(position, position + 8));
    if (frame.kind !== 'message') return counts;
    const metadataEnd = position + frame.prefixLength + frame.metadataLength;
    const message = Message.decode(stream.subarray(position + frame.prefixLength, metadataEnd));
    if (message.isRecordBatch()) {
      counts.batches++;
      if (message.header().compression !== null) counts.compressed++;
    }
    position = metadataEnd + Number(message.bodyLength);
  }
}

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'columnar-shuffle-cli-test-'));
  await writeFile(join(dir, 'input.arrow'), tableToIPC(INPUT, 'file'));
  await writeFile(join(dir, 'input.arrows'), tableToIPC(INPUT, 'stream'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------- write

describe('write', () => {
  test('shuffles an Arrow file by hash: --json reports rows, batches, lengths that sum to bytesWritten and match the index file', async () => {
    const prefix = join(dir, 'file-out');
    const result = json(await cli('write', join(dir, 'input.arrow'), '--partitions', '8', '--key', 'id', '--output', prefix, '--json'));
    expect(result).toMatchObject({ rows: INPUT_ROWS, batches: 3, partitions: 8, codec: 'lz4', inputFormat: 'file' });
    expect(result.output).toEqual({ data: `${prefix}.data`, index: `${prefix}.index`, checksum: `${prefix}.checksum.CRC32C` });
    expect(typeof result.elapsedMs).toBe('number');
    expect(result.partitionLengths).toHaveLength(8);
    expect(result.partitionLengths.reduce((a, b) => a + b, 0)).toBe(result.bytesWritten);
    expect(result.partitionRows.reduce((a, b) => a + b, 0)).toBe(INPUT_ROWS);
    expect((await stat(`${prefix}.data`)).size).toBe(result.bytesWritten);

    const index = await readFile(`${prefix}.index`);
    const offsets = Array.from({ length: 9 }, (_, i) => Number(index.readBigInt64BE(i * 8)));
    let end = 0;
    expect(offsets).toEqual([0, ...result.partitionLengths.map((length) => (end += length))]);
  });

  test('tells the format from the bytes, not the name: a stream named .arrow gives the same output as the file', async () => {
    const misnamed = join(dir, 'stream-named.arrow');
    await writeFile(misnamed, tableToIPC(INPUT, 'stream'));
    const fromFile = json(await cli('write', join(dir, 'input.arrow'), '-p', '8', '-k', 'id', '-o', join(dir, 'a'), '--json'));
    const fromStream = json(await cli('write', misnamed, '-p', '8', '-k', 'id', '-o', join(dir, 'b'), '--json'));
    expect(fromStream.inputFormat).toBe('stream');
    expect(fromStream.partitionRows).toEqual(fromFile.partitionRows);
    expect((await readFile(join(dir, 'b.data'))).equals(await readFile(join(dir, 'a.data')))).toBe(true);
  });

  test('reads a .arrows stream, and every row lands in the partition its key hashes to', async () => {
    const prefix = join(dir, 'stream-out');
    const result = json(await cli('write', join(dir, 'input.arrows'), '--partitions', '5', '--key', 'id', '--output', prefix, '--json'));
    expect(result.inputFormat).toBe('stream');
    const all: Table[] = [];
    for (let p = 0; p < 5; p++) {
      const run = await cli('read', prefix, '--partition', String(p));
      expect(run.code).toBe(0);
      const table = tableFromIPC(run.stdoutBytes);
      expect(table.numRows).toBe(result.partitionRows[p]);
      for (const b of table.batches) {
        const hashes = new Int32Array(b.numRows).fill(SPARK_HASH_SEED);
        hashColumnInto(b.getChildAt(0)!.data[0]!, hashes, 'id');
        expect(new Set(Array.from(hashes, (h) => pmod(h, 5)))).toEqual(new Set([p]));
      }
      all.push(table);
    }
    expect(rowsOf(new Table(all.flatMap((t) => t.batches)))).toEqual(rowsOf(INPUT));
  });

  test('--partitioning range with --bounds: partition p holds the ids in (bound p - 1, bound p], a descending key the reverse', async () => {
    const bounds = join(dir, 'bounds.arrows');
    await writeFile(bounds, tableToIPC(new Table({ id: vectorFromArray(BigInt64Array.of(999n, 2000n, 7999n)) }), 'stream'));
    const prefix = join(dir, 'range-out');
    const result = json(await cli('write', join(dir, 'input.arrow'), '-p', '4', '--partitioning', 'range', '-k', 'id', '--bounds', bounds, '-o', prefix, '--json'));
    // ids 0..8000: 1000 up to 999, 1001 up to 2000, 5999 up to 7999, and 8000
    expect(result.partitionRows).toEqual([1000, 1001, 5999, 1]);
    expect(result.partitioning).toEqual({ kind: 'range', keys: [{ column: 'id' }], bounds });
    const last = tableFromIPC((await cli('read', prefix, '-P', '3')).stdoutBytes);
    expect(last.getChild('id')!.toArray()).toEqual(BigInt64Array.of(8000n));

    await writeFile(bounds, tableToIPC(new Table({ id: vectorFromArray(BigInt64Array.of(7999n, 2000n)) }), 'stream'));
    const desc = json(await cli('write', join(dir, 'input.arrow'), '-p', '3', '--partitioning', 'range', '-k', 'id:desc', '--bounds', bounds, '-o', `${prefix}-desc`, '--json'));
    expect(desc.partitionRows).toEqual([2, 5999, 2000]);
    // spaces around the pieces are trimmed, as around hash keys
    const text = await cli('write', join(dir, 'input.arrow'), '-p', '3', '--partitioning', 'range', '-k', ' id : desc : nulls-first ', '--bounds', bounds, '-o', `${prefix}-text`);
    expect(text.stdout).toMatch(/into 3 partitions by range\(id desc\) with the bounds of .*bounds\.arrows/);
  });

  test('range bounds that do not fit the input: CS_INVALID_ARGUMENT naming the problem, nothing written', async () => {
    const bounds = join(dir, 'bad-bounds.arrows');
    await writeFile(bounds, tableToIPC(new Table({ id: vectorFromArray(Int32Array.of(5)) }), 'stream'));
    const run = await cli('write', join(dir, 'input.arrow'), '-p', '2', '--partitioning', 'range', '-k', 'id', '--bounds', bounds, '-o', join(dir, 'bad-range'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/CS_INVALID_ARGUMENT: the range bounds' column "id" is Int32, the key's values are Int64/);
    expect((await readdir(dir)).filter((f) => f.startsWith('bad-range'))).toEqual([]);
    const missing = await cli('write', join(dir, 'input.arrow'), '-p', '2', '--partitioning', 'range', '-k', 'id', '--bounds', join(dir, 'no-such-bounds.arrows'), '-o', join(dir, 'bad-range'));
    expect(errorLine(missing)).toMatch(/CS_FILE_NOT_FOUND: cannot open the bounds file: .*no-such-bounds/);
  });

  test('accepts compressed input (LZ4 and ZSTD bodies) as a stream and as a Feather V2 style file', async () => {
    const first = join(dir, 'compressed-src');
    const written = json(await cli('write', join(dir, 'input.arrow'), '-p', '1', '--partitioning', 'single', '-o', first, '--codec', 'zstd', '--json'));
    const zstdStream = await readFile(`${first}.data`); // one partition: a whole ZSTD-compressed IPC stream
    await writeFile(join(dir, 'zstd.arrows'), zstdStream);
    await writeFile(join(dir, 'zstd.feather'), fileOf(zstdStream, SCHEMA));
    expect(written.rows).toBe(INPUT_ROWS);

    for (const name of ['zstd.arrows', 'zstd.feather']) {
      const prefix = join(dir, `from-${name}`);
      const result = json(await cli('write', join(dir, name), '-p', '3', '--partitioning', 'round-robin', '-o', prefix, '--json'));
      expect(result.inputFormat).toBe(name.endsWith('.feather') ? 'file' : 'stream');
      const tables = await Promise.all([0, 1, 2].map(async (p) => tableFromIPC((await cli('read', prefix, '-P', String(p))).stdoutBytes)));
      expect(rowsOf(new Table(tables.flatMap((t) => t.batches)))).toEqual(rowsOf(INPUT));
    }
  });

  test('accepts LZ4 / ZSTD compressed Feather files and streams written by another implementation (polars)', async () => {
    const pl = createRequire(import.meta.url)('nodejs-polars') as typeof import('nodejs-polars');
    const ids = Array.from({ length: 20_000 }, (_, i) => i * 3);
    const df = pl.DataFrame({ id: ids, x: ids.map((i) => i / 8) });
    const inputs = {
      'polars-lz4.feather': df.writeIPC({ compression: 'lz4' }),
      'polars-zstd.arrows': df.writeIPCStream({ compression: 'zstd' }),
    };
    for (const [name, bytes] of Object.entries(inputs)) {
      await writeFile(join(dir, name), bytes);
      const prefix = join(dir, `from-${name}`);
      const result = json(await cli('write', join(dir, name), '-p', '4', '-k', 'id', '-o', prefix, '--json'));
      expect(result.rows).toBe(ids.length);
      const tables = await Promise.all([0, 1, 2, 3].map(async (p) => tableFromIPC((await cli('read', prefix, '-P', String(p))).stdoutBytes)));
      const back = tables.flatMap((t) => Array.from(t.getChild('id')!, Number)).sort((a, b) => a - b);
      expect(back).toEqual(ids);
    }
  });

  test('an input with a schema and no batches gives an output of no rows, its schema in partition 0 and the others empty', async () => {
    const empty = join(dir, 'empty.arrows');
    await writeFile(empty, tableToIPC(new Table(SCHEMA), 'stream'));
    const result = json(await cli('write', empty, '-p', '3', '-k', 'id', '-o', join(dir, 'empty-out'), '--json'));
    expect(result).toMatchObject({ rows: 0, partitionRows: [0, 0, 0] });
    expect(result.partitionLengths.slice(1)).toEqual([0, 0]);
    expect(result.bytesWritten).toBe(result.partitionLengths[0]);
    expect(result.bytesWritten).toBeGreaterThan(0);
  });

  test('prints a short human summary without --json', async () => {
    const run = await cli('write', join(dir, 'input.arrow'), '-p', '4', '-k', 'id,name', '-o', join(dir, 'human'));
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    expect(run.stdout).toContain('wrote 8,001 rows');
    expect(run.stdout).toContain('hash(id, name)');
    expect(run.stdout).toContain(`${join(dir, 'human')}.data`);
    expect(run.stdout.split('\n').length).toBeLessThan(10);
  });
});

// ---------------------------------------------------------------- memory limit and spilling

describe('--memory-limit and --spill-dir', () => {
  const MiB = 1024 * 1024;

  test.each([
    ['1', 1],
    ['1048576', MiB],
    ['1_048_576', MiB],
    ['4096B', 4096],
    ['512KiB', 512 * 1024],
    ['64MiB', 64 * MiB],
    ['64mib', 64 * MiB],
    ['64 MiB', 64 * MiB],
    [' 2MiB ', 2 * MiB],
    ['1GiB', 1024 * MiB],
    ['1.5GiB', 1536 * MiB],
    ['0.5KiB', 512],
    ['1.3KiB', 1331], // 1331.2 bytes, rounded down
    ['2TiB', 2 * 1024 ** 4],
    ['100KB', 100_000],
    ['64MB', 64_000_000],
    ['1.5GB', 1_500_000_000],
    ['1TB', 1e12],
  ])('parses %j as %d bytes', (text, bytes) => {
    expect(parseByteSize(text)).toBe(bytes);
  });

  test.each([
    '', '0', '0MiB', '0.1B', '0.0001KiB', '-1', '-1MiB', '1.5', '.5MiB', '1.MiB', 'MiB', '64M', '64m', '64Mi', '64XB',
    '1e9', '0x100', '64MiBs', '64 MiB extra', '64  MiB', '1,5GiB', 'NaN', 'Infinity', '9007199254740992', '9999999TiB',
  ])('refuses %j', (text) => {
    expect(parseByteSize(text)).toBeNull();
  });

  let input: string;
  const inputRows = 120_000;
  const verifier = (partitions: number) => {
    const v = new ShuffleVerifier(NARROW_SCHEMA, 'key', partitions);
    for (let done = 0, seed = 1; done < inputRows; seed++, done += 8192) v.addInput(narrowBatch(Math.min(8192, inputRows - done), seed));
    return v;
  };
  /** What `read` gives back of each partition of `prefix`, checked against the input (an empty list: every row, in place). */
  const readBackProblems = async (prefix: string, written: WriteJson) => {
    const check = verifier(written.partitions);
    for (let p = 0; p < written.partitions; p++) {
      const run = await cli('read', prefix, '-P', String(p));
      expect(run.code).toBe(0);
      for (const b of tableFromIPC(run.stdoutBytes).batches) check.addOutput(p, b);
    }
    return check.problems(written.partitionRows);
  };
  beforeAll(async () => {
    // ~5 MiB of Arrow buffers: five times the limit the tests set
    const batches: RecordBatch[] = [];
    for (let done = 0, seed = 1; done < inputRows; seed++, done += 8192) batches.push(narrowBatch(Math.min(8192, inputRows - done), seed));
    input = join(dir, 'narrow.arrows');
    await writeFile(input, tableToIPC(new Table(batches), 'stream'));
  });

  test('a write under 1 MiB spills, stays within the limit, leaves no spill file, and read gives back every row', async () => {
    const spillDir = await mkdtemp(join(tmpdir(), 'columnar-shuffle-cli-spill-'));
    try {
      const prefix = join(dir, 'spilled');
      const partitions = 16;
      const result = json(await cli('write', input, '-p', String(partitions), '-k', 'key', '-o', prefix, '--memory-limit', '1MiB', '--spill-dir', spillDir, '--json'));
      expect(result.rows).toBe(inputRows);
      expect(result.memoryLimit).toBe(MiB);
      expect(result.spills).toBeGreaterThan(0);
      expect(result.spilledBytes).toBeGreaterThan(0);
      expect(result.peakMemoryBytes).toBeGreaterThan(0);
      expect(result.peakMemoryBytes).toBeLessThanOrEqual(MiB);
      expect(await readdir(spillDir)).toEqual([]);
      expect(await readBackProblems(prefix, result)).toEqual([]);
    } finally {
      await rm(spillDir, { recursive: true, force: true });
    }
  });

  test('without --memory-limit the limit is half the system memory: nothing spills here, and --json says so', async () => {
    const result = json(await cli('write', input, '-p', '16', '-k', 'key', '-o', join(dir, 'unlimited'), '--json'));
    expect(result).toMatchObject({ rows: inputRows, memoryLimit: defaultMemoryLimit(), spills: 0, spilledBytes: 0 });
    expect(result.memoryLimit).toBe(Math.floor(systemMemory() / 2));
    expect(result.peakMemoryBytes).toBeGreaterThan(0);
  });

  test('without --memory-limit, on a machine with less memory than the input, the write spills within half of it and loses no row', async () => {
    const spillDir = await mkdtemp(join(tmpdir(), 'columnar-shuffle-cli-spill-'));
    try {
      const prefix = join(dir, 'small-machine');
      const partitions = 16;
      const run = await cliWith({ systemMemory: 2 * MiB }, 'write', input, '-p', String(partitions), '-k', 'key', '-o', prefix, '--spill-dir', spillDir, '--json');
      const result = json(run);
      expect(result.memoryLimit).toBe(MiB);
      expect(result.spills).toBeGreaterThan(0);
      expect(result.peakMemoryBytes).toBeLessThanOrEqual(MiB);
      expect(await readdir(spillDir)).toEqual([]);
      expect(await readBackProblems(prefix, result)).toEqual([]);
      // the human summary names the default
      const human = await cliWith({ systemMemory: 2 * MiB }, 'write', input, '-p', '4', '-k', 'key', '-o', join(dir, 'small-machine-human'), '--spill-dir', spillDir);
      expect(human.stdout).toMatch(/; peak memory [\d.]+ [KM]iB \(limit 1\.00 MiB, half the system memory\)$/m);
    } finally {
      await rm(spillDir, { recursive: true, force: true });
    }
  });

  test('the human summary mentions the spills and the peak memory', async () => {
    const spillDir = await mkdtemp(join(tmpdir(), 'columnar-shuffle-cli-spill-'));
    try {
      const run = await cli('write', input, '-p', '4', '-k', 'key', '-o', join(dir, 'spilled-human'), '--memory-limit', '1048576', '--spill-dir', spillDir);
      expect(run.code).toBe(0);
      expect(run.stderr).toBe('');
      expect(run.stdout).toMatch(/^  [\d,]+ spills?, [\d.]+ [KMG]?i?B spilled to disk; peak memory [\d.]+ [KM]iB \(limit 1\.00 MiB\)$/m);
      expect(await readdir(spillDir)).toEqual([]);
    } finally {
      await rm(spillDir, { recursive: true, force: true });
    }
  });

  test('a missing --spill-dir is CS_FILE_NOT_FOUND naming it, and no output appears', async () => {
    const before = await readdir(dir);
    const run = await cli('write', input, '-p', '4', '-k', 'key', '-o', join(dir, 'no-spill-dir'), '--memory-limit', '1MiB', '--spill-dir', join(dir, 'no-such-spill-dir'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/CS_FILE_NOT_FOUND: the spill directory does not exist .*no-such-spill-dir/);
    expect(await readdir(dir)).toEqual(before);
  });

  test('demo --memory-limit spills and still verifies', async () => {
    const run = await cli('demo', '--rows', '60000', '--partitions', '8', '--memory-limit', '1MiB');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/memory\s+limit 1\.00 MiB, peak [\d.]+ [KM]iB, [\d,]+ spills? \(/);
    expect(run.stdout).toMatch(/verdict\s+verified/);
  });
});

// ---------------------------------------------------------------- read and inspect

describe('read', () => {
  let prefix: string;
  let written: WriteJson;
  beforeAll(async () => {
    prefix = join(dir, 'for-read');
    written = json(await cli('write', join(dir, 'input.arrow'), '-p', '6', '-k', 'id', '-o', prefix, '--json'));
  });

  test('writes a partition to --output as an uncompressed Arrow IPC stream arrow-js reads', async () => {
    const file = join(dir, 'part-2.arrows');
    const run = await cli('read', prefix, '--partition', '2', '--output', file);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`partition 2: ${written.partitionRows[2]!.toLocaleString('en-US')} rows`);
    const bytes = await readFile(file);
    const table = tableFromIPC(bytes);
    expect(table.numRows).toBe(written.partitionRows[2]);
    expect(table.schema.fields.map((f) => f.name)).toEqual(['id', 'name', 'amount', 'qty']);
    expect(recordBatchMessages(bytes)).toEqual({ batches: written.partitionBatches[2], compressed: 0 });
    // same bytes on stdout; no temporary file is left next to the output
    expect((await cli('read', prefix, '-P', '2')).stdoutBytes.equals(bytes)).toBe(true);
    expect((await readdir(dir)).filter((f) => f.startsWith('part-2.arrows'))).toEqual(['part-2.arrows']);
  });

  test('an empty partition is a valid stream with the schema and no batches', async () => {
    const single = join(dir, 'single');
    json(await cli('write', join(dir, 'input.arrow'), '-p', '4', '--partitioning', 'single', '-o', single, '--json'));
    const run = await cli('read', single, '--partition', '3');
    expect(run.code).toBe(0);
    const table = tableFromIPC(run.stdoutBytes);
    expect(table.numRows).toBe(0);
    expect(recordBatchMessages(run.stdoutBytes).batches).toBe(0);
    expect(run.stdoutBytes.subarray(-8)).toEqual(Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]));
    expect(table.schema.fields.map((f) => f.name)).toEqual(['id', 'name', 'amount', 'qty']);
  });

  test('an output of no rows gives, for any partition, a stream with the schema and no batches', async () => {
    const empty = join(dir, 'no-batches.arrows');
    await writeFile(empty, tableToIPC(new Table(SCHEMA), 'stream'));
    json(await cli('write', empty, '-p', '2', '-k', 'id', '-o', join(dir, 'all-empty'), '--json'));
    for (const partition of ['0', '1']) {
      const file = join(dir, `nothing-${partition}.arrows`);
      const run = await cli('read', join(dir, 'all-empty'), '--partition', partition, '--output', file);
      expect(run).toMatchObject({ code: 0, stderr: '' });
      const table = tableFromIPC(await readFile(file));
      expect(table.schema.fields.map((f) => f.name), `partition ${partition}`).toEqual(SCHEMA.fields.map((f) => f.name));
      expect(table.numRows).toBe(0);
    }
  });

  test('an output that stores no schema (every partition empty, as written before 2026-12-07): a stream of no columns and no batches, and stderr says so', async () => {
    const prefix = join(dir, 'schemaless');
    await writeFile(`${prefix}.data`, new Uint8Array(0));
    await writeFile(`${prefix}.index`, new Uint8Array(3 * 8));
    await writeFile(`${prefix}.checksum.CRC32C`, new Uint8Array(2 * 8));
    const file = join(dir, 'nothing.arrows');
    const run = await cli('read', prefix, '--partition', '0', '--output', file);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/every partition .* is empty and it stores no schema.*the stream has no columns/);
    const table = tableFromIPC(await readFile(file));
    expect([table.numCols, table.numRows]).toEqual([0, 0]);
  });

  test('--output into a missing directory is CS_FILE_NOT_FOUND', async () => {
    const run = await cli('read', prefix, '--partition', '0', '--output', join(dir, 'no-such-dir', 'p0.arrows'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/CS_FILE_NOT_FOUND: .*no-such-dir/);
  });

  test('a partition that does not exist is a wrong command line: CS_INVALID_ARGUMENT naming the partitions there are, exit 2', async () => {
    const run = await cli('read', prefix, '--partition', '6');
    expect(run.code).toBe(2);
    expect(errorLine(run)).toContain(`CS_INVALID_ARGUMENT: --partition 6 does not exist: ${prefix} has partitions 0 to 5`);
  });

  test('--output through a symbolic link writes the file it points at; the link stays', async () => {
    const target = join(dir, 'link-target.arrows');
    const link = join(dir, 'link.arrows');
    await writeFile(target, 'old');
    await symlink(target, link);
    expect((await cli('read', prefix, '--partition', '1', '--output', link)).code).toBe(0);
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect(tableFromIPC(await readFile(target)).numRows).toBe(written.partitionRows[1]);
  });

  test('--output onto a FIFO writes into it (it was replaced by a regular file, and as root -o /dev/null replaced /dev/null)', async () => {
    const fifo = join(dir, 'p1.fifo');
    await exec('mkfifo', [fifo]);
    const [run, bytes] = await Promise.all([cli('read', prefix, '--partition', '1', '--output', fifo), readFile(fifo)]);
    expect(run.code).toBe(0);
    expect((await lstat(fifo)).isFIFO()).toBe(true);
    expect(tableFromIPC(bytes).numRows).toBe(written.partitionRows[1]);
  });

  test.each(['.data', '.index', '.checksum.CRC32C'])("--output onto the shuffle output's own %s file is refused (exit 2), and the output stays readable", async (suffix) => {
    const run = await cli('read', prefix, '--partition', '1', '--output', prefix + suffix);
    expect(run.code).toBe(2);
    expect(errorLine(run)).toMatch(/is a file of the shuffle output itself/);
    expect((await cli('read', prefix, '--partition', '1', '--output', join(dir, 'still.arrows'))).code).toBe(0);
  });

  test('a damaged partition is CS_CHECKSUM_MISMATCH and leaves no output file', async () => {
    const damaged = join(dir, 'damaged');
    const result = json(await cli('write', join(dir, 'input.arrow'), '-p', '2', '-k', 'id', '-o', damaged, '--json'));
    const data = await readFile(`${damaged}.data`);
    data[result.partitionLengths[0]! + 100]! ^= 0xff; // inside partition 1
    await writeFile(`${damaged}.data`, data);
    const file = join(dir, 'damaged-1.arrows');
    const run = await cli('read', damaged, '-P', '1', '-o', file);
    expect(run.code).toBe(1);
    expect(errorLine(run)).toContain('CS_CHECKSUM_MISMATCH');
    expect((await readdir(dir)).some((f) => f.startsWith('damaged-1'))).toBe(false);
  });
});

describe('inspect', () => {
  test('--json gives schema, codec and per-partition bytes, batches and rows that agree with write', async () => {
    const prefix = join(dir, 'for-inspect');
    const written = json(await cli('write', join(dir, 'input.arrows'), '-p', '5', '-k', 'id', '-o', prefix, '-c', 'zstd', '--json'));
    const inspected = json(await cli('inspect', prefix, '--json'));
    expect(inspected).toMatchObject({
      codec: 'zstd',
      partitions: 5,
      rows: INPUT_ROWS,
      bytes: written.bytesWritten,
      partitionLengths: written.partitionLengths,
      partitionRows: written.partitionRows,
      partitionBatches: written.partitionBatches,
    });
    expect(inspected.schema).toEqual([
      { name: 'id', type: 'Int64', nullable: false },
      { name: 'name', type: 'Utf8', nullable: true },
      { name: 'amount', type: 'Float64', nullable: false },
      { name: 'qty', type: 'Int32', nullable: true },
    ]);
  });

  test('reports codec none for an uncompressed output, and prints a table without --json', async () => {
    const prefix = join(dir, 'for-inspect-none');
    json(await cli('write', join(dir, 'input.arrow'), '-p', '3', '-k', 'id', '-o', prefix, '--codec', 'none', '--json'));
    const run = await cli('inspect', prefix);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^codec\s+none$/m);
    expect(run.stdout).toMatch(/^schema\s+id: Int64 not null, name: Utf8, amount: Float64 not null, qty: Int32$/m);
    expect(run.stdout).toMatch(/^\s*partition\s+bytes\s+batches\s+rows$/m);
  });

  test('a prefix with no output is CS_FILE_NOT_FOUND', async () => {
    const run = await cli('inspect', join(dir, 'no-such-output'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toContain('CS_FILE_NOT_FOUND');
  });
});

// ---------------------------------------------------------------- --writer sort

describe('write --writer sort, and read and inspect of its output', () => {
  let hashPrefix: string;
  let sortPrefix: string;
  let hash: WriteJson;
  let sort: WriteJson;
  beforeAll(async () => {
    hashPrefix = join(dir, 'writer-hash');
    sortPrefix = join(dir, 'writer-sort');
    hash = json(await cli('write', join(dir, 'input.arrow'), '-p', '6', '-k', 'id', '-o', hashPrefix, '--json'));
    sort = json(await cli('write', join(dir, 'input.arrow'), '-p', '6', '-k', 'id', '-o', sortPrefix, '--writer', 'sort', '--json'));
  });

  test('--json has the same fields, plus the writer: hash by default, sort when asked', () => {
    expect(hash.writer).toBe('hash');
    expect(sort.writer).toBe('sort');
    expect(Object.keys(sort).sort()).toEqual(Object.keys(hash).sort());
    expect(sort).toMatchObject({ rows: INPUT_ROWS, batches: 3, partitions: 6, codec: 'lz4', spills: 0 });
    // the same partitioner: every partition gets the same rows
    expect(sort.partitionRows).toEqual(hash.partitionRows);
    expect(sort.partitionLengths.reduce((a, b) => a + b, 0)).toBe(sort.bytesWritten);
  });

  test('the sort output has the same three files; its partitions start with the row magic, not FF FF FF FF', async () => {
    const data = await readFile(`${sortPrefix}.data`);
    expect((await stat(`${sortPrefix}.index`)).size).toBe(7 * 8);
    expect((await stat(`${sortPrefix}.checksum.CRC32C`)).size).toBe(6 * 8);
    let at = 0;
    for (const length of sort.partitionLengths) {
      if (length > 0) expect(data.subarray(at, at + 4).toString('latin1')).toBe('CSRW');
      at += length;
    }
  });

  test('read gives each partition of the sort output as an IPC stream with the rows the hash output has', async () => {
    for (let p = 0; p < 6; p++) {
      const fromSort = tableFromIPC((await cli('read', sortPrefix, '-P', String(p))).stdoutBytes);
      const fromHash = tableFromIPC((await cli('read', hashPrefix, '-P', String(p))).stdoutBytes);
      expect(fromSort.schema.fields.map((f) => `${f.name}: ${String(f.type)}`)).toEqual(fromHash.schema.fields.map((f) => `${f.name}: ${String(f.type)}`));
      expect(fromSort.numRows).toBe(sort.partitionRows[p]);
      expect(rowsOf(fromSort)).toEqual(rowsOf(fromHash));
    }
  });

  test('inspect names the writer, and its blocks, rows and bytes agree with write', async () => {
    const inspected = json(await cli('inspect', sortPrefix, '--json'));
    expect(inspected).toMatchObject({
      writer: 'sort',
      codec: 'lz4',
      rows: INPUT_ROWS,
      bytes: sort.bytesWritten,
      partitionLengths: sort.partitionLengths,
      partitionRows: sort.partitionRows,
      partitionBatches: sort.partitionBatches,
    });
    expect(json(await cli('inspect', hashPrefix, '--json')).writer).toBe('hash');
    const text = await cli('inspect', sortPrefix);
    expect(text.stdout).toMatch(/^writer\s+sort \(row blocks\)$/m);
  });

  test('--writer sort under --memory-limit spills, stays within the limit, and read gives back every row', async () => {
    const prefix = join(dir, 'writer-sort-spill');
    const limit = 256 * 1024;
    const result = json(await cli('write', join(dir, 'input.arrow'), '-p', '6', '-k', 'id', '-o', prefix, '-w', 'sort', '--memory-limit', '256KiB', '--json'));
    expect(result.spills).toBeGreaterThan(0);
    expect(result.peakMemoryBytes).toBeLessThanOrEqual(limit);
    let rows = 0;
    for (let p = 0; p < 6; p++) rows += tableFromIPC((await cli('read', prefix, '-P', String(p))).stdoutBytes).numRows;
    expect(rows).toBe(INPUT_ROWS);
  });

  test('an unknown --writer is a usage error (exit 2) naming the choices', async () => {
    const run = await cli('write', join(dir, 'input.arrow'), '-p', '2', '-k', 'id', '-o', join(dir, 'never'), '--writer', 'bucket');
    expect(run.code).toBe(2);
    expect(errorLine(run)).toMatch(/--writer must be one of hash, sort, auto, got 'bucket'/);
    expect(existsSync(join(dir, 'never.index'))).toBe(false);
  });

  test('--writer auto: the columnar writer with memory to spare, the sort writer when 256 KiB leave 100 partition buffers a few rows each; --json names the one used', async () => {
    const roomy = json(await cli('write', join(dir, 'input.arrow'), '-p', '6', '-k', 'id', '-o', join(dir, 'auto-roomy'), '--writer', 'auto', '--json'));
    expect(roomy.writer).toBe('hash');
    const tight = json(await cli('write', join(dir, 'input.arrow'), '-p', '100', '-k', 'id', '-o', join(dir, 'auto-tight'), '-w', 'auto', '--memory-limit', '256KiB', '--json'));
    expect(tight.writer).toBe('sort');
    expect(tight.rows).toBe(INPUT_ROWS);
    let rows = 0;
    for (let p = 0; p < 100; p++) rows += tableFromIPC((await cli('read', join(dir, 'auto-tight'), '-P', String(p))).stdoutBytes).numRows;
    expect(rows).toBe(INPUT_ROWS);
    expect((await cli('write', join(dir, 'input.arrow'), '-p', '6', '-k', 'id', '-o', join(dir, 'auto-text'), '-w', 'auto')).stdout).toMatch(/columnar hash writer, chosen by auto/);
  });

  test('demo --writer sort shuffles, reads back and verifies', async () => {
    const run = await cli('demo', '--rows', '20000', '--partitions', '300', '--writer', 'sort');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/sort writer/);
    expect(run.stdout).toMatch(/verdict\s+verified/);
  });
});

// ---------------------------------------------------------------- demo

describe('demo', () => {
  test('generates, shuffles, reads back and verifies; removes its temporary directory', async () => {
    const demoDirs = async () => (await readdir(tmpdir())).filter((f) => f.startsWith('columnar-shuffle-demo-'));
    const before = await demoDirs();
    const run = await cli('demo', '--rows', '20000', '--partitions', '7');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('20,000 rows');
    expect(run.stdout).toMatch(/compression ratio \d+\.\d\dx/);
    expect(run.stdout).toMatch(/write .* rows\/s/);
    expect(run.stdout).toMatch(/read .* rows\/s/);
    expect(run.stdout).toMatch(/verdict\s+verified/);
    expect(await demoDirs()).toEqual(before);
  });

  test('a --dir that cannot be made (a file is in the way) is CS_IO naming it, exit 1', async () => {
    const file = join(dir, 'a-file');
    await writeFile(file, '');
    const run = await cli('demo', '-n', '10', '--dir', file);
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/CS_IO: cannot create the --dir directory: EEXIST.*\(file .*a-file\)/);
  });

  test('--dir keeps the output there', async () => {
    const out = join(dir, 'demo-here', 'nested');
    const run = await cli('demo', '--rows', '5000', '--partitions', '3', '--dir', out, '--codec', 'none');
    expect(run.code).toBe(0);
    expect((await readdir(out)).sort()).toEqual(['demo.checksum.CRC32C', 'demo.data', 'demo.index']);
    expect(json(await cli('inspect', join(out, 'demo'), '--json'))).toMatchObject({ rows: 5000, codec: 'none' });
  });

  test('the verifier catches a row in the wrong partition, a lost row and a changed value', () => {
    const input = narrowBatch(100, 1);
    const check = (output: (v: ShuffleVerifier) => void, partitionRows: number[]) => {
      const verifier = new ShuffleVerifier(NARROW_SCHEMA, 'key', 1);
      verifier.addInput(input);
      output(verifier);
      return verifier.problems(partitionRows);
    };
    expect(check((v) => v.addOutput(0, input), [100])).toEqual([]);
    // with 2 partitions some of the rows hash to partition 1
    const two = new ShuffleVerifier(NARROW_SCHEMA, 'key', 2);
    two.addInput(input);
    two.addOutput(0, input);
    expect(two.problems([100, 0]).join()).toMatch(/rows in the wrong partition/);
    expect(check((v) => v.addOutput(0, input.slice(0, 99)), [99]).join()).toMatch(/99 rows read back, 100 written/);
    expect(check((v) => v.addOutput(0, narrowBatch(100, 2)), [100]).join()).toMatch(/fingerprint mismatch/);
    expect(check((v) => v.addOutput(0, input), [99]).join()).toMatch(/the writer reports 99 rows, 100 were read back/);
  });
});

// ---------------------------------------------------------------- errors

describe('errors', () => {
  test('a file that is not Arrow is CS_INPUT_NOT_ARROW naming the file, exit 1, one line', async () => {
    const bad = join(dir, 'not-arrow.arrow');
    await writeFile(bad, 'id,name\n1,one\n');
    const run = await cli('write', bad, '-p', '2', '-k', 'id', '-o', join(dir, 'x'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/^columnar-shuffle: error CS_INPUT_NOT_ARROW: .*not-arrow\.arrow/);
    expect(run.stdout).toBe('');
  });

  test('an empty file is CS_INPUT_NOT_ARROW too', async () => {
    const empty = join(dir, 'zero-bytes.arrows');
    await writeFile(empty, '');
    expect(errorLine(await cli('write', empty, '-p', '2', '-k', 'id', '-o', join(dir, 'x')))).toContain('CS_INPUT_NOT_ARROW');
  });

  test('a stream cut inside its schema message, or with no schema at all, is CS_CORRUPT_DATA', async () => {
    const whole = await readFile(join(dir, 'input.arrows'));
    for (const [name, bytes] of [
      ['cut-schema.arrows', whole.subarray(0, 20)],
      ['eos-only.arrows', Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])],
    ] as const) {
      await writeFile(join(dir, name), bytes);
      const run = await cli('write', join(dir, name), '-p', '2', '-k', 'id', '-o', join(dir, 'x'));
      expect(run.code).toBe(1);
      expect(errorLine(run)).toMatch(/CS_CORRUPT_DATA: invalid Arrow IPC stream/);
    }
  });

  test('a stream cut inside a record batch is CS_CORRUPT_DATA and leaves no output', async () => {
    const whole = await readFile(join(dir, 'input.arrows'));
    const cut = join(dir, 'cut-batch.arrows');
    await writeFile(cut, whole.subarray(0, whole.byteLength - 1000));
    const before = await readdir(dir);
    const run = await cli('write', cut, '-p', '2', '-k', 'id', '-o', join(dir, 'cut-out'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/CS_CORRUPT_DATA: invalid Arrow IPC stream: message body of \d+ bytes runs past the end of the stream.*cut-batch\.arrows/);
    expect(await readdir(dir)).toEqual(before);
  });

  test('a truncated Arrow file is CS_CORRUPT_DATA', async () => {
    const whole = await readFile(join(dir, 'input.arrow'));
    const cut = join(dir, 'truncated.arrow');
    await writeFile(cut, whole.subarray(0, whole.byteLength - 100));
    const run = await cli('write', cut, '-p', '2', '-k', 'id', '-o', join(dir, 'x'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/CS_CORRUPT_DATA: .*truncated/);
  });

  test.each([
    // arrow-js threw a TypeError listing the blocks; its FileBlock cannot even encode one, so the footer's bytes are patched
    ['beyond 2^53', 0x0a0b0c0d0e, (file: Buffer) => file.writeUInt8(1, file.indexOf(Buffer.from([0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0, 0, 0])) + 7), /footer/],
    // Node 20 read at the descriptor's position (the start: no message there), Node 22 and later threw ERR_OUT_OF_RANGE (CS_IO)
    ['negative', -8, () => undefined, /message offset -8 is before the start of the file/],
  ])("an Arrow file whose footer puts a batch at an offset %s is CS_CORRUPT_DATA naming the file and why, and leaves no output", async (_, offset, patch, why) => {
    const bad = join(dir, 'bad-block.arrow');
    const file = Buffer.from(fileOf(tableToIPC(INPUT, 'stream'), INPUT.schema, { blockOffset: () => offset }));
    patch(file);
    await writeFile(bad, file);
    const before = await readdir(dir);
    const run = await cli('write', bad, '-p', '2', '-k', 'id', '-o', join(dir, 'bad-block'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/CS_CORRUPT_DATA: .*bad-block\.arrow/);
    expect(errorLine(run)).toMatch(why);
    expect(await readdir(dir)).toEqual(before);
  });

  test('a missing input file is CS_FILE_NOT_FOUND', async () => {
    const run = await cli('write', join(dir, 'missing.arrow'), '-p', '2', '-k', 'id', '-o', join(dir, 'x'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/CS_FILE_NOT_FOUND: .*missing\.arrow/);
  });

  test('an unknown key column is CS_UNKNOWN_COLUMN and creates no output file', async () => {
    const before = await readdir(dir);
    const run = await cli('write', join(dir, 'input.arrow'), '-p', '2', '-k', 'nope', '-o', join(dir, 'unknown-key'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toContain('CS_UNKNOWN_COLUMN: no column "nope"');
    expect(await readdir(dir)).toEqual(before);
  });

  test('a missing output directory is CS_FILE_NOT_FOUND and no output file appears', async () => {
    const before = await readdir(dir);
    const run = await cli('write', join(dir, 'input.arrow'), '-p', '2', '-k', 'id', '-o', join(dir, 'no-such-dir', 'out'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/CS_FILE_NOT_FOUND: .*no-such-dir/);
    expect(await readdir(dir)).toEqual(before);
  });

  test.each([
    [['write', 'in.arrow', '-p', '0', '-k', 'id', '-o', 'x'], /--partitions must be an integer in \[1, \d+\], got '0'/],
    [['write', 'in.arrow', '-p', 'many', '-k', 'id', '-o', 'x'], /--partitions must be an integer/],
    [['write', 'in.arrow', '-p', '2', '-k', 'id', '-o', 'x', '--frobnicate'], /unknown option '--frobnicate'/],
    [['write', 'in.arrow', '-p', '2', '-k', 'id'], /missing required option --output/],
    [['write', '-p', '2', '-k', 'id', '-o', 'x'], /missing the <input>/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x'], /give --key COL for hash partitioning/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '--partitioning', 'hash'], /hash partitioning needs --key/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id', '--partitioning', 'single'], /--key does not apply to single/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '--partitioning', 'range', '--bounds', 'b.arrow'], /range partitioning needs --key/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id', '--partitioning', 'range'], /range partitioning needs --bounds FILE/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id', '--bounds', 'b.arrow'], /--bounds does not apply to hash/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id:down', '--partitioning', 'range', '--bounds', 'b.arrow'], /--key id:down: a range key's order is asc, desc, nulls-first or nulls-last, got 'down'/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id', '--codec', 'gzip'], /--codec must be one of lz4, zstd, none/],
    [['write', 'a.arrow', 'b.arrow', '-p', '2', '-o', 'x', '-k', 'id'], /unexpected argument 'b.arrow'/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id', '--memory-limit', '0'], /--memory-limit must be a size in bytes >= 1, .*got '0'/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id', '--memory-limit', '64M'], /--memory-limit must be a size .*got '64M'/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id', '--memory-limit=-1MiB'], /--memory-limit must be a size .*got '-1MiB'/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id', '--memory-limit'], /--memory-limit/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id', '--spill-dir='], /--spill-dir is empty/],
    [['write', 'in.arrow', '-p', '2', '-o', '', '-k', 'id'], /--output is empty/],
    [['write', 'in.arrow', '-p', '2', '-o', 'x', '-k', 'id', '--partitioning', 'range', '--bounds='], /--bounds is empty/],
    [['read', 'prefix', '--partition', '0', '--output='], /--output is empty/],
    [['demo', '--dir='], /--dir is empty/],
    [['demo', '--memory-limit', 'lots'], /--memory-limit must be a size .*got 'lots'/],
    [['read', 'prefix'], /missing required option --partition/],
    [['read', 'prefix', '--partition', '-1'], /--partition/],
    [['write', 'in.arrow', '-p', '-1', '-o', 'x', '-k', 'id'], /option '-p' argument is ambiguous \(a value starting with '-' is written '--partitions=-XYZ'\)/],
    [['write', 'in.arrow', '--partitions=-1', '-o', 'x', '-k', 'id'], /--partitions must be an integer in \[1, 16777216\], got '-1'/],
    [['inspect'], /missing the shuffle output <prefix>/],
    [['demo', '--rows', '0'], /--rows must be an integer >= 1/],
    [['clean'], /give --output PREFIX, --dir DIR or --spill-dir DIR/],
    [['clean', 'prefix'], /unexpected argument 'prefix'/],
    [['write', 'in.arrow', '-p', '16777217', '-o', 'x', '-k', 'id'], /--partitions must be an integer in \[1, 16777216\]/],
    [['demo', '-p', '16777217'], /--partitions must be an integer in \[1, 16777216\]/],
    [['shuffle'], /unknown command 'shuffle'/],
    [['--frobnicate'], /unknown option '--frobnicate'/],
  ])('a wrong command line exits 2 with CS_INVALID_ARGUMENT: %j', async (argv, message) => {
    const run = await cli(...argv);
    expect(run.code).toBe(2);
    const line = errorLine(run);
    expect(line).toMatch(/^columnar-shuffle: error CS_INVALID_ARGUMENT: /);
    expect(line).toMatch(message);
    expect(line).toMatch(/see 'columnar-shuffle (\w+ )?--help'/);
  });

  test('no command at all prints the usage on stderr and exits 2', async () => {
    const run = await cli();
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(USAGE);
  });
});

// ---------------------------------------------------------------- help, version, progress

describe('help and version', () => {
  test.each([['--help'], ['-h'], ['help']])('%s prints the usage listing every command', async (flag) => {
    const run = await cli(flag);
    expect(run.code).toBe(0);
    for (const command of ['write', 'read', 'inspect', 'demo']) expect(run.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
    for (const line of run.stdout.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
  });

  test.each(['write', 'read', 'inspect', 'demo', 'clean'])('%s --help lists its options, in at most 80 columns', async (command) => {
    const run = await cli(command, '--help');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^Usage: columnar-shuffle ${command}`));
    expect(run.stdout).toMatch(/^  -h, --help/m);
    expect((await cli('help', command)).stdout).toBe(run.stdout);
    for (const line of run.stdout.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
  });

  test('--help wins over missing arguments', async () => {
    expect((await cli('write', '-h')).code).toBe(0);
  });

  test('--version prints the package version', async () => {
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const run = await cli('--version');
    expect(run).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
  });
});

describe('progress', () => {
  function fakeTerminal(isTTY: boolean) {
    const out = sink();
    Object.assign(out.stream, { isTTY, columns: 60 });
    return { stream: out.stream, text: () => Buffer.concat(out.chunks).toString() };
  }

  test('draws nothing when stderr is not a terminal', () => {
    const term = fakeTerminal(false);
    const progress = createProgress(term.stream, 'write');
    progress.update(0.5, 'half');
    progress.done();
    expect(term.text()).toBe('');
  });

  test('on a terminal: redraws at most every 100 ms, fits the width, and is erased at the end', () => {
    const term = fakeTerminal(true);
    let now = 0;
    const progress = createProgress(term.stream, 'write', () => now);
    progress.update(0.1, 'a');
    now = 50;
    progress.update(0.2, 'b'); // too soon: skipped
    now = 150;
    progress.update(0.5, 'c'.repeat(200));
    progress.done();
    const draws = term.text().split('\r').filter((s) => s.length > 0);
    expect(draws).toHaveLength(3);
    expect(draws[0]).toContain(render('write', 0.1, 'a'));
    expect(draws[1]!.replace('\x1b[K', '').length).toBeLessThan(60);
    expect(draws[2]).toBe('\x1b[K');
    expect(render('write', 0.5, 'x')).toBe('write [##########..........]  50%  x');
  });
});

// ---------------------------------------------------------------- the real binary

describe('the built binary', () => {
  beforeAll(async () => {
    await exec('npm', ['run', 'build', '--silent'], { cwd: ROOT });
  }, 120_000);

  test('node bin/columnar-shuffle.js --help prints the usage and exits 0', async () => {
    const { stdout } = await exec(process.execPath, ['bin/columnar-shuffle.js', '--help'], { cwd: ROOT });
    expect(stdout).toBe(USAGE);
  });

  test('exits 1 with one error line for a non-Arrow input, 2 for a bad command line', async () => {
    const bad = join(dir, 'bin-not-arrow.txt');
    await writeFile(bad, 'hello');
    const fail = await exec(process.execPath, ['bin/columnar-shuffle.js', 'write', bad, '-p', '2', '-k', 'id', '-o', join(dir, 'bin-out')], { cwd: ROOT }).catch((e: unknown) => e);
    expect(fail).toMatchObject({ code: 1, stdout: '' });
    expect((fail as { stderr: string }).stderr).toMatch(/^columnar-shuffle: error CS_INPUT_NOT_ARROW: [^\n]*\n$/);
    const usage = await exec(process.execPath, ['bin/columnar-shuffle.js', 'write', '--nope'], { cwd: ROOT }).catch((e: unknown) => e);
    expect(usage).toMatchObject({ code: 2 });
  });

  test('a stdout that cannot be written (a full disk: /dev/full) is one CS_IO line and exit 1, not a stack trace', async () => {
    const prefix = join(dir, 'for-full');
    json(await cli('write', join(dir, 'input.arrow'), '-p', '2', '-k', 'id', '-o', prefix, '--json'));
    for (const command of [`inspect '${prefix}'`, `read '${prefix}' -P 0`]) {
      const fail = await exec('bash', ['-c', `node bin/columnar-shuffle.js ${command} > /dev/full`], { cwd: ROOT }).catch((e: unknown) => e);
      expect(fail, command).toMatchObject({ code: 1 });
      expect((fail as { stderr: string }).stderr, command).toMatch(/^columnar-shuffle: error CS_IO: cannot write to stdout: ENOSPC[^\n]*\n$/);
    }
  });

  test.each(['SIGHUP', 'SIGTERM', 'SIGINT'] as const)('%s during a write stops it: exit 130, and no output, temporary or spill file is left', async (signal) => {
    const work = await mkdtemp(join(tmpdir(), 'cs-cli-signal-'));
    try {
      const input = join(work, 'in.arrows');
      await writeFile(input, tableToIPC(new Table(Array.from({ length: 40 }, (_, i) => narrowBatch(8192, i + 1))), 'stream'));
      await mkdir(join(work, 'spill'));
      const child = spawn(process.execPath, ['bin/columnar-shuffle.js', 'write', input, '-p', '100', '-k', 'key', '-o', join(work, 'out'), '--memory-limit', '1MiB', '--spill-dir', join(work, 'spill')], { cwd: ROOT });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
      // signal once the writer has spilled: its temporary data file and a spill file exist
      while ((await readdir(join(work, 'spill'))).length === 0) await new Promise((wait) => setTimeout(wait, 10));
      child.kill(signal);
      expect(await exited).toBe(130);
      expect(stderr).toMatch(/interrupted/);
      expect(await readdir(work)).toEqual(['in.arrows', 'spill']);
      expect(await readdir(join(work, 'spill'))).toEqual([]);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }, 60_000);

  test('read into a pipe that closes early (| head -c) is not an error', async () => {
    const prefix = join(dir, 'for-pipe');
    json(await cli('write', join(dir, 'input.arrow'), '-p', '1', '--partitioning', 'single', '-o', prefix, '--codec', 'none', '--json'));
    const { stdout, stderr } = await exec('bash', ['-c', `set -o pipefail; node bin/columnar-shuffle.js read '${prefix}' -P 0 | head -c 10 | wc -c`], { cwd: ROOT });
    expect(stdout.trim()).toBe('10');
    expect(stderr).toBe('');
  });
});

describe('an existing output', () => {
  test('write refuses it with CS_OUTPUT_EXISTS unless --overwrite is given', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cs-cli-ow-'));
    try {
      const input = join(dir, 'in.arrows');
      await writeFile(input, tableToIPC(new Table([batch(0, 3)]), 'stream'));
      const args = ['write', input, '--partitions', '2', '--partitioning', 'round-robin', '--output', join(dir, 'out')];
      expect((await cli(...args)).code).toBe(0);
      const refused = await cli(...args);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/CS_OUTPUT_EXISTS/);
      expect((await cli(...args, '--overwrite')).code).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('an interrupt (SIGINT, SIGTERM, SIGHUP)', () => {
  afterEach(() => vi.restoreAllMocks());

  test.each([
    ['hash', ShuffleWriter],
    ['sort', SortShuffleWriter],
  ] as const)('while the %s writer finishes (merging its spills) aborts it at once: exit 130, and no output, temporary or spill file is left (it used to commit anyway)', async (writer, Writer) => {
    const dir = await mkdtemp(join(tmpdir(), 'cs-cli-interrupt-'));
    try {
      const input = join(dir, 'in.arrows');
      const batches = Array.from({ length: 8 }, (_, i) => narrowBatch(8192, i + 1));
      await writeFile(input, tableToIPC(new Table(batches), 'stream'));
      await mkdir(join(dir, 'spill'));
      const interrupt = new AbortController();
      const finish = Writer.prototype.finish;
      let finishing = false;
      vi.spyOn(Writer.prototype, 'finish').mockImplementation(function (this: ShuffleWriter & SortShuffleWriter) {
        finishing = true;
        const result = finish.call(this);
        interrupt.abort(); // the signal comes once the merge is on its way
        return result;
      });
      const args = ['write', input, '-p', '50', '-k', 'key', '-o', join(dir, 'out'), '-w', writer, '--memory-limit', '1MiB', '--spill-dir', join(dir, 'spill')];
      const run = await cliWith({ signal: interrupt.signal }, ...args);
      expect(finishing).toBe(true);
      expect(run.code).toBe(130);
      expect(run.stderr).toMatch(/interrupted/);
      expect((await readdir(dir)).sort()).toEqual(['in.arrows', 'spill']);
      expect(await readdir(join(dir, 'spill'))).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('clean', () => {
  test("removes a killed write's temporary and spill files, and never a committed output or a file of another name", async () => {
    const work = await mkdtemp(join(tmpdir(), 'cs-cli-clean-'));
    try {
      await mkdir(join(work, 'spill'));
      const committed = join(work, 'done');
      json(await cli('write', join(dir, 'input.arrow'), '-p', '2', '-k', 'id', '-o', committed, '--json'));
      const leftovers = [join(work, 'killed.data.0123456789ab.tmp'), join(work, 'killed.index.0123456789ab.tmp'), join(work, 'spill', 'columnar-shuffle-spill-0123456789abcdef.tmp')];
      const others = [join(work, 'killed.data.notours.tmp'), join(work, 'spill', 'notes.txt'), join(work, 'done.data.0123456789ab.tmp')];
      for (const path of [...leftovers, ...others]) await writeFile(path, 'x');

      const run = await cli('clean', '--output', join(work, 'killed'), '--spill-dir', join(work, 'spill'), '--json');
      expect(JSON.parse(run.stdout)).toEqual({ removed: [...leftovers].sort() });
      expect((await readdir(work)).sort()).toEqual(['done.checksum.CRC32C', 'done.data', 'done.data.0123456789ab.tmp', 'done.index', 'killed.data.notours.tmp', 'spill']);
      expect(await readdir(join(work, 'spill'))).toEqual(['notes.txt']);

      const human = await cli('clean', '--dir', work);
      expect(human.stdout).toBe(`removed ${join(work, 'done.data.0123456789ab.tmp')}\n1 leftover file removed\n`);
      expect((await cli('inspect', committed)).code).toBe(0);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });

  test('a directory that does not exist is CS_FILE_NOT_FOUND naming it, exit 1', async () => {
    const run = await cli('clean', '--spill-dir', join(dir, 'no-such-spill-dir'));
    expect(run.code).toBe(1);
    expect(errorLine(run)).toMatch(/CS_FILE_NOT_FOUND: .*no-such-spill-dir/);
  });
});
