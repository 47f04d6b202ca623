/**
 * Gathers dictionary indices through a remap: dst index (dstRow + j) =
 * remap[src index of row rowIds[start + j]]. The writer keeps one dictionary
 * per column for all input batches (dictionary-tracker.ts); a batch whose
 * dictionary is not the previous one's extension has its indices moved to
 * where its values landed. A null row's index is whatever the input held and
 * may lie outside the remap: it becomes 0.
 *
 * Worked example: remap [3, 4] (the batch's two values were appended after
 * three earlier ones), indices [1, 0, 1], rowIds [2, 0]:
 *
 * ```text
 * dst indices  [4, 3]
 * ```
 */
export function splitRemappedIndices(src, indexWidth, signed, remap, rowIds, start, end, dst, dstRow) {
    const bytes = src.bytes;
    switch (indexWidth) {
        case 1: {
            const s = signed ? new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : bytes;
            const d = dst.values;
            for (let k = start, j = dstRow; k < end; k++, j++)
                d[j] = remap[s[rowIds[k]]] | 0;
            return;
        }
        case 2: {
            const s = signed ? new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 1) : src.words16;
            const d = dst.values16;
            for (let k = start, j = dstRow; k < end; k++, j++)
                d[j] = remap[s[rowIds[k]]] | 0;
            return;
        }
        case 4: {
            const s = src.words32;
            const d = dst.values32;
            for (let k = start, j = dstRow; k < end; k++, j++)
                d[j] = remap[s[rowIds[k]]] | 0;
            return;
        }
        case 8: {
            // 64-bit indices: a valid one fits the remap, so its high word is 0; write the low word, high word 0
            const s = src.words32;
            const d = dst.values32;
            for (let k = start, j = dstRow << 1; k < end; k++, j += 2) {
                const r = rowIds[k] << 1;
                d[j] = s[r + 1] === 0 ? remap[s[r]] | 0 : 0;
                d[j + 1] = 0;
            }
            return;
        }
    }
}
