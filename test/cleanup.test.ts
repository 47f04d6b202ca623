import { mkdir, readdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { removeLeftovers } from '../src/cleanup.js';
import { ShuffleError } from '../src/errors.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

let dir: string;

beforeEach(async () => {
  dir = await makeTempDir('cs-cleanup-');
});
afterEach(async () => {
  await removeDir(dir);
});

async function touch(...names: string[]): Promise<void> {
  for (const name of names) await writeFile(join(dir, name), 'x');
}
const list = async (d = dir) => (await readdir(d)).sort();
const paths = (...names: string[]) => names.map((n) => join(dir, n)).sort();

const HEX12 = '0123456789ab';
const HEX16 = '0123456789abcdef';
const OUT_TEMPS = [`out.data.${HEX12}.tmp`, `out.index.${HEX12}.tmp`, `out.checksum.CRC32C.${HEX12}.tmp`, 'out.data.ffffffffffff.tmp'];
const FINALS = ['out.data', 'out.index', 'out.checksum.CRC32C'];
/** similar to leftovers, but not matching: never removed */
const LOOKALIKES = [
  'out.data.0123456789AB.tmp', // upper-case hex
  'out.data.0123456789a.tmp', // 11 hex digits
  'out.data.0123456789abc.tmp', // 13
  'out.data.0123456789ag.tmp', // not hex
  `out.data.${HEX12}.tmp.bak`,
  `out.data.${HEX12}`,
  `out.index.${HEX12}.TMP`,
  `out.checksum.${HEX12}.tmp`, // no algorithm
  `out.checksum.ADLER32.${HEX12}.tmp`,
  `out.parquet.${HEX12}.tmp`,
  `out.data${HEX12}.tmp`,
  'out.data.tmp',
  'out.index.bak',
  'out.datax',
  'columnar-shuffle-spill-0123456789abcde.tmp', // 15 hex digits
  'columnar-shuffle-spill-0123456789abcdef0.tmp', // 17
  'columnar-shuffle-spill-0123456789ABCDEF.tmp',
  `columnar-shuffle-spill-${HEX16}.tmp.keep`,
  `my-columnar-shuffle-spill-${HEX16}.tmp`,
  `columnar-shuffle-spill-${HEX16}`,
  'notes.txt',
];

describe('removeLeftovers: outputPrefix', () => {
  test("removes that output's temporary files of all three kinds, and nothing else", async () => {
    await touch(...OUT_TEMPS, ...LOOKALIKES, `other.data.${HEX12}.tmp`, `out2.data.${HEX12}.tmp`, `out.x.data.${HEX12}.tmp`);
    const removed = await removeLeftovers({ outputPrefix: join(dir, 'out') });
    expect(removed).toEqual(paths(...OUT_TEMPS));
    expect(await list()).toEqual([...LOOKALIKES, `other.data.${HEX12}.tmp`, `out2.data.${HEX12}.tmp`, `out.x.data.${HEX12}.tmp`].sort());
  });

  test("a prefix ending in a path separator is CS_INVALID_ARGUMENT: it names no output, and the directory's hidden '.data' was removed as one", async () => {
    await touch('.data', '.checksum.CRC32C');
    await expect(removeLeftovers({ outputPrefix: `${dir}/` })).rejects.toMatchObject({ code: 'CS_INVALID_ARGUMENT', message: expect.stringContaining('names a directory') });
    expect(await list()).toEqual(['.checksum.CRC32C', '.data']);
  });

  test('a prefix whose name holds regex characters is taken literally', async () => {
    await touch(`a+b.data.${HEX12}.tmp`, `aab.data.${HEX12}.tmp`, `a.b.data.${HEX12}.tmp`);
    expect(await removeLeftovers({ outputPrefix: join(dir, 'a+b') })).toEqual(paths(`a+b.data.${HEX12}.tmp`));
    expect(await removeLeftovers({ outputPrefix: join(dir, 'a.b') })).toEqual(paths(`a.b.data.${HEX12}.tmp`));
    expect(await list()).toEqual([`aab.data.${HEX12}.tmp`]);
  });

  test('never removes a complete output (all three final files), even next to temporary files', async () => {
    await touch(...FINALS, ...OUT_TEMPS);
    expect(await removeLeftovers({ outputPrefix: join(dir, 'out') })).toEqual(paths(...OUT_TEMPS));
    expect(await list()).toEqual([...FINALS].sort());
  });

  test('never removes final files when the index (the commit marker) has its final name', async () => {
    await touch('out.index', 'out.data'); // not complete, but committed as far as names go: not ours to judge
    expect(await removeLeftovers({ outputPrefix: join(dir, 'out') })).toEqual([]);
    expect(await list()).toEqual(['out.data', 'out.index']);
  });

  test.each([
    [['out.data']],
    [['out.data', 'out.checksum.CRC32C']],
    [['out.checksum.CRC32C']],
  ])('removes an incomplete committed output %j (no final index: a crash between the renames)', async (finals) => {
    await touch(...finals, `out.index.${HEX12}.tmp`, 'other.data', 'other.checksum.CRC32C');
    expect(await removeLeftovers({ outputPrefix: join(dir, 'out') })).toEqual(paths(...finals, `out.index.${HEX12}.tmp`));
    expect(await list()).toEqual(['other.checksum.CRC32C', 'other.data']);
  });

  test('a directory named like a final file or a leftover is left alone', async () => {
    await mkdir(join(dir, 'out.data'));
    await mkdir(join(dir, `out.data.${HEX12}.tmp`));
    expect(await removeLeftovers({ outputPrefix: join(dir, 'out') })).toEqual([]);
    expect(await list()).toEqual(['out.data', `out.data.${HEX12}.tmp`]);
  });

  test('a symbolic link named like a leftover is left alone', async () => {
    await touch('target');
    await symlink(join(dir, 'target'), join(dir, `out.data.${HEX12}.tmp`));
    await symlink(join(dir, 'target'), join(dir, 'out.checksum.CRC32C'));
    expect(await removeLeftovers({ outputPrefix: join(dir, 'out') })).toEqual([]);
    expect(await list()).toEqual(['out.checksum.CRC32C', `out.data.${HEX12}.tmp`, 'target']);
  });

  test('nothing to clean: an empty result', async () => {
    expect(await removeLeftovers({ outputPrefix: join(dir, 'out') })).toEqual([]);
  });
});

describe('removeLeftovers: outputDir', () => {
  test('removes every output temporary file of any prefix, never final files, even without an index', async () => {
    const temps = [...OUT_TEMPS, `other.data.${HEX12}.tmp`, `x.y.index.${HEX12}.tmp`, `z.checksum.CRC32C.${HEX12}.tmp`];
    await touch(...temps, ...LOOKALIKES, 'lone.data', 'lone.checksum.CRC32C', ...FINALS);
    expect(await removeLeftovers({ outputDir: dir })).toEqual(paths(...temps));
    expect(await list()).toEqual([...LOOKALIKES, 'lone.data', 'lone.checksum.CRC32C', ...FINALS].sort());
  });

  test('does not look into subdirectories and leaves spill files alone', async () => {
    await mkdir(join(dir, 'sub'));
    await writeFile(join(dir, 'sub', `out.data.${HEX12}.tmp`), 'x');
    await touch(`columnar-shuffle-spill-${HEX16}.tmp`);
    expect(await removeLeftovers({ outputDir: dir })).toEqual([]);
    expect(await list(join(dir, 'sub'))).toEqual([`out.data.${HEX12}.tmp`]);
  });
});

describe('removeLeftovers: spillDir', () => {
  test('removes every spill file and nothing else', async () => {
    const spills = [`columnar-shuffle-spill-${HEX16}.tmp`, 'columnar-shuffle-spill-ffffffffffffffff.tmp'];
    await touch(...spills, ...LOOKALIKES, ...OUT_TEMPS);
    expect(await removeLeftovers({ spillDir: dir })).toEqual(paths(...spills));
    expect(await list()).toEqual([...LOOKALIKES, ...OUT_TEMPS].sort());
  });

  test('all three locations at once, a path given twice counted once', async () => {
    const spillDir = join(dir, 'spill');
    await mkdir(spillDir);
    await writeFile(join(spillDir, `columnar-shuffle-spill-${HEX16}.tmp`), 'x');
    await touch(...OUT_TEMPS, 'out.data', `b.index.${HEX12}.tmp`);
    const removed = await removeLeftovers({ outputPrefix: join(dir, 'out'), outputDir: dir, spillDir });
    expect(removed).toEqual([...paths(...OUT_TEMPS, 'out.data', `b.index.${HEX12}.tmp`), join(spillDir, `columnar-shuffle-spill-${HEX16}.tmp`)].sort());
    expect(await list()).toEqual(['spill']);
    expect(await list(spillDir)).toEqual([]);
  });
});

describe('removeLeftovers: errors', () => {
  async function codeOf(promise: Promise<unknown>): Promise<string> {
    try {
      await promise;
    } catch (error) {
      expect(error).toBeInstanceOf(ShuffleError);
      return (error as ShuffleError).code;
    }
    throw new Error('expected a ShuffleError');
  }

  test('a missing directory is CS_FILE_NOT_FOUND naming it (a mistyped path is not "nothing to clean")', async () => {
    const missing = join(dir, 'missing');
    for (const options of [{ outputDir: missing }, { spillDir: missing }, { outputPrefix: join(missing, 'out') }]) {
      const promise = removeLeftovers(options);
      await expect(promise).rejects.toMatchObject({ code: 'CS_FILE_NOT_FOUND', where: { file: missing } });
    }
  });

  test('a file where a directory is expected is CS_FILE_NOT_FOUND', async () => {
    await touch('plain');
    expect(await codeOf(removeLeftovers({ spillDir: join(dir, 'plain') }))).toBe('CS_FILE_NOT_FOUND');
  });

  test('no location, or an empty path, is CS_INVALID_ARGUMENT', async () => {
    expect(await codeOf(removeLeftovers({}))).toBe('CS_INVALID_ARGUMENT');
    expect(await codeOf(removeLeftovers({ outputDir: '' }))).toBe('CS_INVALID_ARGUMENT');
  });

  // root may remove files from a read-only directory
});
