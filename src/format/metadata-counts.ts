import { ByteBuffer } from 'flatbuffers';
import { DictionaryBatch as FbDictionaryBatch } from 'apache-arrow/fb/dictionary-batch';
import type { Field as FbField } from 'apache-arrow/fb/field';
import { Footer as FbFooter } from 'apache-arrow/fb/footer';
import type { KeyValue as FbKeyValue } from 'apache-arrow/fb/key-value';
import { Message as FbMessage } from 'apache-arrow/fb/message';
import { MessageHeader as FbMessageHeader } from 'apache-arrow/fb/message-header';
import { RecordBatch as FbRecordBatch } from 'apache-arrow/fb/record-batch';
import { Schema as FbSchema } from 'apache-arrow/fb/schema';
import { Type as FbType } from 'apache-arrow/fb/type';
import { retainShapes } from './retained-shapes.js';

/**
 * Checks the element counts of a message's (or a file footer's) flatbuffer
 * vectors against the metadata's own size before arrow-js decodes it. arrow-js
 * loops over every element a count claims: a corrupted count of four billion
 * field nodes exhausted the heap, and one of 800 million custom metadata
 * entries (whose garbage keys all land in one Map slot) kept it busy for
 * minutes, a hang no timeout can stop (the loop is synchronous).
 *
 * ```text
 * RecordBatch.nodes       16 bytes each (struct FieldNode { length: i64, null_count: i64 })
 * RecordBatch.buffers     16 bytes each (struct Buffer { offset: i64, length: i64 })
 * variadic counts          8 bytes each; their values add up to at most the buffers listed
 *                          (each variadic buffer is one of them: a flipped bit made a count of
 *                          8,388,609, and arrow-js spent 20 s making that many empty buffers)
 * Footer blocks           24 bytes each (struct Block { offset: i64, metaDataLength: i32, pad, bodyLength: i64 })
 * fields, custom metadata  4 bytes each (offsets to tables), all of a message together; fields nest at most 64 deep
 * names, keys, values     their bytes, all of a message together at most 4 x its size
 * ```
 * In a genuine flatbuffer every element and string has bytes of its own, so the
 * totals fit in the metadata. Corrupted offsets can make vectors and strings
 * overlap or repeat; the totals bound what decoding them costs to a small
 * multiple of the metadata's size (strings: 4 x, leaving room for a writer
 * that shares equal strings).
 *
 * The walk over a schema's fields also refuses a field of type NONE (the
 * flatbuffers union's "no type", what a damaged or absent type reads as):
 * arrow-js decodes it as Null, where Arrow C++ and flechette refuse it.
 *
 * Returns why the counts cannot be right, or null.
 */
export function metadataCountProblem(metadata: Uint8Array): string | null {
  const size = metadata.byteLength;
  try {
    const message = FbMessage.getRootAsMessage(new ByteBuffer(metadata));
    const budget = new DecodeBudget(size);
    const messageMetadata = budget.keyValues('message', message.customMetadataLength(), (i) => message.customMetadata(i));
    if (messageMetadata !== null) return messageMetadata;
    switch (message.headerType()) {
      case FbMessageHeader.RecordBatch:
        return recordBatchProblem(message.header(new FbRecordBatch()) as FbRecordBatch | null, size);
      case FbMessageHeader.DictionaryBatch: {
        const dictionary = message.header(new FbDictionaryBatch()) as FbDictionaryBatch | null;
        return recordBatchProblem(dictionary?.data() ?? null, size);
      }
      case FbMessageHeader.Schema: {
        const schema = message.header(new FbSchema()) as FbSchema | null;
        return schema === null ? 'the schema header is missing' : budget.schema(schema);
      }
      default:
        return null;
    }
  } catch (error) {
    return `the metadata flatbuffer is unreadable: ${(error as Error).message}`;
  }
}

/** The same checks for an Arrow file's footer: its block lists and its schema (arrow-js does not read the footer's own custom metadata). */
export function footerCountProblem(footerBytes: Uint8Array): string | null {
  const size = footerBytes.byteLength;
  try {
    const footer = FbFooter.getRootAsFooter(new ByteBuffer(footerBytes));
    const dictionaries = footer.dictionariesLength();
    const batches = footer.recordBatchesLength();
    if (dictionaries * BLOCK_BYTES > size) return `the footer claims ${dictionaries} dictionary blocks in ${size} bytes`;
    if (batches * BLOCK_BYTES > size) return `the footer claims ${batches} record batch blocks in ${size} bytes`;
    const schema = footer.schema();
    return schema === null ? 'the footer has no schema' : new DecodeBudget(size).schema(schema);
  } catch (error) {
    return `the footer flatbuffer is unreadable: ${(error as Error).message}`;
  }
}

const MAX_DEPTH = 64;
const OFFSET_BYTES = 4;
const BLOCK_BYTES = 24;
/** how many times the metadata's size the strings decoded from it may add up to */
const STRING_BYTES_PER_BYTE = 4;
/** vtable slots: Field.name, KeyValue.key and KeyValue.value */
const FIELD_NAME = 4;
const KEY = 4;
const VALUE = 6;

/** What decoding one flatbuffer may cost: table offsets (fields, metadata entries) and string bytes, counted over all of it. */
class DecodeBudget {
  private offsets = 0;
  private stringBytes = 0;

  constructor(private readonly size: number) {}

  schema(schema: FbSchema): string | null {
    const count = schema.fieldsLength();
    if (!this.takeOffsets(count)) return `the schema claims ${count} fields in ${this.size} bytes of metadata`;
    const metadata = this.keyValues('schema', schema.customMetadataLength(), (i) => schema.customMetadata(i));
    if (metadata !== null) return metadata;
    for (let f = 0; f < count; f++) {
      const problem = this.field(schema.fields(f), 1);
      if (problem !== null) return problem;
    }
    return null;
  }

  /** One field and its children, depth first; the field's own offset is counted by its parent's list. */
  private field(field: FbField | null, depth: number): string | null {
    if (field === null) return null;
    if (depth > MAX_DEPTH) return `fields nest deeper than ${MAX_DEPTH}`;
    if (field.typeType() === FbType.NONE) return `a field has type NONE (no type)`;
    if (!this.takeString(field.bb!, field.bb_pos, FIELD_NAME)) return this.stringProblem();
    const children = field.childrenLength();
    if (!this.takeOffsets(children)) return `a field claims ${children} children: more fields than ${this.size} bytes of metadata hold`;
    const metadata = this.keyValues('field', field.customMetadataLength(), (i) => field.customMetadata(i));
    if (metadata !== null) return metadata;
    for (let c = 0; c < children; c++) {
      const problem = this.field(field.children(c), depth + 1);
      if (problem !== null) return problem;
    }
    return null;
  }

  /** The custom metadata list of `whose` (message, schema, field), `count` entries: its offsets, then each entry's key and value. */
  keyValues(whose: string, count: number, entry: (i: number) => FbKeyValue | null): string | null {
    if (!this.takeOffsets(count)) return `${whose} custom metadata claims ${count} entries: more than ${this.size} bytes of metadata hold`;
    for (let i = 0; i < count; i++) {
      const keyValue = entry(i);
      if (keyValue === null) continue;
      if (!this.takeString(keyValue.bb!, keyValue.bb_pos, KEY) || !this.takeString(keyValue.bb!, keyValue.bb_pos, VALUE)) return this.stringProblem();
    }
    return null;
  }

  private takeOffsets(count: number): boolean {
    this.offsets += count;
    return this.offsets * OFFSET_BYTES <= this.size;
  }

  /**
   * Counts the string in slot `slot` of the table at `table` by its length
   * prefix, without decoding it (flatbuffers' `__string`, whose UTF-8 decoding
   * is what costs). A length running past the buffer throws: unreadable.
   */
  private takeString(bb: ByteBuffer, table: number, slot: number): boolean {
    const field = bb.__offset(table, slot);
    if (field === 0) return true;
    const at = table + field;
    const start = at + bb.readInt32(at);
    const length = bb.readInt32(start);
    if (length < 0 || start + 4 + length > bb.capacity()) throw new RangeError(`a string of ${length} bytes at ${start} runs past the metadata`);
    this.stringBytes += length;
    return this.stringBytes <= STRING_BYTES_PER_BYTE * this.size;
  }

  private stringProblem(): string {
    return `names and custom metadata add up to more than ${STRING_BYTES_PER_BYTE} x the ${this.size} bytes of metadata`;
  }
}

retainShapes(new DecodeBudget(0)); // one per message, none alive between reads (retained-shapes.ts)

function recordBatchProblem(batch: FbRecordBatch | null, size: number): string | null {
  if (batch === null) return 'the record batch header is missing';
  const nodes = batch.nodesLength();
  const buffers = batch.buffersLength();
  const variadic = batch.variadicBufferCountsLength();
  if (nodes * 16 > size) return `the record batch claims ${nodes} field nodes in ${size} bytes of metadata`;
  if (buffers * 16 > size) return `the record batch claims ${buffers} buffers in ${size} bytes of metadata`;
  if (variadic * 8 > size) return `the record batch claims ${variadic} variadic counts in ${size} bytes of metadata`;
  // each variadic buffer is one of the batch's buffers: arrow-js makes as many as the counts say, one by one
  let variadicBuffers = 0n;
  for (let i = 0; i < variadic; i++) {
    const count = batch.variadicBufferCounts(i) ?? 0n;
    if (count < 0n) return `the record batch claims ${count} variadic buffers for a column`;
    variadicBuffers += count;
  }
  if (variadicBuffers > BigInt(buffers)) return `the record batch claims ${variadicBuffers} variadic buffers but lists ${buffers} buffers in all`;
  return null;
}
