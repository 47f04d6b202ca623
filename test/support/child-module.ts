/**
 * Runs an ES module's source in a Node process of its own (through tsx, from the repository
 * root, so it may import src/*.ts), for claims about the process itself: what keeps it alive,
 * how it exits. The process is killed after 30 s, so a claim that it ends fails instead of hanging.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ChildOutcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** stdout and stderr together, trimmed */
  out: string;
}

/** Writes `lines` to `dir`/child.mjs, runs it and waits for it to exit. */
export async function runChildModule(dir: string, lines: readonly string[]): Promise<ChildOutcome> {
  const file = join(dir, 'child.mjs');
  await writeFile(file, lines.join('\n'));
  const child = spawn(process.execPath, ['--import', 'tsx', file], { cwd: fileURLToPath(new URL('../..', import.meta.url)), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, s) => resolve([c, s])));
  clearTimeout(killer);
  return { code, signal, out: out.trim() };
}
