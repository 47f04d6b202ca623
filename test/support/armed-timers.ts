/**
 * Watches the timers of one duration: setTimeout and clearTimeout are spied on (vitest's
 * spies: undo with vi.restoreAllMocks()), and the returned set holds the timers of `ms`
 * milliseconds armed and not yet cleared. A reader's wait of 600 s, say, left armed keeps
 * the process alive that long.
 */
import { vi } from 'vitest';

export function watchTimersOf(ms: number): Set<unknown> {
  const armed = new Set<unknown>();
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  vi.spyOn(globalThis, 'setTimeout').mockImplementation(((callback: () => void, after?: number) => {
    const timer = realSet(callback, after);
    if (after === ms) armed.add(timer);
    return timer;
  }) as typeof setTimeout);
  vi.spyOn(globalThis, 'clearTimeout').mockImplementation(((timer: NodeJS.Timeout | undefined) => {
    armed.delete(timer);
    realClear(timer);
  }) as typeof clearTimeout);
  return armed;
}
