/**
 * Upload of a job run elsewhere (issue 22 §3, platform-upload.md; engine/results/upload.ts): evolve's own
 * `job download` uploads back to the same job (statuses, rewards, traces, spend), job folders in the shapes Harbor
 * writes (fixtures/harbor-jobs) upload with their trials, rewards and trajectories, task linkage says why a trial is
 * unlinked, every refusal has its code, and a hostile archive or folder writes nothing outside the import's folder.
 * Unit tier: jobs are built with the store and the results writer, no container engine.
 */
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openStore, trialDir, type JobRecord, type Store, type TrialRecord } from "../engine/store/index.ts";
import { chunkEvent, promptEvent, toolCallEvent, toolResultEvent, usageEvent } from "../engine/trace/events.ts";
import { openTraceWriter, readTrace } from "../engine/trace/store.ts";
import { validateTrajectory } from "../engine/trace/atif-validate.ts";
import { writeResult, type TrialOutcome } from "../engine/trial/result.ts";
import { downloadJob } from "../engine/results/download.ts";
import { exportJob, trialName } from "../engine/results/job-folder.ts";
import { importJob, runImport, startImport, uploadLimits, type UploadInfo, type UploadLimits } from "../engine/results/upload.ts";
import { getImport, listImports, putImport } from "../engine/results/imports.ts";
import { createRegrade, createRetry, retryPicks } from "../engine/job/actions.ts";
import { runRefusal } from "../engine/job/job.ts";
import { portedTrialStatus as portedStatus } from "../engine/trial/lifecycle.ts";
import { endBlocks, entryBlocks } from "../engine/driver/tar.ts";
import { loadConfig } from "../engine/config.ts";
import { expectCode } from "./support/expect-code.ts";

const FIXTURES = resolve(__dirname, "..", "fixtures", "harbor-jobs");
const D = `sha256:${"1".repeat(64)}`;
const now = () => new Date().toISOString();
let home: string;
let work: string;
let store: Store;
let n = 0;
const limits = (o: Partial<UploadLimits> = {}): UploadLimits => ({ ...uploadLimits(), ...o });
const upload = (source: string, o: { dataset?: string; limits?: UploadLimits } = {}) => importJob(store, home, `IMPORT${++n}`, source, { ...(o.dataset ? { dataset: o.dataset } : {}), limits: o.limits ?? limits() });
const readJson = (p: string) => JSON.parse(readFileSync(p, "utf8"));
const events = (trialId: string) => [...readTrace(home, trialId)].map(({ type, data }) => ({ type, data }));

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-upload-"));
  work = join(home, "work");
  mkdirSync(work);
  store = openStore(home);
});
afterEach(async () => {
  await store.close();
  rmSync(home, { recursive: true, force: true });
});

/** A copy of a fixture job folder under work/, to change. */
function fixture(name: string): string {
  const dir = join(work, name);
  cpSync(join(FIXTURES, name), dir, { recursive: true });
  return dir;
}

/** Every file under `dir`, relative, sorted. */
function files(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(join(d, e.name), r);
      else out.push(r);
    }
  };
  walk(dir, "");
  return out.sort();
}

// ---- an evolve job, as the trial runner leaves it (as tests/results-out.test.ts builds one) ----

const JOB_ID = "01JOBAAAAAAAAAAAAAAAAAAAAA";
const T1 = "01TRIALAAAAAAAAAAAAAAAAAA1";
const T2 = "01TRIALAAAAAAAAAAAAAAAAAA2";

function evolveJob(): JobRecord {
  return {
    id: JOB_ID,
    created_at: now(),
    status: "COMPLETED",
    finished_at: now(),
    dataset: "example@1.0",
    config: {
      kind: "run",
      agent: { name: "codex", model: "openai/gpt-6", kwargs: { reasoning_effort: "high" } },
      attempts: 1,
      concurrency: 2,
      timeout_multiplier: 1,
      secret_names: [],
      force_build: false,
      max_retries: 2,
      source: { kind: "dataset", ref: "example@1.0" },
      tasks: [{ name: "hello", digest: D }],
    },
  };
}

function evolveTrial(id: string, over: Partial<TrialRecord> = {}): TrialRecord {
  return {
    id,
    job_id: JOB_ID,
    task_digest: D,
    task_name: "hello",
    source: "example@1.0",
    agent: "codex",
    model: "openai/gpt-6",
    status: "SCORED",
    phase_timings: { agent: { started_at: "2026-09-16T18:08:31Z", finished_at: "2026-09-16T18:08:50Z" } },
    rewards: { reward: 1, accuracy: 0.75 },
    reward: 1,
    spend: { live_usd: 0.25, final_usd: null, source: "lower_bound", calls: 3 },
    tokens: { prompt: 120, cached_read: 20, cache_write: 0, output: 30, reasoning: 5 },
    started_at: "2026-09-16T18:08:27Z",
    finished_at: "2026-09-16T18:08:58Z",
    created_at: now(),
    updated_at: now(),
    ...over,
  };
}

async function evolveTrialFolder(t: TrialRecord): Promise<void> {
  const dir = trialDir(home, t.id);
  const outcome: TrialOutcome = {
    id: t.id, taskName: "hello", taskDir: "/store/tasks/x", taskDigest: t.task_digest, source: "example@1.0",
    config: {
      trial_name: t.id, job_id: JOB_ID, task: { path: "/store/tasks/x", name: "hello", digest: t.task_digest, source: "example@1.0" },
      agent: { name: "codex", model_name: "openai/gpt-6", kwargs: { reasoning_effort: "high" } }, timeout_multiplier: 1,
      timeouts: { agent_sec: 600, verifier_sec: 120, build_sec: 600 },
      environment: { force_build: false, network_mode: "public", verifier_mode: "shared", cpus: null, memory_mb: null, storage_mb: null, gpus: null },
      secret_names: [], attempt: 1,
    },
    agent: { name: "codex", model: "openai/gpt-6" }, status: t.status as TrialOutcome["status"], attemptPhase: "persist",
    phaseTimings: t.phase_timings, rewards: t.rewards ?? null, reward: t.reward ?? null, exception: t.exception ?? null,
    startedAt: t.started_at!, finishedAt: t.finished_at!, stepResults: null, attempt: 1, agentInfo: { version: "0.31.0", provider: "openai" },
    agentUsage: { n_input_tokens: 120, n_cache_tokens: 20, n_output_tokens: 30, cost_usd: null },
  };
  await writeResult(dir, outcome);
  writeFileSync(join(dir, "config.json"), JSON.stringify(outcome.config));
  writeFileSync(join(dir, "trial.log"), "trial log\n");
  mkdirSync(join(dir, "agent", ".codex"), { recursive: true });
  writeFileSync(join(dir, "agent", "codex.txt"), '{"type":"thread.started"}\n');
  writeFileSync(join(dir, "agent", ".codex", "state.db"), Buffer.from([0xff, 0xfe, 0x00, 0x01]));
  mkdirSync(join(dir, "verifier"), { recursive: true });
  writeFileSync(join(dir, "verifier", "test-stdout.txt"), "ok\n");
  mkdirSync(join(dir, "artifacts", "app"), { recursive: true });
  writeFileSync(join(dir, "artifacts", "app", "out.txt"), "artifact\n");
  const w = openTraceWriter(home, t.id);
  w.append([
    promptEvent("Say hello."),
    toolCallEvent({ toolCallId: "c1", name: "exec_command", title: "echo", kind: "execute", status: "in_progress", rawInput: { cmd: "echo hi" }, messageId: "m1" }),
    toolResultEvent("c1", "completed", "hi\n"),
    chunkEvent("agent_message_chunk", "Hello.", "m2"),
    usageEvent("call", { promptTokens: 60, completionTokens: 15 }, { messageId: "m2" }),
  ]);
  w.close();
}

async function evolveStoreJob(): Promise<TrialRecord[]> {
  store.putJob(evolveJob());
  const failed = evolveTrial(T2, { status: "SCORING_ERROR", rewards: null, reward: null, spend: { live_usd: 0.5, final_usd: 0.5, source: "measured" }, exception: { type: "RewardFileNotFoundError", message: "no reward", traceback: "tb", occurred_at: "2026-09-16T18:09:00Z" } });
  const trials = [evolveTrial(T1), failed];
  store.putTrials(trials);
  for (const t of trials) await evolveTrialFolder(t);
  return trials;
}

/** What a user compares between two jobs' trials: statuses, rewards, spend, tokens, exception, traces. */
function facts(t: TrialRecord) {
  return {
    task: t.task_name, digest: t.task_digest, agent: t.agent, model: t.model, status: t.status, rewards: t.rewards, reward: t.reward,
    spend: t.spend && { live_usd: t.spend.live_usd, final_usd: t.spend.final_usd, source: t.spend.source }, tokens: t.tokens,
    exception: t.exception ?? null, started_at: t.started_at, finished_at: t.finished_at, phase_timings: t.phase_timings, trace: events(t.id),
  };
}

describe("round trip: evolve job download → upload → the same job", () => {
  for (const shape of ["job.tar.gz", "folder"]) {
    it(`uploads a ${shape} download back to the same statuses, rewards, traces and spend`, async () => {
      const before = await evolveStoreJob();
      const target = shape === "folder" ? join(work, "dl") : join(work, "job.tar.gz");
      const written = await downloadJob(store, home, JOB_ID, target);
      const { job, trials, scored } = await upload(written);
      expect(job.id).not.toBe(JOB_ID);
      expect(job.status).toBe("COMPLETED");
      expect(scored).toBe(1);
      const upload0 = job.upload as UploadInfo;
      expect(upload0).toMatchObject({ original_job_id: expect.any(String), reported_totals: expect.objectContaining({ n_total_trials: 2 }) });
      expect(upload0.task_links.map((l) => l.digest)).toEqual([D, D]);
      const byTask = (ts: TrialRecord[]) => [...ts].sort((a, b) => (a.status < b.status ? -1 : 1)).map(facts);
      expect(byTask(trials)).toEqual(byTask(before.map((t) => store.getTrial(t.id)!)));
      // the files land where a native trial's are, and download again as they were
      const t1 = trials.find((t) => t.status === "SCORED")!;
      expect(readFileSync(join(trialDir(home, t1.id), "agent", ".codex", "state.db"))).toEqual(Buffer.from([0xff, 0xfe, 0x00, 0x01]));
      expect(readFileSync(join(trialDir(home, t1.id), "verifier", "test-stdout.txt"), "utf8")).toBe("ok\n");
      const again = await exportJob(store, home, job.id, join(work, "again"));
      const first = shape === "folder" ? written : (await downloadJob(store, home, JOB_ID, join(work, "dl2")));
      const strip = (r: Record<string, unknown>) => {
        const { id: _i, trial_uri: _u, trial_name: _n, config: _c, x_evolve, ...rest } = r;
        const { trial_id: _t, job_id: _j, ...xe } = x_evolve as Record<string, unknown>;
        return { ...rest, x_evolve: xe };
      };
      const old = trialName(before[0]);
      const neu = trialName(t1);
      expect(strip(readJson(join(again, neu, "result.json")))).toEqual(strip(readJson(join(first, old, "result.json"))));
      expect(files(join(again, neu))).toEqual(files(join(first, old)));
      // the trajectory the download carried is the agent's file now, kept byte for byte
      expect(readFileSync(join(again, neu, "agent", "trajectory.json"))).toEqual(readFileSync(join(first, old, "agent", "trajectory.json")));
    });
  }
});

describe("job folders in the shapes Harbor writes (fixtures/harbor-jobs)", () => {
  it("an oracle job: its trial, reward, timings, artifacts and logs", async () => {
    const { job, trials, scored } = await upload(join(FIXTURES, "oracle-job"));
    expect(scored).toBe(1);
    expect(trials).toHaveLength(1);
    const [t] = trials;
    expect(t).toMatchObject({ task_name: "hello-world", agent: "oracle", status: "SCORED", rewards: { reward: 1 }, reward: 1, exception: null });
    expect(t.phase_timings.agent).toEqual({ started_at: "2026-09-16T18:08:31Z", finished_at: "2026-09-16T18:08:50Z" });
    expect(files(trialDir(home, t.id))).toEqual([
      "agent/oracle.txt", "artifacts/app/hello.txt", "artifacts/manifest.json", "config.json", "result.json", "trial.log", "verifier/reward.txt", "verifier/test-stdout.txt",
    ]);
    expect(job.upload).toMatchObject({ original_job_id: "6f1c2b3a-0000-4000-8000-000000000001", original_job_name: "oracle-job", reported_totals: { n_total_trials: 1, cost_usd: 0.0123 } });
    expect((job.config as { agent: unknown }).agent).toEqual({ name: "oracle" });
  });

  it("a codex job with only a session rollout: the rollout is the trace, through codex's parser", async () => {
    const { trials } = await upload(join(FIXTURES, "codex-job"));
    const [t] = trials;
    expect(t).toMatchObject({ agent: "codex", model: "gpt-5", status: "SCORED", reward: 1, tokens: { prompt: 6500, cached_read: 2300, output: 48 }, spend: { live_usd: 0.0123, final_usd: 0.0123, source: "reported" } });
    const ev = events(t.id);
    expect(ev[0]).toEqual({ type: "prompt", data: { _prompt: { text: "Write hello-from-tool into out.txt with the shell, then say done." } } });
    expect(ev.some((e) => e.type === "tool_call" && (e.data as { update: { name: string } }).update.name === "exec_command")).toBe(true);
    expect(ev.some((e) => e.type === "tool_call_update")).toBe(true);
    expect(ev.some((e) => e.type === "agent_message_chunk" && JSON.stringify(e.data).includes("Done: out.txt holds hello-from-tool."))).toBe(true);
    expect(ev.filter((e) => e.type === "usage").length).toBeGreaterThan(0);
    expect(existsSync(join(trialDir(home, t.id), "agent", ".codex", "config.toml"))).toBe(true);
  });

  it("a claude-code job with a project session: the session is the trace, through claude-code's parser", async () => {
    const { trials, scored } = await upload(join(FIXTURES, "claude-code-job"));
    const [t] = trials;
    expect(scored).toBe(1);
    expect(t).toMatchObject({ agent: "claude-code", status: "SCORED", reward: 0 });
    const ev = events(t.id);
    expect(ev[0].type).toBe("prompt");
    expect(JSON.stringify(ev[0])).toContain("Write hello-from-tool");
    expect(ev.some((e) => e.type === "tool_call" && (e.data as { update: { name: string } }).update.name === "Bash")).toBe(true);
    expect(ev.some((e) => e.type === "agent_message_chunk" && JSON.stringify(e.data).includes("Done: out.txt holds hello-from-tool."))).toBe(true);
  });

  it("exceptions map to statuses (others kept as written), a multi-step trial keeps its steps, an ATIF system step is the system prompt", async () => {
    const { job, trials, scored } = await upload(join(FIXTURES, "mixed-job"));
    expect(scored).toBe(2);
    const by: Record<string, TrialRecord> = Object.fromEntries(trials.map((t) => [t.task_name, t]));
    expect(by["over-budget"]).toMatchObject({ status: "BUDGET", rewards: null, exception: { type: "ApiUsageLimitError", message: "the key's usage limit was reached" } });
    expect(by["odd-failure"]).toMatchObject({ status: "INFRASTRUCTURE_ERROR", exception: { type: "SandboxVanishedError" } });
    expect(by["timed-out"]).toMatchObject({ status: "SCORED", reward: 0, exception: { type: "AgentTimeoutError" } });
    const multi = by["two-steps"];
    expect(multi).toMatchObject({ status: "SCORED", reward: 0.5 });
    expect(multi.step_results?.map((s: { name: string }) => [s.name, (s as { rewards?: unknown }).rewards])).toEqual([["one", { reward: 1 }], ["two", { reward: 0 }]]);
    expect(existsSync(join(trialDir(home, multi.id), "steps", "two", "agent", "terminus.txt"))).toBe(true);
    const ev = events(multi.id);
    expect(ev[0]).toEqual({ type: "prompt", data: { _prompt: { text: "Create two files, one per step.", system: "You are a careful terminal agent." } } });
    expect(ev.some((e) => e.type === "error")).toBe(false);
    expect(ev.map((e) => e.type)).toEqual(["prompt", "agent_thought_chunk", "agent_message_chunk", "tool_call", "tool_call_update", "usage", "agent_message_chunk", "usage"]);
    // the uploaded job exports as a Harbor job folder again, its trajectories valid ATIF
    const dir = await exportJob(store, home, job.id, join(work, "out"));
    expect(validateTrajectory(readJson(join(dir, trialName(multi), "agent", "trajectory.json")))).toEqual([]);
    expect(readJson(join(dir, trialName(by["over-budget"]), "result.json")).exception_info.exception_type).toBe("ApiUsageLimitError");
  });

  it("Harbor's exception names and evolve's statuses, as the one mapping decides them", () => {
    expect(portedStatus(null, "ScoringError")).toBe("SCORING_ERROR");
    expect(portedStatus(null, "InfrastructureError")).toBe("INFRASTRUCTURE_ERROR");
    expect(portedStatus(null, "ApiUsageLimitError")).toBe("BUDGET");
    expect(portedStatus(null, "CancelledError")).toBe("CANCELLED");
    expect(portedStatus(null, "RewardFileNotFoundError")).toBe("SCORING_ERROR");
    expect(portedStatus({ reward: 1 }, "CancelledError")).toBe("SCORED");
    expect(portedStatus(null, undefined)).toBe("SCORED");
    expect(portedStatus(null, "ScoringError", "INDETERMINATE")).toBe("INDETERMINATE");
  });
});

describe("task linkage by content hash", () => {
  const summary = { steps: 1, gpus: 0, gpu_types: [], agent_timeout_sec: null, verifier_timeout_sec: null, network_mode: "public", verifier_mode: "shared", docker_image: null };
  const putTask = (digest: string, name: string) => store.putTask({ digest, name, stored_at: now(), summary });
  const putDataset = (name: string, version: string, tasks: { name: string; digest: string }[]) =>
    store.putDataset({ name, version, digest: `sha256:${"9".repeat(63)}${version.length}`, tasks, status: "active", created_at: now(), updated_at: now() });
  const namesDataset = (dir: string, ref: string) => {
    const c = readJson(join(dir, "config.json"));
    c.datasets = [{ name: ref.split("@")[0], version: ref.split("@")[1] }];
    writeFileSync(join(dir, "config.json"), JSON.stringify(c));
  };
  const link = async (dir: string, dataset?: string) => ((await upload(dir, { dataset })).job.upload as UploadInfo).task_links[0];

  it("links a held task by its hash, and says why otherwise", async () => {
    putTask(D, "write-file");
    expect(await link(fixture("codex-job"))).toMatchObject({ linked: true, digest: D, reason: null });

    const noDigest = fixture("claude-code-job");
    rmSync(join(noDigest, "lock.json"));
    expect(await link(noDigest)).toMatchObject({ linked: false, digest: null, reason: "no_task_digest" });

    const other = `sha256:${"2".repeat(64)}`;
    const unheld = fixture("oracle-job");
    const lock = readJson(join(unheld, "lock.json"));
    lock.trials[0].task.digest = other;
    writeFileSync(join(unheld, "lock.json"), JSON.stringify(lock));
    expect(await link(unheld)).toMatchObject({ linked: false, digest: other, reason: "no_dataset_named" });
  });

  it("a dataset the job names tells a hash mismatch from a task not in it; one not held is no_hash_match", async () => {
    const other = `sha256:${"2".repeat(64)}`;
    const mk = (name: string, ref: string) => {
      const dir = fixture(name);
      rmSync(join(work, `${name}-${ref}`), { recursive: true, force: true });
      const lock = readJson(join(dir, "lock.json"));
      lock.trials[0].task.digest = other;
      writeFileSync(join(dir, "lock.json"), JSON.stringify(lock));
      const c = readJson(join(dir, "result.json"));
      c.id = `${c.id}-${ref}`;
      writeFileSync(join(dir, "result.json"), JSON.stringify(c));
      namesDataset(dir, ref);
      return dir;
    };
    putDataset("bench", "1.0", [{ name: "hello-world", digest: D }]);
    putDataset("bench", "2.0", [{ name: "another", digest: D }]);
    expect(await link(mk("oracle-job", "bench@1.0"))).toMatchObject({ linked: false, reason: "hash_mismatch", dataset: "bench@1.0" });
    rmSync(join(work, "oracle-job"), { recursive: true });
    expect(await link(mk("oracle-job", "bench@2.0"))).toMatchObject({ linked: false, reason: "task_not_in_dataset" });
    rmSync(join(work, "oracle-job"), { recursive: true });
    expect(await link(mk("oracle-job", "gone@1.0"))).toMatchObject({ linked: false, reason: "no_hash_match" });
  });

  it("a hash held in several datasets is ambiguous; -d name@version links by task name and settles it", async () => {
    putTask(D, "hello-world");
    putDataset("a", "1", [{ name: "hello-world", digest: D }]);
    putDataset("b", "1", [{ name: "hello-world", digest: D }]);
    expect(await link(fixture("oracle-job"))).toMatchObject({ linked: false, reason: "dataset_ambiguous" });
    const second = fixture("codex-job");
    const other = `sha256:${"3".repeat(64)}`;
    putDataset("c", "1", [{ name: "write-file", digest: other }]);
    const l = await link(second, "c@1");
    expect(l).toMatchObject({ linked: true, digest: other, dataset: "c@1", reason: null });
    const t = store.listTrials().find((x) => x.task_digest === other)!;
    expect(t.source).toBe("c@1");
  });
});

describe("bounds and refusals", () => {
  it("upload_too_large: an archive or a folder over the ceiling (limits.uploads.job_archive_bytes), and a huge job.log", async () => {
    const tgz = join(work, "oracle.tar.gz");
    execFileSync("tar", ["-czf", tgz, "-C", FIXTURES, "oracle-job"]);
    await expectCode(() => upload(tgz, { limits: limits({ archiveBytes: 100 }) }), "upload_too_large");
    await expectCode(() => upload(join(FIXTURES, "oracle-job"), { limits: limits({ archiveBytes: 1000 }) }), "upload_too_large");
    const dir = fixture("oracle-job");
    truncateSync(join(dir, "job.log"), 4096);
    await expectCode(() => upload(dir, { limits: limits({ fileBytes: 2048 }) }), "upload_too_large");
    expect(store.listJobs()).toEqual([]);
    writeFileSync(join(home, "config.toml"), "[limits.uploads]\njob_archive_bytes = 1234\n");
    expect(loadConfig(home).limits.uploads.job_archive_bytes).toBe(1234);
  });

  it("trial_too_large: a trial with a file over the limit, or a trajectory too large to parse, is skipped; the rest lands", async () => {
    const dir = fixture("mixed-job");
    truncateSync(join(dir, "odd-failure__Lk8jH7g", "trial.log"), 1 << 20); // sparse: no disk, a large size
    const { trials, skippedTrials } = await upload(dir, { limits: limits({ fileBytes: 1 << 19, traceBytes: 1000 }) });
    expect(skippedTrials.map((s) => [s.trial, s.code])).toEqual([["odd-failure__Lk8jH7g", "trial_too_large"], ["two-steps__Mn4bV6c", "trial_too_large"]]);
    expect(trials.map((t) => t.task_name).sort()).toEqual(["over-budget", "timed-out"]);
  });

  it("invalid_trial: a result.json that cannot be read, or lacks a required key, fails the import and nothing lands", async () => {
    const dir = fixture("mixed-job");
    writeFileSync(join(dir, "timed-out__Rt5eW3q", "result.json"), "{ not json");
    await expectCode(() => upload(dir), "invalid_trial");
    const r = readJson(join(FIXTURES, "mixed-job", "timed-out__Rt5eW3q", "result.json"));
    delete r.task_checksum;
    writeFileSync(join(dir, "timed-out__Rt5eW3q", "result.json"), JSON.stringify(r));
    const e = await expectCode(() => upload(dir), "invalid_trial");
    expect(e.message).toContain("task_checksum");
    expect(store.listJobs()).toEqual([]);
    expect(store.listTrials()).toEqual([]);
    expect(existsSync(join(home, "trials"))).toBe(false);
  });

  it("upload_invalid: no config.json and result.json at the job's root", async () => {
    const dir = fixture("oracle-job");
    rmSync(join(dir, "config.json"));
    await expectCode(() => upload(dir), "upload_invalid");
  });

  it("job_already_uploaded: the same job twice", async () => {
    await upload(join(FIXTURES, "oracle-job"));
    await expectCode(() => upload(join(FIXTURES, "oracle-job")), "job_already_uploaded");
    expect(store.listJobs()).toHaveLength(1);
  });

  it("job_uploaded: resume, job retry, trial retry and trial regrade refuse an uploaded job", async () => {
    const { job, trials } = await upload(join(FIXTURES, "mixed-job"));
    expect(runRefusal(store.getJob(job.id)!)?.code).toBe("job_uploaded");
    await expectCode(() => retryPicks(store, job.id), "job_uploaded");
    await expectCode(() => createRetry(store, trials[0].id), "job_uploaded");
    await expectCode(() => createRegrade(store, home, trials[0].id), "job_uploaded");
  });

  it("records each import: COMPLETED with its job and counts, FAILED with the refusal's code", async () => {
    const ok = startImport(home, join(FIXTURES, "mixed-job"));
    const { record } = await runImport(store, home, ok.id, limits());
    expect(record).toMatchObject({ status: "COMPLETED", trials: 4, scored: 2, error: null, runner: null });
    const bad = startImport(home, join(work, "nothing-here"));
    await expectCode(() => runImport(store, home, bad.id, limits()), "upload_unreadable");
    expect(getImport(home, bad.id)).toMatchObject({ status: "FAILED", error: { code: "upload_unreadable" } });
    expect(listImports(home, "COMPLETED").map((r) => r.id)).toEqual([ok.id]);
    expect(existsSync(join(home, "imports", ok.id))).toBe(false);
    // an import whose process is gone reads FAILED (import_interrupted): nothing will finish it
    const dead = execFileSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
    const orphan = startImport(home, join(FIXTURES, "oracle-job"));
    putImport(home, { ...orphan, runner: { pid: Number(dead), host: hostname() } });
    expect(getImport(home, orphan.id)).toMatchObject({ status: "FAILED", error: { code: "import_interrupted" }, runner: null });
  });
});

// ---- hostile archives ----

/** A ustar header of any type flag (a device, a FIFO) that evolve's writer does not make. */
function rawEntry(name: string, typeflag: string, linkname = "", size = 0): Buffer {
  const [h] = entryBlocks({ name, type: "file", mode: 0o644, data: new Uint8Array(0) });
  const b = Buffer.from(h);
  b.write(typeflag, 156, "latin1");
  b.fill(0, 157, 257);
  b.write(linkname, 157, "utf8");
  b.write(size.toString(8).padStart(11, "0") + "\0", 124, "latin1");
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const x of b) sum += x;
  b.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "latin1");
  return b;
}

/** The oracle fixture job as tar entries under `job/`, then `extra` blocks. */
function hostileArchive(extra: Buffer[]): string {
  const blocks: Buffer[] = [];
  const src = join(FIXTURES, "oracle-job");
  for (const rel of files(src)) blocks.push(...entryBlocks({ name: `job/${rel}`, type: "file", mode: 0o644, data: readFileSync(join(src, rel)) }));
  blocks.push(...extra, endBlocks());
  const file = join(work, `hostile-${++n}.tar.gz`);
  writeFileSync(file, gzipSync(Buffer.concat(blocks)));
  return file;
}

const T = "job/hello-world__aB3dE5f";
const file = (name: string, text: string) => entryBlocks({ name, type: "file", mode: 0o644, data: Buffer.from(text) });

describe("hostile archives: refused or skipped with a reason, nothing written outside the import's folder", () => {
  const cases: { what: string; entries: () => Buffer[]; reason: RegExp; path: string }[] = [
    { what: "a path climbing out with ..", entries: () => file(`${T}/../../../escape.txt`, "x"), reason: /\.\./, path: "escape.txt" },
    { what: "an absolute path", entries: () => file(`/${work.slice(1)}/absolute.txt`, "x"), reason: /absolute/, path: "absolute.txt" },
    { what: "a symbolic link out", entries: () => entryBlocks({ name: `${T}/agent/secret`, type: "symlink", mode: 0o777, linkname: "/etc/passwd" }), reason: /symbolic link/, path: "secret" },
    { what: "a hard link", entries: () => entryBlocks({ name: `${T}/agent/hard`, type: "hardlink", mode: 0o644, linkname: "/etc/passwd" }), reason: /hard link/, path: "hard" },
    { what: "a character device", entries: () => [rawEntry(`${T}/agent/zero`, "3")], reason: /special file/, path: "zero" },
    { what: "a FIFO", entries: () => [rawEntry(`${T}/agent/pipe`, "6")], reason: /special file/, path: "pipe" },
  ];
  for (const c of cases) {
    it(`skips ${c.what}`, async () => {
      const archive = hostileArchive(c.entries());
      const before = readdirSync(work).sort();
      const { trials, skippedEntries } = await upload(archive);
      expect(trials).toHaveLength(1);
      expect(skippedEntries).toEqual([expect.objectContaining({ reason: expect.stringMatching(c.reason) })]);
      expect(readdirSync(work).sort()).toEqual(before);
      expect(files(trialDir(home, trials[0].id)).some((f) => f.endsWith(c.path))).toBe(false);
      expect(existsSync(join(home, "imports", `IMPORT${n}`))).toBe(false);
    });
  }

  it("keeps the first of duplicate entries, and skips a path below a file", async () => {
    const { trials, skippedEntries } = await upload(hostileArchive([...file(`${T}/trial.log`, "second\n"), ...file(`${T}/trial.log/under`, "x")]));
    expect(readFileSync(join(trialDir(home, trials[0].id), "trial.log"), "utf8")).toBe("trial started\n");
    expect(skippedEntries.map((s) => s.reason)).toEqual([expect.stringMatching(/appears twice/), expect.stringMatching(/below the file/)]);
  });

  it("refuses a tar bomb: more bytes unpacked than the ceiling (upload_too_large), without unpacking them", async () => {
    const bomb = hostileArchive([rawEntry(`${T}/agent/bomb.bin`, "0", "", 50 * 1024 ** 2)]);
    await expectCode(() => upload(bomb, { limits: limits({ archiveBytes: 10 * 1024 ** 2 }) }), "upload_too_large");
    // a gzip of padding past the archive's end, expanding far beyond anything its entries could hold
    const zeros = join(work, "zeros.tar.gz");
    writeFileSync(zeros, gzipSync(Buffer.concat([...file("job/config.json", "{}"), Buffer.alloc(8 * 1024 ** 2, 0)])));
    await expectCode(() => upload(zeros, { limits: limits({ archiveBytes: 1024 ** 2 }) }), "upload_too_large");
    expect(store.listJobs()).toEqual([]);
    expect(readdirSync(join(home, "imports")).length === 0 || !existsSync(join(home, "imports"))).toBe(true);
  });

  it("refuses what is no gzip tar (upload_unreadable)", async () => {
    const bad = join(work, "bad.tar.gz");
    writeFileSync(bad, "not gzip");
    await expectCode(() => upload(bad), "upload_unreadable");
  });
});

describe("a job folder given as a folder", () => {
  it("never follows a link out of it, skips a FIFO, and reads nothing through either", async () => {
    const dir = fixture("oracle-job");
    const secret = join(work, "secret.txt");
    writeFileSync(secret, "do not copy");
    const t = join(dir, "hello-world__aB3dE5f");
    symlinkSync(secret, join(t, "agent", "link.txt"));
    symlinkSync(work, join(t, "artifacts", "outside"));
    execFileSync("mkfifo", [join(t, "agent", "pipe")]);
    const { trials, skippedEntries } = await upload(dir);
    expect(skippedEntries.map((s) => [s.path.split("/").pop(), s.reason.split(" (")[0].split(":")[0]]).sort()).toEqual([
      ["link.txt", "a symbolic link"],
      ["outside", "a symbolic link"],
      ["pipe", "not a regular file"],
    ]);
    const got = files(trialDir(home, trials[0].id));
    expect(got.some((f) => f.includes("link.txt") || f.includes("outside") || f.includes("pipe"))).toBe(false);
  });

  it("refuses a link given as the job folder itself", async () => {
    const link = join(work, "link-job");
    symlinkSync(join(FIXTURES, "oracle-job"), link);
    await expectCode(() => upload(link), "upload_unreadable");
  });
});
