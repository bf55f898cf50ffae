/**
 * `evolve gc`: removes the containers and networks evolve made that no live trial owns — left behind by a crash,
 * a SIGKILL or an engine hiccup. Ownership is by label: a trial label owns it while that trial is QUEUED, RUNNING or
 * SCORING in the store and its job's runner process is alive; a job label alone (job-wide networks) while any
 * trial of that job is live.
 */
import { LABEL_JOB, LABEL_MANAGED, LABEL_TRIAL, type Engine } from "./driver/types.ts";
import { runnerAlive } from "./job/job.ts";
import { isLiveStatus, LIVE_STATUSES } from "./trial/outcome.ts";
import type { Store } from "./store/index.ts";

/** Trial statuses that still own their containers (outcome.ts decides them). */
export { LIVE_STATUSES };

/** What gc removed (or, with dryRun, would remove). */
export interface GcResult {
  containers: { id: string; trial?: string; job?: string }[];
  networks: { name: string; trial?: string; job?: string }[];
}

/**
 * Removes every `dev.evolve.managed` container and network whose trial is not live (or not in the store at all).
 * Containers go first, so their networks are no longer in use when removed. With `dryRun` nothing is removed;
 * `scope` narrows gc to objects also carrying those labels (tests running next to other evolve processes).
 */
export async function gc(engine: Engine, store: Store, opts: { dryRun?: boolean; scope?: Record<string, string> } = {}): Promise<GcResult> {
  store.refresh();
  // A trial left RUNNING by a runner that was killed owns nothing any more: its job's runner must be alive too.
  const runnerLive = new Map<string, boolean>();
  const isRunnerLive = (jobId: string) => {
    if (!runnerLive.has(jobId)) {
      const job = store.getJob(jobId);
      runnerLive.set(jobId, job !== undefined && runnerAlive(job));
    }
    return runnerLive.get(jobId)!;
  };
  const trialLive = new Map<string, boolean>();
  const isTrialLive = (id: string) => {
    if (!trialLive.has(id)) {
      const t = store.getTrial(id);
      trialLive.set(id, t !== undefined && isLiveStatus(t.status) && isRunnerLive(t.job_id));
    }
    return trialLive.get(id)!;
  };
  const jobLive = new Map<string, boolean>();
  const isJobLive = (id: string) => {
    if (!jobLive.has(id)) jobLive.set(id, isRunnerLive(id) && store.listTrials(id).some((t) => isLiveStatus(t.status)));
    return jobLive.get(id)!;
  };
  const owned = (labels: Record<string, string>) => {
    const trial = labels[LABEL_TRIAL];
    const job = labels[LABEL_JOB];
    if (trial) return isTrialLive(trial);
    if (job) return isJobLive(job);
    return false;
  };

  const result: GcResult = { containers: [], networks: [] };
  for (const c of await engine.list({ ...opts.scope, [LABEL_MANAGED]: "" })) {
    if (owned(c.labels)) continue;
    result.containers.push({ id: c.id, trial: c.labels[LABEL_TRIAL], job: c.labels[LABEL_JOB] });
  }
  for (const n of await engine.listNetworks({ ...opts.scope, [LABEL_MANAGED]: "" })) {
    if (owned(n.labels)) continue;
    result.networks.push({ name: n.name, trial: n.labels[LABEL_TRIAL], job: n.labels[LABEL_JOB] });
  }
  if (opts.dryRun) return result;
  await Promise.all(result.containers.map((c) => engine.remove(c.id)));
  const removed: GcResult["networks"] = [];
  for (const n of result.networks) {
    try {
      await engine.removeNetwork(n.name);
      removed.push(n);
    } catch {
      // Still in use by a container evolve does not manage: left for the user, not reported as removed.
    }
  }
  return { containers: result.containers, networks: removed };
}
