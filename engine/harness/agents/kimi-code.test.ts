/**
 * kimi-code: its recorded runs (fixtures/agents/kimi-code, scripts/record/kimi-code.ts) → its parser → the parsed
 * trace. Its stdout has no usage and no failure: both come from the session's wire file, so a run parsed without it
 * has neither. And what its CliSpec hands the box.
 */
import { describe, expect, it } from "vitest";
import { kimiCode } from "./kimi-code.ts";
import { agentText, fixtureFiles, loadFixture, parse, sampleInput, sessionGlobMatches, updatesOf } from "../../../tests/support/agent-fixtures.ts";

const kinds = (events: { type: string }[]) => events.map((e) => e.type);

/** What kimi's usage records can state: no reasoning figure (the chat wire's is not recorded). */
const counts = (e: Record<string, number> | null) => e && { promptTokens: e.promptTokens, completionTokens: e.completionTokens, cachedTokens: e.cachedTokens, cacheWriteTokens: e.cacheWriteTokens };

describe("kimi-code parser on recorded runs", () => {
  it("keeps the wire file its sessionGlobs select, and nothing else", () => {
    for (const name of ["text", "tool", "error", "mcp"]) {
      const f = loadFixture("kimi-code", name);
      expect(f.session.map((s) => s.path)).toEqual([expect.stringMatching(/^sessions\/wd_app_[0-9a-f]+\/session_[0-9a-f-]+\/agents\/main\/wire\.jsonl$/)]);
      expect(sessionGlobMatches("kimi-code", f.session[0]!.path)).toBe(true);
    }
  });

  it("text: the prompt, the answer, and the call's usage from the wire file, on the same model call", () => {
    const f = loadFixture("kimi-code", "text");
    const events = parse("kimi-code", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "agent_message_chunk", "usage"]);
    expect(agentText(events)).toBe("The answer is 42.");
    const [usage] = updatesOf(events, "usage");
    expect(usage).toMatchObject({ scope: "call", source: "harness", usage: counts(f.upstream.replies[0]!.expected) });
    expect(usage.messageId).toBe(updatesOf(events, "agent_message_chunk")[0].messageId);
  });

  it("tool: Bash as an execute call that completed with its output, then the answer; one usage per call", () => {
    const f = loadFixture("kimi-code", "tool");
    expect(f.upstream.workdir_files["out.txt"]).toBe("hello-from-tool\n");
    const events = parse("kimi-code", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "tool_call", "tool_call_update", "agent_message_chunk", "usage", "usage"]);
    const [call] = updatesOf(events, "tool_call");
    expect(call).toMatchObject({ toolCallId: "call_rec_1", name: "Bash", kind: "execute", status: "in_progress", rawInput: { command: "echo hello-from-tool > out.txt" } });
    expect(updatesOf(events, "tool_call_update")[0]).toMatchObject({ toolCallId: "call_rec_1", status: "completed", content: [{ content: { text: "Command executed successfully." } }] });
    expect(agentText(events)).toBe("Done: out.txt holds hello-from-tool.");
    const usages = updatesOf(events, "usage");
    // the chat wire folds cache writes into the prompt without naming them: the prompt total still matches
    expect(usages.map((u) => u.usage)).toEqual(f.upstream.replies.map((r) => counts(r.expected)));
    expect(usages.map((u) => u.messageId)).toEqual([call.messageId, updatesOf(events, "agent_message_chunk")[0].messageId]);
    expect(usages[0].messageId).not.toBe(usages[1].messageId);
  });

  it("error: stdout has only its version line; the failed turn in the wire file is a fatal error", () => {
    const f = loadFixture("kimi-code", "error");
    expect(f.upstream.exit_code).toBe(1);
    expect(f.stdout.trim().split("\n")).toHaveLength(1);
    const events = parse("kimi-code", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "error"]);
    expect(updatesOf(events, "error")[0]).toEqual({ sessionUpdate: "error", message: "provider.api_error: 400 fixture error 400", fatal: true });
  });

  it("without the wire file there is no usage to give (stdout has none)", () => {
    const f = loadFixture("kimi-code", "tool");
    expect(kinds(parse("kimi-code", f.stdout, [], f.upstream.instruction))).not.toContain("usage");
  });

  it("mcp: the task MCP server registered in its native config shows among the tools it advertised", () => {
    const f = loadFixture("kimi-code", "mcp");
    expect(f.upstream.exit_code).toBe(0);
    expect(f.upstream.tool_names).toContain("mcp__probe__probe_echo");
    expect(loadFixture("kimi-code", "text").upstream.tool_names).not.toContain("mcp__probe__probe_echo");
    // its own shell tool, under the name the parser reports
    expect(f.upstream.tool_names).toContain("Bash");
  });

  it("no recorded line is lost, and the fixtures are small", () => {
    for (const name of ["text", "tool", "error", "mcp"]) {
      const f = loadFixture("kimi-code", name);
      expect(kinds(parse("kimi-code", f.stdout, f.session))).not.toContain("trace_loss");
    }
    for (const { file, bytes } of fixtureFiles("kimi-code")) expect(bytes, file).toBeLessThan(300_000);
  });
});

describe("kimi-code parser on what it cannot read and on subagents", () => {
  it("coalesces consecutive unreadable lines into one trace_loss with their count", () => {
    const f = loadFixture("kimi-code", "text");
    const lines = f.stdout.trim().split("\n");
    const events = parse("kimi-code", [lines[0], "<html>", "", '{"role":"wizard"}', ...lines.slice(1)].join("\n"), f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "trace_loss", "agent_message_chunk", "usage"]);
    expect(updatesOf(events, "trace_loss")[0]).toMatchObject({ count: 2, sample: "<html>" });
  });

  it("counts each agent's usage from its own wire file once, and a retried step is a non-fatal error", () => {
    const rec = (agentId: string, inputOther: number) => JSON.stringify({ type: "usage.record", agentId, usage: { inputOther, output: 1, inputCacheRead: 0, inputCacheCreation: 0 }, usageScope: "turn" });
    const session = [
      // the main file also logs the subagent's record: counted from the subagent's file only
      { path: "sessions/wd_x/session_1/agents/main/wire.jsonl", text: [rec("main", 10), rec("coder", 99)].join("\n") },
      { path: "sessions/wd_x/session_1/agents/coder/wire.jsonl", text: rec("coder", 99) },
    ];
    const stdout = [
      JSON.stringify({ role: "meta", type: "turn.step.retrying", failed_attempt: 1, next_attempt: 2, max_attempts: 3, error_message: "429 slow down", status_code: 429 }),
      JSON.stringify({ role: "assistant", content: "hi" }),
    ].join("\n");
    const events = parse("kimi-code", stdout, session);
    expect(kinds(events)).toEqual(["error", "agent_message_chunk", "usage", "usage"]);
    expect(updatesOf(events, "error")[0]).toMatchObject({ fatal: false, _meta: { statusCode: 429 } });
    const usages = updatesOf(events, "usage");
    expect(usages.map((u) => u.usage.promptTokens)).toEqual([10, 99]);
    expect(usages[0].messageId).toBe("kimi-call-1");
    expect(usages[1]).toMatchObject({ _meta: { agent: "coder" } });
    expect(usages[1].messageId).toBeUndefined();
  });
});

describe("kimi-code CliSpec", () => {
  const input = sampleInput({ provider: "openai", api: "openai-chat", home: kimiCode.home, model: "gpt-5", keyEnv: "KIMI_MODEL_API_KEY", program: ["/opt/evolve/agent/node/bin/node", "/opt/evolve/agent/lib/node_modules/@moonshot-ai/kimi-code/dist/main.mjs"] });

  it("speaks OpenAI chat or Anthropic Messages, and refuses a provider it cannot speak", () => {
    expect(kimiCode.apiFor("openai")).toBe("openai-chat");
    expect(kimiCode.apiFor("anthropic")).toBe("anthropic");
    expect(kimiCode.apiFor("gemini")).toBeUndefined();
  });

  it("runs the prompt headless in stream-json, without --auto (which kimi refuses beside -p)", () => {
    const inv = kimiCode.invocation(input);
    expect(inv.argv).toEqual([...input.program, "-p", input.instruction, "--output-format", "stream-json"]);
    expect(inv.files).toEqual([]);
  });

  it("points it at the gateway by environment, reads the key from KIMI_MODEL_API_KEY, and switches side calls off", () => {
    expect(kimiCode.keyEnv).toBe("KIMI_MODEL_API_KEY");
    const inv = kimiCode.invocation(input);
    expect(inv.env).toMatchObject({
      KIMI_CODE_HOME: "/logs/agent/.kimi-code",
      KIMI_MODEL_NAME: "gpt-5",
      KIMI_MODEL_PROVIDER_TYPE: "openai",
      KIMI_MODEL_BASE_URL: "http://evolve-gateway:4000/v1",
      KIMI_CODE_NO_AUTO_UPDATE: "1",
      KIMI_DISABLE_TELEMETRY: "1",
    });
    expect(inv.env).not.toHaveProperty("KIMI_MODEL_API_KEY");
    const anthropic = kimiCode.invocation({ ...input, provider: "anthropic", api: "anthropic" });
    expect(anthropic.env).toMatchObject({ KIMI_MODEL_PROVIDER_TYPE: "anthropic", KIMI_MODEL_BASE_URL: "http://evolve-gateway:4000" });
  });

  it("maps --ak options to its variables and registers MCP servers in its home's mcp.json", () => {
    const inv = kimiCode.invocation({ ...input, options: { thinking_effort: "high", max_steps: "40" }, mcpServers: [
      { name: "files", transport: "stdio", command: "mcp-files", args: [] },
      { name: "web", transport: "sse", url: "http://mcp:8000/sse" },
    ] });
    expect(inv.env).toMatchObject({ KIMI_MODEL_THINKING_EFFORT: "high", KIMI_LOOP_MAX_STEPS_PER_TURN: "40" });
    expect(inv.files).toHaveLength(1);
    expect(inv.files[0]!.path).toBe("/logs/agent/.kimi-code/mcp.json");
    expect(JSON.parse(inv.files[0]!.content)).toEqual({ mcpServers: { files: { command: "mcp-files", args: [] }, web: { type: "sse", url: "http://mcp:8000/sse" } } });
    expect(kimiCode.options.max_steps!.pattern!.test("0")).toBe(false);
  });

  it("is JavaScript run by a vendored Node ≥ 22.19", () => {
    expect(kimiCode.vendor).toMatchObject({ viaNode: true, nodeMin: "22.19.0", entry: "lib/node_modules/@moonshot-ai/kimi-code/dist/main.mjs" });
    expect(kimiCode.vendor.packages).toEqual([{ name: "@moonshot-ai/kimi-code", version: "2.1.0" }]);
    expect([kimiCode.stdoutName, kimiCode.parser?.harness]).toEqual(["kimi-code.txt", "kimi-code"]);
  });
});
