import { DataFileWriter } from '../../src/format/output-files.js';

/** Commits an output of one partition holding `bytes` at `prefix` (replacing one there only with `overwrite`). */
export async function commitOnePartition(prefix: string, bytes: Uint8Array, overwrite: boolean): Promise<void> {
  const writer = await DataFileWriter.create(prefix, overwrite);
  writer.beginPartition(0);
  await writer.append(bytes);
  writer.endPartition();
  await writer.commit();
}
