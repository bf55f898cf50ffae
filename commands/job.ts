/**
 * `evolve job list|show|resume|cancel` and `evolve trial show`: reading jobs and trials back from the store.
 */
import { EvolveError } from "../engine/errors.ts";
import { cancelJob, effectiveStatus, jobConfig } from "../engine/job/job.ts";
import { jobSpend, primaryReward, summarizeJob, trialSpendFields, type JobSpend, type JobSummary } from "../engine/job/summary.ts";
import { trialDir, type TrialRecord } from "../engine/store/index.ts";
import { isLiveStatus } from "../engine/trial/outcome.ts";
import { withStore } from "./store.ts";
import { exceptionLine, out, outJson, outTable, style, when } from "./output.ts";

const fmt = (x: number | null | undefined) => (x === null || x === undefined ? "-" : Number.isInteger(x) ? String(x) : x.toFixed(3));
const taskName = (t: TrialRecord) => t.task_name ?? t.task_digest.slice(0, 19);

function duration(t: TrialRecord): string {
  const times = Object.values(t.phase_timings);
  if (times.length === 0) return "-";
  const start = Math.min(...times.map((p) => Date.parse(p.started_at)));
  const end = Math.max(...times.map((p) => Date.parse(p.finished_at ?? p.started_at)));
  return `${((end - start) / 1000).toFixed(1)}s`;
}

/**
 * What follows a trial's status: the phase a trial that did not score failed in (`failed in build`), or the phase a
 * live trial is in; nothing for a scored one (its phase is always the last).
 */
function statusNote(t: TrialRecord): string {
  if (t.failed_phase) return style.dim(` (failed in ${t.failed_phase})`);
  if (isLiveStatus(t.status) && t.attempt_phase) return style.dim(` (phase ${t.attempt_phase})`);
  return "";
}

/** Prints a job summary and its trials, as `job show` and the end of `run` show them. */
export function printJobSummary(s: JobSummary, trials: readonly TrialRecord[], spend: JobSpend = jobSpend(trials)): void {
  out(`${style.bold(`job ${s.id}`)}  ${s.status}  ${s.agent}${s.model ? ` (${s.model})` : ""}  on ${s.source}  ${style.dim(when(s.created_at))}`);
  out(`trials ${s.n_trials}: ${Object.entries(s.counts).map(([k, v]) => `${k} ${v}`).join(", ") || "none"}`);
  out(`mean reward ${fmt(s.mean_reward)}${s.counts.SCORED ? style.dim(` over ${s.counts.SCORED} scored`) : ""}`);
  const keys = Object.entries(s.metrics);
  if (keys.length > 1 || (keys.length === 1 && keys[0][0] !== "reward")) {
    out(`metrics: ${keys.map(([k, m]) => `${k} ${fmt(m.mean)} (n=${m.n})`).join(", ")}`);
  }
  if (s.pass_at_k) out(`pass@k: ${Object.entries(s.pass_at_k).map(([k, v]) => `@${k} ${fmt(v)}`).join("  ")}`);
  if (Object.keys(s.exceptions).length) out(`exceptions: ${Object.entries(s.exceptions).map(([k, v]) => `${k} ${v}`).join(", ")}`);
  out(`spend  ${formatJobSpend(spend)}`);
  if (trials.length === 0) return;
  out("");
  outTable(
    ["TRIAL", "TASK", "STATUS", "REWARD", "TIME", "EXCEPTION"],
    trials.map((t) => [t.id, taskName(t), t.status, fmt(primaryReward(t.rewards)), duration(t), exceptionLine(t.exception)]),
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

/**
 * `evolve job show <id>`. `--json` prints the summary plus `spend` (JobSpend: `agent_usd`, `judge_usd`, each null
 * when unmeasured, and `*_lower_bound`), the job's `config` and its `trials` records.
 */
export async function jobShowCommand(id: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const job = store.getJob(id);
    if (!job) throw new EvolveError("job_not_found", `no job ${id}`, "see `evolve job list`");
    const trials = store.listTrials(id);
    const summary = summarizeJob(job, trials);
    const spend = jobSpend(trials, { agent: store.getSpend("job", id, "agent"), judge: store.getSpend("job", id, "judge") });
    if (opts.json) return outJson({ ...summary, spend, config: jobConfig(job), trials }), 0;
    printJobSummary(summary, trials, spend);
    return 0;
  });
}

/** `evolve job cancel <id>` */
export async function jobCancelCommand(id: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const r = cancelJob(store, id);
    if (opts.json) return outJson({ id, ...r }), 0;
    if (r.already) return out(`job ${id} was already cancelled: nothing changed`), 0;
    out(`cancelled job ${id}: ${r.cancelled} trial${r.cancelled === 1 ? "" : "s"} settled CANCELLED`);
    if (r.runnerPid !== null) out(style.dim(`process ${r.runnerPid} is stopping its running trials`));
    return 0;
  });
}

/** One spend lane as the record keeps it: the agent's (`spend`) or the judge's (`spend.judge`). */
type SpendLane = { live_usd: number; final_usd: number | null; calls?: number; unpriced_calls?: number };

/** How spend prints (platform-trials.md): settled amount, `at least $X` while a lower bound, `-` unmeasured. */
export function formatSpend(spend: SpendLane | undefined): string {
  if (!spend) return "-";
  if (spend.final_usd !== null) return `$${spend.final_usd.toFixed(4)}`;
  return `at least $${spend.live_usd.toFixed(4)}`;
}

/** The call counts behind a lane's figure, dimmed; unpriced calls are why a settled figure stays a lower bound. */
function callsNote(l: SpendLane): string {
  if (l.calls === undefined) return "";
  const unpriced = l.unpriced_calls ? `, ${l.unpriced_calls} unpriced` : "";
  return style.dim(`  (${l.calls} call${l.calls === 1 ? "" : "s"}${unpriced})`);
}

const tokenList = (t: Record<string, number> | undefined) => (t ? Object.entries(t).map(([k, v]) => `${k} ${v}`).join(", ") : "-");

/** `spend  $X (agent)  $Y (judge)`, each lane as formatSpend prints it; the judge only when a trial had one. */
function formatJobSpend(s: JobSpend): string {
  if (s.agent_usd === null && s.judge_usd === null) return "-";
  const lane = (usd: number | null, lower: boolean) => formatSpend(usd === null ? undefined : { live_usd: usd, final_usd: lower ? null : usd });
  const judge = s.judge_usd !== null ? `  ${lane(s.judge_usd, s.judge_lower_bound)} (judge)` : "";
  return `${lane(s.agent_usd, s.agent_lower_bound)} (agent)${judge}`;
}

/**
 * `evolve trial show <id>`. `--json` prints the stored TrialRecord (with `spend`: `{live_usd, final_usd|null, source,
 * calls, unpriced_calls, judge?: {live_usd, final_usd|null, calls, unpriced_calls, tokens}}` and the agent's `tokens`),
 * its folder as `dir`, and the API names: `live_spent_usd` (number|null), `spend_source` ("measured" | "lower_bound"
 * | "live" | null), `agent_result: {cost_usd: number|null}`, `usage` ({input, cached_read, cache_write, output,
 * reasoning, cost_usd} | null) and `judge_spent_usd` (number|null).
 */
export async function trialShowCommand(id: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store, home) => {
    const t = store.getTrial(id);
    if (!t) throw new EvolveError("trial_not_found", `no trial ${id}`, "see `evolve job show <job-id>`");
    if (opts.json) return outJson({ ...t, dir: trialDir(home, id), ...trialSpendFields(t) }), 0;
    const rows: [string, string][] = [
      ["job", t.job_id],
      ["task", `${taskName(t)} ${style.dim(t.task_digest)}`],
      ["agent", t.agent],
      ["model", t.model ?? "-"],
      ["status", t.status + statusNote(t)],
      ["reward", fmt(primaryReward(t.rewards)) + (t.rewards && Object.keys(t.rewards).length > 1 ? style.dim(` ${JSON.stringify(t.rewards)}`) : "")],
      ["tokens", tokenList(t.tokens)],
      ["spend", formatSpend(t.spend) + (t.spend ? callsNote(t.spend) : "")],
      ["time", duration(t)],
      ["dir", trialDir(home, id)],
    ];
    // the judge is billed apart from the agent (platform-tasks.md, LLM judges), so it gets its own row after spend
    const judge = t.spend?.judge;
    if (judge) rows.splice(rows.findIndex(([k]) => k === "spend") + 1, 0, ["judge spend", formatSpend(judge) + callsNote(judge) + (judge.tokens ? style.dim(`  ${tokenList(judge.tokens)}`) : "")]);
    if (t.exception) rows.push(["exception", `${t.exception.type}: ${t.exception.message.split("\n").slice(0, 3).join(" ⏎ ").slice(0, 400)}`]);
    out(style.bold(`trial ${t.id}`));
    for (const [k, v] of rows) out(`  ${k.padEnd(12)}${v}`);
    return 0;
  });
}
