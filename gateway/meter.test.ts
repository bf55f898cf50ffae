import { describe, expect, it } from "vitest";
import { CallMeter, usageEvent, usageEvents } from "./meter.ts";
import { Prices } from "./prices.ts";
import { usageFromAnthropic } from "./usage.ts";
import type { CallRecord } from "./types.ts";

let n = 0;
function call(over: Partial<CallRecord> = {}): CallRecord {
  return {
    id: `call-${++n}`,
    credentialId: "cred-1",
    trialId: "t1",
    jobId: "j1",
    lane: "agent",
    route: "messages",
    upstream: "anthropic",
    model: "claude-sonnet-4-5",
    stream: true,
    status: 200,
    usage: { input_tokens: 100, cached_read_tokens: 1000, cache_write_tokens: 50, output_tokens: 20, reasoning_tokens: 0 },
    cost_usd: 0.001,
    latency_ms: 12,
    started_at: `2026-01-01T00:00:${String(n % 60).padStart(2, "0")}.000Z`,
    ...over,
  };
}

describe("call meter", () => {
  it("aggregates per trial and lane, judge apart from agent, and per job", () => {
    const m = new CallMeter();
    m.meter(call());
    m.meter(call({ cost_usd: 0.002 }));
    m.meter(call({ lane: "judge", cost_usd: 0.0005 }));
    m.meter(call({ trialId: "t2", cost_usd: 1 }));
    const t = m.trial("t1");
    expect(t.agent.calls).toBe(2);
    expect(t.agent.spentUsd).toBeCloseTo(0.003, 12);
    expect(t.agent.tokens).toEqual({ input_tokens: 200, cached_read_tokens: 2000, cache_write_tokens: 100, output_tokens: 40, reasoning_tokens: 0 });
    expect(t.judge).toMatchObject({ calls: 1, spentUsd: 0.0005 });
    expect(m.liveSpentUsd("t1")).toBeCloseTo(0.003, 12);
    expect(m.liveSpentUsd("t1", "judge")).toBe(0.0005);
    expect(m.job("j1").agent.spentUsd).toBeCloseTo(1.003, 12);
    expect(m.trial("nope").agent.calls).toBe(0);
  });

  it("live spend is a lower bound: unknown cost adds tokens, no money, and is flagged", () => {
    const m = new CallMeter();
    m.meter(call({ model: "local-llama", cost_usd: null }));
    m.meter(call({ cost_usd: 0.01 }));
    m.meter(call({ status: 429, usage: null, cost_usd: null, error: "budget" }));
    const a = m.trial("t1").agent;
    expect(a.spentUsd).toBe(0.01);
    expect(a.unpricedCalls).toBe(1);
    expect(a.errors).toBe(1);
    expect(a.tokens.output_tokens).toBe(40);
  });

  it("hands every record to the sink; a failing sink is reported, never thrown", () => {
    const got: string[] = [];
    const errs: unknown[] = [];
    const m = new CallMeter({
      sink: (c) => {
        got.push(c.id);
        if (got.length === 2) throw new Error("disk full");
      },
      onSinkError: (e) => errs.push(e),
    });
    const a = call();
    const b = call();
    m.meter(a);
    expect(() => m.meter(b)).not.toThrow();
    expect(got).toEqual([a.id, b.id]);
    expect(errs).toHaveLength(1);
    expect(m.records("t1").map((c) => c.id)).toEqual([a.id, b.id]);
    m.forget("t1");
    expect(m.records("t1")).toEqual([]);
  });
});

describe("gateway usage events for the parsed trace", () => {
  it("one usage event per call, source gateway, tokens and priced cost", () => {
    const prices = new Prices();
    const usage = usageFromAnthropic({ input_tokens: 1000, cache_read_input_tokens: 20_000, cache_creation_input_tokens: 4000, output_tokens: 500 });
    const c = call({ usage, cost_usd: prices.costOfCall("claude-sonnet-4-5", usage) });
    expect(usageEvent(c)).toEqual({
      type: "usage",
      data: {
        update: {
          sessionUpdate: "usage",
          source: "gateway",
          scope: "call",
          model: "claude-sonnet-4-5",
          lane: "agent",
          usage: {
            promptTokens: 25_000,
            completionTokens: 500,
            inputTokens: 1000,
            cachedReadTokens: 20_000,
            cachedWriteTokens: 4000,
            thoughtTokens: 0,
            totalTokens: 25_500,
          },
          cost_usd: expect.closeTo(0.0315, 12),
          started_at: c.started_at,
          latency_ms: 12,
        },
      },
    });
  });

  it("unknown cost stays null; calls without usage produce no event; order follows started_at", () => {
    expect(usageEvent(call({ cost_usd: null }))!.data.update.cost_usd).toBeNull();
    expect(usageEvent(call({ usage: null, status: 401 }))).toBeUndefined();
    const late = call({ started_at: "2026-01-01T00:01:00.000Z", model: "late" });
    const early = call({ started_at: "2026-01-01T00:00:00.500Z", model: "early" });
    const none = call({ usage: null });
    expect(usageEvents([late, none, early]).map((e) => e.data.update.model)).toEqual(["early", "late"]);
  });
});
