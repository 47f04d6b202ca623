export class ShuffleError extends Error {
    name = 'ShuffleError';
    code;
    where;
    constructor(code, message, where = {}, options) {
        super(withLocation(message, where), options);
        this.code = code;
        this.where = where;
    }
}
function withLocation(message, where) {
    const parts = [];
    if (where.shuffle !== undefined)
        parts.push(`shuffle ${where.shuffle}`);
    if (where.map !== undefined)
        parts.push(`map ${where.map}`);
    if (where.attempt !== undefined)
        parts.push(`attempt ${where.attempt}`);
    if (where.file !== undefined)
        parts.push(`file ${where.file}`);
    if (where.partition !== undefined)
        parts.push(`partition ${where.partition}`);
    if (where.offset !== undefined)
        parts.push(`byte offset ${where.offset}`);
    if (where.column !== undefined)
        parts.push(`column "${where.column}"`);
    if (where.row !== undefined)
        parts.push(`row ${where.row}`);
    return parts.length === 0 ? message : `${message} (${parts.join(', ')})`;
}
/** Wraps a Node.js file-system error in a `ShuffleError` that names the file. */
export function ioError(action, file, cause) {
    const errno = cause?.code;
    const code = errno === 'ENOENT' || errno === 'ENOTDIR' ? 'CS_FILE_NOT_FOUND' : 'CS_IO';
    const reason = cause instanceof Error ? cause.message : String(cause);
    return new ShuffleError(code, `cannot ${action}: ${reason}`, { file }, { cause });
}
/** Turns any thrown value into plain data; a ShuffleError keeps its code and location, causes are kept 4 deep. */
export function serializeError(error, depth = 4) {
    if (!(error instanceof Error))
        return { name: 'Error', message: String(error) };
    const out = { name: error.name, message: error.message };
    if (error.stack !== undefined)
        out.stack = error.stack;
    if (error instanceof ShuffleError) {
        out.code = error.code;
        out.where = { ...error.where };
    }
    if (error.cause !== undefined && depth > 1)
        out.cause = serializeError(error.cause, depth - 1);
    return out;
}
/**
 * Rebuilds an error from serializeError's data: a ShuffleError (same code, location and
 * message) when it had a `CS_` code, a plain Error otherwise; name, stack and causes are kept.
 */
export function deserializeError(data) {
    const cause = data.cause === undefined ? undefined : deserializeError(data.cause);
    const options = cause === undefined ? undefined : { cause };
    let error;
    if (typeof data.code === 'string' && data.code.startsWith('CS_')) {
        // the message already names the location: build without one, then attach it
        error = new ShuffleError(data.code, data.message, {}, options);
        Object.defineProperty(error, 'where', { value: { ...data.where }, enumerable: true });
    }
    else {
        error = new Error(data.message, options);
    }
    error.name = data.name;
    if (data.stack !== undefined)
        error.stack = data.stack;
    return error;
}
