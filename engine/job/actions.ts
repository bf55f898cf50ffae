/**
 * Acting on one trial (platform-trials.md "Act on one trial"): `retry` runs a settled trial again and `regrade`
 * re-runs only its verifier, each as a new job holding the one new trial; `stop` ends in-flight trials without
 * cancelling their job. The new jobs are ordinary jobs (same config as the original's, one task, one attempt), so
 * `job show`, `job resume` and `job cancel` work on them unchanged; the new trial's record names its origin
 * (`retry_of` / `regrade_of`), which is also how the trial runner knows to run a regrade verifier-only.
 */
import { EvolveError } from "../errors.ts";
import { taskBlobDir, type JobRecord, type Store, type TrialRecord } from "../store/index.ts";
import { regradeRefusal } from "../trial/regrade.ts";
import { isSettledStatus } from "../trial/outcome.ts";
import { createJob, jobConfig, runnerAlive, type JobConfig } from "./job.ts";

const now = () => new Date().toISOString();

/** A trial by id, or `trial_not_found`. */
export function requireTrial(store: Store, id: string): TrialRecord {
  const t = store.getTrial(id);
  if (!t) throw new EvolveError("trial_not_found", `no trial ${id}`, "see `evolve job show <job-id>` for trial ids");
  return t;
}

/** Whether a trial has reached its final status. */
export function isSettled(t: TrialRecord): boolean {
  return isSettledStatus(t.status);
}

function originalJob(store: Store, t: TrialRecord): JobRecord {
  const job = store.getJob(t.job_id);
  if (!job) throw new EvolveError("job_not_found", `trial ${t.id} names job ${t.job_id}, which is not in the store`, "");
  return job;
}

/** The original job's config narrowed to the one trial's task, one attempt, one at a time. */
function singleTrialConfig(job: JobRecord, t: TrialRecord): JobConfig {
  const c = jobConfig(job);
  const name = t.task_name ?? c.tasks.find((x) => x.digest === t.task_digest)?.name ?? t.task_digest;
  return { ...c, attempts: 1, concurrency: 1, tasks: [{ name, digest: t.task_digest, ...(t.task_path !== undefined ? { path: t.task_path } : {}) }] };
}

function newJobWith(store: Store, job: JobRecord, config: JobConfig, lineage: Pick<TrialRecord, "retry_of" | "regrade_of">): { job: JobRecord; trial: TrialRecord } {
  return store.transaction(() => {
    const created = createJob(store, config, job.dataset);
    const [trial] = store.listTrials(created.id);
    const rec: TrialRecord = { ...trial, ...lineage, source: job.dataset };
    store.putTrial(rec);
    return { job: created, trial: rec };
  });
}

/**
 * Records a new job holding one new QUEUED trial of the same task, agent and settings as `id`. Refuses a trial
 * that has not settled (`trial_not_settled`) and a task no longer stored (`task_missing`). Run the job with runJob.
 */
export function createRetry(store: Store, id: string): { job: JobRecord; trial: TrialRecord } {
  const t = requireTrial(store, id);
  if (!isSettled(t)) {
    throw new EvolveError("trial_not_settled", `trial ${id} is ${t.status}: only a settled trial can be retried`, `wait for it, or \`evolve trial stop ${id}\` first`);
  }
  if (!store.getTask(t.task_digest)) {
    throw new EvolveError("task_missing", `the task of trial ${id} (${t.task_digest}) is no longer stored`, "publish or run the task again");
  }
  const job = originalJob(store, t);
  return newJobWith(store, job, singleTrialConfig(job, t), { retry_of: id });
}

/**
 * Records a new job holding one new trial that re-runs only the verifier of `id` on its kept files. Refuses what
 * cannot be regraded with a stable code (see regrade.ts regradeRefusal), before anything is written.
 */
export async function createRegrade(store: Store, home: string, id: string): Promise<{ job: JobRecord; trial: TrialRecord }> {
  const t = requireTrial(store, id);
  const refusal = await regradeRefusal(home, t, taskBlobDir(home, t.task_digest));
  if (refusal) throw refusal;
  const job = originalJob(store, t);
  // a regrade needs no build cache bust and no retries of an agent: one verifier run
  const config: JobConfig = { ...singleTrialConfig(job, t), force_build: false };
  return newJobWith(store, job, config, { regrade_of: id });
}

/** What `stop` did to one trial. */
export interface StopOutcome {
  id: string;
  /** `requested`: its runner will cancel it; `cancelled`: settled CANCELLED here (queued, or its runner is gone); `settled`: it had already ended. */
  action: "requested" | "cancelled" | "settled";
  status: string;
}

/**
 * Asks in-flight trials to stop. A trial whose job's runner is alive is marked (`stop_requested_at`) and that
 * runner cancels it within a poll; one with no live runner settles CANCELLED here at once. Unknown ids throw
 * `trial_not_found` before anything is marked. The trials' jobs are left running.
 */
export function requestStop(store: Store, ids: readonly string[]): StopOutcome[] {
  return store.transaction(() => {
    const trials = ids.map((id) => requireTrial(store, id));
    return trials.map((t): StopOutcome => {
      if (isSettled(t)) return { id: t.id, action: "settled", status: t.status };
      const at = now();
      const job = store.getJob(t.job_id);
      // a queued trial has nothing to stop yet: it settles here, and its runner, reaching it, sees the mark
      if (job && runnerAlive(job) && t.status !== "QUEUED") {
        store.putTrial({ ...t, stop_requested_at: t.stop_requested_at ?? at, updated_at: at });
        return { id: t.id, action: "requested", status: t.status };
      }
      store.putTrial({
        ...t,
        status: "CANCELLED",
        stop_requested_at: at,
        exception: { type: "CancelledError", message: "stopped by `evolve trial stop`", traceback: "", occurred_at: at },
        finished_at: at,
        updated_at: at,
      });
      return { id: t.id, action: "cancelled", status: "CANCELLED" };
    });
  });
}

/**
 * The ids among `ids` that have not settled yet, for `trial stop` waiting on its requests. (A runner keeps the
 * stop mark when it writes its record, see trial/recorder.ts, so nothing needs marking twice.)
 */
export function unsettled(store: Store, ids: readonly string[]): string[] {
  return ids.filter((id) => {
    const t = store.getTrial(id);
    return t !== undefined && !isSettled(t);
  });
}

