/**
 * The house's layering as data (issue 21 §2, DESIGN.md "Rooms and who may call whom"): every room of the source tree
 * in one list, lowest first, and a room may import only rooms below it. An import that points up — or sideways into
 * a room of the same rank — breaks the rule: move the shared concept down instead. And, stated on its own so that it
 * holds whatever the list says: the rooms' import graph has no cycle (DESIGN.md: "a cycle between folders is a
 * design bug"), and a cycle is named room by room. Commands reach an engine room through its public surface, `mod.ts`
 * (issue 21 §5); tests, beside the code or under tests/, draw no arrows, and no shipped source imports one.
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
  // the JSON vocabulary's edge (snake_case keys), shared by the CLI's --json and the local API
  "engine/json-keys",
  "engine/duration",
  "engine/providers",
  "engine/dataset-ref",
  "engine/regular-file",
  "gateway",
  "engine/runtime",
  "engine/store",
  // how a trial ends: its statuses, the exception registry and TrialFailure, which any room may throw
  "engine/outcome",
  "engine/task",
  "engine/driver",
  // the lower floor of trials: safe reads of what a box wrote, the trial and box layouts, the task scripts
  "engine/box",
  "engine/config",
  // teams on one machine: identities, organizations, invites and who sees what (issue 23 §1)
  "engine/org",
  // which engine a caller gets, guarded as config.toml says: the driver opens only what it is told
  "engine/engine-choice",
  "engine/gateway-host",
  "engine/trace",
  "engine/conductor",
  "engine/harness",
  "engine/trial",
  "engine/job",
  // OpenTelemetry export (issue 22 §5): reads settled trials and their traces, decides nothing
  "engine/otel",
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
  // where a job's trials run (issue 24 §1): the Slurm coordinator, its leases and workers, over the job runner and
  // over packs, which carry a job's tasks, images and agents to the workers' nodes
  "engine/executor",
  // the dashboard's pages (issue 23 §2): reads jobs, trials, traces, datasets and statistics, decides nothing
  "engine/dashboard",
  // the local API (`evolve serve`, issue 23): calls the engine as commands/ does, holds no rule of its own
  "engine/serve",
  "commands",
  "main",
];

/** The room a source path (relative to the root, no extension needed) belongs to. */
function roomOf(path: string): string {
  const parts = normalize(path).split("/");
  if (parts[0] === "engine") return `engine/${parts[1].replace(/\.ts$/, "")}`;
  return parts[0].replace(/\.ts$/, "");
}

/** A test file: beside the code or under tests/, it may import any room and tests/support, and never ships. */
const isTest = (path: string) => path.endsWith(".test.ts");

/** Every .ts file under `dir` (relative to the root) but the tests beside the code, which draw no room arrows. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (e.name.endsWith(".ts") && !isTest(p)) out.push(p);
  }
  return out;
}

/** The shipped sources: what scripts/build.ts can reach from main.ts (it follows imports, nothing else). */
const shipped = () => [...sources("engine"), ...sources("gateway"), ...sources("commands"), "main.ts"];

/**
 * Imports of test code by shipped code, as `file -> target`: a `*.test.ts` (beside the code or not) or anything under
 * tests/. The bundle follows imports from main.ts, so a test beside the code ships only if one of these draws it in.
 */
function testImports(files: readonly string[], importsOf: (file: string) => string[]): string[] {
  return files.flatMap((file) => importsOf(file).filter((t) => isTest(t) || t.startsWith("tests/")).map((t) => `${file} -> ${t}`));
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

/**
 * Commands reach a folder room of engine/ only through its `mod.ts`, the room's public surface (issue 21 §5); the rest
 * of the folder is private by convention (a one-file room, engine/errors.ts, is its own surface). The exceptions, each
 * a module a command imports directly and why: on the start-up path (cli.ts and what it loads at load time,
 * tests/cli-lazy.test.ts) a mod.ts would load its whole room at every start; and a heavy part that one command runs
 * stays off the surface, so that the room's other commands do not load it.
 */
const PAST_SURFACE: Readonly<Record<string, string>> = {
  "commands/cli.ts -> engine/job/job-config.ts": "start-up: run's help prints the job defaults",
  "commands/output.ts -> engine/trial/lifecycle.ts": "start-up: every table asks which statuses are live",
  "commands/trace-cli.ts -> engine/trace/artifact-streams.ts": "start-up: trace's help names the artifact streams",
  "commands/run.ts -> engine/job/drive.ts": "the job runner, the whole trial machinery: only run (and trial retry through it) loads it",
  "commands/harness-diagnose.ts -> engine/eval/project.ts": "diagnose reads a project's paths and loads no evaluator",
  "commands/trajectory.ts -> engine/trace/atif-file.ts": "validating a file opens no store (the trace room's surface loads LMDB)",
};

/** Imports by `files` of a folder room's module other than its mod.ts, as `file -> target`. */
function pastSurface(files: readonly string[], importsOf: (file: string) => string[]): string[] {
  return files.flatMap((file) =>
    importsOf(file)
      .filter((t) => {
        const parts = t.split("/");
        return parts[0] === "engine" && parts.length > 2 && t !== `engine/${parts[1]}/mod.ts`;
      })
      .map((t) => `${file} -> ${t}`),
  );
}

/** Every arrow between two rooms, `from -> to`, with one file that draws it. */
function arrows(): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of shipped()) {
    const from = roomOf(file);
    for (const target of importsOf(file)) {
      const to = roomOf(target);
      if (to !== from && !out.has(`${from} -> ${to}`)) out.set(`${from} -> ${to}`, file);
    }
  }
  return out;
}

/**
 * A cycle in the rooms' import graph (`arrows`), as `a -> b (file) -> … -> a`, or undefined when there is none: a
 * depth-first walk that meets a room still on its path has closed a circle.
 */
function roomCycle(arrows: ReadonlyMap<string, string>): string | undefined {
  const next = new Map<string, { to: string; file: string }[]>();
  for (const [a, file] of arrows) {
    const [from, to] = a.split(" -> ");
    next.set(from, [...(next.get(from) ?? []), { to, file }]);
  }
  const done = new Set<string>();
  const path: { room: string; file: string }[] = [];
  const visit = (room: string): string | undefined => {
    const at = path.findIndex((p) => p.room === room);
    if (at >= 0) return [...path.slice(at).map((p) => `${p.room} (${p.file})`), room].join(" -> ");
    if (done.has(room)) return undefined;
    for (const { to, file } of next.get(room) ?? []) {
      path.push({ room, file });
      const found = visit(to);
      path.pop();
      if (found) return found;
    }
    done.add(room);
    return undefined;
  };
  for (const room of [...next.keys()].sort()) {
    const found = visit(room);
    if (found) return found;
  }
  return undefined;
}

describe("imports point down (DESIGN.md rooms, stated as data)", () => {
  const rank = new Map<string, number>(LAYERS.flatMap((r, i) => (typeof r === "string" ? [r] : r).map((room) => [room, i] as const)));
  const all = arrows();

  it("every room of the tree is in the layer list", () => {
    const unknown = [...new Set([...all.keys()].flatMap((a) => a.split(" -> ")))].filter((r) => !rank.has(r));
    expect(unknown, "add the new room to LAYERS where it belongs").toEqual([]);
  });

  it("no import points up", () => {
    const up = [...all]
      .filter(([a]) => {
        const [from, to] = a.split(" -> ");
        return rank.get(to)! >= rank.get(from)!;
      })
      .map(([a, file]) => `${a} (${file})`);
    expect(up, "an import points up: move the shared concept down instead").toEqual([]);
  });

  it("finds and names a cycle (checked on a made-up graph)", () => {
    const made = new Map([["a -> b", "a.ts"], ["b -> c", "b.ts"], ["c -> a", "c.ts"], ["c -> d", "c.ts"]]);
    expect(roomCycle(made)).toBe("a (a.ts) -> b (b.ts) -> c (c.ts) -> a");
    made.delete("c -> a");
    expect(roomCycle(made)).toBeUndefined();
  });

  it("no cycle between rooms", () => {
    expect(roomCycle(all), "rooms import each other in a circle: move what they share below them").toBeUndefined();
  });

  it("finds shipped code that imports a test (checked on made-up imports)", () => {
    const made: Record<string, string[]> = {
      "engine/a/x.ts": ["engine/a/x.test.ts", "engine/b/y.ts"],
      "engine/b/y.ts": ["tests/support/cli-host.ts"],
      "engine/c/z.ts": ["engine/c/w.ts"],
    };
    expect(testImports(Object.keys(made), (f) => made[f])).toEqual([
      "engine/a/x.ts -> engine/a/x.test.ts",
      "engine/b/y.ts -> tests/support/cli-host.ts",
    ]);
  });

  it("a test beside the code never ships: no shipped source imports a *.test.ts or tests/", () => {
    expect(testImports(shipped(), importsOf), "only tests import tests; scripts/build.ts bundles what main.ts imports").toEqual([]);
  });

  it("finds a command that reaches past a room's surface (checked on made-up imports)", () => {
    const made: Record<string, string[]> = {
      "commands/a.ts": ["engine/job/mod.ts", "engine/job/job.ts", "engine/errors.ts", "commands/output.ts"],
      "commands/b.ts": ["engine/harness/agents/codex.ts"],
    };
    expect(pastSurface(Object.keys(made), (f) => made[f])).toEqual(["commands/a.ts -> engine/job/job.ts", "commands/b.ts -> engine/harness/agents/codex.ts"]);
  });

  it("commands import an engine room only through its mod.ts, but for the exceptions stated with their reason", () => {
    const past = pastSurface(sources("commands"), importsOf);
    expect(past.filter((a) => !(a in PAST_SURFACE)), "import the room's mod.ts (export the name there), or state why not").toEqual([]);
    expect(Object.keys(PAST_SURFACE).filter((a) => !past.includes(a)), "an exception no command needs any more").toEqual([]);
  });

  it("the search strategies are siblings on the evaluation layer: neither imports the other", () => {
    expect(rank.get("engine/evolve")).toBe(rank.get("engine/metaharness"));
    expect(rank.get("engine/eval")).toBeLessThan(rank.get("engine/evolve")!);
    const sideways = [...all.keys()].filter((a) => a === "engine/evolve -> engine/metaharness" || a === "engine/metaharness -> engine/evolve");
    expect(sideways, "what both strategies need belongs in engine/eval").toEqual([]);
  });
});
