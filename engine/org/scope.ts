/**
 * Who sees what (the one place this is decided): a job or dataset in an organization is seen by that organization's
 * members; one without an org is personal, seen by its creator only. A record from before teams carries no creator
 * and reads as personal to the store's own user (`host`: the identity of the process reading it, which for
 * `evolve serve` is the user serve runs as). Trials are seen with their job.
 */
import { EvolveError } from "../errors.ts";
import type { DatasetRecord, JobRecord, Store, TrialRecord } from "../store/index.ts";
import { userOrgs } from "./orgs.ts";

/** A reader: who they are, the store's own user, and the orgs they belong to. */
export interface Viewer {
  user: string;
  host: string;
  orgs: ReadonlySet<string>;
}

/** What `job list --scope` picks: yours, teammates', or everything in your organizations (yours included). */
export const JOB_SCOPES = ["my", "shared", "org"] as const;
export type JobScope = (typeof JOB_SCOPES)[number];

/** The viewer `user` is, in `store` read by `host`. */
export function viewerOf(store: Store, user: string, host: string): Viewer {
  return { user, host, orgs: new Set(userOrgs(store, user).map((o) => o.name)) };
}

/** Who created a record: its `created_by`, or the store's own user for a record from before teams. */
export const creatorOf = (v: Viewer, rec: { created_by?: string }): string => rec.created_by ?? v.host;

/** Whether `v` may see a job or dataset. */
export function canSee(v: Viewer, rec: { org?: string; created_by?: string }): boolean {
  return rec.org !== undefined ? v.orgs.has(rec.org) : creatorOf(v, rec) === v.user;
}

/** Whether a job falls in a `job list --scope`. */
export function inScope(v: Viewer, job: JobRecord, scope: JobScope): boolean {
  if (!canSee(v, job)) return false;
  const mine = creatorOf(v, job) === v.user;
  return scope === "my" ? mine : scope === "shared" ? !mine : true;
}

/** `--scope` checked: one of my, shared, org. */
export function parseJobScope(v: string): JobScope {
  if (!(JOB_SCOPES as readonly string[]).includes(v)) throw new EvolveError("usage", `--scope ${v}: expected one of ${JOB_SCOPES.join(", ")}`, "e.g. --scope org");
  return v as JobScope;
}

/**
 * The store as `v` sees it: jobs, trials and datasets `v` may not see are absent from every read (by id, by prefix,
 * in lists), so anything built on it (the API's routes) answers a record of another org exactly as a missing one.
 * Writes and every other read go to the store itself.
 */
export function scopedStore(store: Store, v: Viewer): Store {
  const jobSeen = new Map<string, boolean>();
  const seesJob = (id: string): boolean => {
    let ok = jobSeen.get(id);
    if (ok === undefined) {
      const j = store.getJob(id);
      ok = j !== undefined && canSee(v, j);
      jobSeen.set(id, ok);
    }
    return ok;
  };
  const seesTrial = (t: TrialRecord | undefined) => t !== undefined && seesJob(t.job_id);
  const over: Partial<Store> = {
    getJob: (id: string) => (seesJob(id) ? store.getJob(id) : undefined),
    listJobs: (limit?: number): JobRecord[] => {
      const all = store.listJobs().filter((j) => canSee(v, j));
      return limit ? all.slice(0, limit) : all;
    },
    getTrial: (id: string) => {
      const t = store.getTrial(id);
      return seesTrial(t) ? t : undefined;
    },
    listTrials: (jobId?: string): TrialRecord[] => (jobId !== undefined ? (seesJob(jobId) ? store.listTrials(jobId) : []) : store.listTrials().filter(seesTrial)),
    idsWithPrefix: (db: "jobs" | "trials", prefix: string, limit: number): string[] =>
      store
        .idsWithPrefix(db, prefix, Number.MAX_SAFE_INTEGER)
        .filter((id) => (db === "jobs" ? seesJob(id) : seesTrial(store.getTrial(id))))
        .slice(0, limit),
    trialIdsEndingWith: (suffix: string, limit: number): string[] =>
      store
        .trialIdsEndingWith(suffix, Number.MAX_SAFE_INTEGER)
        .filter((id) => seesTrial(store.getTrial(id)))
        .slice(0, limit),
    getDataset: (name: string, version: string): DatasetRecord | undefined => {
      const d = store.getDataset(name, version);
      return d && canSee(v, d) ? d : undefined;
    },
    listDatasets: (name?: string): DatasetRecord[] => store.listDatasets(name).filter((d) => canSee(v, d)),
  };
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (Object.hasOwn(over, prop)) return over[prop as keyof Store];
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
