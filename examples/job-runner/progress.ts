/**
 * Progress bars, one line per stage, redrawn in place on stderr when it is a
 * terminal (never into pipes or logs); log lines (retries) are printed above them.
 *
 *     map orders     [##########..........]  4/8 tasks  512,000 rows  1 retry
 *     reduce         [....................]  0/8 tasks
 */
import type { Writable } from 'node:stream';

export interface StageProgress {
  done: number;
  total: number;
  detail: string;
}

export interface ProgressBoard {
  update(stage: string, progress: StageProgress): void;
  /** A line that stays (printed whether or not the stream is a terminal). */
  log(line: string): void;
  /** Erases the bars. */
  done(): void;
}

/** Draws nothing, logs nothing. */
export const SILENT: ProgressBoard = { update: () => undefined, log: () => undefined, done: () => undefined };

const REDRAW_MS = 100;
const BAR = 20;

export function progressBoard(stream: Writable & { isTTY?: boolean; columns?: number }, now: () => number = () => performance.now()): ProgressBoard {
  const tty = stream.isTTY === true;
  const stages = new Map<string, StageProgress>();
  let drawn = 0;
  let last = -Infinity;
  const erase = () => {
    if (drawn > 0) stream.write(`\x1b[${drawn}A\r\x1b[J`);
    drawn = 0;
  };
  const draw = () => {
    erase();
    const width = Math.max(20, (stream.columns || 80) - 1);
    const label = Math.max(...[...stages.keys()].map((k) => k.length));
    for (const [name, p] of stages) stream.write(`${renderLine(name.padEnd(label), p).slice(0, width)}\n`);
    drawn = stages.size;
    last = now();
  };
  return {
    update(stage, progress) {
      const first = !stages.has(stage);
      stages.set(stage, progress);
      if (tty && (first || progress.done === progress.total || now() - last >= REDRAW_MS)) draw();
    },
    log(line) {
      if (!tty) {
        stream.write(`${line}\n`);
        return;
      }
      erase();
      stream.write(`${line}\n`);
      draw();
    },
    done() {
      if (tty) erase();
    },
  };
}

export function renderLine(name: string, p: StageProgress): string {
  const f = p.total > 0 ? Math.min(1, p.done / p.total) : 0;
  const filled = Math.round(f * BAR);
  return `${name} [${'#'.repeat(filled)}${'.'.repeat(BAR - filled)}] ${String(p.done).padStart(String(p.total).length)}/${p.total} tasks  ${p.detail}`;
}
