import { readdirSync, readlinkSync } from 'node:fs';

/** The files under `at` (a path prefix) this process holds open (Linux: /proc/self/fd). */
export function openFilesUnder(at: string): string[] {
  const out: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(at)) out.push(target);
    } catch {
      // closed meanwhile (the descriptor of the listing itself)
    }
  }
  return out;
}
