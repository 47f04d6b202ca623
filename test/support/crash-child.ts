/**
 * A shuffle writer run in its own process, for test/crash.test.ts to kill.
 *
 *   node --import tsx test/support/crash-child.ts <outputPrefix> <spillDir> <batches> <rows> <poolBytes> [pauseMs]
 *
 * Writes `batches` narrow batches (src/cli/demo-data.ts, seeds 1, 2, ...) of
 * `rows` rows into 32 hash partitions with a memory pool of `poolBytes` (small
 * enough to make it spill), and prints one marker line per step to stdout,
 * synchronously (the parent kills it after some marker):
 *
 *   START                      the writer exists (its temporary data file too)
 *   SPLIT <n>                  batch n was split (n = 1, 2, ...)
 *   SPILLING / SPILLED <bytes> the pool asked the writer to reclaim memory, and it did
 *   FINISHING                  finish() called: flush (may spill), merge, commit
 *   MERGING                    the merge's first write into the temporary data file
 *   RENAMING <kind> / RENAMED <kind>   the commit's renames (data, checksum, index)
 *   FINISHED <ms> <rows> <spills> <mergeMs>   finish() returned after <ms> ms, <mergeMs> of them from MERGING to the first rename
 *
 * With `pauseMs` > 0 the child sleeps that long after each rename, so that a
 * kill lands between two renames.
 */
import { writeSync } from 'node:fs';
import fsPromises from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { narrowBatch } from '../../src/cli/demo-data.js';
import { MemoryPool } from '../../src/memory/memory-pool.js';
import { ShuffleWriter } from '../../src/writer/shuffle-writer.js';

const CRASH_PARTITIONS = 32;

function mark(line: string): void {
  writeSync(1, `${line}\n`);
}

function kindOf(path: string): string {
  const match = /\.(data|index|checksum\.CRC32C)$/.exec(path);
  return match?.[1] ?? path;
}

async function main(): Promise<void> {
  const [prefix, spillDir, batchesArg, rowsArg, poolArg, pauseArg] = process.argv.slice(2);
  if (prefix === undefined || spillDir === undefined || batchesArg === undefined || rowsArg === undefined || poolArg === undefined) {
    throw new Error('usage: crash-child.ts <outputPrefix> <spillDir> <batches> <rows> <poolBytes> [pauseMs]');
  }
  const batches = Number(batchesArg);
  const rows = Number(rowsArg);
  const pauseMs = Number(pauseArg ?? '0');

  // Observe the commit: every rename the library does goes through fs/promises' rename.
  const rename = fsPromises.rename;
  fsPromises.rename = async (from, to) => {
    const kind = kindOf(String(to));
    if (firstRename === 0) firstRename = performance.now();
    mark(`RENAMING ${kind}`);
    await rename(from, to);
    mark(`RENAMED ${kind}`);
    if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
  };
  // ... and the data file is written only by the merge: its first write marks the merge's start
  const open = fsPromises.open;
  let mergeStarted = 0;
  let firstRename = 0;
  fsPromises.open = async (...args: Parameters<typeof open>) => {
    const handle = await open(...args);
    if (/\.data\.[0-9a-f]{12}\.tmp$/.test(String(args[0]))) {
      const writev = handle.writev.bind(handle);
      handle.writev = ((...writeArgs: Parameters<typeof writev>) => {
        if (mergeStarted === 0) {
          mergeStarted = performance.now();
          mark('MERGING');
        }
        return writev(...writeArgs);
      }) as typeof handle.writev;
    }
    return handle;
  };
  syncBuiltinESMExports();

  const pool = new MemoryPool(Number(poolArg));
  const writer = await ShuffleWriter.create({
    numPartitions: CRASH_PARTITIONS,
    partitioning: { kind: 'hash', keys: ['key'] },
    outputPrefix: prefix,
    spillDir,
    overwrite: true, // a new attempt replaces whatever an earlier, killed attempt committed
    memoryPool: pool,
  });
  const reclaim = writer.reclaim.bind(writer);
  writer.reclaim = async (bytes: number) => {
    mark('SPILLING');
    const freed = await reclaim(bytes);
    mark(`SPILLED ${freed}`);
    return freed;
  };
  mark('START');
  for (let i = 1; i <= batches; i++) {
    await writer.write(narrowBatch(rows, i));
    mark(`SPLIT ${i}`);
  }
  mark('FINISHING');
  const started = performance.now();
  const result = await writer.finish();
  mark(`FINISHED ${Math.round(performance.now() - started)} ${result.rows} ${result.spills} ${Math.round(firstRename - mergeStarted)}`);
}

main().catch((error: unknown) => {
  mark(`ERROR ${error instanceof Error ? error.stack ?? error.message : String(error)}`.replace(/\n/g, ' | '));
  process.exit(1);
});
