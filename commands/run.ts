/**
 * `evolve run` and `evolve check`: resolve tasks, start a job, show its progress, print its summary.
 */
import { join } from "node:path";
import { loadConfig } from "../engine/config.ts";
import { DatasetInvalidError, importTasks, resolveDataset, type StoredTask } from "../engine/dataset.ts";
import { engineFromEnvFlag, openEngine } from "../engine/engine-choice.ts";
import type { Engine } from "../engine/driver/mod.ts";
import { EvolveError } from "../engine/errors.ts";
import { agentSpec, checkAgentRequest, parseAgentOptions, vendorForRun } from "../engine/harness/mod.ts";
import { checkAgentRoot } from "../engine/conductor/mod.ts";
import { preflightCall, preflightModel } from "../engine/model-preflight.ts";
import {
  checkJobSize,
  checkVerifierEnvKey,
  createJob,
  createJobRetry,
  JOB_DEFAULTS,
  jobConfig,
  type JobConfig,
  type JobEvent,
  type JobExecutor,
  type JobKind,
  primaryReward,
  retryPicks,
  runRefusal,
  selectTasks,
  summarizeJob,
  taskLabel,
} from "../engine/job/mod.ts";
import { localUser, resolveOrg } from "../engine/org/mod.ts";
import { openStore, taskBlobDir, trialDir, type JobRecord, type Store, type TrialRecord } from "../engine/store/mod.ts";
import { driveJob as runRecordedJob } from "../engine/job/drive.ts";
import { DEFAULT_JOBS_DIR, openJobFolder } from "../engine/results/mod.ts";
import { Interruption, isInterruption } from "../engine/outcome.ts";
import { runsOnResume, TRIAL_STATUSES, type TrialStatus } from "../engine/trial/mod.ts";
import { deferBrokenPipe, isBrokenPipe, isTTY } from "../engine/runtime.ts";
import { formatReward, out, outJson, outTable, QuietExit, statusWord, style } from "./output.ts";
import { progressView, type ProgressMode } from "./progress.ts";
import { jobFromArg, printJobSummary } from "./job.ts";
import { printReports } from "./task.ts";
import { parseNumberFlag, POSITIVE } from "./flags.ts";
import { executorConfig, jobExecutor, workerLauncher } from "./executor.ts";
import { DEFAULT_LEASE_SECONDS, WORKER_API } from "../engine/executor/mod.ts";

/** Options shared by `run` and `check`. */
export interface RunOptions {
  path?: string;
  dataset?: string;
  agent?: string;
  model?: string;
  /** `run` only: `--ak KEY=VALUE` agent options. */
  ak?: string[];
  /** `run` only: `--agent-root DIR`, the `.agent/` the agent runs with. */
  agentRoot?: string;
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
  /** `run` only: `--job-name`, a label to find the job by. */
  jobName?: string;
  /** Globs: run only tasks whose name matches one (`--task-name`), and none that match `--exclude-task-name`. */
  taskName?: string[];
  excludeTaskName?: string[];
  /** Harbor's `-e/--env`: `docker` or `podman`, an alias of `--engine` (harborFlags). */
  env?: string;
  /** Harbor's `-t/--task`, never taken: refused with the flags that do what it does here (harborFlags). */
  task?: string;
  /** `--preflight-call`: one tiny real call through the gateway before any box starts (costs money; off by default). */
  preflightCall?: boolean;
  /** `run` only: `-o/--jobs-dir`, where the job's Harbor job folder goes (default ./jobs). */
  jobsDir?: string;
  /** `run` only: `--otlp FILE|URL` and its companions: each trial's OpenTelemetry trace, sent as it settles (commands/otel.ts). */
  otlp?: string;
  otlpProtocol?: string;
  otlpHeader?: string[];
  /** `run` only: `--org NAME`, the organization the job lands in (else the default one, else personal). */
  org?: string;
  /** Not a flag: the identity a job started over the API acts as (its token's user); else this process's. */
  asUser?: string;
  /** `run` only: where the trials run (commands/executor.ts): `--executor`, `--partition`, `--slurm-arg`, `--coordinator-host`. */
  executor?: string;
  partition?: string;
  slurmArg?: string[];
  coordinatorHost?: string;
  /** `run` only, `--executor slurm`: `--ship images|none`. */
  ship?: string;
  /** `run` only, `--executor kubernetes`: `--namespace`, `--k8s-image`, `--kubeconfig`. */
  namespace?: string;
  k8sImage?: string;
  kubeconfig?: string;
  /** `run` only: write what the executor would submit, record and run nothing. */
  dryRun?: boolean;
}

/**
 * The flags a Harbor user types out of habit, read as evolve means them before anything else is checked: `-e/--env`
 * is the engine choice (engine/engine-choice.ts engineFromEnvFlag: docker|podman, cloud environments refused) and
 * must agree with `--engine` when both are given; `-t/--task` (Harbor's registry task, org/name[@ref]) is refused
 * with a pointer at `-i/--task-name` and `-p`.
 */
export function harborFlags(opts: RunOptions): RunOptions {
  if (opts.task !== undefined) {
    throw new EvolveError(
      "usage",
      `-t/--task ${opts.task}: evolve has no -t; Harbor's -t names a task of its registry, and evolve runs tasks held here`,
      "pick tasks by name with -i/--task-name GLOB (repeatable; with -p <folder> or -d <dataset>), or give one task's folder with -p <dir>",
    );
  }
  if (opts.env === undefined) return opts;
  const engine = engineFromEnvFlag(opts.env);
  if (opts.engine !== undefined && opts.engine !== engine) {
    throw new EvolveError("usage", `--env ${opts.env} and --engine ${opts.engine} disagree`, "give one of them: --env is Harbor's name for --engine");
  }
  return { ...opts, engine };
}

/**
 * Parses `--ve KEY=VALUE` flags into the job's verifier env; throws before anything is recorded. Which keys a job may
 * set is the engine's rule (engine/job/job-config.ts, enforced again by createJob); asked here per flag, in order.
 */
export function parseVerifierEnv(flags: readonly string[] | undefined): Record<string, string> | undefined {
  if (!flags || flags.length === 0) return undefined;
  const env: Record<string, string> = {};
  for (const flag of flags) {
    const eq = flag.indexOf("=");
    if (eq <= 0) throw new EvolveError("usage", `--ve ${flag}: expected KEY=VALUE`, "e.g. --ve REWARDKIT_MODEL=anthropic/claude-sonnet-4-6");
    const key = flag.slice(0, eq);
    const value = flag.slice(eq + 1);
    checkVerifierEnvKey(key);
    if (value === "") throw new EvolveError("usage", `--ve ${key}: the value is empty`, `e.g. --ve ${key}=…`);
    env[key] = value;
  }
  return env;
}

/** Checks `--max-spend-usd`: a positive, finite number of dollars (the numeric-flag parser, flags.ts). */
export function parseMaxSpend(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  return parseNumberFlag("--max-spend-usd", v, { ...POSITIVE, what: "positive number of dollars", example: "2.50" });
}

async function resolveTasks(store: Store, home: string, opts: RunOptions): Promise<{ tasks: StoredTask[]; source: JobConfig["source"]; dataset?: string }> {
  if ((opts.path === undefined) === (opts.dataset === undefined)) {
    throw new EvolveError("usage", "give exactly one of -p <task or dataset dir> and -d <name@version>", "e.g. evolve run -p fixtures/tasks/valid/minimal -a oracle");
  }
  if (opts.path !== undefined) {
    try {
      const { tasks, duplicates } = await importTasks(store, home, opts.path, { secrets: new Set(opts.secret) });
      for (const d of duplicates) {
        process.stderr.write(`${style.yellow("warning")}: ${d.paths.length} tasks are named ${d.name} (${d.paths.join(", ")}); all run, told apart by path\n`);
      }
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

/** The progress display for a job about to run: a live block on a TTY, event lines otherwise, JSON lines with --json. */
function progress(total: number, tasks: ReadonlyMap<string, string>, json: boolean, streamJson = true) {
  const mode: ProgressMode = json ? (streamJson ? "json" : "silent") : isTTY(process.stdout) ? "tty" : "lines";
  const view = progressView({ total, mode, tasks, write: (s) => process.stdout.write(s), columns: () => process.stdout.columns });
  return {
    onEvent(e: JobEvent) {
      view.onEvent(e);
      if (e.kind === "cleanup" && !json) view.warn(`removed ${e.containers} box(es) and ${e.networks} network(s) the interrupted run left`);
    },
    warn: view.warn,
    end: view.end,
  };
}

/** Checks `--job-name`: a label people type, so printable, one line, not blank. */
export function parseJobName(v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (v.trim() === "" || v.length > 128 || /[\x00-\x1f\x7f]/.test(v)) {
    throw new EvolveError("usage", `--job-name must be 1 to 128 printable characters, got ${JSON.stringify(v)}`, "e.g. --job-name baseline-oracle");
  }
  return v;
}

/** Vendors the agent on the host before the job is recorded (engine/harness/vendor.ts vendorForRun); prints its warning. */
async function vendorFirst(agentName: string): Promise<void> {
  const { warning } = await vendorForRun(agentSpec(agentName));
  if (warning) process.stderr.write(`${style.yellow("warning")}: ${warning}\n`);
}

/** Starts a job from the options and runs it to the end; returns the store, job id and trials. */
async function startJob(given: RunOptions, agentName: string, kind: JobKind, streamJson = true, onCreated?: (jobId: string, store: Store) => void) {
  const opts = harborFlags(given);
  // checked before the store is even opened, so a refused flag leaves nothing behind
  const agentOptions = parseAgentOptions(opts.ak);
  checkAgentRequest(agentName, opts.model, agentOptions);
  const agentRoot = opts.agentRoot !== undefined ? checkAgentRoot(opts.agentRoot) : undefined;
  const config = loadConfig();
  // before anything is vendored or recorded: a model the gateway cannot serve would only fabricate failures
  const target = preflightModel({ home: config.home, agent: agentName, model: opts.model });
  const verifierEnv = parseVerifierEnv(opts.ve);
  const maxSpendUsd = parseMaxSpend(opts.maxSpendUsd);
  const name = parseJobName(opts.jobName);
  const executor = executorConfig(opts);
  const store = openStore(config.home);
  try {
    // the org is checked before anything is vendored or recorded: a refused one leaves nothing behind
    const user = opts.asUser ?? localUser();
    const owner = { created_by: user, org: resolveOrg(store, user, opts.org) };
    // the one real call (asked for: it costs money) before the agent is vendored, a job recorded or a box started
    if (target && opts.preflightCall) await preflightCall(target, { home: config.home, store });
    await vendorFirst(agentName);
    // checked here, before a job is recorded, so a missing secret leaves no job behind
    const secrets = secretsFromEnv(opts.secret);
    const missing = opts.secret.find((name) => secrets[name] === undefined);
    if (missing !== undefined) throw new EvolveError("secret_not_attached", `--secret ${missing}: ${missing} is not set in this environment`, `export ${missing}=… first`);
    const { tasks: all, source, dataset } = await resolveTasks(store, config.home, opts);
    // numeric flags were checked as they were parsed (flags.ts), a run config's values by the same parsers
    const tasks = selectTasks(all, { include: opts.taskName, exclude: opts.excludeTaskName, limit: opts.nTasks });
    const jobConfig: JobConfig = {
      kind,
      ...(name !== undefined ? { name } : {}),
      agent: {
        name: agentName,
        model: opts.model,
        ...(Object.keys(agentOptions).length > 0 ? { kwargs: agentOptions } : {}),
        ...(agentRoot !== undefined ? { root: agentRoot } : {}),
      },
      attempts: opts.nAttempts ?? JOB_DEFAULTS.attempts,
      concurrency: opts.nConcurrent ?? JOB_DEFAULTS.concurrency,
      timeout_multiplier: opts.timeoutMultiplier ?? JOB_DEFAULTS.timeout_multiplier,
      secret_names: opts.secret,
      force_build: opts.forceBuild ?? false,
      max_retries: opts.maxRetries ?? JOB_DEFAULTS.max_retries,
      source,
      tasks: tasks.map((t) => ({ name: t.name, digest: t.digest, ...(t.path !== undefined ? { path: t.path } : {}) })),
      ...(maxSpendUsd !== undefined ? { max_spend_usd: maxSpendUsd } : {}),
      ...(verifierEnv ? { verifier_env: verifierEnv } : {}),
      ...(executor ? { executor } : {}),
    };
    // refused before the engine is even opened: a job too large to record is a usage error, not a slow failure
    checkJobSize(jobConfig.tasks.length, jobConfig.attempts, config.jobs.max_trials);
    if (opts.dryRun) return { store, dryRun: await dryRun(jobConfig, config.home) } as const;
    // a bad --otlp is refused here, before a job is recorded; the warnings go wherever the view puts them
    let warnOtlp = (line: string): void => {
      process.stderr.write(line + "\n");
    };
    const otlp = opts.otlp !== undefined ? (await import("./otel.ts")).liveOtlp(config.home, opts as RunOptions & { otlp: string }, (l) => warnOtlp(l)) : undefined;
    const engine = await openEngine({ kind: opts.engine, home: config.home });
    const job = createJob(store, jobConfig, dataset, config.jobs.max_trials, owner);
    onCreated?.(job.id, store);
    const total = tasks.length * jobConfig.attempts;
    if (!opts.json) {
      const label = name !== undefined ? ` (${name})` : "";
      out(`${style.bold(`job ${job.id}`)}${label}: ${total} trial${total === 1 ? "" : "s"} of ${agentName} on ${source.kind === "dataset" ? source.ref : source.path}`);
      out(style.dim(`trial folders: ${trialDir(config.home, "<trial id>")}/  (evolve trial show <trial id>)`));
    }
    const view = progress(total, taskNames(store.listTrials(job.id)), opts.json === true, streamJson);
    warnOtlp = (line) => view.warn(`${style.yellow("warning")}: ${line}`);
    const onEvent = otlp ? otlp.onEvent(view.onEvent) : view.onEvent;
    // `check` jobs get no folder: openJobFolder makes a new one only for a `run` job given a jobs dir
    const exec = jobExecutor(jobConfig, { store, home: config.home, say: (l) => view.warn(l) });
    const trials = await driveJob({ store, engine, home: config.home, jobId: job.id, secrets, onEvent, warn: view.warn, jobsDir: opts.jobsDir ?? DEFAULT_JOBS_DIR, json: opts.json, executor: exec }).finally(async () => {
      await otlp?.done();
      view.end();
    });
    return { store, job: store.getJob(job.id)!, trials };
  } catch (e) {
    await store.close();
    throw e;
  }
}

/** How long startJobQuietly waits for the job's runner to claim it before answering anyway. */
const RUNNER_CLAIM_WAIT_MS = 10_000;

/**
 * Starts a job as `evolve run` would with `opts`, for `evolve serve`'s POST /jobs: resolves with its id once it is
 * recorded (or rejects with why it was refused), while the job goes on running in this process, quietly; how it ends
 * is in the store. A failure after the job was recorded goes to stderr.
 */
export function startJobQuietly(opts: RunOptions): Promise<{ id: string }> {
  return new Promise((resolve, reject) => {
    let started = false;
    startJob({ ...opts, json: true }, opts.agent ?? "oracle", "run", false, (id, store) => {
      started = true;
      // answered once this process has claimed the job as its runner: before that, a reader sees it INTERRUPTED
      const deadline = Date.now() + RUNNER_CLAIM_WAIT_MS;
      const poll = () => {
        store.refresh();
        if (store.getJob(id)?.runner || Date.now() > deadline) return resolve({ id });
        setTimeout(poll, 25);
      };
      poll();
    })
      .then(({ store }) => store.close())
      .catch((e) => {
        if (!started) return reject(e);
        process.stderr.write(`evolve serve: a job started over the API failed: ${(e as Error)?.message ?? e}\n`);
      });
  });
}

/**
 * `run --dry-run`: writes what the job's executor would submit (for Slurm, the batch script and the sbatch line; for
 * Kubernetes, the Secret and Job manifests) under `<home>/executor/dry-run-<time>/` and returns the files; nothing
 * is recorded, no worker started.
 */
async function dryRun(config: JobConfig, home: string): Promise<string[]> {
  if (!config.executor) throw new EvolveError("executor_invalid", "--dry-run writes what an executor would submit: the local executor submits nothing", "add --executor slurm");
  const dir = join(home, "executor", `dry-run-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  const workers = Math.max(1, Math.min(config.concurrency, config.tasks.length * config.attempts));
  const batch = { jobId: "<job id>", workers, coordinatorUrl: `http://${config.executor.coordinator_host ?? "127.0.0.1"}:<port>${WORKER_API}`, token: "", leaseSeconds: DEFAULT_LEASE_SECONDS, logDir: dir };
  return await workerLauncher(config.executor).dryRun(batch, dir);
}

/** `evolve run` */
export async function runCommand(opts: RunOptions): Promise<number> {
  const started = await startJob(opts, opts.agent ?? "oracle", "run");
  if (started.dryRun) {
    await started.store.close();
    if (opts.json) outJson({ dry_run: true, files: started.dryRun });
    else for (const f of started.dryRun) out(f);
    return 0;
  }
  const { store, job, trials } = started;
  try {
    return report(job, trials, opts.json === true);
  } finally {
    await store.close();
  }
}

/** `evolve check`: the oracle on every task; a task is solvable when its reference solution scores 1. */
export async function checkCommand(opts: RunOptions): Promise<number> {
  // --json here is one document (the per-task table), not a stream of trial events
  const started = await startJob({ ...opts, nAttempts: 1, dryRun: false }, "oracle", "check", false);
  if (started.dryRun) throw new Error("unreachable: check has no --dry-run");
  const { store, trials } = started;
  try {
    const rows = trials.map((t) => {
      const r = primaryReward(t.rewards);
      return {
        task: taskLabel(t),
        trial_id: t.id,
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
        rows.map((r) => [r.task, r.solvable ? style.green("yes") : style.red("no"), statusWord(r.status), formatReward(r.reward), r.trial_id, r.exception]),
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
export async function resumeCommand(arg: string, opts: { json?: boolean; engine?: "podman" | "docker"; preflightCall?: boolean }): Promise<number> {
  const config = loadConfig();
  const store = openStore(config.home);
  try {
    const job = jobFromArg(store, arg);
    const id = job.id;
    // a cancelled or busy job is said first: no engine opened, no "resuming" line
    const refused = runRefusal(job);
    if (refused) throw refused;
    const before = store.listTrials(id);
    const pending = before.filter((t) => runsOnResume(t.status)).length;
    if (pending > 0) await preflightJob(store, config.home, job.config as JobConfig, opts.preflightCall);
    const engine = await openEngine({ kind: opts.engine, home: config.home });
    if (!opts.json) out(`${style.bold(`job ${id}`)}: resuming ${pending} of ${before.length} trials`);
    const view = progress(pending, taskNames(before), opts.json === true);
    const secrets = secretsFromEnv((job.config as JobConfig).secret_names);
    const executor = jobExecutor(job.config as JobConfig, { store, home: config.home, say: (l) => view.warn(l) });
    const trials = await driveJob({ store, engine, home: config.home, jobId: id, secrets, onEvent: view.onEvent, warn: view.warn, json: opts.json, executor }).finally(() => view.end());
    return report(store.getJob(id)!, trials, opts.json === true);
  } finally {
    await store.close();
  }
}

function taskNames(trials: readonly TrialRecord[]): Map<string, string> {
  return new Map(trials.map((t) => [t.id, taskLabel(t)]));
}

/** Reads `--status` values (repeatable, comma-separated, any case) as trial statuses; an unknown one is a usage error. */
export function parseStatuses(flags: readonly string[] | undefined): TrialStatus[] {
  const statuses = (flags ?? []).flatMap((f) => f.split(",")).map((s) => s.trim().toUpperCase()).filter((s) => s !== "");
  for (const s of statuses) {
    if (!(TRIAL_STATUSES as readonly string[]).includes(s)) {
      throw new EvolveError("usage", `--status ${s}: not a trial status`, `one of ${TRIAL_STATUSES.join(", ")}`);
    }
  }
  return statuses as TrialStatus[];
}

/**
 * `evolve job retry <id> [--status S…]`: the job's trials that did not score (or those in the given statuses) run
 * again as a new job of kind `retry`; the old job is left as it is. Nothing to retry is no error: it says so, exit 0.
 */
export async function jobRetryCommand(arg: string, opts: { status?: string[]; json?: boolean; engine?: "podman" | "docker"; preflightCall?: boolean }): Promise<number> {
  const statuses = parseStatuses(opts.status);
  const config = loadConfig();
  const store = openStore(config.home);
  try {
    const id = jobFromArg(store, arg).id;
    // checked before the engine opens (and again as the job is recorded): nothing picked starts nothing
    const { picked } = retryPicks(store, id, statuses);
    if (picked.length === 0) {
      const what = statuses.length > 0 ? `no trial of job ${id} is ${statuses.join(" or ")}` : `every trial of job ${id} scored`;
      if (opts.json) outJson({ retry_of: id, job_id: null, n_trials: 0 });
      else out(`${what}: nothing to retry`);
      return 0;
    }
    await preflightJob(store, config.home, jobConfig(store.getJob(id)!), opts.preflightCall);
    const engine = await openEngine({ kind: opts.engine, home: config.home });
    const made = createJobRetry(store, id, statuses);
    if (!made) {
      await engine.close();
      if (opts.json) outJson({ retry_of: id, job_id: null, n_trials: 0 });
      else out(`nothing to retry in job ${id}`);
      return 0;
    }
    const n = made.trials.length;
    if (!opts.json) out(`${style.bold(`job ${made.job.id}`)}: retrying ${n} trial${n === 1 ? "" : "s"} of job ${id}`);
    const view = progress(n, taskNames(made.trials), opts.json === true);
    const secrets = secretsFromEnv(jobConfig(made.job).secret_names);
    const trials = await driveJob({ store, engine, home: config.home, jobId: made.job.id, secrets, onEvent: view.onEvent, warn: view.warn, json: opts.json }).finally(() => view.end());
    return report(store.getJob(made.job.id)!, trials, opts.json === true);
  } finally {
    await store.close();
  }
}

/**
 * The model preflight (engine/model-preflight.ts) for a recorded job about to run again (`job resume`, `job retry`):
 * the gateway may have lost its upstream or key since the job was made. With `call`, one real call too.
 */
async function preflightJob(store: Store, home: string, config: JobConfig, call: boolean | undefined): Promise<void> {
  const target = preflightModel({ home, agent: config.agent.name, model: config.agent.model });
  if (target && call) await preflightCall(target, { home, store });
}

/** The attached secrets among `names`, read from this process's environment (values stay in memory only). */
export function secretsFromEnv(names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) if (process.env[n] !== undefined) out[n] = process.env[n]!;
  return out;
}

/** The signals that interrupt a job, with the status a process they ended exits with (128 + the signal). */
const INTERRUPT_SIGNALS = [
  ["SIGINT", 130],
  ["SIGTERM", 143],
  ["SIGHUP", 129],
] as const;

/** What a process whose stdout was closed under it exits with (128 + SIGPIPE), as a Unix tool killed by it would. */
const BROKEN_PIPE_EXIT = 141;

/**
 * Runs a recorded job to its end (engine/job/drive.ts) and makes interruptions behave as Unix users expect. The first
 * Ctrl-C, SIGTERM or SIGHUP, or a closed stdout or stderr (`evolve run … | head`), stops the running trials (their
 * boxes removed; they settle INTERRUPTED) and leaves the job resumable; then the exact `evolve job resume <id>` is
 * printed to stderr and the command exits 128 + the signal (141 for a closed pipe, which is otherwise quiet). A second
 * signal quits at once; the next `job resume` removes what the stopped trials left. A job cancelled meanwhile (`job
 * cancel`, the store says CANCELLED) ends as before.
 */
export async function driveJob(o: {
  store: Store;
  engine: Engine;
  home: string;
  jobId: string;
  secrets: Record<string, string>;
  onEvent?: (e: JobEvent) => void;
  /** Where a warning line goes (default stderr); a live display passes its own so it can redraw around it. */
  warn?: (line: string) => void;
  /** `evolve run`'s `-o/--jobs-dir`: where a new job's Harbor job folder goes (engine/results openJobFolder). */
  jobsDir?: string;
  /** --json: the job folder's path is not printed. */
  json?: boolean;
  /** Where the trials run (commands/executor.ts jobExecutor; none: this process). */
  executor?: JobExecutor;
}): Promise<TrialRecord[]> {
  const stop = new AbortController();
  const say = (line: string) => {
    try {
      if (o.warn) o.warn(line);
      else process.stderr.write(line + "\n");
    } catch {
      // stderr is gone too: the job record still says how to go on
    }
  };
  // the Harbor job folder, kept as the trials settle by the engine's runner: the same for every command that runs a
  // job's trials (`[jobs] folder = false` turns it off); a failure to write it is a warning, never the job's
  const folder = await openJobFolder(o.store, o.home, o.jobId, { enabled: loadConfig().jobs.folder, jobsDir: o.jobsDir, warn: (m) => say(`${style.yellow("warning")}: ${m}`) });
  if (folder?.folder !== undefined && !o.json) out(style.dim(`job folder: ${folder.folder}/`));
  let outputGone = false;
  const onSignal = (signal: string, exitCode: number) => () => {
    if (stop.signal.aborted) {
      say(`quitting at once: \`evolve job resume ${o.jobId}\` removes what the stopped trials left and goes on`);
      process.exit(exitCode);
    }
    say(`${isTTY(process.stdout) ? "\n" : ""}${signal}: stopping job ${o.jobId}'s running trials (${signal === "SIGINT" ? "Ctrl-C" : signal} again quits at once)`);
    stop.abort(new Interruption(signal, exitCode));
  };
  const onPipe = () => {
    outputGone = true;
    if (!stop.signal.aborted) stop.abort(new Interruption("closed output", BROKEN_PIPE_EXIT));
  };
  const handlers = INTERRUPT_SIGNALS.map(([signal, code]) => [signal, onSignal(signal, code)] as const);
  for (const [signal, h] of handlers) process.on(signal, h);
  const restorePipe = deferBrokenPipe(onPipe);
  // once the reader is gone nothing more is shown; a write that throws (older Bun) is that same closed pipe
  const onEvent = (e: JobEvent) => {
    if (outputGone) return;
    try {
      o.onEvent?.(e);
    } catch (err) {
      if (!isBrokenPipe(err)) throw err;
      onPipe();
    }
  };
  let trials: TrialRecord[];
  try {
    trials = await runRecordedJob({ ...o, onEvent, signal: stop.signal, warn: (m) => say(`${style.yellow("warning")}: ${m}`), folder });
  } finally {
    for (const [signal, h] of handlers) process.off(signal, h);
    restorePipe();
  }
  const why = stop.signal.reason;
  if (isInterruption(why) && o.store.getJob(o.jobId)?.status === "INTERRUPTED") {
    const left = trials.filter((t) => runsOnResume(t.status)).length;
    say(`interrupted: job ${o.jobId} stopped with ${left} of ${trials.length} trial${trials.length === 1 ? "" : "s"} left to run`);
    say(`continue with: evolve job resume ${o.jobId}`);
    throw new QuietExit(why.exitCode);
  }
  return trials;
}

/** Prints a finished job's summary (one JSON document with --json); exit 1 unless every trial scored. */
function report(job: JobRecord, trials: TrialRecord[], json: boolean): number {
  const summary = summarizeJob(job, trials);
  if (json) outJson({ kind: "job_summary", summary });
  else printJobSummary(summary, trials, undefined, job.folder);
  return trials.every((t) => t.status === "SCORED") ? 0 : 1;
}
