/**
 * How big a job may be, and that a settled job is never rewritten: `-k 1000000` used to be recorded (10 s, 1.5 GB)
 * and then broke `job show`; a COMPLETED job could be cancelled after the fact. Real store, real CLI (its entry run in one Bun host process, tests/support/cli-host.ts).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_MAX_TRIALS, loadConfig } from "../engine/config.ts";
import { cancelJob, createJob } from "../engine/job/job.ts";
import { jobConfig } from "./support/job-config.ts";
import { openStore } from "../engine/store/index.ts";
import { expectCode } from "./support/expect-code.ts";
import { cliHost } from "./support/cli-host.ts";

const root = resolve(__dirname, "..");
let dir: string;
let n = 0;
const fresh = () => join(dir, `home-${++n}`);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "evolve-job-limits-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// one Bun process runs this file's CLI calls in-process (tests/support/cli-host.ts)
const host = cliHost();
afterAll(() => host.close());

function evolve(home: string, args: string[]) {
  return host.run(args, { env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" } });
}

describe("job size limit", () => {
  it("refuses a job above [jobs] max_trials before anything is recorded", async () => {
    const home = fresh();
    const store = openStore(home);
    try {
      const e = await expectCode(() => createJob(store, jobConfig(2, 6), undefined, 10), "job_too_large");
      expect(e.message).toBe("the job would hold 12 trials (2 tasks × 6 attempts); a job holds at most 10");
      expect(e.hint).toMatch(/\[jobs\] max_trials/);
      expect(e.exit).toBe(2);
      expect(store.listJobs()).toEqual([]);
      expect(store.listTrials()).toEqual([]);
      expect(createJob(store, jobConfig(2, 5), undefined, 10)).toBeTruthy();
    } finally {
      await store.close();
    }
  });

  it("reads the limit from config.toml, defaulting to DEFAULT_MAX_TRIALS, and refuses a bad value", () => {
    const home = fresh();
    mkdirSync(home, { recursive: true });
    expect(loadConfig(home).jobs.max_trials).toBe(DEFAULT_MAX_TRIALS);
    writeFileSync(join(home, "config.toml"), "[jobs]\nmax_trials = 50\n");
    expect(loadConfig(home).jobs.max_trials).toBe(50);
    writeFileSync(join(home, "config.toml"), "[jobs]\nmax_trials = 0\n");
    expect(() => loadConfig(home)).toThrow(/jobs\.max_trials/);
  });

  it("`run -k 1000000` is error[job_too_large], exit 2, in bounded time, with no job recorded", () => {
    const home = fresh();
    const task = join(root, "fixtures/tasks/valid/minimal");
    const t0 = Date.now();
    const r = evolve(home, ["run", "-p", task, "-a", "nop", "-k", "1000000"]);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error\[job_too_large\]: the job would hold 1000000 trials \(1 task × 1000000 attempts\); a job holds at most 10000\n/);
    expect(JSON.parse(evolve(home, ["job", "list", "--json"]).stdout)).toEqual([]);

    writeFileSync(join(home, "config.toml"), "[jobs]\nmax_trials = 3\n");
    const low = evolve(home, ["run", "-p", task, "-a", "nop", "-k", "4"]);
    expect(low.code).toBe(2);
    expect(low.stderr).toMatch(/a job holds at most 3/);
  });

  it("a job at the default limit is recorded, listed, shown and cancelled in bounded time", async () => {
    const home = fresh();
    const store = openStore(home);
    let t0 = Date.now();
    const job = createJob(store, jobConfig(100, DEFAULT_MAX_TRIALS / 100));
    expect(Date.now() - t0).toBeLessThan(10_000);
    await store.close();

    const list = evolve(home, ["job", "list", "--json"]);
    expect(JSON.parse(list.stdout)[0]).toMatchObject({ id: job.id, n_trials: DEFAULT_MAX_TRIALS });
    const show = evolve(home, ["job", "show", job.id]);
    expect(show.stderr).toBe("");
    expect(show.code).toBe(0);
    expect(show.stdout.trim().split("\n").length).toBeGreaterThan(DEFAULT_MAX_TRIALS);
    expect(JSON.parse(evolve(home, ["job", "show", job.id, "--json"]).stdout).trials).toHaveLength(DEFAULT_MAX_TRIALS);

    t0 = Date.now();
    const cancel = evolve(home, ["job", "cancel", job.id, "--json"]);
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(JSON.parse(cancel.stdout)).toMatchObject({ id: job.id, cancelled: DEFAULT_MAX_TRIALS });
  });
});

describe("cancelling a settled job", () => {
  it("refuses a COMPLETED job and leaves it and its trials as they were", async () => {
    const home = fresh();
    const store = openStore(home);
    const job = createJob(store, jobConfig(2, 1));
    const done = { ...store.getJob(job.id)!, status: "COMPLETED" as const, finished_at: "2026-01-01T00:00:00.000Z", updated_at: "2026-01-01T00:00:00.000Z" };
    store.putJob(done);
    const trials = store.listTrials(job.id);
    await store.close();

    const r = evolve(home, ["job", "cancel", job.id]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^error\\[job_settled\\]: job ${job.id} already COMPLETED: a finished job is not rewritten`));
    const again = openStore(home);
    try {
      expect(again.getJob(job.id)).toEqual(done);
      expect(again.listTrials(job.id)).toEqual(trials);
    } finally {
      await again.close();
    }
  });

  it("says a CANCELLED job is already cancelled, exit 0, and writes nothing", async () => {
    const home = fresh();
    const store = openStore(home);
    const job = createJob(store, jobConfig(1, 2));
    expect(cancelJob(store, job.id).cancelled).toBe(2);
    const cancelled = store.getJob(job.id);
    await store.close();

    const r = evolve(home, ["job", "cancel", job.id]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(`job ${job.id} was already cancelled: nothing changed`);
    const again = openStore(home);
    try {
      expect(again.getJob(job.id)).toEqual(cancelled);
    } finally {
      await again.close();
    }
  });
});
