/**
 * abort() while a write() runs: the write rejects with CS_WRITER_CLOSED (its
 * batch is not written), nothing is left behind, and the pool gets back all
 * the writer held, also memory its write was still waiting for.
 *
 * Regressions (a race probe): a write() that was waiting for another
 * consumer's spill got its memory after the abort had freed the reservation,
 * and those bytes stayed reserved in the pool for good; the sort writer went
 * on after the teardown into a spill that created a spill file nobody removed;
 * and a write() the abort came into resolved as if its rows were taken.
 */
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { narrowBatch } from '../src/cli/demo-data.js';
import type { ShuffleError } from '../src/errors.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import type { SortShuffleWriter } from '../src/sort-writer/sort-shuffle-writer.js';
import { createShuffleWriter, type WriterKind } from '../src/writer-kind.js';
import type { ShuffleWriter } from '../src/writer/shuffle-writer.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir = '';
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const code = (call: Promise<unknown>) => call.then(() => 'done', (e: unknown) => (e as ShuffleError).code);
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

async function writerIn(kind: WriterKind, name: string, pool: MemoryPool, concurrentTasks = 1, numPartitions = 3) {
  const spillDir = join(dir, `spill-${name}`);
  await mkdir(spillDir);
  const writer = await createShuffleWriter(kind, { numPartitions, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: join(dir, name), spillDir, memoryPool: pool, concurrentTasks });
  return { writer, spillDir };
}

describe.each<WriterKind>(['hash', 'sort'])('the %s writer', (kind) => {
  test('aborted while its write waits for another writer\'s spill: the write is CS_WRITER_CLOSED, and the pool keeps nothing of it', async () => {
    const pool = new MemoryPool(2 * 1024 * 1024);
    // B holds much of the pool (the sort writer keeps its rows in pages up to its share: give it the whole pool)
    const a = await writerIn(kind, 'a', pool, 2);
    const b = await writerIn(kind, 'b', pool, kind === 'sort' ? 1 : 2);
    const bBatches = kind === 'sort' ? 8 : 3;
    for (let i = 0; i < bBatches; i++) await b.writer.write(narrowBatch(3000, 10 + i));
    // B's reclaim, asked for by A's grow, aborts A and then spills on a slow disk: A's teardown ends first
    const inner = b.writer as ShuffleWriter | SortShuffleWriter;
    const reclaim = inner.reclaim.bind(inner);
    let aborting: Promise<void> | null = null;
    vi.spyOn(inner, 'reclaim').mockImplementation(async (bytes) => {
      aborting ??= a.writer.abort();
      await new Promise((resolve) => setTimeout(resolve, 20));
      return reclaim(bytes);
    });
    let outcome = 'done';
    for (let i = 0; i < 12 && aborting === null && outcome === 'done'; i++) outcome = await code(a.writer.write(narrowBatch(3000, 20 + i)));
    expect(aborting, 'a write of A made B spill').not.toBeNull();
    await aborting;
    expect(outcome).toBe('CS_WRITER_CLOSED');
    expect((await b.writer.finish()).rows).toBe(3000 * bBatches);
    expect(pool.reserved).toBe(0);
    expect(pool.consumers()).toEqual([]);
    expect(await readdir(a.spillDir)).toEqual([]);
    expect((await readdir(dir)).filter((f) => f.startsWith('a.'))).toEqual([]);
  });

  test('aborted at any turn of the event loop into a write: the write is CS_WRITER_CLOSED, and when abort() resolves nothing is left and the pool is empty', async () => {
    let abortedWrites = 0;
    for (let turns = 0; turns < 30; turns++) {
      const pool = new MemoryPool(512 * 1024);
      const { writer, spillDir } = await writerIn(kind, `t${turns}`, pool, 4);
      await writer.write(narrowBatch(4000, 1));
      let settled = false;
      const writing = code(writer.write(narrowBatch(4000, 2))).finally(() => (settled = true));
      for (let t = 0; t < turns; t++) await tick();
      const running = !settled; // on a busy machine the write may be done by then
      await writer.abort();
      expect(await readdir(spillDir), `spill files when abort() resolved, ${turns} turns in`).toEqual([]);
      expect(pool.reserved).toBe(0);
      expect(await writing, `${turns} turns in`).toBe(running ? 'CS_WRITER_CLOSED' : 'done');
      if (running) abortedWrites++;
      expect(await readdir(spillDir)).toEqual([]);
      expect((await readdir(dir)).filter((f) => f.startsWith(`t${turns}.`))).toEqual([]);
    }
    expect(abortedWrites).toBeGreaterThan(0);
  });
});
