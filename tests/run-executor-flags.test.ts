/**
 * `run`'s executor flags (issue 24 §1) without a cluster or an engine (the unit tier's podman and docker are stubs
 * that fail the run if called): `--dry-run` writes the batch script and the sbatch line it would submit and records
 * nothing; the same keys work from a run.toml; an unknown executor, Slurm options without `--executor slurm`, a
 * malformed `--slurm-arg` and a dry run of the local executor are refused before a job is recorded.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliHost } from "./support/cli-host.ts";

const root = resolve(__dirname, "..");
const task = join(root, "fixtures/tasks/valid/minimal");
let home: string;
beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-executor-flags-"));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

const host = cliHost();
afterAll(() => host.close());
function evolve(args: string[]) {
  return host.run(args, { cwd: root, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
}
const noJobs = () => expect(JSON.parse(evolve(["job", "list", "--json"]).stdout)).toEqual([]);

describe("run --executor", () => {
  it("--dry-run writes the batch script and the sbatch line with the user's options, and records no job", () => {
    const r = evolve(["run", "-p", task, "--executor", "slurm", "--partition", "gpu", "--slurm-arg", "time=00:30:00", "-n", "4", "-k", "2", "--dry-run", "--json"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const { dry_run, files } = JSON.parse(r.stdout) as { dry_run: boolean; files: string[] };
    expect(dry_run).toBe(true);
    const [script, submit] = files.map((f) => readFileSync(f, "utf8"));
    expect(script).toMatch(/ worker --coordinator 'http:\/\/127\.0\.0\.1:<port>\/executor'/);
    // two trials (one task × 2 attempts): two workers however large -n is
    expect(submit).toContain("'--array=0-1'");
    expect(submit).toContain("'--partition=gpu'");
    expect(submit).toContain("'--time=00:30:00'");
    noJobs();
  });

  it("takes the executor from a run config file", () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-executor-toml-"));
    const file = join(dir, "run.toml");
    writeFileSync(file, `path = "${task}"\nexecutor = "slurm"\nslurm-arg = ["mem=1G"]\ndry-run = true\n`);
    const r = evolve(["run", "-c", file]);
    expect(r.code).toBe(0);
    const submit = r.stdout.trim().split("\n").find((l) => l.endsWith("submit.sh"))!;
    expect(readFileSync(submit, "utf8")).toContain("'--mem=1G'");
    noJobs();
  });

  it("--executor kubernetes --dry-run writes the Secret and Job manifests, token left out, and records no job", () => {
    const r = evolve(["run", "-p", task, "--executor", "kubernetes", "--k8s-image", "registry.example.com/evolve-worker:1", "--namespace", "evals", "--coordinator-host", "10.0.0.5", "-n", "4", "-k", "2", "--dry-run", "--json"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const { files } = JSON.parse(r.stdout) as { files: string[] };
    expect(files.map((f) => f.split("/").pop())).toEqual(["secret.json", "job.json"]);
    const [secret, job] = files.map((f) => JSON.parse(readFileSync(f, "utf8")));
    expect(job.metadata.namespace).toBe("evals");
    expect(job.spec).toMatchObject({ completionMode: "Indexed", completions: 2, parallelism: 2 });
    expect(job.spec.template.spec.containers[0].image).toBe("registry.example.com/evolve-worker:1");
    expect(secret.stringData.coordinator).toBe("http://10.0.0.5:<port>/executor");
    noJobs();
  });

  it("takes the Kubernetes executor from a run config file", () => {
    const dir = mkdtempSync(join(tmpdir(), "evolve-executor-toml-"));
    const file = join(dir, "run.toml");
    writeFileSync(file, `path = "${task}"\nexecutor = "kubernetes"\nk8s-image = "img:2"\nnamespace = "ns2"\ndry-run = true\n`);
    const r = evolve(["run", "-c", file]);
    expect(r.code).toBe(0);
    const job = r.stdout.trim().split("\n").find((l) => l.endsWith("job.json"))!;
    expect(JSON.parse(readFileSync(job, "utf8")).metadata.namespace).toBe("ns2");
    noJobs();
  });

  it("refuses what it cannot run before anything is recorded", () => {
    for (const [args, code] of [
      [["--executor", "nomad"], "executor_invalid"],
      [["--executor", "kubernetes"], "executor_invalid"],
      [["--namespace", "evals"], "executor_invalid"],
      [["--executor", "slurm", "--k8s-image", "img"], "executor_invalid"],
      [["--executor", "kubernetes", "--k8s-image", "img", "--partition", "gpu"], "executor_invalid"],
      [["--partition", "gpu"], "executor_invalid"],
      [["--executor", "slurm", "--slurm-arg", "time"], "executor_invalid"],
      [["--executor", "slurm", "--slurm-arg", "array=0-99"], "executor_invalid"],
      [["--dry-run"], "executor_invalid"],
    ] as const) {
      const r = evolve(["run", "-p", task, ...args]);
      expect(r.stderr, args.join(" ")).toContain(`error[${code}]`);
      expect(r.code).toBe(2);
    }
    noJobs();
  });
});
