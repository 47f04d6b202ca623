/**
 * The command line's commands, a second pass: claims a second mutation sweep
 * of src/cli (docs/RELIABILITY.md, "The tests notice a broken line: mutation
 * sweeps"; scratch/mut-d3/REPORT.md) found no test making; each test fails
 * against at least one mutant the other CLI tests let through (W13 and W14,
 * the default limit's sizing, they fail only when tsc refuses the import the
 * mutant leaves unused). The CLI runs
 * in-process (main() with its own streams and AbortSignal), as in
 * cli-commands-contract.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { lstat, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Field, Int64, Schema, Table, tableFromIPC, tableToIPC, Utf8, vectorFromArray, type RecordBatch } from 'apache-arrow';
import { main } from '../src/cli/main.js';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { bytes, describeSchema, roundMs } from '../src/cli/context.js';
import { openArrowInput } from '../src/cli/input.js';
import { render } from '../src/cli/progress.js';
import { encodeRecordBatchMessage, encodeSchemaMessage, END_OF_STREAM } from '../src/format/ipc-message.js';
import { crc32cOf, encodeChecksums, encodeIndex, outputPaths } from '../src/format/output-files.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { MAX_STAGING_BYTES } from '../src/writer/input-staging.js';
import { ShuffleWriter } from '../src/writer/shuffle-writer.js';
import { UNBOUNDED_MEM_LIMIT } from '../src/writer/writer-options.js';
import { cli, ids } from './support/cli-run.js';
import { openFilesUnder } from './support/open-files.js';
import { textSink } from './support/text-sink.js';
import { listFiles, makeTempDir, removeDir } from './support/temp-dir.js';

let dir = '';
let input = '';
beforeEach(async () => {
  dir = await makeTempDir('cs-cli-second-');
  input = join(dir, 'in.arrows');
  await writeFile(input, tableToIPC(ids(30, 10), 'stream'));
});
afterEach(async () => {
  vi.restoreAllMocks();
  await removeDir(dir);
});

/** The one JSON object a successful --json run printed. */
function jsonOf(run: { code: number; stdout: string; stderr: string }): Record<string, unknown> {
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

describe('main', () => {
  test('given a signal of its own, main installs no SIGINT / SIGTERM / SIGHUP handler while the command runs', async () => {
    const before = SIGNALS.map((name) => process.listenerCount(name));
    let during: number[] = [];
    vi.spyOn(ShuffleReader, 'open').mockImplementation(async () => {
      during = SIGNALS.map((name) => process.listenerCount(name));
      throw new Error('stop here');
    });
    expect((await cli(['inspect', join(dir, 'out')])).code).toBe(1);
    expect(during).toEqual(before);
  });
});

describe('the words and numbers of the output', () => {
  test('milliseconds in --json are rounded to a tenth, not to a whole one', () => {
    expect(roundMs(1234.56)).toBe(1234.6);
    expect(roundMs(0.04)).toBe(0);
  });

  test('a schema is described with "not null" on the fields that cannot be null, and nothing on those that can', () => {
    const schema = new Schema([new Field('id', new Int64(), false), new Field('label', new Utf8(), true)]);
    expect(describeSchema(schema)).toBe('id: Int64 not null, label: Utf8');
  });

  test("inspect's schema line says a column that cannot be null is not null", async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '2', '-k', 'id', '-o', prefix])).code).toBe(0);
    expect((await cli(['inspect', prefix])).stdout).toMatch(/^schema {10}id: Int64 not null$/m);
  });
});

describe('the progress bar', () => {
  test('fills the nearest whole number of its 20 cells: 3% fills one, 98% all twenty', () => {
    expect(render('write', 0.03, 'x')).toBe(`write [#${'.'.repeat(19)}]   3%  x`);
    expect(render('write', 0.98, 'x')).toBe(`write [${'#'.repeat(20)}]  98%  x`);
  });

  test('shows a percentage rounded down: 99.9% done is 99%, 100% only at the end', () => {
    expect(render('write', 0.999, 'x')).toBe(`write [${'#'.repeat(20)}]  99%  x`);
    expect(render('write', 1, 'x')).toBe(`write [${'#'.repeat(20)}] 100%  x`);
  });
});

describe('option values', () => {
  test('--partitions takes digits grouped by more than one underscore: 1_0_0 is 100', async () => {
    const written = jsonOf(await cli(['write', input, '-p', '1_0_0', '--partitioning', 'round-robin', '-o', join(dir, 'out'), '--json']));
    expect(written.partitions).toBe(100);
  });
});

describe.runIf(existsSync('/proc/self/fd'))('a command leaves no file open', () => {
  test('write closes its input and its bounds file', async () => {
    const bounds = join(dir, 'bounds.arrows');
    await writeFile(bounds, tableToIPC(ids(1).slice(0, 1), 'stream'));
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '--partitioning', 'range', '--bounds', bounds, '-o', join(dir, 'out')]);
    expect(run.code).toBe(0);
    expect(openFilesUnder(dir)).toEqual([]);
  });

  test('write of an input that is not Arrow closes it', async () => {
    const text = join(dir, 'notes.txt');
    await writeFile(text, 'not arrow at all');
    expect((await cli(['write', text, '-p', '2', '-k', 'id', '-o', join(dir, 'out')])).code).toBe(1);
    expect(openFilesUnder(dir)).toEqual([]);
  });

  test('read and inspect close the shuffle output', async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '2', '-k', 'id', '-o', prefix])).code).toBe(0);
    expect((await cli(['read', prefix, '-P', '0', '-o', join(dir, 'p0.arrows')])).code).toBe(0);
    expect(openFilesUnder(dir)).toEqual([]);
    expect((await cli(['inspect', prefix])).code).toBe(0);
    expect(openFilesUnder(dir)).toEqual([]);
  });
});

describe('the memory write gives its writer', () => {
  const GiB = 1024 ** 3;

  test('without --memory-limit, the writer is sized as without a limit (1 GiB, staging on) however much memory half the machine is', async () => {
    const create = vi.spyOn(ShuffleWriter, 'create');
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out'), '--json'], { systemMemory: 16 * GiB });
    expect(jsonOf(run).memoryLimit).toBe(8 * GiB);
    expect(create).toHaveBeenCalledTimes(1);
    expect(create.mock.calls[0]![0]).toMatchObject({ memLimit: UNBOUNDED_MEM_LIMIT, stagingBytes: MAX_STAGING_BYTES });
  });

  test('without --memory-limit, on a machine whose half is under 1 GiB, the writer is sized for that half', async () => {
    const create = vi.spyOn(ShuffleWriter, 'create');
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out'), '--json'], { systemMemory: GiB });
    expect(jsonOf(run).memoryLimit).toBe(GiB / 2);
    expect(create.mock.calls[0]![0]).toMatchObject({ memLimit: GiB / 2, stagingBytes: MAX_STAGING_BYTES });
  });

  test('with --memory-limit, the writer sizes its buffers and staging by that limit (neither is set)', async () => {
    const create = vi.spyOn(ShuffleWriter, 'create');
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out'), '--json', '--memory-limit', '64MiB'], { systemMemory: 16 * GiB });
    expect(jsonOf(run).memoryLimit).toBe(64 * 1024 * 1024);
    const options = create.mock.calls[0]![0];
    expect(options.memLimit).toBeUndefined();
    expect(options.stagingBytes).toBeUndefined();
  });
});

describe('write', () => {
  test('hash keys are trimmed: -k " id " partitions by the column id', async () => {
    const written = jsonOf(await cli(['write', input, '-p', '2', '-k', ' id ', '-o', join(dir, 'out'), '--json']));
    expect(written.partitioning).toEqual({ kind: 'hash', keys: ['id'] });
  });
});

describe('read -o', () => {
  test('the stream written ends with the end-of-stream marker, and the summary gives the rows, batches and bytes written', async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const file = join(dir, 'p0.arrows');
    const run = await cli(['read', prefix, '-P', '0', '-o', file]);
    expect(run.code).toBe(0);
    const written = await readFile(file);
    expect([...written.subarray(written.byteLength - 8)]).toEqual([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    expect(run.stdout).toBe(`partition 0: 30 rows in 1 batch -> ${file} (${bytes((await stat(file)).size)})\n`);
  });
});

describe('read of an output whose partitions differ in schema (two outputs put together)', () => {
  test("the stream has the schema of the partition's own batches, not partition 0's", async () => {
    const one = async (name: string, table: Table) => {
      const file = join(dir, `${name}.arrows`);
      await writeFile(file, tableToIPC(table, 'stream'));
      const prefix = join(dir, name);
      expect((await cli(['write', file, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
      return readFile(outputPaths(prefix).data);
    };
    const first = await one('ids', ids(30, 10));
    const second = await one('labels', new Table({ label: vectorFromArray(['a', 'b', 'c']) }));
    const paths = outputPaths(join(dir, 'both'));
    await writeFile(paths.data, Buffer.concat([first, second]));
    await writeFile(paths.index, encodeIndex([first.byteLength, second.byteLength]));
    await writeFile(paths.checksum, encodeChecksums([crc32cOf([first]), crc32cOf([second])]));
    const file = join(dir, 'p1.arrows');
    expect((await cli(['read', join(dir, 'both'), '-P', '1', '-o', file])).code).toBe(0);
    const table = tableFromIPC(await readFile(file));
    expect(table.schema.fields.map((f) => f.name)).toEqual(['label']);
    expect(table.getChild('label')!.toArray()).toEqual(['a', 'b', 'c']);
  });
});

describe('read -o onto a device', () => {
  // a /dev/null of the test's own: making a device node takes root (CI runs as root), and writing the real
  // /dev/null would replace it if the command got it wrong
  test.runIf(process.getuid?.() === 0)('a character device is written in place: it stays a device (as /dev/null must)', async () => {
    const device = join(dir, 'null');
    execFileSync('mknod', [device, 'c', '1', '3'], { stdio: 'ignore' });
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const run = await cli(['read', prefix, '-P', '0', '-o', device]);
    expect(run.code).toBe(0);
    expect((await lstat(device)).isCharacterDevice()).toBe(true);
    expect((await listFiles(dir)).filter((f) => f.startsWith('null'))).toEqual(['null']);
  });
});

describe('read -o interrupted', () => {
  test('a signal while the partition is written into FILE is an interrupt (exit 130), and leaves neither FILE nor a temporary file', async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '1', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const interrupt = new AbortController();
    const [batch] = tableFromIPC(tableToIPC(ids(10), 'stream')).batches;
    vi.spyOn(ShuffleReader.prototype, 'readPartition').mockImplementation(async function* () {
      yield batch as RecordBatch;
      interrupt.abort(); // the first batch is on its way into the file
      yield batch as RecordBatch;
    });
    const run = await cli(['read', prefix, '-P', '0', '-o', join(dir, 'p0.arrows')], { signal: interrupt.signal });
    expect(run).toEqual({ code: 130, stdout: '', stderr: 'columnar-shuffle: interrupted\n' });
    expect((await listFiles(dir)).filter((f) => f.startsWith('p0.arrows'))).toEqual([]);
  });
});

describe('write on a terminal', () => {
  test('the bar of a file input counts its batches: after the first of two, 50%', async () => {
    const file = join(dir, 'two.arrow');
    await writeFile(file, tableToIPC(ids(20, 10), 'file'));
    const err = textSink();
    Object.assign(err.stream, { isTTY: true, columns: 80 });
    const code = await main(['write', file, '-p', '2', '-k', 'id', '-o', join(dir, 'out')], { stdout: textSink().stream, stderr: err.stream, signal: new AbortController().signal });
    expect(code).toBe(0);
    // the first update is drawn at once, whatever the clock: the one after the first batch
    expect(err.text().split('\r')[1]).toBe(`write [##########..........]  50%  10 rows, 1 batch\x1b[K`);
  });

  test('the bar of a stream input counts its bytes: after the first of two batches, more than 0% and less than 100%', async () => {
    await writeFile(input, tableToIPC(ids(20, 10), 'stream'));
    const err = textSink();
    Object.assign(err.stream, { isTTY: true, columns: 80 });
    const code = await main(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out')], { stdout: textSink().stream, stderr: err.stream, signal: new AbortController().signal });
    expect(code).toBe(0);
    const percent = Number(/^write \[[#.]{20}\] +(\d+)%  10 rows, 1 batch/.exec(err.text().split('\r')[1]!)?.[1]);
    expect(percent).toBeGreaterThan(0);
    expect(percent).toBeLessThan(100);
  });
});

describe('an input read to its end', () => {
  test.each(['stream', 'file'] as const)('an Arrow %s: position is its size, and before the first batch, less', async (format) => {
    await writeFile(input, tableToIPC(ids(20, 10), format));
    const arrow = await openArrowInput(input);
    try {
      expect(arrow.position).toBeLessThan(arrow.size);
      let batches = 0;
      for await (const batch of arrow.batches()) batches += batch.numRows > 0 ? 1 : 0;
      expect(batches).toBe(2);
      expect(arrow.position).toBe(arrow.size);
    } finally {
      await arrow.close();
    }
  });
});

describe('inspect', () => {
  test('an output some of whose partitions are empty is of one writer, not "mixed"', async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '4', '--partitioning', 'single', '-o', prefix])).code).toBe(0);
    const inspected = jsonOf(await cli(['inspect', prefix, '--json']));
    expect(inspected).toMatchObject({ writer: 'hash', partitionRows: [30, 0, 0, 0] });
  });

  test('an output whose every partition is empty (no schema stored) has no writer, schema or codec', async () => {
    const paths = outputPaths(join(dir, 'empty'));
    await writeFile(paths.data, new Uint8Array(0));
    await writeFile(paths.index, encodeIndex([0, 0]));
    await writeFile(paths.checksum, encodeChecksums([crc32cOf([]), crc32cOf([])]));
    const inspected = jsonOf(await cli(['inspect', join(dir, 'empty'), '--json']));
    expect(inspected).toMatchObject({ writer: null, schema: null, codec: null, partitions: 2, batches: 0, rows: 0 });
    const text = (await cli(['inspect', join(dir, 'empty')])).stdout;
    expect(text).toMatch(/^writer {10}\(none: every partition is empty\)$/m);
    expect(text).toMatch(/^partitions {6}2 \(2 empty\), checksums verified$/m);
  });

  test('a partition whose stream holds only a batch of no rows counts as empty: empty means no rows', async () => {
    const schema = new Schema([new Field('id', new Int64(), false)]);
    const batch = await encodeRecordBatchMessage(0, [{ length: 0, nullCount: 0 }], [new Uint8Array(0), new Uint8Array(0)], null);
    const stream = new Uint8Array(Buffer.concat([encodeSchemaMessage(schema), ...batch.chunks, END_OF_STREAM]));
    const paths = outputPaths(join(dir, 'no-rows'));
    await writeFile(paths.data, stream);
    await writeFile(paths.index, encodeIndex([stream.byteLength]));
    await writeFile(paths.checksum, encodeChecksums([crc32cOf([stream])]));
    expect(jsonOf(await cli(['inspect', join(dir, 'no-rows'), '--json']))).toMatchObject({ writer: 'hash', partitionBatches: [1], partitionRows: [0] });
    expect((await cli(['inspect', join(dir, 'no-rows')])).stdout).toMatch(/^partitions {6}1 \(1 empty\), checksums verified$/m);
  });

  test('an interrupted inspect stops before its first partition: exit 130', async () => {
    const prefix = join(dir, 'out');
    expect((await cli(['write', input, '-p', '2', '-k', 'id', '-o', prefix])).code).toBe(0);
    const interrupt = new AbortController();
    interrupt.abort();
    const verify = vi.spyOn(ShuffleReader.prototype, 'partitionBytes');
    const run = await cli(['inspect', prefix], { signal: interrupt.signal });
    expect(run).toEqual({ code: 130, stdout: '', stderr: 'columnar-shuffle: interrupted\n' });
    expect(verify).not.toHaveBeenCalled();
  });
});

describe('an input that is not what write reads', () => {
  test('eight zero bytes (an end-of-stream marker in the legacy framing, no schema) are not Arrow: CS_INPUT_NOT_ARROW', async () => {
    await writeFile(input, new Uint8Array(8));
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out')]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_INPUT_NOT_ARROW: not an Arrow IPC file or stream: it starts with bytes 00 00 00 00 00 00 00 00,/);
  });

  test('a stream with a second schema message after its first is CS_CORRUPT_DATA naming it, and nothing is written', async () => {
    const stream = tableToIPC(ids(10), 'stream');
    const schema = tableFromIPC(stream).schema;
    await writeFile(input, Buffer.concat([encodeSchemaMessage(schema), stream]));
    const run = await cli(['write', input, '-p', '2', '-k', 'id', '-o', join(dir, 'out')]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_CORRUPT_DATA: unexpected Schema message/);
    expect(await listFiles(dir)).toEqual(['in.arrows']);
  });
});
