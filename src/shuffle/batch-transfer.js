import { Data, RecordBatch, Struct, Vector } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
/** Prepares `batch` for postMessage (see TransferMode for what happens to the sender's batch). */
export function batchToTransferable(batch, mode = 'exclusive') {
    if (mode !== 'exclusive' && mode !== 'copy')
        throw new ShuffleError('CS_INVALID_ARGUMENT', `transfer mode must be 'exclusive' or 'copy', got ${JSON.stringify(mode)}`);
    // how many views of this batch each ArrayBuffer backs: only a buffer backing one view, wholly, may move
    const viewsPer = new Map();
    visitViews(batch.data, (view) => viewsPer.set(view.buffer, (viewsPer.get(view.buffer) ?? 0) + 1));
    const out = { batch: { data: null }, transfer: [], transferredBytes: 0, copiedBytes: 0 };
    const send = (view) => {
        const buffer = view.buffer;
        if (isShared(buffer))
            return view;
        const whole = view.byteOffset === 0 && view.byteLength === buffer.byteLength && viewsPer.get(buffer) === 1;
        if (mode === 'exclusive' && whole && buffer.byteLength > 0) {
            out.transfer.push(buffer);
            out.transferredBytes += view.byteLength;
            return view;
        }
        const copy = copyView(view);
        if (copy.byteLength > 0)
            out.transfer.push(copy.buffer);
        out.copiedBytes += view.byteLength;
        return copy;
    };
    out.batch.data = encodeData(batch.data, send);
    return out;
}
/** Rebuilds the batch on the receiving side; `schema` is the one the sender's batches have. */
export function batchFromTransferable(batch, schema) {
    return new RecordBatch(schema, decodeData(batch.data, new Struct(schema.fields)));
}
function encodeData(data, send) {
    const buffers = [data.valueOffsets, data.values, data.nullBitmap, data.typeIds];
    return {
        offset: data.offset,
        length: data.length,
        nullCount: data.nullCount,
        buffers: buffers.map((b) => (b === undefined || b === null ? null : send(b))),
        variadic: (data.variadicBuffers ?? []).map((b) => send(b)),
        children: data.children.map((child) => encodeData(child, send)),
        dictionary: data.dictionary === undefined ? null : data.dictionary.data.map((d) => encodeData(d, send)),
    };
}
function decodeData(t, type) {
    const buffers = t.buffers.map((b) => b ?? undefined);
    const children = t.children.map((child, i) => {
        const field = type.children?.[i];
        if (field === undefined)
            throw new ShuffleError('CS_SCHEMA_MISMATCH', `a transferred batch has more children than its type ${String(type)}`);
        return decodeData(child, field.type);
    });
    let dictionary;
    if (t.dictionary !== null) {
        const valueType = type.dictionary;
        if (valueType === undefined)
            throw new ShuffleError('CS_SCHEMA_MISMATCH', `a transferred batch has a dictionary where its type ${String(type)} has none`);
        dictionary = new Vector(t.dictionary.map((d) => decodeData(d, valueType)));
    }
    return new Data(type, t.offset, t.length, t.nullCount, buffers, children, dictionary, t.variadic);
}
function visitViews(data, visit) {
    for (const b of [data.valueOffsets, data.values, data.nullBitmap, data.typeIds])
        if (b)
            visit(b);
    for (const b of data.variadicBuffers ?? [])
        visit(b);
    for (const child of data.children)
        visitViews(child, visit);
    for (const d of data.dictionary?.data ?? [])
        visitViews(d, visit);
}
/** A fresh copy of exactly the view's bytes, of the same typed-array kind. */
function copyView(view) {
    const bytes = new Uint8Array(view.byteLength);
    bytes.set(new Uint8Array(view.buffer, view.byteOffset, view.byteLength));
    const Kind = view.constructor;
    const elementSize = view.BYTES_PER_ELEMENT ?? 1;
    return view instanceof DataView ? new DataView(bytes.buffer) : new Kind(bytes.buffer, 0, view.byteLength / elementSize);
}
function isShared(buffer) {
    return typeof SharedArrayBuffer !== 'undefined' && buffer instanceof SharedArrayBuffer;
}
