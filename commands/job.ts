/**
 * `evolve job list|show|resume|cancel` and `evolve trial show`: reading jobs and trials back from the store.
 */
import { inScope, localUser, parseJobScope, viewerOf } from "../engine/org/mod.ts";
import {
  choices,
  jobShowDocument,
  PORTED_PROVIDER,
  trialShowDocument,
  attemptSeconds,
  cancelJob,
  effectiveStatus,
  findJobRef,
  JOB_KINDS,
  JOB_STATUSES,
  type JobFilter,
  jobSpend,
  type JobSpend,
  type JobSummary,
  listJobRows,
  measuredLane,
  parseSince,
  PASS_AT_K_LEFT_OUT_TEXT,
  type PassAtKLeftOut,
  primaryReward,
  taskLabel,
  trialAttempts,
} from "../engine/job/mod.ts";
import { type AttemptEntry, isLiveStatus, isSettledStatus, tokenCounts, TRIAL_STATUSES } from "../engine/trial/mod.ts";
import { resolveTrial, trialDir, type JobRecord, type Store, type TrialRecord } from "../engine/store/mod.ts";
import { COUNT, parseNumberFlag } from "./flags.ts";
import { withStore } from "./store.ts";
import { exceptionLine, formatDuration, formatReward, out, outJson, outTable, statusWord, style, when } from "./output.ts";

const fmt = formatReward;
const taskName = taskLabel;

/**
 * The latest attempt's time; a running trial's elapsed time `so far` (its build included), or, when its job's runner
 * is gone, the time it ran until it was interrupted.
 */
function duration(t: TrialRecord, runnerLive: boolean): string {
  const sec = attemptSeconds(t, Date.now(), runnerLive);
  if (sec === null) return "-";
  return `${formatDuration(sec * 1000)}${isSettledStatus(t.status) ? "" : runnerLive ? " so far" : " (interrupted)"}`;
}

/** One earlier attempt, as `trial show` and `job show` list them: `#1 12.3s INFRASTRUCTURE_ERROR: EngineError: …`. */
function attemptLine(a: AttemptEntry): string {
  const took = a.ended_at ? formatDuration(Date.parse(a.ended_at) - Date.parse(a.started_at)) : "-";
  return `#${a.n} ${when(a.started_at)} ${took} ${a.status ?? "?"}${a.ended_because && a.ended_because !== "scored" ? `: ${a.ended_because}` : ""}`;
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

/** The line `job show` and `run` print for a job whose every trial settled INFRASTRUCTURE_ERROR. */
const ALL_INFRA_NOTE = (n: number, id: string) =>
  `all ${n} trial${n === 1 ? "" : "s"} failed for infrastructure (INFRASTRUCTURE_ERROR): nothing was measured about the agent; fix the cause (see exceptions), then \`evolve job retry ${id}\``;

/** Prints a job summary and its trials, as `job show` and the end of `run` show them. */
export function printJobSummary(s: JobSummary, trials: readonly TrialRecord[], spend: JobSpend = jobSpend(trials), folder?: string): void {
  out(`${style.bold(`job ${s.id}`)}${s.name !== null ? ` ${s.name}` : ""}  ${s.kind}  ${statusWord(s.status)}  ${s.agent}${s.model ? ` (${s.model})` : ""}  on ${s.source}  ${style.dim(when(s.created_at))}`);
  if (s.retry_of) out(`retries job ${s.retry_of}`);
  // COMPLETED says every trial settled, not that anything was measured: a job of infrastructure failures says so first
  if (s.all_infrastructure_error) out(style.red(ALL_INFRA_NOTE(s.n_trials, s.id)));
  out(`trials ${s.n_trials}: ${Object.entries(s.counts).map(([k, v]) => `${k} ${v}`).join(", ") || "none"}`);
  out(`mean reward ${fmt(s.mean_reward)}${s.counts.SCORED ? style.dim(` over ${s.counts.SCORED} scored`) : ""}`);
  const keys = Object.entries(s.metrics);
  if (keys.length > 1 || (keys.length === 1 && keys[0][0] !== "reward")) {
    out(`metrics: ${keys.map(([k, m]) => `${k} ${fmt(m.mean)} (n=${m.n})`).join(", ")}`);
  }
  const left = s.pass_at_k_left_out;
  if (s.pass_at_k || left.tasks > 0) {
    const ks = s.pass_at_k ? Object.entries(s.pass_at_k).map(([k, v]) => `@${k} ${fmt(v)}`).join("  ") : "-";
    const why = Object.entries(left.reasons).map(([r, n]) => `${n} with ${PASS_AT_K_LEFT_OUT_TEXT[r as PassAtKLeftOut]}`).join(", ");
    const over = left.tasks > 0 ? style.dim(`  over ${s.pass_at_k_tasks} of ${s.pass_at_k_tasks + left.tasks} tasks; left out ${left.tasks}: ${why}`) : "";
    out(`pass@k: ${ks}${over}`);
  }
  if (Object.keys(s.exceptions).length) out(`exceptions: ${Object.entries(s.exceptions).map(([k, v]) => `${k} ${v}`).join(", ")}`);
  const mu = s.model_unavailable;
  if (mu.trials > 0) {
    out(style.red(`model unavailable: ${mu.trials} trial${mu.trials === 1 ? "" : "s"} never met the model (not scored, not in the mean)`));
    for (const why of mu.why) out(`  ${why}`);
  }
  out(`spend  ${formatJobSpend(spend)}`);
  // where `harbor view` and scripts find the job (engine/results): the one line that says so once the job ends
  if (folder !== undefined) out(`job folder  ${folder}/`);
  if (trials.length === 0) return;
  out("");
  outTable(
    ["TRIAL", "TASK", "STATUS", "REWARD", "TIME", "ATTEMPTS", "EXCEPTION"],
    trials.map((t) => [t.id, taskName(t), statusWord(t.status), fmt(primaryReward(t.rewards)), duration(t, s.status === "RUNNING"), trialAttempts(t).count, exceptionLine(t.exception)]),
  );
  // why each retried trial's earlier attempts ended: the table shows only the latest
  const retried = trials.filter((t) => trialAttempts(t).history.length > 1);
  if (retried.length === 0) return;
  out("");
  out("earlier attempts:");
  for (const t of retried) for (const a of trialAttempts(t).history.slice(0, -1)) out(`  ${t.id} ${attemptLine(a)}`);
}

/**
 * The job a job argument names, for every command that takes one: its id, a unique start of it, or its
 * `--job-name` (the newest job with it). When several jobs carry that name, a note on stderr says which one was
 * taken and the others' ids (stderr, so that `--json` output stays one document).
 */
export function jobFromArg(store: Store, ref: string): JobRecord {
  const { job, sameName } = findJobRef(store, ref);
  if (sameName.length > 0) {
    const shown = sameName.slice(0, 5).join(", ") + (sameName.length > 5 ? ", …" : "");
    process.stderr.write(`${style.dim(`job name ${ref} names ${sameName.length + 1} jobs: took the newest, ${job.id} (older: ${shown}); give an id to pick another`)}\n`);
  }
  return job;
}

/** The flags of `evolve job list`, as commander hands them over. */
export interface JobListOptions {
  json?: boolean;
  scope?: string;
  status?: string[];
  kind?: string[];
  agent?: string;
  dataset?: string;
  name?: string;
  since?: string;
  limit?: string;
}

/** `--limit`: a whole number ≥ 0 (0 shows every job); 20 when not given. Checked by the numeric-flag parser. */
function parseLimit(v: string | undefined): number {
  if (v === undefined) return 20;
  return parseNumberFlag("--limit", v, { ...COUNT, what: "whole number ≥ 0 (0: all)", example: "50" });
}

/**
 * `evolve job list`: newest first, at most `--limit` (20), filtered by status, kind, agent, dataset, name and age.
 * `--json` prints the rows (JobRow); how many the limit hid goes to stderr there, under the table otherwise.
 */
export async function jobListCommand(opts: JobListOptions): Promise<number> {
  const scope = opts.scope !== undefined ? parseJobScope(opts.scope) : undefined;
  const filter: JobFilter = {
    status: choices("--status", opts.status, JOB_STATUSES, true),
    kind: choices("--kind", opts.kind, JOB_KINDS, false),
    agent: opts.agent,
    dataset: opts.dataset,
    name: opts.name,
    since: opts.since !== undefined ? parseSince(opts.since) : undefined,
    limit: parseLimit(opts.limit),
  };
  const filtered = [filter.status, filter.kind, filter.agent, filter.dataset, filter.name, filter.since].some((x) => x !== undefined);
  return withStore((store) => {
    if (scope !== undefined) {
      const user = localUser();
      const viewer = viewerOf(store, user, user);
      filter.keep = (j) => inScope(viewer, j, scope);
    }
    const { jobs, matched, hidden } = listJobRows(store, filter);
    const note = hidden > 0 ? `${jobs.length} of ${matched} jobs shown, newest first; ${hidden} older hidden (--limit 0 shows all)` : null;
    if (opts.json) {
      outJson(jobs);
      if (note) process.stderr.write(`${note}\n`);
      return 0;
    }
    if (jobs.length === 0) {
      out(filtered ? "no job matches these filters" : "no jobs yet: start one with `evolve run -p <task dir> -a oracle`");
      return 0;
    }
    outTable(
      ["JOB", "KIND", "NAME", "STATUS", "AGENT", "MODEL", "SOURCE", "TRIALS", "SCORED", "MEAN", "CREATED"],
      jobs.map((r) => [r.id, r.kind, r.name, statusWord(r.status) + (r.all_infrastructure_error ? style.red(" (all infra errors)") : ""), r.agent, r.model, r.source, r.n_trials, r.counts.SCORED ?? 0, fmt(r.mean_reward), when(r.created_at)]),
    );
    if (note) out(style.dim(note));
    return 0;
  });
}

/**
 * `evolve job show <id>`. `--json` prints the summary plus `spend` (JobSpend: `agent_usd`, `judge_usd`, each null
 * when unmeasured, and `*_lower_bound`), the job's `config` and its `trials` records.
 */
export async function jobShowCommand(ref: string, opts: { json?: boolean; status?: string[] }): Promise<number> {
  const only = choices("--status", opts.status, TRIAL_STATUSES, true);
  return withStore((store) => {
    const job = jobFromArg(store, ref);
    // the summary stays the whole job's; --status narrows the trials listed
    const { summary, trials, shown, spend, document } = jobShowDocument(store, job, only);
    if (opts.json) return outJson(document), 0;
    printJobSummary(summary, shown, spend, job.folder);
    if (job.upload) out(`provider ${PORTED_PROVIDER}: uploaded ${when(job.upload.uploaded_at)} from job ${job.upload.original_job_id ?? "?"}${typeof job.upload.original_job_name === "string" ? ` (${job.upload.original_job_name})` : ""}, import ${job.upload.import_id}`);
    if (only && shown.length === 0) out(style.dim(`\nno trial is ${only.join(" or ")}`));
    else if (only) out(style.dim(`\n${shown.length} of ${trials.length} trials shown (${only.join(", ")})`));
    return 0;
  });
}

/** How long `job cancel` waits for a live runner to settle the running trials it stops, before it reports. */
const CANCEL_WAIT_MS = 20_000;

/**
 * `evolve job cancel <id>`: queued trials settle CANCELLED here; the running ones the live runner stops are waited
 * for (at most CANCEL_WAIT_MS), so the count said is every trial the cancel ended, not only the queued ones.
 */
export async function jobCancelCommand(arg: string, opts: { json?: boolean }): Promise<number> {
  return withStore(async (store) => {
    const id = jobFromArg(store, arg).id;
    const r = cancelJob(store, id);
    let open = r.stopping;
    const deadline = Date.now() + CANCEL_WAIT_MS;
    while (open.length > 0 && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 200));
      open = open.filter((t) => !isSettledStatus(store.getTrial(t)?.status ?? "CANCELLED"));
    }
    const stopped = r.stopping.filter((t) => store.getTrial(t)?.status === "CANCELLED").length;
    const cancelled = r.cancelled + stopped;
    if (opts.json) return outJson({ id, cancelled, runnerPid: r.runnerPid, stopping: open.length, ...(r.already ? { already: r.already } : {}) }), 0;
    if (r.already) return out(`job ${id} was already cancelled: nothing changed`), 0;
    const total = store.listTrials(id).length;
    const how = r.stopping.length > 0 ? style.dim(` (${r.cancelled} queued, ${stopped} running stopped by process ${r.runnerPid})`) : "";
    out(`cancelled job ${id}: ${cancelled} of ${total} trial${total === 1 ? "" : "s"} settled CANCELLED${how}`);
    if (open.length > 0) out(style.dim(`process ${r.runnerPid} is still stopping ${open.length} running trial${open.length === 1 ? "" : "s"}; see \`evolve job show ${id}\``));
    return 0;
  });
}

/** One spend lane as the record keeps it: the agent's (`spend`) or the judge's (`spend.judge`). */
type SpendLane = { live_usd: number; final_usd: number | null; calls?: number; unpriced_calls?: number };

/** How spend prints (README, Budgets): settled amount, `at least $X` while a lower bound, `-` unmeasured (measuredLane). */
export function formatSpend(lane: SpendLane | undefined): string {
  const spend = measuredLane(lane);
  return spend ? formatUsd(spend) : "-";
}

/** A measured lane's figure: `$X` once settled, `at least $X` while a lower bound. */
function formatUsd(spend: { live_usd: number; final_usd: number | null }): string {
  if (spend.final_usd !== null) return `$${spend.final_usd.toFixed(4)}`;
  return `at least $${spend.live_usd.toFixed(4)}`;
}

/** The call counts behind a lane's figure, dimmed; unpriced calls are why a settled figure stays a lower bound. */
function callsNote(l: SpendLane): string {
  if (l.calls === undefined) return "";
  const unpriced = l.unpriced_calls ? `, ${l.unpriced_calls} unpriced` : "";
  return style.dim(`  (${l.calls} call${l.calls === 1 ? "" : "s"}${unpriced})`);
}

/**
 * `prompt N (cached_read C, cache_write W), output O (reasoning R)`: the parts in parentheses are inside the figure
 * before them, prompt counting cached tokens as the ATIF's total_prompt_tokens does (engine/trial/tokens.ts).
 */
function tokenList(t: Record<string, number> | undefined): string {
  const c = tokenCounts(t);
  return c ? `prompt ${c.prompt} (cached_read ${c.cached_read}, cache_write ${c.cache_write}), output ${c.output} (reasoning ${c.reasoning})` : "-";
}

/**
 * One row per step of a multi-step trial, in the order they ran: `step 2  test  0.000 {"reward":0,"lint":1}` and the
 * step's exception when it had one; none for a single-step trial.
 */
function stepRows(t: TrialRecord): [string, string][] {
  const steps = t.step_results ?? [];
  const width = Math.max(0, ...steps.map((s) => s.name.length));
  return steps.map((s, i) => {
    const rewards = (s.rewards ?? null) as Record<string, number> | null;
    const reward = typeof s.reward === "number" ? s.reward : primaryReward(rewards ?? undefined);
    const more = rewards && Object.keys(rewards).length > 1 ? style.dim(` ${JSON.stringify(rewards)}`) : "";
    const exc = s.exception as { type?: string; message?: string } | null | undefined;
    const why = exc?.type ? style.dim(`  ${exc.type}: ${(exc.message ?? "").split("\n")[0]!.slice(0, 200)}`) : "";
    return [`step ${i + 1}`, `${s.name.padEnd(width)}  ${fmt(reward)}${more}${why}`];
  });
}

/** `3` for a trial run three times, `1` otherwise; the earlier attempts follow on lines of their own. */
function attemptsCell(t: TrialRecord): string {
  const { count, history } = trialAttempts(t);
  return count > 1 && history.length < count ? `${count} ${style.dim("(earlier ones from before attempts were recorded)")}` : String(count);
}

/** `spend  $X (agent)  $Y (judge)`, each lane as formatSpend prints it; the judge only when a trial had one. */
function formatJobSpend(s: JobSpend): string {
  if (s.agent_usd === null && s.judge_usd === null) return "-";
  // jobSpend already left out every unmeasured lane (measuredLane): a null sum is "-", any other is a figure
  const lane = (usd: number | null, lower: boolean) => (usd === null ? "-" : formatUsd({ live_usd: usd, final_usd: lower ? null : usd }));
  const judge = s.judge_usd !== null ? `  ${lane(s.judge_usd, s.judge_lower_bound)} (judge)` : "";
  return `${lane(s.agent_usd, s.agent_lower_bound)} (agent)${judge}`;
}

/**
 * `evolve trial show <id>`. `--json` prints the stored TrialRecord (with `spend`: `{live_usd, final_usd|null, source,
 * calls, unpriced_calls, judge?: {live_usd, final_usd|null, calls, unpriced_calls, tokens}}` and the agent's `tokens`),
 * its folder as `dir`, and the API names: `live_spent_usd` (number|null), `spend_source` ("measured" | "lower_bound"
 * | "live" | null), `agent_result: {cost_usd: number|null}`, `usage` ({prompt, cached_read, cache_write, output,
 * reasoning, cost_usd} | null) and `judge_spent_usd` (number|null).
 */
export async function trialShowCommand(arg: string, opts: { json?: boolean }): Promise<number> {
  return withStore((store, home) => {
    const t = resolveTrial(store, arg);
    const id = t.id;
    const job = store.getJob(t.job_id);
    // tokens as every reader counts them (a record from before `prompt` was kept is read in those terms)
    if (opts.json) return outJson(trialShowDocument(home, t)), 0;
    const rows: [string, string][] = [
      ["job", t.job_id],
      ["task", `${taskName(t)} ${style.dim(t.task_digest)}`],
      ["agent", t.agent],
      ["model", t.model ?? "-"],
      ["status", statusWord(t.status) + statusNote(t)],
      ["reward", fmt(primaryReward(t.rewards)) + (t.rewards && Object.keys(t.rewards).length > 1 ? style.dim(` ${JSON.stringify(t.rewards)}`) : "")],
      ["tokens", tokenList(t.tokens)],
      // `-  (0 calls)`: the gateway metered this trial and no call went through, which is not a spend of $0
      ["spend", formatSpend(t.spend) + (t.spend ? callsNote(t.spend) : "")],
      ["time", duration(t, job !== undefined && effectiveStatus(job) === "RUNNING")],
      ["attempts", attemptsCell(t)],
      ["dir", trialDir(home, id)],
    ];
    // a multi-step task's steps, each with its own reward, under the trial's
    rows.splice(rows.findIndex(([k]) => k === "reward") + 1, 0, ...stepRows(t));
    // the judge is billed apart from the agent (platform-tasks.md, LLM judges), so it gets its own row after spend
    const judge = measuredLane(t.spend?.judge);
    if (judge) rows.splice(rows.findIndex(([k]) => k === "spend") + 1, 0, ["judge spend", formatSpend(judge) + callsNote(judge) + (judge.tokens ? style.dim(`  ${tokenList(judge.tokens)}`) : "")]);
    if (t.exception) rows.push(["exception", `${t.exception.type}: ${t.exception.message.split("\n").slice(0, 3).join(" ⏎ ").slice(0, 400)}`]);
    // lineage: the trial this one runs again, or whose kept files this one re-scored
    if (t.retry_of) rows.splice(2, 0, ["retry of", t.retry_of]);
    if (t.regrade_of) rows.splice(2, 0, ["regrade of", t.regrade_of]);
    out(style.bold(`trial ${t.id}`));
    for (const [k, v] of rows) {
      out(`  ${k.padEnd(12)}${v}`);
      // why each earlier run ended, under the count
      if (k === "attempts") for (const a of trialAttempts(t).history.slice(0, -1)) out(`  ${"".padEnd(12)}${style.dim(attemptLine(a))}`);
    }
    return 0;
  });
}
