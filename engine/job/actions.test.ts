/**
 * The store side of `trial stop|retry|regrade` (engine/job/actions.ts, engine/trial/regrade.ts regradeRefusal,
 * engine/trial/stop.ts) without containers: who settles a stopped trial, what is refused before anything is
 * written, and with which code.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createRegrade, createRetry, requestStop } from "./actions.ts";
import { createJob, type JobConfig } from "./job.ts";
import { openStore, taskBlobDir, trialDir, type Store, type TrialRecord } from "../store/index.ts";
import { regradeRefusal } from "../trial/regrade.ts";
import { watchStopRequest } from "../trial/stop.ts";
import { expectCode } from "../../tests/support/expect-code.ts";

const FIXTURES = resolve(__dirname, "../..", "fixtures", "tasks", "trials");
const DIGEST = `sha256:${"a".repeat(64)}`;
let home: string;
let store: Store;

function config(): JobConfig {
  return {
    agent: { name: "oracle" },
    attempts: 1,
    concurrency: 1,
    timeout_multiplier: 1,
    secret_names: [],
    force_build: false,
    max_retries: 0,
    source: { kind: "path", path: "/x" },
    tasks: [{ name: "t", digest: DIGEST }],
  };
}

/** A job with one trial in `status`, its runner alive (this process) or gone. */
function trialIn(status: TrialRecord["status"], fields: Partial<TrialRecord> = {}, runnerAlive = false): TrialRecord {
  const job = createJob(store, config());
  store.putJob({ ...job, runner: runnerAlive ? { pid: process.pid, host: hostname(), started_at: job.created_at } : null });
  const [t] = store.listTrials(job.id);
  const rec: TrialRecord = { ...t, status, ...fields };
  store.putTrial(rec);
  return rec;
}

/** Stores a fixture task under DIGEST, with task.toml edited by `edit`. */
function storeTask(fixture: string, edit: (toml: string) => string = (s) => s): string {
  const dir = taskBlobDir(home, DIGEST);
  cpSync(join(FIXTURES, fixture), dir, { recursive: true });
  writeFileSync(join(dir, "task.toml"), edit(readFileSync(join(dir, "task.toml"), "utf8")));
  store.putTask({ digest: DIGEST, name: "t", stored_at: new Date().toISOString(), summary: { steps: 1, gpus: 0, gpu_types: [], agent_timeout_sec: null, verifier_timeout_sec: null, network_mode: "public", verifier_mode: "shared", docker_image: null } });
  return dir;
}

const verified = { phase_timings: { verify: { started_at: "2026-01-01T00:00:00Z", finished_at: "2026-01-01T00:00:01Z" } } };

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-actions-"));
  store = openStore(home);
});
afterEach(async () => {
  await store.close();
});

describe("trial stop", () => {
  it("marks a running trial whose runner is alive, and that runner's watch aborts it", async () => {
    const t = trialIn("RUNNING", {}, true);
    const watch = watchStopRequest(store, t.id, undefined, 20);
    expect(watch.signal.aborted).toBe(false);
    expect(requestStop(store, [t.id])).toEqual([{ id: t.id, action: "requested", status: "RUNNING" }]);
    await new Promise((r) => setTimeout(r, 100));
    expect(watch.signal.aborted).toBe(true);
    watch.dispose();
    expect(store.getTrial(t.id)?.status).toBe("RUNNING"); // the runner settles it, not the stopper
  });

  it("settles CANCELLED at once a trial no live process runs, and a queued one; leaves settled ones alone", () => {
    const orphan = trialIn("RUNNING");
    const queued = trialIn("QUEUED", {}, true);
    const done = trialIn("SCORED");
    const out = requestStop(store, [orphan.id, queued.id, done.id]);
    expect(out.map((o) => o.action)).toEqual(["cancelled", "cancelled", "settled"]);
    expect(store.getTrial(orphan.id)).toMatchObject({ status: "CANCELLED", exception: { type: "CancelledError" } });
    expect(store.getTrial(queued.id)?.stop_requested_at).toBeTruthy();
    expect(store.getTrial(done.id)?.status).toBe("SCORED");
    expect(store.getJob(orphan.job_id)?.status).toBe("RUNNING"); // the job is not cancelled
  });

  it("refuses an unknown id before marking any of the others", async () => {
    const t = trialIn("RUNNING");
    await expectCode(() => requestStop(store, [t.id, "NOPE"]), "trial_not_found");
    expect(store.getTrial(t.id)?.status).toBe("RUNNING");
  });
});

describe("trial retry and regrade refusals", () => {
  it("retry refuses a trial still in flight and a task no longer stored", async () => {
    await expectCode(() => createRetry(store, trialIn("RUNNING").id), "trial_not_settled");
    await expectCode(() => createRetry(store, trialIn("SCORED").id), "task_missing");
    storeTask("oracle-ok");
    const made = createRetry(store, trialIn("SCORED").id);
    expect(store.listTrials(made.job.id)).toHaveLength(1);
  });

  it("regrade refuses, by code, what it cannot re-score faithfully", async () => {
    const dir = storeTask("oracle-ok");
    const refusal = async (fields: Partial<TrialRecord>, status: TrialRecord["status"] = "SCORED") => (await regradeRefusal(home, trialIn(status, fields), dir))?.code;
    expect(await refusal(verified, "RUNNING")).toBe("trial_not_settled");
    expect(await refusal({ phase_timings: {} }, "INFRASTRUCTURE_ERROR")).toBe("regrade_never_verified");
    expect(await refusal(verified)).toBe("regrade_no_kept_files");
    // the kept tree of a trial whose agent changed the shared verifier's programs holds those changes: never rerun
    const changed = { ...verified, exception: { type: "VerifierEnvironmentChangedError", message: "the agent changed 1 path(s) …: /usr/local/bin/cat (added)", traceback: "", occurred_at: "x" } };
    expect(await refusal(changed, "INDETERMINATE")).toBe("regrade_verifier_changed");

    const kept = trialIn("SCORED", verified);
    mkdirSync(trialDir(home, kept.id), { recursive: true });
    const manifest = { version: 1, captured_at: "x", cap_bytes: 1, kept_bytes: 0, files: [], excluded: [], skipped: [] as unknown[] };
    writeFileSync(join(trialDir(home, kept.id), "fs-changes.json"), JSON.stringify(manifest));
    expect(await regradeRefusal(home, kept, dir)).toBeUndefined();
    manifest.skipped.push({ path: "/app/big", kind: "added", reason: "over the cap" });
    writeFileSync(join(trialDir(home, kept.id), "fs-changes.json"), JSON.stringify(manifest));
    expect((await regradeRefusal(home, kept, dir))?.code).toBe("regrade_files_incomplete");

    writeFileSync(join(dir, "task.toml"), readFileSync(join(dir, "task.toml"), "utf8").replace("[verifier]\n", '[verifier]\nenv = { JUDGE_KEY = "${ANTHROPIC_API_KEY}" }\n'));
    expect(await refusal(verified)).toBe("regrade_judge_task");
    // and nothing was made for a refused regrade
    const before = store.listJobs().length;
    await expectCode(() => createRegrade(store, home, trialIn("SCORED", verified).id), "regrade_judge_task");
    expect(store.listJobs()).toHaveLength(before + 1); // only the original trial's own job
  });

  it("regrade refuses a multi-step task", async () => {
    const dir = storeTask("multi-step-gate");
    expect((await regradeRefusal(home, trialIn("SCORED", verified), dir))?.code).toBe("regrade_multi_step");
  });
});
