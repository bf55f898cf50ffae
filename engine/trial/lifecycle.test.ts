/**
 * One trial lifecycle (issue 21 §1): engine/trial/lifecycle.ts alone moves a trial's or a job's status, and alone
 * says what a status means. The first block is a lint stated as data: a source scan that fails when a status is
 * written anywhere else. The rest are the transitions themselves, on plain records (no engine, no store).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import type { JobRecord, TrialRecord } from "../store/index.ts";
import {
  beginAttempt, cancelledJob, cancelledTrial, claimedJob, effectiveJobStatus, endedJobStatus, isSettledStatus, JOB_STATUSES, judgesHarness, LIVE_STATUSES,
  persistFailedVerdict, plainException, releasedJob, retriesAfter, runnerFailedTrial, runsOnResume, settle, STATUS_CLASSES, stillGoing, stoppedByGateway,
  thrownVerdict, toRunning, toScoring, TRIAL_STATUSES, unverifiedVerdict, verifiedVerdict,
} from "./lifecycle.ts";
import { Interruption, TrialFailure } from "../outcome.ts";

const root = resolve(__dirname, "../..");
const WORDS = [...new Set([...TRIAL_STATUSES, ...JOB_STATUSES])].join("|");

/**
 * Where a status may be written: the lifecycle; the exception registry, which names the status each exception type
 * settles (the lifecycle reads it); the store's lists it checks records against.
 */
const ALLOWED = new Set(["engine/trial/lifecycle.ts", "engine/outcome.ts", "engine/store/records.ts"]);
/** The folders whose code must not write a status (tests build records as they like). */
const SCANNED = ["engine", "commands", "gateway", "main.ts"];
/** What writing a status looks like, one pattern a line (comments are skipped). */
const STATUS_WRITES: { what: string; pattern: RegExp }[] = [
  // `{ status: "CANCELLED" }`, `status: rewards ? "SCORED" : …`, `status: verdict.status ?? "SCORING_ERROR"`
  { what: "a status word as a record's `status`", pattern: new RegExp(`\\bstatus\\??\\s*:[^,;]*"(${WORDS})"`) },
  // `status = "BUDGET"`, `let status: TrialStatus = "SCORED"`
  { what: "a status word assigned to a `status` variable", pattern: new RegExp(`\\bstatus(\\s*:\\s*\\w+)?\\s*=\\s*"(${WORDS})"`) },
  // `this.update({ status: x })`: a recorder write that moves the status without a lifecycle transition
  { what: "a recorder update carrying its own `status`", pattern: /\bupdate\(\{[^}]*\bstatus\b/ },
];

function sources(p: string): string[] {
  const abs = join(root, p);
  if (statSync(abs).isFile()) return p.endsWith(".ts") ? [p] : [];
  // a test beside the code builds records as it likes, as tests/ does
  return readdirSync(abs).flatMap((n) => (n === "node_modules" || n.endsWith(".test.ts") ? [] : sources(join(p, n))));
}

/** Every line outside ALLOWED that writes a status, as `file:line: what`. */
export function statusWritesOutsideLifecycle(): string[] {
  const found: string[] = [];
  for (const file of SCANNED.flatMap(sources)) {
    const rel = relative(root, join(root, file));
    if (ALLOWED.has(rel)) continue;
    readFileSync(join(root, file), "utf8")
      .split("\n")
      .forEach((line, i) => {
        const code = line.trim();
        if (code.startsWith("//") || code.startsWith("*") || code.startsWith("/*")) return;
        for (const rule of STATUS_WRITES) if (rule.pattern.test(code)) found.push(`${rel}:${i + 1}: ${rule.what}: ${code.slice(0, 120)}`);
      });
  }
  return found;
}

describe("nothing but the lifecycle writes a status", () => {
  it("finds no status written outside engine/trial/lifecycle.ts", () => {
    expect(statusWritesOutsideLifecycle()).toEqual([]);
  });

  it("the scan catches each way a status was written before the lifecycle owned them", () => {
    const lines = [
      `store.putTrial({ ...t, status: "CANCELLED", exception });`,
      `return { status: rewards ? "SCORED" : "SCORING_ERROR", rewards };`,
      `let status: TrialStatus = "SCORED";`,
      `status = "BUDGET";`,
      `this.update({ status: "RUNNING" });`,
      `store.putJob({ ...job, status: "CANCELLED", updated_at: at });`,
    ];
    for (const l of lines) expect(STATUS_WRITES.some((r) => r.pattern.test(l)), l).toBe(true);
    // reading a status, or another domain's status words, is no write
    for (const l of [`if (t.status === "SCORED") n++;`, `validity = { status: "fail", detail };`, `status: effectiveStatus(job),`]) {
      expect(STATUS_WRITES.some((r) => r.pattern.test(l)), l).toBe(false);
    }
  });
});

const at = "2026-01-01T00:00:00.000Z";
const trial = (fields: Partial<TrialRecord> = {}): TrialRecord => ({
  id: "t1", job_id: "j1", task_digest: "sha256:x", agent: "nop", status: "QUEUED", phase_timings: {}, created_at: at, updated_at: at, ...fields,
});
const job = (fields: Partial<JobRecord> = {}): JobRecord => ({ id: "j1", created_at: at, updated_at: at, status: "RUNNING", config: {}, runner: null, ...fields });
const exc = plainException;

describe("status classes", () => {
  it("classes every status, and the sets the runner, gc and resume use are derived from them", () => {
    expect(Object.keys(STATUS_CLASSES).sort()).toEqual([...TRIAL_STATUSES].sort());
    expect([...LIVE_STATUSES]).toEqual(["QUEUED", "RUNNING", "SCORING"]);
    expect(TRIAL_STATUSES.filter(isSettledStatus)).toEqual(["SCORED", "SCORING_ERROR", "INFRASTRUCTURE_ERROR", "BUDGET", "INDETERMINATE", "CANCELLED"]);
    expect(TRIAL_STATUSES.filter(runsOnResume)).toEqual(["QUEUED", "RUNNING", "SCORING", "BUDGET", "INTERRUPTED"]);
    // what diagnose blames the harness for: a run the harness had in full
    expect(TRIAL_STATUSES.filter(judgesHarness)).toEqual(["SCORED", "SCORING_ERROR", "BUDGET", "INDETERMINATE"]);
    // how tables colour a trial's or a job's word
    expect(["QUEUED", "RUNNING", "SCORING", "INTERRUPTED", "SCORED", "CANCELLED", "COMPLETED", "BUDGET"].filter(stillGoing)).toEqual(["QUEUED", "RUNNING", "SCORING", "INTERRUPTED"]);
  });
});

describe("trial transitions", () => {
  it("a new attempt keeps the status it was left in, closes an attempt left open, and a regrade starts afresh", () => {
    const left = trial({ status: "RUNNING", attempt_phase: "agent", attempts: [{ n: 1, started_at: at, ended_at: null, status: null, ended_because: null }] });
    const b = beginAttempt(left, "2026-01-01T00:01:00.000Z");
    expect(b.status).toBe("RUNNING");
    expect(b.attempts).toMatchObject([{ n: 1, ended_at: at, status: "RUNNING", ended_because: "interrupted in phase agent" }, { n: 2, ended_at: null }]);
    expect(beginAttempt(trial({ status: "SCORED" }), at, true).status).toBe("QUEUED");
    expect(beginAttempt(undefined, at).status).toBe("QUEUED");
    expect([toRunning().status, toScoring().status]).toEqual(["RUNNING", "SCORING"]);
  });

  it("a verifier's verdict, a thrown failure and a stop settle their statuses", () => {
    expect(verifiedVerdict({ reward: 1 }, null).status).toBe("SCORED");
    expect(verifiedVerdict(null, exc("RewardFileNotFoundError", "x")).status).toBe("SCORING_ERROR");
    expect(unverifiedVerdict(null, null, "INDETERMINATE").status).toBe("INDETERMINATE");
    expect(unverifiedVerdict({ reward: 1 }, null).status).toBe("SCORING_ERROR");
    expect(thrownVerdict(new TrialFailure("EnvironmentBuildError", "no"), exc)).toMatchObject({ status: "INFRASTRUCTURE_ERROR", exception: { type: "EnvironmentBuildError" } });
    expect(thrownVerdict(new Error("socket"), exc)).toMatchObject({ status: "INFRASTRUCTURE_ERROR", exception: { type: "EnvironmentError", message: "socket" } });
    const full = Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
    expect(thrownVerdict(full, exc).exception!.type).toBe("DiskFullError");
    const stop = new AbortController();
    stop.abort();
    expect(thrownVerdict(new Error("x"), exc, stop.signal)).toMatchObject({ status: "CANCELLED", exception: { type: "CancelledError" } });
    const intr = new AbortController();
    intr.abort(new Interruption("SIGINT", 130));
    expect(thrownVerdict(new Error("x"), exc, intr.signal)).toMatchObject({ status: "INTERRUPTED", exception: { type: "InterruptedError" } });
  });

  it("a budget or an unreachable model replaces whatever the stopped agent left, but never a stop", () => {
    const scored = verifiedVerdict({ reward: 1 }, null);
    expect(stoppedByGateway(scored, { refused: "over budget" }, exc)).toMatchObject({ status: "BUDGET", rewards: null, exception: { type: "ApiUsageLimitError" } });
    expect(stoppedByGateway(scored, { unavailable: "no upstream" }, exc)).toMatchObject({ status: "INFRASTRUCTURE_ERROR", exception: { type: "ModelUnavailableError" } });
    const cancelled = { status: "CANCELLED" as const, rewards: null, exception: exc("CancelledError", "x") };
    expect(stoppedByGateway(cancelled, { refused: "over budget" }, exc)).toBe(cancelled);
    expect(stoppedByGateway(scored, {}, exc)).toBe(scored);
  });

  it("a tree that cannot be written: a full disk takes the reward, any other failure unscores a SCORED trial", () => {
    const scored = verifiedVerdict({ reward: 1 }, null);
    const full = Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" });
    expect(persistFailedVerdict(scored, full, "/t", exc)).toMatchObject({ status: "INFRASTRUCTURE_ERROR", rewards: null, exception: { type: "DiskFullError" } });
    expect(persistFailedVerdict(scored, new Error("EACCES"), "/t", exc)).toMatchObject({ status: "INFRASTRUCTURE_ERROR", rewards: { reward: 1 }, exception: { type: "TrialPersistError" } });
    const failed = verifiedVerdict(null, exc("VerifierTimeoutError", "slow"));
    expect(persistFailedVerdict(failed, new Error("EACCES"), "/t", exc)).toMatchObject({ status: "SCORING_ERROR", exception: { type: "VerifierTimeoutError" } });
  });

  it("settling closes the open attempt with why it ended and the primary reward", () => {
    const open = trial({ status: "SCORING", attempts: [{ n: 1, started_at: at, ended_at: null, status: null, ended_because: null }] });
    const s = settle(open, verifiedVerdict({ reward: 0.5 }, null), "2026-01-01T00:02:00.000Z");
    expect(s).toMatchObject({ status: "SCORED", reward: 0.5, finished_at: "2026-01-01T00:02:00.000Z", attempts: [{ status: "SCORED", ended_because: "scored" }] });
  });

  it("a cancel from outside, and a runner that could not record its failure, settle with registered exception types", () => {
    expect(cancelledTrial(trial(), at, "the job was cancelled")).toMatchObject({ status: "CANCELLED", exception: { type: "CancelledError" } });
    expect(cancelledTrial(trial(), at, "the job was cancelled").finished_at).toBeUndefined();
    expect(cancelledTrial(trial(), at, "stopped", { stopRequested: true })).toMatchObject({ stop_requested_at: at, finished_at: at });
    // the runner's own error name (TypeError…) is not an exception type: the registry's EnvironmentError stands for it
    expect(runnerFailedTrial(trial(), at, new TypeError("boom"))).toMatchObject({ status: "INFRASTRUCTURE_ERROR", exception: { type: "EnvironmentError", message: "boom", occurred_at: at } });
    expect(runnerFailedTrial(trial(), at, new TrialFailure("TrialPersistError", "x")).exception!.type).toBe("TrialPersistError");
  });

  it("retries an infrastructure error a retry may fix, within the job's retries, unless the job is stopped", () => {
    const infra = trial({ status: "INFRASTRUCTURE_ERROR", exception: { type: "EnvironmentStartError", message: "", traceback: "", occurred_at: at } });
    expect(retriesAfter(infra, 1, 2, false)).toBe(true);
    expect(retriesAfter(infra, 3, 2, false)).toBe(false);
    expect(retriesAfter(infra, 1, 2, true)).toBe(false);
    expect(retriesAfter({ ...infra, exception: { ...infra.exception!, type: "EnvironmentBuildError" } }, 1, 2, false)).toBe(false);
    expect(retriesAfter(trial({ status: "SCORING_ERROR" }), 1, 2, false)).toBe(false);
  });
});

describe("job transitions", () => {
  it("a runner claims, ends and lets go of a job; a cancel during an interruption stays a cancel", () => {
    const claimed = claimedJob(job({ status: "INTERRUPTED" }), { pid: 1, host: "h", started_at: at }, at);
    expect(claimed.status).toBe("RUNNING");
    expect(endedJobStatus(new AbortController().signal)).toBe("COMPLETED");
    const intr = new AbortController();
    intr.abort(new Interruption("SIGTERM", 143));
    expect(endedJobStatus(intr.signal)).toBe("INTERRUPTED");
    const cancel = new AbortController();
    cancel.abort();
    expect(endedJobStatus(cancel.signal)).toBe("CANCELLED");
    expect(releasedJob(claimed, "COMPLETED", at)).toMatchObject({ status: "COMPLETED", runner: null, finished_at: at });
    expect(releasedJob(claimed, "INTERRUPTED", at).finished_at).toBeUndefined();
    expect(releasedJob(job({ status: "CANCELLED" }), "INTERRUPTED", at).status).toBe("CANCELLED");
    expect(cancelledJob(claimed, at, true)).toMatchObject({ status: "CANCELLED", runner: claimed.runner, finished_at: at });
    expect(effectiveJobStatus(job(), false)).toBe("INTERRUPTED");
    expect(effectiveJobStatus(job(), true)).toBe("RUNNING");
  });
});
