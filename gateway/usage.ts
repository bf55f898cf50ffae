/**
 * Reading token usage from provider responses and streams, exactly as peers.md §1.5 says (prices.ts prices it).
 *
 * Our `Usage` uses Anthropic's disjoint buckets: `input_tokens` excludes cache reads and cache writes, and
 * `output_tokens` includes reasoning. OpenAI counts cached tokens inside `prompt_tokens`/`input_tokens`, so they are
 * subtracted here; that way one cost formula holds for every API.
 */
import type { Usage } from "./types.ts";

/** The wire format a route speaks, which decides where usage sits. */
export type WireApi = "messages" | "chat" | "responses" | "gemini";

const n = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/**
 * Anthropic Messages `usage` → normalized usage. Anthropic's buckets are already disjoint: `input_tokens`
 * excludes `cache_read_input_tokens` and `cache_creation_input_tokens`; thinking is inside `output_tokens`
 * and not reported apart, so `reasoning_tokens` is 0. The 1-hour write share comes from
 * `cache_creation.ephemeral_1h_input_tokens` when present.
 */
export function usageFromAnthropic(raw: unknown): Usage {
  const u = (raw ?? {}) as Record<string, unknown>;
  const cc = (u.cache_creation ?? {}) as Record<string, unknown>;
  const write = n(u.cache_creation_input_tokens);
  const write1h = n(cc.ephemeral_1h_input_tokens);
  return {
    input_tokens: n(u.input_tokens),
    cached_read_tokens: n(u.cache_read_input_tokens),
    cache_write_tokens: write,
    ...(write1h ? { cache_write_1h_tokens: Math.min(write1h, write) } : {}),
    output_tokens: n(u.output_tokens),
    reasoning_tokens: 0,
  };
}

/**
 * OpenAI Chat Completions `usage` → normalized usage. `prompt_tokens` INCLUDES
 * `prompt_tokens_details.cached_tokens`, so uncached input is the difference; `completion_tokens` includes
 * `completion_tokens_details.reasoning_tokens`. OpenAI has no cache-write bucket.
 */
export function usageFromOpenAIChat(raw: unknown): Usage {
  const u = (raw ?? {}) as Record<string, unknown>;
  const pd = (u.prompt_tokens_details ?? {}) as Record<string, unknown>;
  const cd = (u.completion_tokens_details ?? {}) as Record<string, unknown>;
  const prompt = n(u.prompt_tokens);
  const cached = Math.min(n(pd.cached_tokens), prompt);
  const output = n(u.completion_tokens);
  return {
    input_tokens: prompt - cached,
    cached_read_tokens: cached,
    cache_write_tokens: 0,
    output_tokens: output,
    reasoning_tokens: Math.min(n(cd.reasoning_tokens), output),
  };
}

/**
 * OpenAI Responses `response.usage` → normalized usage: `input_tokens` includes
 * `input_tokens_details.cached_tokens`; `output_tokens` includes `output_tokens_details.reasoning_tokens`.
 */
export function usageFromOpenAIResponses(raw: unknown): Usage {
  const u = (raw ?? {}) as Record<string, unknown>;
  const id = (u.input_tokens_details ?? {}) as Record<string, unknown>;
  const od = (u.output_tokens_details ?? {}) as Record<string, unknown>;
  const input = n(u.input_tokens);
  const cached = Math.min(n(id.cached_tokens), input);
  const output = n(u.output_tokens);
  return {
    input_tokens: input - cached,
    cached_read_tokens: cached,
    cache_write_tokens: 0,
    output_tokens: output,
    reasoning_tokens: Math.min(n(od.reasoning_tokens), output),
  };
}

/**
 * Gemini `usageMetadata` → normalized usage. `promptTokenCount` INCLUDES `cachedContentTokenCount`;
 * `toolUsePromptTokenCount` (prompts of built-in tools) is billed as input beside it; `candidatesTokenCount`
 * EXCLUDES `thoughtsTokenCount`, which Google bills as output, so output is their sum and reasoning the thoughts.
 */
export function usageFromGemini(raw: unknown): Usage {
  const u = (raw ?? {}) as Record<string, unknown>;
  const prompt = n(u.promptTokenCount);
  const cached = Math.min(n(u.cachedContentTokenCount), prompt);
  const thoughts = n(u.thoughtsTokenCount);
  return {
    input_tokens: prompt - cached + n(u.toolUsePromptTokenCount),
    cached_read_tokens: cached,
    cache_write_tokens: 0,
    output_tokens: n(u.candidatesTokenCount) + thoughts,
    reasoning_tokens: thoughts,
  };
}

/** Usage from a complete (non-streamed) JSON response body, or null when it carries none. */
export function usageFromJson(api: WireApi, body: any): Usage | null {
  if (api === "gemini") {
    // streamGenerateContent without alt=sse answers a JSON array of chunks: the last one with usage is the total
    const chunk = Array.isArray(body) ? [...body].reverse().find((c) => c?.usageMetadata) : body;
    const m = chunk?.usageMetadata;
    return m && typeof m === "object" ? usageFromGemini(m) : null;
  }
  const u = body?.usage;
  if (!u || typeof u !== "object") return null;
  return api === "messages" ? usageFromAnthropic(u) : api === "chat" ? usageFromOpenAIChat(u) : usageFromOpenAIResponses(u);
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
        this.usage = usageFromAnthropic(data?.message?.usage);
      } else if (type === "message_delta" && data?.usage) {
        // message_delta usage is cumulative and may omit fields: the last non-null value per field wins.
        const d = data.usage;
        const u = this.usage ?? usageFromAnthropic(undefined);
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
    if (this.api === "gemini") {
      // Every chunk may carry usageMetadata, each cumulative: the last one is the total. The call is whole once a
      // chunk with usage names a finishReason (Google's last chunk does).
      if (data?.usageMetadata && typeof data.usageMetadata === "object") {
        this.usage = usageFromGemini(data.usageMetadata);
        if (Array.isArray(data.candidates) && data.candidates.some((c: any) => c?.finishReason)) this.final = true;
      }
      if (data?.error) this.error = String(data.error.message ?? data.error.status ?? "stream error");
      return;
    }
    if (this.api === "chat") {
      if (data?.usage && typeof data.usage === "object") {
        this.usage = usageFromOpenAIChat(data.usage);
        this.final = true;
      } else if (data?.error) {
        this.error = String(data.error.message ?? "stream error");
      }
      return;
    }
    const type = data?.type ?? event;
    if (type === "response.completed" || type === "response.incomplete" || type === "response.failed") {
      if (data?.response?.usage) {
        this.usage = usageFromOpenAIResponses(data.response.usage);
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
 * their events; OpenAI chat and Gemini do not (Gemini's chunks with usage name `usageMetadata`), but only the usage chunk has a non-null `usage` object.
 */
export function mayCarryUsage(api: WireApi, event: string | undefined, data: string): boolean {
  if (api === "messages") {
    if (event !== undefined) return event === "message_start" || event === "message_delta" || event === "error";
    return data.includes('"message_start"') || data.includes('"message_delta"') || data.includes('"error"');
  }
  if (api === "chat") return USAGE_OBJECT.test(data) || data.startsWith('{"error"');
  if (api === "gemini") return data.includes('"usageMetadata"') || data.includes('"error"');
  if (event !== undefined) {
    return event === "response.completed" || event === "response.incomplete" || event === "response.failed" || event === "error";
  }
  return data.includes('"response.completed"') || data.includes('"response.incomplete"') || data.includes('"response.failed"') || data.includes('"type":"error"');
}
