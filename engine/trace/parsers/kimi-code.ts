/**
 * kimi-code's `-p … --output-format stream-json` stream (agent-clis.md "kimi-code"): OpenAI-shaped messages, one
 * `assistant` line per model call (its text and tool calls together, flushed before the first tool result) and one
 * `tool` line per result. Stdout has no usage, no reasoning and no failure: usage and the failed turn live only in
 * the session's wire file (`…/agents/<agent>/wire.jsonl`), read at the end.
 */
import { chunkEvent, errorEvent, promptEvent, toolCallEvent, toolResultEvent, usageEvent, type SessionFile, type TraceParser, type TraceUpdate } from "../events.ts";
import type { ParserSpec } from "./index.ts";
import { isTodoTool, jsonObject, LineLoss, num, obj, type Obj, planEvent, readJsonLine, str, todoPlan, toolKind, toolTitle } from "./toolkit.ts";

/** The id given to the n-th model call (1-based): stdout names none, so calls are numbered as they come. */
const callId = (n: number): string => `kimi-call-${n}`;

function args(raw: unknown): Obj {
  if (typeof raw !== "string") return obj(raw) ?? {};
  try {
    return obj(JSON.parse(raw)) ?? {};
  } catch {
    return {};
  }
}

/** The agent a wire file belongs to (`main`, or a subagent's name), from its path. */
function wireAgent(path: string): string | undefined {
  return /(?:^|\/)agents\/([^/]+)\/wire\.jsonl$/.exec(path)?.[1];
}

function create(opts: { instruction?: string }): TraceParser {
  const loss = new LineLoss();
  let started = false;
  let calls = 0;

  const start = (): TraceUpdate[] => {
    if (started) return [];
    started = true;
    return opts.instruction !== undefined ? [promptEvent(opts.instruction)] : [];
  };

  function read(ev: Obj): TraceUpdate[] | undefined {
    if (ev.role === "meta") {
      if (ev.type === "system.version" || ev.type === "session.resume_hint") return [];
      if (ev.type === "turn.step.retrying") {
        const msg = str(ev.error_message) ?? str(ev.error_name) ?? "model call failed";
        return [errorEvent(`${msg} (retrying, attempt ${num(ev.next_attempt)} of ${num(ev.max_attempts)})`, false, typeof ev.status_code === "number" ? { statusCode: ev.status_code } : undefined)];
      }
      return undefined;
    }
    if (ev.role === "assistant") {
      const id = callId(++calls);
      const out: TraceUpdate[] = [];
      const text = str(ev.content);
      if (text) out.push(chunkEvent("agent_message_chunk", text, id));
      const toolCalls = Array.isArray(ev.tool_calls) ? ev.tool_calls : [];
      for (const t of toolCalls) {
        const call = obj(t) ?? {};
        const fn = obj(call.function) ?? {};
        const name = str(fn.name) ?? "";
        const input = args(fn.arguments);
        out.push(toolCallEvent({ toolCallId: str(call.id) ?? "", name, title: toolTitle(name, input), kind: toolKind(name), status: "in_progress", rawInput: input, messageId: id }));
        const plan = isTodoTool(name) ? todoPlan(input) : undefined;
        if (plan) out.push(planEvent(plan));
      }
      return out;
    }
    if (ev.role === "tool") {
      const content = typeof ev.content === "string" ? ev.content : JSON.stringify(ev.content ?? "");
      return [toolResultEvent(str(ev.tool_call_id) ?? "", "completed", content)];
    }
    return undefined;
  }

  /** Usage (one `usage.record` per model call) and a failed turn, from each agent's wire file. */
  function fromWire(session: readonly SessionFile[]): TraceUpdate[] {
    const out: TraceUpdate[] = [];
    for (const file of session) {
      const agent = wireAgent(file.path);
      if (!agent) continue;
      const records: { usage: Obj; scope?: string }[] = [];
      let failure: string | undefined;
      for (const line of file.text.split("\n")) {
        if (!line.includes('"usage.record"') && !line.includes('"turn.ended"')) continue;
        const ev = jsonObject(line);
        // A record of another agent is counted from that agent's own file, once.
        if (!ev || (ev.agentId !== undefined && ev.agentId !== agent)) continue;
        if (ev.type === "usage.record") records.push({ usage: obj(ev.usage) ?? {}, scope: str(ev.usageScope) });
        else if (ev.type === "turn.ended" && ev.reason === "failed") {
          const e = obj(ev.error) ?? {};
          failure = [str(e.code), str(e.message)].filter(Boolean).join(": ") || "turn failed";
        }
      }
      // Stdout numbered the main agent's calls; the wire's turn-scope records are the same calls in the same order.
      const turnRecords = records.filter((r) => r.scope === undefined || r.scope === "turn").length;
      const aligned = agent === "main" && turnRecords === calls;
      let n = 0;
      for (const r of records) {
        const u = r.usage;
        const read = num(u.inputCacheRead);
        const write = num(u.inputCacheCreation);
        const isTurn = r.scope === undefined || r.scope === "turn";
        const messageId = aligned && isTurn ? callId(++n) : undefined;
        out.push(usageEvent("call", { promptTokens: num(u.inputOther) + read + write, completionTokens: num(u.output), cachedTokens: read, cacheWriteTokens: write }, {
          ...(messageId ? { messageId } : {}),
          ...(agent !== "main" || !isTurn ? { meta: { agent, ...(r.scope ? { scope: r.scope } : {}) } } : {}),
        }));
      }
      if (failure !== undefined) out.push(errorEvent(failure, true, agent !== "main" ? { agent } : undefined));
    }
    return out;
  }

  return {
    line(text) {
      return readJsonLine(text, start(), loss, read, (ev) => `unknown kimi-code line (role ${JSON.stringify(ev.role)}, type ${JSON.stringify(ev.type)})`);
    },
    end(session) {
      return [...start(), ...loss.flush(), ...fromWire(session)];
    },
  };
}

/** kimi-code's parser: stdout, then the wire files for usage and failures. */
export const kimiCodeParser: ParserSpec = { harness: "kimi-code", create, sessionGlobs: ["sessions/*/*/agents/*/wire.jsonl"] };
