/**
 * Where a job's trials run (issue 24 §1): the job runner stays one loop (runJob: claim, retries, cancel, budgets,
 * resume) and asks an executor to run each trial. `local` is this process (engine/trial's runTrial, the default);
 * `slurm` (engine/executor) queues each trial for workers that Slurm starts and resolves once a worker's result was
 * accepted. The interface lives here, below the executors, so the job room imports none of them.
 */
import type { TrialRunner } from "./job.ts";

/** An executor as the job runner sees it. */
export interface JobExecutor {
  /** `local`, `slurm`, … (shown, and kept in the job's config so `job resume` uses the same). */
  readonly kind: string;
  /** Runs one trial to its settled record (or, remote, waits until a worker's result is accepted). */
  runTrial: TrialRunner;
  /** Called once the job is claimed and before any trial: submits the workers for `trials` trials. */
  start?(o: { jobId: string; trials: number; concurrency: number }): Promise<void>;
  /** Called when the job stops running, whatever the reason: cancels what is still submitted. Must not throw. */
  stop?(): Promise<void>;
}
