import type { Writable } from 'node:stream';
import { isTTY } from './context.js';

/**
 * A one-line progress bar on a terminal:
 *
 *     write [##########..........]  50%  500,000 rows, 62 batches
 *
 * It draws only when the stream is a TTY (never into pipes, files or logs),
 * redraws at most every 100 ms, and `done()` erases the line.
 */
export interface Progress {
  /** fraction in [0, 1], or null when the total is unknown; `force` redraws now (a new phase) */
  update(fraction: number | null, detail: string, force?: boolean): void;
  /** Erases the bar; safe to call more than once. */
  done(): void;
}

const REDRAW_MS = 100;
const BAR_WIDTH = 20;
const NO_PROGRESS: Progress = { update: () => undefined, done: () => undefined };

export function createProgress(stream: Writable, label: string, now: () => number = () => performance.now()): Progress {
  if (!isTTY(stream)) return NO_PROGRESS;
  let lastDraw = -Infinity;
  let drawn = false;
  return {
    update(fraction, detail, force = false) {
      const t = now();
      if (!force && t - lastDraw < REDRAW_MS) return;
      lastDraw = t;
      const columns = (stream as Writable & { columns?: number }).columns || 80; // 0 when the size is unknown
      stream.write(`\r${render(label, fraction, detail).slice(0, Math.max(0, columns - 1))}\x1b[K`);
      drawn = true;
    },
    done() {
      if (drawn) stream.write('\r\x1b[K');
      drawn = false;
      lastDraw = -Infinity;
    },
  };
}

export function render(label: string, fraction: number | null, detail: string): string {
  if (fraction === null) return `${label}  ${detail}`;
  const f = Math.min(1, Math.max(0, fraction));
  const filled = Math.round(f * BAR_WIDTH);
  const bar = '#'.repeat(filled) + '.'.repeat(BAR_WIDTH - filled);
  return `${label} [${bar}] ${String(Math.floor(f * 100)).padStart(3)}%  ${detail}`;
}
