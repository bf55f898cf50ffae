/**
 * codex: its recorded runs (fixtures/agents/codex, scripts/record/codex.ts) → its parser → the parsed trace, per-call
 * tokens from the session rollout equal to what the scripted upstream reported, the cumulative `turn.completed` as
 * the total, the "model metadata not found" item as a non-fatal error; and what its CliSpec hands the box.
 */
import { describe, expect, it } from "vitest";
import { codex } from "../engine/harness/agents/codex.ts";
import { agentText, fixtureFiles, loadFixture, parse, sampleInput, sessionGlobMatches, updatesOf } from "./support/agent-fixtures.ts";

const kinds = (events: { type: string }[]) => events.map((e) => e.type);
const calls = (events: Parameters<typeof updatesOf>[0]) => updatesOf(events, "usage").filter((u) => u.scope === "call");
const totals = (events: Parameters<typeof updatesOf>[0]) => updatesOf(events, "usage").filter((u) => u.scope === "total");

/** A reply's expected counts as the parser states them (zero parts left out). */
function counts(e: { promptTokens: number; completionTokens: number; cachedTokens: number; cacheWriteTokens: number; reasoningTokens: number }) {
  return {
    promptTokens: e.promptTokens, completionTokens: e.completionTokens,
    ...(e.cachedTokens ? { cachedTokens: e.cachedTokens } : {}), ...(e.cacheWriteTokens ? { cacheWriteTokens: e.cacheWriteTokens } : {}), ...(e.reasoningTokens ? { reasoningTokens: e.reasoningTokens } : {}),
  };
}

const METADATA = /^Model metadata for `gpt-5` not found/;

describe("codex parser on recorded runs", () => {
  it("text: the prompt, the non-fatal metadata error, the answer, one call with the upstream's tokens, the total", () => {
    const f = loadFixture("codex", "text");
    expect(f.upstream.exit_code).toBe(0);
    expect(f.session.map((s) => sessionGlobMatches("codex", s.path))).toEqual([true]);
    const events = parse("codex", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "error", "agent_message_chunk", "usage", "usage"]);
    const [err] = updatesOf(events, "error");
    expect(err.fatal).toBe(false);
    expect(err.message).toMatch(METADATA);
    expect(agentText(events)).toBe("The answer is 42.");
    const expected = counts(f.upstream.replies[0]!.expected!);
    expect(expected.reasoningTokens).toBe(4);
    expect(calls(events)).toMatchObject([{ usage: expected, model: "gpt-5", _meta: { responseId: "resp_fixture1" } }]);
    expect(totals(events).map((u) => u.usage)).toEqual([expected]);
  });

  it("tool: exec_command in progress then completed, the answer; per-call tokens from the rollout, the cumulative total once", () => {
    const f = loadFixture("codex", "tool");
    expect(f.upstream.workdir_files["out.txt"]).toBe("hello-from-tool\n");
    const events = parse("codex", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "error", "tool_call", "tool_call_update", "agent_message_chunk", "usage", "usage", "usage"]);
    expect(updatesOf(events, "tool_call")[0]).toEqual({
      sessionUpdate: "tool_call", toolCallId: "item_1", name: "exec_command", title: "/bin/bash -lc 'echo hello-from-tool > out.txt'", kind: "execute", status: "in_progress",
      rawInput: { command: "/bin/bash -lc 'echo hello-from-tool > out.txt'" },
    });
    expect(updatesOf(events, "tool_call_update")[0]).toMatchObject({ toolCallId: "item_1", status: "completed", rawOutput: { exit_code: 0 }, content: [{ content: { text: "" } }] });
    expect(agentText(events)).toBe("Done: out.txt holds hello-from-tool.");
    expect(calls(events).map((u) => u.usage)).toEqual(f.upstream.replies.map((r) => counts(r.expected!)));
    // stdout's one turn.completed is the thread's running total over both calls
    expect(f.stdout.match(/"turn\.completed"/g)).toHaveLength(1);
    expect(totals(events).map((u) => u.usage)).toEqual([{ promptTokens: 6500, completionTokens: 48, cachedTokens: 2300 }]);
  });

  it("error: the upstream's 400 is one fatal error (turn.failed repeats it), the metadata item not fatal", () => {
    const f = loadFixture("codex", "error");
    expect(f.upstream.exit_code).toBe(1);
    const events = parse("codex", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "error", "error"]);
    const [meta, fail] = updatesOf(events, "error");
    expect(meta).toMatchObject({ fatal: false });
    expect(fail.fatal).toBe(true);
    expect(fail.message).toContain("fixture error 400");
  });

  it("no recorded line is lost, and the fixtures are small", () => {
    for (const name of ["text", "tool", "error"]) {
      const f = loadFixture("codex", name);
      expect(kinds(parse("codex", f.stdout, f.session, f.upstream.instruction))).not.toContain("trace_loss");
    }
    for (const { file, bytes } of fixtureFiles("codex")) expect(bytes, file).toBeLessThan(300_000);
  });
});

describe("codex parser on streams it was not recorded with", () => {
  it("several turns: turn.completed is cumulative, so the total is the last one, never their sum", () => {
    const lines = [
      { type: "thread.started", thread_id: "t1" },
      { type: "turn.completed", usage: { input_tokens: 100, cached_input_tokens: 10, output_tokens: 5 } },
      { type: "turn.completed", usage: { input_tokens: 250, cached_input_tokens: 30, output_tokens: 12, reasoning_output_tokens: 4 } },
    ].map((l) => JSON.stringify(l)).join("\n");
    const events = parse("codex", lines);
    expect(updatesOf(events, "usage")).toEqual([{ sessionUpdate: "usage", scope: "total", source: "harness", usage: { promptTokens: 250, completionTokens: 12, cachedTokens: 30, reasoningTokens: 4 } }]);
  });

  it("reads its own thread's rollout only, and token_count's last usage where a rollout has no usage records", () => {
    const row = (type: string, payload: unknown) => JSON.stringify({ timestamp: "2026-01-01T00:00:00Z", type, payload });
    const old = [
      row("turn_context", { model: "gpt-5.5" }),
      row("event_msg", { type: "token_count", info: { last_token_usage: { input_tokens: 40, cached_input_tokens: 0, output_tokens: 3 }, total_token_usage: { input_tokens: 40, output_tokens: 3 } } }),
      row("event_msg", { type: "token_count", info: null }),
    ].join("\n");
    const other = row("token_usage_record", { response_id: "r9", usage: { input_tokens: 999, output_tokens: 9 } });
    const events = parse("codex", JSON.stringify({ type: "thread.started", thread_id: "abc" }), [
      { path: "sessions/2026/01/01/rollout-2026-01-01T00-00-00-abc.jsonl", text: old },
      { path: "sessions/2026/01/01/rollout-2026-01-01T00-00-01-zzz.jsonl", text: other },
    ]);
    expect(updatesOf(events, "usage")).toEqual([{ sessionUpdate: "usage", scope: "call", source: "harness", usage: { promptTokens: 40, completionTokens: 3 }, model: "gpt-5.5", _meta: { timestamp: "2026-01-01T00:00:00Z" } }]);
  });

  it("a failed command, a file change, an MCP call, reasoning, a todo list; Reconnecting is not fatal", () => {
    const lines = [
      { type: "item.completed", item: { id: "item_0", type: "reasoning", text: "Think first." } },
      { type: "item.started", item: { id: "item_1", type: "command_execution", command: "false", aggregated_output: "", exit_code: null, status: "in_progress" } },
      { type: "item.completed", item: { id: "item_1", type: "command_execution", command: "false", aggregated_output: "boom\n", exit_code: 1, status: "failed" } },
      { type: "item.completed", item: { id: "item_2", type: "file_change", changes: [{ path: "/app/a.py", kind: "update" }], status: "completed" } },
      { type: "item.completed", item: { id: "item_3", type: "mcp_tool_call", server: "files", tool: "read_file", arguments: { path: "x" }, result: { content: [{ type: "text", text: "data" }] }, status: "completed" } },
      { type: "item.updated", item: { id: "item_4", type: "todo_list", items: [{ text: "a", completed: true }, { text: "b", completed: false }] } },
      { type: "error", message: "Reconnecting... 1/5" },
    ].map((l) => JSON.stringify(l)).join("\n");
    const events = parse("codex", lines);
    expect(kinds(events)).toEqual(["agent_thought_chunk", "tool_call", "tool_call_update", "tool_call", "tool_call_update", "tool_call", "tool_call_update", "plan", "error"]);
    expect(updatesOf(events, "tool_call").map((u) => [u.name, u.kind])).toEqual([["exec_command", "execute"], ["apply_patch", "edit"], ["files.read_file", "read"]]);
    expect(updatesOf(events, "tool_call_update").map((u) => [u.status, u.content[0].content.text])).toEqual([["failed", "boom\n"], ["completed", "update /app/a.py"], ["completed", "data"]]);
    expect(updatesOf(events, "plan")[0].entries.map((e: { status: string }) => e.status)).toEqual(["completed", "pending"]);
    expect(updatesOf(events, "error")[0]).toMatchObject({ fatal: false });
  });

  it("coalesces consecutive unreadable lines into one trace_loss, flushed at the end too", () => {
    const f = loadFixture("codex", "text");
    const events = parse("codex", `garbage\n"a string"\n${f.stdout}{"truncated`, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "trace_loss", "error", "agent_message_chunk", "trace_loss", "usage", "usage"]);
    expect(updatesOf(events, "trace_loss").map((u) => u.count)).toEqual([2, 1]);
  });
});

describe("codex CliSpec", () => {
  const input = sampleInput({ provider: "openai", api: "openai-responses", home: codex.home, model: "gpt-5.5" });
  const configOf = (inv: ReturnType<typeof codex.invocation>) => inv.files.find((f) => f.path === "/logs/agent/.codex/config.toml")!.content;

  it("speaks the Responses API only: another provider is refused", () => {
    expect(codex.apiFor("openai")).toBe("openai-responses");
    expect(codex.apiFor("anthropic")).toBeUndefined();
    expect(codex.apiFor("gemini")).toBeUndefined();
  });

  it("runs exec --json headless in the workdir with the model, the instruction on stdin", () => {
    const inv = codex.invocation({ ...input, instruction: "--help me" });
    expect(inv.argv).toEqual(["/opt/evolve/agent/bin/cli", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-C", "/app", "-m", "gpt-5.5", "-"]);
    expect(inv.stdin).toBe("--help me");
    expect(inv.env).toEqual({ CODEX_HOME: "/logs/agent/.codex", NO_COLOR: "1" });
  });

  it("config.toml: the gateway as a Responses provider naming the key variable (no key), side calls off", () => {
    const cfg = configOf(codex.invocation(input));
    expect(cfg).toContain('model_provider = "evolve"');
    expect(cfg).toContain('[model_providers.evolve]\nname = "evolve gateway"\nbase_url = "http://evolve-gateway:4000/v1"\nenv_key = "EVOLVE_GATEWAY_KEY"\nwire_api = "responses"\nsupports_websockets = false\n');
    expect(cfg).toContain("check_for_update_on_startup = false");
    expect(cfg).toContain("[analytics]\nenabled = false");
    expect(cfg).toContain("[feedback]\nenabled = false");
    expect(cfg).toContain('[otel]\nexporter = "none"');
    expect(codex.keyEnv).toBeUndefined();
    expect(configOf(codex.invocation({ ...input, keyEnv: "OTHER_KEY" }))).toContain('env_key = "OTHER_KEY"');
  });

  it("registers MCP servers as [mcp_servers] tables, quoting names and values; maps reasoning_effort", () => {
    const cfg = configOf(codex.invocation({ ...input, options: { reasoning_effort: "high" }, mcpServers: [
      { name: "files", transport: "stdio", command: "mcp-files", args: ["/app", 'say "hi"'] },
      { name: "web.tools", transport: "streamable-http", url: "http://mcp:8000/mcp" },
    ] }));
    expect(cfg).toContain('model_reasoning_effort = "high"');
    expect(cfg).toContain('[mcp_servers."files"]\ncommand = "mcp-files"\nargs = ["/app", "say \\"hi\\""]');
    expect(cfg).toContain('[mcp_servers."web.tools"]\nurl = "http://mcp:8000/mcp"');
    expect(configOf(codex.invocation(input))).not.toContain("mcp_servers");
    expect(codex.options.reasoning_effort!.values).toEqual(["minimal", "low", "medium", "high", "xhigh"]);
  });

  it("vendors the native binary of the npm package's platform dependency", () => {
    expect(codex.vendor.packages).toEqual([{ name: "@openai/codex", version: "0.171.0" }]);
    expect(codex.vendor).toMatchObject({ viaNode: false, imageCommand: "codex", entry: "lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex" });
    expect([codex.stdoutName, codex.parser, codex.home]).toEqual(["codex.txt", "codex", "/logs/agent/.codex"]);
  });
});
