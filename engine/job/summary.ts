/**
 * What a job amounts to: status counts, per-key reward means over the trials that were scored, pass@k with the
 * unbiased estimator, and exception counts. Failures are counted as failures, never folded into the means as
 * zeros: a mean says "of the trials that produced a reward".
 */
import type { JobRecord, TrialRecord } from "../store/index.ts";
import type { TrialStatus } from "../trial/types.ts";
import { isSettledStatus, type AttemptEntry } from "../trial/lifecycle.ts";
import { tokenCounts } from "../trial/tokens.ts";
import { effectiveStatus, jobConfig, type JobKind, type JobStatus } from "./job.ts";

/** The stable `--json` shape of `job show`. */
export interface JobSummary {
  id: string;
  /** What made the job (see {@link jobKind}). */
  kind: JobKind;
  /** Its `--job-name`, or null. */
  name: string | null;
  status: JobStatus;
  created_at: string;
  finished_at: string | null;
  agent: string;
  model: string | null;
  source: string;
  /** The job this one retries (`job retry`), else null. */
  retry_of: string | null;
  n_trials: number;
  counts: Partial<Record<TrialStatus, number>>;
  /** Mean of the primary reward over trials that have one; null when none has. */
  mean_reward: number | null;
  /** Per reward key: mean and how many trials carried the key. */
  metrics: Record<string, { mean: number; n: number }>;
  /**
   * pass@k by k over the tasks every trial of which scored a binary (0 or 1) primary reward, k up to the fewest
   * trials such a task has; null when no task qualifies. The rest are counted in `pass_at_k_left_out`.
   */
  pass_at_k: Record<string, number> | null;
  /** How many tasks pass@k is computed over. */
  pass_at_k_tasks: number;
  /** The tasks pass@k leaves out, by why: a trial still to settle, a trial that settled unscored, a partial reward. */
  pass_at_k_left_out: { tasks: number; reasons: Partial<Record<PassAtKLeftOut, number>> };
  /** Exception type → number of trials that ended with it. */
  exceptions: Record<string, number>;
  /**
   * The trials whose agent never met its model (ModelUnavailableError: settled INFRASTRUCTURE_ERROR, never scored),
   * counted apart from the rest, with why in up to three distinct first lines.
   */
  model_unavailable: { trials: number; why: string[] };
  /**
   * Every trial (at least one) settled INFRASTRUCTURE_ERROR: the job measured nothing about the agent, whatever its
   * status says (a job whose trials all settled is COMPLETED however they ended). Every printer flags it.
   */
  all_infrastructure_error: boolean;
}

/** Whether a job has trials and every one of them settled INFRASTRUCTURE_ERROR (see JobSummary). */
export function allInfrastructureError(counts: Partial<Record<TrialStatus, number>>, nTrials: number): boolean {
  return nTrials > 0 && counts.INFRASTRUCTURE_ERROR === nTrials;
}

/** How many distinct reasons the summary keeps for trials whose model could not be reached. */
const MODEL_UNAVAILABLE_WHY = 3;

/**
 * Why a task is not in pass@k: a trial still running, one that settled without a score, a reward strictly between 0
 * and 1, or named metrics with no primary reward (platform-tasks.md: such a task is left out of pass@k).
 */
export type PassAtKLeftOut = "not_settled" | "not_scored" | "partial_reward" | "no_primary_reward";

/** How `job show` names each reason a task is left out of pass@k. */
export const PASS_AT_K_LEFT_OUT_TEXT: Record<PassAtKLeftOut, string> = {
  not_settled: "a trial still to settle",
  not_scored: "a trial that did not score",
  partial_reward: "a reward other than 0 or 1",
  no_primary_reward: "metrics but no primary reward",
};

/** The primary reward of a trial: `reward`, else the single key, else none (metrics only). */
export function primaryReward(rewards: Record<string, number> | null | undefined): number | null {
  if (!rewards) return null;
  if (typeof rewards.reward === "number") return rewards.reward;
  const keys = Object.keys(rewards);
  return keys.length === 1 ? rewards[keys[0]] : null;
}

/**
 * Unbiased pass@k for one task with `n` samples of which `c` passed: 1 − C(n−c, k) / C(n, k), computed as a
 * product to stay exact for large n.
 */
export function passAtK(n: number, c: number, k: number): number {
  if (k > n) throw new RangeError(`k=${k} exceeds n=${n}`);
  if (n - c < k) return 1;
  let fail = 1;
  for (let i = 0; i < k; i++) fail *= (n - c - i) / (n - i);
  return 1 - fail;
}

/** The k values reported: 1, powers of two and multiples of five, up to the fewest trials any task has. */
export function kValues(maxK: number): number[] {
  const ks = new Set<number>();
  for (let k = 1; k <= maxK; k *= 2) ks.add(k);
  for (let k = 5; k <= maxK; k += 5) ks.add(k);
  return [...ks].sort((a, b) => a - b);
}

/**
 * What made a job: the kind its config records, else (a job from before kinds were kept) `retry` / `regrade` when
 * its trial names the trial it runs again, else `run`.
 */
export function jobKind(job: JobRecord, trials: readonly TrialRecord[]): JobKind {
  const kind = jobConfig(job).kind;
  if (kind !== undefined) return kind;
  if (trials.some((t) => t.regrade_of !== undefined)) return "regrade";
  if (trials.some((t) => t.retry_of !== undefined)) return "retry";
  return "run";
}

/** Summarizes a job from its record and its trials. */
export function summarizeJob(job: JobRecord, trials: readonly TrialRecord[]): JobSummary {
  const config = jobConfig(job);
  const counts: Partial<Record<TrialStatus, number>> = {};
  const exceptions: Record<string, number> = {};
  const sums: Record<string, { sum: number; n: number }> = {};
  let primarySum = 0;
  let primaryN = 0;
  const unavailable = { trials: 0, why: [] as string[] };
  for (const t of trials) {
    const s = t.status;
    counts[s] = (counts[s] ?? 0) + 1;
    if (t.exception) exceptions[t.exception.type] = (exceptions[t.exception.type] ?? 0) + 1;
    if (t.exception?.type === "ModelUnavailableError") {
      unavailable.trials++;
      const line = t.exception.message.split("\n")[0]!;
      if (unavailable.why.length < MODEL_UNAVAILABLE_WHY && !unavailable.why.includes(line)) unavailable.why.push(line);
    }
    if (s !== "SCORED" || !t.rewards) continue;
    for (const [k, v] of Object.entries(t.rewards)) {
      const acc = (sums[k] ??= { sum: 0, n: 0 });
      acc.sum += v;
      acc.n++;
    }
    const p = primaryReward(t.rewards);
    if (p !== null) {
      primarySum += p;
      primaryN++;
    }
  }
  const metrics = Object.fromEntries(Object.entries(sums).map(([k, a]) => [k, { mean: a.sum / a.n, n: a.n }]));
  return {
    id: job.id,
    kind: jobKind(job, trials),
    name: config.name ?? null,
    status: effectiveStatus(job),
    created_at: job.created_at,
    finished_at: job.finished_at ?? null,
    agent: config.agent.name,
    model: config.agent.model ?? null,
    source: config.source.kind === "dataset" ? config.source.ref : config.source.path,
    retry_of: job.retry_of ?? null,
    n_trials: trials.length,
    counts,
    mean_reward: primaryN > 0 ? primarySum / primaryN : null,
    metrics,
    ...passAtKForJob(trials),
    exceptions,
    model_unavailable: unavailable,
    all_infrastructure_error: allInfrastructureError(counts, trials.length),
  };
}

/**
 * pass@k over the tasks whose every trial scored 0 or 1. A task with any other trial is left out whole, never
 * counted with fewer samples or with the unscored ones as failures, so each estimate stays unbiased; the summary
 * says how many were left out and why instead of dropping pass@k altogether.
 */
function passAtKForJob(trials: readonly TrialRecord[]): Pick<JobSummary, "pass_at_k" | "pass_at_k_tasks" | "pass_at_k_left_out"> {
  const perTask = new Map<string, { n: number; c: number; out?: PassAtKLeftOut }>();
  // the first reason found in this order wins: a task still running may yet score, so it is not "not scored"
  const rank: PassAtKLeftOut[] = ["not_settled", "not_scored", "no_primary_reward", "partial_reward"];
  for (const t of trials) {
    // two tasks of one folder may share a name and even content: each is its own task, told apart by path
    const key = `${t.task_digest}\0${t.task_path ?? ""}`;
    const acc = perTask.get(key) ?? { n: 0, c: 0 };
    perTask.set(key, acc);
    const v = t.status === "SCORED" ? primaryReward(t.rewards) : null;
    const why: PassAtKLeftOut | undefined = !isSettledStatus(t.status)
      ? "not_settled"
      : t.status !== "SCORED"
        ? "not_scored"
        : v === null
          ? "no_primary_reward"
          : v !== 0 && v !== 1
            ? "partial_reward"
            : undefined;
    if (why !== undefined) {
      if (acc.out === undefined || rank.indexOf(why) < rank.indexOf(acc.out)) acc.out = why;
      continue;
    }
    acc.n++;
    acc.c += v!;
  }
  const reasons: Partial<Record<PassAtKLeftOut, number>> = {};
  const counted: { n: number; c: number }[] = [];
  for (const acc of perTask.values()) {
    if (acc.out === undefined) counted.push(acc);
    else reasons[acc.out] = (reasons[acc.out] ?? 0) + 1;
  }
  const left_out = { tasks: perTask.size - counted.length, reasons };
  if (counted.length === 0) return { pass_at_k: null, pass_at_k_tasks: 0, pass_at_k_left_out: left_out };
  // a loop, not Math.min(...): a job may hold thousands of tasks
  let minN = Infinity;
  for (const x of counted) minN = Math.min(minN, x.n);
  const out: Record<string, number> = {};
  for (const k of kValues(minN)) {
    let sum = 0;
    for (const { n, c } of counted) sum += passAtK(n, c, k);
    out[String(k)] = sum / counted.length;
  }
  return { pass_at_k: out, pass_at_k_tasks: counted.length, pass_at_k_left_out: left_out };
}

/** One lane of a trial's recorded spend. */
type SpendLane = { live_usd: number; final_usd: number | null; calls?: number };

/**
 * The one rule for "nothing was measured" (README: spend prints `-` then): no lane, or a lane through which no
 * call went (the oracle's, a nop's; a record from before call counts, by a zero figure). Such a lane is no spend of
 * $0, so every printer and sum treats it as absent.
 */
export function measuredLane<L extends SpendLane>(lane: L | undefined): L | undefined {
  if (!lane) return undefined;
  if (lane.calls === undefined ? lane.live_usd === 0 && !lane.final_usd : lane.calls === 0) return undefined;
  return lane;
}

/** A job's spend over its trials, per lane: null when no trial measured any, `lower_bound` when any figure is one. */
export interface JobSpend {
  agent_usd: number | null;
  agent_lower_bound: boolean;
  judge_usd: number | null;
  judge_lower_bound: boolean;
}

/** What the store's ledger booked for a job's calls, per lane (USD; 0 for a job from before the ledger kept jobs). */
export interface JobLedger {
  agent: number;
  judge: number;
}

/**
 * A job's spend per lane. The ledger's figure wins where it has one: it is what `gateway status` counts against the
 * user, every call the job made (an attempt retried after an infrastructure error, a call that settled after its
 * trial was stopped), where a trial's record keeps only its last attempt. Without one (an older job) the trials'
 * figures are summed (a trial's settled figure, else its lower bound).
 */
export function jobSpend(trials: readonly TrialRecord[], ledger?: JobLedger): JobSpend {
  const sum = (lanes: (SpendLane | undefined)[]) => {
    const got = lanes.map((l) => measuredLane(l)).filter((l): l is SpendLane => l !== undefined);
    if (got.length === 0) return { usd: null, lower: false };
    return { usd: got.reduce((a, l) => a + (l.final_usd ?? l.live_usd), 0), lower: got.some((l) => l.final_usd === null) };
  };
  const booked = (s: { usd: number | null; lower: boolean }, usd: number | undefined) => (usd !== undefined && usd > 0 ? { usd, lower: s.lower } : s);
  const agent = booked(sum(trials.map((t) => t.spend)), ledger?.agent);
  const judge = booked(sum(trials.map((t) => t.spend?.judge)), ledger?.judge);
  return { agent_usd: agent.usd, agent_lower_bound: agent.lower, judge_usd: judge.usd, judge_lower_bound: judge.lower };
}

/**
 * The spec's API names for a trial's spend (platform-trials.md), beside the stored record in `trial show --json`.
 * `live_spent_usd` is the agent's lower bound so far (null before the first reading), `spend_source` is `measured`
 * once final, `agent_result.cost_usd` the settled agent spend (null until then), `usage` the agent's tokens with
 * that same reading as `cost_usd`, `judge_spent_usd` the judge's spend (settled, else its lower bound; null with no judge).
 */
export function trialSpendFields(t: TrialRecord) {
  const s = measuredLane(t.spend);
  const judge = measuredLane(t.spend?.judge);
  return {
    live_spent_usd: s ? s.live_usd : null,
    spend_source: s ? s.source : null,
    agent_result: { cost_usd: s ? s.final_usd : null },
    usage: t.tokens || s ? { ...(tokenCounts(t.tokens) ?? {}), cost_usd: s ? s.live_usd : null } : null,
    judge_spent_usd: judge ? (judge.final_usd ?? judge.live_usd) : null,
  };
}

/**
 * How many times a trial ran and what each run was: its attempts history, oldest first. A record from before the
 * history was kept has none: its count is its `attempt` number, with nothing known of the earlier ones.
 */
export function trialAttempts(t: TrialRecord): { count: number; history: AttemptEntry[] } {
  const history = t.attempts ?? [];
  return { count: Math.max(history.length, t.attempt ?? 1), history };
}

/**
 * Seconds the trial's latest attempt has taken: once settled, from its first phase's start to its last phase's end;
 * while it runs (a build included, whose phase has no end yet), from the attempt's start until `nowMs`. A trial left
 * unsettled by a runner that is gone (`runnerLive` false: its job is INTERRUPTED) stopped at its last write, so its
 * time does not keep growing. Null for a trial that never started.
 */
export function attemptSeconds(t: TrialRecord, nowMs: number = Date.now(), runnerLive = true): number | null {
  if (!isSettledStatus(t.status)) {
    const start = t.started_at ?? t.attempts?.at(-1)?.started_at;
    if (start === undefined || (t.status === "QUEUED" && Object.keys(t.phase_timings).length === 0)) return null;
    const until = runnerLive ? nowMs : Date.parse(t.updated_at);
    return Math.max(0, until - Date.parse(start)) / 1000;
  }
  const times = Object.values(t.phase_timings);
  if (times.length === 0) return null;
  let start = Infinity;
  let end = -Infinity;
  for (const p of times) {
    start = Math.min(start, Date.parse(p.started_at));
    end = Math.max(end, Date.parse(p.finished_at ?? p.started_at));
  }
  return (end - start) / 1000;
}

/** A trial's task as every table names it: its name (else the digest's start), and its folder when two tasks share the name. */
export function taskLabel(t: { task_name?: string; task_path?: string; task_digest: string }): string {
  const name = t.task_name ?? t.task_digest.slice(0, 19);
  return t.task_path !== undefined ? `${name} (${t.task_path})` : name;
}
