/**
 * What the Slurm launcher submits (issue 24 §1), without a cluster: the batch script and sbatch's arguments carry the
 * coordinator's address and the user's sbatch options, never the worker token; `--slurm-arg` is KEY=VALUE and may
 * not override what evolve sets itself; `--dry-run` writes the script and the sbatch line and submits nothing.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { expectCode } from "../../tests/support/expect-code.ts";
import { parseSlurmArgs, sbatchArgs, sbatchScript, SlurmLauncher, slurmShip } from "./slurm.ts";
import type { WorkerBatch } from "./types.ts";

const batch = (dir: string): WorkerBatch => ({ jobId: "J1", workers: 3, coordinatorUrl: "http://10.0.0.5:4000/executor", token: "s3cret-token", leaseSeconds: 30, logDir: dir });
const opts = { partition: "gpu", args: ["--time=01:00:00"], evolve: ["/opt/evolve/bin/evolve"] };

describe("slurm launcher", () => {
  it("submits an array of workers told the coordinator's address; the token is in no argument and no file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-sbatch-"));
    const script = sbatchScript(opts, batch(dir));
    expect(script).toContain("'/opt/evolve/bin/evolve' worker --coordinator 'http://10.0.0.5:4000/executor' --lease-seconds 30");
    const args = sbatchArgs(opts, batch(dir), "/x/worker.sbatch");
    expect(args).toEqual(expect.arrayContaining(["--array=0-2", "--partition=gpu", "--time=01:00:00", "--export=ALL", "--job-name=evolve-J1"]));
    const files = await new SlurmLauncher(opts).dryRun(batch(dir), dir);
    expect(files.map((f) => f.slice(dir.length + 1))).toEqual(["worker.sbatch", "submit.sh"]);
    for (const f of files) expect(readFileSync(f, "utf8")).not.toContain("s3cret-token");
    expect([script, ...args].join(" ")).not.toContain("s3cret-token");
  });

  it("takes --slurm-arg as KEY=VALUE, refusing a malformed one and the options evolve sets itself", () => {
    expect(parseSlurmArgs(["time=01:00:00", "gres=gpu:1", "comment=a b"])).toEqual(["--time=01:00:00", "--gres=gpu:1", "--comment=a b"]);
    expectCode(() => parseSlurmArgs(["time"]), "executor_invalid");
    expectCode(() => parseSlurmArgs(["--time=1"]), "executor_invalid");
    expectCode(() => parseSlurmArgs(["array=0-9"]), "executor_invalid");
    expectCode(() => parseSlurmArgs(["export=NONE"]), "executor_invalid");
  });

  it("tells the workers to pull the job's pack on a real cluster (--coordinator-host), not on one host, unless told", () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-sbatch-"));
    expect(slurmShip({ coordinator_host: "10.0.0.5" })).toBe("images");
    expect(slurmShip({})).toBe("none");
    expect(slurmShip({ coordinator_host: "10.0.0.5", ship: "none" })).toBe("none");
    expect(slurmShip({ ship: "images" })).toBe("images");
    expect(sbatchScript({ ...opts, ship: "images" }, batch(dir))).toMatch(/--worker-id "[^"]+" --ship images\n/);
    expect(sbatchScript({ ...opts, ship: "none" }, batch(dir))).not.toContain("--ship");
  });
});
