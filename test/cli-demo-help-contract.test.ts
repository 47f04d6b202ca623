/**
 * The `demo` command, its verifier, and the help texts, where cli.test.ts
 * left them open: what the demo does by default is what its help says, the
 * summary's numbers are the generated data's, a failed verification or an
 * interrupt exits non-zero and still removes the temporary directory, the
 * verifier refuses every kind of wrong shuffle it claims to catch, and every
 * help lists exactly the options its command accepts. Each CLI test runs
 * main() in-process with its own streams and AbortSignal.
 */
import { join } from 'node:path';
import { makeData, RecordBatch, Schema, Field, Struct, type Data } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { main } from '../src/cli/main.js';
import { CLEAN_HELP, DEMO_HELP, INSPECT_HELP, READ_HELP, USAGE, WRITE_HELP } from '../src/cli/help.js';
import { ShuffleVerifier } from '../src/cli/demo-verify.js';
import { batchBytes, NARROW_SCHEMA, narrowBatch } from '../src/cli/demo-data.js';
import { bytes, count } from '../src/cli/context.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { hashColumnInto, pmod, SPARK_HASH_SEED } from '../src/writer/murmur3.js';
import { openFilesUnder } from './support/open-files.js';
import { listFiles, tempDirWithOwnTmpdirEachTest } from './support/temp-dir.js';
import { textSink } from './support/text-sink.js';
import { cli, type Run } from './support/cli-run.js';


/** What `inspect --json` says about a shuffle output. */
async function inspect(prefix: string): Promise<{ rows: number; partitions: number; codec: string; writer: string; bytes: number; partitionRows: number[] }> {
  const run = await cli(['inspect', prefix, '--json']);
  expect(run).toMatchObject({ code: 0, stderr: '' });
  return JSON.parse(run.stdout);
}

/** One field of the demo summary (`  input       ...`). */
function summaryLine(run: Run, field: string): string {
  const line = run.stdout.split('\n').find((l) => l.startsWith(`  ${field} `));
  expect(line, `summary line '${field}' in:\n${run.stdout}`).toBeDefined();
  return line!.slice(field.length + 2).trim();
}

// the demo's temporary directory goes under os.tmpdir(): here, a directory of this test alone
const testDir = tempDirWithOwnTmpdirEachTest('cs-cli-demo-help-');
let dir = '';
beforeEach(() => {
  dir = testDir();
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** What the demo left in the temporary directory. */
const leftInTmp = () => listFiles(join(dir, 'tmp'));

// ---------------------------------------------------------------- demo: what it does

describe('demo', () => {
  test('with no options, the demo does what its help says: the default rows, partitions, codec and writer', async () => {
    const rows = Number(/--rows N\s+rows to generate \(default: (\d+)\)/.exec(DEMO_HELP)![1]);
    const partitions = Number(/--partitions N\s+number of partitions \(default: (\d+)\)/.exec(DEMO_HELP)![1]);
    const codec = /--codec CODEC\s+[\w |]+\(default: (\w+)\)/.exec(DEMO_HELP)![1]!;
    const writer = /--writer KIND\s+(\w+) \(\w+, default\)/.exec(DEMO_HELP)![1]!;
    const out = join(dir, 'defaults');
    const run = await cli(['demo', '--dir', out]);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toContain(`demo: ${count(rows)} rows`);
    expect(summaryLine(run, 'shuffle')).toBe(`hash(key) into ${count(partitions)} partitions, ${codec}, ${writer} writer`);
    expect(await inspect(join(out, 'demo'))).toMatchObject({ rows, partitions, codec, writer });
  });

  test('the demo generates batches of the size its help states: N rows are one batch, N + 1 are two', async () => {
    const batch = Number(/batches of (\d+) rows/.exec(DEMO_HELP)![1]);
    const one = await cli(['demo', '-n', String(batch), '-p', '2']);
    expect(one.code).toBe(0);
    expect(summaryLine(one, 'input')).toMatch(new RegExp(`^1 batch of up to ${count(batch)} rows, `));
    const two = await cli(['demo', '-n', String(batch + 1), '-p', '2']);
    expect(two.code).toBe(0);
    expect(summaryLine(two, 'input')).toMatch(new RegExp(`^2 batches of up to ${count(batch)} rows, `));
  });

  test('--rows N writes exactly N rows when N is not a multiple of the batch size', async () => {
    const out = join(dir, 'odd');
    const run = await cli(['demo', '-n', '10000', '-p', '3', '--dir', out]);
    expect(run.code).toBe(0);
    const output = await inspect(join(out, 'demo'));
    expect(output.rows).toBe(10_000);
    expect(output.partitionRows.reduce((a, b) => a + b, 0)).toBe(10_000);
  });

  test('the summary gives the Arrow bytes of exactly the generated batches, and the ratio of those to the bytes written', async () => {
    const out = join(dir, 'sizes');
    const run = await cli(['demo', '-n', '16384', '-p', '3', '--dir', out]); // lz4: a ratio far from 1, so that its inverse differs
    expect(run.code).toBe(0);
    const input = batchBytes(narrowBatch(8192, 1)) + batchBytes(narrowBatch(8192, 2));
    const written = (await inspect(join(out, 'demo'))).bytes;
    expect(summaryLine(run, 'input')).toBe(`2 batches of up to 8,192 rows, ${bytes(input)} of Arrow buffers`);
    expect(summaryLine(run, 'written')).toMatch(new RegExp(`^${bytes(written)} in [\\d,]+ record batches, compression ratio ${(input / written).toFixed(2)}x$`));
  });

  test('every generated batch is new data: no row of the demo appears twice', async () => {
    const out = join(dir, 'distinct');
    expect((await cli(['demo', '-n', '16384', '-p', '2', '--dir', out])).code).toBe(0);
    const reader = await ShuffleReader.open(join(out, 'demo'));
    const seen = new Set<string>();
    try {
      for (let p = 0; p < reader.numPartitions; p++) {
        for await (const batch of reader.readPartition(p)) {
          for (const row of batch) seen.add(JSON.stringify(row!.toJSON(), (_, v) => (typeof v === 'bigint' ? String(v) : v)));
        }
      }
    } finally {
      await reader.close();
    }
    expect(seen.size).toBe(16384);
  });

  test('--writer sort makes a sort-writer output, not only a summary that says so', async () => {
    const out = join(dir, 'sorted');
    const run = await cli(['demo', '-n', '3000', '-p', '5', '-w', 'sort', '--dir', out]);
    expect(run.code).toBe(0);
    expect(await inspect(join(out, 'demo'))).toMatchObject({ writer: 'sort', rows: 3000, partitions: 5 });
  });

  test('--dir says where the output was kept, a second demo into it replaces the first, and a run without --dir says nothing of it', async () => {
    const out = join(dir, 'kept');
    const first = await cli(['demo', '-n', '100', '-p', '2', '--dir', out]);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(`output kept: ${join(out, 'demo')}.data, .index, .checksum.CRC32C`);
    const second = await cli(['demo', '-n', '300', '-p', '4', '--dir', out]);
    expect(second).toMatchObject({ code: 0, stderr: '' });
    expect(await inspect(join(out, 'demo'))).toMatchObject({ rows: 300, partitions: 4 });
    const temporary = await cli(['demo', '-n', '100', '-p', '2']);
    expect(temporary.code).toBe(0);
    expect(temporary.stdout).not.toContain('output kept');
    expect(await leftInTmp()).toEqual([]);
  });

  test('--memory-limit with room to spare still prints the memory line: the limit, the peak, no spills', async () => {
    const run = await cli(['demo', '-n', '1000', '-p', '2', '--memory-limit', '1GiB']);
    expect(run.code).toBe(0);
    expect(summaryLine(run, 'memory')).toMatch(/^limit 1\.00 GiB, peak [\d.]+ [KM]iB, no spills$/);
  });

  test('the demo closes the output it read back: no file descriptor is left on it', async () => {
    const out = join(dir, 'closed');
    expect((await cli(['demo', '-n', '2000', '-p', '3', '--dir', out])).code).toBe(0);
    expect(openFilesUnder(out)).toEqual([]);
  });

  test('a failed verification: verdict FAILED with every problem listed, CS_CORRUPT_DATA naming them, exit 1, and the temporary directory is still removed', async () => {
    vi.spyOn(ShuffleVerifier.prototype, 'problems').mockReturnValue(['partition 3: something is off']);
    const run = await cli(['demo', '-n', '500', '-p', '4']);
    expect(run.code).toBe(1);
    expect(summaryLine(run, 'verdict')).toBe('FAILED');
    expect(run.stdout).toMatch(/^ {14}- partition 3: something is off$/m);
    expect(run.stderr).toBe('columnar-shuffle: error CS_CORRUPT_DATA: demo verification failed: partition 3: something is off\n');
    expect(await leftInTmp()).toEqual([]);
  });

  test('an interrupt while the demo reads back stops it: exit 130, the progress line erased, and the temporary directory removed', async () => {
    const interrupt = new AbortController();
    const addOutput = ShuffleVerifier.prototype.addOutput;
    vi.spyOn(ShuffleVerifier.prototype, 'addOutput').mockImplementation(function (this: ShuffleVerifier, partition, batch) {
      interrupt.abort(); // the signal comes while partition 0 is read back
      addOutput.call(this, partition, batch);
    });
    const terminal = textSink();
    Object.assign(terminal.stream, { isTTY: true, columns: 100 });
    const out = textSink();
    const code = await main(['demo', '-n', '3000', '-p', '4'], { stdout: out.stream, stderr: terminal.stream, signal: interrupt.signal });
    expect(code).toBe(130);
    expect(out.text()).toBe('');
    expect(terminal.text()).toMatch(/\r\x1b\[Kcolumnar-shuffle: interrupted\n$/);
    expect(await leftInTmp()).toEqual([]);
  });

  test('an interrupt while the demo generates and writes stops it: exit 130, and the temporary directory removed', async () => {
    const interrupt = new AbortController();
    const addInput = ShuffleVerifier.prototype.addInput;
    vi.spyOn(ShuffleVerifier.prototype, 'addInput').mockImplementation(function (this: ShuffleVerifier, batch) {
      addInput.call(this, batch);
      interrupt.abort();
    });
    const run = await cli(['demo', '-n', '30000', '-p', '4'], { signal: interrupt.signal });
    expect(run).toEqual({ code: 130, stdout: '', stderr: 'columnar-shuffle: interrupted\n' });
    expect(await leftInTmp()).toEqual([]);
  });

  test('the generated data is what the help describes: int64 key, float64, utf8 of ~20 bytes, int32 with 10 % nulls', () => {
    expect(/int64 key, float64, utf8 of ~20 bytes, int32\s+with 10 % nulls/.test(DEMO_HELP)).toBe(true);
    expect(NARROW_SCHEMA.fields.map((f) => `${f.name}: ${f.type}`)).toEqual(['key: Int64', 'amount: Float64', 'label: Utf8', 'quantity: Int32']);
    const batch = narrowBatch(100_000, 1);
    const labels = batch.getChild('label')!.data[0]!;
    const nullShare = batch.getChild('quantity')!.nullCount / batch.numRows;
    const labelBytes = labels.valueOffsets[batch.numRows]! / batch.numRows;
    expect(nullShare).toBeGreaterThan(0.09);
    expect(nullShare).toBeLessThan(0.11);
    expect(labelBytes).toBeGreaterThan(19.5);
    expect(labelBytes).toBeLessThan(20.5);
  });

  test('demo accepts every --writer and --codec its help lists, and refuses one it does not', async () => {
    const writers = /--writer KIND\s+(.*)/.exec(DEMO_HELP)![1]!.split('|').map((w) => w.trim().split(' ')[0]!);
    const codecs = /--codec CODEC\s+(.*?)\s*\(default/.exec(DEMO_HELP)![1]!.split('|').map((c) => c.trim());
    expect(writers.length).toBeGreaterThanOrEqual(2);
    expect(codecs.length).toBeGreaterThanOrEqual(3);
    for (const writer of writers) expect((await cli(['demo', '-n', '1', '-p', '1', '-w', writer])).code, writer).toBe(0);
    for (const codec of codecs) expect((await cli(['demo', '-n', '1', '-p', '1', '-c', codec])).code, codec).toBe(0);
    expect(writers).not.toContain('auto');
    expect((await cli(['demo', '-n', '1', '-w', 'auto'])).code).toBe(2);
  });
});

// ---------------------------------------------------------------- the verifier

/** Single-row slices of `batch` at `rows`: delivered one by one, a partition of several batches. */
function slices(batch: RecordBatch, rows: number[]): RecordBatch[] {
  return rows.map((i) => batch.slice(i, i + 1));
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** The partition each row's key hashes to. */
function partitionsOf(batch: RecordBatch, numPartitions: number, column = 'key'): number[] {
  const hashes = new Int32Array(batch.numRows).fill(SPARK_HASH_SEED);
  hashColumnInto(batch.getChild(column)!.data[0]!, hashes, column);
  return Array.from(hashes, (h) => pmod(h, numPartitions));
}

/** A verifier fed `input`, each of `output`'s [partition, batch], and asked with the partition counts read back. */
function verify(input: RecordBatch[], output: [number, RecordBatch][], numPartitions = 1, reported?: number[], key = 'key'): string[] {
  const verifier = new ShuffleVerifier(NARROW_SCHEMA, key, numPartitions);
  for (const batch of input) verifier.addInput(batch);
  const counts = new Array<number>(numPartitions).fill(0);
  for (const [p, batch] of output) {
    verifier.addOutput(p, batch);
    counts[p]! += batch.numRows;
  }
  return verifier.problems(reported ?? counts);
}

/** `batch` with one value of `column` at `row` changed (or, with `toNull`, made null). */
function withChange(batch: RecordBatch, column: number, row: number, toNull = false): RecordBatch {
  const children = batch.data.children.map((child: Data, c) => {
    if (c !== column) return child;
    if (toNull) {
      const bitmap = new Uint8Array((child.length + 7) >> 3).fill(0xff);
      if (child.nullBitmap) bitmap.set(child.nullBitmap.subarray(0, bitmap.length));
      expect(child.getValid(row)).toBe(true);
      bitmap[row >> 3]! &= ~(1 << (row & 7));
      return makeData({ type: child.type, length: child.length, nullCount: child.nullCount + 1, nullBitmap: bitmap, data: child.values } as never);
    }
    const values = child.values.slice();
    if (child.valueOffsets) values[child.valueOffsets[row]!] ^= 1; // a byte of the string
    else if (values instanceof BigInt64Array) values[row]! += 1n;
    else values[row]! += 1;
    return makeData({ type: child.type, length: child.length, nullCount: child.nullCount, nullBitmap: child.nullBitmap, valueOffsets: child.valueOffsets, data: values } as never);
  });
  return new RecordBatch(batch.schema, makeData({ type: new Struct(batch.schema.fields), length: batch.numRows, children }));
}

describe('the demo verifier', () => {
  const input = narrowBatch(100, 1);
  const all = (p = 0) => slices(input, range(100)).map((b) => [p, b] as [number, RecordBatch]);

  test('accepts a shuffle whose partitions arrive in many batches, and a partition-0 count the writer got wrong is named', () => {
    expect(verify([input], all())).toEqual([]);
    expect(verify([input.slice(0, 60), input.slice(60)], all())).toEqual([]);
    expect(verify([input], all(), 1, [101])).toEqual(['partition 0: the writer reports 101 rows, 100 were read back']);
    expect(verify([input], all(), 1, [99])).toEqual(['partition 0: the writer reports 99 rows, 100 were read back']);
  });

  test('refuses a duplicated row: more rows read back than written, and a fingerprint mismatch', () => {
    const problems = verify([input], [...all(), [0, input.slice(7, 8)]]);
    expect(problems).toEqual(['101 rows read back, 100 written', 'the rows read back differ from the rows written (fingerprint mismatch)']);
  });

  test('counts rows with their multiplicity: two copies of one row traded for two more of another is refused', () => {
    const a = input.slice(0, 1);
    const b = input.slice(1, 2);
    expect(verify([a, b, b], [[0, a], [0, a], [0, a]])).toEqual(['the rows read back differ from the rows written (fingerprint mismatch)']);
  });

  test.each([
    [0, 'key'],
    [1, 'amount'],
    [2, 'label'],
    [3, 'quantity'],
  ])('refuses one changed value in column %i (%s), also in a row its partition still fits', (column) => {
    const row = range(100).find((i) => input.data.children[3]!.getValid(i))!;
    expect(verify([input], [[0, withChange(input, column, row)]])).toEqual(['the rows read back differ from the rows written (fingerprint mismatch)']);
  });

  test('refuses a value that became null', () => {
    const row = range(100).find((i) => input.data.children[3]!.getValid(i))!;
    expect(verify([input], [[0, withChange(input, 3, row, true)]])).toEqual(['the rows read back differ from the rows written (fingerprint mismatch)']);
  });

  test('refuses a single row delivered to a partition numbered above the one its key hashes to, and names the first misplaced row', () => {
    const target = partitionsOf(input, 2);
    const low = target.indexOf(0); // rows that belong to partition 0
    const second = target.indexOf(0, low + 1);
    const hashes = new Int32Array(100).fill(SPARK_HASH_SEED);
    hashColumnInto(input.getChild('key')!.data[0]!, hashes, 'key');
    const deliver = (wrong: number[]) => range(100).map((i) => [wrong.includes(i) ? 1 : target[i]!, input.slice(i, i + 1)] as [number, RecordBatch]);
    expect(verify([input], deliver([]), 2)).toEqual([]);
    expect(verify([input], deliver([low]), 2)).toEqual([`1 rows in the wrong partition (a row with key hash ${hashes[low]} is in partition 1, expected 0)`]);
    expect(verify([input], deliver([low, second]), 2)).toEqual([`2 rows in the wrong partition (a row with key hash ${hashes[low]} is in partition 1, expected 0)`]);
  });

  test('refuses rows in a partition numbered below the one their key hashes to', () => {
    const target = partitionsOf(input, 3);
    const high = target.indexOf(2);
    const deliver = range(100).map((i) => [i === high ? 0 : target[i]!, input.slice(i, i + 1)] as [number, RecordBatch]);
    expect(verify([input], deliver, 3).join()).toMatch(/^1 rows in the wrong partition \(.* is in partition 0, expected 2\)$/);
  });

  test('partitions by the named key column wherever it is in the schema', () => {
    const target = partitionsOf(input, 3, 'label');
    const byLabel = range(100).map((i) => [target[i]!, input.slice(i, i + 1)] as [number, RecordBatch]);
    expect(verify([input], byLabel, 3, undefined, 'label')).toEqual([]);
    const byKey = partitionsOf(input, 3).map((p, i) => [p, input.slice(i, i + 1)] as [number, RecordBatch]);
    expect(verify([input], byKey, 3, undefined, 'label').join()).toMatch(/rows in the wrong partition/);
  });

  const renamed = new Schema(NARROW_SCHEMA.fields.map((f) => (f.name === 'amount' ? new Field('price', f.type, f.nullable) : f)));
  const other = new RecordBatch(renamed, makeData({ type: new Struct(renamed.fields), length: 100, children: input.data.children }));

  test('refuses a batch of another schema, naming its partition, and counts none of its rows', () => {
    const problems = verify([input], [[0, other]], 1, [100]);
    expect(problems).toHaveLength(4);
    expect(problems[0]).toBe('partition 0: the writer reports 100 rows, 0 were read back');
    expect(problems[1]).toMatch(/^partition 0 has schema .*price.*, expected .*amount/);
    expect(problems.slice(2)).toEqual(['0 rows read back, 100 written', 'the rows read back differ from the rows written (fingerprint mismatch)']);
  });

  test('of several batches of another schema, the problem names the first one\'s partition', () => {
    const problems = verify([input], [[0, other.slice(0, 50)], [1, other.slice(50)]], 2, [50, 50]);
    expect(problems.filter((p) => / has schema /.test(p))).toEqual([expect.stringMatching(/^partition 0 has schema /)]);
  });

  // Found by the sweep (latent: the demo's reader gives every batch the file's one schema): only the
  // first batch of another schema was set aside; a later one was verified as if it fitted, and one
  // without the key column made addOutput throw a TypeError instead of adding to the problems.
  test('a second batch without the key column is a verification problem, not a TypeError', () => {
    const keyless = new Schema(NARROW_SCHEMA.fields.slice(1));
    const batch = new RecordBatch(keyless, makeData({ type: new Struct(keyless.fields), length: 100, children: input.data.children.slice(1) }));
    const verifier = new ShuffleVerifier(NARROW_SCHEMA, 'key', 2);
    verifier.addInput(input);
    verifier.addOutput(0, batch.slice(0, 50));
    expect(() => verifier.addOutput(1, batch.slice(50))).not.toThrow();
    expect(verifier.problems([50, 50])).toContainEqual(expect.stringMatching(/^partition 0 has schema /));
    expect(verifier.problems([50, 50])).toContainEqual('0 rows read back, 100 written'); // neither batch was counted
  });
});

// ---------------------------------------------------------------- help and version

const HELPS: Record<string, string> = { write: WRITE_HELP, read: READ_HELP, inspect: INSPECT_HELP, demo: DEMO_HELP, clean: CLEAN_HELP };

/** The options a help lists: [short or '', long, takes a value]. */
function listedOptions(help: string): [string, string, boolean][] {
  const options = help.slice(help.indexOf('\nOptions:\n'));
  return [...options.matchAll(/^ {2}(?:-(\w), | {4})--([\w-]+)( \S)?/gm)].map((m) => [m[1] ?? '', m[2]!, m[3] !== undefined]);
}

describe('help and version', () => {
  test('the usage lists every command there is, --help and --version, and each command opens its own help', async () => {
    const run = await cli(['--help']);
    expect(run).toEqual({ code: 0, stdout: USAGE, stderr: '' });
    for (const command of [...Object.keys(HELPS), 'help']) expect(USAGE).toMatch(new RegExp(`^  ${command} `, 'm'));
    expect(USAGE).toMatch(/^ {2}-h, --help /m);
    expect(USAGE).toMatch(/^ {2}-V, --version /m);
    for (const [command, help] of Object.entries(HELPS)) {
      for (const argv of [['help', command], ['--help', command], ['-h', command], [command, '--help'], [command, '-h']]) {
        expect(await cli(argv), argv.join(' ')).toEqual({ code: 0, stdout: help, stderr: '' });
      }
    }
  });

  test('-V and --version both print the version on stdout', async () => {
    const version = await cli(['--version']);
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+\S*\n$/);
    expect(await cli(['-V'])).toEqual({ code: 0, stdout: version.stdout, stderr: '' });
  });

  test('the exit statuses the usage states are the ones the CLI returns', async () => {
    const states = /Exit status: (\d+) success, (\d+) the operation failed,\s+(\d+) a usage error .*?, (\d+) interrupted/s.exec(USAGE)!;
    const [ok, failed, usage, interrupted] = states.slice(1).map(Number);
    expect((await cli(['--version'])).code).toBe(ok);
    expect((await cli(['inspect', join(dir, 'nothing-here')])).code).toBe(failed);
    expect((await cli(['demo', '--frobnicate'])).code).toBe(usage);
    const stopped = new AbortController();
    stopped.abort();
    expect((await cli(['demo', '-n', '1', '-p', '1'], { signal: stopped.signal })).code).toBe(interrupted);
    expect(await leftInTmp()).toEqual([]);
  });

  const everyOption = [...new Set(Object.values(HELPS).flatMap((help) => listedOptions(help).map(([, long]) => long)))];

  test.each(Object.keys(HELPS))('%s --help lists exactly the options %s accepts, each with the short form the command takes', async (command) => {
    const listed = listedOptions(HELPS[command]!);
    expect(listed.map(([, long]) => long)).toContain('help');
    for (const [short, long, takesValue] of listed) {
      const run = await cli([command, `--${long}`]);
      expect(run.stderr, `${command} --${long}`).not.toMatch(/unknown option/);
      // a value option given without its value: parseArgs names it with its short form
      if (takesValue) expect(run.stderr, `${command} --${long}`).toContain(`option '${short ? `-${short}, ` : ''}--${long} <value>' argument missing`);
    }
    // an option another command has, and this help does not list, is not accepted either
    for (const long of everyOption.filter((o) => !listed.some(([, l]) => l === o))) {
      expect((await cli([command, `--${long}`])).stderr, `${command} --${long}`).toMatch(new RegExp(`unknown option '--${long}'`));
    }
  });

  // Found by the sweep: the usage lists `help [command]` among the commands, but `help help` was
  // "unknown command 'help'" (exit 2), and so was `help --help`, unlike every other command's --help.
  test('help help and help --help print the usage, as for every other command listed', async () => {
    expect(await cli(['help', 'help'])).toEqual({ code: 0, stdout: USAGE, stderr: '' });
    expect(await cli(['help', '--help'])).toEqual({ code: 0, stdout: USAGE, stderr: '' });
  });

  // --help --version was "unknown command '--version'" and --version --help "--version takes no arguments"
  // (both exit 2): a help asked for wins, in either order, as `write --bogus --help` prints write's help
  test.each([
    ['--help', '--version'],
    ['--version', '--help'],
    ['-V', '-h'],
    ['-h', '-V'],
    ['help', '--version'],
  ])('%s %s prints the usage (exit 0)', async (first, second) => {
    expect(await cli([first, second])).toEqual({ code: 0, stdout: USAGE, stderr: '' });
  });

  test('--version with anything but a help after it is still a usage error', async () => {
    expect((await cli(['--version', '--help', 'x'])).code).toBe(2);
    expect((await cli(['--version', 'write'])).code).toBe(2);
  });
});
