/**
 * A trial's attempts history (issue 10 §3): each run of a trial (an automatic retry, `job resume`) adds an entry with
 * its start, end and why it ended; `trial show` and `job show` print the count and the earlier attempts, and a
 * running trial's time is its elapsed time so far. The job layer and the store are real; the trial runner is a
 * TrialRecorder that settles at once, so no container engine is needed.
 */
import { mkdtempSync } from "node:fs";
import { hostname } from "node:os";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import type { Engine } from "../engine/driver/types.ts";
import { createJob, runJob, type JobConfig } from "../engine/job/job.ts";
import { attemptSeconds, trialAttempts } from "../engine/job/summary.ts";
import { openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import type { ExceptionType } from "../engine/outcome.ts";
import { now, TrialRecorder } from "../engine/trial/recorder.ts";
import { toRunning } from "../engine/trial/lifecycle.ts";
import type { TrialDeps, TrialRequest, TrialStatus } from "../engine/trial/types.ts";
import { cliHost } from "./support/cli-host.ts";

const root = resolve(__dirname, "..");
let home: string;

// one Bun process runs this file's CLI calls in-process (cli-host.ts) instead of a Bun start-up per call
const host = cliHost();
afterAll(() => host.close());

function evolve(args: string[]) {
  const r = host.run(args, { cwd: root, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
  return { code: r.code, stdout: r.stdout, stderr: r.stderr };
}

/** A run that records itself as the real ones do (TrialRecorder) and settles as told, without any box. */
class InstantRun extends TrialRecorder {
  async settle(status: TrialStatus, exception?: { type: ExceptionType; message: string }): Promise<TrialRecord> {
    this.update(toRunning());
    const span = this.beginPersist();
    const exc = exception ? this.exc(exception.type, exception.message) : null;
    return this.finishPersist(span, { status, rewards: status === "SCORED" ? { reward: 1 } : null, exception: exc }, { boxesGone: false, finishedAt: now(), write: async () => {} });
  }
}

const config = (maxRetries: number): JobConfig => ({
  agent: { name: "oracle" },
  attempts: 1,
  concurrency: 1,
  timeout_multiplier: 1,
  secret_names: [],
  force_build: false,
  max_retries: maxRetries,
  source: { kind: "path", path: "/tasks" },
  tasks: [{ name: "a", digest: `sha256:${"a".repeat(64)}` }],
});

async function withStore<T>(fn: (s: Store) => Promise<T> | T): Promise<T> {
  const store = openStore(home);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-attempts-"));
});

describe("the attempts history", () => {
  it("records every automatic retry with why it ended, and trial show / job show print them", async () => {
    const { jobId, trialId } = await withStore(async (store) => {
      const job = createJob(store, config(2));
      let calls = 0;
      const runTrial = (req: TrialRequest, deps: TrialDeps) =>
        ++calls < 3
          ? new InstantRun(req, deps).settle("INFRASTRUCTURE_ERROR", { type: "EnvironmentStartError", message: `the entrypoint died (run ${calls})\nmore` })
          : new InstantRun(req, deps).settle("SCORED");
      const [t] = await runJob(job.id, { store, engine: {} as Engine, home, runTrial, secrets: {}, retryDelayMs: 1 });
      expect(calls).toBe(3);
      expect(t.status).toBe("SCORED");
      expect(t.attempts).toHaveLength(3);
      expect(t.attempts!.map((a) => [a.n, a.status, a.ended_because])).toEqual([
        [1, "INFRASTRUCTURE_ERROR", "EnvironmentStartError: the entrypoint died (run 1)"],
        [2, "INFRASTRUCTURE_ERROR", "EnvironmentStartError: the entrypoint died (run 2)"],
        [3, "SCORED", "scored"],
      ]);
      for (const a of t.attempts!) expect(Date.parse(a.ended_at!)).toBeGreaterThanOrEqual(Date.parse(a.started_at));
      expect(trialAttempts(t).count).toBe(3);
      return { jobId: job.id, trialId: t.id };
    });

    const show = evolve(["trial", "show", trialId]).stdout;
    expect(show).toMatch(/^ {2}attempts {4}3$/m);
    expect(show).toMatch(/^ {14}#1 \S+ \S+ \S+ INFRASTRUCTURE_ERROR: EnvironmentStartError: the entrypoint died \(run 1\)$/m);
    expect(show).toMatch(/^ {14}#2 .* INFRASTRUCTURE_ERROR: EnvironmentStartError: the entrypoint died \(run 2\)$/m);
    expect(JSON.parse(evolve(["trial", "show", trialId, "--json"]).stdout).attempts).toHaveLength(3);

    const job = evolve(["job", "show", jobId]).stdout;
    const header = job.split("\n").find((l) => l.startsWith("TRIAL"))!;
    expect(header).toMatch(/\bTIME {2,}ATTEMPTS {2,}EXCEPTION$/);
    const row = job.split("\n").find((l) => l.startsWith(trialId))!;
    expect(row.slice(header.indexOf("ATTEMPTS")).trim().split(/\s+/)[0]).toBe("3");
    expect(job).toMatch(/^earlier attempts:$/m);
    expect(job).toMatch(new RegExp(`^  ${trialId} #1 .* INFRASTRUCTURE_ERROR: EnvironmentStartError`, "m"));
  });

  it("closes an attempt its runner left open as interrupted when the next one starts", async () => {
    await withStore(async (store) => {
      const job = createJob(store, config(0));
      const [queued] = store.listTrials(job.id);
      const req: TrialRequest = {
        trialId: queued.id,
        jobId: job.id,
        home,
        task: { dir: "/nowhere", digest: queued.task_digest, name: "a" },
        agent: { name: "oracle" },
        timeoutMultiplier: 1,
        secrets: {},
      };
      const deps: TrialDeps = { store, engine: {} as Engine };
      // a runner that dies mid-attempt: its record stays RUNNING with the attempt open
      const killed = new (class extends TrialRecorder {
        start() {
          this.update({ ...toRunning(), attempt_phase: "agent" });
        }
      })(req, deps);
      killed.start();
      expect(store.getTrial(queued.id)!.attempts).toMatchObject([{ n: 1, ended_at: null, status: null }]);
      const t = await new InstantRun(req, deps).settle("SCORED");
      expect(t.attempts!.map((a) => [a.n, a.status, a.ended_because])).toEqual([
        [1, "RUNNING", "interrupted in phase agent"],
        [2, "SCORED", "scored"],
      ]);
    });
  });
});

describe("a trial's time", () => {
  const base: TrialRecord = { id: "T", job_id: "J", task_digest: "d", agent: "oracle", status: "RUNNING", phase_timings: {}, created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z" };

  it("is the elapsed time so far while it runs, a build with no phase end included", () => {
    const t = { ...base, started_at: "2026-01-01T00:00:00.000Z", phase_timings: { build: { started_at: "2026-01-01T00:00:01.000Z" } } };
    expect(attemptSeconds(t, Date.parse("2026-01-01T00:00:42.500Z"))).toBe(42.5);
  });

  it("is the phases' span once settled, and unknown for a trial that never started", () => {
    const settled = { ...base, status: "SCORED" as const, phase_timings: { build: { started_at: "2026-01-01T00:00:01.000Z", finished_at: "2026-01-01T00:00:03.000Z" }, verify: { started_at: "2026-01-01T00:00:04.000Z", finished_at: "2026-01-01T00:00:11.000Z" } } };
    expect(attemptSeconds(settled)).toBe(10);
    expect(attemptSeconds({ ...base, status: "QUEUED" })).toBeNull();
  });

  /** A job whose trial is in its build, started 5 s before its last write; `runner` alive (this process) or gone. */
  const building = (live: boolean) =>
    withStore((store) => {
      const job = createJob(store, config(0));
      // a live runner is this test process; a dead one is a pid on this host that answers no signal
      store.putJob({ ...job, runner: { pid: live ? process.pid : 2 ** 22 + 1, host: hostname(), started_at: job.created_at } });
      const [t] = store.listTrials(job.id);
      const at = new Date(Date.now() - 5000).toISOString();
      store.putTrial({ ...t, status: "RUNNING", attempt_phase: "build", started_at: at, phase_timings: { build: { started_at: at } }, updated_at: new Date().toISOString() });
      return { job: job.id, trial: t.id };
    });
  const timeRow = (trial: string) => evolve(["trial", "show", trial]).stdout.split("\n").find((l) => l.startsWith("  time"))!;

  it("prints the time `so far` for a running trial in trial show and job show", async () => {
    const ids = await building(true);
    const sec = Number(/time\s+(\d+\.\d)s so far$/.exec(timeRow(ids.trial))?.[1]);
    expect(sec).toBeGreaterThanOrEqual(5);
    expect(evolve(["job", "show", ids.job]).stdout).toMatch(/\d+\.\ds so far/);
  });

  it("stops the clock of a trial whose runner is gone at its last write, and says it was interrupted", async () => {
    const ids = await building(false);
    const sec = Number(/time\s+(\d+\.\d)s \(interrupted\)$/.exec(timeRow(ids.trial))?.[1]);
    // 5 s from its start to its last write, however long ago that was (generous: the CI box is slow)
    expect(sec).toBeGreaterThanOrEqual(5);
    expect(sec).toBeLessThan(30);
    expect(evolve(["job", "show", ids.job]).stdout).toMatch(/\d+\.\ds \(interrupted\)/);
  });
});
