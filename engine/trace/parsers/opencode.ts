/**
 * opencode's `run --format json` stream (agent-clis.md "opencode"): one line per finished part, each with its
 * `messageID` (one model call, one step), usage per step in `step_finish`. The prompt is not echoed, and a tool part
 * arrives once, already finished, with its input and output together. Its sessions are SQLite: nothing to read.
 */
import { chunkEvent, errorEvent, promptEvent, toolCallEvent, toolResultEvent, usageEvent, type TraceParser, type TraceUpdate } from "../events.ts";
import type { ParserSpec } from "./index.ts";
import { isTodoTool, LineLoss, msTime, num, obj, type Obj, planEvent, readJsonLine, str, todoPlan, toolKind, toolTitle } from "./toolkit.ts";

function create(opts: { instruction?: string }): TraceParser {
  const loss = new LineLoss();
  let started = false;
  // A call seen while running (a part re-sent as it progresses) is announced once, then only updated.
  const announced = new Set<string>();

  const start = (): TraceUpdate[] => {
    if (started) return [];
    started = true;
    return opts.instruction !== undefined ? [promptEvent(opts.instruction)] : [];
  };

  function tool(part: Obj, meta: { timestamp: string } | undefined): TraceUpdate[] {
    const name = str(part.tool) ?? "";
    const id = str(part.callID) ?? str(part.id) ?? "";
    const state = obj(part.state) ?? {};
    const input = obj(state.input) ?? {};
    const status = str(state.status);
    const out: TraceUpdate[] = [];
    if (!announced.has(id)) {
      announced.add(id);
      out.push(toolCallEvent({
        toolCallId: id,
        name,
        title: str(state.title) ?? toolTitle(name, input),
        kind: toolKind(name),
        status: status === "pending" ? "pending" : "in_progress",
        rawInput: input,
        ...(str(part.messageID) ? { messageId: str(part.messageID)! } : {}),
        ...(meta ? { _meta: meta } : {}),
      }));
      const plan = isTodoTool(name) ? todoPlan(input) : undefined;
      if (plan) out.push(planEvent(plan));
    }
    if (status === "completed") out.push(toolResultEvent(id, "completed", str(state.output) ?? "", state.metadata, meta));
    else if (status === "error") out.push(toolResultEvent(id, "failed", str(state.error) ?? str(state.output) ?? "", state.metadata, meta));
    return out;
  }

  function read(ev: Obj): TraceUpdate[] | undefined {
    const part = obj(ev.part) ?? {};
    const meta = msTime(ev.timestamp);
    const messageId = str(part.messageID);
    switch (ev.type) {
      case "step_start":
        return [];
      case "text":
      case "reasoning": {
        const text = str(part.text) ?? "";
        if (!text) return [];
        return [chunkEvent(ev.type === "text" ? "agent_message_chunk" : "agent_thought_chunk", text, messageId, meta)];
      }
      case "tool_use":
        return tool(part, meta);
      case "step_finish": {
        const t = obj(part.tokens);
        if (!t) return [];
        const cache = obj(t.cache) ?? {};
        const read = num(cache.read);
        const write = num(cache.write);
        const reasoning = num(t.reasoning);
        // opencode's `input` leaves cache reads and writes out, and its `output` leaves reasoning out.
        return [usageEvent("call", {
          promptTokens: num(t.input) + read + write,
          completionTokens: num(t.output) + reasoning,
          cachedTokens: read,
          cacheWriteTokens: write,
          reasoningTokens: reasoning,
        }, { ...(messageId ? { messageId } : {}), ...(meta ? { meta } : {}) })];
      }
      case "error": {
        const e = obj(ev.error) ?? {};
        const data = obj(e.data) ?? {};
        const message = str(data.message) ?? str(e.message) ?? str(e.name) ?? "opencode error";
        return [errorEvent(message, true, { ...meta, ...(str(e.name) ? { name: str(e.name) } : {}), ...(typeof data.statusCode === "number" ? { statusCode: data.statusCode } : {}) })];
      }
      default:
        return undefined;
    }
  }

  return {
    line(text) {
      return readJsonLine(text, start(), loss, read, (ev) => `unknown opencode event type ${JSON.stringify(ev.type)}`);
    },
    end() {
      return [...start(), ...loss.flush()];
    },
  };
}

/** opencode's parser: stdout alone carries everything. */
export const opencodeParser: ParserSpec = { harness: "opencode", create, sessionGlobs: [] };
