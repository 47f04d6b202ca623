/**
 * LocalFileSource returns exactly the bytes asked for, or CS_CORRUPT_DATA
 * saying how many there were and where they ran out: never fewer bytes
 * padded with zeros, never a read that waits for bytes that will not come.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { LocalFileSource } from '../src/reader/byte-source.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir = '';
beforeEach(async () => (dir = await makeTempDir()));
afterEach(async () => removeDir(dir));

describe('LocalFileSource over a file of 10 bytes', () => {
  let source: LocalFileSource;
  let path = '';
  beforeEach(async () => {
    path = join(dir, 'ten');
    await writeFile(path, Uint8Array.from({ length: 10 }, (_, i) => i + 1));
    source = await LocalFileSource.open(path);
  });
  afterEach(async () => source.close());

  test('reads a range ending at the last byte, and its size', async () => {
    expect(await source.size()).toBe(10);
    expect([...(await source.read(4, 6))]).toEqual([5, 6, 7, 8, 9, 10]);
  });

  test('a range one byte past the end is CS_CORRUPT_DATA naming the offset where the bytes ran out', async () => {
    await expect(source.read(4, 7)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('wanted 7 bytes, found 6'), where: { file: path, offset: 10 } });
    await expect(source.readInto(9, new Uint8Array(2))).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', where: { offset: 10 } });
  });

  test('a range starting past the end is CS_CORRUPT_DATA at once (a read loop that ignored end of file never returned)', async () => {
    await expect(source.read(20, 4)).rejects.toMatchObject({ code: 'CS_CORRUPT_DATA', message: expect.stringContaining('wanted 4 bytes, found 0'), where: { offset: 20 } });
  });
});
