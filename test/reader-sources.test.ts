/**
 * The reader over a ByteRangeSource that misbehaves (a remote map output, an
 * object store: the embedder's code): what the source gets wrong comes out as
 * a typed error naming it, right rows come back from bytes at any alignment,
 * every source is closed exactly once, and an abort is not held back by a
 * read that never returns.
 */
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { narrowBatch } from '../src/cli/demo-data.js';
import { outputPaths } from '../src/format/output-files.js';
import { LocalFileSource, type ByteRangeSource } from '../src/reader/byte-source.js';
import { ShuffleReader, type ShuffleOutputSources } from '../src/reader/shuffle-reader.js';
import { ReduceReader } from '../src/shuffle/reduce-reader.js';
import type { MapStatus } from '../src/shuffle/map-status.js';
import type { CodecName } from '../src/format/codec.js';
import { collect, firstDifference, makeTempDir, removeDir, runShuffle, type ShuffleOutcome } from './support/shuffle-harness.js';

let dir = '';
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

async function output(codec: CodecName = 'lz4'): Promise<ShuffleOutcome> {
  return runShuffle(dir, { numPartitions: 3, partitioning: { kind: 'hash', keys: ['key'] }, codec }, [narrowBatch(3000, 1), narrowBatch(3000, 2)]);
}

type Which = keyof ShuffleOutputSources;
/** The output's local files, one of them (`which`) with `change` applied to it; each counts its close() calls. */
async function sourcesOf(prefix: string, which: Which, change: (source: ByteRangeSource) => Partial<ByteRangeSource>) {
  const paths = outputPaths(prefix);
  const closes: Record<Which, number> = { data: 0, index: 0, checksum: 0 };
  const opened = async (kind: Which): Promise<ByteRangeSource> => {
    const file = await LocalFileSource.open(paths[kind]);
    const counted: ByteRangeSource = {
      name: file.name,
      size: () => file.size(),
      read: (offset, length) => file.read(offset, length),
      close: async () => {
        closes[kind]++;
        await file.close();
      },
    };
    return kind === which ? { ...counted, ...change(counted) } : counted;
  };
  const sources = { data: await opened('data'), index: await opened('index'), checksum: await opened('checksum') };
  return { sources, closes };
}

describe('a source that misbehaves gives a typed error naming it', () => {
  test.each<[string, Which, (s: ByteRangeSource) => Partial<ByteRangeSource>, RegExp]>([
    ['read throws a plain Error', 'data', () => ({ read: async () => Promise.reject(new Error('connection reset')) }), /cannot read \d+ bytes at \d+: connection reset/],
    ['read throws a string', 'data', () => ({ read: async () => Promise.reject('gone') }), /cannot read \d+ bytes at \d+: gone/],
    ['read returns fewer bytes than asked', 'data', (s) => ({ read: async (offset, length) => (await s.read(offset, length)).subarray(1) }), /the source returned \d+ bytes for a read of \d+ bytes/],
  ])('%s (the %s source): CS_IO naming it and the offset, on reading', async (_, which, change, message) => {
    const { prefix } = await output();
    const { sources } = await sourcesOf(prefix, which, change);
    const reader = await ShuffleReader.fromSources(sources);
    try {
      const error = await collect(reader.readPartitions(0, 3)).then(() => null, (e: unknown) => e);
      expect(error).toMatchObject({ code: 'CS_IO', message: expect.stringMatching(message), where: { file: sources[which].name, offset: expect.any(Number) } });
    } finally {
      await reader.close();
    }
  });

  test.each<[string, Which, (s: ByteRangeSource) => Partial<ByteRangeSource>, RegExp]>([
    ['the index source returns a short read (a RangeError from a DataView)', 'index', (s) => ({ read: async (offset, length) => (await s.read(offset, length)).subarray(0, length - 8) }), /returned \d+ bytes for a read of \d+ bytes/],
    ['the checksum source returns a short read', 'checksum', (s) => ({ read: async (offset, length) => (await s.read(offset, length)).subarray(0, 4) }), /returned 4 bytes/],
    ['the index size is a bigint (a TypeError)', 'index', () => ({ size: async () => 32n as never }), /reported a size of 32n, not a byte count/],
    ['the index size is a string (it was accepted)', 'index', () => ({ size: async () => '32' as never }), /reported a size of "32", not a byte count/],
    ['the data size is a string (an error contradicting itself)', 'data', () => ({ size: async () => '1000' as never }), /reported a size of "1000", not a byte count/],
    ['the checksum size is NaN', 'checksum', () => ({ size: async () => Number.NaN }), /reported a size of NaN, not a byte count/],
    ['size throws a plain Error', 'data', () => ({ size: async () => Promise.reject(new Error('timeout')) }), /cannot get its size: timeout/],
  ])('%s: CS_IO naming the source, on opening', async (_, which, change, message) => {
    const { prefix } = await output();
    const { sources } = await sourcesOf(prefix, which, change);
    await expect(ShuffleReader.fromSources(sources)).rejects.toMatchObject({ code: 'CS_IO', message: expect.stringMatching(message), where: { file: sources[which].name } });
    await Promise.all([sources.data.close(), sources.index.close(), sources.checksum.close()]);
  });
});

test.each<CodecName>(['none', 'lz4'])('a source returning its bytes at an odd byteOffset reads the right rows (codec %s: "start offset of Int32Array should be a multiple of 4")', async (codec) => {
  const outcome = await output(codec);
  const { sources } = await sourcesOf(outcome.prefix, 'data', (s) => ({
    read: async (offset, length) => {
      const bytes = await s.read(offset, length);
      const odd = new Uint8Array(length + 1);
      odd.set(bytes, 1);
      return odd.subarray(1);
    },
  }));
  const reader = await ShuffleReader.fromSources(sources);
  try {
    const { rows } = await collect(reader.readPartitions(0, 3));
    expect(firstDifference(rows, outcome.expected.flat())).toBeNull();
  } finally {
    await reader.close();
  }
});

describe('closing', () => {
  test('close() twice closes each source once', async () => {
    const { prefix } = await output();
    const { sources, closes } = await sourcesOf(prefix, 'data', () => ({}));
    const reader = await ShuffleReader.fromSources(sources);
    await reader.close();
    await reader.close();
    expect(closes).toEqual({ data: 1, index: 1, checksum: 1 });
  });

  test('a source whose close() throws: the others are closed still, and the error is CS_IO naming it', async () => {
    const { prefix } = await output();
    const { sources, closes } = await sourcesOf(prefix, 'data', (s) => ({
      close: () => {
        void s.close();
        throw new Error('close failed');
      },
    }));
    const reader = await ShuffleReader.fromSources(sources);
    await expect(reader.close()).rejects.toMatchObject({ code: 'CS_IO', message: expect.stringContaining('cannot close it: close failed'), where: { file: sources.data.name } });
    expect(closes).toEqual({ data: 1, index: 1, checksum: 1 });
  });
});

describe('ReduceReader with openOutput', () => {
  async function statusOf(outcome: ShuffleOutcome): Promise<MapStatus> {
    const reader = await ShuffleReader.open(outcome.prefix);
    const partitionLengths = Array.from({ length: 3 }, (_, p) => reader.partitionLength(p));
    await reader.close();
    return {
      id: { shuffleId: 0, mapId: 0, attempt: 0 },
      location: { host: 'localhost', prefix: outcome.prefix },
      numPartitions: 3,
      partitionLengths,
      partitionRows: outcome.expected.map((rows) => rows.length),
    } as unknown as MapStatus;
  }

  test('an output whose reader cannot be made (a short index read) has its three sources closed (they stayed open)', async () => {
    const outcome = await output();
    const status = await statusOf(outcome);
    let closes: Record<Which, number> | null = null;
    const openOutput = async () => {
      const made = await sourcesOf(outcome.prefix, 'index', (s) => ({ read: async (offset, length) => (await s.read(offset, length)).subarray(1) }));
      closes = made.closes;
      return made.sources;
    };
    const reader = new ReduceReader({ maps: [status], partitions: 0, openOutput });
    await expect(reader.next()).rejects.toMatchObject({ code: 'CS_IO' });
    expect(closes).toEqual({ data: 1, index: 1, checksum: 1 });
  });

  test('an abort while a source read never returns stops the reader at once with CS_ABORTED and closes the sources (it waited for good)', async () => {
    const outcome = await output();
    const status = await statusOf(outcome);
    let closes: Record<Which, number> | null = null;
    const openOutput = async () => {
      const made = await sourcesOf(outcome.prefix, 'data', () => ({ read: () => new Promise<Uint8Array>(() => undefined), readInto: undefined }));
      closes = made.closes;
      return made.sources;
    };
    const controller = new AbortController();
    const reader = new ReduceReader({ maps: [status], partitions: 0, openOutput, signal: controller.signal });
    const next = reader.next();
    await new Promise((resolve) => setTimeout(resolve, 50)); // the read is on its way, never to return
    controller.abort();
    await expect(next).rejects.toMatchObject({ code: 'CS_ABORTED' });
    expect(closes).toEqual({ data: 1, index: 1, checksum: 1 });
  });
});
