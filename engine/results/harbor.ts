/**
 * evolve's records in Harbor's shapes (shared/reference/harbor.md §3): a trial's config.json (TrialConfig) and
 * result.json (TrialResult), a job's config.json (JobConfig) and result.json (JobResult). Harbor's fields carry
 * Harbor's meaning; everything evolve adds rides under `x_evolve`, so Harbor's pydantic models (which ignore unknown
 * keys outside ATIF) still load the files. Statuses, rewards and spend are read from the store's records as they
 * are: nothing here decides one.
 */
import { pathToFileURL } from "node:url";
import type { JobRecord, TrialRecord } from "../store/index.ts";
import { isSettledStatus, type TrialStatus } from "../trial/lifecycle.ts";
import { tokenCounts } from "../trial/tokens.ts";
import { jobConfig, type JobConfig } from "../job/job.ts";
import { primaryReward, summarizeJob } from "../job/summary.ts";
import { harborUuid } from "./ids.ts";

type Obj = Record<string, unknown>;

const obj = (v: unknown): Obj => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/**
 * Harbor's environment type for an evolve trial: its enum knows no podman, and evolve's boxes are local
 * docker-compatible containers, so `docker`; the engine itself is not recorded per trial.
 */
const ENVIRONMENT_TYPE = "docker";

/** The model's provider: the stored one, else the `provider/` part of the model name, else "unknown" (Harbor requires a string). */
function providerOf(model: string, stored: unknown): string {
  return str(stored) ?? (model.includes("/") ? model.split("/")[0] : "unknown");
}

/** What a trial's spend says to a reader: the current figure and where it comes from (measured, lower_bound, none). */
export function trialSpend(t: TrialRecord): { spentUsd: number | null; spendSource: string } {
  const s = t.spend;
  return { spentUsd: s ? (s.final_usd ?? s.live_usd) : null, spendSource: s?.source ?? "none" };
}

/** The task folder a trial ran from, as its stored config.json names it (the store's blob), else "". */
function taskPath(storedConfig: Obj, storedResult: Obj): string {
  return str(obj(storedConfig.task).path) ?? str(obj(storedResult.task_id).path) ?? "";
}

/** A trial's config.json as Harbor's TrialConfig, evolve's own settings under `x_evolve`. */
export function harborTrialConfig(t: TrialRecord, storedConfig: Obj, o: { trialName: string; trialsDir: string; storedResult?: Obj }): Obj {
  const agent = obj(storedConfig.agent);
  const { path: _p, name: _n, digest: _d, source: _s, ...taskRest } = obj(storedConfig.task);
  const { trial_name: _tn, job_id: _j, task: _t, agent: _a, timeout_multiplier: _tm, ...rest } = storedConfig;
  return {
    // Harbor's TaskConfig takes a path or a package name, never both: the stored task's folder
    task: { path: taskPath(storedConfig, o.storedResult ?? {}), source: t.source ?? null, ...taskRest },
    trial_name: o.trialName,
    trials_dir: o.trialsDir,
    timeout_multiplier: num(storedConfig.timeout_multiplier) ?? 1,
    agent: { name: t.agent, model_name: t.model ?? null, kwargs: obj(agent.kwargs) },
    environment: { type: ENVIRONMENT_TYPE, force_build: obj(storedConfig.environment).force_build === true, delete: true },
    verifier: { env: {}, disable: false },
    artifacts: [],
    job_id: harborUuid(t.job_id),
    x_evolve: {
      trial_id: t.id,
      job_id: t.job_id,
      task: { name: t.task_name ?? str(obj(storedConfig.task).name), digest: t.task_digest, ...(t.task_path !== undefined ? { path: t.task_path } : {}) },
      ...(agent.root !== undefined ? { agent_root: agent.root } : {}),
      ...rest,
    },
  };
}

/** A trial's result.json as Harbor's TrialResult, from the store's record (the truth) and the stored result.json (timings, agent info). */
export function harborTrialResult(t: TrialRecord, storedResult: Obj, config: Obj, o: { trialName: string; trialDir: string }): Obj {
  const info = obj(storedResult.agent_info);
  const model = t.model ?? str(obj(info.model_info).name);
  const stored = obj(storedResult.agent_result);
  const tokens = tokenCounts(t.tokens);
  const spend = trialSpend(t);
  const agentResult =
    storedResult.agent_result || tokens
      ? {
          n_input_tokens: tokens?.prompt ?? num(stored.n_input_tokens),
          n_cache_tokens: tokens?.cached_read ?? num(stored.n_cache_tokens),
          n_output_tokens: tokens?.output ?? num(stored.n_output_tokens),
          // stated only once the spend is final (platform-trial-outputs.md); x_evolve carries the current figure
          cost_usd: t.spend ? t.spend.final_usd : num(stored.cost_usd),
          rollout_details: null,
          metadata: null,
        }
      : null;
  const e = t.exception;
  const span = (k: string) => (storedResult[k] && typeof storedResult[k] === "object" ? storedResult[k] : null);
  return {
    id: harborUuid(t.id),
    task_name: t.task_name ?? str(storedResult.task_name) ?? t.task_digest,
    trial_name: o.trialName,
    trial_uri: pathToFileURL(o.trialDir).href,
    task_id: { path: str(obj(config.task).path) ?? "" },
    source: t.source ?? null,
    task_checksum: t.task_digest,
    config,
    agent_info: {
      name: t.agent,
      version: str(info.version) ?? "unknown",
      model_info: model ? { name: model, provider: providerOf(model, obj(info.model_info).provider) } : null,
    },
    agent_result: agentResult,
    verifier_result: t.rewards ? { rewards: t.rewards } : null,
    exception_info: e ? { exception_type: e.type, exception_message: e.message, exception_traceback: e.traceback, occurred_at: e.occurred_at } : null,
    started_at: t.started_at ?? str(storedResult.started_at),
    finished_at: isSettledStatus(t.status as TrialStatus) ? (t.finished_at ?? str(storedResult.finished_at)) : null,
    environment_setup: span("environment_setup"),
    agent_setup: span("agent_setup"),
    agent_execution: span("agent_execution"),
    verifier: span("verifier"),
    step_results: Array.isArray(storedResult.step_results) ? storedResult.step_results : null,
    x_evolve: {
      trial_id: t.id,
      job_id: t.job_id,
      status: t.status,
      attempt_phase: t.attempt_phase ?? null,
      failed_phase: t.failed_phase ?? null,
      phase_timings: t.phase_timings,
      reward: t.reward ?? primaryReward(t.rewards),
      attempt: t.attempt ?? 1,
      spentUsd: spend.spentUsd,
      spendSource: spend.spendSource,
      tokens: tokens ?? null,
      ...(info.agent_root !== undefined ? { agent_root: info.agent_root } : {}),
      retry_of: t.retry_of ?? null,
      regrade_of: t.regrade_of ?? null,
    },
  };
}

/** One agent of a job's config.json as Harbor's AgentConfig, with evolve's `x_reasoning_effort` and `x_preset`. */
function harborAgent(a: JobConfig["agent"]): Obj {
  const kwargs = a.kwargs ?? {};
  return {
    name: a.name,
    model_name: a.model ?? null,
    kwargs,
    // the reasoning effort the agent was asked for (`--ak reasoning_effort=…`), null when left to the harness
    x_reasoning_effort: kwargs.reasoning_effort ?? null,
    // evolve has no named presets of agent settings yet: null says "none", not "unknown"
    x_preset: kwargs.preset ?? null,
  };
}

/** A job's config.json as Harbor's JobConfig. `taskDir` names a stored task's folder (the store's blob). */
export function harborJobConfig(job: JobRecord, o: { jobName: string; jobsDir: string; taskDir: (digest: string) => string }): Obj {
  const c = jobConfig(job);
  const ds = c.source.kind === "dataset" ? c.source.ref : null;
  const at = ds ? ds.lastIndexOf("@") : -1;
  return {
    job_name: o.jobName,
    jobs_dir: o.jobsDir,
    n_attempts: c.attempts,
    timeout_multiplier: c.timeout_multiplier,
    debug: false,
    n_concurrent_trials: c.concurrency,
    quiet: false,
    retry: { max_retries: c.max_retries },
    environment: { type: ENVIRONMENT_TYPE, force_build: c.force_build, delete: true },
    verifier: { env: c.verifier_env ?? {}, disable: false },
    metrics: [],
    agents: [harborAgent(c.agent)],
    datasets: ds ? [{ name: at > 0 ? ds.slice(0, at) : ds, version: at > 0 ? ds.slice(at + 1) : null }] : [],
    tasks: ds ? [] : c.tasks.map((t) => ({ path: o.taskDir(t.digest) })),
    artifacts: [],
    x_evolve: {
      job_id: job.id,
      kind: c.kind ?? "run",
      name: c.name ?? null,
      source: c.source,
      tasks: c.tasks,
      secret_names: c.secret_names,
      max_spend_usd: c.max_spend_usd ?? null,
      retry_of: job.retry_of ?? null,
      ...(c.agent.root !== undefined ? { agent_root: c.agent.root } : {}),
    },
  };
}

/**
 * A reward as Harbor writes it as a `reward_stats` key: Python's float spelling (reward.txt is read as a float, so a
 * whole reward is "1.0", never "1"), which scripts index by.
 */
function rewardKey(v: number): string {
  return Number.isInteger(v) ? `${v}.0` : String(v);
}

/**
 * A job's result.json as Harbor's JobResult (trial_results left out, as Harbor writes it). One eval group (a job runs
 * one agent on one source); its `metrics` mean is evolve's: over the trials that produced a reward, never a failure
 * counted as 0 (x_evolve says so).
 */
export function harborJobResult(job: JobRecord, trials: readonly TrialRecord[], trialNames: ReadonlyMap<string, string>, now: string): Obj {
  const c = jobConfig(job);
  const s = summarizeJob(job, trials);
  const settled = trials.filter((t) => isSettledStatus(t.status as TrialStatus));
  const count = (f: (t: TrialRecord) => boolean) => trials.filter(f).length;
  const name = (t: TrialRecord) => trialNames.get(t.id) ?? t.id;
  const rewardStats: Record<string, Record<string, string[]>> = {};
  const exceptionStats: Record<string, string[]> = {};
  for (const t of settled) {
    for (const [k, v] of Object.entries(t.rewards ?? {})) ((rewardStats[k] ??= {})[rewardKey(v)] ??= []).push(name(t));
    if (t.exception) (exceptionStats[t.exception.type] ??= []).push(name(t));
  }
  const tok = trials.map((t) => tokenCounts(t.tokens)).filter((x) => x !== undefined);
  const sumTok = (k: "prompt" | "cached_read" | "output") => (tok.length ? tok.reduce((a, x) => a + x[k], 0) : null);
  const finals = trials.map((t) => t.spend).filter((x) => x !== undefined);
  // Harbor's key: agent, model, dataset name ("adhoc" for none), each with "/" spelled "-" (its EvalDimensions)
  const source = c.source.kind === "dataset" ? c.source.ref.replace(/@[^@]*$/, "") : "adhoc";
  const group = [c.agent.name, ...(c.agent.model ? [c.agent.model] : []), source].map((x) => x.replaceAll("/", "-")).join("__");
  const spent = finals.length ? finals.reduce((a, x) => a + (x.final_usd ?? x.live_usd), 0) : null;
  return {
    id: harborUuid(job.id),
    started_at: job.created_at,
    updated_at: job.updated_at ?? now,
    finished_at: job.finished_at ?? null,
    n_total_trials: trials.length,
    stats: {
      n_completed_trials: settled.length,
      n_errored_trials: settled.filter((t) => t.exception).length,
      n_running_trials: count((t) => t.status === "RUNNING" || t.status === "SCORING"),
      n_pending_trials: count((t) => !isSettledStatus(t.status as TrialStatus) && t.status !== "RUNNING" && t.status !== "SCORING"),
      n_cancelled_trials: count((t) => t.status === "CANCELLED"),
      n_retries: trials.reduce((a, t) => a + Math.max(0, (t.attempts?.length ?? t.attempt ?? 1) - 1), 0),
      // Harbor adds a group as its first trial's result comes in: none while no trial has settled
      evals:
        settled.length === 0
          ? {}
          : {
              [group]: {
                n_trials: settled.length,
                n_errors: settled.filter((t) => t.exception).length,
                metrics: s.mean_reward !== null ? [{ mean: s.mean_reward }] : [],
                pass_at_k: s.pass_at_k ?? {},
                reward_stats: rewardStats,
                exception_stats: exceptionStats,
              },
            },
      n_input_tokens: sumTok("prompt"),
      n_cache_tokens: sumTok("cached_read"),
      n_output_tokens: sumTok("output"),
      // the job's figure only once every trial's spend is final, like a trial's cost_usd
      cost_usd: finals.length && finals.every((x) => x.final_usd !== null) ? spent : null,
    },
    x_evolve: {
      job_id: job.id,
      status: s.status,
      counts: s.counts,
      mean_reward: s.mean_reward,
      metrics: s.metrics,
      metrics_note: "means are over the trials that produced a reward; a failed trial is never counted as 0",
      spentUsd: spent,
      spendSource: finals.length === 0 ? "none" : finals.every((x) => x.final_usd !== null) ? "measured" : "lower_bound",
    },
  };
}
