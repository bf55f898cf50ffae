/**
 * Start-up benchmark for the single binary (`npm run bench:startup`, i.e. `bun scripts/bench/startup.ts`).
 *
 * Prints one JSON document: wall time (median, p90, min, in ms) of `dist/evolve --version`, `dist/evolve --help`,
 * and, as the baseline measured in the same run, Bun executing an empty script. Ratios against the baseline show
 * what evolve itself adds; `goal_met` says whether `--version` is within the 60 ms goal. It never fails on a slow
 * result (exit 2 only when it cannot run at all): timings depend on the machine, so nothing asserts on them.
 *
 * Usage: bun scripts/bench/startup.ts [--runs N] [--binary dist/evolve]
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

const ROOT = resolve(import.meta.dir, "../..");
/** `--version` must start within this many milliseconds (median). */
export const VERSION_GOAL_MS = 60;

/** Summary of one command's wall times, in milliseconds. */
export interface Timing {
  command: string;
  median_ms: number;
  p90_ms: number;
  min_ms: number;
  runs: number;
}

/** The value at quantile q (0..1) of an ascending list, nearest-rank. */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i];
}

const round = (n: number): number => Math.round(n * 100) / 100;

/** Runs argv `runs` times (after one untimed warm-up that fills the page cache) and summarises the wall times. */
export function time(argv: string[], runs: number, env: NodeJS.ProcessEnv): Timing {
  const once = (): number => {
    const t0 = performance.now();
    const r = spawnSync(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "pipe"], env });
    const ms = performance.now() - t0;
    if (r.error || r.status !== 0) {
      const why = r.error?.message ?? `exit ${r.status}: ${r.stderr.toString().trim().split("\n")[0]}`;
      throw new Error(`${argv.join(" ")} failed: ${why}`);
    }
    return ms;
  };
  once();
  const samples = Array.from({ length: runs }, once).sort((a, b) => a - b);
  return {
    command: argv.map((a) => (a.startsWith(ROOT) ? a.slice(ROOT.length + 1) : a)).join(" "),
    median_ms: round(quantile(samples, 0.5)),
    p90_ms: round(quantile(samples, 0.9)),
    min_ms: round(samples[0]),
    runs,
  };
}

function main(): number {
  const { values } = parseArgs({
    options: {
      runs: { type: "string", default: "25" },
      binary: { type: "string", default: "dist/evolve" },
    },
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) {
    console.error(`error[bench_usage]: --runs must be a positive integer, got ${values.runs}`);
    console.error("hint: bun scripts/bench/startup.ts --runs 25");
    return 2;
  }
  const binary = resolve(ROOT, values.binary!);
  if (!existsSync(binary)) {
    console.error(`error[binary_missing]: ${binary} does not exist`);
    console.error("hint: run npm run build first");
    return 2;
  }
  const scratch = mkdtempSync(join(tmpdir(), "evolve-bench-"));
  try {
    const empty = join(scratch, "empty.js");
    writeFileSync(empty, "");
    // A private EVOLVE_HOME so the benchmark can never touch the user's store.
    const env = { ...process.env, EVOLVE_HOME: join(scratch, "home"), NO_COLOR: "1" };
    const baseline = time([process.execPath, empty], runs, env);
    const version = time([binary, "--version"], runs, env);
    const help = time([binary, "--help"], runs, env);
    const ratio = (t: Timing): number => round(t.median_ms / baseline.median_ms);
    const report = {
      runs,
      bun: Bun.version,
      baseline,
      version,
      help,
      ratio_to_baseline: { version: ratio(version), help: ratio(help) },
      goal: { version_median_ms: VERSION_GOAL_MS },
      goal_met: version.median_ms <= VERSION_GOAL_MS,
    };
    console.log(JSON.stringify(report, null, 2));
    return 0;
  } catch (e) {
    console.error(`error[bench_failed]: ${(e as Error).message}`);
    console.error("hint: check that the binary runs: dist/evolve --version");
    return 2;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (import.meta.main) process.exit(main());
