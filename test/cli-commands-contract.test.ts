/**
 * The command line's commands (write, read, inspect, clean), their option
 * parsing, progress bar and input reader, where a mutation sweep of src/cli
 * (docs/RELIABILITY.md, "The tests notice a broken line: mutation sweeps";
 * scratch/mut-z/REPORT.md) found the tests silent: but for "read -o FILE that
 * fails part-way" (a claim whose mutants the other tests fail only through an
 * interrupt), each test fails against at least one mutant the other CLI tests
 * let through. Three pin defects found while reading the commands, since
 * fixed (read -o onto a FIFO no one reads could not be interrupted; read -o
 * through a dangling symbolic link replaced the link; read -o over a private
 * file made it world-readable). The CLI runs in-process (main()
 * with its own streams and AbortSignal), as in cli-contract.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { constants } from 'node:fs';
import { chmod, lstat, mkdir, open, readdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Field, Int32, Int64, Schema, Table, tableFromIPC, tableToIPC, vectorFromArray, RecordBatch } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { main } from '../src/cli/main.js';
import { parseByteSize } from '../src/cli/args.js';
import { createProgress, render } from '../src/cli/progress.js';
import { ShuffleError } from '../src/errors.js';
import { crc32cOf, encodeChecksums, encodeIndex, outputPaths } from '../src/format/output-files.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { cli, ids } from './support/cli-run.js';
import { makeTempDir, listFiles, removeDir } from './support/temp-dir.js';
import { textSink } from './support/text-sink.js';

/** A stream a terminal would be: isTTY, 80 columns. */
function terminal(): ReturnType<typeof textSink> {
  const sink = textSink();
  Object.assign(sink.stream, { isTTY: true, columns: 80 });
  return sink;
}

let dir = '';
let input = '';
beforeEach(async () => {
  dir = await makeTempDir('cs-cli-commands-');
  input = join(dir, 'in.arrows');
  await writeFile(input, tableToIPC(ids(30, 10), 'stream'));
});
afterEach(async () => {
  vi.restoreAllMocks();
  await removeDir(dir);
});

/** Writes the bounds file of one key column `name` (Int64 values) and returns its path. */
async function boundsFile(values: bigint[], name = 'id'): Promise<string> {
  const file = join(dir, `bounds-${values.join('_')}.arrows`);
  const table = values.length === 0
    ? new Table(new Schema([new Field(name, new Int64(), true)]))
    : new Table({ [name]: vectorFromArray(BigInt64Array.from(values)) });
  await writeFile(file, tableToIPC(table, 'stream'));
  return file;
}

/** The one JSON object a successful --json run printed. */
function jsonOf(run: { code: number; stdout: string; stderr: string }): Record<string, unknown> {
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

describe('option values', () => {
  test('--partitions 1_0 (an underscore between digits) is 10 partitions', async () => {
    const written = jsonOf(await cli(['write', input, '-p', '1_0', '-k', 'id', '-o', join(dir, 'out'), '--json']));
    expect(written.partitions).toBe(10);
  });

  test('a --memory-limit fraction of a byte is rounded down, never up: 1.7KiB is 1740 bytes, 1.9B is 1 byte', () => {
    expect(parseByteSize('1.7KiB')).toBe(1740); // 1740.8
    expect(parseByteSize('1.9B')).toBe(1);
    expect(parseByteSize('1048576.5B')).toBe(1048576);
  });

});

describe('errors that are not ShuffleErrors', () => {
  test('an untyped error is one line "columnar-shuffle: error: ...", its line breaks folded, exit 1', async () => {
    vi.spyOn(ShuffleReader, 'open').mockRejectedValue(new Error('first line\n  second line'));
    const run = await cli(['inspect', join(dir, 'out')]);
    expect(run).toEqual({ code: 1, stdout: '', stderr: 'columnar-shuffle: error: first line second line\n' });
  });
});

describe('the progress bar', () => {
  test('is redrawn exactly 100 ms after the last draw', () => {
    const term = terminal();
    let now = 0;
    const progress = createProgress(term.stream, 'write', () => now);
    progress.update(0.1, 'a');
    now = 100;
    progress.update(0.2, 'b');
    expect(term.text().split('\r').filter((s) => s.length > 0)).toHaveLength(2);
  });

  test('done() twice erases the line once', () => {
    const term = terminal();
    const progress = createProgress(term.stream, 'write', () => 0);
    progress.update(0.5, 'x');
    progress.done();
    progress.done();
    expect(term.text().split('\r\x1b[K')).toHaveLength(2);
  });

  test('after done(), the next update is drawn at once, not 100 ms later', () => {
    const term = terminal();
    const progress = createProgress(term.stream, 'write', () => 0);
    progress.update(0.5, 'first');
    progress.done();
    progress.update(0.1, 'second');
    expect(term.text()).toContain('second');
  });

  test('a fraction outside [0, 1] is drawn as 0% or 100%, not a broken bar', () => {
    expect(render('write', 1.5, 'x')).toBe('write [####################] 100%  x');
    expect(render('write', -0.5, 'x')).toBe('write [....................]   0%  x');
  });

  test('a write on a terminal draws the bar on stderr and erases it at the end; stdout has only the summary', async () => {
    const err = terminal();
    const out = textSink();
    const code = await main(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out')], { stdout: out.stream, stderr: err.stream, signal: new AbortController().signal });
    expect(code).toBe(0);
    expect(err.text()).toContain('write [');
    expect(err.text().endsWith('\r\x1b[K')).toBe(true);
    expect(out.text()).not.toContain('\r');
  });
});

describe('write', () => {
  test('a missing --spill-dir is named before the input is opened (here the input is missing too)', async () => {
    const run = await cli(['write', join(dir, 'missing.arrows'), '-p', '2', '-k', 'id', '-o', join(dir, 'out'), '--spill-dir', join(dir, 'no-spill')]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_FILE_NOT_FOUND: .*no-spill/);
    expect(run.stderr).not.toContain('missing.arrows');
  });

  test('a bounds file with a schema and no rows gives one partition, holding every row', async () => {
    const bounds = await boundsFile([]);
    const written = jsonOf(await cli(['write', input, '-p', '1', '-k', 'id', '--partitioning', 'range', '--bounds', bounds, '-o', join(dir, 'out'), '--json']));
    expect(written.partitionRows).toEqual([30]);
  });

  test('a range key :nulls-last puts the null keys in the last partition, :nulls-first in the first', async () => {
    const file = join(dir, 'nulls.arrows');
    await writeFile(file, tableToIPC(new Table({ k: vectorFromArray([null, 1, 5, null], new Int32()) }), 'stream'));
    const bounds = join(dir, 'k-bounds.arrows');
    await writeFile(bounds, tableToIPC(new Table({ k: vectorFromArray([3], new Int32()) }), 'stream'));
    const run = (order: string) => cli(['write', file, '-p', '2', '-k', `k:${order}`, '--partitioning', 'range', '--bounds', bounds, '-o', join(dir, order), '--json']);
    expect(jsonOf(await run('nulls-last')).partitionRows).toEqual([1, 3]);
    expect(jsonOf(await run('nulls-first')).partitionRows).toEqual([3, 1]);
  });

  test('an input of no batches, interrupted before it starts, writes nothing: exit 130', async () => {
    const empty = join(dir, 'empty.arrows');
    await writeFile(empty, tableToIPC(new Table(new Schema([new Field('id', new Int64(), true)])), 'stream'));
    const interrupt = new AbortController();
    interrupt.abort();
    const run = await cli(['write', empty, '-p', '2', '-k', 'id', '-o', join(dir, 'out')], { signal: interrupt.signal });
    expect(run).toMatchObject({ code: 130, stdout: '', stderr: 'columnar-shuffle: interrupted\n' });
    expect(await listFiles(dir)).toEqual(['empty.arrows', 'in.arrows']);
  });

  test('the summary of a range write names the keys (desc ones so) and the bounds file, and the fewest and most rows of a non-empty partition', async () => {
    const bounds = await boundsFile([20n]);
    const run = await cli(['write', input, '-p', '2', '-k', 'id:desc', '--partitioning', 'range', '--bounds', bounds, '-o', join(dir, 'out')]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`into 2 partitions by range(id desc) with the bounds of ${bounds}\n`);
    expect(run.stdout).toContain('\n  2 non-empty partitions, 10 to 20 rows each\n');
  });

  test('with --memory-limit and no spill, the summary says "no spills", the peak and the limit given (not "half the system memory")', async () => {
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out'), '--memory-limit', '64MiB']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/\n {2}no spills; peak memory [0-9.]+ (B|KiB|MiB) \(limit 64\.0 MiB\)\n/);
  });

});

describe('read', () => {
  test('--partition 1 of a one-partition output is a usage error saying it has only partition 0, exit 2', async () => {
    const prefix = join(dir, 'one');
    expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const run = await cli(['read', prefix, '-P', '1']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(`columnar-shuffle: error CS_INVALID_ARGUMENT: --partition 1 does not exist: ${prefix} has only partition 0 (see 'columnar-shuffle read --help')\n`);
  });

  /** A reader whose partition gives one batch, then fails as a damaged one does. */
  function failingPartition(): void {
    const [batch] = tableFromIPC(tableToIPC(ids(10), 'stream')).batches;
    vi.spyOn(ShuffleReader.prototype, 'readPartition').mockImplementation(async function* () {
      yield batch as RecordBatch;
      throw new ShuffleError('CS_CORRUPT_DATA', 'damaged on purpose', { partition: 0 });
    });
  }

  test('read -o FILE that fails part-way is its own error, and leaves FILE as it was and no temporary file', async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const file = join(dir, 'p0.arrows');
    await writeFile(file, 'old contents');
    failingPartition();
    const run = await cli(['read', prefix, '-P', '0', '-o', file]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_CORRUPT_DATA: damaged on purpose/);
    expect(await readFile(file, 'utf8')).toBe('old contents');
    expect((await readdir(dir)).filter((f) => f.startsWith('p0.arrows'))).toEqual(['p0.arrows']);
  });

  test('read -o FILE whose rename into place fails (FILE became a directory meanwhile) is CS_IO naming FILE, and no temporary file is left', async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const file = join(dir, 'p0.arrows');
    const [batch] = tableFromIPC(tableToIPC(ids(10), 'stream')).batches;
    vi.spyOn(ShuffleReader.prototype, 'readPartition').mockImplementation(async function* () {
      yield batch as RecordBatch;
      await mkdir(file); // after the output file was checked, before the rename
    });
    const run = await cli(['read', prefix, '-P', '0', '-o', file]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_IO: cannot rename the output file into place: .*\(file .*p0\.arrows\)\n$/);
    expect((await readdir(dir)).filter((f) => f.startsWith('p0.arrows'))).toEqual(['p0.arrows']);
  });
});

describe('inspect', () => {
  test('an output whose partition 0 is empty: the schema and codec are those of the later partitions', async () => {
    const bounds = await boundsFile([-1n]);
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '2', '-k', 'id', '--partitioning', 'range', '--bounds', bounds, '-o', prefix])).code).toBe(0);
    const inspected = jsonOf(await cli(['inspect', prefix, '--json']));
    expect(inspected).toMatchObject({ codec: 'lz4', schema: [{ name: 'id', type: 'Int64' }], partitionRows: [0, 30] });
    const text = await cli(['inspect', prefix]);
    expect(text.stdout).toMatch(/^codec {11}lz4$/m);
    expect(text.stdout).toMatch(/^schema {10}id: Int64/m);
  });

  test('an output whose partitions come from both writers is reported as "mixed"', async () => {
    const one = async (writer: string) => {
      const prefix = join(dir, writer);
      expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '--writer', writer, '-o', prefix])).code).toBe(0);
      return readFile(outputPaths(prefix).data);
    };
    const [hash, sort] = [await one('hash'), await one('sort')];
    const paths = outputPaths(join(dir, 'mixed'));
    await writeFile(paths.data, Buffer.concat([hash, sort]));
    await writeFile(paths.index, encodeIndex([hash.byteLength, sort.byteLength]));
    await writeFile(paths.checksum, encodeChecksums([crc32cOf([hash]), crc32cOf([sort])]));
    expect(jsonOf(await cli(['inspect', join(dir, 'mixed'), '--json']))).toMatchObject({ writer: 'mixed', rows: 60 });
    expect((await cli(['inspect', join(dir, 'mixed')])).stdout).toMatch(/^writer {10}mixed \(hash and sort partitions\)$/m);
  });

  test('a damaged header in partition 1 (its checksum right) is an error naming partition 1', async () => {
    const partition = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x00, 0x01, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 7, 8);
    const paths = outputPaths(join(dir, 'cut'));
    await writeFile(paths.data, partition);
    await writeFile(paths.checksum, encodeChecksums([crc32cOf([]), crc32cOf([partition])]));
    await writeFile(paths.index, encodeIndex([0, partition.byteLength]));
    const run = await cli(['inspect', join(dir, 'cut')]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_CORRUPT_DATA: .*partition 1[,)]/);
  });
});

describe('read -o onto a FIFO no one reads', () => {
  // A defect found by this sweep (not a mutant): a FIFO was opened with a blocking open(path, 'w'), which
  // waits in Node's thread pool until some process opens the FIFO for reading. The read could not be
  // interrupted meanwhile: a first signal aborted ctx.signal, which nothing waited on; a second one called
  // process.exit(130), which waited for the blocked thread: by hand, `columnar-shuffle read P -P 0 -o FIFO`
  // ignored SIGINT twice and had to be killed (README: a signal "stops a command at once"). It is now opened
  // non-blocking, retried until a reader comes; the run below ends with 130 within a second of its signal.
  test('a signal ends the read at once (exit 130) while the FIFO has no reader', async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    const interrupt = new AbortController();
    const running = cli(['read', prefix, '-P', '0', '-o', fifo], { signal: interrupt.signal });
    try {
      await new Promise((wait) => setTimeout(wait, 100));
      interrupt.abort();
      const outcome = await Promise.race([running, new Promise((wait) => setTimeout(() => wait('still blocked'), 1000))]);
      expect(outcome).toMatchObject({ code: 130 });
    } finally {
      // a reader for the FIFO (opened non-blocking: it never waits itself) releases the blocked open(), so that
      // the test leaves no thread blocked; the read, aborted, then ends (130) before it writes a batch
      const reader = await open(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
      await running;
      await reader.close();
    }
  });
});

describe('read -o through a symbolic link to a file not there yet', () => {
  // A defect found by this sweep (not a mutant): the link was resolved with realpath(), which fails for a link
  // whose target does not exist yet, and the write then fell back to the link's own path: the atomic write
  // renamed a regular file over the link, and the target was never written. README: "a symbolic link's target
  // is written"; a shell's `> link` and `cp x link` create the target and keep the link.
  test('the link stays a link and the file it names is created with the partition', async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const target = join(dir, 'target.arrows');
    const link = join(dir, 'link.arrows');
    await symlink(target, link);
    const run = await cli(['read', prefix, '-P', '0', '-o', link]);
    expect(run.code).toBe(0);
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect(tableFromIPC(await readFile(target)).numRows).toBe(30);
  });
});

describe('read -o keeps what the user set up', () => {
  test('over an existing file, its permissions stay: a private file stays private', async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const file = join(dir, 'private.arrows');
    await writeFile(file, 'old', { mode: 0o600 });
    await chmod(file, 0o600); // (whatever the umask)
    expect((await cli(['read', prefix, '-P', '0', '-o', file])).code).toBe(0);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(tableFromIPC(await readFile(file)).numRows).toBe(30);
  });

  test('onto a FIFO, a partition many times what the pipe holds arrives whole, read at any pace', async () => {
    const rows = 200_000; // 1.6 MB of int64 ids: a pipe holds 64 KiB
    await writeFile(input, tableToIPC(ids(rows, 50_000), 'stream'));
    const prefix = join(dir, 'big');
    expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const fifo = join(dir, 'big.fifo');
    execFileSync('mkfifo', [fifo]);
    const running = cli(['read', prefix, '-P', '0', '-o', fifo]);
    await new Promise((wait) => setTimeout(wait, 120)); // the reader comes late: the writer waits for it
    const reader = await open(fifo, constants.O_RDONLY);
    const chunks: Buffer[] = [];
    for await (const chunk of reader.createReadStream()) {
      chunks.push(chunk as Buffer);
      if (chunks.length % 8 === 0) await new Promise((wait) => setTimeout(wait, 2)); // and reads slowly
    }
    expect((await running).code).toBe(0);
    const table = tableFromIPC(Buffer.concat(chunks));
    expect(table.numRows).toBe(rows);
    expect(table.getChild('id')!.get(rows - 1)).toBe(BigInt(rows - 1));
  });
});

test('the summary of a write into one partition says so in the singular', async () => {
  const run = await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', join(dir, 'one')]);
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(/ into 1 partition by single\n/);
  expect(run.stdout).toContain('\n  1 non-empty partition, 30 to 30 rows each\n');
});

test('numbers group their digits with single underscores, as JavaScript does: 1_000 is taken, _2, 2_ and 1__0 are usage errors', async () => {
  expect((await cli(['write', input, '-p', '1_0', '--partitioning', 'round-robin', '-o', join(dir, 'grouped')])).code).toBe(0);
  for (const text of ['_2', '2_', '1__0']) {
    const run = await cli(['write', input, '-p', text, '--partitioning', 'round-robin', '-o', join(dir, 'bad')]);
    expect(run.code, text).toBe(2);
    expect(run.stderr, text).toContain(`--partitions must be an integer in [1, `);
  }
  expect(parseByteSize('1_024KiB')).toBe(1024 * 1024);
  for (const text of ['1__0MiB', '1_MiB', '_1MiB']) expect(parseByteSize(text), text).toBeNull();
});
