import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, open, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { ioError, ShuffleError } from '../errors.js';
import { writeChunks } from './write-chunks.js';
export const CHECKSUM_ALGORITHM = 'CRC32C';
export function outputPaths(prefix) {
    return { data: `${prefix}.data`, index: `${prefix}.index`, checksum: `${prefix}.checksum.${CHECKSUM_ALGORITHM}` };
}
/** Serializes partition lengths as Spark's index file: cumulative offsets, big-endian int64. */
export function encodeIndex(partitionLengths) {
    const bytes = new Uint8Array((partitionLengths.length + 1) * 8);
    const view = new DataView(bytes.buffer);
    let offset = 0;
    partitionLengths.forEach((length, p) => {
        offset += length;
        view.setBigInt64((p + 1) * 8, BigInt(offset), false);
    });
    return bytes;
}
/** Serializes per-partition checksums as big-endian int64 values. */
export function encodeChecksums(checksums) {
    const bytes = new Uint8Array(checksums.length * 8);
    const view = new DataView(bytes.buffer);
    checksums.forEach((c, p) => view.setBigInt64(p * 8, BigInt(c >>> 0), false));
    return bytes;
}
/** A CRC32C over a sequence of chunks. */
export function crc32cOf(chunks, initial = 0) {
    let crc = initial;
    for (const chunk of chunks)
        crc = crc32c(chunk, crc);
    return crc >>> 0;
}
const MAX_IOVECS = 512; // chunks gathered before a writev
/**
 * Writes the data file partition by partition under a temporary name, then
 * commits all three files by rename (index last: an index file with its final
 * name means the output is complete; an older output's index is removed first). On any failure, and on abort, every
 * temporary file is removed and no file with a final name is left behind.
 *
 * Protocol: `create`, then for p = 0..P-1 in ascending order one
 * `beginPartition(p)`, any number of `append`, one `endPartition()`; then
 * `commit()` or `abort()`.
 */
export class DataFileWriter {
    paths;
    temp;
    handle;
    position = 0;
    pending = [];
    pendingBytes = 0;
    partition = -1;
    partitionStart = 0;
    crc = 0;
    partitionLengths = [];
    checksums = [];
    constructor(paths, temp, handle) {
        this.paths = paths;
        this.temp = temp;
        this.handle = handle;
    }
    static async create(prefix, overwrite = false) {
        const paths = outputPaths(prefix);
        await assertDirectory(dirname(paths.data));
        if (!overwrite && (await exists(paths.index))) {
            throw new ShuffleError('CS_OUTPUT_EXISTS', 'a committed shuffle output already exists here; pass overwrite to replace it', { file: paths.index });
        }
        const tag = randomBytes(6).toString('hex');
        const temp = {
            data: `${paths.data}.${tag}.tmp`,
            index: `${paths.index}.${tag}.tmp`,
            checksum: `${paths.checksum}.${tag}.tmp`,
        };
        let handle;
        try {
            handle = await open(temp.data, 'wx');
        }
        catch (cause) {
            throw ioError('create the data file', temp.data, cause);
        }
        return new DataFileWriter(paths, temp, handle);
    }
    /** Starts partition p; partitions must come in ascending order, skipping none. */
    beginPartition(p) {
        if (p !== this.partition + 1)
            throw new Error(`partitions must be written in order: expected ${this.partition + 1}, got ${p}`);
        this.partition = p;
        this.partitionStart = this.position + this.pendingBytes;
        this.crc = 0;
    }
    async append(chunk) {
        if (chunk.byteLength === 0)
            return;
        this.crc = crc32c(chunk, this.crc);
        this.pending.push(chunk);
        this.pendingBytes += chunk.byteLength;
        if (this.pending.length >= MAX_IOVECS || this.pendingBytes >= 1 << 20)
            await this.flush();
    }
    /** Appends and writes at once, so the caller may reuse `chunk`'s memory when this returns. */
    async appendNow(chunk) {
        await this.append(chunk);
        await this.flush();
    }
    endPartition() {
        this.partitionLengths.push(this.position + this.pendingBytes - this.partitionStart);
        this.checksums.push(this.crc >>> 0);
    }
    get bytesWritten() {
        return this.position + this.pendingBytes;
    }
    async flush() {
        if (this.pending.length === 0)
            return;
        const chunks = this.pending;
        this.pending = [];
        const bytes = this.pendingBytes;
        this.pendingBytes = 0;
        try {
            await writeChunks(this.handle, chunks, this.position);
        }
        catch (cause) {
            throw ioError('write the data file', this.temp.data, cause);
        }
        this.position += bytes;
    }
    /** Writes the index and checksum files and renames all three into place. */
    async commit() {
        try {
            await this.flush();
            await this.handle.close();
            this.handle = null;
            await writeWhole(this.temp.checksum, encodeChecksums(this.checksums));
            await writeWhole(this.temp.index, encodeIndex(this.partitionLengths));
            const renamed = [];
            try {
                // an older output with this prefix stops being committed before its data is replaced, so a
                // crash between the renames leaves an uncommitted output (removeLeftovers cleans it), never
                // an old index over new data
                await rm(this.paths.index, { force: true }).catch((cause) => {
                    throw ioError('replace the existing shuffle output', this.paths.index, cause);
                });
                for (const key of ['data', 'checksum', 'index']) {
                    await rename(this.temp[key], this.paths[key]).catch((cause) => {
                        throw ioError('commit the shuffle output', this.paths[key], cause);
                    });
                    renamed.push(this.paths[key]);
                }
            }
            catch (error) {
                await Promise.all(renamed.map((path) => rm(path, { force: true })));
                throw error;
            }
        }
        catch (error) {
            await this.abort();
            throw error;
        }
        return { partitionLengths: this.partitionLengths, checksums: this.checksums, bytesWritten: this.position };
    }
    /** Closes and removes the temporary files; safe to call more than once. */
    async abort() {
        const handle = this.handle;
        this.handle = null;
        await handle?.close().catch(() => undefined);
        await Promise.all(Object.values(this.temp).map((path) => rm(path, { force: true })));
    }
}
async function writeWhole(path, bytes) {
    let handle;
    try {
        handle = await open(path, 'wx');
        await handle.writeFile(bytes);
    }
    catch (cause) {
        throw ioError('write', path, cause);
    }
    finally {
        await handle?.close();
    }
}
/**
 * CS_FILE_NOT_FOUND unless `dir` exists and is a directory, CS_IO unless it is
 * writable (a read-only file system refuses even root); `role` names it ("output", "spill").
 */
export async function assertDirectory(dir, role = 'output') {
    let isDirectory;
    try {
        isDirectory = (await stat(dir)).isDirectory();
    }
    catch (cause) {
        throw new ShuffleError('CS_FILE_NOT_FOUND', `the ${role} directory does not exist`, { file: dir }, { cause });
    }
    if (!isDirectory)
        throw new ShuffleError('CS_FILE_NOT_FOUND', `the ${role} directory is not a directory`, { file: dir });
    try {
        await access(dir, constants.W_OK);
    }
    catch (cause) {
        throw new ShuffleError('CS_IO', `the ${role} directory is not writable: ${cause.message}`, { file: dir }, { cause });
    }
}
async function exists(path) {
    try {
        await stat(path);
        return true;
    }
    catch {
        return false;
    }
}
