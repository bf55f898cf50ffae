/**
 * Seeding a session from trajectory.json, `--ak` options and MCP servers with the real CLIs (the repo's
 * devDependency copies): the argv, env and files each CliSpec builds, run through the gateway against the scripted
 * upstream, put the trajectory's turns (its tool call and the call's output included) before the instruction in
 * what reaches the model, and the options in the request. Skipped where the CLIs are not installed.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ScriptedUpstream } from "../fixtures/upstream/server.ts";
import { Budgets } from "../gateway/budget.ts";
import { Credentials } from "../gateway/credentials.ts";
import { CallMeter } from "../gateway/meter.ts";
import { Prices } from "../gateway/prices.ts";
import { serveGateway, type GatewayListener } from "../gateway/serve.ts";
import { serveFetch } from "../engine/runtime.ts";
import { buildUpstreams } from "../gateway/upstreams.ts";
import type { CliSpec, McpServer } from "../engine/harness/cli-types.ts";
import { claudeCode } from "../engine/harness/agents/claude-code.ts";
import { codex } from "../engine/harness/agents/codex.ts";

const root = resolve(__dirname, "..");
const CLAUDE = join(root, "node_modules/.bin/claude");
const CODEX = join(root, "node_modules/.bin/codex");

const upstream = new ScriptedUpstream();
const credentials = new Credentials();
let gw: GatewayListener;
let scratch: string;

beforeAll(async () => {
  // under /var/tmp: codex warns about (and skips) its PATH aliases in a CODEX_HOME under /tmp
  scratch = mkdtempSync(join(existsSync("/var/tmp") ? "/var/tmp" : tmpdir(), "evolve-seed-"));
  await upstream.start();
  const meter = new CallMeter();
  const prices = new Prices();
  gw = await serveGateway({
    upstreams: buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-real-a" }, openai: { base_url: `${upstream.url}/v1`, api_key: "sk-real-o" } } }, {}),
    authenticate: credentials.authenticate,
    meter: (c) => meter.meter(c),
    budget: new Budgets(),
    prices: (m) => prices.priceOf(m) ?? undefined,
  }, { port: 0 }, serveFetch);
});

afterAll(async () => {
  await gw?.close();
  await upstream.close();
  rmSync(scratch, { recursive: true, force: true });
});

beforeEach(() => upstream.reset());

const TRAJECTORY = JSON.stringify({
  schema_version: "ATIF-v1.7",
  agent: { name: "someone", version: "1" },
  steps: [
    { step_id: 1, source: "user", message: "The code word is PURPLE." },
    { step_id: 2, source: "agent", message: "Noted, let me look.", tool_calls: [{ tool_call_id: "call_seed1", function_name: "SHELL", arguments: { command: "ls" } }], observation: { results: [{ source_call_id: "call_seed1", content: "a.txt" }] } },
    { step_id: 3, source: "agent", message: "I see a.txt." },
  ],
});

/** Runs `spec` seeded with TRAJECTORY, as the runner would; returns the exit code and the one model request. */
async function runSeeded(spec: CliSpec, program: string, provider: string, api: "anthropic" | "openai-responses", model: string, extra: { options?: Record<string, string>; mcpServers?: McpServer[] } = {}): Promise<{ code: number | null; out: string; body: any }> {
  const dir = mkdtempSync(join(scratch, `${spec.name}-`));
  const home = join(dir, "home");
  const work = join(dir, "work");
  mkdirSync(home);
  mkdirSync(work);
  const keyEnv = spec.keyEnv ?? "EVOLVE_GATEWAY_KEY";
  const { key } = credentials.issueAgent({ trialId: `seed-${spec.name}` });
  const inv = spec.invocation({
    instruction: "What is the code word?", model, provider, api, gatewayUrl: gw.url, keyEnv, home, workdir: work,
    program: [program], options: extra.options ?? {}, mcpServers: extra.mcpServers ?? [], seedTrajectory: TRAJECTORY,
  });
  for (const f of inv.files) {
    expect(f.content).not.toContain(key);
    mkdirSync(dirname(f.path), { recursive: true });
    writeFileSync(f.path, f.content);
  }
  upstream.push({ text: "PURPLE" });
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, LANG: "C.UTF-8", ...inv.env, [keyEnv]: key };
  const r = await new Promise<{ code: number | null; out: string }>((done, fail) => {
    const child = spawn(inv.argv[0]!, inv.argv.slice(1), { cwd: work, env, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (b) => (out += b));
    child.stderr.on("data", (b) => (out += b));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.once("error", fail);
    child.once("close", (code) => {
      clearTimeout(timer);
      done({ code, out });
    });
    child.stdin.end(inv.stdin);
  });
  const posts = upstream.requests.filter((q) => q.method === "POST" && (q.path === "/messages" || q.path === "/responses"));
  expect(posts, r.out).toHaveLength(1);
  return { ...r, body: posts[0]!.body };
}

/** The texts of a request's conversation, in order, with tool calls and results as `call:`/`result:` markers. */
function conversation(parts: { text?: string; call?: string; result?: string }[]): string[] {
  return parts.map((p) => p.text ?? (p.call !== undefined ? `call:${p.call}` : `result:${p.result}`));
}

describe.skipIf(!existsSync(CLAUDE))("claude-code seeded from trajectory.json", () => {
  it("sends the seeded turns, tool call and its result before the instruction", async () => {
    const r = await runSeeded(claudeCode, CLAUDE, "anthropic", "anthropic", "claude-sonnet-4-6");
    expect(r.code, r.out).toBe(0);
    const parts = (r.body.messages as any[]).flatMap((m) => (typeof m.content === "string" ? [{ text: m.content }] : m.content.map((b: any) =>
      b.type === "text" ? { text: b.text } : b.type === "tool_use" ? { call: `${b.name} ${JSON.stringify(b.input)}` } : { result: typeof b.content === "string" ? b.content : JSON.stringify(b.content) })));
    const seen = conversation(parts).filter((t) => !t.startsWith("<system-reminder>"));
    expect(seen).toEqual(["The code word is PURPLE.", "Noted, let me look.", 'call:SHELL {"command":"ls"}', "result:a.txt", "I see a.txt.", "What is the code word?"]);
  }, 90_000);

  it("takes --ak effort and max_turns, and registers the task's MCP servers", async () => {
    const r = await runSeeded(claudeCode, CLAUDE, "anthropic", "anthropic", "claude-sonnet-4-6", {
      options: { effort: "high", max_turns: "3" },
      mcpServers: [{ name: "files", transport: "stdio", command: "/bin/true", args: [] }, { name: "web", transport: "http", url: "http://127.0.0.1:9/mcp" }],
    });
    expect(r.code, r.out).toBe(0);
    expect(r.body.output_config).toMatchObject({ effort: "high" });
    const init = r.out.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)).find((l) => l.subtype === "init");
    // neither server answers here; that they were tried is what shows the config was read
    expect(init.mcp_servers.map((m: { name: string }) => m.name).sort()).toEqual(["files", "web"]);
  }, 90_000);
});

describe.skipIf(!existsSync(CODEX))("codex seeded from trajectory.json", () => {
  it("resumes the seeded thread: its messages, function call and output come before the instruction", async () => {
    const r = await runSeeded(codex, CODEX, "openai", "openai-responses", "gpt-5");
    expect(r.code, r.out).toBe(0);
    const parts = (r.body.input as any[]).filter((i) => i.role !== "developer").flatMap((i) =>
      i.type === "message" ? i.content.map((c: any) => ({ text: c.text })) : i.type === "function_call" ? [{ call: `${i.name} ${i.arguments}` }] : i.type === "function_call_output" ? [{ result: i.output }] : []);
    const seen = conversation(parts).filter((t) => !t.startsWith("<environment_context>"));
    expect(seen).toEqual(["The code word is PURPLE.", "Noted, let me look.", 'call:SHELL {"command":"ls"}', "result:a.txt", "I see a.txt.", "What is the code word?"]);
  }, 90_000);

  it("takes --ak reasoning_effort, and reads the task's MCP servers from config.toml", async () => {
    const r = await runSeeded(codex, CODEX, "openai", "openai-responses", "gpt-5", {
      options: { reasoning_effort: "high" },
      mcpServers: [{ name: "web", transport: "streamable-http", url: "http://127.0.0.1:9/mcp" }],
    });
    expect(r.code, r.out).toBe(0);
    expect(r.body.reasoning).toMatchObject({ effort: "high" });
    // the server does not answer here; codex trying it shows the table was read
    expect(r.out).toContain("http://127.0.0.1:9/mcp");
  }, 90_000);
});
