/**
 * Executors (issue 24 §1): where a job's trials run. `local` is the job runner's own in-process path (no executor
 * given); `slurm` and `kubernetes` are a Coordinator (leases over its API, the only writer of the store) with a
 * SlurmLauncher or a KubernetesLauncher starting `evolve worker` processes. The room's public surface: what commands use, by name.
 */
export { Coordinator, DEFAULT_LEASE_SECONDS, submissionsFile } from "./coordinator.ts";
export type { CoordinatorOptions } from "./coordinator.ts";
export { coordinatorApp, WORKER_API } from "./coordinator-api.ts";
export { LeaseBook } from "./lease.ts";
export { parseSlurmArgs, SlurmLauncher, slurmShip } from "./slurm.ts";
export type { SlurmOptions } from "./slurm.ts";
export type { WorkerBatch, WorkerLauncher, WorkerState } from "./types.ts";
export { runWorker } from "./worker.ts";
export { KubernetesLauncher, loadKubeconfig } from "./kubernetes.ts";
export type { KubernetesOptions } from "./kubernetes.ts";
