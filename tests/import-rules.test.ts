/**
 * The house's layering as data (issue 21 §2, DESIGN.md "Rooms and who may call whom"): every room of the source tree
 * in one list, lowest first, and a room may import only rooms below it. An import that points up — or sideways into
 * a room of the same rank — breaks the rule. The arrows that point up today are listed as debts, each to be paid by
 * moving a shared concept down: a new upward import fails this test, and so does a debt that is paid but still
 * listed, so the list only shrinks.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..");

/**
 * The rooms, lowest first. A room is a folder of engine/ (or one engine/ file), gateway/, commands/, main.ts. A list
 * in the list is rooms of one rank, siblings that may not import each other (the search strategies, which share only
 * what lies below them).
 */
const LAYERS: readonly (string | readonly string[])[] = [
  "package.json",
  "engine/error-codes",
  "engine/errors",
  "engine/duration",
  "engine/providers",
  "engine/dataset-ref",
  "engine/regular-file",
  "gateway",
  "engine/runtime",
  "engine/store",
  "engine/task",
  "engine/driver",
  "engine/config",
  "engine/gateway-host",
  "engine/trace",
  "engine/conductor",
  "engine/harness",
  "engine/trial",
  "engine/job",
  "engine/dataset",
  "engine/gc",
  "engine/doctor",
  "engine/model-preflight",
  // the evaluation layer: evaluators for cards and datasets, statistics, the candidate store
  "engine/eval",
  // the search strategies built on it (issue 21 §3)
  ["engine/evolve", "engine/metaharness"],
  "engine/results",
  // portable packs: a dataset's tasks, images and agents carried to an air-gapped machine (issue 22 §4)
  "engine/pack",
  "commands",
  "main",
];

/** Upward arrows that exist today, `from -> to`: the house's debts (issue 21 §2). Remove a line when it is paid. */
const DEBTS = new Set([
  // driver/select.ts reads the config for the engine's default: the choice belongs to the caller
  "engine/driver -> engine/config",
  // the trace room reads trial layouts and safe box reads, which belong on the lower floor
  "engine/trace -> engine/trial",
  // the .agent/ format lives in conductor/, and the conductor agent's harness is reached from it
  "engine/conductor -> engine/harness",
  // harnesses do trial persistence (captureAgentHome, writeTrajectory) and read trial layouts
  "engine/harness -> engine/trial",
]);

/** The room a source path (relative to the root, no extension needed) belongs to. */
function roomOf(path: string): string {
  const parts = normalize(path).split("/");
  if (parts[0] === "engine") return `engine/${parts[1].replace(/\.ts$/, "")}`;
  return parts[0].replace(/\.ts$/, "");
}

/** Every .ts file under `dir` (relative to the root). */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (e.name.endsWith(".ts")) out.push(p);
  }
  return out;
}

/** Relative imports of a source: static (`from "./x"`, `export … from`) and dynamic (`import("./x")`). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const found: string[] = [];
  for (const m of text.matchAll(/(?:^|\s)(?:import|export)\s[^;]*?from\s+["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/gm)) {
    found.push(relative(ROOT, resolve(ROOT, dirname(file), m[1] ?? m[2])));
  }
  return found;
}

/** Every arrow between two rooms, `from -> to`, with one file that draws it. */
function arrows(): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of [...sources("engine"), ...sources("gateway"), ...sources("commands"), "main.ts"]) {
    const from = roomOf(file);
    for (const target of importsOf(file)) {
      const to = roomOf(target);
      if (to !== from && !out.has(`${from} -> ${to}`)) out.set(`${from} -> ${to}`, file);
    }
  }
  return out;
}

describe("imports point down (DESIGN.md rooms, stated as data)", () => {
  const rank = new Map<string, number>(LAYERS.flatMap((r, i) => (typeof r === "string" ? [r] : r).map((room) => [room, i] as const)));
  const all = arrows();

  it("every room of the tree is in the layer list", () => {
    const unknown = [...new Set([...all.keys()].flatMap((a) => a.split(" -> ")))].filter((r) => !rank.has(r));
    expect(unknown, "add the new room to LAYERS where it belongs").toEqual([]);
  });

  it("no import points up, but for the listed debts", () => {
    const up = [...all].filter(([a]) => {
      const [from, to] = a.split(" -> ");
      return rank.get(to)! >= rank.get(from)!;
    });
    const fresh = up.filter(([a]) => !DEBTS.has(a)).map(([a, file]) => `${a} (${file})`);
    expect(fresh, "an import points up: move the shared concept down instead").toEqual([]);
    const paid = [...DEBTS].filter((d) => !all.has(d) || !up.some(([a]) => a === d));
    expect(paid, "a debt is paid: remove it from DEBTS").toEqual([]);
  });

  it("the search strategies are siblings on the evaluation layer: neither imports the other", () => {
    expect(rank.get("engine/evolve")).toBe(rank.get("engine/metaharness"));
    expect(rank.get("engine/eval")).toBeLessThan(rank.get("engine/evolve")!);
    const sideways = [...all.keys()].filter((a) => a === "engine/evolve -> engine/metaharness" || a === "engine/metaharness -> engine/evolve");
    expect(sideways, "what both strategies need belongs in engine/eval").toEqual([]);
  });
});
