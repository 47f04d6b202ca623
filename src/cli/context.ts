import type { Writable } from 'node:stream';
import type { Schema } from 'apache-arrow';
import { describeType } from '../writer/same-schema.js';

/** Where a command writes; tests inject their own streams. */
export interface CliIO {
  stdout: Writable;
  stderr: Writable;
}

export interface CliContext extends CliIO {
  /** Aborted on SIGINT / SIGTERM / SIGHUP: long loops check it between batches, writers are aborted at once (abortOnSignal). */
  signal: AbortSignal;
  /** The memory `write`'s default limit is half of (default: the machine's or container's, systemMemory()). */
  systemMemory?: number;
  /**
   * Files a command is writing under a temporary name (`read -o`'s): a
   * second signal exits the process at once, without the command's own
   * cleanup, and removes these first. (`write`'s temporary and spill files
   * have names `clean` knows.)
   */
  temporaryFiles: Set<string>;
}

/** Exit codes: 0 success, 1 the operation failed, 2 bad command line, 130 interrupted. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
export const EXIT_INTERRUPTED = 130;

/** Thrown between batches after SIGINT / SIGTERM, so that `finally` blocks clean up. */
export class Interrupted extends Error {
  override name = 'Interrupted';
}

export function throwIfInterrupted(signal: AbortSignal): void {
  if (signal.aborted) throw new Interrupted('interrupted');
}

/**
 * Runs `body`, which drives `writer`, and aborts the writer the moment
 * `signal` fires, also in the middle of finish() (checked between batches
 * only, a signal during the merge was ignored, and a second one then exited
 * with the temporary files left). A failure after the signal is Interrupted.
 */
export async function abortOnSignal<T>(writer: { abort(): Promise<void> }, signal: AbortSignal, body: () => Promise<T>): Promise<T> {
  const onAbort = () => void writer.abort().catch(() => undefined);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await body();
  } catch (error) {
    await writer.abort();
    throwIfInterrupted(signal);
    throw error;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

export function isTTY(stream: Writable): boolean {
  return (stream as Writable & { isTTY?: boolean }).isTTY === true;
}

export function writeLine(stream: Writable, line = ''): void {
  stream.write(`${line}\n`);
}

export function writeJson(stream: Writable, value: unknown): void {
  stream.write(`${JSON.stringify(value)}\n`);
}

/** 1234567 -> "1,234,567" */
export function count(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** (1, 'batch', 'batches') -> "1 batch" */
export function plural(n: number, one: string, many: string): string {
  return `${count(n)} ${n === 1 ? one : many}`;
}

/** 1536 -> "1.50 KiB" */
export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

export function seconds(ms: number): string {
  return ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/** rows per second, "-" when the time is too short to say */
export function rate(rows: number, ms: number): string {
  return ms > 0 ? `${count((rows * 1000) / ms)} rows/s` : '-';
}

/** Milliseconds rounded to 0.1 for JSON output. */
export function roundMs(ms: number): number {
  return Math.round(ms * 10) / 10;
}

/** "key: Int64 not null, label: Utf8" */
export function describeSchema(schema: Schema): string {
  return schema.fields.map((f) => `${f.name}: ${describeType(f.type)}${f.nullable ? '' : ' not null'}`).join(', ');
}
