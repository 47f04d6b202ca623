import { open } from 'node:fs/promises';
import { ioError, ShuffleError } from '../errors.js';
/** A ByteRangeSource over a local file. */
export class LocalFileSource {
    name;
    handle;
    constructor(name, handle) {
        this.name = name;
        this.handle = handle;
    }
    static async open(path) {
        try {
            return new LocalFileSource(path, await open(path, 'r'));
        }
        catch (cause) {
            throw ioError('open', path, cause);
        }
    }
    async size() {
        try {
            return (await this.handle.stat()).size;
        }
        catch (cause) {
            throw ioError('stat', this.name, cause);
        }
    }
    async read(offset, length) {
        // 8-byte aligned (a fresh ArrayBuffer), so arrow-js reads buffers without copying them
        const bytes = new Uint8Array(length);
        let done = 0;
        try {
            while (done < length) {
                const { bytesRead } = await this.handle.read(bytes, done, length - done, offset + done);
                if (bytesRead === 0)
                    break;
                done += bytesRead;
            }
        }
        catch (cause) {
            throw ioError('read', this.name, cause);
        }
        if (done < length) {
            throw new ShuffleError('CS_CORRUPT_DATA', `file is truncated: wanted ${length} bytes, found ${done}`, {
                file: this.name,
                offset: offset + done,
            });
        }
        return bytes;
    }
    async close() {
        await this.handle.close().catch(() => undefined);
    }
}
