import { ByteBuffer } from 'flatbuffers';
import * as fbMessage from 'apache-arrow/fb/Message_generated';
import * as fbSchema from 'apache-arrow/fb/Schema_generated';

/**
 * One object of each class the read path makes by the thousand and drops,
 * kept alive for V8's sake.
 *
 * V8 gives the objects of a class a hidden class (a map) that only its live
 * objects keep alive. At a full collection with none of them alive, the map
 * dies, every function optimized against it is deoptimized, and the next
 * objects get a new map that the functions are optimized against again. A
 * read makes and drops thousands of metadata objects (flatbuffers tables and
 * structs, arrow-js messages and batches, this library's cursors), so between
 * two reads none is alive, and a full collection there (a job runs them when
 * it holds much memory; the benchmark runs one before every timed read) cost
 * the next read about 300 deoptimizations and re-optimizations. Reading all
 * 200 partitions of 2 M narrow rows right after one took 160-164 ms, and
 * 104-108 ms with one object of each class held here (wide rows 162-172
 * against 108-116, nested 206-207 against 155; each variant in a process of
 * its own: the classes are shared by everything in a thread).
 *
 * Holding an object keeps its map and the maps it was built through alive;
 * the objects are tiny (the flatbuffers ones are empty, the others come from
 * a stream of a few rows: reader-shapes.ts).
 */
const retained: unknown[] = [];

/** Keeps `objects` alive for as long as the thread runs (their maps, not their contents, are the point). */
export function retainShapes(...objects: unknown[]): void {
  retained.push(...objects);
}

// an empty object of every flatbuffers table and struct arrow-js decodes messages and schemas with
for (const module of [fbMessage, fbSchema]) {
  for (const exported of Object.values(module)) {
    if (typeof exported === 'function' && typeof (exported.prototype as { __init?: unknown } | undefined)?.__init === 'function') {
      retainShapes(new (exported as new () => unknown)());
    }
  }
}
retainShapes(new ByteBuffer(new Uint8Array(0)));
