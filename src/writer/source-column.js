const NO_CHILDREN = Object.freeze([]);
export function prepareSourceColumn(data, layout) {
    const validity = data.nullCount > 0 && data.nullBitmap && data.nullBitmap.byteLength > 0 ? data.nullBitmap : null;
    const base = {
        layout,
        length: data.length,
        validity,
        bitOffset: data.offset,
        bytes: EMPTY,
        words16: null,
        words32: null,
        offsets: null,
        offsetStride: 1,
        children: NO_CHILDREN,
        dictionary: null,
    };
    switch (layout.kind) {
        case 'null':
            return base;
        case 'bool':
            return { ...base, bytes: asBytes(data.values) };
        case 'fixed-width':
            return { ...base, ...words(asBytes(data.values)) };
        case 'dictionary':
            return { ...base, ...words(asBytes(data.values)), dictionary: data.dictionary ?? null };
        case 'binary':
            return { ...base, bytes: asBytes(data.values), ...offsetsOf(data, layout.offsetWidth) };
        case 'list':
            return { ...base, ...offsetsOf(data, layout.offsetWidth), children: [prepareSourceColumn(data.children[0], layout.child)] };
        case 'fixed-size-list':
            return { ...base, children: [prepareSourceColumn(data.children[0], layout.child)] };
        case 'struct':
            return { ...base, children: layout.children.map((child, i) => prepareSourceColumn(data.children[i], child)) };
        case 'union': {
            const children = layout.children.map((child, i) => prepareSourceColumn(data.children[i], child));
            // no validity in a union: nulls are the children's
            const typeIds = asBytes(data.typeIds);
            const offsets = layout.mode === 'dense' ? new Int32Array(data.valueOffsets.buffer, data.valueOffsets.byteOffset, data.length) : null;
            return { ...base, validity: null, bytes: typeIds, offsets, children };
        }
    }
}
const EMPTY = new Uint8Array(0);
function words(bytes) {
    const words16 = bytes.byteOffset % 2 === 0 ? new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 1) : null;
    const words32 = bytes.byteOffset % 4 === 0 ? new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2) : null;
    return { bytes, words16, words32 };
}
function offsetsOf(data, offsetWidth) {
    const offsetBytes = asBytes(data.valueOffsets);
    const offsets = new Int32Array(offsetBytes.buffer, offsetBytes.byteOffset, offsetBytes.byteLength >>> 2);
    const stride = offsetWidth === 8 ? 2 : 1;
    if (stride === 2)
        assertOffsetsFitInt32(offsets, data.length);
    return { offsets, offsetStride: stride };
}
function asBytes(view) {
    if (!view)
        return EMPTY;
    return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}
/** Int64 offsets are read through their low words; offsets are ascending, so checking the last one suffices. */
function assertOffsetsFitInt32(offsets, length) {
    const high = offsets[length * 2 + 1] ?? 0;
    const low = offsets[length * 2] ?? 0;
    if (high !== 0 || low < 0) {
        throw new RangeError('a large binary or list column holds more than 2 GiB of data in one batch; split the batch');
    }
}
