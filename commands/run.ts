/**
 * `evolve run` and `evolve check`: resolve tasks, start a job, show its progress, print its summary.
 */
import { loadConfig } from "../engine/config.ts";
import { DatasetInvalidError, importTasks, resolveDataset, type StoredTask } from "../engine/dataset.ts";
import { openEngine } from "../engine/driver/select.ts";
import type { Engine } from "../engine/driver/types.ts";
import { EvolveError } from "../engine/errors.ts";
import { checkJobSize, createJob, type JobConfig, type JobEvent } from "../engine/job/job.ts";
import { primaryReward, summarizeJob } from "../engine/job/summary.ts";
import { openStore, taskBlobDir, type JobRecord, type Store, type TrialRecord } from "../engine/store/index.ts";
import { driveJob as runRecordedJob } from "../engine/job/drive.ts";
import { runsOnResume } from "../engine/trial/outcome.ts";
import { isTTY } from "../engine/runtime.ts";
import { exceptionLine, out, outJson, outTable, style } from "./output.ts";
import { printJobSummary } from "./job.ts";
import { printReports } from "./task.ts";

/** Options shared by `run` and `check`. */
export interface RunOptions {
  path?: string;
  dataset?: string;
  agent?: string;
  model?: string;
  nTasks?: number;
  nConcurrent?: number;
  nAttempts?: number;
  timeoutMultiplier?: number;
  secret: string[];
  engine?: "podman" | "docker";
  forceBuild?: boolean;
  maxRetries?: number;
  json?: boolean;
  /** `run` only: per-trial agent spend cap, USD, as typed (checked by parseMaxSpend). */
  maxSpendUsd?: string;
  /** `run` only: `KEY=VALUE` verifier overrides. */
  ve?: string[];
}

/** The `--ve` keys a job may set (platform-tasks.md, LLM judges): the judge override only, never a credential. */
export const VE_KEYS: readonly string[] = ["REWARDKIT_JUDGE", "REWARDKIT_MODEL"];

/** Parses `--ve KEY=VALUE` flags into the job's verifier env; throws before anything is recorded. */
export function parseVerifierEnv(flags: readonly string[] | undefined): Record<string, string> | undefined {
  if (!flags || flags.length === 0) return undefined;
  const env: Record<string, string> = {};
  for (const flag of flags) {
    const eq = flag.indexOf("=");
    if (eq <= 0) throw new EvolveError("usage", `--ve ${flag}: expected KEY=VALUE`, "e.g. --ve REWARDKIT_MODEL=anthropic/claude-sonnet-4-6");
    const key = flag.slice(0, eq);
    const value = flag.slice(eq + 1);
    if (!VE_KEYS.includes(key)) {
      throw new EvolveError("ve_key_unsupported", `--ve ${key}: only ${VE_KEYS.join(" and ")} may be set`, "other verifier settings belong in the task's [verifier.env]");
    }
    if (value === "") throw new EvolveError("usage", `--ve ${key}: the value is empty`, `e.g. --ve ${key}=…`);
    env[key] = value;
  }
  return env;
}

/** Checks `--max-spend-usd`: a positive, finite number of dollars. */
export function parseMaxSpend(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const usd = v.trim() === "" ? NaN : Number(v);
  if (!Number.isFinite(usd) || usd <= 0) throw new EvolveError("usage", `--max-spend-usd must be a positive number of dollars, got ${v}`, "e.g. --max-spend-usd 2.50");
  return usd;
}

function positiveInt(v: number | undefined, flag: string, dflt: number): number {
  if (v === undefined) return dflt;
  if (!Number.isInteger(v) || v < 1) throw new EvolveError("usage", `${flag} must be a whole number ≥ 1, got ${v}`, `e.g. ${flag} 4`);
  return v;
}

async function resolveTasks(store: Store, home: string, opts: RunOptions): Promise<{ tasks: StoredTask[]; source: JobConfig["source"]; dataset?: string }> {
  if ((opts.path === undefined) === (opts.dataset === undefined)) {
    throw new EvolveError("usage", "give exactly one of -p <task or dataset dir> and -d <name@version>", "e.g. evolve run -p fixtures/tasks/valid/minimal -a oracle");
  }
  if (opts.path !== undefined) {
    try {
      const tasks = await importTasks(store, home, opts.path, { secrets: new Set(opts.secret) });
      return { tasks, source: { kind: "path", path: opts.path } };
    } catch (e) {
      if (e instanceof DatasetInvalidError) {
        printReports(e.reports, { onlyProblems: true });
        throw new EvolveError("task_invalid", e.message.replace("nothing was published", "nothing was run"), e.hint);
      }
      throw e;
    }
  }
  const d = resolveDataset(store, opts.dataset!)[0];
  const tasks = d.tasks.map((t) => ({ name: t.name, digest: t.digest, dir: taskBlobDir(home, t.digest) }));
  return { tasks, source: { kind: "dataset", ref: `${d.name}@${d.version}` }, dataset: `${d.name}@${d.version}` };
}

/** A one-line live view on a TTY; one line per settled trial otherwise; JSON lines with --json. */
function progress(total: number, json: boolean, streamJson = true) {
  const tty = isTTY(process.stdout) && !json;
  // a trial counts as running from its first phase (build, boot…) until it settles
  const started = new Set<string>();
  let done = 0;
  let errors = 0;
  let rewardSum = 0;
  let rewarded = 0;
  let last = "";
  const render = () => {
    const running = started.size;
    const mean = rewarded > 0 ? (rewardSum / rewarded).toFixed(3) : "-";
    const line = `${done}/${total} done, ${running} running, ${total - done - running} queued, mean reward ${mean}, ${errors} errors`;
    if (line !== last) process.stdout.write(`\r\x1b[K${line}`);
    last = line;
  };
  return {
    onEvent(e: JobEvent) {
      if (json && streamJson) process.stdout.write(JSON.stringify(e) + "\n");
      if (e.kind === "phase") started.add(e.trialId);
      if (e.kind === "cleanup" && !json) process.stderr.write(`removed ${e.containers} box(es) and ${e.networks} network(s) the interrupted run left\n`);
      if (e.kind === "trial_settled") {
        done++;
        started.delete(e.trial.id);
        const r = primaryReward(e.trial.rewards);
        if (e.trial.status === "SCORED" && r !== null) {
          rewardSum += r;
          rewarded++;
        } else if (e.trial.status !== "SCORED") errors++;
        if (!tty && !json) out(trialLine(e.trial));
      }
      if (tty) render();
    },
    end() {
      if (tty) process.stdout.write("\r\x1b[K");
    },
  };
}

function trialLine(t: TrialRecord): string {
  const r = primaryReward(t.rewards);
  const status = t.status === "SCORED" ? style.green(t.status) : style.red(t.status);
  const name = t.task_name ?? t.task_digest.slice(7, 19);
  const why = t.exception ? style.dim(` ${exceptionLine(t.exception)}`) : "";
  return `${status} ${name} ${style.dim(t.id)}${r !== null ? ` reward ${r}` : ""}${why}`;
}

/** Starts a job from the options and runs it to the end; returns the store, job id and trials. */
async function startJob(opts: RunOptions, agentName: string, streamJson = true) {
  // checked before the store is even opened, so a refused flag leaves nothing behind
  const verifierEnv = parseVerifierEnv(opts.ve);
  const maxSpendUsd = parseMaxSpend(opts.maxSpendUsd);
  const config = loadConfig();
  const store = openStore(config.home);
  try {
    // checked here, before a job is recorded, so a missing secret leaves no job behind
    const secrets = secretsFromEnv(opts.secret);
    const missing = opts.secret.find((name) => secrets[name] === undefined);
    if (missing !== undefined) throw new EvolveError("secret_not_attached", `--secret ${missing}: ${missing} is not set in this environment`, `export ${missing}=… first`);
    const { tasks: all, source, dataset } = await resolveTasks(store, config.home, opts);
    const tasks = opts.nTasks !== undefined ? all.slice(0, positiveInt(opts.nTasks, "-l", all.length)) : all;
    const jobConfig: JobConfig = {
      agent: { name: agentName, model: opts.model },
      attempts: positiveInt(opts.nAttempts, "-k", 1),
      concurrency: positiveInt(opts.nConcurrent, "-n", 4),
      timeout_multiplier: opts.timeoutMultiplier ?? 1,
      secret_names: opts.secret,
      force_build: opts.forceBuild ?? false,
      max_retries: opts.maxRetries ?? 2,
      source,
      tasks: tasks.map((t) => ({ name: t.name, digest: t.digest })),
      ...(maxSpendUsd !== undefined ? { max_spend_usd: maxSpendUsd } : {}),
      ...(verifierEnv ? { verifier_env: verifierEnv } : {}),
    };
    if (!(jobConfig.timeout_multiplier > 0)) throw new EvolveError("usage", "--timeout-multiplier must be > 0", "e.g. --timeout-multiplier 2");
    // refused before the engine is even opened: a job too large to record is a usage error, not a slow failure
    checkJobSize(jobConfig.tasks.length, jobConfig.attempts, config.jobs.max_trials);
    const engine = await openEngine({ kind: opts.engine, home: config.home });
    const job = createJob(store, jobConfig, dataset, config.jobs.max_trials);
    const total = tasks.length * jobConfig.attempts;
    if (!opts.json) out(`${style.bold(`job ${job.id}`)}: ${total} trial${total === 1 ? "" : "s"} of ${agentName} on ${source.kind === "dataset" ? source.ref : source.path}`);
    const view = progress(total, opts.json === true, streamJson);
    const trials = await driveJob({ store, engine, home: config.home, jobId: job.id, secrets, onEvent: view.onEvent }).finally(() => view.end());
    return { store, job: store.getJob(job.id)!, trials };
  } catch (e) {
    await store.close();
    throw e;
  }
}

/** `evolve run` */
export async function runCommand(opts: RunOptions): Promise<number> {
  const { store, job, trials } = await startJob(opts, opts.agent ?? "oracle");
  try {
    return report(job, trials, opts.json === true);
  } finally {
    await store.close();
  }
}

/** `evolve check`: the oracle on every task; a task is solvable when its reference solution scores 1. */
export async function checkCommand(opts: RunOptions): Promise<number> {
  // --json here is one document (the per-task table), not a stream of trial events
  const { store, trials } = await startJob({ ...opts, nAttempts: 1 }, "oracle", false);
  try {
    const rows = trials.map((t) => {
      const r = primaryReward(t.rewards);
      return {
        task: t.task_name ?? t.task_digest,
        trial: t.id,
        status: t.status,
        reward: r,
        solvable: t.status === "SCORED" && r === 1,
        exception: t.exception ? `${t.exception.type}: ${t.exception.message.split("\n")[0]}` : null,
      };
    });
    if (opts.json) outJson({ ok: rows.every((r) => r.solvable), tasks: rows });
    else {
      outTable(
        ["TASK", "SOLVABLE", "STATUS", "REWARD", "TRIAL", "WHY"],
        rows.map((r) => [r.task, r.solvable ? style.green("yes") : style.red("no"), r.status, r.reward, r.trial, r.exception]),
      );
      const bad = rows.filter((r) => !r.solvable).length;
      out(`\n${rows.length} task${rows.length === 1 ? "" : "s"}: ${rows.length - bad} solvable, ${bad} not`);
    }
    return rows.every((r) => r.solvable) ? 0 : 1;
  } finally {
    await store.close();
  }
}

/** `evolve job resume <id>`: runs every trial of the job that had not settled, and those a budget stopped; the rest are kept. */
export async function resumeCommand(id: string, opts: { json?: boolean; engine?: "podman" | "docker" }): Promise<number> {
  const config = loadConfig();
  const store = openStore(config.home);
  try {
    const job = store.getJob(id);
    if (!job) throw new EvolveError("job_not_found", `no job ${id}`, "see `evolve job list`");
    const before = store.listTrials(id);
    const pending = before.filter((t) => runsOnResume(t.status)).length;
    const engine = await openEngine({ kind: opts.engine, home: config.home });
    if (!opts.json) out(`${style.bold(`job ${id}`)}: resuming ${pending} of ${before.length} trials`);
    const view = progress(pending, opts.json === true);
    const secrets = secretsFromEnv((job.config as JobConfig).secret_names);
    const trials = await driveJob({ store, engine, home: config.home, jobId: id, secrets, onEvent: view.onEvent }).finally(() => view.end());
    return report(store.getJob(id)!, trials, opts.json === true);
  } finally {
    await store.close();
  }
}

/** The attached secrets among `names`, read from this process's environment (values stay in memory only). */
export function secretsFromEnv(names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) if (process.env[n] !== undefined) out[n] = process.env[n]!;
  return out;
}

/**
 * Runs a recorded job to its end (engine/job/drive.ts). The first Ctrl-C stops gracefully (running trials settle
 * CANCELLED), a second exits at once.
 */
export async function driveJob(o: { store: Store; engine: Engine; home: string; jobId: string; secrets: Record<string, string>; onEvent?: (e: JobEvent) => void }): Promise<TrialRecord[]> {
  const stop = new AbortController();
  const onSigint = () => (stop.signal.aborted ? process.exit(130) : stop.abort());
  process.on("SIGINT", onSigint);
  try {
    return await runRecordedJob({ ...o, signal: stop.signal, warn: (m) => process.stderr.write(`${style.yellow("warning")}: ${m}\n`) });
  } finally {
    process.off("SIGINT", onSigint);
  }
}

/** Prints a finished job's summary (one JSON document with --json); exit 1 unless every trial scored. */
function report(job: JobRecord, trials: TrialRecord[], json: boolean): number {
  const summary = summarizeJob(job, trials);
  if (json) outJson({ kind: "job_summary", summary });
  else printJobSummary(summary, trials);
  return trials.every((t) => t.status === "SCORED") ? 0 : 1;
}
