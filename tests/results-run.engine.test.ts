/**
 * A job run as the README shows it leaves a Harbor job folder (issue 22 §1, §6): through the real CLI on real
 * podman, `evolve run -p <task> -a oracle --job-name … -o DIR` writes DIR/<job name>/ whose files have the fields
 * of Harbor's models (tests/support/harbor-models.ts) and whose trial says what `trial show` says; `job export`
 * rebuilds the same files from the store; `[jobs] folder = false` writes none.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateTrajectory } from "../engine/trace/atif-validate.ts";
import { checkModel, checkTrialConfig, checkTrialResult, JOB_CONFIG, JOB_RESULT, JOB_STATS, type Obj } from "./support/harbor-models.ts";

const root = resolve(__dirname, "..");
const bun = join(root, "node_modules/.bin/bun");
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;
let home: string;
let work: string;

function evolve(args: string[]) {
  const r = spawnSync(bun, [join(root, "main.ts"), ...args], { cwd: work, encoding: "utf8", env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, timeout: 240_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const readJson = (p: string) => JSON.parse(readFileSync(p, "utf8")) as Obj;

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-results-run-"));
  work = join(home, "work");
  spawnSync("mkdir", ["-p", work]);
});
afterAll(() => {
  if (hasPodman) evolve(["gc"]);
  rmSync(home, { recursive: true, force: true });
});

describe.skipIf(!hasPodman)("evolve run writes a Harbor job folder (needs podman and debian:bookworm-slim)", () => {
  it("the README's run leaves a job folder Harbor's models load, rebuilt the same by job export", () => {
    const r = evolve(["run", "-p", join(root, "fixtures/tasks/valid/minimal"), "-a", "oracle", "--job-name", "readme-example", "-o", "out-jobs"]);
    expect(r.code, r.stderr).toBe(0);
    const dir = join(work, "out-jobs", "readme-example");
    expect(r.stdout).toContain(`job folder: ${join("out-jobs", "readme-example")}/`);
    checkModel(readJson(join(dir, "config.json")), JOB_CONFIG, "config.json");
    const res = checkModel(readJson(join(dir, "result.json")), JOB_RESULT, "result.json");
    expect(checkModel(res.stats, JOB_STATS, "stats")).toMatchObject({ n_completed_trials: 1, n_errored_trials: 0, n_pending_trials: 0, n_running_trials: 0 });
    expect((res.x_evolve as Obj).status).toBe("COMPLETED");
    const trials = readdirSync(dir).filter((n) => n.includes("__"));
    expect(trials).toHaveLength(1);
    expect(trials[0]).toMatch(/^minimal__[0-9a-z]{7}$/);
    const td = join(dir, trials[0]);
    checkTrialConfig(readJson(join(td, "config.json")), "trial config.json");
    const tr = checkTrialResult(readJson(join(td, "result.json")), "trial result.json");
    const trialId = (tr.x_evolve as Obj).trial_id as string;
    const show = JSON.parse(evolve(["trial", "show", trialId, "--json"]).stdout) as Obj;
    expect(tr.verifier_result).toEqual({ rewards: show.rewards });
    expect((tr.x_evolve as Obj).status).toBe(show.status);
    for (const f of ["verifier/test-stdout.txt", "verifier/reward.json", "trial.log", "lock.json"]) expect(existsSync(join(td, f)), f).toBe(true);
    expect(existsSync(join(td, "exception.txt"))).toBe(false);
    if (existsSync(join(td, "agent", "trajectory.json"))) expect(validateTrajectory(readJson(join(td, "agent", "trajectory.json")))).toEqual([]);

    // rebuilt from the store: the same trial files (result.json's trial_uri points at the new folder)
    const ex = evolve(["job", "export", "readme-example", "-o", "exported", "--json"]);
    expect(ex.code, ex.stderr).toBe(0);
    const again = join(work, "exported", "readme-example", trials[0]);
    expect(readFileSync(join(again, "verifier", "reward.json"), "utf8")).toBe(readFileSync(join(td, "verifier", "reward.json"), "utf8"));
    expect(readJson(join(again, "result.json")).verifier_result).toEqual(tr.verifier_result);
  });

  it("writes no folder with [jobs] folder = false", () => {
    writeFileSync(join(home, "config.toml"), "[jobs]\nfolder = false\n");
    try {
      const r = evolve(["run", "-p", join(root, "fixtures/tasks/valid/minimal"), "-a", "oracle", "-o", "off-jobs"]);
      expect(r.code, r.stderr).toBe(0);
      expect(existsSync(join(work, "off-jobs"))).toBe(false);
      expect(r.stdout).not.toContain("job folder:");
    } finally {
      rmSync(join(home, "config.toml"));
    }
  });
});
