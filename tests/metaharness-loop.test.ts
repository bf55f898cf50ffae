/**
 * `evolve metaharness run`'s engine without an engine (issue 13): run.toml and its flags validated with
 * metaharness_config_invalid naming the key, the --dry-run projection, and the step loop with a scripted evaluator
 * and proposer injected through runMetaHarness's options: which candidate each step evaluates, the records, a
 * tampered candidate never handed back, finalize's choice, the holdout's paired statistics, and a killed run that
 * resumes without evaluating any step or running any round twice.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { conductorCardRunner } from "../engine/eval/conductor-runner.ts";
import { openLocalGateway } from "../engine/eval/local-gateway.ts";
import { resolveRunConfig, type MetaRunConfig } from "../engine/metaharness/config.ts";
import { runPaths } from "../engine/metaharness/layout.ts";
import { cardsSearch, planRun, roundSpend, runMetaHarness, taskInfo, type Propose, type RunEvent, type SearchEvaluator, type TaskResult } from "../engine/metaharness/run.ts";
import { loadState } from "../engine/metaharness/state.ts";
import { openStore } from "../engine/store/index.ts";
import { ScriptedUpstream } from "../fixtures/upstream/server.ts";
import { buildUpstreams } from "../gateway/upstreams.ts";
import { cliHost } from "./support/cli-host.ts";
import { expectCode } from "./support/expect-code.ts";
import { writeTree } from "./support/evolve-project.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "evolve-mh-loop-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const MARK = "MARK-7f3a";

/** A search set of `tasks` whose score is 1 when the adapter's ADAPTER.md carries the marker; counts evaluations. */
function markerSearch(tasks: string[], calls: string[]): SearchEvaluator {
  return {
    source: "fixture@1",
    tasks: () => tasks,
    async evaluate({ label, adapter }) {
      calls.push(label);
      const text = readFileSync(join(adapter, "ADAPTER.md"), "utf8");
      const score = text.includes(MARK) ? 1 : 0;
      const results: TaskResult[] = tasks.map((task) => ({ task, score, cost_usd: 0.01, tokens: 10, material: { input: `do ${task}`, output: "done", score: { score }, verifier: "ok", trajectory: { schema_version: "ATIF-v1.7", steps: [] } } }));
      return { results };
    },
  };
}

/** A proposer that writes `good-r<round>` (with the marker) and `plain-r<round>` (without) as k = 2 candidates. */
function scriptedProposer(run: string, rounds: number[], fail?: (round: number) => boolean): Propose {
  return async ({ round }) => {
    rounds.push(round);
    if (fail?.(round)) throw new Error("killed");
    const sc = runPaths(run).scratchCandidates;
    rmSync(sc, { recursive: true, force: true });
    writeTree(join(sc, `plain-r${round}`), { "ADAPTER.md": "Just do the task.\n" });
    writeTree(join(sc, `good-r${round}`), { "ADAPTER.md": `Read the task twice. ${MARK}\n`, "candidate.json": JSON.stringify({ hypothesis: "careful reading", base: "seed" }) });
    return { candidates: [`good-r${round}`, `plain-r${round}`], problems: [], cost_usd: 0.5, cost_source: "gateway", tokens: { input: 100, output: 20 }, exitCode: 0, trialId: `trial-${round}`, jobId: `job-${round}` };
  };
}

function config(over: Partial<MetaRunConfig> = {}): MetaRunConfig {
  const seed = join(dir, "seed");
  if (!existsSync(seed)) writeTree(seed, { "ADAPTER.md": "Solve it.\n" });
  return { search: { kind: "dataset", ref: "fixture@1" }, agent: "claude-code", model: "anthropic/x", startFrom: seed, k: 2, maxRounds: 2, epochs: 5, run: join(dir, "run"), proposer: { backend: "codex", model: "openai/y", args: [], webSearch: false }, ...over };
}

describe("run.toml and its flags", () => {
  it("reads the file, with paths from its folder, and flags over its keys", () => {
    writeFileSync(join(dir, "run.toml"), 'dataset = "tasks@1"\nagent = "conductor"\nmodel = "p/m"\nstart_from = "seed"\nk = 3\nmax_rounds = 2\nrun = "runs/a"\n[proposer]\nmodel = "openai/gpt"\nargs = ["reasoning_effort=low"]\nprice = { input = 1, cached_input = 0.1, output = 4 }\n');
    const c = resolveRunConfig({ config: join(dir, "run.toml") }, "/elsewhere");
    expect(c.search).toEqual({ kind: "dataset", ref: "tasks@1" });
    expect(c.startFrom).toBe(join(dir, "seed"));
    expect(c.run).toBe(join(dir, "runs/a"));
    expect(c.epochs).toBe(1 + 2 * 3);
    expect(c.proposer).toMatchObject({ backend: "codex", model: "openai/gpt", args: ["reasoning_effort=low"], webSearch: false, price: { input: 1, cached_input: 0.1, output: 4 } });
    const f = resolveRunConfig({ config: join(dir, "run.toml"), k: "1", epochs: "4", run: "r2", proposer: "claude", webSearch: true }, "/cwd");
    expect(f).toMatchObject({ k: 1, epochs: 4, run: "/cwd/r2", proposer: { backend: "claude", webSearch: true } });
  });

  it.each([
    [{ agent: "a", startFrom: "s", run: "r", maxRounds: "1", proposerModel: "p/m" }, "dataset"],
    [{ dataset: "x@1", path: "p", agent: "a", startFrom: "s", run: "r", maxRounds: "1", proposerModel: "p/m" }, "path"],
    [{ dataset: "no-version", agent: "a", startFrom: "s", run: "r", maxRounds: "1", proposerModel: "p/m" }, "dataset"],
    [{ dataset: "x@1", startFrom: "s", run: "r", maxRounds: "1", proposerModel: "p/m" }, "agent"],
    [{ dataset: "x@1", agent: "a", run: "r", maxRounds: "1", proposerModel: "p/m" }, "start_from"],
    [{ dataset: "x@1", agent: "a", startFrom: "s", run: "r", k: "0", maxRounds: "1", proposerModel: "p/m" }, "k"],
    [{ dataset: "x@1", agent: "a", startFrom: "s", run: "r", proposerModel: "p/m" }, "epochs"],
    [{ dataset: "x@1", agent: "a", startFrom: "s", maxRounds: "1", proposerModel: "p/m" }, "run"],
    [{ dataset: "x@1", agent: "a", startFrom: "s", run: "r", maxRounds: "1", proposerModel: "p/m", proposer: "gpt" }, "proposer.backend"],
    [{ dataset: "x@1", agent: "a", startFrom: "s", run: "r", maxRounds: "1" }, "proposer.model"],
    [{ dataset: "x@1", agent: "a", startFrom: "s", run: "r", maxRounds: "1", proposerModel: "p/m", holdout: "test" }, "holdout"],
  ])("refuses %j naming %s", async (flags, key) => {
    const e = await expectCode(() => resolveRunConfig(flags, dir), "metaharness_config_invalid");
    expect(e.message.startsWith(`${key}: `)).toBe(true);
  });

  it("refuses an unknown key, a bad type and a bad price in the file, naming the key", async () => {
    const cases: [string, string][] = [
      ['dataset = "x@1"\nstep_size = 5\n', "step_size"],
      ['dataset = "x@1"\nagent = "a"\nstart_from = "s"\nrun = "r"\nk = "two"\n[proposer]\nmodel = "p/m"\n', "k"],
      ['dataset = "x@1"\nagent = "a"\nstart_from = "s"\nrun = "r"\nmax_rounds = 1\n[proposer]\nmodel = "p/m"\nweb_search = "yes"\n', "proposer.web_search"],
      ['dataset = "x@1"\nagent = "a"\nstart_from = "s"\nrun = "r"\nmax_rounds = 1\n[proposer]\nmodel = "p/m"\nprice = { input = 1, output = 2 }\n', "proposer.price.cached_input"],
      ['dataset = "x@1"\n[proposer]\nsearch = true\n', "proposer.search"],
      ["not toml =", "config"],
    ];
    for (const [text, key] of cases) {
      writeFileSync(join(dir, "run.toml"), text);
      const e = await expectCode(() => resolveRunConfig({ config: join(dir, "run.toml") }, dir), "metaharness_config_invalid");
      expect(e.message.startsWith(`${key}: `), e.message).toBe(true);
    }
    // a FIFO in place of run.toml is refused at once, never waited on
    const fifo = join(dir, "fifo.toml");
    execFileSync("mkfifo", [fifo]);
    const e = await expectCode(() => resolveRunConfig({ config: fifo }, dir), "metaharness_config_invalid");
    expect(e.message).toMatch(/^config: .* cannot be read \(not a regular file/);
  });
});

describe("--dry-run", () => {
  it("projects (1 + R × k) × |search set| rollouts and R proposer sessions, and what is left of a started run", async () => {
    const c = config({ k: 2, maxRounds: 6, epochs: 13 });
    expect(planRun(c, 50)).toMatchObject({ rollouts: 13 * 50, proposer_sessions: 6, done_steps: 0, remaining_rollouts: 650, holdout: null });
    expect(planRun(config({ k: 3, maxRounds: null, epochs: 7 }), 10)).toMatchObject({ rollouts: 70, proposer_sessions: 3 });
    expect(planRun(c, 50, { source: "t@1", tasks: 20 }).holdout).toEqual({ source: "t@1", tasks: 20, rollouts: 40 });
    // a run with 2 steps recorded
    const calls: string[] = [];
    await runMetaHarness({ config: config({ epochs: 2 }), search: markerSearch(["t1"], calls), propose: scriptedProposer(join(dir, "run"), []) });
    expect(planRun(config({ epochs: 5 }), 1)).toMatchObject({ done_steps: 2, remaining_rollouts: 3 });
  });
});

describe("the step loop", () => {
  it("evaluates the seed, then each candidate once, never a tampered one; finalize picks the best; the records are there", async () => {
    const cfg = config({ k: 2, maxRounds: 2, epochs: 5 });
    const calls: string[] = [];
    const rounds: number[] = [];
    const events: RunEvent[] = [];
    const p = runPaths(cfg.run);
    const r = await runMetaHarness({
      config: cfg,
      search: markerSearch(["org/t1", "t2"], calls),
      propose: scriptedProposer(cfg.run, rounds),
      onEvent: (e) => {
        events.push(e);
        // between rounds: round 1's second candidate is changed in place before its step
        if (e.type === "step_start" && e.step === 2) writeFileSync(join(p.candidateAdapter("plain-r1"), "ADAPTER.md"), `tampered ${MARK}\n`);
      },
    });
    // step 1 seed; round 1 queues good-r1, plain-r1; step 2 good-r1; plain-r1 tampered → the best (good-r1) at 3;
    // round 2 at step 3 (nothing queued); steps 4, 5: good-r2, plain-r2
    expect(calls).toEqual(["metaharness seed step 1", "metaharness good-r1 step 2", "metaharness good-r1 step 3", "metaharness good-r2 step 4", "metaharness plain-r2 step 5"]);
    expect(rounds).toEqual([1, 2]);
    expect(events.filter((e) => e.type === "tampered").map((e) => (e as { id: string }).id)).toEqual(["plain-r1"]);
    const s = loadState(cfg.run);
    expect(s.candidates.find((c) => c.id === "plain-r1")).toMatchObject({ status: "tampered", evaluations: [] });
    expect(r).toMatchObject({ finalized: "good-r1", mean: 1, steps: 5, rounds: 2 });
    expect(s.finalized).toBe("good-r1");
    expect(s.rounds!.map((x) => [x.round, x.step, x.cost_usd, x.queued])).toEqual([
      [1, 1, 0.5, ["good-r1", "plain-r1"]],
      [2, 3, 0.5, ["good-r2", "plain-r2"]],
    ]);
    // each round's spend: its candidates' rollouts (2 tasks per evaluation) and its proposer session
    expect(roundSpend(s).map((x) => [x.round, x.step, x.rollouts, x.proposer_usd, x.proposer_tokens])).toEqual([
      [0, null, 2, 0, 0],
      [1, 1, 4, 0.5, 120],
      [2, 3, 4, 0.5, 120],
    ]);
    for (const step of [1, 2, 3, 4, 5]) {
      for (const t of ["org/t1", "t2"]) {
        const f = p.stepTask(step, t);
        for (const file of [f.input, f.output, f.score, f.verifier, f.trajectory]) expect(existsSync(file), file).toBe(true);
      }
      expect(existsSync(p.stepOutput(step).report)).toBe(true);
    }
    expect(readFileSync(p.stepOutput(2).report, "utf8")).toContain("Evaluated: `good-r1`, mean 1.0000");
    const summary = readFileSync(p.summary, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { id: string; status: string });
    expect(summary.map((l) => [l.id, l.status])).toEqual([["seed", "evaluated"], ["good-r1", "evaluated"], ["plain-r1", "tampered"], ["good-r2", "evaluated"], ["plain-r2", "evaluated"]]);
    // the task information, in the workspace and in D (the state folder the proposer reads)
    for (const f of [join(p.workspace, "TASK_INFO.md"), join(p.state, "TASK_INFO.md")]) expect(readFileSync(f, "utf8")).toContain("prepended to the task's instruction");
  });

  it("resumes a killed run: no step evaluated twice, no ingested round run again", async () => {
    const cfg = config({ k: 2, maxRounds: 2, epochs: 5 });
    const calls: string[] = [];
    const rounds: number[] = [];
    let killed = false;
    // the first run dies in round 2's proposer session (after step 3's evaluation is recorded)
    await expect(runMetaHarness({ config: cfg, search: markerSearch(["t1"], calls), propose: scriptedProposer(cfg.run, rounds, (r) => r === 2 && !killed && (killed = true)) })).rejects.toThrow("killed");
    expect(calls.length).toBe(3);
    expect(loadState(cfg.run)).toMatchObject({ step: 3, round: 1, handed_back: null });
    const events: RunEvent[] = [];
    const r = await runMetaHarness({ config: cfg, search: markerSearch(["t1"], calls), propose: scriptedProposer(cfg.run, rounds), onEvent: (e) => events.push(e) });
    expect(events[0]).toEqual({ type: "resumed", step: 3, round: 1 });
    expect(calls.map((c) => c.split(" step ")[1])).toEqual(["1", "2", "3", "4", "5"]);
    // round 1 ran once; round 2 twice: its first session died before anything was ingested
    expect(rounds).toEqual([1, 2, 2]);
    expect(r.steps).toBe(5);
    // a finished run resumed does nothing more
    await runMetaHarness({ config: cfg, search: markerSearch(["t1"], calls), propose: scriptedProposer(cfg.run, rounds) });
    expect(calls.length).toBe(5);
    expect(rounds.length).toBe(3);
  });

  it("an abort stops it with evolve_interrupted; a round that queued nothing is not run again on resume", async () => {
    const cfg = config({ k: 2, maxRounds: 3, epochs: 3 });
    const ctl = new AbortController();
    const calls: string[] = [];
    const rounds: number[] = [];
    const empty: Propose = async ({ round }) => {
      rounds.push(round);
      rmSync(runPaths(cfg.run).scratchCandidates, { recursive: true, force: true });
      writeTree(join(runPaths(cfg.run).scratchCandidates, "bad"), { "notes.md": "no ADAPTER.md\n" });
      return { candidates: ["bad"], problems: [], cost_usd: 0, cost_source: "gateway", tokens: {}, exitCode: 0 };
    };
    await expectCode(() => runMetaHarness({ config: cfg, search: markerSearch(["t1"], calls), propose: empty, signal: ctl.signal, onEvent: (e) => e.type === "handed_back" && calls.length === 1 && ctl.abort() }), "evolve_interrupted");
    const s = loadState(cfg.run);
    expect(s.step).toBe(1);
    expect(s.candidates.find((c) => c.id === "bad")?.status).toBe("invalid");
    await runMetaHarness({ config: cfg, search: markerSearch(["t1"], calls), propose: empty });
    // step 1's round (which queued nothing) is not run again; the seed is evaluated again as the best so far
    expect(rounds).toEqual([1, 2, 3]);
    expect(calls).toEqual(["metaharness seed step 1", "metaharness seed step 2", "metaharness seed step 3"]);
  });

  it("refuses to resume a run folder with another search set", async () => {
    const cfg = config({ epochs: 1 });
    await runMetaHarness({ config: cfg, search: markerSearch(["t1"], []), propose: scriptedProposer(cfg.run, []) });
    const other = { ...markerSearch(["t1"], []), source: "other@2" };
    await expectCode(() => runMetaHarness({ config: cfg, search: other, propose: scriptedProposer(cfg.run, []) }), "metaharness_run_mismatch");
  });

  it("evaluates the chosen and the starting adapter on the holdout, paired, into holdout.json", async () => {
    const cfg = config({ k: 2, maxRounds: 1, epochs: 3 });
    const hcalls: string[] = [];
    const r = await runMetaHarness({ config: cfg, search: markerSearch(["t1"], []), propose: scriptedProposer(cfg.run, []), holdout: { ...markerSearch(["h1", "h2", "h3"], hcalls), source: "held@1" } });
    expect(hcalls).toEqual(["metaharness holdout good-r1", "metaharness holdout seed"]);
    expect(r.holdout).toMatchObject({ source: "held@1", chosen: { id: "good-r1", mean: 1 }, seed: { id: "seed", mean: 0 }, rollouts: 6, stats: { n: 3, mean_gain: 1, sign_test: { wins: 3, losses: 0 } } });
    expect(JSON.parse(readFileSync(join(cfg.run, "holdout.json"), "utf8"))).toEqual(JSON.parse(JSON.stringify(r.holdout)));
    // held-out results never reach a step folder (D)
    expect(existsSync(join(cfg.run, "step_0001", "attempts", "holdout"))).toBe(false);
  });

  it("task information says how the adapter reaches each kind of acting agent", () => {
    expect(taskInfo({ agent: "conductor", search: { kind: "dataset", ref: "x@1" } }, 3)).toContain("planning seat");
    expect(taskInfo({ agent: "codex", search: { kind: "dataset", ref: "x@1" } }, 3)).toContain("/opt/evolve/agent-root/<path>");
  });
});

describe("evolve metaharness run (the command line)", () => {
  const host = cliHost();
  afterAll(() => host.close());
  const evolve = (args: string[]) => host.run(["metaharness", "run", ...args], { cwd: dir, env: { ...process.env, EVOLVE_HOME: join(dir, "home"), NO_COLOR: "1" }, timeoutMs: 60_000 });
  const ROOT = join(__dirname, "..");

  it("refuses a config without a search set in one line naming the key, exit 2", () => {
    const r = evolve(["-a", "oracle", "--start-from", "seed", "--run", "r", "--max-rounds", "1", "--proposer-model", "p/m"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("error[metaharness_config_invalid]");
    expect(r.stderr).toContain("dataset: no search set");
  });

  it("--dry-run on a task folder prints the projected rollouts and proposer sessions and runs nothing", () => {
    writeTree(join(dir, "seed"), { "ADAPTER.md": "Solve it.\n" });
    const r = evolve(["-p", join(ROOT, "fixtures/datasets/evolve-eval"), "-a", "oracle", "--start-from", "seed", "-k", "2", "--max-rounds", "3", "--proposer-model", "openai/x", "--run", "r", "--dry-run"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("rollouts: 14 = 7 × 2");
    expect(r.stdout).toContain("proposer sessions: 3 (codex, openai/x)");
    expect(existsSync(join(dir, "r"))).toBe(false);
  });
});

describe("a search set of task cards (the conductor on the host)", () => {
  it("evaluates each candidate with its ADAPTER.md in the conductor's system prompt, with the learning material", async () => {
    const upstream = new ScriptedUpstream();
    await upstream.start();
    const home = join(dir, "home");
    const store = openStore(home);
    const gateway = await openLocalGateway({ home, store, upstreams: buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-real", models: ["claude-sonnet-4-5"] } } }, {}) });
    // the answer is right only when the system prompt carries the marker (the adapter reached the planning seat)
    upstream.responder = (req) => ({ text: JSON.stringify(req.body?.system ?? "").includes(MARK) ? "the code is 42" : "no idea" });
    try {
      writeTree(join(dir, "cards"), { "c1.json": JSON.stringify({ id: "c1", domain: "d", prompt: "the code?", check: { contains: "42" } }), "c2.json": JSON.stringify({ id: "c2", domain: "d", prompt: "the code again?", check: { contains: "42" } }) });
      const cfg = config({ search: { kind: "cards", dir: join(dir, "cards") }, agent: "conductor", model: "anthropic/claude-sonnet-4-5", k: 2, maxRounds: 1, epochs: 2 });
      const search = cardsSearch({ dir: join(dir, "cards"), agent: "conductor", model: cfg.model, gateway, conductor: conductorCardRunner });
      const events: RunEvent[] = [];
      const r = await runMetaHarness({ config: cfg, search, propose: scriptedProposer(cfg.run, []), onEvent: (e) => events.push(e) });
      expect(events.filter((e) => e.type === "step_done").map((e) => e.type === "step_done" && [e.candidate, e.mean])).toEqual([
        ["seed", 0],
        ["good-r1", 1],
      ]);
      expect(r.finalized).toBe("good-r1");
      const t = runPaths(cfg.run).stepTask(2, "c1");
      expect(readFileSync(t.input, "utf8")).toBe("the code?");
      expect(readFileSync(t.output, "utf8")).toContain("42");
      expect(JSON.parse(readFileSync(t.score, "utf8"))).toMatchObject({ score: 1, valid: true });
      expect(JSON.parse(readFileSync(t.trajectory, "utf8")).schema_version).toMatch(/^ATIF/);
    } finally {
      await gateway.close();
      await store.close();
      await upstream.close();
    }
  });

  it("binds the run to its cards: a resume with another --cards folder is metaharness_run_mismatch, the same cards elsewhere are not", async () => {
    const card = (id: string, prompt: string) => JSON.stringify({ id, domain: "d", prompt, check: { contains: "42" } });
    writeTree(join(dir, "cards"), { "c1.json": card("c1", "the code?") });
    writeTree(join(dir, "copy"), { "c1.json": card("c1", "the code?") });
    writeTree(join(dir, "other"), { "c1.json": card("c1", "another question?") });
    const cfg = config({ search: { kind: "cards", dir: join(dir, "cards") }, agent: "conductor", model: "anthropic/claude-sonnet-4-5", epochs: 1 });
    const cards = (d: string) => cardsSearch({ dir: join(dir, d), agent: "conductor", model: cfg.model, conductor: conductorCardRunner });
    // the digest is of the cards' content: the same cards in another folder are the same search set
    expect(cards("copy").digest).toBe(cards("cards").digest);
    expect(cards("other").digest).not.toBe(cards("cards").digest);
    const evaluateNothing = (s: SearchEvaluator): SearchEvaluator => ({ ...s, evaluate: async () => ({ results: s.tasks().map((task) => ({ task, score: 0, cost_usd: 0, tokens: 0, material: { input: "", output: "", score: {}, verifier: "", trajectory: null } })) }) });
    await runMetaHarness({ config: cfg, search: evaluateNothing(cards("cards")), propose: scriptedProposer(cfg.run, []) });
    expect(JSON.parse(readFileSync(runPaths(cfg.run).runJson, "utf8")).search_digest).toBe(cards("cards").digest);
    const e = await expectCode(() => runMetaHarness({ config: { ...cfg, search: { kind: "cards", dir: join(dir, "other") } }, search: evaluateNothing(cards("other")), propose: scriptedProposer(cfg.run, []) }), "metaharness_run_mismatch");
    expect(e.message).toMatch(/was started on another search set/);
  });

  it("binds the run to where its cards ran: a host run resumed with the cards in boxes is metaharness_run_mismatch (issue 20 §6), as is a run.json of before the key", async () => {
    writeTree(join(dir, "cards"), { "c1.json": JSON.stringify({ id: "c1", domain: "d", prompt: "p", check: { contains: "42" } }) });
    const cfg = config({ search: { kind: "cards", dir: join(dir, "cards") }, agent: "conductor", model: "anthropic/claude-sonnet-4-5", epochs: 1 });
    const host = cardsSearch({ dir: join(dir, "cards"), agent: "conductor", model: cfg.model, conductor: conductorCardRunner });
    const nothing = (s: SearchEvaluator): SearchEvaluator => ({ ...s, evaluate: async () => ({ results: s.tasks().map((task) => ({ task, score: 0, cost_usd: 0, tokens: 0, material: { input: "", output: "", score: {}, verifier: "", trajectory: null } })) }) });
    await runMetaHarness({ config: cfg, search: nothing(host), propose: scriptedProposer(cfg.run, []) });
    const rj = runPaths(cfg.run).runJson;
    expect(JSON.parse(readFileSync(rj, "utf8")).isolation).toBe("host");
    // the boxed search set has the same digest (the same cards): only where they run differs
    const boxed: SearchEvaluator = { ...nothing(host), isolation: "box" };
    const e = await expectCode(() => runMetaHarness({ config: cfg, search: boxed, propose: scriptedProposer(cfg.run, []) }), "metaharness_run_mismatch");
    expect(e.message).toMatch(/was started with its task cards on the host \(--on-host\), not in boxes$/);
    // a cards run.json written before isolation was recorded ran on the host
    const { isolation: _, ...old } = JSON.parse(readFileSync(rj, "utf8"));
    writeFileSync(rj, JSON.stringify(old));
    await expectCode(() => runMetaHarness({ config: cfg, search: boxed, propose: scriptedProposer(cfg.run, []) }), "metaharness_run_mismatch");
    // resumed as it was started, it goes on
    await runMetaHarness({ config: cfg, search: nothing(host), propose: scriptedProposer(cfg.run, []) });
  });

  it("refuses cards with an agent other than the conductor, naming the key", async () => {
    writeTree(join(dir, "cards"), { "c1.json": JSON.stringify({ id: "c1", domain: "d", prompt: "p", check: { contains: "x" } }) });
    const e = await expectCode(() => cardsSearch({ dir: join(dir, "cards"), agent: "codex", model: "openai/x", conductor: conductorCardRunner }), "metaharness_config_invalid");
    expect(e.message.startsWith("agent: ")).toBe(true);
  });
});
