import { ShuffleError } from '../errors.js';
import { readIpcSchema, readIpcStream } from '../format/ipc-reader.js';
import { crc32cOf, outputPaths } from '../format/output-files.js';
import { sameSchema } from '../writer/same-schema.js';
import { BatchCoalescer } from './batch-coalescer.js';
import { LocalFileSource } from './byte-source.js';
/**
 * Reads a shuffle output: the index tells where each partition's IPC stream
 * lies in the data file, the checksum file how to verify it.
 *
 * A partition is read whole and its CRC32C verified before its first batch is
 * decoded, so a damaged partition never yields a single row; batches are then
 * decompressed asynchronously one after another.
 *
 * Protocol: `await ShuffleReader.open(prefix)` (or `fromSources`), any number
 * of reads (also concurrently), then `close()`.
 */
export class ShuffleReader {
    sources;
    openOptions;
    /** Byte offsets of each partition in the data file: partition p is [offsets[p], offsets[p+1]). */
    offsets;
    checksums;
    constructor(sources, offsets, checksums, openOptions) {
        this.sources = sources;
        this.openOptions = openOptions;
        this.offsets = offsets;
        this.checksums = checksums;
    }
    /** Opens `<prefix>.data`, `<prefix>.index` and `<prefix>.checksum.CRC32C` from the local file system. */
    static async open(prefix, options = {}) {
        const paths = outputPaths(prefix);
        const opened = [];
        try {
            const index = await LocalFileSource.open(paths.index);
            opened.push(index);
            const data = await LocalFileSource.open(paths.data);
            opened.push(data);
            const checksum = await LocalFileSource.open(paths.checksum);
            opened.push(checksum);
            return await ShuffleReader.fromSources({ data, index, checksum }, options);
        }
        catch (error) {
            await Promise.all(opened.map((s) => s.close()));
            throw error;
        }
    }
    /** Reads the index (and checksums) from the given sources and validates them against the data's size. */
    static async fromSources(sources, options = {}) {
        const { index, data, checksum } = sources;
        const indexSize = await index.size();
        if (indexSize < 16 || indexSize % 8 !== 0) {
            throw new ShuffleError('CS_CORRUPT_DATA', `index file has ${indexSize} bytes: expected (partitions + 1) * 8 with at least one partition`, { file: index.name });
        }
        const indexBytes = await index.read(0, indexSize);
        const view = new DataView(indexBytes.buffer, indexBytes.byteOffset, indexBytes.byteLength);
        const dataSize = await data.size();
        const offsets = [];
        for (let i = 0; i < indexSize / 8; i++) {
            const offset = Number(view.getBigInt64(i * 8, false));
            const previous = offsets[i - 1] ?? 0;
            if ((i === 0 && offset !== 0) || offset < previous || offset > dataSize) {
                throw new ShuffleError('CS_CORRUPT_DATA', `index entry ${i} is ${offset}: offsets must start at 0, never decrease and stay within the ${dataSize}-byte data file`, { file: index.name, offset: i * 8 });
            }
            offsets.push(offset);
        }
        if (offsets[offsets.length - 1] !== dataSize) {
            throw new ShuffleError('CS_CORRUPT_DATA', `the index ends at ${offsets[offsets.length - 1]} but the data file has ${dataSize} bytes`, { file: data.name });
        }
        let checksums = null;
        if (checksum !== undefined) {
            const numPartitions = offsets.length - 1;
            const size = await checksum.size();
            if (size !== numPartitions * 8) {
                throw new ShuffleError('CS_CORRUPT_DATA', `checksum file has ${size} bytes, expected ${numPartitions * 8} for ${numPartitions} partitions`, { file: checksum.name });
            }
            const bytes = await checksum.read(0, size);
            const cview = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
            checksums = Array.from({ length: numPartitions }, (_, p) => Number(cview.getBigUint64(p * 8, false) & 0xffffffffn));
        }
        return new ShuffleReader(sources, offsets, checksums, options);
    }
    get numPartitions() {
        return this.offsets.length - 1;
    }
    /** Bytes of partition p in the data file (0 when it received no rows). */
    partitionLength(p) {
        this.assertPartition(p);
        return this.offsets[p + 1] - this.offsets[p];
    }
    /**
     * The schema, decoded from the first message of the first non-empty partition
     * (only those bytes are read; no checksum is involved); null when every
     * partition is empty.
     */
    async schema() {
        for (let p = 0; p < this.numPartitions; p++) {
            const length = this.partitionLength(p);
            if (length === 0)
                continue;
            const start = this.offsets[p];
            const head = await this.sources.data.read(start, Math.min(8, length));
            const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
            const continued = head.byteLength >= 8 && view.getInt32(0, true) === -1;
            const metadataSize = head.byteLength >= 4 ? view.getInt32(continued ? 4 : 0, true) : 0;
            const prefix = continued ? 8 : 4;
            const wanted = metadataSize > 0 ? Math.min(length, prefix + metadataSize) : head.byteLength;
            return readIpcSchema(await this.sources.data.read(start, wanted), this.location(p));
        }
        return null;
    }
    /** The verified bytes of partition p: one complete Arrow IPC stream, or empty. */
    async partitionBytes(p) {
        const length = this.partitionLength(p);
        const bytes = length === 0 ? new Uint8Array(0) : await this.sources.data.read(this.offsets[p], length);
        const expected = this.checksums?.[p];
        if (expected !== undefined) {
            const actual = crc32cOf([bytes]);
            if (actual !== expected) {
                throw new ShuffleError('CS_CHECKSUM_MISMATCH', `partition bytes have CRC32C ${hex(actual)}, the checksum file says ${hex(expected)}`, this.location(p));
            }
        }
        return bytes;
    }
    /** The record batches of partition p, in the order they were written. */
    async *readPartition(p, options = {}) {
        yield* this.readPartitions(p, p + 1, options);
    }
    /** The record batches of partitions [start, end), the way a reducer reads a range of partitions. */
    async *readPartitions(start, end, options = {}) {
        if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && start <= end && end <= this.numPartitions)) {
            throw new ShuffleError('CS_INVALID_ARGUMENT', `partition range [${start}, ${end}) is not within [0, ${this.numPartitions})`);
        }
        const target = options.coalesceRows;
        if (target !== undefined && !(Number.isInteger(target) && target >= 1)) {
            throw new ShuffleError('CS_INVALID_ARGUMENT', `coalesceRows must be an integer >= 1, got ${String(target)}`);
        }
        let coalescer = null;
        let schema = null;
        for (let p = start; p < end; p++) {
            const bytes = await this.partitionBytes(p); // an empty partition too: its checksum must be that of nothing
            if (bytes.byteLength === 0)
                continue;
            for await (const batch of readIpcStream(bytes, this.location(p), this.openOptions)) {
                if (schema === null)
                    schema = batch.schema;
                else if (batch.schema !== schema && !sameSchema(schema, batch.schema)) {
                    throw new ShuffleError('CS_CORRUPT_DATA', 'the partitions of one output disagree about the schema', this.location(p));
                }
                if (target === undefined) {
                    yield batch;
                    continue;
                }
                coalescer ??= new BatchCoalescer(batch.schema, target);
                yield* coalescer.push(batch);
            }
        }
        const last = coalescer?.finish();
        if (last)
            yield last;
    }
    async close() {
        await Promise.all([this.sources.data.close(), this.sources.index.close(), this.sources.checksum?.close()]);
    }
    assertPartition(p) {
        if (!(Number.isInteger(p) && p >= 0 && p < this.numPartitions)) {
            throw new ShuffleError('CS_INVALID_ARGUMENT', `partition ${p} does not exist: this output has ${this.numPartitions} partitions`);
        }
    }
    location(p) {
        return { file: this.sources.data.name, partition: p, offset: this.offsets[p] };
    }
}
function hex(n) {
    return `0x${(n >>> 0).toString(16).padStart(8, '0')}`;
}
