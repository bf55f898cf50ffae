/**
 * Slurm executor throughput (issue 24 §2): the same job of sleeping trials run with `--executor slurm` on one worker
 * (one node busy) and on N workers (N nodes), in one bench run, on the three-node Slurm of scripts/slurm/up.sh.
 * Prints one JSON document: each run's wall time and trials per minute, the speed-up and `goal_met` (≥ 0.8 × N).
 * Every node is this host: its cores and its podman are shared by the nodes, so the figure measures evolve's
 * coordination overhead against the work, not a real cluster's scaling. It never fails on a slow result.
 *
 * Usage: bun scripts/bench/slurm.ts [--trials 9] [--sleep 10] [--nodes 3]   (root; SLURM_DIR as for up.sh)
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

const ROOT = resolve(import.meta.dir, "../..");
const { values } = parseArgs({ options: { trials: { type: "string", default: "9" }, sleep: { type: "string", default: "10" }, nodes: { type: "string", default: "3" } } });
const trials = Number(values.trials);
const sleep = Number(values.sleep);
const nodes = Number(values.nodes);
const SLURM_DIR = process.env.SLURM_DIR ?? "/tmp/evolve-slurm";
const home = mkdtempSync(join(tmpdir(), "evolve-bench-slurm-home-"));
const work = mkdtempSync(join(tmpdir(), "evolve-bench-slurm-work-"));
const env = { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1", SLURM_CONF: join(SLURM_DIR, "slurm.conf") };
const evolve = (args: string[]) => spawnSync(join(ROOT, "node_modules/.bin/bun"), [join(ROOT, "main.ts"), ...args], { cwd: work, env, encoding: "utf8" });

const up = spawnSync("bash", [join(ROOT, "scripts/slurm/up.sh")], { env: { ...process.env, SLURM_DIR, SLURM_NODES: String(nodes) }, encoding: "utf8" });
if (up.status !== 0) {
  process.stderr.write(`scripts/slurm/up.sh failed:\n${up.stderr}`);
  process.exit(2);
}
// one task per trial so no two trials share a task's image build order; all built once by a warm-up run
const tasks = join(work, "tasks");
for (let i = 0; i < trials; i++) {
  const t = join(tasks, `t${i}`);
  if (evolve(["task", "init", t]).status !== 0) process.exit(2);
  const solve = join(t, "solution", "solve.sh");
  writeFileSync(solve, readFileSync(solve, "utf8").replace("set -euo pipefail\n", `set -euo pipefail\nsleep ${sleep}\n`));
}
evolve(["run", "-p", tasks, "-l", "1", "--jobs-dir", join(work, "jobs")]);

function timed(workers: number) {
  const t0 = performance.now();
  const r = evolve(["run", "-p", tasks, "--executor", "slurm", "-n", String(workers), "--jobs-dir", join(work, "jobs")]);
  const s = (performance.now() - t0) / 1000;
  return { workers, exit: r.status, wall_s: Math.round(s * 10) / 10, trials_per_min: Math.round((trials / s) * 600) / 10 };
}
const one = timed(1);
const many = timed(nodes);
const speedup = Math.round((one.wall_s / many.wall_s) * 100) / 100;
console.log(JSON.stringify({ trials, sleep_s: sleep, nodes, one_node: one, n_nodes: many, speedup, goal: 0.8 * nodes, goal_met: speedup >= 0.8 * nodes }, null, 2));
