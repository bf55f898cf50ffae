/** The agents evolve knows by name. Installed CLIs register here in a later issue. */
import { nop, oracle } from "./builtin.ts";
import type { Harness } from "./types.ts";

export type { AgentOutcome, Harness, HarnessContext } from "./types.ts";

const HARNESSES = new Map<string, Harness>([
  [oracle.name, oracle],
  [nop.name, nop],
]);

/**
 * Adds an agent under its name (installed CLIs; tests register probe agents). A built-in name cannot be taken over,
 * so `oracle` always means the task's own solution.
 */
export function registerHarness(h: Harness): void {
  if (h.name === oracle.name || h.name === nop.name) throw new Error(`${h.name} is a built-in agent`);
  HARNESSES.set(h.name, h);
}

/** The harness registered under `name`, or undefined. */
export function getHarness(name: string): Harness | undefined {
  return HARNESSES.get(name);
}

/** Every registered agent name, for help texts and did-you-mean. */
export function harnessNames(): string[] {
  return [...HARNESSES.keys()];
}
