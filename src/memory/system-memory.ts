import { totalmem } from 'node:os';

/**
 * The memory this process may use: the machine's, or its container's (cgroup)
 * limit when that is lower. Node reports "no container limit" as 0, undefined
 * or a huge number (2^64 for cgroup v2's `max`), all above or outside the
 * machine's memory.
 */
export function systemMemory(): number {
  const machine = totalmem();
  const container = process.constrainedMemory?.() ?? 0;
  return container > 0 && container < machine ? container : machine;
}

/**
 * The memory limit of a command-line write without `--memory-limit`: half of
 * `memory` (default: systemMemory()). Without any limit the columnar writer
 * keeps every compressed payload in memory until it writes its data file, so
 * an input larger than memory would end the process; under this one it
 * spills instead. The other half is left for the input batches being read,
 * V8's heap and the page cache. Worked example: 24 GiB of RAM in a container
 * limited to 8 GiB gives 4 GiB.
 */
export function defaultMemoryLimit(memory: number = systemMemory()): number {
  return Math.max(1, Math.floor(memory / 2));
}
