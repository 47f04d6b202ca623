import type { RecordBatch, Schema } from 'apache-arrow';
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

/**
 * What both writers offer. Protocol: any number of `write` (one at a time),
 * then `finish` once, or `abort` at any point.
 */
export interface AnyShuffleWriter {
  readonly schema: Schema | null;
  write(batch: RecordBatch): Promise<void>;
  finish(): Promise<ShuffleWriteResult>;
  abort(): Promise<void>;
}

/** CS_INVALID_ARGUMENT unless `kind` names a writer (it may come from a command line, JSON or another thread). */
export function assertWriterKind(kind: unknown): asserts kind is WriterKind {
  if (!WRITER_KINDS.includes(kind as WriterKind)) {
    throw new ShuffleError('CS_INVALID_ARGUMENT', `unknown writer "${String(kind)}": expected one of ${WRITER_KINDS.join(', ')}`);
  }
}

/** Creates a writer of the given kind; the options are ShuffleWriter's (plus the sort writer's page and block sizes). */
export async function createShuffleWriter(kind: WriterKind, options: SortShuffleWriterOptions): Promise<AnyShuffleWriter> {
  assertWriterKind(kind);
  return kind === 'sort' ? SortShuffleWriter.create(options) : ShuffleWriter.create(options);
}
