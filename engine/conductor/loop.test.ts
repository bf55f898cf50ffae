/**
 * The conductor's turn loop against the real gateway (ModelGateway.serveLocal) in front of the scripted upstream,
 * in each of the four wire APIs: what it sends (the upstream records each request body as the provider would get
 * it), what it emits as trace, and how each way of ending a run comes out.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { initAgentDir } from "./init.ts";
import { runConductor } from "./loop.ts";
import type { WireApi } from "../providers.ts";
import { buildTrajectory } from "../trace/atif.ts";
import { validateTrajectory } from "../trace/atif-validate.ts";
import type { TraceUpdate } from "../trace/events.ts";
import { startConductorGateway, type ConductorGateway } from "../../tests/support/conductor-gateway.ts";

let gw: ConductorGateway;
let scratch: string;
let n = 0;

beforeAll(async () => {
  gw = await startConductorGateway();
  scratch = mkdtempSync(join(tmpdir(), "evolve-conductor-loop-"));
});
afterAll(async () => {
  await gw.close();
  rmSync(scratch, { recursive: true, force: true });
});
beforeEach(() => gw.upstream.reset());

/** A fresh default .agent/ and working directory; `config` is written over harness/config.json. */
function agent(config?: Record<string, unknown>): { root: string; workdir: string } {
  const dir = join(scratch, `a${++n}`);
  const { agentRoot } = initAgentDir(dir);
  if (config) writeFileSync(join(agentRoot, "harness/config.json"), JSON.stringify(config));
  const workdir = join(dir, "work");
  mkdirSync(workdir);
  return { root: agentRoot, workdir };
}

const run = (a: { root: string; workdir: string }, api: WireApi, extra: Partial<Parameters<typeof runConductor>[0]> = {}) =>
  runConductor({ agentRoot: a.root, workdir: a.workdir, instruction: "say hello into a file", endpoint: gw.endpoint(api), tuning: { retryBaseMs: 5 }, ...extra });

const kinds = (t: TraceUpdate[]) => t.map((u) => u.type);
const modelRequests = () => gw.upstream.requests.filter((r) => r.method === "POST");

/** The tool names a request offered, in its API's format. */
function offered(api: WireApi, body: any): string[] {
  if (api === "anthropic" || api === "openai-responses") return body.tools.map((t: any) => t.name);
  if (api === "openai-chat") return body.tools.map((t: any) => t.function.name);
  return body.tools[0].functionDeclarations.map((f: any) => f.name);
}

/** The text of the tool result a request carries back, in its API's format. */
function toolResultText(api: WireApi, body: any): string {
  if (api === "anthropic") return body.messages.at(-1).content.find((b: any) => b.type === "tool_result").content;
  if (api === "openai-responses") return body.input.find((i: any) => i.type === "function_call_output").output;
  if (api === "openai-chat") return body.messages.find((m: any) => m.role === "tool").content;
  return body.contents.at(-1).parts[0].functionResponse.response.output;
}

/** Everything a request sends the model, as one string, to look for what the model sees. */
const seen = (body: unknown) => JSON.stringify(body);

describe("the conductor in each wire API", () => {
  for (const api of ["anthropic", "openai-responses", "openai-chat", "gemini"] as const) {
    it(`${api}: runs a shell call, sends its output back, and finishes with finish's answer`, async () => {
      const a = agent();
      gw.upstream.push(
        { text: "I will write it.", toolCall: { id: "call_sh1", name: "shell", input: { command: "echo hello > hello.txt && cat hello.txt" } } },
        { toolCall: { id: "call_fin1", name: "finish", input: { answer: "wrote hello.txt" } } },
      );
      const r = await run(a, api);
      expect(r.outcome).toBe("finished");
      expect(r.output).toBe("wrote hello.txt");
      expect(r.turns).toBe(2);
      expect(readFileSync(join(a.workdir, "hello.txt"), "utf8")).toBe("hello\n");

      const reqs = modelRequests();
      expect(reqs).toHaveLength(2);
      expect(offered(api, reqs[0]!.body).sort()).toEqual(["edit_file", "finish", "read_file", "shell", "write_file"]);
      expect(toolResultText(api, reqs[1]!.body)).toBe("hello\n");
      expect(seen(reqs[0]!.body)).toContain("say hello into a file");

      expect(kinds(r.trace)).toEqual(["prompt", "agent_message_chunk", "usage", "tool_call", "tool_call_update", "usage", "tool_call", "tool_call_update"]);
      const call = r.trace[3] as Extract<TraceUpdate, { type: "tool_call" }>;
      expect(call.data.update).toMatchObject({ name: "shell", kind: "execute", status: "pending", title: "echo hello > hello.txt && cat hello.txt", rawInput: { command: "echo hello > hello.txt && cat hello.txt" } });
      const done = r.trace[4] as Extract<TraceUpdate, { type: "tool_call_update" }>;
      expect(done.data.update).toMatchObject({ toolCallId: call.data.update.toolCallId, status: "completed", content: [{ type: "content", content: { type: "text", text: "hello\n" } }] });
      const usage = r.trace[2] as Extract<TraceUpdate, { type: "usage" }>;
      expect(usage.data.update).toMatchObject({ scope: "call", source: "harness", usage: { promptTokens: 25, completionTokens: 12 } });
      // each call its own message id, the chunk and the usage of one call sharing it
      const chunk = r.trace[1] as Extract<TraceUpdate, { type: "agent_message_chunk" }>;
      expect(chunk.data.update.messageId).toBe(usage.data.update.messageId);
      expect((r.trace[5] as Extract<TraceUpdate, { type: "usage" }>).data.update.messageId).not.toBe(usage.data.update.messageId);
    });
  }

  it("sends each API's own auth header to the gateway (which then swaps in the real key)", async () => {
    const a = agent();
    for (const api of ["anthropic", "openai-chat", "gemini"] as const) {
      gw.upstream.push({ toolCall: { id: "f", name: "finish", input: { answer: "ok" } } });
      expect((await run(a, api)).outcome).toBe("finished");
    }
    const [anth, chat, gem] = modelRequests();
    expect(anth!.headers["x-api-key"]).toBe("sk-ant-real");
    expect(anth!.headers["anthropic-version"]).toBe("2023-06-01");
    expect(chat!.headers.authorization).toBe("Bearer sk-openai-real");
    expect(gem!.headers["x-goog-api-key"]).toBe("AIza-real");
  });
});

describe("the trace as every reader takes it", () => {
  it("builds a valid ATIF trajectory: one agent step per model call, each tool call with its observation", async () => {
    const a = agent();
    gw.upstream.push(
      { text: "Looking.", toolCall: { id: "c1", name: "shell", input: { command: "echo one" } } },
      { toolCall: { id: "c2", name: "read_file", input: { path: "missing.txt" } } },
      { toolCall: { id: "c3", name: "finish", input: { answer: "done" } } },
    );
    const r = await run(a, "anthropic");
    const doc = buildTrajectory(r.trace, { agent: { name: "conductor", version: "test", model_name: "claude-sonnet-4-5" } });
    expect(validateTrajectory(doc)).toEqual([]);
    const agentSteps = doc.steps.filter((s) => s.source === "agent");
    expect(agentSteps).toHaveLength(3);
    expect(agentSteps[0]!.message).toBe("Looking.");
    expect(agentSteps[0]!.tool_calls).toEqual([{ tool_call_id: "c1", function_name: "shell", arguments: { command: "echo one" } }]);
    expect(agentSteps[0]!.observation!.results[0]).toMatchObject({ source_call_id: "c1", content: "one\n" });
    expect(String(agentSteps[1]!.observation!.results[0]!.content)).toMatch(/^no such file/);
    expect(doc.steps[0]).toMatchObject({ source: "user", message: "say hello into a file" });
    expect(doc.final_metrics).toMatchObject({ total_prompt_tokens: 75, total_completion_tokens: 36 });
  });
});

describe("what the model is shown", () => {
  it("puts PLANNING.md and knowledge/*.md (in name order) in the system prompt, and the prompt event carries it", async () => {
    const a = agent();
    writeFileSync(join(a.root, "harness/PLANNING.md"), "Plan carefully. MARKER-PLAN-7");
    writeFileSync(join(a.root, "knowledge/b-second.md"), "second MARKER-K2");
    writeFileSync(join(a.root, "knowledge/a-first.md"), "first MARKER-K1");
    gw.upstream.push({ toolCall: { id: "f", name: "finish", input: { answer: "ok" } } });
    const r = await run(a, "anthropic");
    const system: string = modelRequests()[0]!.body.system;
    expect(system).toContain("MARKER-PLAN-7");
    expect(system.indexOf("MARKER-K1")).toBeLessThan(system.indexOf("MARKER-K2"));
    expect(system).not.toContain("Read the task and look around"); // PLANNING.md replaced the built-in frame
    const prompt = r.trace[0] as Extract<TraceUpdate, { type: "prompt" }>;
    expect(prompt.type).toBe("prompt");
    expect(prompt.data._prompt).toEqual({ text: "say hello into a file", system });
  });

  it("a veto by hooks/pre_tool_call stops the call, and the model reads the hook's reason next turn", async () => {
    const a = agent();
    writeFileSync(join(a.workdir, "precious.txt"), "keep me");
    const hook = join(a.root, "hooks/pre_tool_call");
    writeFileSync(hook, `#!/bin/sh\ncall=$(cat)\ncase "$call" in *rm*) echo "deleting files is not allowed here"; exit 3 ;; esac\nexit 0\n`);
    chmodSync(hook, 0o755);
    gw.upstream.push(
      { toolCall: { id: "c1", name: "shell", input: { command: "rm precious.txt" } } },
      { toolCall: { id: "c2", name: "shell", input: { command: "cat precious.txt" } } },
      { toolCall: { id: "c3", name: "finish", input: { answer: "kept" } } },
    );
    const r = await run(a, "anthropic");
    expect(r.outcome).toBe("finished");
    expect(existsSync(join(a.workdir, "precious.txt"))).toBe(true);
    const vetoed = r.trace.find((u) => u.type === "tool_call_update" && u.data.update.toolCallId === "c1") as Extract<TraceUpdate, { type: "tool_call_update" }>;
    expect(vetoed.data.update.status).toBe("failed");
    expect(vetoed.data.update._meta).toEqual({ vetoed: true, reason: "deleting files is not allowed here" });
    const second = modelRequests()[1]!.body;
    expect(toolResultText("anthropic", second)).toBe("vetoed: deleting files is not allowed here");
    expect(second.messages.at(-1).content[0].is_error).toBe(true);
    // the allowed call ran
    expect(toolResultText("anthropic", modelRequests()[2]!.body)).toBe("keep me");
  });

  it("a hook that is not executable is not run (the sample init writes vetoes nothing)", async () => {
    const a = agent();
    writeFileSync(join(a.root, "hooks/pre_tool_call"), "#!/bin/sh\nexit 1\n");
    chmodSync(join(a.root, "hooks/pre_tool_call"), 0o644);
    gw.upstream.push({ toolCall: { id: "c1", name: "shell", input: { command: "echo ran" } } }, { toolCall: { id: "c2", name: "finish", input: { answer: "ok" } } });
    const r = await run(a, "openai-chat");
    expect(r.outcome).toBe("finished");
    expect(toolResultText("openai-chat", modelRequests()[1]!.body)).toBe("ran\n");
  });

  it("disabled_tools leaves a tool out of every request", async () => {
    const a = agent({ disabled_tools: ["shell", "write_file"] });
    gw.upstream.push({ toolCall: { id: "f", name: "finish", input: { answer: "ok" } } });
    await run(a, "openai-responses");
    expect(offered("openai-responses", modelRequests()[0]!.body).sort()).toEqual(["edit_file", "finish", "read_file"]);
  });

  it("the memory budget keeps the instruction and the newest turns whole, and says how many entries it left out", async () => {
    // 200 tokens = 800 characters; each observation is ~300
    const a = agent({ context_budget_tokens: 200 });
    for (let i = 1; i <= 4; i++) gw.upstream.push({ toolCall: { id: `c${i}`, name: "shell", input: { command: `printf 'OUT${i}-%0290d' 0` } } });
    gw.upstream.push({ toolCall: { id: "f", name: "finish", input: { answer: "ok" } } });
    const r = await run(a, "anthropic");
    expect(r.outcome).toBe("finished");
    const last = modelRequests()[4]!.body;
    const text = seen(last);
    expect(last.messages[0].content[0].text).toBe("say hello into a file");
    expect(text).toContain("OUT4-");
    expect(text).not.toContain("OUT1-");
    expect(text).toMatch(/\[memory: \d+ older entries were left out to fit the context budget of 200 tokens\]/);
    // every tool_result it kept has its tool_use in the message before it
    const uses = new Set<string>();
    for (const m of last.messages) {
      for (const b of m.content) {
        if (b.type === "tool_use") uses.add(b.id);
        if (b.type === "tool_result") expect(uses.has(b.tool_use_id), b.tool_use_id).toBe(true);
      }
    }
    // the first request had everything: nothing was left out yet
    expect(seen(modelRequests()[1]!.body)).not.toContain("[memory:");
  });

  it("a call whose arguments are not a JSON object is answered as malformed, not run", async () => {
    const a = agent();
    const bad = {
      id: "chatcmpl-bad",
      object: "chat.completion",
      created: 1,
      model: "gpt-5",
      choices: [{ index: 0, finish_reason: "tool_calls", message: { role: "assistant", content: null, tool_calls: [{ id: "cb", type: "function", function: { name: "shell", arguments: "{not json" } }] } }],
      usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
    };
    gw.upstream.push({ body: bad }, { toolCall: { id: "f", name: "finish", input: { answer: "ok" } } });
    const r = await run(a, "openai-chat");
    expect(r.outcome).toBe("finished");
    const u = r.trace.find((x) => x.type === "tool_call_update" && x.data.update.toolCallId === "cb") as Extract<TraceUpdate, { type: "tool_call_update" }>;
    expect(u.data.update.status).toBe("failed");
    expect(String(u.data.update._meta?.malformed)).toMatch(/not JSON/);
    expect(toolResultText("openai-chat", modelRequests()[1]!.body)).toMatch(/^the call was not run: arguments are not JSON/);
  });
});

describe("how a run ends", () => {
  it("max_turns: the turn limit ends the run with an error event and the last text as output", async () => {
    const a = agent({ max_turns: 2 });
    gw.upstream.responder = () => ({ text: "still going", toolCall: { id: `c${Math.random()}`, name: "shell", input: { command: "true" } } });
    const r = await run(a, "anthropic");
    expect(r.outcome).toBe("max_turns");
    expect(r.turns).toBe(2);
    expect(r.output).toBe("still going");
    expect(modelRequests()).toHaveLength(2);
    expect(r.trace.at(-1)).toMatchObject({ type: "error", data: { update: { fatal: true } } });
    expect(r.error).toMatch(/all 2 turns/);
  });

  it("model_error: a refusal by the provider ends the run with the provider's message in one line", async () => {
    const a = agent();
    gw.upstream.push({ status: 400, body: { type: "error", error: { type: "invalid_request_error", message: "prompt is too long:\n 300000 tokens > 200000 maximum" } } });
    const r = await run(a, "anthropic");
    expect(r.outcome).toBe("model_error");
    expect(r.error).toBe("anthropic 400: prompt is too long: 300000 tokens > 200000 maximum");
    const err = r.trace.at(-1) as Extract<TraceUpdate, { type: "error" }>;
    expect(err.data.update).toMatchObject({ message: r.error, fatal: true });
    expect(modelRequests()).toHaveLength(1); // a 400 is not retried
  });

  it("retries a 429 and a 503, then goes on", async () => {
    const a = agent();
    gw.upstream.push({ status: 429 }, { status: 503 }, { toolCall: { id: "f", name: "finish", input: { answer: "after retries" } } });
    const r = await run(a, "openai-responses");
    expect(r.outcome).toBe("finished");
    expect(r.output).toBe("after retries");
    expect(modelRequests()).toHaveLength(3);
  });

  it("a reply with no tool call is the last word: finished with its text", async () => {
    const a = agent();
    gw.upstream.push({ text: "The answer is 4." });
    const r = await run(a, "gemini");
    expect(r).toMatchObject({ outcome: "finished", output: "The answer is 4.", turns: 1 });
  });

  it("timeout: the run's time limit kills a running command and ends the run", async () => {
    const a = agent();
    gw.upstream.push({ toolCall: { id: "c1", name: "shell", input: { command: "sleep 20" } } });
    const t0 = Date.now();
    const r = await run(a, "anthropic", { timeoutMs: 600 });
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(r.outcome).toBe("timeout");
    const u = r.trace.find((x) => x.type === "tool_call_update") as Extract<TraceUpdate, { type: "tool_call_update" }>;
    expect(u.data.update.status).toBe("failed");
    expect(r.trace.at(-1)).toMatchObject({ type: "error", data: { update: { fatal: true } } });
  });

  it("aborted: the caller's signal ends the run", async () => {
    const a = agent();
    const ctl = new AbortController();
    gw.upstream.push({ toolCall: { id: "c1", name: "shell", input: { command: "sleep 20" } } });
    setTimeout(() => ctl.abort(), 300);
    const r = await run(a, "anthropic", { signal: ctl.signal });
    expect(r.outcome).toBe("aborted");
  });
});
