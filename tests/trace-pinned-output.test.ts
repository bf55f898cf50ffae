/**
 * The parsed trace and the ATIF trajectory of large mixed inputs, pinned by digest, so that work on the parsers and
 * the builder for speed (issue 21 §6) can show the output unchanged byte for byte. Two inputs:
 * - every harness's recorded runs (fixtures/agents/<cli>/<case>), each turned into one long stream: its lines
 *   repeated with ids of their own per round, mixed with what a real stream also holds (blank lines, garbage,
 *   JSON that is no object or has no type, truncated lines, a line repeated as is), fed to the harness's parser
 *   with and without the instruction, then its session files; every event and the trajectory are digested;
 * - a seeded random walk over every event kind into the ATIF builder directly (ids drawn from small pools, so
 *   repeats, interleaved messages, results before or without their call, usage before its message all occur).
 * A change that alters any output changes a digest: regenerate the digests only for an intended output change, and
 * say so in the commit.
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parserNames } from "../engine/harness/catalog.ts";
import { buildTrajectory, TrajectoryBuilder } from "../engine/trace/atif.ts";
import { chunkEvent, errorEvent, promptEvent, toolCallEvent, toolResultEvent, traceLossEvent, usageEvent, warningEvent, type TraceUpdate } from "../engine/trace/events.ts";
import { planEvent } from "../engine/trace/parsers/toolkit.ts";
import { loadFixture, parse } from "./support/agent-fixtures.ts";

const FIXTURES = resolve(import.meta.dirname, "../fixtures/agents");
const sha = (v: unknown) => createHash("sha256").update(JSON.stringify(v)).digest("hex").slice(0, 16);

/** A small deterministic PRNG (mulberry32): the same walk on every run and runtime. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NOISE = ["", "   ", "not json at all", "[1,2,3]", '{"no_type":true}', '"a string"', "null", '{"type":"assistant"}', '{"type":"user","message":{}}', '{"type":"unknown_kind","x":1}'];

/** One long stream of a recorded run: its lines `rounds` times, ids made fresh per round, noise between. */
function longStream(stdout: string, rounds: number, seed: number): string {
  const lines = stdout.split("\n").filter((l, i, all) => !(i === all.length - 1 && l === ""));
  const rnd = prng(seed);
  const out: string[] = [];
  for (let k = 0; k < rounds; k++) {
    for (const l of lines) {
      const line = k === 0 ? l : l.replace(/"(id|tool_use_id|uuid|call_id|callId|toolCallId|tool_call_id|messageId|message_id|item_id)":"([^"]+)"/g, (_m, key, v) => `"${key}":"${v}-${k}"`);
      out.push(line);
      const r = rnd();
      if (r < 0.08) out.push(NOISE[Math.floor(rnd() * NOISE.length)]!);
      else if (r < 0.1) out.push(line.slice(0, Math.floor(line.length / 2)));
      else if (r < 0.12) out.push(line);
    }
  }
  return `${out.join("\n")}\n`;
}

function cases(cli: string): string[] {
  return readdirSync(join(FIXTURES, cli), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();
}

/** Every event and both trajectories (with and without the instruction) of every case of one harness, digested. */
function harnessDigest(cli: string): { events: number; steps: number; digest: string } {
  const hash = createHash("sha256");
  let events = 0;
  let steps = 0;
  for (const name of cases(cli)) {
    const f = loadFixture(cli, name);
    const stream = longStream(f.stdout, 200, name.length * 7919 + cli.length);
    for (const instruction of [f.upstream.instruction, undefined]) {
      const evs = parse(cli, stream, f.session, instruction);
      const atif = buildTrajectory(evs, { agent: { name: cli, version: "pinned" }, instruction: instruction ?? "fallback instruction" });
      hash.update(JSON.stringify(evs));
      hash.update(JSON.stringify(atif));
      events += evs.length;
      steps += atif.steps.length;
    }
  }
  return { events, steps, digest: hash.digest("hex").slice(0, 16) };
}

/** A seeded random walk over every event kind, the ids drawn from small pools. */
function randomWalk(seed: number, n: number): TraceUpdate[] {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)]!;
  const msg = () => (rnd() < 0.2 ? undefined : `m${Math.floor(rnd() * 40)}`);
  const call = () => `c${Math.floor(rnd() * 60)}`;
  const meta = () => (rnd() < 0.3 ? { timestamp: rnd() < 0.8 ? `2026-12-02T01:55:${String(Math.floor(rnd() * 60)).padStart(2, "0")}.000Z` : "yesterday" } : undefined);
  const usage = () => {
    const u: { promptTokens: number; completionTokens: number; cachedTokens?: number; cacheWriteTokens?: number; reasoningTokens?: number } = { promptTokens: Math.floor(rnd() * 5000), completionTokens: Math.floor(rnd() * 500) };
    if (rnd() < 0.5) u.cachedTokens = Math.floor(rnd() * 100);
    if (rnd() < 0.3) u.cacheWriteTokens = Math.floor(rnd() * 100);
    if (rnd() < 0.3) u.reasoningTokens = Math.floor(rnd() * 100);
    return u;
  };
  const out: TraceUpdate[] = rnd() < 0.5 ? [promptEvent("the instruction")] : [];
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (r < 0.25) out.push(chunkEvent("agent_message_chunk", `text ${i}`, msg(), meta()));
    else if (r < 0.33) out.push(chunkEvent("agent_thought_chunk", `thought ${i}`, msg(), meta()));
    else if (r < 0.38) out.push(chunkEvent("user_message_chunk", `user ${i}`, msg(), meta()));
    else if (r < 0.5) {
      const c: Parameters<typeof toolCallEvent>[0] = { toolCallId: call(), name: pick(["Bash", "Read", "TodoWrite"]), title: "t", kind: "other", status: "pending", rawInput: rnd() < 0.9 ? { i } : ([i] as never) };
      const m = msg();
      if (m !== undefined) c.messageId = m;
      const t = meta();
      if (t) c._meta = t;
      out.push(toolCallEvent(c));
    } else if (r < 0.64) {
      const status = pick(["completed", "failed", "in_progress", "pending"] as const);
      const form = rnd();
      out.push(toolResultEvent(call(), status, form < 0.6 ? `out ${i}` : undefined, form < 0.6 ? undefined : form < 0.8 ? { stdout: `o${i}` } : form < 0.9 ? `raw ${i}` : undefined, meta()));
    } else if (r < 0.8) {
      const kind = rnd();
      const m = msg();
      if (kind < 0.1) out.push(usageEvent("total", usage()));
      else if (kind < 0.25) {
        const ev = usageEvent("call", usage(), { model: "gw-model" });
        (ev.data as { update: { source: string; costUsd?: number } }).update.source = "gateway";
        if (rnd() < 0.7) (ev.data as { update: { costUsd?: number } }).update.costUsd = Math.floor(rnd() * 1000) / 1e5;
        out.push(ev);
      } else out.push(usageEvent("call", usage(), { ...(m !== undefined ? { messageId: m } : {}), ...(rnd() < 0.5 ? { model: "claude-x" } : {}), ...(rnd() < 0.3 ? { meta: meta() } : {}) }));
    } else if (r < 0.86) out.push(planEvent([{ content: `step ${i}`, priority: "medium", status: pick(["pending", "in_progress", "completed"] as const) }]));
    else if (r < 0.92) out.push(errorEvent(`error ${i}`, rnd() < 0.3, meta()));
    else if (r < 0.96) out.push(warningEvent(`warning ${i}`, meta()));
    else out.push(traceLossEvent(1 + Math.floor(rnd() * 3), "not a JSON line", `sample ${i}`));
  }
  return out;
}

describe("pinned output of large mixed traces", () => {
  // digests taken before the speed work of issue 21 §6; counts say at a glance which side moved
  const PINNED: Record<string, { events: number; steps: number; digest: string }> = {
    "claude-code": { events: 4379, steps: 2332, digest: "ba06a3ca7d03ae74" },
    codex: { events: 3653, steps: 3228, digest: "06716946fda94a4a" },
    droid: { events: 5506, steps: 3844, digest: "b8332aa23ed0cfe0" },
    "gemini-cli": { events: 4232, steps: 2080, digest: "7d9fbdc5e6d1270d" },
    "kimi-code": { events: 2380, steps: 1964, digest: "ffd417d26fbc62c3" },
    opencode: { events: 4150, steps: 864, digest: "17e4172546f890aa" },
    "qwen-code": { events: 4477, steps: 2042, digest: "45fd8ff49058dc09" },
  };

  it.each(parserNames().filter((n) => existsSync(join(FIXTURES, n))).sort())("%s: every recorded case, long and noisy, parsed and built into ATIF, is unchanged", (cli) => {
    expect(harnessDigest(cli)).toEqual(PINNED[cli]);
  });

  it("the ATIF builder over a seeded random walk of every event kind is unchanged", () => {
    const digests = [1, 2, 3, 4].map((seed) => {
      const evs = randomWalk(seed, 4000);
      const b = new TrajectoryBuilder({ agent: { name: "walk", version: "1", model_name: "m" }, sessionId: `s${seed}`, ...(seed % 2 ? { instruction: "fallback" } : {}) });
      for (const e of evs) b.push(e);
      const gateway = seed === 4 ? { gatewayUsage: [{ model: "g", promptTokens: 10, completionTokens: 2, cachedTokens: 1, costUsd: 0.5 }] } : {};
      return [sha(b.finish()), sha(buildTrajectory(evs, { agent: { name: "walk", version: "1" }, ...gateway }))];
    });
    expect(digests).toEqual([
      ["46652490ba41413e", "971878729e8aaf55"],
      ["f70a85e8938edc85", "ef02c741ef6ae48a"],
      ["9b20a5535c79609c", "648d3b02d5fccab4"],
      ["3ed7f8144d0916a1", "5a2e379e05c93bbf"],
    ]);
  });
});
