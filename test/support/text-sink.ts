import { Writable } from 'node:stream';

/** A Writable that keeps what is written to it, for asserting on a program's output. */
export function textSink(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  return {
    stream: new Writable({
      write(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk.toString());
        callback();
      },
    }),
    text: () => chunks.join(''),
  };
}
