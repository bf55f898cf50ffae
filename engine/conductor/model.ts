/**
 * The conductor's one model call per turn, in the wire API of its endpoint (always the gateway): Anthropic Messages,
 * OpenAI Responses, OpenAI chat completions or Gemini generateContent. Non-streaming: a turn needs the whole reply
 * before any tool runs, and one JSON body is the simplest thing every API answers the same way. Each API's own tool
 * format goes out and comes back; what the loop sees is the same {text, toolCalls, usage, id} for all four.
 */
import { REFUSED_HEADER } from "../../gateway/meter.ts";
import type { WireApi } from "../providers.ts";
import type { UsageCounts } from "../trace/events.ts";
import type { HistoryEntry, ModelEndpoint, ToolCall, ToolSchema } from "./types.ts";

/** What one model call returned. */
export interface ModelReply {
  text: string;
  toolCalls: ToolCall[];
  usage: UsageCounts;
  /** The provider's id of the reply (message / response id); "" when it gave none. */
  id: string;
}

/** One model call: the assembled turn. */
export interface ModelRequest {
  endpoint: ModelEndpoint;
  system: string;
  /** What the memory seat chose, instruction first. */
  entries: readonly HistoryEntry[];
  tools: readonly ToolSchema[];
  maxOutputTokens: number;
  signal?: AbortSignal;
  /** Retries of a 429/5xx answer or a failed connection (default 3). */
  retries?: number;
  /** The first retry's wait (ms, doubled each time; default 1000). */
  retryBaseMs?: number;
}

/** The model could not be asked or refused: the run's `model_error`. `message` is one line, the provider's own words. */
export class ModelError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    /** The budget scope when the answer was the gateway's budget refusal (gateway/meter.ts REFUSED_HEADER). */
    readonly refused?: string,
  ) {
    super(message);
    this.name = "ModelError";
  }
}

/** The largest reply body read (bytes): a reply is a few KB; a runaway one must not fill the conductor's memory. */
export const MAX_REPLY_BYTES = 8 * 1024 * 1024;
/** The longest a Retry-After is obeyed (ms); longer waits give up sooner rather than sit out the run's time. */
const MAX_RETRY_WAIT_MS = 20_000;

/** Asks the model once (with a few retries on 429/5xx); throws {@link ModelError} on a failure, the signal's reason on abort. */
export async function callModel(req: ModelRequest): Promise<ModelReply> {
  const { url, headers, body } = buildRequest(req);
  const retries = req.retries ?? 3;
  const base = req.retryBaseMs ?? 1000;
  for (let attempt = 0; ; attempt++) {
    req.signal?.throwIfAborted();
    let res: Response;
    try {
      res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body), signal: req.signal });
    } catch (e) {
      if (req.signal?.aborted) throw req.signal.reason;
      if (attempt < retries) {
        await sleep(base * 2 ** attempt, req.signal);
        continue;
      }
      throw new ModelError(`${req.endpoint.api}: cannot reach ${url}: ${oneLine((e as Error)?.message ?? String(e))}`);
    }
    const text = await readBounded(res, req.signal);
    if (res.ok) {
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new ModelError(`${req.endpoint.api}: the reply is not JSON: ${oneLine(text).slice(0, 200)}`, res.status);
      }
      try {
        return parseReply(req.endpoint.api, json);
      } catch (e) {
        // the model answered (a failed Responses status, a blocked prompt, an odd body): its status goes with the
        // error, so no reader takes it for a call that never reached its model (status undefined: no answer at all)
        if (e instanceof ModelError && e.status === undefined) throw new ModelError(e.message, res.status);
        throw e;
      }
    }
    // a spent budget does not come back in seconds: the gateway's refusal is not retried
    const refused = res.headers.get(REFUSED_HEADER) ?? undefined;
    if ((res.status === 429 || res.status >= 500) && attempt < retries && refused === undefined) {
      const after = retryAfterMs(res.headers.get("retry-after"));
      await sleep(Math.min(MAX_RETRY_WAIT_MS, after ?? base * 2 ** attempt), req.signal);
      continue;
    }
    throw new ModelError(`${req.endpoint.api} ${res.status}: ${providerMessage(text)}`, res.status, refused);
  }
}

/** The URL, headers and body of one call in the endpoint's wire API. */
export function buildRequest(req: ModelRequest): { url: string; headers: Record<string, string>; body: Record<string, unknown> } {
  const { endpoint: ep } = req;
  const base = ep.baseUrl.replace(/\/+$/, "");
  const json = { "content-type": "application/json" };
  switch (ep.api) {
    case "anthropic":
      return {
        url: `${base}/v1/messages`,
        headers: { ...json, "x-api-key": ep.key, "anthropic-version": "2023-06-01" },
        body: {
          model: ep.model,
          max_tokens: req.maxOutputTokens,
          ...(req.system ? { system: req.system } : {}),
          messages: anthropicMessages(req.entries),
          ...(req.tools.length ? { tools: req.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.input_schema })) } : {}),
        },
      };
    case "openai-responses":
      return {
        url: `${base}/v1/responses`,
        headers: { ...json, authorization: `Bearer ${ep.key}` },
        body: {
          model: ep.model,
          ...(req.system ? { instructions: req.system } : {}),
          input: responsesInput(req.entries),
          max_output_tokens: req.maxOutputTokens,
          // the conversation is sent whole every turn; nothing needs keeping on the provider's side
          store: false,
          ...(req.tools.length ? { tools: req.tools.map((t) => ({ type: "function", name: t.name, description: t.description, parameters: t.input_schema })) } : {}),
        },
      };
    case "openai-chat":
      return {
        url: `${base}/v1/chat/completions`,
        headers: { ...json, authorization: `Bearer ${ep.key}` },
        body: {
          model: ep.model,
          messages: chatMessages(req.system, req.entries),
          max_completion_tokens: req.maxOutputTokens,
          ...(req.tools.length
            ? { tools: req.tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.input_schema } })) }
            : {}),
        },
      };
    case "gemini":
      return {
        url: `${base}/v1beta/models/${encodeURIComponent(ep.model)}:generateContent`,
        headers: { ...json, "x-goog-api-key": ep.key },
        body: {
          ...(req.system ? { systemInstruction: { parts: [{ text: req.system }] } } : {}),
          contents: geminiContents(req.entries),
          generationConfig: { maxOutputTokens: req.maxOutputTokens },
          ...(req.tools.length
            ? { tools: [{ functionDeclarations: req.tools.map((t) => ({ name: t.name, description: t.description, parameters: t.input_schema })) }] }
            : {}),
        },
      };
  }
}

// ---- requests -------------------------------------------------------------------------------------------------

type Msg = { role: string; content: unknown[] };

/** Appends `blocks` to the last message when it has `role` (the APIs want user/assistant turns to alternate). */
function pushMerged(msgs: Msg[], role: string, blocks: unknown[]): void {
  const last = msgs[msgs.length - 1];
  if (last && last.role === role) last.content.push(...blocks);
  else msgs.push({ role, content: [...blocks] });
}

function anthropicMessages(entries: readonly HistoryEntry[]): Msg[] {
  const msgs: Msg[] = [];
  for (const e of entries) {
    if (e.kind === "instruction") pushMerged(msgs, "user", [{ type: "text", text: e.text }]);
    else if (e.kind === "assistant") {
      const blocks: unknown[] = [];
      if (e.text) blocks.push({ type: "text", text: e.text });
      for (const c of e.toolCalls) blocks.push({ type: "tool_use", id: c.id, name: c.name, input: c.input });
      if (blocks.length === 0) blocks.push({ type: "text", text: "(no reply)" });
      pushMerged(msgs, "assistant", blocks);
    } else {
      pushMerged(msgs, "user", [{ type: "tool_result", tool_use_id: e.toolCallId, content: e.text || "(no output)", ...(e.isError ? { is_error: true } : {}) }]);
    }
  }
  return msgs;
}

function responsesInput(entries: readonly HistoryEntry[]): unknown[] {
  const items: unknown[] = [];
  for (const e of entries) {
    if (e.kind === "instruction") items.push({ role: "user", content: e.text });
    else if (e.kind === "assistant") {
      if (e.text) items.push({ role: "assistant", content: e.text });
      for (const c of e.toolCalls) items.push({ type: "function_call", call_id: c.id, name: c.name, arguments: JSON.stringify(c.input) });
    } else items.push({ type: "function_call_output", call_id: e.toolCallId, output: e.text || "(no output)" });
  }
  return items;
}

function chatMessages(system: string, entries: readonly HistoryEntry[]): unknown[] {
  const msgs: Record<string, unknown>[] = system ? [{ role: "system", content: system }] : [];
  for (const e of entries) {
    if (e.kind === "instruction") {
      const last = msgs[msgs.length - 1];
      if (last?.role === "user") last.content = `${last.content}\n\n${e.text}`;
      else msgs.push({ role: "user", content: e.text });
    } else if (e.kind === "assistant") {
      const m: Record<string, unknown> = { role: "assistant", content: e.text || null };
      if (e.toolCalls.length) m.tool_calls = e.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.input) } }));
      msgs.push(m);
    } else msgs.push({ role: "tool", tool_call_id: e.toolCallId, content: e.text || "(no output)" });
  }
  return msgs;
}

function geminiContents(entries: readonly HistoryEntry[]): unknown[] {
  const msgs: Msg[] = [];
  // Gemini answers a function call by name; the ids are the conductor's own
  const names = new Map<string, string>();
  for (const e of entries) {
    if (e.kind === "instruction") pushMerged(msgs, "user", [{ text: e.text }]);
    else if (e.kind === "assistant") {
      const parts: unknown[] = [];
      if (e.text) parts.push({ text: e.text });
      for (const c of e.toolCalls) {
        names.set(c.id, c.name);
        parts.push({ functionCall: { name: c.name, args: c.input }, ...(c.providerData ?? {}) });
      }
      if (parts.length === 0) parts.push({ text: "(no reply)" });
      pushMerged(msgs, "model", parts);
    } else {
      const response = e.isError ? { error: e.text } : { output: e.text };
      pushMerged(msgs, "user", [{ functionResponse: { name: names.get(e.toolCallId) ?? e.name, response } }]);
    }
  }
  return msgs.map((m) => ({ role: m.role, parts: m.content }));
}

// ---- replies --------------------------------------------------------------------------------------------------

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** A tool call's arguments: an object, or `{}` with why not. */
function callInput(raw: unknown): { input: Record<string, unknown>; malformed?: string } {
  let v = raw;
  if (typeof raw === "string") {
    if (raw.trim() === "") return { input: {} };
    try {
      v = JSON.parse(raw);
    } catch (e) {
      return { input: {}, malformed: `arguments are not JSON: ${oneLine((e as Error).message)}` };
    }
  }
  if (v === undefined || v === null) return { input: {} };
  if (typeof v !== "object" || Array.isArray(v)) return { input: {}, malformed: `arguments are a JSON ${Array.isArray(v) ? "array" : typeof v}, not an object` };
  return { input: v as Record<string, unknown> };
}

function call(id: string, name: unknown, rawInput: unknown, providerData?: Record<string, unknown>): ToolCall {
  const { input, malformed } = callInput(rawInput);
  const c: ToolCall = { id, name: typeof name === "string" ? name : "", input };
  if (malformed !== undefined) c.malformed = malformed;
  if (providerData) c.providerData = providerData;
  return c;
}

/** The reply of `api` as the loop sees it. */
export function parseReply(api: WireApi, json: any): ModelReply {
  if (json === null || typeof json !== "object") throw new ModelError(`${api}: the reply is not a JSON object`);
  const texts: string[] = [];
  const toolCalls: ToolCall[] = [];
  let usage: UsageCounts;
  let id = "";
  if (api === "anthropic") {
    id = String(json.id ?? "");
    for (const b of Array.isArray(json.content) ? json.content : []) {
      if (b?.type === "text" && typeof b.text === "string") texts.push(b.text);
      else if (b?.type === "tool_use") toolCalls.push(call(String(b.id ?? `call_${toolCalls.length + 1}`), b.name, b.input));
    }
    const u = json.usage ?? {};
    const cacheRead = num(u.cache_read_input_tokens);
    const cacheWrite = num(u.cache_creation_input_tokens);
    // Anthropic's input_tokens leaves the cache out; the trace's promptTokens counts all of it
    usage = { promptTokens: num(u.input_tokens) + cacheRead + cacheWrite, completionTokens: num(u.output_tokens) };
    if (cacheRead) usage.cachedTokens = cacheRead;
    if (cacheWrite) usage.cacheWriteTokens = cacheWrite;
  } else if (api === "openai-responses") {
    id = String(json.id ?? "");
    if (json.status === "failed" || json.error) throw new ModelError(`${api}: ${oneLine(json.error?.message ?? "the response failed")}`);
    for (const item of Array.isArray(json.output) ? json.output : []) {
      if (item?.type === "message") {
        for (const c of Array.isArray(item.content) ? item.content : []) if (c?.type === "output_text" && typeof c.text === "string") texts.push(c.text);
      } else if (item?.type === "function_call") toolCalls.push(call(String(item.call_id ?? item.id ?? `call_${toolCalls.length + 1}`), item.name, item.arguments));
    }
    const u = json.usage ?? {};
    usage = { promptTokens: num(u.input_tokens), completionTokens: num(u.output_tokens) };
    if (num(u.input_tokens_details?.cached_tokens)) usage.cachedTokens = num(u.input_tokens_details.cached_tokens);
    if (num(u.output_tokens_details?.reasoning_tokens)) usage.reasoningTokens = num(u.output_tokens_details.reasoning_tokens);
  } else if (api === "openai-chat") {
    id = String(json.id ?? "");
    const m = json.choices?.[0]?.message ?? {};
    if (typeof m.content === "string") texts.push(m.content);
    for (const c of Array.isArray(m.tool_calls) ? m.tool_calls : []) toolCalls.push(call(String(c?.id ?? `call_${toolCalls.length + 1}`), c?.function?.name, c?.function?.arguments));
    const u = json.usage ?? {};
    usage = { promptTokens: num(u.prompt_tokens), completionTokens: num(u.completion_tokens) };
    if (num(u.prompt_tokens_details?.cached_tokens)) usage.cachedTokens = num(u.prompt_tokens_details.cached_tokens);
    if (num(u.completion_tokens_details?.reasoning_tokens)) usage.reasoningTokens = num(u.completion_tokens_details.reasoning_tokens);
  } else {
    id = String(json.responseId ?? "");
    const cand = json.candidates?.[0];
    if (!cand && json.promptFeedback?.blockReason) throw new ModelError(`gemini: the prompt was blocked (${json.promptFeedback.blockReason})`);
    for (const p of Array.isArray(cand?.content?.parts) ? cand.content.parts : []) {
      if (p?.thought === true) continue;
      if (typeof p?.text === "string") texts.push(p.text);
      else if (p?.functionCall) {
        const fc = p.functionCall;
        // Gemini gives most calls no id: one of the conductor's own, unique in the run so the trace can key on it
        const data = typeof p.thoughtSignature === "string" ? { thoughtSignature: p.thoughtSignature } : undefined;
        toolCalls.push(call(typeof fc.id === "string" && fc.id ? fc.id : `call_${crypto.randomUUID().slice(0, 8)}`, fc.name, fc.args ?? {}, data));
      }
    }
    const u = json.usageMetadata ?? {};
    const thoughts = num(u.thoughtsTokenCount);
    // candidatesTokenCount leaves the thoughts out; the trace's completionTokens counts reasoning in
    usage = { promptTokens: num(u.promptTokenCount), completionTokens: num(u.candidatesTokenCount) + thoughts };
    if (num(u.cachedContentTokenCount)) usage.cachedTokens = num(u.cachedContentTokenCount);
    if (thoughts) usage.reasoningTokens = thoughts;
  }
  return { text: texts.join(""), toolCalls, usage, id };
}

// ---- plumbing -------------------------------------------------------------------------------------------------

/** The body as text, refusing more than {@link MAX_REPLY_BYTES}. */
async function readBounded(res: Response, signal?: AbortSignal): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > MAX_REPLY_BYTES) {
        await reader.cancel().catch(() => {});
        throw new ModelError(`the model's reply is over ${MAX_REPLY_BYTES} bytes`, res.status);
      }
      chunks.push(value);
    }
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    if (e instanceof ModelError) throw e;
    throw new ModelError(`the model's reply was cut off: ${oneLine((e as Error)?.message ?? String(e))}`, res.status);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

/** The provider's error message from an error body (all four put it at `error.message`), else the body's start. */
function providerMessage(text: string): string {
  try {
    const j = JSON.parse(text);
    const m = j?.error?.message ?? j?.message ?? (typeof j?.error === "string" ? j.error : undefined);
    if (typeof m === "string" && m) return oneLine(m).slice(0, 500);
  } catch {
    // not JSON: the text itself
  }
  return oneLine(text).slice(0, 500) || "(empty body)";
}

function retryAfterMs(v: string | null): number | undefined {
  if (!v) return undefined;
  const s = Number(v);
  if (Number.isFinite(s) && s >= 0) return s * 1000;
  const t = Date.parse(v);
  return Number.isFinite(t) ? Math.max(0, t - Date.now()) : undefined;
}

const oneLine = (s: string): string => s.replace(/\s*\n\s*/g, " ").trim();

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
