/**
 * qwen-code's `--output-format stream-json` stream (agent-clis.md "qwen-code"), shaped like Claude Code's: one
 * `assistant` line per model call (its `message.id`) with text, thinking and tool_use blocks and that call's usage,
 * tool results as `user` lines, closing totals in `result`. Usage per call is given at the end: from the session
 * file (`projects/<cwd>/chats/<session>.jsonl`), whose `usageMetadata` also counts reasoning, when it holds one
 * assistant record per call of the stream; else from the stream's own lines.
 *
 * A failed model call shows up as an `assistant` text "[API Error: …]" with zero usage: that is an error, not the
 * agent's answer. When the closing `result` fails with the same message it is one fatal error; a run that goes on
 * after it makes it a non-fatal one.
 */
import { chunkEvent, errorEvent, promptEvent, toolCallEvent, toolResultEvent, usageEvent, type SessionFile, type TraceParser, type TraceUpdate, type UpdateMeta, type UsageCounts } from "../events.ts";
import type { ParserSpec } from "./index.ts";
import { isBlank, isTodoTool, jsonObject, LineLoss, num, obj, type Obj, planEvent, readJsonLine, str, todoPlan, toolKind, toolTitle } from "./toolkit.ts";

/** The session files, relative to the CLI's home (QWEN_HOME). */
const SESSION_GLOB = "projects/*/chats/*.jsonl";

const API_ERROR = /^\[API Error: /;

/**
 * Stream usage as UsageCounts. `input_tokens` already holds the cached reads; `output_tokens` leaves thoughts out
 * on some wires (Gemini's) while `total_tokens` counts them, so the completion is what the total holds beyond the
 * input.
 */
function streamUsage(u: Obj): UsageCounts {
  const input = num(u.input_tokens);
  const output = num(u.output_tokens);
  return { promptTokens: input, completionTokens: Math.max(output, num(u.total_tokens) - input), cachedTokens: num(u.cache_read_input_tokens) };
}

/** A session record's usageMetadata (Gemini's terms: the prompt includes cached tokens, the total everything). */
function sessionUsage(m: Obj): UsageCounts {
  const prompt = num(m.promptTokenCount);
  const completion = Math.max(num(m.candidatesTokenCount), num(m.totalTokenCount) - prompt);
  return { promptTokens: prompt, completionTokens: completion, cachedTokens: num(m.cachedContentTokenCount), reasoningTokens: num(m.thoughtsTokenCount) };
}

/** A tool_result block's content as text: a string, or an array of text parts. */
function resultText(c: unknown): string {
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.map((p) => str(obj(p)?.text) ?? (typeof p === "string" ? p : "")).join("");
  return c === undefined ? "" : JSON.stringify(c);
}

function create(opts: { instruction?: string }): TraceParser {
  const loss = new LineLoss();
  let started = false;
  let prompted = opts.instruction !== undefined;
  let sessionId: string | undefined;
  // Each model call of the stream, in order, with its usage (the last line under an id wins).
  const calls = new Map<string, { usage: UsageCounts; model?: string; meta?: UpdateMeta }>();
  let apiError: { message: string; meta?: UpdateMeta } | undefined;

  const start = (): TraceUpdate[] => {
    if (started) return [];
    started = true;
    return opts.instruction !== undefined ? [promptEvent(opts.instruction)] : [];
  };
  /** A failed call the run went on after. */
  const survived = (): TraceUpdate[] => {
    if (!apiError) return [];
    const ev = errorEvent(apiError.message, false, apiError.meta);
    apiError = undefined;
    return [ev];
  };

  function assistant(ev: Obj, meta: UpdateMeta | undefined): TraceUpdate[] | undefined {
    const msg = obj(ev.message);
    if (!msg || !Array.isArray(msg.content)) return undefined;
    const id = str(msg.id) ?? str(ev.uuid);
    const usage = obj(msg.usage);
    const blocks = msg.content.map(obj);
    const texts = blocks.filter((b) => b?.type === "text").map((b) => str(b!.text) ?? "");
    if (texts.length === 1 && blocks.length === 1 && API_ERROR.test(texts[0]!) && (!usage || num(usage.total_tokens) + num(usage.input_tokens) + num(usage.output_tokens) === 0)) {
      const out = survived();
      apiError = { message: texts[0]!, ...(meta ? { meta } : {}) };
      return out;
    }
    const out = survived();
    const model = str(msg.model);
    if (id && usage) calls.set(id, { usage: streamUsage(usage), ...(model ? { model } : {}), ...(meta ? { meta } : {}) });
    for (const b of blocks) {
      if (!b) continue;
      if (b.type === "text") {
        const text = str(b.text) ?? "";
        if (text) out.push(chunkEvent("agent_message_chunk", text, id, meta));
      } else if (b.type === "thinking") {
        const text = str(b.thinking) ?? str(b.text) ?? "";
        if (text) out.push(chunkEvent("agent_thought_chunk", text, id, meta));
      } else if (b.type === "tool_use") {
        const name = str(b.name) ?? "";
        const input = obj(b.input) ?? {};
        out.push(toolCallEvent({
          toolCallId: str(b.id) ?? "",
          name,
          title: toolTitle(name, input),
          kind: toolKind(name),
          // --yolo runs each call as it arrives
          status: "in_progress",
          rawInput: input,
          ...(id ? { messageId: id } : {}),
          ...(meta ? { _meta: meta } : {}),
        }));
        const plan = isTodoTool(name) ? todoPlan(input) : undefined;
        if (plan) out.push(planEvent(plan));
      } else return undefined;
    }
    return out;
  }

  function user(ev: Obj, meta: UpdateMeta | undefined): TraceUpdate[] | undefined {
    const msg = obj(ev.message);
    if (!msg) return undefined;
    const content = typeof msg.content === "string" ? [{ type: "text", text: msg.content }] : msg.content;
    if (!Array.isArray(content)) return undefined;
    const out = survived();
    for (const raw of content) {
      const b = obj(raw);
      if (b?.type === "tool_result") {
        out.push(toolResultEvent(str(b.tool_use_id) ?? "", b.is_error === true ? "failed" : "completed", resultText(b.content), undefined, meta));
      } else if (b?.type === "text") {
        const text = str(b.text) ?? "";
        if (!prompted) {
          prompted = true;
          out.push(promptEvent(text));
        } else if (text && !(opts.instruction !== undefined && text.trim() === opts.instruction.trim())) {
          out.push(chunkEvent("user_message_chunk", text, undefined, meta));
        }
      } else return undefined;
    }
    return out;
  }

  function read(ev: Obj): TraceUpdate[] | undefined {
    const meta = str(ev.timestamp) ? { timestamp: str(ev.timestamp)! } : undefined;
    switch (ev.type) {
      case "system":
        if (ev.subtype === "init") sessionId = str(ev.session_id);
        return [];
      case "stream_event":
        // Partial deltas (only with --include-partial-messages) and goal state: the whole message follows.
        return [];
      case "assistant":
        return assistant(ev, meta);
      case "user":
        return user(ev, meta);
      case "result": {
        const out: TraceUpdate[] = [];
        if (ev.is_error === true) {
          const message = str(obj(ev.error)?.message) ?? str(ev.result) ?? `qwen-code ended with ${JSON.stringify(ev.subtype)}`;
          if (apiError && apiError.message !== message) out.push(...survived());
          const subtype = str(ev.subtype);
          out.push(errorEvent(message, true, { ...(apiError?.meta ?? meta), ...(subtype ? { subtype } : {}) }));
          apiError = undefined;
        } else out.push(...survived());
        const u = obj(ev.usage);
        if (u && num(u.input_tokens) + num(u.output_tokens) > 0) out.push(usageEvent("total", streamUsage(u), meta ? { meta } : {}));
        return out;
      }
      default:
        return undefined;
    }
  }

  return {
    line(text) {
      return readJsonLine(text, start(), loss, read, (ev) => `unknown qwen-code event ${JSON.stringify(ev.type)}`);
    },
    end(session: readonly SessionFile[]) {
      const out = [...start(), ...loss.flush(), ...survived()];
      // The run's own chat file (named by its session id), else the newest.
      const file = session.find((f) => sessionId !== undefined && f.path.endsWith(`/${sessionId}.jsonl`)) ?? session[session.length - 1];
      const records: Obj[] = [];
      if (file) {
        for (const line of file.text.split("\n")) {
          if (isBlank(line)) continue;
          const r = jsonObject(line);
          if (!r) loss.lost(line, "unreadable qwen-code session line");
          else if (r.type === "assistant" && obj(r.usageMetadata)) records.push(r);
        }
        out.push(...loss.flush());
      }
      const ids = [...calls.keys()];
      const fromSession = records.length === ids.length && records.length > 0;
      ids.forEach((id, i) => {
        const c = calls.get(id)!;
        const usage = fromSession ? sessionUsage(obj(records[i]!.usageMetadata)!) : c.usage;
        out.push(usageEvent("call", usage, { ...(c.model ? { model: c.model } : {}), messageId: id, ...(c.meta ? { meta: c.meta } : {}) }));
      });
      return out;
    },
  };
}

/** qwen-code's parser: stdout, plus its chat file for each call's reasoning tokens. */
export const qwenCodeParser: ParserSpec = { harness: "qwen-code", create, sessionGlobs: [SESSION_GLOB] };
