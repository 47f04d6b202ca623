import { ShuffleError } from '../errors.js';
import { assertMapOutputId, idLocation } from './map-output-id.js';
/** CS_INVALID_ARGUMENT unless `status` has the shape of a MapStatus (it may come from another thread or from JSON). */
export function assertMapStatus(status) {
    if (typeof status !== 'object' || status === null)
        throw new ShuffleError('CS_INVALID_ARGUMENT', `a map status must be an object, got ${String(status)}`);
    assertMapOutputId(status.id);
    const where = idLocation(status.id);
    const bad = (what) => new ShuffleError('CS_INVALID_ARGUMENT', `invalid map status: ${what}`, where);
    if (typeof status.location?.prefix !== 'string' || status.location.prefix === '')
        throw bad('location.prefix must be a path');
    const n = status.numPartitions;
    if (!(Number.isSafeInteger(n) && n >= 1))
        throw bad(`numPartitions must be an integer >= 1, got ${String(n)}`);
    for (const key of ['partitionLengths', 'partitionRows']) {
        const values = status[key];
        if (!Array.isArray(values) || values.length !== n || !values.every((v) => Number.isSafeInteger(v) && v >= 0)) {
            throw bad(`${key} must hold ${n} whole numbers >= 0`);
        }
    }
}
/** Bytes and rows of partitions [start, end) of one map output. */
export function rangeTotals(status, start, end) {
    let bytes = 0;
    let rows = 0;
    for (let p = start; p < end; p++) {
        bytes += status.partitionLengths[p];
        rows += status.partitionRows[p];
    }
    return { bytes, rows };
}
