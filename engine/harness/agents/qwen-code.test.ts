/**
 * qwen-code: its recorded runs (fixtures/agents/qwen-code, scripts/record/qwen-code.ts) → its parser → the parsed
 * trace. Claude-shaped lines, one per model call, with that call's usage; the chat file adds each call's
 * reasoning; a failed call is an "[API Error: …]" message that must not read as the agent's answer. And what its
 * CliSpec hands the box.
 */
import { describe, expect, it } from "vitest";
import { qwenCode } from "./qwen-code.ts";
import { buildTrajectory } from "../../trace/atif.ts";
import { validateTrajectory } from "../../trace/atif-validate.ts";
import { agentText, fixtureFiles, loadFixture, parse, sampleInput, sessionGlobMatches, updatesOf } from "../../../tests/support/agent-fixtures.ts";

const kinds = (events: { type: string }[]) => events.map((e) => e.type);

/** What the chat wire can state: cache writes are in the prompt, unnamed. */
const counts = (e: Record<string, number> | null) => e && { promptTokens: e.promptTokens, completionTokens: e.completionTokens, cachedTokens: e.cachedTokens, reasoningTokens: e.reasoningTokens };
const noReasoning = (e: Record<string, number> | null) => e && { promptTokens: e.promptTokens, completionTokens: e.completionTokens, cachedTokens: e.cachedTokens };

describe("qwen-code parser on recorded runs", () => {
  it("keeps the chat file its sessionGlobs select, one per run", () => {
    for (const name of ["text", "tool", "error"]) {
      const f = loadFixture("qwen-code", name);
      expect(f.session.map((s) => s.path)).toEqual([expect.stringMatching(/^projects\/-tmp-evolve-rec-qwen-code-\w+-work\/chats\/[0-9a-f-]{36}\.jsonl$/)]);
      expect(sessionGlobMatches("qwen-code", f.session[0]!.path)).toBe(true);
    }
  });

  it("text: the answer, the call's usage with its reasoning from the chat file, the totals from result", () => {
    const f = loadFixture("qwen-code", "text");
    const events = parse("qwen-code", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "agent_message_chunk", "usage", "usage"]);
    expect(agentText(events)).toBe("The answer is 42.");
    const [total, call] = updatesOf(events, "usage");
    expect(call).toMatchObject({ scope: "call", source: "harness", model: "gpt-fixture", usage: counts(f.upstream.replies[0]!.expected) });
    expect(call.usage.reasoningTokens).toBeGreaterThan(0);
    expect(call.messageId).toBe(updatesOf(events, "agent_message_chunk")[0].messageId);
    expect(total).toMatchObject({ scope: "total", usage: noReasoning(f.upstream.replies[0]!.expected) });
  });

  it("tool: run_shell_command as an execute call that completed with its output, then the answer; one usage per call", () => {
    const f = loadFixture("qwen-code", "tool");
    expect(f.upstream.workdir_files["out.txt"]).toBe("hello-from-tool\n");
    const events = parse("qwen-code", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "tool_call", "tool_call_update", "agent_message_chunk", "usage", "usage", "usage"]);
    const [call] = updatesOf(events, "tool_call");
    expect(call).toMatchObject({ toolCallId: "call_rec_1", name: "run_shell_command", kind: "execute", status: "in_progress", rawInput: { command: "echo hello-from-tool > out.txt" } });
    const [result] = updatesOf(events, "tool_call_update");
    expect(result).toMatchObject({ toolCallId: "call_rec_1", status: "completed" });
    expect(result.content[0].content.text).toContain("Exit Code: 0");
    expect(agentText(events)).toBe("Done: out.txt holds hello-from-tool.");
    const perCall = updatesOf(events, "usage").filter((u) => u.scope === "call");
    expect(perCall.map((u) => u.usage)).toEqual(f.upstream.replies.map((r) => counts(r.expected)));
    expect(perCall.map((u) => u.messageId)).toEqual([call.messageId, updatesOf(events, "agent_message_chunk")[0].messageId]);
    expect(perCall[0].messageId).not.toBe(perCall[1].messageId);
  });

  it("error: the '[API Error: …]' message is one fatal error, not the agent's answer", () => {
    const f = loadFixture("qwen-code", "error");
    expect(f.upstream.exit_code).toBe(1);
    expect(f.stdout).toContain('"text":"[API Error: 400 fixture error 400]"');
    const events = parse("qwen-code", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "error"]);
    expect(updatesOf(events, "error")[0]).toMatchObject({ fatal: true, message: "[API Error: 400 fixture error 400]" });
  });

  it("without the chat file each call's usage comes from its stream line (no reasoning figure there)", () => {
    const f = loadFixture("qwen-code", "tool");
    const perCall = updatesOf(parse("qwen-code", f.stdout, [], f.upstream.instruction), "usage").filter((u) => u.scope === "call");
    expect(perCall.map((u) => u.usage)).toEqual(f.upstream.replies.map((r) => noReasoning(r.expected)));
  });

  it("no recorded line is lost, no credential is kept, and the fixtures are small", () => {
    for (const name of ["text", "tool", "error"]) {
      const f = loadFixture("qwen-code", name);
      expect(kinds(parse("qwen-code", f.stdout, f.session))).not.toContain("trace_loss");
    }
    for (const { file, text, bytes } of fixtureFiles("qwen-code")) {
      expect(bytes, file).toBeLessThan(300_000);
      expect(text, file).not.toMatch(/evk-|sk-REAL/);
    }
  });
});

describe("qwen-code parser on what it cannot read and on what a run survives", () => {
  it("coalesces consecutive unreadable lines into one trace_loss with their count", () => {
    const f = loadFixture("qwen-code", "text");
    const lines = f.stdout.trim().split("\n");
    const events = parse("qwen-code", [lines[0], "Ripgrep not available", "", '{"type":"debug"}', ...lines.slice(1)].join("\n"), f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "trace_loss", "agent_message_chunk", "usage", "usage"]);
    expect(updatesOf(events, "trace_loss")[0]).toMatchObject({ count: 2, sample: "Ripgrep not available" });
  });

  it("an API error the run goes on after is non-fatal; thinking is a thought; a failed tool is failed", () => {
    const line = (o: unknown) => JSON.stringify(o);
    const stdout = [
      line({ type: "assistant", message: { id: "m1", content: [{ type: "text", text: "[API Error: 429 slow down]" }], usage: { input_tokens: 0, output_tokens: 0 } } }),
      line({ type: "assistant", message: { id: "m2", content: [{ type: "thinking", thinking: "hmm" }, { type: "tool_use", id: "c1", name: "read_file", input: { file_path: "a.txt" } }], usage: { input_tokens: 10, output_tokens: 2, total_tokens: 12 } } }),
      line({ type: "user", message: { role: "user", content: [{ type: "tool_result", tool_use_id: "c1", is_error: true, content: [{ type: "text", text: "no such " }, { type: "text", text: "file" }] }] } }),
      line({ type: "result", subtype: "success", is_error: false, usage: { input_tokens: 10, output_tokens: 2, total_tokens: 12 } }),
    ].join("\n");
    const events = parse("qwen-code", stdout);
    expect(kinds(events)).toEqual(["error", "agent_thought_chunk", "tool_call", "tool_call_update", "usage", "usage"]);
    expect(updatesOf(events, "error")[0]).toMatchObject({ fatal: false, message: "[API Error: 429 slow down]" });
    expect(updatesOf(events, "tool_call")[0]).toMatchObject({ kind: "read", messageId: "m2" });
    expect(updatesOf(events, "tool_call_update")[0]).toMatchObject({ status: "failed", content: [{ content: { text: "no such file" } }] });
    // the failed call had no usage: only m2's
    expect(updatesOf(events, "usage").filter((u) => u.scope === "call").map((u) => u.messageId)).toEqual(["m2"]);
  });
});

describe("qwen-code fixtures as ATIF", () => {
  const trajectory = (name: string) => {
    const f = loadFixture("qwen-code", name);
    return { f, t: buildTrajectory(parse("qwen-code", f.stdout, f.session, f.upstream.instruction), { agent: { name: "qwen-code", version: qwenCode.vendor.packages[0]!.version, model_name: (f.upstream as { model?: string }).model } }) };
  };

  it("every recorded run becomes a trajectory the validator accepts", () => {
    for (const name of ["text", "tool", "error"]) expect(validateTrajectory(trajectory(name).t), name).toEqual([]);
  });

  it("tool: the instruction, then one agent step per model call, the shell call and its observation in the first", () => {
    const { f, t } = trajectory("tool");
    expect(t.steps.map((s) => s.source)).toEqual(["user", "agent", "agent"]);
    expect(t.steps[0]!.message).toBe(f.upstream.instruction);
    const [, call, answer] = t.steps as any[];
    expect(call.tool_calls).toEqual([expect.objectContaining({ function_name: "run_shell_command", arguments: expect.objectContaining({ command: "echo hello-from-tool > out.txt" }) })]);
    expect(call.observation.results[0].source_call_id).toBe(call.tool_calls[0].tool_call_id);
    expect(answer.message).toBe("Done: out.txt holds hello-from-tool.");
    const expected = f.upstream.replies.map((r) => r.expected!);
    expect([call.metrics.prompt_tokens, answer.metrics.prompt_tokens]).toEqual(expected.map((e) => e.promptTokens));
    expect(t.final_metrics).toMatchObject({ total_prompt_tokens: expected[0]!.promptTokens + expected[1]!.promptTokens, total_completion_tokens: expected[0]!.completionTokens + expected[1]!.completionTokens });
  });
});

describe("qwen-code CliSpec", () => {
  const input = sampleInput({
    provider: "openai", api: "openai-chat", home: qwenCode.home, model: "gpt-5",
    program: ["/opt/evolve/agent/node/bin/node", "/opt/evolve/agent/lib/node_modules/@qwen-code/qwen-code/cli-entry.js"],
  });
  const settingsOf = (inv: { files: { path: string; content: string }[] }) => JSON.parse(inv.files.find((f) => f.path.endsWith("/settings.json"))!.content);

  it("speaks the model provider's own API: OpenAI chat, Anthropic Messages or Gemini; refuses another", () => {
    expect(qwenCode.apiFor("openai")).toBe("openai-chat");
    expect(qwenCode.apiFor("anthropic")).toBe("anthropic");
    expect(qwenCode.apiFor("gemini")).toBe("gemini");
    expect(qwenCode.apiFor("mistral")).toBeUndefined();
  });

  it("runs headless in stream-json with yolo and the model named; the instruction on stdin", () => {
    const inv = qwenCode.invocation(input);
    expect(inv.argv).toEqual([...input.program, "--output-format", "stream-json", "--yolo", "--auth-type", "openai", "-m", "gpt-5"]);
    expect(inv.stdin).toBe(input.instruction);
    expect(inv.env).toMatchObject({ QWEN_HOME: "/logs/agent/.qwen", QWEN_CODE_SUPPRESS_YOLO_WARNING: "1" });
  });

  it("names the key variable in its provider entry and holds no key; every side call off", () => {
    expect(qwenCode.keyEnv).toBeUndefined();
    const inv = qwenCode.invocation(input);
    expect(Object.keys(inv.env).filter((k) => /KEY|TOKEN/.test(k))).toEqual([]);
    const s = settingsOf(inv);
    expect(s.modelProviders).toEqual({ openai: [{ id: "gpt-5", name: "gpt-5", baseUrl: "http://evolve-gateway:4000/v1", envKey: "EVOLVE_GATEWAY_KEY", wireApi: "chat-completions" }] });
    expect(s).toMatchObject({
      security: { auth: { selectedType: "openai" } },
      model: { name: "gpt-5" },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      memory: { enableManagedAutoMemory: false, enableManagedAutoDream: false },
    });
    expect(JSON.stringify(s)).not.toMatch(/apiKey/);
  });

  it("points Anthropic and Gemini models at the gateway root under their own auth type", () => {
    const a = qwenCode.invocation({ ...input, provider: "anthropic", api: "anthropic", model: "claude-x" });
    expect(a.argv).toContain("anthropic");
    expect(settingsOf(a).modelProviders).toEqual({ anthropic: [{ id: "claude-x", name: "claude-x", baseUrl: "http://evolve-gateway:4000", envKey: "EVOLVE_GATEWAY_KEY" }] });
    const g = qwenCode.invocation({ ...input, provider: "gemini", api: "gemini", model: "gemini-2.5-flash" });
    expect(settingsOf(g).security.auth.selectedType).toBe("gemini");
    expect(settingsOf(g).modelProviders.gemini[0].baseUrl).toBe("http://evolve-gateway:4000");
  });

  it("maps --ak options and registers MCP servers in settings.json", () => {
    const inv = qwenCode.invocation({ ...input, options: { max_turns: "25", max_tool_calls: "60", reasoning_effort: "high" }, mcpServers: [
      { name: "files", transport: "stdio", command: "mcp-files", args: [] },
      { name: "web", transport: "sse", url: "http://mcp:8000/sse" },
      { name: "api", transport: "http", url: "http://mcp:8001/mcp" },
    ] });
    expect(inv.argv.slice(-2)).toEqual(["--max-tool-calls", "60"]);
    const s = settingsOf(inv);
    expect(s.model).toMatchObject({ maxSessionTurns: 25, reasoningEffort: "high" });
    expect(s.mcpServers).toEqual({ files: { command: "mcp-files", args: [] }, web: { url: "http://mcp:8000/sse" }, api: { httpUrl: "http://mcp:8001/mcp" } });
    expect(qwenCode.options.max_turns!.pattern!.test("-1")).toBe(false);
  });

  it("is JavaScript run by a vendored Node ≥ 22", () => {
    expect(qwenCode.vendor).toMatchObject({ viaNode: true, nodeMin: "22.0.0", entry: "lib/node_modules/@qwen-code/qwen-code/cli-entry.js" });
    expect(qwenCode.vendor.packages).toEqual([{ name: "@qwen-code/qwen-code", version: "0.24.4" }]);
    expect([qwenCode.stdoutName, qwenCode.parser?.harness, qwenCode.home]).toEqual(["qwen-code.txt", "qwen-code", "/logs/agent/.qwen"]);
  });
});
