import fc from 'fast-check';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { SpillFile, type MergeSink } from '../src/spill/spill-file.js';
import { Rng } from './support/random.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

/**
 * The merge reads each run through a window of buffer / runs bytes; whatever
 * the window size (smaller than a segment, larger than a run), every
 * partition gets exactly its segments' bytes, run by run, through one sink
 * that is flushed only when copyPartition asks.
 */
test('copyPartition returns each partition its segments in run order, for any window size', async () => {
  await fc.assert(
    fc.asyncProperty(fc.integer(), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 20000 }), async (seed, runs, partitions, bufferBytes) => {
      const rng = new Rng(seed);
      const file = await SpillFile.create(dir);
      const expected: number[][] = Array.from({ length: partitions }, () => []);
      let next = 0;
      for (let r = 0; r < runs; r++) {
        file.beginRun();
        for (let p = 0; p < partitions; p++) {
          if (rng.int(0, 2) === 0) continue; // not every partition in every run
          const chunks = Array.from({ length: rng.int(1, 3) }, () => Uint8Array.from({ length: rng.int(0, rng.int(0, 1) ? 50 : 3000) }, () => next++ & 0xff));
          for (const chunk of chunks) expected[p]!.push(...chunk);
          await file.writeSegment(p, chunks);
        }
        await file.flushRun();
        file.endRun();
      }
      const buffer = new Uint8Array(bufferBytes);
      // one sink for the whole merge, as the data file is: appended views are read only when the merge flushes,
      // so a window refilled (or a streamed piece overwritten) before its bytes were flushed shows up as wrong bytes
      const got: number[][] = Array.from({ length: partitions }, () => []);
      let pending: { p: number; bytes: Uint8Array }[] = [];
      let current = 0;
      const sink: MergeSink = {
        append: async (bytes) => void pending.push({ p: current, bytes }),
        flush: async () => {
          for (const { p, bytes } of pending) got[p]!.push(...bytes);
          pending = [];
        },
      };
      for (let p = 0; p < partitions; p++) {
        current = p;
        await file.copyPartition(p, buffer, sink);
      }
      await sink.flush();
      for (let p = 0; p < partitions; p++) expect(got[p], `partition ${p}`).toEqual(expected[p]);
      await file.delete();
    }),
    { numRuns: 60 },
  );
});

test('a segment exactly as long as its window is read into the window, not served from what the window held (724 of its 1024 bytes came back)', async () => {
  const file = await SpillFile.create(dir);
  file.beginRun();
  await file.writeSegment(0, [new Uint8Array(300).fill(1)]);
  await file.writeSegment(1, [new Uint8Array(1024).fill(2)]);
  await file.flushRun();
  file.endRun();
  // one run through a 1024-byte buffer: a window of 1024 bytes, first filled from partition 0's offset
  const buffer = new Uint8Array(1024);
  const got: number[][] = [[], []];
  let current = 0;
  const sink: MergeSink = { append: async (bytes) => void got[current]!.push(...bytes), flush: async () => undefined };
  for (const p of [0, 1]) {
    current = p;
    await file.copyPartition(p, buffer, sink);
  }
  expect(got[0]).toEqual(new Array(300).fill(1));
  expect(got[1]).toEqual(new Array(1024).fill(2));
  await file.delete();
});
