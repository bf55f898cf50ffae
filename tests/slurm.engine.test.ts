/**
 * `evolve run --executor slurm` on a real three-node Slurm on this host (issue 24 §2), through the CLI (`bun
 * main.ts`) on real podman: scripts/slurm/up.sh starts munge, slurmctld and n1..n3, and each test's job is spread
 * over them as `evolve worker`s that lease trials from the run's coordinator. Every trial settles exactly once with
 * the rewards a local run gives; a node lost mid-job (its slurmd killed, its worker frozen) has its trial re-queued
 * and finished elsewhere, and the lost worker's late report is refused; `job cancel` stops the Slurm jobs; a
 * coordinator killed mid-job is finished by `job resume`, keeping the results that had arrived.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

const root = resolve(__dirname, "..");
const bun = join(root, "node_modules/.bin/bun");
const SLURM_DIR = process.env.SLURM_DIR ?? "/tmp/evolve-slurm";
const SLURM_CONF = join(SLURM_DIR, "slurm.conf");
const hasSlurm = ["sbatch", "slurmctld", "slurmd", "munged"].every((b) => spawnSync("sh", ["-c", `command -v ${b}`]).status === 0);
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;
const isRoot = process.getuid?.() === 0;
/** Seconds a lease lasts without a heartbeat: short, so a lost node's trial comes back within the test's time. */
const LEASE_S = 3;
let home: string;
let work: string;
let startedCluster = false;

vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });

const env = () => ({ ...process.env, EVOLVE_HOME: home, NO_COLOR: "1", SLURM_CONF, EVOLVE_LEASE_SECONDS: String(LEASE_S) });

function evolve(args: string[]) {
  const r = spawnSync(bun, [join(root, "main.ts"), ...args], { cwd: work, encoding: "utf8", env: env(), timeout: 170_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `evolve run` in the background, its output collected. */
function start(args: string[]): { child: ChildProcess; out: () => string; err: () => string; exited: Promise<number | null> } {
  const child = spawn(bun, [join(root, "main.ts"), "run", ...args], { cwd: work, env: env(), stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout!.on("data", (b) => (out += b));
  child.stderr!.on("data", (b) => (err += b));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  return { child, out: () => out, err: () => err, exited };
}

type Trial = { id: string; task_name: string; status: string; rewards: { reward: number } | null; finished_at?: string; attempts?: { status: string | null; ended_because: string | null }[] };
type Job = { id: string; status: string; trials: Trial[] };
const show = (id: string): Job => JSON.parse(evolve(["job", "show", id, "--json"]).stdout);
const jobIdOf = (out: string) => /^job (\w+):/m.exec(out)?.[1];

/** `n` tasks from `task init` whose reference solution (the oracle agent) sleeps `sleep` seconds; half score 0. */
function makeTasks(name: string, n: number, sleep: number): string {
  const dir = join(work, name);
  mkdirSync(dir);
  for (let i = 0; i < n; i++) {
    const task = join(dir, `t${i}`);
    expect(evolve(["task", "init", task]).code).toBe(0);
    const solve = join(task, "solution", "solve.sh");
    // an odd task's solution writes the wrong file: its reward is 0 wherever it runs
    const wrong = i % 2 === 1 ? `\nrm -f /app/hello.txt` : "";
    writeFileSync(solve, readFileSync(solve, "utf8").replace("set -euo pipefail\n", `set -euo pipefail\nsleep ${sleep}\n`) + wrong + "\n");
  }
  return dir;
}

async function until<T>(what: string, cond: () => T | undefined | false, limitMs = 120_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = cond();
    if (v) return v;
    if (Date.now() - t0 > limitMs) throw new Error(`never saw ${what} within ${limitMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Every worker log line of job `id` (the coordinator keeps them under <home>/executor/<job>/). */
function workerLog(id: string): string {
  const dir = join(home, "executor", id);
  if (!existsSync(dir)) return "";
  return readdirSync(dir)
    .filter((f) => f.endsWith(".log"))
    .map((f) => readFileSync(join(dir, f), "utf8"))
    .join("\n");
}

/** Slurm jobs of the cluster still queued or running (array tasks one a line). */
const squeue = () => spawnSync("squeue", ["-h", "-r", "-o", "%i %T %N"], { encoding: "utf8", env: env() }).stdout.trim();

/** Each trial id accepted exactly once across the workers, and every trial of the job among them. */
function acceptedOnce(id: string, trials: Trial[]): void {
  const accepted = [...workerLog(id).matchAll(/trial (\w+): \w+, accepted/g)].map((m) => m[1]);
  expect([...accepted].sort()).toEqual(trials.map((t) => t.id).sort());
}

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-slurm-home-"));
  work = mkdtempSync(join(tmpdir(), "evolve-slurm-work-"));
  if (!hasSlurm || !hasPodman || !isRoot) return;
  startedCluster = spawnSync("sh", ["-c", `kill -0 "$(cat ${SLURM_DIR}/pids/slurmctld.pid 2>/dev/null)" 2>/dev/null`]).status !== 0;
  const up = spawnSync("bash", [join(root, "scripts/slurm/up.sh")], { encoding: "utf8", env: { ...process.env, SLURM_DIR } });
  if (up.status !== 0) throw new Error(`scripts/slurm/up.sh failed: ${up.stderr}`);
});

afterAll(() => {
  if (!hasSlurm || !hasPodman || !isRoot) return;
  // a lost worker's boxes are not its coordinator's to remove (another node's engine): here, one host, the test does
  spawnSync("sh", ["-c", `podman ps -aq --filter label=dev.evolve.home | xargs -r podman inspect --format '{{.Id}} {{index .Config.Labels "dev.evolve.home"}}' | grep evolve-worker- | cut -d' ' -f1 | xargs -r podman rm -f`]);
  evolve(["gc"]);
  if (startedCluster) spawnSync("bash", [join(root, "scripts/slurm/down.sh")], { env: { ...process.env, SLURM_DIR } });
});

describe.skipIf(!hasSlurm || !hasPodman || !isRoot)("evolve run --executor slurm on a three-node Slurm (needs root, podman, slurm and munge)", () => {
  it("spreads the job over the three nodes: every trial exactly once, the same rewards as a local run", async () => {
    const tasks = makeTasks("spread", 3, 2);
    const r = evolve(["run", "-p", tasks, "--executor", "slurm", "-n", "3", "-k", "2"]);
    expect(r.code, r.stderr).toBe(0);
    const slurmJob = show(jobIdOf(r.stdout)!);
    expect(slurmJob.status).toBe("COMPLETED");
    expect(slurmJob.trials).toHaveLength(6);
    expect(slurmJob.trials.every((t) => t.status === "SCORED" && t.attempts?.length === 1)).toBe(true);
    acceptedOnce(slurmJob.id, slurmJob.trials);
    // three workers, one per node
    const nodes = new Set([...workerLog(slurmJob.id).matchAll(/slurm-\d+-\d+-(n\d): trial \w+: \w+, accepted/g)].map((m) => m[1]));
    expect(nodes).toEqual(new Set(["n1", "n2", "n3"]));

    const local = evolve(["run", "-p", tasks, "-n", "3"]);
    expect(local.code).toBe(0);
    const localJob = show(jobIdOf(local.stdout)!);
    expect(localJob.id).not.toBe(slurmJob.id);
    const rewards = (j: Job) => j.trials.map((t) => [t.task_name, t.rewards?.reward]).sort();
    // each attempt of a task scores as the local trial of that task did
    expect(rewards(slurmJob)).toEqual([...rewards(localJob), ...rewards(localJob)].sort());
    expect(localJob.trials.map((t) => t.rewards?.reward).sort()).toEqual([0, 1, 1]);
  });

  it("a node lost mid-job: its trial is re-queued and finished elsewhere, none twice; the lost worker's late report is refused", async () => {
    const tasks = makeTasks("node-loss", 3, 8);
    const run = start(["-p", tasks, "--executor", "slurm", "-n", "3", "-k", "2"]);
    const id = await until("the job's header line", () => jobIdOf(run.out()));
    // n2's worker has a trial: the node goes (slurmd killed) and its worker stops answering (frozen)
    const m = await until("a trial leased on n2", () => /slurm-\d+-\d+-n2: pid (\d+),[\s\S]*?-n2: trial (\w+): leased/.exec(workerLog(id)));
    const [workerPid, lostTrial] = [Number(m![1]), m![2]];
    const slurmdPid = Number(readFileSync(join(SLURM_DIR, "pids", "slurmd-n2.pid"), "utf8"));
    process.kill(slurmdPid, "SIGKILL");
    process.kill(workerPid, "SIGSTOP");
    // the lease expires and another node's worker takes the trial
    await until("the lost trial leased again", () => (workerLog(id).match(new RegExp(`trial ${lostTrial}: leased`, "g")) ?? []).length >= 2);
    process.kill(workerPid, "SIGCONT");
    await until("the lost worker refused", () => new RegExp(`-n2: trial ${lostTrial}: (lease lost|result refused) \\(lease_(expired|moved)\\)`).test(workerLog(id)));
    process.kill(workerPid, "SIGKILL");
    expect(await run.exited).toBe(0);
    const job = show(id);
    expect(job.status).toBe("COMPLETED");
    expect(job.trials.every((t) => t.status === "SCORED")).toBe(true);
    acceptedOnce(id, job.trials);
    const lost = job.trials.find((t) => t.id === lostTrial)!;
    expect(lost.attempts!.map((a) => a.status)).toEqual(["INTERRUPTED", "SCORED"]);
    expect(lost.attempts![0].ended_because).toMatch(/was lost \(its lease expired\)/);
    expect(workerLog(id)).not.toMatch(new RegExp(`-n2: trial ${lostTrial}: \\w+, accepted`));
    // the node comes back for the next tests
    const up = spawnSync("bash", [join(root, "scripts/slurm/up.sh")], { encoding: "utf8", env: { ...process.env, SLURM_DIR } });
    expect(up.status, up.stderr).toBe(0);
  });

  it("a worker killed outright: the node's epilog removes the boxes it left, and its trial is finished elsewhere", async () => {
    const tasks = makeTasks("killed", 2, 20);
    const run = start(["-p", tasks, "--executor", "slurm", "-n", "2"]);
    const id = await until("the job's header line", () => jobIdOf(run.out()));
    const boxesOf = (label: string) => spawnSync("podman", ["ps", "-aq", "--filter", `label=${label}`], { encoding: "utf8" }).stdout.trim();
    // a running trial's box, labelled with its worker and the Slurm job the worker runs in
    const worker = await until("a worker's box", () => {
      const ids = spawnSync("sh", ["-c", `podman ps -q --filter label=dev.evolve.job=${id} | xargs -r podman inspect --format '{{index .Config.Labels "dev.evolve.worker"}} {{index .Config.Labels "dev.evolve.worker-job"}}'`], { encoding: "utf8" }).stdout;
      const line = ids.split("\n").find((l) => new RegExp(`^slurm-\\d+-\\d+-n\\d \\d+$`).test(l.trim()));
      return line?.trim().split(" ") as [string, string] | undefined;
    });
    const [workerId, slurmJobId] = worker!;
    const pid = Number(new RegExp(`${workerId}: pid (\\d+),`).exec(workerLog(id))![1]);
    process.kill(pid, "SIGKILL");
    // its Slurm job ends with it; the epilog finds what it left by the job's label
    await until("the killed worker's boxes gone", () => boxesOf(`dev.evolve.worker-job=${slurmJobId}`) === "", 60_000);
    expect(boxesOf(`dev.evolve.worker=${workerId}`)).toBe("");
    expect(await run.exited).toBe(0);
    const job = show(id);
    expect(job.status).toBe("COMPLETED");
    expect(job.trials.every((t) => t.status === "SCORED")).toBe(true);
    acceptedOnce(id, job.trials);
  });

  it("job cancel stops the job's Slurm jobs (scancel) and settles its trials CANCELLED", async () => {
    const tasks = makeTasks("cancel", 2, 30);
    const run = start(["-p", tasks, "--executor", "slurm", "-n", "2"]);
    const id = await until("the job's header line", () => jobIdOf(run.out()));
    const slurmJob = await until("the submission line", () => /slurm job (\d+) submitted/.exec(run.err())?.[1]);
    await until("a trial leased", () => /: leased/.test(workerLog(id)));
    expect(squeue()).toMatch(new RegExp(`^${slurmJob}_\\d+ RUNNING`, "m"));
    expect(evolve(["job", "cancel", id]).code).toBe(0);
    await run.exited;
    expect(show(id).status).toBe("CANCELLED");
    expect(show(id).trials.every((t) => t.status === "CANCELLED")).toBe(true);
    await until("the Slurm jobs gone", () => !new RegExp(`^${slurmJob}_\\d+ (RUNNING|PENDING)`, "m").test(squeue()), 30_000);
  });

  it("the coordinator killed mid-job: job resume cancels the old workers and finishes the job, keeping the results that arrived", async () => {
    const tasks = makeTasks("coordinator-loss", 2, 3);
    // 4 trials on 2 workers: two rounds, so the first results arrive while the second round is still running
    const run = start(["-p", tasks, "--executor", "slurm", "-n", "2", "-k", "2"]);
    const id = await until("the job's header line", () => jobIdOf(run.out()));
    const oldSlurm = await until("the submission line", () => /slurm job (\d+) submitted/.exec(run.err())?.[1]);
    await until("a result accepted", () => / accepted/.test(workerLog(id)));
    run.child.kill("SIGKILL");
    await run.exited;
    const before = show(id);
    const kept = before.trials.filter((t) => t.status === "SCORED");
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(4);

    const resumed = evolve(["job", "resume", id]);
    expect(resumed.stderr).not.toMatch(/error\[/);
    expect(resumed.code).toBe(0);
    const after = show(id);
    expect(after.status).toBe("COMPLETED");
    expect(after.trials.every((t) => t.status === "SCORED")).toBe(true);
    // what had arrived is kept as it was: not run again
    for (const t of kept) expect(after.trials.find((x) => x.id === t.id)!.finished_at).toBe(t.finished_at);
    expect(squeue()).not.toMatch(new RegExp(`^${oldSlurm}_\\d+ RUNNING`, "m"));
  });
});
