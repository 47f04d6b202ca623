import { CompressStream } from 'zstd-napi';

/** A Zstandard frame written by a streaming compressor: it declares no content size (the codec must decode it to the size it is told). */
export async function streamedZstdFrame(input: Uint8Array): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const stream = new CompressStream();
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = new Promise((resolve) => stream.on('end', resolve));
  stream.end(input);
  await ended;
  return Buffer.concat(chunks);
}
