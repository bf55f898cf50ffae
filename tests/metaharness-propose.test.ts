/**
 * The proposal round's pieces that need no engine (issue 13 §1): the round prompt's placeholders, the task folder a
 * round runs (D's snapshot, never validation or test material, no link followed), the collection of the candidates
 * out of the trial's artifacts, the proposer's options and its cost when the gateway has no price.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EvolveError } from "../engine/errors.ts";
import { DEFAULT_PROPOSE_PROMPT, fillPrompt, PROMPT_PLACEHOLDERS, type PromptVars } from "../engine/metaharness/propose.ts";
import { collectCandidates, proposerCost, proposerOptions, writeProposalTask } from "../engine/metaharness/proposer.ts";
import { parseTaskToml } from "../engine/task/model.ts";

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
      if (statSync(p, { throwIfNoEntry: false })?.isDirectory()) walk(p, r);
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
  it("writes a no-network task whose image holds D (state and the search steps only) under /work", () => {
    const run = runFolder();
    const dest = join(tmp(), "task");
    const info = writeProposalTask({ runDir: run, dest, round: 2, instruction: "the filled prompt\n", timeoutSec: 900 });
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
    ]);
    expect(statSync(join(dest, "tests", "test.sh")).mode & 0o111).not.toBe(0);
    expect(readFileSync(join(dest, "tests", "test.sh"), "utf8")).toContain("/work/scratch/candidates");
  });

  it("shows the template at /work/template when given", () => {
    const run = runFolder();
    const template = tmp();
    mkdirSync(join(template, ".hermit"));
    writeFileSync(join(template, ".hermit", "EVOLVER.md"), "guide\n");
    const dest = join(tmp(), "task");
    writeProposalTask({ runDir: run, dest, round: 1, instruction: "x", timeoutSec: 60, templateDir: template });
    expect(readFileSync(join(dest, "environment", "d", "template", ".hermit", "EVOLVER.md"), "utf8")).toBe("guide\n");
  });
});

describe("collectCandidates", () => {
  it("copies real candidate folders; a link, a file or a folder holding a link is a problem, never copied through", () => {
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
    const { names, problems } = collectCandidates(from, dest);
    expect(names).toEqual(["good"]);
    expect(problems.map((p) => p.name).sort()).toEqual(["a-file", "holds-link", "is-link"]);
    expect(problems.find((p) => p.name === "is-link")?.problem).toMatch(/symbolic link/);
    expect(problems.find((p) => p.name === "holds-link")?.problem).toMatch(/symbolic link/);
    expect(files(dest)).toEqual(["good/ADAPTER.md", "good/sub/notes.md"]);
    expect(existsSync(join(dest, "last-round"))).toBe(false);
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
