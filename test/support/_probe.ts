import { Int32 } from 'apache-arrow';
import { ShuffleReader } from '../../src/reader/shuffle-reader.js';
import { batchOf, schemaOf, sequenceColumn } from './columns.js';
import { makeTempDir, removeDir, runShuffle, collect } from './shuffle-harness.js';
const dir = await makeTempDir();
const schema = schemaOf([{ name: 'id', type: new Int32(), nullable: false }]);
const b = batchOf(schema, [sequenceColumn(0, 10)], 10);
const out = await runShuffle(dir, { numPartitions: 1, partitioning: { kind: 'single' }, codec: 'none' }, [b, b]);
const r = await ShuffleReader.open(out.prefix);
for (const target of [2 ** 31 - 1, 2 ** 30]) {
  const t0 = performance.now();
  const m0 = process.memoryUsage().arrayBuffers;
  try {
    const got = await collect(r.readPartition(0, { coalesceRows: target }));
    console.log(target, got.sizes, (performance.now() - t0).toFixed(0), 'ms', ((process.memoryUsage().arrayBuffers - m0) / 1e6).toFixed(0), 'MB');
  } catch (e) { console.log(target, 'threw', (e as Error).message, (performance.now() - t0).toFixed(0), 'ms'); }
}
await r.close();
await removeDir(dir);
