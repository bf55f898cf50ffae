/**
 * What a job amounts to: status counts, per-key reward means over the trials that were scored, pass@k with the
 * unbiased estimator, and exception counts. Failures are counted as failures, never folded into the means as
 * zeros: a mean says "of the trials that produced a reward".
 */
import type { JobRecord, TrialRecord } from "../store/index.ts";
import type { TrialStatus } from "../trial/types.ts";
import { effectiveStatus, jobConfig, type JobStatus } from "./job.ts";

/** The stable `--json` shape of `job show`. */
export interface JobSummary {
  id: string;
  status: JobStatus;
  created_at: string;
  finished_at: string | null;
  agent: string;
  model: string | null;
  source: string;
  n_trials: number;
  counts: Partial<Record<TrialStatus, number>>;
  /** Mean of the primary reward over trials that have one; null when none has. */
  mean_reward: number | null;
  /** Per reward key: mean and how many trials carried the key. */
  metrics: Record<string, { mean: number; n: number }>;
  /** pass@k by k, only when every trial was scored with one binary reward; else null. */
  pass_at_k: Record<string, number> | null;
  /** Exception type → number of trials that ended with it. */
  exceptions: Record<string, number>;
}

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

/** Summarizes a job from its record and its trials. */
export function summarizeJob(job: JobRecord, trials: readonly TrialRecord[]): JobSummary {
  const config = jobConfig(job);
  const counts: Partial<Record<TrialStatus, number>> = {};
  const exceptions: Record<string, number> = {};
  const sums: Record<string, { sum: number; n: number }> = {};
  let primarySum = 0;
  let primaryN = 0;
  for (const t of trials) {
    const s = t.status;
    counts[s] = (counts[s] ?? 0) + 1;
    if (t.exception) exceptions[t.exception.type] = (exceptions[t.exception.type] ?? 0) + 1;
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
    status: effectiveStatus(job),
    created_at: job.created_at,
    finished_at: job.finished_at ?? null,
    agent: config.agent.name,
    model: config.agent.model ?? null,
    source: config.source.kind === "dataset" ? config.source.ref : config.source.path,
    n_trials: trials.length,
    counts,
    mean_reward: primaryN > 0 ? primarySum / primaryN : null,
    metrics,
    pass_at_k: passAtKForJob(trials),
    exceptions,
  };
}

function passAtKForJob(trials: readonly TrialRecord[]): Record<string, number> | null {
  if (trials.length === 0) return null;
  const perTask = new Map<string, { n: number; c: number }>();
  for (const t of trials) {
    const keys = t.rewards ? Object.keys(t.rewards) : [];
    if (t.status !== "SCORED" || keys.length !== 1) return null;
    const v = t.rewards![keys[0]];
    if (v !== 0 && v !== 1) return null;
    const acc = perTask.get(t.task_digest) ?? { n: 0, c: 0 };
    acc.n++;
    acc.c += v;
    perTask.set(t.task_digest, acc);
  }
  const minN = Math.min(...[...perTask.values()].map((x) => x.n));
  const out: Record<string, number> = {};
  for (const k of kValues(minN)) {
    let sum = 0;
    for (const { n, c } of perTask.values()) sum += passAtK(n, c, k);
    out[String(k)] = sum / perTask.size;
  }
  return out;
}

/** One lane of a trial's recorded spend. */
type SpendLane = { live_usd: number; final_usd: number | null };

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
    const got = lanes.filter((l): l is SpendLane => l !== undefined);
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
  const s = t.spend;
  return {
    live_spent_usd: s ? s.live_usd : null,
    spend_source: s ? s.source : null,
    agent_result: { cost_usd: s ? s.final_usd : null },
    usage: t.tokens || s ? { ...(t.tokens ?? {}), cost_usd: s ? s.live_usd : null } : null,
    judge_spent_usd: s?.judge ? (s.judge.final_usd ?? s.judge.live_usd) : null,
  };
}
