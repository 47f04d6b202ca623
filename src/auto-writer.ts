import type { RecordBatch, Schema } from 'apache-arrow';
import { ShuffleError } from './errors.js';
import { unreadableSharedDictionary } from './sort-writer/shared-dictionaries.js';
import { SortShuffleWriter, validateSortOptions, type SortShuffleWriterOptions } from './sort-writer/sort-shuffle-writer.js';
import { assertInputBatch } from './writer/input-batch.js';
import { ShuffleWriter } from './writer/shuffle-writer.js';
import { OneCallAtATime, writerAborted, type WriterState } from './writer/writer-calls.js';
import type { ShuffleWriteResult } from './writer/writer-options.js';
import type { AnyShuffleWriter, WriterKind } from './writer-kind.js';

/**
 * From this many partitions on, `auto` picks the sort writer at once: Gluten's
 * spark.gluten.sql.columnar.shuffle.sort.partitions.threshold. Here the sort
 * writer overtook the columnar one end to end at about 1,100-3,820 partitions
 * on narrow and nested rows and 260-570 on wide ones, in thirty-five runs
 * (bench/RESULTS.md); Gluten's figure is kept as the conservative choice.
 */
export const SORT_PARTITIONS_THRESHOLD = 4000;

/**
 * `auto` picks the sort writer when the columnar writer's partition buffers
 * would hold fewer rows than this: every payload would be that small, stored
 * uncompressed (under compressionMinRows) behind an IPC header of its own.
 * Under the benchmark's tight limit (1/32 of the input) the buffers held 78
 * narrow rows, 38 nested and 19 wide at P = 200, and 15, 7 and 3 at P = 1000.
 * In seventeen runs the sort writer was 1.2x to 5x faster end to end in every case
 * under 32 rows (wide at P = 200: 0.16-0.33 against 0.085-0.26 M rows/s, with
 * 42 MB written against 99-108); at 38 and 78 rows the columnar writer was
 * ahead on narrow rows in the first seven, and on nested rows it went from 25 %
 * behind to level or ahead (1.1-1.5x in the last three) once buffers stopped
 * shrinking back and small batches got cheaper to read. In the eighth the sort
 * writer led at 78 narrow rows (1.33 against 1.07 M rows/s): since
 * minCompressionSavings it stores its small spilled narrow blocks raw (they
 * save under 15 %). In the ninth the columnar writer led there again (1.60
 * against 1.43), in the tenth the two were level (1.51 and 1.54), in the
 * eleventh to fifteenth the columnar writer led (1.35 against 1.27, 1.41
 * against 1.08, 1.21 against 1.17, 1.91 against 1.54, 1.75 against 1.73).
 * In the sixteenth it led there (2.00 against 1.63) and trailed at 38 nested
 * rows (0.25 against 0.29); in the seventeenth the two were level at both
 * (1.45 and 1.42, 0.28 and 0.28): the threshold stays. In the run after the
 * mutation sweeps (2026-12-06) the columnar writer led at both (1.80 against
 * 1.56 narrow, 0.36 against 0.32 nested) and trailed 1.5x to 4x under 32 rows;
 * in the run after the streamed reads (2026-12-07) the two were level at both
 * (1.70 against 1.75, 0.29 and 0.29) and it trailed 1.2x to 3.4x under 32; in
 * the run after the schema message cache (2026-12-07) it led at both (1.91
 * against 1.78, 0.40 against 0.35) and trailed 1.2x to 3.6x under 32; in the
 * run after the 512 MiB idle pool (2026-12-07) it was level on narrow rows
 * (1.70 against 1.71), led on nested (0.43 against 0.37) and trailed 1.3x to
 * 3.1x under 32; in the run after the sweeps of 2026-12-07 it led at both
 * (1.58 against 1.45, 0.38 against 0.34) and trailed 1.3x to 3.4x under 32;
 * in the run after the next sweeps it led at both (1.80 against 1.63, 0.44
 * against 0.34) and trailed 1.1x to 3.0x under 32; in the run after sweeps 45
 * and 46 (a slow spell) it led at both (1.82 against 1.79, 0.35 against 0.28)
 * and trailed 1.4x to 3.1x under 32.
 */
export const MIN_HASH_BUFFER_ROWS = 32;

/**
 * Which writer `auto` picks for `numPartitions`, when the columnar writer
 * would size its partition buffers for `bufferRows` rows (null: not known
 * yet, no batch has come).
 *
 * ```text
 * P = 4000, any rows                 -> sort   (Gluten's threshold)
 * P = 200, buffers of 19 rows        -> sort   (wide rows, a 2.4 MiB limit)
 * P = 200, buffers of 78 rows        -> hash   (narrow rows, a 2.6 MiB limit)
 * P = 200, no batch yet              -> hash
 * ```
 */
export function chooseWriter(numPartitions: number, bufferRows: number | null): WriterKind {
  if (numPartitions >= SORT_PARTITIONS_THRESHOLD) return 'sort';
  return bufferRows !== null && bufferRows < MIN_HASH_BUFFER_ROWS ? 'sort' : 'hash';
}

/**
 * The writer `createShuffleWriter('auto', ...)` makes: the sort writer from
 * SORT_PARTITIONS_THRESHOLD partitions on, otherwise a columnar writer that,
 * at the first batch with rows, asks itself how many rows its partition
 * buffers would hold (the sizing formula, with that batch's bytes per row and
 * the memory it has) and hands over to a new sort writer when they would be
 * fewer than MIN_HASH_BUFFER_ROWS. The columnar writer has written nothing at
 * that point; its abort removes its temporary file. A schema the sort writer
 * refuses (columns sharing a dictionary id one row of which it could not read
 * back: unreadableSharedDictionary) stays with the columnar writer, or, from
 * SORT_PARTITIONS_THRESHOLD on, is handed to a new one at the first write.
 * Both writers commit the same files and ShuffleReader reads either; `kind`
 * says which one wrote.
 *
 * Protocol: AnyShuffleWriter's. A first batch of another schema than an empty
 * one before it is refused and leaves it usable and undecided, as the writers'
 * own write() does; any other failure of the first write aborts.
 */
export class AutoShuffleWriter implements AnyShuffleWriter {
  private decided: boolean;
  /** batches without rows the columnar writer took before the choice (a sort writer taking over counts them) */
  private emptyBatches = 0;
  private state: WriterState = 'open';
  /** One write() or finish() at a time, as the writers' own (two first writes each made a sort writer, and one was lost). */
  private readonly calls = new OneCallAtATime(() => this.state);
  /** the hand-over to the sort writer on its way, which an abort() waits for, then aborts the writer it made */
  private switching: Promise<void> | null = null;
  private aborting: Promise<void> | null = null;

  private constructor(
    private readonly options: SortShuffleWriterOptions,
    private writer: AnyShuffleWriter,
    private chosen: WriterKind,
  ) {
    this.decided = chosen === 'sort';
  }

  static async create(options: SortShuffleWriterOptions): Promise<AutoShuffleWriter> {
    // the sort writer's options too, at once: checked only at a hand-over, whether a task failed depended on its memory
    validateSortOptions(options);
    const kind = chooseWriter(options.numPartitions, null);
    const writer = kind === 'sort' ? await SortShuffleWriter.create(options) : await ShuffleWriter.create(options);
    return new AutoShuffleWriter(options, writer, kind);
  }

  /** The writer in use: `hash` until the first batch with rows may have chosen `sort`. */
  get kind(): WriterKind {
    return this.chosen;
  }

  get schema(): Schema | null {
    return this.writer.schema;
  }

  write(batch: RecordBatch): Promise<void> {
    return this.calls.run('write', () => this.writeBatch(batch));
  }

  private async writeBatch(batch: RecordBatch): Promise<void> {
    if (this.chosen === 'sort' && this.writer.schema === null) {
      // chosen by the partition count alone, before any schema: the columnar writer takes what the sort writer refuses
      assertInputBatch(batch, 'write');
      if (unreadableSharedDictionary(batch.schema.fields) !== null) await this.handOver(this.writer, () => ShuffleWriter.create(this.options), 'hash');
    }
    // (once decided, the writer's own write() checks the batch: checked here too, every batch was checked twice)
    if (!this.decided) assertInputBatch(batch, 'write');
    if (!this.decided && batch.numRows > 0) {
      const columnar = this.writer as ShuffleWriter;
      let rows: number;
      try {
        rows = await columnar.bufferRowsFor(batch); // binds or checks the schema, and changes nothing else
      } catch (error) {
        // a batch of another schema than the first is refused and leaves the choice open (write()'s rule); anything else
        // (a key column the schema lacks) would refuse every batch: the writer ends, leaving nothing behind
        if (!(error instanceof ShuffleError && error.code === 'CS_SCHEMA_MISMATCH')) await this.writer.abort().catch(() => undefined);
        throw error;
      }
      this.throwIfAborted();
      const kind = unreadableSharedDictionary(batch.schema.fields) === null ? chooseWriter(this.options.numPartitions, rows) : 'hash';
      this.decided = true;
      if (kind === 'sort') await this.handOver(columnar, () => SortShuffleWriter.create(this.options), 'sort');
    } else if (!this.decided) {
      this.emptyBatches++;
    }
    await this.writer.write(batch);
  }

  /** Aborts `current` (it has written nothing) and makes the writer `create` gives the one in use. */
  private async handOver(current: AnyShuffleWriter, create: () => Promise<AnyShuffleWriter>, kind: WriterKind): Promise<void> {
    const switching = (async () => {
      try {
        await current.abort();
        this.writer = await create();
        this.chosen = kind;
      } catch (error) {
        await this.writer.abort().catch(() => undefined);
        throw error;
      }
    })();
    this.switching = switching.catch(() => undefined);
    await switching;
    this.throwIfAborted(); // an abort() during the hand-over has aborted the new writer
  }

  private throwIfAborted(): void {
    if (this.state === 'aborted') throw writerAborted('while write() was running');
  }

  finish(): Promise<ShuffleWriteResult> {
    return this.calls.run('finish', async () => {
      this.state = 'finishing';
      try {
        const result = await this.writer.finish();
        this.state = 'finished';
        return this.chosen === 'sort' && this.emptyBatches > 0 ? { ...result, batches: result.batches + this.emptyBatches } : result;
      } catch (error) {
        if ((this.state as WriterState) !== 'aborted') this.state = 'aborted'; // the writer's failed finish() has aborted it
        throw error;
      }
    });
  }

  abort(): Promise<void> {
    if (this.aborting !== null) return this.aborting;
    if (this.state === 'finished') return Promise.resolve();
    this.state = 'aborted';
    this.aborting = (async () => {
      await this.switching; // then this.writer is the writer the hand-over made, or the one it aborted
      await this.writer.abort();
    })();
    return this.aborting;
  }
}
