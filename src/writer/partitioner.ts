import { Type, type Data, type RecordBatch, type Schema } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { columnIndex } from './column-index.js';
import { DecodedDictionaries, assertHashableKey, hashKeyInto } from './key-hash.js';
import { SPARK_HASH_SEED } from './murmur3.js';
import { RangePartitioner, type RangeBounds, type RangeKey } from './range-partitioner.js';
import { roundRobinStart } from './round-robin-start.js';

/**
 * How rows are assigned to partitions.
 * - `hash`: Spark's Murmur3Hash over the key columns (seed 42, chained), pid = pmod(hash, n).
 * - `round-robin`: consecutive rows to consecutive partitions, starting where Spark
 *   starts for this map task (so a retried task repeats the first attempt's placement).
 * - `range`: Spark's RangePartitioner with the given bounds: a row goes to the
 *   partition numbered by how many bounds sort before it, in the keys' order
 *   (range-partitioner.ts).
 * - `single`: everything to partition 0.
 * - `partition-id`: an upstream projection already computed the pid into an integer
 *   column (Gluten's way); that column is used and left out of the output.
 */
export type Partitioning =
  | { readonly kind: 'hash'; readonly keys: readonly string[] }
  | { readonly kind: 'range'; readonly keys: readonly (string | RangeKey)[]; readonly bounds: RangeBounds }
  | { readonly kind: 'round-robin' }
  | { readonly kind: 'single' }
  | { readonly kind: 'partition-id'; readonly column: string };

/**
 * Computes the partition id of every row of a batch. A partitioner is bound to
 * one input schema and is stateful across batches (round-robin position).
 */
export interface Partitioner {
  /** Fills partitionIds[0, batch.numRows) with values in [0, numPartitions). */
  computePartitionIds(batch: RecordBatch, partitionIds: Uint32Array, firstRow: number): void;
}

export function createPartitioner(partitioning: Partitioning, schema: Schema, numPartitions: number, mapId: number): Partitioner {
  switch (partitioning.kind) {
    case 'hash':
      return new HashPartitioner(schema, partitioning.keys, numPartitions);
    case 'range':
      return new RangePartitioner(schema, partitioning.keys, partitioning.bounds, numPartitions);
    case 'round-robin':
      return new RoundRobinPartitioner(numPartitions, mapId);
    case 'single':
      return { computePartitionIds: (batch, ids) => ids.fill(0, 0, batch.numRows) };
    case 'partition-id':
      return new PartitionIdColumnPartitioner(schema, partitioning.column, numPartitions);
    default:
      throw new ShuffleError('CS_INVALID_ARGUMENT', `unknown partitioning ${JSON.stringify(partitioning)}`);
  }
}

class HashPartitioner implements Partitioner {
  private readonly keyIndexes: number[];
  private hashes = new Int32Array(0);
  private readonly decoded = new DecodedDictionaries();

  constructor(schema: Schema, private readonly keys: readonly string[], private readonly numPartitions: number) {
    if (keys.length === 0) throw new ShuffleError('CS_INVALID_ARGUMENT', 'hash partitioning needs at least one key column');
    this.keyIndexes = keys.map((key) => columnIndex(schema, key));
    this.keyIndexes.forEach((index, k) => assertHashableKey(schema.fields[index]!.type, keys[k]!));
  }

  computePartitionIds(batch: RecordBatch, partitionIds: Uint32Array): void {
    const rows = batch.numRows;
    if (this.hashes.length < rows) this.hashes = new Int32Array(rows);
    const hashes = this.hashes.subarray(0, rows);
    hashes.fill(SPARK_HASH_SEED);
    this.keyIndexes.forEach((index, k) => {
      hashKeyInto(batch.data.children[index]!, hashes, this.keys[k]!, this.decoded);
    });
    const n = this.numPartitions;
    if ((n & (n - 1)) === 0) {
      const mask = n - 1; // pmod by a power of two is a mask, negative hashes included
      for (let i = 0; i < rows; i++) partitionIds[i] = hashes[i]! & mask;
    } else {
      pmodInto(hashes, rows, n, partitionIds);
    }
  }
}

/**
 * partitionIds[i] = pmod(hashes[i], n), with a multiplication by 1/n instead
 * of an integer division per row. For |h| < 2^31 the float quotient h * (1/n)
 * is within 2^-21 of h / n, so its floor is the floor quotient or one off;
 * the remainder h - q * n (exact in doubles) is then moved into [0, n).
 *
 * Worked example, n = 200: h = -201 gives q = floor(-1.005) = -2 and
 * r = -201 + 400 = 199, as pmod(-201, 200) = 199.
 */
export function pmodInto(hashes: Int32Array, rows: number, n: number, partitionIds: Uint32Array): void {
  const inverse = 1 / n;
  for (let i = 0; i < rows; i++) {
    const h = hashes[i]!;
    let r = h - Math.floor(h * inverse) * n;
    if (r < 0) r += n;
    else if (r >= n) r -= n;
    partitionIds[i] = r;
  }
}

class RoundRobinPartitioner implements Partitioner {
  private position: number;

  constructor(private readonly numPartitions: number, mapId: number) {
    this.position = roundRobinStart(mapId, numPartitions);
  }

  computePartitionIds(batch: RecordBatch, partitionIds: Uint32Array): void {
    const n = this.numPartitions;
    let position = this.position;
    for (let i = 0, rows = batch.numRows; i < rows; i++) {
      position = position + 1 === n ? 0 : position + 1; // Spark: position += 1, then mod n
      partitionIds[i] = position;
    }
    this.position = position;
  }
}

const INTEGER_PID_TYPES = new Set([Type.Int]);

class PartitionIdColumnPartitioner implements Partitioner {
  private readonly index: number;

  constructor(schema: Schema, private readonly column: string, private readonly numPartitions: number) {
    this.index = columnIndex(schema, column);
    const type = schema.fields[this.index]!.type;
    if (!INTEGER_PID_TYPES.has(type.typeId) || (type as { bitWidth?: number }).bitWidth === 64) {
      throw new ShuffleError('CS_UNSUPPORTED_KEY_TYPE', `a partition-id column must be an 8, 16 or 32-bit integer, not ${String(type)}`, { column });
    }
  }

  computePartitionIds(batch: RecordBatch, partitionIds: Uint32Array, firstRow: number): void {
    const data: Data = batch.data.children[this.index]!;
    const values = data.values as Int8Array | Int16Array | Int32Array | Uint8Array | Uint16Array | Uint32Array;
    const n = this.numPartitions;
    const hasNulls = data.nullCount > 0;
    for (let i = 0, rows = batch.numRows; i < rows; i++) {
      const pid = values[i]!;
      if (!(pid >= 0 && pid < n) || (hasNulls && !data.getValid(i))) {
        const shown = data.getValid(i) ? String(pid) : 'null';
        throw new ShuffleError('CS_PARTITION_ID_OUT_OF_RANGE', `partition id ${shown} is outside [0, ${n})`, {
          column: this.column,
          row: firstRow + i,
        });
      }
      partitionIds[i] = pid;
    }
  }
}
