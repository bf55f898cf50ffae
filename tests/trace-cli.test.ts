/**
 * `evolve trial trace`, `job grep`, `trace convert` and `trial download --stream` through the real CLI, over traces
 * and trial trees written here (no container runs).
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJob } from "../engine/job/job.ts";
import { openStore, trialDir, type Store } from "../engine/store/index.ts";
import { validateTrajectory } from "../engine/trace/atif-validate.ts";
import { chunkEvent, errorEvent, promptEvent, toolCallEvent, toolResultEvent, TRACE_KINDS } from "../engine/trace/events.ts";
import { appendGatewayUsage, openTraceWriter, tracePath } from "../engine/trace/store.ts";
import type { GatewayUsageEvent } from "../gateway/meter.ts";
import { cliHost } from "./support/cli-host.ts";
import { jobConfig } from "./support/job-config.ts";

const ROOT = resolve(__dirname, "..");
const BUN = join(ROOT, "node_modules/.bin/bun");
const host = cliHost();
let home: string;
let jobId: string;
let A: string; // a settled trial with a trace, gateway usage and every artifact
let B: string; // a settled trial with a short trace
let C: string; // a settled trial without any trace or artifact
let R: string; // a running trial, for --follow
let BIG: string; // a settled trial with a long trace, for pipes

const env = () => ({ ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" });
const evolve = (args: string[]) => host.run(args, { cwd: ROOT, env: env() });
const LONG = "z".repeat(400);

function usage(model: string, cost: number | null): GatewayUsageEvent {
  return {
    type: "usage",
    data: { update: { sessionUpdate: "usage", source: "gateway", scope: "call", model, lane: "agent", cost_usd: cost, usage: { promptTokens: 812, completionTokens: 64, inputTokens: 700, cachedReadTokens: 112, cachedWriteTokens: 0, thoughtTokens: 0, totalTokens: 876 } } },
  };
}

function setStatus(store: Store, id: string, status: "SCORED" | "RUNNING") {
  store.putTrial({ ...store.getTrial(id)!, status });
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-trace-cli-"));
  const store = openStore(home);
  const job = createJob(store, jobConfig(5));
  jobId = job.id;
  [A, B, C, R, BIG] = store.listTrials(job.id).map((t) => t.id);
  for (const id of [A, B, C, BIG]) setStatus(store, id, "SCORED");
  setStatus(store, R, "RUNNING");
  for (const id of [A, B, C, R, BIG]) mkdirSync(join(trialDir(home, id), "agent"), { recursive: true });

  const w = openTraceWriter(home, A);
  w.append([
    promptEvent("Create hello.txt containing Hello."),
    chunkEvent("agent_message_chunk", "I'll create the file."),
    toolCallEvent({ toolCallId: "call-1", name: "Write", title: "Write hello.txt", kind: "edit", status: "pending", rawInput: { path: "hello.txt" } }),
    toolResultEvent("call-1", "completed", "Success"),
    errorEvent("bash: /root: Permission denied", false),
    chunkEvent("agent_message_chunk", LONG),
  ]);
  w.close();
  appendGatewayUsage(home, A, [usage("anthropic/claude-sonnet-4-5", 0.0012), usage("x/unpriced", null)]);
  const wb = openTraceWriter(home, B);
  wb.append([promptEvent("other task"), errorEvent("PERMISSION DENIED again", true)]);
  wb.close();
  const wbig = openTraceWriter(home, BIG);
  for (let i = 0; i < 20; i++) wbig.append(Array.from({ length: 5000 }, (_, k) => chunkEvent("agent_message_chunk", `line ${i * 5000 + k} ${"w".repeat(60)}`)));
  wbig.close();

  const a = join(trialDir(home, A), "agent");
  writeFileSync(join(a, "oracle.txt"), "raw stdout\n");
  writeFileSync(join(a, "stderr.log"), "raw stderr\n");
  mkdirSync(join(trialDir(home, A), "verifier"));
  writeFileSync(join(trialDir(home, A), "verifier", "test-stdout.txt"), "1 passed\n");
  mkdirSync(join(a, ".claude"));
  writeFileSync(join(a, ".claude", "settings.json"), '{"a":1}');
  writeFileSync(join(a, "agent-home.json"), JSON.stringify({ home: "/logs/agent", files: [{ path: "/logs/agent/.claude/settings.json", size: 7, sha256: "x", mode: "0644" }, { path: "/logs/agent/gone.txt", size: 1, sha256: "y", mode: "0644" }], excluded: [], skipped: [] }));
  // C: a stderr.log planted as a link by the box
  symlinkSync("/etc/passwd", join(trialDir(home, C), "agent", "stderr.log"));
  await store.close();
});
afterAll(() => {
  host.close();
  rmSync(home, { recursive: true, force: true });
});

describe("trial trace", () => {
  it("prints one line per event: position, type, data cut to 140 characters; gateway usage as `gateway <model>` with tokens and cost", () => {
    const r = evolve(["trial", "trace", A]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(8);
    expect(lines[0]).toBe('     0  prompt               {"_prompt":{"text":"Create hello.txt containing Hello."}}');
    expect(lines[2]).toMatch(/^ {5}2 {2}tool_call {12}\{"update":\{"sessionUpdate":"tool_call","toolCallId":"call-1"/);
    const long = lines[5].slice(29);
    expect(long).toHaveLength(140);
    expect(long.endsWith("…")).toBe(true);
    expect(lines[6]).toBe("     6  usage                gateway anthropic/claude-sonnet-4-5  prompt 812 (cached 112)  completion 64  $0.001200");
    expect(lines[7]).toContain("gateway x/unpriced  prompt 812 (cached 112)  completion 64  unpriced");
  });

  it("--json prints each event whole, one per line, in the spec's {seq, type, data} shape", () => {
    const r = evolve(["trial", "trace", A, "--json"]);
    expect(r.code).toBe(0);
    const events = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
    expect(events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(Object.keys(events[1])).toEqual(["seq", "type", "data"]);
    expect(events[1].data.update).toEqual({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "I'll create the file." } });
    expect(events[5].data.update.content.text).toBe(LONG);
    expect(events[6].data.update).toMatchObject({ source: "gateway", model: "anthropic/claude-sonnet-4-5", costUsd: 0.0012 });
    expect(r.stdout).toBe(readFileSync(tracePath(home, A), "utf8"));
  });

  it("filters: --type (repeatable and comma lists), --grep (case-insensitive, type and content), --tail, --cursor", () => {
    const seqs = (args: string[]) => {
      const r = evolve(["trial", "trace", A, "--json", ...args]);
      expect(r.code, r.stderr).toBe(0);
      return r.stdout.trimEnd().split("\n").filter(Boolean).map((l) => JSON.parse(l).seq);
    };
    expect(seqs(["--type", "tool_call,tool_call_update"])).toEqual([2, 3]);
    expect(seqs(["--type", "prompt", "--type", "error"])).toEqual([0, 4]);
    expect(seqs(["--grep", "PERMISSION denied"])).toEqual([4]);
    expect(seqs(["--grep", "^tool_call_update$"])).toEqual([3]);
    expect(seqs(["--tail", "2"])).toEqual([6, 7]);
    expect(seqs(["--cursor", "5"])).toEqual([6, 7]);
    expect(seqs(["--cursor", "1", "--type", "agent_message_chunk", "--tail", "1"])).toEqual([5]);
    expect(seqs(["--grep", "no such thing anywhere"])).toEqual([]);
  });

  it("refuses an unknown kind, a regex that does not compile, and a bad number, naming what is wrong", () => {
    const kind = evolve(["trial", "trace", A, "--type", "tool_call,toolcall"]);
    expect(kind.code).toBe(2);
    expect(kind.stderr).toContain("error[trace_kind_unknown]: --type toolcall: no such event kind");
    expect(kind.stderr).toContain(TRACE_KINDS.join(", "));
    const re = evolve(["trial", "trace", A, "--grep", "(unclosed"]);
    expect(re.code).toBe(2);
    expect(re.stderr).toMatch(/error\[usage\]: --grep "\(unclosed" is not a regular expression/);
    for (const flag of ["--tail", "--cursor"]) {
      const n = evolve(["trial", "trace", A, flag, "-1"]);
      expect(n.code).toBe(2);
      expect(n.stderr).toContain("error[usage]");
    }
    expect(evolve(["trial", "trace", "nope-no-trial"]).stderr).toContain("error[trial_not_found]");
  });

  it("a trial that stored no trace says so on one line and exits 1 (trace_not_recorded); a running one points at --follow", () => {
    const r = evolve(["trial", "trace", C]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/^error\[trace_not_recorded\]: trial \S+ stored no parsed trace \(SCORED; agent oracle\)\n/);
    const running = evolve(["trial", "trace", R]);
    expect(running.code).toBe(1);
    expect(running.stderr).toContain(`--follow`);
  });

  it("--follow on a settled trial prints the whole trace and returns", () => {
    const r = evolve(["trial", "trace", A, "--follow", "--tail", "1"]);
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split("\n")).toHaveLength(1);
  });

  it("--follow prints events as a running trial stores them and stops once it settled and all is printed", async () => {
    const p = spawn(BUN, ["main.ts", "trial", "trace", R, "--follow", "--json"], { cwd: ROOT, env: env(), stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    p.stderr.on("data", (d) => (err += d));
    p.stdout.on("data", (d) => (out += d));
    const seen = async (n: number) => {
      while (out.split("\n").filter(Boolean).length < n) await new Promise((r) => setTimeout(r, 20));
    };
    const code = new Promise<number | null>((res) => p.on("close", res));
    const w = openTraceWriter(home, R);
    w.append([promptEvent("live"), chunkEvent("agent_message_chunk", "first")]);
    await seen(2);
    w.append([chunkEvent("agent_message_chunk", "second")]);
    w.close();
    await seen(3);
    const store = openStore(home);
    appendGatewayUsage(home, R, [usage("m/one", 0.5)]);
    setStatus(store, R, "SCORED");
    await store.close();
    expect(await code, err).toBe(0);
    expect(out.trimEnd().split("\n").map((l) => JSON.parse(l).seq)).toEqual([0, 1, 2, 3]);
  }, 30_000);

  it("`--json | head -1` prints one event and exits 0 without an error, whole or filtered", () => {
    for (const [extra, seq] of [["", 0], ["--cursor 4", 5]] as const) {
      const r = spawnSync("bash", ["-c", `set -o pipefail; "${BUN}" main.ts trial trace ${BIG} --json ${extra} | head -1`], { cwd: ROOT, env: env(), encoding: "utf8" });
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ seq, type: "agent_message_chunk" });
    }
  });
});

describe("job grep", () => {
  it("searches every trial of the job in one pass: <trial-id> <seq> <type> <data>", () => {
    const r = evolve(["job", "grep", jobId, "permission denied"]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(new RegExp(`^${A} 4 error \\{"update":\\{"sessionUpdate":"error","message":"bash: /root: Permission denied"`));
    expect(lines[1]).toMatch(new RegExp(`^${B} 1 error `));
  });

  it("--json prints each match with its trial_id; --type narrows", () => {
    const r = evolve(["job", "grep", jobId.slice(0, 20), "denied|sonnet", "--json"]);
    expect(r.code).toBe(0);
    const rows = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
    expect(rows.map((x) => [x.trial_id, x.seq, x.type])).toEqual([[A, 4, "error"], [A, 6, "usage"], [B, 1, "error"]]);
    expect(Object.keys(rows[0])).toEqual(["trial_id", "seq", "type", "data"]);
    const typed = evolve(["job", "grep", jobId, "denied|sonnet", "--type", "usage"]);
    expect(typed.stdout.trimEnd().split("\n")).toHaveLength(1);
  });

  it("exits 1 with no output when nothing matched, 2 for a bad regex or job", () => {
    const none = evolve(["job", "grep", jobId, "nothing like this"]);
    expect(none.code).toBe(1);
    expect(none.stdout + none.stderr).toBe("");
    const bad = evolve(["job", "grep", jobId, "[a-"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("error[usage]: the pattern");
    expect(evolve(["job", "grep", "zzzz", "x"]).stderr).toContain("error[job_not_found]");
  });
});

describe("trace convert", () => {
  const fixture = "fixtures/agents/claude-code/tool";
  it("prints the parsed trace as JSON lines numbered from 0, and the ATIF document the validator accepts", () => {
    const r = evolve(["trace", "convert", "--harness", "claude-code", `${fixture}/stdout.jsonl`]);
    expect(r.code, r.stderr).toBe(0);
    const events = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    expect(events.some((e) => e.type === "tool_call")).toBe(true);
    for (const e of events) expect(TRACE_KINDS).toContain(e.type);
    const atif = evolve(["trace", "convert", "--harness", "claude-code", `${fixture}/stdout.jsonl`, "--format", "atif"]);
    expect(atif.code, atif.stderr).toBe(0);
    const doc = JSON.parse(atif.stdout);
    expect(doc.schema_version).toBe("ATIF-v1.7");
    expect(validateTrajectory(doc)).toEqual([]);
  });

  it("an unknown harness is refused with the list of parsers; a missing, folder or FIFO input is refused at once", () => {
    const r = evolve(["trace", "convert", "--harness", "nope", `${fixture}/stdout.jsonl`]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/error\[parser_unknown\]: no trace parser for harness "nope"\n {2}hint: harnesses with a parser: .*claude-code.*codex/);
    const fifo = join(home, "fifo");
    spawnSync("mkfifo", [fifo]);
    for (const [path, why] of [[join(home, "absent.jsonl"), "no such file"], [home, "a folder"], [fifo, "not a regular file"]]) {
      const x = evolve(["trace", "convert", "--harness", "claude-code", path]);
      expect(x.code).toBe(2);
      expect(x.stderr).toContain(`error[trace_input_unreadable]: cannot read ${path}: ${why}`);
    }
    const session = evolve(["trace", "convert", "--harness", "claude-code", `${fixture}/stdout.jsonl`, "--session", fifo]);
    expect(session.stderr).toContain("error[trace_input_unreadable]");
    expect(session.stdout).toBe("");
    const format = evolve(["trace", "convert", "--harness", "claude-code", `${fixture}/stdout.jsonl`, "--format", "xml"]);
    expect(format.code).toBe(2);
  });

  it("a line over the line limit becomes one trace_loss, and the lines around it still parse", () => {
    const lines = readFileSync(`${fixture}/stdout.jsonl`, "utf8").trimEnd().split("\n");
    const file = join(home, "huge.jsonl");
    writeFileSync(file, [lines[0], "x".repeat(17 * 1024 * 1024), ...lines.slice(1)].join("\n") + "\n");
    const r = evolve(["trace", "convert", "--harness", "claude-code", file]);
    expect(r.code, r.stderr).toBe(0);
    const events = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
    const losses = events.filter((e) => e.type === "trace_loss");
    expect(losses).toHaveLength(1);
    expect(losses[0].data.update.reason).toContain("over the 16777216-byte line limit");
    const plain = evolve(["trace", "convert", "--harness", "claude-code", `${fixture}/stdout.jsonl`]).stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
    expect(events.filter((e) => e.type !== "trace_loss").map((e) => e.type)).toEqual(plain.map((e) => e.type));
  });
});

describe("trace convert: the instruction is the first event (issue 19 §4)", () => {
  const SAID = "Write hello-from-tool into out.txt with the shell, then say done.";
  const sessionOf = (h: string) => {
    const dir = `fixtures/agents/${h}/tool/home`;
    const found = spawnSync("find", [dir, "-name", "*.jsonl"], { encoding: "utf8" }).stdout.trim().split("\n");
    expect(found).toHaveLength(1);
    return found[0];
  };
  const convert = (h: string, extra: string[]) => {
    const r = evolve(["trace", "convert", "--harness", h, `fixtures/agents/${h}/tool/stdout.jsonl`, ...extra]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout;
  };
  const events = (text: string) => text.trimEnd().split("\n").map((l) => JSON.parse(l));

  it.each(["codex", "claude-code"])("%s: with --session, the parsed trace starts with the session's prompt and the ATIF's step 1 is the user's instruction", (h) => {
    const parsed = events(convert(h, ["--session", sessionOf(h)]));
    expect(parsed[0]).toEqual({ seq: 0, type: "prompt", data: { _prompt: { text: SAID } } });
    expect(parsed.filter((e) => e.type === "prompt" || e.type === "user_message_chunk")).toHaveLength(1);
    const atif = JSON.parse(convert(h, ["--session", sessionOf(h), "--format", "atif"]));
    expect(atif.steps[0]).toMatchObject({ step_id: 1, source: "user", message: SAID });
    expect(atif.steps.filter((s: { source: string }) => s.source === "user")).toHaveLength(1);
    expect(validateTrajectory(atif)).toEqual([]);
  });

  it("--instruction FILE gives the prompt when no session file is at hand, and wins over the session's", () => {
    const file = join(home, "instruction.md");
    writeFileSync(file, "Say hello.\n");
    expect(events(convert("codex", ["--instruction", file]))[0]).toEqual({ seq: 0, type: "prompt", data: { _prompt: { text: "Say hello.\n" } } });
    expect(events(convert("claude-code", ["--session", sessionOf("claude-code"), "--instruction", file]))[0].data._prompt.text).toBe("Say hello.\n");
    const fifo = join(home, "instruction-fifo");
    spawnSync("mkfifo", [fifo]);
    const r = evolve(["trace", "convert", "--harness", "codex", "fixtures/agents/codex/tool/stdout.jsonl", "--instruction", fifo]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`error[trace_input_unreadable]: cannot read ${fifo}: not a regular file`);
  });

  it("codex: an older rollout's user_message event is the instruction, not codex's own <environment_context> message", () => {
    const rollout = join(home, "rollout-old-0000.jsonl");
    const line = (type: string, payload: object) => JSON.stringify({ timestamp: "2026-01-01T00:00:00Z", type, payload });
    writeFileSync(
      rollout,
      [
        line("session_meta", { id: "0000" }),
        line("response_item", { type: "message", role: "user", content: [{ type: "input_text", text: "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>" }] }),
        line("response_item", { type: "message", role: "user", content: [{ type: "input_text", text: "Fix the bug." }] }),
        line("event_msg", { type: "user_message", message: "Fix the bug.", images: [] }),
      ].join("\n") + "\n",
    );
    expect(events(convert("codex", ["--session", rollout]))[0].data._prompt.text).toBe("Fix the bug.");
    // without the event, the first user message that is not codex's context
    writeFileSync(rollout, readFileSync(rollout, "utf8").split("\n").slice(0, 3).join("\n") + "\n");
    expect(events(convert("codex", ["--session", rollout]))[0].data._prompt.text).toBe("Fix the bug.");
  });
});

describe("trial download --stream", () => {
  const dl = (id: string, stream: string) => evolve(["trial", "download", id, "--stream", stream]);
  it("prints each stored artifact byte for byte", () => {
    expect(dl(A, "trace-stdout").stdout).toBe("raw stdout\n");
    expect(dl(A, "trace-stderr").stdout).toBe("raw stderr\n");
    expect(dl(A, "verifier").stdout).toBe("1 passed\n");
    expect(dl(A, "trace-parsed").stdout).toBe(readFileSync(tracePath(home, A), "utf8"));
    expect(JSON.parse(dl(A, "agent-home").stdout)).toEqual({ "/logs/agent/.claude/settings.json": '{"a":1}' });
  });

  it("trace-atif is built from the stored trace (a valid ATIF-v1.7 with the gateway's final metrics), or agent/trajectory.json when stored", () => {
    const r = dl(A, "trace-atif");
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(validateTrajectory(doc)).toEqual([]);
    expect(doc.steps[0]).toMatchObject({ source: "user", message: "Create hello.txt containing Hello." });
    expect(doc.final_metrics.total_prompt_tokens).toBe(1624);
    writeFileSync(join(trialDir(home, B), "agent", "trajectory.json"), '{"stored":true}\n');
    expect(dl(B, "trace-atif").stdout).toBe('{"stored":true}\n');
  });

  it("an artifact the trial did not store is an error with exit 1, never empty output; a planted link is refused", () => {
    for (const s of ["trace-parsed", "trace-atif", "trace-stdout", "verifier", "agent-home"]) {
      const r = dl(C, s);
      expect(r.code, s).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(new RegExp(`^error\\[artifact_not_recorded\\]: trial ${C} has no ${s}: `));
    }
    const link = dl(C, "trace-stderr");
    expect(link.code).toBe(1);
    expect(link.stderr).toContain("error[stream_refused]");
    expect(link.stdout).toBe("");
    const none = evolve(["trial", "download", A]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("error[usage]: trial download needs exactly one of -o <dir> (the whole trial) and --stream <name>");
    const both = evolve(["trial", "download", A, "--stream", "verifier", "-o", join(home, "dl")]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("error[usage]: trial download needs exactly one of");
    expect(dl(A, "everything").code).toBe(2);
  });
});
