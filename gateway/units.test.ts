// Gateway pieces without a server: upstream config and routing, the SSE parser, usage extraction and pricing, and
// credential lookups that skip the hash for a key seen before.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { meteredStream, SseParser } from "./sse.ts";
import { buildUpstreams, loadUpstreams, routeModel, upstreamUrl, authHeaders } from "./upstreams.ts";
import { costOf } from "./prices.ts";
import { Credentials } from "./credentials.ts";
import { StreamUsage, usageFromJson } from "./usage.ts";

const tmp = mkdtempSync(join(tmpdir(), "evolve-gw-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("upstreams", () => {
  it("reads gateway.toml under EVOLVE_HOME and the environment", () => {
    writeFileSync(
      join(tmp, "gateway.toml"),
      `[upstreams.local]\nkind = "openai-compatible"\nbase_url = "http://127.0.0.1:8000/v1/"\napi_key_env = "LOCAL_KEY"\nmodels = ["Qwen/Qwen3-8B"]\n\n[aliases]\nfast = "local/Qwen/Qwen3-8B"\n`,
    );
    const ups = loadUpstreams({ env: { EVOLVE_HOME: tmp, LOCAL_KEY: "lk", ANTHROPIC_API_KEY: "ak", OPENAI_API_KEY: "ok", OPENAI_BASE_URL: "http://o.example/v1" } });
    expect([...ups.byName.keys()].sort()).toEqual(["anthropic", "local", "openai"]);
    const local = ups.byName.get("local")!;
    expect(local).toMatchObject({ kind: "openai-compatible", baseUrl: "http://127.0.0.1:8000/v1", apiKey: "lk" });
    expect(ups.byName.get("anthropic")).toMatchObject({ kind: "anthropic", baseUrl: "https://api.anthropic.com", apiKey: "ak" });
    expect(ups.byName.get("openai")!.baseUrl).toBe("http://o.example/v1");
    expect(upstreamUrl(ups.byName.get("anthropic")!, "/messages")).toBe("https://api.anthropic.com/v1/messages");
    expect(upstreamUrl(local, "/chat/completions")).toBe("http://127.0.0.1:8000/v1/chat/completions");
    expect(authHeaders(ups.byName.get("anthropic")!)).toEqual({ "x-api-key": "ak" });
    expect(authHeaders(local)).toEqual({ authorization: "Bearer lk" });

    expect(routeModel(ups, "fast", "chat")).toMatchObject({ upstreamModel: "Qwen/Qwen3-8B", model: "local/Qwen/Qwen3-8B" });
    expect(routeModel(ups, "Qwen/Qwen3-8B", "chat")!.upstream.name).toBe("local"); // listed bare name
    expect(routeModel(ups, "claude-sonnet-4-5", "messages")).toMatchObject({ upstreamModel: "claude-sonnet-4-5", model: "anthropic/claude-sonnet-4-5" });
    expect(routeModel(ups, "gpt-5", "responses")!.model).toBe("openai/gpt-5");
    expect(routeModel(ups, "anthropic/claude-x", "chat")!.upstream.name).toBe("anthropic");
  });

  it("has no upstream without a key or base, refuses a named config that is missing or invalid", () => {
    const ups = loadUpstreams({ env: {} });
    expect(ups.byName.size).toBe(0);
    expect(routeModel(ups, "claude-x", "messages")).toBeUndefined();
    expect(() => loadUpstreams({ configPath: join(tmp, "nope.toml"), env: {} })).toThrow();
    expect(() => buildUpstreams({ upstreams: { x: { kind: "openai-compatible" } } }, {})).toThrow(/base_url/);
    expect(() => buildUpstreams({ upstreams: { x: { kind: "bogus" } } }, {})).toThrow();
  });
});

describe("SSE parser", () => {
  it("splits events fed in arbitrary pieces, CRLF included, and flushes an unterminated one", () => {
    const text = "event: a\ndata: {\"x\":1}\n\n: comment\r\nevent: b\r\ndata: line1\r\ndata: line2\r\n\r\ndata: [DONE]";
    for (const size of [1, 3, 7, 1000]) {
      const got: [string | undefined, string][] = [];
      const p = new SseParser((e, d) => got.push([e, d]));
      for (let i = 0; i < text.length; i += size) p.push(text.slice(i, i + size));
      p.end();
      expect(got).toEqual([["a", '{"x":1}'], ["b", "line1\nline2"], [undefined, "[DONE]"]]);
    }
  });

  it("drops an event its skip names before reading its data, unless a later event line renames it", () => {
    const text = "event: delta\ndata: 1\n\nevent: keep\ndata: 2\n\nevent: delta\nevent: keep\ndata: 3\n\nid: 9\nevent: delta\ndata: 4\n\ndata: 5\n\n";
    const got: [string | undefined, string][] = [];
    const p = new SseParser((e, d) => got.push([e, d]), (e) => e === "delta");
    p.push(text);
    p.end();
    // an event line that is not the first is left to the consumer, which sees the name
    expect(got).toEqual([["keep", "2"], ["keep", "3"], ["delta", "4"], [undefined, "5"]]);
  });
});

describe("usage", () => {
  it("reads each API's JSON usage into disjoint buckets and prices them", () => {
    expect(usageFromJson("messages", { usage: { input_tokens: 5, cache_read_input_tokens: 6, cache_creation_input_tokens: 7, output_tokens: 8 } }))
      .toEqual({ input_tokens: 5, cached_read_tokens: 6, cache_write_tokens: 7, output_tokens: 8, reasoning_tokens: 0 });
    expect(usageFromJson("chat", { usage: { prompt_tokens: 100, completion_tokens: 10, prompt_tokens_details: { cached_tokens: 60 }, completion_tokens_details: { reasoning_tokens: 4 } } }))
      .toEqual({ input_tokens: 40, cached_read_tokens: 60, cache_write_tokens: 0, output_tokens: 10, reasoning_tokens: 4 });
    expect(usageFromJson("responses", { usage: { input_tokens: 100, input_tokens_details: { cached_tokens: 60 }, output_tokens: 10, output_tokens_details: { reasoning_tokens: 4 } } }))
      .toEqual({ input_tokens: 40, cached_read_tokens: 60, cache_write_tokens: 0, output_tokens: 10, reasoning_tokens: 4 });
    expect(usageFromJson("chat", { usage: null })).toBeNull();
    const u = { input_tokens: 10, cached_read_tokens: 100, cache_write_tokens: 20, output_tokens: 50, reasoning_tokens: 30 };
    expect(costOf(u, { input_cost_per_token: 1, output_cost_per_token: 2, cache_read_input_token_cost: 0.1, cache_creation_input_token_cost: 1.25 })).toBeCloseTo(10 + 10 + 25 + 100);
    expect(costOf(u, { input_cost_per_token: 1, output_cost_per_token: 2, output_cost_per_reasoning_token: 3 })).toBeCloseTo(10 + 100 + 20 + 40 + 90);
  });

  it("Anthropic stream: message_delta is cumulative, last non-null value per field wins", () => {
    const s = new StreamUsage("messages");
    s.add("message_start", { type: "message_start", message: { usage: { input_tokens: 10, cache_read_input_tokens: 5, cache_creation_input_tokens: 0, output_tokens: 1 } } });
    s.add("message_delta", { type: "message_delta", usage: { output_tokens: 7 } });
    s.add("message_delta", { type: "message_delta", usage: { output_tokens: 20, input_tokens: 30, cache_read_input_tokens: null } });
    expect(s.usage).toEqual({ input_tokens: 30, cached_read_tokens: 5, cache_write_tokens: 0, output_tokens: 20, reasoning_tokens: 0 });
    expect(s.final).toBe(true);
  });
});

describe("metered stream", () => {
  const body = (text: string, cut = false) =>
    {
      let sent = false;
      return new ReadableStream<Uint8Array>({
        pull(c) {
          if (!sent) {
            sent = true;
            c.enqueue(new TextEncoder().encode(text));
          } else if (cut) c.error(new Error("connection reset"));
          else c.close();
        },
      });
    };

  it("reports an interrupted stream with the usage seen so far", async () => {
    const ends: any[] = [];
    const s = meteredStream(body('event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}\n\n', true), "messages", false, (e) => ends.push(e));
    await expect(new Response(s).text()).rejects.toThrow();
    expect(ends).toHaveLength(1);
    expect(ends[0].usage.usage.input_tokens).toBe(9);
    expect(ends[0].error).toMatch(/upstream stream failed/);
  });

  it("reports a client that went away", async () => {
    const ends: any[] = [];
    const never = new ReadableStream<Uint8Array>({ pull: () => new Promise(() => {}) });
    const s = meteredStream(never, "chat", true, (e) => ends.push(e));
    await s.cancel("bye");
    expect(ends).toEqual([expect.objectContaining({ error: "client closed the stream" })]);
  });

  it("drops only the usage-only chat chunk (choices [], null or absent)", async () => {
    const text = ['{"choices":[{"delta":{"content":"a"}}],"usage":null}', '{"choices":null,"usage":{"prompt_tokens":3,"completion_tokens":2}}', "[DONE]"]
      .map((d) => `data: ${d}\n\n`).join("");
    const ends: any[] = [];
    const out = await new Response(meteredStream(body(text), "chat", true, (e) => ends.push(e))).text();
    expect(out).toBe('data: {"choices":[{"delta":{"content":"a"}}],"usage":null}\n\ndata: [DONE]\n\n');
    expect(ends[0].usage.usage).toMatchObject({ input_tokens: 3, output_tokens: 2 });
    expect(ends[0].error).toBeUndefined();
  });
});

describe("credential lookups of a key seen before", () => {
  it("still honour expiry, revocation, a reloaded record and prune", () => {
    let now = Date.parse("2026-01-01T00:00:00Z");
    const creds = new Credentials(undefined, () => now);
    const a = creds.issueAgent({ trialId: "t", ttlMs: 1000 });
    const b = creds.issueAgent({ trialId: "t" });
    expect(creds.authenticate(a.key)?.id).toBe(a.credential.id);
    expect(creds.authenticate(a.key)?.id).toBe(a.credential.id);
    now += 1000;
    expect(creds.authenticate(a.key)).toBeUndefined();
    expect(creds.authenticate(b.key)?.id).toBe(b.credential.id);
    // a persisted copy that says revoked replaces the record the lookup remembered
    creds.load([{ ...b.credential, revokedAt: new Date(now).toISOString() }]);
    expect(creds.authenticate(b.key)).toBeUndefined();
    const c = creds.issueAgent({ trialId: "u" });
    expect(creds.authenticate(c.key)?.id).toBe(c.credential.id);
    creds.revoke(c.credential.id);
    expect(creds.authenticate(c.key)).toBeUndefined();
    expect(creds.prune()).toBe(3);
    expect(creds.authenticate(a.key)).toBeUndefined();
    expect(creds.authenticate(c.key)).toBeUndefined();
  });
});
