/**
 * Runs every step of a teardown in order, each one also when a step before it
 * failed (a spill file that cannot be deleted must not keep the output's
 * temporary files or the pool's memory), then throws the first failure.
 */
export async function runEveryStep(steps: readonly (() => unknown)[]): Promise<void> {
  let failure: { error: unknown } | null = null;
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      failure ??= { error };
    }
  }
  if (failure !== null) throw failure.error;
}
