/**
 * The command line's contract where the main suite (cli.test.ts) left it
 * open: usage errors and their exit code, a terminal stdout, a stdout that
 * fails, signals, the output file of `read` and clean's count. Each test
 * runs the CLI's main() in-process with its own streams (and, but for the
 * signal tests, its own AbortSignal).
 */
import { getEventListeners } from 'node:events';
import { open, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Table, tableFromIPC, tableToIPC, vectorFromArray } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { main } from '../src/cli/main.js';
import { ShuffleWriter } from '../src/writer/shuffle-writer.js';
import { DEFAULT_WHOLE_PARTITION_BYTES, ShuffleReader } from '../src/reader/shuffle-reader.js';
import { frameOf } from '../src/cli/ipc-frames.js';
import { crc32cOf, encodeChecksums, encodeIndex, outputPaths } from '../src/format/output-files.js';
import { createProgress } from '../src/cli/progress.js';
import { openFilesUnder } from './support/open-files.js';
import { makeTempDir, listFiles, removeDir } from './support/temp-dir.js';
import { textSink } from './support/text-sink.js';
import { cli, ids } from './support/cli-run.js';


/** A stdout whose every write fails with `code` (EPIPE: the reader went away; ENOSPC: a full disk). */
function failingStdout(code: string): Writable {
  return new Writable({
    write(_chunk, _encoding, callback) {
      callback(Object.assign(new Error(`write ${code}`), { code, syscall: 'write', errno: -1 }));
    },
  });
}

let dir = '';
let input = '';
beforeEach(async () => {
  dir = await makeTempDir('cs-cli-contract-');
  input = join(dir, 'in.arrows');
  await writeFile(input, tableToIPC(ids(30, 10), 'stream'));
});
afterEach(async () => {
  vi.restoreAllMocks();
  await removeDir(dir);
});

/** A one-partition output of `table` (uncompressed, one batch per input batch); returns its prefix. */
async function shuffled(table: Table, name = 'out'): Promise<string> {
  const file = join(dir, `${name}-in.arrows`);
  await writeFile(file, tableToIPC(table, 'stream'));
  const prefix = join(dir, name);
  const run = await cli(['write', file, '-p', '1', '--partitioning', 'single', '--codec', 'none', '-o', prefix]);
  expect(run.code).toBe(0);
  return prefix;
}

describe('the command line', () => {
  test('after --, a --help is an argument, not a request for help', async () => {
    const run = await cli(['write', '-p', '2', '-k', 'id', '-o', join(dir, 'out'), '--', '--help']);
    expect(run.stdout).not.toMatch(/^Usage:/);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_FILE_NOT_FOUND: .*--help/);
  });

  test('an empty <input> is a usage error (exit 2), not a file to open', async () => {
    const run = await cli(['write', '', '-p', '2', '-k', 'id', '-o', join(dir, 'out')]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe("columnar-shuffle: error CS_INVALID_ARGUMENT: missing the <input> Arrow file (see 'columnar-shuffle write --help')\n");
  });

  test('--partitions may be exactly the maximum, 16777216: the command line is accepted (here the input is then missing)', async () => {
    const run = await cli(['write', join(dir, 'missing.arrows'), '-p', '16777216', '-k', 'id', '-o', join(dir, 'out')]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/CS_FILE_NOT_FOUND/);
  });

  test('a --key list with an empty name (-k id,) is a usage error naming it, exit 2', async () => {
    const run = await cli(['write', input, '-p', '2', '-k', 'id,', '-o', join(dir, 'out')]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/CS_INVALID_ARGUMENT: --key has an empty column name/);
    expect(await listFiles(dir)).toEqual(['in.arrows']);
  });

  test('--map-id 0 is accepted', async () => {
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out'), '--map-id', '0']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  });

  test('an error whose message spans lines (a path with a newline in it) is still reported on one line', async () => {
    const run = await cli(['write', join(dir, 'no\nsuch.arrows'), '-p', '2', '-k', 'id', '-o', join(dir, 'out')]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_FILE_NOT_FOUND: [^\n]*no such\.arrows[^\n]*\n$/);
  });

  test.skipIf(process.platform !== 'linux')('write closes its input file (no descriptor of it is left open)', async () => {
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out')]);
    expect(run.code).toBe(0);
    expect(openFilesUnder(input)).toEqual([]);
  });

  test("help of an unknown command is CS_INVALID_ARGUMENT, exit 2, pointing at 'columnar-shuffle --help'", async () => {
    const run = await cli(['help', 'shuffle']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe("columnar-shuffle: error CS_INVALID_ARGUMENT: unknown command 'shuffle' (see 'columnar-shuffle --help')\n");
  });

  test.each([
    [['help', 'write', 'read'], "help takes at most one command, got 'write' and 'read'"],
    [['--help', 'write', 'x'], "--help takes at most one command, got 'write' and 'x'"],
    [['--version', 'x'], "--version takes no arguments, got 'x'"],
    [['-V', 'write'], "-V takes no arguments, got 'write'"],
  ])('%j is a usage error, not the extra argument ignored: exit 2, nothing on stdout', async (argv, message) => {
    const run = await cli(argv);
    expect(run).toEqual({ code: 2, stdout: '', stderr: `columnar-shuffle: error CS_INVALID_ARGUMENT: ${message} (see 'columnar-shuffle --help')\n` });
  });
});

describe('read and its stdout', () => {
  test('refuses to write binary Arrow data to a terminal: exit 2, nothing on stdout', async () => {
    const prefix = await shuffled(ids(30, 10));
    const out = textSink();
    Object.assign(out.stream, { isTTY: true });
    const err = textSink();
    const code = await main(['read', prefix, '-P', '0'], { stdout: out.stream, stderr: err.stream, signal: new AbortController().signal });
    expect(code).toBe(2);
    expect(err.text()).toMatch(/CS_INVALID_ARGUMENT: refusing to write binary Arrow data to a terminal/);
    expect(out.text()).toBe('');
  });

  test('with --output, a terminal stdout is fine: the summary goes there, the data into the file', async () => {
    const prefix = await shuffled(ids(30, 10));
    const out = textSink();
    Object.assign(out.stream, { isTTY: true });
    const file = join(dir, 'p0.arrows');
    const code = await main(['read', prefix, '-P', '0', '-o', file], { stdout: out.stream, stderr: textSink().stream, signal: new AbortController().signal });
    expect(code).toBe(0);
    expect(out.text()).toMatch(/^partition 0: 30 rows in 1 batch -> /);
    expect(tableFromIPC(await readFile(file)).numRows).toBe(30);
  });

  test('a stdout closed by its reader (EPIPE) is not an error: exit 0, nothing on stderr', async () => {
    const prefix = await shuffled(ids(30, 10));
    const run = await cli(['read', prefix, '-P', '0'], { stdout: failingStdout('EPIPE') });
    expect(run).toMatchObject({ code: 0, stderr: '' });
  });

  test('a stdout that cannot be written (ENOSPC) is one CS_IO line, exit 1', async () => {
    const prefix = await shuffled(ids(30, 10));
    const run = await cli(['read', prefix, '-P', '0'], { stdout: failingStdout('ENOSPC') });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_IO: [^\n]*stdout[^\n]*ENOSPC[^\n]*\n$/);
  });

  test('read leaves the stdout it was given open: the caller may write after it', async () => {
    const prefix = await shuffled(ids(30, 10));
    const out = textSink();
    const code = await main(['read', prefix, '-P', '0'], { stdout: out.stream, stderr: textSink().stream, signal: new AbortController().signal });
    expect(code).toBe(0);
    expect(out.stream.writableEnded).toBe(false);
  });
});

describe('read --output', () => {
  test('a directory is refused as CS_IO "it is a directory", and nothing is created next to it', async () => {
    const prefix = await shuffled(ids(30, 10));
    const run = await cli(['read', prefix, '-P', '0', '-o', dir]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/CS_IO: cannot write the output file: it is a directory/);
    expect((await readdir(join(dir, '..'))).filter((f) => f.startsWith(`${dir.split('/').pop()}.`))).toEqual([]);
  });

  test('an interrupted read leaves an existing output file as it was, and no temporary file: exit 130', async () => {
    const prefix = await shuffled(ids(30, 10));
    const file = join(dir, 'p0.arrows');
    await writeFile(file, 'old contents');
    const interrupt = new AbortController();
    interrupt.abort();
    const run = await cli(['read', prefix, '-P', '0', '-o', file], { signal: interrupt.signal });
    expect(run.code).toBe(130);
    expect(run.stderr).toBe('columnar-shuffle: interrupted\n');
    expect(await readFile(file, 'utf8')).toBe('old contents');
    expect((await listFiles(dir)).filter((f) => f.startsWith('p0.arrows'))).toEqual(['p0.arrows']);
  });
});

describe('read --output and a second signal', () => {
  test('a second signal exits at once, and removes the temporary file the read was writing first', async () => {
    const prefix = await shuffled(ids(30, 10));
    const file = join(dir, 'p0.arrows');
    // a read that hands out one batch, then stalls until released
    let release: () => void = () => undefined;
    const stalled = new Promise<void>((resolve) => (release = resolve));
    const [batch] = tableFromIPC(tableToIPC(ids(10, 10), 'stream')).batches;
    vi.spyOn(ShuffleReader.prototype, 'readPartition').mockImplementation(async function* () {
      yield batch!;
      await stalled;
    });
    const exits: (number | string | null | undefined)[] = [];
    vi.spyOn(process, 'exit').mockImplementation((code) => {
      exits.push(code);
      return undefined as never;
    });
    const others = process.listeners('SIGINT');
    const running = main(['read', prefix, '-P', '0', '-o', file], { stdout: textSink().stream, stderr: textSink().stream });
    const [interrupt] = process.listeners('SIGINT').filter((listener) => !others.includes(listener));
    const temporary = async () => (await listFiles(dir)).filter((f) => f.startsWith('p0.arrows.') && f.endsWith('.tmp'));
    while ((await temporary()).length === 0) await new Promise((wait) => setTimeout(wait, 5));
    interrupt!('SIGINT');
    expect(await temporary()).toHaveLength(1); // the first signal asks the read to stop: it is stalled
    interrupt!('SIGINT');
    expect(exits).toEqual([130]);
    expect(await temporary()).toEqual([]); // removed before the exit, not by the read's own cleanup
    release();
    await running; // (a real exit ends here: what main does after a mocked one is no claim)
    expect(await listFiles(dir)).not.toContain('p0.arrows');
  });
});

describe('signals and listeners', () => {
  test('a write interrupted before its first batch writes no batch: exit 130, nothing left', async () => {
    const write = vi.spyOn(ShuffleWriter.prototype, 'write');
    const interrupt = new AbortController();
    interrupt.abort();
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out')], { signal: interrupt.signal });
    expect(run).toMatchObject({ code: 130, stderr: 'columnar-shuffle: interrupted\n' });
    expect(write).not.toHaveBeenCalled();
    expect(await listFiles(dir)).toEqual(['in.arrows']);
  });

  test('a write leaves no listener on the signal it was given', async () => {
    const controller = new AbortController();
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out')], { signal: controller.signal });
    expect(run.code).toBe(0);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  test('main without a signal of its own removes its SIGINT / SIGTERM / SIGHUP handlers when it returns', async () => {
    const before = ['SIGINT', 'SIGTERM', 'SIGHUP'].map((name) => process.listenerCount(name));
    const out = textSink();
    const code = await main(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out')], { stdout: out.stream, stderr: textSink().stream });
    expect(code).toBe(0);
    expect(['SIGINT', 'SIGTERM', 'SIGHUP'].map((name) => process.listenerCount(name))).toEqual(before);
  });

  test('a first SIGHUP interrupts a read blocked on its stdout, a second one exits 130 at once', async () => {
    const prefix = await shuffled(ids(200_000, 5_000)); // 40 batches of 40 KB: more than the pipe's buffers hold
    const pending: (() => void)[] = [];
    let blocked = true;
    let wrote: () => void = () => undefined;
    const firstWrite = new Promise<void>((resolve) => (wrote = resolve));
    const stdout = new Writable({
      write(_chunk, _encoding, callback) {
        wrote();
        if (blocked) pending.push(callback);
        else callback();
      },
    });
    const exits: (number | string | null | undefined)[] = [];
    vi.spyOn(process, 'exit').mockImplementation((code) => {
      exits.push(code);
      return undefined as never;
    });
    const err = textSink();
    const others = process.listeners('SIGHUP');
    const running = main(['read', prefix, '-P', '0'], { stdout, stderr: err.stream });
    // main's own handler, called as a SIGHUP would (not process.emit: other handlers of the test process stay out of it)
    const [hangUp] = process.listeners('SIGHUP').filter((listener) => !others.includes(listener));
    expect(hangUp).toBeTypeOf('function');
    await firstWrite;
    hangUp!('SIGHUP');
    expect(exits).toEqual([]);
    hangUp!('SIGHUP');
    expect(exits).toEqual([130]);
    blocked = false;
    for (const callback of pending.splice(0)) callback();
    expect(await running).toBe(130);
    expect(err.text()).toBe('columnar-shuffle: interrupted\n');
  });
});

describe('inspect', () => {
  test('an inspect interrupted before it starts reads no partition: exit 130, nothing on stdout', async () => {
    const prefix = await shuffled(ids(30, 10));
    const interrupt = new AbortController();
    interrupt.abort();
    const run = await cli(['inspect', prefix], { signal: interrupt.signal });
    expect(run).toMatchObject({ code: 130, stdout: '', stderr: 'columnar-shuffle: interrupted\n' });
  });

  test('a partition longer than a reader holds whole is verified over chunked reads and walked header by header, never held: the same summary', async () => {
    // one partition of 34 batch messages of 2^21 int32 values (8 MiB each): 272 MiB, over DEFAULT_WHOLE_PARTITION_BYTES
    const stream = tableToIPC(new Table({ v: vectorFromArray(Int32Array.from({ length: 2 ** 21 }, (_, i) => i)) }), 'stream');
    const schemaEnd = 8 + new DataView(stream.buffer, stream.byteOffset).getInt32(4, true);
    const pieces = [stream.subarray(0, schemaEnd), ...Array.from({ length: 34 }, () => stream.subarray(schemaEnd, stream.byteLength - 8)), stream.subarray(stream.byteLength - 8)];
    const length = pieces.reduce((sum, piece) => sum + piece.byteLength, 0);
    expect(length).toBeGreaterThan(DEFAULT_WHOLE_PARTITION_BYTES);
    const paths = outputPaths(join(dir, 'long'));
    await writeFile(paths.data, pieces);
    await writeFile(paths.index, encodeIndex([length]));
    await writeFile(paths.checksum, encodeChecksums([crc32cOf(pieces)]));
    const whole = vi.spyOn(ShuffleReader.prototype, 'partitionBytes');
    const reads: number[] = [];
    const ranged = ShuffleReader.prototype.readPartitionRange;
    vi.spyOn(ShuffleReader.prototype, 'readPartitionRange').mockImplementation(function (this: ShuffleReader, p, offset, bytes) {
      reads.push(bytes);
      return ranged.call(this, p, offset, bytes);
    });
    const run = await cli(['inspect', join(dir, 'long'), '--json']);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ writer: 'hash', codec: 'none', bytes: length, batches: 34, rows: 34 * 2 ** 21 });
    expect(whole).not.toHaveBeenCalled();
    expect(Math.max(...reads)).toBeLessThan(4096); // frames and metadata only
    // a damaged byte is found by the chunked verification
    const handle = await open(paths.data, 'r+');
    await handle.write(Uint8Array.of(0xaa), 0, 1, length - 100);
    await handle.close();
    const damaged = await cli(['inspect', join(dir, 'long')]);
    expect(damaged.code).toBe(1);
    expect(damaged.stderr).toMatch(/^columnar-shuffle: error CS_CHECKSUM_MISMATCH: .*partition 0/);
  }, 60_000);

  test('a message whose metadata runs past the end of its partition is CS_CORRUPT_DATA saying so', async () => {
    // one partition, checksums right: a continuation marker, a metadata length of 256, then only 8 bytes
    const partition = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x00, 0x01, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 7, 8);
    const paths = outputPaths(join(dir, 'cut'));
    await writeFile(paths.data, partition);
    await writeFile(paths.checksum, encodeChecksums([crc32cOf([partition])]));
    await writeFile(paths.index, encodeIndex([partition.byteLength]));
    const run = await cli(['inspect', join(dir, 'cut')]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_CORRUPT_DATA: invalid Arrow IPC stream: message metadata of 256 bytes runs past the end of the stream/);
  });
});

describe('clean', () => {
  test('with nothing to remove, says "0 leftover files removed"', async () => {
    const run = await cli(['clean', '--dir', dir]);
    expect(run).toMatchObject({ code: 0, stdout: '0 leftover files removed\n', stderr: '' });
  });
});

describe('progress and IPC frames', () => {
  test('on a terminal of unknown width (columns 0), the bar is drawn 80 columns wide', () => {
    const term = textSink();
    Object.assign(term.stream, { isTTY: true, columns: 0 });
    createProgress(term.stream, 'write', () => 0).update(0.5, 'x'.repeat(200));
    const line = term.text().replace('\r', '').replace('\x1b[K', '');
    expect(line).toMatch(/^write \[#{10}\.{10}\]  50%  x+$/);
    expect(line).toHaveLength(79);
  });

  test('a forced update (a new phase) is drawn even within 100 ms of the last one', () => {
    const term = textSink();
    Object.assign(term.stream, { isTTY: true, columns: 80 });
    let now = 0;
    const progress = createProgress(term.stream, 'write', () => now);
    progress.update(0.5, 'reading');
    now = 10;
    progress.update(null, 'writing partitions', true);
    expect(term.text().split('\r').filter((s) => s.length > 0)).toEqual([expect.stringContaining('reading'), 'write  writing partitions\x1b[K']);
  });

  test('on a terminal, done() after no draw writes nothing (no stray erase sequence)', () => {
    const term = textSink();
    Object.assign(term.stream, { isTTY: true, columns: 80 });
    createProgress(term.stream, 'write').done();
    expect(term.text()).toBe('');
  });

  test('fewer than 4 bytes are a truncated prefix, not a RangeError', () => {
    expect(frameOf(Uint8Array.of(0xff, 0xff, 0xff))).toEqual({ kind: 'invalid', reason: 'truncated message prefix' });
  });

  test('a continuation marker followed by a metadata length of -1 is an invalid frame', () => {
    expect(frameOf(new Uint8Array(8).fill(0xff))).toEqual({ kind: 'invalid', reason: 'negative metadata length -1' });
  });
});
