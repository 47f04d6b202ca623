import { MemoryPool } from './memory-pool.js';

/**
 * The pool of writers created without `memoryPool`: one per thread (module
 * state is per isolate), unbounded, shared by every such writer.
 *
 * Why shared: a map task's large buffers (partition buffers, payload arenas,
 * the sort writer's pages) go back to the pool's recycler when it finishes, so
 * the next task gets warm memory instead of fresh pages (about 3 ms per MiB
 * here). A native engine gets the same from its allocator (Velox's memory
 * allocator, jemalloc): freed memory serves the next task of the process.
 * With a private pool per writer, every task allocated all of its buffers
 * anew: narrow rows at P = 200 wrote 1.2x to 1.8x slower (alternating runs;
 * what fresh pages cost depends on the machine's state).
 *
 * It costs nothing to share: the pool has no limit, so writers never ask
 * each other for memory, and each writer's figures (`peakMemoryBytes`) are its
 * own reservation's. Idle buffers are bounded by the recycler's 512 MiB and let
 * go 2 s after the last writer released its memory.
 */
export function defaultMemoryPool(): MemoryPool {
  shared ??= new MemoryPool();
  return shared;
}

let shared: MemoryPool | null = null;
