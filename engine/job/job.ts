/**
 * Jobs: many trials run together with bounded concurrency. A job and all its trials are written to the store
 * before the first container starts, so the plan survives a crash: `resumeJob` re-runs every trial that had not
 * settled (half-finished ones start over) and keeps the settled ones, so each trial ends exactly once.
 * Infrastructure errors are retried automatically a few times; nothing here ever invents a reward.
 */
import { hostname } from "node:os";
import { DEFAULT_MAX_TRIALS } from "../config.ts";
import { EvolveError } from "../errors.ts";
import { checkVerifierEnv } from "./job-config.ts";
import { LABEL_HOME, LABEL_JOB, type Engine } from "../driver/types.ts";
import { removeLabelled } from "../trial/box.ts";
import { newId, type JobRecord, type Store, type TrialRecord } from "../store/index.ts";
import { taskBlobDir } from "../store/index.ts";
import { Interruption, isInterruption } from "../outcome.ts";
import {
  cancelledJob, cancelledTrial, claimedJob, effectiveJobStatus, endedJobStatus, isSettledStatus, newJob, queuedTrial, releasedJob, retriesAfter, runnerFailedTrial,
  runsOnResume, type JobStatus,
} from "../trial/lifecycle.ts";
import type { ModelGateway } from "../gateway-host/model-gateway.ts";
import type { TrialDeps, TrialEvent, TrialRequest } from "../trial/types.ts";
import type { JobExecutor } from "./executor.ts";

/** A job's status (lifecycle.ts decides it). */
export type { JobStatus };

/** What made a job: `run`, `check`, or `trial retry` / `trial regrade` of one trial. */
export type JobKind = "run" | "check" | "retry" | "regrade";

/** What a job runs, as stored in its record (secret names only, never values). */
export interface JobConfig {
  /** Absent on jobs recorded before it was kept (see summary.ts jobKind for how those are read). */
  kind?: JobKind;
  /** `--job-name`: a label the user chose, shown in `job list` and usable in place of the id. */
  name?: string;
  /**
   * `kwargs`: the `--ak` options (absent when none). `root`: the `.agent/` the agent runs with (`--agent-root`, an
   * absolute host path; absent when none), copied into each trial and mounted read-only in its agent's box.
   * `evolve_tools`: the evolve binary mounted read-only in the agent's box with `/opt/evolve/bin` on its PATH, so
   * the agent can run `evolve …` there (a meta-harness proposer's `check_spec`); absent: not mounted.
   */
  agent: { name: string; model?: string; kwargs?: Record<string, string>; root?: string; evolve_tools?: boolean };
  /** Trials per task (`-k`). */
  attempts: number;
  /** Trials at once (`-n`). */
  concurrency: number;
  timeout_multiplier: number;
  secret_names: string[];
  force_build: boolean;
  /** Automatic re-runs of a trial that ended in INFRASTRUCTURE_ERROR. */
  max_retries: number;
  /** Where the tasks came from: a folder (`-p`) or a dataset (`-d name@version`). */
  source: { kind: "path"; path: string } | { kind: "dataset"; ref: string };
  /** `path`: the task's folder inside the `-p` folder, kept only when another task there has the same name. */
  tasks: { name: string; digest: string; path?: string }[];
  /** Per-trial agent spend cap, USD (`--max-spend-usd`). */
  max_spend_usd?: number;
  /** `--ve` verifier overrides (REWARDKIT_JUDGE, REWARDKIT_MODEL): model names, not secrets. */
  verifier_env?: Record<string, string>;
  /**
   * Where the trials run (`--executor`, engine/executor): absent is `local`, this process. Kept so `job resume`
   * runs the rest where the job started. `coordinator_host`: the address workers reach the coordinator at;
   * `ship`: whether Slurm workers pull the job's pack (`images`) or use what their node holds (`none`);
   * `namespace`, `k8s_image`, `kubeconfig`: `--executor kubernetes`'s.
   */
  executor?: {
    kind: "slurm" | "kubernetes";
    partition?: string;
    slurm_args?: string[];
    coordinator_host?: string;
    ship?: "images" | "none";
    namespace?: string;
    k8s_image?: string;
    kubeconfig?: string;
  };
}

/** Runs one trial; engine/trial's runTrial in production. Injected so the job layer does not import the runner eagerly. */
export type TrialRunner = (req: TrialRequest, deps: TrialDeps) => Promise<TrialRecord>;

/** Live notifications while a job runs. */
export type JobEvent =
  | TrialEvent
  | { kind: "trial_settled"; trial: TrialRecord }
  | { kind: "retry"; trialId: string; attempt: number; reason: string }
  /** What a killed runner of this job had left in the engine, removed before any trial runs again. */
  | { kind: "cleanup"; jobId: string; containers: number; networks: number }
  | { kind: "job"; jobId: string; status: JobStatus };

/** What running a job needs. */
export interface JobDeps {
  store: Store;
  engine: Engine;
  home: string;
  runTrial: TrialRunner;
  /** Secret values by name, read by the caller from its own environment; kept in memory only. */
  secrets: Record<string, string>;
  signal?: AbortSignal;
  onEvent?: (e: JobEvent) => void;
  /** Wait before an automatic retry (ms); tests shorten it. */
  retryDelayMs?: number;
  /** The process's LLM gateway, shared by the job's trials. */
  gateway?: ModelGateway;
  /** Where the trials run (executor.ts); absent: `runTrial` in this process, as always. */
  executor?: JobExecutor;
}

const now = () => new Date().toISOString();

/** Reads a job's config back with its types (records keep it opaque). */
export function jobConfig(job: JobRecord): JobConfig {
  return job.config as JobConfig;
}

/**
 * Refuses a job of more than `max` trials (`[jobs] max_trials` of config.toml, see DEFAULT_MAX_TRIALS) before
 * anything is recorded: a job is written, shown and cancelled whole, so an unbounded one makes each of those take
 * unbounded time and memory.
 */
export function checkJobSize(tasks: number, attempts: number, max: number = DEFAULT_MAX_TRIALS): void {
  const n = tasks * attempts;
  if (n <= max) return;
  throw new EvolveError(
    "job_too_large",
    `the job would hold ${n} trials (${tasks} task${tasks === 1 ? "" : "s"} × ${attempts} attempt${attempts === 1 ? "" : "s"}); a job holds at most ${max}`,
    "lower -k or -l, split the run into several jobs, or raise [jobs] max_trials in $EVOLVE_HOME/config.toml",
  );
}

/**
 * Records a new job and one QUEUED trial per task and attempt, in one transaction, and returns the job. Trials are
 * ordered attempt-major (every task once, then every task again), so a partial job covers tasks evenly. Refuses a
 * job over `maxTrials` (checkJobSize) and one whose verifier env sets a key a job may not (job-config.ts).
 */
export function createJob(store: Store, config: JobConfig, dataset?: string, maxTrials: number = DEFAULT_MAX_TRIALS, owner: { created_by?: string; org?: string } = {}): JobRecord {
  if (config.tasks.length === 0) throw new EvolveError("job_empty", "the job has no tasks", "check -p / -d and -l");
  checkVerifierEnv(config.verifier_env);
  checkJobSize(config.tasks.length, config.attempts, maxTrials);
  const at = now();
  const job = newJob({ id: newId(), created_at: at, updated_at: at, dataset, config, runner: null, ...(owner.org !== undefined ? { org: owner.org } : {}), ...(owner.created_by !== undefined ? { created_by: owner.created_by } : {}) });
  const trials: TrialRecord[] = [];
  for (let a = 0; a < config.attempts; a++) {
    for (const t of config.tasks) {
      trials.push(
        queuedTrial({
          id: newId(),
          job_id: job.id,
          task_digest: t.digest,
          task_name: t.name,
          ...(t.path !== undefined ? { task_path: t.path } : {}),
          agent: config.agent.name,
          model: config.agent.model,
          created_at: at,
          updated_at: at,
        }),
      );
    }
  }
  store.transaction(() => {
    store.putJob(job);
    store.putTrials(trials);
  });
  return job;
}

/** True when the process that was running a job still exists on this host. */
export function runnerAlive(job: JobRecord): boolean {
  const r = job.runner;
  if (!r || r.host !== hostname()) return false;
  try {
    process.kill(r.pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The job's status as a user should see it: a RUNNING job whose runner died is INTERRUPTED. */
export function effectiveStatus(job: JobRecord): JobStatus {
  return effectiveJobStatus(job, job.status === "RUNNING" && runnerAlive(job));
}

/**
 * Runs every trial of a job that has not settled, `concurrency` at a time, and returns the job's trials at the end.
 * Used both for a fresh job and for `job resume`: a trial left QUEUED, RUNNING or SCORING by a dead runner is run
 * again from the start. Refuses a job that another live process is running.
 */
export async function runJob(jobId: string, deps: JobDeps): Promise<TrialRecord[]> {
  const { store } = deps;
  const job = claim(store, jobId);
  const config = jobConfig(job);
  const missing = config.secret_names.filter((n) => deps.secrets[n] === undefined);
  if (missing.length > 0) {
    release(store, jobId, "INTERRUPTED");
    throw new EvolveError("secret_not_attached", `secret ${missing.join(", ")} is not set in this environment`, `export ${missing[0]}=… before running`);
  }
  // a killed runner's boxes and networks may still be there (and writing into trial folders): they go first
  const left = await removeLabelled(deps.engine, { [LABEL_JOB]: jobId, [LABEL_HOME]: deps.home }).catch(() => ({ containers: 0, networks: 0 }));
  if (left.containers + left.networks > 0) deps.onEvent?.({ kind: "cleanup", jobId, containers: left.containers, networks: left.networks });
  deps.onEvent?.({ kind: "job", jobId, status: job.status });
  // `job cancel` from another process marks the job CANCELLED in the store; the runner notices and stops.
  // the caller's reason rides along: an Interruption (Ctrl-C…) leaves the job resumable, anything else cancels it
  const stop = new AbortController();
  const outer = deps.signal;
  const onAbort = () => stop.abort(outer?.reason);
  outer?.addEventListener("abort", onAbort, { once: true });
  if (outer?.aborted) stop.abort(outer.reason);
  const watch = setInterval(() => {
    if (store.getJob(jobId)?.status === "CANCELLED") stop.abort();
  }, 1000);
  deps = { ...deps, signal: stop.signal };
  // BUDGET trials are never retried on their own, but run again here: `resume` is how a user goes on once the
  // credits or the budget allow it (platform-trials.md)
  const pending = store.listTrials(jobId).filter((t) => runsOnResume(t.status));
  const byDigest = new Map(config.tasks.map((t) => [t.digest, t.name]));

  if (deps.executor) deps = { ...deps, runTrial: deps.executor.runTrial };
  let next = 0;
  const worker = async () => {
    while (next < pending.length) {
      if (deps.signal?.aborted && isInterruption(deps.signal.reason)) return; // the rest stays QUEUED for `job resume`
      const trial = pending[next++];
      if (deps.signal?.aborted) {
        settleCancelled(store, trial);
        deps.onEvent?.({ kind: "trial_settled", trial: store.getTrial(trial.id)! });
        continue;
      }
      await runWithRetries(trial, byDigest.get(trial.task_digest) ?? trial.task_digest, config, deps);
    }
  };
  try {
    try {
      await deps.executor?.start?.({ jobId, trials: pending.length, concurrency: config.concurrency });
    } catch (e) {
      // nothing ran: the job stays resumable (INTERRUPTED), as after a Ctrl-C before the first trial
      stop.abort(new Interruption("the executor could not start its workers", 1));
      throw e;
    }
    await Promise.all(Array.from({ length: Math.max(1, Math.min(config.concurrency, pending.length)) }, worker));
  } finally {
    await deps.executor?.stop?.();
    clearInterval(watch);
    outer?.removeEventListener("abort", onAbort);
    const status = release(store, jobId, endedJobStatus(stop.signal));
    deps.onEvent?.({ kind: "job", jobId, status });
  }
  return store.listTrials(jobId);
}

async function runWithRetries(trial: TrialRecord, taskName: string, config: JobConfig, deps: JobDeps): Promise<void> {
  const { store } = deps;
  for (let attempt = 1; ; attempt++) {
    const req: TrialRequest = {
      trialId: trial.id,
      jobId: trial.job_id,
      home: deps.home,
      task: {
        dir: taskBlobDir(deps.home, trial.task_digest),
        digest: trial.task_digest,
        name: taskName,
        source: config.source.kind === "dataset" ? config.source.ref : undefined,
      },
      agent: config.agent,
      timeoutMultiplier: config.timeout_multiplier,
      secrets: pick(deps.secrets, config.secret_names),
      forceBuild: config.force_build && attempt === 1,
      attempt,
      ...(config.max_spend_usd !== undefined ? { maxSpendUsd: config.max_spend_usd } : {}),
      ...(config.verifier_env ? { verifierEnv: config.verifier_env } : {}),
    };
    let result: TrialRecord;
    try {
      result = await deps.runTrial(req, { engine: deps.engine, store, signal: deps.signal, onEvent: deps.onEvent, gateway: deps.gateway });
    } catch (e) {
      // The runner settles trials itself; reaching here means it could not even record the failure.
      result = settleInfraError(store, trial, e);
    }
    if (!retriesAfter(result, attempt, config.max_retries, !!deps.signal?.aborted)) {
      deps.onEvent?.({ kind: "trial_settled", trial: result });
      return;
    }
    deps.onEvent?.({ kind: "retry", trialId: trial.id, attempt: attempt + 1, reason: result.exception?.message ?? "infrastructure error" });
    await new Promise((r) => setTimeout(r, deps.retryDelayMs ?? 1000 * attempt));
  }
}

function pick(all: Record<string, string>, names: readonly string[]): Record<string, string> {
  return Object.fromEntries(names.filter((n) => all[n] !== undefined).map((n) => [n, all[n]]));
}

function settleCancelled(store: Store, trial: TrialRecord): void {
  store.putTrial(cancelledRecord(trial, now()));
}

function cancelledRecord(trial: TrialRecord, at: string): TrialRecord {
  return cancelledTrial(trial, at, "the job was cancelled before this trial started");
}

function settleInfraError(store: Store, trial: TrialRecord, e: unknown): TrialRecord {
  const rec = runnerFailedTrial(store.getTrial(trial.id) ?? trial, now(), e);
  store.putTrial(rec);
  return rec;
}

/**
 * `job_uploaded` for a job run elsewhere and uploaded (`evolve upload`): its trials ran on another machine, so
 * nothing here can resume, retry or regrade them (platform-upload.md); null for any other job.
 */
export function uploadedRefusal(job: JobRecord, what: "resumed" | "retried" | "regraded"): EvolveError | null {
  if (!job.upload) return null;
  return new EvolveError("job_uploaded", `job ${job.id} was uploaded from elsewhere: its trials are not ${what} here`, "analyze it, or run the tasks here with `evolve run`");
}

/**
 * Why a recorded job cannot be run now, or null: another live process runs it (`job_busy`), or it was cancelled
 * (`job_cancelled`: a cancel is final; `job retry` runs its unscored trials again as a new job). `job resume` asks
 * before it opens an engine or prints anything, and the runner asks again as it claims the job.
 */
export function runRefusal(job: JobRecord): EvolveError | null {
  const uploaded = uploadedRefusal(job, "resumed");
  if (uploaded) return uploaded;
  if (job.runner && runnerAlive(job) && job.runner.pid !== process.pid) {
    return new EvolveError("job_busy", `job ${job.id} is being run by process ${job.runner.pid}`, "wait for it, or `evolve job cancel` it");
  }
  if (job.status === "CANCELLED") {
    return new EvolveError("job_cancelled", `job ${job.id} was cancelled${job.finished_at ? ` at ${job.finished_at}` : ""}: a cancelled job is not resumed`, `\`evolve job retry ${job.id}\` runs its trials that did not score again, as a new job`);
  }
  return null;
}

function claim(store: Store, jobId: string): JobRecord {
  return store.transaction(() => {
    const job = store.getJob(jobId);
    if (!job) throw new EvolveError("job_not_found", `no job ${jobId}`, "see `evolve job list`");
    const refused = runRefusal(job);
    if (refused) throw refused;
    const claimed = claimedJob(job, { pid: process.pid, host: hostname(), started_at: now() }, now());
    store.putJob(claimed);
    return claimed;
  });
}

/**
 * Lets go of the job with `wanted` as its status and returns the status written: a job that `job cancel` marked
 * CANCELLED while this runner was being interrupted stays CANCELLED.
 */
function release(store: Store, jobId: string, wanted: JobStatus): JobStatus {
  return store.transaction(() => {
    const job = store.getJob(jobId);
    if (!job) return wanted;
    const released = releasedJob(job, wanted, now());
    store.putJob(released);
    return released.status;
  });
}

/**
 * Cancels a job: trials not yet started settle CANCELLED at once (one write for all of them); a live runner sees
 * the job's status and stops its running trials (they settle CANCELLED too). Returns how many trials were cancelled
 * here and, in `stopping`, the ids of the running trials the live runner is stopping (the caller may wait for them
 * to count the whole cancel). A job that has ended is never rewritten: COMPLETED is refused (`job_settled`), CANCELLED is reported as
 * `already` with nothing written, so cancelling twice is harmless.
 */
export function cancelJob(store: Store, jobId: string): { cancelled: number; runnerPid: number | null; stopping: string[]; already?: "CANCELLED" } {
  return store.transaction(() => {
    const job = store.getJob(jobId);
    if (!job) throw new EvolveError("job_not_found", `no job ${jobId}`, "see `evolve job list`");
    if (job.status === "CANCELLED") return { cancelled: 0, runnerPid: null, stopping: [], already: "CANCELLED" as const };
    if (job.status === "COMPLETED") {
      throw new EvolveError("job_settled", `job ${jobId} already COMPLETED: a finished job is not rewritten`, `see \`evolve job show ${jobId}\``);
    }
    const live = runnerAlive(job);
    const at = now();
    const settled = store
      .listTrials(jobId)
      .filter((t) => t.status === "QUEUED" || (!live && !isSettledStatus(t.status)))
      .map((t) => cancelledRecord(t, at));
    store.putTrials(settled);
    store.putJob(cancelledJob(job, at, live));
    // the live runner's own trials: it sees the CANCELLED mark within a poll and settles each of them CANCELLED
    const stopping = live ? store.listTrials(jobId).filter((t) => !isSettledStatus(t.status) && t.status !== "QUEUED").map((t) => t.id) : [];
    return { cancelled: settled.length, runnerPid: live ? job.runner!.pid : null, stopping };
  });
}
