/**
 * An ATIF trajectory (Harbor's `agent/trajectory.json`) read back into parsed trace events, for a job run elsewhere
 * that brought no transcript of its harness (`evolve upload`). The inverse of atif.ts's builder, as far as ATIF
 * carries it: a `system` step is the system prompt (never an error), the first `user` step the instruction, an
 * `agent` step's reasoning, message, tool calls, observations and metrics each their event. A step of another
 * shape is skipped and counted as one `trace_loss`.
 */
import { chunkEvent, toolCallEvent, toolResultEvent, traceLossEvent, usageEvent, type TraceUpdate, type UpdateMeta } from "./events.ts";

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : undefined);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** The text of an ATIF message: a string, or the text parts of a content-part list. */
function text(v: unknown): string {
  if (typeof v === "string") return v;
  if (!Array.isArray(v)) return "";
  return v.map((p) => (obj(p)?.type === "text" ? (str(obj(p)!.text) ?? "") : "")).join("");
}

/** The parsed trace events of an ATIF trajectory document (any ATIF-v1.x the validator accepts, read leniently). */
export function atifToUpdates(doc: unknown): TraceUpdate[] {
  const steps = Array.isArray(obj(doc)?.steps) ? (obj(doc)!.steps as unknown[]) : [];
  const out: TraceUpdate[] = [];
  let system: string | undefined;
  let prompted = false;
  let lost = 0;
  for (const raw of steps) {
    const s = obj(raw);
    if (!s) {
      lost++;
      continue;
    }
    const meta: UpdateMeta | undefined = str(s.timestamp) ? { timestamp: str(s.timestamp) } : undefined;
    const messageId = `step-${num(s.step_id) ?? out.length}`;
    if (s.source === "system") {
      system = system === undefined ? text(s.message) : `${system}\n\n${text(s.message)}`;
      continue;
    }
    if (s.source === "user") {
      const said = text(s.message);
      if (!prompted) {
        prompted = true;
        out.push({ type: "prompt", data: { _prompt: { text: said, ...(system !== undefined ? { system } : {}) }, ...(meta ? { _meta: meta } : {}) } });
      } else out.push(chunkEvent("user_message_chunk", said, undefined, meta));
      continue;
    }
    if (s.source !== "agent") {
      lost++;
      continue;
    }
    if (str(s.reasoning_content)) out.push(chunkEvent("agent_thought_chunk", str(s.reasoning_content)!, messageId, meta));
    const said = text(s.message);
    if (said) out.push(chunkEvent("agent_message_chunk", said, messageId, meta));
    for (const c of Array.isArray(s.tool_calls) ? s.tool_calls : []) {
      const call = obj(c);
      if (!call || !str(call.tool_call_id)) continue;
      const name = str(call.function_name) ?? "tool";
      out.push(toolCallEvent({ toolCallId: str(call.tool_call_id)!, name, title: name, kind: "other", status: "in_progress", rawInput: obj(call.arguments) ?? {}, messageId }));
    }
    for (const r of Array.isArray(obj(s.observation)?.results) ? (obj(s.observation)!.results as unknown[]) : []) {
      const res = obj(r);
      if (!res) continue;
      const id = str(res.source_call_id);
      if (id) out.push(toolResultEvent(id, "completed", text(res.content), undefined, meta));
      else if (text(res.content)) out.push(chunkEvent("user_message_chunk", text(res.content), undefined, meta));
    }
    const m = obj(s.metrics);
    if (m && (num(m.prompt_tokens) !== undefined || num(m.completion_tokens) !== undefined)) {
      const u = usageEvent("call", { promptTokens: num(m.prompt_tokens) ?? 0, completionTokens: num(m.completion_tokens) ?? 0, ...(num(m.cached_tokens) !== undefined ? { cachedTokens: num(m.cached_tokens) } : {}) }, { messageId, ...(str(s.model_name) ? { model: str(s.model_name) } : {}) });
      if (num(m.cost_usd) !== undefined && u.type === "usage") u.data.update.costUsd = num(m.cost_usd);
      out.push(u);
    }
  }
  // a trajectory of a system step alone still shows its system prompt
  if (!prompted && system !== undefined) out.unshift({ type: "prompt", data: { _prompt: { text: "", system } } });
  if (lost > 0) out.push(traceLossEvent(lost, `${lost} trajectory step(s) of no known source (system, user, agent)`));
  return out;
}
