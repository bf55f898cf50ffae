/**
 * Which Harbor job folder a job's trials go to when they run again (issue 22 §1 follow-ups), with the real store and
 * no container engine: the job records the folder it was written to, `job resume` writes there (even when the
 * name it would pick now differs), `job retry` and `trial retry|regrade` jobs get theirs beside the original's, and
 * the engine's job runner (engine/job/drive.ts) tells the folder of every trial that settles, whoever called it.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importTasks } from "../engine/dataset.ts";
import type { Engine } from "../engine/driver/types.ts";
import { createJobRetry, createRetry } from "../engine/job/actions.ts";
import { driveJob } from "../engine/job/drive.ts";
import { createJob, type JobConfig } from "../engine/job/job.ts";
import { openJobFolder } from "../engine/results/job-folder.ts";
import { openStore, type Store } from "../engine/store/index.ts";
import { cliHost } from "./support/cli-host.ts";

const root = resolve(__dirname, "..");
let dir: string;
let home: string;
let store: Store;
let digest: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "evolve-results-resume-"));
  home = join(dir, "home");
  store = openStore(home);
  [{ digest }] = (await importTasks(store, home, join(root, "fixtures/tasks/valid/minimal"), { secrets: new Set() })).tasks;
});

const host = cliHost();
afterAll(async () => {
  host.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const config = (o: Partial<JobConfig> = {}): JobConfig => ({
  kind: "run", agent: { name: "oracle" }, attempts: 2, concurrency: 1, timeout_multiplier: 1, secret_names: [], force_build: false,
  max_retries: 0, source: { kind: "path", path: "/tasks" }, tasks: [{ name: "minimal", digest }], ...o,
});

/** An engine the runner only closes and asks for leftovers (refused: nothing was left); no trial reaches a box. */
const noEngine = (): Engine => ({ close: async () => {} }) as unknown as Engine;

/** Runs the job through the engine's runner with the run already stopped: every pending trial settles CANCELLED. */
async function settleAllCancelled(jobId: string, folder: Awaited<ReturnType<typeof openJobFolder>>): Promise<void> {
  const stop = new AbortController();
  stop.abort(new Error("stopped by the test"));
  await driveJob({ store, engine: noEngine(), home, jobId, secrets: {}, signal: stop.signal, folder });
}

const trialFolders = (jobDir: string) => readdirSync(jobDir).filter((n) => n.startsWith("minimal__")).sort();
const jobIdIn = (jobDir: string) => (JSON.parse(readFileSync(join(jobDir, "config.json"), "utf8")) as { x_evolve: { job_id: string } }).x_evolve.job_id;
const warnings: string[] = [];
const warn = (m: string) => void warnings.push(m);

describe("a job remembers its folder, and every run of its trials writes there", () => {
  it("resume writes to the recorded folder, though the name it would pick now is free again", async () => {
    const jobsDir = join(dir, "jobs-a");
    // another job's folder holds the name: this job falls back to its id, and records that
    mkdirSync(join(jobsDir, "nightly"), { recursive: true });
    writeFileSync(join(jobsDir, "nightly", "config.json"), JSON.stringify({ x_evolve: { job_id: "someone-else" } }));
    const job = createJob(store, config({ name: "nightly" }));
    const first = await openJobFolder(store, home, job.id, { enabled: true, jobsDir, warn });
    expect(first?.folder).toBe(join(jobsDir, job.id));
    expect(store.getJob(job.id)?.folder).toBe(resolve(jobsDir, job.id));
    await first!.finish();
    expect(trialFolders(join(jobsDir, job.id))).toEqual([]);
    // no trial settled yet: Harbor's evals has no group until its first trial result
    expect(JSON.parse(readFileSync(join(jobsDir, job.id, "result.json"), "utf8")).stats.evals).toEqual({});

    // the other job's folder goes; `job resume` (no jobs dir given) keeps to the folder the job recorded
    rmSync(join(jobsDir, "nightly"), { recursive: true });
    const again = await openJobFolder(store, home, job.id, { enabled: true, warn });
    expect(again?.folder).toBe(resolve(jobsDir, job.id));
    await settleAllCancelled(job.id, again);
    const names = trialFolders(join(jobsDir, job.id));
    expect(names).toHaveLength(2);
    expect(existsSync(join(jobsDir, "nightly"))).toBe(false);
    const result = JSON.parse(readFileSync(join(jobsDir, job.id, "result.json"), "utf8")) as { n_total_trials: number; stats: { n_completed_trials: number; evals: Record<string, { n_trials: number }> } };
    expect(result.n_total_trials).toBe(2);
    expect(result.stats.n_completed_trials).toBe(2);
    expect(result.stats.evals).toEqual({ "oracle__adhoc": expect.objectContaining({ n_trials: 2, n_errors: 2 }) });
    for (const n of names) expect(JSON.parse(readFileSync(join(jobsDir, job.id, n, "result.json"), "utf8")).exception_info).not.toBeNull();
  });

  it("a job never given a folder gets none on resume, nor with [jobs] folder = false, nor a check job", async () => {
    const plain = createJob(store, config());
    expect(await openJobFolder(store, home, plain.id, { enabled: true, warn })).toBeUndefined();
    expect(await openJobFolder(store, home, plain.id, { enabled: false, jobsDir: join(dir, "jobs-off"), warn })).toBeUndefined();
    const check = createJob(store, config({ kind: "check" }));
    expect(await openJobFolder(store, home, check.id, { enabled: true, jobsDir: join(dir, "jobs-check"), warn })).toBeUndefined();
    expect(existsSync(join(dir, "jobs-off"))).toBe(false);
    expect(existsSync(join(dir, "jobs-check"))).toBe(false);
    expect(store.getJob(plain.id)?.folder).toBeUndefined();
  });

  it("job retry and trial retry jobs get their own folders beside the original's", async () => {
    const jobsDir = join(dir, "jobs-b");
    const job = createJob(store, config());
    await settleAllCancelled(job.id, await openJobFolder(store, home, job.id, { enabled: true, jobsDir, warn }));
    const origin = store.getJob(job.id)!.folder!;
    expect(dirname(origin)).toBe(resolve(jobsDir));

    const retry = createJobRetry(store, job.id, [])!;
    const rf = await openJobFolder(store, home, retry.job.id, { enabled: true, warn });
    expect(rf?.folder).toBe(join(resolve(jobsDir), retry.job.id));
    await settleAllCancelled(retry.job.id, rf);
    expect(jobIdIn(rf!.folder!)).toBe(retry.job.id);
    expect(trialFolders(rf!.folder!)).toHaveLength(2);

    const one = createRetry(store, store.listTrials(job.id)[0].id);
    const of = await openJobFolder(store, home, one.job.id, { enabled: true, warn });
    expect(of?.folder).toBe(join(resolve(jobsDir), one.job.id));
    await settleAllCancelled(one.job.id, of);
    expect(trialFolders(of!.folder!)).toHaveLength(1);
    // the original's folder is left as it was
    expect(trialFolders(origin)).toHaveLength(2);
    expect(jobIdIn(origin)).toBe(job.id);
  });

  it("a recorded folder that now holds someone else's files is not written: a warning says so", async () => {
    const jobsDir = join(dir, "jobs-c");
    const job = createJob(store, config());
    await (await openJobFolder(store, home, job.id, { enabled: true, jobsDir, warn }))!.finish();
    const folder = store.getJob(job.id)!.folder!;
    rmSync(folder, { recursive: true });
    mkdirSync(folder);
    writeFileSync(join(folder, "notes.txt"), "mine\n");
    warnings.length = 0;
    const again = await openJobFolder(store, home, job.id, { enabled: true, warn });
    expect(again?.folder).toBeUndefined();
    await settleAllCancelled(job.id, again);
    expect(readdirSync(folder)).toEqual(["notes.txt"]);
    expect(warnings.join("\n")).toContain("now holds files that are not its");
  });

  it("job show says where the job's folder is (--json: folder); a job with none says nothing of it", async () => {
    const jobsDir = join(dir, "jobs-d");
    const job = createJob(store, config());
    await (await openJobFolder(store, home, job.id, { enabled: true, jobsDir, warn }))!.finish();
    const env = { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" };
    const shown = host.run(["job", "show", job.id], { cwd: dir, env });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`job folder  ${resolve(jobsDir, job.id)}/\n`);
    expect(JSON.parse(host.run(["job", "show", job.id, "--json"], { cwd: dir, env }).stdout).folder).toBe(resolve(jobsDir, job.id));
    const plain = createJob(store, config());
    expect(host.run(["job", "show", plain.id], { cwd: dir, env }).stdout).not.toContain("job folder");
    expect(JSON.parse(host.run(["job", "show", plain.id, "--json"], { cwd: dir, env }).stdout)).not.toHaveProperty("folder");
  });
});
