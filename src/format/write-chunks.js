/** Most buffers handed to one writev call (Linux IOV_MAX is 1024). */
const MAX_IOVECS = 512;
/**
 * Writes `chunks` back to back at `position` with positional writev calls,
 * resuming after short writes; returns the bytes written. Errors are the
 * file system's, for the caller to name the file.
 */
export async function writeChunks(handle, chunks, position) {
    let written = 0;
    for (let i = 0; i < chunks.length; i += MAX_IOVECS) {
        const group = chunks.slice(i, i + MAX_IOVECS);
        let groupBytes = 0;
        for (const chunk of group)
            groupBytes += chunk.byteLength;
        for (let done = 0; done < groupBytes;) {
            const { bytesWritten } = await handle.writev(skipBytes(group, done), position + written + done);
            if (bytesWritten === 0)
                throw new Error('the file system accepted no bytes');
            done += bytesWritten;
        }
        written += groupBytes;
    }
    return written;
}
/** The chunks after their first `skip` bytes. */
function skipBytes(chunks, skip) {
    if (skip === 0)
        return chunks;
    const out = [];
    for (const chunk of chunks) {
        if (skip >= chunk.byteLength) {
            skip -= chunk.byteLength;
            continue;
        }
        out.push(chunk.subarray(skip));
        skip = 0;
    }
    return out;
}
