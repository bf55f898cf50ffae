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

/** The rooms, lowest first. A room is a folder of engine/ (or one engine/ file), gateway/, commands/, main.ts. */
const LAYERS = [
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
  "engine/outcome",
  "engine/task",
  "engine/driver",
  "engine/box",
  "engine/config",
  "engine/engine-choice",
  "engine/gateway",
  "engine/trace",
  "engine/conductor",
  "engine/harness",
  "engine/trial",
  "engine/job",
  "engine/dataset",
  "engine/gc",
  "engine/doctor",
  "engine/model-preflight",
  "engine/evolve",
  "engine/metaharness",
  "commands",
  "main",
] as const;

/** Upward arrows that exist today, `from -> to`: the house's debts (issue 21 §2). Remove a line when it is paid. */
const DEBTS = new Set<string>([]);

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
  const rank = new Map<string, number>(LAYERS.map((r, i) => [r, i]));
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
});
