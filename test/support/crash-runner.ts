/**
 * Runs test/support/crash-child.ts in a child process and kills it with
 * SIGKILL when a chosen marker line appears (optionally after a delay), for
 * test/crash.test.ts.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./crash-child.ts', import.meta.url));
const REPO = fileURLToPath(new URL('../../', import.meta.url));

export interface ChildInput {
  prefix: string;
  spillDir: string;
  batches: number;
  rows: number;
  poolBytes: number;
  /** ms the child sleeps after each rename of the commit (0: none) */
  renamePauseMs?: number;
}

export interface KillPlan {
  /** kill after the `count`-th stdout line for which `matches` is true ... */
  matches: (line: string) => boolean;
  count: number;
  /** ... and `delayMs` later (0: at once) */
  delayMs: number;
}

export interface ChildRun {
  /** every marker line the child printed, in order (read to the end after it died) */
  lines: string[];
  /** the signal that ended it, or null when it exited */
  signal: NodeJS.Signals | null;
  code: number | null;
  stderr: string;
  /** the line after which the kill was sent (null when no kill was sent) */
  killedAfter: string | null;
}

/** Runs the child; kills it per `plan` (if given and reached). Resolves when the child is gone and its output read. */
export function runChild(input: ChildInput, plan?: KillPlan, timeoutMs = 30_000): Promise<ChildRun> {
  const args = [input.prefix, input.spillDir, input.batches, input.rows, input.poolBytes, input.renamePauseMs ?? 0].map(String);
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let stderr = '';
  let partial = '';
  let seen = 0;
  let killedAfter: string | null = null;
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  const watchdog = setTimeout(kill, timeoutMs);
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    partial += chunk;
    const parts = partial.split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) {
      lines.push(line);
      if (plan !== undefined && killedAfter === null && plan.matches(line) && ++seen === plan.count) {
        killedAfter = line;
        if (plan.delayMs <= 0) kill();
        else setTimeout(kill, plan.delayMs);
      }
    }
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(watchdog);
      if (partial !== '') lines.push(partial);
      resolve({ lines, signal, code, stderr, killedAfter });
    });
  });
}

/**
 * Where the child was when it died, from the last marker it printed:
 * `split` (writing batches), `spill` (inside a reclaim), `finish` (finish()
 * flushing partition buffers, maybe spilling), `merge` (writing the data file),
 * `commit` (between the renames),
 * `committed` (the index was renamed: the output is complete).
 */
export type Phase = 'split' | 'spill' | 'finish' | 'merge' | 'commit' | 'committed';

export function phaseOf(lines: readonly string[]): Phase {
  const last = lines[lines.length - 1] ?? 'START';
  if (last.startsWith('FINISHED') || last === 'RENAMED index') return 'committed';
  if (last.startsWith('RENAM')) return 'commit';
  if (lines.includes('MERGING')) return 'merge';
  if (lines.includes('FINISHING')) return 'finish'; // a spill during finish() counts as finish

  if (last === 'SPILLING') return 'spill';
  return 'split';
}
