/** Test helper shared by the engine tests: asserts that a call fails with an EvolveError of one stable code. */
import { expect } from "vitest";
import { EvolveError } from "../../engine/errors.ts";

/** Awaits `p()` and returns the EvolveError it throws; fails the test unless it throws one with `code`. */
export async function expectCode(p: () => unknown, code: string): Promise<EvolveError> {
  try {
    await p();
  } catch (e) {
    expect(e).toBeInstanceOf(EvolveError);
    expect((e as EvolveError).code).toBe(code);
    return e as EvolveError;
  }
  throw new Error(`expected EvolveError ${code}`);
}
