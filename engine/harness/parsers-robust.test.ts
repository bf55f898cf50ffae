/**
 * The claude-code and codex parsers never throw, whatever JSON a line holds: fields of the wrong type, missing or
 * nested oddly (a CLI upgrade, a truncated write). Deterministic pseudo-random shapes over both formats' own
 * type and field names, fed to `line` and to `end` as session files.
 */
import { describe, expect, it } from "vitest";
import { parserFor } from "./catalog.ts";

const VALUES: unknown[] = [null, 0, -1, 1.5, "", "x", [], {}, [null], [1, "a"], { a: 1 }, true];
const KEYS = ["type", "message", "content", "id", "item", "usage", "error", "result", "subtype", "is_error", "tool_use_id", "items", "changes", "text", "thinking", "name", "input", "payload", "info", "last_token_usage", "status", "exit_code", "model", "isApiErrorMessage"];
const TYPES = ["assistant", "user", "result", "system", "item.started", "item.completed", "item.updated", "turn.started", "turn.completed", "turn.failed", "error", "thread.started", "token_usage_record", "event_msg", "token_count", "turn_context"];
const BLOCK_TYPES = ["text", "thinking", "tool_use", "tool_result", "web_search_tool_result", "redacted_thinking"];
const ITEM_TYPES = ["agent_message", "reasoning", "command_execution", "file_change", "mcp_tool_call", "web_search", "todo_list", "plan", "collab_tool_call", "error"];

function generator(seed: number) {
  let s = seed;
  const rnd = (n: number) => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    // the high bits: an LCG's low bits repeat with a short period
    return (s >>> 16) % n;
  };
  const pick = <T>(xs: readonly T[]): T => xs[rnd(xs.length)]!;
  const junk = (depth = 0): unknown => {
    if (depth > 2 || rnd(2) === 0) return pick(VALUES);
    if (rnd(3) === 0) return Array.from({ length: rnd(3) }, () => junk(depth + 1));
    return Object.fromEntries(Array.from({ length: rnd(4) }, () => [pick(KEYS), junk(depth + 1)]));
  };
  // Half the time a field has the shape the format gives it, else anything: the branches are reached with bad data.
  const maybe = (good: () => unknown) => (rnd(2) ? good() : junk());
  const block = () => ({ type: pick(BLOCK_TYPES), id: maybe(() => `id${rnd(3)}`), tool_use_id: maybe(() => `id${rnd(3)}`), text: maybe(() => "t"), thinking: maybe(() => "th"), name: maybe(() => pick(["Bash", "TodoWrite", "Read"])), input: maybe(() => ({ todos: maybe(() => [junk(), { content: "c", status: "done" }]) })), content: maybe(() => [junk(), { type: "text", text: "r" }]), is_error: maybe(() => true) });
  const counts = () => ({ input_tokens: maybe(() => 5), output_tokens: maybe(() => 2), cached_input_tokens: maybe(() => 1), cache_read_input_tokens: maybe(() => 1) });
  return () => JSON.stringify({
    type: pick(TYPES),
    message: maybe(() => ({ id: maybe(() => `m${rnd(3)}`), model: maybe(() => "m"), content: maybe(() => Array.from({ length: rnd(4) }, block)), usage: maybe(counts) })),
    item: maybe(() => ({ id: maybe(() => `item_${rnd(3)}`), type: pick(ITEM_TYPES), text: maybe(() => "x"), command: maybe(() => "ls"), items: maybe(() => [junk(), { text: "a", completed: true }]), changes: maybe(() => [junk(), { path: "p", kind: "add" }]), status: maybe(() => pick(["completed", "failed", "in_progress"])), exit_code: maybe(() => 1), result: junk(), error: junk(), message: maybe(() => "m") })),
    usage: maybe(counts),
    payload: maybe(() => ({ type: pick(TYPES), usage: maybe(counts), info: maybe(() => ({ last_token_usage: maybe(counts) })), response_id: maybe(() => "r"), model: maybe(() => "m") })),
    error: rnd(4) === 0 ? maybe(() => ({ message: "e" })) : undefined,
    result: maybe(() => "r"), subtype: maybe(() => pick(["success", "error_max_turns"])), is_error: maybe(() => true), thread_id: maybe(() => "t"),
    [pick(KEYS)]: junk(),
  });
}

describe.each(["claude-code", "codex"])("%s parser on arbitrary JSON", (harness) => {
  it("never throws, and every event it emits is of a known kind", () => {
    const line = generator(harness.length);
    const kinds = new Set<string>();
    for (let run = 0; run < 200; run++) {
      const p = parserFor(harness)!.create(run % 2 ? { instruction: "do it" } : {});
      const lines = Array.from({ length: 15 }, line);
      const events = [...lines.flatMap((l) => p.line(l)), ...p.end([
        { path: "sessions/2026/01/01/rollout-x.jsonl", text: lines.join("\n") },
        { path: "projects/-app/s.jsonl", text: lines.join("\n") },
      ])];
      for (const e of events) kinds.add(e.type);
    }
    // every kind the format can give is reached (codex's stdout carries no user text; claude-code gives no warning),
    // so the shapes got past the parser's refusals into its branches, and nothing else came out
    const all = ["prompt", "user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan", "usage", "error", "warning", "trace_loss"];
    const only = { "claude-code": "warning", codex: "user_message_chunk" } as Record<string, string>;
    expect([...kinds].sort()).toEqual(all.filter((k) => k !== only[harness]).sort());
  });
});
