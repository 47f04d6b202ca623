import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { MapTaskPool } from '../../src/shuffle/map-task-pool.js';
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
