/**
 * The example runner as a user runs it: compiled against the compiled package
 * (its `columnar-shuffle` import resolved through the package's own exports),
 * with the map tasks in dist's worker threads. Built in a temporary copy, so
 * that it never races another test that builds dist/ in the repository.
 * Stopped by SIGINT mid-job, it exits 130 and leaves no file.
 */
import { execFile, spawn } from 'node:child_process';
import { cp, copyFile, mkdir, readdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, expect, test } from 'vitest';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const exec = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const TSC = join(REPO, 'node_modules', '.bin', 'tsc');
let root: string | undefined;
let built: Promise<string> | undefined;

afterAll(async () => {
  if (root !== undefined) await removeDir(root);
});

/** The package and the runner compiled in a temporary copy (once for the file); its root. */
function build(): Promise<string> {
  built ??= (async () => {
    const dir = (root = await makeTempDir('cs-dist-'));
    await copyFile(join(REPO, 'package.json'), join(dir, 'package.json'));
    await copyFile(join(REPO, 'tsconfig.json'), join(dir, 'tsconfig.json'));
    await symlink(join(REPO, 'node_modules'), join(dir, 'node_modules'));
    await cp(join(REPO, 'examples'), join(dir, 'examples'), { recursive: true });
    await exec(TSC, ['-p', join(REPO, 'tsconfig.build.json'), '--outDir', join(dir, 'dist')], { cwd: REPO });
    await exec(TSC, ['-p', join(dir, 'examples', 'tsconfig.build.json')], { cwd: dir });
    return dir;
  })();
  return built;
}

test('the compiled job runner verifies job 1 on the compiled package, a worker terminated mid-write and retried', async () => {
  const root = await build();
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

test('SIGINT mid-job: the runner aborts the job, removes its directory and files, and exits 130', async () => {
  const root = await build();
  const shared = join(root, 'shared');
  await mkdir(shared);
  const child = spawn(
    process.execPath,
    [join(root, 'dist-examples', 'job-runner', 'main.js'), '--job', 'join', '--orders', '3000000', '--maps', '8', '--threads', '2', '--memory', '4MiB', '--dir', shared],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout.resume();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  // signalled once the job has written shuffle files (in its directory, a subdirectory of --dir)
  const deadline = Date.now() + 30_000;
  for (;;) {
    if ((await readdir(shared, { recursive: true })).some((f) => f.includes('shuffle_'))) break;
    if (Date.now() > deadline) throw new Error(`the job wrote no shuffle file in 30 s; stderr: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  child.kill('SIGINT');
  expect(await exited, stderr).toBe(130);
  expect(stderr).toContain('job-runner: interrupted');
  expect(await readdir(shared), 'the job directory and every file in it are gone').toEqual([]);
});
