/** The registry of exception types (engine/outcome.ts): which status each settles and which a retry skips. */
import { describe, expect, it } from "vitest";
import { CancelledFailure, DETERMINISTIC_EXCEPTIONS, EXCEPTIONS, Interruption, isDeterministic, stopFailure, TrialFailure } from "../outcome.ts";
import { isLiveStatus, isSettledStatus, isStopped, runsOnResume } from "./lifecycle.ts";
import { TRIAL_STATUSES } from "../store/records.ts";

describe("exception registry", () => {
  it("skips on retry exactly the failures of the task or the request", () => {
    expect([...DETERMINISTIC_EXCEPTIONS].sort()).toEqual(
      [
        "AgentModelUnsupportedError", "AgentNotInstalledError", "AgentRootInvalidError", "AgentRequestInvalidError", "AgentRuntimeIncompatibleError", "AgentTamperedError", "TrajectorySeedUnsupportedError",
        "AgentUserNotFoundError", "BoxUsernsError", "DiskFullError", "EnvironmentBuildError", "GatewayConfigError", "GpuUnavailableError", "ImageNotFoundError",
        "NetworkPolicyUnsupportedError", "RegradeRefusedError", "RegradeRestoreError", "ScriptInterpreterNotFoundError", "SecretNotAttached", "SolutionNotFoundError", "TaskInvalidError", "UnknownAgentError",
      ].sort(),
    );
    expect(isDeterministic("EnvironmentStartError")).toBe(false);
    // a stored record may carry a type this build does not know: it may be retried
    expect(isDeterministic("SomethingNew")).toBe(false);
    expect(isDeterministic(undefined)).toBe(false);
  });

  it("settles a failure in its registered status unless the thrower says otherwise", () => {
    expect(new TrialFailure("VerifierTimeoutError", "x").status).toBe("SCORING_ERROR");
    expect(new TrialFailure("EnvironmentBuildError", "x").status).toBe("INFRASTRUCTURE_ERROR");
    expect(new TrialFailure("ApiUsageLimitError", "x").status).toBe("BUDGET");
    expect(new CancelledFailure().status).toBe("CANCELLED");
    expect(new TrialFailure("TaskInvalidError", "x", "SCORING_ERROR").status).toBe("SCORING_ERROR");
  });

  it("tells a status that still owns boxes from one that settled, and every status is exactly one of them", () => {
    expect((["QUEUED", "RUNNING", "SCORING"] as const).map(isLiveStatus)).toEqual([true, true, true]);
    expect((["SCORED", "CANCELLED", "BUDGET"] as const).map(isLiveStatus)).toEqual([false, false, false]);
    expect((["SCORED", "CANCELLED", "RUNNING"] as const).map(isSettledStatus)).toEqual([true, true, false]);
    // a word outside the list never gets here: the store reads it as a damaged record (store-integrity.test.ts)
    // INTERRUPTED alone is neither: its boxes are gone and `job resume` runs it again (the test below)
    for (const s of TRIAL_STATUSES.filter((s) => s !== "INTERRUPTED")) expect(isLiveStatus(s) !== isSettledStatus(s), s).toBe(true);
  });

  it("an interruption stops a trial as INTERRUPTED, which resume runs again; any other abort reason is a cancel", () => {
    const i = stopFailure(new Interruption("SIGTERM", 143));
    expect([i.type, i.status]).toEqual(["InterruptedError", "INTERRUPTED"]);
    expect(i.message).toMatch(/SIGTERM.*evolve job resume/);
    for (const reason of [undefined, new Error("stop requested"), new DOMException("aborted", "AbortError")]) {
      expect(stopFailure(reason)).toBeInstanceOf(CancelledFailure);
    }
    // neither live (its boxes are gone, gc may remove leftovers) nor settled (resume runs it), unlike CANCELLED
    expect([isLiveStatus("INTERRUPTED"), isSettledStatus("INTERRUPTED"), runsOnResume("INTERRUPTED")]).toEqual([false, false, true]);
    expect(runsOnResume("CANCELLED")).toBe(false);
    expect(["INTERRUPTED", "CANCELLED", "SCORED"].map(isStopped)).toEqual([true, true, false]);
  });

  it("gives every type a one-line summary", () => {
    for (const [type, info] of Object.entries(EXCEPTIONS)) {
      expect(info.summary, type).toMatch(/^[a-z].*[^.]$/);
      expect(info.summary.includes("\n"), type).toBe(false);
    }
  });
});
