import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { chunkEvent, errorEvent, promptEvent, toolCallEvent, type TraceEvent } from "./events.ts";
import { appendGatewayUsage, followTrace, hasTrace, openTraceWriter, readTrace, traceBytes, traceCount, traceLines, tracePath } from "./store.ts";
import type { GatewayUsageEvent } from "../../gateway/meter.ts";
import { expectCode } from "../../tests/support/expect-code.ts";

const BUN = resolve("node_modules/.bin/bun");
let home: string;
const T = "trial-1";
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "evolve-trace-"));
  mkdirSync(join(home, "trials", T), { recursive: true });
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

function sample(): void {
  const w = openTraceWriter(home, T);
  w.append([promptEvent("Create hello.txt")]);
  w.append([
    chunkEvent("agent_message_chunk", "I'll create the file."),
    toolCallEvent({ toolCallId: "c1", name: "Bash", title: "echo Hello > hello.txt", kind: "execute", status: "pending", rawInput: { command: "echo Hello > hello.txt" } }),
    errorEvent("Permission DENIED on /etc", false),
    chunkEvent("agent_message_chunk", "Done."),
  ]);
  w.close();
}
const seqs = (it: Iterable<TraceEvent>) => [...it].map((e) => e.seq);

describe("the trace store", () => {
  it("numbers events from 0 without gaps, across writers, and reads them back whole", () => {
    sample();
    const w = openTraceWriter(home, T);
    expect(w.append([chunkEvent("agent_thought_chunk", "again")]).map((e) => e.seq)).toEqual([5]);
    w.close();
    const all = [...readTrace(home, T)];
    expect(all.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(all[0]).toEqual({ seq: 0, type: "prompt", data: { _prompt: { text: "Create hello.txt" } } });
    expect(all[2].type).toBe("tool_call");
    expect(traceCount(home, T)).toBe(6);
    // the stored file is the spec's one {seq, type, data} per line
    expect(readFileSync(tracePath(home, T), "utf8").split("\n")[0]).toBe('{"seq":0,"type":"prompt","data":{"_prompt":{"text":"Create hello.txt"}}}');
  });

  it("filters by cursor, kind, grep (over type and data) and tail", () => {
    sample();
    expect(seqs(readTrace(home, T, { after: 2 }))).toEqual([3, 4]);
    expect(seqs(readTrace(home, T, { types: ["agent_message_chunk", "error"] }))).toEqual([1, 3, 4]);
    expect(seqs(readTrace(home, T, { grep: /permission denied/i }))).toEqual([3]);
    expect(seqs(readTrace(home, T, { grep: /^tool_call$/i }))).toEqual([2]);
    expect(seqs(readTrace(home, T, { tail: 2 }))).toEqual([3, 4]);
    expect(seqs(readTrace(home, T, { types: ["agent_message_chunk"], tail: 1 }))).toEqual([4]);
    expect(seqs(readTrace(home, T, { after: 3, tail: 5 }))).toEqual([4]);
    expect(seqs(readTrace(home, T, { tail: 0 }))).toEqual([]);
    // the seq itself is not searched
    expect(seqs(readTrace(home, T, { grep: /"seq"/ }))).toEqual([]);
  });

  it("a trial without a trace reads as empty and says so", () => {
    expect(hasTrace(home, T)).toBe(false);
    expect([...readTrace(home, T)]).toEqual([]);
    expect(traceCount(home, T)).toBe(0);
  });

  it("a torn last line is never read, and the next writer records it as trace_loss and goes on", () => {
    sample();
    appendFileSync(tracePath(home, T), '{"seq":5,"type":"agent_message_chunk","data":{"upd');
    expect(seqs(readTrace(home, T))).toEqual([0, 1, 2, 3, 4]);
    expect(traceCount(home, T)).toBe(5);
    const w = openTraceWriter(home, T);
    expect(w.append([chunkEvent("agent_message_chunk", "after the crash")])[0].seq).toBe(6);
    w.close();
    const all = [...readTrace(home, T)];
    expect(all.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(all[5]).toMatchObject({ type: "trace_loss", data: { update: { count: 1, sample: '{"seq":5,"type":"agent_message_chunk","data":{"upd' } } });
    expect(readFileSync(tracePath(home, T), "utf8").endsWith("\n")).toBe(true);
  });

  it("the byte stream of the trace is its whole lines as stored: a torn last line is left out, a line longer than a chunk kept whole", () => {
    const w = openTraceWriter(home, T);
    w.append([promptEvent("a"), chunkEvent("agent_message_chunk", "q".repeat(700 << 10)), promptEvent("b")]);
    w.close();
    const whole = readFileSync(tracePath(home, T), "utf8");
    appendFileSync(tracePath(home, T), '{"seq":3,"ty');
    const bytes = Buffer.concat([...traceBytes(home, T)]).toString("utf8");
    expect(bytes).toBe(whole);
    expect([...traceBytes(join(home, "nowhere"), T)]).toEqual([]);
  });

  it("a trace that is only a torn line starts again at 0 after a trace_loss", () => {
    writeFileSync(tracePath(home, T), '{"seq":0,"ty');
    const w = openTraceWriter(home, T);
    w.append([promptEvent("x")]);
    w.close();
    expect([...readTrace(home, T)].map((e) => `${e.seq}:${e.type}`)).toEqual(["0:trace_loss", "1:prompt"]);
  });

  it("events larger than a read chunk are read whole, before and after", () => {
    const big = "y".repeat(3 << 20);
    const w = openTraceWriter(home, T);
    w.append([promptEvent("a"), chunkEvent("agent_message_chunk", big), promptEvent("b")]);
    w.close();
    const all = [...readTrace(home, T)];
    expect(all.map((e) => e.seq)).toEqual([0, 1, 2]);
    expect((all[1].data as { update: { content: { text: string } } }).update.content.text).toBe(big);
    expect(traceCount(home, T)).toBe(3);
    const w2 = openTraceWriter(home, T);
    expect(w2.append([promptEvent("c")])[0].seq).toBe(3);
    w2.close();
  });

  it("refuses a trace file that is a link or not a file (a FIFO never hangs the read)", async () => {
    const outside = join(home, "outside.jsonl");
    writeFileSync(outside, '{"seq":0,"type":"prompt","data":{}}\n');
    symlinkSync(outside, tracePath(home, T));
    await expectCode(() => [...readTrace(home, T)], "store_corrupt");
    await expectCode(() => openTraceWriter(home, T), "store_corrupt");
    rmSync(tracePath(home, T));
    mkdirSync(tracePath(home, T));
    await expectCode(() => [...readTrace(home, T)], "store_corrupt");
  });

  it("stores the gateway's per-call usage after the harness's, in the trace's usage shape", () => {
    sample();
    const call = (model: string, cost: number | null): GatewayUsageEvent => ({
      type: "usage",
      data: { update: { sessionUpdate: "usage", source: "gateway", scope: "call", model, lane: "agent", cost_usd: cost, usage: { promptTokens: 12, completionTokens: 3, inputTokens: 10, cachedReadTokens: 2, cachedWriteTokens: 0, thoughtTokens: 1, totalTokens: 15 } } },
    });
    const out = appendGatewayUsage(home, T, [call("anthropic/claude-sonnet-4-5", 0.0012), call("x/unpriced", null)]);
    expect(out.map((e) => e.seq)).toEqual([5, 6]);
    const [a, b] = [...readTrace(home, T, { after: 4 })];
    expect(a.data).toEqual({
      update: { sessionUpdate: "usage", scope: "call", source: "gateway", model: "anthropic/claude-sonnet-4-5", costUsd: 0.0012, usage: { promptTokens: 12, completionTokens: 3, cachedTokens: 2, cacheWriteTokens: 0, reasoningTokens: 1 }, _meta: { lane: "agent" } },
    });
    expect((b.data as { update: object }).update).not.toHaveProperty("costUsd");
    expect(appendGatewayUsage(home, T, [])).toEqual([]);
  });

  it("follow returns only what is new, whole lines only, and starts again when a new attempt replaced the file", () => {
    const f = followTrace(home, T, { tail: 2 });
    expect(f.poll()).toEqual([]);
    sample();
    expect(f.poll().map((s) => s.seq)).toEqual([3, 4]);
    expect(f.poll()).toEqual([]);
    appendFileSync(tracePath(home, T), '{"seq":5,"type":"prompt","data":{"_prompt":');
    expect(f.poll()).toEqual([]);
    appendFileSync(tracePath(home, T), '{"text":"z"}}}\n');
    expect(f.poll().map((s) => s.json)).toEqual(['{"seq":5,"type":"prompt","data":{"_prompt":{"text":"z"}}}']);
    rmSync(tracePath(home, T));
    const w = openTraceWriter(home, T);
    w.append([promptEvent("new attempt")]);
    w.close();
    expect(f.poll().map((s) => s.seq)).toEqual([0]);
  });

  it("another process reads the trace while a writer appends to it: every event once, in order, never a piece of one", async () => {
    const n = 150;
    const child = spawn(BUN, [resolve("tests/support/trace-writer.ts"), home, T, String(n)], { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stderr.on("data", (d) => (err += d));
    const done = new Promise<number>((r) => child.on("close", (c) => r(c ?? -1)));
    const f = followTrace(home, T);
    const seen: number[] = [];
    let exited = false;
    void done.then(() => (exited = true));
    let lastPoll: number[] = [];
    do {
      lastPoll = f.poll().map((s) => {
        JSON.parse(s.json);
        return s.seq;
      });
      seen.push(...lastPoll);
      await new Promise((r) => setTimeout(r, 1));
    } while (!exited || lastPoll.length > 0);
    expect(await done, err).toBe(0);
    const total = Array.from({ length: n }, (_, i) => (i % 3) + 1).reduce((a, b) => a + b, 0);
    expect(seen).toEqual(Array.from({ length: total }, (_, i) => i));
    expect([...traceLines(home, T)].length).toBe(total);
  });
});
