import { join } from 'node:path';
import { ShuffleError } from '../errors.js';
/**
 * `shuffle_<shuffle>_<map>_<attempt>`, the base name of a map output's files, as
 * Spark names them (its `<attempt>` slot is the reduce id `0`; ours is the attempt):
 *
 * ```text
 * shuffle_3_17_1.data               partitions back to back
 * shuffle_3_17_1.index              the commit marker: renamed into place last
 * shuffle_3_17_1.checksum.CRC32C
 * shuffle_3_17_1.spill/             the attempt's spill files while it runs
 * ```
 */
export function mapOutputName(id) {
    assertMapOutputId(id);
    return `shuffle_${id.shuffleId}_${id.mapId}_${id.attempt}`;
}
/** `<dir>/shuffle_<shuffle>_<map>_<attempt>`: the `outputPrefix` of the attempt's writer. */
export function mapOutputPrefix(dir, id) {
    return join(dir, mapOutputName(id));
}
/** The attempt's own spill directory under `spillRoot`, so that its spill files can be removed without touching another attempt's. */
export function mapOutputSpillDir(spillRoot, id) {
    return join(spillRoot, `${mapOutputName(id)}.spill`);
}
/** `shuffle_<s>_<m>_<a>` then the rest of a file name (`.data`, `.index.<hex>.tmp`, `.spill`, ...). */
const NAME = /^shuffle_(0|[1-9][0-9]*)_(0|[1-9][0-9]*)_(0|[1-9][0-9]*)(\..*)$/;
/** Splits a file name of a map output into its id and the rest (`.data`, `.spill`, ...); null when it is not one. */
export function parseMapOutputName(name) {
    const match = NAME.exec(name);
    if (match === null)
        return null;
    const [shuffleId, mapId, attempt] = [match[1], match[2], match[3]].map(Number);
    if (![shuffleId, mapId, attempt].every(Number.isSafeInteger))
        return null;
    return { id: { shuffleId, mapId, attempt }, suffix: match[4] };
}
/** CS_INVALID_ARGUMENT unless every part is a whole number >= 0. */
export function assertMapOutputId(id) {
    for (const key of ['shuffleId', 'mapId', 'attempt']) {
        const value = id?.[key];
        if (!(Number.isSafeInteger(value) && value >= 0)) {
            throw new ShuffleError('CS_INVALID_ARGUMENT', `a map output id needs ${key} as a whole number >= 0, got ${JSON.stringify(value)}`);
        }
    }
}
/** The id as an error location. */
export function idLocation(id) {
    return { shuffle: id.shuffleId, map: id.mapId, attempt: id.attempt };
}
