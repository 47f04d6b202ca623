/**
 * Where Spark's round-robin repartitioning starts for a map task:
 * `new XORShiftRandom(partitionId).nextInt(numPartitions)` (ShuffleExchangeExec),
 * reproduced bit for bit so that a retried task sends every row where the
 * first attempt did, and where Spark and Gluten would.
 * Runs once per writer, so BigInt arithmetic is fine here.
 */
export function roundRobinStart(mapId, numPartitions) {
    const random = XorShiftRandom.seededWith(BigInt(mapId));
    return random.nextInt(numPartitions);
}
const MASK64 = (1n << 64n) - 1n;
/** org.apache.spark.util.random.XORShiftRandom */
export class XorShiftRandom {
    seed;
    /** The generator over an internal 64-bit state (tests compare it with java.util.Random's algorithms). */
    constructor(state) {
        this.seed = BigInt.asUintN(64, state);
    }
    /** `new XORShiftRandom(init)`: the state is hashSeed(init). */
    static seededWith(init) {
        return new XorShiftRandom(hashSeed(init));
    }
    /** java.util.Random.next(bits), overridden by XORShiftRandom */
    next(bits) {
        let s = this.seed;
        s = (s ^ (s << 21n)) & MASK64;
        s ^= s >> 35n; // >>> on an unsigned 64-bit value
        s = (s ^ (s << 4n)) & MASK64;
        this.seed = s;
        return Number(BigInt.asIntN(32, s & ((1n << BigInt(bits)) - 1n)));
    }
    /** java.util.Random.nextInt(bound) */
    nextInt(bound) {
        let r = this.next(31);
        const m = bound - 1;
        if ((bound & m) === 0)
            return Number((BigInt(bound) * BigInt(r)) >> 31n);
        for (let u = r; u - (r = u % bound) + m > 0x7fffffff; u = this.next(31))
            ;
        return r;
    }
}
/** XORShiftRandom.hashSeed: scala MurmurHash3.bytesHash over the seed's 8 big-endian bytes, twice. */
function hashSeed(seed) {
    const bytes = new Uint8Array(8);
    new DataView(bytes.buffer).setBigInt64(0, BigInt.asIntN(64, seed), false);
    const low = scalaBytesHash(bytes, 0x3c074a61);
    const high = scalaBytesHash(bytes, low);
    return ((BigInt(high) << 32n) | (BigInt(low) & 0xffffffffn)) & MASK64;
}
/** scala.util.hashing.MurmurHash3.bytesHash (standard murmur3_x86_32 tail handling). */
export function scalaBytesHash(data, seed) {
    let h = seed | 0;
    let i = 0;
    for (; i + 4 <= data.length; i += 4) {
        const k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
        h = mix(h, k);
    }
    let k = 0;
    const rest = data.length - i;
    if (rest === 3)
        k ^= data[i + 2] << 16;
    if (rest >= 2)
        k ^= data[i + 1] << 8;
    if (rest >= 1) {
        k ^= data[i];
        h = mixLast(h, k);
    }
    return avalanche(h ^ data.length);
}
function mixLast(h, k) {
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    return h ^ k;
}
function mix(h, k) {
    h = mixLast(h, k);
    h = (h << 13) | (h >>> 19);
    return (Math.imul(h, 5) + 0xe6546b64) | 0;
}
function avalanche(h) {
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    return h | 0;
}
