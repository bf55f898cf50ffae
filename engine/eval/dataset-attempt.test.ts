/**
 * How the dataset evaluator reads a settled trial as an Attempt (engine/eval/dataset-eval.ts attemptOf), without an
 * engine: the score is the primary reward, validity needs a SCORED trial whose agent's exit was recorded and that was
 * not cut off (timeout, spend cap), and the marker is looked for in the stored trace, the prompt included.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { attemptOf, traceHas } from "./dataset-eval.ts";
import type { TrialRecord } from "../store/index.ts";
import { chunkEvent, promptEvent } from "../trace/events.ts";
import { openTraceWriter } from "../trace/store.ts";

let home: string;
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-attempt-"));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

const at = "2026-01-01T00:00:00.000Z";
const trial = (over: Partial<TrialRecord>): TrialRecord => ({
  id: "01TRIAL", job_id: "01JOB", task_digest: "sha256:x", task_name: "t1", agent: "claude-code", status: "SCORED",
  phase_timings: { agent: { started_at: at, finished_at: "2026-01-01T00:00:12.500Z" } },
  rewards: { reward: 1 }, reward: 1, exception: null, agent_exit: { exit_code: 0, timed_out: false },
  spend: { live_usd: 0.02, final_usd: 0.0125, source: "measured" }, created_at: at, updated_at: at, ...over,
});
const exc = (type: string, message: string) => ({ type, message, traceback: "", occurred_at: at });

describe("a trial as an attempt", () => {
  it("is valid with its primary reward, exit code, agent wall time and final spend", async () => {
    expect(await attemptOf(home, trial({}), null)).toEqual({
      task: "t1", score: 1, valid: true, exit_code: 0, timed_out: false, wall_sec: 12.5, cost_usd: 0.0125, log: "01TRIAL", marker_seen: false,
    });
  });

  it("is valid, scored, with a non-zero exit: the run was complete", async () => {
    const a = await attemptOf(home, trial({ rewards: { reward: 0 }, agent_exit: { exit_code: 1, timed_out: false }, exception: exc("NonZeroAgentExitCodeError", "the agent exited with code 1") }), null);
    expect([a.valid, a.score, a.exit_code]).toEqual([true, 0, 1]);
  });

  it.each([
    [{ agent_exit: { exit_code: null, timed_out: true }, exception: exc("AgentTimeoutError", "the agent ran past its 3m timeout") }, "AgentTimeoutError: the agent ran past its 3m timeout", true],
    [{ exception: exc("AgentSpendCapError", "the agent reached the trial's spend cap: $1") }, "AgentSpendCapError: the agent reached the trial's spend cap: $1", false],
    [{ agent_exit: undefined }, "the trial recorded no exit code of its agent", false],
    [{ rewards: { accuracy: 1, speed: 0.5 } }, "the trial scored no primary reward (metrics only)", false],
    [{ status: "INFRASTRUCTURE_ERROR" as const, rewards: null, agent_exit: undefined, exception: exc("EnvironmentBuildError", "the image did not build\nstep 3") }, "the trial ended INFRASTRUCTURE_ERROR (EnvironmentBuildError: the image did not build)", false],
  ])("is invalid, saying why: %j", async (over, reason, timedOut) => {
    const a = await attemptOf(home, trial(over as Partial<TrialRecord>), null);
    expect(a.valid).toBe(false);
    expect(a.invalid_reason).toBe(reason);
    expect(a.timed_out).toBe(timedOut);
  });

  it("sees the marker anywhere in the stored trace, the prompt included, and not where it is not", async () => {
    const w = openTraceWriter(home, "01TRIAL");
    w.append([promptEvent("<agent-instructions>\nPlan. MARK-42\n</agent-instructions>\n\nDo it."), chunkEvent("agent_message_chunk", "done")]);
    w.close();
    expect(traceHas(home, "01TRIAL", "MARK-42")).toBe(true);
    expect((await attemptOf(home, trial({}), "MARK-42")).marker_seen).toBe(true);
    expect((await attemptOf(home, trial({}), "MARK-43")).marker_seen).toBe(false);
    expect(traceHas(home, "01OTHER", "MARK-42")).toBe(false);
  });
});
