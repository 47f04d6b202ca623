import { ByteBuffer } from 'flatbuffers';
import { DictionaryBatch as FbDictionaryBatch } from 'apache-arrow/fb/dictionary-batch';
import { Message as FbMessage } from 'apache-arrow/fb/message';
import { MessageHeader as FbMessageHeader } from 'apache-arrow/fb/message-header';
import { RecordBatch as FbRecordBatch } from 'apache-arrow/fb/record-batch';
import { Schema as FbSchema } from 'apache-arrow/fb/schema';
/**
 * Checks the element counts of a message's flatbuffer vectors against the
 * metadata's own size before arrow-js decodes it: arrow-js builds one object
 * per field node, buffer and field, so a corrupted count of four billion would
 * exhaust the heap before any other check could run.
 *
 * ```text
 * RecordBatch.nodes     16 bytes each (struct FieldNode { length: i64, null_count: i64 })
 * RecordBatch.buffers   16 bytes each (struct Buffer { offset: i64, length: i64 })
 * variadic counts        8 bytes each
 * Schema / Field lists   4 bytes each (offsets to tables), nested at most 64 deep
 * ```
 * Returns why the counts cannot be right, or null.
 */
export function metadataCountProblem(metadata) {
    const size = metadata.byteLength;
    try {
        const message = FbMessage.getRootAsMessage(new ByteBuffer(metadata));
        switch (message.headerType()) {
            case FbMessageHeader.RecordBatch:
                return recordBatchProblem(message.header(new FbRecordBatch()), size);
            case FbMessageHeader.DictionaryBatch: {
                const dictionary = message.header(new FbDictionaryBatch());
                return recordBatchProblem(dictionary?.data() ?? null, size);
            }
            case FbMessageHeader.Schema: {
                const schema = message.header(new FbSchema());
                if (schema === null)
                    return 'the schema header is missing';
                const count = schema.fieldsLength();
                if (count * 4 > size)
                    return `the schema claims ${count} fields in ${size} bytes of metadata`;
                let visited = 0;
                const walk = (field, depth) => {
                    if (field === null)
                        return null;
                    if (depth > MAX_DEPTH)
                        return `fields nest deeper than ${MAX_DEPTH}`;
                    if (++visited * 4 > size)
                        return `the schema claims more fields than ${size} bytes of metadata hold`;
                    const children = field.childrenLength();
                    if (children * 4 > size)
                        return `a field claims ${children} children in ${size} bytes of metadata`;
                    for (let c = 0; c < children; c++) {
                        const problem = walk(field.children(c), depth + 1);
                        if (problem !== null)
                            return problem;
                    }
                    return null;
                };
                for (let f = 0; f < count; f++) {
                    const problem = walk(schema.fields(f), 1);
                    if (problem !== null)
                        return problem;
                }
                return null;
            }
            default:
                return null;
        }
    }
    catch (error) {
        return `the metadata flatbuffer is unreadable: ${error.message}`;
    }
}
const MAX_DEPTH = 64;
function recordBatchProblem(batch, size) {
    if (batch === null)
        return 'the record batch header is missing';
    const nodes = batch.nodesLength();
    const buffers = batch.buffersLength();
    const variadic = batch.variadicBufferCountsLength();
    if (nodes * 16 > size)
        return `the record batch claims ${nodes} field nodes in ${size} bytes of metadata`;
    if (buffers * 16 > size)
        return `the record batch claims ${buffers} buffers in ${size} bytes of metadata`;
    if (variadic * 8 > size)
        return `the record batch claims ${variadic} variadic counts in ${size} bytes of metadata`;
    return null;
}
