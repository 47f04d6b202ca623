import { expect } from 'vitest';
import { ShuffleError } from '../../src/errors.js';

/** The ShuffleError `promise` rejects with (the test fails if it resolves, or rejects with anything else). */
export async function failure(promise: Promise<unknown>): Promise<ShuffleError> {
  const error = await promise.then(() => null, (e: unknown) => e);
  expect(error).toBeInstanceOf(ShuffleError);
  return error as ShuffleError;
}

/** The ShuffleError `run` throws (the test fails if it returns, or throws anything else). */
export function thrown(run: () => unknown): ShuffleError {
  let error: unknown = null;
  try {
    run();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ShuffleError);
  return error as ShuffleError;
}
