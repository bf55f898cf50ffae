/**
 * The shapes of everything the store holds. Every write and every read goes through these schemas, so a record
 * that does not fit (a bug upstream, or bytes damaged on disk) is caught at the store's edge instead of leaking
 * half-valid data into the engine. Fields are added here as later features need them; a change that old records
 * cannot satisfy needs a migration in migrations.ts and a schema version bump.
 */
import { z } from "zod";

const isoTime = z.string().min(1);

/**
 * A trial's statuses (platform-trials.md "Statuses"). What each means and when a trial settles in it is the trial
 * runner's (engine/outcome.ts); the list lives here so a stored word outside it reads as a damaged record.
 */
export const TRIAL_STATUSES = ["QUEUED", "RUNNING", "SCORING", "SCORED", "SCORING_ERROR", "INFRASTRUCTURE_ERROR", "BUDGET", "INDETERMINATE", "CANCELLED", "INTERRUPTED"] as const;

/** A job's statuses: RUNNING while a runner works on it, INTERRUPTED when that runner died, then a final state (engine/job). */
export const JOB_STATUSES = ["RUNNING", "INTERRUPTED", "COMPLETED", "CANCELLED"] as const;

/** The steps of one trial attempt, in order: the `attempt_phase` values a running trial reports (engine/trial). */
export const PHASES = ["prepare", "build", "boot", "install", "agent", "verify", "persist"] as const;

/** What a task declares that listings and schedulers need without reading task.toml again. */
export const TaskSummarySchema = z.object({
  steps: z.number().int().nonnegative(),
  gpus: z.number().int().nonnegative(),
  gpu_types: z.array(z.string()),
  agent_timeout_sec: z.number().nonnegative().nullable(),
  verifier_timeout_sec: z.number().nonnegative().nullable(),
  network_mode: z.string().min(1),
  verifier_mode: z.string().min(1),
  docker_image: z.string().nullable(),
});

/** A stored task: content-addressed by its digest (see engine/task/digest.ts); the files live in the blob dir. */
export const TaskRecordSchema = z.object({
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  name: z.string().min(1),
  stored_at: isoTime,
  summary: TaskSummarySchema,
});

/**
 * One published version of a dataset. Its content never changes once stored: a new content is a new version. A
 * deleted version stays as a tombstone (`status` "deleted", its digest kept) so the same name@version is never
 * published again with other content.
 */
export const DatasetRecordSchema = z.object({
  name: z.string().min(1),
  version: z.string().min(1),
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  tasks: z.array(z.object({ name: z.string().min(1), digest: z.string().min(1) })),
  status: z.enum(["active", "deleted"]),
  created_at: isoTime,
  updated_at: isoTime,
  deleted_at: isoTime.optional(),
  /** The organization it belongs to (`dataset publish --org`); absent: its creator's personal one (engine/org). */
  org: z.string().min(1).optional(),
  /** The local identity that published it; absent on records from before teams (engine/org reads them as personal). */
  created_by: z.string().min(1).optional(),
});

/** A job: a batch of trials started together. `config` is the run's resolved settings, owned by engine/job. */
export const JobRecordSchema = z.object({
  id: z.string().min(1),
  created_at: isoTime,
  status: z.enum(JOB_STATUSES),
  dataset: z.string().optional(),
  config: z.unknown(),
  updated_at: isoTime.optional(),
  finished_at: isoTime.optional(),
  /** The process running the job now: a job whose runner is gone was interrupted and can be resumed. */
  runner: z.object({ pid: z.number().int(), host: z.string(), started_at: isoTime }).nullable().optional(),
  /** Lineage: the job whose unscored trials this one runs again (`job retry`). */
  retry_of: z.string().optional(),
  /**
   * The Harbor job folder its trials were written to (absolute), once one was: `job resume` keeps writing there,
   * and a job made from its trials (`job retry`, `trial retry|regrade`) gets its own beside it (engine/results).
   */
  folder: z.string().optional(),
  /** A job run elsewhere and uploaded (`evolve upload`, engine/results/upload.ts): where it came from and its task links. */
  upload: z.looseObject({ import_id: z.string(), original_job_id: z.string().nullable(), uploaded_at: isoTime }).optional(),
  /** The organization it belongs to (`run --org`); absent: its creator's personal one (engine/org). */
  org: z.string().min(1).optional(),
  /** The local identity that started it; absent on records from before teams (engine/org reads them as personal). */
  created_by: z.string().min(1).optional(),
});

const ExceptionSchema = z.object({
  type: z.string(),
  message: z.string(),
  traceback: z.string(),
  occurred_at: isoTime,
});

/** One trial: one agent on one task. Statuses and phases are the trial runner's vocabulary, checked against the lists above. */
export const TrialRecordSchema = z.object({
  id: z.string().min(1),
  job_id: z.string().min(1),
  task_digest: z.string().min(1),
  agent: z.string().min(1),
  model: z.string().optional(),
  status: z.enum(TRIAL_STATUSES),
  attempt_phase: z.enum(PHASES).optional(),
  /** The phase a trial that did not score failed in (build, boot, …, verify, persist); absent once scored. */
  failed_phase: z.enum(PHASES).optional(),
  phase_timings: z.partialRecord(z.enum(PHASES), z.object({ started_at: isoTime, finished_at: isoTime.optional() })),
  rewards: z.record(z.string(), z.number()).nullable().optional(),
  exception: ExceptionSchema.nullable().optional(),
  /**
   * What the trial spent through the gateway. `live_usd` is a lower bound while it runs; `final_usd` is set once
   * every call is metered and priced (`source` "measured"); a call with no known price keeps it null ("lower_bound").
   * The judge lane (an LLM-graded verifier) is kept apart from the agent's.
   */
  spend: z
    .object({
      live_usd: z.number(),
      final_usd: z.number().nullable(),
      source: z.string(),
      calls: z.number().int().nonnegative().optional(),
      unpriced_calls: z.number().int().nonnegative().optional(),
      judge: z
        .object({
          live_usd: z.number(),
          final_usd: z.number().nullable(),
          calls: z.number().int().nonnegative().optional(),
          unpriced_calls: z.number().int().nonnegative().optional(),
          tokens: z.record(z.string(), z.number()).optional(),
        })
        .optional(),
    })
    .optional(),
  /** The agent lane's tokens: input, cached_read, cache_write, output, reasoning. */
  tokens: z.record(z.string(), z.number()).optional(),
  step_results: z.array(z.looseObject({ name: z.string() })).optional(),
  /**
   * How the agent's run ended (the last step's run, on a multi-step task): its exit code (null when it was cut off at
   * its timeout) and whether it timed out. Absent when the agent never ran (a trial that failed before its phase).
   */
  agent_exit: z.object({ exit_code: z.number().int().nullable(), timed_out: z.boolean() }).optional(),
  // written by the trial runner (engine/trial); optional so records from before it still read
  task_name: z.string().optional(),
  /** The task's folder inside a `run -p` folder, when another task there has the same name: how the two are told apart. */
  task_path: z.string().optional(),
  /** Dataset `name@version` the task came from. */
  source: z.string().optional(),
  /** The primary reward; null when the trial scored metrics only, or has no result. */
  reward: z.number().nullable().optional(),
  /** 1-based attempt number (automatic INFRASTRUCTURE_ERROR retries). */
  attempt: z.number().int().positive().optional(),
  /**
   * Every run of this trial, oldest first: an automatic retry and `job resume` each add one. The last is the run
   * the record's other fields describe; `ended_at` is null while it runs. `ended_because` says why it ended
   * (`scored`, or the status and exception it settled with, or that its runner was interrupted).
   */
  attempts: z
    .array(
      z.object({
        n: z.number().int().positive(),
        started_at: isoTime,
        ended_at: isoTime.nullable(),
        status: z.string().nullable(),
        ended_because: z.string().nullable(),
      }),
    )
    .optional(),
  started_at: isoTime.optional(),
  finished_at: isoTime.optional(),
  /** When `evolve trial stop` asked (from any process) for this trial to end; its runner polls for it. */
  stop_requested_at: isoTime.optional(),
  /** Lineage: the trial this one runs again (`trial retry`) or re-scores with its verifier only (`trial regrade`). */
  retry_of: z.string().optional(),
  regrade_of: z.string().optional(),
  created_at: isoTime,
  updated_at: isoTime,
});

/** One parsed trace event. `seq` is its position in the trial's trace, 0-based, gapless, and a resume cursor. */
export const TraceEventSchema = z.object({
  seq: z.number().int().nonnegative(),
  type: z.string().min(1),
  data: z.unknown(),
});

/**
 * An API token of `evolve serve` (`evolve auth token create`): only its sha256 is kept, never the token. What a
 * scope allows and how a token is checked are engine/serve's; the store only keeps the record.
 */
export const ApiTokenRecordSchema = z.object({
  id: z.string().min(1),
  name: z.string(),
  scope: z.enum(["read", "run"]),
  /** Hex sha256 of the whole token as shown once at creation. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  created_at: isoTime,
  revoked_at: isoTime.nullable(),
  last_used_at: isoTime.nullable(),
  /** The local identity the token acts as (engine/org); absent on tokens from before teams: serve's own user. */
  user: z.string().min(1).optional(),
});

/**
 * A team (`evolve auth org create`): its members and their roles. Who may do what is engine/org's; a user's personal
 * organization is implicit and never stored.
 */
export const OrgRecordSchema = z.object({
  name: z.string().min(1),
  display_name: z.string(),
  created_at: isoTime,
  created_by: z.string().min(1),
  members: z.array(z.object({ user: z.string().min(1), role: z.enum(["owner", "member"]), joined_at: isoTime })),
});

/** An invite into an org (`evolve auth org invite`): only the sha256 of its token is kept; single use, expiring. */
export const InviteRecordSchema = z.object({
  id: z.string().min(1),
  org: z.string().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  created_by: z.string().min(1),
  created_at: isoTime,
  expires_at: isoTime,
  used_at: isoTime.nullable(),
  used_by: z.string().nullable(),
  revoked_at: isoTime.nullable(),
});

export type ApiTokenRecord = z.infer<typeof ApiTokenRecordSchema>;
export type OrgRecord = z.infer<typeof OrgRecordSchema>;
export type InviteRecord = z.infer<typeof InviteRecordSchema>;
export type TaskSummaryRecord = z.infer<typeof TaskSummarySchema>;
export type TaskRecord = z.infer<typeof TaskRecordSchema>;
export type DatasetRecord = z.infer<typeof DatasetRecordSchema>;
export type JobRecord = z.infer<typeof JobRecordSchema>;
export type TrialRecord = z.infer<typeof TrialRecordSchema>;
export type TraceEvent = z.infer<typeof TraceEventSchema>;
/** An event before the store gives it a position. */
export type NewTraceEvent = Omit<TraceEvent, "seq">;
