/**
 * The dataset evaluator: a harness (an overlay `.agent/`) run on a published dataset's tasks as one real job, the
 * same job `evolve run -d name@version --agent-root DIR` records (engine/job createJob + driveJob), each trial read
 * back as an {@link Attempt}. Nothing is scored here: the score is the trial's primary reward, the validity what the
 * trial recorded of its agent's run, the cost the gateway's metering of it.
 */
import { writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { checkAgentRoot } from "../conductor/instructions.ts";
import { resolveDataset } from "../dataset.ts";
import type { Engine } from "../driver/types.ts";
import { EvolveError, firstLine } from "../errors.ts";
import { checkAgentRequest } from "../harness/index.ts";
import { agentSpec } from "../harness/manifest.ts";
import { driveJob } from "../job/drive.ts";
import { createJob, type JobConfig, type JobEvent } from "../job/job.ts";
import { JOB_DEFAULTS } from "../job/job-config.ts";
import { primaryReward } from "../job/summary.ts";
import { trialDir, type Store, type TrialRecord } from "../store/index.ts";
import { readTrace } from "../trace/store.ts";
import { readBoxFile } from "../box/fs.ts";
import { trialPaths } from "../box/layout.ts";
import { taskSetDigest } from "./evals.ts";
import type { Attempt, Evaluator, EvaluatorRun } from "./types.ts";

/** What a dataset evaluator runs with: the job settings every harness of a screen shares. */
export interface DatasetEvaluatorOptions {
  store: Store;
  /** evolve's home (trial folders, vendored agents, gateway.toml). */
  home: string;
  /** Opens a container engine for one job (each job closes its own at the end). */
  engine: () => Promise<Engine>;
  /** The dataset, `name@version` (a bare name: its newest version, resolved once here). */
  ref: string;
  /**
   * A task folder's tasks as `evolve run -p DIR` imports them (engine/dataset importTasks), used instead of `ref`:
   * the jobs record the folder as their source (`source.kind: "path"`), as `evolve run -p` does.
   */
  imported?: { path: string; tasks: readonly { name: string; digest: string }[] };
  /** `-a`: the agent every trial runs. */
  agent: string;
  /** `-m provider/model`, for an agent that calls a model. */
  model?: string;
  /** `--ak` options. */
  kwargs?: Record<string, string>;
  /** Secret values by name (the job records the names only). */
  secrets?: Record<string, string>;
  /** Trials at once (default JOB_DEFAULTS.concurrency, as `evolve run`). */
  concurrency?: number;
  timeoutMultiplier?: number;
  /** Automatic re-runs of a trial lost to an infrastructure error (default JOB_DEFAULTS.max_retries, as `evolve run`). */
  maxRetries?: number;
  /** Per-trial agent spend cap, USD. */
  maxSpendUsd?: number;
  /** Live notifications of the job (progress displays). */
  onEvent?: (e: JobEvent) => void;
  /** Where the gateway's warnings go. */
  warn?: (message: string) => void;
}

/** The most bytes of an agent's stdout searched for a marker. */
const STDOUT_SEARCH_LIMIT = 16 * 1024 * 1024;

/**
 * An {@link Evaluator} over the dataset `o.ref`: `tasks()` is its task names (in the dataset's order); `run()`
 * records one job of the tasks asked for, with the harness's `.agent/` as `agent.root`, runs it to its end and maps
 * each trial to an Attempt in the order asked. Refuses (EvolveError) a dataset that is not stored, an agent request
 * the agent cannot take, and, in `run`, an `.agent/` a trial cannot be given or a task the dataset lacks.
 */
export function datasetEvaluator(o: DatasetEvaluatorOptions): Evaluator {
  const d = o.imported ? { tasks: o.imported.tasks } : resolveDataset(o.store, o.ref)[0];
  const source = o.imported ? o.imported.path : `${(d as { name: string }).name}@${(d as { version: string }).version}`;
  const byName = new Map(d.tasks.map((t) => [t.name, t]));
  checkAgentRequest(o.agent, o.model, o.kwargs ?? {});
  const secrets = o.secrets ?? {};
  return {
    source,
    digest: taskSetDigest(d.tasks),
    tasks: () => d.tasks.map((t) => t.name),
    async run({ harnessId, agentRoot, tasks, marker, outDir, signal }): Promise<EvaluatorRun> {
      const root = checkAgentRoot(agentRoot);
      const picked = tasks.map((name) => {
        const t = byName.get(name);
        if (!t) throw new EvolveError("dataset_task_unknown", `${source} has no task named ${JSON.stringify(name)}`, `its tasks: ${[...byName.keys()].slice(0, 10).join(", ")}${byName.size > 10 ? ", …" : ""}`);
        return { name: t.name, digest: t.digest };
      });
      const config: JobConfig = {
        kind: "run",
        name: `evolve ${harnessId}`.slice(0, 128),
        agent: { name: o.agent, ...(o.model !== undefined ? { model: o.model } : {}), ...(o.kwargs && Object.keys(o.kwargs).length > 0 ? { kwargs: o.kwargs } : {}), root },
        attempts: 1,
        concurrency: o.concurrency ?? JOB_DEFAULTS.concurrency,
        timeout_multiplier: o.timeoutMultiplier ?? JOB_DEFAULTS.timeout_multiplier,
        secret_names: Object.keys(secrets).sort(),
        force_build: false,
        max_retries: o.maxRetries ?? JOB_DEFAULTS.max_retries,
        source: o.imported ? { kind: "path", path: o.imported.path } : { kind: "dataset", ref: source },
        tasks: picked,
        ...(o.maxSpendUsd !== undefined ? { max_spend_usd: o.maxSpendUsd } : {}),
      };
      const job = createJob(o.store, config, o.imported ? undefined : source);
      const engine = await o.engine();
      const trials = await driveJob({ store: o.store, engine, home: o.home, jobId: job.id, secrets, signal, onEvent: o.onEvent, warn: o.warn });
      const stdoutName = agentSpec(o.agent, o.home)?.stdoutName;
      const unused = [...trials];
      const attempts: Attempt[] = [];
      for (const name of tasks) {
        const i = unused.findIndex((t) => t.task_name === name);
        const trial = i >= 0 ? unused.splice(i, 1)[0] : undefined;
        attempts.push(trial ? await attemptOf(o.home, trial, marker, stdoutName) : missingAttempt(name));
      }
      mkdirSync(outDir, { recursive: true });
      writeFileSync(
        join(outDir, "job.json"),
        JSON.stringify({ job_id: job.id, source, harness: harnessId, agent_root: root, trials: attempts.map((a) => ({ task: a.task, trial_id: a.log, trial_dir: a.log ? trialDir(o.home, a.log) : null })) }, null, 2) + "\n",
      );
      return { attempts, jobId: job.id };
    },
  };
}

/** The attempt of a task whose trial the job did not hold (it was stopped before the trial was recorded). */
function missingAttempt(task: string): Attempt {
  return { task, score: null, valid: false, invalid_reason: "the job holds no trial of this task", exit_code: null, timed_out: false, wall_sec: 0, cost_usd: 0, log: "", marker_seen: false };
}

/** Seconds between two ISO times (0 when either is missing). */
function seconds(from?: string, to?: string): number {
  if (!from || !to) return 0;
  const s = (Date.parse(to) - Date.parse(from)) / 1000;
  return Number.isFinite(s) && s > 0 ? Math.round(s * 1000) / 1000 : 0;
}

/**
 * One trial as an Attempt. Valid only when the trial SCORED a primary reward and recorded how its agent ended, not
 * by a timeout or the spend cap: a trial that failed to run (an infrastructure error, a budget, a cancel) or whose
 * agent was cut off has no complete run to compare, and says why. A non-zero exit is a complete run (valid).
 */
export async function attemptOf(home: string, t: TrialRecord, marker: string | null, stdoutName?: string): Promise<Attempt> {
  const exit = t.agent_exit;
  const timedOut = exit?.timed_out ?? t.exception?.type === "AgentTimeoutError";
  const score = t.status === "SCORED" ? primaryReward(t.rewards) : null;
  const why = (e: TrialRecord["exception"]) => (e ? `${e.type}: ${firstLine(e.message)}` : "");
  let invalid: string | undefined;
  if (t.status !== "SCORED") invalid = `the trial ended ${t.status}${t.exception ? ` (${why(t.exception)})` : ""}`;
  else if (timedOut) invalid = t.exception?.type === "AgentTimeoutError" ? why(t.exception) : "AgentTimeoutError: the agent ran past its timeout";
  else if (!exit) invalid = "the trial recorded no exit code of its agent";
  // cut off by the trial's spend cap: the run stopped where the money did, not where the agent did
  else if (t.exception?.type === "AgentSpendCapError") invalid = why(t.exception);
  else if (score === null) invalid = "the trial scored no primary reward (metrics only)";
  const agent = t.phase_timings.agent;
  return {
    task: t.task_name ?? t.task_digest,
    score,
    valid: invalid === undefined,
    ...(invalid !== undefined ? { invalid_reason: invalid } : {}),
    // the trial settled without its agent ever meeting its model (engine/outcome.ts): evolve's setup, not the harness
    ...(t.exception?.type === "ModelUnavailableError" ? { model_unavailable: true } : {}),
    exit_code: exit?.exit_code ?? null,
    timed_out: timedOut,
    wall_sec: agent ? seconds(agent.started_at, agent.finished_at) : seconds(t.started_at, t.finished_at),
    cost_usd: t.spend ? (t.spend.final_usd ?? t.spend.live_usd) : 0,
    log: t.id,
    marker_seen: marker !== null && marker !== "" && (traceHas(home, t.id, marker) || (await stdoutHas(home, t.id, marker, stdoutName))),
  };
}

/** Whether any string inside any stored trace event of the trial (the prompt included) contains `marker`. */
export function traceHas(home: string, trialId: string, marker: string): boolean {
  const has = (v: unknown): boolean => {
    if (typeof v === "string") return v.includes(marker);
    if (Array.isArray(v)) return v.some(has);
    if (v !== null && typeof v === "object") return Object.values(v).some(has);
    return false;
  };
  try {
    for (const e of readTrace(home, trialId)) if (has(e.data)) return true;
  } catch {
    // a trial that stored no trace has nothing to show
  }
  return false;
}

/** Whether the agent's stdout (box-written: read through box/fs.ts, bounded) contains `marker`. */
async function stdoutHas(home: string, trialId: string, marker: string, stdoutName?: string): Promise<boolean> {
  if (!stdoutName) return false;
  const agentDir = trialPaths(trialDir(home, trialId)).agent;
  try {
    const text = await readBoxFile(agentDir, join(agentDir, stdoutName), { limit: STDOUT_SEARCH_LIMIT });
    return text !== undefined && text.includes(marker);
  } catch {
    return false;
  }
}
