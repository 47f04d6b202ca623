/**
 * The streamed read's contract, from a mutation sweep of the code that reads a
 * partition longer than `wholePartitionBytes` a message (or row block) at a
 * time (src/reader/streamed-partition.ts, the range cursors of
 * src/format/ipc-reader.ts and src/sort-writer/row-reader.ts, the reader's and
 * inspect's use of them): which partitions are streamed, that no read leaves
 * the partition being read, that a streamed read fails as a whole read does
 * (the same code, the same offset), and the reader's range read for tools.
 *
 * test/streamed-partition.test.ts has the large cases; test/fuzz-reader.test.ts
 * compares whole and streamed reads of damaged outputs at random.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { makeTable, tableToIPC, type RecordBatch, type Table } from 'apache-arrow';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createShuffleWriter, ShuffleError, ShuffleReader, type OpenOptions } from '../src/index.js';
import { crc32cOf, encodeChecksums, encodeIndex, outputPaths } from '../src/format/output-files.js';
import { readIpcStreamAt } from '../src/format/ipc-reader.js';
import { rowHeaderLength } from '../src/sort-writer/row-format.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';
import { textSink } from './support/text-sink.js';
import { outputOf, PiecewiseSource, streamPieces } from './support/piecewise-output.js';
import { failure } from './support/failure.js';

/** What reading partition p comes to: its first column's values, or the error (code, location, message). */
type Outcome = { values: unknown[] } | { code: string; where: unknown; message: string };

async function outcomeOf(reader: ShuffleReader, p: number): Promise<Outcome> {
  const values: unknown[] = [];
  try {
    for await (const batch of reader.readPartition(p)) values.push(...batch.getChildAt(0)!.toArray());
    return { values };
  } catch (error) {
    if (!(error instanceof ShuffleError)) throw error;
    return { code: error.code, where: error.where, message: error.message };
  }
}

/** Partition p of the output read whole and read streamed (wholePartitionBytes 0): the two outcomes and the streamed read's source. */
async function bothWays(partitions: readonly (readonly Uint8Array[])[], p = 0, withChecksum = true) {
  const read = async (options: OpenOptions) => {
    const output = outputOf(partitions);
    const reader = await ShuffleReader.fromSources(withChecksum ? output : { data: output.data, index: output.index }, options);
    try {
      return { outcome: await outcomeOf(reader, p), output };
    } finally {
      await reader.close();
    }
  };
  const whole = await read({});
  const streamed = await read({ wholePartitionBytes: 0 });
  return { whole: whole.outcome, streamed: streamed.outcome, output: streamed.output };
}

/** The reads of `source` that reach outside [from, to). */
function outside(source: PiecewiseSource, from: number, to: number): [number, number][] {
  return source.all.filter(([offset, length]) => offset < from || offset + length > to);
}

let dir = '';
beforeEach(async () => {
  dir = await makeTempDir('cs-streamed-contract-');
});
afterEach(async () => {
  vi.restoreAllMocks();
  await removeDir(dir);
});

/** The one partition of a `single` output of `table` by `kind`'s writer, as bytes. */
async function onePartition(kind: 'hash' | 'sort', table: Table, codec: 'none' | 'lz4' | 'zstd' = 'none', maxBatchRows = 100): Promise<Uint8Array> {
  const prefix = join(dir, `${kind}-${codec}-${maxBatchRows}`);
  const writer = await createShuffleWriter(kind, { numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: prefix, codec, maxBatchRows });
  for (const batch of table.batches) await writer.write(batch as RecordBatch);
  await writer.finish();
  return new Uint8Array(await readFile(`${prefix}.data`));
}

const ints = (n: number) => makeTable({ v: Int32Array.from({ length: n }, (_, i) => i) });
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Offsets of a row partition's blocks (their headers), and of its end marker. */
function blocksOf(partition: Uint8Array): { blocks: number[]; end: number } {
  const view = new DataView(partition.buffer, partition.byteOffset, partition.byteLength);
  const blocks: number[] = [];
  let at = rowHeaderLength(partition)!;
  while (view.getUint32(at, true) !== 0) {
    blocks.push(at);
    at += 12 + view.getUint32(at + 8, true);
  }
  return { blocks, end: at };
}

describe('which partitions are streamed', () => {
  it('wholePartitionBytes 0 streams every non-empty partition: a 4-byte peek, then a read per frame, metadata and body, none the partition whole', async () => {
    const stream = streamPieces(ints(300));
    const output = outputOf([[stream.whole]]);
    const reader = await ShuffleReader.fromSources(output, { wholePartitionBytes: 0 });
    try {
      expect(await outcomeOf(reader, 0)).toEqual({ values: range(300) });
    } finally {
      await reader.close();
    }
    // the first pass is one readInto of the whole (a chunk), the second never holds it
    expect(output.data.readsInto).toEqual([[0, stream.whole.byteLength]]);
    expect(output.data.reads[0]).toEqual([0, 4]);
    expect(output.data.reads.length).toBeGreaterThan(3);
    expect(Math.max(...output.data.reads.map(([, length]) => length))).toBeLessThan(stream.whole.byteLength);
  });

  it('a partition exactly wholePartitionBytes long is read whole: one read of its bytes', async () => {
    const stream = streamPieces(ints(300));
    const output = outputOf([[stream.whole]]);
    const reader = await ShuffleReader.fromSources(output, { wholePartitionBytes: stream.whole.byteLength });
    try {
      expect(await outcomeOf(reader, 0)).toEqual({ values: range(300) });
    } finally {
      await reader.close();
    }
    expect(output.data.readsInto).toEqual([[0, stream.whole.byteLength]]);
    expect(output.data.reads).toEqual([]);
  });

  it('by default a partition over 256 MiB is streamed: no read longer than a message (the checksum pass reads 8 MiB at a time)', async () => {
    // 33 batch messages of 2^21 int32 values (8 MiB each), one piece repeated: just over 264 MiB
    const stream = streamPieces(ints(2 ** 21));
    const pieces = [stream.schema, ...Array.from({ length: 33 }, () => stream.batches), stream.end];
    const output = outputOf([pieces]);
    expect(output.offsets[1]).toBeGreaterThan(256 * 2 ** 20);
    const reader = await ShuffleReader.fromSources(output);
    let rows = 0;
    try {
      for await (const batch of reader.readPartition(0)) rows += batch.numRows;
    } finally {
      await reader.close();
    }
    expect(rows).toBe(33 * 2 ** 21);
    expect(Math.max(...output.data.all.map(([, length]) => length))).toBeLessThanOrEqual(8 * 2 ** 20 + 1024);
  }, 60_000);
});

describe('a streamed read fails as a whole read does', () => {
  it('a one-byte partition whose checksum is right is CS_CORRUPT_DATA at its offset, streamed as whole, not a checksum mismatch', async () => {
    const first = streamPieces(ints(3)).whole;
    const { whole, streamed } = await bothWays([[first], [Uint8Array.of(0xff)]], 1);
    expect(whole).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: first.byteLength } });
    expect(streamed).toEqual(whole);
  });
  it('an IPC stream without its end-of-stream marker (its last body ends the partition) yields every row, streamed as whole', async () => {
    const stream = streamPieces(makeTable({ v: Int32Array.from({ length: 40 }, (_, i) => i) }));
    const { whole, streamed } = await bothWays([[stream.schema, stream.batches], [streamPieces(ints(2)).whole]]);
    expect(whole).toEqual({ values: range(40) });
    expect(streamed).toEqual(whole);
  });

  it('a source whose reads return views at an offset into larger memory is read streamed as whole', async () => {
    const stream = streamPieces(ints(300)).whole;
    const rows = await onePartition('sort', ints(250), 'lz4', 100);
    for (const partition of [stream, rows]) {
      const output = outputOf([[partition]]);
      const plain = output.data.read.bind(output.data);
      // each read's bytes 8 bytes into a buffer of their own, after 8 bytes of 0xff
      output.data.read = async (offset, length) => {
        const bytes = await plain(offset, length);
        const memory = new Uint8Array(length + 16).fill(0xff);
        memory.set(bytes, 8);
        return memory.subarray(8, 8 + length);
      };
      const reader = await ShuffleReader.fromSources(output, { wholePartitionBytes: 0 });
      try {
        expect(await outcomeOf(reader, 0)).toEqual({ values: partition === stream ? range(300) : range(250) });
      } finally {
        await reader.close();
      }
    }
  });
});

describe('a streamed read never reads outside its partition', () => {
  it('an IPC stream ending with the legacy 4-byte end marker: its last frame is read as the 4 bytes left', async () => {
    const stream = streamPieces(ints(50));
    const legacy = [stream.schema, stream.batches, new Uint8Array(4)];
    const next = streamPieces(ints(2)).whole;
    const { whole, streamed, output } = await bothWays([legacy, [next]]);
    expect(whole).toEqual({ values: range(50) });
    expect(streamed).toEqual(whole);
    expect(outside(output.data, 0, output.offsets[1]!)).toEqual([]);
  });

  it('a sort-writer partition: its end marker is read as its 4 bytes', async () => {
    const rows = await onePartition('sort', ints(250), 'lz4', 100);
    expect(blocksOf(rows).blocks).toHaveLength(3);
    const next = streamPieces(ints(2)).whole;
    const { whole, streamed, output } = await bothWays([[rows], [next]]);
    expect(whole).toEqual({ values: range(250) });
    expect(streamed).toEqual(whole);
    expect(outside(output.data, 0, output.offsets[1]!)).toEqual([]);
  });

  it('a sort-writer partition cut to 10 bytes is CS_CORRUPT_DATA, its header not read past the cut', async () => {
    const rows = (await onePartition('sort', ints(10))).subarray(0, 10);
    const next = streamPieces(ints(2)).whole;
    const { whole, streamed, output } = await bothWays([[rows], [next]]);
    expect(whole).toMatchObject({ code: 'CS_CORRUPT_DATA' });
    expect(streamed).toEqual(whole);
    expect(outside(output.data, 0, output.offsets[1]!)).toEqual([]);
  });

  it('a sort-writer partition whose header claims more bytes than the partition has is CS_CORRUPT_DATA, not read past its end', async () => {
    const rows = (await onePartition('sort', ints(10))).slice();
    new DataView(rows.buffer).setInt32(12, rows.byteLength, true); // the schema message's metadata length
    const next = streamPieces(ints(2)).whole;
    const { whole, streamed, output } = await bothWays([[rows], [next]]);
    expect(whole).toMatchObject({ code: 'CS_CORRUPT_DATA' });
    expect(streamed).toEqual(whole);
    expect(outside(output.data, 0, output.offsets[1]!)).toEqual([]);
  });
});

describe('what a streamed read holds', () => {
  it('readIpcStreamAt hands out batches over the memory its reads returned, no copy of it, even when borrowed is asked', async () => {
    const stream = tableToIPC(ints(300), 'stream'); // codec none: the batch's values are its body's bytes
    const returned: ArrayBufferLike[] = [];
    const read = async (offset: number, length: number) => {
      const bytes = stream.slice(offset, offset + length);
      returned.push(bytes.buffer);
      return bytes;
    };
    let batches = 0;
    for await (const batch of readIpcStreamAt(read, 0, stream.byteLength, {}, { borrowed: true })) {
      batches++;
      expect(returned).toContain(batch.getChildAt(0)!.data[0]!.values.buffer);
    }
    expect(batches).toBe(1);
  });
});

describe('readPartitionRange (for tools that walk a partition without holding it)', () => {
  async function withReader(check: (reader: ShuffleReader, offsets: number[]) => Promise<void>): Promise<void> {
    const output = outputOf([[streamPieces(ints(3)).whole], [streamPieces(ints(5)).whole]]);
    const reader = await ShuffleReader.fromSources(output);
    try {
      await check(reader, output.offsets);
    } finally {
      await reader.close();
    }
  }

  it('reads up to the partition\'s last byte', async () => {
    await withReader(async (reader, offsets) => {
      const length = reader.partitionLength(0);
      expect(await reader.readPartitionRange(0, 0, length)).toHaveLength(length);
      expect(await reader.readPartitionRange(1, length - 8, 8)).toHaveLength(8);
      expect(offsets[1]).toBe(length);
    });
  });

  it('refuses a range that ends past the partition, or starts before it: CS_INVALID_ARGUMENT', async () => {
    await withReader(async (reader) => {
      const length = reader.partitionLength(0);
      for (const [offset, bytes] of [[0, length + 1], [length, 1], [-1, 1], [-8, 8]] as const) {
        const error = await failure(reader.readPartitionRange(0, offset, bytes));
        expect(error.code).toBe('CS_INVALID_ARGUMENT');
      }
    });
  });
});

describe('inspect over partitions it walks a read at a time', () => {
  interface Run {
    code: number;
    stdout: string;
    stderr: string;
  }

  /**
   * The CLI with inspect's threshold for walking a partition by reads
   * (DEFAULT_WHOLE_PARTITION_BYTES) at `threshold`: a small partition then
   * takes the path of one over 256 MiB.
   */
  async function inspectWith(threshold: number, prefix: string): Promise<Run> {
    vi.resetModules();
    vi.doMock('../src/reader/shuffle-reader.js', async (importOriginal) => ({ ...(await importOriginal<object>()), DEFAULT_WHOLE_PARTITION_BYTES: threshold }));
    try {
      const { main } = await import('../src/cli/main.js');
      const out = textSink();
      const err = textSink();
      const code = await main(['inspect', prefix, '--json'], { stdout: out.stream, stderr: err.stream, signal: new AbortController().signal });
      return { code, stdout: out.text(), stderr: err.text() };
    } finally {
      vi.doUnmock('../src/reader/shuffle-reader.js');
      vi.resetModules();
    }
  }

  /** An output on disk of the given partitions (index and checksums right for them); its prefix. */
  async function written(partitions: readonly (readonly Uint8Array[])[], name = 'out'): Promise<string> {
    const prefix = join(dir, name);
    const paths = outputPaths(prefix);
    await writeFile(paths.data, partitions.flat());
    await writeFile(paths.index, encodeIndex(partitions.map((pieces) => pieces.reduce((sum, piece) => sum + piece.byteLength, 0))));
    await writeFile(paths.checksum, encodeChecksums(partitions.map((pieces) => crc32cOf(pieces))));
    return prefix;
  }

  it('says what it says of the partitions read whole: hash and sort partitions, a stream with the legacy end marker, one with none', async () => {
    const stream = streamPieces(makeTable({ v: Int32Array.from({ length: 120 }, (_, i) => i) }));
    const rows = await onePartition('sort', ints(250), 'lz4', 100);
    const prefix = await written([[stream.whole], [rows], [], [stream.schema, stream.batches, new Uint8Array(4)], [stream.schema, stream.batches], [stream.schema]]);
    const whole = await inspectWith(256 * 2 ** 20, prefix);
    expect(whole.code).toBe(0);
    expect(JSON.parse(whole.stdout)).toMatchObject({ writer: 'mixed', partitionBatches: [1, 3, 0, 1, 1, 0], partitionRows: [120, 250, 0, 120, 120, 0] });
    const streamed = await inspectWith(0, prefix);
    expect(streamed).toEqual(whole);
  });

  it('verifies a partition it walks by reads: a damaged byte in partition 1 is CS_CHECKSUM_MISMATCH naming partition 1', async () => {
    const stream = streamPieces(ints(120)).whole;
    const damaged = stream.slice();
    damaged[damaged.byteLength - 20]! ^= 0x10; // in the body: the walk alone would not notice
    const prefix = await written([[stream], [stream]]);
    const paths = outputPaths(prefix);
    await writeFile(paths.data, [stream, damaged]);
    const run = await inspectWith(0, prefix);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^columnar-shuffle: error CS_CHECKSUM_MISMATCH: .*partition 1\b/);
  });

  it('locates a damaged frame at its message, not at the partition\'s start', async () => {
    const stream = streamPieces(ints(120));
    // the batch message's metadata length claims more than the partition holds; the checksums are right for it
    const batches = stream.batches.slice();
    new DataView(batches.buffer).setInt32(4, 1 << 20, true);
    const first = streamPieces(ints(3)).whole;
    const prefix = await written([[first], [stream.schema, batches, stream.end]]);
    const at = first.byteLength + stream.schema.byteLength;
    const whole = await inspectWith(256 * 2 ** 20, prefix);
    expect(whole.code).toBe(1);
    expect(whole.stderr).toContain(`CS_CORRUPT_DATA: invalid Arrow IPC stream: message metadata of ${1 << 20} bytes runs past the end of the stream`);
    expect(whole.stderr).toContain(`partition 1, byte offset ${at}`);
    expect(await inspectWith(0, prefix)).toEqual(whole);
  });
});

describe('a defect the fixed-seed fuzz run of this sweep found (not in the streamed code: whole and streamed reads agree)', () => {
  /**
   * FUZZ_SEED=20261207 FUZZ_RUNS=300, case 186 (base 35: hash writer, codec
   * none, a List<Map<{key: Int32, value: LargeList<Int64>}>> column; the
   * first batch message's metadata length rewritten from 648 to 649): the
   * partition cut after that message, with an end-of-stream marker, no
   * checksum file. The batch is accepted (1 row); its map is empty, but the
   * LargeList inside it (length 0) has a first offset of -2^56. A plain read
   * yields the row; a coalesced read throws a RangeError from the coalescer
   * ("a large binary or list column holds more than 2 GiB of data in one
   * batch"): an untyped error, where a ShuffleError (CS_CORRUPT_DATA) is
   * promised. Expected: validation refuses the column (a negative offset), or
   * the coalescer's error is typed.
   */
  const PARTITION_GZIP_BASE64 =
    'H4sIAAAAAAACA7WSv2sUURDHP7u33i13q9nEFRexONAilcRfEEEhRQqLFCkjiPgjCx4mISanRAlyjaBorYUkpLSwsjFFaklhaWEh/hWWcqPv7by4eQsqQl6x' +
    'c2++P2bm3oiIbIeQYk6blCO0iGnbO0GZj4iJNZovtICZEKIQdgJ4GcD1AMaDEj89FMnUIy9jEgfQBJaK1X4xD4F6zda5o18U6/WLRQvofXIoYnpS3uF32kux' +
    '1F/pFauEwIJy39Z9j80Ah4CHtxYeFBXfz3VumHk9mPNsKGI4U8C0iOxqP6oNze8GcK94ZBPbyu8CfRFZE5F1ETFaV6+qNf3fuVAmvntajz+yxz9fJm6LiKm9' +
    'Ved2Msc9h75oZGf7VOe2c8c966ZuEtO0b2eQlJyIDkft1AmV+Z1Ha89jouoRWY8xzL5ltv6IVcf2W/0fnb43XyZiEmK7mWWdrrqKiDzX/U3ISBmzW5oAJ38R' +
    'Brh5GyTkpLrDie7QV8UDfp/Eu1fxg4oHcY7/AYtw/+v+PlIvdj183NNNePik5z/l4Vc1NjTOevicp7/p4Xe9+sveXMuefs3D//fu6g08fPCXN7jRenP56ZnO' +
    'xUsbJ568uvYtd/nu4833r0993KGyx1Xdh/aVfT4vFu//+Jc3F2f0ExqthPXZBQAA' +
    '';

  it('a damaged batch (a first offset of -2^56 under no rows) is a ShuffleError when coalesced, streamed or whole, not a RangeError', async () => {
    const partition = new Uint8Array(gunzipSync(Buffer.from(PARTITION_GZIP_BASE64, 'base64')));
    for (const wholePartitionBytes of [undefined, 0]) {
      const output = outputOf([[partition]]);
      const reader = await ShuffleReader.fromSources({ data: output.data, index: output.index }, { wholePartitionBytes });
      try {
        const error = await (async () => {
          for await (const batch of reader.readPartitions(0, 1, { coalesceRows: 37 })) void batch;
        })().then(() => null, (e: unknown) => e);
        expect(error).toBeInstanceOf(ShuffleError);
      } finally {
        await reader.close();
      }
    }
  });
});

describe('a damaged sort-writer partition fails streamed as read whole, at the same offset', () => {
  /** A sort partition of 250 rows in 3 lz4 blocks after a small IPC partition, `damage`d; whole and streamed outcomes (checksums right for the damaged bytes). */
  async function damagedRows(damage: (rows: Uint8Array, layout: { blocks: number[]; end: number }) => Uint8Array) {
    const rows = await onePartition('sort', makeTable({ v: Int32Array.from({ length: 250 }, (_, i) => i % 7) }), 'lz4', 100);
    const layout = blocksOf(rows);
    expect(layout.blocks).toHaveLength(3);
    const first = streamPieces(ints(3)).whole;
    const result = await bothWays([[first], [damage(rows.slice(), layout)]], 1);
    return { ...result, first: first.byteLength, layout };
  }

  it('cut right after a block header: that block runs past the end of the partition, at its header', async () => {
    const { whole, streamed, first, layout } = await damagedRows((rows, { blocks }) => rows.subarray(0, blocks[1]! + 12));
    expect(whole).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: first + layout.blocks[1]! } });
    expect((whole as { message: string }).message).toMatch(/stored bytes runs past the end of the partition/);
    expect(streamed).toEqual(whole);
  });

  it('cut before its end marker: the partition ends without its end marker, where the marker should be', async () => {
    const { whole, streamed, first, layout } = await damagedRows((rows) => rows.subarray(0, rows.byteLength - 4));
    expect(whole).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: first + layout.end } });
    expect((whole as { message: string }).message).toMatch(/ends without its end marker/);
    expect(streamed).toEqual(whole);
  });

  it('a block whose rows do not decode, before one that cannot be decompressed: the first block\'s error, and no unhandled rejection of the second', async () => {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      const { whole, streamed, first, layout } = await damagedRows((rows, { blocks }) => {
        const view = new DataView(rows.buffer, rows.byteOffset, rows.byteLength);
        view.setUint32(blocks[0]!, 101, true); // block 0 claims a row more than it holds
        view.setUint32(blocks[1]! + 12, 0xdeadbeef, true); // block 1's lz4 frame magic
        return rows;
      });
      expect(whole).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: first + layout.blocks[0]! } });
      expect(streamed).toEqual(whole);
      await new Promise((resolve) => setTimeout(resolve, 10)); // an unhandled rejection is reported after a turn of the loop
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', listener);
    }
  });

  it('a block that cannot be decompressed is reported before a broken header of the block after it', async () => {
    const { whole, streamed, first, layout } = await damagedRows((rows, { blocks }) => {
      const view = new DataView(rows.buffer, rows.byteOffset, rows.byteLength);
      view.setUint32(blocks[0]! + 12, 0xdeadbeef, true); // block 0's lz4 frame magic
      view.setUint32(blocks[1]! + 8, 0x7fffffff, true); // block 1's stored length runs past the end
      return rows;
    });
    expect(whole).toMatchObject({ code: 'CS_CORRUPT_DATA', where: { partition: 1, offset: first + layout.blocks[0]! } });
    expect(streamed).toEqual(whole);
  });
});
