/**
 * abort() while finish() runs, at every point of it: either finish() is
 * refused (CS_WRITER_CLOSED) and nothing is left, or the abort came once the
 * commit had begun, waited for it, and the output stands whole and finish()
 * returns it. When abort() resolves, the files are final. Never a temporary
 * file, a refused finish() with a committed output, or memory left in the
 * pool. Both writers.
 *
 * Regression: the output's abort ran beside its commit's renames, so either
 * outcome was left to chance, and finish() could return a committed output
 * while abort() had resolved as if it had removed it.
 */
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { narrowBatch } from '../src/cli/demo-data.js';
import { MemoryPool } from '../src/memory/memory-pool.js';
import { ShuffleReader } from '../src/reader/shuffle-reader.js';
import { createShuffleWriter, type WriterKind } from '../src/writer-kind.js';
import type { ShuffleError } from '../src/errors.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir = '';
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

test.each<WriterKind>(['hash', 'sort'])('%s writer: abort() after 0-80 turns of the event loop into finish() leaves no output or a whole one', async (kind) => {
  const outcomes = new Set<string>();
  for (let turns = 0; turns <= 80; turns += 2) {
    const out = join(dir, `t${turns}`);
    const pool = new MemoryPool(64 * 1024 * 1024);
    await mkdir(out);
    const writer = await createShuffleWriter(kind, { numPartitions: 8, partitioning: { kind: 'hash', keys: ['key'] }, outputPrefix: join(out, 'o'), spillDir: out, memoryPool: pool });
    await writer.write(narrowBatch(3000, turns));
    const finishing = writer.finish().then(
      (result) => ({ rows: result.rows }),
      (e: unknown) => ({ code: (e as ShuffleError).code }),
    );
    for (let t = 0; t < turns; t++) await tick();
    await writer.abort();
    const whenAborted = (await readdir(out)).sort(); // abort() settles the outcome: nothing changes after it
    const finished = await finishing;
    const files = (await readdir(out)).sort();
    expect(files).toEqual(whenAborted);
    expect(files.filter((f) => f.endsWith('.tmp'))).toEqual([]);
    expect(pool.reserved).toBe(0);
    if ('code' in finished) {
      expect(finished.code).toBe('CS_WRITER_CLOSED');
      expect(files).toEqual([]);
      outcomes.add('refused');
    } else {
      expect(files).toEqual(['o.checksum.CRC32C', 'o.data', 'o.index']);
      const reader = await ShuffleReader.open(join(out, 'o'));
      let rows = 0;
      for await (const batch of reader.readPartitions(0, 8)) rows += batch.numRows;
      await reader.close();
      expect(rows).toBe(3000);
      outcomes.add('committed');
    }
  }
  expect(outcomes.has('refused')).toBe(true);
}, 60_000);
