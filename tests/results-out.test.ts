/**
 * Results out (issue 22 §1, §2; engine/results): Harbor job folders, `job export`, `trial download -o` and
 * `job download`, built from store records and trial folders written here (no container runs). Every file is
 * checked field by field against Harbor's models as shared/reference/harbor.md §3–§4 describes them (the field
 * lists below are data taken from it); the refusals have stable codes; a link planted in the target is never followed.
 */
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openStore, trialDir, type JobRecord, type Store, type TrialRecord } from "../engine/store/index.ts";
import { chunkEvent, promptEvent } from "../engine/trace/events.ts";
import { openTraceWriter } from "../engine/trace/store.ts";
import { validateTrajectory } from "../engine/trace/atif-validate.ts";
import { writeResult, type TrialOutcome } from "../engine/trial/result.ts";
import { downloadJob, downloadTrial } from "../engine/results/download.ts";
import { exportJob, JobFolderWriter, trialName } from "../engine/results/job-folder.ts";
import { harborUuid, trialFolderName } from "../engine/results/ids.ts";
import { loadConfig } from "../engine/config.ts";
import { expectCode } from "./support/expect-code.ts";

import { checkModel, checkTrialConfig, checkTrialResult, EVAL_STATS, JOB_CONFIG, JOB_RESULT, JOB_STATS, type Obj } from "./support/harbor-models.ts";

let home: string;
let work: string;
let store: Store;
const now = () => new Date().toISOString();
const JOB_ID = "01JOBAAAAAAAAAAAAAAAAAAAAA";

function job(name?: string): JobRecord {
  return {
    id: JOB_ID,
    created_at: now(),
    status: "COMPLETED",
    finished_at: now(),
    config: {
      kind: "run",
      ...(name ? { name } : {}),
      agent: { name: "codex", model: "openai/gpt-6", kwargs: { reasoning_effort: "high" } },
      attempts: 1,
      concurrency: 2,
      timeout_multiplier: 1,
      secret_names: [],
      force_build: false,
      max_retries: 2,
      source: { kind: "dataset", ref: "example@1.0" },
      tasks: [{ name: "hello", digest: `sha256:${"a".repeat(64)}` }],
    },
  };
}

function trial(id: string, over: Partial<TrialRecord> = {}): TrialRecord {
  return {
    id,
    job_id: JOB_ID,
    task_digest: `sha256:${"a".repeat(64)}`,
    task_name: "hello",
    source: "example@1.0",
    agent: "codex",
    model: "openai/gpt-6",
    status: "SCORED",
    phase_timings: { agent: { started_at: now(), finished_at: now() } },
    rewards: { reward: 1 },
    reward: 1,
    spend: { live_usd: 0.25, final_usd: null, source: "lower_bound", calls: 3 },
    tokens: { input: 100, cached_read: 20, cache_write: 0, output: 30, reasoning: 5 },
    started_at: now(),
    finished_at: now(),
    created_at: now(),
    updated_at: now(),
    ...over,
  };
}

/** Writes a trial's folder as the trial runner leaves it: result.json + config.json, agent/, verifier/, artifacts/, trial.log, a trace. */
async function trialFolder(t: TrialRecord, o: { exception?: boolean } = {}): Promise<string> {
  const dir = trialDir(home, t.id);
  const outcome: TrialOutcome = {
    id: t.id, taskName: "hello", taskDir: `/store/tasks/${t.task_digest}`, taskDigest: t.task_digest, source: "example@1.0",
    config: {
      trial_name: t.id, job_id: JOB_ID, task: { path: "/store/tasks/x", name: "hello", digest: t.task_digest, source: "example@1.0" },
      agent: { name: "codex", model_name: "openai/gpt-6", kwargs: { reasoning_effort: "high" } }, timeout_multiplier: 1,
      timeouts: { agent_sec: 600, verifier_sec: 120, build_sec: 600 },
      environment: { force_build: false, network_mode: "public", verifier_mode: "shared", cpus: null, memory_mb: null, storage_mb: null, gpus: null },
      secret_names: [], attempt: 1,
    },
    agent: { name: "codex", model: "openai/gpt-6" }, status: t.status as TrialOutcome["status"], attemptPhase: "persist",
    phaseTimings: { agent: { started_at: now(), finished_at: now() } }, rewards: t.rewards ?? null, reward: t.reward ?? null, exception: t.exception ?? null,
    startedAt: now(), finishedAt: now(), stepResults: null, attempt: 1, agentInfo: { version: "0.31.0", provider: "openai" },
    agentUsage: { n_input_tokens: 120, n_cache_tokens: 20, n_output_tokens: 30, cost_usd: null },
  };
  await writeResult(dir, outcome);
  writeFileSync(join(dir, "config.json"), JSON.stringify(outcome.config));
  writeFileSync(join(dir, "evolve.json"), JSON.stringify({ spend_source: "lower_bound", spent_usd: 0.25 }));
  writeFileSync(join(dir, "trial.log"), "trial log\n");
  mkdirSync(join(dir, "agent", ".codex", "sessions"), { recursive: true });
  writeFileSync(join(dir, "agent", "codex.txt"), '{"type":"thread.started"}\n');
  writeFileSync(join(dir, "agent", ".codex", "sessions", "rollout.jsonl"), "{}\n");
  writeFileSync(join(dir, "agent", ".codex", "state.db"), Buffer.from([0xff, 0xfe, 0x00, 0x01]));
  writeFileSync(
    join(dir, "agent", "agent-home.json"),
    JSON.stringify({
      home: "/logs/agent/.codex",
      files: [{ path: "/logs/agent/.codex/sessions/rollout.jsonl", size: 3, sha256: "x", mode: "0644" }, { path: "/logs/agent/.codex/state.db", size: 4, sha256: "y", mode: "0644" }],
      excluded: [],
      skipped: [{ path: "/logs/agent/.codex/state.db", reason: "not UTF-8 text: left out of the text view (the job download carries it)" }],
    }),
  );
  mkdirSync(join(dir, "verifier"), { recursive: true });
  writeFileSync(join(dir, "verifier", "test-stdout.txt"), "ok\n");
  writeFileSync(join(dir, "verifier", "reward.txt"), "1\n");
  mkdirSync(join(dir, "artifacts", "app"), { recursive: true });
  writeFileSync(join(dir, "artifacts", "app", "out.txt"), "artifact\n");
  if (o.exception) writeFileSync(join(dir, "exception.txt"), "x");
  const w = openTraceWriter(home, t.id);
  w.append([promptEvent("Say hello."), chunkEvent("agent_message_chunk", "Hello.")]);
  w.close();
  return dir;
}

/** Every file under `dir`, relative, '/'-separated, sorted. */
function files(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out.push(relative(dir, join(d, e.name)).split("\\").join("/"));
    }
  };
  walk(dir);
  return out.sort();
}

const readJson = (p: string) => JSON.parse(readFileSync(p, "utf8")) as Obj;

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-results-"));
  work = join(home, "work");
  mkdirSync(work);
  store = openStore(home);
});
afterEach(async () => {
  await store.close();
  rmSync(home, { recursive: true, force: true });
});

const T1 = "01TRIALAAAAAAAAAAAAAAAAAA1";
const T2 = "01TRIALAAAAAAAAAAAAAAAAAA2";

describe("Harbor job folder", () => {
  it("writes every file in Harbor's models' shapes, evolve's fields under x_evolve", async () => {
    store.putJob(job());
    const failed = trial(T2, { status: "SCORING_ERROR", rewards: null, reward: null, exception: { type: "RewardFileNotFoundError", message: "no reward", traceback: "", occurred_at: now() } });
    store.putTrials([trial(T1), failed]);
    await trialFolder(trial(T1));
    await trialFolder(failed);
    const dir = await exportJob(store, home, JOB_ID, join(work, "jobs"));
    expect(dir).toBe(join(work, "jobs", JOB_ID));

    const cfg = checkModel(readJson(join(dir, "config.json")), JOB_CONFIG, "job config.json");
    const agent = (cfg.agents as Obj[])[0];
    expect(agent).toMatchObject({ name: "codex", model_name: "openai/gpt-6", x_reasoning_effort: "high", x_preset: null });
    expect(cfg.datasets).toEqual([{ name: "example", version: "1.0" }]);

    const res = checkModel(readJson(join(dir, "result.json")), JOB_RESULT, "job result.json");
    expect(res.id).toBe(harborUuid(JOB_ID));
    const stats = checkModel(res.stats, JOB_STATS, "job result.json stats");
    expect(stats).toMatchObject({ n_completed_trials: 2, n_errored_trials: 1, n_pending_trials: 0 });
    const evals = stats.evals as Record<string, unknown>;
    // Harbor's key spells "/" as "-" and names the dataset without its version (as datasets[].name above)
    expect(Object.keys(evals)).toEqual(["codex__openai-gpt-6__example"]);
    const ev = checkModel(Object.values(evals)[0], EVAL_STATS, "eval stats");
    // reward.txt is read as a float by Harbor: a whole reward's key is "1.0"
    expect(ev.reward_stats).toEqual({ reward: { "1.0": [trialName(trial(T1))] } });
    expect(ev.exception_stats).toEqual({ RewardFileNotFoundError: [trialName(failed)] });

    for (const t of [trial(T1), failed]) {
      const td = join(dir, trialFolderName("hello", t.id));
      expect(trialName(t)).toBe(`hello__${t.id.slice(-7).toLowerCase()}`);
      checkTrialConfig(readJson(join(td, "config.json")), `${t.id} config.json`);
      const r = checkTrialResult(readJson(join(td, "result.json")), `${t.id} result.json`);
      expect(r.id).toBe(harborUuid(t.id));
      expect(r.trial_name).toBe(trialName(t));
      expect((r.x_evolve as Obj).status).toBe(t.status);
      // spend not final: Harbor's cost_usd is null, x_evolve carries the figure and its source
      expect((r.agent_result as Obj).cost_usd).toBeNull();
      expect(r.x_evolve).toMatchObject({ trial_id: t.id, spentUsd: 0.25, spendSource: "lower_bound" });
      const traj = readJson(join(td, "agent", "trajectory.json"));
      expect(validateTrajectory(traj)).toEqual([]);
      expect(readJson(join(td, "lock.json"))).toMatchObject({ schema_version: 1, task: { digest: t.task_digest, type: "local" } });
      expect(readJson(join(td, "artifacts", "manifest.json"))).toEqual([expect.objectContaining({ source: "/app/out.txt", destination: "app/out.txt", size: 9 })]);
    }
    const scored = files(join(dir, trialName(trial(T1))));
    expect(scored).toEqual([
      "agent/.codex/sessions/rollout.jsonl", "agent/.codex/state.db", "agent/agent-home.json", "agent/codex.txt", "agent/trace-parsed.jsonl", "agent/trajectory.json",
      "artifacts/app/out.txt", "artifacts/manifest.json", "config.json", "evolve.json", "lock.json", "result.json", "trial.log",
      "verifier/reward.json", "verifier/reward.txt", "verifier/test-stdout.txt",
    ]);
    // the home byte for byte, the raw reward.txt, and exception.txt only where there is an exception
    expect(readFileSync(join(dir, trialName(trial(T1)), "agent", ".codex", "state.db"))).toEqual(Buffer.from([0xff, 0xfe, 0x00, 0x01]));
    expect(existsSync(join(dir, trialName(failed), "exception.txt"))).toBe(true);
    expect(readFileSync(join(dir, trialName(failed), "exception.txt"), "utf8")).toBe("RewardFileNotFoundError: no reward\n");
    expect(existsSync(join(dir, trialName(failed), "verifier", "reward.json"))).toBe(false);
  });

  it("keeps a running job's folder as trials settle, replaces stale files, and never fails the job", async () => {
    store.putJob({ ...job(), status: "RUNNING", finished_at: undefined });
    store.putTrials([trial(T1, { status: "RUNNING", rewards: null, reward: null, finished_at: undefined }), trial(T2, { status: "QUEUED", rewards: null, reward: null })]);
    const warnings: string[] = [];
    const w = new JobFolderWriter(store, home, JOB_ID, join(work, "jobs"), (m) => warnings.push(m));
    const dir = (await w.start())!;
    expect(readJson(join(dir, "result.json")).stats).toMatchObject({ n_running_trials: 1, n_pending_trials: 1, n_completed_trials: 0 });
    // settles with an exception first (an attempt), then scored: the old exception.txt goes
    store.putTrial(trial(T1, { status: "INTERRUPTED", exception: { type: "Interrupted", message: "stop", traceback: "", occurred_at: now() }, rewards: null }));
    await trialFolder(trial(T1));
    await w.trialSettled(T1);
    expect(existsSync(join(dir, trialName(trial(T1)), "exception.txt"))).toBe(true);
    store.putTrial(trial(T1));
    await w.trialSettled(T1);
    expect(existsSync(join(dir, trialName(trial(T1)), "exception.txt"))).toBe(false);
    expect(readJson(join(dir, "result.json")).stats).toMatchObject({ n_completed_trials: 1, n_pending_trials: 1 });
    await w.finish();
    expect(warnings).toEqual([]);
  });

  it("never follows a link planted at a trial folder's path: refused, nothing written through it, the run only warned", async () => {
    store.putJob(job());
    store.putTrials([trial(T1)]);
    await trialFolder(trial(T1));
    const outside = join(home, "outside");
    mkdirSync(outside);
    const jobDir = join(work, "jobs", JOB_ID);
    mkdirSync(jobDir, { recursive: true });
    // the job's own folder (as an earlier write left it), with a link planted where a trial's folder goes
    writeFileSync(join(jobDir, "config.json"), JSON.stringify({ x_evolve: { job_id: JOB_ID } }));
    symlinkSync(outside, join(jobDir, trialName(trial(T1))));
    await expectCode(() => exportJob(store, home, JOB_ID, join(work, "jobs")), "results_target_refused");
    expect(readdirSync(outside)).toEqual([]);
    // a link deeper down (agent/ inside an existing trial folder) is refused the same way
    rmSync(join(jobDir, trialName(trial(T1))));
    mkdirSync(join(jobDir, trialName(trial(T1))));
    symlinkSync(outside, join(jobDir, trialName(trial(T1)), "agent"));
    await expectCode(() => exportJob(store, home, JOB_ID, join(work, "jobs")), "results_target_refused");
    expect(readdirSync(outside)).toEqual([]);

    const before = store.getTrial(T1);
    const warnings: string[] = [];
    const w = new JobFolderWriter(store, home, JOB_ID, join(work, "jobs"), (m) => warnings.push(m));
    await w.start();
    await w.trialSettled(T1);
    await w.finish();
    expect(warnings.join("\n")).toMatch(/no longer updated .*symbolic link/);
    expect(readdirSync(outside)).toEqual([]);
    expect(store.getTrial(T1)).toEqual(before);
  });

  it("refuses a jobs-dir folder another job holds (job_folder_taken), and a taken --job-name falls back to the id", async () => {
    store.putJob(job("smoke"));
    store.putTrials([trial(T1)]);
    await trialFolder(trial(T1));
    const jobs = join(work, "jobs");
    mkdirSync(join(jobs, "smoke"), { recursive: true });
    writeFileSync(join(jobs, "smoke", "config.json"), JSON.stringify({ x_evolve: { job_id: "01OTHER" } }));
    expect(await exportJob(store, home, JOB_ID, jobs)).toBe(join(jobs, JOB_ID));
    mkdirSync(join(jobs, "other", JOB_ID), { recursive: true });
    writeFileSync(join(jobs, "other", JOB_ID, "notes.txt"), "mine");
    mkdirSync(join(jobs, "other", "smoke"), { recursive: true });
    writeFileSync(join(jobs, "other", "smoke", "notes.txt"), "mine");
    await expectCode(() => exportJob(store, home, JOB_ID, join(jobs, "other")), "job_folder_taken");
    expect(readFileSync(join(jobs, "other", "smoke", "notes.txt"), "utf8")).toBe("mine");
  });

  it("reads [jobs] folder from config.toml (on by default)", () => {
    expect(loadConfig(home).jobs.folder).toBe(true);
    writeFileSync(join(home, "config.toml"), "[jobs]\nfolder = false\n");
    expect(loadConfig(home).jobs.folder).toBe(false);
  });
});

describe("downloads", () => {
  it("trial download: the spec's tree, the home's text view, nothing the trial never produced", async () => {
    store.putJob(job());
    store.putTrials([trial(T1)]);
    await trialFolder(trial(T1));
    const out = await downloadTrial(home, store.getTrial(T1)!, join(work, "trials"));
    expect(out).toBe(join(work, "trials", T1));
    expect(files(out)).toEqual([
      "agent/.codex/sessions/rollout.jsonl", "agent/agent-home.json", "agent/codex.txt", "agent/trace-parsed.jsonl", "agent/trajectory.json",
      "config.json", "evolve.json", "result.json", "verifier/reward.json", "verifier/test-stdout.txt",
    ]);
    checkTrialResult(readJson(join(out, "result.json")), "download result.json");
    expect(readJson(join(out, "verifier", "reward.json"))).toEqual({ reward: 1 });
    for (const f of files(out)) expect(lstatSync(join(out, f)).size, `${f} is not an empty placeholder`).toBeGreaterThan(0);
  });

  it("refuses an existing non-empty target (download_target_exists) unless --overwrite, which replaces it", async () => {
    store.putJob(job());
    store.putTrials([trial(T1)]);
    await trialFolder(trial(T1));
    const target = join(work, "trials", T1);
    mkdirSync(target, { recursive: true });
    writeFileSync(join(target, "mine.txt"), "keep");
    await expectCode(() => downloadTrial(home, store.getTrial(T1)!, join(work, "trials")), "download_target_exists");
    expect(readFileSync(join(target, "mine.txt"), "utf8")).toBe("keep");
    await downloadTrial(home, store.getTrial(T1)!, join(work, "trials"), { overwrite: true });
    expect(existsSync(join(target, "mine.txt"))).toBe(false);
    expect(existsSync(join(target, "result.json"))).toBe(true);

    writeFileSync(join(work, "job.tar.gz"), "old");
    await expectCode(() => downloadJob(store, home, JOB_ID, join(work, "job.tar.gz")), "download_target_exists");
  });

  it("job download: a .tar.gz holding the same job folder as a folder download", async () => {
    store.putJob(job());
    store.putTrials([trial(T1)]);
    await trialFolder(trial(T1));
    const asDir = await downloadJob(store, home, JOB_ID, join(work, "dl"));
    const tgz = await downloadJob(store, home, JOB_ID, join(work, "job.tar.gz"));
    const x = join(work, "x");
    mkdirSync(x);
    execFileSync("tar", ["xzf", tgz, "-C", x]);
    expect(files(join(x, JOB_ID))).toEqual(files(asDir));
    const inTar = readJson(join(x, JOB_ID, trialName(trial(T1)), "result.json"));
    checkTrialResult(inTar, "archived result.json");
    expect(readFileSync(join(x, JOB_ID, trialName(trial(T1)), "verifier", "reward.txt"), "utf8")).toBe("1\n");
    expect(readdirSync(work).filter((n) => n.includes(".tmp-"))).toEqual([]);
  });
});
