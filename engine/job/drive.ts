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
}): Promise<TrialRecord[]> {
  const gateway = new ModelGateway({ home: o.home, store: o.store, warn: o.warn });
  try {
    return await runJob(o.jobId, { store: o.store, engine: o.engine, home: o.home, runTrial, secrets: o.secrets, signal: o.signal, onEvent: o.onEvent, gateway });
  } finally {
    await gateway.close();
    await settleRemovals();
    await o.engine.close();
  }
}
