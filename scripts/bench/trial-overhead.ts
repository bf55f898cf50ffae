/**
 * Trial overhead benchmark (`bun scripts/bench/trial-overhead.ts`), printing one JSON document:
 *
 * - `nop_trial`: wall time of one `nop` trial with a trivial verifier through evolve's engine (REST driver), from
 *   the trial's start to its settled record (container removal happens after, off the critical path);
 * - `cli_floor`: in the same run, the same image driven by the engine's CLI the way a shell script would do a bare
 *   trial: `podman run -d`, two `exec`, `cp` out, `rm -f`;
 * - `concurrency`: N trials whose agent step is `sleep 2`, at `-n 4` and serially (speed-up = serial / parallel);
 * - `memory`: peak RSS of `evolve run` for a small and a larger job of nop trials (flat = the ratio stays near 1).
 *
 * Goals: nop trial ≤ 0.5× the CLI floor; the sleeping trials ≥ 3× faster at -n 4; memory flat. The script never
 * fails on a missed goal (timings depend on the machine); it exits 2 only when it cannot run at all.
 *
 * Usage: bun scripts/bench/trial-overhead.ts [--runs 10] [--sleepers 20] [--small 4] [--large 16] [--image debian:bookworm-slim]
 *        [--engine podman|docker]   (docker: DOCKER_HOST names the daemon; the floor then uses the docker CLI)
 */
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { importTasks } from "../../engine/dataset.ts";
import { openEngine } from "../../engine/engine-choice.ts";
import { createJob, runJob, type JobConfig } from "../../engine/job/job.ts";
import { openStore } from "../../engine/store/index.ts";
import { runTrial, settleRemovals } from "../../engine/trial/run.ts";
import { quantile } from "./startup.ts";

const ROOT = resolve(import.meta.dir, "../..");
const round = (n: number) => Math.round(n * 100) / 100;

function summary(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  return { median_ms: round(quantile(s, 0.5)), p90_ms: round(quantile(s, 0.9)), min_ms: round(s[0]), runs: s.length };
}

/** A tiny task: the verifier writes 1; the reference solution sleeps `sleep` seconds first. */
function writeTask(dir: string, image: string, sleep: number): string {
  mkdirSync(join(dir, "environment"), { recursive: true });
  mkdirSync(join(dir, "tests"), { recursive: true });
  mkdirSync(join(dir, "solution"), { recursive: true });
  writeFileSync(join(dir, "task.toml"), `[task]\nname = "bench/${sleep ? "sleep" : "nop"}"\n\n[environment]\nnetwork_mode = "no-network"\n`);
  writeFileSync(join(dir, "instruction.md"), "Do nothing.\n");
  writeFileSync(join(dir, "environment", "Dockerfile"), `FROM ${image}\nWORKDIR /app\n`);
  writeFileSync(join(dir, "tests", "test.sh"), "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n");
  writeFileSync(join(dir, "solution", "solve.sh"), `#!/bin/bash\nsleep ${sleep}\n`);
  for (const f of ["tests/test.sh", "solution/solve.sh"]) chmodSync(join(dir, f), 0o755);
  return dir;
}

let CLI: "podman" | "docker" = "podman";

function podman(args: string[]): string {
  const r = spawnSync(CLI, args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${CLI} ${args.join(" ")}: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/** The shell-script way: podman run -d, two exec, cp out, rm -f. */
function cliFloor(image: string, runs: number, scratch: string): number[] {
  const out: number[] = [];
  for (let i = 0; i <= runs; i++) {
    const t0 = performance.now();
    const id = podman(["run", "-d", "--network=none", image, "sleep", "infinity"]);
    podman(["exec", id, "sh", "-c", "true"]);
    podman(["exec", id, "sh", "-c", "echo 1 > /tmp/reward.txt"]);
    podman(["cp", `${id}:/tmp/reward.txt`, join(scratch, "reward.txt")]);
    podman(CLI === "podman" ? ["rm", "-f", "-t", "0", id] : ["rm", "-f", id]);
    if (i > 0) out.push(performance.now() - t0); // the first run warms caches
  }
  return out;
}

/** Peak RSS (KiB) of a child process, sampled from /proc every 20 ms. */
function peakRss(argv: string[], env: NodeJS.ProcessEnv): Promise<{ peak_kib: number; code: number | null }> {
  return new Promise((done) => {
    const child = spawn(argv[0], argv.slice(1), { env, stdio: "ignore" });
    let peak = 0;
    const tick = setInterval(() => {
      try {
        const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"));
        if (m) peak = Math.max(peak, Number(m[1]));
      } catch {
        /* exited between samples */
      }
    }, 20);
    child.on("exit", (code) => {
      clearInterval(tick);
      done({ peak_kib: peak, code });
    });
  });
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      runs: { type: "string", default: "10" },
      sleepers: { type: "string", default: "20" },
      small: { type: "string", default: "4" },
      large: { type: "string", default: "16" },
      image: { type: "string", default: "debian:bookworm-slim" },
      engine: { type: "string", default: "podman" },
    },
  });
  const runs = Number(values.runs);
  const image = values.image!;
  if (values.engine !== "podman" && values.engine !== "docker") throw new Error("--engine is podman or docker");
  CLI = values.engine;
  if (spawnSync(CLI, ["image", "inspect", image], { stdio: "ignore" }).status !== 0) {
    console.error(`error[bench_image_missing]: ${image} is not present locally; run scripts/ci/base-images.sh`);
    return 2;
  }
  const scratch = mkdtempSync(join(tmpdir(), "evolve-bench-trial-"));
  const home = join(scratch, "home");
  const store = openStore(home);
  const engine = await openEngine({ kind: CLI, home });
  try {
    const nopTask = (await importTasks(store, home, writeTask(join(scratch, "nop"), image, 0), { secrets: new Set() })).tasks[0];
    const sleepTask = (await importTasks(store, home, writeTask(join(scratch, "sleep"), image, 2), { secrets: new Set() })).tasks[0];
    const config = (task: typeof nopTask, agent: string, attempts: number, concurrency: number): JobConfig => ({
      agent: { name: agent },
      attempts,
      concurrency,
      timeout_multiplier: 1,
      secret_names: [],
      force_build: false,
      max_retries: 0,
      source: { kind: "path", path: task.dir },
      tasks: [{ name: task.name, digest: task.digest }],
    });
    const deps = { store, engine, home, runTrial, secrets: {} };

    // nop trials one at a time; the first builds the image and is not counted
    const nop: number[] = [];
    for (let i = 0; i <= runs; i++) {
      const job = createJob(store, config(nopTask, "nop", 1, 1));
      const t0 = performance.now();
      const [t] = await runJob(job.id, deps);
      if (t.status !== "SCORED") throw new Error(`nop trial ended ${t.status}: ${t.exception?.message}`);
      if (i > 0) nop.push(performance.now() - t0);
      await settleRemovals();
    }
    const floor = cliFloor(image, runs, scratch);

    const sleepers = Number(values.sleepers);
    const timeJob = async (concurrency: number) => {
      const job = createJob(store, config(sleepTask, "oracle", sleepers, concurrency));
      const t0 = performance.now();
      const trials = await runJob(job.id, deps);
      const ms = performance.now() - t0;
      await settleRemovals();
      return { ms: round(ms), scored: trials.filter((t) => t.status === "SCORED").length };
    };
    const parallel = await timeJob(4);
    const serial = await timeJob(1);

    // peak memory of the CLI for a small and a larger nop job
    const cli = [join(ROOT, "node_modules/.bin/bun"), join(ROOT, "main.ts")];
    const env = { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1", EVOLVE_ENGINE: CLI };
    const memSmall = await peakRss([...cli, "run", "-p", join(scratch, "nop"), "-a", "nop", "-k", values.small!, "-n", "4"], env);
    const memLarge = await peakRss([...cli, "run", "-p", join(scratch, "nop"), "-a", "nop", "-k", values.large!, "-n", "4"], env);

    const nopS = summary(nop);
    const floorS = summary(floor);
    const ratio = round(nopS.median_ms / floorS.median_ms);
    const speedup = round(serial.ms / parallel.ms);
    const memRatio = round(memLarge.peak_kib / Math.max(1, memSmall.peak_kib));
    console.log(
      JSON.stringify(
        {
          engine: (await engine.info()).kind,
          image,
          nop_trial: nopS,
          cli_floor: { ...floorS, steps: `${CLI} run -d, exec ×2, cp, rm -f` },
          nop_to_floor_ratio: ratio,
          concurrency: { trials: sleepers, agent_sleep_sec: 2, n4_ms: parallel.ms, serial_ms: serial.ms, speedup, scored: [parallel.scored, serial.scored] },
          memory: { small_trials: Number(values.small), small_peak_kib: memSmall.peak_kib, large_trials: Number(values.large), large_peak_kib: memLarge.peak_kib, ratio: memRatio },
          goals: { nop_to_floor_ratio_max: 0.5, speedup_min: 3, memory_ratio_max: 1.25 },
          goals_met: { nop_trial: ratio <= 0.5, concurrency: speedup >= 3, memory: memRatio <= 1.25 },
        },
        null,
        2,
      ),
    );
    return 0;
  } finally {
    await settleRemovals();
    await engine.close();
    await store.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (import.meta.main) process.exit(await main());
