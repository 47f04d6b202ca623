/**
 * A deliberately simple reference partitioner, one row at a time:
 * - hash: seed 42, then for each key column `hashKeyInto` over a ONE-ROW SLICE of
 *   the column (so the writer's whole-column hashing is checked against per-row
 *   hashing of sliced data), pid = pmod(hash, n);
 * - round-robin: starts at roundRobinStart(mapId, n); the first row goes to (start + 1) % n,
 *   every following row (across batches) to the next partition;
 * - single: 0;
 * - partition-id: the value of the pid column;
 * - range: reference-range.ts (key tuples compared one value at a time).
 */
import type { RecordBatch, Schema } from 'apache-arrow';
import type { Partitioning } from '../../src/writer/partitioner.js';
import { DecodedDictionaries, hashKeyInto } from '../../src/writer/key-hash.js';
import { pmod, SPARK_HASH_SEED } from '../../src/writer/murmur3.js';
import { roundRobinStart } from '../../src/writer/round-robin-start.js';
import { ReferenceRange } from './reference-range.js';

export class ReferencePartitioner {
  private position: number;
  private readonly keyIndexes: number[];
  private readonly pidIndex: number;
  private readonly decoded = new DecodedDictionaries();
  private readonly range: ReferenceRange | null;

  constructor(
    private readonly partitioning: Partitioning,
    schema: Schema,
    private readonly numPartitions: number,
    mapId = 0,
  ) {
    this.position = partitioning.kind === 'round-robin' ? roundRobinStart(mapId, numPartitions) : 0;
    const indexOf = (name: string) => {
      const i = schema.fields.findIndex((f) => f.name === name);
      if (i < 0) throw new Error(`no column ${name}`);
      return i;
    };
    this.keyIndexes = partitioning.kind === 'hash' ? partitioning.keys.map(indexOf) : [];
    this.pidIndex = partitioning.kind === 'partition-id' ? indexOf(partitioning.column) : -1;
    this.range = partitioning.kind === 'range' ? new ReferenceRange(partitioning.keys, partitioning.bounds) : null;
  }

  /** The partition of every row of `batch`, in row order (advances the round-robin position). */
  partitionsOf(batch: RecordBatch): number[] {
    if (this.range !== null) return this.range.partitionsOf(batch);
    const n = this.numPartitions;
    const out: number[] = [];
    const columns = batch.data.children;
    for (let i = 0; i < batch.numRows; i++) {
      switch (this.partitioning.kind) {
        case 'hash': {
          const hash = new Int32Array([SPARK_HASH_SEED]);
          this.keyIndexes.forEach((c, k) => hashKeyInto(columns[c]!.slice(i, 1), hash, `key${k}`, this.decoded));
          out.push(pmod(hash[0]!, n));
          break;
        }
        case 'round-robin':
          this.position = (this.position + 1) % n;
          out.push(this.position);
          break;
        case 'single':
          out.push(0);
          break;
        case 'partition-id': {
          const data = columns[this.pidIndex]!;
          out.push(Number((data.values as Int32Array)[i]));
          break;
        }
      }
    }
    return out;
  }

  /** The columns that end up in the output: all but a partition-id column. */
  outputColumns(schema: Schema): number[] {
    return schema.fields.map((_, i) => i).filter((i) => i !== this.pidIndex);
  }
}
