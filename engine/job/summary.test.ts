import { describe, expect, it } from "vitest";
import type { JobConfig } from "./job.ts";
import { kValues, passAtK, primaryReward, summarizeJob } from "./summary.ts";
import type { JobRecord, TrialRecord } from "../store/index.ts";

const config: JobConfig = {
  agent: { name: "oracle" },
  attempts: 3,
  concurrency: 2,
  timeout_multiplier: 1,
  secret_names: [],
  force_build: false,
  max_retries: 2,
  source: { kind: "path", path: "/tasks" },
  tasks: [],
};
const job: JobRecord = { id: "J1", created_at: "2026-01-01T00:00:00Z", status: "COMPLETED", config, finished_at: "2026-01-01T00:01:00Z" };

let n = 0;
function trial(task: string, status: TrialRecord["status"], rewards?: Record<string, number> | null, exception?: string): TrialRecord {
  return {
    id: `T${n++}`,
    job_id: "J1",
    task_digest: task,
    agent: "oracle",
    status,
    phase_timings: {},
    rewards: rewards ?? null,
    exception: exception ? { type: exception, message: "m", traceback: "", occurred_at: "2026-01-01T00:00:00Z" } : null,
    created_at: "2026-01-01T00:00:00Z",
    updated_at: "2026-01-01T00:00:00Z",
  };
}

describe("pass@k", () => {
  it("matches the unbiased estimator", () => {
    expect(passAtK(5, 2, 1)).toBeCloseTo(0.4);
    expect(passAtK(5, 2, 2)).toBeCloseTo(0.7);
    expect(passAtK(5, 0, 3)).toBe(0);
    expect(passAtK(5, 4, 2)).toBe(1);
    expect(() => passAtK(2, 1, 3)).toThrow(RangeError);
  });

  it("reports k = 1, powers of two and multiples of five up to the smallest sample", () => {
    expect(kValues(10)).toEqual([1, 2, 4, 5, 8, 10]);
    expect(kValues(1)).toEqual([1]);
  });
});

describe("job summary", () => {
  it("averages only scored trials and counts failures apart, never as zeros", () => {
    const s = summarizeJob(job, [
      trial("a", "SCORED", { reward: 1 }),
      trial("a", "SCORED", { reward: 0 }),
      trial("b", "SCORING_ERROR", null, "RewardFileNotFoundError"),
      trial("b", "INFRASTRUCTURE_ERROR", null, "BuildError"),
    ]);
    expect(s.mean_reward).toBe(0.5);
    expect(s.counts).toEqual({ SCORED: 2, SCORING_ERROR: 1, INFRASTRUCTURE_ERROR: 1 });
    expect(s.exceptions).toEqual({ RewardFileNotFoundError: 1, BuildError: 1 });
    // task b never scored: it is left out of pass@k (and said so), not the reason pass@k disappears
    expect(s.pass_at_k).toEqual({ "1": 0.5, "2": 1 });
    expect(s.pass_at_k_tasks).toBe(1);
    expect(s.pass_at_k_left_out).toEqual({ tasks: 1, reasons: { not_scored: 1 } });
  });

  it("gives per-key means, and no primary reward for metrics-only trials", () => {
    const s = summarizeJob(job, [trial("a", "SCORED", { speed: 0.5, accuracy: 1 }), trial("b", "SCORED", { speed: 1, accuracy: 0 })]);
    expect(s.metrics).toEqual({ speed: { mean: 0.75, n: 2 }, accuracy: { mean: 0.5, n: 2 } });
    expect(s.mean_reward).toBeNull();
    expect(primaryReward({ score: 0.3 })).toBe(0.3);
    expect(primaryReward({ a: 1, reward: 0.2 })).toBe(0.2);
  });

  it("computes pass@k per task when every trial has one binary reward", () => {
    const s = summarizeJob(job, [
      trial("a", "SCORED", { reward: 1 }),
      trial("a", "SCORED", { reward: 0 }),
      trial("a", "SCORED", { reward: 0 }),
      trial("b", "SCORED", { reward: 0 }),
      trial("b", "SCORED", { reward: 0 }),
      trial("b", "SCORED", { reward: 0 }),
    ]);
    expect(Object.keys(s.pass_at_k!)).toEqual(["1", "2"]);
    expect(s.pass_at_k!["1"]).toBeCloseTo((1 / 3 + 0) / 2);
    expect(s.pass_at_k!["2"]).toBeCloseTo((2 / 3 + 0) / 2);
  });

  it("computes pass@k over the tasks whose trials all scored 0 or 1, and counts the rest by why they were left out", () => {
    const s = summarizeJob(job, [
      trial("a", "SCORED", { reward: 1 }),
      trial("a", "SCORED", { reward: 0 }),
      trial("b", "SCORED", { reward: 0 }),
      trial("b", "SCORED", { reward: 0 }),
      trial("c", "SCORED", { reward: 0.5 }), // partial: not a pass or a fail
      trial("c", "SCORED", { reward: 1 }),
      trial("d", "SCORED", { reward: 1 }),
      trial("d", "BUDGET", null, "ApiUsageLimitError"),
      trial("e", "RUNNING"),
      trial("e", "INFRASTRUCTURE_ERROR", null, "BuildError"),
    ]);
    expect(s.pass_at_k).toEqual({ "1": 0.25, "2": 0.5 });
    expect(s.pass_at_k_tasks).toBe(2);
    expect(s.pass_at_k_left_out).toEqual({ tasks: 3, reasons: { partial_reward: 1, not_scored: 1, not_settled: 1 } });
  });

  it("has no pass@k, and says every task was left out, when no task qualifies", () => {
    const s = summarizeJob(job, [trial("a", "SCORED", { reward: 0.3 }), trial("b", "CANCELLED", null, "CancelledError"), trial("c", "SCORED", { speed: 1, accuracy: 0 })]);
    expect(s.pass_at_k).toBeNull();
    expect(s.pass_at_k_tasks).toBe(0);
    expect(s.pass_at_k_left_out).toEqual({ tasks: 3, reasons: { partial_reward: 1, not_scored: 1, no_primary_reward: 1 } });
  });

  it("uses the primary reward of a trial that also carries metrics", () => {
    const s = summarizeJob(job, [trial("a", "SCORED", { reward: 1, speed: 0.2 }), trial("a", "SCORED", { reward: 0, speed: 0.9 })]);
    expect(s.pass_at_k).toEqual({ "1": 0.5, "2": 1 });
    expect(s.pass_at_k_left_out.tasks).toBe(0);
  });
});
