/**
 * A trial's lifecycle, and its job's: the one module that decides which status a trial or a job is in next, and
 * what each status means. Trials go QUEUED → RUNNING → SCORING (→ RUNNING for a task's next step) → settled; a
 * stop from outside, an interruption of the runner, a budget, a model never reached, a tree that could not be
 * written and a runner that could not even record its failure each settle here. There is one runner (run.ts): a
 * full trial and a regrade are two plans it walks (plan.ts), so both settle through the same calls. Which statuses
 * are live, settled, resumable or say something of the harness is {@link STATUS_CLASSES}, typed and checked with
 * `satisfies` as EXCEPTIONS (outcome.ts) is for exception types.
 *
 * Nothing else writes a status: a record change that moves a status is a {@link TrialTransition}, which only this
 * module makes, and engine/trial/lifecycle.test.ts fails on a status written anywhere else.
 */
import type { JobRecord, TrialRecord } from "../store/index.ts";
import { JOB_STATUSES, TRIAL_STATUSES } from "../store/records.ts";
import { firstLine, isDiskFull } from "../errors.ts";
import { EXCEPTIONS, isDeterministic, isExceptionType, isInterruption, stopFailure, TrialFailure, type ExceptionType, type TrialStatus } from "../outcome.ts";
import type { ExceptionRecord } from "./result.ts";
import { primaryReward, type RewardMap } from "./reward.ts";

export { JOB_STATUSES, TRIAL_STATUSES, type TrialStatus };

/**
 * A job's status: RUNNING while a runner works on it, INTERRUPTED when that runner died or was interrupted (Ctrl-C,
 * SIGTERM: `job resume` goes on), then a final state. The list is the store's (records.ts), so records check it.
 */
export type JobStatus = (typeof JOB_STATUSES)[number];

// ---- the classes of statuses ------------------------------------------------------------------------------------

/** How a status counts: still going, scored, failed without a score, or stopped (budget, cancel, interruption). */
export type StatusKind = "live" | "scored" | "failed" | "budget" | "cancelled" | "interrupted";

/** What one trial status means. */
export interface StatusClass {
  /** How progress and summaries count it. `live`: still to run or running, it owns its boxes while its runner lives. */
  kind: StatusKind;
  /** The trial never leaves it (INTERRUPTED is neither live nor settled: `job resume` runs it again). */
  settled: boolean;
  /** `job resume` runs it again: every trial not settled, and BUDGET (resuming is how a user goes on once the budget allows). */
  resumable: boolean;
  /** Its outcome says something of the harness (diagnose.ts blames files only for those): not a box, task or stop failure, not unfinished. */
  judgesHarness: boolean;
}

/** Every trial status and what it means. */
export const STATUS_CLASSES = {
  QUEUED: { kind: "live", settled: false, resumable: true, judgesHarness: false },
  RUNNING: { kind: "live", settled: false, resumable: true, judgesHarness: false },
  SCORING: { kind: "live", settled: false, resumable: true, judgesHarness: false },
  SCORED: { kind: "scored", settled: true, resumable: false, judgesHarness: true },
  SCORING_ERROR: { kind: "failed", settled: true, resumable: false, judgesHarness: true },
  INFRASTRUCTURE_ERROR: { kind: "failed", settled: true, resumable: false, judgesHarness: false },
  BUDGET: { kind: "budget", settled: true, resumable: true, judgesHarness: true },
  INDETERMINATE: { kind: "failed", settled: true, resumable: false, judgesHarness: true },
  CANCELLED: { kind: "cancelled", settled: true, resumable: false, judgesHarness: false },
  INTERRUPTED: { kind: "interrupted", settled: false, resumable: true, judgesHarness: false },
} as const satisfies Record<TrialStatus, StatusClass>;

/** What `status` means; undefined for a word this build does not know (an older store may hold one). */
export function statusClass(status: string): StatusClass | undefined {
  return Object.hasOwn(STATUS_CLASSES, status) ? STATUS_CLASSES[status as TrialStatus] : undefined;
}

const where = (p: (c: StatusClass) => boolean): ReadonlySet<TrialStatus> =>
  new Set((TRIAL_STATUSES as readonly TrialStatus[]).filter((s) => p(STATUS_CLASSES[s])));

/** Statuses a trial never leaves. */
export const SETTLED_STATUSES: ReadonlySet<TrialStatus> = where((c) => c.settled);

/** Statuses of a trial that is still to run or running: it owns its boxes while its job's runner lives. */
export const LIVE_STATUSES: ReadonlySet<TrialStatus> = where((c) => c.kind === "live");

/** Whether a trial in `status` has settled. */
export function isSettledStatus(status: TrialStatus): boolean {
  return SETTLED_STATUSES.has(status);
}

/** Whether a trial in `status` is still to run or running. */
export function isLiveStatus(status: TrialStatus): boolean {
  return LIVE_STATUSES.has(status);
}

/** Whether `job resume` runs a trial in `status` again (see {@link StatusClass.resumable}). */
export function runsOnResume(status: TrialStatus): boolean {
  return STATUS_CLASSES[status].resumable;
}

/** Whether a trial in `status` was stopped from outside (cancelled or interrupted): its box holds no result to keep. */
export function isStopped(status: string): boolean {
  const k = statusClass(status)?.kind;
  return k === "cancelled" || k === "interrupted";
}

/** Whether a trial's outcome in `status` says something of the harness (unknown words say nothing). */
export function judgesHarness(status: string): boolean {
  return statusClass(status)?.judgesHarness ?? false;
}

/** Job statuses that are final: a runner never takes the job again. */
const FINAL_JOB_STATUSES: ReadonlySet<string> = new Set(["COMPLETED", "CANCELLED"] satisfies JobStatus[]);

/**
 * Whether a trial or job status means "still going", as tables colour it: a trial not settled (INTERRUPTED
 * included: `job resume` goes on), a job not final (its RUNNING and INTERRUPTED are the trial's words too).
 */
export function stillGoing(status: string): boolean {
  const c = statusClass(status);
  return c !== undefined && !c.settled;
}

// ---- attempts history -------------------------------------------------------------------------------------------

/** One entry of a trial's attempts history. */
export type AttemptEntry = NonNullable<TrialRecord["attempts"]>[number];

/**
 * Why an attempt that settled `status` with `exception` ended, as its history entry says it: the exception's type
 * and first line (up to 300 characters: a verifier's tail can be one long line), else `scored` or the status.
 */
export function endedBecause(status: string, exception: { type: string; message: string } | null | undefined): string {
  if (exception) {
    const line = exception.message.split("\n")[0];
    return `${exception.type}: ${line.length > 300 ? `${line.slice(0, 299)}…` : line}`;
  }
  return status === "SCORED" ? "scored" : status;
}

/**
 * `t`'s attempts history with its last attempt closed at `at` (settled `status`, for `because`), if it was open; an
 * attempt left open by a runner that died is closed the same way when the next one starts.
 */
export function closeAttempt(t: TrialRecord, at: string, status: string, because: string): AttemptEntry[] | undefined {
  const history = t.attempts;
  if (!history || history.length === 0) return history;
  const last = history[history.length - 1];
  if (last.ended_at !== null) return history;
  return [...history.slice(0, -1), { ...last, ended_at: at, status, ended_because: because }];
}

// ---- trial transitions ------------------------------------------------------------------------------------------

declare const madeHere: unique symbol;

/** A change to a trial's record that moves its status: only this module makes one (the runner writes it as given). */
export type TrialTransition = Partial<TrialRecord> & { status: TrialStatus; readonly [madeHere]: true };

const transition = (fields: Partial<TrialRecord> & { status: TrialStatus }): TrialTransition => fields as TrialTransition;

/** A trial recorded for a job to run: QUEUED, no phase yet. */
export function queuedTrial(fields: Omit<TrialRecord, "status" | "phase_timings">): TrialRecord {
  return { ...fields, status: "QUEUED", phase_timings: {} };
}

/**
 * The status and history a new attempt starts from: the previous record's status (or QUEUED; `afresh`, as a
 * regrade does, always QUEUED) and its history with a still-open attempt closed as cut short, plus a new open one.
 */
export function beginAttempt(existing: TrialRecord | undefined, at: string, afresh = false): { status: TrialStatus; attempts: AttemptEntry[] } {
  // a previous attempt still open was cut short (its runner was killed or its job interrupted): say so
  const history = existing ? (closeAttempt(existing, existing.updated_at, existing.status, `interrupted in phase ${existing.attempt_phase ?? "?"}`) ?? []) : [];
  const status: TrialStatus = afresh ? "QUEUED" : ((existing?.status as TrialStatus | undefined) ?? "QUEUED");
  return { status, attempts: [...history, { n: history.length + 1, started_at: at, ended_at: null, status: null, ended_because: null }] };
}

/** The runner takes the trial (and a multi-step task's next step): RUNNING. */
export function toRunning(): TrialTransition {
  return transition({ status: "RUNNING" });
}

/** The agent's work is done and the verifier scores it: SCORING. */
export function toScoring(): TrialTransition {
  return transition({ status: "SCORING" });
}

/** A trial's verdict before it is written: its status, rewards and exception. */
export interface Verdict {
  status: TrialStatus;
  rewards: RewardMap | null;
  exception: ExceptionRecord | null;
}

/** Makes an exception record (the recorder's redacts secrets). */
export type MakeException = (type: ExceptionType, message: string, traceback?: string) => ExceptionRecord;

/** An exception record with nothing to redact, stamped now. */
export const plainException: MakeException = (type, message, traceback = "") => ({ type, message, traceback, occurred_at: new Date().toISOString() });

/**
 * The exception a thrown error records: a full disk is DiskFullError whichever step ran out of space (it fails the
 * same way on every retry), a TrialFailure its own type, anything else EnvironmentError (the engine failed).
 */
export function exceptionOf(e: unknown, exc: MakeException): ExceptionRecord {
  if (isDiskFull(e)) return exc("DiskFullError", `no space left on the device: ${firstLine(e)}`, String((e as Error)?.stack ?? ""));
  if (e instanceof TrialFailure) return exc(e.type, e.message, e.traceback);
  const err = e as Error;
  return exc("EnvironmentError", String(err?.message ?? e), String(err?.stack ?? ""));
}

/** The verdict of a verifier that ran to the end: SCORED with rewards, SCORING_ERROR without. */
export function verifiedVerdict(rewards: RewardMap | null, exception: ExceptionRecord | null): Verdict {
  return { status: rewards ? "SCORED" : "SCORING_ERROR", rewards, exception };
}

/**
 * The verdict of a verify phase that gave none: `status` when it said one (INDETERMINATE: the agent changed what the
 * shared verifier runs), else SCORING_ERROR; `rewards` are what earlier steps scored.
 */
export function unverifiedVerdict(rewards: RewardMap | null, exception: ExceptionRecord | null, status?: TrialStatus): Verdict {
  return { status: status ?? "SCORING_ERROR", rewards, exception };
}

/**
 * The verdict of a run a phase threw `e` out of: the failure's registered status (an unknown error is the
 * engine's: INFRASTRUCTURE_ERROR); once the run's signal fired, CANCELLED, or INTERRUPTED for an interruption of
 * its runner (`job resume` runs it again).
 */
export function thrownVerdict(e: unknown, exc: MakeException, signal?: AbortSignal): Verdict {
  if (signal?.aborted) {
    const stopped = stopFailure(signal.reason);
    return { status: stopped.status, rewards: null, exception: exceptionOf(stopped, exc) };
  }
  return { status: e instanceof TrialFailure ? e.status : "INFRASTRUCTURE_ERROR", rewards: null, exception: exceptionOf(e, exc) };
}

/**
 * The verdict once what stopped the agent from outside is known: a budget above the trial that refused a call
 * (BUDGET) or a model the gateway could not serve (ModelUnavailableError) replaces whatever the stopped agent or
 * verifier left, which is no verdict; a trial cancelled or interrupted stays so.
 */
export function stoppedByGateway(v: Verdict, o: { refused?: string; unavailable?: string }, exc: MakeException): Verdict {
  if (isStopped(v.status)) return v;
  if (o.refused !== undefined) return { status: "BUDGET", rewards: null, exception: exc("ApiUsageLimitError", o.refused) };
  if (o.unavailable !== undefined) return { status: "INFRASTRUCTURE_ERROR", rewards: null, exception: exc("ModelUnavailableError", o.unavailable) };
  return v;
}

/**
 * The verdict once the trial tree at `path` could not be written (`e`): a full disk is DiskFullError and takes the
 * reward with it (it explains whatever the run saw); any other failure is TrialPersistError unless the run failed
 * already, and a scored trial without its tree is no score (INFRASTRUCTURE_ERROR).
 */
export function persistFailedVerdict(v: Verdict, e: unknown, path: string, exc: MakeException): Verdict {
  if (isDiskFull(e)) return { status: "INFRASTRUCTURE_ERROR", rewards: null, exception: exc("DiskFullError", `no space left on the device holding ${path}: ${firstLine(e)}`) };
  return {
    status: v.status === "SCORED" ? "INFRASTRUCTURE_ERROR" : v.status,
    rewards: v.rewards,
    exception: v.exception ?? exc("TrialPersistError", `could not write the trial tree: ${(e as Error).message}`),
  };
}

/** The record change that settles `rec` with verdict `v` at `finishedAt`: its reward, exception and closed attempt. */
export function settle(rec: TrialRecord, v: Verdict, finishedAt: string, fields: Omit<Partial<TrialRecord>, "status"> = {}): TrialTransition {
  const attempts = closeAttempt(rec, finishedAt, v.status, endedBecause(v.status, v.exception));
  return transition({ ...fields, status: v.status, rewards: v.rewards, reward: primaryReward(v.rewards), exception: v.exception, finished_at: finishedAt, attempts });
}

/**
 * `t` settled CANCELLED at `at` by a stop from outside its runner: the job cancelled before it started
 * (`finished` false: such a record says no finish time), or `trial stop` with no live runner (marked, finished).
 */
export function cancelledTrial(t: TrialRecord, at: string, message: string, o: { stopRequested?: boolean } = {}): TrialRecord {
  const exception = { type: "CancelledError", message, traceback: "", occurred_at: at };
  return {
    ...t,
    status: "CANCELLED",
    ...(o.stopRequested ? { stop_requested_at: at } : {}),
    exception,
    attempts: closeAttempt(t, at, "CANCELLED", endedBecause("CANCELLED", exception)),
    ...(o.stopRequested ? { finished_at: at } : {}),
    updated_at: at,
  };
}

/**
 * `t` settled INFRASTRUCTURE_ERROR at `at` because its runner threw `e` before it could record a failure itself:
 * the exception's type is the registry's (a full disk DiskFullError, a TrialFailure its own, anything else
 * EnvironmentError), never an unregistered error name.
 */
export function runnerFailedTrial(t: TrialRecord, at: string, e: unknown): TrialRecord {
  const exception = { ...exceptionOf(e, plainException), occurred_at: at };
  return {
    ...t,
    status: "INFRASTRUCTURE_ERROR",
    exception,
    attempts: closeAttempt(t, at, "INFRASTRUCTURE_ERROR", endedBecause("INFRASTRUCTURE_ERROR", exception)),
    updated_at: at,
  };
}

/**
 * Whether a trial that settled `rec` on attempt `attempt` of a job allowing `maxRetries` re-runs is run again: an
 * infrastructure error a retry may fix (not a deterministic type), while the job is not stopped.
 */
export function retriesAfter(rec: TrialRecord, attempt: number, maxRetries: number, stopped: boolean): boolean {
  // a broken task (bad Dockerfile, missing user, dead entrypoint…) fails the same way every time: no retry
  return rec.status === "INFRASTRUCTURE_ERROR" && !isDeterministic(rec.exception?.type) && attempt <= maxRetries && !stopped;
}

// ---- a trial run elsewhere (`evolve upload`) --------------------------------------------------------------------

/** Harbor's exception names that settle a status of their own on upload (platform-upload.md); any other stays as written. */
export const PORTED_STATUSES: Readonly<Record<string, TrialStatus>> = {
  ScoringError: "SCORING_ERROR",
  InfrastructureError: "INFRASTRUCTURE_ERROR",
  ApiUsageLimitError: "BUDGET",
  CancelledError: "CANCELLED",
};

/**
 * The status a trial run elsewhere settles with here: the one evolve itself recorded (`stated`, a job evolve wrote
 * and downloaded) when it is a settled status; else rewards → SCORED; Harbor's exception names → PORTED_STATUSES;
 * another name as this registry settles it, an unknown one INFRASTRUCTURE_ERROR (it stopped the trial before a
 * verdict, as Harbor's exceptions without rewards do); no rewards and no exception → SCORED without a score (not an
 * error, platform-upload.md "What lands").
 */
export function portedTrialStatus(rewards: RewardMap | null, exceptionType: string | undefined, stated?: unknown): TrialStatus {
  if (typeof stated === "string" && (TRIAL_STATUSES as readonly string[]).includes(stated) && isSettledStatus(stated as TrialStatus)) return stated as TrialStatus;
  if (rewards || !exceptionType) return "SCORED";
  if (Object.hasOwn(PORTED_STATUSES, exceptionType)) return PORTED_STATUSES[exceptionType];
  if (isExceptionType(exceptionType) && EXCEPTIONS[exceptionType].status !== "SCORED") return EXCEPTIONS[exceptionType].status;
  return "INFRASTRUCTURE_ERROR";
}

/** A job run elsewhere, recorded here finished at `at` (`evolve upload`): COMPLETED, no runner. */
export function portedJob(fields: Omit<JobRecord, "status" | "runner" | "finished_at" | "updated_at">, at: string): JobRecord {
  return releasedJob(newJob({ ...fields, runner: null }), "COMPLETED", at);
}

// ---- job transitions --------------------------------------------------------------------------------------------

/** A job recorded to run: RUNNING until its runner lets go. */
export function newJob(fields: Omit<JobRecord, "status">): JobRecord {
  return { ...fields, status: "RUNNING" };
}

/** `job` claimed by the runner `runner` at `at`: RUNNING. */
export function claimedJob(job: JobRecord, runner: NonNullable<JobRecord["runner"]>, at: string): JobRecord {
  return { ...job, status: "RUNNING", runner, updated_at: at };
}

/** The status a runner ends a job in: COMPLETED when it ran out, INTERRUPTED for an interruption (resumable), else CANCELLED. */
export function endedJobStatus(signal: AbortSignal): JobStatus {
  return !signal.aborted ? "COMPLETED" : isInterruption(signal.reason) ? "INTERRUPTED" : "CANCELLED";
}

/**
 * `job` let go by its runner at `at`, wanting `wanted`: a job that `job cancel` marked CANCELLED while the runner was
 * being interrupted stays CANCELLED; a final status stamps the finish.
 */
export function releasedJob(job: JobRecord, wanted: JobStatus, at: string): JobRecord {
  const status: JobStatus = wanted === "INTERRUPTED" && job.status === "CANCELLED" ? "CANCELLED" : wanted;
  return { ...job, status, runner: null, updated_at: at, finished_at: FINAL_JOB_STATUSES.has(status) ? at : job.finished_at };
}

/** `job` cancelled at `at`; a live runner keeps its mark until it sees the cancel and lets go. */
export function cancelledJob(job: JobRecord, at: string, runnerLive: boolean): JobRecord {
  return { ...job, status: "CANCELLED", updated_at: at, finished_at: at, runner: runnerLive ? job.runner : null };
}

/** The job's status as a user should see it: a RUNNING job whose runner died is INTERRUPTED. */
export function effectiveJobStatus(job: JobRecord, runnerAlive: boolean): JobStatus {
  if (job.status === "RUNNING" && !runnerAlive) return "INTERRUPTED";
  return job.status;
}

// ---- a trial run by a remote worker under a lease (engine/executor) ---------------------------------------------

/**
 * `t` taken by a worker's lease at `at` (`evolve run --executor slurm`): RUNNING with a new open attempt, as the
 * in-process runner starts one. The coordinator writes it; the worker writes nothing to the store.
 */
export function leasedTrial(t: TrialRecord, at: string): TrialRecord {
  const { attempts } = beginAttempt(t, at);
  return { ...t, status: "RUNNING", attempts, started_at: t.started_at ?? at, updated_at: at };
}

/**
 * `t` put back in the queue at `at` because the worker holding it was lost (its lease expired): QUEUED, the attempt
 * closed as lost, so the next worker to claim it starts afresh and the history says why.
 */
export function requeuedTrial(t: TrialRecord, at: string, why: string): TrialRecord {
  return { ...t, status: "QUEUED", attempts: closeAttempt(t, at, "INTERRUPTED", why), updated_at: at };
}

/**
 * The coordinator's record of `current` once the worker holding its lease reported `reported` (the record its own
 * runner settled in a scratch store): the worker's verdict, rewards, phases and last attempt, under the coordinator's
 * identity fields and attempts history. A reported status that is not settled (the worker was stopped half-way)
 * stays INTERRUPTED, which `job resume` runs again.
 */
export function remoteSettledTrial(current: TrialRecord, reported: TrialRecord, at: string): TrialRecord {
  const status: TrialStatus = isSettledStatus(reported.status as TrialStatus) ? (reported.status as TrialStatus) : "INTERRUPTED";
  const lastReported = reported.attempts?.[reported.attempts.length - 1];
  const history = current.attempts ?? [];
  const attempts = lastReported && history.length > 0 ? [...history.slice(0, -1), { ...lastReported, n: history[history.length - 1].n }] : history;
  return {
    ...reported,
    id: current.id,
    job_id: current.job_id,
    task_digest: current.task_digest,
    status,
    attempts: closeAttempt({ ...current, attempts }, at, status, endedBecause(status, reported.exception ?? null)),
    created_at: current.created_at,
    updated_at: at,
  };
}
