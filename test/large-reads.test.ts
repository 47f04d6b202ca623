/**
 * A read of 2 GiB or more from a file: Node 20's fs.read aborts the process on
 * a length of 2^31 or more (an assertion, not an error), which a partition
 * over 2 GiB asked for. LocalFileSource reads it in pieces. The file is
 * sparse: a marker at each end of the range, zeros between.
 */
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { LocalFileSource } from '../src/reader/byte-source.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir = '';
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

test('a range of 2^31 + 16 bytes reads whole, its last bytes too', async () => {
  const path = join(dir, 'sparse');
  const length = 2 ** 31 + 16;
  const start = 4096;
  const file = await open(path, 'w');
  await file.write(Uint8Array.of(1, 2, 3), 0, 3, start);
  await file.write(Uint8Array.of(7, 8, 9), 0, 3, start + length - 3);
  await file.close();

  const source = await LocalFileSource.open(path);
  try {
    const bytes = await source.read(start, length);
    expect(bytes.byteLength).toBe(length);
    expect([...bytes.subarray(0, 4)]).toEqual([1, 2, 3, 0]);
    expect([...bytes.subarray(2 ** 31 - 2, 2 ** 31 + 2)]).toEqual([0, 0, 0, 0]);
    expect([...bytes.subarray(length - 4)]).toEqual([0, 7, 8, 9]);
  } finally {
    await source.close();
  }
}, 60_000);
