import type { RecordBatch, Schema } from 'apache-arrow';
import { atMapOutput, ShuffleError } from '../errors.js';
import { BatchCoalescer } from '../reader/batch-coalescer.js';
import { closeSources, ShuffleReader, type OpenOptions, type ShuffleOutputSources } from '../reader/shuffle-reader.js';
import { sameSchema, schemaDifference } from '../writer/same-schema.js';
import { idLocation, type MapOutputId } from './map-output-id.js';
import { MAX_MAPS, type MapOutputLocator } from './map-output-tracker.js';
import { assertMapStatus, rangeTotals, type MapStatus } from './map-status.js';

/** Map outputs read at once by default (Spark's reducer fetches several blocks in flight). */
export const DEFAULT_REDUCE_CONCURRENCY = 4;
/** How long a reader waits for map outputs that are not committed yet, by default. */
export const DEFAULT_MAP_OUTPUT_WAIT_MS = 120_000;

export interface ReduceReaderOptions {
  /**
   * The map outputs to read: the statuses of every map task of the shuffle (one
   * attempt each: the one the runner chose), or a locator that hands them over
   * as they commit (MapOutputTracker.locator), for a reducer that starts before
   * every map task has finished.
   */
  maps: readonly MapStatus[] | MapOutputLocator;
  /** Partition p, or the partitions [start, end). */
  partitions: number | { start: number; end: number };
  /** Map outputs open and read at once (default 4). */
  concurrency?: number;
  /** Merge small batches, across map outputs, into batches of about this many rows (default: as stored). */
  coalesceRows?: number;
  /** With a locator: fail with CS_MAP_OUTPUT_TIMEOUT if some map output is still not committed this long after reading began (default 120 s; at most 2^31 - 1, or Infinity: no timeout). */
  waitTimeoutMs?: number;
  /**
   * Aborting it stops the reader at once with CS_ABORTED, releasing everything:
   * every open output is closed, also one with a read on its way (a source read
   * that never ends cannot hold the abort back; a source's `close()` is its cancel).
   */
  signal?: AbortSignal;
  /** Opens a map output's files; default: its local files (`<prefix>.data`, `.index`, `.checksum.CRC32C`). */
  openOutput?: (status: MapStatus) => Promise<ShuffleOutputSources>;
  /** Passed to each ShuffleReader (e.g. maxBufferBytes). */
  readerOptions?: OpenOptions;
}

export interface ReduceReadMetrics {
  /** Map outputs opened and read to the end of the range. */
  outputsRead: number;
  /** Map outputs whose range held no bytes: not opened. */
  outputsSkipped: number;
  /** The attempts read, in the order they were opened. */
  attemptsRead: MapOutputId[];
  /** Bytes of the range in the outputs read (compressed, as stored). */
  bytesRead: number;
  /** Batches and rows yielded (after coalescing). */
  batches: number;
  rows: number;
  /** The most map outputs that were open at once. */
  maxOpen: number;
  /** Time spent with nothing to read, waiting for map outputs to commit. */
  waitMs: number;
}

type Step =
  | { kind: 'batch'; source: Source; batch: RecordBatch }
  | { kind: 'end'; source: Source }
  | { kind: 'error'; source: Source; error: unknown };

interface Source {
  status: MapStatus;
  reader: ShuffleReader | null;
  batches: AsyncGenerator<RecordBatch> | null;
  rows: number;
  /** the read in flight, one batch ahead of the consumer and never more; settles once its step is posted */
  pending: Promise<void>;
}

/** The longest delay setTimeout keeps (a longer one fires after 1 ms, with a warning). */
const MAX_TIMER_MS = 0x7fffffff;

/**
 * Reads partition p (or a range of partitions) across all the map outputs of a
 * shuffle as one stream of RecordBatches (Sail's merged stream): several map
 * outputs are read at once, each one batch ahead, and batches are yielded as
 * they become ready, so outputs interleave, but the batches of one map output
 * keep their order. Every output is read through ShuffleReader (checksums,
 * bounds) and checked against its status: its index must give the partition
 * lengths the status gives, and the range must hold the rows the status counts.
 *
 * Only committed outputs are read: the ones the statuses name (a status exists
 * only once its output is committed), never another attempt's files.
 *
 * Protocol: `new ReduceReader(options)`, then iterate (`for await`). Stopping
 * early (`break`, `return()`, a thrown error, or `signal`) closes every open
 * file, drops the waits for map outputs and clears the timeout: nothing is
 * left behind. `return()` lets a read already on its way finish before its
 * output closes; an aborted `signal` closes the outputs at once (a source's
 * `close()` is its cancel), leaving such a read to end unread. Single use.
 */
export class ReduceReader implements AsyncIterableIterator<RecordBatch> {
  readonly metrics: ReduceReadMetrics = {
    outputsRead: 0,
    outputsSkipped: 0,
    attemptsRead: [],
    bytesRead: 0,
    batches: 0,
    rows: 0,
    maxOpen: 0,
    waitMs: 0,
  };
  private readonly start: number;
  private readonly end: number;
  private readonly concurrency: number;
  private readonly generator: AsyncGenerator<RecordBatch>;
  /** set by return(): the reading loop ends at its next turn */
  private closeRequested = false;
  /** wakes the reading loop where it waits (for a map output, a read): set once it runs */
  private interrupt: () => void = () => undefined;

  constructor(private readonly options: ReduceReaderOptions) {
    if (typeof options !== 'object' || options === null) throw new ShuffleError('CS_INVALID_ARGUMENT', 'ReduceReader takes an options object { maps, partitions, ... }');
    const { maps } = options;
    if (!Array.isArray(maps) && !(typeof maps === 'object' && maps !== null && typeof (maps as MapOutputLocator).numMaps === 'number')) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `maps must be an array of map statuses or a tracker's locator, got ${maps === null ? 'null' : typeof maps}`);
    }
    if (!Array.isArray(maps)) {
      // NaN or -1 read nothing, 2.5 read three maps, Infinity waited until a Set overflowed
      const { numMaps } = maps as MapOutputLocator;
      if (!(Number.isInteger(numMaps) && numMaps >= 0 && numMaps <= MAX_MAPS)) {
        throw new ShuffleError('CS_INVALID_ARGUMENT', `the locator's numMaps must be an integer in [0, ${MAX_MAPS}], got ${String(numMaps)}`);
      }
    }
    const range = typeof options.partitions === 'number' ? { start: options.partitions, end: options.partitions + 1 } : options.partitions;
    if (!(Number.isInteger(range?.start) && Number.isInteger(range?.end) && range.start >= 0 && range.start < range.end)) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `partitions must be a partition number or a non-empty range {start, end}, got ${JSON.stringify(options.partitions)}`);
    }
    this.start = range.start;
    this.end = range.end;
    this.concurrency = options.concurrency ?? DEFAULT_REDUCE_CONCURRENCY;
    positiveInteger('concurrency', this.concurrency);
    if (options.coalesceRows !== undefined) positiveInteger('coalesceRows', options.coalesceRows);
    // a timer of more than 2^31 - 1 ms fires at once in Node: such a wait is Infinity (no timeout) or refused
    const wait = options.waitTimeoutMs;
    if (wait !== undefined && !(wait === Infinity || (typeof wait === 'number' && wait >= 0 && wait <= MAX_TIMER_MS))) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `waitTimeoutMs must be a number in [0, ${MAX_TIMER_MS}] or Infinity (wait as long as it takes), got ${String(wait)}`);
    }
    if (Array.isArray(options.maps)) this.checkStatuses(options.maps as readonly MapStatus[]);
    this.generator = this.run();
  }

  next(): Promise<IteratorResult<RecordBatch>> {
    return this.generator.next();
  }

  /**
   * Stops reading and releases every open file and wait, also while a next()
   * waits for a map output (that next() then ends the iteration: it held
   * return() back until the output came or the wait timed out).
   */
  return(): Promise<IteratorResult<RecordBatch>> {
    this.closeRequested = true;
    this.interrupt();
    return this.generator.return(undefined);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private async *run(): AsyncGenerator<RecordBatch> {
    const stop = new AbortController();
    const open = new Set<Source>();
    const ready: MapStatus[] = [];
    const unknown = new Set<number>();
    // Every source's reads land in `steps`; statuses, failures, the timeout and abort only
    // poke. The loop waits on one fresh promise at a time (no Promise.race over a promise
    // that outlives many batches, which would pile up handlers on it).
    const steps: Step[] = [];
    let notify = deferred();
    const poke = () => notify.resolve();
    const post = (step: Step) => {
      steps.push(step);
      poke();
    };
    let failure: unknown = null;
    let timer: NodeJS.Timeout | undefined;
    let coalescer: BatchCoalescer | null = null;
    let schema: Schema | null = null;
    const onOuterAbort = () => {
      stop.abort();
      poke();
    };
    this.options.signal?.addEventListener('abort', onOuterAbort, { once: true });
    this.interrupt = () => {
      stop.abort();
      poke();
    };

    try {
      if (this.options.signal?.aborted) stop.abort();
      if (Array.isArray(this.options.maps)) ready.push(...(this.options.maps as readonly MapStatus[]));
      else this.waitForOutputs(this.options.maps as MapOutputLocator, stop.signal, ready, unknown, poke, (e) => (failure ??= e));
      const timeoutMs = this.options.waitTimeoutMs ?? DEFAULT_MAP_OUTPUT_WAIT_MS;
      if (unknown.size > 0 && timeoutMs !== Infinity) {
        const locator = this.options.maps as MapOutputLocator;
        timer = setTimeout(() => {
          if (unknown.size === 0) return;
          const missing = [...unknown].sort((a, b) => a - b);
          failure ??= new ShuffleError(
            'CS_MAP_OUTPUT_TIMEOUT',
            `${missing.length} of ${locator.numMaps} map outputs were not committed within ${timeoutMs} ms (maps ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', ...' : ''})`,
            { shuffle: locator.shuffleId, map: missing[0] },
          );
          poke();
        }, timeoutMs);
      }

      for (;;) {
        if (this.closeRequested) return;
        if (stop.signal.aborted) throw new ShuffleError('CS_ABORTED', 'the reduce reader was aborted');
        if (failure !== null) throw failure;
        while (open.size < this.concurrency && ready.length > 0) {
          const status = ready.shift()!;
          if (rangeTotals(status, this.start, this.end).bytes === 0) {
            this.metrics.outputsSkipped++;
            continue;
          }
          open.add(this.openSource(status, post));
          this.metrics.maxOpen = Math.max(this.metrics.maxOpen, open.size);
        }
        if (unknown.size === 0) clearTimeout(timer);
        if (open.size === 0 && ready.length === 0 && unknown.size === 0) break;

        const step = steps.shift();
        if (step === undefined) {
          const waitStarted = open.size === 0 ? performance.now() : -1;
          notify = deferred();
          await notify.promise;
          if (waitStarted >= 0) this.metrics.waitMs += performance.now() - waitStarted;
          continue;
        }
        const { source } = step;
        // an output's own errors name its file; the map output they come from too
        if (step.kind === 'error') throw step.error instanceof ShuffleError ? atMapOutput(step.error, { shuffle: source.status.id.shuffleId, map: source.status.id.mapId, attempt: source.status.id.attempt }) : step.error;
        if (step.kind === 'end') {
          open.delete(source);
          await closeSource(source);
          this.metrics.outputsRead++;
          continue;
        }
        const batch = step.batch;
        source.rows += batch.numRows;
        source.pending = this.nextStep(source).then(post);
        if (schema === null) schema = batch.schema;
        else if (batch.schema !== schema && !sameSchema(schema, batch.schema)) {
          throw new ShuffleError('CS_SCHEMA_MISMATCH', `map outputs of one shuffle disagree about the schema: ${schemaDifference(schema, batch.schema)}`, {
            ...idLocation(source.status.id),
            file: `${source.status.location.prefix}.data`,
          });
        }
        if (this.options.coalesceRows === undefined) {
          yield this.count(batch);
          continue;
        }
        coalescer ??= new BatchCoalescer(schema, this.options.coalesceRows);
        for (const out of coalescer.push(batch)) yield this.count(out);
      }
      const last = coalescer?.finish();
      if (last) yield this.count(last);
    } finally {
      stop.abort(); // drops the waits for map outputs still pending
      this.options.signal?.removeEventListener('abort', onOuterAbort);
      clearTimeout(timer);
      // aborted: every output open is closed now, its read in flight left to fail or end unread (a source read
      // that never returned held the abort back for good: a ByteRangeSource has no cancel but close); one still
      // being opened is closed once it is. Otherwise the read in flight (never rejects) ends before its file closes.
      const aborted = this.options.signal?.aborted === true && !this.closeRequested;
      await Promise.all(
        [...open].map(async (source) => {
          if (!aborted) {
            await source.pending;
            await closeSource(source);
          } else if (source.reader !== null) {
            await source.reader.close().catch(() => undefined);
          } else {
            void source.pending.then(() => closeSource(source)).catch(() => undefined);
          }
        }),
      );
    }
  }

  private count(batch: RecordBatch): RecordBatch {
    this.metrics.batches++;
    this.metrics.rows += batch.numRows;
    return batch;
  }

  /** Starts waiting for every map output; each status goes to `ready` when it comes. */
  private waitForOutputs(
    locator: MapOutputLocator,
    signal: AbortSignal,
    ready: MapStatus[],
    unknown: Set<number>,
    poke: () => void,
    fail: (error: unknown) => void,
  ): void {
    for (let m = 0; m < locator.numMaps; m++) unknown.add(m);
    let numPartitions: number | null = null;
    for (let m = 0; m < locator.numMaps; m++) {
      locator.waitFor(m, signal).then(
        (status) => {
          try {
            this.checkStatus(status, locator.shuffleId, m);
            numPartitions ??= status.numPartitions;
            if (status.numPartitions !== numPartitions) {
              throw new ShuffleError('CS_INVALID_ARGUMENT', `the output has ${status.numPartitions} partitions, others have ${numPartitions}`, idLocation(status.id));
            }
            ready.push(status);
          } catch (error) {
            fail(error);
          }
          unknown.delete(m);
          poke();
        },
        (error: unknown) => {
          if (!signal.aborted) fail(error); // after close, the abort is ours
          unknown.delete(m);
          poke();
        },
      );
    }
  }

  private checkStatuses(statuses: readonly MapStatus[]): void {
    const seen = new Map<number, MapStatus>();
    for (const status of statuses) {
      const first = statuses[0]!;
      this.checkStatus(status, first.id.shuffleId, null);
      const twin = seen.get(status.id.mapId);
      if (twin !== undefined) {
        throw new ShuffleError(
          'CS_INVALID_ARGUMENT',
          `two attempts of one map task (${twin.id.attempt} and ${status.id.attempt}): name the one to read`,
          idLocation(status.id),
        );
      }
      if (status.numPartitions !== first.numPartitions) {
        throw new ShuffleError('CS_INVALID_ARGUMENT', `the output has ${status.numPartitions} partitions, map ${first.id.mapId}'s has ${first.numPartitions}`, idLocation(status.id));
      }
      seen.set(status.id.mapId, status);
    }
  }

  private checkStatus(status: MapStatus, shuffleId: number, mapId: number | null): void {
    assertMapStatus(status);
    const where = idLocation(status.id);
    if (status.id.shuffleId !== shuffleId) throw new ShuffleError('CS_INVALID_ARGUMENT', `the status is of shuffle ${status.id.shuffleId}, not ${shuffleId}`, where);
    if (mapId !== null && status.id.mapId !== mapId) throw new ShuffleError('CS_INVALID_ARGUMENT', `asked for map ${mapId}, got a status of map ${status.id.mapId}`, where);
    if (this.end > status.numPartitions) {
      throw new ShuffleError('CS_INVALID_ARGUMENT', `partition range [${this.start}, ${this.end}) is not within the output's ${status.numPartitions} partitions`, where);
    }
  }

  private openSource(status: MapStatus, post: (step: Step) => void): Source {
    const source: Source = { status, reader: null, batches: null, rows: 0, pending: Promise.resolve() };
    this.metrics.attemptsRead.push(status.id);
    this.metrics.bytesRead += rangeTotals(status, this.start, this.end).bytes;
    source.pending = (async (): Promise<Step> => {
      try {
        const { openOutput, readerOptions } = this.options;
        source.reader = openOutput === undefined ? await ShuffleReader.open(status.location.prefix, readerOptions) : await fromOpened(await openOutput(status), readerOptions);
        assertMatchesStatus(source.reader, status);
        source.batches = source.reader.readPartitions(this.start, this.end);
      } catch (error) {
        // a source that is not a file (openOutput) may fail with an error of its own
        const failure = error instanceof ShuffleError ? error : new ShuffleError('CS_IO', `cannot open the map output: ${error instanceof Error ? error.message : String(error)}`, { file: status.location.prefix }, { cause: error });
        return { kind: 'error', source, error: failure };
      }
      return this.nextStep(source);
    })().then(post);
    return source;
  }

  private async nextStep(source: Source): Promise<Step> {
    try {
      const next = await source.batches!.next();
      if (!next.done) return { kind: 'batch', source, batch: next.value };
      const expected = rangeTotals(source.status, this.start, this.end).rows;
      if (source.rows !== expected) {
        throw new ShuffleError('CS_CORRUPT_DATA', `partitions [${this.start}, ${this.end}) hold ${source.rows} rows, the map status says ${expected}`, {
          ...idLocation(source.status.id),
          file: `${source.status.location.prefix}.data`,
        });
      }
      return { kind: 'end', source };
    } catch (error) {
      return { kind: 'error', source, error };
    }
  }
}

/** The files on disk must be the output the status describes (not another attempt's, not a replaced one). */
function assertMatchesStatus(reader: ShuffleReader, status: MapStatus): void {
  const where = { ...idLocation(status.id), file: `${status.location.prefix}.index` };
  if (reader.numPartitions !== status.numPartitions) {
    throw new ShuffleError('CS_CORRUPT_DATA', `the output has ${reader.numPartitions} partitions, its map status says ${status.numPartitions}`, where);
  }
  for (let p = 0; p < status.numPartitions; p++) {
    if (reader.partitionLength(p) !== status.partitionLengths[p]) {
      throw new ShuffleError(
        'CS_CORRUPT_DATA',
        `the index gives partition ${p} ${reader.partitionLength(p)} bytes, the map status ${status.partitionLengths[p]}: these files are not the output the status describes`,
        { ...where, partition: p },
      );
    }
  }
}

/** A reader over sources `openOutput` opened; they are closed when it cannot be made (they stayed open, 3 descriptors a map output). */
async function fromOpened(sources: ShuffleOutputSources, options: OpenOptions | undefined): Promise<ShuffleReader> {
  try {
    return await ShuffleReader.fromSources(sources, options);
  } catch (error) {
    await closeSources([sources.data, sources.index, sources.checksum]).catch(() => undefined);
    throw error;
  }
}

async function closeSource(source: Source): Promise<void> {
  await source.batches?.return(undefined).catch(() => undefined);
  await source.reader?.close();
}

function positiveInteger(name: string, value: number): void {
  if (!(Number.isInteger(value) && value >= 1)) throw new ShuffleError('CS_INVALID_ARGUMENT', `${name} must be an integer >= 1, got ${String(value)}`);
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
