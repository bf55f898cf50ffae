/**
 * The job layer's side of interruptions and `job retry` (issue 10 §2), with the real store and an injected trial
 * runner (tests/run-interrupt.engine.test.ts runs the same through the CLI on podman): an abort whose reason is an
 * Interruption leaves the job INTERRUPTED, the running trial INTERRUPTED and the rest QUEUED, and `resume` runs them;
 * any other abort still cancels. `job retry` picks what did not score into a new job of kind `retry`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliHost } from "./support/cli-host.ts";
import { importTasks } from "../engine/dataset.ts";
import type { Engine } from "../engine/driver/types.ts";
import { createJobRetry, retryPicks } from "../engine/job/actions.ts";
import { createJob, runJob, type JobConfig } from "../engine/job/job.ts";
import { summarizeJob } from "../engine/job/summary.ts";
import { openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { Interruption, stopFailure } from "../engine/outcome.ts";
import type { TrialDeps, TrialRequest } from "../engine/trial/types.ts";
import { expectCode } from "./support/expect-code.ts";
import type { TrialStatus } from "../engine/outcome.ts";

const root = resolve(__dirname, "..");
let home: string;
let store: Store;
let digest: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-job-interrupt-"));
  store = openStore(home);
  [{ digest }] = (await importTasks(store, home, join(root, "fixtures/tasks/valid/minimal"), { secrets: new Set() })).tasks;
});

afterAll(async () => {
  await store.close();
  rmSync(home, { recursive: true, force: true });
});

const config = (attempts: number): JobConfig => ({
  agent: { name: "oracle", model: "m1" }, attempts, concurrency: 1, timeout_multiplier: 1, secret_names: [], force_build: false,
  max_retries: 2, source: { kind: "path", path: "/tasks" }, tasks: [{ name: "org/minimal", digest }],
});

const at = () => new Date().toISOString();

/** Settles the trial as a real runner would: SCORED, or what the signal's reason says once it fires. */
function settle(req: TrialRequest, signal: AbortSignal | undefined): TrialRecord {
  const rec = store.getTrial(req.trialId)!;
  const done: TrialRecord = signal?.aborted
    ? (() => {
        const f = stopFailure(signal.reason);
        return { ...rec, status: f.status, exception: { type: f.type, message: f.message, traceback: "", occurred_at: at() }, updated_at: at() };
      })()
    : { ...rec, status: "SCORED", rewards: { reward: 1 }, reward: 1, updated_at: at() };
  store.putTrial(done);
  return done;
}

/**
 * A runner that scores every trial; given `stop`, its first trial fires it from inside and waits for the abort to
 * arrive (the way Ctrl-C reaches a running trial).
 */
function stoppingRunner(stop?: AbortController, reason?: unknown) {
  const calls: string[] = [];
  const runTrial = async (req: TrialRequest, deps: TrialDeps): Promise<TrialRecord> => {
    calls.push(req.trialId);
    store.putTrial({ ...store.getTrial(req.trialId)!, status: "RUNNING", updated_at: at() });
    if (stop && calls.length === 1) {
      stop.abort(reason);
      // the runner sees the abort through the signal it was given (the job's own, fed by the caller's)
      await new Promise<void>((r) => (deps.signal?.aborted ? r() : deps.signal?.addEventListener("abort", () => r())));
    }
    return settle(req, deps.signal);
  };
  return { calls, runTrial };
}

describe("an interrupted job", () => {
  it("stops as INTERRUPTED with the rest QUEUED, never retried, and resume runs what the interrupt stopped", async () => {
    const job = createJob(store, config(3));
    const stop = new AbortController();
    const r = stoppingRunner(stop, new Interruption("SIGINT", 130));
    const events: string[] = [];
    const trials = await runJob(job.id, { store, engine: {} as Engine, home, runTrial: r.runTrial, secrets: {}, signal: stop.signal, retryDelayMs: 1, onEvent: (e) => e.kind === "job" && events.push(e.status) });
    expect(r.calls).toHaveLength(1);
    expect(trials.map((t) => t.status)).toEqual(["INTERRUPTED", "QUEUED", "QUEUED"]);
    expect(trials[0].exception?.type).toBe("InterruptedError");
    expect(store.getJob(job.id)).toMatchObject({ status: "INTERRUPTED", runner: null });
    expect(store.getJob(job.id)!.finished_at).toBeUndefined();
    expect(events).toEqual(["RUNNING", "INTERRUPTED"]);

    const again = stoppingRunner();
    const resumed = await runJob(job.id, { store, engine: {} as Engine, home, runTrial: again.runTrial, secrets: {}, retryDelayMs: 1 });
    expect(again.calls).toEqual(trials.map((t) => t.id));
    expect(resumed.map((t) => t.status)).toEqual(["SCORED", "SCORED", "SCORED"]);
    expect(store.getJob(job.id)!.status).toBe("COMPLETED");
  });

  it("any other abort still cancels: the running and the queued trials settle CANCELLED and resume refuses", async () => {
    const job = createJob(store, config(2));
    const stop = new AbortController();
    const r = stoppingRunner(stop);
    const trials = await runJob(job.id, { store, engine: {} as Engine, home, runTrial: r.runTrial, secrets: {}, signal: stop.signal, retryDelayMs: 1 });
    expect(trials.map((t) => t.status)).toEqual(["CANCELLED", "CANCELLED"]);
    expect(store.getJob(job.id)!.status).toBe("CANCELLED");
    await expectCode(() => runJob(job.id, { store, engine: {} as Engine, home, runTrial: r.runTrial, secrets: {} }), "job_cancelled");
  });
});

describe("job retry", () => {
  /** A settled job whose trials ended in `statuses`, in order. */
  function jobWith(statuses: TrialStatus[]) {
    const job = createJob(store, config(statuses.length));
    const trials = store.listTrials(job.id).map((t, i) => ({ ...t, status: statuses[i], updated_at: at() }));
    store.putTrials(trials);
    store.putJob({ ...store.getJob(job.id)!, status: "COMPLETED", finished_at: at() });
    return { job, trials };
  }

  it("re-runs every trial that did not settle SCORED as a new job of kind retry, each naming its original", () => {
    const { job, trials } = jobWith(["SCORED", "SCORING_ERROR", "INFRASTRUCTURE_ERROR", "BUDGET", "INTERRUPTED"]);
    const made = createJobRetry(store, job.id)!;
    expect(made.job.config).toMatchObject({ kind: "retry" });
    expect(made.job).toMatchObject({ retry_of: job.id, status: "RUNNING", runner: null });
    expect(made.job.config).toMatchObject({ agent: { name: "oracle", model: "m1" }, tasks: [{ name: "org/minimal", digest }], attempts: 4, max_retries: 2 });
    const fresh = store.listTrials(made.job.id);
    expect(fresh.map((t) => [t.status, t.retry_of, t.model])).toEqual(trials.slice(1).map((t) => ["QUEUED", t.id, "m1"]));
    // the old job is left as it was
    expect(store.listTrials(job.id).map((t) => t.status)).toEqual(trials.map((t) => t.status));
    expect(summarizeJob(store.getJob(made.job.id)!, fresh)).toMatchObject({ kind: "retry", retry_of: job.id, n_trials: 4 });
    expect(summarizeJob(store.getJob(job.id)!, trials)).toMatchObject({ kind: "run", retry_of: null });
  });

  it("--status narrows; nothing picked records nothing; a job still running is refused", async () => {
    const { job, trials } = jobWith(["SCORED", "SCORING_ERROR", "INFRASTRUCTURE_ERROR"]);
    const jobs = store.listJobs().length;
    const made = createJobRetry(store, job.id, ["INFRASTRUCTURE_ERROR"])!;
    expect(store.listTrials(made.job.id).map((t) => t.retry_of)).toEqual([trials[2].id]);
    expect(createJobRetry(store, job.id, ["BUDGET"])).toBeNull();
    expect(store.listJobs()).toHaveLength(jobs + 1);

    store.putJob({ ...store.getJob(job.id)!, status: "RUNNING", runner: { pid: process.pid, host: hostname(), started_at: at() } });
    const e = await expectCode(() => retryPicks(store, job.id), "job_busy");
    expect(e.message).toMatch(/still changing/);
    await expectCode(() => retryPicks(store, "01NOSUCHJOB"), "job_not_found");
  });
});

describe("job retry from the CLI (no engine needed when there is nothing to run)", () => {
  // one Bun process runs these CLI calls in-process (cli-host.ts) instead of a Bun start-up per call
  const host = cliHost();
  afterAll(() => host.close());
  const evolve = (args: string[]) => {
    const r = host.run(args, { env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
    return { code: r.code, stdout: r.stdout, stderr: r.stderr };
  };

  it("says there is nothing to retry (exit 0), refuses an unknown --status, and job show names the job a retry retries", async () => {
    const job = createJob(store, config(1));
    const [t] = store.listTrials(job.id);
    store.putTrial({ ...t, status: "SCORED", rewards: { reward: 1 }, reward: 1, updated_at: at() });
    store.putJob({ ...store.getJob(job.id)!, status: "COMPLETED", finished_at: at() });
    store.putTrial({ ...store.getTrial(t.id)!, status: "SCORING_ERROR" });
    const made = createJobRetry(store, job.id)!;
    store.putTrial({ ...store.getTrial(t.id)!, status: "SCORED" });
    await store.close();
    try {
      const none = evolve(["job", "retry", job.id]);
      expect([none.code, none.stdout, none.stderr]).toEqual([0, `every trial of job ${job.id} scored: nothing to retry\n`, ""]);
      expect(evolve(["job", "retry", job.id, "--status", "budget,infrastructure_error"]).stdout).toBe(`no trial of job ${job.id} is BUDGET or INFRASTRUCTURE_ERROR: nothing to retry\n`);
      const bad = evolve(["job", "retry", job.id, "--status", "FAILED"]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/^error\[usage\]: --status FAILED: not a trial status\n.*INTERRUPTED/);
      expect(evolve(["job", "show", made.job.id]).stdout).toContain(`\nretries job ${job.id}\n`);
      expect(JSON.parse(evolve(["job", "show", made.job.id, "--json"]).stdout)).toMatchObject({ kind: "retry", retry_of: job.id });
    } finally {
      store = openStore(home);
    }
  });
});
