/**
 * `evolve worker`: what Slurm starts for `run --executor slurm` (engine/executor/worker.ts does the work). The token
 * is read from EVOLVE_WORKER_TOKEN only, so it never shows in `ps`; the worker keeps its own scratch home and never
 * opens the coordinator's store, even when EVOLVE_HOME (carried over by sbatch) names it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { openEngine } from "../engine/engine-choice.ts";
import { EvolveError } from "../engine/errors.ts";
import { DEFAULT_LEASE_SECONDS, runWorker } from "../engine/executor/mod.ts";
import { Interruption } from "../engine/outcome.ts";

/** `evolve worker` */
export async function workerCommand(opts: { coordinator: string; workerId?: string; leaseSeconds?: number; scratch?: string; sharedHome?: string; ship?: "images" | "none"; engine?: "podman" | "docker" }): Promise<number> {
  const token = process.env.EVOLVE_WORKER_TOKEN;
  if (!token) throw new EvolveError("usage", "EVOLVE_WORKER_TOKEN is not set: a worker takes its job's token from the environment only", "workers are started by `evolve run --executor slurm`, which sets it");
  const home = opts.scratch ?? mkdtempSync(join(tmpdir(), "evolve-worker-"));
  const ownHome = opts.scratch === undefined;
  const workerId = opts.workerId ?? `${hostname()}-${process.pid}`;
  const log = (line: string) => process.stderr.write(`${new Date().toISOString()} ${workerId}: ${line}\n`);
  const engine = await openEngine({ kind: opts.engine, home });
  const stop = new AbortController();
  // scancel sends SIGTERM: the running trial stops (boxes removed) and the lease is left to expire
  const onSignal = (s: NodeJS.Signals) => () => stop.abort(new Interruption(s, 143));
  const handlers = (["SIGTERM", "SIGINT"] as const).map((s) => [s, onSignal(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  try {
    log(`pid ${process.pid}, home ${home}, coordinator ${opts.coordinator}`);
    const n = await runWorker({ url: opts.coordinator, token, workerId, home, engine, leaseSeconds: opts.leaseSeconds ?? DEFAULT_LEASE_SECONDS, sharedHome: opts.sharedHome, ship: opts.ship, clusterJob: process.env.SLURM_JOB_ID, signal: stop.signal, log });
    log(`done: ${n} result${n === 1 ? "" : "s"} accepted`);
    return 0;
  } finally {
    await engine.close();
    // a scratch home made here holds only copies (tasks fetched, trees already sent): it goes with the worker
    if (ownHome) rmSync(home, { recursive: true, force: true });
    // kept until now: Slurm may signal again while the worker cleans up, and the default action would cut it short
    for (const [s, h] of handlers) process.off(s, h);
  }
}
