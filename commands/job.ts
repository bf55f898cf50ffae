/**
 * `evolve job list|show|resume|cancel` and `evolve trial show`: reading jobs and trials back from the store.
 */
import { EvolveError } from "../engine/errors.ts";
import { cancelJob, effectiveStatus, jobConfig } from "../engine/job/job.ts";
import { primaryReward, summarizeJob, type JobSummary } from "../engine/job/summary.ts";
import { trialDir, type TrialRecord } from "../engine/store/index.ts";
import { withStore } from "./store.ts";
import { out, outJson, outTable, style, when } from "./output.ts";

const fmt = (x: number | null | undefined) => (x === null || x === undefined ? "-" : Number.isInteger(x) ? String(x) : x.toFixed(3));
const taskName = (t: TrialRecord) => t.task_name ?? t.task_digest.slice(0, 19);

function duration(t: TrialRecord): string {
  const times = Object.values(t.phase_timings);
  if (times.length === 0) return "-";
  const start = Math.min(...times.map((p) => Date.parse(p.started_at)));
  const end = Math.max(...times.map((p) => Date.parse(p.finished_at ?? p.started_at)));
  return `${((end - start) / 1000).toFixed(1)}s`;
}

/** Prints a job summary and its trials, as `job show` and the end of `run` show them. */
export function printJobSummary(s: JobSummary, trials: readonly TrialRecord[]): void {
  out(`${style.bold(`job ${s.id}`)}  ${s.status}  ${s.agent}${s.model ? ` (${s.model})` : ""}  on ${s.source}  ${style.dim(when(s.created_at))}`);
  out(`trials ${s.n_trials}: ${Object.entries(s.counts).map(([k, v]) => `${k} ${v}`).join(", ") || "none"}`);
  out(`mean reward ${fmt(s.mean_reward)}${s.counts.SCORED ? style.dim(` over ${s.counts.SCORED} scored`) : ""}`);
  const keys = Object.entries(s.metrics);
  if (keys.length > 1 || (keys.length === 1 && keys[0][0] !== "reward")) {
    out(`metrics: ${keys.map(([k, m]) => `${k} ${fmt(m.mean)} (n=${m.n})`).join(", ")}`);
  }
  if (s.pass_at_k) out(`pass@k: ${Object.entries(s.pass_at_k).map(([k, v]) => `@${k} ${fmt(v)}`).join("  ")}`);
  if (Object.keys(s.exceptions).length) out(`exceptions: ${Object.entries(s.exceptions).map(([k, v]) => `${k} ${v}`).join(", ")}`);
  if (trials.length === 0) return;
  out("");
  outTable(
    ["TRIAL", "TASK", "STATUS", "REWARD", "TIME", "EXCEPTION"],
    trials.map((t) => [t.id, taskName(t), t.status, fmt(primaryReward(t.rewards)), duration(t), t.exception?.type]),
  );
}

/** `evolve job list` */
export async function jobListCommand(opts: { json?: boolean; scope?: string }): Promise<number> {
  if (opts.scope !== undefined && opts.scope !== "my" && opts.scope !== "org") {
    throw new EvolveError("usage", `--scope must be my or org, got ${opts.scope}`, "a local store holds only your jobs: --scope my");
  }
  return withStore((store) => {
    const rows = store.listJobs().map((j) => {
      const trials = store.listTrials(j.id);
      const s = summarizeJob(j, trials);
      return { id: j.id, status: effectiveStatus(j), agent: s.agent, source: s.source, n_trials: s.n_trials, counts: s.counts, mean_reward: s.mean_reward, created_at: j.created_at };
    });
    if (opts.json) return outJson(rows), 0;
    if (rows.length === 0) return out("no jobs yet: start one with `evolve run -p <task dir> -a oracle`"), 0;
    outTable(
      ["JOB", "STATUS", "AGENT", "SOURCE", "TRIALS", "SCORED", "MEAN", "CREATED"],
      rows.map((r) => [r.id, r.status, r.agent, r.source, r.n_trials, r.counts.SCORED ?? 0, fmt(r.mean_reward), when(r.created_at)]),
    );
    return 0;
  });
}

/** `evolve job show <id>` */
export async function jobShowCommand(id: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const job = store.getJob(id);
    if (!job) throw new EvolveError("job_not_found", `no job ${id}`, "see `evolve job list`");
    const trials = store.listTrials(id);
    const summary = summarizeJob(job, trials);
    if (opts.json) return outJson({ ...summary, config: jobConfig(job), trials }), 0;
    printJobSummary(summary, trials);
    return 0;
  });
}

/** `evolve job cancel <id>` */
export async function jobCancelCommand(id: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const r = cancelJob(store, id);
    if (opts.json) return outJson({ id, ...r }), 0;
    out(`cancelled job ${id}: ${r.cancelled} trial${r.cancelled === 1 ? "" : "s"} settled CANCELLED`);
    if (r.runnerPid !== null) out(style.dim(`process ${r.runnerPid} is stopping its running trials`));
    return 0;
  });
}

/** How spend prints (platform-trials.md): settled amount, `at least $X` while a lower bound, `-` unmeasured. */
export function formatSpend(spend: TrialRecord["spend"]): string {
  if (!spend) return "-";
  if (spend.final_usd !== null) return `$${spend.final_usd.toFixed(4)}`;
  return `at least $${spend.live_usd.toFixed(4)}`;
}

/** `evolve trial show <id>` */
export async function trialShowCommand(id: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store, home) => {
    const t = store.getTrial(id);
    if (!t) throw new EvolveError("trial_not_found", `no trial ${id}`, "see `evolve job show <job-id>`");
    if (opts.json) return outJson({ ...t, dir: trialDir(home, id) }), 0;
    const rows: [string, string][] = [
      ["job", t.job_id],
      ["task", `${taskName(t)} ${style.dim(t.task_digest)}`],
      ["agent", t.agent],
      ["model", t.model ?? "-"],
      ["status", t.status + (t.attempt_phase ? style.dim(` (phase ${t.attempt_phase})`) : "")],
      ["reward", fmt(primaryReward(t.rewards)) + (t.rewards && Object.keys(t.rewards).length > 1 ? style.dim(` ${JSON.stringify(t.rewards)}`) : "")],
      ["tokens", t.tokens ? Object.entries(t.tokens).map(([k, v]) => `${k} ${v}`).join(", ") : "-"],
      ["spend", formatSpend(t.spend)],
      ["time", duration(t)],
      ["dir", trialDir(home, id)],
    ];
    if (t.exception) rows.push(["exception", `${t.exception.type}: ${t.exception.message.split("\n").slice(0, 3).join(" ⏎ ").slice(0, 400)}`]);
    out(style.bold(`trial ${t.id}`));
    for (const [k, v] of rows) out(`  ${k.padEnd(10)}${v}`);
    return 0;
  });
}
