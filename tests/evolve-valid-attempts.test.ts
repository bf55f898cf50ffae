/**
 * The evolver learns only from valid attempts (issue 19 §3): an attempt whose model was never reached is no score,
 * no episode and no diagnosis; two evals or screens started in the same second never share a folder.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { ScriptedUpstream } from "../fixtures/upstream/server.ts";
import { buildUpstreams } from "../gateway/upstreams.ts";
import { episodeOf } from "../engine/conductor/episodes.ts";
import { initAgentDir } from "../engine/conductor/init.ts";
import { runConductor } from "../engine/conductor/loop.ts";
import { scaffoldCandidate } from "../engine/evolve/candidate.ts";
import { attemptOf } from "../engine/eval/dataset-eval.ts";
import { diagnoseReport, runsFromEpisodes } from "../engine/evolve/diagnose.ts";
import { cardsEvaluator, loadCards, loadRunner } from "../engine/eval/evals.ts";
import { conductorCardRunner } from "../engine/eval/conductor-runner.ts";
import { openLocalGateway, type LocalGateway } from "../engine/eval/local-gateway.ts";
import { round } from "../engine/evolve/round.ts";
import { newRunId, runHarnessCached, screen } from "../engine/evolve/screen.ts";
import { EvolveError } from "../engine/errors.ts";
import { openStore, type Store } from "../engine/store/index.ts";
import type { TrialRecord } from "../engine/store/index.ts";
import { cliHost } from "./support/cli-host.ts";

const MODEL = "claude-sonnet-4-5";
const upstream = new ScriptedUpstream();
let home: string;
let store: Store;
/** A gateway with an upstream that answers. */
let served: LocalGateway;
/** A gateway with no upstream at all: every call is `model … is not served by this gateway` (404). */
let bare: LocalGateway;

beforeAll(async () => {
  await upstream.start();
  home = mkdtempSync(join(tmpdir(), "evolve-valid-home-"));
  store = openStore(home);
  served = await openLocalGateway({ home, store, upstreams: buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-real", models: [MODEL] } } }, {}) });
  bare = await openLocalGateway({ home, store, upstreams: buildUpstreams({}, {}) });
});

afterAll(async () => {
  await served?.close();
  await bare?.close();
  await store?.close();
  await upstream.close();
});

afterEach(() => {
  vi.useRealTimers();
});

/** A project with the conductor's default .agent/, `n` cards and a conductor runner. */
function conductorProject(n = 3): string {
  const project = mkdtempSync(join(tmpdir(), "evolve-valid-"));
  initAgentDir(project);
  mkdirSync(join(project, "evolve", "evals"), { recursive: true });
  for (let i = 1; i <= n; i++) writeFileSync(join(project, "evolve", "evals", `t${i}.json`), JSON.stringify({ id: `t${i}`, domain: "d", prompt: `say ok${i}`, check: { contains: `ok${i}` } }));
  writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "conductor", model: `anthropic/${MODEL}`, timeout_sec: 20 }));
  return project;
}

const rejects = async (p: Promise<unknown>): Promise<EvolveError> => {
  try {
    await p;
  } catch (e) {
    if (e instanceof EvolveError) return e;
    throw e;
  }
  throw new Error("expected an EvolveError");
};

describe("an attempt whose model was never reached", () => {
  it("fails the gate: no run kept, no episode in the overlay, the round stops with attempts_model_unavailable and resumes once the model answers", async () => {
    const project = conductorProject();
    const d = scaffoldCandidate(project, { where: "prompt", pathology: "p", hypothesis: "h", files: ["harness/PLANNING.md"] });
    const ev = (gateway: LocalGateway) => cardsEvaluator({ project, cards: loadCards(project), runner: loadRunner(project), gateway, conductor: conductorCardRunner });
    const e = await rejects(round({ project, evaluator: ev(bare) }));
    expect(e.code).toBe("attempts_model_unavailable");
    expect(e.message).toMatch(/^3 of 3 attempts of live never reached their model \(t1: the model was never reached: the agent's 1 model call to claude-sonnet-4-5 all failed before any answer: no upstream serves it \(1\); first: model claude-sonnet-4-5 is not served by this gateway\); nothing was scored or appended to memory$/);
    const screenDir = join(project, "evolve", "screens", "round-1");
    expect(existsSync(join(screenDir, "runs", "live.json"))).toBe(false);
    expect(existsSync(join(screenDir, "overlays", "live", ".agent", "memory", "episodes.jsonl"))).toBe(false);

    // with the model reachable the same round resumes and runs both harnesses for real: nothing of the failed run counted
    upstream.reset();
    upstream.responder = (req) => ({ toolCall: { name: "finish", input: { answer: /ok\d/.exec(JSON.stringify(req.body.messages))![0] } } });
    const r = await round({ project, evaluator: ev(served) });
    const c = r.screens["round-1"].candidates[0];
    expect(c.candidate).toBe(d.id);
    expect(c.attempts.parent.map((a) => [a.valid, a.score])).toEqual([[true, 1], [true, 1], [true, 1]]);
  });

  it("a model that answered once and then failed is the agent's failure, not the setup's", async () => {
    const project = conductorProject(1);
    upstream.reset();
    upstream.push({ toolCall: { name: "run_shell", input: { command: "true" } } }, { status: 401 });
    const ev = cardsEvaluator({ project, cards: loadCards(project), runner: loadRunner(project), gateway: served, conductor: conductorCardRunner });
    const r = await ev.run({ harnessId: "live", agentRoot: join(project, ".agent"), tasks: ["t1"], marker: null, outDir: join(project, "out", "attempts", "live") });
    expect(r.attempts[0]).toMatchObject({ valid: true, score: 0, exit_code: 1 });
    expect(r.attempts[0].model_unavailable).toBeUndefined();
  });

  it("a trial that settled ModelUnavailableError is such an attempt", async () => {
    const at = "2026-01-01T00:00:00.000Z";
    const t = { id: "01T", job_id: "01J", task_digest: "sha256:x", task_name: "t1", agent: "codex", status: "INFRASTRUCTURE_ERROR", phase_timings: {}, rewards: null, exception: { type: "ModelUnavailableError", message: "model gpt-5 is not served by this gateway", traceback: "", occurred_at: at }, created_at: at, updated_at: at } as unknown as TrialRecord;
    expect(await attemptOf(home, t, null)).toMatchObject({ valid: false, score: null, model_unavailable: true });
  });

  it("diagnose blames no policy file for a run that never met its model", async () => {
    const project = conductorProject(1);
    const result = await runConductor({ agentRoot: join(project, ".agent"), instruction: "say ok", workdir: project, endpoint: { api: "anthropic", baseUrl: bare.url, key: bare.key, model: MODEL } });
    expect([result.outcome, result.model_unavailable]).toEqual(["model_error", true]);
    // an episode written anyway (by an evolve from before this check, or by hand) is left out, not diagnosed
    mkdirSync(join(project, ".agent", "memory"), { recursive: true });
    writeFileSync(join(project, ".agent", "memory", "episodes.jsonl"), JSON.stringify(episodeOf(result, { task: "t1", domain: "d", score: 0 })) + "\n");
    const report = diagnoseReport(runsFromEpisodes(join(project, ".agent")).runs);
    expect(report.diagnoses).toEqual([]);
    expect(report.skipped).toEqual({ model_unavailable: 1 });
  });
});

describe("run ids", () => {
  it("two evals in the same second get their own folders: the second sees the install, not the first one's runs", async () => {
    const project = conductorProject(1);
    upstream.reset();
    upstream.responder = (req) => ({ toolCall: { name: "finish", input: { answer: JSON.stringify(req.body.system ?? "").includes("FIXED") ? "ok1" : "no" } } });
    const ev = cardsEvaluator({ project, cards: loadCards(project), runner: loadRunner(project), gateway: served, conductor: conductorCardRunner });
    const now = new Date("2026-03-04T05:06:07.000Z");
    const evalOnce = async () => {
      const id = newRunId(project, "eval", now);
      const run = await runHarnessCached({ project, dir: join(project, "evolve", "screens", id), harness: "live", marker: null, tasks: ev.tasks(), evaluator: ev });
      return { id, score: run.attempts[0].score };
    };
    const first = await evalOnce();
    writeFileSync(join(project, ".agent", "harness", "PLANNING.md"), "FIXED: answer with the code.\n");
    const second = await evalOnce();
    expect(first.id).not.toBe(second.id);
    expect([first.id, second.id].every((id) => id.startsWith("eval-20260304T050607Z-"))).toBe(true);
    expect([first.score, second.score]).toEqual([0, 1]);
  });

  it("two screens without --id in the same second are two screens", async () => {
    const project = conductorProject(2);
    const d = scaffoldCandidate(project, { where: "prompt", pathology: "p", hypothesis: "h" });
    upstream.reset();
    upstream.responder = () => ({ toolCall: { name: "finish", input: { answer: "ok1 ok2" } } });
    const ev = cardsEvaluator({ project, cards: loadCards(project), runner: loadRunner(project), gateway: served, conductor: conductorCardRunner });
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-03-04T05:06:07.000Z"));
    const a = await screen({ project, candidates: [d.id], evaluator: ev, seed: "one" });
    const b = await screen({ project, candidates: [d.id], evaluator: ev, seed: "two" });
    expect(a.id).not.toBe(b.id);
    expect([a.seed, b.seed]).toEqual(["one", "two"]);
    expect(readdirSync(join(project, "evolve", "screens")).sort()).toEqual([a.id, b.id].sort());
  });
});

describe("harness eval whose model cannot be reached", () => {
  const host = cliHost();
  afterAll(() => host.close());

  /** The CLI's environment with no provider variable of the caller's, plus `extra`. */
  function cleanEnv(extra: Record<string, string> = {}): Record<string, string | undefined> {
    const env: Record<string, string | undefined> = { ...process.env, EVOLVE_HOME: mkdtempSync(join(tmpdir(), "evolve-valid-cli-")), NO_COLOR: "1" };
    for (const k of Object.keys(env)) if (/^(ANTHROPIC|OPENAI|GEMINI|GOOGLE)_/.test(k)) delete env[k];
    return { ...env, ...extra };
  }

  it("with no upstream at all, is refused by the preflight before any attempt runs", () => {
    const project = conductorProject(2);
    const r = host.run(["harness", "eval", "--on-host"], { cwd: project, env: cleanEnv(), timeoutMs: 60_000 });
    expect(r.code, r.stdout + r.stderr).toBe(2);
    expect(r.stdout).not.toMatch(/pass@1/);
    expect(r.stderr.split("\n")[0]).toMatch(/^error\[model_upstream_missing\]/);
    expect(existsSync(join(project, ".agent", "memory", "episodes.jsonl"))).toBe(false);
  });

  it("with an upstream that never answers, exits non-zero saying why, and appends nothing to the live memory", () => {
    const project = conductorProject(2);
    // port 1 on loopback: nothing listens, every call is refused (the preflight passes: an upstream is configured)
    const env = cleanEnv({ ANTHROPIC_BASE_URL: "http://127.0.0.1:1", ANTHROPIC_API_KEY: "sk-dead" });
    const r = host.run(["harness", "eval", "--on-host"], { cwd: project, env, timeoutMs: 120_000 });
    expect(r.code, r.stdout + r.stderr).toBe(2);
    expect(r.stdout).not.toMatch(/pass@1/);
    expect(r.stderr.split("\n").filter((l) => !l.startsWith("warning: --on-host:"))[0]).toMatch(/^error\[attempts_model_unavailable\]: 2 of 2 attempts of live never reached their model/);
    expect(existsSync(join(project, ".agent", "memory", "episodes.jsonl"))).toBe(false);
  });
});
