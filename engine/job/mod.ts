/**
 * Jobs: their config and defaults, running and resuming them, actions on them, listing and summaries.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { createJobRetry, createRegrade, createRetry, isSettled, requestStop, requireTrial, retryPicks, unsettled } from "./actions.ts";
export { JOB_DEFAULTS, checkVerifierEnvKey } from "./job-config.ts";
export { cancelJob, checkJobSize, createJob, effectiveStatus, jobConfig, runRefusal } from "./job.ts";
export type { JobConfig, JobEvent, JobKind } from "./job.ts";
export type { JobExecutor } from "./executor.ts";
export { JOB_KINDS, JOB_STATUSES, choices, findJobRef, listJobRows, parseSince } from "./list.ts";
export type { JobFilter } from "./list.ts";
export { selectTasks } from "./select.ts";
export { PASS_AT_K_LEFT_OUT_TEXT, attemptSeconds, jobSpend, measuredLane, primaryReward, summarizeJob, taskLabel, trialAttempts, trialSpendFields } from "./summary.ts";
export type { JobSpend, JobSummary, PassAtKLeftOut } from "./summary.ts";
export { PORTED_PROVIDER, jobShowDocument, trialShowDocument } from "./documents.ts";
