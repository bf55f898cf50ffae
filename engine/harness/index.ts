/** The agents evolve knows by name. Installed CLIs register here in a later issue. */
import { nop, oracle } from "./builtin.ts";
import type { Harness } from "./types.ts";

export type { AgentOutcome, Harness, HarnessContext } from "./types.ts";

const HARNESSES: ReadonlyMap<string, Harness> = new Map([
  [oracle.name, oracle],
  [nop.name, nop],
]);

/** The harness registered under `name`, or undefined. */
export function getHarness(name: string): Harness | undefined {
  return HARNESSES.get(name);
}

/** Every registered agent name, for help texts and did-you-mean. */
export function harnessNames(): string[] {
  return [...HARNESSES.keys()];
}
