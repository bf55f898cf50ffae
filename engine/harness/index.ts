/** The agents evolve knows by name. Installed CLIs register here in a later issue. */
import { nop, oracle } from "./builtin.ts";
import { EvolveError } from "../errors.ts";
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

/** Levenshtein distance between two names (for did-you-mean). */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}

/**
 * Refuses an agent name no harness is registered under (`agent_unknown`, a usage error), before a job is recorded:
 * otherwise every trial would fail UnknownAgentError inside a job that still ends COMPLETED. The message names the
 * nearest known name when one is close enough to be a typo, and every known name.
 */
export function checkAgentName(name: string): void {
  if (HARNESSES.has(name)) return;
  const known = harnessNames();
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const d = editDistance(name.toLowerCase(), k.toLowerCase());
    if (d < bestD) [best, bestD] = [k, d];
  }
  // a suggestion only for what looks like a typo: `claude-code` is not a misspelt `oracle`
  const close = best !== undefined && bestD <= Math.max(2, Math.floor(name.length / 3));
  throw new EvolveError(
    "agent_unknown",
    `no agent named ${JSON.stringify(name)}${close ? `; did you mean ${best}?` : ""} (known agents: ${known.join(", ")})`,
    `pass one of -a ${known.join(" | ")}`,
  );
}
