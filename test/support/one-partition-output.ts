import { DataFileWriter } from '../../src/format/output-files.js';
import { ShuffleReader } from '../../src/reader/shuffle-reader.js';

/** Commits an output of one partition holding `bytes` at `prefix` (replacing one there only with `overwrite`). */
export async function commitOnePartition(prefix: string, bytes: Uint8Array, overwrite: boolean): Promise<void> {
  const writer = await DataFileWriter.create(prefix, overwrite);
  writer.beginPartition(0);
  await writer.append(bytes);
  writer.endPartition();
  await writer.commit();
}

/** The bytes of partition `p` of the committed output at `prefix`, in an array of their own. */
export async function partitionBytesOf(prefix: string, p = 0): Promise<Uint8Array> {
  const reader = await ShuffleReader.open(prefix);
  try {
    return new Uint8Array(await reader.partitionBytes(p));
  } finally {
    await reader.close();
  }
}
