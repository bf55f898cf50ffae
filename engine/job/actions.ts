/**
 * Acting on one trial (platform-trials.md "Act on one trial"): `retry` runs a settled trial again and `regrade`
 * re-runs only its verifier, each as a new job holding the one new trial; `stop` ends in-flight trials without
 * cancelling their job. `job retry` does the same for every trial of a job that did not score (Inspect's
 * eval-retry): one new job of kind `retry` holding a new trial per trial picked. The new jobs are ordinary jobs (same config as the original's, one task, one attempt), so
 * `job show`, `job resume` and `job cancel` work on them unchanged; the new trial's record names its origin
 * (`retry_of` / `regrade_of`), which is also how the trial runner knows to run a regrade verifier-only.
 */
import { EvolveError } from "../errors.ts";
import { newId, resolveTrial, taskBlobDir, type JobRecord, type Store, type TrialRecord } from "../store/index.ts";
import { regradeRefusal, regradeVerifier, type RegradeVerifier } from "../trial/regrade.ts";
import { cancelledTrial, isSettledStatus, newJob, queuedTrial, type TrialStatus } from "../trial/lifecycle.ts";
import { createJob, jobConfig, runnerAlive, uploadedRefusal, type JobConfig, type JobKind } from "./job.ts";

const now = () => new Date().toISOString();

/** The trial an id argument names (its whole id, or a unique start or end: store/resolve.ts), or `trial_not_found`. */
export function requireTrial(store: Store, id: string): TrialRecord {
  return resolveTrial(store, id);
}

/** Whether a trial has reached its final status. */
export function isSettled(t: TrialRecord): boolean {
  return isSettledStatus(t.status);
}

function originalJob(store: Store, t: TrialRecord, what: "retried" | "regraded"): JobRecord {
  const job = store.getJob(t.job_id);
  if (!job) throw new EvolveError("job_not_found", `trial ${t.id} names job ${t.job_id}, which is not in the store`, "");
  const uploaded = uploadedRefusal(job, what);
  if (uploaded) throw uploaded;
  return job;
}

/**
 * The original job's config narrowed to the one trial's task, one attempt, one at a time, as a job of `kind`. The
 * original's `--job-name` stays with the original: the name finds that job, not each retry of one of its trials.
 */
function singleTrialConfig(job: JobRecord, t: TrialRecord, kind: JobKind): JobConfig {
  const { name: _label, ...c } = jobConfig(job);
  const name = t.task_name ?? c.tasks.find((x) => x.digest === t.task_digest)?.name ?? t.task_digest;
  return { ...c, kind, attempts: 1, concurrency: 1, tasks: [{ name, digest: t.task_digest, ...(t.task_path !== undefined ? { path: t.task_path } : {}) }] };
}

function newJobWith(store: Store, job: JobRecord, config: JobConfig, lineage: Pick<TrialRecord, "retry_of" | "regrade_of">): { job: JobRecord; trial: TrialRecord } {
  return store.transaction(() => {
    // a job made from another's trial stays in that job's org, under its creator (platform-teams.md)
    const created = createJob(store, config, job.dataset, undefined, { org: job.org, created_by: job.created_by });
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
export function createRetry(store: Store, arg: string): { job: JobRecord; trial: TrialRecord } {
  const t = requireTrial(store, arg);
  const id = t.id;
  originalJob(store, t, "retried");
  if (!isSettled(t)) {
    const hint = t.status === "INTERRUPTED" ? `\`evolve job resume ${t.job_id}\` runs it again` : `wait for it, or \`evolve trial stop ${id}\` first`;
    throw new EvolveError("trial_not_settled", `trial ${id} is ${t.status}: only a settled trial can be retried`, hint);
  }
  if (!store.getTask(t.task_digest)) {
    throw new EvolveError("task_missing", `the task of trial ${id} (${t.task_digest}) is no longer stored`, "publish or run the task again");
  }
  const job = originalJob(store, t, "retried");
  return newJobWith(store, job, singleTrialConfig(job, t, "retry"), { retry_of: id });
}

/**
 * Records a new job holding one new trial that re-runs only the verifier of `id` on its kept files. Refuses what
 * cannot be regraded with a stable code (see regrade.ts regradeRefusal), before anything is written.
 */
export async function createRegrade(store: Store, home: string, arg: string): Promise<{ job: JobRecord; trial: TrialRecord; verifier: RegradeVerifier }> {
  const t = requireTrial(store, arg);
  const id = t.id;
  originalJob(store, t, "regraded");
  const taskDir = taskBlobDir(home, t.task_digest);
  const refusal = await regradeRefusal(home, t, taskDir);
  if (refusal) throw refusal;
  const verifier = await regradeVerifier(taskDir);
  const job = originalJob(store, t, "regraded");
  // a regrade needs no build cache bust and no retries of an agent: one verifier run
  const config: JobConfig = { ...singleTrialConfig(job, t, "regrade"), force_build: false };
  return { ...newJobWith(store, job, config, { regrade_of: id }), verifier };
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
      const rec = cancelledTrial(t, at, "stopped by `evolve trial stop`", { stopRequested: true });
      store.putTrial(rec);
      return { id: t.id, action: "cancelled", status: rec.status };
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


/**
 * The trials `job retry` would run again: by default every trial of the job that did not settle SCORED, else those
 * in one of `statuses`. Refuses an unknown job (`job_not_found`), one a live process is running (`job_busy`: its
 * trials are still changing) and a picked trial whose task is no longer stored (`task_missing`). Writes nothing.
 */
export function retryPicks(store: Store, jobId: string, statuses?: readonly TrialStatus[]): { job: JobRecord; picked: TrialRecord[] } {
  const job = store.getJob(jobId);
  if (!job) throw new EvolveError("job_not_found", `no job ${jobId}`, "see `evolve job list`");
  const uploaded = uploadedRefusal(job, "retried");
  if (uploaded) throw uploaded;
  if (runnerAlive(job)) {
    throw new EvolveError("job_busy", `job ${jobId} is being run by process ${job.runner!.pid}: its trials are still changing`, `wait for it to end, or \`evolve job cancel ${jobId}\` first`);
  }
  const want = statuses && statuses.length > 0 ? new Set<string>(statuses) : undefined;
  const picked = store.listTrials(jobId).filter((t) => (want ? want.has(t.status) : t.status !== "SCORED"));
  const gone = picked.find((t) => !store.getTask(t.task_digest));
  if (gone) throw new EvolveError("task_missing", `the task of trial ${gone.id} (${gone.task_digest}) is no longer stored`, "publish or run the task again");
  return { job, picked };
}

/**
 * Records `job retry`'s new job (kind `retry`, `retry_of` the old job; the old job's agent, model and settings)
 * holding one QUEUED trial per picked trial, each naming the trial it runs again (`retry_of`), in one transaction.
 * Returns null when nothing is picked (retryPicks), writing nothing. The old job is left as it is. Run it with runJob.
 */
export function createJobRetry(store: Store, jobId: string, statuses?: readonly TrialStatus[]): { job: JobRecord; trials: TrialRecord[] } | null {
  return store.transaction(() => {
    const { job: old, picked } = retryPicks(store, jobId, statuses);
    if (picked.length === 0) return null;
    const { name: _label, ...c } = jobConfig(old);
    const perTask = new Map<string, { name: string; digest: string; n: number }>();
    for (const t of picked) {
      const e = perTask.get(t.task_digest) ?? { name: t.task_name ?? c.tasks.find((x) => x.digest === t.task_digest)?.name ?? t.task_digest, digest: t.task_digest, n: 0 };
      e.n++;
      perTask.set(t.task_digest, e);
    }
    const tasks = [...perTask.values()];
    // the tasks retried, and as many attempts as the most-picked task needs: the trials themselves are listed below
    const config: JobConfig = { ...c, kind: "retry", tasks: tasks.map(({ name, digest }) => ({ name, digest })), attempts: Math.max(...tasks.map((t) => t.n)) };
    const at = now();
    const job = newJob({ id: newId(), created_at: at, updated_at: at, dataset: old.dataset, config, runner: null, retry_of: old.id, ...(old.org !== undefined ? { org: old.org } : {}), ...(old.created_by !== undefined ? { created_by: old.created_by } : {}) });
    const trials: TrialRecord[] = picked.map((t) =>
      queuedTrial({
        id: newId(),
        job_id: job.id,
        task_digest: t.task_digest,
        task_name: perTask.get(t.task_digest)!.name,
        agent: config.agent.name,
        model: config.agent.model,
        created_at: at,
        updated_at: at,
        retry_of: t.id,
        ...(old.dataset !== undefined ? { source: old.dataset } : {}),
      }),
    );
    store.putJob(job);
    store.putTrials(trials);
    return { job, trials };
  });
}
