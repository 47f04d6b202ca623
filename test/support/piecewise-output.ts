import { tableToIPC, type Table } from 'apache-arrow';
import type { ByteRangeSource } from '../../src/reader/byte-source.js';
import { crc32cOf } from '../../src/format/output-files.js';

/**
 * A data source whose bytes are `pieces` back to back, assembled per read: a
 * file of any length held as a few pieces (one piece may repeat). Records
 * every read and readInto call, offset and length.
 */
export class PiecewiseSource implements ByteRangeSource {
  readonly reads: [offset: number, length: number][] = [];
  readonly readsInto: [offset: number, length: number][] = [];
  private readonly starts: number[] = [];
  private readonly length: number;

  constructor(readonly name: string, private readonly pieces: readonly Uint8Array[], withReadInto = true) {
    let at = 0;
    for (const piece of pieces) {
      this.starts.push(at);
      at += piece.byteLength;
    }
    this.length = at;
    if (!withReadInto) this.readInto = undefined;
  }

  async size(): Promise<number> {
    return this.length;
  }

  async read(offset: number, length: number): Promise<Uint8Array> {
    this.reads.push([offset, length]);
    const bytes = new Uint8Array(length);
    this.copy(offset, bytes);
    return bytes;
  }

  readInto?: (offset: number, target: Uint8Array) => Promise<void> = async (offset, target) => {
    this.readsInto.push([offset, target.byteLength]);
    this.copy(offset, target);
  };

  async close(): Promise<void> {}

  /** every read, then every readInto */
  get all(): [offset: number, length: number][] {
    return [...this.reads, ...this.readsInto];
  }

  private copy(offset: number, target: Uint8Array): void {
    const end = offset + target.byteLength;
    this.pieces.forEach((piece, i) => {
      const start = this.starts[i]!;
      const from = Math.max(offset, start);
      const to = Math.min(end, start + piece.byteLength);
      if (from < to) target.set(piece.subarray(from - start, to - start), from - offset);
    });
  }
}

export function u64be(values: readonly number[]): Uint8Array {
  const bytes = new Uint8Array(values.length * 8);
  const view = new DataView(bytes.buffer);
  values.forEach((v, i) => view.setBigUint64(i * 8, BigInt(v), false));
  return bytes;
}

/**
 * An output's three sources (`<name>.data`, `.index`, `.checksum`) from its
 * partitions, each given as its pieces; the checksum file CRC32C's each, as
 * the writer does.
 */
export function outputOf(partitions: readonly (readonly Uint8Array[])[], withReadInto = true, name = 'mem') {
  const offsets = [0];
  for (const pieces of partitions) offsets.push(offsets[offsets.length - 1]! + pieces.reduce((sum, piece) => sum + piece.byteLength, 0));
  return {
    data: new PiecewiseSource(`${name}.data`, partitions.flat(), withReadInto),
    index: new PiecewiseSource(`${name}.index`, [u64be(offsets)]),
    checksum: new PiecewiseSource(`${name}.checksum`, [u64be(partitions.map((pieces) => crc32cOf(pieces)))]),
    offsets,
  };
}

/**
 * The stream arrow-js writes for `table`, cut into its schema message, its
 * batch messages and its end-of-stream marker:
 *
 * ```text
 * FF FF FF FF | int32 metadataLength | schema flatbuffer | batch messages | FF FF FF FF 00 00 00 00
 * ```
 */
export function streamPieces(table: Table): { schema: Uint8Array; batches: Uint8Array; end: Uint8Array; whole: Uint8Array } {
  const whole = tableToIPC(table, 'stream');
  const schemaLength = 8 + new DataView(whole.buffer, whole.byteOffset).getInt32(4, true);
  return { schema: whole.subarray(0, schemaLength), batches: whole.subarray(schemaLength, whole.byteLength - 8), end: whole.subarray(whole.byteLength - 8), whole };
}
