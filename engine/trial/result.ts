/**
 * The trial tree on disk (platform-trial-outputs.md, Harbor's trial layout §3.1/§3.2): `config.json` (what ran),
 * `result.json` (Harbor's TrialResult plus evolve's own fields), `exception.txt` only when there is an exception.
 * A file the trial never produced is absent, never empty: log folders nothing wrote to are pruned at the end.
 */
import { mkdir, readdir, readFile, rename, rm, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";
import { sweepTree, type SweepReport } from "./sweep.ts";
import { trialPaths } from "../box/layout.ts";
import type { RewardMap } from "./reward.ts";
import type { Phase, TrialStatus } from "./types.ts";
import { tokenCounts } from "./tokens.ts";
import type { TrialRecord } from "../store/index.ts";

/** A span of time, ISO strings. */
export interface TimeSpan {
  started_at: string;
  finished_at?: string;
}

/** An exception as the store records it. */
export interface ExceptionRecord {
  type: string;
  message: string;
  traceback: string;
  occurred_at: string;
}

/** One executed step of a multi-step trial. */
export interface StepResult {
  name: string;
  rewards: RewardMap | null;
  reward: number | null;
  exception: ExceptionRecord | null;
  agent_execution?: TimeSpan;
  verifier?: TimeSpan;
}

/** What config.json says: the trial's identity and settings. Never a secret value (only attached names). */
export interface TrialConfigFile {
  trial_name: string;
  job_id: string;
  task: { path: string; name: string; digest: string; source: string | null };
  /** `kwargs`: the `--ak` options the agent ran with (Harbor's AgentConfig.kwargs). */
  agent: { name: string; model_name: string | null; kwargs?: Record<string, string>; /** `--agent-root` as given (host path). */ root?: string };
  timeout_multiplier: number;
  timeouts: { agent_sec: number; verifier_sec: number; build_sec: number };
  environment: {
    force_build: boolean;
    network_mode: string;
    verifier_mode: string;
    cpus: number | null;
    memory_mb: number | null;
    storage_mb: number | null;
    gpus: number | null;
  };
  secret_names: string[];
  attempt: number;
}

/** Everything result.json is made from. */
export interface TrialOutcome {
  id: string;
  taskName: string;
  taskDir: string;
  taskDigest: string;
  source: string | null;
  config: TrialConfigFile;
  agent: { name: string; model?: string; root?: string };
  status: TrialStatus;
  attemptPhase: Phase;
  /** The phase a trial that did not score failed in. */
  failedPhase?: Phase;
  phaseTimings: Partial<Record<Phase, TimeSpan>>;
  rewards: RewardMap | null;
  reward: number | null;
  exception: ExceptionRecord | null;
  startedAt: string;
  finishedAt: string;
  stepResults: StepResult[] | null;
  attempt: number;
  /** The agent's model usage as the gateway metered it (Harbor's AgentContext fields); absent for built-ins. */
  agentUsage?: AgentUsage;
  /** What the harness said of itself at persist (its version, the model's provider). */
  agentInfo?: { version?: string; provider?: string };
}

/** Harbor's AgentContext token and cost fields. `cost_usd` is null until the spend is final. */
export interface AgentUsage {
  /** All input, cached included (Harbor's sense). */
  n_input_tokens: number;
  n_cache_tokens: number;
  n_output_tokens: number;
  cost_usd: number | null;
}

const exceptionInfo = (e: ExceptionRecord | null) =>
  e && { exception_type: e.type, exception_message: e.message, exception_traceback: e.traceback, occurred_at: e.occurred_at };

// built-in agents call no model: zero tokens and cost is a measurement, not a placeholder
const NO_MODEL_USAGE = { n_input_tokens: 0, n_cache_tokens: 0, n_output_tokens: 0, cost_usd: 0, rollout_details: null, metadata: null };

function span(timings: Partial<Record<Phase, TimeSpan>>, first: Phase, last: Phase = first): TimeSpan | null {
  const a = timings[first];
  const b = timings[last];
  if (!a) return null;
  return { started_at: a.started_at, finished_at: (b ?? a).finished_at ?? a.finished_at };
}

/** result.json's object: Harbor's TrialResult fields, then evolve's (`status`, `attempt_phase`, `failed_phase`, `phase_timings`, `reward`). */
export function resultJson(o: TrialOutcome, trialPath: string): Record<string, unknown> {
  const builtin = o.agent.name === "oracle" || o.agent.name === "nop";
  return {
    id: o.id,
    task_name: o.taskName,
    trial_name: o.id,
    trial_uri: pathToFileURL(trialPath).href,
    task_id: { path: o.taskDir },
    source: o.source,
    task_checksum: o.taskDigest,
    config: o.config,
    agent_info: {
      name: o.agent.name,
      version: o.agentInfo?.version ?? null,
      model_info: o.agent.model ? { name: o.agent.model, provider: o.agentInfo?.provider ?? null } : null,
      // the job's .agent/ as given (the trial's copy of it is agent-root/ beside this file)
      ...(o.agent.root !== undefined ? { agent_root: o.agent.root } : {}),
    },
    agent_result: o.agentUsage ? { ...o.agentUsage, rollout_details: null, metadata: null } : builtin && o.phaseTimings.agent ? NO_MODEL_USAGE : null,
    verifier_result: o.rewards ? { rewards: o.rewards } : null,
    exception_info: exceptionInfo(o.exception),
    started_at: o.startedAt,
    finished_at: o.finishedAt,
    environment_setup: span(o.phaseTimings, "build", "boot") ?? span(o.phaseTimings, "boot"),
    agent_setup: span(o.phaseTimings, "install"),
    agent_execution: span(o.phaseTimings, "agent"),
    verifier: span(o.phaseTimings, "verify"),
    step_results:
      o.stepResults?.map((s) => ({
        step_name: s.name,
        agent_result: builtin ? NO_MODEL_USAGE : null,
        verifier_result: s.rewards ? { rewards: s.rewards } : null,
        exception_info: exceptionInfo(s.exception),
        agent_execution: s.agent_execution ?? null,
        verifier: s.verifier ?? null,
      })) ?? null,
    status: o.status,
    attempt_phase: o.attemptPhase,
    failed_phase: o.failedPhase ?? null,
    phase_timings: o.phaseTimings,
    reward: o.reward,
    attempt: o.attempt,
  };
}

/** Writes a JSON file atomically (readers never see half a file). */
export async function writeJson(path: string, value: unknown): Promise<void> {
  // a random name, not the pid: no message of a failed write tells a box evolve's pid
  const tmp = `${path}.tmp-${randomBytes(8).toString("hex")}`;
  await writeFile(tmp, JSON.stringify(value, null, 2) + "\n", { flag: "wx" });
  await rename(tmp, path);
}

/** Writes result.json, and exception.txt when (and only when) the trial carries an exception. */
export async function writeResult(trialPath: string, o: TrialOutcome): Promise<void> {
  await mkdir(trialPath, { recursive: true });
  await writeJson(trialPaths(trialPath).result, resultJson(o, trialPath));
  const exc = trialPaths(trialPath).exception;
  if (o.exception) {
    const e = o.exception;
    await writeFile(exc, `${e.type}: ${e.message}\n${e.traceback ? `\n${e.traceback}\n` : ""}`);
  } else {
    await rm(exc, { force: true });
  }
}

/**
 * Removes empty folders under `dir` (depth-first): a mounted log folder nothing wrote to is not an output. Files
 * are kept even when empty: a stream that ran and printed nothing (a silent verifier) was recorded, and "empty" is
 * then the truth, unlike a placeholder for a step that never ran.
 */
export async function pruneEmptyDirs(dir: string): Promise<void> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) {
    if (!e.isDirectory()) continue;
    const p = join(dir, e.name);
    await pruneEmptyDirs(p);
    await rmdir(p).catch(() => {});
  }
}

/**
 * Replaces every occurrence of a secret value in every regular file, link and name under `dir` (an agent may print
 * what it was given), the persist sweep's way (sweep.ts: descriptor walk, bounded reads, evolve's temp files out of
 * every box's reach). Values shorter than 4 characters are skipped: replacing them would mangle unrelated text and
 * protects nothing. Call it only once every box of the trial is gone.
 */
export async function redactTree(dir: string, secrets: readonly string[]): Promise<SweepReport> {
  return sweepTree(dir, { secrets });
}

/** The spend fields of a trial record, as evolve.json states them. */
export interface SpendFields {
  spend?: TrialRecord["spend"];
  tokens?: TrialRecord["tokens"];
  retry_of?: string;
  regrade_of?: string;
}

/**
 * evolve.json: the platform's record beside Harbor's result.json (platform-trial-outputs.md): cost and tokens per
 * lane with their `spend_source`, and the trial's lineage. Written at every settle, so it states the figure even
 * where result.json's `agent_result.cost_usd` must stay null (spend not final).
 */
export async function writeEvolveJson(trialPath: string, t: SpendFields): Promise<void> {
  const s = t.spend;
  await writeJson(trialPaths(trialPath).evolve, {
    spend_source: s?.source ?? "none",
    spent_usd: s ? (s.final_usd ?? s.live_usd) : null,
    lanes: {
      agent: s ? { spent_usd: s.final_usd ?? s.live_usd, final: s.final_usd !== null, calls: s.calls ?? 0, unpriced_calls: s.unpriced_calls ?? 0, tokens: tokenCounts(t.tokens) ?? {} } : null,
      judge: s?.judge ? { spent_usd: s.judge.final_usd ?? s.judge.live_usd, final: s.judge.final_usd !== null, calls: s.judge.calls ?? 0, unpriced_calls: s.judge.unpriced_calls ?? 0, tokens: tokenCounts(s.judge.tokens) ?? {} } : null,
    },
    provider: "evolve-gateway",
    retry_of: t.retry_of ?? null,
    regrade_of: t.regrade_of ?? null,
  });
}
