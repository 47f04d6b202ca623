import { Type } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { DecodedDictionaries, assertHashableKey, hashKeyInto } from './key-hash.js';
import { pmod, SPARK_HASH_SEED } from './murmur3.js';
import { roundRobinStart } from './round-robin-start.js';
export function createPartitioner(partitioning, schema, numPartitions, mapId) {
    switch (partitioning.kind) {
        case 'hash':
            return new HashPartitioner(schema, partitioning.keys, numPartitions);
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
/** Index of a named column, or CS_UNKNOWN_COLUMN listing the columns there are. */
export function columnIndex(schema, name) {
    const index = schema.fields.findIndex((f) => f.name === name);
    if (index < 0) {
        const names = schema.fields.map((f) => f.name).join(', ');
        throw new ShuffleError('CS_UNKNOWN_COLUMN', `no column "${name}" in the input (columns: ${names})`, { column: name });
    }
    return index;
}
class HashPartitioner {
    keys;
    numPartitions;
    keyIndexes;
    hashes = new Int32Array(0);
    decoded = new DecodedDictionaries();
    constructor(schema, keys, numPartitions) {
        this.keys = keys;
        this.numPartitions = numPartitions;
        if (keys.length === 0)
            throw new ShuffleError('CS_INVALID_ARGUMENT', 'hash partitioning needs at least one key column');
        this.keyIndexes = keys.map((key) => columnIndex(schema, key));
        this.keyIndexes.forEach((index, k) => assertHashableKey(schema.fields[index].type, keys[k]));
    }
    computePartitionIds(batch, partitionIds) {
        const rows = batch.numRows;
        if (this.hashes.length < rows)
            this.hashes = new Int32Array(rows);
        const hashes = this.hashes.subarray(0, rows);
        hashes.fill(SPARK_HASH_SEED);
        this.keyIndexes.forEach((index, k) => {
            hashKeyInto(batch.data.children[index], hashes, this.keys[k], this.decoded);
        });
        const n = this.numPartitions;
        if ((n & (n - 1)) === 0) {
            const mask = n - 1; // pmod by a power of two is a mask, negative hashes included
            for (let i = 0; i < rows; i++)
                partitionIds[i] = hashes[i] & mask;
        }
        else {
            for (let i = 0; i < rows; i++)
                partitionIds[i] = pmod(hashes[i], n);
        }
    }
}
class RoundRobinPartitioner {
    numPartitions;
    position;
    constructor(numPartitions, mapId) {
        this.numPartitions = numPartitions;
        this.position = roundRobinStart(mapId, numPartitions);
    }
    computePartitionIds(batch, partitionIds) {
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
class PartitionIdColumnPartitioner {
    column;
    numPartitions;
    index;
    constructor(schema, column, numPartitions) {
        this.column = column;
        this.numPartitions = numPartitions;
        this.index = columnIndex(schema, column);
        const type = schema.fields[this.index].type;
        if (!INTEGER_PID_TYPES.has(type.typeId) || type.bitWidth === 64) {
            throw new ShuffleError('CS_UNSUPPORTED_KEY_TYPE', `a partition-id column must be an 8, 16 or 32-bit integer, not ${String(type)}`, { column });
        }
    }
    computePartitionIds(batch, partitionIds, firstRow) {
        const data = batch.data.children[this.index];
        const values = data.values;
        const n = this.numPartitions;
        const hasNulls = data.nullCount > 0;
        for (let i = 0, rows = batch.numRows; i < rows; i++) {
            const pid = values[i];
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
