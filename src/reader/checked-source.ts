import { ShuffleError } from '../errors.js';
import type { ByteRangeSource } from './byte-source.js';

/**
 * A ByteRangeSource as the reader uses it, every answer checked: a source is
 * code of the embedder's (a remote map output, an object store), and what it
 * gets wrong must come out as a typed error naming it, not as a RangeError
 * deep in the reader or as rows read from the wrong bytes.
 *
 * - `size()` must be a byte count (a safe integer >= 0);
 * - `read` must return exactly the bytes asked for; bytes at an offset that is
 *   not a multiple of 8 are copied (arrow-js views 64-bit values in place);
 * - an error that is not a ShuffleError becomes `CS_IO` naming the source and
 *   the offset, with the error as its cause;
 * - `close()` closes the source once, however often it is called.
 */
export class CheckedSource implements ByteRangeSource {
  readonly name: string;
  readonly readInto?: (offset: number, target: Uint8Array) => Promise<void>;
  private closing: Promise<void> | null = null;

  private constructor(private readonly source: ByteRangeSource) {
    this.name = String(source.name);
    const readInto = source.readInto?.bind(source);
    if (readInto !== undefined) {
      this.readInto = async (offset, target) => {
        try {
          await readInto(offset, target);
        } catch (error) {
          throw this.failure(`read ${target.byteLength} bytes at ${offset}`, error, offset);
        }
      };
    }
  }

  /** The source, checked (a source already checked is returned as it is). */
  static of(source: ByteRangeSource): CheckedSource {
    return source instanceof CheckedSource ? source : new CheckedSource(source);
  }

  async size(): Promise<number> {
    let size: unknown;
    try {
      size = await this.source.size();
    } catch (error) {
      throw this.failure('get its size', error);
    }
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
      const shown = typeof size === 'string' ? JSON.stringify(size) : typeof size === 'bigint' ? `${size}n` : String(size);
      throw new ShuffleError('CS_IO', `the source reported a size of ${shown}, not a byte count`, { file: this.name });
    }
    return size;
  }

  async read(offset: number, length: number): Promise<Uint8Array> {
    let bytes: unknown;
    try {
      bytes = await this.source.read(offset, length);
    } catch (error) {
      throw this.failure(`read ${length} bytes at ${offset}`, error, offset);
    }
    if (!(bytes instanceof Uint8Array) || bytes.byteLength !== length) {
      const got = bytes instanceof Uint8Array ? `${bytes.byteLength} bytes` : typeof bytes;
      throw new ShuffleError('CS_IO', `the source returned ${got} for a read of ${length} bytes`, { file: this.name, offset });
    }
    return bytes.byteOffset % 8 === 0 ? bytes : bytes.slice();
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      try {
        await this.source.close();
      } catch (error) {
        throw this.failure('close it', error);
      }
    })();
    return this.closing;
  }

  private failure(action: string, error: unknown, offset?: number): ShuffleError {
    if (error instanceof ShuffleError) return error;
    const why = error instanceof Error ? error.message : String(error);
    return new ShuffleError('CS_IO', `cannot ${action}: ${why}`, offset === undefined ? { file: this.name } : { file: this.name, offset }, { cause: error });
  }
}
