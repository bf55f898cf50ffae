/**
 * codex: its recorded runs (fixtures/agents/codex, scripts/record/codex.ts) → its parser → the parsed trace, per-call
 * tokens from the session rollout equal to what the scripted upstream reported, the cumulative `turn.completed` as
 * the total, the "model metadata not found" item as a non-fatal error; and what its CliSpec hands the box.
 */
import { describe, expect, it } from "vitest";
import { codex, seedRollout } from "./codex.ts";
import { EvolveError } from "../../errors.ts";
import { buildTrajectory } from "../../trace/atif.ts";
import { validateTrajectory } from "../../trace/atif-validate.ts";
import { agentText, fixtureFiles, loadFixture, parse, sampleInput, sessionGlobMatches, updatesOf } from "../../../tests/support/agent-fixtures.ts";

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
  it("text: the prompt, the metadata notice as a warning (not an error), the answer, one call with the upstream's tokens, the total", () => {
    const f = loadFixture("codex", "text");
    expect(f.upstream.exit_code).toBe(0);
    expect(f.session.map((s) => sessionGlobMatches("codex", s.path))).toEqual([true]);
    const events = parse("codex", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "warning", "agent_message_chunk", "usage", "usage"]);
    const [warn] = updatesOf(events, "warning");
    expect(warn).toEqual({ sessionUpdate: "warning", message: expect.stringMatching(METADATA) });
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
    const thread = JSON.parse(f.stdout.split("\n")[0]!).thread_id;
    expect(kinds(events)).toEqual(["prompt", "warning", "tool_call", "tool_call_update", "agent_message_chunk", "usage", "usage", "usage"]);
    expect(updatesOf(events, "tool_call")[0]).toEqual({
      sessionUpdate: "tool_call", toolCallId: "item_1", name: "exec_command", title: "/bin/bash -lc 'echo hello-from-tool > out.txt'", kind: "execute", status: "in_progress",
      rawInput: { command: "/bin/bash -lc 'echo hello-from-tool > out.txt'" }, messageId: `${thread}#1`,
    });
    expect(updatesOf(events, "tool_call_update")[0]).toMatchObject({ toolCallId: "item_1", status: "completed", rawOutput: { exit_code: 0 }, content: [{ content: { text: "" } }] });
    expect(agentText(events)).toBe("Done: out.txt holds hello-from-tool.");
    // the calls numbered from stdout (output after a tool result begins the next) meet the rollout's responses
    expect(updatesOf(events, "agent_message_chunk")[0].messageId).toBe(`${thread}#2`);
    expect(calls(events).map((u) => [u.messageId, u.usage])).toEqual(f.upstream.replies.map((r, i) => [`${thread}#${i + 1}`, counts(r.expected!)]));
    // stdout's one turn.completed is the thread's running total over both calls
    expect(f.stdout.match(/"turn\.completed"/g)).toHaveLength(1);
    expect(totals(events).map((u) => u.usage)).toEqual([{ promptTokens: 6500, completionTokens: 48, cachedTokens: 2300 }]);
  });

  it("error: the upstream's 400 is the one error (fatal; turn.failed repeats it), the metadata item a warning", () => {
    const f = loadFixture("codex", "error");
    expect(f.upstream.exit_code).toBe(1);
    const events = parse("codex", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "warning", "error"]);
    expect(updatesOf(events, "warning")[0].message).toMatch(METADATA);
    const [fail] = updatesOf(events, "error");
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

  it("leaves a rollout usage without messageId when its count of calls differs from stdout's", () => {
    const row = (payload: unknown) => JSON.stringify({ type: "token_usage_record", payload });
    const stdout = [
      { type: "thread.started", thread_id: "t9" },
      { type: "turn.started" },
      { type: "item.completed", item: { id: "item_0", type: "agent_message", text: "hi" } },
    ].map((l) => JSON.stringify(l)).join("\n");
    const session = [{ path: "sessions/2026/01/01/rollout-x-t9.jsonl", text: [row({ response_id: "r1", usage: { input_tokens: 5, output_tokens: 1 } }), row({ response_id: "r2", usage: { input_tokens: 6, output_tokens: 1 } })].join("\n") }];
    const events = parse("codex", stdout, session);
    expect(updatesOf(events, "agent_message_chunk")[0].messageId).toBe("t9#1");
    expect(calls(events).map((u) => u.messageId)).toEqual([undefined, undefined]);
    expect(calls(events).map((u) => u._meta.responseId)).toEqual(["r1", "r2"]);
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
    // stdout held no model output: zero calls numbered against one usage, so no messageId is guessed
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
    expect(kinds(events)).toEqual(["prompt", "trace_loss", "warning", "agent_message_chunk", "trace_loss", "usage", "usage"]);
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
    expect(cfg).toContain("[features]\nplugins = false");
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
    // TOML forbids a raw DEL in a basic string, which JSON would leave as it is
    expect(configOf(codex.invocation({ ...input, mcpServers: [{ name: "d", transport: "stdio", command: "a\x7fb\n" }] }))).toContain('command = "a\\u007Fb\\n"');
    expect(codex.options.reasoning_effort!.values).toEqual(["minimal", "low", "medium", "high", "xhigh"]);
  });

  it("sets its hosted web search only when asked (--ak web_search), a value codex 0.171 accepts", () => {
    expect(configOf(codex.invocation({ ...input, options: { web_search: "disabled" } }))).toMatch(/^web_search = "disabled"$/m);
    expect(configOf(codex.invocation(input))).not.toContain("web_search");
    // its config refuses any other value: `unknown variant …, expected one of disabled, cached, indexed, live`
    expect(codex.options.web_search!.values).toEqual(["disabled", "cached", "live"]);
  });

  it("vendors the native binary of the npm package's platform dependency", () => {
    expect(codex.vendor.packages).toEqual([{ name: "@openai/codex", version: "0.171.0" }]);
    expect(codex.vendor).toMatchObject({ viaNode: false, imageCommand: "codex", entry: "lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex" });
    expect([codex.stdoutName, codex.parser?.harness, codex.home]).toEqual(["codex.txt", "codex", "/logs/agent/.codex"]);
  });

  it("seeds the session from an ATIF trajectory: a rollout under sessions/, resumed by its thread id", () => {
    const trajectory = JSON.stringify({ schema_version: "ATIF-v1.7", agent: { name: "x", version: "1" }, steps: [
      { step_id: 1, source: "system", message: "Be terse." },
      { step_id: 2, source: "user", message: "The code word is PURPLE." },
      { step_id: 3, source: "agent", message: "Let me look.", tool_calls: [
        { tool_call_id: "c1", function_name: "exec_command", arguments: { cmd: "ls" } },
        { tool_call_id: "c2", function_name: "exec_command", arguments: { cmd: "pwd" } },
      ], observation: { results: [{ source_call_id: "c1", content: [{ type: "text", text: "a.txt" }] }] } },
      { step_id: 4, source: "agent", message: "Done." },
    ] });
    expect(codex.seedsTrajectory).toBe(true);
    const inv = codex.invocation({ ...input, seedTrajectory: trajectory });
    const seed = seedRollout(trajectory, "/app");
    expect(inv.argv.slice(-3)).toEqual(["resume", seed.threadId, "-"]);
    expect(inv.stdin).toBe(input.instruction);
    expect(inv.files[1]).toEqual({ path: `/logs/agent/.codex/sessions/2000/01/01/rollout-2000-01-01T00-00-00-${seed.threadId}.jsonl`, content: seed.text });
    // the parser reads the rollout codex appends the resumed turn to
    expect(sessionGlobMatches("codex", seed.path)).toBe(true);
    const lines = seed.text.trimEnd().split("\n").map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ type: "session_meta", payload: { id: seed.threadId, cwd: "/app", originator: "codex_exec", model_provider: "evolve" } });
    expect(lines.slice(1).map((l) => [l.type, l.payload.type, l.payload.role ?? l.payload.call_id])).toEqual([
      ["response_item", "message", "user"],
      ["response_item", "message", "assistant"],
      ["response_item", "function_call", "c1"],
      ["response_item", "function_call_output", "c1"],
      ["response_item", "function_call", "c2"],
      ["response_item", "function_call_output", "c2"],
      ["response_item", "message", "assistant"],
    ]);
    expect(lines[3].payload).toMatchObject({ name: "exec_command", arguments: '{"cmd":"ls"}' });
    expect([lines[4].payload.output, lines[6].payload.output]).toEqual(["a.txt", ""]);
    expect(seedRollout(trajectory, "/app").threadId).toBe(seed.threadId);
  });

  it("refuses a trajectory.json that is not JSON or not ATIF", () => {
    for (const bad of ["nope", JSON.stringify({ steps: "x" })]) {
      let err: unknown;
      try {
        codex.invocation({ ...input, seedTrajectory: bad });
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(EvolveError);
      expect((err as EvolveError).code).toBe("trajectory_seed_invalid");
    }
  });
});

describe("codex fixtures as ATIF", () => {
  it("each case builds a trajectory the validator accepts: the instruction first, one agent step per model call with the upstream's tokens", () => {
    for (const name of ["text", "tool", "error"]) {
      const f = loadFixture("codex", name);
      const t = buildTrajectory(parse("codex", f.stdout, f.session, f.upstream.instruction), { agent: { name: "codex", version: "test", model_name: "m" } });
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
    const f = loadFixture("codex", "tool");
    const t = buildTrajectory(parse("codex", f.stdout, f.session, f.upstream.instruction), { agent: { name: "codex", version: "test" } });
    const [call, answer] = t.steps.filter((s) => s.source === "agent");
    expect(call!.tool_calls).toHaveLength(1);
    expect(call!.observation!.results[0]!.source_call_id).toBe(call!.tool_calls![0]!.tool_call_id);
    expect(answer!.message).toBe("Done: out.txt holds hello-from-tool.");
    // the metadata notice keeps its text as a system step marked a warning, not an error
    expect(t.steps.filter((s) => s.source === "system")).toEqual([{ step_id: 2, source: "system", message: expect.stringMatching(METADATA), extra: { kind: "warning" } }]);
  });
});
