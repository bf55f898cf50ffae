/**
 * The Meta-Harness Adapter search loop (`evolve metaharness run`, the spec's "One framework step"): each step
 * evaluates the candidate handed back last on the whole search set (one job), records its per-task scores and the
 * learning material, and, when nothing is queued, runs a proposal round (the summary brought up to date first) whose
 * candidates are ingested and queued; then the next candidate is handed back (state.ts handBack). finalize at the
 * end; an optional held-out evaluation of the chosen adapter against the starting one.
 *
 * Resumable: a step's evaluation is recorded (state.step) before its proposal round, and `handed_back` is cleared
 * with it, so a killed run knows where it stopped: a step whose evaluation is recorded is never re-run, and a round
 * is recorded in `state.rounds` with the step it belongs to once its candidates are ingested, so it is never re-run.
 *
 * The evaluator and the proposer are options: the command passes the real ones ({@link realSearch}, runProposer);
 * tests may pass others (the loop's own logic is what they check).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { Engine } from "../driver/types.ts";
import { EvolveError } from "../errors.ts";
import { boxedCardsEvaluator } from "../eval/card-tasks.ts";
import { cardsDigest, cardsEvaluator, loadCards, type CardsGateway, type ConductorCardRunner } from "../eval/evals.ts";
import { modelUnavailableError, pairedStats, statsToJson, type PairedStatsJson } from "../eval/stats.ts";
import { copyTreeOver, lstatOrNone, newBudget, readPlainFile } from "../eval/tree.ts";
import type { Attempt, Evaluator } from "../eval/types.ts";
import type { JobEvent } from "../job/job.ts";
import type { Store, TrialRecord } from "../store/index.ts";
import { streamArtifact, type Sink } from "../trace/artifacts.ts";
import { TrajectoryBuilder } from "../trace/atif.ts";
import type { TraceUpdate } from "../trace/events.ts";
import { readTrace } from "../trace/store.ts";
import { totalTokens } from "../trial/tokens.ts";
import type { MetaRunConfig } from "./config.ts";
import { ADAPTER_MD, runPaths, SEED_ID } from "./layout.ts";
import { runProposer, type ProposerResult } from "./proposer.ts";
import {
  candidateOf,
  finalize,
  handBack,
  hasState,
  ingestRound,
  loadState,
  markTampered,
  recordEvaluation,
  saveState,
  seedCandidate,
  tamperReason,
  writeRunFile,
  writeStepReport,
  writeStepTask,
  writeSummary,
  type MetaRound,
  type MetaState,
  type Rejected,
  type StepTaskMaterial,
} from "./state.ts";
import { writeTemplate } from "./template.ts";

/** One task's result of a step: its score (null: the rollout did not complete), its cost and its learning material. */
export interface TaskResult {
  task: string;
  score: number | null;
  cost_usd: number;
  tokens: number;
  material: StepTaskMaterial;
}

/** The search set (or the held-out split): its tasks, and one evaluation of an adapter folder on all of them. */
export interface SearchEvaluator {
  /** The dataset's `name@version`, the task folder or "cards". */
  source: string;
  /** The content digest of the search set (engine/eval/evals.ts taskSetDigest): a resume on other tasks is refused. */
  digest?: string;
  /**
   * Where a cards search set runs its cards: "box" (podman trials, the default) or "host" (`--on-host`); unset for a
   * dataset or a task folder (always boxes). Recorded in run.json: a resume in the other place is refused.
   */
  isolation?: "host" | "box";
  tasks(): string[];
  evaluate(o: { label: string; adapter: string; outDir: string; signal?: AbortSignal }): Promise<{ results: TaskResult[]; jobId?: string }>;
}

/** What one proposal round returned (runProposer's result, the fields the loop uses). */
export type ProposeResult = Pick<ProposerResult, "candidates" | "problems" | "cost_usd" | "cost_source" | "tokens" | "exitCode"> & { trialId?: string; jobId?: string; status?: string };

/** Runs one proposal round: writes candidates into the run's workspace/scratch/candidates/. */
export type Propose = (o: { round: number; step: number; k: number; signal?: AbortSignal }) => Promise<ProposeResult>;

/** A progress event of the run, for the command's lines. */
export type RunEvent =
  | { type: "seeded"; id: string }
  | { type: "resumed"; step: number; round: number }
  | { type: "step_start"; step: number; candidate: string; tasks: number }
  | { type: "step_done"; step: number; candidate: string; mean: number | null; cost_usd: number }
  | { type: "round_start"; round: number; step: number }
  | { type: "round_done"; round: number; queued: string[]; rejected: Rejected[]; cost_usd: number }
  | { type: "handed_back"; id: string; reason: "queued" | "best" }
  | { type: "tampered"; id: string; reason: string }
  | { type: "finalized"; id: string; mean: number | null }
  | { type: "holdout"; holdout: HoldoutRecord };

/** holdout.json: the chosen and the starting adapter on the held-out split, paired by task. */
export interface HoldoutRecord {
  source: string;
  chosen: { id: string; mean: number | null; scores: Record<string, number | null> };
  seed: { id: string; mean: number | null; scores: Record<string, number | null> };
  /** Paired statistics of chosen − seed over the tasks both scored (the evolver's: mean gain, 95% interval, sign test). */
  stats: PairedStatsJson;
  rollouts: number;
  cost_usd: number;
}

/** What {@link runMetaHarness} runs with. */
export interface RunMetaOptions {
  config: MetaRunConfig;
  search: SearchEvaluator;
  propose: Propose;
  holdout?: SearchEvaluator;
  signal?: AbortSignal;
  onEvent?: (e: RunEvent) => void;
}

/** What a finished run returns. */
export interface RunMetaResult {
  finalized: string;
  mean: number | null;
  steps: number;
  rounds: number;
  holdout?: HoldoutRecord;
}

/** The run's fixed settings (run.json): a resumed run must be the same search. */
interface RunJson {
  version: 1;
  search: string;
  /** The search set's content digest: which tasks (or cards), where `search` says only which kind or name. */
  search_digest: string | null;
  /** Where the cards ran ({@link SearchEvaluator.isolation}); null for a dataset or a task folder. */
  isolation: "host" | "box" | null;
  agent: string;
  model: string | null;
  start_from: string;
  template: string;
  k: number;
  max_rounds: number | null;
  epochs: number;
  proposer: { backend: string; model: string; args: string[]; web_search: boolean };
  started_at: string;
}

const nowIso = () => new Date().toISOString();

/** Where the template lives: the one given, or the built-in one written into the run folder. */
export function templateOf(cfg: MetaRunConfig): string {
  return cfg.template ?? join(cfg.run, "template");
}

/** How many proposal rounds a run can have: one at step 1 and every k steps after, up to max_rounds. */
export function roundsOf(cfg: Pick<MetaRunConfig, "k" | "maxRounds" | "epochs">): number {
  const possible = Math.floor((cfg.epochs - 1) / cfg.k) + 1;
  return cfg.maxRounds === null ? possible : Math.min(cfg.maxRounds, possible);
}

/** The projected cost of a run (--dry-run). */
export interface RunPlan {
  search: string;
  tasks: number;
  epochs: number;
  k: number;
  max_rounds: number | null;
  /** epochs × |search set|: with max_rounds R and the default epochs, (1 + R × k) × |search set|. */
  rollouts: number;
  proposer_sessions: number;
  /** Steps already recorded in the run folder (a resume does only the rest). */
  done_steps: number;
  remaining_rollouts: number;
  holdout: { source: string; tasks: number; rollouts: number } | null;
}

/** The projected rollouts and proposer sessions of the run (what `--dry-run` prints), before anything runs. */
export function planRun(cfg: MetaRunConfig, searchTasks: number, holdout?: { source: string; tasks: number }): RunPlan {
  let done = 0;
  try {
    if (hasState(cfg.run)) done = Math.min(cfg.epochs, loadState(cfg.run).step);
  } catch {
    done = 0;
  }
  return {
    search: cfg.search.kind === "dataset" ? cfg.search.ref : cfg.search.dir,
    tasks: searchTasks,
    epochs: cfg.epochs,
    k: cfg.k,
    max_rounds: cfg.maxRounds,
    rollouts: cfg.epochs * searchTasks,
    proposer_sessions: roundsOf(cfg),
    done_steps: done,
    remaining_rollouts: (cfg.epochs - done) * searchTasks,
    holdout: holdout ? { source: holdout.source, tasks: holdout.tasks, rollouts: 2 * holdout.tasks } : null,
  };
}

/**
 * The run's task information (workspace/TASK_INFO.md, and a copy in the state folder, which the proposer reads as
 * part of D): how the adapter reaches the acting agent, exactly, per harness, since the proposer learns it only here.
 */
export function taskInfo(cfg: Pick<MetaRunConfig, "agent" | "model" | "search">, tasks: number, isolation: "host" | "box" = "host"): string {
  const lines = [
    "# Task information",
    "",
    `The acting agent is \`${cfg.agent}\`${cfg.model ? ` with the model \`${cfg.model}\`` : ""}; it is fixed. Every step runs it once on each of the ${tasks} tasks of the search set (${cfg.search.kind === "dataset" ? cfg.search.ref : cfg.search.kind}) with one candidate adapter.`,
    "",
    "## How the adapter reaches the agent",
    "",
  ];
  if (cfg.search.kind === "cards" && isolation === "host") {
    lines.push(
      `- The task cards run on the host. \`${ADAPTER_MD}\` is the agent's instructions at the start of every task (the conductor: in its planning seat's system prompt, after a fixed frame; a command runner: the adapter folder is its {agent_root}).`,
      "- Every other file of the adapter is in that folder; the agent sees it only if it reads it there.",
    );
  } else if (cfg.agent === "conductor") {
    if (cfg.search.kind === "cards") lines.push("- Each task card runs in its own podman box (no network but the model's gateway): the conductor gets the card's prompt as its task, and its final answer is checked by the card's check (a `command` check runs in that box).");
    lines.push(
      `- \`${ADAPTER_MD}\` is put in the system prompt of the conductor's planning seat at the start of every task, after a fixed frame and before \`harness/PLANNING.md\` and \`knowledge/*.md\` (which go there too when the adapter has them).`,
      "- The whole adapter is mounted read-only at `/opt/evolve/agent-root/` in the agent's box (all but `memory/`). The conductor's own policy files take effect when present: `harness/seats.json`, `harness/config.json`, `protocols/tool_schemas/*.json`, `hooks/pre_tool_call`. Any other file is seen only if the agent reads it at `/opt/evolve/agent-root/<path>`, so `ADAPTER.md` must say what is there.",
    );
  } else if (cfg.agent === "oracle" || cfg.agent === "nop") {
    lines.push(`- \`${cfg.agent}\` reads no instructions: the adapter does not reach it.`);
  } else {
    lines.push(
      `- \`${ADAPTER_MD}\` is prepended to the task's instruction at the start of every task, between the lines \`<agent-instructions source=".agent/">\` and \`</agent-instructions>\`, under the heading \`## ${ADAPTER_MD}\`; \`harness/PLANNING.md\` and \`knowledge/*.md\` follow it there when the adapter has them. The task's own instruction comes after.`,
      "- Every other file of the adapter is mounted read-only at `/opt/evolve/agent-root/<path>` in the agent's box (all but `memory/`). The agent sees such a file only if it reads it there, so `ADAPTER.md` must say what is there and when to read it.",
    );
  }
  lines.push("", "## What you can read", "", "- Each step's learning material: `step_NNNN/tasks/<task>/{input.md, output.txt, score.json, verifier.txt, trajectory.json}` (score.json's `score` is null, counted as 0, when the rollout did not complete).", "- The evaluation of a candidate is the whole search set; its score is the mean over all its evaluations.", "");
  return lines.join("\n");
}

function runJsonOf(cfg: MetaRunConfig, search: SearchEvaluator): RunJson {
  return {
    version: 1,
    search: search.source,
    search_digest: search.digest ?? null,
    isolation: search.isolation ?? null,
    agent: cfg.agent,
    model: cfg.model ?? null,
    start_from: cfg.startFrom,
    template: templateOf(cfg),
    k: cfg.k,
    max_rounds: cfg.maxRounds,
    epochs: cfg.epochs,
    proposer: { backend: cfg.proposer.backend, model: cfg.proposer.model, args: cfg.proposer.args, web_search: cfg.proposer.webSearch },
    started_at: nowIso(),
  };
}

/** The run.json a resumed run must match on what makes it the same search (the search set, the agent, the seed). */
function checkSameRun(cfg: MetaRunConfig, search: SearchEvaluator): void {
  const p = runPaths(cfg.run);
  const st = lstatOrNone(p.runJson);
  if (!st?.isFile()) return;
  let prev: Partial<RunJson>;
  try {
    prev = JSON.parse(readPlainFile(p.runJson, newBudget()).data.toString("utf8")) as Partial<RunJson>;
  } catch {
    return;
  }
  const now = runJsonOf(cfg, search);
  // a cards run recorded before the key existed ran its cards on the host (the only runner then)
  const was = prev.isolation ?? (prev.search === "cards" ? "host" : null);
  if (was !== null && now.isolation !== null && was !== now.isolation) {
    // the same cards in another place are another experiment: a check.command or the model's shell sees another machine, and a candidate's mean would mix both
    throw new EvolveError(
      "metaharness_run_mismatch",
      `${cfg.run} was started with its task cards ${was === "host" ? "on the host (--on-host)" : "in podman boxes"}, not ${now.isolation === "host" ? "on the host" : "in boxes"}`,
      was === "host" ? "resume it with --on-host, or give a new --run folder to run the cards in boxes" : "resume it without --on-host, or give a new --run folder",
    );
  }
  for (const key of ["search", "search_digest", "agent", "model", "start_from"] as const) {
    // a run.json written before the digest was kept (or of a search set without one) has nothing to compare
    if (key === "search_digest" && (prev[key] == null || now[key] === null)) continue;
    if (prev[key] !== undefined && prev[key] !== now[key]) {
      // the same kind or name with other tasks (another --cards folder, a changed task folder): the means would mix two sets
      if (key === "search_digest") throw new EvolveError("metaharness_run_mismatch", `${cfg.run} was started on another search set (${prev.search} with content ${prev[key]}, now ${now[key]})`, "resume it on the same tasks or cards, or give a new --run folder");
      throw new EvolveError("metaharness_run_mismatch", `${cfg.run} was started with ${key} ${JSON.stringify(prev[key])}, not ${JSON.stringify(now[key])}`, "resume it with the same config, or give a new --run folder");
    }
  }
}

function interrupted(): EvolveError {
  return new EvolveError("evolve_interrupted", "the Meta-Harness Adapter run was interrupted", "run the same command again: it resumes from the run's state (recorded steps and rounds are not re-run)");
}

/** The rounds the state records (additive field). */
function roundsIn(state: MetaState): MetaRound[] {
  if (!Array.isArray(state.rounds)) state.rounds = [];
  return state.rounds;
}

/**
 * Evaluates candidate `id` on the search set for step `step`: a copy of its stored adapter is the agent root (an
 * agent that writes its memory into the folder never changes the stored candidate), the learning material is
 * written per task, and the evaluation is recorded and saved (an incomplete rollout counts 0).
 */
async function evaluateStep(o: RunMetaOptions, state: MetaState, step: number, id: string): Promise<void> {
  const run = o.config.run;
  const p = runPaths(run);
  const tasks = o.search.tasks();
  o.onEvent?.({ type: "step_start", step, candidate: id, tasks: tasks.length });
  const copy = mkdtempSync(join(tmpdir(), "evolve-mh-adapter-"));
  let results: TaskResult[];
  try {
    const adapter = join(copy, "adapter");
    copyTreeOver(p.candidateAdapter(id), adapter, newBudget());
    results = (await o.search.evaluate({ label: `metaharness ${id} step ${step}`, adapter, outDir: join(p.step(step), "attempts", id), signal: o.signal })).results;
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
  if (o.signal?.aborted) throw interrupted();
  const scores: Record<string, number> = {};
  let cost = 0;
  let tokens = 0;
  for (const r of results) {
    writeStepTask(run, step, r.task, r.material);
    scores[r.task] = r.score ?? 0;
    cost += r.cost_usd;
    tokens += r.tokens;
  }
  const c = recordEvaluation(state, id, step, scores, { cost_usd: cost, tokens });
  // cleared with the evaluation: a resumed run sees this step done and goes on to its round and hand-back
  state.handed_back = null;
  saveState(run, state);
  o.onEvent?.({ type: "step_done", step, candidate: id, mean: c.evaluations[c.evaluations.length - 1].mean, cost_usd: cost });
}

/**
 * Runs (or resumes) the search: seeds the run folder when it holds no state, then steps until `epochs` steps are
 * recorded, then finalizes, then (with `holdout`) evaluates the chosen and the starting adapter on the held-out
 * split. An abort → evolve_interrupted (the run resumes from its state).
 */
export async function runMetaHarness(o: RunMetaOptions): Promise<RunMetaResult> {
  const cfg = o.config;
  const run = cfg.run;
  const p = runPaths(run);
  const template = templateOf(cfg);
  let state: MetaState;
  if (hasState(run)) {
    checkSameRun(cfg, o.search);
    state = loadState(run);
    o.onEvent?.({ type: "resumed", step: state.step, round: state.round });
  } else {
    if (cfg.template === undefined && !existsSync(join(template, ".hermit"))) writeTemplate(template);
    state = seedCandidate(run, cfg.startFrom, template);
    writeRunFile(run, p.runJson, JSON.stringify(runJsonOf(cfg, o.search), null, 2) + "\n");
    o.onEvent?.({ type: "seeded", id: SEED_ID });
  }
  const info = taskInfo(cfg, o.search.tasks().length, o.search.isolation);
  writeRunFile(run, join(p.workspace, "TASK_INFO.md"), info);
  writeRunFile(run, join(p.state, "TASK_INFO.md"), info);

  // a state saved right after a step's evaluation, or the seed's, has nothing handed back yet
  if (state.handed_back === null) await afterEvaluation(o, state, state.step, template);
  while (state.step < cfg.epochs) {
    if (o.signal?.aborted) throw interrupted();
    const step = state.step + 1;
    let id = state.handed_back!;
    // the proposer's sandbox could have changed it since it was handed back (a resumed run, a slow step)
    const why = tamperReason(run, candidateOf(state, id));
    if (why) {
      markTampered(state, candidateOf(state, id), why);
      o.onEvent?.({ type: "tampered", id, reason: why });
      const h = handBack(run, state);
      o.onEvent?.({ type: "handed_back", ...h });
      id = h.id;
    }
    await evaluateStep(o, state, step, id);
    await afterEvaluation(o, state, step, template);
  }
  const finalized = finalize(run, state);
  writeSummary(run, state);
  const mean = candidateOf(state, finalized).mean;
  o.onEvent?.({ type: "finalized", id: finalized, mean });
  const result: RunMetaResult = { finalized, mean, steps: state.step, rounds: state.round };
  if (o.holdout) {
    result.holdout = await evaluateHoldout(o, o.holdout, finalized);
    o.onEvent?.({ type: "holdout", holdout: result.holdout });
  }
  return result;
}

/**
 * What follows a recorded evaluation of step `step` (step 0: the seed): a proposal round when nothing is queued and
 * none was run for this step (and max_rounds allows one), then the hand-back and the step's report.
 */
async function afterEvaluation(o: RunMetaOptions, state: MetaState, step: number, template: string): Promise<void> {
  const cfg = o.config;
  const run = cfg.run;
  const rounds = roundsIn(state);
  let queued: string[] = [];
  let rejected: Rejected[] = [];
  const live = state.queue.filter((q) => state.candidates.find((c) => c.id === q && c.status === "queued"));
  const roundAllowed = cfg.maxRounds === null || state.round < cfg.maxRounds;
  if (step > 0 && live.length === 0 && roundAllowed && !rounds.some((r) => r.step === step)) {
    if (o.signal?.aborted) throw interrupted();
    const round = state.round + 1;
    writeSummary(run, state);
    o.onEvent?.({ type: "round_start", round, step });
    const r = await o.propose({ round, step, k: cfg.k, signal: o.signal });
    if (o.signal?.aborted) throw interrupted();
    // recorded in the same save as the ingested candidates (ingestRound saves this state): a round is never re-run
    const rec: MetaRound = { round, step, trial_id: r.trialId ?? null, job_id: r.jobId ?? null, exit_code: r.exitCode, queued: [], rejected: [], cost_usd: r.cost_usd, cost_source: r.cost_source, tokens: r.tokens, at: nowIso() };
    rounds.push(rec);
    const ing = ingestRound(run, state, round, template, cfg.k);
    queued = ing.queued;
    // what the collection refused never reached the scratch folder: it is rejected all the same
    rejected = [...r.problems.map((x) => ({ id: x.name, problems: [`${x.name}: ${x.problem}`] })), ...ing.rejected];
    state.round = round;
    rec.queued = queued;
    rec.rejected = rejected.map((x) => x.id);
    saveState(run, state);
    o.onEvent?.({ type: "round_done", round, queued, rejected, cost_usd: r.cost_usd });
  } else {
    const done = rounds.find((r) => r.step === step);
    if (done) {
      queued = done.queued;
      rejected = done.rejected.map((id) => ({ id, problems: candidateProblems(state, id) }));
    }
  }
  // every queued candidate that turns out changed is reported before the one handed back
  const before = new Set(state.candidates.filter((c) => c.status === "tampered").map((c) => c.id));
  const h = handBack(run, state);
  for (const c of state.candidates) if (c.status === "tampered" && !before.has(c.id)) o.onEvent?.({ type: "tampered", id: c.id, reason: c.problems?.[c.problems.length - 1] ?? "changed" });
  o.onEvent?.({ type: "handed_back", ...h });
  writeSummary(run, state);
  if (step > 0) {
    const c = candidateOf(state, state.candidates.find((x) => x.evaluations.some((e) => e.step === step))?.id ?? h.id);
    const e = c.evaluations.find((x) => x.step === step);
    writeStepReport(run, step, { evaluated: e ? c.id : null, mean: e?.mean ?? null, queued, rejected, handedBack: h });
  }
}

function candidateProblems(state: MetaState, id: string): string[] {
  return state.candidates.find((c) => c.id === id)?.problems ?? [];
}

/** The held-out evaluation: the chosen and the starting adapter, same protocol, paired by task; holdout.json. */
async function evaluateHoldout(o: RunMetaOptions, ev: SearchEvaluator, chosen: string): Promise<HoldoutRecord> {
  const run = o.config.run;
  const p = runPaths(run);
  const evalOne = async (id: string) => {
    const copy = mkdtempSync(join(tmpdir(), "evolve-mh-holdout-"));
    try {
      const adapter = join(copy, "adapter");
      copyTreeOver(p.candidateAdapter(id), adapter, newBudget());
      // outside every step folder: the proposer never sees held-out results
      return (await ev.evaluate({ label: `metaharness holdout ${id}`, adapter, outDir: join(run, "holdout", id), signal: o.signal })).results;
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  };
  const a = await evalOne(chosen);
  if (o.signal?.aborted) throw interrupted();
  const b = chosen === SEED_ID ? a : await evalOne(SEED_ID);
  if (o.signal?.aborted) throw interrupted();
  const byTask = (rs: TaskResult[]) => Object.fromEntries(rs.map((r) => [r.task, r.score]));
  const sa = byTask(a);
  const sb = byTask(b);
  const tasks = ev.tasks();
  // an incomplete rollout counts 0, as on the search set
  const stats = pairedStats(tasks.map((t) => sa[t] ?? 0), tasks.map((t) => sb[t] ?? 0));
  const mean = (s: Record<string, number | null>) => (tasks.length === 0 ? null : tasks.reduce((x, t) => x + (s[t] ?? 0), 0) / tasks.length);
  const rec: HoldoutRecord = {
    source: ev.source,
    chosen: { id: chosen, mean: mean(sa), scores: sa },
    seed: { id: SEED_ID, mean: mean(sb), scores: sb },
    stats: statsToJson(stats),
    rollouts: a.length + (chosen === SEED_ID ? 0 : b.length),
    cost_usd: a.reduce((x, r) => x + r.cost_usd, 0) + (chosen === SEED_ID ? 0 : b.reduce((x, r) => x + r.cost_usd, 0)),
  };
  writeRunFile(run, join(run, "holdout.json"), JSON.stringify(rec, null, 2) + "\n");
  return rec;
}

/** What a trial's stream holds as text ("" when it has none), at most `limit` bytes. */
async function streamText(home: string, t: TrialRecord, name: "trace-stdout" | "verifier" | "trace-atif", limit = 8 * 1024 * 1024): Promise<string> {
  const parts: Buffer[] = [];
  let n = 0;
  const sink: Sink = async (chunk) => {
    if (n >= limit) return;
    const b = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    parts.push(b.subarray(0, limit - n));
    n += b.length;
  };
  try {
    await streamArtifact(home, t, name, sink);
  } catch {
    return "";
  }
  return Buffer.concat(parts).toString("utf8");
}

/** The instruction the agent was given, as its trace's prompt event recorded it ("" when it recorded none). */
function promptOf(home: string, trialId: string): string {
  try {
    for (const e of readTrace(home, trialId)) {
      const d = e.data as { _prompt?: { text?: unknown } } | undefined;
      if (e.type === "prompt" && typeof d?._prompt?.text === "string") return d._prompt.text;
    }
  } catch {
    // no trace stored
  }
  return "";
}

/** The learning material of one dataset attempt: read from its trial (input, output, verifier, the ATIF trajectory). */
export async function trialMaterial(store: Store, home: string, a: Attempt): Promise<{ material: StepTaskMaterial; tokens: number }> {
  const t = a.log ? store.getTrial(a.log) : undefined;
  const score = { task: a.task, score: a.score, valid: a.valid, ...(a.invalid_reason ? { invalid_reason: a.invalid_reason } : {}), exit_code: a.exit_code, timed_out: a.timed_out, trial_id: a.log || null, rewards: t?.rewards ?? null, cost_usd: a.cost_usd };
  if (!t) return { material: { input: "", output: "", score, verifier: "", trajectory: null }, tokens: 0 };
  const atif = await streamText(home, t, "trace-atif", 64 * 1024 * 1024);
  let trajectory: unknown = null;
  try {
    trajectory = atif ? JSON.parse(atif) : null;
  } catch {
    trajectory = atif;
  }
  const tokens = totalTokens(t.tokens);
  return { material: { input: promptOf(home, t.id), output: await streamText(home, t, "trace-stdout"), score, verifier: await streamText(home, t, "verifier"), trajectory }, tokens };
}

/** An {@link Evaluator} of the evolver's (a dataset's jobs) as a {@link SearchEvaluator}: every task each time. */
export function searchOf(ev: Evaluator, material: (a: Attempt) => Promise<{ material: StepTaskMaterial; tokens: number }>): SearchEvaluator {
  return {
    source: ev.source,
    ...(ev.digest !== undefined ? { digest: ev.digest } : {}),
    tasks: () => ev.tasks(),
    async evaluate({ label, adapter, outDir, signal }) {
      const r = await ev.run({ harnessId: label, agentRoot: adapter, tasks: ev.tasks(), marker: null, outDir, signal });
      // an attempt that never reached its model is no evidence on the adapter: the step is not recorded (a resume runs it again)
      const unreached = modelUnavailableError(label, r.attempts, outDir);
      if (unreached) throw unreached;
      const results: TaskResult[] = [];
      for (const a of r.attempts) {
        const m = await material(a);
        results.push({ task: a.task, score: a.valid ? a.score : null, cost_usd: a.cost_usd, tokens: m.tokens, material: m.material });
      }
      return { results, ...(r.jobId ? { jobId: r.jobId } : {}) };
    },
  };
}

/** The real proposer of a run: runProposer with the run's settings (one evolve trial of the proposer CLI). */
export function realPropose(o: { store: Store; home: string; engine: () => Promise<Engine>; config: MetaRunConfig; prompt?: string; onEvent?: (e: JobEvent) => void; warn?: (m: string) => void }): Propose {
  const c = o.config;
  return async ({ round, step, k, signal }) =>
    runProposer({
      store: o.store,
      home: o.home,
      engine: o.engine,
      runDir: c.run,
      round,
      step,
      k,
      backend: c.proposer.backend,
      model: c.proposer.model,
      args: c.proposer.args,
      webSearch: c.proposer.webSearch,
      ...(o.prompt !== undefined ? { prompt: o.prompt } : {}),
      ...(c.proposer.price ? { price: c.proposer.price } : {}),
      ...(c.proposer.timeoutSec !== undefined ? { timeoutSec: c.proposer.timeoutSec } : {}),
      templateDir: templateOf(c),
      ...(signal ? { signal } : {}),
      ...(o.onEvent ? { onEvent: o.onEvent } : {}),
      ...(o.warn ? { warn: o.warn } : {}),
    });
}

/** One round's spend, as `metaharness status` shows it: its candidates' rollouts and its proposer session. */
export interface RoundSpend {
  /** 0: the starting adapter (no proposer session). */
  round: number;
  /** The step whose proposal round it was; null for round 0. */
  step: number | null;
  /** Task rollouts of the round's candidates so far (every evaluation of each). */
  rollouts: number;
  rollouts_usd: number;
  proposer_usd: number;
  /** gateway, price or lower_bound (what the gateway priced when neither had a price); null for round 0. */
  proposer_cost_source: string | null;
  /** The proposer session's tokens: prompt (cached included) plus output. */
  proposer_tokens: number;
}

/**
 * The spend of each round from the state: the rollouts of the candidates it wrote (round 0: the starting adapter),
 * as the gateway metered them, and its proposer session's cost as runProposer recorded it.
 */
export function roundSpend(state: MetaState): RoundSpend[] {
  const out: RoundSpend[] = [{ round: 0, step: null, rollouts: 0, rollouts_usd: 0, proposer_usd: 0, proposer_cost_source: null, proposer_tokens: 0 }];
  for (const r of state.rounds ?? []) out.push({ round: r.round, step: r.step, rollouts: 0, rollouts_usd: 0, proposer_usd: r.cost_usd, proposer_cost_source: r.cost_source, proposer_tokens: totalTokens(r.tokens) });
  for (const c of state.candidates) {
    let row = out.find((x) => x.round === c.round);
    if (!row) {
      row = { round: c.round, step: null, rollouts: 0, rollouts_usd: 0, proposer_usd: 0, proposer_cost_source: null, proposer_tokens: 0 };
      out.push(row);
    }
    for (const e of c.evaluations) {
      row.rollouts += Object.keys(e.scores).length;
      row.rollouts_usd += e.cost_usd;
    }
  }
  return out.sort((a, b) => a.round - b.round);
}

/** Refuses a cards search set with an agent other than the conductor, or without a model (either runner). */
function checkCardsAgent(agent: string, model: string | undefined): asserts model is string {
  if (agent !== "conductor") throw new EvolveError("metaharness_config_invalid", `agent: task cards run with the conductor, not ${JSON.stringify(agent)}`, "give -a conductor with cards, or publish the tasks as a dataset for another agent (-d)");
  if (!model) throw new EvolveError("metaharness_config_invalid", "model: the conductor needs a model (-m provider/model)", "e.g. -m anthropic/claude-sonnet-4-5");
}

/**
 * The search set of task cards (`cards = DIR`) in podman boxes, the default: each card written as a task folder
 * under `<run>/card-tasks/` and run as a trial of the conductor with a copy of the adapter as its agent root
 * (engine/eval/card-tasks.ts boxedCardsEvaluator, the runner of `harness eval` without `--on-host`), so the model's
 * shell commands and a card's check command run in the box, never on the host. The learning material is a trial's,
 * as for a dataset ({@link trialMaterial}). Its digest is the cards' content, as on the host: the same cards are the
 * same tasks; where they ran is run.json's `isolation`. Nothing is written or imported before the first evaluation.
 */
export function boxedCardsSearch(o: { store: Store; home: string; engine: () => Promise<Engine>; dir: string; run: string; agent: string; model?: string; concurrency?: number; warn?: (m: string) => void }): SearchEvaluator {
  checkCardsAgent(o.agent, o.model);
  const model = o.model;
  const cards = loadCards(dirname(o.dir), o.dir);
  let inner: SearchEvaluator | undefined;
  return {
    source: "cards",
    digest: cardsDigest(cards),
    isolation: "box",
    tasks: () => cards.map((c) => c.id),
    async evaluate(x) {
      inner ??= searchOf(
        await boxedCardsEvaluator({
          store: o.store,
          home: o.home,
          engine: o.engine,
          project: dirname(o.dir),
          cards,
          runner: { agent: "conductor", model },
          tasksDir: join(o.run, "card-tasks"),
          ...(o.concurrency !== undefined ? { concurrency: o.concurrency } : {}),
          ...(o.warn ? { warn: o.warn } : {}),
        }),
        (a) => trialMaterial(o.store, o.home, a),
      );
      return inner.evaluate(x);
    },
  };
}

/**
 * The search set of task cards (`cards = DIR`) with `--on-host`: every card of the folder run on the host by the
 * conductor against a copy of the adapter, through `gateway` (cardsEvaluator). The learning material is the card's
 * prompt, the conductor's answer, the check and its verdict, and the ATIF trajectory built from the conductor's trace.
 */
export function cardsSearch(o: { dir: string; agent: string; model?: string; gateway?: CardsGateway; conductor: ConductorCardRunner }): SearchEvaluator {
  checkCardsAgent(o.agent, o.model);
  const cards = loadCards(dirname(o.dir), o.dir);
  const byId = new Map(cards.map((c) => [c.id, c]));
  const outputs = new Map<string, string>();
  const conductor: ConductorCardRunner = async (x) => {
    const r = await o.conductor(x);
    // the step's material is shown to later proposers: no key the run printed is in it
    outputs.set(x.card.id, x.redact(r.output));
    return r;
  };
  const ev = cardsEvaluator({ project: dirname(o.dir), cards, runner: { agent: "conductor", model: o.model }, ...(o.gateway ? { gateway: o.gateway } : {}), conductor });
  let outDir = "";
  const material = async (a: Attempt): Promise<{ material: StepTaskMaterial; tokens: number }> => {
    const card = byId.get(a.task);
    let log = "";
    try {
      log = readFileSync(join(outDir, `${a.task}.log`), "utf8");
    } catch {
      log = "";
    }
    const b = new TrajectoryBuilder({ agent: { name: "conductor", version: "builtin", model_name: o.model }, sessionId: `${a.task}`, ...(card ? { instruction: card.prompt } : {}) });
    for (const line of log.split("\n")) {
      try {
        const u = JSON.parse(line) as TraceUpdate;
        if (u && typeof u.type === "string") b.push(u);
      } catch {
        // a line of evolve's own (a launch failure) is no trace event
      }
    }
    let trajectory: unknown = null;
    try {
      trajectory = b.finish();
    } catch {
      trajectory = null;
    }
    const score = { task: a.task, score: a.score, valid: a.valid, ...(a.invalid_reason ? { invalid_reason: a.invalid_reason } : {}), exit_code: a.exit_code, timed_out: a.timed_out, cost_usd: a.cost_usd };
    const verdict = a.valid ? (a.score === 1 ? "passed" : "failed") : `not scored: ${a.invalid_reason ?? "invalid"}`;
    return { material: { input: card?.prompt ?? "", output: outputs.get(a.task) ?? "", score, verifier: `check: ${JSON.stringify(card?.check ?? null)}\n${verdict}\n`, trajectory }, tokens: 0 };
  };
  const s = searchOf(ev, material);
  return {
    ...s,
    isolation: "host",
    evaluate: (x) => {
      outDir = x.outDir;
      outputs.clear();
      return s.evaluate(x);
    },
  };
}
