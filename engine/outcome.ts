/**
 * How a trial ends: its statuses, and a typed registry of every exception type a trial can carry (Harbor's names,
 * what `exception_info.exception_type` and the retry filters match on), with the status a failure of that type
 * settles and whether a retry could change it. Everything that names an exception type goes through
 * {@link ExceptionType}, so a misspelt type is a compile error rather than a silent miss in a filter.
 *
 * Status policy: anything that stops a trial before the verifier produced a verdict settles
 * INFRASTRUCTURE_ERROR — the engine failing, but also the task's own environment failing (Dockerfile does not
 * build, the entrypoint's service dies, the healthcheck never passes, the agent user is missing, a secret is not
 * attached). platform-trials.md has no status for "the task is broken" and a fabricated score would be worse; the
 * exception type tells the two apart, and the registry's `deterministic` flag marks the ones a retry cannot fix, so
 * the job's automatic INFRASTRUCTURE_ERROR retries skip them. A verifier that ran but gave no valid reward is
 * SCORING_ERROR; a cancel (`job cancel`, `trial stop`) is CANCELLED; a budget above the trial is BUDGET. An
 * interruption of the process running the job (Ctrl-C, SIGTERM, a closed stdout: an abort whose reason is an
 * {@link Interruption}) is INTERRUPTED: not settled, so `job resume` runs the trial again. An agent that failed
 * (timed out, exited non-zero, hit its spend cap) does not end the trial: the verifier still scores it and the
 * exception rides along. Which status a trial moves to, and what each status means, is lifecycle.ts's.
 */
import type { TRIAL_STATUSES } from "./store/records.ts";

/**
 * A trial's status (platform-trials.md "Statuses"); the list is the store's (records.ts), so records check it.
 * INTERRUPTED: stopped because the process running it was interrupted; `job resume` runs it again (neither live
 * nor settled).
 */
export type TrialStatus = (typeof TRIAL_STATUSES)[number];

/** What the registry knows of one exception type. */
export interface ExceptionInfo {
  /** The status a failure of this type settles; "SCORED" for an agent failure the verifier still scores. */
  status: TrialStatus;
  /** A retry gives the same answer (the task or the request is at fault): automatic retries skip it. */
  deterministic: boolean;
  /** One line for people: what happened. */
  summary: string;
}

const infra = (summary: string, deterministic = false): ExceptionInfo => ({ status: "INFRASTRUCTURE_ERROR", deterministic, summary });
const scoring = (summary: string): ExceptionInfo => ({ status: "SCORING_ERROR", deterministic: false, summary });
const agent = (summary: string): ExceptionInfo => ({ status: "SCORED", deterministic: false, summary });

/** Every exception type a trial can carry. */
export const EXCEPTIONS = {
  // the task or the request: a retry cannot help
  TaskInvalidError: infra("the task's files could not be read or are not a valid task", true),
  UnknownAgentError: infra("no agent by that name", true),
  AgentModelUnsupportedError: infra("the agent cannot call a model of that provider (refused before any spend)", true),
  AgentRequestInvalidError: infra("the agent's -m or --ak options are not ones it takes", true),
  TrajectorySeedUnsupportedError: infra("the task seeds a session (trajectory.json), which this agent cannot load", true),
  AgentNotInstalledError: infra("the agent is neither vendored on this machine nor in the task's image", true),
  AgentRootInvalidError: infra("the job's .agent/ (--agent-root) is missing or holds a link, a special or an unreadable file", true),
  AgentTamperedError: infra("a vendored agent's files differ from its manifest (changed after pull or import): it is not mounted", true),
  AgentRuntimeIncompatibleError: infra("the vendored agent cannot run on the image's system (a glibc build in a musl box)", true),
  AgentSetupError: infra("the agent's settings could not be written in its box"),
  SecretNotAttached: infra("the task needs a secret the job did not attach", true),
  NetworkPolicyUnsupportedError: infra("the task's network policy cannot be enforced on this engine", true),
  GpuUnavailableError: infra("the task needs GPUs this host cannot give", true),
  ImageNotFoundError: infra("the task's docker_image is not on this machine", true),
  EnvironmentBuildError: infra("the task's image did not build", true),
  AgentUserNotFoundError: infra("the task's [agent] user does not exist in its image", true),
  ScriptInterpreterNotFoundError: infra("a script of the task needs an interpreter its box does not have (bash, sh or its #! program)", true),
  SolutionNotFoundError: infra("the oracle found no reference solution (solution/solve.sh) to run", true),
  GatewayConfigError: infra("the gateway's upstreams or prices could not be read", true),
  DiskFullError: infra("the disk holding the trial folders is full", true),
  BoxUsernsError: infra("the trial folders, or what the engine made in a box, could not be given to the box's mapped root", true),
  RegradeRefusedError: infra("the trial cannot be regraded", true),
  RegradeRestoreError: infra("the kept files could not be restored for the regrade", true),
  RegradeSourceMissingError: infra("the trial to regrade is gone"),
  // the machine or the engine: a retry may pass
  EnvironmentStartError: infra("the box could not start, or its entrypoint died"),
  EnvironmentError: infra("the container engine failed"),
  NetworkSetupError: infra("the trial's networks could not be set up"),
  HealthcheckError: infra("the task's healthcheck never passed"),
  AgentProcessesSurvivedError: infra("processes the agent started could not all be ended"),
  TrialPersistError: infra("the trial tree could not be written"),
  // the agent never met its model: no upstream, unreachable, auth failure or 5xx on every call. Not a score (the
  // agent did not fail, evolve's setup did), counted apart in summaries, and a retry may pass once the model answers
  ModelUnavailableError: infra("the gateway could not serve the agent's model at all (no upstream, unreachable, auth failure or 5xx on every call)"),
  // the agent: recorded, and the verifier still scores the trial
  AgentTimeoutError: agent("the agent ran past its timeout"),
  NonZeroAgentExitCodeError: agent("the agent exited non-zero"),
  AgentSpendCapError: agent("the agent reached the trial's spend cap"),
  // the verifier gave no valid verdict
  VerifierTimeoutError: scoring("the verifier ran past its timeout"),
  RewardFileNotFoundError: scoring("the verifier wrote no reward file"),
  RewardFileEmptyError: scoring("the verifier's reward file is empty"),
  VerifierOutputParseError: scoring("the verifier's reward file could not be read as a verdict"),
  RewardOutOfRangeError: scoring("a reward is outside [0, 1]"),
  // no verdict can be trusted: the shared verifier would run programs the agent changed (verifier-guard.ts)
  VerifierEnvironmentChangedError: {
    status: "INDETERMINATE",
    deterministic: false,
    summary: "the agent changed what the shared verifier runs (system paths, the loader's preload files) and the task does not declare it",
  },
  // stopped from outside
  ApiUsageLimitError: { status: "BUDGET", deterministic: false, summary: "a budget above the trial refused a model call" },
  CancelledError: { status: "CANCELLED", deterministic: false, summary: "the trial was cancelled" },
  InterruptedError: { status: "INTERRUPTED", deterministic: false, summary: "the process running the trial was interrupted; `job resume` runs it again" },
} as const satisfies Record<string, ExceptionInfo>;

/** An exception type from the registry. */
export type ExceptionType = keyof typeof EXCEPTIONS;

/** Whether `type` is a registered exception type (a stored record may hold anything). */
export function isExceptionType(type: string): type is ExceptionType {
  return Object.hasOwn(EXCEPTIONS, type);
}

/** Whether a failure of `type` would fail the same way again: automatic retries skip it. Unknown types may retry. */
export function isDeterministic(type: string | undefined): boolean {
  return type !== undefined && isExceptionType(type) && EXCEPTIONS[type].deterministic;
}

/**
 * Exception types that come from the task or the request itself: retrying the trial gives the same answer, so
 * automatic INFRASTRUCTURE_ERROR retries should not spend attempts on them.
 */
export const DETERMINISTIC_EXCEPTIONS: ReadonlySet<ExceptionType> = new Set(
  (Object.keys(EXCEPTIONS) as ExceptionType[]).filter((t) => EXCEPTIONS[t].deterministic),
);

/** A failure that ends the trial with exception `type` and, unless given, the registry's status for it. */
export class TrialFailure extends Error {
  readonly status: TrialStatus;
  constructor(
    readonly type: ExceptionType,
    message: string,
    status?: TrialStatus,
    readonly traceback = "",
  ) {
    super(message);
    this.name = type;
    this.status = status ?? EXCEPTIONS[type].status;
  }
}

/** The trial was stopped for good (`job cancel`, `trial stop`). */
export class CancelledFailure extends TrialFailure {
  constructor() {
    super("CancelledError", "the trial was cancelled");
  }
}

/**
 * The abort reason a runner's signal carries when the process running the job is interrupted rather than the job
 * cancelled: the trials it stops settle INTERRUPTED and the job stays resumable. `why` names what happened
 * (`SIGINT`, `SIGTERM`, `closed stdout`…); `exitCode` is the status the interrupted command exits with.
 */
export class Interruption extends Error {
  constructor(
    readonly why: string,
    readonly exitCode: number,
  ) {
    super(`interrupted (${why})`);
    this.name = "Interruption";
  }
}

/** Whether an abort reason is an {@link Interruption} (anything else that aborts a run is a cancel). */
export function isInterruption(reason: unknown): reason is Interruption {
  return reason instanceof Interruption;
}

/** The trial was stopped by an interruption of its runner; `job resume` runs it again. */
export class InterruptedFailure extends TrialFailure {
  constructor(why: string) {
    super("InterruptedError", `the run was interrupted (${why}); \`evolve job resume\` runs this trial again`);
  }
}

/** The failure a trial whose signal fired with `reason` ends in: INTERRUPTED for an interruption, else CANCELLED. */
export function stopFailure(reason: unknown): TrialFailure {
  return isInterruption(reason) ? new InterruptedFailure(reason.why) : new CancelledFailure();
}
