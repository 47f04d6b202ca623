import { parseArgs, type ParseArgsConfig } from 'node:util';

/**
 * A wrong command line: unknown option, missing argument, malformed value.
 * The CLI reports it as CS_INVALID_ARGUMENT with exit code 2; nothing was attempted.
 */
export class UsageError extends Error {
  override name = 'UsageError';
  /** the command whose --help to point at, or null for the top level */
  constructor(message: string, readonly command: string | null) {
    super(message);
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;

export interface ParsedArgs {
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  positionals: string[];
}

/** `util.parseArgs` in strict mode, its errors turned into UsageErrors. */
export function parseCommandArgs(command: string, args: string[], options: Options, maxPositionals: number): ParsedArgs {
  let parsed: ParsedArgs;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    let message = error instanceof Error ? firstSentence(error.message) : String(error);
    // `-p -1`: the last sentence says how to give a value that starts with a dash, which is what was meant
    const dashed = error instanceof Error ? /use ('--[\w-]+=-XYZ')/.exec(error.message) : null;
    if (dashed !== null) message += ` (a value starting with '-' is written ${dashed[1]})`;
    throw new UsageError(message, command);
  }
  if (parsed.positionals.length > maxPositionals) {
    throw new UsageError(`unexpected argument '${parsed.positionals[maxPositionals]}'`, command);
  }
  return parsed;
}

/** True when -h / --help appears before a `--` terminator. */
export function wantsHelp(args: readonly string[]): boolean {
  for (const arg of args) {
    if (arg === '--') return false;
    if (arg === '-h' || arg === '--help') return true;
  }
  return false;
}

/** parseArgs' messages are two sentences of advice; the first one says what is wrong. */
function firstSentence(message: string): string {
  const cut = message.search(/\.\s/);
  const sentence = cut < 0 ? message : message.slice(0, cut);
  return sentence.charAt(0).toLowerCase() + sentence.slice(1).replace(/\.$/, '');
}

export function stringOption(parsed: ParsedArgs, name: string): string | undefined {
  const value = parsed.values[name];
  return typeof value === 'string' ? value : undefined;
}

export function flag(parsed: ParsedArgs, name: string): boolean {
  return parsed.values[name] === true;
}

export function requiredOption(parsed: ParsedArgs, name: string, command: string): string {
  const value = stringOption(parsed, name);
  if (value === undefined) throw new UsageError(`missing required option --${name}`, command);
  if (value.length === 0) throw new UsageError(`--${name} is empty`, command);
  return value;
}

/** A path option that may be left out, but not given empty (`--output ""`). */
export function pathOption(parsed: ParsedArgs, name: string, command: string): string | undefined {
  const value = stringOption(parsed, name);
  if (value !== undefined && value.length === 0) throw new UsageError(`--${name} is empty`, command);
  return value;
}

export function requiredPositional(parsed: ParsedArgs, index: number, what: string, command: string): string {
  const value = parsed.positionals[index];
  if (value === undefined || value.length === 0) throw new UsageError(`missing ${what}`, command);
  return value;
}

/** Digits, grouped by single underscores as in a JavaScript number literal: 1000, 1_000 (not _1, 1_, 1__0). */
const DIGITS = /^[0-9]+(?:_[0-9]+)*$/;

/** A decimal integer in [min, max], e.g. `--partitions 200` or `1_000`. */
export function integerOption(text: string | undefined, name: string, command: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (text === undefined) return undefined;
  const value = DIGITS.test(text) ? Number(text.replaceAll('_', '')) : NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in [${min}, ${max}]`;
    throw new UsageError(`--${name} must be an integer ${range}, got '${text}'`, command);
  }
  return value;
}

/** One of a fixed set of words, e.g. `--codec zstd`. */
export function choiceOption<T extends string>(text: string | undefined, name: string, choices: readonly T[], command: string): T | undefined {
  if (text === undefined) return undefined;
  if (!(choices as readonly string[]).includes(text)) {
    throw new UsageError(`--${name} must be one of ${choices.join(', ')}, got '${text}'`, command);
  }
  return text as T;
}

/** Byte units of `--memory-limit`: binary (IEC) for KiB/MiB/GiB/TiB, decimal (SI) for KB/MB/GB/TB. */
const BYTE_UNITS: Record<string, number> = {
  b: 1,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
};

/**
 * A size in bytes: an integer (`1048576`, `1_048_576`), or a decimal number
 * with a unit (`512KiB`, `64MiB`, `1.5GiB`, `100MB`, `64 MiB`). KiB, MiB, GiB
 * and TiB are powers of 1024; KB, MB, GB and TB powers of 1000; B is bytes.
 * Units are case-insensitive. Fractions of a byte are rounded down. Returns
 * null unless the result is a whole number of bytes >= 1 and <= 2^53 - 1.
 */
export function parseByteSize(text: string): number | null {
  const match = /^([0-9]+(?:_[0-9]+)*(?:\.[0-9]+)?)\s?([a-z]+)?$/i.exec(text.trim());
  if (match === null) return null;
  const [, number, unit] = match;
  const digits = number!.replaceAll('_', '');
  if (digits.includes('.') && unit === undefined) return null; // "1.5" bytes: a unit was probably forgotten
  const scale = unit === undefined ? 1 : BYTE_UNITS[unit.toLowerCase()];
  if (scale === undefined) return null;
  const bytes = Math.floor(Number(digits) * scale);
  return Number.isSafeInteger(bytes) && bytes >= 1 ? bytes : null;
}

/** A byte size option, e.g. `--memory-limit 64MiB` (see parseByteSize). */
export function byteSizeOption(text: string | undefined, name: string, command: string): number | undefined {
  if (text === undefined) return undefined;
  const bytes = parseByteSize(text);
  if (bytes === null) {
    throw new UsageError(`--${name} must be a size in bytes >= 1, like 1048576, 512KiB, 64MiB, 1.5GiB or 100MB, got '${text}'`, command);
  }
  return bytes;
}
