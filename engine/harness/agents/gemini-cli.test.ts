/**
 * gemini-cli: its recorded runs (fixtures/agents/gemini-cli, scripts/record/gemini-cli.ts) → its parser → the parsed
 * trace. Its answer comes in deltas, its usage per call only from the session file (records written again under the
 * same id), its totals from `result.stats`. And what its CliSpec hands the box.
 */
import { describe, expect, it } from "vitest";
import { geminiCli } from "./gemini-cli.ts";
import { buildTrajectory } from "../../trace/atif.ts";
import { validateTrajectory } from "../../trace/atif-validate.ts";
import { agentText, fixtureFiles, loadFixture, parse, sampleInput, sessionGlobMatches, updatesOf } from "../../../tests/support/agent-fixtures.ts";

const kinds = (events: { type: string }[]) => events.map((e) => e.type);

/** What the Gemini wire can state: no cache writes (they are in the prompt, unnamed). */
const counts = (e: Record<string, number> | null) => e && { promptTokens: e.promptTokens, completionTokens: e.completionTokens, cachedTokens: e.cachedTokens, reasoningTokens: e.reasoningTokens };

const sum = (xs: Record<string, number>[], k: string) => xs.reduce((n, x) => n + (x[k] ?? 0), 0);

describe("gemini-cli parser on recorded runs", () => {
  it("keeps the session file its sessionGlobs select, one per run", () => {
    for (const name of ["text", "tool", "error"]) {
      const f = loadFixture("gemini-cli", name);
      expect(f.session.map((s) => s.path)).toEqual([expect.stringMatching(/^tmp\/work\/chats\/session-[0-9T-]+-[0-9a-f]{8}\.jsonl$/)]);
      expect(sessionGlobMatches("gemini-cli", f.session[0]!.path)).toBe(true);
    }
  });

  it("text: the answer's deltas joined into one chunk, the call's usage from the session file, the totals from result", () => {
    const f = loadFixture("gemini-cli", "text");
    // the stream really sends it in pieces
    expect(f.stdout.split("\n").filter((l) => l.includes('"delta":true')).length).toBeGreaterThan(1);
    const events = parse("gemini-cli", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "agent_message_chunk", "usage", "usage"]);
    expect(agentText(events)).toBe("The answer is 42.");
    const [total, call] = updatesOf(events, "usage");
    // thoughts are part of the completion: the stream's output_tokens leaves them out, its total_tokens does not
    expect(call).toMatchObject({ scope: "call", source: "harness", model: "gemini-2.5-flash", usage: counts(f.upstream.replies[0]!.expected) });
    expect(total).toMatchObject({ scope: "total", usage: counts(f.upstream.replies[0]!.expected) });
    expect(call.messageId).toBe(updatesOf(events, "agent_message_chunk")[0].messageId);
  });

  it("tool: run_shell_command as an execute call that completed, then the answer; one usage per call, each counted once", () => {
    const f = loadFixture("gemini-cli", "tool");
    expect(f.upstream.workdir_files["out.txt"]).toBe("hello-from-tool\n");
    // the session file writes the tool-calling record twice under one id
    const ids = f.session[0]!.text.split("\n").filter((l) => l.includes('"type":"gemini"')).map((l) => JSON.parse(l).id);
    expect(ids.length).toBe(3);
    expect(new Set(ids).size).toBe(2);
    const events = parse("gemini-cli", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "tool_call", "tool_call_update", "agent_message_chunk", "usage", "usage", "usage"]);
    const [call] = updatesOf(events, "tool_call");
    expect(call).toMatchObject({ name: "run_shell_command", kind: "execute", status: "in_progress", title: "echo hello-from-tool > out.txt", rawInput: { command: "echo hello-from-tool > out.txt" } });
    expect(call.toolCallId).toMatch(/^run_shell_command__/);
    // the command printed nothing (its output went to out.txt): the stream's output is empty, and kept as such
    expect(updatesOf(events, "tool_call_update")[0]).toMatchObject({ toolCallId: call.toolCallId, status: "completed", content: [{ content: { text: "" } }] });
    expect(agentText(events)).toBe("Done: out.txt holds hello-from-tool.");
    const usages = updatesOf(events, "usage");
    const perCall = usages.filter((u) => u.scope === "call");
    expect(perCall.map((u) => u.usage)).toEqual(f.upstream.replies.map((r) => counts(r.expected)));
    expect(perCall.map((u) => u.messageId)).toEqual([call.messageId, updatesOf(events, "agent_message_chunk")[0].messageId]);
    expect(perCall[0].messageId).not.toBe(perCall[1].messageId);
    const total = usages.find((u) => u.scope === "total");
    const expected = f.upstream.replies.map((r) => r.expected!);
    expect(total.usage).toEqual({ promptTokens: sum(expected, "promptTokens"), completionTokens: sum(expected, "completionTokens"), cachedTokens: sum(expected, "cachedTokens"), reasoningTokens: 0 });
  });

  it("error: the upstream's 400 is a fatal error (exit 144), with no usage", () => {
    const f = loadFixture("gemini-cli", "error");
    expect(f.upstream.exit_code).toBe(144);
    expect(f.upstream.replies.map((r) => r.status)).toEqual([400]);
    const events = parse("gemini-cli", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "error"]);
    expect(updatesOf(events, "error")[0]).toMatchObject({ fatal: true, message: expect.stringContaining("fixture error 400") });
  });

  it("without the session file the totals remain, per-call usage does not", () => {
    const f = loadFixture("gemini-cli", "tool");
    const usages = updatesOf(parse("gemini-cli", f.stdout, [], f.upstream.instruction), "usage");
    expect(usages.map((u) => u.scope)).toEqual(["total"]);
  });

  it("a run made elsewhere takes its prompt from the stream's user message", () => {
    const f = loadFixture("gemini-cli", "text");
    const events = parse("gemini-cli", f.stdout, f.session);
    expect(events[0]).toMatchObject({ type: "prompt", data: { _prompt: { text: "Say the answer." } } });
    expect(kinds(events)).not.toContain("user_message_chunk");
  });

  it("no recorded line is lost, no credential is kept, and the fixtures are small", () => {
    for (const name of ["text", "tool", "error"]) {
      const f = loadFixture("gemini-cli", name);
      expect(kinds(parse("gemini-cli", f.stdout, f.session))).not.toContain("trace_loss");
    }
    for (const { file, text, bytes } of fixtureFiles("gemini-cli")) {
      expect(bytes, file).toBeLessThan(300_000);
      expect(text, file).not.toMatch(/evk-|sk-REAL|x-goog-api-key/);
    }
  });
});

describe("gemini-cli parser on what it cannot read", () => {
  it("coalesces consecutive unreadable lines into one trace_loss with their count", () => {
    const f = loadFixture("gemini-cli", "text");
    const lines = f.stdout.trim().split("\n");
    const events = parse("gemini-cli", [lines[0], "Loaded cached credentials.", '{"type":"telemetry"}', ...lines.slice(1)].join("\n"), f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "trace_loss", "agent_message_chunk", "usage", "usage"]);
    expect(updatesOf(events, "trace_loss")[0]).toMatchObject({ count: 2, sample: "Loaded cached credentials." });
  });

  it("a warning is a warning, not an error; a failed tool is failed; a todo list is a plan; garbage in the session file is a loss", () => {
    const stdout = [
      { type: "init", session_id: "s1", model: "m" },
      { type: "error", severity: "warning", message: "quota: retrying" },
      { type: "tool_use", tool_name: "write_todos", tool_id: "t1", parameters: { todos: [{ description: "write it", status: "in_progress" }] } },
      { type: "tool_result", tool_id: "t1", status: "success", output: "ok" },
      { type: "tool_use", tool_name: "read_file", tool_id: "t2", parameters: { file_path: "a.txt" } },
      { type: "tool_result", tool_id: "t2", status: "error", error: { type: "file_not_found", message: "no such file" } },
    ].map((l) => JSON.stringify(l)).join("\n");
    const session = [{ path: "tmp/w/chats/session-x.jsonl", text: `{"sessionId":"s1","kind":"main"}\nnot json\n` }];
    const events = parse("gemini-cli", stdout, session);
    expect(kinds(events)).toEqual(["warning", "tool_call", "plan", "tool_call_update", "tool_call", "tool_call_update", "trace_loss"]);
    expect(updatesOf(events, "warning")[0]).toEqual({ sessionUpdate: "warning", message: "quota: retrying" });
    expect(updatesOf(events, "plan")[0].entries).toEqual([{ content: "write it", priority: "medium", status: "in_progress" }]);
    const [, read] = updatesOf(events, "tool_call");
    expect(read).toMatchObject({ kind: "read", title: "a.txt", messageId: "gemini-call-2" });
    expect(updatesOf(events, "tool_call_update")[1]).toMatchObject({ status: "failed", content: [{ content: { text: "no such file" } }] });
  });
});

describe("gemini-cli fixtures as ATIF", () => {
  const trajectory = (name: string) => {
    const f = loadFixture("gemini-cli", name);
    return { f, t: buildTrajectory(parse("gemini-cli", f.stdout, f.session, f.upstream.instruction), { agent: { name: "gemini-cli", version: geminiCli.vendor.packages[0]!.version, model_name: (f.upstream as { model?: string }).model } }) };
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

describe("gemini-cli CliSpec", () => {
  const input = sampleInput({
    provider: "gemini", api: "gemini", home: geminiCli.home, model: "gemini-2.5-flash", keyEnv: "GEMINI_API_KEY",
    program: ["/opt/evolve/agent/node/bin/node", "/opt/evolve/agent/lib/node_modules/@google/gemini-cli/bundle/gemini.js"],
  });

  it("speaks only the Gemini API, and refuses any other provider", () => {
    expect(geminiCli.apiFor("gemini")).toBe("gemini");
    expect(geminiCli.apiFor("openai")).toBeUndefined();
    expect(geminiCli.apiFor("anthropic")).toBeUndefined();
  });

  it("runs headless in stream-json with yolo, trust skipped and the model always named; the instruction on stdin", () => {
    const inv = geminiCli.invocation(input);
    const [node, ...entry] = input.program;
    expect(inv.argv).toEqual([node, "--max-old-space-size=4096", ...entry, "--output-format", "stream-json", "--approval-mode", "yolo", "--skip-trust", "-m", "gemini-2.5-flash"]);
    expect(inv.stdin).toBe(input.instruction);
  });

  it("starts once: no relaunch of Node just to raise the heap (the vendored Node gets the flag); an image's own gemini keeps its own", () => {
    expect(geminiCli.invocation(input).env.GEMINI_CLI_NO_RELAUNCH).toBe("true");
    const own = geminiCli.invocation({ ...input, agentRoot: undefined, program: ["gemini"] });
    expect(own.argv.slice(0, 2)).toEqual(["gemini", "--output-format"]);
  });

  it("points it at the gateway root, keeps its state in the home, and holds no key", () => {
    expect(geminiCli.keyEnv).toBe("GEMINI_API_KEY");
    const inv = geminiCli.invocation(input);
    expect(inv.env).toMatchObject({ GOOGLE_GEMINI_BASE_URL: "http://evolve-gateway:4000", GEMINI_CLI_HOME: "/logs/agent", GEMINI_CLI_TRUST_WORKSPACE: "true" });
    expect(inv.env).not.toHaveProperty("GEMINI_API_KEY");
    expect(inv.files.map((f) => f.path)).toEqual(["/logs/agent/.gemini/settings.json"]);
    expect(inv.files[0]!.content).not.toMatch(/key"\s*:/i);
  });

  it("pins the auth type (else exit 41 with a base URL) and switches usage statistics, telemetry, updates and the next-speaker call off", () => {
    const settings = JSON.parse(geminiCli.invocation(input).files[0]!.content);
    expect(settings).toMatchObject({
      security: { auth: { selectedType: "gemini-api-key" } },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
      model: { skipNextSpeakerCheck: true },
    });
    expect(settings).not.toHaveProperty("mcpServers");
  });

  it("maps --ak options and registers MCP servers in settings.json", () => {
    const inv = geminiCli.invocation({ ...input, options: { max_turns: "30", approval_mode: "auto_edit" }, mcpServers: [
      { name: "files", transport: "stdio", command: "mcp-files", args: ["--root", "/app"] },
      { name: "web", transport: "sse", url: "http://mcp:8000/sse" },
      { name: "api", transport: "streamable-http", url: "http://mcp:8001/mcp" },
    ] });
    expect(inv.argv).toContain("auto_edit");
    const settings = JSON.parse(inv.files[0]!.content);
    expect(settings.model.maxSessionTurns).toBe(30);
    expect(settings.mcpServers).toEqual({
      files: { command: "mcp-files", args: ["--root", "/app"] },
      web: { url: "http://mcp:8000/sse", type: "sse" },
      api: { httpUrl: "http://mcp:8001/mcp" },
    });
    expect(geminiCli.options.max_turns!.pattern!.test("0")).toBe(false);
    expect(geminiCli.options.approval_mode!.values).not.toContain("default");
  });

  it("is JavaScript run by a vendored Node", () => {
    expect(geminiCli.vendor).toMatchObject({ viaNode: true, nodeMin: "20.0.0", entry: "lib/node_modules/@google/gemini-cli/bundle/gemini.js" });
    expect(geminiCli.vendor.packages).toEqual([{ name: "@google/gemini-cli", version: "0.61.0" }]);
    expect([geminiCli.stdoutName, geminiCli.parser?.harness, geminiCli.home]).toEqual(["gemini-cli.txt", "gemini-cli", "/logs/agent/.gemini"]);
  });
});
