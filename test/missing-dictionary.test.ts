/**
 * A dictionary column no dictionary batch came for (the format wants one first; arrow-js reads
 * such a stream over an empty dictionary, and so does our reader, src/format/missing-dictionary.ts).
 * Its null rows read, coalesce and are handed out by `read`, whether the column is loaded by the
 * flat loader (top level) or by the column loader (in a struct), and whatever its value type.
 * Found by differential-flechette (seed 781): a damaged schema made a column a dictionary of lists,
 * and the coalescer and `read`'s writer failed with TypeErrors on arrow-js's empty dictionary,
 * which has no child Data for a list.
 */
import { Date_, Dictionary, Field, Int32, LargeList, Schema, Struct, tableFromIPC, Utf8, type DataType, type RecordBatch } from 'apache-arrow';
import { DateUnit } from 'apache-arrow/enum';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { encodeRecordBatchMessage, encodeSchemaMessage, END_OF_STREAM } from '../src/format/ipc-message.js';
import { tableToIpcStream } from '../src/format/table-to-ipc.js';
import { ShuffleReader } from '../src/index.js';
import { commitOnePartition } from './support/one-partition-output.js';
import { makeTempDir, removeDir } from './support/temp-dir.js';

const dictionaryOf = (values: DataType) => new Dictionary(values, new Int32(), 7);
/** value types, and whether the coalescer takes them (not a dictionary inside a dictionary's values: CS_UNSUPPORTED_TYPE) */
const VALUE_TYPES: [string, DataType, boolean][] = [
  ['strings', new Utf8(), true],
  ['lists of dates', new LargeList(new Field('item', new Date_(DateUnit.DAY), true)), true],
  ['lists of a dictionary of its own', new LargeList(new Field('item', new Dictionary(new Date_(DateUnit.DAY), new Int32(), 8), true)), false],
];

/** A stream of two batches (2 and 3 rows) whose one column, `v` or `s.v`, is all null and whose dictionary never comes. */
async function streamOf(values: DataType, inStruct: boolean): Promise<Uint8Array> {
  const column = new Field('v', dictionaryOf(values), true);
  const schema = new Schema([inStruct ? new Field('s', new Struct([column]), false) : column]);
  const batch = async (rows: number) => {
    const nodes = [{ length: rows, nullCount: rows }];
    const buffers = [new Uint8Array(1), new Uint8Array(4 * rows)];
    const message = await encodeRecordBatchMessage(rows, inStruct ? [{ length: rows, nullCount: 0 }, ...nodes] : nodes, inStruct ? [new Uint8Array(0), ...buffers] : buffers, null);
    return message.chunks;
  };
  return new Uint8Array(Buffer.concat([encodeSchemaMessage(schema), ...(await batch(2)), ...(await batch(3)), END_OF_STREAM]));
}

const valuesOf = (batch: RecordBatch, inStruct: boolean): unknown[] => {
  const column = inStruct ? batch.getChild('s')!.getChild('v')! : batch.getChild('v')!;
  return [...column];
};

let dir: string;
beforeEach(async () => (dir = await makeTempDir('cs-missing-dictionary-')));
afterEach(async () => removeDir(dir));

describe.each([
  ['at the top level (the flat loader)', false],
  ['in a struct (the column loader)', true],
])('a dictionary column no dictionary batch came for, %s', (_, inStruct) => {
  test.each(VALUE_TYPES)('of %s: its null rows read, are handed out by read and coalesce (where the coalescer takes the type)', async (_, values, coalesces) => {
    const prefix = join(dir, 'out');
    await commitOnePartition(prefix, await streamOf(values, inStruct), false);
    const reader = await ShuffleReader.open(prefix);
    try {
      const read: unknown[] = [];
      const handedOut: unknown[] = [];
      for await (const batch of reader.readPartition(0)) {
        read.push(...valuesOf(batch, inStruct));
        for (const written of tableFromIPC(tableToIpcStream(batch)).batches) handedOut.push(...valuesOf(written, inStruct));
      }
      expect(read).toEqual([null, null, null, null, null]);
      expect(handedOut).toEqual(read);
      const coalesced: unknown[] = [];
      const coalescing = (async () => {
        for await (const batch of reader.readPartition(0, { coalesceRows: 100 })) coalesced.push(...valuesOf(batch, inStruct));
      })();
      if (coalesces) {
        await coalescing;
        expect(coalesced).toEqual(read);
      } else {
        await expect(coalescing).rejects.toMatchObject({ code: 'CS_UNSUPPORTED_TYPE' });
      }
    } finally {
      await reader.close();
    }
  });
});
