import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** What flechette made of a stream: its rows (support/flechette.ts's rowsOf), or why it did not read it. */
export type FlechetteReading = { rows: string[] } | { refused: string };

/**
 * flechette reading streams in a child process with a heap of its own
 * (`heapMb`): on damaged bytes it may run out of memory or take too long, and
 * the child is then ended and replaced, the reading counted as refused.
 */
export class FlechetteProcess {
  private child: ChildProcess | null = null;
  /** started ahead, to take over at once from a child that ended (starting one takes a second or two) */
  private spare: ChildProcess | null = null;
  private next = 0;
  /** how many children ended (out of memory, timed out) and were replaced */
  replaced = 0;

  constructor(
    private readonly heapMb = 32,
    private readonly timeoutMs = 20_000,
  ) {}

  async read(bytes: Uint8Array): Promise<FlechetteReading> {
    const child = (this.child ??= this.takeSpare());
    const id = this.next++;
    return new Promise<FlechetteReading>((resolve) => {
      const finish = (reading: FlechetteReading, ended: boolean) => {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
        if (ended) {
          this.child = null;
          this.replaced++;
          child.kill('SIGKILL');
        }
        resolve(reading);
      };
      const onMessage = (reply: { id: number } & FlechetteReading) => {
        if (reply.id === id) finish(reply, false);
      };
      const onExit = (code: number | null, signal: string | null) => finish({ refused: `flechette's process ended (${signal ?? `exit ${code}`})` }, true);
      const timer = setTimeout(() => finish({ refused: `no answer in ${this.timeoutMs} ms` }, true), this.timeoutMs);
      child.on('message', onMessage);
      child.on('exit', onExit);
      child.send({ id, bytes });
    });
  }

  async close(): Promise<void> {
    const children = [this.child, this.spare];
    this.child = this.spare = null;
    await Promise.all(children.map((child) => (child === null ? undefined : stop(child))));
  }

  private takeSpare(): ChildProcess {
    const child = this.spare ?? this.start();
    this.spare = this.start();
    return child;
  }

  private start(): ChildProcess {
    const entry = fileURLToPath(new URL('./flechette-child.ts', import.meta.url));
    return fork(entry, [], { execArgv: ['--import', 'tsx', `--max-old-space-size=${this.heapMb}`], serialization: 'advanced', stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.disconnect();
  await exited;
}
