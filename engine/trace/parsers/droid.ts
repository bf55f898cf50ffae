/**
 * droid's `exec --output-format stream-json` stream (agent-clis.md "droid"): whole messages, tool calls and their
 * results as separate lines, and usage only as the run's totals in `completion` (its session files hold no more
 * than that per call: totals and the last call), so there is no per-call usage to give.
 */
import { chunkEvent, errorEvent, promptEvent, toolCallEvent, toolResultEvent, usageEvent, type TraceParser, type TraceUpdate } from "../events.ts";
import type { ParserSpec } from "./index.ts";
import { isTodoTool, LineLoss, msTime, num, obj, type Obj, planEvent, readJsonLine, str, todoPlan, toolKind, toolTitle } from "./toolkit.ts";

function create(opts: { instruction?: string }): TraceParser {
  const loss = new LineLoss();
  let started = false;
  let prompted = opts.instruction !== undefined;

  const start = (): TraceUpdate[] => {
    if (started) return [];
    started = true;
    return opts.instruction !== undefined ? [promptEvent(opts.instruction)] : [];
  };

  function read(ev: Obj): TraceUpdate[] | undefined {
    const meta = msTime(ev.timestamp);
    switch (ev.type) {
      case "system":
        return [];
      case "message": {
        const text = str(ev.text) ?? "";
        const id = str(ev.id);
        if (ev.role === "user") {
          // The first user message is the instruction: a trial already has it as `prompt`.
          if (!prompted) {
            prompted = true;
            return [promptEvent(text)];
          }
          if (opts.instruction !== undefined && text === opts.instruction) return [];
          return text ? [chunkEvent("user_message_chunk", text, undefined, meta)] : [];
        }
        if (ev.role === "assistant") return text ? [chunkEvent("agent_message_chunk", text, id, meta)] : [];
        return undefined;
      }
      case "tool_call": {
        const name = str(ev.toolName) ?? str(ev.toolId) ?? "";
        const input = obj(ev.parameters) ?? {};
        const out: TraceUpdate[] = [toolCallEvent({
          toolCallId: str(ev.id) ?? "",
          name,
          title: toolTitle(name, input),
          kind: toolKind(name),
          status: "in_progress",
          rawInput: input,
          ...(str(ev.messageId) ? { messageId: str(ev.messageId)! } : {}),
          ...(meta ? { _meta: meta } : {}),
        })];
        const plan = isTodoTool(name) ? todoPlan(input) : undefined;
        if (plan) out.push(planEvent(plan));
        return out;
      }
      case "tool_result": {
        const value = typeof ev.value === "string" ? ev.value : JSON.stringify(ev.value ?? "");
        return [toolResultEvent(str(ev.id) ?? "", ev.isError === true ? "failed" : "completed", value, undefined, meta)];
      }
      case "completion": {
        const u = obj(ev.usage);
        if (!u) return [];
        const read = num(u.cache_read_input_tokens);
        const write = num(u.cache_creation_input_tokens);
        // Anthropic's terms whatever the wire: input_tokens leaves cache reads and writes out.
        return [usageEvent("total", {
          promptTokens: num(u.input_tokens) + read + write,
          completionTokens: num(u.output_tokens),
          cachedTokens: read,
          cacheWriteTokens: write,
        }, meta ? { meta } : {})];
      }
      case "error":
        // Both an agent-loop failure and the closing "Exec failed" end the run (exit 1).
        return [errorEvent(str(ev.message) ?? "droid error", true, { ...meta, ...(str(ev.source) ? { source: str(ev.source) } : {}) })];
      default:
        return undefined;
    }
  }

  return {
    line(text) {
      return readJsonLine(text, start(), loss, read, (ev) => `unknown droid event ${JSON.stringify(ev.type)}`);
    },
    end() {
      return [...start(), ...loss.flush()];
    },
  };
}

/** droid's parser: stdout alone (its session files add nothing per call). */
export const droidParser: ParserSpec = { harness: "droid", create, sessionGlobs: [] };
