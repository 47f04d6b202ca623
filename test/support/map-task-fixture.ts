import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { NARROW_SCHEMA } from '../../src/cli/demo-data.js';
import { MapTaskPool, type MapTaskSpec } from '../../src/shuffle/map-task-pool.js';
import type { MapStatus } from '../../src/shuffle/map-status.js';
import { ReduceReader } from '../../src/shuffle/reduce-reader.js';
import { rowsOf } from './rows.js';
import { makeTempDir, removeDir } from './temp-dir.js';

/** What a test of map tasks runs with: the file's pool, and a directory of its own. */
export interface MapTaskFixture {
  pool: MapTaskPool;
  dir: string;
}

/**
 * Registers the hooks of a test file of map tasks: one MapTaskPool for the
 * whole file (a worker thread takes seconds to start from the sources, so its
 * tests share the threads) and a new temporary directory for each test,
 * removed after it. `use` is handed both before each test:
 *
 *   let dir: string;
 *   let pool: MapTaskPool;
 *   useMapTaskFixture({ threads: 2, dirPrefix: 'cs-job-' }, (fixture) => ({ dir, pool } = fixture));
 */
export function useMapTaskFixture(options: { threads: number; dirPrefix: string }, use: (fixture: MapTaskFixture) => void): void {
  let pool: MapTaskPool | undefined;
  let dir: string | undefined;
  beforeAll(() => {
    pool = new MapTaskPool({ threads: options.threads });
  });
  afterAll(async () => {
    await pool?.close();
  });
  beforeEach(async () => {
    dir = await makeTempDir(options.dirPrefix);
    use({ pool: pool!, dir });
  });
  afterEach(async () => {
    if (dir !== undefined) await removeDir(dir);
  });
}

/** Map task `mapId` (attempt 0) writing the demo's narrow rows, hashed by `key`, into `partitions` partitions in `dir`. */
export function narrowTaskSpec(dir: string, mapId: number, partitions: number, extra: Partial<MapTaskSpec> = {}): MapTaskSpec {
  return { dir, id: { shuffleId: 0, mapId, attempt: 0 }, numPartitions: partitions, partitioning: { kind: 'hash', keys: ['key'] }, outputSchema: NARROW_SCHEMA, ...extra };
}

/** Every row of the map outputs `statuses` name, over partitions [0, partitions), as sorted canonical strings. */
export async function readBackRows(statuses: MapStatus[], partitions: number): Promise<string[]> {
  const rows: string[] = [];
  for await (const batch of new ReduceReader({ maps: statuses, partitions: { start: 0, end: partitions } })) rows.push(...rowsOf(batch));
  return rows.sort();
}
