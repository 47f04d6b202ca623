/**
 * Reader fuzzing, long run: mutated shuffle outputs (bit flips, truncations,
 * splices, length-field and index rewrites of valid outputs of every flat
 * type, lz4 / zstd / none) must each be read as a ShuffleError or as exactly
 * the original rows (test/support/fuzz-reader.ts has the rules).
 *
 *   npm run fuzz                                 10 000 cases, a seed from the clock
 *   npm run fuzz -- --runs 100000 --seed 42
 *   npm run fuzz -- --seed 42 --case 1234        replay one case and print every read
 *
 * Case i of a run is drawn by fast-check from the seed mix(seed, i), so any
 * case can be replayed alone. The cases run in a child process that this
 * script supervises: a case that does not finish within the watchdog
 * (synchronous hang) or that kills the process (native crash, out of memory)
 * is recorded as a violation with its case number, and the run resumes with
 * a new child at the next case.
 *
 * Prints progress, the count of each outcome per mode (identical rows, typed
 * error by code, ...) and every distinct violation with a reproducing
 * command; exits 1 when there was any violation, 2 for a wrong command line.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import fc from 'fast-check';
import {
  buildBases,
  caseArb,
  describeViolation,
  outcomeKey,
  runCase,
  Tally,
  type BaseOutput,
  type FuzzCase,
} from '../test/support/fuzz-reader.js';

const HELP = `Usage: npm run fuzz -- [options]

Options:
  --runs N          cases to run (default: 10000)
  --seed N          the run's seed, a 32-bit integer (default: from the clock;
                    one past 2^31 - 1 runs as its negative 32-bit value)
  --case I          replay case I of the seed alone, printing every read
  --timeout MS      per-read timeout inside a case (default: 5000)
  --watchdog MS     a case taking longer is killed as a hang (default: 60000)
  --bases N         base outputs built from the seed (default: 36; a third of
                    them, bases 3-5, 12-14, 21-23, 30-32, by the sort writer)
  -h, --help        show this help
`;

interface Options {
  runs: number;
  seed: number;
  caseIndex: number | null;
  timeout: number;
  watchdog: number;
  bases: number;
  child: boolean;
  from: number;
}

function parse(argv: string[]): Options | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      runs: { type: 'string' },
      seed: { type: 'string' },
      case: { type: 'string' },
      timeout: { type: 'string' },
      watchdog: { type: 'string' },
      bases: { type: 'string' },
      child: { type: 'boolean' },
      from: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) return null;
  const int = (name: string, raw: string | undefined, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got ${raw}`);
    return n;
  };
  return {
    runs: int('runs', values.runs, 10_000, 1),
    seed: int('seed', values.seed, Date.now() & 0x7fffffff, -(2 ** 31)) | 0,
    caseIndex: values.case === undefined ? null : int('case', values.case, 0, 0),
    timeout: int('timeout', values.timeout, 5000, 1),
    watchdog: int('watchdog', values.watchdog, 60_000, 1),
    bases: int('bases', values.bases, 36, 1),
    child: values.child === true,
    from: int('from', values.from, 0, 0),
  };
}

/** The fast-check seed of case i (splitmix-style mixing of the run's seed and i). */
function caseSeed(seed: number, i: number): number {
  let z = (seed ^ Math.imul(i + 1, 0x9e3779b9)) >>> 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
  return (z ^ (z >>> 16)) | 0;
}

function caseOf(seed: number, i: number, baseCount: number): FuzzCase {
  return fc.sample(caseArb(baseCount), { seed: caseSeed(seed, i), numRuns: 1 })[0]!;
}

function replayCommand(seed: number, i: number): string {
  // `--seed=N`: a seed past 2^31 - 1 runs as its negative 32-bit value, which parseArgs takes for an option after `--seed N`
  return `npm run fuzz -- --seed=${seed} --case ${i}`;
}

// ---------------------------------------------------------------------------------------------
// the child: runs cases [from, runs) and reports each as a JSON line on stdout

type ChildMessage =
  | { t: 'ready'; bases: string[] }
  | { t: 'start'; i: number }
  | { t: 'done'; i: number; ms: number; keys: Record<string, number>; violations: ViolationRecord[] };

interface ViolationRecord {
  i: number;
  base: string;
  mutations: string[];
  detail: string;
  /** a short signature to group equal violations */
  signature: string;
}

function send(message: ChildMessage): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

async function withDir<T>(work: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'cs-fuzz-'));
  try {
    return await work(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function runChild(o: Options): Promise<void> {
  await withDir(async (dir) => {
    const bases = await buildBases(dir, o.seed, o.bases);
    send({ t: 'ready', bases: bases.map((b) => b.label) });
    for (let i = o.from; i < o.runs; i++) {
      send({ t: 'start', i });
      const c = caseOf(o.seed, i, bases.length);
      const base = bases[c.base]!;
      const started = performance.now();
      const result = await runCase(dir, base, c.mutations, o.timeout);
      const keys: Record<string, number> = {};
      for (const r of result.reports) keys[outcomeKey(r)] = (keys[outcomeKey(r)] ?? 0) + 1;
      const violations = result.violations.map((v) => ({
        i,
        base: base.label,
        mutations: result.applied,
        detail: describeViolation(v),
        signature: signatureOf(describeViolation(v)),
      }));
      send({ t: 'done', i, ms: performance.now() - started, keys, violations });
    }
  });
}

/** The violation's first line without numbers, plus the first stack frame outside node_modules' callers. */
function signatureOf(detail: string): string {
  const lines = detail.split('\n');
  const head = (lines[0] ?? '').replace(/\d+/g, 'N');
  const frame = lines.find((l) => l.trim().startsWith('at '))?.trim().replace(/:\d+:\d+\)?$/, '') ?? '';
  return `${head} ${frame}`;
}

// ---------------------------------------------------------------------------------------------
// replaying one case

async function replay(o: Options, i: number): Promise<number> {
  return withDir(async (dir) => {
    const bases: BaseOutput[] = await buildBases(dir, o.seed, o.bases);
    const c = caseOf(o.seed, i, bases.length);
    const base = bases[c.base]!;
    console.log(`seed ${o.seed}, case ${i}: ${JSON.stringify(c)}\n${base.label}`);
    const result = await runCase(dir, base, c.mutations, o.timeout);
    console.log(`mutations: ${result.applied.join('; ')}`);
    for (const r of result.reports) {
      const o2 = r.outcome;
      const extra = o2.kind === 'shuffle-error' ? `: ${o2.message}` : o2.kind === 'differs' || o2.kind === 'invalid-batch' ? `: ${o2.detail}` : '';
      console.log(`  [${r.mode}] ${r.what}: ${o2.kind === 'shuffle-error' ? o2.code : o2.kind}${extra}`);
    }
    for (const v of result.violations) console.log(`VIOLATION ${describeViolation(v)}`);
    return result.violations.length > 0 ? 1 : 0;
  });
}

// ---------------------------------------------------------------------------------------------
// the parent: supervises children, tallies, reports

async function supervise(o: Options): Promise<number> {
  const script = fileURLToPath(import.meta.url);
  const tally = new Tally();
  const violations: ViolationRecord[] = [];
  let done = 0;
  let caseMs = 0;
  let slowest = { i: -1, ms: 0 };
  const started = Date.now();
  let lastProgress = started;
  let next = 0;
  console.log(`fuzz: seed ${o.seed}, ${o.runs} cases, per-read timeout ${o.timeout} ms, watchdog ${o.watchdog} ms`);

  while (next < o.runs) {
    const from = next;
    const exit = await new Promise<{ lastStarted: number | null; reason: string | null }>((resolve) => {
      const child = spawn(
        process.execPath,
        [...process.execArgv, script, '--child', `--seed=${o.seed}`, '--runs', String(o.runs), '--from', String(from), '--timeout', String(o.timeout), '--bases', String(o.bases)],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let current: number | null = null;
      let watchdog: NodeJS.Timeout | undefined;
      let killedForHang = false;
      const arm = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => {
          killedForHang = true;
          child.kill('SIGKILL');
        }, o.watchdog);
      };
      arm(); // also covers building the bases
      const lines = createInterface({ input: child.stdout });
      lines.on('line', (line) => {
        let m: ChildMessage;
        try {
          m = JSON.parse(line) as ChildMessage;
        } catch {
          process.stdout.write(`${line}\n`); // stray output of the code under test
          return;
        }
        if (m.t === 'ready') {
          if (from === 0) console.log(`bases:\n${m.bases.map((b) => `  ${b}`).join('\n')}`);
        } else if (m.t === 'start') {
          current = m.i;
          arm();
        } else {
          current = null;
          next = m.i + 1;
          done++;
          caseMs += m.ms;
          if (m.ms > slowest.ms) slowest = { i: m.i, ms: m.ms };
          tally.merge(Object.entries(m.keys));
          for (const v of m.violations) {
            violations.push(v);
            if (violations.filter((w) => w.signature === v.signature).length === 1) {
              console.log(`\nVIOLATION in case ${v.i} (${replayCommand(o.seed, v.i)})\n${v.base}\nmutations: ${v.mutations.join('; ')}\n${v.detail}\n`);
            }
          }
          const now = Date.now();
          if (now - lastProgress >= 10_000) {
            lastProgress = now;
            console.log(`  ${done}/${o.runs} cases, ${((now - started) / 1000).toFixed(0)} s, ${(caseMs / done).toFixed(1)} ms/case, ${violations.length} violations`);
          }
        }
      });
      child.on('exit', (code, signal) => {
        clearTimeout(watchdog);
        lines.close();
        if (code === 0 && current === null) resolve({ lastStarted: null, reason: null });
        else resolve({ lastStarted: current, reason: killedForHang ? `no answer within the ${o.watchdog} ms watchdog (killed)` : `the process died (exit code ${code}, signal ${signal})` });
      });
    });
    if (exit.reason !== null) {
      const i = exit.lastStarted ?? next;
      const v: ViolationRecord = { i, base: '(see the replay)', mutations: [], detail: exit.reason, signature: exit.reason.replace(/\d+/g, 'N') };
      violations.push(v);
      console.log(`\nVIOLATION in case ${i} (${replayCommand(o.seed, i)}): ${exit.reason}\n`);
      tally.add(exit.reason.startsWith('no answer') ? 'case hang' : 'case crash');
      next = i + 1;
      if (exit.lastStarted === null) break; // died outside a case (building the bases): do not loop
    }
  }

  const seconds = (Date.now() - started) / 1000;
  console.log(`\nfuzz: seed ${o.seed}: ${done} cases in ${seconds.toFixed(1)} s, ${(caseMs / Math.max(done, 1)).toFixed(2)} ms per case (slowest: case ${slowest.i}, ${slowest.ms.toFixed(0)} ms)`);
  console.log(`outcomes (one per open, schema() call and partition read):\n${tally.format()}`);
  if (violations.length === 0) {
    console.log('no violations');
    return 0;
  }
  const groups = new Map<string, ViolationRecord[]>();
  for (const v of violations) groups.set(v.signature, [...(groups.get(v.signature) ?? []), v]);
  console.log(`\n${violations.length} violations in ${new Set(violations.map((v) => v.i)).size} cases, ${groups.size} distinct:`);
  for (const [signature, list] of groups) {
    console.log(`  ${list.length} x ${signature}\n      first: ${replayCommand(o.seed, list[0]!.i)}`);
  }
  return 1;
}

async function main(): Promise<number> {
  let o: Options | null;
  try {
    o = parse(process.argv.slice(2));
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (o === null) {
    console.log(HELP);
    return 0;
  }
  if (o.child) {
    await runChild(o);
    return 0;
  }
  if (o.caseIndex !== null) return replay(o, o.caseIndex);
  return supervise(o);
}

process.exitCode = await main();
