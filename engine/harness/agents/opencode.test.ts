/**
 * opencode: its recorded runs (fixtures/agents/opencode, scripts/record/opencode.ts) → its parser → the parsed
 * trace, tokens equal to what the scripted upstream reported; and what its CliSpec hands the box.
 */
import { describe, expect, it } from "vitest";
import { opencode } from "./opencode.ts";
import { agentText, fixtureFiles, loadFixture, parse, sampleInput, updatesOf } from "../../../tests/support/agent-fixtures.ts";

const kinds = (events: { type: string }[]) => events.map((e) => e.type);

describe("opencode parser on recorded runs", () => {
  it("text: the prompt, the answer, one usage per model call equal to the upstream's", () => {
    const f = loadFixture("opencode", "text");
    const events = parse("opencode", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "agent_message_chunk", "usage"]);
    expect(events[0]!.data).toEqual({ _prompt: { text: "Say the answer." } });
    expect(agentText(events)).toBe(f.upstream.replies[0]!.text);
    const [usage] = updatesOf(events, "usage");
    // opencode leaves reasoning out of `output` and cache reads out of `input`: both are added back
    expect(usage).toMatchObject({ scope: "call", source: "harness", usage: f.upstream.replies[0]!.expected });
    expect(usage.usage.reasoningTokens).toBe(4);
    // one step per model call: the chunk and the usage name the same message
    expect(usage.messageId).toMatch(/^msg_/);
    expect(updatesOf(events, "agent_message_chunk")[0].messageId).toBe(usage.messageId);
  });

  it("tool: bash as an execute call that completed with its output, then the answer, two calls metered", () => {
    const f = loadFixture("opencode", "tool");
    expect(f.upstream.workdir_files["out.txt"]).toBe("hello-from-tool\n");
    const events = parse("opencode", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "tool_call", "tool_call_update", "usage", "agent_message_chunk", "usage"]);
    const [call] = updatesOf(events, "tool_call");
    expect(call).toMatchObject({ toolCallId: "call_rec_1", name: "bash", kind: "execute", status: "in_progress", rawInput: { command: "echo hello-from-tool > out.txt" } });
    const [result] = updatesOf(events, "tool_call_update");
    expect(result).toMatchObject({ toolCallId: "call_rec_1", status: "completed" });
    expect(result.content[0].content.text).toBe("(no output)");
    expect(agentText(events)).toBe("Done: out.txt holds hello-from-tool.");
    const usages = updatesOf(events, "usage");
    expect(usages.map((u) => u.usage)).toEqual(f.upstream.replies.map((r) => r.expected));
    // the tool call belongs to the first model call, the answer to the second
    expect(call.messageId).toBe(usages[0].messageId);
    expect(usages[0].messageId).not.toBe(usages[1].messageId);
  });

  it("error: the upstream's 400 is a fatal error event", () => {
    const f = loadFixture("opencode", "error");
    expect(f.upstream.exit_code).toBe(1);
    const events = parse("opencode", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "error"]);
    expect(updatesOf(events, "error")[0]).toMatchObject({ message: "fixture error 400", fatal: true, _meta: { statusCode: 400, name: "APIError" } });
  });

  it("mcp: the task MCP server registered in its native config shows among the tools it advertised", () => {
    const f = loadFixture("opencode", "mcp");
    expect(f.upstream.exit_code).toBe(0);
    expect(f.upstream.tool_names).toContain("probe_probe_echo");
    expect(loadFixture("opencode", "text").upstream.tool_names).not.toContain("probe_probe_echo");
    // its own shell tool, under the name the parser reports
    expect(f.upstream.tool_names).toContain("bash");
  });

  it("no recorded line is lost, the fixtures are small, and no run reached for the npm registry", () => {
    for (const name of ["text", "tool", "error", "mcp"]) {
      const f = loadFixture("opencode", name);
      expect(kinds(parse("opencode", f.stdout, f.session))).not.toContain("trace_loss");
      expect(f.upstream.npm_cache_used, name).toBe(false);
    }
    for (const { file, bytes } of fixtureFiles("opencode")) expect(bytes, file).toBeLessThan(300_000);
  });
});

describe("opencode parser on what it cannot read", () => {
  it("coalesces consecutive unreadable lines into one trace_loss with their count, before the next event", () => {
    const f = loadFixture("opencode", "text");
    const [first, ...rest] = f.stdout.trim().split("\n");
    const stdout = [first, "not json", '{"type":"mystery"}', ...rest, "[1,2]"].join("\n");
    const events = parse("opencode", stdout);
    expect(kinds(events)).toEqual(["trace_loss", "agent_message_chunk", "usage", "trace_loss"]);
    expect(updatesOf(events, "trace_loss")[0]).toMatchObject({ count: 2, reason: "not a JSON object", sample: "not json" });
    expect(updatesOf(events, "trace_loss")[1]).toMatchObject({ count: 1 });
  });

  it("without an instruction emits no prompt (opencode does not echo it)", () => {
    const f = loadFixture("opencode", "text");
    expect(kinds(parse("opencode", f.stdout))).toEqual(["agent_message_chunk", "usage"]);
  });

  it("a failed tool is a failed update with the error text, and todowrite is also a plan", () => {
    const lines = [
      { type: "tool_use", part: { tool: "bash", callID: "c1", messageID: "m1", state: { status: "error", input: { command: "false" }, error: "exit 1" } } },
      { type: "tool_use", part: { tool: "todowrite", callID: "c2", messageID: "m1", state: { status: "completed", input: { todos: [{ content: "write it", status: "in_progress", priority: "high" }] }, output: "ok" } } },
      { type: "reasoning", part: { messageID: "m1", text: "thinking hard" } },
    ].map((l) => JSON.stringify(l)).join("\n");
    const events = parse("opencode", lines);
    expect(kinds(events)).toEqual(["tool_call", "tool_call_update", "tool_call", "plan", "tool_call_update", "agent_thought_chunk"]);
    expect(updatesOf(events, "tool_call_update")[0]).toMatchObject({ toolCallId: "c1", status: "failed", content: [{ content: { text: "exit 1" } }] });
    expect(updatesOf(events, "plan")[0].entries).toEqual([{ content: "write it", status: "in_progress", priority: "high" }]);
    expect(updatesOf(events, "tool_call")[1].kind).toBe("other");
  });
});

describe("opencode CliSpec", () => {
  const input = sampleInput({ provider: "openai", api: "openai-responses", home: opencode.home, model: "gpt-5" });

  it("speaks the model provider's own API, and refuses one it cannot speak", () => {
    expect(opencode.apiFor("anthropic")).toBe("anthropic");
    expect(opencode.apiFor("openai")).toBe("openai-responses");
    expect(opencode.apiFor("gemini")).toBeUndefined();
  });

  it("runs headless with the prompt on stdin, its own title (no title call) and the gateway's model", () => {
    const inv = opencode.invocation(input);
    expect(inv.argv.slice(0, 5)).toEqual(["/opt/evolve/agent/bin/cli", "run", "--format", "json", "--thinking"]);
    expect(inv.argv).toContain("--title");
    expect(inv.argv.join(" ")).toContain("-m evolve/gpt-5");
    // a prompt with spaces as one positional reaches the model in quotes: it goes on stdin instead
    expect(inv.argv).not.toContain(input.instruction);
    expect(inv.stdin).toBe(input.instruction);
  });

  it("points a provider at the gateway with only a reference to the key, and switches side calls off", () => {
    const inv = opencode.invocation(input);
    const file = inv.files[0]!;
    expect(file.path).toBe("/logs/agent/.opencode/opencode.json");
    const cfg = JSON.parse(file.content);
    expect(cfg.provider.evolve).toEqual({
      npm: "@ai-sdk/openai",
      name: "evolve gateway",
      options: { baseURL: "http://evolve-gateway:4000/v1", apiKey: "{env:EVOLVE_GATEWAY_KEY}" },
      models: { "gpt-5": {} },
    });
    expect(cfg.small_model).toBe("evolve/gpt-5");
    expect(inv.env).toMatchObject({
      OPENCODE_CONFIG: file.path,
      OPENCODE_DISABLE_MODELS_FETCH: "1",
      OPENCODE_DISABLE_AUTOUPDATE: "1",
      OPENCODE_DISABLE_SHARE: "1",
      OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
      XDG_DATA_HOME: "/logs/agent/.opencode/.local/share",
    });
    // the runner sets the key variable; the invocation names no key of any kind
    expect(Object.keys(inv.env).filter((k) => k === input.keyEnv || /API_KEY|AUTH_TOKEN/.test(k))).toEqual([]);
    expect(opencode.keyEnv).toBeUndefined();
  });

  it("tells its config dir the plugin package is installed, so it runs no npm install", () => {
    const files = Object.fromEntries(opencode.invocation(input).files.map((f) => [f.path, JSON.parse(f.content)]));
    const dir = "/logs/agent/.opencode/.config/opencode";
    expect(files[`${dir}/package.json`]).toEqual({ dependencies: { "@opencode-ai/plugin": "1.18.33" } });
    expect(files[`${dir}/package-lock.json`].packages["node_modules/@opencode-ai/plugin"]).toEqual({ version: "1.18.33" });
    expect(files[`${dir}/node_modules/.package-lock.json`].packages).toEqual({ "node_modules/@opencode-ai/plugin": { version: "1.18.33" } });
  });

  it("uses the bundled SDK of each wire API and registers MCP servers in its native config", () => {
    const inv = opencode.invocation({ ...input, provider: "anthropic", api: "anthropic", mcpServers: [
      { name: "files", transport: "stdio", command: "mcp-files", args: ["--root", "/app"] },
      { name: "web", transport: "streamable-http", url: "http://mcp:8000/mcp" },
    ] });
    const cfg = JSON.parse(inv.files[0]!.content);
    expect(cfg.provider.evolve.npm).toBe("@ai-sdk/anthropic");
    expect(cfg.mcp).toEqual({
      files: { type: "local", command: ["mcp-files", "--root", "/app"], enabled: true },
      web: { type: "remote", url: "http://mcp:8000/mcp", enabled: true },
    });
  });

  it("maps --ak options to its flags", () => {
    const inv = opencode.invocation({ ...input, options: { variant: "high", agent: "plan" } });
    expect(inv.argv.join(" ")).toContain("--variant high --agent plan");
    expect(opencode.options.variant!.pattern!.test("high")).toBe(true);
    expect(opencode.options.variant!.pattern!.test("high; rm -rf /")).toBe(false);
  });

  it("declares its vendored binary, stdout name and parser", () => {
    expect(opencode.vendor).toMatchObject({ viaNode: false, omitOptional: true, entry: "lib/node_modules/opencode-linux-x64/bin/opencode" });
    expect(opencode.vendor.packages[0]).toEqual({ name: "opencode-ai", version: "1.18.33" });
    expect(opencode.stdoutName).toBe("opencode.txt");
    expect(opencode.parser?.harness).toBe("opencode");
  });
});
