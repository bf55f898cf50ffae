/**
 * Reading token usage from provider responses and streams, exactly as peers.md §1.5 says, and pricing it.
 *
 * Our `Usage` uses Anthropic's disjoint buckets: `input_tokens` excludes cache reads and cache writes, and
 * `output_tokens` includes reasoning. OpenAI counts cached tokens inside `prompt_tokens`/`input_tokens`, so they are
 * subtracted here; that way one cost formula holds for every API.
 */
import type { Price, Usage } from "./types.ts";

/** The wire format a route speaks, which decides where usage sits. */
export type WireApi = "messages" | "chat" | "responses";

const n = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** Usage from an Anthropic `usage` object (a Message's, message_start's, or a message_delta's). */
export function anthropicUsage(u: any): Usage {
  return {
    input_tokens: n(u?.input_tokens),
    cached_read_tokens: n(u?.cache_read_input_tokens),
    cache_write_tokens: n(u?.cache_creation_input_tokens),
    output_tokens: n(u?.output_tokens),
    reasoning_tokens: 0, // Anthropic counts thinking inside output_tokens and reports no split
  };
}

/** Usage from an OpenAI chat `usage` object (prompt_tokens includes cached tokens). */
export function chatUsage(u: any): Usage {
  const cached = n(u?.prompt_tokens_details?.cached_tokens);
  return {
    input_tokens: Math.max(0, n(u?.prompt_tokens) - cached),
    cached_read_tokens: cached,
    cache_write_tokens: 0,
    output_tokens: n(u?.completion_tokens),
    reasoning_tokens: n(u?.completion_tokens_details?.reasoning_tokens),
  };
}

/** Usage from a Responses API `usage` object (input_tokens includes cached tokens). */
export function responsesUsage(u: any): Usage {
  const cached = n(u?.input_tokens_details?.cached_tokens);
  return {
    input_tokens: Math.max(0, n(u?.input_tokens) - cached),
    cached_read_tokens: cached,
    cache_write_tokens: 0,
    output_tokens: n(u?.output_tokens),
    reasoning_tokens: n(u?.output_tokens_details?.reasoning_tokens),
  };
}

/** Usage from a complete (non-streamed) JSON response body, or null when it carries none. */
export function usageFromJson(api: WireApi, body: any): Usage | null {
  const u = body?.usage;
  if (!u || typeof u !== "object") return null;
  return api === "messages" ? anthropicUsage(u) : api === "chat" ? chatUsage(u) : responsesUsage(u);
}

/**
 * Accumulates usage over one SSE stream, one event at a time. Callers hand it only the events that may carry usage
 * (see `mayCarryUsage`) so the hot path does not JSON-parse every text delta.
 */
export class StreamUsage {
  usage: Usage | null = null;
  /** An error event seen in the stream (Anthropic `error`, Responses `response.failed`/`error`). */
  error: string | undefined;
  /** Whether the terminal usage arrived (message_delta / usage chunk / response.completed). */
  final = false;

  constructor(readonly api: WireApi) {}

  /** Feed one parsed event's data (already JSON-parsed) with its SSE event name. */
  add(event: string | undefined, data: any): void {
    if (this.api === "messages") {
      const type = data?.type ?? event;
      if (type === "message_start") {
        this.usage = anthropicUsage(data?.message?.usage);
      } else if (type === "message_delta" && data?.usage) {
        // message_delta usage is cumulative and may omit fields: the last non-null value per field wins.
        const d = data.usage;
        const u = this.usage ?? anthropicUsage(undefined);
        if (d.input_tokens != null) u.input_tokens = n(d.input_tokens);
        if (d.cache_read_input_tokens != null) u.cached_read_tokens = n(d.cache_read_input_tokens);
        if (d.cache_creation_input_tokens != null) u.cache_write_tokens = n(d.cache_creation_input_tokens);
        if (d.output_tokens != null) u.output_tokens = n(d.output_tokens);
        this.usage = u;
        this.final = true;
      } else if (type === "error") {
        this.error = String(data?.error?.message ?? data?.error?.type ?? "stream error");
      }
      return;
    }
    if (this.api === "chat") {
      if (data?.usage && typeof data.usage === "object") {
        this.usage = chatUsage(data.usage);
        this.final = true;
      } else if (data?.error) {
        this.error = String(data.error.message ?? "stream error");
      }
      return;
    }
    const type = data?.type ?? event;
    if (type === "response.completed" || type === "response.incomplete" || type === "response.failed") {
      if (data?.response?.usage) {
        this.usage = responsesUsage(data.response.usage);
        this.final = true;
      }
      if (type === "response.failed") this.error = String(data?.response?.error?.message ?? "response failed");
    } else if (type === "error") {
      this.error = String(data?.message ?? data?.error?.message ?? "stream error");
    }
  }
}

const USAGE_OBJECT = /"usage"\s*:\s*\{/;

/**
 * Whether an SSE event can carry usage (or an error) and so is worth JSON-parsing. Anthropic and Responses name
 * their events; OpenAI chat does not, but only the usage chunk has a non-null `usage` object.
 */
export function mayCarryUsage(api: WireApi, event: string | undefined, data: string): boolean {
  if (api === "messages") {
    if (event !== undefined) return event === "message_start" || event === "message_delta" || event === "error";
    return data.includes('"message_start"') || data.includes('"message_delta"') || data.includes('"error"');
  }
  if (api === "chat") return USAGE_OBJECT.test(data) || data.startsWith('{"error"');
  if (event !== undefined) {
    return event === "response.completed" || event === "response.incomplete" || event === "response.failed" || event === "error";
  }
  return data.includes('"response.completed"') || data.includes('"response.incomplete"') || data.includes('"response.failed"') || data.includes('"type":"error"');
}

/**
 * The cost of a call in USD. Buckets are disjoint (see the module note); reasoning tokens are priced apart only
 * when the price says so, since they are already inside `output_tokens`.
 */
export function costOf(usage: Usage, price: Price): number {
  const reasoningPrice = price.output_cost_per_reasoning_token;
  const reasoning = reasoningPrice !== undefined ? Math.min(usage.reasoning_tokens, usage.output_tokens) : 0;
  return (
    usage.input_tokens * price.input_cost_per_token +
    usage.cached_read_tokens * (price.cache_read_input_token_cost ?? price.input_cost_per_token) +
    usage.cache_write_tokens * (price.cache_creation_input_token_cost ?? price.input_cost_per_token) +
    (usage.output_tokens - reasoning) * price.output_cost_per_token +
    reasoning * (reasoningPrice ?? 0)
  );
}
