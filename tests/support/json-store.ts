/**
 * A small real store for tests/json-docs.test.ts, made without a container engine: the jobs and trials a run would
 * leave (one job COMPLETED with a scored and a cancelled trial, its kept tree and logs on disk; one job interrupted
 * with two queued trials), written through the engine's own createJob and the store.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createJob } from "../../engine/job/job.ts";
import { openStore, trialDir, type TrialRecord } from "../../engine/store/index.ts";
import { errorEvent, promptEvent } from "../../engine/trace/events.ts";
import { openTraceWriter } from "../../engine/trace/store.ts";
import { jobConfig } from "./job-config.ts";

/** The ids the documented commands are run against. */
export interface JsonStoreIds {
  /** COMPLETED: `scored` SCORED (kept tree, logs, spend), `cancelled` CANCELLED. */
  doneJob: string;
  scored: string;
  cancelled: string;
  /** Left RUNNING by a runner that is gone (shows INTERRUPTED): two QUEUED trials, for `trial stop` and `job cancel`. */
  openJob: string;
  queued: string;
}

const at = (s: number) => new Date(Date.UTC(2026, 0, 2, 3, 4, s)).toISOString();

/** Writes the jobs, trials and trial folders into the store of `home`; closes the store before returning. */
export async function makeJsonStore(home: string): Promise<JsonStoreIds> {
  const store = openStore(home);
  try {
    const done = createJob(store, { ...jobConfig(2), max_spend_usd: 2, verifier_env: { REWARDKIT_MODEL: "anthropic/claude-sonnet-4-6" } }, "demo@1.0");
    const [a, b] = store.listTrials(done.id);
    const scored: TrialRecord = {
      ...a,
      status: "SCORED",
      task_name: "t0",
      source: "demo@1.0",
      model: "claude-sonnet-4-6",
      attempt: 1,
      rewards: { reward: 1, style: 0.5 },
      reward: 1,
      exception: null,
      phase_timings: { build: { started_at: at(0), finished_at: at(2) }, agent: { started_at: at(2), finished_at: at(14) }, verify: { started_at: at(14), finished_at: at(16) } },
      spend: { live_usd: 0.0123, final_usd: 0.0123, source: "measured", calls: 3, unpriced_calls: 0, judge: { live_usd: 0.002, final_usd: 0.002, calls: 1, unpriced_calls: 0, tokens: { input: 900, output: 40 } } },
      tokens: { input: 1200, cached_read: 0, cache_write: 0, output: 300, reasoning: 0 },
      started_at: at(0),
      finished_at: at(16),
      updated_at: at(16),
    };
    const cancelled: TrialRecord = {
      ...b,
      status: "CANCELLED",
      task_name: "t1",
      exception: { type: "CancelledError", message: "stopped by `evolve trial stop`", traceback: "", occurred_at: at(5) },
      phase_timings: { build: { started_at: at(0), finished_at: at(2) } },
      finished_at: at(5),
      updated_at: at(5),
    };
    store.putTrials([scored, cancelled]);
    store.putJob({ ...done, status: "COMPLETED", finished_at: at(16), updated_at: at(16), runner: null });
    store.addSpend("job", done.id, "agent", 0.0123);
    store.addSpend("job", done.id, "judge", 0.002);

    const dir = trialDir(home, scored.id);
    mkdirSync(join(dir, "agent"), { recursive: true });
    mkdirSync(join(dir, "verifier"), { recursive: true });
    writeFileSync(join(dir, "agent", "oracle.txt"), "solving\n");
    // a parsed trace, for `trial trace` and `job grep` (one event matches `denied`)
    const trace = openTraceWriter(home, scored.id);
    trace.append([promptEvent("Create hello.txt"), errorEvent("bash: /root: Permission denied", false)]);
    trace.close();
    writeFileSync(join(dir, "verifier", "test-stdout.txt"), "1 passed\n");
    writeFileSync(join(dir, "trial.log"), "trial started\n");
    mkdirSync(join(dir, "fs", "app"), { recursive: true });
    writeFileSync(join(dir, "fs", "app", "out.txt"), "hello\n");
    const manifest = {
      version: 1,
      captured_at: at(15),
      cap_bytes: 64 * 1024 * 1024,
      cap_files: 20_000,
      max_path_bytes: 2048,
      changes_from: "engine",
      kept_bytes: 6,
      files: [
        { path: "/app", kind: "modified", type: "dir", mode: "0755", uid: 0, gid: 0 },
        { path: "/app/out.txt", kind: "added", type: "file", size: 6, sha256: "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", mode: "0644", uid: 0, gid: 0 },
        { path: "/app/old.txt", kind: "deleted" },
      ],
      excluded: [{ path: "/tmp", kind: "modified", reason: "scratch space" }],
      skipped: [],
    };
    writeFileSync(join(dir, "fs-changes.json"), JSON.stringify(manifest));

    const open = createJob(store, jobConfig(2));
    const [q1] = store.listTrials(open.id);
    return { doneJob: done.id, scored: scored.id, cancelled: cancelled.id, openJob: open.id, queued: q1.id };
  } finally {
    await store.close();
  }
}

/**
 * A project folder whose episodic memory (`.agent/memory/episodes.jsonl`) holds a pass and a failure with a vetoed
 * call, for `harness diagnose --project`.
 */
export function writeEpisodes(project: string): void {
  const dir = join(project, ".agent", "memory");
  mkdirSync(dir, { recursive: true });
  const episode = (id: string, score: number, failures: unknown[]) => JSON.stringify({ id, at: at(9), task: `card-${id}`, domain: "files", outcome: "finished", score, turns: 3, failures });
  const vetoed = [
    { type: "tool_call", data: { update: { sessionUpdate: "tool_call", toolCallId: "c1", name: "shell", title: "rm -rf /app", kind: "execute", status: "pending", rawInput: { command: "rm -rf /app" } } } },
    { type: "tool_call_update", data: { update: { sessionUpdate: "tool_call_update", toolCallId: "c1", status: "failed", content: [{ type: "content", content: { type: "text", text: "refused: rm -rf is not allowed" } }], _meta: { vetoed: true } } } },
  ];
  writeFileSync(join(dir, "episodes.jsonl"), `${episode("e1", 1, [])}\n${episode("e2", 0, vetoed)}\n`);
}

/**
 * An evolution project for the `harness` verbs: a live `.agent/`, two task cards and a runner that echoes the prompt
 * (so every card passes for every harness: a screen rejects, and a round stagnates).
 */
export function writeEvolveProject(project: string): void {
  mkdirSync(join(project, ".agent", "harness"), { recursive: true });
  writeFileSync(join(project, ".agent", "harness", "PLANNING.md"), "Be careful.\n");
  mkdirSync(join(project, "evolve", "evals"), { recursive: true });
  for (const id of ["t1", "t2"]) writeFileSync(join(project, "evolve", "evals", `${id}.json`), JSON.stringify({ id, domain: "echo", prompt: `say ${id}`, check: { contains: id } }));
  writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "command", command: "printf '%s' {prompt}", timeout_sec: 30 }));
}
