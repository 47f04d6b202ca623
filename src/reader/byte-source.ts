import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { ioError, ShuffleError } from '../errors.js';

/**
 * Where the reader gets bytes from: a local file now, later a remote map
 * output or an object store. Implementations must return exactly the bytes
 * asked for, or throw (a ShuffleError that names the source; any other error
 * becomes CS_IO naming it). The bytes `read` returns become the reader's: it
 * keeps views into them in the batches it yields, so a source must not reuse
 * or change them (one that reuses a buffer implements `readInto`).
 *
 * Protocol: any number of `size` / `read` calls, possibly concurrent, then `close` once.
 */
export interface ByteRangeSource {
  /** A name for error messages (a path or a URL). */
  readonly name: string;
  size(): Promise<number>;
  /** The bytes [offset, offset + length). */
  read(offset: number, length: number): Promise<Uint8Array>;
  /**
   * Optional: the bytes [offset, offset + target.byteLength) into `target`, a
   * buffer the caller reuses (ShuffleReader's read buffers). Without it, the
   * caller reads with `read` and copies.
   */
  readInto?(offset: number, target: Uint8Array): Promise<void>;
  close(): Promise<void>;
}

/** Most bytes asked of one fs read: Node 20 aborts the process (an assertion, not an error) on a length of 2^31 or more. */
export const MAX_READ_BYTES = 2 ** 30;

/**
 * Opens a file for reading without blocking on it. A FIFO with no writer
 * blocks a plain open() in a libuv thread for good, and a process with such
 * a thread cannot even exit (Node waits for its thread pool: SIGTERM and a
 * second signal did nothing). O_NONBLOCK opens it at once; it changes nothing
 * for regular files, and callers refuse anything else once they stat it.
 */
export function openForReading(path: string): Promise<FileHandle> {
  return open(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
}

/** A ByteRangeSource over a local file. */
export class LocalFileSource implements ByteRangeSource {
  private constructor(readonly name: string, private readonly handle: FileHandle) {}

  static async open(path: string): Promise<LocalFileSource> {
    try {
      return new LocalFileSource(path, await openForReading(path));
    } catch (cause) {
      throw ioError('open', path, cause);
    }
  }

  async size(): Promise<number> {
    let stats;
    try {
      stats = await this.handle.stat();
    } catch (cause) {
      throw ioError('stat', this.name, cause);
    }
    // a directory opens, and its size (4096) was taken for the file's
    if (!stats.isFile()) throw new ShuffleError('CS_IO', `cannot read it: it is ${stats.isDirectory() ? 'a directory' : 'not a regular file'}`, { file: this.name });
    return stats.size;
  }

  async read(offset: number, length: number): Promise<Uint8Array> {
    // 8-byte aligned (a fresh ArrayBuffer), so arrow-js reads buffers without copying them
    const bytes = new Uint8Array(length);
    await this.readInto(offset, bytes);
    return bytes;
  }

  async readInto(offset: number, bytes: Uint8Array): Promise<void> {
    const length = bytes.byteLength;
    let done = 0;
    try {
      while (done < length) {
        const { bytesRead } = await this.handle.read(bytes, done, Math.min(length - done, MAX_READ_BYTES), offset + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
    } catch (cause) {
      throw ioError('read', this.name, cause);
    }
    if (done < length) {
      throw new ShuffleError('CS_CORRUPT_DATA', `file is truncated: wanted ${length} bytes, found ${done}`, {
        file: this.name,
        offset: offset + done,
      });
    }
  }

  async close(): Promise<void> {
    await this.handle.close().catch(() => undefined);
  }
}
