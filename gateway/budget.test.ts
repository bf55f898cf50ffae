import { describe, expect, it } from "vitest";
import { Budgets, worstCaseUsd } from "./budget.ts";
import { Prices, requestWorstCase } from "./prices.ts";
import type { Credential } from "./types.ts";

const cred = (trialId: string, lane: "agent" | "judge" = "agent"): Credential => ({ id: `c-${trialId}-${lane}`, trialId, lane, models: [] });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("budget reservations", () => {
  it("100 concurrent requests against a cap that admits about 10: recorded spend never exceeds the cap", async () => {
    const b = new Budgets();
    b.setTrial("t1", { capUsd: 1.0 });
    const c = cred("t1");
    // worst case of one request: 2000 input tokens + max_tokens 5600 on claude-sonnet-4-5 ≈ $0.096
    const worst = worstCaseUsd(new Prices().priceOf("claude-sonnet-4-5"), 2000, 5600)!;
    expect(worst).toBeCloseTo(2000 * 6e-6 + 5600 * 1.5e-5, 12);
    let violations = 0;
    const check = () => {
      const s = b.trialSpend("t1");
      if (s.spentUsd + s.reservedUsd > 1.0 + 1e-12) violations++;
    };
    const results = await Promise.all(
      Array.from({ length: 100 }, async () => {
        await sleep(Math.random() * 5);
        const r = b.reserve(c, worst);
        check();
        if (!r.ok) return r;
        await sleep(1 + Math.random() * 10);
        b.settle(r.id, r.reservedUsd * (0.85 + Math.random() * 0.15)); // measured ≤ reserved
        check();
        return r;
      }),
    );
    const admitted = results.filter((r) => r.ok).length;
    const refused = results.filter((r) => !r.ok);
    expect(violations).toBe(0);
    expect(admitted).toBeGreaterThanOrEqual(Math.floor(1.0 / worst));
    expect(admitted).toBeLessThanOrEqual(Math.floor(1.0 / (worst * 0.85)));
    expect(refused.length).toBe(100 - admitted);
    for (const r of refused) expect(r).toMatchObject({ ok: false, scope: "trial", message: expect.stringMatching(/^trial: trial t1 budget of \$1/) });
    const s = b.trialSpend("t1");
    expect(s.reservedUsd).toBe(0);
    expect(s.spentUsd).toBeLessThanOrEqual(1.0);
    expect(s.spentUsd).toBeGreaterThan(0.8);
  });

  it("all reserved before any settles: exactly floor(cap / worst) admitted", async () => {
    const b = new Budgets();
    b.setTrial("t", { capUsd: 10 });
    const rs = await Promise.all(Array.from({ length: 100 }, async () => b.reserve(cred("t"), 1)));
    expect(rs.filter((r) => r.ok).length).toBe(10);
  });

  it("settling to the actual cost frees the difference for later requests", () => {
    const b = new Budgets();
    b.setTrial("t", { capUsd: 1 });
    const r1 = b.reserve(cred("t"), 0.8);
    expect(r1.ok).toBe(true);
    expect(b.reserve(cred("t"), 0.5).ok).toBe(false);
    if (r1.ok) b.settle(r1.id, 0.2);
    expect(b.trialSpend("t")).toEqual({ spentUsd: 0.2, reservedUsd: 0, limitUsd: 1, unpricedCalls: 0 });
    const r2 = b.reserve(cred("t"), 0.5);
    expect(r2.ok).toBe(true);
    expect(b.trialSpend("t").reservedUsd).toBe(0.5);
  });

  it("null actual keeps the reservation as spent, never 0; settle is idempotent", () => {
    const b = new Budgets();
    b.setTrial("t", { capUsd: 1 });
    const r = b.reserve(cred("t"), 0.3);
    if (!r.ok) throw new Error("refused");
    b.settle(r.id, null);
    b.settle(r.id, 0);
    expect(b.trialSpend("t")).toMatchObject({ spentUsd: 0.3, reservedUsd: 0 });
  });

  it("per-user credits refuse with scope user", () => {
    const b = new Budgets();
    b.setUserCredits("ana", 1, 0.9);
    b.setTrial("t", { user: "ana" });
    const r = b.reserve(cred("t"), 0.2);
    expect(r).toMatchObject({ ok: false, scope: "user", message: expect.stringMatching(/^user: user ana budget/) });
    expect(b.reserve(cred("t"), 0.05).ok).toBe(true);
    expect(b.userSpend("ana")).toMatchObject({ spentUsd: 0.9, reservedUsd: 0.05, limitUsd: 1 });
  });

  it("spend made elsewhere counts against the limit as it changes, apart from this process's own", () => {
    const b = new Budgets();
    b.setUserCredits("eve", 1, 0.2);
    b.setTrial("t", { user: "eve" });
    const r = b.reserve(cred("t"), 0.3);
    if (!r.ok) throw new Error("refused");
    b.settle(r.id, 0.3);
    expect(b.userSpend("eve")).toMatchObject({ spentUsd: 0.5, limitUsd: 1 });
    // another process booked 0.4 more meanwhile: 0.2 + 0.4 elsewhere, 0.3 here, so 0.2 no longer fits
    b.setSpentElsewhere("user", "eve", 0.6);
    expect(b.reserve(cred("t"), 0.2)).toMatchObject({ ok: false, scope: "user", message: expect.stringContaining("(spent $0.9,") });
    expect(b.reserve(cred("t"), 0.05).ok).toBe(true);
    // a figure that is not a spend (negative residue, NaN) counts as nothing rather than as credit
    b.setSpentElsewhere("user", "eve", -0.1);
    expect(b.userSpend("eve").spentUsd).toBeCloseTo(0.3, 12);
    // others' calls in flight hold room too, and are not this process's own to publish
    b.setReservedElsewhere("user", "eve", 0.6);
    expect(b.reserve(cred("t"), 0.1)).toMatchObject({ ok: false, scope: "user", message: expect.stringContaining("in flight $0.65,") });
    expect(b.ownReservedUsd("user", "eve")).toBeCloseTo(0.05, 12);
    b.setReservedElsewhere("user", "eve", Number.NaN);
    expect(b.reserve(cred("t"), 0.1).ok).toBe(true);
  });

  it("per-team monthly budget refuses with scope team and resets with the month", () => {
    let now = Date.parse("2026-03-31T23:00:00Z");
    const b = new Budgets(() => now);
    b.setTeamBudget("red", 1);
    b.setTrial("t", { team: "red" });
    const r = b.reserve(cred("t"), 0.9);
    if (!r.ok) throw new Error("refused");
    b.settle(r.id, 0.9);
    expect(b.reserve(cred("t"), 0.2)).toMatchObject({ ok: false, scope: "team", message: expect.stringMatching(/^team: team red/) });
    now = Date.parse("2026-04-01T00:00:01Z");
    expect(b.reserve(cred("t"), 0.2).ok).toBe(true);
    expect(b.teamSpend("red", "2026-03").spentUsd).toBe(0.9);
    expect(b.teamSpend("red")).toMatchObject({ spentUsd: 0, reservedUsd: 0.2 });
  });

  it("the global stop refuses with scope other; requests in flight still settle", () => {
    const b = new Budgets();
    const r = b.reserve(cred("t"), 0.1);
    b.stop("operator stopped all spending");
    expect(b.reserve(cred("t"), 0.1)).toEqual({ ok: false, scope: "other", message: "other: operator stopped all spending" });
    if (r.ok) b.settle(r.id, 0.05);
    expect(b.globalSpend()).toMatchObject({ spentUsd: 0.05, reservedUsd: 0 });
    b.resume();
    expect(b.reserve(cred("t"), 0.1).ok).toBe(true);
  });

  it("a global cap refuses with scope other", () => {
    const b = new Budgets();
    b.setGlobalCap(0.1);
    expect(b.reserve(cred("a"), 0.06).ok).toBe(true);
    expect(b.reserve(cred("b"), 0.06)).toMatchObject({ ok: false, scope: "other", message: expect.stringMatching(/^other: global/) });
  });

  it("judge and agent lanes are counted apart; the agent cap does not stop the judge", () => {
    const b = new Budgets();
    b.setTrial("t", { capUsd: 0.1, judgeCapUsd: 0.5 });
    expect(b.reserve(cred("t"), 0.1).ok).toBe(true);
    expect(b.reserve(cred("t"), 0.01).ok).toBe(false);
    expect(b.reserve(cred("t", "judge"), 0.4).ok).toBe(true);
    expect(b.trialSpend("t", "judge")).toMatchObject({ reservedUsd: 0.4, limitUsd: 0.5 });
  });

  it("an unpriceable request is refused where a cap applies and admitted (flagged) where none does", () => {
    const b = new Budgets();
    b.setTrial("capped", { capUsd: 5 });
    expect(b.reserve(cred("capped"), null)).toMatchObject({ ok: false, scope: "trial", message: expect.stringMatching(/cannot be bounded/) });
    const r = b.reserve(cred("free"), null);
    expect(r).toMatchObject({ ok: true, reservedUsd: 0 });
    if (r.ok) b.settle(r.id, null);
    expect(b.trialSpend("free")).toEqual({ spentUsd: 0, reservedUsd: 0, unpricedCalls: 1 });
    b.setUserCredits("u", 10);
    b.setTrial("t2", { user: "u" });
    expect(b.reserve(cred("t2"), null)).toMatchObject({ ok: false, scope: "user" });
  });
});

/** The gateway app served on a port in front of a scripted upstream, with its parts for a test to set and read. */
async function overTheWire() {
  const { ScriptedUpstream } = await import("../fixtures/upstream/server.ts");
  const { serveGateway } = await import("./serve.ts");
  const { serveFetch } = await import("../engine/runtime.ts");
  const { CallMeter } = await import("./meter.ts");
  const { Credentials } = await import("./credentials.ts");
  const { buildUpstreams } = await import("./upstreams.ts");
  const upstream = new ScriptedUpstream();
  await upstream.start();
  const prices = new Prices();
  const credentials = new Credentials();
  const budgets = new Budgets();
  const meter = new CallMeter();
  const serve = () =>
    serveGateway(
      {
        upstreams: buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-ant-real" } } }, {}),
        authenticate: credentials.authenticate,
        meter: meter.meter,
        budget: budgets,
        prices: (m, u) => prices.priceOf(m, u) ?? undefined,
      },
      { port: 0 },
      serveFetch,
    );
  return { upstream, prices, credentials, budgets, meter, serve };
}

describe("budget over the wire", () => {
  it("100 concurrent SDK requests through the gateway against a cap that admits about 10: metered spend stays under the cap", async () => {
    const { default: Anthropic } = await import("@anthropic-ai/sdk");
    const { upstream, prices, credentials, budgets, meter, serve } = await overTheWire();
    const { key } = credentials.issueAgent({ trialId: "wire" });
    // each answer costs nearly its worst case (1000 output tokens of 1000 allowed), so ~10 fit whatever the timing
    for (let i = 0; i < 100; i++) upstream.push({ text: "ok", usage: { input_tokens: 25, output_tokens: 1000 } });
    const body = { model: "claude-sonnet-4-5", max_tokens: 1000, messages: [{ role: "user" as const, content: "hi" }] };
    const worst = requestWorstCase(prices.priceOf("claude-sonnet-4-5"), body, JSON.stringify(body), JSON.stringify(body).length).usd!;
    const cap = 10.5 * worst;
    budgets.setTrial("wire", { capUsd: cap });
    const gw = await serve();
    try {
      const client = new Anthropic({ apiKey: key, baseURL: gw.url });
      const results = await Promise.all(
        Array.from({ length: 100 }, () =>
          client.messages.create(body).then(
            () => "ok" as const,
            (e: { status?: number }) => e.status,
          ),
        ),
      );
      const admitted = results.filter((r) => r === "ok").length;
      expect(results.filter((r) => r !== "ok")).toEqual(Array(100 - admitted).fill(429));
      expect(admitted).toBeGreaterThanOrEqual(10);
      expect(admitted).toBeLessThanOrEqual(11);
      // the SDK honoured x-should-retry: false, so upstream saw only the admitted calls
      expect(upstream.requests).toHaveLength(admitted);
      const recorded = meter.records("wire").reduce((s, c) => s + (c.cost_usd ?? 0), 0);
      expect(recorded).toBeLessThanOrEqual(cap);
      expect(budgets.trialSpend("wire")).toMatchObject({ reservedUsd: 0 });
      expect(budgets.trialSpend("wire").spentUsd).toBeCloseTo(recorded, 12);
    } finally {
      await gw.close();
      await upstream.close();
    }
  });

  it("a $0.02 credit refuses a call that can cost $0.024 (1h cache writes of a 12 KB prompt), and admits one whose worst case fits", async () => {
    const { default: Anthropic } = await import("@anthropic-ai/sdk");
    const { upstream, prices, credentials, budgets, meter, serve } = await overTheWire();
    const { key } = credentials.issueAgent({ trialId: "credit" });
    budgets.setUserCredits("u-credit", 0.02);
    budgets.setTrial("credit", { user: "u-credit" });
    const gw = await serve();
    // what the provider bills for this prompt written to the 1-hour cache: 11,000 tokens (fewer than its bytes) at
    // $2e-6 and 512 output tokens at $5e-6 = $0.02456, over the credit
    const billed = {
      id: "msg_1", type: "message", role: "assistant", model: "claude-haiku-4-5", content: [{ type: "text", text: "ok" }],
      stop_reason: "end_turn", stop_sequence: null,
      usage: { input_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 11_000, cache_creation: { ephemeral_1h_input_tokens: 11_000, ephemeral_5m_input_tokens: 0 }, output_tokens: 512 },
    };
    const prompt = "lorem ipsum dolor sit amet ".repeat(450);
    const big = {
      model: "claude-haiku-4-5",
      max_tokens: 512,
      system: [{ type: "text" as const, text: prompt, cache_control: { type: "ephemeral" as const, ttl: "1h" as const } }],
      messages: [{ role: "user" as const, content: "hi" }],
    };
    try {
      const client = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
      const refused = await client.messages.create(big).then(() => undefined, (e: { status?: number; message?: string }) => e);
      expect(refused?.status).toBe(429);
      expect(refused?.message).toMatch(/user: user u-credit budget of \$0\.02 would be exceeded \(spent \$0\.00, in flight \$0\.00, this request up to \$0\.02[4-9]/);
      expect(upstream.requests).toHaveLength(0);

      // half the prompt: its worst case fits, so it is admitted, and what it is billed stays under what it reserved
      const half = { ...big, system: [{ ...big.system[0]!, text: prompt.slice(0, prompt.length / 2) }] };
      const halfBilled = { ...billed, usage: { ...billed.usage, cache_creation_input_tokens: 5_500, cache_creation: { ephemeral_1h_input_tokens: 5_500, ephemeral_5m_input_tokens: 0 } } };
      upstream.push({ body: halfBilled });
      const ok = await client.messages.create(half);
      expect(ok.usage.cache_creation_input_tokens).toBe(5_500);
      const [call] = meter.records("credit").filter((c) => c.status === 200);
      expect(call!.cost_usd).toBeCloseTo(5_500 * 2e-6 + 512 * 5e-6, 12);
      expect(budgets.userSpend("u-credit").spentUsd).toBeLessThanOrEqual(0.02);
      const bound = requestWorstCase(prices.priceOf("claude-haiku-4-5"), half, JSON.stringify(half), Buffer.byteLength(JSON.stringify(half))).usd!;
      expect(call!.cost_usd!).toBeLessThanOrEqual(bound);
    } finally {
      await gw.close();
      await upstream.close();
    }
  });
});

describe("a request's worst case", () => {
  const prices = new Prices();
  const bound = (model: string, body: Record<string, unknown>) => {
    const raw = JSON.stringify(body);
    return requestWorstCase(prices.priceOf(model), body, raw, Buffer.byteLength(raw));
  };

  it("counts a token per byte of the body (UTF-8), so a prompt of rare characters is bounded too", () => {
    const body = { model: "claude-haiku-4-5", max_tokens: 10, messages: [{ role: "user", content: "語".repeat(1000) }] };
    const bytes = Buffer.byteLength(JSON.stringify(body));
    expect(bytes).toBeGreaterThan(3000);
    expect(bound("claude-haiku-4-5", body).usd).toBeCloseTo(bytes * 2e-6 + 10 * 5e-6, 12);
  });

  it("without a limit in the request, assumes the model's max_output_tokens (Codex sends none)", () => {
    const body = { model: "gpt-5-codex", input: [{ role: "user", content: "hi" }], stream: true };
    const bytes = Buffer.byteLength(JSON.stringify(body));
    expect(bound("gpt-5-codex", body).usd).toBeCloseTo(bytes * 1.25e-6 + 128_000 * 1e-5, 12);
  });

  it("multiplies the output by n choices, adds the provider's tool prompt, and bounds stored state by the context window", () => {
    const one = bound("gpt-4o", { model: "gpt-4o", max_completion_tokens: 100, messages: [] }).usd!;
    const four = bound("gpt-4o", { model: "gpt-4o", max_completion_tokens: 100, n: 4, messages: [] }).usd!;
    // 300 more output tokens, and the 6 bytes of `"n":4,` as input
    expect(four - one).toBeCloseTo(300 * 1e-5 + 6 * 2.5e-6, 12);
    const tools = { model: "gpt-4o", max_completion_tokens: 100, messages: [], tools: [{ type: "function", function: { name: "a" } }] };
    expect(bound("gpt-4o", tools).usd).toBeCloseTo((Buffer.byteLength(JSON.stringify(tools)) + 2048) * 2.5e-6 + 100 * 1e-5, 12);
    const stored = { model: "gpt-5-codex", max_output_tokens: 10, previous_response_id: "resp_1", input: "go on" };
    expect(bound("gpt-5-codex", stored).usd).toBeCloseTo(272_000 * 1.25e-6 + 10 * 1e-5, 12);
  });

  it("no limit in the request and none in the price table: no bound, refused under a cap saying how to give one", () => {
    const local = new Prices({ "local/qwen": { input_cost_per_token: 1e-7, output_cost_per_token: 2e-7 } });
    const body = { model: "local/qwen", messages: [] };
    const b = requestWorstCase(local.priceOf("local/qwen"), body, JSON.stringify(body), 30);
    expect(b).toEqual({ usd: null, why: expect.stringMatching(/sets no output limit \(max_tokens\).*no max_output_tokens/) });
    const budgets = new Budgets();
    budgets.setTrial("capped", { capUsd: 1 });
    expect(budgets.reserve(cred("capped"), b.usd, b.why)).toMatchObject({ ok: false, message: expect.stringMatching(/cannot be bounded \(the request sets no output limit/) });
    // with a limit in the request it is bounded
    expect(requestWorstCase(local.priceOf("local/qwen"), { ...body, max_tokens: 100 }, "{}", 30).usd).toBeCloseTo(30 * 1e-7 + 100 * 2e-7, 15);
  });
});
