import { readFileSync, rmSync } from 'node:fs';
import { ShuffleError } from '../errors.js';
import { UsageError, wantsHelp } from './args.js';
import {
  EXIT_FAILURE,
  EXIT_INTERRUPTED,
  EXIT_OK,
  EXIT_USAGE,
  Interrupted,
  writeLine,
  type CliContext,
  type CliIO,
} from './context.js';
import { CLEAN_HELP, DEMO_HELP, INSPECT_HELP, READ_HELP, USAGE, WRITE_HELP } from './help.js';

export { USAGE } from './help.js';

/** The signals that interrupt a command: it stops, removes what it wrote, and exits 130. */
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

type CommandRun = (args: string[], ctx: CliContext) => Promise<number>;

/** Commands are loaded on use: --help and --version need neither Arrow nor the codecs. */
const COMMANDS: Record<string, { help: string; load: () => Promise<CommandRun> }> = {
  write: { help: WRITE_HELP, load: async () => (await import('./write-command.js')).writeCommand },
  read: { help: READ_HELP, load: async () => (await import('./read-command.js')).readCommand },
  inspect: { help: INSPECT_HELP, load: async () => (await import('./inspect-command.js')).inspectCommand },
  demo: { help: DEMO_HELP, load: async () => (await import('./demo-command.js')).demoCommand },
  clean: { help: CLEAN_HELP, load: async () => (await import('./clean-command.js')).cleanCommand },
};

export interface MainOptions extends Partial<CliIO>, Pick<CliContext, 'systemMemory'> {
  /** Cancels a running command; without it, main aborts on SIGINT / SIGTERM / SIGHUP (a second signal exits at once). */
  signal?: AbortSignal;
}

/** Runs the CLI on `argv` (without `node` and the script) and returns the exit code; never throws. */
export async function main(argv: readonly string[], options: MainOptions = {}): Promise<number> {
  const stdout = options.stdout ?? process.stdout;
  const stderr = options.stderr ?? process.stderr;
  const controller = new AbortController();
  const temporaryFiles = new Set<string>();
  const onSignal = () => {
    if (!controller.signal.aborted) return controller.abort();
    for (const file of temporaryFiles) rmSync(file, { force: true });
    process.exit(EXIT_INTERRUPTED);
  };
  // SIGHUP: a closed terminal or ssh session; left to Node, it killed the process with its files in place
  if (options.signal === undefined) for (const name of SIGNALS) process.on(name, onSignal);
  const ctx: CliContext = { stdout, stderr, signal: options.signal ?? controller.signal, systemMemory: options.systemMemory, temporaryFiles };
  try {
    return await dispatch([...argv], ctx);
  } catch (error) {
    return reportError(error, ctx);
  } finally {
    for (const name of SIGNALS) process.off(name, onSignal);
  }
}

async function dispatch(argv: string[], ctx: CliContext): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined) {
    ctx.stderr.write(USAGE);
    return EXIT_USAGE;
  }
  if (name === '-h' || name === '--help' || name === 'help') return help(ctx, name, args);
  if (name === '-V' || name === '--version') {
    // a help asked for wins, as it does after a command (`write --bogus --help`) and before --version (help())
    if (args.length === 1 && isHelpFlag(args[0]!)) return help(ctx, args[0]!, []);
    // an argument after it was a mistyped command line, not a question: said, not ignored
    if (args.length > 0) throw new UsageError(`${name} takes no arguments, got '${args[0]}'`, null);
    writeLine(ctx.stdout, version());
    return EXIT_OK;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    throw new UsageError(name.startsWith('-') ? `unknown option '${name}'` : `unknown command '${name}'`, null);
  }
  if (wantsHelp(args)) {
    ctx.stdout.write(command.help);
    return EXIT_OK;
  }
  const run = await command.load();
  return await run(args, ctx);
}

const isHelpFlag = (arg: string): boolean => arg === '-h' || arg === '--help';

/**
 * `help [command]`, `--help [command]`: the usage, or one command's help
 * (help's own, `help help`, is the usage; so is `--help --version`).
 */
function help(ctx: CliContext, asked: string, args: readonly string[]): number {
  const [topic, extra] = args;
  if (extra !== undefined) throw new UsageError(`${asked} takes at most one command, got '${topic}' and '${extra}'`, null);
  if (topic === undefined || topic === 'help' || isHelpFlag(topic) || topic === '-V' || topic === '--version') {
    ctx.stdout.write(USAGE);
    return EXIT_OK;
  }
  const command = COMMANDS[topic];
  if (command === undefined) throw new UsageError(`unknown command '${topic}'`, null);
  ctx.stdout.write(command.help);
  return EXIT_OK;
}

function reportError(error: unknown, ctx: CliContext): number {
  if (error instanceof UsageError) {
    const hint = error.command === null ? 'columnar-shuffle --help' : `columnar-shuffle ${error.command} --help`;
    writeLine(ctx.stderr, `columnar-shuffle: error CS_INVALID_ARGUMENT: ${error.message} (see '${hint}')`);
    return EXIT_USAGE;
  }
  if (error instanceof ShuffleError) {
    writeLine(ctx.stderr, `columnar-shuffle: error ${error.code}: ${oneLine(error.message)}`);
    return EXIT_FAILURE;
  }
  if (error instanceof Interrupted) {
    writeLine(ctx.stderr, 'columnar-shuffle: interrupted');
    return EXIT_INTERRUPTED;
  }
  // not a ShuffleError: a bug, or an error a dependency threw
  const message = error instanceof Error ? error.message : String(error);
  writeLine(ctx.stderr, `columnar-shuffle: error: ${oneLine(message)}`);
  if (process.env.COLUMNAR_SHUFFLE_DEBUG && error instanceof Error && error.stack) writeLine(ctx.stderr, error.stack);
  return EXIT_FAILURE;
}

function oneLine(message: string): string {
  return message.replace(/\s*\n\s*/g, ' ');
}

export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
