/**
 * `--executor`, `--partition`, `--slurm-arg`, `--coordinator-host` (issue 24 §1) and `--namespace`, `--k8s-image`,
 * `--kubeconfig` (§3): read into the job's config, and
 * turned back into an executor when the job runs (`run`, `job resume`). Argument handling only: what an executor
 * does is engine/executor's.
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { EvolveError } from "../engine/errors.ts";
import type { JobConfig, JobExecutor } from "../engine/job/mod.ts";
import { Coordinator, DEFAULT_LEASE_SECONDS, KubernetesLauncher, parseSlurmArgs, SlurmLauncher, slurmShip, type SlurmOptions, type WorkerLauncher } from "../engine/executor/mod.ts";
import { isCompiledBinary } from "../engine/runtime.ts";
import type { Store } from "../engine/store/mod.ts";

/** The executor flags as commander gives them. */
export interface ExecutorFlags {
  executor?: string;
  partition?: string;
  slurmArg?: string[];
  coordinatorHost?: string;
  ship?: string;
  namespace?: string;
  k8sImage?: string;
  kubeconfig?: string;
}

/**
 * The job config's `executor` for the flags (undefined: local); refuses an unknown kind, a malformed --slurm-arg,
 * one executor's flags given to another, and `--executor kubernetes` without the worker image.
 */
export function executorConfig(f: ExecutorFlags): JobConfig["executor"] {
  const kind = f.executor ?? "local";
  const slurmFlags = f.partition !== undefined || (f.slurmArg ?? []).length > 0 || f.ship !== undefined;
  const k8sFlags = f.namespace !== undefined || f.k8sImage !== undefined || f.kubeconfig !== undefined;
  if (kind !== "local" && kind !== "slurm" && kind !== "kubernetes") throw new EvolveError("executor_invalid", `--executor ${kind}: expected local, slurm or kubernetes`, "e.g. --executor slurm --partition debug");
  if (slurmFlags && kind !== "slurm") throw new EvolveError("executor_invalid", "--partition, --slurm-arg and --ship need --executor slurm", "add --executor slurm, or leave them out");
  if (k8sFlags && kind !== "kubernetes") throw new EvolveError("executor_invalid", "--namespace, --k8s-image and --kubeconfig need --executor kubernetes", "add --executor kubernetes, or leave them out");
  if (kind === "local") return undefined;
  if (kind === "kubernetes") {
    if (!f.k8sImage) throw new EvolveError("executor_invalid", "--executor kubernetes needs --k8s-image: the pods' image with evolve, podman and the agents", "build one from scripts/kubernetes/Containerfile, push it, and pass --k8s-image REGISTRY/evolve-worker:TAG");
    return {
      kind: "kubernetes",
      k8s_image: f.k8sImage,
      ...(f.namespace !== undefined ? { namespace: f.namespace } : {}),
      ...(f.kubeconfig !== undefined ? { kubeconfig: resolve(f.kubeconfig) } : {}),
      ...(f.coordinatorHost !== undefined ? { coordinator_host: f.coordinatorHost } : {}),
    };
  }
  parseSlurmArgs(f.slurmArg);
  if (f.ship !== undefined && f.ship !== "images" && f.ship !== "none") throw new EvolveError("executor_invalid", `--ship ${f.ship}: expected images or none`, "images: workers pull the job's pack from the coordinator; none: the nodes have the images and agents");
  return {
    kind: "slurm",
    ...(f.partition !== undefined ? { partition: f.partition } : {}),
    ...((f.slurmArg ?? []).length > 0 ? { slurm_args: f.slurmArg } : {}),
    ...(f.coordinatorHost !== undefined ? { coordinator_host: f.coordinatorHost } : {}),
    ...(f.ship !== undefined ? { ship: f.ship as "images" | "none" } : {}),
  };
}

/** The argv that starts this evolve on a node: the compiled binary itself, or this runtime with main.ts. */
export function evolveArgv(): string[] {
  if (isCompiledBinary()) return [process.execPath];
  return [process.execPath, fileURLToPath(new URL("../main.ts", import.meta.url))];
}

/** The launcher (Slurm or Kubernetes) for a job's executor config. */
export function workerLauncher(e: NonNullable<JobConfig["executor"]>): WorkerLauncher {
  if (e.kind === "kubernetes") return new KubernetesLauncher({ image: e.k8s_image ?? "", namespace: e.namespace, kubeconfig: e.kubeconfig });
  const o: SlurmOptions = { partition: e.partition, args: parseSlurmArgs(e.slurm_args), evolve: evolveArgv(), ship: slurmShip(e) };
  return new SlurmLauncher(o);
}

/** The executor a recorded job runs with (undefined: local, in this process). */
export function jobExecutor(config: JobConfig, o: { store: Store; home: string; say: (line: string) => void }): JobExecutor | undefined {
  const e = config.executor;
  if (!e) return undefined;
  const leaseSeconds = Number(process.env.EVOLVE_LEASE_SECONDS) > 0 ? Number(process.env.EVOLVE_LEASE_SECONDS) : DEFAULT_LEASE_SECONDS;
  // a pod reaches no coordinator on the loopback address; the default stays so a kind/minikube user may forward it
  if (e.kind === "kubernetes" && e.coordinator_host === undefined) o.say("coordinator: serving on 127.0.0.1, which pods cannot reach: pass --coordinator-host with an address the cluster's pods can reach");
  return new Coordinator({ store: o.store, home: o.home, launcher: workerLauncher(e), host: e.coordinator_host, leaseSeconds, say: o.say });
}
