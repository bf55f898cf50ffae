import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  costOf,
  parsePriceTable,
  Prices,
  SHIPPED_PRICES,
  worstCaseUsd,
} from "./prices.ts";
import { usageFromAnthropic, usageFromOpenAIChat, usageFromOpenAIResponses } from "./usage.ts";

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), "evolve-prices-"));
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe("shipped price table (LiteLLM numbers)", () => {
  it("prices current Anthropic and OpenAI models per token", () => {
    const p = new Prices();
    expect(p.priceOf("claude-sonnet-4-5")).toMatchObject({
      input_cost_per_token: 3e-6,
      output_cost_per_token: 1.5e-5,
      cache_read_input_token_cost: 3e-7,
      cache_creation_input_token_cost: 3.75e-6,
      litellm_provider: "anthropic",
    });
    expect(p.priceOf("claude-opus-4-5")).toMatchObject({ input_cost_per_token: 5e-6, output_cost_per_token: 2.5e-5 });
    expect(p.priceOf("claude-haiku-4-5")).toMatchObject({ input_cost_per_token: 1e-6, output_cost_per_token: 5e-6, cache_read_input_token_cost: 1e-7 });
    expect(p.priceOf("gpt-5")).toMatchObject({ input_cost_per_token: 1.25e-6, output_cost_per_token: 1e-5, cache_read_input_token_cost: 1.25e-7 });
    expect(p.priceOf("gpt-4.1")).toMatchObject({ input_cost_per_token: 2e-6, output_cost_per_token: 8e-6, cache_read_input_token_cost: 5e-7 });
    expect(p.priceOf("gpt-4o")).toMatchObject({ input_cost_per_token: 2.5e-6, output_cost_per_token: 1e-5 });
    expect(p.priceOf("o4-mini")).toMatchObject({ input_cost_per_token: 1.1e-6, output_cost_per_token: 4.4e-6 });
    expect(p.priceOf("o3")).toMatchObject({ input_cost_per_token: 2e-6, output_cost_per_token: 8e-6 });
  });

  it("every shipped entry is valid and the table skips sample_spec", () => {
    expect(Object.keys(SHIPPED_PRICES).length).toBeGreaterThan(40);
    expect(parsePriceTable({ sample_spec: { input_cost_per_token: 0 }, x: { input_cost_per_token: 1, output_cost_per_token: 2 } })).toEqual({
      x: { input_cost_per_token: 1, output_cost_per_token: 2 },
    });
    expect(() => parsePriceTable({ bad: { input_cost_per_token: -1, output_cost_per_token: 1 } })).toThrow(/bad\.input_cost_per_token/);
    expect(() => parsePriceTable({ bad: { input_cost_per_token: 1 } })).toThrow(/needs both/);
  });

  it("resolves provider prefixes and dated aliases", () => {
    const p = new Prices();
    const sonnet = p.priceOf("claude-sonnet-4-5");
    expect(p.priceOf("anthropic/claude-sonnet-4-5")).toBe(sonnet);
    expect(p.priceOf("anthropic/claude-sonnet-4-5-20250929")).toEqual(sonnet);
    expect(p.priceOf("claude-opus-4-7-20991231")).toEqual(p.priceOf("claude-opus-4-7"));
    expect(p.priceOf("openai/gpt-4.1-2099-01-01")).toEqual(p.priceOf("gpt-4.1"));
    expect(p.priceOf("openai/gpt-5-mini")).toEqual(p.priceOf("gpt-5-mini"));
  });

  it("unknown model → null (never 0) with one warning per model", () => {
    const warnings: string[] = [];
    const p = new Prices({}, (m) => warnings.push(m));
    expect(p.priceOf("llama-local-7b")).toBeNull();
    expect(p.priceOf("llama-local-7b")).toBeNull();
    expect(p.costOfCall("llama-local-7b", { input_tokens: 10, cached_read_tokens: 0, cache_write_tokens: 0, output_tokens: 5, reasoning_tokens: 0 })).toBeNull();
    expect(warnings).toEqual(['no price for model "llama-local-7b": metered in tokens, cost unknown']);
    expect(worstCaseUsd(null, 100, 100)).toBeNull();
  });
});

describe("cost of a call under each provider's usage semantics", () => {
  it("Anthropic: input excludes cache reads and writes (disjoint buckets)", () => {
    const u = usageFromAnthropic({ input_tokens: 1000, cache_read_input_tokens: 20_000, cache_creation_input_tokens: 4000, output_tokens: 500 });
    expect(u).toEqual({ input_tokens: 1000, cached_read_tokens: 20_000, cache_write_tokens: 4000, output_tokens: 500, reasoning_tokens: 0 });
    const cost = costOf(u, new Prices().priceOf("claude-sonnet-4-5")!);
    // 1000×3e-6 + 20000×3e-7 + 4000×3.75e-6 + 500×1.5e-5 = 0.003 + 0.006 + 0.015 + 0.0075
    expect(cost).toBeCloseTo(0.0315, 12);
  });

  it("Anthropic: 1-hour cache writes are priced at the 1h rate", () => {
    const u = usageFromAnthropic({
      input_tokens: 0,
      cache_creation_input_tokens: 1000,
      cache_creation: { ephemeral_5m_input_tokens: 400, ephemeral_1h_input_tokens: 600 },
      output_tokens: 0,
    });
    // 400×3.75e-6 + 600×6e-6
    expect(costOf(u, new Prices().priceOf("claude-sonnet-4-5")!)).toBeCloseTo(0.0015 + 0.0036, 12);
  });

  it("OpenAI chat: prompt_tokens includes cached_tokens; reasoning is inside completion_tokens", () => {
    const u = usageFromOpenAIChat({
      prompt_tokens: 10_000,
      completion_tokens: 2000,
      prompt_tokens_details: { cached_tokens: 8000 },
      completion_tokens_details: { reasoning_tokens: 1500 },
    });
    expect(u).toEqual({ input_tokens: 2000, cached_read_tokens: 8000, cache_write_tokens: 0, output_tokens: 2000, reasoning_tokens: 1500 });
    // gpt-5: 2000×1.25e-6 + 8000×1.25e-7 + 2000×1e-5 (reasoning billed as output) = 0.0025 + 0.001 + 0.02
    expect(costOf(u, new Prices().priceOf("gpt-5")!)).toBeCloseTo(0.0235, 12);
  });

  it("OpenAI Responses: input_tokens includes cached; output includes reasoning", () => {
    const u = usageFromOpenAIResponses({
      input_tokens: 5000,
      input_tokens_details: { cached_tokens: 4000 },
      output_tokens: 300,
      output_tokens_details: { reasoning_tokens: 200 },
    });
    expect(u).toEqual({ input_tokens: 1000, cached_read_tokens: 4000, cache_write_tokens: 0, output_tokens: 300, reasoning_tokens: 200 });
    // gpt-4.1: 1000×2e-6 + 4000×5e-7 + 300×8e-6
    expect(costOf(u, new Prices().priceOf("gpt-4.1")!)).toBeCloseTo(0.002 + 0.002 + 0.0024, 12);
  });

  it("a reasoning price, when the table has one, applies to the reasoning share only", () => {
    const price = { input_cost_per_token: 1, output_cost_per_token: 2, output_cost_per_reasoning_token: 3 };
    expect(costOf({ input_tokens: 0, cached_read_tokens: 0, cache_write_tokens: 0, output_tokens: 10, reasoning_tokens: 4 }, price)).toBe(6 * 2 + 4 * 3);
  });

  it("the long-context tier applies above its threshold", () => {
    const p = new Prices().priceOf("claude-sonnet-4-5")!;
    const small = { input_tokens: 100_000, cached_read_tokens: 0, cache_write_tokens: 0, output_tokens: 1000, reasoning_tokens: 0 };
    expect(costOf(small, p)).toBeCloseTo(100_000 * 3e-6 + 1000 * 1.5e-5, 12);
    const big = { ...small, input_tokens: 150_000, cached_read_tokens: 60_000 };
    expect(costOf(big, p)).toBeCloseTo(150_000 * 6e-6 + 60_000 * 6e-7 + 1000 * 2.25e-5, 12);
  });

  it("worst case = input at the dearest input-side price + max_tokens at the output price", () => {
    const p = new Prices().priceOf("claude-sonnet-4-5")!;
    // the 1-hour cache-write price (6e-6) is the dearest way to send a prompt
    expect(worstCaseUsd(p, 1000, 100)).toBeCloseTo(1000 * 6e-6 + 100 * 1.5e-5, 12);
    const g = new Prices().priceOf("gpt-4o")!;
    expect(worstCaseUsd(g, 1000, 100)).toBeCloseTo(1000 * 2.5e-6 + 100 * 1e-5, 12);
    // no max_tokens: the model's max_output_tokens bounds the answer
    expect(worstCaseUsd(g, 0)).toBeCloseTo(16384 * 1e-5, 12);
    expect(worstCaseUsd({ input_cost_per_token: 1, output_cost_per_token: 1 }, 10)).toBeNull();
  });
});

describe("user override file", () => {
  it("$EVOLVE_HOME/prices.json wins entry by entry and adds models", () => {
    const home = tmp();
    writeFileSync(
      join(home, "prices.json"),
      JSON.stringify({ "claude-sonnet-4-5": { input_cost_per_token: 1e-6, output_cost_per_token: 2e-6 }, "my-vllm": { input_cost_per_token: 0, output_cost_per_token: 0 } }),
    );
    const p = Prices.fromHome(home);
    expect(p.priceOf("anthropic/claude-sonnet-4-5-20250929")).toMatchObject({ input_cost_per_token: 1e-6, output_cost_per_token: 2e-6 });
    expect(p.priceOf("my-vllm")).toEqual({ input_cost_per_token: 0, output_cost_per_token: 0 });
    expect(p.priceOf("gpt-4o")).toMatchObject({ input_cost_per_token: 2.5e-6 });
  });

  it("$EVOLVE_HOME/prices.toml in the same grammar", () => {
    const home = tmp();
    writeFileSync(join(home, "prices.toml"), '["gpt-4o"]\ninput_cost_per_token = 1e-9\noutput_cost_per_token = 2e-9\n');
    expect(Prices.fromHome(home).priceOf("openai/gpt-4o")).toEqual({ input_cost_per_token: 1e-9, output_cost_per_token: 2e-9 });
  });

  it("a bad override is refused naming the file and entry", () => {
    const home = tmp();
    writeFileSync(join(home, "prices.json"), JSON.stringify({ x: { input_cost_per_token: "cheap", output_cost_per_token: 1 } }));
    expect(() => Prices.fromHome(home)).toThrow(/prices\.json: x\.input_cost_per_token/);
  });

  it("no override file → shipped table", () => {
    expect(Prices.fromHome(tmp()).priceOf("gpt-5")).toBe(SHIPPED_PRICES["gpt-5"]);
  });
});
