/**
 * How a trial fails. Every failure carries Harbor's exception type name (what `exception_info.exception_type`
 * and the retry filters match on) and the status it settles in.
 *
 * Status policy: anything that stops a trial before the verifier produced a verdict settles
 * INFRASTRUCTURE_ERROR — the engine failing, but also the task's own environment failing (Dockerfile does not
 * build, the entrypoint's service dies, the healthcheck never passes, the agent user is missing, a secret is not
 * attached). platform-trials.md has no status for "the task is broken" and a fabricated score would be worse; the
 * exception type tells the two apart, and {@link DETERMINISTIC_EXCEPTIONS} lists the ones a retry cannot fix, so
 * the job's automatic INFRASTRUCTURE_ERROR retries skip them. A verifier that ran but gave no valid reward is
 * SCORING_ERROR; an abort is CANCELLED.
 */
import type { TrialStatus } from "./types.ts";

/** A failure that ends the trial with `status` and exception `type`. */
export class TrialFailure extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly status: TrialStatus = "INFRASTRUCTURE_ERROR",
    readonly traceback = "",
  ) {
    super(message);
    this.name = type;
  }
}

/** The trial was stopped (job cancel, `trial stop`, Ctrl-C). */
export class CancelledFailure extends TrialFailure {
  constructor() {
    super("CancelledError", "the trial was cancelled", "CANCELLED");
  }
}

/**
 * Exception types that come from the task or the request itself: retrying the trial gives the same answer, so
 * automatic INFRASTRUCTURE_ERROR retries should not spend attempts on them.
 */
export const DETERMINISTIC_EXCEPTIONS: ReadonlySet<string> = new Set([
  "TaskInvalidError",
  "UnknownAgentError",
  "SecretNotAttached",
  "NetworkPolicyUnsupportedError",
  "GpuUnavailableError",
  "ImageNotFoundError",
  "EnvironmentBuildError",
  "AgentUserNotFoundError",
  "RegradeRefusedError",
  "RegradeRestoreError",
  "GatewayConfigError",
  "DiskFullError",
]);
