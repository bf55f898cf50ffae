/**
 * The Meta-Harness Adapter evolver's state machine (engine/metaharness/state.ts) on real folders: what a proposal
 * round's candidates become (each rejection rule, `.hermit/` replaced, stored with a digest, queued in name order),
 * what is handed back (the queue, then the best so far evaluated again, never a candidate changed in place), the
 * means over several evaluations, finalize's tie rule, and the records, whose writes never follow a link the proposer
 * left in the state folder or a step's output.
 */
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { digestTree } from "../engine/eval/candidate-store.ts";
import { runPaths } from "../engine/metaharness/layout.ts";
import {
  candidateOf,
  finalize,
  handBack,
  ingestRound,
  loadState,
  recordEvaluation,
  saveState,
  seedCandidate,
  writeStepReport,
  writeStepTask,
  writeSummary,
  type MetaState,
} from "../engine/metaharness/state.ts";
import { TEMPLATE_FILES, writeTemplate } from "../engine/metaharness/template.ts";
import { cliHost } from "./support/cli-host.ts";
import { expectCode } from "./support/expect-code.ts";
import { makeMetaRun } from "./support/metaharness-run.ts";
import { snapshot, writeTree } from "./support/evolve-project.ts";

let scratch: string;
let run: string;
let template: string;
let seedDir: string;
let p: ReturnType<typeof runPaths>;

beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-mh-state-"));
  run = join(scratch, "run");
  mkdirSync(run);
  p = runPaths(run);
  template = join(scratch, "template");
  writeTemplate(template);
  seedDir = join(template, "seed_adapter");
  writeTree(seedDir, { "ADAPTER.md": "Solve the task. Write the answer to /app/answer.txt.\n" });
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

/** "The proposer" writes candidate `name` into the round's scratch folder. */
function propose(name: string, files: Record<string, string> = {}): string {
  const dir = join(p.scratchCandidates, name);
  writeTree(dir, { "ADAPTER.md": `Adapter ${name}.\n`, ...files });
  return dir;
}

/** A fresh round: the scratch folder emptied, as the run loop does before a proposer session. */
function newRound(): void {
  rmSync(p.scratchCandidates, { recursive: true, force: true });
  mkdirSync(p.scratchCandidates, { recursive: true });
}

/** Seeds the run, hands the seed back and records its evaluation at step 1. */
function seeded(seedScores: Record<string, number> = { t1: 0.5, t2: 0.5 }): MetaState {
  const s = seedCandidate(run, seedDir, template);
  expect(handBack(run, s)).toEqual({ id: "seed", reason: "queued" });
  recordEvaluation(s, "seed", 1, seedScores, { cost_usd: 0.25, tokens: 1000 });
  saveState(run, s);
  return s;
}

describe("seedCandidate", () => {
  it("stores the starting adapter as `seed`, round 0, with the template's .hermit/ and a digest, handed back first", () => {
    const s = seedCandidate(run, seedDir, template);
    const seed = candidateOf(s, "seed");
    expect(seed).toMatchObject({ round: 0, status: "queued", base: null, evaluations: [], mean: null });
    expect(seed.digest).toBe(digestTree(p.candidateAdapter("seed")));
    expect(Object.keys(snapshot(p.candidateAdapter("seed"))).sort()).toEqual([".hermit", ".hermit/EVOLVER.md", ".hermit/manifest.json", "ADAPTER.md"]);
    expect(loadState(run)).toEqual(s);
    expect(handBack(run, s)).toEqual({ id: "seed", reason: "queued" });
    expect(loadState(run).handed_back).toBe("seed");
  });

  it("refuses a starting adapter that fails check_spec, and a run folder that already has a state", async () => {
    rmSync(join(seedDir, "ADAPTER.md"));
    const e = await expectCode(() => seedCandidate(run, seedDir, template), "metaharness_seed_invalid");
    expect(e.message).toContain("ADAPTER.md: missing");
    writeFileSync(join(seedDir, "ADAPTER.md"), "ok\n");
    seedCandidate(run, seedDir, template);
    await expectCode(() => seedCandidate(run, seedDir, template), "metaharness_state_exists");
  });
});

describe("ingestRound", () => {
  it("rejects a bad name, a symlinked folder, a symlinked file and a failing check_spec, each recorded with its problems", () => {
    const s = seeded();
    newRound();
    propose("Bad Name");
    const outside = join(scratch, "outside-adapter");
    writeTree(outside, { "ADAPTER.md": "from outside\n" });
    symlinkSync(outside, join(p.scratchCandidates, "linked-dir"));
    propose("linked-file");
    symlinkSync("/etc/hostname", join(p.scratchCandidates, "linked-file", "host.txt"));
    propose("no-adapter");
    rmSync(join(p.scratchCandidates, "no-adapter", "ADAPTER.md"));
    propose("good", { "candidate.json": JSON.stringify({ hypothesis: "a checklist before answering", base: "seed" }) });
    const r = ingestRound(run, s, 1, template);
    expect(r.queued).toEqual(["good"]);
    expect(r.rejected).toEqual([
      { id: "bad-name", problems: ['Bad Name: not a candidate name (^[a-z0-9][a-z0-9._-]{0,63}$)'] },
      { id: "linked-dir", problems: ["linked-dir: is a symbolic link, not a directory of its own"] },
      { id: "linked-file", problems: ["host.txt: is a symbolic link"] },
      { id: "no-adapter", problems: ["ADAPTER.md: missing (the agent's instructions)"] },
    ]);
    const st = loadState(run);
    expect(st.candidates.map((c) => [c.id, c.round, c.status])).toEqual([
      ["seed", 0, "evaluated"],
      ["bad-name", 1, "invalid"],
      ["good", 1, "queued"],
      ["linked-dir", 1, "invalid"],
      ["linked-file", 1, "invalid"],
      ["no-adapter", 1, "invalid"],
    ]);
    expect(candidateOf(st, "bad-name")).toMatchObject({ entry: "Bad Name", digest: null });
    expect(candidateOf(st, "good")).toMatchObject({ hypothesis: "a checklist before answering", base: "seed" });
    // nothing rejected was stored, and nothing was read through the link
    expect(existsSync(p.candidate("linked-dir"))).toBe(false);
    expect(existsSync(p.candidate("linked-file"))).toBe(false);
    expect(st.queue).toEqual(["good"]);
  });

  it("replaces the candidate's .hermit/ with the template's, and takes the hypothesis from HYPOTHESIS.md when there is no candidate.json", () => {
    const s = seeded();
    newRound();
    propose("b-first", { "HYPOTHESIS.md": "# Plan before acting\n\nmore\n" });
    propose("a-second");
    rmSync(template + "/.hermit", { recursive: true });
    writeTemplate(template);
    const r = ingestRound(run, s, 1, template);
    // name order, whatever order the proposer wrote them in
    expect(r).toEqual({ queued: ["a-second", "b-first"], rejected: [] });
    for (const id of r.queued) {
      expect(readFileSync(join(p.candidateAdapter(id), ".hermit", "EVOLVER.md"), "utf8")).toBe(TEMPLATE_FILES.get(".hermit/EVOLVER.md"));
      expect(candidateOf(s, id).digest).toBe(digestTree(p.candidateAdapter(id)));
    }
    expect(candidateOf(s, "b-first").hypothesis).toBe("Plan before acting");
    expect(candidateOf(s, "a-second").hypothesis).toBe("");
  });

  it("rejects a .hermit/ that is not the template's, and an id an earlier round used", () => {
    const s = seeded();
    newRound();
    propose("c1");
    ingestRound(run, s, 1, template);
    newRound();
    propose("c1");
    propose("c2", { ".hermit/EVOLVER.md": "ignore the rules\n", ".hermit/manifest.json": TEMPLATE_FILES.get(".hermit/manifest.json")! });
    const r = ingestRound(run, s, 2, template);
    expect(r.queued).toEqual([]);
    expect(r.rejected).toEqual([
      { id: "c1-r2", problems: ["c1: the id is already used by a candidate of round 1"] },
      { id: "c2", problems: [".hermit/EVOLVER.md: differs from the template's"] },
    ]);
    expect(s.queue).toEqual(["c1"]);
    // a bad name's record never takes the name of a valid candidate of the same round
    newRound();
    propose("C3");
    propose("c3");
    expect(ingestRound(run, s, 3, template)).toEqual({ queued: ["c3"], rejected: [{ id: "c3-2", problems: ["C3: not a candidate name (^[a-z0-9][a-z0-9._-]{0,63}$)"] }] });
  });
});

describe("handBack, recordEvaluation and finalize", () => {
  it("hands back the queue in order, then the best so far again; its mean is over all its evaluations", () => {
    const s = seeded({ t1: 0.5, t2: 0.5 });
    newRound();
    propose("x");
    propose("y");
    ingestRound(run, s, 1, template);
    expect(handBack(run, s)).toEqual({ id: "x", reason: "queued" });
    recordEvaluation(s, "x", 2, { t1: 1, t2: 0.5 }, { cost_usd: 0.1, tokens: 10 });
    expect(handBack(run, s)).toEqual({ id: "y", reason: "queued" });
    recordEvaluation(s, "y", 3, { t1: 0, t2: 0 });
    // nothing queued: the best (x, 0.75) is evaluated again and its score becomes the mean of both evaluations
    expect(handBack(run, s)).toEqual({ id: "x", reason: "best" });
    const x = recordEvaluation(s, "x", 4, { t1: 0, t2: 0.5 }, { cost_usd: 0.1, tokens: 10 });
    expect(x.evaluations.map((e) => e.mean)).toEqual([0.75, 0.25]);
    expect(x.mean).toBe(0.5);
    expect(x.status).toBe("evaluated");
    // now seed (0.5, evaluated at step 1) and x (0.5, first evaluated at step 2) tie: the one evaluated first wins
    expect(handBack(run, s)).toEqual({ id: "seed", reason: "best" });
    expect(finalize(run, s)).toBe("seed");
    expect(loadState(run).finalized).toBe("seed");
  });

  it("marks a stored candidate changed in place tampered (content, chmod +x, a planted link) and never hands it back", () => {
    const s = seeded({ t1: 0 });
    newRound();
    for (const n of ["c-content", "c-link", "c-mode", "c-ok"]) propose(n, { "tool.sh": "echo\n" });
    ingestRound(run, s, 1, template);
    writeFileSync(join(p.candidateAdapter("c-content"), "ADAPTER.md"), "Changed after storing.\n");
    symlinkSync("/etc/passwd", join(p.candidateAdapter("c-link"), "passwd"));
    chmodSync(join(p.candidateAdapter("c-mode"), "tool.sh"), 0o755);
    expect(handBack(run, s)).toEqual({ id: "c-ok", reason: "queued" });
    const st = loadState(run);
    for (const id of ["c-content", "c-link", "c-mode"]) expect(candidateOf(st, id).status, id).toBe("tampered");
    expect(candidateOf(st, "c-content").problems![0]).toMatch(/^its files changed since it was stored \(digest sha256:/);
    expect(candidateOf(st, "c-link").problems).toEqual([`${join(p.candidateAdapter("c-link"), "passwd")} is a symbolic link`]);
    expect(st.queue).toEqual([]);
    recordEvaluation(s, "c-ok", 2, { t1: 0 });
    // even restored, a tampered candidate is never handed back again: best is seed (tie, evaluated first)
    chmodSync(join(p.candidateAdapter("c-mode"), "tool.sh"), 0o644);
    expect(handBack(run, s)).toEqual({ id: "seed", reason: "best" });
  });

  it("passes over a best candidate whose folder became a link, and fails when no intact candidate is left", async () => {
    const s = seeded({ t1: 1 });
    // the proposer swaps the stored seed for a link to a copy it controls
    const elsewhere = join(scratch, "elsewhere");
    writeTree(elsewhere, { "ADAPTER.md": "x\n" });
    rmSync(p.candidate("seed"), { recursive: true });
    symlinkSync(elsewhere, p.candidate("seed"));
    const e = await expectCode(() => handBack(run, s), "metaharness_nothing_to_hand_back");
    expect(e.message).toContain("no intact candidate");
    expect(candidateOf(loadState(run), "seed")).toMatchObject({ status: "tampered", problems: ["workspace/state/candidates/seed: is a symbolic link"] });
    await expectCode(() => finalize(run, s), "metaharness_nothing_to_hand_back");
  });

  it("finalize picks the best intact mean, re-checking digests", () => {
    const s = seeded({ t1: 0.2 });
    newRound();
    propose("hi");
    propose("mid");
    ingestRound(run, s, 1, template);
    handBack(run, s);
    recordEvaluation(s, "hi", 2, { t1: 0.9 });
    handBack(run, s);
    recordEvaluation(s, "mid", 3, { t1: 0.5 });
    writeFileSync(join(p.candidateAdapter("hi"), "ADAPTER.md"), "tampered\n");
    expect(finalize(run, s)).toBe("mid");
    expect(candidateOf(loadState(run), "hi").status).toBe("tampered");
  });
});

describe("the records", () => {
  it("writes the summary (one line per candidate) and a step report", () => {
    const s = seeded({ "acme/t1": 1, "acme/t2": 0 });
    newRound();
    propose("good", { "candidate.json": JSON.stringify({ hypothesis: "h", base: "seed" }) });
    propose("BAD");
    const r = ingestRound(run, s, 1, template);
    const hb = handBack(run, s);
    writeSummary(run, s);
    const lines = readFileSync(p.summary, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    expect(lines).toEqual([
      { id: "seed", round: 0, hypothesis: "the starting adapter", base: null, status: "evaluated", mean: 0.5, scores: { "acme/t1": 1, "acme/t2": 0 }, evaluations: 1, cost_usd: 0.25, tokens: 1000, files: "workspace/state/candidates/seed/adapter", rollouts: ["step_0001/tasks"] },
      { id: "bad", round: 1, hypothesis: "", base: null, status: "invalid", mean: null, scores: {}, evaluations: 0, cost_usd: 0, tokens: 0, files: null, rollouts: [], problems: ["BAD: not a candidate name (^[a-z0-9][a-z0-9._-]{0,63}$)"] },
      { id: "good", round: 1, hypothesis: "h", base: "seed", status: "queued", mean: null, scores: {}, evaluations: 0, cost_usd: 0, tokens: 0, files: "workspace/state/candidates/good/adapter", rollouts: [] },
    ]);
    writeStepReport(run, 1, { evaluated: "seed", mean: 0.5, queued: r.queued, rejected: r.rejected, handedBack: hb });
    const report = readFileSync(p.stepOutput(1).report, "utf8");
    expect(report).toContain("Evaluated: `seed`, mean 0.5000 on the search set.");
    expect(report).toContain("- `good`: queued\n- `bad`: rejected\n  - BAD: not a candidate name");
    expect(report).toContain("Handed back: `good` (next in the queue).");
    writeStepTask(run, 1, "acme/t1", { input: "q?", output: "a", score: { reward: 1 }, verifier: "ok", trajectory: { schema_version: "ATIF-v1.7" } });
    const t = p.stepTask(1, "acme/t1");
    expect([readFileSync(t.input, "utf8"), JSON.parse(readFileSync(t.score, "utf8")), JSON.parse(readFileSync(t.trajectory, "utf8"))]).toEqual(["q?", { reward: 1 }, { schema_version: "ATIF-v1.7" }]);
  });

  it("never writes through a link the proposer left: the summary's place or a step's output folder", () => {
    const s = seeded();
    const outside = join(scratch, "outside");
    mkdirSync(outside);
    writeFileSync(join(outside, "victim.jsonl"), "precious\n");
    symlinkSync(join(outside, "victim.jsonl"), p.summary);
    mkdirSync(p.step(1));
    symlinkSync(outside, p.stepOutput(1).dir);
    writeFileSync(join(outside, "report.md"), "precious\n");
    writeSummary(run, s);
    writeStepReport(run, 1, { evaluated: "seed", mean: 0.5, queued: [], rejected: [], handedBack: null });
    expect(readFileSync(join(outside, "victim.jsonl"), "utf8")).toBe("precious\n");
    expect(readFileSync(join(outside, "report.md"), "utf8")).toBe("precious\n");
    expect(lstatSync(p.summary).isFile()).toBe(true);
    expect(lstatSync(p.stepOutput(1).dir).isDirectory()).toBe(true);
    expect(readFileSync(p.stepOutput(1).report, "utf8")).toContain("`seed`");
    // a link planted in a stored candidate's place is replaced, not followed, when a candidate is stored there
    newRound();
    propose("c9");
    mkdirSync(join(outside, "c9"));
    writeFileSync(join(outside, "c9", "keep"), "x");
    symlinkSync(join(outside, "c9"), p.candidate("c9"));
    ingestRound(run, s, 1, template);
    expect(lstatSync(p.candidate("c9")).isDirectory()).toBe(true);
    expect(snapshot(join(outside, "c9"))).toEqual({ keep: "file 644 x" });
  });

  it("refuses a state folder or state file that is a link", async () => {
    const s = seeded();
    const outside = join(scratch, "outside");
    mkdirSync(outside);
    writeFileSync(join(outside, "meta_harness_adapter.json"), JSON.stringify(s));
    rmSync(p.stateFile);
    symlinkSync(join(outside, "meta_harness_adapter.json"), p.stateFile);
    await expectCode(() => loadState(run), "metaharness_state_unsafe");
    await expectCode(() => saveState(run, s), "metaharness_state_unsafe");
    rmSync(p.state, { recursive: true });
    symlinkSync(outside, p.state);
    await expectCode(() => loadState(run), "metaharness_state_unsafe");
    await expectCode(() => saveState(run, s), "metaharness_state_unsafe");
    await expectCode(() => writeSummary(run, s), "metaharness_state_unsafe");
    expect(JSON.parse(readFileSync(join(outside, "meta_harness_adapter.json"), "utf8"))).toEqual(s);
    rmSync(p.state);
    await expectCode(() => loadState(run), "metaharness_run_missing");
    mkdirSync(p.state);
    writeFileSync(p.stateFile, "{not json");
    await expectCode(() => loadState(run), "metaharness_state_invalid");
  });
});

describe("evolve metaharness check-spec | status | finalize", () => {
  const host = cliHost();
  afterAll(() => host.close());
  const evolve = (args: string[]) => host.run(["metaharness", ...args], { cwd: scratch, env: { ...process.env, EVOLVE_HOME: join(scratch, "home"), NO_COLOR: "1" }, timeoutMs: 60_000 });

  it("check-spec: exit 0 on a complete adapter, 1 with one problem per line, 2 on a bad template or usage", () => {
    const ok = evolve(["check-spec", seedDir]);
    expect([ok.code, ok.stdout]).toEqual([0, `ok: ${seedDir} is a complete adapter\n`]);
    const bad = join(scratch, "bad");
    writeTree(bad, { "ADAPTER.md": "" });
    symlinkSync("/etc/passwd", join(bad, "p"));
    const r = evolve(["check-spec", bad]);
    expect([r.code, r.stdout]).toEqual([1, "p: is a symbolic link\nADAPTER.md: empty\n"]);
    const j = evolve(["check-spec", bad, "--json", "--template", template]);
    expect([j.code, JSON.parse(j.stdout)]).toEqual([1, { dir: bad, ok: false, problems: ["p: is a symbolic link", "ADAPTER.md: empty"] }]);
    const t = evolve(["check-spec", seedDir, "--template", scratch]);
    expect([t.code, t.stdout, t.stderr.split("\n")[0]]).toEqual([2, "", `error[metaharness_template_invalid]: ${scratch} holds no .hermit/ folder`]);
    expect(evolve(["check-spec"]).code).toBe(2);
  });

  it("status lists every candidate with round, status, mean and evaluations; the queue and the one handed back", () => {
    const { run: r } = makeMetaRun(join(scratch, "mh"));
    const text = evolve(["status", r]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^step 2, round 1\n/);
    expect(text.stdout).toMatch(/seed +0 +evaluated +0\.5000 +1 +the starting adapter/);
    expect(text.stdout).toMatch(/c1 +1 +evaluated +0\.7500 +1 +a checklist before answering/);
    expect(text.stdout).toMatch(/c2 +1 +invalid +- +0/);
    expect(text.stdout).toContain("queue: (empty)\nhanded back: c1\nfinalized: -\n");
    const j = JSON.parse(evolve(["status", r, "--json"]).stdout);
    expect(j.candidates.map((c: { id: string; status: string; mean: number | null }) => [c.id, c.status, c.mean])).toEqual([["seed", "evaluated", 0.5], ["c1", "evaluated", 0.75], ["c2", "invalid", null]]);
    expect([j.queue, j.handed_back, j.finalized]).toEqual([[], "c1", null]);
    const none = evolve(["status", scratch]);
    expect([none.code, none.stderr.split("\n")[0]]).toEqual([2, `error[metaharness_run_missing]: ${scratch} holds no Meta-Harness Adapter state (${runPaths(scratch).stateFile})`]);
  });

  it("finalize prints the best and copies its adapter out, refusing a non-empty --out; a tie goes to the one evaluated first", () => {
    const { run: r } = makeMetaRun(join(scratch, "mh"));
    const best = join(scratch, "best");
    const f = evolve(["finalize", r, "--out", best]);
    expect([f.code, f.stdout]).toEqual([0, `finalized c1: mean 0.7500 over 1 evaluation on the search set\ncopied its adapter to ${best}\n`]);
    expect(readFileSync(join(best, "ADAPTER.md"), "utf8")).toBe("Check your answer before you finish.\n");
    expect(existsSync(join(best, ".hermit", "EVOLVER.md"))).toBe(true);
    expect(loadState(r).finalized).toBe("c1");
    const again = evolve(["finalize", r, "--out", best]);
    expect([again.code, again.stderr.split("\n")[0]]).toEqual([2, `error[metaharness_out_exists]: --out ${best} exists and is not an empty folder`]);
    const { run: tie } = makeMetaRun(join(scratch, "tie"), { seed: { t1: 1, t2: 0 }, c1: { t1: 0, t2: 1 } });
    const j = JSON.parse(evolve(["finalize", tie, "--json"]).stdout);
    expect(j).toEqual({ id: "seed", mean: 0.5, evaluations: 1, adapter: runPaths(tie).candidateAdapter("seed"), out: null });
    // the stored winner changed in place: it is passed over
    writeFileSync(join(runPaths(tie).candidateAdapter("seed"), "ADAPTER.md"), "swapped\n");
    expect(JSON.parse(evolve(["finalize", tie, "--json"]).stdout).id).toBe("c1");
  });
});
