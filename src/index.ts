export { ShuffleError, serializeError, deserializeError, type ErrorLocation, type ShuffleErrorCode, type SerializedError } from './errors.js';
export { CODEC_NAMES, type CodecName } from './format/codec.js';
export { outputPaths, type OutputPaths } from './format/output-files.js';
export { readIpcStream, readIpcSchema, DEFAULT_MAX_BUFFER_BYTES, type IpcReadOptions } from './format/ipc-reader.js';
export { ShuffleWriter } from './writer/shuffle-writer.js';
export { SortShuffleWriter, type SortShuffleWriterOptions } from './sort-writer/sort-shuffle-writer.js';
export { createShuffleWriter, WRITER_CHOICES, WRITER_KINDS, type AnyShuffleWriter, type WriterChoice, type WriterKind } from './writer-kind.js';
export { AutoShuffleWriter, chooseWriter, MIN_HASH_BUFFER_ROWS, SORT_PARTITIONS_THRESHOLD } from './auto-writer.js';
export {
  DEFAULT_MAX_BATCH_ROWS,
  DEFAULT_MEM_LIMIT_FLOOR,
  UNBOUNDED_MEM_LIMIT,
  DEFAULT_RESIZE_THRESHOLD,
  DEFAULT_MERGE_THRESHOLD,
  DEFAULT_COMPRESSION_MIN_ROWS,
  type ShuffleWriterOptions,
  type ShuffleWriteResult,
} from './writer/writer-options.js';
export type { Partitioning } from './writer/partitioner.js';
export type { RangeBounds, RangeKey } from './writer/range-partitioner.js';
export { rangeBoundsOf } from './writer/range-bounds.js';
export type { DictionaryUpdates } from './writer/dictionary-tracker.js';
export { MemoryPool, MemoryReservation, MemoryLimitError, type Reclaimable } from './memory/memory-pool.js';
export { defaultMemoryPool } from './memory/default-pool.js';
export { partitionBufferRows, targetCapacity } from './writer/buffer-sizing.js';
export { DEFAULT_READ_RUN_BYTES, DEFAULT_WHOLE_PARTITION_BYTES, ShuffleReader, type OpenOptions, type ReadOptions, type ShuffleOutputSources } from './reader/shuffle-reader.js';
export { LocalFileSource, type ByteRangeSource } from './reader/byte-source.js';
export { BatchCoalescer } from './reader/batch-coalescer.js';
export { removeLeftovers, type LeftoverLocations } from './cleanup.js';
export {
  mapOutputName,
  mapOutputPrefix,
  mapOutputSpillDir,
  parseMapOutputName,
  type MapOutputId,
} from './shuffle/map-output-id.js';
export type { MapStatus, MapTaskMetrics } from './shuffle/map-status.js';
export { MapOutputWriter, type MapOutputWriterOptions } from './shuffle/map-output-writer.js';
export { MapOutputTracker, type MapOutputLocator } from './shuffle/map-output-tracker.js';
export {
  ReduceReader,
  DEFAULT_REDUCE_CONCURRENCY,
  DEFAULT_MAP_OUTPUT_WAIT_MS,
  type ReduceReaderOptions,
  type ReduceReadMetrics,
} from './shuffle/reduce-reader.js';
export { discardMapOutput, removeShuffleFiles, type ShuffleFilesOptions } from './shuffle/shuffle-files.js';
export {
  batchToTransferable,
  batchFromTransferable,
  SentDictionaries,
  ReceivedDictionaries,
  type TransferMode,
  type TransferableBatch,
  type TransferableData,
  type TransferableChunk,
  type PreparedTransfer,
} from './shuffle/batch-transfer.js';
export {
  MapTaskPool,
  type MapTaskPoolOptions,
  type MapTaskSpec,
  type MapTask,
  type MapTaskProgress,
  type MapTaskRunOptions,
} from './shuffle/map-task-pool.js';
export type { MapTransform, MapTaskWriterSpec } from './shuffle/worker-protocol.js';
