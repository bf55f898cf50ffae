/**
 * `job list` and finding a job: which jobs a filter keeps, newest first, how many a limit hides, and a job by id
 * or by its `--job-name`. Pure reads of the store; the CLI only parses the flags and prints the rows.
 */
import { EvolveError } from "../errors.ts";
import { resolveJob, type JobRecord, type Store } from "../store/index.ts";
import { effectiveStatus, jobConfig, type JobKind, type JobStatus } from "./job.ts";
import { jobKind, summarizeJob } from "./summary.ts";

/** The job statuses a user can filter on: every one (the store's list, lifecycle.ts). */
export { JOB_STATUSES } from "../trial/lifecycle.ts";
/** The job kinds a user can filter on. */
export const JOB_KINDS: readonly JobKind[] = ["run", "check", "retry", "regrade"];

/**
 * Splits repeatable, comma-separated filter values (`--status`, `--kind`; the API's `status`, `kind`) and checks each
 * against `allowed` (case-insensitively).
 */
export function choices<T extends string>(flag: string, given: readonly string[] | undefined, allowed: readonly T[], upper: boolean): T[] | undefined {
  if (!given || given.length === 0) return undefined;
  const vals = given.flatMap((v) => v.split(",")).map((v) => v.trim()).filter(Boolean).map((v) => (upper ? v.toUpperCase() : v.toLowerCase()));
  const bad = vals.find((v) => !allowed.includes(v as T));
  if (bad !== undefined) throw new EvolveError("usage", `${flag} ${bad}: expected one of ${allowed.join(", ")}`, `e.g. ${flag} ${allowed[0]}`);
  return vals as T[];
}

/** What `job list` keeps; every field left out keeps everything. */
export interface JobFilter {
  status?: readonly JobStatus[];
  kind?: readonly JobKind[];
  /** The agent's name, exactly. */
  agent?: string;
  /** A dataset `name` (any version) or `name@version`. */
  dataset?: string;
  /** The `--job-name`, exactly. */
  name?: string;
  /** Only jobs created at or after this time (ms since the epoch). */
  since?: number;
  /** At most this many rows, newest first; 0 or absent: all. */
  limit?: number;
  /** Keeps only the jobs it says yes to (`job list --scope`: engine/org's inScope). */
  keep?: (job: JobRecord) => boolean;
}

/** One row of `job list` (its `--json` elements). */
export interface JobRow {
  id: string;
  kind: JobKind;
  name: string | null;
  status: JobStatus;
  agent: string;
  model: string | null;
  source: string;
  n_trials: number;
  counts: Record<string, number>;
  mean_reward: number | null;
  /** Every trial settled INFRASTRUCTURE_ERROR (JobSummary.all_infrastructure_error). */
  all_infrastructure_error: boolean;
  created_at: string;
}

/** The rows a filter keeps, newest first, with how many jobs matched in all (`hidden` = matched − shown). */
export function listJobRows(store: Store, f: JobFilter): { jobs: JobRow[]; matched: number; hidden: number } {
  const rows: JobRow[] = [];
  let matched = 0;
  for (const job of store.listJobs()) {
    if (f.keep && !f.keep(job)) continue;
    const config = jobConfig(job);
    if (f.agent !== undefined && config.agent.name !== f.agent) continue;
    if (f.name !== undefined && config.name !== f.name) continue;
    if (f.dataset !== undefined && !datasetMatches(job.dataset, f.dataset)) continue;
    if (f.since !== undefined && !(Date.parse(job.created_at) >= f.since)) continue;
    const status = effectiveStatus(job);
    if (f.status && !f.status.includes(status)) continue;
    // a job's kind is in its config; only older jobs need their trials read to tell it, and only when filtering on it
    if (f.kind && !f.kind.includes(config.kind ?? jobKind(job, store.listTrials(job.id)))) continue;
    matched++;
    if (f.limit && rows.length >= f.limit) continue;
    const s = summarizeJob(job, store.listTrials(job.id));
    rows.push({
      id: job.id,
      kind: s.kind,
      name: s.name,
      status,
      agent: s.agent,
      model: s.model,
      source: s.source,
      n_trials: s.n_trials,
      counts: s.counts as Record<string, number>,
      mean_reward: s.mean_reward,
      all_infrastructure_error: s.all_infrastructure_error,
      created_at: job.created_at,
    });
  }
  return { jobs: rows, matched, hidden: matched - rows.length };
}

function datasetMatches(recorded: string | undefined, wanted: string): boolean {
  if (recorded === undefined) return false;
  return wanted.includes("@") ? recorded === wanted : recorded.slice(0, recorded.lastIndexOf("@")) === wanted;
}

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * `--since`: a relative age (`30m`, `2h`, `3d`, `1w`) back from `now`, or an ISO date or time (`2026-06-01`,
 * `2026-06-01T12:00Z`); returns ms since the epoch. Anything else is a usage error.
 */
export function parseSince(v: string, now: number = Date.now()): number {
  const rel = /^(\d+)\s*([smhdw])$/.exec(v.trim());
  if (rel) return now - Number(rel[1]) * UNITS[rel[2]];
  const at = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(v.trim()) ? Date.parse(v.trim()) : NaN;
  if (Number.isFinite(at)) return at;
  throw new EvolveError("usage", `--since ${v}: expected an age like 30m, 2h, 3d, 1w or an ISO date like 2026-06-01`, "e.g. --since 2h");
}

/** The job a reference names, and the other jobs that carry the same `--job-name` when it was taken as a name. */
export interface FoundJob {
  job: JobRecord;
  /** When `ref` was a `--job-name` that several jobs carry: their ids but the one taken, newest first; else empty. */
  sameName: string[];
}

/**
 * The job `ref` names: the job with that id, else the newest job whose `--job-name` it is, else the job whose id it
 * uniquely starts (`job_not_found` / `id_ambiguous` otherwise). A name is a label, not a key: several jobs may carry
 * it, and the newest one is meant, as a user re-running `--job-name smoke` expects; the others come back in
 * `sameName` so that every command taking a job can say which one it took.
 */
export function findJobRef(store: Store, ref: string): FoundJob {
  const byId = store.getJob(ref);
  if (byId) return { job: byId, sameName: [] };
  const named = store.listJobs().filter((j) => jobConfig(j).name === ref);
  if (named.length > 0) return { job: named[0], sameName: named.slice(1).map((j) => j.id) };
  // not a name: a unique start of an id (job_not_found / id_ambiguous otherwise)
  return { job: resolveJob(store, ref), sameName: [] };
}

/** The job `ref` names (findJobRef), without the other jobs of its name. */
export function findJob(store: Store, ref: string): JobRecord {
  return findJobRef(store, ref).job;
}
