/**
 * The ATIF builder's bookkeeping of tool call ids (engine/trace/atif.ts keeps one map for "announced" and
 * "answered"): a result that came before its call's announcement, then the announcement, then repeats of both.
 */
import { describe, expect, it } from "vitest";
import { buildTrajectory } from "./atif.ts";
import { promptEvent, toolCallEvent, toolResultEvent } from "./events.ts";

const call = (id: string) => toolCallEvent({ toolCallId: id, name: "Bash", title: "ls", kind: "execute", status: "pending", rawInput: { command: "ls" } });

describe("tool call ids in the ATIF builder", () => {
  it("records a call announced after its result, once, and ignores the later results and announcements", () => {
    const t = buildTrajectory(
      [
        promptEvent("go"),
        toolResultEvent("c1", "completed", "early"),
        call("c1"),
        toolResultEvent("c1", "completed", "late"),
        call("c1"),
        toolResultEvent("c1", "failed", "later"),
      ],
      { agent: { name: "claude-code", version: "1" } },
    );
    expect(t.steps.map((s) => s.source)).toEqual(["user", "system", "agent"]);
    expect(t.steps[1].observation).toEqual({ results: [{ content: "early", extra: { tool_call_id: "c1", status: "completed" } }] });
    expect(t.steps[2].tool_calls).toEqual([{ tool_call_id: "c1", function_name: "Bash", arguments: { command: "ls" } }]);
    expect(t.steps[2].observation).toBeUndefined();
  });

  it("keeps a pending or in-progress update from answering a call: its first final result still lands", () => {
    const t = buildTrajectory(
      [promptEvent("go"), call("c1"), toolResultEvent("c1", "in_progress", "half"), toolResultEvent("c1", "completed", "all"), toolResultEvent("c1", "completed", "again")],
      { agent: { name: "claude-code", version: "1" } },
    );
    expect(t.steps[1].observation).toEqual({ results: [{ source_call_id: "c1", content: "all" }] });
  });
});
