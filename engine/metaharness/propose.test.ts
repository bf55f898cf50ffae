/**
 * The proposal round's pieces that need no engine (issue 13 §1): the round prompt's placeholders, the task folder a
 * round runs (D's snapshot, never validation or test material, no link followed), the collection of the candidates
 * out of the trial's artifacts, the proposer's options and its cost when the gateway has no price.
 */
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EvolveError } from "../errors.ts";
import { DEFAULT_PROPOSE_PROMPT, fillPrompt, PROMPT_PLACEHOLDERS, type PromptVars } from "./propose.ts";
import { runPaths } from "./layout.ts";
import { collectCandidates, proposerCost, readBoxPlain, proposerOptions, runProposer, writeProposalTask } from "./proposer.ts";
import { openStore } from "../store/index.ts";
import { ingestRound, seedCandidate } from "./state.ts";
import { writeTree } from "../../tests/support/evolve-project.ts";
import { writeTemplate } from "./template.ts";
import { parseTaskToml } from "../task/model.ts";

const VARS: PromptVars = { round: 3, k: 2, state_dir: "/work/state", scratch_dir: "/work/scratch", steps_dir: "/work/steps", template_dir: "/work/template" };
const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), "evolve-mh-propose-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const codeOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    return e instanceof EvolveError ? e.code : `not an EvolveError: ${String(e)}`;
  }
  return undefined;
};

/** Every file under `root`, relative, sorted. */
function files(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    for (const n of readdirSync(d).sort()) {
      const p = join(d, n);
      const r = rel ? `${rel}/${n}` : n;
      if (lstatSync(p).isDirectory()) walk(p, r);
      else out.push(r);
    }
  };
  walk(root, "");
  return out;
}

describe("fillPrompt", () => {
  it("fills every placeholder, leaving other braces as they are", () => {
    const text = fillPrompt('round {round}: {k} into {scratch_dir}/candidates; read {state_dir}, {steps_dir}, {template_dir}; JSON {"a": 1} and {{x}}', VARS);
    expect(text).toBe('round 3: 2 into /work/scratch/candidates; read /work/state, /work/steps, /work/template; JSON {"a": 1} and {{x}}');
  });

  it("refuses an unknown placeholder with propose_placeholder_unknown, naming it", () => {
    expect(codeOf(() => fillPrompt("write {k} candidates into {scrach_dir}", VARS))).toBe("propose_placeholder_unknown");
    expect(() => fillPrompt("{scrach_dir} {rounds}", VARS)).toThrow(/\{scrach_dir\}, \{rounds\}/);
  });

  it("the default prompt uses only known placeholders and carries the hard rules and the check_spec instruction", () => {
    const text = fillPrompt(DEFAULT_PROPOSE_PROMPT, VARS);
    expect(text).not.toMatch(/\{[a-z_]+\}/);
    expect(text).toContain("Write exactly 2 candidates");
    expect(text).toContain("/work/scratch/candidates/<name>/");
    expect(text).toContain("evolve metaharness check-spec /work/scratch/candidates/<name>");
    expect(text).toMatch(/no facts about individual search tasks or their answers/);
    expect(text).toMatch(/Deliver all 2 candidates/);
    expect(text).toMatch(/Do not run the evaluation/);
    for (const p of PROMPT_PLACEHOLDERS) expect(DEFAULT_PROPOSE_PROMPT).toContain(`{${p}}`);
  });
});

/** Every file under `root` (links not followed) whose bytes contain `needle`. */
function filesContaining(root: string, needle: string): string[] {
  return files(root).filter((f) => lstatSync(join(root, f)).isFile() && readFileSync(join(root, f), "utf8").includes(needle));
}

/** A run folder: state, two search steps (one holding held-out material), validation and test beside them, a link. */
function runFolder(): string {
  const run = tmp();
  mkdirSync(join(run, "workspace", "state", "candidates", "seed", "adapter"), { recursive: true });
  writeFileSync(join(run, "workspace", "state", "evolution_summary.jsonl"), '{"id":"seed","mean":0.5}\n');
  writeFileSync(join(run, "workspace", "state", "candidates", "seed", "adapter", "ADAPTER.md"), "# seed\n");
  for (const s of ["step_0000", "step_0001"]) {
    mkdirSync(join(run, s, "task-a"), { recursive: true });
    writeFileSync(join(run, s, "task-a", "trajectory.json"), "{}\n");
  }
  mkdirSync(join(run, "step_0001", "validation"), { recursive: true });
  writeFileSync(join(run, "step_0001", "validation", "scores.json"), "{}\n");
  mkdirSync(join(run, "validation"), { recursive: true });
  writeFileSync(join(run, "validation", "answers.json"), "{}\n");
  mkdirSync(join(run, "test"), { recursive: true });
  writeFileSync(join(run, "test", "answers.json"), "{}\n");
  writeFileSync(join(run, "secret.txt"), "host secret\n");
  symlinkSync(join(run, "secret.txt"), join(run, "workspace", "state", "leak.txt"));
  return run;
}

describe("writeProposalTask", () => {
  it("writes a no-network task whose image holds D (state, the search steps, the template) under /work, nothing held out", () => {
    const run = runFolder();
    const template = join(tmp(), "template");
    writeTemplate(template);
    const dest = join(tmp(), "task");
    const info = writeProposalTask({ runDir: run, dest, round: 2, instruction: "the filled prompt\n", timeoutSec: 900, templateDir: template });
    expect(info.steps).toEqual(["step_0000", "step_0001"]);
    expect(info.skipped).toEqual(["workspace/state/leak.txt"]);
    expect(readFileSync(join(dest, "instruction.md"), "utf8")).toBe("the filled prompt\n");
    const cfg = parseTaskToml(readFileSync(join(dest, "task.toml"), "utf8"));
    expect(cfg.environment.network_mode).toBe("no-network");
    expect(cfg.agent.timeout_sec).toBe(900);
    expect(cfg.artifacts).toEqual(["/work/scratch"]);
    expect(cfg.task?.name).toBe("evolve-metaharness/propose-round-0002");
    const dockerfile = readFileSync(join(dest, "environment", "Dockerfile"), "utf8");
    expect(dockerfile).toMatch(/^FROM debian:bookworm-slim$/m);
    expect(dockerfile).toContain("COPY d/ /work/");
    expect(dockerfile).toContain("mkdir -p /work/scratch/candidates");
    expect(files(join(dest, "environment", "d"))).toEqual([
      "state/candidates/seed/adapter/ADAPTER.md",
      "state/evolution_summary.jsonl",
      "steps/step_0000/task-a/trajectory.json",
      "steps/step_0001/task-a/trajectory.json",
      "template/.hermit/EVOLVER.md",
      "template/.hermit/manifest.json",
    ]);
    expect(statSync(join(dest, "tests", "test.sh")).mode & 0o111).not.toBe(0);
    expect(readFileSync(join(dest, "tests", "test.sh"), "utf8")).toContain("/work/scratch/candidates");
  });

  it("refuses a template without .hermit/ (metaharness_template_invalid)", () => {
    const run = runFolder();
    expect(codeOf(() => writeProposalTask({ runDir: run, dest: join(tmp(), "task"), round: 1, instruction: "x", timeoutSec: 60, templateDir: tmp() }))).toBe("metaharness_template_invalid");
  });
});

describe("collectCandidates", () => {
  it("copies every candidate as it is, a link kept as the same link (never followed), the last round's gone", () => {
    const from = tmp();
    const outside = tmp();
    writeFileSync(join(outside, "secret.txt"), "host secret\n");
    mkdirSync(join(from, "good", "sub"), { recursive: true });
    writeFileSync(join(from, "good", "ADAPTER.md"), "# good\n");
    writeFileSync(join(from, "good", "sub", "notes.md"), "notes\n");
    mkdirSync(join(from, "holds-link"));
    writeFileSync(join(from, "holds-link", "ADAPTER.md"), "# x\n");
    symlinkSync(join(outside, "secret.txt"), join(from, "holds-link", "leak.md"));
    symlinkSync(outside, join(from, "is-link"));
    writeFileSync(join(from, "a-file"), "x");
    const dest = join(tmp(), "candidates");
    mkdirSync(join(dest, "last-round"), { recursive: true });
    const { names, problems } = collectCandidates(from, "", dest);
    expect(names).toEqual(["a-file", "good", "holds-link", "is-link"]);
    expect(problems).toEqual([]);
    expect(readFileSync(join(dest, "good", "sub", "notes.md"), "utf8")).toBe("notes\n");
    expect(lstatSync(join(dest, "is-link")).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(dest, "is-link"))).toBe(outside);
    expect(lstatSync(join(dest, "holds-link", "leak.md")).isSymbolicLink()).toBe(true);
    // nothing of what the links point at was copied
    expect(filesContaining(dest, "host secret")).toEqual([]);
    expect(existsSync(join(dest, "last-round"))).toBe(false);
  });

  it("drops a candidate holding a FIFO, with its problem", () => {
    const from = tmp();
    mkdirSync(join(from, "fifo"));
    writeFileSync(join(from, "fifo", "ADAPTER.md"), "# x\n");
    execFileSync("mkfifo", [join(from, "fifo", "pipe")]);
    const dest = join(tmp(), "candidates");
    const { names, problems } = collectCandidates(from, "", dest);
    expect(names).toEqual([]);
    expect(problems).toEqual([{ name: "fifo", problem: "holds a FIFO at pipe; a candidate holds only plain files and folders, so it was not collected" }]);
    expect(existsSync(join(dest, "fifo"))).toBe(false);
  });

  it("drops a candidate over the copy limit, said of the candidate, not of the trial folder", () => {
    const from = tmp();
    mkdirSync(join(from, "huge"));
    for (let i = 0; i <= 2000; i++) writeFileSync(join(from, "huge", `f${i}.md`), "x");
    const { names, problems } = collectCandidates(from, "", join(tmp(), "candidates"));
    expect(names).toEqual([]);
    expect(problems).toEqual([{ name: "huge", problem: "holds more than 2000 files or 32 MiB, so it was not collected" }]);
  });

  it("the state machine then rejects the linked candidates with check_spec's problems", () => {
    const run = tmp();
    const template = join(tmp(), "template");
    writeTemplate(template);
    writeTree(join(template, "seed_adapter"), { "ADAPTER.md": "seed\n" });
    const from = tmp();
    writeTree(join(from, "good"), { "ADAPTER.md": "# good\n" });
    writeTree(join(from, "holds-link"), { "ADAPTER.md": "# x\n" });
    symlinkSync("/etc/passwd", join(from, "holds-link", "leak.md"));
    symlinkSync("/etc", join(from, "is-link"));
    const state = seedCandidate(run, join(template, "seed_adapter"), template);
    collectCandidates(from, "", runPaths(run).scratchCandidates);
    const { queued, rejected } = ingestRound(run, state, 1, template);
    expect(queued).toEqual(["good"]);
    expect(rejected.map((r) => r.id).sort()).toEqual(["holds-link", "is-link"]);
    expect(rejected.find((r) => r.id === "is-link")?.problems.join(" ")).toMatch(/symbolic link/);
    expect(rejected.find((r) => r.id === "holds-link")?.problems.join(" ")).toMatch(/symbolic link/);
  });
});

describe("collectCandidates: a hostile proposer's artifacts (issue 20 §6)", () => {
  /** A host folder shaped like a run's workspace: candidates and a report the proposer must never import. */
  function hostWorkspace(): string {
    const host = tmp();
    writeTree(join(host, "scratch", "candidates", "host-cand"), { "ADAPTER.md": "# the host's candidate\n" });
    writeFileSync(join(host, "scratch", "proposer_report.md"), "the host's report\n");
    return host;
  }

  it("a link in a parent of what is collected (artifacts/work -> a host folder) imports nothing from the host", () => {
    const artifacts = tmp();
    const host = hostWorkspace();
    symlinkSync(host, join(artifacts, "work"));
    const dest = join(tmp(), "candidates");
    const { names, problems } = collectCandidates(artifacts, "work/scratch/candidates", dest);
    expect(names).toEqual([]);
    expect(problems).toEqual([{ name: "candidates", problem: "work is a symbolic link; nothing under it was collected" }]);
    expect(readdirSync(dest)).toEqual([]);
    expect(readBoxPlain(artifacts, "work/scratch", "proposer_report.md")).toBeUndefined();
  });

  it("a link one folder lower (work/scratch -> a host folder) imports nothing either; real folders are collected", () => {
    const artifacts = tmp();
    const host = hostWorkspace();
    mkdirSync(join(artifacts, "work"));
    symlinkSync(join(host, "scratch"), join(artifacts, "work", "scratch"));
    const { names, problems } = collectCandidates(artifacts, "work/scratch/candidates", join(tmp(), "candidates"));
    expect(names).toEqual([]);
    expect(problems[0].problem).toMatch(/^work\/scratch is a symbolic link/);
    expect(readBoxPlain(artifacts, "work/scratch", "proposer_report.md")).toBeUndefined();
    // the honest shape: real folders all the way
    const honest = tmp();
    writeTree(join(honest, "work", "scratch", "candidates", "alpha"), { "ADAPTER.md": "# alpha\n" });
    writeFileSync(join(honest, "work", "scratch", "proposer_report.md"), "report\n");
    const dest = join(tmp(), "candidates");
    expect(collectCandidates(honest, "work/scratch/candidates", dest)).toEqual({ names: ["alpha"], problems: [] });
    expect(readFileSync(join(dest, "alpha", "ADAPTER.md"), "utf8")).toBe("# alpha\n");
    expect(readBoxPlain(honest, "work/scratch", "proposer_report.md")?.data.toString()).toBe("report\n");
  });

  it("a candidate deeper than PATH_MAX is refused with its problem; the other candidates are collected", () => {
    const from = tmp();
    writeTree(join(from, "alpha"), { "ADAPTER.md": "# alpha\n" });
    // 300 folders of 20 characters, a path of 6300 bytes past PATH_MAX (4096): two chains of 150, one renamed into
    // the other's leaf, so no path the shell names is too long
    const chain = Array.from({ length: 150 }, () => "d".repeat(20)).join("/");
    mkdirSync(join(from, "deep", chain), { recursive: true });
    writeFileSync(join(from, "deep", "ADAPTER.md"), "# deep\n");
    mkdirSync(join(from, "x", chain), { recursive: true });
    writeFileSync(join(from, "x", chain, "leaf.md"), "leaf\n");
    execFileSync("mv", [join(from, "x", "d".repeat(20)), join(from, "deep", chain)]);
    execFileSync("rmdir", [join(from, "x")]);
    const dest = join(tmp(), "candidates");
    try {
      const { names, problems } = collectCandidates(from, "", dest);
      expect(names).toEqual(["alpha"]);
      expect(problems).toHaveLength(1);
      expect(problems[0].name).toBe("deep");
      expect(problems[0].problem).toMatch(/^holds a path deeper than 1024 bytes \(d{20}\/d{20}.*; a candidate holds a shallow tree of plain files and folders, so it was not collected$/);
      expect(readdirSync(dest)).toEqual(["alpha"]);
    } finally {
      execFileSync("rm", ["-rf", from]);
    }
  });

  it("a round asked for k = 2 queues exactly 2 of 3 valid candidates (name order); the third is recorded invalid", () => {
    const run = tmp();
    const template = join(tmp(), "template");
    writeTemplate(template);
    writeTree(join(template, "seed_adapter"), { "ADAPTER.md": "seed\n" });
    const from = tmp();
    for (const n of ["alpha", "beta", "gamma"]) writeTree(join(from, n), { "ADAPTER.md": `# ${n}\n` });
    const state = seedCandidate(run, join(template, "seed_adapter"), template);
    collectCandidates(from, "", runPaths(run).scratchCandidates);
    const { queued, rejected } = ingestRound(run, state, 1, template, 2);
    expect(queued).toEqual(["alpha", "beta"]);
    expect(state.queue.filter((q) => q !== "seed")).toEqual(["alpha", "beta"]);
    expect(rejected).toEqual([{ id: "gamma", problems: ["gamma: the round asked for 2 candidates and alpha, beta came first (name order), so it was not queued"] }]);
    expect(state.candidates.find((c) => c.id === "gamma")?.status).toBe("invalid");
  });
});

describe("proposerOptions and proposerCost", () => {
  it("sets web search explicitly, off by default, and takes KEY=VALUE arguments as the harness's options", () => {
    expect(proposerOptions("codex", [], false)).toEqual({ web_search: "disabled" });
    expect(proposerOptions("codex", ["reasoning_effort=medium"], true)).toEqual({ reasoning_effort: "medium", web_search: "live" });
    expect(proposerOptions("claude", ["max_turns=40"], false)).toEqual({ max_turns: "40", web_search: "disabled" });
    expect(codeOf(() => proposerOptions("codex", ["-c", 'model_reasoning_effort="medium"'], false))).toBe("proposer_arg_invalid");
    expect(codeOf(() => proposerOptions("codex", ["web_search=live"], false))).toBe("proposer_arg_invalid");
  });

  it("prices from tokens when the gateway had no price, else takes the gateway's", () => {
    const price = { input: 1, cached_input: 0.1, output: 4 };
    const tokens = { input: 1_000_000, cached_read: 2_000_000, cache_write: 0, output: 500_000 };
    expect(proposerCost({ spend: { live_usd: 0, final_usd: null, source: "lower_bound" }, tokens }, price)).toEqual({ usd: 1 + 0.2 + 2, source: "price" });
    expect(proposerCost({ spend: { live_usd: 0.5, final_usd: 0.7, source: "measured" }, tokens }, price)).toEqual({ usd: 0.7, source: "gateway" });
    expect(proposerCost({ spend: { live_usd: 0.25, final_usd: null, source: "lower_bound" }, tokens })).toEqual({ usd: 0.25, source: "lower_bound" });
  });
});

describe("runProposer: refused before anything is recorded or started", () => {
  it("an unknown placeholder, a bad argument, a model the CLI cannot call, a k below 1", async () => {
    const home = tmp();
    const store = openStore(home);
    const template = join(tmp(), "template");
    writeTemplate(template);
    const run = runFolder();
    const base = {
      store, home, runDir: run, round: 1, step: 1, k: 2, backend: "codex" as const, model: "openai/gpt-5", templateDir: template,
      engine: async () => {
        throw new Error("the engine must not be opened");
      },
    };
    const code = async (o: Partial<Parameters<typeof runProposer>[0]>) => {
      try {
        await runProposer({ ...base, ...o });
      } catch (e) {
        return e instanceof EvolveError ? e.code : String(e);
      }
      return undefined;
    };
    try {
      expect(await code({ prompt: "write {k} into {scratch}" })).toBe("propose_placeholder_unknown");
      expect(await code({ args: ["--search"] })).toBe("proposer_arg_invalid");
      expect(await code({ args: ["no_such_option=1"] })).toBe("agent_option_unknown");
      expect(await code({ model: "anthropic/claude-sonnet-4-5" })).toBe("agent_model_unsupported");
      expect(await code({ k: 0 })).toBe("usage");
      expect(store.listJobs()).toEqual([]);
      expect(existsSync(join(run, "step_0001", "output"))).toBe(false);
    } finally {
      await store.close();
    }
  });
});
