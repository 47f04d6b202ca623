/**
 * Issue 3: "buffers are reused through the pool rather than allocated afresh".
 * The recycler's own rules, how the pool counts its idle buffers, and the
 * writers going through it.
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Field, Int32, makeData, RecordBatch, Schema, Struct } from 'apache-arrow';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { BufferRecycler } from '../src/memory/buffer-recycler.js';
import { defaultMemoryPool } from '../src/memory/default-pool.js';
import { MemoryPool, type MemoryReservation } from '../src/memory/memory-pool.js';
import { SlabAllocator } from '../src/memory/slab-allocator.js';
import { ShuffleReader, ShuffleWriter } from '../src/index.js';
import { createShuffleWriter, type WriterKind } from '../src/writer-kind.js';
import { checkOutput, MATRIX_PARTITIONING, MatrixInput } from './support/matrix-input.js';
import { MiB } from './support/spill-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const LARGE = BufferRecycler.MIN_BYTES;
const GiB = 1024 * MiB;

describe('BufferRecycler', () => {
  test('a given array comes back to the next take of its length, zeroed', () => {
    const recycler = new BufferRecycler(16 * MiB);
    const first = recycler.take(LARGE);
    expect(first.byteLength).toBe(LARGE);
    first.fill(7);
    recycler.give(first);
    expect(recycler.bytes).toBe(LARGE);
    const again = recycler.take(LARGE);
    expect(again.buffer).toBe(first.buffer);
    expect(again.every((b) => b === 0)).toBe(true);
    expect(recycler.bytes).toBe(0);
    expect(recycler.take(LARGE).buffer, 'the list is empty again: a new array').not.toBe(first.buffer);
    expect([recycler.reused, recycler.allocated]).toEqual([1, 2]);
  });

  test('takeUnzeroed gives the same array back as it was left, and counts like take', () => {
    const recycler = new BufferRecycler(16 * MiB);
    const first = recycler.takeUnzeroed(LARGE);
    expect(first.every((b) => b === 0), 'a new array is zeroed anyway').toBe(true);
    first.fill(7);
    recycler.give(first);
    const again = recycler.takeUnzeroed(LARGE);
    expect(again.buffer).toBe(first.buffer);
    expect(again.every((b) => b === 7)).toBe(true);
    expect(recycler.bytes).toBe(0);
    expect([recycler.reused, recycler.allocated]).toEqual([1, 1]);
  });

  test('another length is a new array', () => {
    const recycler = new BufferRecycler(16 * MiB);
    const given = new Uint8Array(LARGE + 8);
    recycler.give(given);
    expect(recycler.take(LARGE + 16).buffer).not.toBe(given.buffer);
    expect(recycler.bytes).toBe(LARGE + 8);
  });

  test('small arrays, views into a larger buffer and arrays larger than the idle limit are let go', () => {
    const recycler = new BufferRecycler(2 * LARGE);
    recycler.give(new Uint8Array(LARGE - 8));
    recycler.give(new Uint8Array(2 * LARGE).subarray(0, LARGE));
    recycler.give(new Uint8Array(2 * LARGE).subarray(LARGE));
    recycler.give(new Uint8Array(2 * LARGE + 8));
    expect(recycler.bytes).toBe(0);
  });

  test('when the idle buffers are full, the lengths given back longest ago make room for the array given now', () => {
    const recycler = new BufferRecycler(4 * LARGE);
    const stale = new Uint8Array(2 * LARGE); // a length an earlier kind of task used
    const [a, b, c] = [1, 2, 3].map(() => new Uint8Array(LARGE)) as [Uint8Array, Uint8Array, Uint8Array];
    recycler.give(a);
    recycler.give(stale);
    recycler.give(b); // LARGE was first given before `stale`, but given again since: it is the newer length
    recycler.give(c);
    expect(recycler.bytes, 'stale went, not a').toBe(3 * LARGE);
    expect(recycler.take(2 * LARGE).buffer).not.toBe(stale.buffer);
    recycler.give(new Uint8Array(2 * LARGE)); // full again: the oldest of LARGE's list (a) goes
    expect(recycler.bytes).toBe(4 * LARGE);
    // the very arrays given back last (compared by identity: every idle array of one length holds zeros)
    const kept = [recycler.take(LARGE), recycler.take(LARGE)];
    expect(kept[0]).toBe(c);
    expect(kept[1]).toBe(b);
    expect(recycler.take(LARGE).buffer, 'a went').not.toBe(a.buffer);
  });

  test('drop lets the oldest lengths go first, and only what it is asked for', () => {
    const recycler = new BufferRecycler(16 * MiB);
    const older = new Uint8Array(2 * LARGE);
    const newer = new Uint8Array(LARGE);
    recycler.give(older);
    recycler.give(newer);
    expect(recycler.drop(1)).toBe(2 * LARGE);
    expect(recycler.bytes).toBe(LARGE);
    expect(recycler.take(LARGE).buffer).toBe(newer.buffer);
    expect(recycler.clear()).toBe(0);
  });

  test('recycledLength: 300,000 bytes become 327,680 (the worked example)', () => {
    expect(BufferRecycler.recycledLength(300_000)).toBe(327_680);
    expect(BufferRecycler.recycledLength(1000)).toBe(1000);
    expect(BufferRecycler.recycledLength(LARGE)).toBe(LARGE);
  });

  test('recycledLength is at least the request, at most an eighth more, monotone, and a fixed point of itself', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 }), fc.integer({ min: 0, max: 2 ** 20 }), (bytes, more) => {
        const length = BufferRecycler.recycledLength(bytes);
        expect(length).toBeGreaterThanOrEqual(bytes);
        expect(length).toBeLessThanOrEqual(Math.max(bytes, bytes * 1.125));
        expect(BufferRecycler.recycledLength(length)).toBe(length);
        expect(BufferRecycler.recycledLength(bytes + more)).toBeGreaterThanOrEqual(length);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('MemoryPool with idle recycled buffers', () => {
  test('idle buffers are held, not reserved, and count against the limit', () => {
    const pool = new MemoryPool(8 * LARGE);
    const r = pool.register('consumer');
    expect(r.tryGrow(2 * LARGE)).toBe(true);
    const a = r.recycler.take(LARGE);
    r.recycler.give(a); // give, then release the reservation of its bytes
    r.shrink(LARGE);
    expect([pool.reserved, pool.idle, pool.held]).toEqual([LARGE, LARGE, 2 * LARGE]);
    expect(pool.available, 'idle buffers go on demand: they are available').toBe(7 * LARGE);
  });

  test('a reservation that would not fit lets idle buffers go instead of failing, and the pool never holds more than its limit', () => {
    const pool = new MemoryPool(8 * LARGE);
    const r = pool.register('consumer');
    expect(r.tryGrow(4 * LARGE)).toBe(true);
    const arrays = [1, 2, 3, 4].map(() => r.recycler.take(LARGE));
    for (const array of arrays) r.recycler.give(array);
    r.shrink(4 * LARGE);
    expect(pool.idle).toBe(4 * LARGE);
    expect(r.tryGrow(6 * LARGE)).toBe(true);
    expect(pool.idle).toBe(2 * LARGE);
    expect(pool.held).toBe(8 * LARGE);
    expect(r.tryGrow(2 * LARGE + 1), 'more than the limit minus what is reserved').toBe(false);
    expect(pool.idle, 'a refused reservation lets nothing go').toBe(2 * LARGE);
    expect(r.tryGrow(1)).toBe(true);
    expect([pool.idle, pool.held]).toEqual([LARGE, 7 * LARGE + 1]);
    expect(pool.peak).toBeLessThanOrEqual(8 * LARGE);
  });

  test('idle buffers never cause a reclaim', async () => {
    const pool = new MemoryPool(4 * LARGE, { maxIdleBytes: 4 * LARGE });
    let reclaims = 0;
    const spiller = pool.register('spiller', { reclaim: async () => (reclaims++, 0) });
    expect(spiller.tryGrow(LARGE)).toBe(true);
    const other = pool.register('other');
    expect(other.tryGrow(3 * LARGE)).toBe(true);
    const arrays = [1, 2, 3].map(() => other.recycler.take(LARGE));
    for (const array of arrays) other.recycler.give(array);
    other.shrink(3 * LARGE);
    expect(pool.idle).toBe(3 * LARGE);
    await other.grow(3 * LARGE);
    expect(reclaims).toBe(0);
  });

  test('the idle limit: 512 MiB, at most half the memory limit, or as given', () => {
    expect(new MemoryPool().recycler.maxIdleBytes).toBe(512 * MiB);
    expect(new MemoryPool(2048 * MiB).recycler.maxIdleBytes).toBe(512 * MiB);
    expect(new MemoryPool(10 * MiB).recycler.maxIdleBytes).toBe(5 * MiB);
    expect(new MemoryPool(10 * MiB, { maxIdleBytes: 0 }).recycler.maxIdleBytes).toBe(0);
  });

  describe('idle buffers are let go once nothing has been reserved for releaseIdleAfterMs', () => {
    beforeEach(() => void vi.useFakeTimers());
    afterEach(() => void vi.useRealTimers());

    /** Takes and gives back `count` large buffers through `r`, leaving them idle and r's reservation as it was. */
    function leaveIdle(r: MemoryReservation, count: number): void {
      expect(r.tryGrow(count * LARGE)).toBe(true);
      const arrays = Array.from({ length: count }, () => r.recycler.take(LARGE));
      for (const array of arrays) r.recycler.give(array);
      r.shrink(count * LARGE);
    }

    test('a pool nobody uses any more gives its idle buffers back after the delay, not before', () => {
      const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: 1000 });
      leaveIdle(pool.register('task'), 2);
      vi.advanceTimersByTime(999);
      expect(pool.idle).toBe(2 * LARGE);
      vi.advanceTimersByTime(1);
      expect([pool.idle, pool.held]).toEqual([0, 0]);
    });

    test('the countdown starts again each time the pool falls idle, and a reservation held when it ends keeps the buffers', () => {
      const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: 1000 });
      const task = pool.register('task');
      leaveIdle(task, 2);
      vi.advanceTimersByTime(800);
      leaveIdle(task, 1); // the next task ran and finished: 1000 ms from now
      vi.advanceTimersByTime(800);
      expect(pool.idle, 'restarted 800 ms ago').toBe(2 * LARGE);
      expect(task.tryGrow(10)).toBe(true); // a task running when the countdown ends
      vi.advanceTimersByTime(1000);
      expect(pool.idle).toBe(2 * LARGE);
      task.shrink(10);
      vi.advanceTimersByTime(1000);
      expect(pool.idle).toBe(0);
    });

    test('Infinity keeps them; a negative delay is refused', () => {
      const pool = new MemoryPool(Infinity, { releaseIdleAfterMs: Infinity });
      leaveIdle(pool.register('task'), 1);
      vi.advanceTimersByTime(24 * 3600 * 1000);
      expect(pool.idle).toBe(LARGE);
      expect(() => new MemoryPool(Infinity, { releaseIdleAfterMs: -1 })).toThrow(expect.objectContaining({ code: 'CS_INVALID_ARGUMENT' }));
    });

    test('by default after 2 s', () => {
      const pool = new MemoryPool();
      leaveIdle(pool.register('task'), 1);
      vi.advanceTimersByTime(1999);
      expect(pool.idle).toBe(LARGE);
      vi.advanceTimersByTime(1);
      expect(pool.idle).toBe(0);
    });
  });

  test('a slab a reclaim trimmed is the next slab again', () => {
    const pool = new MemoryPool();
    const slabs = new SlabAllocator(pool.register('store'), 4 * LARGE);
    const range = slabs.allocate(100)!;
    const slab = range.bytes.buffer;
    slabs.release(range);
    expect(slabs.trim()).toBe(4 * LARGE);
    expect([pool.reserved, pool.idle]).toEqual([0, 4 * LARGE]);
    expect(slabs.allocate(100)!.bytes.buffer).toBe(slab);
  });
});

describe('writers take their large buffers from the pool', () => {
  let dir: string;
  beforeEach(async () => (dir = await makeTempDir('cs-recycler-')));
  afterEach(async () => removeDir(dir));

  test.each<WriterKind>(['hash', 'sort'])(
    '%s writer: two map tasks in a row on one pool reuse large buffers (the second those of the first), and both outputs are exact',
    async (kind) => {
      const pool = new MemoryPool(8 * MiB, { releaseIdleAfterMs: Number.POSITIVE_INFINITY }); // however long the check between the tasks takes
      const counts: { reused: number; allocated: number }[] = [];
      for (let task = 0; task < 2; task++) {
        const before = { reused: pool.recycler.reused, allocated: pool.recycler.allocated };
        const input = new MatrixInput({ sources: 3, sourceRows: 4096, batches: 30, label: [100, 300], seed: 7 + task });
        const prefix = join(dir, `${kind}-${task}`);
        const writer = await createShuffleWriter(kind, { numPartitions: 8, partitioning: MATRIX_PARTITIONING, outputPrefix: prefix, memoryPool: pool, spillDir: dir, mapId: task });
        for (const batch of input.batches()) await writer.write(batch);
        const result = await writer.finish();
        counts.push({ reused: pool.recycler.reused - before.reused, allocated: pool.recycler.allocated - before.allocated });
        expect(result.spills, 'the input exceeds the pool').toBeGreaterThan(0);
        expect((await checkOutput(prefix, input, 8)).problems).toEqual([]);
        expect(pool.reserved).toBe(0);
        expect(pool.peak).toBeLessThanOrEqual(8 * MiB);
      }
      expect(pool.idle, 'buffers kept for the next task').toBeGreaterThan(0);
      const [first, second] = counts as [(typeof counts)[0], (typeof counts)[0]];
      // the columnar writer's buffers come back through the pool after every spill; the sort writer
      // keeps its spare pages itself within a task, so what it reuses in the second came from the first
      if (kind === 'hash') expect(first.reused, `within the first task: ${JSON.stringify(counts)}`).toBeGreaterThan(first.allocated / 2);
      else expect(first.reused, JSON.stringify(counts)).toBe(0);
      expect(second.reused, JSON.stringify(counts)).toBeGreaterThan(second.allocated / 2);
    },
  );
});

describe('small partition buffers are reused too', () => {
  let dir: string;
  beforeEach(async () => (dir = await makeTempDir('cs-small-buffers-')));
  afterEach(async () => removeDir(dir));

  test('at P = 200 partition buffers of 4-64 KiB are taken, and a second task of the same input on the pool gets every one of them back from the first', async () => {
    const P = 200;
    const pool = new MemoryPool(GiB, { releaseIdleAfterMs: Number.POSITIVE_INFINITY });
    const input = new MatrixInput({ sources: 2, sourceRows: 8192, batches: 8, label: [10, 30], seed: 21 });
    const small = (bytes: number) => bytes >= 4 * 1024 && bytes < 64 * 1024;
    const taken: ArrayBufferLike[][] = [];
    for (let task = 0; task < 2; task++) {
      const takes = [vi.spyOn(pool.recycler, 'take'), vi.spyOn(pool.recycler, 'takeUnzeroed')];
      const prefix = join(dir, `task-${task}`);
      const writer = await ShuffleWriter.create({ numPartitions: P, partitioning: MATRIX_PARTITIONING, outputPrefix: prefix, memoryPool: pool, spillDir: dir, mapId: task });
      for (const batch of input.batches()) await writer.write(batch);
      await writer.finish();
      taken.push(takes.flatMap((take) => take.mock.calls.flatMap(([bytes], i) => (small(bytes) ? [take.mock.results[i]!.value.buffer] : []))));
      for (const take of takes) take.mockRestore();
      expect((await checkOutput(prefix, input, P)).problems).toEqual([]);
    }
    const [first, second] = taken as [ArrayBufferLike[], ArrayBufferLike[]];
    expect(first.length).toBeGreaterThanOrEqual(P);
    const fromFirst = new Set(first);
    expect(second.filter((buffer) => fromFirst.has(buffer)).length, 'small buffers the second task got from the first').toBe(second.length);
    expect(second.length).toBe(first.length);
  });
});

describe('writers created without a pool share the thread\'s default pool', () => {
  let dir: string;
  beforeEach(async () => (dir = await makeTempDir('cs-default-pool-')));
  afterEach(async () => removeDir(dir));

  test.each<WriterKind>(['hash', 'sort'])('%s writer: the second map task reuses the buffers the first gave back, and both outputs are exact', async (kind) => {
    const pool = defaultMemoryPool();
    expect(defaultMemoryPool(), 'one pool').toBe(pool);
    expect(pool.limit).toBe(Infinity);
    pool.recycler.clear(); // what an earlier test left idle
    const holder = pool.register('the test'); // the pool is never unused, so its idle buffers stay however slow the machine
    expect(holder.tryGrow(1)).toBe(true);
    const reused: number[] = [];
    try {
      for (let task = 0; task < 2; task++) {
        const before = pool.recycler.reused;
        const input = new MatrixInput({ sources: 3, sourceRows: 4096, batches: 30, label: [100, 300], seed: 11 + task });
        const prefix = join(dir, `${kind}-${task}`);
        const writer = await createShuffleWriter(kind, { numPartitions: 8, partitioning: MATRIX_PARTITIONING, outputPrefix: prefix, spillDir: dir, mapId: task });
        for (const batch of input.batches()) await writer.write(batch);
        const result = await writer.finish();
        reused.push(pool.recycler.reused - before);
        expect(result.peakMemoryBytes, 'its own reservation').toBeGreaterThan(0);
        expect((await checkOutput(prefix, input, 8)).problems).toEqual([]);
      }
    } finally {
      holder.free();
    }
    expect(reused[1], JSON.stringify(reused)).toBeGreaterThan(reused[0]!);
  });
});

describe('a cached payload keeps its compressed size, not its arena, when it compressed well', () => {
  let dir: string;
  beforeEach(async () => (dir = await makeTempDir('cs-compact-')));
  afterEach(async () => removeDir(dir));

  const SCHEMA = new Schema([new Field('v', new Int32(), false)]);
  const ROWS = 32_768; // 128 KiB of int32 per batch: a payload of one batch has a large arena
  const batchOf = (values: (i: number) => number) =>
    new RecordBatch(SCHEMA, makeData({ type: new Struct(SCHEMA.fields), length: ROWS, children: [makeData({ type: new Int32(), length: ROWS, data: Int32Array.from({ length: ROWS }, (_, i) => values(i)) })] }));

  /** Bytes the pool holds for the writer once its compressions settled, after `batches` one-batch payloads; and every value read back. */
  async function cachedBytes(values: (batch: number, i: number) => number, batches: number, pool = new MemoryPool(GiB)): Promise<{ reserved: number; idle: number; readBack: number[]; written: number[] }> {
    const prefix = join(dir, 'out');
    const writer = await ShuffleWriter.create({ numPartitions: 1, partitioning: { kind: 'single' }, outputPrefix: prefix, memoryPool: pool, maxBatchRows: ROWS, overwrite: true });
    const written: number[] = [];
    for (let b = 0; b < batches; b++) {
      const batch = batchOf((i) => values(b, i));
      await writer.write(batch);
      for (const row of batch) written.push(row!.v as number);
    }
    let last = -1;
    for (let stable = 0; stable < 3; await sleep(5)) stable = pool.reserved === last ? stable + 1 : ((last = pool.reserved), 0);
    const measured = { reserved: pool.reserved, idle: pool.idle };
    await writer.finish();
    const reader = await ShuffleReader.open(prefix);
    const readBack: number[] = [];
    for await (const batch of reader.readPartition(0)) for (const row of batch) readBack.push(row!.v as number);
    await reader.close();
    return { ...measured, readBack, written };
  }

  test('runs of one value, under a memory limit: the payloads shrink to their frames, their arenas go back to the recycler, and every row comes back', async () => {
    const r = await cachedBytes((b) => b, 8);
    // 7 payloads of 128 KiB raw are cached (the last batch still sits in the partition buffer). What is
    // reserved: per-row scratch and partition buffer (512 KiB; the estimate of a batch's bytes per row no longer takes
    // a row-id array for all of it), one slab with the 7 frames (256 KiB), and the partition's state (64 B). Their 7
    // arenas alone would be 1 MiB more; they are in the recycler instead.
    expect(r.reserved).toBeLessThanOrEqual(768 * 1024 + 64);
    expect(r.idle, 'the arenas wait in the recycler for the next payloads').toBeGreaterThanOrEqual(7 * 128 * 1024);
    expect(r.readBack).toEqual(r.written);
  });

  test('runs of one value, without a limit: the payloads keep their arenas (the copy would cost time, and memory is not short)', async () => {
    const r = await cachedBytes((b) => b, 8, new MemoryPool());
    expect(r.reserved).toBeGreaterThan(512 * 1024 + 7 * 128 * 1024);
    expect(r.idle).toBe(0);
    expect(r.readBack).toEqual(r.written);
  });

  test('random values: the payloads stay in their arenas (a copy would save little), and every row comes back', async () => {
    let seed = 1;
    const random = () => ((seed = (Math.imul(seed, 1103515245) + 12345) | 0), seed);
    const r = await cachedBytes(() => random(), 8);
    expect(r.reserved).toBeGreaterThan(8 * 128 * 1024);
    expect(r.readBack).toEqual(r.written);
  });
});
