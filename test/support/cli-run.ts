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
