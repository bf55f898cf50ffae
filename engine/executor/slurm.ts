/**
 * The Slurm launcher (issue 24 §1): one `sbatch --array=0-(N-1)` per job run, each array task an `evolve worker`
 * that claims trials from the coordinator until the job is over. Status is `squeue`'s, cancel is `scancel`, logs are
 * the array tasks' output files. The worker token goes in sbatch's environment (`--export=ALL` carries it to the
 * task), never on a command line or in the script, so neither `ps` nor `scontrol show job` shows it.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { EvolveError } from "../errors.ts";
import type { WorkerBatch, WorkerLauncher, WorkerState } from "./types.ts";

/** `--partition` and the repeatable `--slurm-arg K=V` (each becomes `--K=V` on sbatch's command line). */
export interface SlurmOptions {
  partition?: string;
  args?: string[];
  /** The command that starts evolve on a node (argv before `worker`): this binary, or a runtime and main.ts. */
  evolve: string[];
  /** Whether each worker pulls the job's pack before its first claim (`evolve worker --ship`); default none. */
  ship?: "images" | "none";
  /** Extra environment for the workers (on one host: the podman and agents settings of this process). */
  env?: Record<string, string>;
}

/**
 * Whether a Slurm job's workers pull its pack: as asked, else `images` when the coordinator serves on an address
 * other nodes reach (a real cluster, whose nodes hold none of this machine's images or agents), else `none` (one
 * host: the workers' engine is this machine's, and a pack would only copy what is already here).
 */
export function slurmShip(e: { ship?: "images" | "none"; coordinator_host?: string }): "images" | "none" {
  return e.ship ?? (e.coordinator_host !== undefined ? "images" : "none");
}

/** Checks `--slurm-arg` values: KEY=VALUE with a sbatch long option's name as KEY. */
export function parseSlurmArgs(flags: readonly string[] | undefined): string[] {
  const out: string[] = [];
  for (const f of flags ?? []) {
    const m = /^([a-z][a-z0-9-]*)=(.*)$/.exec(f);
    if (!m) throw new EvolveError("executor_invalid", `--slurm-arg ${f}: expected KEY=VALUE with a sbatch option as KEY`, "e.g. --slurm-arg time=01:00:00 --slurm-arg mem=4G");
    if (["array", "export", "output", "wrap", "parsable"].includes(m[1])) throw new EvolveError("executor_invalid", `--slurm-arg ${m[1]}: evolve sets --${m[1]} itself`, "leave it out");
    out.push(`--${m[1]}=${m[2]}`);
  }
  return out;
}

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** The batch script each array task runs: the worker, told its coordinator; the token stays in the environment. */
export function sbatchScript(o: SlurmOptions, b: WorkerBatch): string {
  return [
    "#!/bin/sh",
    `# evolve job ${b.jobId}: one worker per array task; EVOLVE_WORKER_TOKEN comes from sbatch's environment`,
    `exec ${o.evolve.map(quote).join(" ")} worker --coordinator ${quote(b.coordinatorUrl)} --lease-seconds ${b.leaseSeconds} --worker-id "slurm-$SLURM_ARRAY_JOB_ID-$SLURM_ARRAY_TASK_ID-$SLURMD_NODENAME"${o.ship === "images" ? " --ship images" : ""}`,
    "",
  ].join("\n");
}

/** sbatch's arguments for `batch` whose script is `script`. */
export function sbatchArgs(o: SlurmOptions, b: WorkerBatch, script: string): string[] {
  return [
    "--parsable",
    `--array=0-${b.workers - 1}`,
    `--job-name=evolve-${b.jobId}`,
    `--output=${join(b.logDir, "worker-%A_%a.log")}`,
    "--export=ALL",
    ...(o.partition ? [`--partition=${o.partition}`] : []),
    ...(o.args ?? []),
    script,
  ];
}

/** Starts workers with sbatch. */
export class SlurmLauncher implements WorkerLauncher {
  readonly kind = "slurm";
  constructor(private readonly o: SlurmOptions) {}

  async submit(b: WorkerBatch): Promise<string> {
    const [script] = await this.write(b, b.logDir);
    const env = { ...process.env, ...this.o.env, EVOLVE_WORKER_TOKEN: b.token };
    const r = await run("sbatch", sbatchArgs(this.o, b, script), env);
    if (r.code !== 0) throw new EvolveError("executor_unavailable", `sbatch refused the workers: ${(r.stderr || r.stdout).trim() || `exit ${r.code}`}`, "check the cluster (sinfo), --partition and --slurm-arg");
    return r.stdout.trim().split(";")[0];
  }

  async status(id: string): Promise<WorkerState[]> {
    const r = await run("squeue", ["-h", "-r", "-j", id, "-o", "%i|%T|%N"], process.env);
    if (r.code !== 0) return [];
    return r.stdout
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => {
        const [wid, st, node] = l.split("|");
        return { id: wid, state: slurmState(st), ...(node ? { node } : {}) };
      });
  }

  async cancel(id: string): Promise<void> {
    await run("scancel", [id], process.env);
  }

  async logs(id: string, logDir: string): Promise<string> {
    if (!existsSync(logDir)) return "";
    return readdirSync(logDir)
      .filter((f) => f.startsWith(`worker-${id}_`))
      .sort()
      .map((f) => `==> ${f} <==\n${readFileSync(join(logDir, f), "utf8")}`)
      .join("\n");
  }

  async dryRun(b: WorkerBatch, dir: string): Promise<string[]> {
    return await this.write(b, dir);
  }

  /** Writes the script and, beside it, the sbatch line that submits it (no token in either). */
  private async write(b: WorkerBatch, dir: string): Promise<string[]> {
    await mkdir(dir, { recursive: true });
    const script = join(dir, "worker.sbatch");
    await writeFile(script, sbatchScript(this.o, b), { mode: 0o755 });
    const cmd = join(dir, "submit.sh");
    await writeFile(cmd, `#!/bin/sh\n# set EVOLVE_WORKER_TOKEN in the environment first\nexec sbatch ${sbatchArgs(this.o, b, script).map(quote).join(" ")}\n`, { mode: 0o755 });
    return [script, cmd];
  }
}

function slurmState(s: string): WorkerState["state"] {
  if (s === "PENDING" || s === "CONFIGURING") return "pending";
  if (s === "RUNNING" || s === "COMPLETING") return "running";
  if (s === "COMPLETED") return "success";
  if (s === "CANCELLED") return "killed";
  if (s === "FAILED" || s === "NODE_FAIL" || s === "TIMEOUT" || s === "OUT_OF_MEMORY") return "failed";
  return "unknown";
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (b) => (stdout += b));
    p.stderr.on("data", (b) => (stderr += b));
    p.on("error", (e) => resolve({ code: 127, stdout, stderr: `${cmd}: ${e.message}` }));
    p.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}
