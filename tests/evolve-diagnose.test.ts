/**
 * `harness diagnose` (engine/evolve/diagnose.ts, commands/harness-diagnose.ts): failed runs grouped into one
 * diagnosis per (skill, pathology), passes and runs that were not the harness's left out, evidence bounded; runs
 * read from a `.agent/`'s episodic memory (torn lines counted and skipped, links and FIFOs refused) and from a job in
 * a real store with real stored traces; the command's text and JSON.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Episode } from "../engine/conductor/types.ts";
import { cutEvent, diagnose, diagnoseReport, EVIDENCE_EVENTS, EVIDENCE_RUNS, EVIDENCE_TEXT_CHARS, eachRunOfJob, MAX_RUN_EVENTS, runsFromEpisodes, runsFromJob } from "../engine/evolve/diagnose.ts";
import type { RunEvidence } from "../engine/evolve/pathologies.ts";
import { createJob } from "../engine/job/job.ts";
import { openStore, type TrialRecord } from "../engine/store/index.ts";
import { chunkEvent, errorEvent, promptEvent, toolCallEvent, toolResultEvent, usageEvent, type TraceUpdate } from "../engine/trace/events.ts";
import { openTraceWriter } from "../engine/trace/store.ts";
import { cliHost } from "./support/cli-host.ts";
import { expectCode } from "./support/expect-code.ts";
import { expectDocumented } from "./support/json-docs.ts";
import { jobConfig } from "./support/job-config.ts";

const shell = (id: string, command: string) => toolCallEvent({ toolCallId: id, name: "shell", title: command, kind: "execute", status: "pending", rawInput: { command } });
const fail = (id: string, text: string, meta?: Record<string, unknown>) => toolResultEvent(id, "failed", text, undefined, meta);
const ok = (id: string) => toolResultEvent(id, "completed", "ok");
/** Three failed calls in a row: a tool-error loop. */
const loop = (n = 3, text = "no such file"): TraceUpdate[] => Array.from({ length: n }, (_, i) => [shell(`c${i}`, `cat /app/f${i}`), fail(`c${i}`, text)]).flat();
const run = (id: string, domain: string, events: TraceUpdate[], over: Partial<RunEvidence> = {}): RunEvidence => ({ id, task: `${domain}/${id}`, domain, outcome: "finished", score: 0, events, ...over });

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "evolve-diagnose-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("diagnose from the conductor's episodes", () => {
  it("a failed run's episode holds its trace, so a premature finish is diagnosed from memory alone", async () => {
    const { appendEpisode, episodeOf } = await import("../engine/conductor/episodes.ts");
    const root = join(dir, ".agent");
    mkdirSync(root);
    const finish = toolCallEvent({ toolCallId: "f1", name: "finish", title: "finish", kind: "other", status: "pending", rawInput: { answer: "done" } });
    const trace = [promptEvent("fix it"), chunkEvent("agent_message_chunk", "All done, the bug is fixed.", "m1"), finish, toolResultEvent("f1", "completed", "done")];
    await appendEpisode(root, episodeOf({ outcome: "finished", turns: 1, trace }, { task: "card-1", domain: "python", score: 0 }));
    const { runs } = await runsFromEpisodes(root);
    const ids = diagnose(runs).map((d) => d.pathology);
    expect(ids).toContain("premature_finish");
    expect(ids).toContain("verifier_disagreement");
  });
});

describe("diagnose", () => {
  it("gives one diagnosis per (skill, pathology), most runs first, naming every run", () => {
    const ds = diagnose([
      run("a1", "files", loop()),
      run("a2", "files", loop()),
      run("b1", "git", loop()),
      run("a3", "files", [promptEvent("x"), errorEvent("prompt is too long: 250000 tokens > 200000 maximum", true)], { outcome: "model_error" }),
    ]);
    expect(ds.map((d) => [d.skill, d.pathology, d.count, d.runs])).toEqual([
      ["files", "tool_error_loop", 2, ["a1", "a2"]],
      ["files", "context_overflow", 1, ["a3"]],
      ["git", "tool_error_loop", 1, ["b1"]],
    ]);
    expect(ds[0]).toMatchObject({ title: "tool-error loop", points_at: "knowledge", where: "knowledge" });
    expect(ds[0].evidence.map((e) => e.run)).toEqual(["a1", "a2"]);
    expect(ds[0].evidence[0].events).toEqual(loop());
  });

  it("leaves out passes, and trials that were not the harness's failures, and counts them apart", () => {
    const r = diagnoseReport([
      run("pass", "files", loop(), { score: 1 }),
      run("infra", "files", [], { status: "INFRASTRUCTURE_ERROR", score: null, outcome: "infrastructure_error" }),
      run("gone", "files", loop(), { status: "CANCELLED", score: null, outcome: "aborted" }),
      run("fail", "files", loop(), { status: "SCORED" }),
      run("quiet", "files", [promptEvent("x")]),
    ]);
    expect(r.diagnoses.map((d) => [d.pathology, d.runs])).toEqual([["tool_error_loop", ["fail"]]]);
    expect(r).toMatchObject({ runs: 5, failed: 2, unexplained: ["quiet"], skipped: { INFRASTRUCTURE_ERROR: 1, CANCELLED: 1 } });
    expect(diagnose([run("p", "files", loop(), { score: 1 })])).toEqual([]);
  });

  it("bounds the evidence: a few runs, a few events each, texts cut", () => {
    const long = "x".repeat(10_000);
    const runs = Array.from({ length: 7 }, (_, i) => run(`r${i}`, "files", loop(20, long)));
    const [d] = diagnose(runs);
    expect(d.count).toBe(7);
    expect(d.runs).toHaveLength(7);
    expect(d.evidence).toHaveLength(EVIDENCE_RUNS);
    for (const e of d.evidence) {
      expect(e.events).toHaveLength(EVIDENCE_EVENTS);
      expect(JSON.stringify(e.events).length).toBeLessThan(EVIDENCE_EVENTS * (EVIDENCE_TEXT_CHARS + 400));
    }
    const text = (e: TraceUpdate) => (e.data as { update: { content: { content: { text: string } }[] } }).update.content[0].content.text;
    expect(text(d.evidence[0].events[1])).toHaveLength(EVIDENCE_TEXT_CHARS);
    expect(text(d.evidence[0].events[1]).endsWith("…")).toBe(true);
    // the cut keeps an event's position
    expect(cutEvent({ seq: 7, ...chunkEvent("agent_message_chunk", long) })).toMatchObject({ seq: 7, type: "agent_message_chunk" });
  });
});

describe("runsFromEpisodes", () => {
  const episode = (id: string, over: Partial<Episode> = {}): Episode => ({ id, at: "2026-12-02T05:00:00.000Z", task: `card-${id}`, domain: "files", outcome: "finished", score: 0, turns: 4, failures: loop(), ...over });
  const memory = () => join(dir, ".agent", "memory");
  const write = (text: string) => {
    mkdirSync(memory(), { recursive: true });
    writeFileSync(join(memory(), "episodes.jsonl"), text);
  };

  it("reads each episode as a run of its failures, and counts and skips torn and damaged lines", () => {
    write(`${JSON.stringify(episode("e1"))}\nnot json\n{"id":"x"}\n\n${JSON.stringify(episode("e2", { score: 1, failures: [] }))}\n${JSON.stringify(episode("e3", { domain: undefined, task: undefined }))}\n{"id":"e4","outco`);
    const r = runsFromEpisodes(join(dir, ".agent"));
    expect(r.skipped).toBe(3);
    expect(r.truncated).toBe(false);
    expect(r.runs.map((x) => [x.id, x.task, x.domain, x.score, x.trace])).toEqual([
      ["e1", "card-e1", "files", 0, "failures"],
      ["e2", "card-e2", "files", 1, "failures"],
      ["e3", "e3", "unknown", 0, "failures"],
    ]);
    // an episode's events carry their place in its failures list
    expect(r.runs[0].events.map((e) => (e as { seq?: number }).seq)).toEqual([0, 1, 2, 3, 4, 5]);
    const ds = diagnose(r.runs);
    expect(ds.map((d) => [d.skill, d.pathology, d.runs])).toEqual([
      ["files", "tool_error_loop", ["e1"]],
      ["unknown", "tool_error_loop", ["e3"]],
    ]);
  });

  it("reads only the newest episodes of a file over its bound, and says so", () => {
    const lines = Array.from({ length: 50 }, (_, i) => JSON.stringify(episode(`e${i}`)));
    write(lines.join("\n") + "\n");
    const bound = lines.slice(-10).join("\n").length + 30;
    const r = runsFromEpisodes(join(dir, ".agent"), { maxBytes: bound });
    expect(r.truncated).toBe(true);
    // the line the bound cuts into is an older episode's, not a torn one
    expect(r.skipped).toBe(0);
    expect(r.runs.map((x) => x.id)).toEqual(Array.from({ length: 10 }, (_, i) => `e${40 + i}`));
  });

  it("reads no runs from a memory that does not exist yet", () => {
    mkdirSync(join(dir, ".agent"));
    expect(runsFromEpisodes(join(dir, ".agent"))).toEqual({ runs: [], skipped: 0, truncated: false });
  });

  it("refuses a link, a FIFO or a folder where the file should be, and a missing agent directory", async () => {
    await expectCode(() => runsFromEpisodes(join(dir, "nope")), "agent_dir_missing");
    write("");
    rmSync(join(memory(), "episodes.jsonl"));
    writeFileSync(join(dir, "elsewhere.jsonl"), `${JSON.stringify(episode("e1"))}\n`);
    symlinkSync(join(dir, "elsewhere.jsonl"), join(memory(), "episodes.jsonl"));
    await expectCode(() => runsFromEpisodes(join(dir, ".agent")), "episodes_unreadable");
    rmSync(join(memory(), "episodes.jsonl"));
    expect(spawnSync("mkfifo", [join(memory(), "episodes.jsonl")]).status).toBe(0);
    await expectCode(() => runsFromEpisodes(join(dir, ".agent")), "episodes_unreadable");
    rmSync(join(memory(), "episodes.jsonl"));
    mkdirSync(join(memory(), "episodes.jsonl"));
    await expectCode(() => runsFromEpisodes(join(dir, ".agent")), "episodes_unreadable");
    // the memory folder itself a link
    rmSync(memory(), { recursive: true });
    mkdirSync(join(dir, "mem"));
    symlinkSync(join(dir, "mem"), memory());
    await expectCode(() => runsFromEpisodes(join(dir, ".agent")), "episodes_unreadable");
  });
});

/** A job in a real store: a loop that scored 0, a pass, an infrastructure error and a timeout; traces stored. */
async function makeJob(home: string): Promise<{ jobId: string; ids: string[] }> {
  const store = openStore(home);
  try {
    const job = createJob(store, jobConfig(4), "demo@1.0");
    const trials = store.listTrials(job.id);
    const at = new Date().toISOString();
    const settle = (t: TrialRecord, over: Partial<TrialRecord>): TrialRecord => ({ ...t, source: "demo@1.0", updated_at: at, finished_at: at, ...over });
    const [a, b, c, d] = trials;
    store.putTrials([
      settle(a, { status: "SCORED", task_name: "acme/t0", reward: 0, rewards: { reward: 0 } }),
      settle(b, { status: "SCORED", task_name: "acme/t1", reward: 1, rewards: { reward: 1 } }),
      settle(c, { status: "INFRASTRUCTURE_ERROR", task_name: "acme/t2", exception: { type: "EnvironmentBuildError", message: "no", traceback: "", occurred_at: at } }),
      settle(d, { status: "SCORED", task_name: "t3", reward: 0, rewards: { reward: 0 }, exception: { type: "AgentTimeoutError", message: "ran past 600 s", traceback: "", occurred_at: at } }),
    ]);
    const trace = (id: string, events: TraceUpdate[]) => {
      const w = openTraceWriter(home, id);
      w.append(events);
      w.close();
    };
    trace(a.id, [promptEvent("fix it"), ...loop(), chunkEvent("agent_message_chunk", "I could not do it.")]);
    trace(b.id, [promptEvent("fix it"), ...loop(), shell("z", "make"), ok("z"), chunkEvent("agent_message_chunk", "Done.")]);
    trace(d.id, [promptEvent("fix it"), shell("s", "sleep 1000")]);
    return { jobId: job.id, ids: [a.id, b.id, c.id, d.id] };
  } finally {
    await store.close();
  }
}

describe("runsFromJob", () => {
  it("reads every trial of a job from a real store, with its stored trace, status and exception", async () => {
    const home = join(dir, "home");
    const { jobId, ids } = await makeJob(home);
    const store = openStore(home);
    try {
      const runs = runsFromJob(store, home, jobId.slice(0, 20));
      expect(runs.map((r) => [r.id, r.task, r.domain, r.outcome, r.score, r.status, r.exception ?? null])).toEqual([
        [ids[0], "acme/t0", "acme", "finished", 0, "SCORED", null],
        [ids[1], "acme/t1", "acme", "finished", 1, "SCORED", null],
        [ids[2], "acme/t2", "acme", "infrastructure_error", null, "INFRASTRUCTURE_ERROR", "EnvironmentBuildError"],
        [ids[3], "t3", "demo", "timeout", 0, "SCORED", "AgentTimeoutError"],
      ]);
      expect(runs[0].events.map((e) => (e as { seq?: number }).seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      const r = diagnoseReport(runs);
      // a tie in count: by pathology id
      expect(r.diagnoses.map((d) => [d.skill, d.pathology, d.runs])).toEqual([
        ["demo", "timeout", [ids[3]]],
        ["acme", "tool_error_loop", [ids[0]]],
      ]);
      expect(r.skipped).toEqual({ INFRASTRUCTURE_ERROR: 1 });
      // the evidence names each event's place in the stored trace (`trial trace --cursor`)
      expect(r.diagnoses[1].evidence[0].events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
      await expectCode(() => runsFromJob(store, home, "nojob"), "job_not_found");
      // the streaming form resolves the job at once, and diagnoses the same
      await expectCode(() => eachRunOfJob(store, home, "nojob"), "job_not_found");
      expect(diagnoseReport(eachRunOfJob(store, home, jobId))).toEqual(r);
    } finally {
      await store.close();
    }
  });
});

describe("runsFromJob on a long trace", () => {
  it("keeps a trial's last events, usage left out, with their positions", async () => {
    const home = join(dir, "home");
    const store = openStore(home);
    try {
      const job = createJob(store, jobConfig(1), "demo@1.0");
      const [t] = store.listTrials(job.id);
      store.putTrial({ ...t, status: "SCORED", task_name: "acme/long", reward: 0 });
      const w = openTraceWriter(home, t.id);
      for (let i = 0; i < 12; i++) w.append(Array.from({ length: 1000 }, (_, k) => (k % 2 ? usageEvent("call", { promptTokens: 1, completionTokens: 1 }) : shell(`c${i}-${k}`, "ls"))));
      w.close();
      const [r] = runsFromJob(store, home, job.id);
      expect(r.events).toHaveLength(MAX_RUN_EVENTS);
      expect((r.events[0] as { seq?: number }).seq).toBe(12_000 - 2 * MAX_RUN_EVENTS);
      expect((r.events.at(-1) as { seq?: number }).seq).toBe(11_998);
      expect(r.events.every((e) => e.type === "tool_call")).toBe(true);
    } finally {
      await store.close();
    }
  });
});

describe("evolve harness diagnose", () => {
  const host = cliHost();
  afterAll(() => host.close());
  const evolve = (args: string[], home: string) => host.run(["harness", "diagnose", ...args], { cwd: resolve(__dirname, ".."), env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, timeoutMs: 60_000 });

  it("prints one block per diagnosis for a job, and its documented JSON", async () => {
    const home = join(dir, "home");
    const { jobId, ids } = await makeJob(home);
    const res = evolve(["--job", jobId], home);
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    expect(res.stdout).toContain(`2 failed runs of 4 in job ${jobId}: 2 diagnoses; left out 1 INFRASTRUCTURE_ERROR (not the harness's failures)`);
    expect(res.stdout).toContain("tool_error_loop  skill acme  1 run  (tool-error loop)\n  points at .agent/knowledge (knowledge)\n");
    expect(res.stdout).toContain(`  run ${ids[0]} acme/t0\n      #1  tool_call  shell: cat /app/f0\n      #2  tool_call_update  failed: no such file\n`);
    expect(res.stdout).toContain(`timeout  skill demo  1 run  (ran out of time)\n  points at .agent/harness/PLANNING.md (prompt)\n  run ${ids[3]} t3\n      #0  prompt  fix it\n      #1  tool_call  shell: sleep 1000\n`);
    const json = evolve(["--job", jobId, "--json"], home);
    expect(json.code).toBe(0);
    const doc = JSON.parse(json.stdout);
    expectDocumented("harness diagnose", [doc]);
    expect(doc).toMatchObject({ source: "job", job_id: jobId, runs: 4, failed: 2, skipped: { INFRASTRUCTURE_ERROR: 1 } });
    // the trace's own spelling inside the events, snake_case around them
    expect(doc.diagnoses[1].points_at).toBe("knowledge");
    expect(doc.diagnoses[1].evidence[0].events[0].data.update.toolCallId).toBe("c0");
  });

  it("says when the outcome alone shows a pathology", () => {
    const project = join(dir, "p");
    mkdirSync(join(project, ".agent", "memory"), { recursive: true });
    writeFileSync(join(project, ".agent", "memory", "episodes.jsonl"), `${JSON.stringify({ id: "e1", at: "x", domain: "files", outcome: "max_turns", score: 0, turns: 30, failures: [] })}\n`);
    const res = evolve(["--project", project], join(dir, "home"));
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("budget_exhausted  skill files  1 run  (budget or turn limit reached)\n  points at .agent/harness/config.json (config)\n  run e1\n        (its outcome shows it; no trace event does)\n");
  });

  it("says when nothing failed, and exits 0", () => {
    const project = join(dir, "p");
    mkdirSync(join(project, ".agent", "memory"), { recursive: true });
    writeFileSync(join(project, ".agent", "memory", "episodes.jsonl"), `${JSON.stringify({ id: "e1", at: "x", outcome: "finished", score: 1, turns: 1, failures: [] })}\n`);
    const res = evolve(["--project", project], join(dir, "home"));
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(`no failed runs in ${join(project, ".agent", "memory", "episodes.jsonl")} (1 run)\n`);
    const empty = evolve(["--project", project, "--json"], join(dir, "home"));
    expect(JSON.parse(empty.stdout)).toMatchObject({ source: "episodes", runs: 1, failed: 0, diagnoses: [] });
  });

  it("refuses --job with --project, and a folder without .agent/, in one line each", () => {
    const both = evolve(["--job", "x", "--project", dir], join(dir, "home"));
    expect([both.code, both.stderr.split("\n")[0]]).toEqual([2, "error[usage]: harness diagnose takes --job or --project, not both"]);
    const none = evolve(["--project", join(dir, "nothing")], join(dir, "home"));
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^error\[agent_dir_missing\]: .*nothing\/\.agent does not exist\n/);
  });
});
