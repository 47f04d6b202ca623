import type { RecordBatch, Schema } from 'apache-arrow';
import { AutoShuffleWriter } from './auto-writer.js';
import { ShuffleError } from './errors.js';
import { SortShuffleWriter, type SortShuffleWriterOptions } from './sort-writer/sort-shuffle-writer.js';
import { ShuffleWriter } from './writer/shuffle-writer.js';
import type { ShuffleWriteResult } from './writer/writer-options.js';

/**
 * The two map-side writers: `hash`, the columnar writer (partitions are Arrow
 * IPC streams), and `sort`, the sort-based row writer (partitions are blocks
 * of compact rows). Both write the same files and ShuffleReader reads both;
 * Gluten picks sort from about 4000 partitions on (bench/RESULTS.md measures
 * where it pays off here).
 */
export type WriterKind = 'hash' | 'sort';
export const WRITER_KINDS: readonly WriterKind[] = ['hash', 'sort'];

/** What a caller may ask for: one of the writers, or `auto`, which picks one (auto-writer.ts). */
export type WriterChoice = WriterKind | 'auto';
export const WRITER_CHOICES: readonly WriterChoice[] = [...WRITER_KINDS, 'auto'];

/**
 * What both writers offer. Protocol: any number of `write` (one at a time),
 * then `finish` once, or `abort` at any point.
 */
export interface AnyShuffleWriter {
  readonly schema: Schema | null;
  write(batch: RecordBatch): Promise<void>;
  finish(): Promise<ShuffleWriteResult>;
  /**
   * Removes every file the writer made and releases its memory; once that is done, the promise resolves, also for a
   * second call while the first runs. Once finish() has begun to commit, it waits for the commit, which stands.
   */
  abort(): Promise<void>;
}

/** CS_INVALID_ARGUMENT unless `kind` names a writer or `auto` (it may come from a command line, JSON or another thread). */
export function assertWriterChoice(kind: unknown): asserts kind is WriterChoice {
  if (!WRITER_CHOICES.includes(kind as WriterChoice)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `unknown writer "${String(kind)}": expected one of ${WRITER_CHOICES.join(', ')}`);
  }
}

/**
 * Creates a writer of the given kind, or with `auto` the one that suits the
 * partition count and memory (AutoShuffleWriter); the options are
 * ShuffleWriter's (plus the sort writer's page and block sizes).
 */
export async function createShuffleWriter(kind: WriterChoice, options: SortShuffleWriterOptions): Promise<AnyShuffleWriter> {
  assertWriterChoice(kind);
  if (kind === 'auto') return AutoShuffleWriter.create(options);
  return kind === 'sort' ? SortShuffleWriter.create(options) : ShuffleWriter.create(options);
}
