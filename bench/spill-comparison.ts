/**
 * The spill comparison: the same input at P = 200 into an unlimited writer
 * and into one whose pool is 1/32 of the input's Arrow bytes, alternating
 * (unlimited first in even rounds, spilling first in odd ones) so that drift
 * on a shared machine hits both alike; medians over the rounds. Each round
 * is a tinybench run of one iteration of each, after one warm-up iteration
 * of each in the first round. Target (issue 3, columnar writer): the spilling
 * write within 1.5x of the unlimited one.
 */
import { join } from 'node:path';
import type { RecordBatch } from 'apache-arrow';
import { Bench } from 'tinybench';
import { createShuffleWriter, MemoryPool, ShuffleReader, type CodecName, type ShuffleWriteResult, type WriterKind } from '../src/index.js';
import { freshOutput, median, UNLIMITED_POOL } from './measure.js';

export const SPILL_PARTITIONS = 200;
export const SPILL_FRACTION = 32;
export const SPILL_TARGET_RATIO = 1.5;

export interface SpillCase {
  /** null: unlimited */
  memoryLimit: number | null;
  writeMs: number;
  spills: number;
  spilledBytes: number;
  peakMemoryBytes: number;
  outputBytes: number;
}

export interface SpillResult {
  writer: WriterKind;
  partitions: number;
  codec: CodecName;
  rows: number;
  inputBytes: number;
  rounds: number;
  unlimited: SpillCase;
  limited: SpillCase;
  /** limited.writeMs / unlimited.writeMs */
  ratio: number;
}

/** `floor`: the least memory limit (small inputs of the quick profile: 1/32 of them is too little for any writer). */
export async function spillComparison(writer: WriterKind, key: string, batches: RecordBatch[], inputBytes: number, dir: string, rounds: number, floor = 0): Promise<SpillResult> {
  const codec: CodecName = 'lz4';
  const limit = Math.max(floor, Math.floor(inputBytes / SPILL_FRACTION));
  const prefix = join(dir, `spill-${writer}`);
  const last = new Map<string, ShuffleWriteResult>();
  const times = new Map<string, number[]>();
  const write = (name: string, memoryLimit: number | null) => {
    // one pool for every write of the case (UNLIMITED_POOL without a limit), as map tasks one after another share one
    const pool = memoryLimit === null ? UNLIMITED_POOL : new MemoryPool(memoryLimit);
    return async () => {
      const mapWriter = await createShuffleWriter(writer, {
        numPartitions: SPILL_PARTITIONS,
        partitioning: { kind: 'hash', keys: [key] },
        outputPrefix: `${prefix}-${name}`,
        overwrite: true,
        codec,
        memoryPool: pool,
        spillDir: dir,
      });
      for (const batch of batches) await mapWriter.write(batch);
      last.set(name, await mapWriter.finish());
    };
  };
  const cases = [
    { name: 'unlimited', run: write('unlimited', null) },
    { name: 'limited', run: write('limited', limit) },
  ];
  for (let round = 0; round < rounds; round++) {
    const bench = new Bench({ iterations: 1, time: 0, warmupIterations: round === 0 ? 1 : 0, warmupTime: 0 });
    for (const c of round % 2 === 0 ? cases : [...cases].reverse()) bench.add(c.name, c.run, { beforeEach: () => freshOutput(`${prefix}-${c.name}`) });
    await bench.run();
    for (const task of bench.tasks) {
      const result = task.result;
      if (result.state === 'errored') throw new Error(`spill comparison, ${task.name}: ${result.error.message}`, { cause: result.error });
      if (result.state !== 'completed') throw new Error(`spill comparison, ${task.name}: ${result.state}`);
      times.set(task.name, [...(times.get(task.name) ?? []), result.latency.p50]);
    }
  }
  // the spilled output must hold every row
  const reader = await ShuffleReader.open(`${prefix}-limited`);
  let rows = 0;
  for await (const batch of reader.readPartitions(0, reader.numPartitions)) rows += batch.numRows;
  await reader.close();
  const totalRows = batches.reduce((sum, b) => sum + b.numRows, 0);
  if (rows !== totalRows) throw new Error(`spill comparison: read ${rows} rows, wrote ${totalRows}`);

  const summary = (name: string, memoryLimit: number | null): SpillCase => {
    const result = last.get(name)!;
    return {
      memoryLimit,
      writeMs: median(times.get(name)!),
      spills: result.spills,
      spilledBytes: result.spilledBytes,
      peakMemoryBytes: result.peakMemoryBytes,
      outputBytes: result.bytesWritten,
    };
  };
  const unlimited = summary('unlimited', null);
  const limited = summary('limited', limit);
  return { writer, partitions: SPILL_PARTITIONS, codec, rows: totalRows, inputBytes, rounds, unlimited, limited, ratio: limited.writeMs / unlimited.writeMs };
}
