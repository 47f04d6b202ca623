import { Table, vectorFromArray } from 'apache-arrow';
import { main, type MainOptions } from '../../src/cli/main.js';
import { textSink } from './text-sink.js';

/** What one in-process CLI run gave: its exit code and everything written to stdout and stderr. */
export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs main() in-process on `argv`, with streams and an AbortSignal of its own. */
export async function cli(argv: string[], options: Partial<MainOptions> = {}): Promise<Run> {
  const out = textSink();
  const err = textSink();
  const code = await main(argv, { stdout: out.stream, stderr: err.stream, signal: new AbortController().signal, ...options });
  return { code, stdout: out.text(), stderr: err.text() };
}

/** Ids [0, rows) as Int64, in batches of `perBatch` (each perBatch * 8 bytes of data): a CLI input whose rows are easy to check. */
export function ids(rows: number, perBatch = rows): Table {
  const batches = [];
  for (let start = 0; start < rows; start += perBatch) {
    const n = Math.min(perBatch, rows - start);
    batches.push(...new Table({ id: vectorFromArray(BigInt64Array.from({ length: n }, (_, i) => BigInt(start + i))) }).batches);
  }
  return new Table(batches);
}
