/**
 * The cluster side of an executor (issue 24 §1, the shape NeMo Evaluator's launcher has: submit, status, kill, logs,
 * dry-run): what starts, watches and stops the `evolve worker` processes of one job. The coordinator (coordinator.ts)
 * owns the leases and the store; a launcher only owns the cluster's jobs.
 */

/** One submission's worth of workers for a job. */
export interface WorkerBatch {
  jobId: string;
  /** How many `evolve worker` processes (an array of that size). */
  workers: number;
  /** Where workers reach the coordinator's API (its printed URL plus the API prefix). */
  coordinatorUrl: string;
  /** The job's worker token: handed over in the environment only. */
  token: string;
  /** Seconds a lease lasts without a heartbeat (workers heartbeat at a third of it). */
  leaseSeconds: number;
  /** Folder for the workers' log files and the script the submission ran. */
  logDir: string;
}

/** A worker as the cluster reports it. */
export interface WorkerState {
  id: string;
  state: "pending" | "running" | "failed" | "success" | "killed" | "unknown";
  node?: string;
}

/** Starts and stops workers on a cluster. */
export interface WorkerLauncher {
  readonly kind: string;
  /** Submits `batch`; resolves with the cluster's id for it. */
  submit(batch: WorkerBatch): Promise<string>;
  /** The submission's workers as the cluster sees them now. */
  status(id: string): Promise<WorkerState[]>;
  /** Stops the submission's workers (idempotent). */
  cancel(id: string): Promise<void>;
  /** The workers' logs so far. */
  logs(id: string, logDir: string): Promise<string>;
  /** Writes what `submit` would submit under `dir` and returns the files written; submits nothing. */
  dryRun(batch: WorkerBatch, dir: string): Promise<string[]>;
}
