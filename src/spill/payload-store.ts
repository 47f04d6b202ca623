import { END_OF_STREAM, type EncodedMessage } from '../format/ipc-message.js';
import { writesPartition, type DataFileWriter } from '../format/output-files.js';
import type { MemoryReservation } from '../memory/memory-pool.js';
import { SlabAllocator, type SlabRange } from '../memory/slab-allocator.js';
import { MERGE_WINDOW_SHARE, reserveMergeWindows, SpillFile, windowsWanted } from './spill-file.js';


/**
 * Messages a spill writes after a partition's cached payloads (buffers evicted
 * under pressure): encoded when the spill starts, and told when the run is on
 * disk, so their memory can go.
 */
export interface ExtraMessages {
  /** the messages in order, and how many of them are record batches (the others: dictionary batches) */
  encode(): Promise<{ messages: EncodedMessage[]; batches: number }>;
  written(): void;
}

/** A settled payload is moved out of its arena when it keeps less than this share of it (compact()). */
const COMPACT_BELOW = 0.75;

/** A payload on its way: its encoding may still be compressing. */
interface CachedPayload {
  /** the message, or a promise of it while it compresses */
  message: EncodedMessage | Promise<EncodedMessage>;
  /** bytes currently reserved for it in the writer's reservation */
  reserved: number;
  /** the slab range its bytes live in (reserved with the slab), or null */
  range: SlabRange | null;
  /** the message once its encoding settled (its arena goes back to the recycler with it) */
  settled: EncodedMessage | null;
}


/**
 * Where a writer's payloads (encoded record-batch messages) live until the
 * final merge: in memory per partition, or, after `spill()`, in spill files.
 *
 * Protocol: any number of `add` and `spill` calls, interleaved; then one
 * `merge` (which writes the partitions in order into the data file) or
 * `discard`; spill files are deleted by both. A `spill` may come while the
 * merge runs (a reclaim another consumer asked for): it frees nothing then,
 * and a run asked for before the merge began is on disk before the merge reads.
 *
 * Memory: every cached payload is counted in the writer's reservation; the
 * store releases what it spills and, when a payload's encoding settles, the
 * difference between what was reserved for it (copies plus worst-case
 * compression output) and what it keeps.
 */
export class PayloadStore {
  /**
   * Payloads in memory, by partition: only partitions that have some are keys
   * (a list per partition took 40 B of heap each, 670 MB at 2^24 partitions).
   */
  private cached = new Map<number, CachedPayload[]>();
  private spillFile: SpillFile | null = null;
  private cachedBytes = 0;
  /** bytes of the slab ranges cached payloads hold */
  private slabbedBytes = 0;
  private readonly slabs: SlabAllocator;
  /** payloads per partition, spilled or not */
  readonly batchCounts: Float64Array;
  spilledBytes = 0;
  /** set once the merge starts: from then on nothing may move to a new spill file */
  private mergeStarted = false;
  /** the last spill run (settled), which the next one waits for */
  private spilling: Promise<unknown> = Promise.resolve();

  constructor(
    numPartitions: number,
    private readonly reservation: MemoryReservation,
    private readonly spillDir: string,
    /**
     * `bufferBytes`: the read buffer that copies spilled segments into the data file;
     * `maxHeldBytes`: the most the writer may hold while it merges (its share of the pool)
     */
    private readonly mergeMemory: { bufferBytes: number; maxHeldBytes: number },
    /** slabs small payloads are carved from */
    slabBytes: number,
    /** whether payloads that compressed well leave their arenas (compact()): under a memory limit */
    private readonly compacting: boolean,
  ) {
    this.batchCounts = new Float64Array(numPartitions);
    this.slabs = new SlabAllocator(reservation, slabBytes);
  }

  /**
   * Zeroed bytes for a small payload from the store's slabs (memory/slab-allocator.ts),
   * reserved with its slab; null when the payload should allocate and reserve on its own.
   * Pass the range to `add` with the payload encoded into it.
   */
  allocate(bytes: number): SlabRange | null {
    return this.mergeStarted ? null : this.slabs.allocate(bytes);
  }

  /** Whether the merge has begun: a spill then writes nothing. */
  get merging(): boolean {
    return this.mergeStarted;
  }

  /** Spills so far (runs in the spill file). */
  get spillCount(): number {
    return this.spillFile?.runCount ?? 0;
  }

  /** Bytes of payloads held in memory (as reserved, or as slab ranges). */
  get memoryBytes(): number {
    return this.cachedBytes + this.slabbedBytes;
  }

  /**
   * Adds partition p's next payload, for which `reserved` bytes are already
   * reserved: a record batch, or (`isBatch` false) a dictionary batch, whose
   * memory its owner holds (reserved 0) and which does not count as a batch.
   * A payload encoded into a slab `range` (from `allocate`) reserves nothing of
   * its own: the range goes back to its slab when the payload is written.
   */
  add(p: number, message: EncodedMessage | Promise<EncodedMessage>, reserved: number, isBatch = true, range: SlabRange | null = null): void {
    const payload: CachedPayload = { message, reserved, range, settled: null };
    const list = this.cached.get(p);
    if (list === undefined) this.cached.set(p, [payload]);
    else list.push(payload);
    if (isBatch) this.batchCounts[p]!++;
    this.cachedBytes += reserved;
    if (range !== null) this.slabbedBytes += range.bytes.byteLength;
    if (!(message instanceof Promise)) {
      this.settle(payload, message);
      return;
    }
    message.then(
      (encoded) => this.settle(payload, encoded),
      () => undefined, // the failure surfaces where the message is awaited
    );
  }

  /**
   * Writes every cached payload, plus `extra` messages (merge and partition
   * buffers evicted under memory pressure, which follow that partition's payloads),
   * as one new partition-ordered run of the spill file, and releases their memory.
   * Returns the bytes released.
   */
  spill(extra: ReadonlyMap<number, ExtraMessages> = new Map()): Promise<number> {
    if (this.mergeStarted) {
      // no run may start once the merge has begun (it would not read its segments); evicted rows cannot
      // come then: the writer has released every buffer before it merges
      if (extra.size > 0) return Promise.reject(new Error('internal: rows evicted after the merge began'));
      return Promise.resolve(0);
    }
    // The payloads are taken now, with the evicted rows: a payload added while an earlier run is still
    // on its way is newer than them, and written before them it put a partition's rows out of order.
    const taken = this.cached;
    this.cached = new Map();
    // one run at a time: a reclaim asked for by another consumer may come while finish() spills
    const run = this.spilling.then(() => this.spillRun(taken, extra));
    this.spilling = run.catch(() => undefined);
    return run;
  }

  private async spillRun(taken: ReadonlyMap<number, CachedPayload[]>, extra: ReadonlyMap<number, ExtraMessages>): Promise<number> {
    const partitions = [...new Set([...taken.keys(), ...extra.keys()])].sort((a, b) => a - b);
    if (partitions.length === 0) return this.slabs.trim();
    let released = 0;
    let encodings = new Map<number, ReturnType<ExtraMessages['encode']>>();
    try {
      this.spillFile ??= await SpillFile.create(this.spillDir);
      const file = this.spillFile;
      file.beginRun();
      // evicted buffers are encoded all at once (compressions run in parallel on the libuv pool)
      encodings = new Map([...extra].map(([p, more]) => [p, more.encode()]));
      for (const p of partitions) {
        const chunks: Uint8Array[] = [];
        for (const payload of taken.get(p) ?? []) {
          const message = await this.messageOf(payload);
          for (const chunk of message.chunks) chunks.push(chunk);
        }
        const { messages, batches } = (await encodings.get(p)) ?? { messages: [], batches: 0 };
        for (const message of messages) chunks.push(...message.chunks);
        await file.writeSegment(p, chunks);
        this.batchCounts[p]! += batches;
      }
      await file.flushRun();
      for (const more of extra.values()) more.written(); // their bytes are on disk: their memory may go
      this.spilledBytes += file.endRun();
    } catch (error) {
      // encodings the run did not get to are waited for, so none fails unhandled or reads evicted buffers once they are freed
      await Promise.allSettled(encodings.values());
      // the run is dropped and the payloads stay cached, ahead of any added meanwhile
      this.spillFile?.abandonRun();
      for (const [p, list] of taken) this.cached.set(p, [...list, ...(this.cached.get(p) ?? [])]);
      throw error;
    }
    for (const list of taken.values()) for (const payload of list) released += this.release(payload);
    return released + this.slabs.trim(); // a spill is a reclaim: the slab being filled goes too, if it is empty
  }

  /**
   * Before the merge, the payloads still in memory are spilled as one more run
   * - when the pool is too short to give the merge a read window per spill
   *   run: their memory then becomes the windows. Under a tight limit the runs
   *   are many and small, and the merge's reads are its cost (fewer, larger
   *   ones with larger windows);
   * - when the writer would hold more than `maxHeldBytes` while it merges:
   *   nothing held during the merge can be given back, and held beyond the
   *   writer's share it could starve another writer of the pool.
   */
  async prepareMerge(poolAvailable: number): Promise<void> {
    if (this.memoryBytes === 0) return;
    const runs = this.spillFile?.runCount ?? 0;
    const shortOfWindows = windowsWanted(runs) > poolAvailable * MERGE_WINDOW_SHARE;
    const overShare = this.reservation.size + this.mergeMemory.bufferBytes > this.mergeMemory.maxHeldBytes;
    if (shortOfWindows || overShare) await this.spill();
  }

  /**
   * Writes every partition, in ascending order, into the data file: the schema
   * message, the partition's spilled segments (run by run in spill order,
   * copied verbatim), its in-memory payloads, the end-of-stream marker. A partition
   * without payloads is left empty (zero bytes).
   */
  async merge(output: DataFileWriter, schemaMessage: Uint8Array): Promise<void> {
    const { bufferBytes: minBytes, maxHeldBytes } = this.mergeMemory;
    await this.reservation.grow(minBytes);
    // From here on no spill run starts. One already asked for (a reclaim another consumer asked for) has
    // taken its payloads out of memory: the merge reads nothing before it is on disk, or they were lost.
    this.mergeStarted = true;
    await this.spilling;
    // the spill file reads each run through its own window: more room (if the pool has it, within the share) means fewer reads
    const runs = this.spillFile?.runCount ?? 0;
    const extra = reserveMergeWindows(this.reservation, runs, minBytes, maxHeldBytes);
    const bufferBytes = minBytes + extra;
    const buffer = this.reservation.recycler.take(bufferBytes);
    const sink = { append: (bytes: Uint8Array) => output.append(bytes), flush: () => output.flush() };
    const noBatches = this.batchCounts.every((count) => count === 0);
    try {
      for (let p = 0; p < this.batchCounts.length; p++) {
        output.beginPartition(p);
        if (writesPartition(p, this.batchCounts[p]!, noBatches)) {
          await output.append(schemaMessage);
          await this.spillFile?.copyPartition(p, buffer, sink);
          for (const payload of this.cached.get(p) ?? []) {
            const message = await this.messageOf(payload);
            for (const chunk of message.chunks) await output.append(chunk);
          }
          await output.append(END_OF_STREAM);
        }
        output.endPartition();
      }
      await output.flush(); // nothing appended may point into the buffer once its memory is released
      this.spillFile?.dropWindows(); // nor anything else: its views kept it alive, unreserved, until discard()
      this.reservation.recycler.give(buffer);
    } finally {
      this.reservation.shrink(bufferBytes);
    }
  }

  /** Deletes the spill files and forgets every payload (after merge, or on abort). */
  async discard(): Promise<void> {
    await this.spilling; // a run on its way holds payloads taken out of the lists below
    const pending = [...this.cached.values()].flat();
    this.cached = new Map();
    await Promise.allSettled(pending.map((p) => p.message));
    for (const payload of pending) this.release(payload);
    pending.length = 0; // released payloads must not stay alive, unreserved, while the spill file is deleted below
    this.slabs.releaseAll();
    await this.spillFile?.delete();
    this.spillFile = null;
  }

  /** A payload's message as it is kept (compacted, once its encoding settled); throws its encoding's error. */
  private async messageOf(payload: CachedPayload): Promise<EncodedMessage> {
    // settle() was registered on the promise first (in add), so it has run when this await returns
    if (payload.message instanceof Promise) await payload.message;
    return payload.settled ?? (payload.message as EncodedMessage);
  }

  private settle(payload: CachedPayload, encoded: EncodedMessage): void {
    const message = this.compact(payload, encoded);
    payload.settled = message;
    const keptBytes = payload.range !== null ? 0 : (message.heldBytes ?? message.byteLength);
    if (payload.reserved > keptBytes) this.shrinkReserved(payload, payload.reserved - keptBytes);
  }

  /**
   * A settled payload that compressed well, moved out of its arena into an
   * array of its own size (a slab range when it is small). The arena is as
   * large as the uncompressed buffers: wide rows at P = 200 compress to 40 %,
   * and their cached payloads kept 2.5 times their bytes (a peak of 449 MiB
   * for 135 MB of output; 318 MiB compacted). The arena goes back to the recycler
   * at once, for the next payload. A payload that keeps more than three
   * quarters of its size stays where it is: narrow rows compress to 85 %, and
   * copying them cost more time (fresh memory) than it saved memory. Only
   * under a memory limit, where held bytes bring spills: without one the copy
   * made wide writes 5 % slower. Only a payload whose reservation covers both
   * arrays at once (the writer reserves the arena plus the compressor's worst
   * case).
   *
   * ```text
   * before  arena [ body, compressed |           slack            ]  + header array
   * after   own   [ header | body ]                                   (arena -> recycler)
   * ```
   */
  private compact(payload: CachedPayload, message: EncodedMessage): EncodedMessage {
    const arena = message.arena;
    const bytes = message.byteLength;
    if (!this.compacting || arena === undefined || payload.range !== null || bytes > arena.byteLength * COMPACT_BELOW) return message;
    if (payload.reserved < arena.byteLength + bytes) return message;
    const range = this.mergeStarted ? null : this.slabs.allocate(bytes);
    if (range !== null) {
      payload.range = range;
      this.slabbedBytes += range.bytes.byteLength;
    }
    const into = range?.bytes ?? this.reservation.recycler.take(bytes);
    let at = 0;
    for (const chunk of message.chunks) {
      into.set(chunk, at);
      at += chunk.byteLength;
    }
    this.reservation.recycler.give(arena); // settle() releases its reservation right after
    return range !== null ? { chunks: [into], byteLength: bytes } : { chunks: [into], byteLength: bytes, arena: into };
  }

  /**
   * Releases a payload's memory (its reservation, its slab range or its arena,
   * which goes back to the recycler); returns the bytes given back to the
   * reservation. Its bytes must be written (or no longer wanted).
   */
  private release(payload: CachedPayload): number {
    let released = payload.reserved;
    const arena = payload.range === null ? payload.settled?.arena : undefined;
    // (a dictionary batch reserves nothing here: its tracker owns its memory)
    if (arena !== undefined && payload.reserved >= arena.byteLength) this.reservation.recycler.give(arena);
    payload.settled = null;
    this.shrinkReserved(payload, payload.reserved);
    if (payload.range !== null) {
      this.slabbedBytes -= payload.range.bytes.byteLength;
      released += this.slabs.release(payload.range);
      payload.range = null;
    }
    return released;
  }

  private shrinkReserved(payload: CachedPayload, bytes: number): void {
    payload.reserved -= bytes;
    this.cachedBytes -= bytes;
    this.reservation.shrink(bytes);
  }
}
