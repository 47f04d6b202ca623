import { removeLeftovers } from '../cleanup.js';
import { flag, parseCommandArgs, pathOption, UsageError } from './args.js';
import { EXIT_OK, plural, writeJson, writeLine, type CliContext } from './context.js';

const OPTIONS = {
  output: { type: 'string', short: 'o' },
  dir: { type: 'string', short: 'd' },
  'spill-dir': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/**
 * Removes what a killed `write` left behind (removeLeftovers): the temporary
 * files of one output prefix, or of every prefix in a directory, and spill
 * files. Committed outputs are never touched.
 */
export async function cleanCommand(args: string[], ctx: CliContext): Promise<number> {
  const parsed = parseCommandArgs('clean', args, OPTIONS, 0);
  const outputPrefix = pathOption(parsed, 'output', 'clean');
  const outputDir = pathOption(parsed, 'dir', 'clean');
  const spillDir = pathOption(parsed, 'spill-dir', 'clean');
  if (outputPrefix === undefined && outputDir === undefined && spillDir === undefined) {
    throw new UsageError('give --output PREFIX, --dir DIR or --spill-dir DIR (or several)', 'clean');
  }
  const removed = await removeLeftovers({ outputPrefix, outputDir, spillDir });
  if (flag(parsed, 'json')) {
    writeJson(ctx.stdout, { removed });
    return EXIT_OK;
  }
  for (const path of removed) writeLine(ctx.stdout, `removed ${path}`);
  writeLine(ctx.stdout, `${plural(removed.length, 'leftover file', 'leftover files')} removed`);
  return EXIT_OK;
}
