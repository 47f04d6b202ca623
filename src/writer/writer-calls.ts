import { ShuffleError } from '../errors.js';

/** A writer's life: open, then finishing and finished; aborted from any point. */
export type WriterState = 'open' | 'finishing' | 'finished' | 'aborted';

/**
 * Both writers' protocol for write() and finish(): one call at a time, each
 * let in on the calling tick, so a second call is refused before the first
 * has awaited anything: CS_WRITER_CLOSED once the writer is finishing,
 * finished or aborted, CS_WRITER_BUSY while another call runs. (Let in after
 * an await, a second finish() tore down the output the first was committing.)
 * abort() is not a call here: it may come at any time.
 */
export class OneCallAtATime {
  private running: 'write' | 'finish' | null = null;

  constructor(private readonly stateOf: () => WriterState) {}

  async run<T>(call: 'write' | 'finish', body: () => Promise<T>): Promise<T> {
    const state = this.stateOf();
    if (state !== 'open') throw new ShuffleError('CS_WRITER_CLOSED', `cannot ${call}: the writer is ${state}`);
    if (this.running !== null) throw new ShuffleError('CS_WRITER_BUSY', `cannot ${call}: ${this.running}() is still running (await each call before the next)`);
    this.running = call;
    try {
      return await body();
    } finally {
      this.running = null;
    }
  }
}

/**
 * What a write() or finish() that an abort() came into throws: CS_WRITER_CLOSED
 * saying when, with what the call ran into meanwhile as its cause (that error
 * itself when it is one of these already).
 */
export function writerAborted(when: string, cause?: unknown): ShuffleError {
  if (cause instanceof ShuffleError && cause.code === 'CS_WRITER_CLOSED') return cause;
  return new ShuffleError('CS_WRITER_CLOSED', `the writer was aborted ${when}`, {}, cause === undefined ? undefined : { cause });
}
