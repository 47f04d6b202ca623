export { ShuffleError, type ErrorLocation, type ShuffleErrorCode } from './errors.js';
export { CODEC_NAMES, type CodecName } from './format/codec.js';
export { outputPaths, type OutputPaths } from './format/output-files.js';
export { readIpcStream, readIpcSchema, DEFAULT_MAX_BUFFER_BYTES, type IpcReadOptions } from './format/ipc-reader.js';
export { ShuffleWriter } from './writer/shuffle-writer.js';
export { SortShuffleWriter, type SortShuffleWriterOptions } from './sort-writer/sort-shuffle-writer.js';
export { createShuffleWriter, WRITER_KINDS, type MapOutputWriter, type WriterKind } from './writer-kind.js';
export {
  DEFAULT_MAX_BATCH_ROWS,
  DEFAULT_MEM_LIMIT_FLOOR,
  DEFAULT_RESIZE_THRESHOLD,
  DEFAULT_MERGE_THRESHOLD,
  DEFAULT_COMPRESSION_MIN_ROWS,
  type ShuffleWriterOptions,
  type ShuffleWriteResult,
} from './writer/writer-options.js';
export type { Partitioning } from './writer/partitioner.js';
export { MemoryPool, MemoryReservation, MemoryLimitError, type Reclaimable } from './memory/memory-pool.js';
export { partitionBufferRows, targetCapacity } from './writer/buffer-sizing.js';
export { ShuffleReader, type OpenOptions, type ReadOptions, type ShuffleOutputSources } from './reader/shuffle-reader.js';
export { LocalFileSource, type ByteRangeSource } from './reader/byte-source.js';
export { BatchCoalescer } from './reader/batch-coalescer.js';
export { removeLeftovers, type LeftoverLocations } from './cleanup.js';
