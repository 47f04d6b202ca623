/**
 * arrow-rs, the Rust Arrow implementation (DataFusion, Comet, Ballista and Sail read shuffles
 * with it), as a reader of our bytes: parquet-wasm 0.8.0 is arrow-rs 59.3 compiled to
 * WebAssembly, and its `Table.fromIPCStream` is arrow-rs's IPC `StreamReader`, which validates
 * every array it builds (offsets, UTF-8, view buffers, union type ids, dictionary indices).
 * It is built without arrow-rs's `lz4` and `zstd` features, so it reads uncompressed streams only.
 */
import { Table } from 'parquet-wasm/node';

/**
 * Reads an IPC stream with arrow-rs and returns arrow-rs's own encoding of what it read (an
 * uncompressed stream, for another reader to compare); throws arrow-rs's error if it refuses the bytes.
 */
export function throughArrowRs(stream: Uint8Array): Uint8Array {
  return Table.fromIPCStream(stream).intoIPCStream(); // (intoIPCStream frees the table's WebAssembly memory)
}
