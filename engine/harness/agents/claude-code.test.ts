/**
 * claude-code: its recorded runs (fixtures/agents/claude-code, scripts/record/claude-code.ts) → its parser → the
 * parsed trace, per-call tokens equal to what the scripted upstream reported (from the session file, each
 * message.id once); and what its CliSpec hands the box.
 */
import { describe, expect, it } from "vitest";
import { claudeCode, projectDirName, seedSession } from "./claude-code.ts";
import { EvolveError } from "../../errors.ts";
import { buildTrajectory } from "../../trace/atif.ts";
import { validateTrajectory } from "../../trace/atif-validate.ts";
import { agentText, fixtureFiles, loadFixture, parse, sampleInput, sessionGlobMatches, updatesOf } from "../../../tests/support/agent-fixtures.ts";

const kinds = (events: { type: string }[]) => events.map((e) => e.type);
const calls = (events: Parameters<typeof updatesOf>[0]) => updatesOf(events, "usage").filter((u) => u.scope === "call");
const totals = (events: Parameters<typeof updatesOf>[0]) => updatesOf(events, "usage").filter((u) => u.scope === "total");

/** A reply's expected counts as UsageCounts leaves them out when zero. */
function counts(e: { promptTokens: number; completionTokens: number; cachedTokens: number; cacheWriteTokens: number }) {
  return { promptTokens: e.promptTokens, completionTokens: e.completionTokens, ...(e.cachedTokens ? { cachedTokens: e.cachedTokens } : {}), ...(e.cacheWriteTokens ? { cacheWriteTokens: e.cacheWriteTokens } : {}) };
}

describe("claude-code parser on recorded runs", () => {
  it("text: the prompt, the answer under its message id, one call with the upstream's tokens, and the totals", () => {
    const f = loadFixture("claude-code", "text");
    expect(f.session.map((s) => sessionGlobMatches("claude-code", s.path))).toEqual([true]);
    const events = parse("claude-code", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "agent_message_chunk", "usage", "usage"]);
    expect(events[0]!.data).toEqual({ _prompt: { text: "Say the answer." } });
    expect(agentText(events)).toBe("The answer is 42.");
    expect(updatesOf(events, "agent_message_chunk")[0].messageId).toBe("msg_fixture1");
    const expected = counts(f.upstream.replies[0]!.expected!);
    expect(calls(events)).toEqual([{ sessionUpdate: "usage", scope: "call", source: "harness", usage: expected, model: "claude-sonnet-4-6", messageId: "msg_fixture1" }]);
    expect(totals(events).map((u) => u.usage)).toEqual([expected]);
  });

  it("tool: text and Bash of one call share its message id; the result completes the call; each call counted once", () => {
    const f = loadFixture("claude-code", "tool");
    expect(f.upstream.workdir_files["out.txt"]).toBe("hello-from-tool\n");
    // the trap: two stdout lines (text, tool_use) of one message, each with the start-of-message usage (output 1)
    const first = f.stdout.split("\n").filter((l) => l.includes('"id":"msg_fixture1"'));
    expect(first).toHaveLength(2);
    expect(first.every((l) => l.includes('"output_tokens":1}'))).toBe(true);
    const events = parse("claude-code", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "agent_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk", "usage", "usage", "usage"]);
    const [call] = updatesOf(events, "tool_call");
    expect(call).toEqual({
      sessionUpdate: "tool_call", toolCallId: "call_rec_1", name: "Bash", title: "echo hello-from-tool > out.txt", kind: "execute", status: "pending",
      rawInput: { command: "echo hello-from-tool > out.txt", description: "Write out.txt" }, messageId: "msg_fixture1",
    });
    const [result] = updatesOf(events, "tool_call_update");
    expect(result).toMatchObject({ toolCallId: "call_rec_1", status: "completed", rawOutput: { stdout: "", interrupted: false } });
    expect(result.content[0].content.text).toBe("(Bash completed with no output)");
    expect(updatesOf(events, "agent_message_chunk").map((u) => [u.messageId, u.content.text])).toEqual([
      ["msg_fixture1", "I will write the file with the shell."],
      ["msg_fixture2", "Done: out.txt holds hello-from-tool."],
    ]);
    // the session file repeats msg_fixture1 (one line per block): counted once, with its final output count
    expect(f.session[0]!.text.split('"id":"msg_fixture1"').length - 1).toBe(2);
    expect(calls(events).map((u) => [u.messageId, u.usage])).toEqual(f.upstream.replies.map((r, i) => [`msg_fixture${i + 1}`, counts(r.expected!)]));
    const sum = f.upstream.replies.reduce((t, r) => ({ promptTokens: t.promptTokens + r.expected!.promptTokens, completionTokens: t.completionTokens + r.expected!.completionTokens }), { promptTokens: 0, completionTokens: 0 });
    expect(totals(events)[0].usage).toMatchObject(sum);
  });

  it("error: the upstream's 400 is an error event (not agent text), and the failed run a fatal one", () => {
    const f = loadFixture("claude-code", "error");
    expect(f.upstream.exit_code).toBe(1);
    const events = parse("claude-code", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "error", "usage", "error"]);
    const [api, run] = updatesOf(events, "error");
    expect(api).toMatchObject({ fatal: false, message: "API Error: 400 fixture invalid_request_error" });
    expect(run).toMatchObject({ fatal: true, message: "API Error: 400 fixture invalid_request_error" });
    expect(agentText(events)).toBe("");
    // the CLI's synthetic error message is no model call
    expect(calls(events)).toEqual([]);
  });

  it("no recorded line is lost, and the fixtures are small", () => {
    for (const name of ["text", "tool", "error"]) {
      const f = loadFixture("claude-code", name);
      expect(kinds(parse("claude-code", f.stdout, f.session, f.upstream.instruction))).not.toContain("trace_loss");
    }
    for (const { file, bytes } of fixtureFiles("claude-code")) expect(bytes, file).toBeLessThan(300_000);
  });
});

describe("claude-code parser without a session file or an instruction, and on what it cannot read", () => {
  it("stdout alone: no per-call usage (its lines carry start-of-message counts), the result's totals once", () => {
    const f = loadFixture("claude-code", "tool");
    const events = parse("claude-code", f.stdout);
    expect(kinds(events)).toEqual(["agent_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk", "usage"]);
    expect(updatesOf(events, "usage")[0]).toMatchObject({ scope: "total", usage: { promptTokens: 6500, completionTokens: 48, cachedTokens: 2300, cacheWriteTokens: 100 } });
  });

  it("takes the prompt from a stream's first user message, later user text as user chunks", () => {
    const lines = [
      { type: "user", message: { role: "user", content: "Fix the bug." } },
      { type: "assistant", message: { id: "m1", content: [{ type: "thinking", thinking: "Look first." }, { type: "text", text: "On it." }] } },
      { type: "user", message: { role: "user", content: [{ type: "text", text: "Also the docs." }] } },
    ].map((l) => JSON.stringify(l)).join("\n");
    const events = parse("claude-code", lines);
    expect(kinds(events)).toEqual(["prompt", "agent_thought_chunk", "agent_message_chunk", "user_message_chunk"]);
    expect(events[0]!.data).toEqual({ _prompt: { text: "Fix the bug." } });
    expect(updatesOf(events, "agent_thought_chunk")[0]).toMatchObject({ messageId: "m1", content: { text: "Look first." } });
  });

  it("coalesces consecutive unreadable lines into one trace_loss, flushed at the end too", () => {
    const f = loadFixture("claude-code", "text");
    const events = parse("claude-code", `garbage\n[1,2]\n${f.stdout}{"truncated`, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "trace_loss", "agent_message_chunk", "usage", "trace_loss", "usage"]);
    expect(updatesOf(events, "trace_loss").map((u) => [u.count, u.sample])).toEqual([[2, "garbage"], [1, '{"truncated']]);
  });

  it("a failed tool result is a failed update, TodoWrite is also a plan, Read/Grep get their kinds", () => {
    const lines = [
      { type: "assistant", message: { id: "m1", content: [
        { type: "tool_use", id: "t1", name: "TodoWrite", input: { todos: [{ content: "a", status: "completed" }, { content: "b", status: "in_progress" }] } },
        { type: "tool_use", id: "t2", name: "Read", input: { file_path: "/app/x.py" } },
        { type: "tool_use", id: "t3", name: "Grep", input: { pattern: "TODO" } },
      ] } },
      { type: "user", message: { role: "user", content: [{ type: "tool_result", tool_use_id: "t2", is_error: true, content: [{ type: "text", text: "no such file" }] }] } },
      { type: "result", subtype: "error_max_turns", is_error: false, usage: { input_tokens: 5, output_tokens: 2 } },
    ].map((l) => JSON.stringify(l)).join("\n");
    const events = parse("claude-code", lines);
    expect(kinds(events)).toEqual(["tool_call", "plan", "tool_call", "tool_call", "tool_call_update", "usage", "error"]);
    expect(updatesOf(events, "plan")[0].entries.map((e: { status: string }) => e.status)).toEqual(["completed", "in_progress"]);
    expect(updatesOf(events, "tool_call").map((u) => [u.name, u.kind, u.title])).toEqual([["TodoWrite", "other", "TodoWrite"], ["Read", "read", "/app/x.py"], ["Grep", "search", "TODO"]]);
    expect(updatesOf(events, "tool_call_update")[0]).toMatchObject({ toolCallId: "t2", status: "failed", content: [{ content: { text: "no such file" } }] });
    // a run cut short by its turn limit is a failed run even though is_error is false
    expect(updatesOf(events, "error")[0]).toMatchObject({ fatal: true, message: "claude-code ended with error_max_turns" });
  });
});

describe("claude-code CliSpec", () => {
  const input = sampleInput({ provider: "anthropic", api: "anthropic", home: claudeCode.home, model: "claude-sonnet-4-6", keyEnv: "ANTHROPIC_API_KEY" });

  it("speaks Anthropic's API only: another provider is refused", () => {
    expect(claudeCode.apiFor("anthropic")).toBe("anthropic");
    expect(claudeCode.apiFor("openai")).toBeUndefined();
    expect(claudeCode.apiFor("gemini")).toBeUndefined();
  });

  it("runs print mode with stream-json, permissions bypassed, the model, and the instruction on stdin", () => {
    const inv = claudeCode.invocation({ ...input, instruction: "-rf everything" });
    expect(inv.argv).toEqual(["/opt/evolve/agent/bin/cli", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "bypassPermissions", "--model", "claude-sonnet-4-6"]);
    // an instruction that looks like a flag never reaches argv
    expect(inv.stdin).toBe("-rf everything");
    expect(inv.files).toEqual([]);
  });

  it("points at the gateway with its state in the trial tree, root allowed, side calls off, and no key", () => {
    const inv = claudeCode.invocation(input);
    expect(inv.env).toMatchObject({
      ANTHROPIC_BASE_URL: "http://evolve-gateway:4000", CLAUDE_CONFIG_DIR: "/logs/agent/.claude", IS_SANDBOX: "1",
      DISABLE_TELEMETRY: "1", DISABLE_ERROR_REPORTING: "1", DISABLE_AUTOUPDATER: "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    });
    expect(claudeCode.keyEnv).toBe("ANTHROPIC_API_KEY");
    expect(Object.keys(inv.env).filter((k) => /API_KEY|AUTH_TOKEN/.test(k))).toEqual([]);
  });

  it("registers MCP servers in a --mcp-config file (strict), and maps max_turns and effort", () => {
    const inv = claudeCode.invocation({ ...input, options: { max_turns: "30", effort: "high" }, mcpServers: [
      { name: "files", transport: "stdio", command: "mcp-files", args: ["/app"] },
      { name: "web", transport: "streamable-http", url: "http://mcp:8000/mcp" },
      { name: "old", transport: "sse", url: "http://mcp:8001/sse" },
    ] });
    expect(inv.files).toHaveLength(1);
    expect(inv.files[0]!.path).toBe("/logs/agent/.claude/evolve-mcp.json");
    expect(JSON.parse(inv.files[0]!.content)).toEqual({ mcpServers: {
      files: { type: "stdio", command: "mcp-files", args: ["/app"] }, web: { type: "http", url: "http://mcp:8000/mcp" }, old: { type: "sse", url: "http://mcp:8001/sse" },
    } });
    expect(inv.argv.join(" ")).toContain("--max-turns 30 --effort high --mcp-config /logs/agent/.claude/evolve-mcp.json --strict-mcp-config");
    expect(claudeCode.options.max_turns!.pattern!.test("30")).toBe(true);
    expect(claudeCode.options.max_turns!.pattern!.test("0")).toBe(false);
    expect(claudeCode.options.max_turns!.pattern!.test("3 --x")).toBe(false);
    expect(claudeCode.options.effort!.values).toContain("max");
  });

  it("leaves its WebSearch tool out with --ak web_search=disabled", () => {
    expect(claudeCode.invocation({ ...input, options: { web_search: "disabled" } }).argv.join(" ")).toContain("--disallowedTools WebSearch");
    expect(claudeCode.invocation({ ...input, options: { web_search: "enabled" } }).argv).not.toContain("--disallowedTools");
    expect(claudeCode.invocation(input).argv).not.toContain("--disallowedTools");
  });

  it("vendors the platform binary of the npm package", () => {
    expect(claudeCode.vendor.packages).toEqual([{ name: "@anthropic-ai/claude-code", version: "2.1.197" }]);
    expect(claudeCode.vendor).toMatchObject({ viaNode: false, imageCommand: "claude", entry: "lib/node_modules/@anthropic-ai/claude-code/node_modules/@anthropic-ai/claude-code-linux-x64/claude" });
    expect([claudeCode.stdoutName, claudeCode.parser?.harness, claudeCode.home]).toEqual(["claude-code.txt", "claude-code", "/logs/agent/.claude"]);
  });

  it("seeds the session from an ATIF trajectory: a session file under projects/<cwd>, resumed by its id", () => {
    const trajectory = JSON.stringify({ schema_version: "ATIF-v1.7", agent: { name: "x", version: "1" }, steps: [
      { step_id: 1, source: "system", message: "You are terse." },
      { step_id: 2, source: "user", message: [{ type: "text", text: "The code word is PURPLE." }] },
      { step_id: 3, source: "agent", message: "Let me look.", tool_calls: [
        { tool_call_id: "c1", function_name: "Bash", arguments: { command: "ls" } },
        { tool_call_id: "c2", function_name: "Read", arguments: { file_path: "/app/a" } },
      ], observation: { results: [{ source_call_id: "c1", content: "a.txt" }] } },
      { step_id: 4, source: "agent", message: "Done." },
    ] });
    expect(claudeCode.seedsTrajectory).toBe(true);
    const inv = claudeCode.invocation({ ...input, seedTrajectory: trajectory });
    const { sessionId, text } = seedSession(trajectory, "/app", "claude-sonnet-4-6");
    expect(sessionId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(inv.argv.slice(-2)).toEqual(["--resume", sessionId]);
    expect(inv.files).toEqual([{ path: `/logs/agent/.claude/projects/-app/${sessionId}.jsonl`, content: text }]);
    const lines = text.trimEnd().split("\n").map((l) => JSON.parse(l));
    // the system step is Claude Code's own business; each line chains to the one before
    expect(lines.map((l) => [l.type, l.message.content.map?.((b: { type: string }) => b.type) ?? l.message.content])).toEqual([
      ["user", "The code word is PURPLE."],
      ["assistant", ["text", "tool_use", "tool_use"]],
      ["user", ["tool_result", "tool_result"]],
      ["assistant", ["text"]],
    ]);
    expect(lines.map((l) => l.parentUuid)).toEqual([null, lines[0].uuid, lines[1].uuid, lines[2].uuid]);
    expect(lines.every((l) => l.sessionId === sessionId && l.cwd === "/app")).toBe(true);
    // a call without an observation still gets its (empty) result: the API refuses an unanswered tool_use
    expect(lines[2].message.content).toEqual([
      { type: "tool_result", tool_use_id: "c1", content: "a.txt", is_error: false },
      { type: "tool_result", tool_use_id: "c2", content: "", is_error: false },
    ]);
    // the same trajectory seeds the same session
    expect(seedSession(trajectory, "/app", "m").sessionId).toBe(sessionId);
    expect(projectDirName("/tmp/evolve-rec.x_1/work")).toBe("-tmp-evolve-rec-x-1-work");
  });

  it("refuses a trajectory.json that is not JSON or not ATIF", () => {
    for (const bad of ["{not json", JSON.stringify({ agent: {} }), "[]"]) {
      let err: unknown;
      try {
        claudeCode.invocation({ ...input, seedTrajectory: bad });
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(EvolveError);
      expect((err as EvolveError).code).toBe("trajectory_seed_invalid");
    }
  });
});

describe("claude-code fixtures as ATIF", () => {
  it("each case builds a trajectory the validator accepts: the instruction first, one agent step per model call with the upstream's tokens", () => {
    for (const name of ["text", "tool", "error"]) {
      const f = loadFixture("claude-code", name);
      const t = buildTrajectory(parse("claude-code", f.stdout, f.session, f.upstream.instruction), { agent: { name: "claude-code", version: "test", model_name: "m" } });
      expect(validateTrajectory(t), name).toEqual([]);
      expect(t.steps[0], name).toMatchObject({ step_id: 1, source: "user", message: f.upstream.instruction });
      const agent = t.steps.filter((s) => s.source === "agent");
      const replied = f.upstream.replies.filter((r) => r.expected);
      expect(agent.map((s) => [s.metrics?.prompt_tokens, s.metrics?.completion_tokens, s.metrics?.cached_tokens ?? 0]), name).toEqual(
        replied.map((r) => [r.expected!.promptTokens, r.expected!.completionTokens, r.expected!.cachedTokens]),
      );
      expect(t.final_metrics?.total_prompt_tokens ?? 0, name).toBe(replied.reduce((n, r) => n + r.expected!.promptTokens, 0));
    }
  });

  it("the tool case: the shell call and its observation in the first agent step, the answer in the second", () => {
    const f = loadFixture("claude-code", "tool");
    const t = buildTrajectory(parse("claude-code", f.stdout, f.session, f.upstream.instruction), { agent: { name: "claude-code", version: "test" } });
    const [call, answer] = t.steps.filter((s) => s.source === "agent");
    expect(call!.tool_calls).toHaveLength(1);
    expect(call!.observation!.results[0]!.source_call_id).toBe(call!.tool_calls![0]!.tool_call_id);
    expect(answer!.message).toBe("Done: out.txt holds hello-from-tool.");
  });
});
