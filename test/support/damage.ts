import type { Rng } from './random.js';

/**
 * `bytes` with one or two random changes (a bit flipped, a byte set, an aligned
 * int32 set to a small number, which lands on lengths, offsets and counts);
 * `what` says which, for a failure's message.
 */
export function damaged(bytes: Uint8Array, rng: Rng): { bytes: Uint8Array; what: string } {
  const out = bytes.slice();
  const what: string[] = [];
  for (let k = rng.int(1, 2); k > 0; k--) {
    const at = rng.int(0, out.length - 1);
    switch (rng.int(0, 2)) {
      case 0:
        out[at] = out[at]! ^ (1 << rng.int(0, 7));
        what.push(`bit flipped at ${at}`);
        break;
      case 1:
        out[at] = rng.int(0, 255);
        what.push(`byte set at ${at}`);
        break;
      default: {
        const aligned = at & ~3;
        if (aligned + 4 <= out.length) new DataView(out.buffer).setInt32(aligned, rng.int(-2, 300), true);
        what.push(`int32 set at ${aligned}`);
      }
    }
  }
  return { bytes: out, what: what.join(', ') };
}

/**
 * Runs `check` on `damages` damaged copies of each of `cases` partitions made by `partitionOf`
 * (from `rngOf(c)`, which also draws the damage), with `where` naming the partition's type, case,
 * damage and what changed. Any failure is thrown again under that name.
 */
export async function forEachDamagedPartition(
  cases: number,
  damages: number,
  rngOf: (c: number) => Rng,
  partitionOf: (rng: Rng, name: string) => Promise<{ type: unknown; bytes: Uint8Array }>,
  check: (changed: Uint8Array, where: string) => Promise<void>,
): Promise<void> {
  for (let c = 0; c < cases; c++) {
    const rng = rngOf(c);
    const { type, bytes } = await partitionOf(rng, `base-${c}`);
    for (let d = 0; d < damages; d++) {
      const { bytes: changed, what } = damaged(bytes, rng);
      const where = `${String(type)}, case ${c}, damage ${d} (${what})`;
      await check(changed, where).catch((error: unknown) => {
        throw new Error(`${where}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
      });
    }
  }
}
