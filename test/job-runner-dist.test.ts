/**
 * The example runner as a user runs it: compiled against the compiled package
 * (its `columnar-shuffle` import resolved through the package's own exports),
 * with the map tasks in dist's worker threads. Built in a temporary copy, so
 * that it never races another test that builds dist/ in the repository.
 */
import { execFile } from 'node:child_process';
import { cp, copyFile, readdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, expect, test } from 'vitest';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const exec = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const TSC = join(REPO, 'node_modules', '.bin', 'tsc');
let root: string | undefined;

afterAll(async () => {
  if (root !== undefined) await removeDir(root);
});

test('the compiled job runner verifies job 1 on the compiled package, a worker terminated mid-write and retried', async () => {
  root = await makeTempDir('cs-dist-');
  await copyFile(join(REPO, 'package.json'), join(root, 'package.json'));
  await copyFile(join(REPO, 'tsconfig.json'), join(root, 'tsconfig.json'));
  await symlink(join(REPO, 'node_modules'), join(root, 'node_modules'));
  await cp(join(REPO, 'examples'), join(root, 'examples'), { recursive: true });
  await exec(TSC, ['-p', join(REPO, 'tsconfig.build.json'), '--outDir', join(root, 'dist')], { cwd: REPO });
  await exec(TSC, ['-p', join(root, 'examples', 'tsconfig.build.json')], { cwd: root });
  const shuffleFiles = await readdir(join(root, 'dist', 'shuffle'));
  expect(shuffleFiles).toContain('map-task-worker.js');
  expect(shuffleFiles, 'the source-only bootstrap is not part of the build').not.toContain('dev-worker-bootstrap.mjs');

  const { stdout, stderr } = await exec(
    process.execPath,
    [join(root, 'dist-examples', 'job-runner', 'main.js'), '--orders', '40000', '--maps', '3', '--partitions', '3', '--threads', '2', '--kill-map', '1'],
    { cwd: root },
  );
  expect(stdout).toContain('stage     map (partial aggregate): 3 tasks, 4 attempts');
  expect(stdout).toMatch(/retries {3}1\n.*task 1 attempt 0 failed \(CS_WORKER_EXITED/);
  expect(stdout).toContain('check     verified');
  expect(stderr).toContain('retrying as attempt 1');
});
