/**
 * Model prices and the cost of one call.
 *
 * The shipped table (`prices.json`) is in LiteLLM's key grammar, USD per token, with the numbers taken from
 * LiteLLM's `model_prices_and_context_window.json` (BerriAI/litellm, stored commit 00035b6) for the Anthropic
 * claude 4.x/5 and OpenAI gpt-4o/4.1/5.x and o-series models. A user override file `$EVOLVE_HOME/prices.json` or
 * `$EVOLVE_HOME/prices.toml` in the same grammar wins entry by entry. An unknown model has no price: callers get
 * `null`, never 0, so a spend that cannot be priced is never shown as free.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import shipped from "./prices.json" with { type: "json" };
import type { Price, Usage } from "./types.ts";

/** One long-context tier: above `aboveTokens` prompt tokens these per-token prices replace the base ones. */
export interface PriceTier {
  aboveTokens: number;
  input_cost_per_token?: number;
  output_cost_per_token?: number;
  cache_read_input_token_cost?: number;
  cache_creation_input_token_cost?: number;
}

/** A resolved table entry: the contract's `Price` plus what the gateway also uses (provider, limits, tiers). */
export interface PriceEntry extends Price {
  /** LiteLLM's `litellm_provider` (`anthropic`, `openai`, …) when the entry names it. */
  litellm_provider?: string;
  /** Anthropic 1-hour cache writes (LiteLLM `cache_creation_input_token_cost_above_1hr`). */
  cache_creation_input_token_cost_above_1hr?: number;
  max_input_tokens?: number;
  max_output_tokens?: number;
  /** Long-context tiers from `<field>_above_<N>k_tokens` keys, highest threshold first. */
  tiers?: PriceTier[];
}

/** A price table: model name → entry. */
export type PriceTable = Record<string, PriceEntry>;

/** Called once per unknown model name so the caller can log it (metered in tokens, cost unknown). */
export type PriceWarning = (message: string) => void;

const PRICE_FIELDS = [
  "input_cost_per_token",
  "output_cost_per_token",
  "cache_read_input_token_cost",
  "cache_creation_input_token_cost",
  "cache_creation_input_token_cost_above_1hr",
  "output_cost_per_reasoning_token",
  "max_input_tokens",
  "max_output_tokens",
] as const;

const TIER_KEY = /^(input_cost_per_token|output_cost_per_token|cache_read_input_token_cost|cache_creation_input_token_cost)_above_(\d+)k_tokens$/;

function isPrice(v: unknown): v is number {
  return typeof v === "number" && Number.isFinite(v) && v >= 0;
}

/**
 * Validates one raw LiteLLM entry. A mispriced entry is refused at load rather than trusted (LiteLLM issues
 * #22726/#20615: one bad entry left keys permanently over budget). Entries without both base prices (images,
 * embeddings, `sample_spec`) are skipped: they do not price chat tokens.
 */
function toEntry(name: string, raw: unknown, where: string): PriceEntry | undefined {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return undefined;
  const r = raw as Record<string, unknown>;
  if (r.input_cost_per_token === undefined && r.output_cost_per_token === undefined) return undefined;
  const e: Record<string, unknown> = {};
  for (const f of PRICE_FIELDS) {
    if (r[f] === undefined) continue;
    if (!isPrice(r[f])) throw new Error(`${where}: ${name}.${f} must be a non-negative number, got ${JSON.stringify(r[f])}`);
    e[f] = r[f];
  }
  if (!isPrice(e.input_cost_per_token) || !isPrice(e.output_cost_per_token)) {
    throw new Error(`${where}: ${name} needs both input_cost_per_token and output_cost_per_token`);
  }
  if (typeof r.litellm_provider === "string") e.litellm_provider = r.litellm_provider;
  const tiers = new Map<number, PriceTier>();
  for (const [k, v] of Object.entries(r)) {
    const m = TIER_KEY.exec(k);
    if (!m) continue;
    if (!isPrice(v)) throw new Error(`${where}: ${name}.${k} must be a non-negative number`);
    const above = Number(m[2]) * 1000;
    const t = tiers.get(above) ?? { aboveTokens: above };
    (t as unknown as Record<string, number>)[m[1]!] = v;
    tiers.set(above, t);
  }
  if (tiers.size) e.tiers = [...tiers.values()].sort((a, b) => b.aboveTokens - a.aboveTokens);
  return e as unknown as PriceEntry;
}

/** Turns a parsed LiteLLM-grammar object into a validated table (throws naming the bad entry). */
export function parsePriceTable(raw: unknown, where = "prices"): PriceTable {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new Error(`${where}: expected an object of model entries`);
  const out: PriceTable = {};
  for (const [name, v] of Object.entries(raw as Record<string, unknown>)) {
    if (name === "sample_spec") continue;
    const e = toEntry(name, v, where);
    if (e) out[name] = e;
  }
  return out;
}

/** The table shipped with evolve. */
export const SHIPPED_PRICES: PriceTable = parsePriceTable(shipped, "gateway/prices.json");

/**
 * Reads the user's override table from `home` (`prices.json`, else `prices.toml`); absent is an empty table.
 * TOML model names with dots or slashes must be quoted keys (`["anthropic/claude-x"]`).
 */
export function loadPriceOverrides(home: string): PriceTable {
  const json = join(home, "prices.json");
  if (existsSync(json)) return parsePriceTable(JSON.parse(readFileSync(json, "utf8")), json);
  const toml = join(home, "prices.toml");
  if (existsSync(toml)) return parsePriceTable(parseToml(readFileSync(toml, "utf8")), toml);
  return {};
}

const PROVIDER_PREFIX = /^(anthropic|openai|azure|openrouter|bedrock|vertex_ai)\//;
/** Anthropic `-20250929`, OpenAI `-2025-08-07`, and a trailing `-latest`. */
const DATE_SUFFIX = /-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$/;

const MEMO_MAX = 4096;

/** Resolves model names against the shipped table and the user's overrides. */
export class Prices {
  private readonly warned = new Set<string>();
  /** Lookups by name: the tables never change, and each call would otherwise run four regex rewrites. */
  private readonly memo = new Map<string, PriceEntry | null>();

  /**
   * @param overrides entries that win over the shipped ones, name by name.
   * @param onUnknown called once per unknown model (so a run logs each one, not each call).
   */
  constructor(
    private readonly overrides: PriceTable = {},
    private readonly onUnknown?: PriceWarning,
    private readonly base: PriceTable = SHIPPED_PRICES,
  ) {}

  /** A `Prices` with `$EVOLVE_HOME`'s override file applied. */
  static fromHome(home: string, onUnknown?: PriceWarning): Prices {
    return new Prices(loadPriceOverrides(home), onUnknown);
  }

  /**
   * The price of `model`, or null when unknown. Tries, in order: the exact name (so an override can price
   * `anthropic/x` apart from `x`), the name without its provider prefix, then each without a date suffix
   * (`claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`), since providers answer with dated names.
   * The overrides are searched first under every form, so overriding `claude-sonnet-4-5` also reprices the
   * shipped `claude-sonnet-4-5-20250929`. `alsoTry` are other names of the same model (the upstream's own name
   * of a routed one), tried after `model`'s forms; an unknown model is warned about once, under `model`.
   */
  priceOf(model: string, ...alsoTry: string[]): PriceEntry | null {
    let found = this.lookup(model);
    for (const other of alsoTry) found ??= this.lookup(other);
    if (!found && !this.warned.has(model)) {
      // names come from clients: past the bound a model may be warned about again, memory stays bounded
      if (this.warned.size >= MEMO_MAX) this.warned.clear();
      this.warned.add(model);
      this.onUnknown?.(`no price for model "${model}": metered in tokens, cost unknown`);
    }
    return found;
  }

  private lookup(model: string): PriceEntry | null {
    const hit = this.memo.get(model);
    if (hit !== undefined) return hit;
    // names come from clients, so the memo is bounded: past the bound it starts over
    if (this.memo.size >= MEMO_MAX) this.memo.clear();
    const found = this.search(model);
    this.memo.set(model, found);
    return found;
  }

  private search(model: string): PriceEntry | null {
    const bare = model.replace(PROVIDER_PREFIX, "");
    const names = [model, bare, model.replace(DATE_SUFFIX, ""), bare.replace(DATE_SUFFIX, "")];
    for (const table of [this.overrides, this.base]) {
      for (const name of names) {
        if (Object.hasOwn(table, name)) return table[name]!;
      }
    }
    return null;
  }

  /** Prices one call; null when the model is unknown or usage is missing. */
  costOfCall(model: string, usage: Usage | null): number | null {
    if (!usage) return null;
    const p = this.priceOf(model);
    return p ? costOf(usage, p) : null;
  }
}

/** The tier that applies to a prompt of `promptTokens` (all input, cached or not), if any. */
function tierFor(price: Price, promptTokens: number): PriceTier | undefined {
  return (price as PriceEntry).tiers?.find((t) => promptTokens > t.aboveTokens);
}

/**
 * USD cost of one call. `usage` is the gateway's normalized shape (see `Usage`): the input buckets are
 * disjoint — `input_tokens` is uncached input only — and `reasoning_tokens` is a part of `output_tokens`,
 * priced at `output_cost_per_reasoning_token` when the table has one and at the output price otherwise.
 * Cache reads and writes fall back to the input price when the entry has no cache price (a self-hosted model
 * priced by the user with two numbers). Build `usage` with `usageFromAnthropic` / `usageFromOpenAIChat` /
 * `usageFromOpenAIResponses`, which apply each provider's containment rules.
 */
export function costOf(usage: Usage, price: Price): number {
  const prompt = usage.input_tokens + usage.cached_read_tokens + usage.cache_write_tokens;
  const tier = tierFor(price, prompt);
  const input = tier?.input_cost_per_token ?? price.input_cost_per_token;
  const output = tier?.output_cost_per_token ?? price.output_cost_per_token;
  const read = tier?.cache_read_input_token_cost ?? price.cache_read_input_token_cost ?? input;
  const write = tier?.cache_creation_input_token_cost ?? price.cache_creation_input_token_cost ?? input;
  const write1hPrice = (price as PriceEntry).cache_creation_input_token_cost_above_1hr ?? write;
  const write1h = Math.min(usage.cache_write_1h_tokens ?? 0, usage.cache_write_tokens);
  const reasoning = Math.min(usage.reasoning_tokens, usage.output_tokens);
  const reasoningPrice = price.output_cost_per_reasoning_token ?? output;
  return (
    usage.input_tokens * input +
    usage.cached_read_tokens * read +
    (usage.cache_write_tokens - write1h) * write +
    write1h * write1hPrice +
    (usage.output_tokens - reasoning) * output +
    reasoning * reasoningPrice
  );
}

/**
 * The most a request can cost: all `inputTokens` at the highest input-side price the model has (a prompt may be
 * written to cache, which costs more than plain input) and `maxTokens` of output at the highest output-side
 * price, both at the long-context tier when the prompt reaches it. Null when the price is unknown: the budget
 * decides what an unpriceable request means (see budget.ts). `maxTokens` absent falls back to the model's
 * `max_output_tokens`; if that is unknown too the result is null, since no upper bound exists.
 */
export function worstCaseUsd(price: Price | null, inputTokens: number, maxTokens?: number): number | null {
  if (!price) return null;
  const e = price as PriceEntry;
  const out = maxTokens ?? e.max_output_tokens;
  if (out === undefined) return null;
  const tier = tierFor(price, inputTokens);
  const inputSide = Math.max(
    tier?.input_cost_per_token ?? price.input_cost_per_token,
    tier?.cache_creation_input_token_cost ?? price.cache_creation_input_token_cost ?? 0,
    e.cache_creation_input_token_cost_above_1hr ?? 0,
  );
  const outputSide = Math.max(tier?.output_cost_per_token ?? price.output_cost_per_token, price.output_cost_per_reasoning_token ?? 0);
  return inputTokens * inputSide + out * outputSide;
}

/**
 * Prompt tokens a provider adds to a request with `tools` that its body does not spell out: Anthropic's tool-use
 * system prompt (346 tokens), computer-use tool definitions (~1,500). Chat templates add a few tokens per message,
 * which the message's own JSON framing already outweighs in bytes.
 */
export const PROVIDER_ADDED_TOKENS = 2048;

/**
 * Content a request points at instead of carrying: Responses' stored state (`previous_response_id`,
 * `conversation`), uploaded files (`file_id`) and URL sources (images, documents). Its tokens are not in the body.
 */
const OUTSIDE_BODY = /"(?:previous_response_id|conversation|file_id)"\s*:\s*["{]|"type"\s*:\s*"url"|"(?:image_)?url"\s*:\s*"https?:/;

/** The output limits a request may set, by wire API: Messages `max_tokens`, chat `max_completion_tokens`/`max_tokens`, Responses `max_output_tokens`. */
const OUTPUT_LIMITS = ["max_tokens", "max_completion_tokens", "max_output_tokens"] as const;

/** A request's worst-case cost, or null with the reason no bound exists. */
export type RequestBound = { usd: number; why?: undefined } | { usd: null; why: string };

/**
 * The most one request can cost, as its reservation (a true upper bound; README "Budgets"):
 * - output: the largest limit the request sets (times `n` choices on chat), else the model's `max_output_tokens`;
 * - input: one token per byte of the body (a token always covers at least one byte of the text it encodes; JSON
 *   framing only adds bytes), plus `PROVIDER_ADDED_TOKENS` when it has `tools`; a request that points at content outside its body
 *   (`OUTSIDE_BODY`) is bounded by the model's `max_input_tokens` instead;
 * - both at the dearest price of their side (`worstCaseUsd`).
 * No price, no output bound (no limit in the request, no `max_output_tokens` for the model) or outside content with
 * no `max_input_tokens`: null, which a capped budget refuses. Server-side tools (web search, code execution) that
 * sample several times on the provider's side can exceed the bound; it covers what one sampling can cost.
 */
export function requestWorstCase(price: Price | null, body: Record<string, unknown>, raw: string, bodyBytes: number): RequestBound {
  if (!price) return { usd: null, why: "model has no price" };
  const e = price as PriceEntry;
  let asked: number | undefined;
  for (const k of OUTPUT_LIMITS) {
    const v = body[k];
    if (typeof v === "number" && Number.isInteger(v) && v > 0) asked = Math.max(asked ?? 0, v);
  }
  const out = asked ?? e.max_output_tokens;
  if (out === undefined) {
    return { usd: null, why: "the request sets no output limit (max_tokens) and the price table has no max_output_tokens for the model" };
  }
  const n = body.n;
  const choices = typeof n === "number" && Number.isInteger(n) && n > 1 ? n : 1;
  let input = bodyBytes + (raw.includes('"tools"') ? PROVIDER_ADDED_TOKENS : 0);
  if (OUTSIDE_BODY.test(raw)) {
    if (e.max_input_tokens === undefined) {
      return { usd: null, why: "the request refers to content outside its body and the price table has no max_input_tokens for the model" };
    }
    input = Math.max(input, e.max_input_tokens);
  }
  return { usd: worstCaseUsd(price, input, out * choices)! };
}
