/**
 * A codex session rollout (`sessions/<yyyy>/<mm>/<dd>/rollout-<id>.jsonl`) read as the run's transcript, for a run
 * made elsewhere that kept no `codex exec --json` stdout (an Evolve SDK run packed for `evolve upload`). The
 * rollout's `response_item` lines are the model's input and output: messages, reasoning summaries, function and
 * custom tool calls and their outputs. The instruction and the per-call usage come from codex's own parser
 * (codex.ts), so the two readings of a rollout cannot drift apart. A line that is not JSON is one `trace_loss`.
 */
import { chunkEvent, promptEvent, toolCallEvent, toolResultEvent, traceLossEvent, type SessionFile, type TraceUpdate } from "../events.ts";
import { codexParser } from "./codex.ts";

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : undefined);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** A user message codex writes itself (`<environment_context>`, AGENTS.md instructions), not the user's. */
const CONTEXT_MESSAGE = /^\s*(<[a-z_]+>[\s\S]*<\/[a-z_]+>\s*$|# AGENTS\.md instructions\b)/;

function contentText(v: unknown): string {
  if (typeof v === "string") return v;
  if (!Array.isArray(v)) return "";
  return v.map((p) => str(obj(p)?.text) ?? "").join("");
}

function args(v: unknown): Obj {
  if (obj(v)) return obj(v)!;
  if (typeof v !== "string") return {};
  try {
    return obj(JSON.parse(v)) ?? { input: v };
  } catch {
    return { input: v };
  }
}

/** The parsed trace events of one rollout file. */
export function rolloutToUpdates(file: SessionFile): TraceUpdate[] {
  const instruction = codexParser.instructionFrom?.([file]);
  const out: TraceUpdate[] = instruction !== undefined ? [promptEvent(instruction)] : [];
  let lost = 0;
  let sample: string | undefined;
  let call = 1;
  for (const line of file.text.split("\n")) {
    if (!line.trim()) continue;
    let o: Obj | undefined;
    try {
      o = obj(JSON.parse(line));
    } catch {
      lost++;
      sample ??= line.slice(0, 200);
      continue;
    }
    const p = obj(o?.payload);
    if (!o || o.type !== "response_item" || !p) continue;
    const messageId = `rollout#${call}`;
    const meta = str(o.timestamp) ? { timestamp: str(o.timestamp)! } : undefined;
    switch (p.type) {
      case "message": {
        const t = contentText(p.content);
        if (!t) break;
        if (p.role === "assistant") {
          out.push(chunkEvent("agent_message_chunk", t, messageId, meta));
          call++;
        } else if (p.role === "user" && t !== instruction && !CONTEXT_MESSAGE.test(t)) out.push(chunkEvent("user_message_chunk", t, undefined, meta));
        break;
      }
      case "reasoning": {
        const t = Array.isArray(p.summary) ? p.summary.map((s) => str(obj(s)?.text) ?? "").join("\n") : "";
        if (t) out.push(chunkEvent("agent_thought_chunk", t, messageId, meta));
        break;
      }
      case "function_call":
      case "custom_tool_call":
      case "local_shell_call": {
        const id = str(p.call_id) ?? str(p.id) ?? `call-${out.length}`;
        const name = str(p.name) ?? (p.type === "local_shell_call" ? "shell" : "tool");
        out.push(toolCallEvent({ toolCallId: id, name, title: name, kind: "other", status: "in_progress", rawInput: args(p.arguments ?? p.input ?? p.action), messageId, ...(meta ? { _meta: meta } : {}) }));
        break;
      }
      case "function_call_output":
      case "custom_tool_call_output": {
        const id = str(p.call_id);
        if (!id) break;
        const output = typeof p.output === "string" ? p.output : contentText(obj(p.output)?.content ?? p.output);
        out.push(toolResultEvent(id, "completed", output, undefined, meta));
        call++;
        break;
      }
    }
  }
  if (lost > 0) out.push(traceLossEvent(lost, `${lost} rollout line(s) that are not JSON`, sample));
  // per-call usage and the run's totals, as codex's parser reads them from a rollout
  out.push(...codexParser.create({}).end([file]));
  return out;
}
