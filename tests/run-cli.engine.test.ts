/**
 * Jobs end to end through the real CLI (`bun main.ts`) on real podman: run, check, job list/show/resume/cancel,
 * trial show, and crash safety (SIGKILL of `evolve run`, then `job resume` finishes every trial exactly once).
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectDocumented } from "./support/json-docs.ts";

const root = resolve(__dirname, "..");
const bun = join(root, "node_modules/.bin/bun");
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;
let home: string;
let work: string;

function evolve(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(bun, [join(root, "main.ts"), ...args], {
    cwd: work,
    encoding: "utf8",
    env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1", ...env },
    timeout: 240_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A task from `task init`, optionally with a slower reference solution. */
function makeTask(name: string, solveSleep = 0): string {
  const dir = join(work, name);
  expect(evolve(["task", "init", dir]).code).toBe(0);
  if (solveSleep > 0) {
    const solve = join(dir, "solution", "solve.sh");
    writeFileSync(solve, readFileSync(solve, "utf8").replace("set -euo pipefail\n", `set -euo pipefail\nsleep ${solveSleep}\n`));
  }
  return dir;
}

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-run-home-"));
  work = mkdtempSync(join(tmpdir(), "evolve-run-work-"));
});

afterAll(() => {
  if (hasPodman) evolve(["gc"]);
});

describe.skipIf(!hasPodman)("evolve run (needs podman and the local debian:bookworm-slim image)", () => {
  it("records --agent-root (from a run config, relative to it) in the job config, config.json and result.json, and copies it into the trial", () => {
    const task = makeTask("with-agent-root");
    // a home of its own: the tests below count the jobs of theirs
    const own = { EVOLVE_HOME: mkdtempSync(join(tmpdir(), "evolve-run-root-home-")) };
    const cfg = join(work, "agent-root-cfg");
    mkdirSync(join(cfg, ".agent", "knowledge"), { recursive: true });
    writeFileSync(join(cfg, ".agent", "knowledge", "a.md"), "know a\n");
    writeFileSync(join(cfg, "run.toml"), `path = "${task}"\nagent = "oracle"\nagent-root = ".agent"\njob-name = "with-root"\n`);
    const r = evolve(["run", "-c", join(cfg, "run.toml")], own);
    expect(r.code, r.stderr).toBe(0);
    const show = JSON.parse(evolve(["job", "show", "with-root", "--json"], own).stdout);
    expect(show.config.agent).toEqual({ name: "oracle", root: join(cfg, ".agent") });
    const trial = JSON.parse(evolve(["trial", "show", show.trials[0].id, "--json"], own).stdout);
    expect(JSON.parse(readFileSync(join(trial.dir, "config.json"), "utf8")).agent.root).toBe(join(cfg, ".agent"));
    expect(JSON.parse(readFileSync(join(trial.dir, "result.json"), "utf8")).agent_info.agent_root).toBe(join(cfg, ".agent"));
    expect(readFileSync(join(trial.dir, "agent-root", "knowledge", "a.md"), "utf8")).toBe("know a\n");
    rmSync(own.EVOLVE_HOME, { recursive: true, force: true });
  });

  it("runs the oracle to a reward of 1 and records job and trial", () => {
    const task = makeTask("hello");
    const r = evolve(["run", "-p", task, "-a", "oracle", "--job-name", "first-run"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/SCORED/);
    expect(r.stdout).toMatch(/mean reward 1/);
    expect(r.stdout).toMatch(/^spend {2}-$/m);
    expect(r.stdout).toContain(`trial folders: ${join(home, "trials")}/<trial id>/`);

    const jobs = JSON.parse(evolve(["job", "list", "--json"]).stdout);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ kind: "run", name: "first-run", agent: "oracle" });
    expect(JSON.parse(evolve(["job", "show", "first-run", "--json"]).stdout).id).toBe(jobs[0].id);
    const show = JSON.parse(evolve(["job", "show", jobs[0].id, "--json"]).stdout);
    expect(show).toMatchObject({ status: "COMPLETED", mean_reward: 1, n_trials: 1, counts: { SCORED: 1 }, pass_at_k: { "1": 1 } });

    const trial = JSON.parse(evolve(["trial", "show", show.trials[0].id, "--json"]).stdout);
    expect(trial).toMatchObject({ status: "SCORED", rewards: { reward: 1 }, agent: "oracle" });
    expect(trial.attempts).toEqual([{ n: 1, started_at: trial.started_at, ended_at: trial.finished_at, status: "SCORED", ended_because: "scored" }]);
    expect(existsSync(join(trial.dir, "result.json"))).toBe(true);
    expect(existsSync(join(trial.dir, "verifier", "test-stdout.txt"))).toBe(true);
    expect(existsSync(join(trial.dir, "exception.txt"))).toBe(false);
    const human = evolve(["trial", "show", show.trials[0].id]);
    expect(human.stdout).toMatch(/status\s+SCORED/);
    // the oracle calls no model: nothing was measured, so `-` (README, Budgets), with the gateway's count of no calls
    expect(human.stdout).toMatch(/^ {2}spend {7}- {2}\(0 calls\)$/m);
    expect(human.stdout).not.toContain("$0.0000");
    expect(evolve(["job", "show", show.id]).stdout).toMatch(/^spend {2}-$/m);
  });

  it("--otlp sends each trial's trace as it settles; an endpoint that cannot be reached only warns, and the trial still scores", () => {
    const task = makeTask("otlp");
    // a home of its own: the tests below count the jobs of theirs
    const own = { EVOLVE_HOME: mkdtempSync(join(tmpdir(), "evolve-run-otlp-home-")) };
    const file = join(work, "spans.jsonl");
    const r = evolve(["run", "-p", task, "-a", "oracle", "-k", "2", "--otlp", file], own);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    // JSON lines, one request (one trial's trace) each, with the verifier's reward as an evaluation event
    const sent = readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l).resourceSpans[0].scopeSpans[0].spans[0]);
    expect(sent).toHaveLength(2);
    const trials = JSON.parse(evolve(["job", "list", "--json"], own).stdout)[0];
    const ids = (JSON.parse(evolve(["job", "show", trials.id, "--json"], own).stdout).trials as { id: string }[]).map((t) => t.id).sort();
    expect(sent.map((s) => s.attributes.find((a: { key: string }) => a.key === "evolve.trial.id").value.stringValue).sort()).toEqual(ids);
    for (const s of sent) {
      expect(s.name).toBe("invoke_agent oracle");
      expect(s.events).toEqual([expect.objectContaining({ name: "gen_ai.evaluation.result" })]);
    }
    const bad = evolve(["run", "-p", task, "-a", "oracle", "--otlp", "http://127.0.0.1:9", "--json"], own);
    expect(bad.code, bad.stderr).toBe(0);
    expect(bad.stderr).toContain("error[otlp_unreachable]");
    expect(bad.stdout).toContain('"SCORED"');
  });

  it("doctor finds the engine ready; an engine that is not there is a one-line environment error", () => {
    const r = evolve(["doctor", "--json"]);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.ok).toBe(true);
    expectDocumented("doctor", [report]);
    expect(report.checks.map((c: { name: string }) => c.name)).toEqual(expect.arrayContaining(["network isolation", "build"]));
    const docker = evolve(["run", "-p", join(work, "hello"), "--engine", "docker"], { DOCKER_HOST: `unix://${join(work, "no-docker.sock")}`, PATH: process.env.PATH! });
    expect(docker.code).toBe(2);
    expect(docker.stderr).toMatch(/^error\[engine_(unavailable|not_found)\]/);
    expect(evolve(["run", "-p", join(work, "hello"), "--engine", "lxc"]).stderr).toMatch(/^error\[usage\]/);
  });

  it("scores nop with 0 (a real zero), runs k attempts, and streams JSON lines", () => {
    const task = makeTask("hello-nop");
    const r = evolve(["run", "-p", task, "-a", "nop", "-k", "2", "-n", "2", "--json"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    const settled = lines.filter((l) => l.kind === "trial_settled");
    expect(settled).toHaveLength(2);
    expect(settled.every((l) => l.trial.status === "SCORED" && l.trial.rewards.reward === 0)).toBe(true);
    const summary = lines.at(-1);
    expect(summary.kind).toBe("job_summary");
    expect(summary.summary).toMatchObject({ mean_reward: 0, n_trials: 2, pass_at_k: { "1": 0, "2": 0 } });
    expect(lines.filter((l) => l.kind === "phase").every((l) => typeof l.trial_id === "string")).toBe(true);
    expectDocumented("run", lines);
  });

  it("check proves a task solvable, and names one that is not", () => {
    const good = makeTask("solvable");
    const ok = evolve(["check", "-p", good]);
    expect(ok.code).toBe(0);
    // without a TTY the run is never silent: a line when the trial starts and one when it settles, with its time
    expect(ok.stdout).toMatch(/^started local\/solvable \S+$/m);
    expect(ok.stdout).toMatch(/^SCORED local\/solvable \S+ reward 1\.000 \(\S+s\)$/m);
    const checks = JSON.parse(evolve(["job", "list", "--kind", "check", "--json"]).stdout);
    expect(checks).toHaveLength(1);
    expect(checks[0]).toMatchObject({ kind: "check", agent: "oracle", status: "COMPLETED" });
    const bad = makeTask("unsolvable");
    writeFileSync(join(bad, "solution", "solve.sh"), "#!/bin/bash\necho 'wrong' > /app/hello.txt\n");
    const r = evolve(["check", "-p", bad, "--json"]);
    expect(r.code).toBe(1);
    const doc = JSON.parse(r.stdout);
    expect(doc.ok).toBe(false);
    expect(doc.tasks[0]).toMatchObject({ solvable: false, status: "SCORED", reward: 0 });
    expectDocumented("check", [doc]);
  });

  it("check says a task without a reference solution has none, and neither builds nor verifies it", () => {
    const task = join(root, "fixtures", "tasks", "trials", "no-solution");
    const r = evolve(["check", "-p", task]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/SolutionNotFoundError: no reference solution: the task has no solution\/solve\.sh/);
    expect(r.stdout).toMatch(/1 task: 0 solvable, 1 not/);
    const doc = JSON.parse(evolve(["check", "-p", task, "--json"]).stdout);
    expect(doc.tasks[0]).toMatchObject({ solvable: false, status: "INFRASTRUCTURE_ERROR", reward: null, exception: expect.stringMatching(/^SolutionNotFoundError: no reference solution/) });
    // deterministic: the job's automatic retries leave it alone, and nothing past prepare ran
    const trial = JSON.parse(evolve(["trial", "show", doc.tasks[0].trial_id, "--json"]).stdout);
    expect(trial.attempt ?? 1).toBe(1);
    expect(Object.keys(trial.phase_timings ?? {})).not.toContain("build");
  });

  it("runs every task of a folder when two share a name, told apart by path, with a warning", () => {
    const folder = join(root, "fixtures", "datasets", "same-name");
    const r = evolve(["run", "-p", folder, "-a", "oracle", "-n", "2"]);
    expect(r.stderr).toBe("warning: 2 tasks are named evolve-fixtures/same-name (first, second); all run, told apart by path\n");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/SCORED evolve-fixtures\/same-name \(first\) .* reward 1/);
    expect(r.stdout).toMatch(/SCORED evolve-fixtures\/same-name \(second\) .* reward 1/);
    const ids = [...r.stdout.matchAll(/^SCORED \S+ \(\w+\) (\S+)/gm)].map((m) => m[1]);
    expect(ids).toHaveLength(2);
    const trials = ids.map((id) => JSON.parse(evolve(["trial", "show", id, "--json"]).stdout));
    expect(trials.map((t: { task_path: string }) => t.task_path).sort()).toEqual(["first", "second"]);
    expect(new Set(trials.map((t: { task_digest: string }) => t.task_digest)).size).toBe(2);
    // a dataset's tasks are listed by name, so publishing the same folder is still refused
    const pub = evolve(["dataset", "publish", folder, "--name", "same", "--version", "1"]);
    expect(pub.code).not.toBe(0);
    expect(pub.stderr).toMatch(/^error\[dataset_task_duplicate\]: two tasks are named evolve-fixtures\/same-name/);
  });

  it("refuses a run whose secret is not in the environment, before starting anything", () => {
    const task = makeTask("needs-secret");
    const r = evolve(["run", "-p", task, "--secret", "EVOLVE_TEST_UNSET_SECRET"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[secret_not_attached\]/);
  });

  it("refuses a run of an invalid task and runs nothing", () => {
    const task = makeTask("bad-os");
    const toml = join(task, "task.toml");
    writeFileSync(toml, readFileSync(toml, "utf8").replace("[environment]\n", '[environment]\nos = "windows"\n'));
    const before = JSON.parse(evolve(["job", "list", "--json"]).stdout).length;
    const r = evolve(["run", "-p", task]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/os_unsupported/);
    expect(r.stderr).toMatch(/^error\[task_invalid\]/);
    expect(JSON.parse(evolve(["job", "list", "--json"]).stdout)).toHaveLength(before);
  });

  /** Starts `evolve run --json`, SIGKILLs it once `killWhen` matches its output, and returns the job. */
  async function runAndKill(task: string, killWhen: RegExp): Promise<{ id: string; status: string }> {
    const child = spawn(bun, [join(root, "main.ts"), "run", "-p", task, "-k", "3", "-n", "2", "--json"], {
      cwd: work,
      env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let seen = "";
    child.stdout.on("data", (b) => (seen += b));
    await new Promise<void>((done, fail) => {
      const t0 = Date.now();
      const tick = setInterval(() => {
        if (killWhen.test(seen) || Date.now() - t0 > 120_000) {
          clearInterval(tick);
          child.kill("SIGKILL");
          if (killWhen.test(seen)) done();
          else fail(new Error(`never saw ${killWhen} within 120 s`));
        }
      }, 20);
    });
    await new Promise((r) => child.on("exit", r));
    const jobs = JSON.parse(evolve(["job", "list", "--json"]).stdout);
    return jobs.find((j: { source: string }) => j.source === task);
  }

  // Kill points: before any box exists, with boxes booted, mid-verification, and after a trial settled.
  const killPoints: [string, RegExp][] = [
    ["as the job starts", /"kind":"job"/],
    ["once a box has booted", /"phase":"install"/],
    ["while a verifier runs", /"phase":"verify"/],
    ["after a trial settled", /"trial_settled"/],
  ];
  for (const [when, pattern] of killPoints) {
    it(`SIGKILLed ${when}, the job finishes on resume with every trial exactly once and gc leaves no container`, async () => {
      const task = makeTask(`slow-${when.replace(/\W+/g, "-")}`, 2);
      const job = await runAndKill(task, pattern);
      expect(job.status).toBe("INTERRUPTED");
      const before = JSON.parse(evolve(["job", "show", job.id, "--json"]).stdout);
      expect(before.trials).toHaveLength(3);
      const settledBefore = before.trials.filter((t: { status: string }) => t.status === "SCORED");
      // the interrupted job's unsettled trials show the time they ran until the kill, not a clock that keeps going
      if (before.trials.some((t: { status: string; started_at?: string }) => t.status === "RUNNING" && t.started_at)) {
        expect(evolve(["job", "show", job.id]).stdout).toMatch(/\S+s \(interrupted\)/);
      }

      const resumed = evolve(["job", "resume", job.id]);
      expect(resumed.code).toBe(0);
      const after = JSON.parse(evolve(["job", "show", job.id, "--json"]).stdout);
      expect(after.status).toBe("COMPLETED");
      expect(after.trials.map((t: { id: string }) => t.id).sort()).toEqual(before.trials.map((t: { id: string }) => t.id).sort());
      expect(after.trials.every((t: { status: string; rewards: { reward: number } }) => t.status === "SCORED" && t.rewards.reward === 1)).toBe(true);
      // the trials settled before the kill were kept as they were, not run again
      for (const b of settledBefore) {
        expect(after.trials.find((t: { id: string }) => t.id === b.id).updated_at).toBe(b.updated_at);
      }
      const noop = evolve(["job", "resume", job.id.slice(0, 20), "--json"]); // nothing left to run; a prefix of the id
      expect(noop.code).toBe(0);
      expectDocumented("job resume", noop.stdout.trim().split("\n").map((l) => JSON.parse(l)));
      // a trial the kill cut short keeps that attempt in its history, closed as interrupted, then the one that scored
      const cut = before.trials.filter((t: { status: string }) => t.status === "RUNNING" || t.status === "SCORING");
      for (const b of cut) {
        const a = after.trials.find((t: { id: string }) => t.id === b.id);
        expect(a.attempts.map((x: { status: string; ended_because: string }) => [x.status, x.ended_because])).toEqual([
          [b.status, `interrupted in phase ${b.attempt_phase}`],
          ["SCORED", "scored"],
        ]);
      }

      const gc = evolve(["gc", "--json"]);
      expect(gc.code).toBe(0);
      expectDocumented("gc", [JSON.parse(gc.stdout)]);
      const left = spawnSync("podman", ["ps", "-a", "--filter", `label=dev.evolve.job=${job.id}`, "--format", "{{.ID}}"], { encoding: "utf8" });
      expect(left.stdout.trim()).toBe("");
    });
  }

  it("cancels a running job from another process: running and queued trials settle CANCELLED", async () => {
    const task = makeTask("cancel-me", 30);
    const child = spawn(bun, [join(root, "main.ts"), "run", "-p", task, "-k", "3", "-n", "1", "--json"], {
      cwd: work,
      env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let seen = "";
    child.stdout.on("data", (b) => (seen += b));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    while (!/"phase":"agent"/.test(seen)) await new Promise((r) => setTimeout(r, 50));
    const job = JSON.parse(evolve(["job", "list", "--json"]).stdout).find((j: { source: string }) => j.source === task);
    const t0 = Date.now();
    const cancel = evolve(["job", "cancel", job.id]);
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toMatch(/: 3 of 3 trials settled CANCELLED \(2 queued, 1 running stopped by process \d+\)/);
    expect(await exited).toBe(1);
    expect(Date.now() - t0).toBeLessThan(15_000);
    const after = JSON.parse(evolve(["job", "show", job.id, "--json"]).stdout);
    expect(after.status).toBe("CANCELLED");
    expect(after.trials.map((t: { status: string }) => t.status)).toEqual(["CANCELLED", "CANCELLED", "CANCELLED"]);
    expect(after.exceptions).toEqual({ CancelledError: 3 });
  });
});
