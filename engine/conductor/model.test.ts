/**
 * The conductor's model client (engine/conductor/model.ts) on the details the loop tests do not reach: usage in the
 * trace's terms (cache counted into the prompt, reasoning into the completion), Gemini's thought signature sent back
 * with its call, a reply over the size bound, and a retry wait cut short by the run's end.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { buildRequest, callModel, MAX_REPLY_BYTES, ModelError, parseReply } from "./model.ts";
import type { ModelEndpoint } from "./types.ts";
import { ScriptedUpstream } from "../../fixtures/upstream/server.ts";
import { startConductorGateway, type ConductorGateway } from "../../tests/support/conductor-gateway.ts";

let gw: ConductorGateway;
const direct = new ScriptedUpstream();
beforeAll(async () => {
  gw = await startConductorGateway();
  await direct.start();
});
afterAll(async () => {
  await gw.close();
  await direct.close();
});
beforeEach(() => {
  gw.upstream.reset();
  direct.reset();
});

const ask = (endpoint: ModelEndpoint, extra: Partial<Parameters<typeof callModel>[0]> = {}) =>
  callModel({ endpoint, system: "sys", entries: [{ kind: "instruction", text: "hi" }], tools: [], maxOutputTokens: 100, retryBaseMs: 5, ...extra });

describe("usage in the trace's terms", () => {
  it("anthropic: cache reads and writes are counted into promptTokens and named apart", async () => {
    gw.upstream.push({ text: "x", usage: { input_tokens: 10, output_tokens: 7, cache_read_tokens: 5, cache_write_tokens: 3 } });
    const r = await ask(gw.endpoint("anthropic"));
    expect(r.usage).toEqual({ promptTokens: 18, completionTokens: 7, cachedTokens: 5, cacheWriteTokens: 3 });
    expect(r.text).toBe("x");
  });

  it("gemini: thoughts are counted into completionTokens and named as reasoning", async () => {
    gw.upstream.push({ text: "y", usage: { input_tokens: 10, output_tokens: 9, reasoning_tokens: 4 } });
    const r = await ask(gw.endpoint("gemini"));
    expect(r.usage).toEqual({ promptTokens: 10, completionTokens: 9, reasoningTokens: 4 });
  });
});

describe("wire details", () => {
  it("gemini: a function call's thoughtSignature goes back with it, and the result names the function", () => {
    const reply = parseReply("gemini", {
      responseId: "r1",
      candidates: [{ content: { role: "model", parts: [{ text: "thinking", thought: true }, { functionCall: { name: "shell", args: { command: "ls" } }, thoughtSignature: "sig-123" }] } }],
      usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1 },
    });
    expect(reply.text).toBe("");
    expect(reply.toolCalls).toHaveLength(1);
    const c = reply.toolCalls[0]!;
    const { body } = buildRequest({
      endpoint: { api: "gemini", baseUrl: "http://x", key: "k", model: "m" },
      system: "s",
      entries: [
        { kind: "instruction", text: "go" },
        { kind: "assistant", text: "", toolCalls: [c], turn: 1 },
        { kind: "observation", toolCallId: c.id, name: "shell", text: "a b", isError: false, turn: 1 },
      ],
      tools: [],
      maxOutputTokens: 10,
    });
    expect(body.contents).toEqual([
      { role: "user", parts: [{ text: "go" }] },
      { role: "model", parts: [{ functionCall: { name: "shell", args: { command: "ls" } }, thoughtSignature: "sig-123" }] },
      { role: "user", parts: [{ functionResponse: { name: "shell", response: { output: "a b" } } }] },
    ]);
  });

  it("a reply over the size bound is a model error, not a process out of memory", async () => {
    direct.push({ text: "z".repeat(MAX_REPLY_BYTES + 10) });
    const e = await ask({ api: "anthropic", baseUrl: direct.url, key: "k", model: "m" }).catch((x) => x);
    expect(e).toBeInstanceOf(ModelError);
    expect(e.message).toMatch(/over \d+ bytes/);
  });

  it("the run's end cuts a retry wait short", async () => {
    direct.push({ status: 503 }, { status: 503 });
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(new Error("stop")), 100);
    const t0 = Date.now();
    const e = await ask({ api: "openai-chat", baseUrl: direct.url, key: "k", model: "m" }, { retryBaseMs: 30_000, signal: ctl.signal }).catch((x) => x);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(e.message).toBe("stop");
  });

  it("gives up after the retries with the last answer's status and message", async () => {
    direct.push({ status: 529 }, { status: 529 }, { status: 529 });
    const e = await ask({ api: "anthropic", baseUrl: direct.url, key: "k", model: "m" }, { retries: 2 }).catch((x) => x);
    expect(e).toBeInstanceOf(ModelError);
    expect(e.message).toBe("anthropic 529: fixture overloaded_error");
    expect(direct.requests).toHaveLength(3);
  });
});
