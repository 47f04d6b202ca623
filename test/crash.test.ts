/**
 * Crash safety (issue 7): a writer in a child process is killed with SIGKILL
 * at seeded random points of split, spill, finish (flush), merge and commit. After
 * each kill: no file has a final name unless the commit got that far (and an
 * index file with its final name means a complete, readable output); every
 * leftover is recognisable by its name; removeLeftovers removes exactly the
 * leftovers; and a new attempt with the same prefix succeeds and reads back
 * every row.
 */
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { removeLeftovers } from '../src/cleanup.js';
import { runChild, phaseOf, type ChildInput, type ChildRun, type KillPlan, type Phase } from './support/crash-runner.js';
import { Rng } from './support/random.js';
import { fingerprintsDiffer, narrowFingerprints, type PartitionFingerprint } from './support/spill-harness.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const SEED = 0x5eed_0007;
const BATCHES = 30;
const ROWS = 8192;
/** small enough for a spill every few batches (about a dozen spills for the whole input) */
const POOL_BYTES = 2 * 1024 * 1024;
const FINAL_NAMES = ['out.data', 'out.checksum.CRC32C', 'out.index'] as const;
const KIND_OF_FINAL: Record<string, string> = { 'out.data': 'data', 'out.checksum.CRC32C': 'checksum.CRC32C', 'out.index': 'index' };
const OUTPUT_TEMP = /^out\.(?:data|index|checksum\.CRC32C)\.[0-9a-f]{12}\.tmp$/;
const SPILL_TEMP = /^columnar-shuffle-spill-[0-9a-f]{16}\.tmp$/;
/** files that look a little like leftovers but are not: they must survive every cleanup */
const DECOYS = ['notes.data', 'out.data.bak', 'out.data.0123456789AB.tmp', 'out.index.tmp', 'columnar-shuffle-spill-0123.tmp'];

let root: string;
let expected: PartitionFingerprint[];
let expectedRows: number;
let finishMs: number;
let mergeMs: number;
let spillsBeforeFinish: number;

function inputFor(dir: string, renamePauseMs = 0): ChildInput {
  return { prefix: join(dir, 'out'), spillDir: join(dir, 'spill'), batches: BATCHES, rows: ROWS, poolBytes: POOL_BYTES, renamePauseMs };
}

async function freshAttemptDir(name: string): Promise<string> {
  const dir = join(root, name);
  await mkdir(join(dir, 'spill'), { recursive: true });
  for (const decoy of DECOYS) await writeFile(join(dir, decoy), 'not a leftover');
  return dir;
}

function describeRun(run: ChildRun): string {
  return `exit ${run.code} signal ${run.signal}; last lines ${JSON.stringify(run.lines.slice(-4))}; stderr ${run.stderr.slice(0, 2000)}`;
}

function finished(run: ChildRun): { ms: number; rows: number; spills: number; mergeMs: number } {
  const line = run.lines.find((l) => l.startsWith('FINISHED '));
  if (line === undefined || run.code !== 0) throw new Error(`the child did not finish: ${describeRun(run)}`);
  const [, ms, rows, spills, mergeMs] = line.split(' ').map(Number);
  return { ms: ms!, rows: rows!, spills: spills!, mergeMs: mergeMs! };
}

beforeAll(async () => {
  root = await makeTempDir('cs-crash-');
  const dir = await freshAttemptDir('baseline');
  const run = await runChild(inputFor(dir));
  const done = finished(run);
  expect(done.spills, 'the input must make the writer spill').toBeGreaterThan(3);
  expected = await narrowFingerprints(join(dir, 'out'));
  expectedRows = expected.reduce((sum, p) => sum + p.rows, 0);
  expect(expectedRows).toBe(BATCHES * ROWS);
  finishMs = done.ms;
  mergeMs = done.mergeMs;
  spillsBeforeFinish = run.lines.slice(0, run.lines.indexOf('FINISHING')).filter((l) => l === 'SPILLING').length;
});

afterAll(async () => {
  if (root !== undefined) await removeDir(root);
});

interface Scenario {
  aim: string;
  plan: KillPlan;
  renamePauseMs: number;
}

function scenarios(rng: Rng): Scenario[] {
  const out: Scenario[] = [];
  for (let i = 0; i < 2; i++) {
    out.push({ aim: 'split', plan: { matches: (l) => l.startsWith('SPLIT '), count: rng.int(1, BATCHES), delayMs: rng.int(0, 3) }, renamePauseMs: 0 });
  }
  for (let i = 0; i < 2; i++) {
    out.push({ aim: 'spill', plan: { matches: (l) => l === 'SPILLING', count: rng.int(1, Math.max(1, spillsBeforeFinish)), delayMs: 0 }, renamePauseMs: 0 });
  }
  for (let i = 0; i < 2; i++) {
    out.push({ aim: 'merge', plan: { matches: (l) => l === 'MERGING', count: 1, delayMs: rng.int(0, Math.max(1, Math.floor(mergeMs * 0.5))) }, renamePauseMs: 0 });
  }
  for (let i = 0; i < 2; i++) {
    out.push({ aim: 'finish', plan: { matches: (l) => l === 'FINISHING', count: 1, delayMs: rng.int(0, Math.max(1, Math.floor((finishMs - mergeMs) * 0.8))) }, renamePauseMs: 0 });
  }
  for (const kind of ['data', 'checksum.CRC32C']) {
    out.push({ aim: 'commit', plan: { matches: (l) => l === `RENAMED ${kind}`, count: 1, delayMs: 0 }, renamePauseMs: 200 });
  }
  return out;
}

test('SIGKILL at random points never exposes a half-written output; removeLeftovers cleans up; a new attempt succeeds', { timeout: 120_000 }, async () => {
  const rng = new Rng(SEED);
  const phases = new Map<Phase, number>();
  const all = scenarios(rng);
  const log: string[] = new Array<string>(all.length).fill('');
  // two attempts at a time: each is a kill, the checks and a retry, in its own directory
  const runScenario = async (i: number, scenario: Scenario): Promise<void> => {
    const dir = await freshAttemptDir(`attempt-${i}`);
    const input = inputFor(dir, scenario.renamePauseMs);
    const run = await runChild(input, scenario.plan);
    const context = `kill ${i} (aimed at ${scenario.aim}, after "${run.killedAfter}" +${scenario.plan.delayMs} ms): ${describeRun(run)}`;
    expect(run.lines.some((l) => l.startsWith('ERROR')), context).toBe(false);
    const phase: Phase = run.signal === 'SIGKILL' ? phaseOf(run.lines) : 'committed';
    if (run.signal === 'SIGKILL') phases.set(phase, (phases.get(phase) ?? 0) + 1);
    else finished(run); // it completed before the kill landed

    // 1. final names: a file has its final name only if the child started renaming it;
    //    it has it for sure once the child said it renamed it; an index means complete and readable
    const files = (await readdir(dir)).filter((f) => f !== 'spill' && !DECOYS.includes(f));
    const finals = files.filter((f) => (FINAL_NAMES as readonly string[]).includes(f));
    for (const name of FINAL_NAMES) {
      const kind = KIND_OF_FINAL[name]!;
      if (finals.includes(name)) expect(run.lines, `${context}: ${name} exists`).toContain(`RENAMING ${kind}`);
      if (run.lines.includes(`RENAMED ${kind}`)) expect(finals, context).toContain(name);
    }
    if (finals.includes('out.index')) {
      expect(finals.sort(), context).toEqual([...FINAL_NAMES].sort());
      expect(fingerprintsDiffer(await narrowFingerprints(input.prefix), expected), context).toBeNull();
    }

    // 2. every leftover is recognisable by its name
    const temps = files.filter((f) => !finals.includes(f));
    for (const f of temps) expect(f, context).toMatch(OUTPUT_TEMP);
    const spills = await readdir(input.spillDir);
    for (const f of spills) expect(f, context).toMatch(SPILL_TEMP);

    // 3. removeLeftovers removes exactly the leftovers (and an uncommitted final-named data/checksum)
    const incomplete = finals.includes('out.index') ? [] : finals;
    const removed = await removeLeftovers({ outputPrefix: input.prefix, spillDir: input.spillDir });
    const leftovers = [...temps, ...incomplete].map((f) => join(dir, f)).concat(spills.map((f) => join(input.spillDir, f)));
    expect(removed.sort(), context).toEqual(leftovers.sort());
    const after = (await readdir(dir)).filter((f) => f !== 'spill').sort();
    expect(after, context).toEqual([...DECOYS, ...(finals.includes('out.index') ? FINAL_NAMES : [])].sort());
    expect(await readdir(input.spillDir), context).toEqual([]);

    // 4. a new attempt with the same prefix succeeds and reads back every row
    const retry = await runChild(inputFor(dir));
    expect(finished(retry).rows, context).toBe(expectedRows);
    expect((await readdir(dir)).filter((f) => f !== 'spill').sort(), context).toEqual([...DECOYS, ...FINAL_NAMES].sort());
    expect(await readdir(input.spillDir), context).toEqual([]);
    expect(fingerprintsDiffer(await narrowFingerprints(input.prefix), expected), context).toBeNull();

    log[i] =
      `  kill ${i}: aimed at ${scenario.aim}, sent after "${run.killedAfter}" +${scenario.plan.delayMs} ms -> ` +
        `${run.signal === 'SIGKILL' ? `died in ${phase} (last marker "${run.lines[run.lines.length - 1]}")` : 'finished before the kill'}; ` +
        `final names left: [${finals.join(', ')}]; removed ${removed.length} leftover(s); retry ok`;
  };
  const queue = [...all.entries()];
  await Promise.all(
    [0, 1].map(async () => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) await runScenario(...next);
    }),
  );
  const kills = [...phases.values()].reduce((a, b) => a + b, 0);
  console.log(
    `crash test (seed ${SEED.toString(16)}, ${BATCHES} x ${ROWS} rows, pool ${POOL_BYTES} B, baseline ${spillsBeforeFinish} spills before finish, finish ${finishMs} ms, merge ${mergeMs} ms): ` +
      `${kills} kills of ${all.length} attempts; by phase: ${[...phases].map(([p, n]) => `${p} ${n}`).join(', ')}\n${log.join('\n')}`,
  );
  expect(kills).toBeGreaterThanOrEqual(9);
  for (const phase of ['split', 'spill', 'commit'] as const) expect(phases.get(phase) ?? 0, `kills in phase ${phase}`).toBeGreaterThan(0);
  // finish() flushes (and may spill) and then merges; timing decides which of the two a kill hits
  expect((phases.get('finish') ?? 0) + (phases.get('merge') ?? 0), 'kills in finish() before the commit').toBeGreaterThan(0);
});

/**
 * Replacing an existing complete output: commit() removes the old index (the commit marker)
 * before it renames the new data file over the old one, so a kill between the renames leaves
 * an uncommitted output that removeLeftovers cleans, never an old index over new data.
 */
test('a kill while replacing an existing complete output leaves the old or the new output, readable', { timeout: 60_000 }, async () => {
  const dir = join(root, 'baseline'); // holds the complete output of BATCHES batches
  const newBatches = 10;
  const run = await runChild({ ...inputFor(dir, 300), batches: newBatches }, { matches: (l) => l === 'RENAMED data', count: 1, delayMs: 0 });
  expect(run.signal).toBe('SIGKILL');
  await removeLeftovers({ outputPrefix: join(dir, 'out'), spillDir: join(dir, 'spill') });
  const names = await readdir(dir);
  if (!names.includes('out.index')) return; // no committed output at all would be acceptable too
  const rows = (await narrowFingerprints(join(dir, 'out'))).reduce((sum, p) => sum + p.rows, 0);
  expect([BATCHES * ROWS, newBatches * ROWS]).toContain(rows);
});
