/**
 * The ATIF builder (engine/trace/atif.ts) on traces shaped like the harnesses': claude's blocks sharing one message
 * id, codex's calls without ids, results landing in their call's step, tokens, the gateway's metering winning. Every
 * trajectory built here must also pass the validator.
 */
import { describe, expect, it } from "vitest";
import { buildTrajectory, TrajectoryBuilder, type AtifTrajectory, type BuildTrajectoryOptions } from "./atif.ts";
import { validateTrajectory } from "./atif-validate.ts";
import { chunkEvent, errorEvent, promptEvent, toolCallEvent, toolResultEvent, traceLossEvent, usageEvent, type TraceEvent, type TraceUpdate } from "./events.ts";

const AGENT: BuildTrajectoryOptions = { agent: { name: "claude-code", version: "2.1.0", model_name: "claude-sonnet-4-6" } };

function build(events: TraceUpdate[], opts: Partial<BuildTrajectoryOptions> = {}): AtifTrajectory {
  const t = buildTrajectory(events, { ...AGENT, ...opts });
  expect(validateTrajectory(JSON.parse(JSON.stringify(t)))).toEqual([]);
  return t;
}

const call = (id: string, name: string, rawInput: Record<string, unknown>, messageId?: string) =>
  toolCallEvent({ toolCallId: id, name, title: name, kind: "execute", status: "pending", rawInput, ...(messageId ? { messageId } : {}) });

describe("buildTrajectory", () => {
  it("makes one agent step of claude's blocks that share a message id, with per-call usage from the end", () => {
    const t = build([
      promptEvent("Create hello.txt containing Hello."),
      chunkEvent("agent_thought_chunk", "The user wants a file.", "msg_1"),
      chunkEvent("agent_message_chunk", "I'll create ", "msg_1"),
      chunkEvent("agent_message_chunk", "the file.", "msg_1"),
      call("toolu_1", "Write", { file_path: "/app/hello.txt", content: "Hello" }, "msg_1"),
      toolResultEvent("toolu_1", "completed", "File created"),
      chunkEvent("agent_message_chunk", "Done.", "msg_2"),
      // claude's per-call usage comes from its session file, after the stream; the last one for an id wins
      usageEvent("call", { promptTokens: 100, completionTokens: 10 }, { messageId: "msg_1" }),
      usageEvent("call", { promptTokens: 1200, completionTokens: 40, cachedTokens: 1000, cacheWriteTokens: 150 }, { messageId: "msg_1", model: "claude-sonnet-4-6" }),
      usageEvent("call", { promptTokens: 1300, completionTokens: 5, cachedTokens: 1150 }, { messageId: "msg_2" }),
    ]);
    expect(t.steps.map((s) => s.source)).toEqual(["user", "agent", "agent"]);
    expect(t.steps[0]).toEqual({ step_id: 1, source: "user", message: "Create hello.txt containing Hello." });
    expect(t.steps[1]).toEqual({
      step_id: 2,
      source: "agent",
      model_name: "claude-sonnet-4-6",
      message: "I'll create the file.",
      reasoning_content: "The user wants a file.",
      tool_calls: [{ tool_call_id: "toolu_1", function_name: "Write", arguments: { file_path: "/app/hello.txt", content: "Hello" } }],
      observation: { results: [{ source_call_id: "toolu_1", content: "File created" }] },
      metrics: { prompt_tokens: 1200, completion_tokens: 40, cached_tokens: 1000, extra: { cache_creation_input_tokens: 150 } },
    });
    expect(t.steps[2].metrics).toEqual({ prompt_tokens: 1300, completion_tokens: 5, cached_tokens: 1150 });
    // each message id counted once, with its last usage
    expect(t.final_metrics).toMatchObject({ total_prompt_tokens: 2500, total_completion_tokens: 45, total_cached_tokens: 2150, total_steps: 3, extra: { metered_by: "harness_calls", cache_creation_input_tokens: 150 } });
    expect(t.final_metrics.total_cost_usd).toBeUndefined();
  });

  it("splits codex-like output without message ids at tool results and at call usage", () => {
    const t = build([
      promptEvent("fix the test"),
      chunkEvent("agent_thought_chunk", "look first"),
      call("c1", "exec_command", { cmd: "ls" }),
      call("c2", "exec_command", { cmd: "cat a" }),
      toolResultEvent("c1", "in_progress"),
      toolResultEvent("c1", "completed", "a b"),
      toolResultEvent("c2", "failed", "no such file"),
      chunkEvent("agent_message_chunk", "Now edit."),
      call("c3", "apply_patch", { patch: "…" }),
      usageEvent("call", { promptTokens: 500, completionTokens: 50, reasoningTokens: 20 }),
      chunkEvent("agent_message_chunk", "All green."),
      usageEvent("call", { promptTokens: 700, completionTokens: 9 }),
      toolResultEvent("c3", "completed", "patched"),
    ]);
    expect(t.steps.map((s) => s.source)).toEqual(["user", "agent", "agent", "agent"]);
    const [, first, second, third] = t.steps;
    expect(first.tool_calls!.map((c) => c.tool_call_id)).toEqual(["c1", "c2"]);
    expect(first.reasoning_content).toBe("look first");
    expect(first.observation!.results).toEqual([
      { source_call_id: "c1", content: "a b" },
      { source_call_id: "c2", content: "no such file", extra: { status: "failed" } },
    ]);
    expect(second.message).toBe("Now edit.");
    expect(second.metrics).toEqual({ prompt_tokens: 500, completion_tokens: 50, extra: { reasoning_tokens: 20 } });
    // the late result of c3 still lands in the step that made the call
    expect(second.observation!.results).toEqual([{ source_call_id: "c3", content: "patched" }]);
    expect(third).toMatchObject({ message: "All green.", metrics: { prompt_tokens: 700, completion_tokens: 9 } });
    expect(t.final_metrics).toMatchObject({ total_prompt_tokens: 1200, total_completion_tokens: 59, total_steps: 4, extra: { reasoning_tokens: 20 } });
  });

  it("takes final_metrics from the gateway's metering when given, with the money", () => {
    const events = [promptEvent("p"), chunkEvent("agent_message_chunk", "hi"), usageEvent("call", { promptTokens: 1, completionTokens: 1 }), usageEvent("total", { promptTokens: 9, completionTokens: 9 })];
    const t = build(events, {
      gatewayUsage: [
        { model: "anthropic/claude-sonnet-4-6", promptTokens: 812, completionTokens: 64, cachedTokens: 200, cacheWriteTokens: 10, costUsd: 0.0025 },
        { model: "anthropic/claude-haiku-4-5", promptTokens: 100, completionTokens: 5, costUsd: 0.0001 },
      ],
    });
    expect(t.final_metrics.total_prompt_tokens).toBe(912);
    expect(t.final_metrics.total_completion_tokens).toBe(69);
    expect(t.final_metrics.total_cached_tokens).toBe(200);
    expect(t.final_metrics.total_cost_usd).toBeCloseTo(0.0026, 10);
    expect(t.final_metrics.extra).toMatchObject({ metered_by: "gateway", model_calls: 2, cache_creation_input_tokens: 10 });
    // the step keeps the harness's own per-call counts
    expect(t.steps[1].metrics).toEqual({ prompt_tokens: 1, completion_tokens: 1 });
  });

  it("uses the trace's own gateway usage events when no gatewayUsage is given", () => {
    const gw: TraceUpdate = { type: "usage", data: { update: { sessionUpdate: "usage", scope: "call", source: "gateway", model: "m", costUsd: 0.5, usage: { promptTokens: 40, completionTokens: 4 } } } };
    const t = build([promptEvent("p"), chunkEvent("agent_message_chunk", "x"), usageEvent("call", { promptTokens: 1, completionTokens: 1 }), gw]);
    expect(t.final_metrics).toMatchObject({ total_prompt_tokens: 40, total_cost_usd: 0.5, extra: { metered_by: "gateway" } });
    expect(t.steps).toHaveLength(2); // a gateway event is no model call of the trace's own
  });

  it("falls back to the harness's total usage when no call usage was seen", () => {
    const t = build([promptEvent("p"), chunkEvent("agent_message_chunk", "x"), usageEvent("total", { promptTokens: 30, completionTokens: 3, cachedTokens: 10 })]);
    expect(t.final_metrics).toMatchObject({ total_prompt_tokens: 30, total_completion_tokens: 3, total_cached_tokens: 10, extra: { metered_by: "harness_total" } });
    expect(t.steps[1].metrics).toBeUndefined();
  });

  it("uses opts.instruction when the trace has no prompt event, and the prompt event when it has", () => {
    expect(build([chunkEvent("agent_message_chunk", "x")], { instruction: "do it" }).steps[0]).toEqual({ step_id: 1, source: "user", message: "do it" });
    expect(build([promptEvent("from trace"), chunkEvent("agent_message_chunk", "x")], { instruction: "do it" }).steps.map((s) => s.message)).toEqual(["from trace", "x"]);
    expect(build([], { instruction: "nothing happened" }).steps).toEqual([{ step_id: 1, source: "user", message: "nothing happened" }]);
  });

  it("makes user steps of user chunks, and system steps of errors and trace loss, without agent-only fields", () => {
    const t = build([
      promptEvent("p"),
      chunkEvent("user_message_chunk", "also ", "u1"),
      chunkEvent("user_message_chunk", "this", "u1"),
      chunkEvent("agent_message_chunk", "ok"),
      errorEvent("model metadata not found", false),
      traceLossEvent(2, "not JSON", "{oops"),
      chunkEvent("agent_message_chunk", "continuing"),
    ]);
    expect(t.steps.map((s) => [s.source, s.message])).toEqual([
      ["user", "p"],
      ["user", "also this"],
      ["agent", "ok"],
      ["system", "model metadata not found"],
      ["system", "2 lines of the harness's output could not be read: not JSON"],
      ["agent", "continuing"],
    ]);
    expect(t.steps[3].extra).toEqual({ kind: "error", fatal: false });
    expect(t.steps[4].extra).toEqual({ kind: "trace_loss", count: 2, reason: "not JSON" });
  });

  it("puts a plan on the open agent step, and a plan before any output in a system step", () => {
    const plan = (content: string): TraceUpdate => ({ type: "plan", data: { update: { sessionUpdate: "plan", entries: [{ content, priority: "high", status: "pending" }] } } });
    const t = build([promptEvent("p"), plan("early"), chunkEvent("agent_message_chunk", "x"), plan("one"), plan("two")]);
    expect(t.steps[1]).toMatchObject({ source: "system", message: "[pending] early", extra: { kind: "plan" } });
    expect(t.steps[2].extra).toEqual({ plan: [{ content: "two", priority: "high", status: "pending" }] });
  });

  it("puts a result for a call it never saw in a system step without source_call_id", () => {
    const t = build([promptEvent("p"), toolResultEvent("ghost", "completed", "out")]);
    expect(t.steps[1]).toMatchObject({ source: "system", observation: { results: [{ content: "out", extra: { tool_call_id: "ghost", status: "completed" } }] } });
    expect(t.steps[1].observation!.results[0].source_call_id).toBeUndefined();
  });

  it("records each call once and its first final result once", () => {
    const t = build([promptEvent("p"), call("c", "Bash", { command: "ls" }), call("c", "Bash", { command: "ls" }), toolResultEvent("c", "completed", "1"), toolResultEvent("c", "completed", "2")]);
    expect(t.steps[1].tool_calls).toHaveLength(1);
    expect(t.steps[1].observation!.results).toEqual([{ source_call_id: "c", content: "1" }]);
  });

  it("keeps a usage that came before its message's first output for that message's step", () => {
    const t = build([promptEvent("p"), usageEvent("call", { promptTokens: 7, completionTokens: 2 }, { messageId: "m", model: "gpt-x" }), chunkEvent("agent_message_chunk", "hi", "m")]);
    expect(t.steps[1]).toMatchObject({ source: "agent", model_name: "gpt-x", message: "hi", metrics: { prompt_tokens: 7, completion_tokens: 2 } });
    expect(t.steps).toHaveLength(2);
  });

  it("gives a call's usage to its agent step even when an error came between them", () => {
    const t = build([promptEvent("p"), chunkEvent("agent_message_chunk", "a"), errorEvent("model metadata not found", false), usageEvent("call", { promptTokens: 5, completionTokens: 1 })]);
    expect(t.steps.map((s) => [s.source, s.metrics?.prompt_tokens])).toEqual([["user", undefined], ["agent", 5], ["system", undefined]]);
  });

  it("keeps a tool call valid when a parser gave arguments that are not an object", () => {
    const bad = toolCallEvent({ toolCallId: "c", name: "Bash", title: "", kind: "execute", status: "pending", rawInput: ["ls"] as unknown as Record<string, unknown> });
    expect(build([promptEvent("p"), bad]).steps[1].tool_calls).toEqual([{ tool_call_id: "c", function_name: "Bash", arguments: { input: ["ls"] } }]);
  });

  it("makes an empty agent step for a model call that produced no output", () => {
    const t = build([promptEvent("p"), chunkEvent("agent_message_chunk", "a"), usageEvent("call", { promptTokens: 1, completionTokens: 1 }), usageEvent("call", { promptTokens: 2, completionTokens: 0 })]);
    expect(t.steps.slice(1).map((s) => [s.message, s.metrics?.prompt_tokens])).toEqual([["a", 1], ["", 2]]);
  });

  it("stamps a step with its first event's ISO timestamp, and ignores one that is not ISO", () => {
    const t = build([
      promptEvent("p"),
      chunkEvent("agent_message_chunk", "a", "m1", { timestamp: "2026-01-02T03:04:05.000Z" }),
      chunkEvent("agent_message_chunk", "b", "m1", { timestamp: "2026-01-02T03:04:09.000Z" }),
      chunkEvent("agent_message_chunk", "c", "m2", { timestamp: "last tuesday" }),
    ]);
    expect(Object.keys(t.steps[1])).toEqual(["step_id", "timestamp", "source", "message"]);
    expect(t.steps[1].timestamp).toBe("2026-01-02T03:04:05.000Z");
    expect(t.steps[2].timestamp).toBeUndefined();
  });

  it("writes the session id and the agent as given, and the same from stored events as from a streaming builder", () => {
    const events: TraceEvent[] = [promptEvent("p"), chunkEvent("agent_message_chunk", "x", "m")].map((e, seq) => ({ ...e, seq }) as TraceEvent);
    const t = buildTrajectory(events, { ...AGENT, sessionId: "sess-1" });
    expect(Object.keys(t)).toEqual(["schema_version", "session_id", "agent", "steps", "final_metrics"]);
    expect(t.schema_version).toBe("ATIF-v1.7");
    expect(t.agent).toEqual(AGENT.agent);
    const b = new TrajectoryBuilder({ ...AGENT, sessionId: "sess-1" });
    for (const e of events) b.push(e);
    expect(b.finish()).toEqual(t);
    expect(validateTrajectory(t)).toEqual([]);
  });
});
