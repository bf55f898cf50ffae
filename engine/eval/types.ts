/**
 * The evaluation layer's contracts: task cards and how one runs, an attempt, and the {@link Evaluator} every search
 * strategy (engine/evolve, engine/metaharness) runs harnesses through, with the paired statistics it is judged by.
 * Cards live in a project's `evolve/evals/*.json` and `evolve/runner.json` (project.ts); the strategies' own records
 * are theirs (engine/evolve/types.ts).
 */
import type { TraceUpdate } from "../trace/events.ts";

/** A card's check of TASK_OUTPUT. */
export type CardCheck =
  | { contains: string }
  | { regex: string; flags?: string }
  /** A shell command run on the host with TASK_OUTPUT (and TASK_ID) in its environment: exit 0 passes. */
  | { command: string; timeout_sec?: number };

/** `evolve/evals/<id>.json`. */
export interface TaskCard {
  id: string;
  domain: string;
  prompt: string;
  check: CardCheck;
}

/**
 * `evolve/runner.json`: how one card runs against an overlay. `agent: "conductor"` (the default) runs the built-in
 * conductor in-process on the host through a local gateway; `command` runs any agent CLI, `{agent_root}` and
 * `{prompt}` replaced (shell-quoted), its stdout being TASK_OUTPUT.
 */
export interface RunnerConfig {
  agent: "conductor" | "command";
  /** `provider/model`, for the conductor. */
  model?: string;
  /** For `agent: "command"`. */
  command?: string;
  /** Seconds one card may run (default 300); a timeout fails the validity gate. */
  timeout_sec?: number;
  /** Cards at once (default 1). */
  concurrency?: number;
}

/** One run of one task under one harness (a card on the host, or a trial of a job). */
export interface Attempt {
  /** Card id or task name. */
  task: string;
  /** 0..1; null when the run produced nothing to score (invalid). */
  score: number | null;
  /** The run has a complete log with an exit code: false for a timeout, a launch failure, an unscored trial. */
  valid: boolean;
  /** Why it is invalid. */
  invalid_reason?: string;
  /**
   * The run never reached its model (no upstream, unreachable, auth failure or 5xx on every call; a trial's
   * ModelUnavailableError): invalid, not the harness's failure, never appended to memory, and the eval, screen or
   * round that ran it stops with `attempts_model_unavailable` instead of scoring anything.
   */
  model_unavailable?: boolean;
  exit_code: number | null;
  timed_out: boolean;
  wall_sec: number;
  /** Gateway spend of this run, USD (0 when unmetered). */
  cost_usd: number;
  /** Where its log/trace is, relative to the screen's folder (cards) or the trial id (jobs). */
  log: string;
  /** The activation marker was seen in this attempt's transcript. */
  marker_seen: boolean;
}

/** The result of one gate. */
export interface GateResult {
  /** `unverified`: the activation gate of a candidate without a marker (passes, reported as such). */
  status: "pass" | "fail" | "unverified" | "skipped";
  detail: string;
}

/** Paired statistics of candidate − parent over the same tasks (stats.ts). */
export interface PairedStats {
  n: number;
  mean_gain: number;
  sd: number;
  /** t = mean/(sd/√n); ±Infinity or 0 at zero variance (by the sign of the mean); null when n < 2. */
  t: number | null;
  /** 95% interval of the mean gain (Student t, n−1 df); null when n < 2. */
  ci95: [number, number] | null;
  /** Exact two-sided sign test over the non-zero gains. */
  sign_test: { wins: number; losses: number; ties: number; p: number };
}

/** The sign test's verdict on a paired sample, recorded beside the t gate it does not change (stats.ts). */
export interface SignTestEvidence {
  /** The level it is read at (0.05). */
  alpha: number;
  /** The fewest pairs that can reach p < alpha at all (6 at 0.05). */
  min_n: number;
  /** n ≥ min_n: the sample could reach significance. */
  reachable: boolean;
  /** p < alpha. */
  significant: boolean;
  /** One line: the p, or why the sample cannot reach significance ("weak evidence"). */
  detail: string;
}

/** Re-exported for modules that carry trace events in records. */
export type { TraceUpdate };

/**
 * Runs one harness (an overlay `.agent/`) on a list of tasks: task cards on the host (evals.ts), or a Harbor dataset as a
 * real job (dataset-eval.ts). A screen runs candidate and parent through the same evaluator on the same sample.
 */
export interface Evaluator {
  /** "cards" or the dataset's `name@version`. */
  readonly source: string;
  /** The content digest of its task set (evals.ts taskSetDigest): which tasks, not only which kind. */
  readonly digest?: string;
  /** Where a cards evaluator runs its cards: "box" (podman trials, the default) or "host" (`--on-host`); unset for a dataset. */
  readonly isolation?: "host" | "box";
  /** Every task id this evaluator can run, in a stable order (the sample is drawn from these). */
  tasks(): string[];
  /**
   * Runs `agentRoot` on `tasks`, one attempt each, in the order given. `outDir` is this harness's folder in the
   * screen (logs go under it); `marker` is looked for in each attempt's transcript.
   */
  run(o: { harnessId: string; agentRoot: string; tasks: readonly string[]; marker: string | null; outDir: string; signal?: AbortSignal }): Promise<EvaluatorRun>;
}

/** What one evaluator run returns. */
export interface EvaluatorRun {
  attempts: Attempt[];
  /** The job that ran them, for dataset evaluators. */
  jobId?: string;
}
