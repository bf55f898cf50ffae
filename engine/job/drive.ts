/**
 * Runs a recorded job to its end in this process with the real trial runner: one LLM gateway for all its trials
 * (it reads gateway.toml only when a trial first needs a model), closed at the end, and every container removal
 * awaited, so nothing is left behind when the caller exits. `run`, `job resume` and `trial retry|regrade` all come
 * through here; the caller owns the signal (the CLI turns Ctrl-C into it).
 */
import type { Engine } from "../driver/types.ts";
import type { Store, TrialRecord } from "../store/index.ts";
import { ModelGateway } from "../gateway-host/model-gateway.ts";
import { runTrial, settleRemovals } from "../trial/run.ts";
import { runJob, type JobEvent } from "./job.ts";
import type { JobExecutor } from "./executor.ts";

/**
 * What keeps a view of the job outside the store up to date (the Harbor job folder, engine/results/job-folder.ts):
 * told of each trial as it settles and once at the end. It rides here, on the one path every run of a job's trials
 * takes, so `run`, `job resume`, `job retry` and `trial retry|regrade` cannot differ in whether it is kept.
 */
export interface JobFolderHook {
  /** A trial settled (its record is final in the store); must not throw. */
  trialSettled(trialId: string): unknown;
  /** The job stopped running (its status written); resolves once everything queued is written. Must not throw. */
  finish(): Promise<void>;
}

/** Runs job `jobId` (new or interrupted) and closes `engine`; resolves with the job's trials. */
export async function driveJob(o: {
  store: Store;
  engine: Engine;
  home: string;
  jobId: string;
  secrets: Record<string, string>;
  onEvent?: (e: JobEvent) => void;
  signal?: AbortSignal;
  /** Where the gateway's warnings go (an unpriced model, a store poll that failed). */
  warn?: (message: string) => void;
  /** The job's folder, kept as trials settle (none: no folder). */
  folder?: JobFolderHook;
  /** Where the trials run (none: in this process). */
  executor?: JobExecutor;
}): Promise<TrialRecord[]> {
  const gateway = new ModelGateway({ home: o.home, store: o.store, warn: o.warn });
  const folder = o.folder;
  // the folder hears of a settled trial before the caller's display, whatever the display does with the event
  const onEvent = folder
    ? (e: JobEvent) => {
        if (e.kind === "trial_settled") folder.trialSettled(e.trial.id);
        o.onEvent?.(e);
      }
    : o.onEvent;
  try {
    return await runJob(o.jobId, { store: o.store, engine: o.engine, home: o.home, runTrial, secrets: o.secrets, signal: o.signal, onEvent, gateway, executor: o.executor });
  } finally {
    await folder?.finish();
    await gateway.close();
    await settleRemovals();
    await o.engine.close();
  }
}
