import { ShuffleError } from '../errors.js';
import { BatchCoalescer } from '../reader/batch-coalescer.js';
import { ShuffleReader } from '../reader/shuffle-reader.js';
import { sameSchema } from '../writer/same-schema.js';
import { idLocation } from './map-output-id.js';
import { assertMapStatus, rangeTotals } from './map-status.js';
/** Map outputs read at once by default (Spark's reducer fetches several blocks in flight). */
export const DEFAULT_REDUCE_CONCURRENCY = 4;
/** How long a reader waits for map outputs that are not committed yet, by default. */
export const DEFAULT_MAP_OUTPUT_WAIT_MS = 120_000;
/**
 * Reads partition p (or a range of partitions) across all the map outputs of a
 * shuffle as one stream of RecordBatches (Sail's merged stream): several map
 * outputs are read at once, each one batch ahead, and batches are yielded as
 * they become ready, so outputs interleave, but the batches of one map output
 * keep their order. Every output is read through ShuffleReader (checksums,
 * bounds) and checked against its status: its index must give the partition
 * lengths the status gives, and the range must hold the rows the status counts.
 *
 * Only committed outputs are read: the ones the statuses name (a status exists
 * only once its output is committed), never another attempt's files.
 *
 * Protocol: `new ReduceReader(options)`, then iterate (`for await`). Stopping
 * early (`break`, `return()`, a thrown error, or `signal`) closes every open
 * file, drops the waits for map outputs and clears the timeout: nothing is
 * left behind. Single use.
 */
export class ReduceReader {
    options;
    metrics = {
        outputsRead: 0,
        outputsSkipped: 0,
        attemptsRead: [],
        bytesRead: 0,
        batches: 0,
        rows: 0,
        maxOpen: 0,
        waitMs: 0,
    };
    start;
    end;
    concurrency;
    generator;
    constructor(options) {
        this.options = options;
        const range = typeof options.partitions === 'number' ? { start: options.partitions, end: options.partitions + 1 } : options.partitions;
        if (!(Number.isInteger(range?.start) && Number.isInteger(range?.end) && range.start >= 0 && range.start < range.end)) {
            throw new ShuffleError('CS_INVALID_ARGUMENT', `partitions must be a partition number or a non-empty range {start, end}, got ${JSON.stringify(options.partitions)}`);
        }
        this.start = range.start;
        this.end = range.end;
        this.concurrency = options.concurrency ?? DEFAULT_REDUCE_CONCURRENCY;
        positiveInteger('concurrency', this.concurrency);
        if (options.coalesceRows !== undefined)
            positiveInteger('coalesceRows', options.coalesceRows);
        if (options.waitTimeoutMs !== undefined && !(options.waitTimeoutMs >= 0)) {
            throw new ShuffleError('CS_INVALID_ARGUMENT', `waitTimeoutMs must be a number >= 0, got ${options.waitTimeoutMs}`);
        }
        if (Array.isArray(options.maps))
            this.checkStatuses(options.maps);
        this.generator = this.run();
    }
    next() {
        return this.generator.next();
    }
    /** Stops reading and releases every open file and wait. */
    return() {
        return this.generator.return(undefined);
    }
    [Symbol.asyncIterator]() {
        return this;
    }
    async *run() {
        const stop = new AbortController();
        const open = new Set();
        const ready = [];
        const unknown = new Set();
        // Every source's reads land in `steps`; statuses, failures, the timeout and abort only
        // poke. The loop waits on one fresh promise at a time (no Promise.race over a promise
        // that outlives many batches, which would pile up handlers on it).
        const steps = [];
        let notify = deferred();
        const poke = () => notify.resolve();
        const post = (step) => {
            steps.push(step);
            poke();
        };
        let failure = null;
        let timer;
        let coalescer = null;
        let schema = null;
        const onOuterAbort = () => {
            stop.abort();
            poke();
        };
        this.options.signal?.addEventListener('abort', onOuterAbort, { once: true });
        try {
            if (this.options.signal?.aborted)
                stop.abort();
            if (Array.isArray(this.options.maps))
                ready.push(...this.options.maps);
            else
                this.waitForOutputs(this.options.maps, stop.signal, ready, unknown, poke, (e) => (failure ??= e));
            if (unknown.size > 0) {
                const timeoutMs = this.options.waitTimeoutMs ?? DEFAULT_MAP_OUTPUT_WAIT_MS;
                const locator = this.options.maps;
                timer = setTimeout(() => {
                    if (unknown.size === 0)
                        return;
                    const missing = [...unknown].sort((a, b) => a - b);
                    failure ??= new ShuffleError('CS_MAP_OUTPUT_TIMEOUT', `${missing.length} of ${locator.numMaps} map outputs were not committed within ${timeoutMs} ms (maps ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', ...' : ''})`, { shuffle: locator.shuffleId, map: missing[0] });
                    poke();
                }, timeoutMs);
            }
            for (;;) {
                if (stop.signal.aborted)
                    throw new ShuffleError('CS_ABORTED', 'the reduce reader was aborted');
                if (failure !== null)
                    throw failure;
                while (open.size < this.concurrency && ready.length > 0) {
                    const status = ready.shift();
                    if (rangeTotals(status, this.start, this.end).bytes === 0) {
                        this.metrics.outputsSkipped++;
                        continue;
                    }
                    open.add(this.openSource(status, post));
                    this.metrics.maxOpen = Math.max(this.metrics.maxOpen, open.size);
                }
                if (unknown.size === 0)
                    clearTimeout(timer);
                if (open.size === 0 && ready.length === 0 && unknown.size === 0)
                    break;
                const step = steps.shift();
                if (step === undefined) {
                    const waitStarted = open.size === 0 ? performance.now() : -1;
                    notify = deferred();
                    await notify.promise;
                    if (waitStarted >= 0)
                        this.metrics.waitMs += performance.now() - waitStarted;
                    continue;
                }
                const { source } = step;
                if (step.kind === 'error')
                    throw step.error;
                if (step.kind === 'end') {
                    open.delete(source);
                    await closeSource(source);
                    this.metrics.outputsRead++;
                    continue;
                }
                const batch = step.batch;
                source.rows += batch.numRows;
                source.pending = this.nextStep(source).then(post);
                if (schema === null)
                    schema = batch.schema;
                else if (batch.schema !== schema && !sameSchema(schema, batch.schema)) {
                    throw new ShuffleError('CS_SCHEMA_MISMATCH', 'map outputs of one shuffle disagree about the schema', {
                        ...idLocation(source.status.id),
                        file: `${source.status.location.prefix}.data`,
                    });
                }
                if (this.options.coalesceRows === undefined) {
                    yield this.count(batch);
                    continue;
                }
                coalescer ??= new BatchCoalescer(schema, this.options.coalesceRows);
                for (const out of coalescer.push(batch))
                    yield this.count(out);
            }
            const last = coalescer?.finish();
            if (last)
                yield this.count(last);
        }
        finally {
            stop.abort(); // drops the waits for map outputs still pending
            this.options.signal?.removeEventListener('abort', onOuterAbort);
            clearTimeout(timer);
            await Promise.all([...open].map(async (source) => {
                await source.pending; // the read in flight (never rejects) must end before its file closes
                await closeSource(source);
            }));
        }
    }
    count(batch) {
        this.metrics.batches++;
        this.metrics.rows += batch.numRows;
        return batch;
    }
    /** Starts waiting for every map output; each status goes to `ready` when it comes. */
    waitForOutputs(locator, signal, ready, unknown, poke, fail) {
        for (let m = 0; m < locator.numMaps; m++)
            unknown.add(m);
        let numPartitions = null;
        for (let m = 0; m < locator.numMaps; m++) {
            locator.waitFor(m, signal).then((status) => {
                try {
                    this.checkStatus(status, locator.shuffleId, m);
                    numPartitions ??= status.numPartitions;
                    if (status.numPartitions !== numPartitions) {
                        throw new ShuffleError('CS_INVALID_ARGUMENT', `the output has ${status.numPartitions} partitions, others have ${numPartitions}`, idLocation(status.id));
                    }
                    ready.push(status);
                }
                catch (error) {
                    fail(error);
                }
                unknown.delete(m);
                poke();
            }, (error) => {
                if (!signal.aborted)
                    fail(error); // after close, the abort is ours
                unknown.delete(m);
                poke();
            });
        }
    }
    checkStatuses(statuses) {
        const seen = new Map();
        for (const status of statuses) {
            const first = statuses[0];
            this.checkStatus(status, first.id.shuffleId, null);
            const twin = seen.get(status.id.mapId);
            if (twin !== undefined) {
                throw new ShuffleError('CS_INVALID_ARGUMENT', `two attempts of one map task (${twin.id.attempt} and ${status.id.attempt}): name the one to read`, idLocation(status.id));
            }
            if (status.numPartitions !== first.numPartitions) {
                throw new ShuffleError('CS_INVALID_ARGUMENT', `the output has ${status.numPartitions} partitions, map ${first.id.mapId}'s has ${first.numPartitions}`, idLocation(status.id));
            }
            seen.set(status.id.mapId, status);
        }
    }
    checkStatus(status, shuffleId, mapId) {
        assertMapStatus(status);
        const where = idLocation(status.id);
        if (status.id.shuffleId !== shuffleId)
            throw new ShuffleError('CS_INVALID_ARGUMENT', `the status is of shuffle ${status.id.shuffleId}, not ${shuffleId}`, where);
        if (mapId !== null && status.id.mapId !== mapId)
            throw new ShuffleError('CS_INVALID_ARGUMENT', `asked for map ${mapId}, got a status of map ${status.id.mapId}`, where);
        if (this.end > status.numPartitions) {
            throw new ShuffleError('CS_INVALID_ARGUMENT', `partition range [${this.start}, ${this.end}) is not within the output's ${status.numPartitions} partitions`, where);
        }
    }
    openSource(status, post) {
        const source = { status, reader: null, batches: null, rows: 0, pending: Promise.resolve() };
        this.metrics.attemptsRead.push(status.id);
        this.metrics.bytesRead += rangeTotals(status, this.start, this.end).bytes;
        source.pending = (async () => {
            try {
                const { openOutput, readerOptions } = this.options;
                source.reader = openOutput === undefined
                    ? await ShuffleReader.open(status.location.prefix, readerOptions)
                    : await ShuffleReader.fromSources(await openOutput(status), readerOptions);
                assertMatchesStatus(source.reader, status);
                source.batches = source.reader.readPartitions(this.start, this.end);
            }
            catch (error) {
                return { kind: 'error', source, error };
            }
            return this.nextStep(source);
        })().then(post);
        return source;
    }
    async nextStep(source) {
        try {
            const next = await source.batches.next();
            if (!next.done)
                return { kind: 'batch', source, batch: next.value };
            const expected = rangeTotals(source.status, this.start, this.end).rows;
            if (source.rows !== expected) {
                throw new ShuffleError('CS_CORRUPT_DATA', `partitions [${this.start}, ${this.end}) hold ${source.rows} rows, the map status says ${expected}`, {
                    ...idLocation(source.status.id),
                    file: `${source.status.location.prefix}.data`,
                });
            }
            return { kind: 'end', source };
        }
        catch (error) {
            return { kind: 'error', source, error };
        }
    }
}
/** The files on disk must be the output the status describes (not another attempt's, not a replaced one). */
function assertMatchesStatus(reader, status) {
    const where = { ...idLocation(status.id), file: `${status.location.prefix}.index` };
    if (reader.numPartitions !== status.numPartitions) {
        throw new ShuffleError('CS_CORRUPT_DATA', `the output has ${reader.numPartitions} partitions, its map status says ${status.numPartitions}`, where);
    }
    for (let p = 0; p < status.numPartitions; p++) {
        if (reader.partitionLength(p) !== status.partitionLengths[p]) {
            throw new ShuffleError('CS_CORRUPT_DATA', `the index gives partition ${p} ${reader.partitionLength(p)} bytes, the map status ${status.partitionLengths[p]}: these files are not the output the status describes`, { ...where, partition: p });
        }
    }
}
async function closeSource(source) {
    await source.batches?.return(undefined).catch(() => undefined);
    await source.reader?.close();
}
function positiveInteger(name, value) {
    if (!(Number.isInteger(value) && value >= 1))
        throw new ShuffleError('CS_INVALID_ARGUMENT', `${name} must be an integer >= 1, got ${String(value)}`);
}
function deferred() {
    let resolve;
    const promise = new Promise((r) => (resolve = r));
    return { promise, resolve };
}
