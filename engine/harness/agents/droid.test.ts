/**
 * droid: its recorded runs (fixtures/agents/droid, scripts/record/droid.ts) → its parser → the parsed trace, the
 * closing totals equal to what the scripted upstream reported over all calls; and what its CliSpec hands the box.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { droid } from "./droid.ts";
import type { UsageCounts } from "../../trace/events.ts";
import { agentText, fixtureFiles, loadFixture, parse, sampleInput, updatesOf } from "../../../tests/support/agent-fixtures.ts";

const kinds = (events: { type: string }[]) => events.map((e) => e.type);

/** The upstream's per-call counts summed: droid only states the run's totals. */
function summed(expected: (Required<UsageCounts> | null)[]): UsageCounts {
  const t = { promptTokens: 0, completionTokens: 0, cachedTokens: 0, cacheWriteTokens: 0 };
  for (const e of expected) {
    if (!e) continue;
    t.promptTokens += e.promptTokens;
    t.completionTokens += e.completionTokens;
    t.cachedTokens += e.cachedTokens;
    t.cacheWriteTokens += e.cacheWriteTokens;
  }
  return t;
}

describe("droid parser on recorded runs", () => {
  it("text: the prompt once (its echo skipped), the answer, and the run's totals", () => {
    const f = loadFixture("droid", "text");
    const events = parse("droid", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "agent_message_chunk", "usage"]);
    expect(agentText(events)).toBe("The answer is 42.");
    expect(updatesOf(events, "usage")[0]).toMatchObject({ scope: "total", source: "harness", usage: summed(f.upstream.replies.map((r) => r.expected)) });
  });

  it("tool: Execute as an execute call that completed with its output, then the answer; totals over both calls", () => {
    const f = loadFixture("droid", "tool");
    expect(f.upstream.workdir_files["out.txt"]).toBe("hello-from-tool\n");
    const events = parse("droid", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "tool_call", "tool_call_update", "agent_message_chunk", "usage"]);
    expect(updatesOf(events, "tool_call")[0]).toMatchObject({
      toolCallId: "call_rec_1", name: "Execute", kind: "execute", status: "in_progress", title: "echo hello-from-tool > out.txt",
      rawInput: { command: "echo hello-from-tool > out.txt" },
    });
    const [result] = updatesOf(events, "tool_call_update");
    expect(result).toMatchObject({ toolCallId: "call_rec_1", status: "completed" });
    expect(result.content[0].content.text).toContain("[Process exited with code 0]");
    expect(agentText(events)).toBe("Done: out.txt holds hello-from-tool.");
    const [usage] = updatesOf(events, "usage");
    // cache writes (Anthropic's wire tells them apart) are part of the prompt
    expect(usage.usage).toEqual(summed(f.upstream.replies.map((r) => r.expected)));
    expect(usage.usage.cacheWriteTokens).toBe(100);
  });

  it("error: the agent loop's 400 and the closing failure are fatal error events", () => {
    const f = loadFixture("droid", "error");
    expect(f.upstream.exit_code).toBe(1);
    const events = parse("droid", f.stdout, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "error", "error"]);
    const [loop, cli] = updatesOf(events, "error");
    expect(loop).toMatchObject({ fatal: true, _meta: { source: "agent_loop" } });
    expect(loop.message).toContain("400");
    expect(cli).toMatchObject({ message: "Exec failed", fatal: true });
  });

  it("mcp: a run with a task MCP server parses like any other (droid defers MCP tools behind ToolSearch, so the first call does not list them)", () => {
    const f = loadFixture("droid", "mcp");
    expect(f.upstream.exit_code).toBe(0);
    expect(f.upstream.tool_names).toEqual(expect.arrayContaining(["Execute", "ToolSearch"]));
    expect(kinds(parse("droid", f.stdout, f.session, f.upstream.instruction))).toEqual(["prompt", "agent_message_chunk", "usage"]);
  });

  it("no recorded line is lost, and the fixtures are small", () => {
    for (const name of ["text", "tool", "error", "mcp"]) {
      const f = loadFixture("droid", name);
      expect(kinds(parse("droid", f.stdout, f.session))).not.toContain("trace_loss");
    }
    for (const { file, bytes } of fixtureFiles("droid")) expect(bytes, file).toBeLessThan(300_000);
  });
});

describe("droid parser without an instruction, and on what it cannot read", () => {
  it("takes the prompt from the stream's first user message", () => {
    const f = loadFixture("droid", "text");
    const events = parse("droid", f.stdout);
    expect(kinds(events)).toEqual(["prompt", "agent_message_chunk", "usage"]);
    expect(events[0]!.data).toEqual({ _prompt: { text: "Say the answer." } });
  });

  it("coalesces consecutive unreadable lines into one trace_loss, flushed at the end too", () => {
    const f = loadFixture("droid", "text");
    const events = parse("droid", `garbage\n{"type":"new_kind"}\n${f.stdout}\n{"truncated`, f.session, f.upstream.instruction);
    expect(kinds(events)).toEqual(["prompt", "trace_loss", "agent_message_chunk", "usage", "trace_loss"]);
    expect(updatesOf(events, "trace_loss").map((u) => u.count)).toEqual([2, 1]);
  });

  it("a failed tool result is a failed update, and TodoWrite is also a plan", () => {
    const lines = [
      { type: "tool_call", id: "t1", toolName: "TodoWrite", parameters: { todos: [{ content: "a", status: "completed" }, { content: "b", status: "pending" }] } },
      { type: "tool_result", id: "t1", isError: true, value: "bad todo" },
      { type: "tool_call", id: "t2", toolName: "Grep", parameters: { pattern: "x" } },
    ].map((l) => JSON.stringify(l)).join("\n");
    const events = parse("droid", lines);
    expect(kinds(events)).toEqual(["tool_call", "plan", "tool_call_update", "tool_call"]);
    expect(updatesOf(events, "plan")[0].entries.map((e: { status: string }) => e.status)).toEqual(["completed", "pending"]);
    expect(updatesOf(events, "tool_call_update")[0]).toMatchObject({ status: "failed" });
    expect(updatesOf(events, "tool_call")[1]).toMatchObject({ kind: "search", title: "x" });
  });
});

describe("droid CliSpec", () => {
  const input = sampleInput({ provider: "anthropic", api: "anthropic", home: droid.home, model: "claude-sonnet-4-6" });

  it("speaks the model provider's own API, and refuses one it cannot speak", () => {
    expect(droid.apiFor("anthropic")).toBe("anthropic");
    expect(droid.apiFor("openai")).toBe("openai-responses");
    expect(droid.apiFor("gemini")).toBeUndefined();
  });

  it("runs exec headless with permissions skipped, the custom model, and the prompt", () => {
    const inv = droid.invocation(input);
    expect(inv.argv).toEqual(["/opt/evolve/agent/bin/cli", "exec", "--output-format", "stream-json", "--skip-permissions-unsafe", "-m", "custom:Evolve-Gateway-0", "--cwd", "/app", input.instruction]);
    expect(inv.stdin).toBeUndefined();
  });

  it("declares one BYOK model at the gateway with only a ${VAR} reference to the key, and air-gap mode on", () => {
    const inv = droid.invocation(input);
    const file = inv.files.find((f) => f.path === "/logs/agent/.factory/settings.json")!;
    const cfg = JSON.parse(file.content);
    expect(cfg.customModels).toEqual([{
      model: "claude-sonnet-4-6", displayName: "Evolve Gateway", baseUrl: "http://evolve-gateway:4000", apiKey: "${EVOLVE_GATEWAY_KEY}", provider: "anthropic", maxOutputTokens: 32000,
    }]);
    // its state lands at /logs/agent/.factory
    expect(inv.env).toMatchObject({ FACTORY_HOME_OVERRIDE: "/logs/agent", FACTORY_AIRGAP_ENABLED: "true", FACTORY_DROID_AUTO_UPDATE_ENABLED: "false" });
    // the runner sets the key variable; the invocation names no key of any kind
    expect(Object.keys(inv.env).filter((k) => k === input.keyEnv || /API_KEY|AUTH_TOKEN/.test(k))).toEqual([]);
  });

  it("uses each wire API's BYOK provider and base URL", () => {
    const responses = JSON.parse(droid.invocation({ ...input, provider: "openai", api: "openai-responses" }).files[0]!.content).customModels[0];
    expect(responses).toMatchObject({ provider: "openai", baseUrl: "http://evolve-gateway:4000/v1" });
    const chat = JSON.parse(droid.invocation({ ...input, provider: "openai", api: "openai-chat" }).files[0]!.content).customModels[0];
    expect(chat).toMatchObject({ provider: "generic-chat-completion-api", baseUrl: "http://evolve-gateway:4000/v1" });
  });

  it("registers MCP servers in its mcp.json, and maps reasoning effort to -r", () => {
    const inv = droid.invocation({ ...input, options: { reasoning_effort: "high" }, mcpServers: [
      { name: "files", transport: "stdio", command: "mcp-files", args: ["/app"] },
      { name: "web", transport: "http", url: "http://mcp:8000/mcp" },
    ] });
    const mcp = JSON.parse(inv.files.find((f) => f.path.endsWith("/mcp.json"))!.content);
    expect(mcp).toEqual({ mcpServers: { files: { type: "stdio", command: "mcp-files", args: ["/app"] }, web: { type: "http", url: "http://mcp:8000/mcp" } } });
    expect(inv.argv.join(" ")).toContain("-r high");
    expect(droid.options.reasoning_effort!.values).toContain("high");
    expect(droid.invocation(input).files.map((f) => f.path)).toEqual(["/logs/agent/.factory/settings.json", "/logs/agent/.factory/bin/ps"]);
  });

  it("pins the shim and its platform binary at their differing versions", () => {
    expect(droid.vendor.packages).toEqual([{ name: "@factory/cli", version: "0.225.1" }, { name: "@factory/cli-linux-x64", version: "0.225.2" }]);
    expect(droid.vendor).toMatchObject({ viaNode: false, omitOptional: true, entry: "lib/node_modules/@factory/cli-linux-x64/bin/droid" });
    expect([droid.stdoutName, droid.parser?.harness]).toEqual(["droid.txt", "droid"]);
  });
});

describe("droid's ps stand-in (its Execute supervisor SIGKILLs the command when `ps -o ppid= -p PID` fails)", () => {
  const shim = droid.invocation(sampleInput({ provider: "anthropic", api: "anthropic", home: droid.home, model: "m" })).files.find((f) => f.path.endsWith("/bin/ps"))!;
  const dir = mkdtempSync(join(tmpdir(), "droid-ps-"));
  mkdirSync(join(dir, "bin"));
  mkdirSync(join(dir, "real"));
  writeFileSync(join(dir, "bin", "ps"), shim.content, { mode: 0o755 });
  writeFileSync(join(dir, "real", "ps"), '#!/bin/sh\necho "real ps: $*"\n', { mode: 0o755 });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const ps = (path: string, ...args: string[]) => spawnSync(join(dir, "bin", "ps"), args, { encoding: "utf8", env: { PATH: path } });

  it("is written executable into the folder droid puts first on its commands' PATH", () => {
    expect(shim).toMatchObject({ path: "/logs/agent/.factory/bin/ps", executable: true });
  });

  it("answers the supervisor's question from /proc, as procps would", () => {
    const r = ps(join(dir, "bin"), "-o", "ppid=", "-p", String(process.pid));
    expect([r.status, r.stdout.trim()]).toEqual([0, String(process.ppid)]);
    // a process that is gone: a failure, which tells the supervisor its owner is dead
    expect(ps(join(dir, "bin"), "-o", "ppid=", "-p", "999999999").status).toBe(1);
    expect(ps(join(dir, "bin"), "-o", "ppid=", "-p", "1; true").status).toBe(1);
  });

  it("hands any other use to a real ps further down PATH, else fails as a missing ps would", () => {
    expect(ps(`${join(dir, "bin")}:${join(dir, "real")}`, "aux").stdout).toBe("real ps: aux\n");
    const none = ps(join(dir, "bin"), "aux");
    expect([none.status, none.stderr]).toEqual([127, "ps: not found\n"]);
  });
});
