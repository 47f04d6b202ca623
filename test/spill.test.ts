/**
 * Spill and merge under tight memory limits (issue 3), for both writers (the columnar
 * hash writer and the sort-based row writer): a writer whose budget is
 * far smaller than its input finishes, loses nothing, never goes over budget,
 * and leaves no file behind but its output; failures (memory, disk) are typed
 * errors that leave neither final-named output nor temporary or spill files.
 */
import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { tableFromIPC, type RecordBatch } from 'apache-arrow';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import type { CodecName } from '../src/format/codec.js';
import { MemoryLimitError, MemoryPool } from '../src/memory/memory-pool.js';
import { createShuffleWriter, ShuffleError, ShuffleReader, WRITER_KINDS, type AnyShuffleWriter, type ShuffleWriterOptions, type WriterKind } from '../src/index.js';
import { isRowPartition, ROW_END } from '../src/sort-writer/row-format.js';
import type { Partitioning } from '../src/writer/partitioner.js';
import { rowsOf } from './support/rows.js';
import { firstDifference, readWithArrowJs, runShuffle } from './support/shuffle-harness.js';
import {
  describeError,
  entries,
  expectedPartitions,
  finalOutputs,
  fingerprintsDiffer,
  narrowFingerprints,
  type PartitionFingerprint,
  KiB,
  MiB,
  mixedBatches,
  narrowBatches,
  outcome,
  partitionsDiffer,
  readPartitions,
  rejection,
  SmallFilesystem,
  temporaries,
  totalRows,
  writeSampled,
} from './support/spill-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const HASH_KEY: Partitioning = { kind: 'hash', keys: ['key'] };
const P = 200;

let out: string;
let spillDir: string;
beforeEach(async () => {
  out = await makeTempDir('cs-spill-out-');
  spillDir = await makeTempDir('cs-spill-dir-');
});
afterEach(async () => {
  await removeDir(out);
  await removeDir(spillDir);
});

function options(pool: MemoryPool, overrides: Partial<ShuffleWriterOptions> = {}): ShuffleWriterOptions & { memoryPool: MemoryPool } {
  return { numPartitions: P, partitioning: HASH_KEY, outputPrefix: join(out, 'map'), memoryPool: pool, spillDir, ...overrides };
}

/** After a failed or aborted run: no final-named output, no temporary file, no spill file, no memory held. */
async function expectNothingLeft(pool: MemoryPool, dirs: { out?: string; spill?: string } = {}): Promise<void> {
  const outFiles = await entries(dirs.out ?? out);
  expect.soft(finalOutputs(outFiles), 'final-named output files').toEqual([]);
  expect.soft(temporaries(outFiles), 'temporary files in the output directory').toEqual([]);
  expect.soft(await entries(dirs.spill ?? spillDir), 'files in the spill directory').toEqual([]);
  expect.soft(pool.reserved, 'bytes still reserved in the pool').toBe(0);
}

function expectTyped(error: unknown, codes: readonly string[]): ShuffleError {
  expect(error, describeError(error)).toBeInstanceOf(ShuffleError);
  expect(codes, describeError(error)).toContain((error as ShuffleError).code);
  return error as ShuffleError;
}

// A real full disk: a 2 MiB tmpfs. Mounting needs root with CAP_SYS_ADMIN (the CI machines have it).
const small = await SmallFilesystem.mount(2 * MiB);
const smallFs = small instanceof SmallFilesystem ? small : null;
if (smallFs === null) {
  console.warn(`[spill.test] SKIPPING the full-disk tests: cannot mount a 2 MiB tmpfs (${(small as { reason: string }).reason})`);
}

afterAll(async () => {
  await smallFs?.unmount();
});

// ---------------------------------------------------------------------------------------------

describe.each(WRITER_KINDS)('%s writer', (kind: WriterKind) => {

describe('a budget far smaller than the input: every row comes back, in order, and the budget holds', () => {
  // 40 batches x 8192 narrow rows: ~14 MB of Arrow buffers, 14x the 1 MiB limit
  const batches = narrowBatches(40, 8192, 1);
  let unlimited: PartitionFingerprint[];

  beforeAll(async () => {
    const dir = await makeTempDir('cs-spill-ref-');
    const spill = await makeTempDir('cs-spill-ref-dir-');
    try {
      const pool = new MemoryPool();
      const run = await writeSampled({ numPartitions: P, partitioning: HASH_KEY, outputPrefix: join(dir, 'map'), memoryPool: pool, spillDir: spill }, batches, kind);
      expect(run.result.spills, 'the unlimited run spills').toBe(0);
      expect(run.result.spilledBytes).toBe(0);
      expect(pool.reserved).toBe(0);
      expect(await entries(spill)).toEqual([]);
      unlimited = await narrowFingerprints(join(dir, 'map'));
      expect(unlimited.reduce((sum, f) => sum + f.rows, 0)).toBe(40 * 8192);
    } finally {
      await removeDir(dir);
      await removeDir(spill);
    }
  });

  test.each([
    ['1 MiB', 1 * MiB],
    ['4 MiB', 4 * MiB],
  ])('with a %s pool the same rows land in the same partitions in the same order as unlimited, with spills, never over the limit', async (_, limit) => {
    const pool = new MemoryPool(limit);
    const { result, reservedAfterWrite } = await writeSampled(options(pool), batches, kind);
    expect(result.spills).toBeGreaterThan(0);
    expect(result.spilledBytes).toBeGreaterThan(0);
    expect(result.peakMemoryBytes).toBeLessThanOrEqual(limit);
    expect(pool.peak).toBeLessThanOrEqual(limit);
    expect(Math.max(...reservedAfterWrite)).toBeLessThanOrEqual(limit);
    expect(pool.reserved).toBe(0);
    expect(await entries(spillDir), 'spill files left after finish').toEqual([]);
    expect(await entries(out)).toEqual(['map.checksum.CRC32C', 'map.data', 'map.index']);
    expect(result.rows).toBe(40 * 8192);
    const fingerprints = await narrowFingerprints(join(out, 'map'));
    expect(fingerprintsDiffer(fingerprints, unlimited)).toBeNull();
    expect(fingerprints.map((f) => f.rows)).toEqual(result.partitionRows);
  });
});

describe('every row exactly once, in order, across partition counts and limits', () => {
  const batches = narrowBatches(6, 8192, 7);
  let expected: Map<number, string[][]>;
  beforeAll(() => {
    expected = new Map([1, 8, 32].map((n) => [n, expectedPartitions(batches, HASH_KEY, n)]));
  });

  test.each([
    [1, 1 * MiB],
    [1, 2 * MiB],
    [8, 1 * MiB],
    [8, 2 * MiB],
    [32, 1 * MiB],
    [32, 2 * MiB],
  ])('%i partitions, %i-byte pool', async (numPartitions, limit) => {
    const pool = new MemoryPool(limit);
    const { result } = await writeSampled(options(pool, { numPartitions }), batches, kind);
    expect(result.spills).toBeGreaterThan(0);
    expect(pool.peak).toBeLessThanOrEqual(limit);
    expect(pool.reserved).toBe(0);
    const { rows } = await readPartitions(join(out, 'map'));
    expect(totalRows(rows), `rows read back (finish() reported ${result.rows})`).toBe(batches.length * 8192);
    expect(partitionsDiffer(rows, expected.get(numPartitions)!)).toBeNull();
    expect(await entries(spillDir)).toEqual([]);
  });
});

describe('sizing options larger than a bounded pool are taken as its share: the writer spills instead of failing', () => {
  // before, buffers (or pages) sized for these options could not be held by a 4 MiB pool even after every spill: CS_MEMORY_LIMIT
  const batches = narrowBatches(16, 8192, 11); // ~5.6 MB of Arrow buffers
  let expected: string[][];
  beforeAll(() => {
    expected = expectedPartitions(batches, HASH_KEY, P);
  });

  test.each<[string, Partial<ShuffleWriterOptions>]>([
    ['memLimit 0 (sized for the 128 MiB floor)', { memLimit: 0 }],
    ['memLimit 64 MiB', { memLimit: 64 * MiB }],
    ['memLimitFloor 128 MiB', { memLimitFloor: 128 * MiB }],
  ])('%s on a 4 MiB pool: every row, in order, within the pool', async (_, overrides) => {
    const pool = new MemoryPool(4 * MiB);
    const { result } = await writeSampled(options(pool, overrides), batches, kind);
    expect(result.spills).toBeGreaterThan(0);
    expect(pool.peak).toBeLessThanOrEqual(4 * MiB);
    expect(pool.reserved).toBe(0);
    const { rows } = await readPartitions(join(out, 'map'));
    expect(totalRows(rows)).toBe(16 * 8192);
    expect(partitionsDiffer(rows, expected)).toBeNull();
    expect(await entries(spillDir)).toEqual([]);
  });
});

describe('spilled output is right for every codec, partitioning and column type', () => {
  const LIMIT = 1 * MiB;
  const narrow = narrowBatches(5, 8192, 500);

  async function spilledRoundTrip(batches: readonly RecordBatch[], partitioning: Partitioning, codec: CodecName, numPartitions = P) {
    const pool = new MemoryPool(LIMIT);
    const outcome = await runShuffle(out, { numPartitions, partitioning, codec, memoryPool: pool, spillDir }, batches, 'map', kind);
    expect(outcome.result.spills, 'spills').toBeGreaterThan(0);
    expect(outcome.result.peakMemoryBytes).toBeLessThanOrEqual(LIMIT);
    expect(pool.peak).toBeLessThanOrEqual(LIMIT);
    expect(pool.reserved).toBe(0);
    for (let p = 0; p < numPartitions; p++) {
      expect(firstDifference(outcome.actual[p]!, outcome.expected[p]!, `partition ${p}`)).toBeNull();
    }
    expect(await entries(spillDir)).toEqual([]);
    expect(temporaries(await entries(out))).toEqual([]);
    return outcome;
  }

  test.each<CodecName>(['lz4', 'zstd', 'none'])('codec %s, hash partitioning', async (codec) => {
    await spilledRoundTrip(narrow, HASH_KEY, codec);
  });

  test('round-robin partitioning', async () => {
    await spilledRoundTrip(narrow, { kind: 'round-robin' }, 'lz4');
  });

  test('a mixed schema (strings of 0-600 bytes, binary, bool, decimal, fixed-size binary, large utf8, many nulls), hashed on two columns', async () => {
    const batches = mixedBatches(5, 4096, 77);
    await spilledRoundTrip(batches, { kind: 'hash', keys: ['k', 's'] }, 'zstd', 64);
  });
});

describe('a spilled run writes a valid shuffle output by the byte-level rules', () => {
  test(`codec none: each partition is ${kind === 'hash' ? 'an Arrow IPC stream arrow-js reads by itself' : 'a row partition (magic CSRW, end marker)'}; the index and checksums describe the data file`, async () => {
    const batches = narrowBatches(6, 8192, 900);
    const pool = new MemoryPool(1 * MiB);
    const { result } = await writeSampled(options(pool, { codec: 'none' }), batches, kind);
    expect(result.spills).toBeGreaterThan(0);
    const expected = expectedPartitions(batches, HASH_KEY, P);

    const data = await readFile(join(out, 'map.data'));
    const index = await readFile(join(out, 'map.index'));
    const checksums = await readFile(join(out, 'map.checksum.CRC32C'));
    expect(index.byteLength).toBe((P + 1) * 8);
    expect(checksums.byteLength).toBe(P * 8);
    expect(index.readBigInt64BE(0)).toBe(0n);
    expect(Number(index.readBigInt64BE(P * 8))).toBe(data.byteLength);
    expect(result.bytesWritten).toBe(data.byteLength);
    for (let p = 0; p < P; p++) {
      const start = Number(index.readBigInt64BE(p * 8));
      const end = Number(index.readBigInt64BE((p + 1) * 8));
      expect(end - start).toBe(result.partitionLengths[p]);
      const bytes = data.subarray(start, end);
      expect(Number(checksums.readBigInt64BE(p * 8))).toBe(crc32c(bytes) >>> 0);
      if (expected[p]!.length === 0) {
        expect(bytes.byteLength).toBe(0);
        continue;
      }
      if (kind === 'sort') {
        expect(isRowPartition(bytes), `partition ${p} starts with the row magic`).toBe(true);
        expect([...bytes.subarray(bytes.byteLength - 4)]).toEqual([...ROW_END]);
        continue; // read back by ShuffleReader below
      }
      // a stream: schema message first (continuation marker), end-of-stream marker last
      expect(bytes.readUInt32LE(0)).toBe(0xffffffff);
      expect([...bytes.subarray(bytes.byteLength - 8)]).toEqual([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
      const table = tableFromIPC(bytes);
      const rows = table.batches.flatMap((b) => rowsOf(b));
      expect(firstDifference(rows, expected[p]!, `partition ${p} read by arrow-js`)).toBeNull();
      for (const b of table.batches) expect(b.numRows).toBeLessThanOrEqual(4096);
    }
    if (kind === 'sort') {
      const ours = await readPartitions(join(out, 'map'));
      expect(partitionsDiffer(ours.rows, expected)).toBeNull();
      expect(ours.largestBatch).toBeLessThanOrEqual(4096);
    }
  });

  test(`lz4: our reader${kind === 'hash' ? ' and arrow-js (with LZ4_FRAME decoding)' : ''} read the same rows the reference expects`, async () => {
    const batches = narrowBatches(5, 8192, 950);
    const pool = new MemoryPool(1 * MiB);
    const { result } = await writeSampled(options(pool, { codec: 'lz4' }), batches, kind);
    expect(result.spills).toBeGreaterThan(0);
    const expected = expectedPartitions(batches, HASH_KEY, P);
    const ours = await readPartitions(join(out, 'map'));
    expect(partitionsDiffer(ours.rows, expected)).toBeNull();
    expect(ours.largestBatch).toBeLessThanOrEqual(4096);
    if (kind === 'hash') expect(partitionsDiffer(await readWithArrowJs(join(out, 'map')), expected)).toBeNull();
  });
});

describe('writers sharing one pool', () => {
  const LIMIT = 3 * MiB;
  // 8 batches each: ~2.9 MB of input per writer against a 3 MiB pool shared by both
  const inputA = narrowBatches(8, 8192, 3000);
  const inputB = narrowBatches(8, 8192, 4000);
  let expectedA: string[][];
  let expectedB: string[][];
  beforeAll(() => {
    expectedA = expectedPartitions(inputA, HASH_KEY, P, 1);
    expectedB = expectedPartitions(inputB, HASH_KEY, P, 2);
  });

  async function pair(pool: MemoryPool) {
    const a = await createShuffleWriter(kind, options(pool, { outputPrefix: join(out, 'a'), concurrentTasks: 2, mapId: 1 }));
    const b = await createShuffleWriter(kind, options(pool, { outputPrefix: join(out, 'b'), concurrentTasks: 2, mapId: 2 }));
    return { a, b };
  }

  async function checkOutputs(pool: MemoryPool, samples: number[], spills: number) {
    expect(spills, 'spills of both writers').toBeGreaterThan(0);
    expect(Math.max(...samples)).toBeLessThanOrEqual(LIMIT);
    expect(pool.peak).toBeLessThanOrEqual(LIMIT);
    expect(pool.reserved).toBe(0);
    expect(pool.consumers()).toEqual([]);
    expect(partitionsDiffer((await readPartitions(join(out, 'a'))).rows, expectedA)).toBeNull();
    expect(partitionsDiffer((await readPartitions(join(out, 'b'))).rows, expectedB)).toBeNull();
    expect(await entries(spillDir)).toEqual([]);
    expect(temporaries(await entries(out))).toEqual([]);
  }

  test('written alternately, one write at a time, both finish with every row and the pool never exceeds its limit', async () => {
    const pool = new MemoryPool(LIMIT);
    const { a, b } = await pair(pool);
    const samples: number[] = [];
    for (let i = 0; i < inputA.length; i++) {
      await a.write(inputA[i]!);
      samples.push(pool.reserved);
      await b.write(inputB[i]!);
      samples.push(pool.reserved);
    }
    const ra = await a.finish();
    samples.push(pool.reserved);
    const rb = await b.finish();
    await checkOutputs(pool, samples, ra.spills + rb.spills);
  });

  test('written concurrently (Promise.all), both finish with every row and the pool never exceeds its limit', async () => {
    const pool = new MemoryPool(LIMIT);
    const { a, b } = await pair(pool);
    const samples: number[] = [];
    const ticker = setInterval(() => samples.push(pool.reserved), 1);
    try {
      const run = async (mapWriter: AnyShuffleWriter, input: readonly RecordBatch[]) => {
        for (const batch of input) {
          await mapWriter.write(batch);
          samples.push(pool.reserved);
        }
        return mapWriter.finish();
      };
      const [ra, rb] = await Promise.all([run(a, inputA), run(b, inputB)]);
      await checkOutputs(pool, samples, ra.spills + rb.spills);
    } finally {
      clearInterval(ticker);
      await a.abort();
      await b.abort();
    }
  });

  test("a spill that fails inside a reclaim requested by another writer never loses or duplicates the reclaimed writer's rows", async () => {
    // A's spill directory disappears before A ever spilled; the next time the pool asks A to spill (for B
    // or for itself) that spill fails. The directory then comes back (a transient disk problem, or space
    // freed by the failed task's files) and whichever writer is still open goes on: it must either fail
    // with a typed error or finish with exactly its rows.
    const pool = new MemoryPool(LIMIT);
    const spillA = join(spillDir, 'a');
    const spillB = join(spillDir, 'b');
    await mkdir(spillA);
    await mkdir(spillB);
    const a = await createShuffleWriter(kind, options(pool, { outputPrefix: join(out, 'a'), concurrentTasks: 2, mapId: 1, spillDir: spillA }));
    const b = await createShuffleWriter(kind, options(pool, { outputPrefix: join(out, 'b'), concurrentTasks: 2, mapId: 2, spillDir: spillB }));
    await rm(spillA, { recursive: true });
    const failures: { writer: 'a' | 'b'; error: unknown }[] = [];
    let i = 0;
    for (; i < inputA.length && failures.length === 0; i++) {
      const wroteA = await outcome(a.write(inputA[i]!));
      if (!wroteA.ok) failures.push({ writer: 'a', error: wroteA.error });
      const wroteB = await outcome(b.write(inputB[i]!));
      if (!wroteB.ok) failures.push({ writer: 'b', error: wroteB.error });
    }
    await mkdir(spillA);
    expect(failures.length, 'some write fails while A cannot spill').toBeGreaterThan(0);
    for (const { error } of failures) expectTyped(error, ['CS_FILE_NOT_FOUND', 'CS_IO', 'CS_MEMORY_LIMIT']);

    const survivors = (['a', 'b'] as const).filter((w) => !failures.some((f) => f.writer === w));
    for (const name of survivors) {
      const writer = name === 'a' ? a : b;
      const input = name === 'a' ? inputA : inputB;
      const finished = await outcome(
        (async () => {
          for (let j = i; j < input.length; j++) await writer.write(input[j]!);
          return writer.finish();
        })(),
      );
      if (!finished.ok) {
        expectTyped(finished.error, ['CS_FILE_NOT_FOUND', 'CS_IO', 'CS_MEMORY_LIMIT']);
        continue;
      }
      const { rows } = await readPartitions(join(out, name));
      const expected = name === 'a' ? expectedA : expectedB;
      expect(totalRows(rows), `writer ${name}: rows written ${input.length * 8192}, rows its output holds ${totalRows(rows)}; finish() says ${finished.value.rows}`).toBe(input.length * 8192);
      expect(partitionsDiffer(rows, expected)).toBeNull();
    }
    await a.abort();
    await b.abort();
    expect(pool.reserved).toBe(0);
    expect(await entries(spillA)).toEqual([]);
    expect(await entries(spillB)).toEqual([]);
  });
});

describe('memory that cannot be had is a MemoryLimitError, and leaves nothing behind', () => {
  test.each([
    ['64 KiB, smaller than the per-row scratch of one 8192-row batch', 64 * KiB, P, HASH_KEY],
    // (at 200 KiB the columnar writer now finishes: a buffer whose copy does not fit is spilled straight from where it is;
    // at 160 KiB too, since it estimates a batch's bytes per row without a row-id array for all of it)
    ['128 KiB, one partition whose buffer cannot fit next to the per-row scratch of an 8192-row batch', 128 * KiB, 1, { kind: 'single' } as Partitioning],
  ])('a pool of %s: write() rejects with CS_MEMORY_LIMIT', async (_, limit, numPartitions, partitioning) => {
    const pool = new MemoryPool(limit);
    const writer = await createShuffleWriter(kind, options(pool, { numPartitions, partitioning }));
    const error = await rejection(writer.write(narrowBatches(1, 8192, 5)[0]!));
    expect(error, describeError(error)).toBeInstanceOf(MemoryLimitError);
    expect((error as MemoryLimitError).code).toBe('CS_MEMORY_LIMIT');
    expect((error as MemoryLimitError).message).toMatch(kind === 'hash' ? /^ShuffleWriter/ : /^SortShuffleWriter/);
    await expectNothingLeft(pool);
    const closed = await rejection(writer.write(narrowBatches(1, 10, 6)[0]!));
    expect((closed as ShuffleError).code).toBe('CS_WRITER_CLOSED');
  });

  test('when another consumer takes the memory mid-run, the failing write removes the spill files already written', async () => {
    const pool = new MemoryPool(2 * MiB);
    const writer = await createShuffleWriter(kind, options(pool));
    const batches = narrowBatches(10, 8192, 40);
    for (const batch of batches.slice(0, 6)) await writer.write(batch);
    expect((await entries(spillDir)).length, 'spill files while running').toBeGreaterThan(0);
    const other = pool.register('another task'); // not reclaimable
    await other.grow(pool.limit - 150 * KiB); // the writer spills what it can for it
    const error = await rejection(writer.write(batches[6]!));
    expect(error, describeError(error)).toBeInstanceOf(MemoryLimitError);
    other.free();
    await expectNothingLeft(pool);
  });

  test('a budget in which every write() succeeded is enough for finish() too', async () => {
    // the writes spill down to fit 512 KiB; the merge must not then ask for more than the budget
    const pool = new MemoryPool(512 * KiB);
    const writer = await createShuffleWriter(kind, options(pool));
    const batches = narrowBatches(6, 8192, 60);
    for (const batch of batches) await writer.write(batch);
    const finished = await outcome(writer.finish());
    expect(finished.ok, finished.ok ? '' : describeError(finished.error)).toBe(true);
    if (finished.ok) {
      expect(finished.value.peakMemoryBytes).toBeLessThanOrEqual(512 * KiB);
      expect(partitionsDiffer((await readPartitions(join(out, 'map'))).rows, expectedPartitions(batches, HASH_KEY, P))).toBeNull();
    }
    await writer.abort();
    expect(pool.reserved).toBe(0);
    expect(await entries(spillDir)).toEqual([]);
  });
});

describe('abort() in the middle of a spilling run', () => {
  test('removes the spill files and the temporary output and releases all memory', async () => {
    const pool = new MemoryPool(1 * MiB);
    const writer = await createShuffleWriter(kind, options(pool));
    for (const batch of narrowBatches(6, 8192, 70)) await writer.write(batch);
    expect((await entries(spillDir)).length, 'spill files while running').toBeGreaterThan(0);
    expect(temporaries(await entries(out)).length, 'temporary data file while running').toBeGreaterThan(0);
    await writer.abort();
    await expectNothingLeft(pool);
    expect(pool.consumers()).toEqual([]);
    expect((await rejection(writer.finish()) as ShuffleError).code).toBe('CS_WRITER_CLOSED');
  });

  test.each([
    ['right after write() started', 0],
    ['while write() is a few milliseconds in', 3],
  ])('abort() %s: the write settles (done, or CS_WRITER_CLOSED) and no spill file, temporary file or reservation survives', async (_, delay) => {
    const pool = new MemoryPool(1 * MiB);
    const writer = await createShuffleWriter(kind, options(pool));
    const batches = narrowBatches(6, 8192, 80);
    for (const batch of batches.slice(0, 4)) await writer.write(batch);
    const pending = outcome(writer.write(batches[4]!));
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    await writer.abort();
    const settled = await pending;
    await new Promise((resolve) => setTimeout(resolve, 50)); // anything the write still had in flight
    await expectNothingLeft(pool);
    // an interrupted write is not a disk failure: a job runner switching on CS_IO would blame the disk
    if (!settled.ok) expect((settled.error as ShuffleError).code, `the interrupted write rejected with ${describeError(settled.error)}`).toBe('CS_WRITER_CLOSED');
  });
});

describe('disk trouble is a typed error naming the file, and leaves nothing behind', () => {
  test('a spill directory that does not exist: create() fails with CS_FILE_NOT_FOUND naming it', async () => {
    const missing = join(spillDir, 'missing');
    const pool = new MemoryPool(1 * MiB);
    const error = expectTyped(await rejection(createShuffleWriter(kind, options(pool, { spillDir: missing }))), ['CS_FILE_NOT_FOUND']);
    expect(error.where.file).toBe(missing);
    expect(await entries(out)).toEqual([]);
    expect(pool.reserved).toBe(0);
  });

  test('the spill directory removed before the first spill: the spilling write fails with a typed error naming the spill file', async () => {
    const pool = new MemoryPool(1 * MiB);
    const writer = await createShuffleWriter(kind, options(pool));
    await rm(spillDir, { recursive: true });
    let failure: unknown = null;
    for (const batch of narrowBatches(8, 8192, 90)) {
      const wrote = await outcome(writer.write(batch));
      if (!wrote.ok) {
        failure = wrote.error;
        break;
      }
    }
    expect(failure, 'the run should fail once it cannot spill').not.toBeNull();
    const error = expectTyped(failure, ['CS_FILE_NOT_FOUND', 'CS_IO']);
    expect(error.where.file?.startsWith(`${spillDir}/`), describeError(error)).toBe(true);
    expect(error.message).toContain(error.where.file!);
    await expectNothingLeft(pool);
  });

  test('the spill directory removed after spilling began: the run either finishes with every row or fails with a typed error naming the spill file, leaving nothing', async () => {
    const pool = new MemoryPool(1 * MiB);
    const writer = await createShuffleWriter(kind, options(pool));
    const batches = narrowBatches(6, 8192, 95);
    const run = await outcome(
      (async () => {
        for (let i = 0; i < batches.length; i++) {
          if (i === 3) {
            expect((await entries(spillDir)).length, 'spilling began').toBeGreaterThan(0);
            await rm(spillDir, { recursive: true });
          }
          await writer.write(batches[i]!);
        }
        return writer.finish();
      })(),
    );
    if (run.ok) {
      expect(partitionsDiffer((await readPartitions(join(out, 'map'))).rows, expectedPartitions(batches, HASH_KEY, P))).toBeNull();
      expect(pool.reserved).toBe(0);
      expect(temporaries(await entries(out))).toEqual([]);
    } else {
      const error = expectTyped(run.error, ['CS_FILE_NOT_FOUND', 'CS_IO']);
      expect(error.where.file?.startsWith(`${spillDir}/`), describeError(error)).toBe(true);
      await expectNothingLeft(pool);
    }
  });
});

describe.skipIf(smallFs === null)('a full disk (a 2 MiB tmpfs) is CS_IO naming the file, and leaves nothing behind', () => {
  const fs = smallFs!;
  let onSmall: string;
  beforeEach(async () => {
    onSmall = join(fs.dir, `t${Date.now()}`);
    await mkdir(onSmall);
  });
  afterEach(async () => {
    await rm(onSmall, { recursive: true, force: true });
  });
  // 12 batches of 8192 narrow rows, stored uncompressed: ~4 MB of spill and of output, twice the file system
  const batches = narrowBatches(12, 8192, 1200);

  async function runToFailure(pool: MemoryPool, opts: Partial<ShuffleWriterOptions>): Promise<ShuffleError> {
    const writer = await createShuffleWriter(kind, options(pool, { codec: 'none', ...opts }));
    for (const batch of batches) {
      const wrote = await outcome(writer.write(batch));
      if (!wrote.ok) return expectTyped(wrote.error, ['CS_IO']);
    }
    const finished = await outcome(writer.finish());
    expect(finished.ok, 'the run should not fit on the small file system').toBe(false);
    return expectTyped((finished as { error: unknown }).error, ['CS_IO']);
  }

  test('spilling onto it: CS_IO (ENOSPC) naming the spill file', async () => {
    const pool = new MemoryPool(1 * MiB);
    const error = await runToFailure(pool, { spillDir: onSmall });
    expect(error.message).toMatch(/ENOSPC/);
    expect(error.where.file?.startsWith(`${onSmall}/`), error.message).toBe(true);
    await expectNothingLeft(pool, { spill: onSmall });
    expect(fs.usedBytes()).toBeLessThan(64 * KiB);
  });

  test('writing the output onto it without spilling: CS_IO (ENOSPC) naming the data file', async () => {
    const pool = new MemoryPool();
    const error = await runToFailure(pool, { outputPrefix: join(onSmall, 'map') });
    expect(error.message).toMatch(/ENOSPC/);
    expect(error.where.file?.startsWith(join(onSmall, 'map.data')), error.message).toBe(true);
    await expectNothingLeft(pool, { out: onSmall });
  });

  test('writing the output onto it while merging spilled data: CS_IO (ENOSPC) naming the data file, not the spill file it was copying', async () => {
    const pool = new MemoryPool(1 * MiB);
    const error = await runToFailure(pool, { outputPrefix: join(onSmall, 'map') });
    expect(error.message).toMatch(/ENOSPC/);
    await expectNothingLeft(pool, { out: onSmall });
    expect(error.where.file?.startsWith(join(onSmall, 'map.data')), `where.file is ${String(error.where.file)}; message: ${error.message}`).toBe(true);
  });
});

test('the spill directory is where the spill files go (they exist while running, in that directory only)', async () => {
  const pool = new MemoryPool(1 * MiB);
  const writer = await createShuffleWriter(kind, options(pool));
  for (const batch of narrowBatches(5, 8192, 100)) await writer.write(batch);
  const files = await entries(spillDir);
  expect(files.length).toBeGreaterThan(0);
  for (const f of files) expect((await stat(join(spillDir, f))).isFile()).toBe(true);
  expect(finalOutputs(await entries(out))).toEqual([]);
  await writer.finish();
  expect(await entries(spillDir)).toEqual([]);
  const reader = await ShuffleReader.open(join(out, 'map'));
  await reader.close();
});
});
