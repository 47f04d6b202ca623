/**
 * A child process that reads IPC streams with flechette (support/flechette.ts's
 * codecs and rows), for support/flechette-process.ts: a damaged stream can
 * make flechette allocate without bound, and running out of memory then ends
 * this process, not the test's. (A worker thread's heap limit did not: V8's
 * fatal out-of-memory in the worker took the whole process down.)
 *
 * Protocol: each message is { id, bytes }; the reply is { id, rows } or
 * { id, refused } (flechette's error message).
 */
import { tableFromIPC } from '@uwdata/flechette';
import { DECODE, registerFlechetteCodecs, rowsOf } from './flechette.js';

registerFlechetteCodecs();
process.on('message', ({ id, bytes }: { id: number; bytes: Uint8Array }) => {
  try {
    // a copy of its own: the message's bytes may sit at any offset of the deserializer's buffer, and flechette
    // views 32- and 64-bit values in place ("start offset of Int32Array should be a multiple of 4")
    process.send!({ id, rows: rowsOf(tableFromIPC(bytes.slice(), DECODE)) });
  } catch (error) {
    process.send!({ id, refused: String(error) });
  }
});
process.on('disconnect', () => process.exit(0));
