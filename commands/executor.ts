/**
 * `--executor`, `--partition`, `--slurm-arg` and `--coordinator-host` (issue 24 §1): read into the job's config, and
 * turned back into an executor when the job runs (`run`, `job resume`). Argument handling only: what an executor
 * does is engine/executor's.
 */
import { fileURLToPath } from "node:url";
import { EvolveError } from "../engine/errors.ts";
import type { JobConfig, JobExecutor } from "../engine/job/mod.ts";
import { Coordinator, DEFAULT_LEASE_SECONDS, parseSlurmArgs, SlurmLauncher, type SlurmOptions } from "../engine/executor/mod.ts";
import { isCompiledBinary } from "../engine/runtime.ts";
import type { Store } from "../engine/store/mod.ts";

/** The executor flags as commander gives them. */
export interface ExecutorFlags {
  executor?: string;
  partition?: string;
  slurmArg?: string[];
  coordinatorHost?: string;
}

/** The job config's `executor` for the flags (undefined: local); refuses an unknown kind or a malformed --slurm-arg. */
export function executorConfig(f: ExecutorFlags): JobConfig["executor"] {
  const kind = f.executor ?? "local";
  if (kind === "local") {
    if (f.partition !== undefined || (f.slurmArg ?? []).length > 0) throw new EvolveError("executor_invalid", "--partition and --slurm-arg need --executor slurm", "add --executor slurm, or leave them out");
    return undefined;
  }
  if (kind !== "slurm") throw new EvolveError("executor_invalid", `--executor ${kind}: expected local or slurm`, "e.g. --executor slurm --partition debug");
  parseSlurmArgs(f.slurmArg);
  return {
    kind: "slurm",
    ...(f.partition !== undefined ? { partition: f.partition } : {}),
    ...((f.slurmArg ?? []).length > 0 ? { slurm_args: f.slurmArg } : {}),
    ...(f.coordinatorHost !== undefined ? { coordinator_host: f.coordinatorHost } : {}),
  };
}

/** The argv that starts this evolve on a node: the compiled binary itself, or this runtime with main.ts. */
export function evolveArgv(): string[] {
  if (isCompiledBinary()) return [process.execPath];
  return [process.execPath, fileURLToPath(new URL("../main.ts", import.meta.url))];
}

/** The Slurm launcher for a job's executor config. */
export function slurmLauncher(e: NonNullable<JobConfig["executor"]>): SlurmLauncher {
  const o: SlurmOptions = { partition: e.partition, args: parseSlurmArgs(e.slurm_args), evolve: evolveArgv() };
  return new SlurmLauncher(o);
}

/** The executor a recorded job runs with (undefined: local, in this process). */
export function jobExecutor(config: JobConfig, o: { store: Store; home: string; say: (line: string) => void }): JobExecutor | undefined {
  const e = config.executor;
  if (!e) return undefined;
  const leaseSeconds = Number(process.env.EVOLVE_LEASE_SECONDS) > 0 ? Number(process.env.EVOLVE_LEASE_SECONDS) : DEFAULT_LEASE_SECONDS;
  return new Coordinator({ store: o.store, home: o.home, launcher: slurmLauncher(e), host: e.coordinator_host, leaseSeconds, say: o.say });
}
