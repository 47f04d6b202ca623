/**
 * Batches with the same schema must be accepted whichever way their schema
 * objects were built: in memory with arrow-js's convenience classes (Int32,
 * Float64, TimestampMillisecond, ...) or by arrow-js's IPC reader, which builds the
 * generic classes (Int_, Float, Timestamp_, ...) and reads a missing timezone as null.
 *
 * Regression tests: ShuffleWriter.write used to check `compareSchemas(boundSchema,
 * batch.schema)` from apache-arrow/visitor/typecomparator, which is asymmetric
 * (`other instanceof type.constructor`) and compares timezones with `===`
 * (undefined !== null), so such batches were refused with CS_SCHEMA_MISMATCH and a
 * message showing two identical schemas (fixed by src/writer/same-schema.ts).
 */
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import {
  DateDay,
  Decimal,
  Dictionary,
  makeData,
  makeVector,
  DurationSecond,
  Float64,
  Int32,
  IntervalYearMonth,
  Table,
  TimeMillisecond,
  TimestampMicrosecond,
  TimestampMillisecond,
  Uint16,
  Utf8,
  tableFromIPC,
  tableToIPC,
  type DataType,
  type RecordBatch,
} from 'apache-arrow';
import { ShuffleWriter } from '../src/writer/shuffle-writer.js';
import { createShuffleWriter } from '../src/writer-kind.js';
import { batchOf, buildColumn, schemaOf } from './support/columns.js';
import { Rng } from './support/random.js';
import { firstDifference, makeTempDir, removeDir, runShuffle } from './support/shuffle-harness.js';
import { join } from 'node:path';

function throughIpc(batch: RecordBatch): RecordBatch {
  return tableFromIPC(tableToIPC(new Table([batch]))).batches[0]!;
}

/** A 50-row batch {x: type} built in memory with makeData. */
function inMemoryBatch(type: DataType, seed: number): RecordBatch {
  const schema = schemaOf([{ name: 'x', type }]);
  return batchOf(schema, [buildColumn(type, 50, { bitmap: true, nullRate: 0.2 }, new Rng(seed))], 50);
}

const CONVENIENCE_TYPES: readonly [string, () => DataType][] = [
  ['Int32', () => new Int32()],
  ['Uint16', () => new Uint16()],
  ['Float64', () => new Float64()],
  ['DateDay', () => new DateDay()],
  ['TimeMillisecond', () => new TimeMillisecond()],
  ['TimestampMicrosecond("UTC")', () => new TimestampMicrosecond('UTC')],
  ['DurationSecond', () => new DurationSecond()],
  ['IntervalYearMonth', () => new IntervalYearMonth()],
];

describe('schema identity across in-memory and IPC-read batches', () => {
  let dir = '';
  beforeEach(async () => {
    dir = await makeTempDir();
  });
  afterEach(async () => {
    await removeDir(dir);
  });

  test.each(CONVENIENCE_TYPES)('a batch read back from IPC is accepted after an in-memory batch of the same schema (%s column)', async (_, make) => {
    const first = inMemoryBatch(make(), 1);
    const second = throughIpc(inMemoryBatch(make(), 2));
    const outcome = await runShuffle(dir, { numPartitions: 3, partitioning: { kind: 'round-robin' }, codec: 'none' }, [first, second]);
    expect(outcome.actual.flat().sort()).toEqual(outcome.input.slice().sort());
  });

  test.each(CONVENIENCE_TYPES)('a batch read back from IPC is accepted when create() was given the equal in-memory schema (%s column)', async (_, make) => {
    const built = inMemoryBatch(make(), 3);
    const fromIpc = throughIpc(built);
    const outcome = await runShuffle(dir, { numPartitions: 2, partitioning: { kind: 'single' }, codec: 'lz4', schema: built.schema }, [fromIpc]);
    expect(outcome.actual[0]).toEqual(outcome.input);
  });

  test('a timestamp column without a timezone from IPC is accepted after new TimestampMillisecond() (undefined vs null timezone)', async () => {
    const first = inMemoryBatch(new TimestampMillisecond(), 4);
    const second = throughIpc(inMemoryBatch(new TimestampMillisecond(), 5));
    const outcome = await runShuffle(dir, { numPartitions: 2, partitioning: { kind: 'round-robin' }, codec: 'zstd' }, [first, second]);
    expect(outcome.actual.flat().sort()).toEqual(outcome.input.slice().sort());
  });

  test('an in-memory batch is accepted after a batch read back from IPC of the same schema (the order that works)', async () => {
    const first = throughIpc(inMemoryBatch(new Int32(), 6));
    const second = inMemoryBatch(new Int32(), 7);
    const outcome = await runShuffle(dir, { numPartitions: 2, partitioning: { kind: 'round-robin' }, codec: 'none' }, [first, second]);
    expect(outcome.actual.flat().sort()).toEqual(outcome.input.slice().sort());
  });

  // src/writer/same-schema.ts compares flat types by String(type), and arrow-js's Decimal
  // toString() is `Decimal[<precision>e<scale>]` without the bit width: a Decimal256 batch is
  // accepted by a writer bound to Decimal128 (or 32/64) of the same precision and scale, and its
  // 32-byte values are then split as 16-byte values.
  test.each([
    [128, 256],
    [256, 128],
    [64, 128],
  ] as const)('a batch whose Decimal column is %i-bit is refused by a writer bound to a %i-bit Decimal of the same precision and scale', async (written, bound) => {
    const boundType = new Decimal(3, 18, bound);
    const writer = await ShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'round-robin' }, outputPrefix: join(dir, 'm'), codec: 'none', schema: schemaOf([{ name: 'x', type: boundType }]) });
    try {
      await expect(writer.write(inMemoryBatch(new Decimal(3, 18, written), 10))).rejects.toMatchObject({
        code: 'CS_SCHEMA_MISMATCH',
        message: expect.stringContaining(`Decimal${written}[18e+3], expected Decimal${bound}[18e+3]`),
      });
    } finally {
      await writer.abort();
    }
  });

  // Regression: a dictionary's type carries no width of its own and prints alike for both, so the second batch was taken,
  // and its decimal32 values 7 and 8 read back as 34359738375 and 0
  test.each(['hash', 'sort'] as const)('the %s writer refuses a batch of a decimal32 dictionary after one of a decimal128 dictionary', async (kind) => {
    const dictionaryBatch = (bits: 32 | 128, words: Uint32Array) => {
      const type = new Dictionary(new Decimal(2, 9, bits), new Int32(), 7);
      const values = makeData({ type: new Decimal(2, 9, bits), length: 2, data: words });
      return batchOf(schemaOf([{ name: 'd', type }]), [makeData({ type, length: 2, data: Int32Array.of(0, 1), dictionary: makeVector(values) })], 2);
    };
    const writer = await createShuffleWriter(kind, { numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'dict') });
    try {
      await writer.write(dictionaryBatch(128, Uint32Array.of(5, 0, 0, 0, 6, 0, 0, 0)));
      await expect(writer.write(dictionaryBatch(32, Uint32Array.of(7, 8)))).rejects.toMatchObject({
        code: 'CS_SCHEMA_MISMATCH',
        message: expect.stringContaining('Dictionary<Int32, Decimal32[9e+2]>, expected Dictionary<Int32, Decimal128[9e+2]>'),
      });
    } finally {
      await writer.abort();
    }
  });

  test('a Decimal256 batch written after a Decimal128 batch of the same precision and scale does not come back corrupted', async () => {
    const first = inMemoryBatch(new Decimal(3, 18, 128), 11);
    const second = inMemoryBatch(new Decimal(3, 18, 256), 12);
    let outcome: Awaited<ReturnType<typeof runShuffle>> | undefined;
    try {
      outcome = await runShuffle(dir, { numPartitions: 1, partitioning: { kind: 'single' }, codec: 'none' }, [first, second]);
    } catch (error) {
      expect(error).toMatchObject({ code: 'CS_SCHEMA_MISMATCH' }); // refusing the batch is fine
      return;
    }
    // if accepted, the 256-bit rows must come back as written (they cannot fit a 128-bit column)
    expect(firstDifference(outcome.actual[0]!, outcome.input)).toBeNull();
  });

  test('a batch whose schema really differs is still refused with CS_SCHEMA_MISMATCH', async () => {
    const writer = await ShuffleWriter.create({ numPartitions: 2, partitioning: { kind: 'single' }, outputPrefix: join(dir, 'm'), codec: 'none' });
    try {
      await writer.write(inMemoryBatch(new Int32(), 8));
      await expect(writer.write(inMemoryBatch(new Utf8(), 9))).rejects.toMatchObject({ code: 'CS_SCHEMA_MISMATCH' });
    } finally {
      await writer.abort();
    }
  });
});
