/**
 * A store for the dashboard's tests (unit and browser tiers): two finished jobs of the same three tasks to compare,
 * a running job whose trial's trace the test grows, a check job on the dataset, a dataset with two versions, a trial
 * with a kept tree, logs and a trace holding markup that must render as text. Written through the store and the
 * trace writer, as the runner writes them.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type { JobConfig } from "../../engine/job/job.ts";
import { openStore, trialDir, type JobRecord, type Store, type TrialRecord } from "../../engine/store/index.ts";
import { chunkEvent, promptEvent, toolCallEvent, toolResultEvent, usageEvent } from "../../engine/trace/events.ts";
import { openTraceWriter } from "../../engine/trace/store.ts";

export const HOSTILE = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`;

const digest = (c: string) => `sha256:${c.repeat(64)}`;
export const TASKS = [
  { name: "alpha", digest: digest("a") },
  { name: "bravo", digest: digest("b") },
  { name: "charlie", digest: digest("c") },
];

export interface DashboardFixture {
  home: string;
  store: Store;
  /** Baseline and candidate: rewards per task alpha, bravo, charlie (k = 2 trials each). */
  base: string;
  cand: string;
  running: string;
  runningTrial: string;
  check: string;
  /** A settled trial of `base` with a 500-event trace, a kept tree and logs. */
  rich: string;
}

function config(over: Partial<JobConfig>): JobConfig {
  return {
    kind: "run",
    agent: { name: "oracle" },
    attempts: 2,
    concurrency: 1,
    timeout_multiplier: 1,
    secret_names: [],
    force_build: false,
    max_retries: 0,
    source: { kind: "dataset", ref: "demo@1.1" },
    tasks: TASKS,
    ...over,
  };
}

const at = (s: number) => new Date(Date.UTC(2026, 5, 1, 12, 0, s)).toISOString();

/** Builds the store in a fresh home. */
export function dashboardFixture(): DashboardFixture {
  const home = mkdtempSync(join(tmpdir(), "evolve-dash-"));
  const store = openStore(home);
  for (const t of TASKS) {
    store.putTask({ digest: t.digest, name: t.name, stored_at: at(0), summary: { steps: 1, gpus: t.name === "charlie" ? 1 : 0, gpu_types: [], agent_timeout_sec: 600, verifier_timeout_sec: 120, network_mode: "none", verifier_mode: "tests", docker_image: null } });
  }
  store.putDataset({ name: "demo", version: "1.0", digest: digest("d"), tasks: TASKS.slice(0, 2), status: "active", created_at: at(0), updated_at: at(0) });
  store.putDataset({ name: "demo", version: "1.1", digest: digest("e"), tasks: TASKS, status: "active", created_at: at(1), updated_at: at(1) });

  let n = 0;
  const job = (id: string, over: Partial<JobConfig>, status: JobRecord["status"] = "COMPLETED", extra: Partial<JobRecord> = {}) =>
    store.putJob({ id, created_at: at(n++), status, dataset: "demo@1.1", config: config(over), ...extra });
  const trial = (jobId: string, task: (typeof TASKS)[number], i: number, rec: Partial<TrialRecord>): TrialRecord => {
    const t: TrialRecord = {
      id: `${jobId}T${task.name}${i}`,
      job_id: jobId,
      task_digest: task.digest,
      task_name: task.name,
      source: "demo@1.1",
      agent: "oracle",
      status: "SCORED",
      phase_timings: { build: { started_at: at(0), finished_at: at(2) }, agent: { started_at: at(2), finished_at: at(10) }, verify: { started_at: at(10), finished_at: at(12) } },
      created_at: at(n++),
      updated_at: at(n),
      ...rec,
    };
    store.putTrial(t);
    return t;
  };

  const base = "01JBASE0000000000000000000";
  const cand = "01JCAND0000000000000000000";
  job(base, { name: "baseline", agent: { name: "claude-code", model: "sonnet" } });
  job(cand, { name: "candidate", agent: { name: "claude-code", model: "opus" } });
  // baseline: alpha 1,0 bravo 0,0 charlie 1,1 → means .5 0 1; candidate: alpha 1,1 bravo 1,0 charlie 1,1 → 1 .5 1
  const rewards: Record<string, [number[], number[]]> = { alpha: [[1, 0], [1, 1]], bravo: [[0, 0], [1, 0]], charlie: [[1, 1], [1, 1]] };
  for (const t of TASKS) {
    for (let i = 0; i < 2; i++) {
      trial(base, t, i, { rewards: { reward: rewards[t.name]![0][i]! }, model: "sonnet", agent: "claude-code", tokens: { input: 100, output: 10 }, spend: { live_usd: 0.01, final_usd: 0.01, source: "measured", calls: 1 } });
      trial(cand, t, i, { rewards: { reward: rewards[t.name]![1][i]! }, model: "opus", agent: "claude-code" });
    }
  }
  // one failure with an exception in the candidate, beside its scored trials
  trial(cand, TASKS[0]!, 2, { status: "INFRASTRUCTURE_ERROR", rewards: null, exception: { type: "EngineError", message: `podman went away ${HOSTILE}\nmore`, traceback: "", occurred_at: at(3) } });

  // a trial with a long trace, a kept tree and logs
  const rich = `${base}Talpha0`;
  const w = openTraceWriter(home, rich);
  w.append([promptEvent(`Fix the bug. ${HOSTILE}`)]);
  w.append([chunkEvent("agent_thought_chunk", "I should look at the file first")]);
  w.append([toolCallEvent({ toolCallId: "call-1", name: "Bash", title: "cat main.py", kind: "execute", status: "pending", rawInput: { command: "cat main.py" } })]);
  w.append([toolResultEvent("call-1", "completed", `print("hi") ${HOSTILE}`)]);
  w.append([usageEvent("call", { promptTokens: 120, completionTokens: 30 }, { model: "sonnet" })]);
  for (let i = 0; i < 495; i++) w.append([chunkEvent("agent_message_chunk", `message ${i}`, `m${i}`)]);
  w.close();
  const dir = trialDir(home, rich);
  mkdirSync(join(dir, "verifier"), { recursive: true });
  writeFileSync(join(dir, "verifier", "test-stdout.txt"), `1 passed ${HOSTILE}\n`);
  writeFileSync(join(dir, "setup.log"), "STEP 1/3 FROM debian\n");
  writeFileSync(join(dir, "trial.log"), "trial started\n");
  mkdirSync(join(dir, "agent"), { recursive: true });
  writeFileSync(join(dir, "agent", "claude-code.txt"), `{"type":"result"} ${HOSTILE}\n`);
  mkdirSync(join(dir, "fs", "app"), { recursive: true });
  writeFileSync(join(dir, "fs", "app", "main.py"), 'print("fixed")\n');
  writeFileSync(
    join(dir, "fs-changes.json"),
    JSON.stringify({ version: 1, captured_at: at(12), cap_bytes: 1 << 20, kept_bytes: 15, files: [{ path: "/app/main.py", kind: "modified", type: "file", size: 15 }, { path: "/app/old.py", kind: "deleted" }], excluded: [], skipped: [] }),
  );

  // a running job (its runner is this process) with one live trial
  const running = "01JRUN00000000000000000000";
  job(running, { name: "live-one", agent: { name: "codex", model: "gpt" } }, "RUNNING", { runner: { pid: process.pid, host: hostname(), started_at: at(0) } });
  const runningTrial = trial(running, TASKS[1]!, 0, { status: "RUNNING", attempt_phase: "agent", phase_timings: { build: { started_at: at(0), finished_at: at(2) }, agent: { started_at: at(2) } }, agent: "codex", model: "gpt" }).id;
  const lw = openTraceWriter(home, runningTrial);
  lw.append([chunkEvent("agent_message_chunk", "starting work")]);
  lw.close();

  // a check job on the same dataset
  const check = "01JCHECK000000000000000000";
  job(check, { kind: "check", name: "check-demo" });
  trial(check, TASKS[0]!, 0, { rewards: { reward: 1 } });
  trial(check, TASKS[1]!, 0, { rewards: { reward: 0 } });

  return { home, store, base, cand, running, runningTrial, check, rich };
}
