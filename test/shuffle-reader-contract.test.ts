/**
 * ShuffleReader's contract at its edges, pinned by a mutation sweep of
 * src/reader/shuffle-reader.ts: what open/fromSources accept and refuse (and
 * which file and offset a refusal names), how empty partitions and their
 * checksums are treated, how a range is read in runs, and that a failed open
 * leaves no file open.
 *
 * Most tests build an output in memory from the bytes of one real partition
 * (a one-partition output of the columnar writer), laid out as the test needs:
 * empty partitions around it, several copies of it, a crafted checksum file.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Dictionary, Field, Int32, makeData, makeTable, RecordBatch, Schema, Struct, Utf8, Vector } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createShuffleWriter, ShuffleError, ShuffleReader, type ByteRangeSource } from '../src/index.js';
import { crc32cOf } from '../src/format/output-files.js';
import { BatchCoalescer } from '../src/reader/batch-coalescer.js';
import { utf8Column } from './support/columns.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';
import { failure } from './support/failure.js';
import { openFilesUnder } from './support/open-files.js';

let dir = '';
let prefix = '';
/** the bytes of the one partition of a 20-row output (v = 0..19, two batches of 10) */
let partition: Uint8Array;

beforeEach(async () => {
  dir = await makeTempDir('cs-reader-contract-');
  prefix = join(dir, 'out');
  const writer = await createShuffleWriter('hash', { numPartitions: 1, partitioning: { kind: 'round-robin' }, outputPrefix: prefix, maxBatchRows: 10 });
  await writer.write(makeTable({ v: Int32Array.from({ length: 20 }, (_, i) => i) }).batches[0]! as RecordBatch);
  await writer.finish();
  partition = new Uint8Array(await readFile(`${prefix}.data`));
});
afterEach(async () => removeDir(dir));

/** An in-memory ByteRangeSource; `withReadInto` adds readInto (as LocalFileSource has). Records its calls. */
class MemorySource implements ByteRangeSource {
  readonly calls: string[] = [];
  readInto?: (offset: number, target: Uint8Array) => Promise<void>;
  constructor(readonly name: string, readonly bytes: Uint8Array, withReadInto = false) {
    if (withReadInto) {
      this.readInto = async (offset, target) => {
        this.calls.push(`readInto ${offset} ${target.byteLength}`);
        target.set(this.bytes.subarray(offset, offset + target.byteLength));
      };
    }
  }
  async size() {
    this.calls.push('size');
    return this.bytes.byteLength;
  }
  async read(offset: number, length: number) {
    this.calls.push(`read ${offset} ${length}`);
    return this.bytes.slice(offset, offset + length);
  }
  async close() {}
}

function u64be(values: readonly (number | bigint)[]): Uint8Array {
  const bytes = new Uint8Array(values.length * 8);
  const view = new DataView(bytes.buffer);
  values.forEach((v, i) => view.setBigUint64(i * 8, BigInt(v), false));
  return bytes;
}

interface Layout {
  data: Uint8Array;
  offsets: number[];
  checksums: bigint[];
}

/** An output whose partitions are `full` (the real partition's bytes) or `empty`, in this order. */
function layout(parts: readonly ('full' | 'empty')[]): Layout {
  const offsets = [0];
  const chunks: Uint8Array[] = [];
  const checksums: bigint[] = [];
  for (const part of parts) {
    const bytes = part === 'full' ? partition : new Uint8Array(0);
    chunks.push(bytes);
    offsets.push(offsets[offsets.length - 1]! + bytes.byteLength);
    checksums.push(BigInt(crc32cOf([bytes])));
  }
  const data = new Uint8Array(offsets[offsets.length - 1]!);
  chunks.forEach((c, i) => data.set(c, offsets[i]!));
  return { data, offsets, checksums };
}

function sourcesOf(l: Layout, opts: { readInto?: boolean; index?: Uint8Array; checksum?: Uint8Array } = {}) {
  return {
    data: new MemorySource('mem.data', l.data, opts.readInto ?? false),
    index: new MemorySource('mem.index', opts.index ?? u64be(l.offsets)),
    checksum: new MemorySource('mem.checksum', opts.checksum ?? u64be(l.checksums)),
  };
}

async function values(batches: AsyncIterable<RecordBatch>): Promise<number[]> {
  const out: number[] = [];
  for await (const batch of batches) for (const row of batch) out.push(row!.v as number);
  return out;
}

const TWENTY = Array.from({ length: 20 }, (_, i) => i);

describe('opening: what is refused, and where', () => {
  test('an index of one entry (no partition) is CS_CORRUPT_DATA naming the index file', async () => {
    const l = layout([]);
    const error = await failure(ShuffleReader.fromSources(sourcesOf(l)));
    expect(error.code).toBe('CS_CORRUPT_DATA');
    expect(error.where.file).toBe('mem.index');
  });

  test('an index whose first entry is not 0 is CS_CORRUPT_DATA at entry 0', async () => {
    const l = layout(['full']);
    const error = await failure(ShuffleReader.fromSources(sourcesOf(l, { index: u64be([8, l.data.byteLength]) })));
    expect(error.code).toBe('CS_CORRUPT_DATA');
    expect(error.where).toMatchObject({ file: 'mem.index', offset: 0 });
  });

  test('a decreasing index entry is named by its byte offset in the index file (8 per entry)', async () => {
    const l = layout(['full', 'full', 'full']);
    const index = u64be([0, l.offsets[1]!, 5, l.offsets[3]!]);
    const error = await failure(ShuffleReader.fromSources(sourcesOf(l, { index })));
    expect(error.code).toBe('CS_CORRUPT_DATA');
    expect(error.message).toMatch(/index entry 2 is 5/);
    expect(error.where).toMatchObject({ file: 'mem.index', offset: 16 });
  });

  test('an entry past the end of the data file is named as that entry of the index, not by a later one', async () => {
    const l = layout(['full', 'full']);
    const size = l.data.byteLength;
    const index = u64be([0, size + 8, size]);
    const error = await failure(ShuffleReader.fromSources(sourcesOf(l, { index })));
    expect(error.code).toBe('CS_CORRUPT_DATA');
    expect(error.message).toMatch(/index entry 1 is \d+/);
    expect(error.where).toMatchObject({ file: 'mem.index', offset: 8 });
  });

  test('a data file shorter than the index says is named, as truncated, from the first partition it cuts off: not blamed on the index', async () => {
    const l = layout(['full', 'full', 'full']);
    const short = l.data.subarray(0, l.offsets[1]! + 8);
    const error = await failure(ShuffleReader.fromSources({ ...sourcesOf(l), data: new MemorySource('mem.data', short) }));
    expect(error.code).toBe('CS_CORRUPT_DATA');
    expect(error.where).toEqual({ file: 'mem.data', offset: short.byteLength });
    expect(error.message).toBe(`the data file has ${short.byteLength} bytes, but the index puts the end of partition 1 at ${l.offsets[2]} and of the last at ${l.offsets[3]}: the data file is truncated, or the index damaged (file mem.data, byte offset ${short.byteLength})`);
  });

  test('an index that ends before the data file does is CS_CORRUPT_DATA naming the data file', async () => {
    const l = layout(['full']);
    const index = u64be([0, l.data.byteLength - 8]);
    const error = await failure(ShuffleReader.fromSources(sourcesOf(l, { index })));
    expect(error.code).toBe('CS_CORRUPT_DATA');
    expect(error.where.file).toBe('mem.data');
  });

  test('a checksum file one entry too long is CS_CORRUPT_DATA naming the checksum file', async () => {
    const l = layout(['full', 'empty']);
    const checksum = u64be([...l.checksums, 0n]);
    const error = await failure(ShuffleReader.fromSources(sourcesOf(l, { checksum })));
    expect(error.code).toBe('CS_CORRUPT_DATA');
    expect(error.message).toMatch(/checksum file has 24 bytes, expected 16 for 2 partitions/);
    expect(error.where.file).toBe('mem.checksum');
  });

  test.each([-1, 1.5, Number.NaN])('maxBufferBytes %s is CS_INVALID_ARGUMENT from fromSources, before any source is asked anything', async (maxBufferBytes) => {
    const sources = sourcesOf(layout(['full']));
    const error = await failure(ShuffleReader.fromSources(sources, { maxBufferBytes }));
    expect(error.code).toBe('CS_INVALID_ARGUMENT');
    expect([...sources.data.calls, ...sources.index.calls, ...sources.checksum.calls]).toEqual([]);
  });

  test('only the low 32 bits of a checksum entry are the CRC32C: set high bits are ignored', async () => {
    const l = layout(['full']);
    const checksum = u64be([l.checksums[0]! | 0xdead_beef_0000_0000n]);
    const reader = await ShuffleReader.fromSources(sourcesOf(l, { checksum }));
    try {
      expect(reader.checksums).toEqual([Number(l.checksums[0])]);
      expect(await values(reader.readPartition(0))).toEqual(TWENTY);
    } finally {
      await reader.close();
    }
  });
});

describe('a failed open leaves no file open', () => {
  test.runIf(process.platform === 'linux')('a corrupt index: open() fails CS_CORRUPT_DATA and has closed all three files', async () => {
    await writeFile(`${prefix}.index`, new Uint8Array(12));
    const error = await failure(ShuffleReader.open(prefix));
    expect(error.code).toBe('CS_CORRUPT_DATA');
    expect(openFilesUnder(dir)).toEqual([]);
  });

  test.runIf(process.platform === 'linux')('a missing checksum file: open() fails CS_FILE_NOT_FOUND and has closed the index and data files', async () => {
    await rm(`${prefix}.checksum.CRC32C`);
    const error = await failure(ShuffleReader.open(prefix));
    expect(error.code).toBe('CS_FILE_NOT_FOUND');
    expect(openFilesUnder(dir)).toEqual([]);
  });
});

describe('empty partitions', () => {
  test('schema() skips empty partitions: an output whose first partition is empty has the schema of the next', async () => {
    const reader = await ShuffleReader.fromSources(sourcesOf(layout(['empty', 'full'])));
    try {
      const schema = await reader.schema();
      expect(schema?.fields.map((f) => f.name)).toEqual(['v']);
    } finally {
      await reader.close();
    }
  });

  test('an empty partition whose checksum is not that of nothing is CS_CHECKSUM_MISMATCH naming it', async () => {
    const l = layout(['full', 'empty', 'full']);
    const checksum = u64be([l.checksums[0]!, 0x1234n, l.checksums[2]!]);
    const reader = await ShuffleReader.fromSources(sourcesOf(l, { checksum }));
    try {
      const error = await failure(values(reader.readPartition(1)));
      expect(error.code).toBe('CS_CHECKSUM_MISMATCH');
      expect(error.where).toMatchObject({ file: 'mem.data', partition: 1, offset: l.offsets[1] });
    } finally {
      await reader.close();
    }
  });

  test('a checksum mismatch names the partition and its offset in the data file', async () => {
    const l = layout(['full', 'full']);
    const checksum = u64be([l.checksums[0]!, l.checksums[1]! ^ 1n]);
    const reader = await ShuffleReader.fromSources(sourcesOf(l, { checksum, readInto: true }));
    try {
      const error = await failure(values(reader.readPartitions(0, 2)));
      expect(error.code).toBe('CS_CHECKSUM_MISMATCH');
      expect(error.where).toMatchObject({ file: 'mem.data', partition: 1, offset: partition.byteLength });
    } finally {
      await reader.close();
    }
  });
});

describe('ranges are read in runs', () => {
  test('a run takes neighbours while it stays within readRunBytes, a run of exactly readRunBytes included', async () => {
    const l = layout(['full', 'full', 'full', 'full']);
    const sources = sourcesOf(l, { readInto: true });
    const reader = await ShuffleReader.fromSources(sources, { readRunBytes: 2 * partition.byteLength });
    try {
      expect(await values(reader.readPartitions(0, 4))).toEqual([...TWENTY, ...TWENTY, ...TWENTY, ...TWENTY]);
      const size = 2 * partition.byteLength;
      expect(sources.data.calls.filter((c) => c !== 'size')).toEqual([`readInto 0 ${size}`, `readInto ${size} ${size}`]);
    } finally {
      await reader.close();
    }
  });

  test('the next run is read while this one is decoded: when the first batch is handed out, two runs (and no more) have been asked for', async () => {
    const l = layout(['full', 'full', 'full']);
    const sources = sourcesOf(l, { readInto: true });
    const reader = await ShuffleReader.fromSources(sources, { readRunBytes: 0 });
    try {
      const batches = reader.readPartitions(0, 3);
      const first = await batches.next();
      expect(first.done).toBe(false);
      expect(sources.data.calls.filter((c) => c.startsWith('readInto'))).toHaveLength(2);
      await batches.return(undefined);
    } finally {
      await reader.close();
    }
  });

  test('a read ahead that fails after the caller stopped reading is not an unhandled rejection', async () => {
    const l = layout(['full', 'full']);
    const sources = sourcesOf(l, { readInto: true });
    const readInto = sources.data.readInto!;
    sources.data.readInto = async (offset, target) => {
      if (offset > 0) throw new ShuffleError('CS_IO', 'the second run cannot be read', { file: 'mem.data', offset });
      return readInto(offset, target);
    };
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const reader = await ShuffleReader.fromSources(sources, { readRunBytes: 0 });
    try {
      const batches = reader.readPartitions(0, 2);
      expect((await batches.next()).done).toBe(false);
      await batches.return(undefined);
      // let a rejection that nobody handles be reported
      await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await reader.close();
    }
  });
});

describe('ranges', () => {
  test('an empty range [p, p) is valid, at the end of the output too, and yields nothing', async () => {
    const reader = await ShuffleReader.fromSources(sourcesOf(layout(['full', 'full'])));
    try {
      expect(await values(reader.readPartitions(1, 1))).toEqual([]);
      expect(await values(reader.readPartitions(2, 2))).toEqual([]);
    } finally {
      await reader.close();
    }
  });
});

describe('arguments of a read', () => {
  test.each<[number, number]>([[-1, 1], [-1, 0], [0, 3], [2, 1]])('the range [%i, %i) of a 2-partition output is CS_INVALID_ARGUMENT', async (start, end) => {
    const reader = await ShuffleReader.fromSources(sourcesOf(layout(['full', 'full']), { readInto: true }));
    try {
      expect((await failure(values(reader.readPartitions(start, end)))).code).toBe('CS_INVALID_ARGUMENT');
    } finally {
      await reader.close();
    }
  });

  test.each([0, -1, 2.5])('coalesceRows %s is CS_INVALID_ARGUMENT (it must be an integer >= 1)', async (coalesceRows) => {
    const reader = await ShuffleReader.fromSources(sourcesOf(layout(['full'])));
    try {
      const error = await failure(values(reader.readPartition(0, { coalesceRows })));
      expect(error.code).toBe('CS_INVALID_ARGUMENT');
      expect(error.message).toMatch(/coalesceRows must be an integer >= 1/);
    } finally {
      await reader.close();
    }
  });

  test('coalesceRows 1 is valid: one batch per row', async () => {
    const reader = await ShuffleReader.fromSources(sourcesOf(layout(['full'])));
    try {
      const sizes: number[] = [];
      for await (const batch of reader.readPartition(0, { coalesceRows: 1 })) sizes.push(batch.numRows);
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(20);
    } finally {
      await reader.close();
    }
  });
});

describe('read buffers', () => {
  /** a data source whose readInto records the ArrayBuffer of each target, failing while `failing` is set */
  function recording(l: Layout) {
    const sources = sourcesOf(l, { readInto: true });
    const readInto = sources.data.readInto!;
    const targets: ArrayBufferLike[] = [];
    const state = { failing: false };
    sources.data.readInto = async (offset, target) => {
      targets.push(target.buffer);
      if (state.failing) throw new ShuffleError('CS_IO', 'read failed', { file: 'mem.data', offset });
      return readInto(offset, target);
    };
    return { sources, targets, state };
  }

  test('a read that fails gives its read buffer back: the next read reuses it', async () => {
    const { sources, targets, state } = recording(layout(['full', 'full']));
    const reader = await ShuffleReader.fromSources(sources, { readRunBytes: 0 });
    try {
      state.failing = true;
      expect((await failure(values(reader.readPartition(0)))).code).toBe('CS_IO');
      state.failing = false;
      expect(await values(reader.readPartition(1))).toEqual(TWENTY);
      expect(targets).toHaveLength(2);
      expect(targets[1]).toBe(targets[0]);
    } finally {
      await reader.close();
    }
  });

  test('at most two idle read buffers are kept: of three concurrent reads after three others, one gets a new buffer', async () => {
    const { sources, targets } = recording(layout(['full', 'full', 'full']));
    const reader = await ShuffleReader.fromSources(sources, { readRunBytes: 0 });
    try {
      const round = () => Promise.all([0, 1, 2].map((p) => values(reader.readPartition(p))));
      expect(await round()).toEqual([TWENTY, TWENTY, TWENTY]);
      const first = new Set(targets.splice(0));
      expect(first.size).toBe(3);
      expect(await round()).toEqual([TWENTY, TWENTY, TWENTY]);
      expect(targets.filter((b) => first.has(b))).toHaveLength(2);
    } finally {
      await reader.close();
    }
  });
});

describe('a source without readInto', () => {
  test('batches view the bytes its read() returned (they are the reader\'s, not copied again)', async () => {
    const l = layout(['full']);
    const sources = sourcesOf(l);
    const returned: ArrayBufferLike[] = [];
    const read = sources.data.read.bind(sources.data);
    sources.data.read = async (offset, length) => {
      const bytes = await read(offset, length);
      returned.push(bytes.buffer);
      return bytes;
    };
    const reader = await ShuffleReader.fromSources(sources, { readRunBytes: 0 });
    try {
      const viewed: boolean[] = [];
      for await (const batch of reader.readPartition(0)) viewed.push(returned.includes(batch.getChildAt(0)!.data[0]!.values.buffer));
      expect(viewed).toEqual([true, true]);
    } finally {
      await reader.close();
    }
  });
});

describe('BatchCoalescer', () => {
  const TYPE = new Dictionary(new Utf8(), new Int32(), 0);
  const SCHEMA = new Schema([new Field('d', TYPE, true)]);
  function dictBatch(values: string[], indices: number[]): RecordBatch {
    const d = makeData({ type: TYPE, length: indices.length, nullCount: 0, data: Int32Array.from(indices), dictionary: new Vector([utf8Column(values)]) } as never);
    return new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: indices.length, nullCount: 0, children: [d] }));
  }

  test('an empty batch adds nothing to the coalesced batch, not even its dictionary\'s values', () => {
    const coalescer = new BatchCoalescer(SCHEMA, 100);
    const out = [dictBatch(['a', 'b'], [0, 1]), dictBatch(['x', 'y'], []), dictBatch(['c'], [0])].flatMap((b) => coalescer.push(b));
    const last = coalescer.finish();
    expect(out).toEqual([]);
    expect([...last!.getChildAt(0)!].map(String)).toEqual(['a', 'b', 'c']);
    expect([...last!.getChildAt(0)!.data[0]!.dictionary!].map(String)).toEqual(['a', 'b', 'c']);
  });
});
