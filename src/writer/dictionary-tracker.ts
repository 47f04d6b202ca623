import type { Data, Vector } from 'apache-arrow';
import { ShuffleError } from '../errors.js';
import { viewValueOf, type ViewValue } from '../format/binary-view.js';
import type { Codec } from '../format/codec.js';
import { STORE_RAW, type CompressionPolicy } from '../format/compression-advisor.js';
import { compressionBound, encodeRecordBatchMessage, type EncodedMessage, type FieldNodeInfo } from '../format/ipc-message.js';
import type { MemoryReservation } from '../memory/memory-pool.js';
import { IdentityRows, onePartition, planAppend, splitAppend } from './append-rows.js';
import { ColumnBuffer } from './column-buffer.js';
import { isFlat, type ColumnLayout, type DictionaryLayout } from './column-layout.js';
import { maxIndexById } from './dictionary-indices.js';
import { prepareSourceColumn, type SourceColumn } from './source-column.js';
import { ScratchSelections, withScratchMemory } from './split-plan.js';

/**
 * How a partition's stream receives new dictionary values: `delta` sends only
 * them (a delta dictionary batch, the smallest; polars cannot read deltas),
 * `replacement` sends the whole dictionary again (a non-delta batch, which
 * every Arrow stream reader accepts).
 */
export type DictionaryUpdates = 'delta' | 'replacement';

/** One dictionary id: the values all partitions' streams share, and how far each stream has received them. */
interface DictionaryState {
  readonly layout: DictionaryLayout;
  /** the largest index every field of this id can hold (maxIndexById) */
  readonly maxIndex: number;
  /** bumped when the dictionary has to start over (its indices would no longer fit) */
  epoch: number;
  /** values so far in this epoch */
  length: number;
  /**
   * this epoch's dictionary batches in order. Deltas: the first replaces any
   * earlier dictionary, the others append to it. Replacements: each holds
   * every value so far.
   */
  chunks: Promise<EncodedMessage>[];
  /** bytes of `chunks` held in the reservation (a superseded replacement's are retired) */
  chunkBytes: number;
  /** replacements only: every value so far, gathered compactly */
  values: ColumnBuffer | null;
  /** the input dictionary the last batch brought, and where its values are (null: at their own indices) */
  input: Vector | null;
  remap: Int32Array | null;
  /** per partition: the epoch and how many of its chunks the partition's stream has received */
  readonly sentEpoch: Int32Array;
  readonly sentChunks: Uint32Array;
}

/**
 * Keeps, per dictionary id, one dictionary for every partition: the values of
 * the input batches' dictionaries, appended as batches bring new ones, so that
 * every partition's IPC stream carries standard dictionary batches before the
 * record batches that need them (the first one replacing, later ones deltas).
 *
 * An input dictionary that extends the previous one (the same leading chunks,
 * as arrow-js builds them from IPC delta batches, or the same leading values)
 * adds only its new values and keeps its indices. Any other dictionary is
 * appended whole and its indices are remapped (split-dictionary.ts). When the
 * indices would outgrow their type, the writer flushes every partition and the
 * dictionary starts over in a new epoch (a replacement dictionary batch).
 * Values are not de-duplicated across unrelated dictionaries.
 *
 * ```text
 * partition stream: schema | dict(id, values 0..n) | batch | dict delta(id, n..m) | batch | ...
 * ```
 *
 * Protocol: `register` every dictionary of a batch before it is split (on
 * "overflow": flush, `restart(id)`, register again), `remap(id)` while
 * planning its split, `messagesFor(p)` right before each payload of partition
 * p is stored, `release()` at the end. Memory: the encoded dictionary batches,
 * and from the first `register` on the per-partition state (8 bytes a
 * partition and dictionary), are reserved in the writer's reservation until `release`.
 */
export class DictionaryTracker {
  private readonly states = new Map<number, DictionaryState>();
  private readonly identity = new IdentityRows();
  private readonly scratch: ScratchSelections;
  /** bytes this tracker holds in the reservation */
  private held = 0;
  /** whether the per-partition state is in `held` */
  private stateHeld = false;
  /**
   * Bytes of dictionary batches no partition will be sent again (an ended
   * epoch's, a superseded replacement): still held, as payloads cached before
   * may point at them, until a spill has written those payloads (dropRetired).
   */
  private retiredBytes = 0;

  constructor(
    layouts: readonly DictionaryLayout[],
    private readonly numPartitions: number,
    private readonly reservation: MemoryReservation,
    private readonly codec: Codec | null,
    private readonly policy: CompressionPolicy = STORE_RAW,
    private readonly updates: DictionaryUpdates = 'delta',
  ) {
    const maxIndex = maxIndexById(layouts);
    for (const layout of layouts) {
      if (this.states.has(layout.id)) continue; // fields sharing a dictionary share its state
      this.states.set(layout.id, {
        layout,
        maxIndex: maxIndex.get(layout.id)!,
        epoch: 0,
        length: 0,
        chunks: [],
        chunkBytes: 0,
        values: null,
        input: null,
        remap: null,
        sentEpoch: new Int32Array(numPartitions).fill(-1),
        sentChunks: new Uint32Array(numPartitions),
      });
    }
    this.scratch = new ScratchSelections((bytes) => this.tryHold(bytes));
  }

  get size(): number {
    return this.states.size;
  }

  /**
   * Takes in the dictionary a batch brings for `id`. Returns "overflow" when
   * its values would push the dictionary past what the index type can point
   * at: nothing has changed then.
   */
  async register(id: number, dictionary: Vector): Promise<'ok' | 'overflow'> {
    if (!this.stateHeld) {
      // 10 dictionary columns at 1,000,000 partitions keep 80 MB
      await this.hold(PARTITION_STATE_BYTES * this.numPartitions * this.states.size);
      this.stateHeld = true;
    }
    const s = this.state(id);
    if (dictionary === s.input) return 'ok';
    const inputLength = dictionary.length;
    let firstNew = 0;
    let remap: Int32Array | null = null;
    if (s.input !== null && extendsDictionary(dictionary, s.input, s.layout.values)) {
      firstNew = s.input.length;
      if (s.remap !== null) remap = extendRemap(s.remap, inputLength, firstNew, s.length);
    } else if (s.input !== null) {
      remap = extendRemap(new Int32Array(0), inputLength, 0, s.length);
    }
    const added = inputLength - firstNew;
    // only remapped indices can outgrow the index type: at their own indices they are the input's, which fit
    // (an Int8 dictionary of 129 values is valid Arrow, its last value unreachable; refused, it lost its rows)
    if (remap !== null && s.length + added - 1 > s.maxIndex) return 'overflow';
    if (added > 0 || s.chunks.length === 0) await this.appendChunk(s, dictionary, firstNew, inputLength);
    s.length += added;
    s.input = dictionary;
    s.remap = remap;
    return 'ok';
  }

  /** Starts dictionary `id` over, empty, in a new epoch (after the writer flushed every partition). */
  restart(id: number): void {
    const s = this.state(id);
    s.epoch++;
    s.length = 0;
    s.chunks = [];
    this.retire(s); // (the flush before the restart cached payloads that point at them)
    if (s.values !== null) this.unhold(s.values.release());
    s.values = null;
    s.input = null;
    s.remap = null;
  }

  /** Bytes held for dictionary batches no partition will be sent again. */
  get retired(): number {
    return this.retiredBytes;
  }

  /**
   * Releases `bytes` of the retired dictionary batches; call it once a spill
   * that began after they were retired has written every cached payload.
   * Returns the bytes released.
   */
  dropRetired(bytes: number): number {
    const dropped = Math.min(bytes, this.retiredBytes);
    this.retiredBytes -= dropped;
    this.unhold(dropped);
    return dropped;
  }

  /** Output index of each input index of the last registered dictionary of `id`, or null when they are equal. */
  remap(id: number): Int32Array | null {
    return this.state(id).remap;
  }

  /** The dictionary batches partition p's stream lacks, in order; from now on it is counted as having them. */
  messagesFor(p: number): Promise<EncodedMessage>[] {
    const out: Promise<EncodedMessage>[] = [];
    for (const s of this.states.values()) {
      if (s.sentEpoch[p] !== s.epoch) {
        s.sentEpoch[p] = s.epoch;
        s.sentChunks[p] = 0;
      }
      if (this.updates === 'replacement') {
        if (s.sentChunks[p]! < s.chunks.length) out.push(s.chunks[s.chunks.length - 1]!); // the latest holds every value
      } else {
        for (let c = s.sentChunks[p]!; c < s.chunks.length; c++) out.push(s.chunks[c]!);
      }
      s.sentChunks[p] = s.chunks.length;
    }
    return out;
  }

  /** Waits for every encoding and releases all the memory this tracker holds. */
  async release(): Promise<void> {
    await Promise.allSettled([...this.states.values()].flatMap((s) => s.chunks));
    // what the reservation stops counting must go too (a finished writer kept its encoded dictionaries)
    for (const s of this.states.values()) {
      s.chunks = [];
      s.values?.release();
      s.values = null;
      s.input = null;
      s.remap = null;
    }
    this.scratch.clear();
    this.reservation.shrink(this.held);
    this.held = 0;
    this.retiredBytes = 0;
  }

  private state(id: number): DictionaryState {
    const s = this.states.get(id);
    if (s === undefined) throw new ShuffleError('CS_INVALID_ARGUMENT', `no dictionary field has id ${id}`);
    return s;
  }

  /**
   * Encodes values [from, to) of `dictionary` as the state's next dictionary
   * batch (with replacements: all values so far). They are first gathered into
   * one compact buffer (the input may be sliced, chunked, padded), encoded
   * (compressed), then kept as one array.
   */
  private async appendChunk(s: DictionaryState, dictionary: Vector, from: number, to: number): Promise<void> {
    const replacing = this.updates === 'replacement';
    const column = replacing ? (s.values ??= new ColumnBuffer(s.layout.values)) : new ColumnBuffer(s.layout.values);
    const before = replacing ? s.length : 0;
    const rows = before + to - from;
    try {
      let filled = before;
      let chunkStart = 0;
      for (const data of dictionary.data as Data[]) {
        const a = Math.max(from, chunkStart) - chunkStart;
        const b = Math.min(to, chunkStart + data.length) - chunkStart;
        chunkStart += data.length;
        if (b <= a) continue;
        // grown geometrically when it must grow (always asking for 1.5x the capacity grew it on every replacement)
        const capacity = column.capacity >= rows ? column.capacity : Math.max(rows, Math.ceil(column.capacity * 1.5));
        await this.append(column, prepareSourceColumn(data, s.layout.values), a, b, filled, capacity);
        filled += b - a;
      }
      const nodes: FieldNodeInfo[] = [];
      const buffers: Uint8Array[] = [];
      column.snapshot(rows, nodes, buffers, false);
      const bound = compressionBound(column.snapshotBytes(rows));
      await this.hold(bound);
      const target = { id: s.layout.id, isDelta: !replacing && s.chunks.length > 0 };
      const encoded = await encodeRecordBatchMessage(rows, nodes, buffers, this.codec, this.codec === null ? undefined : this.policy, target);
      // one compact copy, so the gathered values (and any compressor output) can go
      const bytes = new Uint8Array(encoded.byteLength);
      let at = 0;
      for (const chunk of encoded.chunks) {
        bytes.set(chunk, at);
        at += chunk.byteLength;
      }
      if (replacing && s.chunks.length > 0) {
        // superseded: a partition is only ever sent the latest, which holds every value
        this.retire(s);
        s.chunks[s.chunks.length - 1] = SUPERSEDED;
      }
      s.chunks.push(Promise.resolve({ chunks: [bytes], byteLength: bytes.byteLength }));
      s.chunkBytes += bytes.byteLength;
      this.unhold(bound - bytes.byteLength);
    } finally {
      if (!replacing) this.unhold(column.release());
    }
  }

  private async append(column: ColumnBuffer, src: SourceColumn, a: number, b: number, filled: number, capacity: number): Promise<void> {
    await this.hold(this.identity.bytesFor(b) - this.identity.bytes);
    const ids = this.identity.get(b);
    const plan = await withScratchMemory(this.scratch, (bytes) => this.hold(bytes), () =>
      planAppend([src], [column], onePartition(ids, a, b), filled, capacity, this.scratch),
    );
    await this.hold(plan.growth.bytesAfter);
    plan.growth.apply();
    this.unhold(plan.growth.bytesBefore);
    splitAppend(plan.plans, [column], filled);
  }

  /** Moves the bytes of `s`'s chunks so far to the retired ones (see retiredBytes). */
  private retire(s: DictionaryState): void {
    this.retiredBytes += s.chunkBytes;
    s.chunkBytes = 0;
  }

  private async hold(bytes: number): Promise<void> {
    await this.reservation.grow(bytes);
    this.held += bytes;
  }

  private tryHold(bytes: number): boolean {
    if (!this.reservation.tryGrow(bytes)) return false;
    this.held += bytes;
    return true;
  }

  private unhold(bytes: number): void {
    this.reservation.shrink(bytes);
    this.held -= bytes;
  }
}

/** What a superseded replacement's place in `chunks` keeps (no partition is sent it again). */
const SUPERSEDED: Promise<EncodedMessage> = Promise.resolve({ chunks: [], byteLength: 0 });

/** A dictionary's state per partition: its sentEpoch and sentChunks entries. */
const PARTITION_STATE_BYTES = 8;

/** `previous` with input indices [from, length) mapped to base, base + 1, ... */
function extendRemap(previous: Int32Array, length: number, from: number, base: number): Int32Array {
  const remap = new Int32Array(length);
  remap.set(previous.subarray(0, Math.min(from, previous.length)));
  for (let i = from; i < length; i++) remap[i] = base + (i - from);
  return remap;
}

/**
 * Whether `next` starts with the values of `previous`: the same leading
 * chunks (arrow-js concatenates delta dictionaries onto the previous vector),
 * or, for single-chunk flat dictionaries, the same leading values byte for byte.
 */
function extendsDictionary(next: Vector, previous: Vector, layout: ColumnLayout): boolean {
  if (next.length < previous.length) return false;
  const a = previous.data as Data[];
  const b = next.data as Data[];
  if (a.length <= b.length && a.every((chunk, i) => chunk === b[i])) return true;
  if (a.length !== 1 || b.length !== 1 || !isFlat(layout)) return false;
  return sameLeadingValues(prepareSourceColumn(a[0]!, layout), prepareSourceColumn(b[0]!, layout), previous.length);
}

function bitAt(bytes: Uint8Array, bit: number): number {
  return (bytes[bit >>> 3]! >>> (bit & 7)) & 1;
}

/** Rows [0, n) of two flat columns hold the same values (and nulls). */
function sameLeadingValues(x: SourceColumn, y: SourceColumn, n: number): boolean {
  const layout = x.layout;
  const xViews = new DataView(x.bytes.buffer, x.bytes.byteOffset, x.bytes.byteLength);
  const yViews = new DataView(y.bytes.buffer, y.bytes.byteOffset, y.bytes.byteLength);
  for (let i = 0; i < n; i++) {
    const xValid = x.validity === null ? 1 : bitAt(x.validity, x.bitOffset + i);
    const yValid = y.validity === null ? 1 : bitAt(y.validity, y.bitOffset + i);
    if (xValid !== yValid) return false;
    if (xValid === 0) continue;
    switch (layout.kind) {
      case 'bool':
        if (bitAt(x.bytes, x.bitOffset + i) !== bitAt(y.bytes, y.bitOffset + i)) return false;
        break;
      case 'fixed-width':
        for (let b = i * layout.byteWidth, end = b + layout.byteWidth; b < end; b++) if (x.bytes[b] !== y.bytes[b]) return false;
        break;
      case 'binary': {
        const s = x.offsetStride;
        const xFrom = x.offsets![i * s]!;
        const yFrom = y.offsets![i * s]!;
        const length = x.offsets![(i + 1) * s]! - xFrom;
        if (y.offsets![(i + 1) * s]! - yFrom !== length) return false;
        for (let b = 0; b < length; b++) if (x.bytes[xFrom + b] !== y.bytes[yFrom + b]) return false;
        break;
      }
      case 'view': {
        const xValue = viewValueOf(x.bytes, xViews, x.variadic, i, xView)!;
        const yValue = viewValueOf(y.bytes, yViews, y.variadic, i, yView)!;
        if (xValue.length !== yValue.length) return false;
        for (let b = 0; b < xValue.length; b++) if (xValue.bytes[xValue.start + b] !== yValue.bytes[yValue.start + b]) return false;
        break;
      }
      default:
        break;
    }
  }
  return true;
}

// sameLeadingValues' views of value locations (the sources were checked by prepareSourceColumn, so every valid view resolves)
const xView: ViewValue = { bytes: new Uint8Array(0), start: 0, length: 0 };
const yView: ViewValue = { bytes: new Uint8Array(0), start: 0, length: 0 };
