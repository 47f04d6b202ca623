#!/usr/bin/env node
// Launcher: the CLI itself is compiled TypeScript in dist/ (`npm run build`).
let cli;
try {
  cli = await import('../dist/cli/main.js');
} catch (error) {
  if (error?.code === 'ERR_MODULE_NOT_FOUND' && String(error.message).includes('dist/cli/main.js')) {
    process.stderr.write("columnar-shuffle: error: dist/cli/main.js is missing: run 'npm run build' first\n");
    process.exit(1);
  }
  throw error;
}
// `| head` closing stdout early is not an error; any other failure to write it (a full disk) is one line, as every error
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(0);
  process.stderr.write(`columnar-shuffle: error CS_IO: cannot write to stdout: ${error.message}\n`);
  process.exit(1);
});
process.exitCode = await cli.main(process.argv.slice(2));
