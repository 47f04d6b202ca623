import { END_OF_STREAM } from '../format/ipc-message.js';
import { SpillFile } from './spill-file.js';
/**
 * Where a writer's payloads (encoded record-batch messages) live until the
 * final merge: in memory per partition, or, after `spill()`, in spill files.
 *
 * Protocol: any number of `add` and `spill` calls, interleaved; then one
 * `merge` (which writes the partitions in order into the data file) or
 * `discard`; spill files are deleted by both.
 *
 * Memory: every cached payload is counted in the writer's reservation; the
 * store releases what it spills and, when a payload's encoding settles, the
 * difference between what was reserved for it (copies plus worst-case
 * compression output) and what it keeps.
 */
export class PayloadStore {
    reservation;
    spillDir;
    mergeBufferBytes;
    cached;
    spillFile = null;
    cachedBytes = 0;
    /** payloads per partition, spilled or not */
    batchCounts;
    spilledBytes = 0;
    /** set once the merge starts: from then on nothing may move to a new spill file */
    merging = false;
    constructor(numPartitions, reservation, spillDir, 
    /** read buffer used to copy spilled segments into the data file */
    mergeBufferBytes) {
        this.reservation = reservation;
        this.spillDir = spillDir;
        this.mergeBufferBytes = mergeBufferBytes;
        this.cached = Array.from({ length: numPartitions }, () => []);
        this.batchCounts = new Array(numPartitions).fill(0);
    }
    /** Spills so far (runs in the spill file). */
    get spillCount() {
        return this.spillFile?.runCount ?? 0;
    }
    /** Bytes of payloads held in memory (as reserved). */
    get memoryBytes() {
        return this.cachedBytes;
    }
    /**
     * Adds partition p's next payload, for which `reserved` bytes are already
     * reserved: a record batch, or (`isBatch` false) a dictionary batch, whose
     * memory its owner holds (reserved 0) and which does not count as a batch.
     */
    add(p, message, reserved, isBatch = true) {
        const payload = { message, reserved };
        this.cached[p].push(payload);
        if (isBatch)
            this.batchCounts[p]++;
        this.cachedBytes += reserved;
        message.then((encoded) => this.settle(payload, encoded.byteLength), () => undefined);
    }
    /**
     * Writes every cached payload, plus `extra` messages (merge and partition
     * buffers evicted under memory pressure, which follow that partition's payloads),
     * as one new partition-ordered run of the spill file, and releases their memory.
     * Returns the bytes released.
     */
    async spill(extra = new Map()) {
        if (this.merging)
            return 0;
        const taken = this.cached;
        this.cached = taken.map(() => []);
        const partitions = taken.map((list, p) => (list.length > 0 || extra.has(p) ? p : -1)).filter((p) => p >= 0);
        if (partitions.length === 0)
            return 0;
        let released = 0;
        try {
            this.spillFile ??= await SpillFile.create(this.spillDir);
            const file = this.spillFile;
            file.beginRun();
            // evicted buffers are encoded all at once (compressions run in parallel on the libuv pool)
            const encodings = new Map([...extra].map(([p, more]) => [p, more.encode()]));
            for (const p of partitions) {
                const chunks = [];
                for (const payload of taken[p])
                    chunks.push(...(await payload.message).chunks);
                const { messages, batches } = (await encodings.get(p)) ?? { messages: [], batches: 0 };
                for (const message of messages)
                    chunks.push(...message.chunks);
                await file.writeSegment(p, chunks);
                this.batchCounts[p] += batches;
            }
            await file.flushRun();
            for (const more of extra.values())
                more.written(); // their bytes are on disk: their memory may go
            this.spilledBytes += file.endRun();
        }
        catch (error) {
            // the run is dropped and the payloads stay cached, ahead of any added meanwhile
            this.spillFile?.abandonRun();
            taken.forEach((list, p) => this.cached[p].unshift(...list));
            throw error;
        }
        for (const list of taken) {
            for (const payload of list) {
                released += payload.reserved;
                this.cachedBytes -= payload.reserved;
                this.reservation.shrink(payload.reserved);
                payload.reserved = 0;
            }
        }
        return released;
    }
    /**
     * Writes every partition, in ascending order, into the data file: the schema
     * message, the partition's spilled segments (run by run in spill order,
     * copied verbatim), its in-memory payloads, the end-of-stream marker. A partition
     * without payloads is left empty (zero bytes).
     */
    async merge(output, schemaMessage) {
        await this.reservation.grow(this.mergeBufferBytes);
        this.merging = true;
        const buffer = new Uint8Array(this.mergeBufferBytes);
        try {
            for (let p = 0; p < this.cached.length; p++) {
                output.beginPartition(p);
                if (this.batchCounts[p] > 0) {
                    await output.append(schemaMessage);
                    await this.spillFile?.copyPartition(p, buffer, (bytes) => output.appendNow(bytes));
                    for (const payload of this.cached[p])
                        for (const chunk of (await payload.message).chunks)
                            await output.append(chunk);
                    await output.append(END_OF_STREAM);
                }
                output.endPartition();
            }
        }
        finally {
            this.reservation.shrink(this.mergeBufferBytes);
        }
    }
    /** Deletes the spill files and forgets every payload (after merge, or on abort). */
    async discard() {
        const pending = this.cached.flat();
        this.cached = this.cached.map(() => []);
        await Promise.allSettled(pending.map((p) => p.message));
        for (const payload of pending)
            this.release(payload);
        await this.spillFile?.delete();
        this.spillFile = null;
    }
    settle(payload, keptBytes) {
        if (payload.reserved > keptBytes)
            this.release(payload, payload.reserved - keptBytes);
    }
    release(payload, bytes = payload.reserved) {
        payload.reserved -= bytes;
        this.cachedBytes -= bytes;
        this.reservation.shrink(bytes);
    }
}
