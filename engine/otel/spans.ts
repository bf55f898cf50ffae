/**
 * A settled trial as one OpenTelemetry trace (issue 22 §5; ../shared/reference/results-out.md "OpenTelemetry GenAI"):
 * an `invoke_agent {agent}` span (INTERNAL) for the trial, under it a `chat {model}` span (CLIENT) per gateway call
 * and an `execute_tool {tool}` span (INTERNAL) per tool call, and the verifier's rewards as
 * `gen_ai.evaluation.result` events on the agent span. Each span carries the GenAI semantic conventions' `gen_ai.*`
 * attributes and, beside them, OpenInference's (`openinference.span.kind`, `llm.*`, `input.value`/`output.value`)
 * and Langfuse's `langfuse.observation.type`: Phoenix reads OpenInference first, Langfuse its own keys and then
 * `gen_ai.*`, so both show the same figures, and each counts a call's tokens and cost once.
 *
 * Read-only over the store: the trial record for the agent span's totals (the very figures `trial show` prints:
 * tokens, spend, rewards) and the parsed trace (engine/trace/store.ts) for the per-call and per-tool spans. Nothing
 * here decides a status or writes anything.
 *
 * Ids are derived, never random: the trace id from the trial id, each span id from the trial id and the position
 * (`seq`) of the event it stands for. A re-export reuses the same ids, so a backend that keys on them (Phoenix refuses
 * a batch with a span id it already holds; Langfuse upserts by id) never holds a trial twice.
 */
import { createHash } from "node:crypto";
import { measuredLane } from "../job/summary.ts";
import type { TrialRecord } from "../store/index.ts";
import type { TraceEvent, UsageCounts } from "../trace/events.ts";
import { readTrace } from "../trace/store.ts";
import { primaryReward } from "../trial/reward.ts";
import { tokenCounts } from "../trial/tokens.ts";

/** OTLP's span kinds, as the protocol numbers them. */
export const SPAN_KIND = { INTERNAL: 1, CLIENT: 3 } as const;
/** OTLP's status codes. */
export const STATUS_CODE = { UNSET: 0, OK: 1, ERROR: 2 } as const;

/** An attribute's value: what evolve puts on a span (OTLP's AnyValue allows more; nothing here needs it). */
export type AttrValue = string | number | boolean;

/** One span, in evolve's own terms; engine/otel/encode.ts turns a list of them into OTLP bytes. */
export interface OtelSpan {
  /** 32 lowercase hex digits. */
  traceId: string;
  /** 16 lowercase hex digits. */
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: (typeof SPAN_KIND)[keyof typeof SPAN_KIND];
  /** Epoch milliseconds (the store keeps ISO times to the millisecond). */
  startMs: number;
  endMs: number;
  attributes: Record<string, AttrValue>;
  events: { name: string; timeMs: number; attributes: Record<string, AttrValue> }[];
  status: { code: (typeof STATUS_CODE)[keyof typeof STATUS_CODE]; message?: string };
}

/** The most of a text (an instruction, an answer, a tool's output) a span carries: backends cut long values anyway. */
export const TEXT_LIMIT = 32 * 1024;

function hexOf(...parts: string[]): string {
  return createHash("sha256").update(parts.join("\u0000")).digest("hex");
}

/** The trace id of a trial: 16 bytes of sha256 over its id (never all zero, which OTLP reads as "no id"). */
export function traceIdOf(trialId: string): string {
  const h = hexOf("evolve.trace", trialId).slice(0, 32);
  return /^0+$/.test(h) ? "1".padStart(32, "0") : h;
}

/** The id of one span of a trial: `key` is `agent` for the trial's span, else `seq:N` of the event it stands for. */
export function spanIdOf(trialId: string, key: string): string {
  const h = hexOf("evolve.span", trialId, key).slice(0, 16);
  return /^0+$/.test(h) ? "1".padStart(16, "0") : h;
}

function cut(text: string): string {
  return text.length > TEXT_LIMIT ? text.slice(0, TEXT_LIMIT) + "…" : text;
}

function ms(iso: string | undefined): number | undefined {
  if (!iso) return undefined;
  const t = Date.parse(iso);
  return Number.isFinite(t) ? t : undefined;
}

/** `openai/gpt-5` → provider `openai`, model `gpt-5`; a model without a provider keeps its name, provider "evolve". */
export function splitModel(model: string | undefined): { provider: string; model: string } | undefined {
  if (!model) return undefined;
  const slash = model.indexOf("/");
  return slash > 0 ? { provider: model.slice(0, slash), model: model.slice(slash + 1) } : { provider: "evolve", model };
}

/** The GenAI usage attributes of a set of counts, with OpenInference's token counts beside them. */
function usageAttributes(u: UsageCounts, openInference: boolean): Record<string, AttrValue> {
  const a: Record<string, AttrValue> = {
    // input counts cached reads and cache writes (GenAI: "SHOULD include all input tokens, including cached")
    "gen_ai.usage.input_tokens": u.promptTokens,
    "gen_ai.usage.output_tokens": u.completionTokens,
    "gen_ai.usage.cache_read.input_tokens": u.cachedTokens ?? 0,
    "gen_ai.usage.cache_creation.input_tokens": u.cacheWriteTokens ?? 0,
    "gen_ai.usage.reasoning.output_tokens": u.reasoningTokens ?? 0,
  };
  if (openInference) {
    a["llm.token_count.prompt"] = u.promptTokens;
    a["llm.token_count.completion"] = u.completionTokens;
    a["llm.token_count.total"] = u.promptTokens + u.completionTokens;
    a["llm.token_count.prompt_details.cache_read"] = u.cachedTokens ?? 0;
    a["llm.token_count.prompt_details.cache_write"] = u.cacheWriteTokens ?? 0;
    a["llm.token_count.completion_details.reasoning"] = u.reasoningTokens ?? 0;
  }
  return a;
}

/** What the trace says beyond the record: the instruction, the answer, the gateway calls and the tool calls. */
interface TraceDigest {
  instruction?: string;
  answer: string[];
  calls: TraceEvent[];
  tools: { call: TraceEvent & { type: "tool_call" }; last?: TraceEvent & { type: "tool_call_update" } }[];
}

function digest(home: string, trialId: string): TraceDigest {
  const d: TraceDigest = { answer: [], calls: [], tools: [] };
  const byCall = new Map<string, TraceDigest["tools"][number]>();
  let answerBytes = 0;
  for (const e of readTrace(home, trialId)) {
    if (e.type === "prompt") d.instruction ??= e.data._prompt.text;
    else if (e.type === "agent_message_chunk") {
      if (answerBytes <= TEXT_LIMIT) d.answer.push(e.data.update.content.text);
      answerBytes += e.data.update.content.text.length;
    } else if (e.type === "usage" && e.data.update.source === "gateway" && e.data.update.scope === "call") d.calls.push(e);
    else if (e.type === "tool_call") {
      const t = { call: e };
      d.tools.push(t);
      byCall.set(e.data.update.toolCallId, t);
    } else if (e.type === "tool_call_update") {
      const t = byCall.get(e.data.update.toolCallId);
      if (t) t.last = e;
    }
  }
  return d;
}

function timestampOf(e: TraceEvent | undefined): number | undefined {
  const meta = e && "update" in e.data ? e.data.update._meta : undefined;
  return typeof meta?.timestamp === "string" ? ms(meta.timestamp) : undefined;
}

function toolOutput(e: (TraceEvent & { type: "tool_call_update" }) | undefined): string | undefined {
  const parts = e?.data.update.content?.map((c) => c.content.text);
  return parts && parts.length > 0 ? cut(parts.join("\n")) : undefined;
}

/** The agent span's OTel status: OK once scored, ERROR with the exception when the trial has one, else unset. */
function agentSpanStatus(t: TrialRecord): OtelSpan["status"] {
  const scored = t.status === "SCORED";
  if (scored) return { code: STATUS_CODE.OK };
  if (t.exception) return { code: STATUS_CODE.ERROR, message: `${t.exception.type}: ${t.exception.message}`.slice(0, 1024) };
  return { code: STATUS_CODE.UNSET };
}

/**
 * The spans of one trial, the agent span first. Times come from the record (the trial's start and end, the
 * verifier's end for the rewards) and from the trace's own `_meta.timestamp`s (a gateway call's start, with its
 * `_meta.latency_ms`; a harness's stamps on tool calls and their results); an event without one (a trace stored
 * before gateway calls were stamped, a harness that stamps nothing) is placed at the agent phase's start, and ends
 * where it starts.
 */
export function trialSpans(home: string, t: TrialRecord): OtelSpan[] {
  const traceId = traceIdOf(t.id);
  const rootId = spanIdOf(t.id, "agent");
  const agentPhase = t.phase_timings.agent;
  const startMs = ms(t.started_at) ?? ms(agentPhase?.started_at) ?? ms(t.created_at)!;
  const endMs = Math.max(startMs, ms(t.finished_at) ?? ms(agentPhase?.finished_at) ?? ms(t.updated_at) ?? startMs);
  const callStart = ms(agentPhase?.started_at) ?? startMs;
  const d = digest(home, t.id);
  const m = splitModel(t.model);
  const provider = m?.provider ?? "evolve";

  const root: OtelSpan = {
    traceId,
    spanId: rootId,
    name: `invoke_agent ${t.agent}`,
    kind: SPAN_KIND.INTERNAL,
    startMs,
    endMs,
    attributes: {
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.provider.name": provider,
      "gen_ai.agent.name": t.agent,
      "gen_ai.conversation.id": t.id,
      // Langfuse groups traces by session: a job's trials are one session
      "session.id": t.job_id,
      "openinference.span.kind": "AGENT",
      // Langfuse reads its own type first: the trial is an agent, never a generation whose usage it would add
      "langfuse.observation.type": "agent",
      "evolve.trial.id": t.id,
      "evolve.job.id": t.job_id,
      "evolve.task.digest": t.task_digest,
      "evolve.trial.status": t.status,
    },
    events: [],
    status: agentSpanStatus(t),
  };
  const a = root.attributes;
  if (m) {
    a["gen_ai.request.model"] = m.model;
    a["llm.model_name"] = m.model;
  }
  if (t.task_name) a["evolve.task.name"] = t.task_name;
  if (t.source) a["evolve.dataset"] = t.source;
  if (d.instruction !== undefined) a["input.value"] = cut(d.instruction);
  if (d.answer.length > 0) a["output.value"] = cut(d.answer.join(""));
  // The totals `trial show` prints (the record's agent-lane tokens and spend) always ride as evolve.usage.*. As
  // gen_ai.usage.* only when no call is itemized: backends add up usage over a trace's spans (Langfuse its
  // observations' cost, Phoenix its LLM spans' tokens), and the chat spans below already carry every call's.
  const tokens = tokenCounts(t.tokens);
  const spend = measuredLane(t.spend);
  const totals: UsageCounts | undefined = tokens && { promptTokens: tokens.prompt, completionTokens: tokens.output, cachedTokens: tokens.cached_read, cacheWriteTokens: tokens.cache_write, reasoningTokens: tokens.reasoning };
  const cost = spend ? (spend.final_usd ?? spend.live_usd) : undefined;
  if (totals) Object.assign(a, { "evolve.usage.input_tokens": totals.promptTokens, "evolve.usage.output_tokens": totals.completionTokens, "evolve.usage.cache_read.input_tokens": totals.cachedTokens!, "evolve.usage.cache_creation.input_tokens": totals.cacheWriteTokens!, "evolve.usage.reasoning.output_tokens": totals.reasoningTokens! });
  if (cost !== undefined) {
    a["evolve.usage.cost"] = cost;
    a["evolve.spend.source"] = spend!.source;
  }
  if (d.calls.length === 0) {
    if (totals) Object.assign(a, usageAttributes(totals, false));
    if (cost !== undefined) a["gen_ai.usage.cost"] = cost;
  }
  const reward = primaryReward(t.rewards);
  if (reward !== null) a["evolve.reward"] = reward;
  // the verifier's verdict: one evaluation event per reward key, at the verifier's end
  const verdictMs = ms(t.phase_timings.verify?.finished_at) ?? endMs;
  for (const [name, value] of Object.entries(t.rewards ?? {})) {
    root.events.push({ name: "gen_ai.evaluation.result", timeMs: verdictMs, attributes: { "gen_ai.evaluation.name": name, "gen_ai.evaluation.score.value": value } });
  }

  const spans = [root];
  for (const e of d.calls) {
    if (e.type !== "usage") continue;
    const u = e.data.update;
    const cm = splitModel(u.model) ?? { provider, model: "unknown" };
    const at = timestampOf(e) ?? callStart;
    const latency = typeof u._meta?.latency_ms === "number" && u._meta.latency_ms > 0 ? u._meta.latency_ms : 0;
    const attrs: Record<string, AttrValue> = {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": cm.provider === "evolve" ? provider : cm.provider,
      "gen_ai.request.model": cm.model,
      "gen_ai.response.model": cm.model,
      "gen_ai.conversation.id": t.id,
      "openinference.span.kind": "LLM",
      "langfuse.observation.type": "generation",
      "llm.model_name": cm.model,
      ...usageAttributes(u.usage, true),
      "evolve.trace.seq": e.seq,
    };
    if (u.costUsd !== undefined) attrs["gen_ai.usage.cost"] = u.costUsd;
    if (typeof u._meta?.lane === "string") attrs["evolve.lane"] = u._meta.lane;
    spans.push({ traceId, spanId: spanIdOf(t.id, `seq:${e.seq}`), parentSpanId: rootId, name: `chat ${cm.model}`, kind: SPAN_KIND.CLIENT, startMs: at, endMs: at + latency, attributes: attrs, events: [], status: { code: STATUS_CODE.UNSET } });
  }
  for (const { call, last } of d.tools) {
    const c = call.data.update;
    const at = timestampOf(call) ?? callStart;
    const end = Math.max(at, timestampOf(last) ?? at);
    const status = last?.data.update.status ?? c.status;
    const attrs: Record<string, AttrValue> = {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": c.name,
      "gen_ai.tool.call.id": c.toolCallId,
      "gen_ai.conversation.id": t.id,
      "openinference.span.kind": "TOOL",
      "langfuse.observation.type": "tool",
      "tool.name": c.name,
      "input.value": cut(JSON.stringify(c.rawInput)),
      "evolve.tool.kind": c.kind,
      "evolve.tool.status": status,
      "evolve.trace.seq": call.seq,
    };
    if (c.title) attrs["evolve.tool.title"] = cut(c.title);
    const output = toolOutput(last);
    if (output !== undefined) attrs["output.value"] = output;
    spans.push({
      traceId,
      spanId: spanIdOf(t.id, `seq:${call.seq}`),
      parentSpanId: rootId,
      name: `execute_tool ${c.name}`,
      kind: SPAN_KIND.INTERNAL,
      startMs: at,
      endMs: end,
      attributes: attrs,
      events: [],
      status: status === "failed" ? { code: STATUS_CODE.ERROR, message: "the tool call failed" } : status === "completed" ? { code: STATUS_CODE.OK } : { code: STATUS_CODE.UNSET },
    });
  }
  return spans;
}
