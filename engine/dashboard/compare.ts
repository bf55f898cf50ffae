/**
 * Two or more jobs side by side per task, with each job's paired difference against the first and its interval from
 * evolve's own statistics (engine/eval/stats.ts): the grid `harbor view` has, plus the numbers that say whether a
 * difference is more than noise. Pure reads of the store; the page only prints what this returns.
 */
import { pairedStats } from "../eval/stats.ts";
import type { PairedStats } from "../eval/types.ts";
import { primaryReward, summarizeJob, taskLabel, type JobSummary } from "../job/summary.ts";
import type { Store, TrialRecord } from "../store/index.ts";

/** One job's result on one task: the mean primary reward of its scored trials, over how many, out of how many trials. */
export interface CompareCell {
  mean: number | null;
  scored: number;
  trials: string[];
}

/** One task of the grid; `cells[i]` is job i's, null when that job did not run the task. */
export interface CompareRow {
  task: string;
  cells: (CompareCell | null)[];
}

/** Job i (i ≥ 1) against job 0, over the tasks both scored: the paired statistics of the per-task means. */
export interface CompareDiff {
  job: string;
  baseline: string;
  stats: PairedStats;
}

/** The whole comparison: the jobs' summaries in the order asked, the grid, and one difference per job after the first. */
export interface Comparison {
  jobs: JobSummary[];
  rows: CompareRow[];
  diffs: CompareDiff[];
}

/** A task is the same task in two jobs when its digest and its folder agree (two tasks of one folder may share a name). */
function taskKey(t: TrialRecord): string {
  return `${t.task_digest}\0${t.task_path ?? ""}`;
}

/** Compares jobs (records already found) task by task. */
export function compareJobs(store: Store, jobIds: readonly string[]): Comparison {
  const jobs: JobSummary[] = [];
  const rows = new Map<string, CompareRow>();
  jobIds.forEach((id, i) => {
    const job = store.getJob(id);
    if (!job) throw new Error(`compareJobs: no job ${id}`);
    const trials = store.listTrials(id);
    jobs.push(summarizeJob(job, trials));
    for (const t of trials) {
      const key = taskKey(t);
      const row = rows.get(key) ?? { task: taskLabel(t), cells: jobIds.map(() => null) };
      rows.set(key, row);
      const cell = (row.cells[i] ??= { mean: null, scored: 0, trials: [] });
      cell.trials.push(t.id);
      const r = t.status === "SCORED" ? primaryReward(t.rewards) : null;
      if (r === null) continue;
      cell.mean = ((cell.mean ?? 0) * cell.scored + r) / (cell.scored + 1);
      cell.scored++;
    }
  });
  const sorted = [...rows.values()].sort((a, b) => a.task.localeCompare(b.task));
  const diffs: CompareDiff[] = [];
  for (let i = 1; i < jobIds.length; i++) {
    const cand: number[] = [];
    const base: number[] = [];
    for (const r of sorted) {
      const c = r.cells[i];
      const b = r.cells[0];
      // a task either job left unscored says nothing about the difference: paired means both measured it
      if (c?.mean == null || b?.mean == null) continue;
      cand.push(c.mean);
      base.push(b.mean);
    }
    diffs.push({ job: jobIds[i]!, baseline: jobIds[0]!, stats: pairedStats(cand, base) });
  }
  return { jobs, rows: sorted, diffs };
}
