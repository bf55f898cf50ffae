/**
 * Interruptions behave as Unix users expect (issue 10 §2), through the real CLI (`bun main.ts`) on real podman:
 * Ctrl-C (SIGINT) or SIGTERM on `evolve run`, or its stdout closed under it (`| head`), stops the running trials
 * with their boxes removed, leaves the job INTERRUPTED (not CANCELLED) and prints the exact `evolve job resume <id>`;
 * `job resume` then finishes it with the rewards. A second Ctrl-C quits at once. `job retry` re-runs what did not
 * score as a new job that names the old one.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

const root = resolve(__dirname, "..");
const bun = join(root, "node_modules/.bin/bun");
const hasPodman = spawnSync("podman", ["image", "exists", "debian:bookworm-slim"]).status === 0;
/** How long the slow task's reference solution (its agent) sleeps: long enough to be interrupted mid-agent. */
const SLOW_SEC = 12;
/** How long the double-Ctrl-C test's image build sleeps: the graceful stop waits for it, the second Ctrl-C does not. */
const BUILD_SEC = 15;
let home: string;
let work: string;

// each case runs real trials to the end twice (interrupted, then resumed), on a loaded 2-core CI machine
vi.setConfig({ testTimeout: 240_000 });

function evolve(args: string[]) {
  const r = spawnSync(bun, [join(root, "main.ts"), ...args], {
    cwd: work,
    encoding: "utf8",
    env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" },
    timeout: 240_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

type Trial = { id: string; task_name: string; status: string; attempt_phase?: string; rewards: { reward: number } | null; retry_of?: string };
type Job = { id: string; status: string; kind: string; retry_of: string | null; trials: Trial[]; counts: Record<string, number> };
const show = (id: string): Job => JSON.parse(evolve(["job", "show", id, "--json"]).stdout);

/** A folder of two tasks from `task init`: `a-slow` (its agent sleeps SLOW_SEC) and `b-fast`. */
function makeTasks(name: string): string {
  const dir = join(work, name);
  mkdirSync(dir);
  for (const [task, sleep] of [["a-slow", SLOW_SEC], ["b-fast", 0]] as const) {
    expect(evolve(["task", "init", join(dir, task)]).code).toBe(0);
    if (sleep > 0) {
      const solve = join(dir, task, "solution", "solve.sh");
      writeFileSync(solve, readFileSync(solve, "utf8").replace("set -euo pipefail\n", `set -euo pipefail\nsleep ${sleep}\n`));
    }
  }
  return dir;
}

/** Waits (polling, generous bound) until `cond` holds. */
async function until<T>(what: string, cond: () => T | undefined | false, limitMs = 180_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = cond();
    if (v) return v;
    if (Date.now() - t0 > limitMs) throw new Error(`never saw ${what} within ${limitMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** `evolve run` in the background, its output collected. */
function start(args: string[]): { child: ChildProcess; out: () => string; err: () => string; exited: Promise<number | null> } {
  const child = spawn(bun, [join(root, "main.ts"), "run", ...args], {
    cwd: work,
    env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (b) => (out += b));
  child.stdout!.on("error", () => {});
  child.stderr!.on("data", (b) => (err += b));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  return { child, out: () => out, err: () => err, exited };
}

/** The job id from the header line `job <id>: …` the run prints first. */
const jobIdOf = (out: string) => /^job (\w+):/m.exec(out)?.[1];

/** Until the slow task's trial runs its agent (read back from the store through `job show`). */
const slowInAgent = (id: string) => until("a-slow in its agent phase", () => show(id).trials.find((t) => t.task_name === "local/a-slow" && t.status === "RUNNING" && t.attempt_phase === "agent"));

/** The job's boxes still in the engine, whatever their state. */
function boxesOf(jobId: string): string {
  const r = spawnSync("podman", ["ps", "-a", "--filter", `label=dev.evolve.job=${jobId}`, "--filter", `label=dev.evolve.home=${home}`, "--format", "{{.ID}}"], { encoding: "utf8" });
  return r.stdout.trim();
}

/** `job resume` finishes the job: every trial SCORED with reward 1, no box left. */
function resumeCompletes(id: string): void {
  const resumed = evolve(["job", "resume", id]);
  expect(resumed.stderr).not.toMatch(/error\[/);
  expect(resumed.code).toBe(0);
  const after = show(id);
  expect(after.status).toBe("COMPLETED");
  expect(after.trials.map((t) => [t.task_name, t.status, t.rewards?.reward])).toEqual([
    ["local/a-slow", "SCORED", 1],
    ["local/b-fast", "SCORED", 1],
  ]);
  expect(boxesOf(id)).toBe("");
}

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-interrupt-home-"));
  work = mkdtempSync(join(tmpdir(), "evolve-interrupt-work-"));
});

afterAll(() => {
  if (hasPodman) evolve(["gc"]);
});

describe.skipIf(!hasPodman)("interrupting evolve run (needs podman and the local debian:bookworm-slim image)", () => {
  for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    it(`${signal} stops the running trial (box removed), leaves the job resumable, prints the resume line; job resume finishes it`, async () => {
      const tasks = makeTasks(`by-${signal}`);
      // one at a time: a-slow runs, b-fast waits QUEUED
      const run = start(["-p", tasks, "-n", "1"]);
      const id = await until("the job's header line", () => jobIdOf(run.out()));
      await slowInAgent(id);
      expect(boxesOf(id)).not.toBe("");
      run.child.kill(signal);
      expect(await run.exited).toBe(code);
      expect(run.err()).toContain(`continue with: evolve job resume ${id}\n`);
      expect(run.err()).not.toMatch(/error\[/);
      expect(boxesOf(id)).toBe("");

      const before = show(id);
      expect(before.status).toBe("INTERRUPTED");
      expect(before.trials.map((t) => [t.task_name, t.status])).toEqual([
        ["local/a-slow", "INTERRUPTED"],
        ["local/b-fast", "QUEUED"],
      ]);
      expect(before.counts.CANCELLED).toBeUndefined();
      const trial = JSON.parse(evolve(["trial", "show", before.trials[0].id, "--json"]).stdout);
      expect(trial.exception.type).toBe("InterruptedError");
      resumeCompletes(id);
    });
  }

  it("a closed stdout (`| head`) stops the job quietly like Ctrl-C, no box left; job retry re-runs what did not score; resume finishes it", async () => {
    const tasks = makeTasks("by-pipe");
    const run = start(["-p", tasks, "-n", "2"]);
    const id = await until("the job's header line", () => jobIdOf(run.out()));
    // the reader goes away after one line, as `head -1` does; the next write (a trial's started or settled line)
    // finds the pipe closed while a-slow still runs. Whether b-fast settled before that depends on timing.
    run.child.stdout!.destroy();
    expect(await run.exited).toBe(141);
    expect(run.err()).toContain(`continue with: evolve job resume ${id}\n`);
    expect(run.err()).not.toMatch(/error\[|SIGINT/);
    expect(boxesOf(id)).toBe("");
    const before = show(id);
    expect(before.status).toBe("INTERRUPTED");
    expect(before.trials.find((t) => t.task_name === "local/a-slow")?.status).toBe("INTERRUPTED");
    expect(["SCORED", "INTERRUPTED"]).toContain(before.trials.find((t) => t.task_name === "local/b-fast")?.status);
    const unscored = before.trials.filter((t) => t.status !== "SCORED");

    // job retry: a new job of kind retry holding only the trials that did not score, named after the old job
    const retry = evolve(["job", "retry", id]);
    expect(retry.code).toBe(0);
    const newId = jobIdOf(retry.stdout)!;
    const n = unscored.length;
    expect(retry.stdout).toMatch(new RegExp(`^job ${newId}: retrying ${n} trial${n === 1 ? "" : "s"} of job ${id}$`, "m"));
    const retried = show(newId);
    expect(retried).toMatchObject({ status: "COMPLETED", kind: "retry", retry_of: id, counts: { SCORED: n } });
    expect(retried.trials.map((t) => [t.task_name, t.rewards?.reward, t.retry_of])).toEqual(unscored.map((t) => [t.task_name, 1, t.id]));
    expect(evolve(["job", "show", newId]).stdout).toContain(`retries job ${id}\n`);
    // the old job is left as it was
    expect(show(id).status).toBe("INTERRUPTED");
    expect(evolve(["job", "retry", newId]).stdout).toBe(`every trial of job ${newId} scored: nothing to retry\n`);
    resumeCompletes(id);
  });

  it("a second Ctrl-C quits at once; job resume removes what it left and finishes the job", async () => {
    const tasks = makeTasks("by-double-sigint");
    // the first Ctrl-C lets a running image build finish (it is not aborted), so a build that takes BUILD_SEC keeps
    // the graceful stop going long enough for the second to land in it: in the agent phase the stop can finish
    // before a second signal arrives, and the test would race it
    const dockerfile = join(tasks, "a-slow", "environment", "Dockerfile");
    writeFileSync(dockerfile, `${readFileSync(dockerfile, "utf8")}\n# unique to this run: never cached\nRUN echo ${process.pid}-${Date.now()} && sleep ${BUILD_SEC}\n`);
    const run = start(["-p", tasks, "-n", "2"]);
    const id = await until("the job's header line", () => jobIdOf(run.out()));
    await until("a-slow building its image", () => {
      const t = show(id).trials.find((x) => x.task_name === "local/a-slow" && x.attempt_phase === "build");
      return t && existsSync(join(home, "trials", t.id, "setup.log")) && readFileSync(join(home, "trials", t.id, "setup.log"), "utf8").includes(`sleep ${BUILD_SEC}`);
    });
    run.child.kill("SIGINT");
    // signals do not queue: the second goes once the first has been seen
    await until("the first SIGINT's notice", () => run.err().includes("stopping job"));
    run.child.kill("SIGINT");
    expect(await run.exited).toBe(130);
    expect(run.err()).toContain(`quitting at once: \`evolve job resume ${id}\``);
    expect(show(id).status).toBe("INTERRUPTED");
    resumeCompletes(id);
  });

  it("job cancel keeps meaning CANCELLED: resume refuses it, and a second cancel says it was already cancelled", async () => {
    const tasks = makeTasks("by-cancel");
    const run = start(["-p", tasks, "-n", "1"]);
    const id = await until("the job's header line", () => jobIdOf(run.out()));
    await slowInAgent(id);
    expect(evolve(["job", "cancel", id]).stdout).toMatch(/: 2 of 2 trials settled CANCELLED/);
    expect(await run.exited).toBe(1);
    expect(show(id).trials.map((t) => t.status)).toEqual(["CANCELLED", "CANCELLED"]);
    expect(evolve(["job", "cancel", id]).stdout.trim()).toBe(`job ${id} was already cancelled: nothing changed`);
    const resumed = evolve(["job", "resume", id]);
    expect(resumed.code).toBe(2);
    expect(resumed.stderr).toMatch(/^error\[job_cancelled\]/);
    expect(resumed.stdout).toBe("");
    expect(boxesOf(id)).toBe("");
  });
});
