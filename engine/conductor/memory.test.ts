/**
 * Episodic memory (engine/conductor/episodes.ts) and `harness init` (engine/conductor/init.ts) on real files: an
 * episode keeps its failures, appends survive a torn line, links are refused; init writes a working `.agent/` and
 * never overwrites one.
 */
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appendEpisode, episodeOf, readEpisodes } from "./episodes.ts";
import { defaultAgentFiles, initAgentDir } from "./init.ts";
import { DEFAULT_CONDUCTOR_CONFIG } from "./layout.ts";
import { errorEvent, promptEvent, toolCallEvent, toolResultEvent, usageEvent, type TraceUpdate } from "../trace/events.ts";
import { expectCode } from "../../tests/support/expect-code.ts";

let scratch: string;
let n = 0;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-conductor-mem-"));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const fresh = () => {
  const d = join(scratch, `d${++n}`);
  mkdirSync(d);
  return d;
};

const trace: TraceUpdate[] = [
  promptEvent("fix the bug"),
  usageEvent("call", { promptTokens: 10, completionTokens: 5 }),
  toolCallEvent({ toolCallId: "ok1", name: "shell", title: "ls", kind: "execute", status: "pending", rawInput: { command: "ls" } }),
  toolResultEvent("ok1", "completed", "a b"),
  toolCallEvent({ toolCallId: "bad1", name: "shell", title: "rm -rf /", kind: "execute", status: "pending", rawInput: { command: "rm -rf /" } }),
  toolResultEvent("bad1", "failed", "vetoed: no", undefined, { vetoed: true, reason: "no" }),
  toolCallEvent({ toolCallId: "bad2", name: "shell", title: "make", kind: "execute", status: "pending", rawInput: { command: "make" } }),
  toolResultEvent("bad2", "failed", "x".repeat(10_000)),
  errorEvent("the run used all 3 turns (max_turns) without calling finish", true),
];

describe("episodes", () => {
  it("a failed run's episode keeps its whole trace but usage, texts cut, so diagnose sees how it went wrong", () => {
    const ep = episodeOf({ outcome: "max_turns", turns: 3, trace }, { task: "card-1", domain: "python", score: 0, at: new Date("2026-01-02T03:04:05Z") });
    expect(ep).toMatchObject({ at: "2026-01-02T03:04:05.000Z", task: "card-1", domain: "python", outcome: "max_turns", score: 0, turns: 3, trace: "full" });
    expect(ep.failures.map((f) => f.type)).toEqual(["prompt", "tool_call", "tool_call_update", "tool_call", "tool_call_update", "tool_call", "tool_call_update", "error"]);
    expect(ep.failures[4]).toEqual(trace[5]);
    const cut = ep.failures[6] as Extract<TraceUpdate, { type: "tool_call_update" }>;
    expect(cut.data.update.content![0]!.content.text.length).toBeLessThan(2100);
    // a finished run the check failed is a failed run too
    expect(episodeOf({ outcome: "finished", turns: 1, trace: trace.slice(0, 4) }, { score: 0 }).failures.map((f) => f.type)).toEqual(["prompt", "tool_call", "tool_call_update"]);
  });

  it("a passing run's episode keeps each failed call with its result, and the errors; nothing of the clean calls", () => {
    const ep = episodeOf({ outcome: "finished", turns: 3, trace }, { score: 1 });
    expect(ep.trace).toBe("failures");
    expect(ep.failures.map((f) => f.type)).toEqual(["tool_call", "tool_call_update", "tool_call", "tool_call_update", "error"]);
    expect(ep.failures[1]).toEqual(trace[5]);
    expect(episodeOf({ outcome: "finished", turns: 1, trace: trace.slice(0, 4) }, { score: 1 }).failures).toEqual([]);
  });

  it("appends one line per episode (creating memory/), reads them back, and skips and counts a torn line", async () => {
    const root = join(fresh(), ".agent");
    mkdirSync(root);
    expect(await readEpisodes(root)).toEqual({ episodes: [], skipped: 0 });
    const a = episodeOf({ outcome: "finished", turns: 2, trace }, { score: 1 });
    const b = episodeOf({ outcome: "model_error", turns: 1, trace }, { score: null, task: "t2" });
    await appendEpisode(root, a);
    const file = join(root, "memory/episodes.jsonl");
    appendFileSync(file, '{"id": "torn", "at": "2026-');
    appendFileSync(file, "\n" + JSON.stringify({ id: "x", outcome: "won" }) + "\n");
    await appendEpisode(root, b);
    const r = await readEpisodes(root);
    expect(r.skipped).toBe(2);
    expect(r.episodes).toEqual([a, b]);
    expect(readFileSync(file, "utf8").split("\n").filter(Boolean)).toHaveLength(4);
  });

  it("refuses to append through a link (episode_write_failed) or to read one (episode_read_failed)", async () => {
    const root = join(fresh(), ".agent");
    mkdirSync(join(root, "memory"), { recursive: true });
    const elsewhere = join(scratch, `elsewhere${n}.jsonl`);
    writeFileSync(elsewhere, "");
    symlinkSync(elsewhere, join(root, "memory/episodes.jsonl"));
    const ep = episodeOf({ outcome: "finished", turns: 1, trace: [] }, { score: null });
    expect((await expectCode(() => appendEpisode(root, ep), "episode_write_failed")).message).toMatch(/symbolic link/);
    expect(readFileSync(elsewhere, "utf8")).toBe("");
    await expectCode(() => readEpisodes(root), "episode_read_failed");
  });
});

describe("harness init", () => {
  it("writes the default .agent/: planning, config with the defaults, empty seats, five schemas, knowledge and a sample hook that is not executable", () => {
    const dir = fresh();
    const r = initAgentDir(dir);
    expect(r.agentRoot).toBe(join(dir, ".agent"));
    expect(r.files).toEqual(Object.keys(defaultAgentFiles()).sort());
    expect(r.files).toEqual([
      "harness/PLANNING.md",
      "harness/config.json",
      "harness/seats.json",
      "hooks/pre_tool_call.sample",
      "knowledge/README.md",
      "protocols/tool_schemas/edit_file.json",
      "protocols/tool_schemas/finish.json",
      "protocols/tool_schemas/read_file.json",
      "protocols/tool_schemas/shell.json",
      "protocols/tool_schemas/write_file.json",
    ]);
    expect(JSON.parse(readFileSync(join(r.agentRoot, "harness/config.json"), "utf8"))).toEqual(DEFAULT_CONDUCTOR_CONFIG);
    expect(JSON.parse(readFileSync(join(r.agentRoot, "harness/seats.json"), "utf8"))).toEqual({});
    expect(existsSync(join(r.agentRoot, "hooks/pre_tool_call"))).toBe(false);
    expect(statSync(join(r.agentRoot, "hooks/pre_tool_call.sample")).mode & 0o111).toBe(0);
    expect(existsSync(join(r.agentRoot, "memory"))).toBe(true);
  });

  it("refuses an existing .agent/ that is not empty (agent_dir_exists), and fills an empty one", async () => {
    const dir = fresh();
    initAgentDir(dir);
    const before = readFileSync(join(dir, ".agent/harness/PLANNING.md"), "utf8");
    writeFileSync(join(dir, ".agent/harness/PLANNING.md"), "mine");
    await expectCode(() => initAgentDir(dir), "agent_dir_exists");
    expect(readFileSync(join(dir, ".agent/harness/PLANNING.md"), "utf8")).toBe("mine");
    expect(before).not.toBe("mine");
    const empty = fresh();
    mkdirSync(join(empty, ".agent"));
    expect(initAgentDir(empty).files).toHaveLength(10);
    const file = fresh();
    writeFileSync(join(file, ".agent"), "a file");
    await expectCode(() => initAgentDir(file), "agent_dir_exists");
  });
});
