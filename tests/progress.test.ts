/**
 * The live progress of a job (commands/progress.ts): the state its events build, the lines it renders, and the
 * view that writes them on a TTY and without one. A fake clock and a string writer stand in for time and stdout.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { JobEvent } from "../engine/job/job.ts";
import type { TrialRecord } from "../engine/store/index.ts";
import {
  applyEvent,
  estimateRemaining,
  newProgress,
  progressView,
  renderLive,
  renderNote,
  renderRunning,
  renderSummary,
} from "../commands/progress.ts";
import { formatDuration } from "../commands/output.ts";

const T0 = Date.parse("2026-06-01T12:00:00Z");
const phase = (trialId: string, p: string): JobEvent => ({ kind: "phase", trialId, phase: p as never, at: "" });
function settled(id: string, status: TrialRecord["status"], reward?: number, exception?: string): JobEvent {
  const trial: TrialRecord = {
    id,
    job_id: "J",
    task_digest: "sha256:x",
    task_name: `task-${id}`,
    agent: "oracle",
    status,
    phase_timings: {},
    rewards: reward === undefined ? null : { reward },
    exception: exception ? { type: exception, message: "it broke\nsecond line", traceback: "", occurred_at: "" } : null,
    created_at: "",
    updated_at: "",
  };
  return { kind: "trial_settled", trial };
}
const taskOf = (id: string) => `task-${id}`;

describe("progress state and its summary line", () => {
  it("counts cancelled trials apart from errors, and budget apart from both", () => {
    const s = newProgress(6, T0);
    applyEvent(s, settled("a", "SCORED", 1), T0, taskOf);
    applyEvent(s, settled("b", "SCORED", 0.5), T0, taskOf);
    applyEvent(s, settled("c", "SCORING_ERROR"), T0, taskOf);
    applyEvent(s, settled("d", "CANCELLED"), T0, taskOf);
    applyEvent(s, settled("e", "CANCELLED"), T0, taskOf);
    applyEvent(s, settled("f", "BUDGET"), T0, taskOf);
    const line = renderSummary(s, T0 + 5_000);
    expect(line).toMatch(/^6\/6 done, 0 running, 0 queued, mean reward 0\.750, 1 error, 1 budget, 2 cancelled, elapsed 5\.0s$/);
  });

  it("shows elapsed time and an ETA from the rate trials settle at", () => {
    const s = newProgress(10, T0);
    expect(estimateRemaining(s, T0 + 1000)).toBeNull();
    for (const id of ["a", "b"]) applyEvent(s, settled(id, "SCORED", 1), T0 + 60_000, taskOf);
    // 2 settled in 60 s: the 8 left take 240 s at that rate
    expect(estimateRemaining(s, T0 + 60_000)).toBe(240_000);
    expect(renderSummary(s, T0 + 60_000)).toMatch(/elapsed 1m00s, ETA 4m00s$/);
    // cancellations say nothing about how long the rest takes
    const c = newProgress(3, T0);
    applyEvent(c, settled("x", "CANCELLED"), T0 + 1000, taskOf);
    expect(estimateRemaining(c, T0 + 1000)).toBeNull();
  });

  it("formats durations as people read them", () => {
    expect(formatDuration(0)).toBe("0ms");
    expect(formatDuration(8_400)).toBe("8.4s");
    expect(formatDuration(125_000)).toBe("2m05s");
    expect(formatDuration(3_720_000)).toBe("1h02m");
  });

  it("lists running trials with their task, phase and time so far, longest-running first, and caps the list", () => {
    const s = newProgress(12, T0);
    expect(applyEvent(s, phase("a", "build"), T0, taskOf)).toMatchObject({ kind: "started", task: "task-a" });
    expect(applyEvent(s, phase("a", "build"), T0 + 10, taskOf)).toBeNull();
    expect(applyEvent(s, phase("a", "agent"), T0 + 2000, taskOf)).toMatchObject({ kind: "phase", phase: "agent" });
    applyEvent(s, phase("b", "boot"), T0 + 5000, taskOf);
    const lines = renderRunning(s, T0 + 12_000);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^ {2}task-a\s+agent\s+12\.0s$/);
    expect(lines[1]).toMatch(/^ {2}task-b\s+boot\s+7\.0s$/);
    expect(renderSummary(s, T0 + 12_000)).toMatch(/^0\/12 done, 2 running, 10 queued, mean reward -, 0 errors/);
    for (let i = 0; i < 10; i++) applyEvent(s, phase(`m${i}`, "prepare"), T0 + 6000, taskOf);
    const capped = renderLive(s, T0 + 12_000, 4);
    expect(capped).toHaveLength(1 + 4 + 1);
    expect(capped.at(-1)).toBe("  … 8 more running");
    // a settled trial leaves the list, with the time it took
    const note = applyEvent(s, settled("a", "SCORED", 1), T0 + 20_000, taskOf);
    expect(note).toMatchObject({ kind: "settled", task: "task-a", ms: 20_000 });
    expect(renderRunning(s, T0 + 20_000, 100).some((l) => l.includes("task-a"))).toBe(false);
  });

  it("renders settled, started and retry notes on one line each", () => {
    const s = newProgress(2, T0);
    applyEvent(s, phase("a", "prepare"), T0, taskOf);
    const done = applyEvent(s, settled("a", "INFRASTRUCTURE_ERROR", undefined, "BuildFailedError"), T0 + 3000, taskOf)!;
    expect(renderNote(done)).toBe("INFRASTRUCTURE_ERROR task-a a (3.0s) BuildFailedError: it broke");
    const ok = applyEvent(s, settled("b", "SCORED", 1), T0 + 3000, taskOf)!;
    expect(renderNote(ok)).toBe("SCORED task-b b reward 1.000");
    expect(renderNote({ kind: "started", trialId: "c", task: "task-c", phase: "prepare" })).toBe("started task-c c");
    const retry = applyEvent(s, { kind: "retry", trialId: "c", attempt: 2, reason: "engine hiccup\nmore" }, T0, taskOf)!;
    expect(renderNote(retry)).toBe("retry task-c c attempt 2: engine hiccup");
  });
});

describe("the progress view", () => {
  afterEach(() => vi.useRealTimers());

  it("without a TTY prints a line per started and settled trial and a summary every period while trials run", () => {
    vi.useFakeTimers();
    let now = T0;
    let written = "";
    const view = progressView({ total: 2, mode: "lines", tasks: new Map([["a", "hello"], ["b", "world"]]), write: (s) => (written += s), now: () => now, summaryEveryMs: 30_000 });
    view.onEvent(phase("a", "prepare"));
    view.onEvent(phase("a", "agent"));
    view.onEvent(phase("b", "prepare"));
    expect(written).toBe("started hello a\nstarted world b\n");
    now += 30_000;
    vi.advanceTimersByTime(30_000);
    expect(written.split("\n").at(-2)).toBe("[0/2 done, 2 running, 0 queued, mean reward -, 0 errors, elapsed 30.0s]");
    now += 1_000;
    view.onEvent(settled("a", "SCORED", 1));
    view.onEvent(settled("b", "CANCELLED"));
    expect(written).toMatch(/\nSCORED hello a reward 1\.000 \(31\.0s\)\nCANCELLED world b \(31\.0s\)\n$/);
    // nothing runs any more: no further summary lines
    const before = written;
    vi.advanceTimersByTime(120_000);
    expect(written).toBe(before);
    view.end();
  });

  it("on a TTY redraws one block (summary and running trials) in place, prints failures above it, and clears it at the end", () => {
    vi.useFakeTimers();
    let now = T0;
    const writes: string[] = [];
    const view = progressView({ total: 3, mode: "tty", tasks: new Map([["a", "hello"], ["b", "world"]]), write: (s) => writes.push(s), now: () => now, columns: () => 200 });
    view.onEvent(phase("a", "build"));
    view.onEvent(phase("b", "agent"));
    now += 2000;
    vi.advanceTimersByTime(1000);
    const last = writes.at(-1)!;
    expect(last).toMatch(/^0\/3 done, 2 running, 1 queued, mean reward -, 0 errors, elapsed 2\.0s\n {2}hello\s+build\s+2\.0s\n {2}world\s+agent\s+2\.0s$/);
    // the block before it was three lines: the cursor goes back up two and clears before the redraw
    expect(writes.at(-2)).toBe("\x1b[2F\x1b[J");
    // an event that changes nothing on screen writes nothing
    const count = writes.length;
    view.onEvent({ kind: "log", trialId: "a", stream: "system", line: "building" });
    view.onEvent(phase("a", "build"));
    expect(writes.length).toBe(count);
    view.onEvent(settled("b", "SCORING_ERROR", undefined, "RewardFileNotFoundError"));
    expect(writes.join("")).toMatch(/SCORING_ERROR world b \(2\.0s\) RewardFileNotFoundError: it broke\n/);
    view.end();
    expect(writes.at(-1)).toBe("\x1b[1F\x1b[J");
  });

  it("with --json writes each event as one JSON line and nothing else", () => {
    let written = "";
    const view = progressView({ total: 1, mode: "json", tasks: new Map(), write: (s) => (written += s) });
    view.onEvent(phase("a", "prepare"));
    view.onEvent(settled("a", "SCORED", 1));
    view.end();
    const lines = written.trim().split("\n").map((l) => JSON.parse(l));
    expect(lines.map((l) => l.kind)).toEqual(["phase", "trial_settled"]);
  });
});
