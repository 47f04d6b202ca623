import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import type { RecordBatch } from 'apache-arrow';
import { ioError } from '../errors.js';
import { assertDirectory } from '../format/output-files.js';
import { runEveryStep } from '../run-every-step.js';
import type { SortShuffleWriterOptions } from '../sort-writer/sort-shuffle-writer.js';
import { assertWriterChoice, createShuffleWriter, type AnyShuffleWriter, type WriterChoice } from '../writer-kind.js';
import { assertMapOutputId, mapOutputPrefix, mapOutputSpillDir, type MapOutputId } from './map-output-id.js';
import type { MapStatus } from './map-status.js';
import { removeSpillDir } from './shuffle-files.js';

export interface MapOutputWriterOptions extends Omit<SortShuffleWriterOptions, 'outputPrefix' | 'mapId' | 'overwrite' | 'spillDir'> {
  /**
   * The writer of the output (default `hash`, the columnar ShuffleWriter; `sort`, the
   * SortShuffleWriter, for many partitions; `auto`, the one that suits the partition count and
   * memory: AutoShuffleWriter). Both commit the same files, ShuffleReader and
   * ReduceReader read either, and the MapStatus has the same shape. `pageBytes` and
   * `blockBytes` size the sort writer only; the hash writer's sizing options are ignored by it.
   */
  writer?: WriterChoice;
  /** The shuffle directory (it must exist): the output is `<dir>/shuffle_<shuffle>_<map>_<attempt>.data`, `.index`, `.checksum.CRC32C`. */
  dir: string;
  /** Shuffle id, map id (also the round-robin seed) and attempt number. */
  id: MapOutputId;
  /** Where the attempt's spill directory `shuffle_<s>_<m>_<a>.spill` is made (default: `dir`; it must exist); it is removed when the attempt ends. */
  spillRoot?: string;
}

/**
 * One attempt of one map task: a shuffle writer (hash or sort, as `writer`
 * says) whose files are named from the map output id, with a spill directory
 * of its own, that returns the output's MapStatus when it commits.
 *
 * Protocol: `await MapOutputWriter.create(options)`, any number of
 * `await write(batch)`, then `await finish()` (the MapStatus) or `await abort()`.
 *
 * Guarantees: nothing has a final name until `finish()` commits (the index is
 * renamed last); any failed `write` or `finish` aborts the attempt, and abort
 * removes every file of the attempt, the spill directory included (an abort
 * once `finish()` has begun to commit waits for it, and the output stands). A killed attempt cannot clean up:
 * `discardMapOutput(dir, id)` removes what it left. An attempt number is used
 * once: `create` fails with CS_OUTPUT_EXISTS when that attempt already committed.
 */
export class MapOutputWriter {
  private finished = false;

  private constructor(
    readonly id: MapOutputId,
    readonly prefix: string,
    private readonly spillDir: string,
    private readonly writer: AnyShuffleWriter,
    private readonly started: number,
  ) {}

  static async create(options: MapOutputWriterOptions): Promise<MapOutputWriter> {
    const started = performance.now();
    assertMapOutputId(options.id);
    const kind = options.writer ?? 'hash';
    assertWriterChoice(kind); // before anything is created
    await assertDirectory(options.dir);
    // a spill root that is not there is refused, as the writers refuse a spill directory: made here, a typo or an
    // unmounted volume became a directory (with its parents) that no cleanup removes
    if (options.spillRoot !== undefined) await assertDirectory(options.spillRoot, 'spill');
    const { dir, id, spillRoot, writer: _, ...writerOptions } = options;
    const prefix = mapOutputPrefix(dir, id);
    const spillDir = mapOutputSpillDir(spillRoot ?? dir, id);
    try {
      await mkdir(spillDir);
    } catch (cause) {
      // (a killed attempt of this number may have left it: its files go with the directory at the end)
      if ((cause as NodeJS.ErrnoException).code !== 'EEXIST') throw ioError('create the spill directory', spillDir, cause);
    }
    try {
      const writer = await createShuffleWriter(kind, { ...writerOptions, outputPrefix: prefix, mapId: id.mapId, spillDir, overwrite: false });
      return new MapOutputWriter(id, prefix, spillDir, writer, started);
    } catch (error) {
      await removeDir(spillDir);
      throw error;
    }
  }

  /** Writes one batch (the writer's `write`). Any failure, a refused batch too, aborts the attempt: a retry is a new attempt. */
  async write(batch: RecordBatch): Promise<void> {
    try {
      await this.writer.write(batch);
    } catch (error) {
      await this.abort().catch(() => undefined);
      throw error;
    }
  }

  /** Commits the output and returns its status; on failure nothing of the attempt is left. */
  async finish(): Promise<MapStatus> {
    try {
      const result = await this.writer.finish();
      this.finished = true;
      await removeDir(this.spillDir);
      return {
        id: { shuffleId: this.id.shuffleId, mapId: this.id.mapId, attempt: this.id.attempt },
        location: { host: hostname(), prefix: this.prefix },
        numPartitions: result.numPartitions,
        partitionLengths: result.partitionLengths,
        partitionRows: result.partitionRows,
        metrics: {
          rows: result.rows,
          batches: result.batches,
          bytesWritten: result.bytesWritten,
          spills: result.spills,
          spilledBytes: result.spilledBytes,
          peakMemoryBytes: result.peakMemoryBytes,
          writeMs: performance.now() - this.started,
        },
      };
    } catch (error) {
      await this.abort().catch(() => undefined);
      throw error;
    }
  }

  /** Drops the attempt: temporary files, spill files and the spill directory. Safe to call in any state. */
  async abort(): Promise<void> {
    if (this.finished) return;
    await runEveryStep([() => this.writer.abort(), () => removeDir(this.spillDir)]);
  }
}

/** The spill directory is empty once the writer is done with it; a failure to remove it must not hide the task's own error. */
async function removeDir(dir: string): Promise<void> {
  await removeSpillDir(dir).catch(() => undefined);
}
