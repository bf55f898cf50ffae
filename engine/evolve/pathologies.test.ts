/**
 * The pathology catalogue (engine/evolve/pathologies.ts): every entry has a run that shows it (detected, with the
 * events that show it as its evidence) and near misses that must not be taken for it; a new entry without a fixture
 * here fails. The detectors also read the real recorded runs of the seven CLIs (fixtures/agents) through their
 * parsers, and docs/pathologies.md says what the registry says.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AGENT_PATHS } from "../conductor/layout.ts";
import { claimsSuccess, commandOf, PATHOLOGIES, type RunEvidence } from "./pathologies.ts";
import { WHERE } from "./types.ts";
import { chunkEvent, errorEvent, promptEvent, toolCallEvent, toolResultEvent, usageEvent, type ToolKind, type TraceUpdate } from "../trace/events.ts";
import { loadFixture, parse } from "../../tests/support/agent-fixtures.ts";

const run = (events: TraceUpdate[], over: Partial<RunEvidence> = {}): RunEvidence => ({ id: "r1", task: "card-1", domain: "files", outcome: "finished", score: 0, events, ...over });
const call = (id: string, name: string, kind: ToolKind, rawInput: Record<string, unknown> = {}, title?: string) =>
  toolCallEvent({ toolCallId: id, name, title: title ?? String(rawInput.command ?? name), kind, status: "pending", rawInput });
const shell = (id: string, command: string) => call(id, "shell", "execute", { command });
const ok = (id: string, text = "ok") => toolResultEvent(id, "completed", text);
const fail = (id: string, text: string, meta?: Record<string, unknown>) => toolResultEvent(id, "failed", text, undefined, meta);
const say = (text: string) => chunkEvent("agent_message_chunk", text);
const usage = () => usageEvent("call", { promptTokens: 10, completionTokens: 2 });
const prompt = promptEvent("Create hello.txt containing Hello.");

/** A run that shows the pathology and the evidence it must give; runs that come close and must not be taken for it. */
interface Fixture {
  shows: { run: RunEvidence; evidence: TraceUpdate[] }[];
  nearMisses: { why: string; run: RunEvidence }[];
}

const c = {
  ls: shell("c1", "ls /app"),
  cat: shell("c2", "cat /app/missing.txt"),
  rm: shell("c3", "rm /app/x"),
  mk: shell("c4", "mkdir /root/x"),
  finish: call("f1", "finish", "other", { answer: "Created hello.txt" }, "finish"),
};

const FIXTURES: Record<string, Fixture> = {
  timeout: {
    shows: [
      { run: run([prompt, say("Let me build it."), usage(), shell("c1", "make -j1"), usage()], { outcome: "timeout", score: null }), evidence: [prompt, say("Let me build it."), shell("c1", "make -j1")] },
      // a trial: the record's exception says it
      { run: run([prompt, c.ls], { outcome: "finished", exception: "AgentTimeoutError", status: "SCORED" }), evidence: [prompt, c.ls] },
    ],
    nearMisses: [
      { why: "a run that reached its turn limit", run: run([prompt, c.ls, ok("c1")], { outcome: "max_turns" }) },
      { why: "one command timing out is a tool timeout, not the run's", run: run([prompt, c.ls, fail("c1", "Command timed out after 2m 0.0s")]) },
    ],
  },
  tool_error_loop: {
    shows: [
      {
        run: run([prompt, c.ls, ok("c1"), c.cat, fail("c2", "cat: no such file"), c.rm, fail("c3", "rm: no such file"), c.mk, fail("c4", "mkdir: Permission denied"), say("I give up.")]),
        evidence: [c.cat, fail("c2", "cat: no such file"), c.rm, fail("c3", "rm: no such file"), c.mk, fail("c4", "mkdir: Permission denied")],
      },
    ],
    nearMisses: [
      { why: "two failed calls are not a loop", run: run([prompt, c.cat, fail("c2", "no"), c.rm, fail("c3", "no"), c.ls, ok("c1"), c.mk, fail("c4", "no")]) },
      {
        why: "vetoed calls are the veto's entry",
        run: run([prompt, c.cat, fail("c2", "refused", { vetoed: true }), c.rm, fail("c3", "refused", { vetoed: true }), c.mk, fail("c4", "refused", { vetoed: true })]),
      },
    ],
  },
  repeated_command: {
    shows: [
      { run: run([prompt, shell("a", "ls -la /app"), ok("a"), shell("b", "ls  -la   /app"), ok("b"), shell("x", "pwd"), shell("d", " ls -la /app ")]), evidence: [shell("a", "ls -la /app"), shell("b", "ls  -la   /app"), shell("d", " ls -la /app ")] },
      // codex's argv form, no title to go by
      {
        run: run([call("a", "exec_command", "execute", { command: ["bash", "-lc", "make"] }, "x"), call("b", "exec_command", "execute", { command: ["bash", "-lc", "make"] }, "y"), call("d", "exec_command", "execute", { command: ["bash", "-lc", "make"] }, "z")]),
        evidence: [call("a", "exec_command", "execute", { command: ["bash", "-lc", "make"] }, "x"), call("b", "exec_command", "execute", { command: ["bash", "-lc", "make"] }, "y"), call("d", "exec_command", "execute", { command: ["bash", "-lc", "make"] }, "z")],
      },
    ],
    nearMisses: [
      { why: "the same program with other arguments", run: run([prompt, shell("a", "ls /a"), shell("b", "ls /b"), shell("d", "ls /c")]) },
      { why: "the tests run again after each edit", run: run([shell("a", "pytest"), call("e1", "Edit", "edit", { file_path: "x.py" }), shell("b", "pytest"), call("e2", "write_file", "other", { path: "y.py" }), shell("d", "pytest")]) },
      { why: "twice is not a repeat", run: run([shell("a", "pytest"), shell("b", "pytest")]) },
    ],
  },
  premature_finish: {
    shows: [
      { run: run([prompt, say("Done."), c.finish, ok("f1")]), evidence: [c.finish] },
      // the first turn: it finished alongside a call whose result it never saw
      { run: run([prompt, c.ls, c.finish, ok("c1"), ok("f1")]), evidence: [c.ls, c.finish] },
    ],
    nearMisses: [
      { why: "it finished after looking at a result", run: run([prompt, c.ls, ok("c1"), c.finish, ok("f1")]) },
      { why: "the finish passed", run: run([prompt, c.finish, ok("f1")], { score: 1 }) },
      { why: "a run that timed out did not finish", run: run([prompt, c.finish], { outcome: "timeout" }) },
    ],
  },
  context_overflow: {
    shows: [
      "prompt is too long: 208000 tokens > 200000 maximum",
      "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.",
      '{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","code":"context_length_exceeded"}}',
      "Codex ran out of room in the model's context window. Start a new conversation or clear earlier history before retrying.",
      "[API Error: The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).]",
      "provider.api_error: 400 Invalid request: Your request exceeded model token limit: 131072",
      "Input is too long for requested model.",
    ].map((m) => ({ run: run([prompt, c.ls, ok("c1"), errorEvent(m, true)], { outcome: "model_error" }), evidence: [errorEvent(m, true)] })),
    nearMisses: [
      { why: "an output-limit error is not the context", run: run([prompt, errorEvent("max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5", true)]) },
      { why: "a rate limit", run: run([prompt, errorEvent("429 Too Many Requests: rate limit exceeded", true)]) },
    ],
  },
  malformed_tool_call: {
    shows: [
      { run: run([prompt, call("m1", "shell", "execute", {}), fail("m1", "the arguments were not a JSON object", { malformed: "Unexpected token } in JSON" })]), evidence: [call("m1", "shell", "execute", {}), fail("m1", "the arguments were not a JSON object", { malformed: "Unexpected token } in JSON" })] },
      {
        run: run([prompt, call("m2", "Bash", "execute", { cmd: "ls" }, "Bash"), fail("m2", "<tool_use_error>InputValidationError: Bash failed due to the following issue:\nThe required parameter `command` is missing</tool_use_error>")]),
        evidence: [call("m2", "Bash", "execute", { cmd: "ls" }, "Bash"), fail("m2", "<tool_use_error>InputValidationError: Bash failed due to the following issue:\nThe required parameter `command` is missing</tool_use_error>")],
      },
    ],
    nearMisses: [{ why: "a command that failed on its own", run: run([prompt, c.cat, fail("c2", "cat: /app/missing.txt: No such file or directory")]) }],
  },
  vetoed_action: {
    shows: [
      { run: run([prompt, shell("v1", "rm -rf /"), fail("v1", "refused by hooks/pre_tool_call: rm -rf is not allowed", { vetoed: true })]), evidence: [shell("v1", "rm -rf /"), fail("v1", "refused by hooks/pre_tool_call: rm -rf is not allowed", { vetoed: true })] },
      { run: run([prompt, call("v2", "Bash", "execute", { command: "curl x" }), fail("v2", "Claude requested permissions to use Bash, but you haven't granted it yet.")]), evidence: [call("v2", "Bash", "execute", { command: "curl x" }), fail("v2", "Claude requested permissions to use Bash, but you haven't granted it yet.")] },
    ],
    nearMisses: [{ why: "the shell's own Permission denied", run: run([prompt, shell("p1", "rm /etc/passwd"), fail("p1", "rm: cannot remove '/etc/passwd': Permission denied")]) }],
  },
  budget_exhausted: {
    shows: [
      { run: run([prompt, c.ls, ok("c1"), usage()], { outcome: "max_turns" }), evidence: [c.ls, ok("c1")] },
      { run: run([prompt, c.ls], { outcome: "budget", status: "BUDGET", exception: "ApiUsageLimitError", score: null }), evidence: [prompt, c.ls] },
      {
        run: run([prompt, errorEvent("429 trial: trial 01JB budget of $1.00 would be exceeded (spent $0.98, in flight $0.00, this request up to $0.10)", true)]),
        evidence: [errorEvent("429 trial: trial 01JB budget of $1.00 would be exceeded (spent $0.98, in flight $0.00, this request up to $0.10)", true)],
      },
      { run: run([prompt, errorEvent("claude-code ended with error_max_turns", true)]), evidence: [errorEvent("claude-code ended with error_max_turns", true)] },
    ],
    nearMisses: [
      { why: "a model error is not a budget", run: run([prompt, errorEvent("API Error: 400 invalid_request_error", true)]) },
      { why: "a context overflow is not a budget", run: run([prompt, errorEvent("The input token count (5) exceeds the maximum number of tokens allowed (4)", true)]) },
    ],
  },
  verifier_disagreement: {
    shows: [
      { run: run([prompt, c.ls, ok("c1"), say("All tests pass now; "), say("the bug is fixed.")]), evidence: [say("All tests pass now; "), say("the bug is fixed.")] },
      { run: run([prompt, c.ls, ok("c1"), call("f1", "finish", "other", { answer: "Done: created hello.txt" }, "finish"), ok("f1")]), evidence: [call("f1", "finish", "other", { answer: "Done: created hello.txt" }, "finish")] },
    ],
    nearMisses: [
      { why: "it says it could not", run: run([prompt, c.ls, ok("c1"), say("I could not fix the failing test.")]) },
      { why: "nothing scored it", run: run([prompt, say("Done.")], { score: null }) },
      { why: "a partial score is not a 0", run: run([prompt, say("Done.")], { score: 0.5 }) },
      { why: "an episode keeps only failures: its last message is not the answer", run: run([say("Done.")], { trace: "failures" }) },
    ],
  },
  no_action: {
    shows: [{ run: run([prompt, say("To do this, run `echo Hello > hello.txt`."), usage()]), evidence: [say("To do this, run `echo Hello > hello.txt`.")] }],
    nearMisses: [
      { why: "it made a call", run: run([prompt, say("Let me look."), c.ls, ok("c1")]) },
      { why: "a fatal model error explains it", run: run([prompt, say("..."), errorEvent("API Error: 500", true)]) },
      { why: "the model never answered", run: run([prompt]) },
      { why: "it passed", run: run([prompt, say("Hello")], { score: 1 }) },
      { why: "an episode keeps only failures", run: run([say("hm")], { trace: "failures" }) },
    ],
  },
  model_error: {
    shows: [
      { run: run([prompt, errorEvent("API Error: 529 overloaded_error", true)]), evidence: [errorEvent("API Error: 529 overloaded_error", true)] },
      { run: run([prompt, c.ls, ok("c1")], { outcome: "model_error" }), evidence: [] },
    ],
    nearMisses: [
      { why: "an error the run went on after", run: run([prompt, errorEvent("Model metadata for `gpt-5` not found. Defaulting to fallback metadata", false), say("Done")], { score: 1 }) },
      { why: "a survived error in a failed run", run: run([prompt, errorEvent("Reconnecting... 1/5", false), c.ls, ok("c1")]) },
      { why: "a context overflow is its own entry", run: run([prompt, errorEvent("prompt is too long: 300000 tokens > 200000 maximum", true)], { outcome: "model_error" }) },
      { why: "the deadline's own error is the timeout's", run: run([prompt, errorEvent("the agent timed out after 600 s", true)], { outcome: "timeout" }) },
    ],
  },
  tool_timeout: {
    shows: [
      { run: run([prompt, shell("t1", "npm start"), fail("t1", "Command timed out after 2m 0.0s")]), evidence: [shell("t1", "npm start"), fail("t1", "Command timed out after 2m 0.0s")] },
      { run: run([prompt, shell("t2", "sleep 999"), toolResultEvent("t2", "failed", "killed", undefined, { timedOut: true })]), evidence: [shell("t2", "sleep 999"), toolResultEvent("t2", "failed", "killed", undefined, { timedOut: true })] },
    ],
    nearMisses: [{ why: "output that mentions a timeout", run: run([prompt, shell("t3", "pytest"), ok("t3", "test_timeout_handling PASSED\n1 passed in 0.2s")]) }],
  },
};

describe("the pathology catalogue", () => {
  it("has stable snake_case ids, one entry each, pointing at an .agent/ file, with a where and a one-paragraph description", () => {
    const ids = PATHOLOGIES.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const paths = Object.values(AGENT_PATHS) as string[];
    for (const p of PATHOLOGIES) {
      expect(p.id).toMatch(/^[a-z]+(_[a-z]+)*$/);
      expect(paths, p.id).toContain(p.points_at);
      expect(WHERE, p.id).toContain(p.where);
      expect(p.description.includes("\n"), p.id).toBe(false);
      expect(p.description.length, p.id).toBeGreaterThan(80);
    }
    for (const id of ["timeout", "tool_error_loop", "repeated_command", "premature_finish", "context_overflow", "malformed_tool_call", "vetoed_action", "budget_exhausted", "verifier_disagreement", "no_action", "model_error"]) {
      expect(ids).toContain(id);
    }
  });

  it("has a fixture for every entry, and no fixture for an entry it lacks", () => {
    expect(Object.keys(FIXTURES).sort()).toEqual(PATHOLOGIES.map((p) => p.id).sort());
  });

  for (const p of PATHOLOGIES) {
    describe(p.id, () => {
      const f = FIXTURES[p.id];
      it("detects the runs that show it, with the events that show it", () => {
        expect(f?.shows.length, `no fixture for ${p.id}`).toBeGreaterThan(0);
        for (const s of f.shows) expect(p.detect(s.run)).toEqual(s.evidence);
      });
      it("does not take a near miss for it", () => {
        expect(f?.nearMisses.length, `no near miss for ${p.id}`).toBeGreaterThan(0);
        for (const m of f.nearMisses) expect(p.detect(m.run), m.why).toBeNull();
      });
    });
  }

  it("never throws on a trace of the wrong shape", () => {
    const junk = [{ type: "tool_call", data: null }, { type: "tool_call_update", data: { update: "x" } }, { type: "error", data: {} }, { type: "agent_message_chunk", data: { update: { content: 5 } } }, { type: "nope" }] as unknown as TraceUpdate[];
    for (const p of PATHOLOGIES) for (const outcome of ["finished", "timeout", "model_error", "max_turns"]) expect(() => p.detect(run(junk, { outcome }))).not.toThrow();
  });
});

describe("reading a run", () => {
  it("takes a command from rawInput.command (a string or argv) or an execute call's title", () => {
    const u = (e: TraceUpdate) => (e.data as { update: Parameters<typeof commandOf>[0] }).update;
    expect(commandOf(u(shell("a", "  ls   -la ")))).toBe("ls -la");
    expect(commandOf(u(call("b", "exec_command", "execute", { command: ["bash", "-lc", "ls"] })))).toBe("bash -lc ls");
    expect(commandOf(u(call("c", "run_shell_command", "execute", {}, "echo hi")))).toBe("echo hi");
    expect(commandOf(u(call("d", "Read", "read", { file_path: "/x" }, "/x")))).toBeUndefined();
  });

  it("tells a claim of success from one taken back", () => {
    for (const s of ["Done.", "The file has been created and the tests pass.", "Fixed the bug in parse().", "Task completed successfully!", "No errors, all done.", "I couldn't reproduce it at first. Now it works."]) {
      expect(claimsSuccess(s), s).toBe(true);
    }
    for (const s of ["I could not complete the task.", "The tests are not passing yet", "I was unable to fix it", "Nothing to report", "I haven't been able to get the tests passing", "There are no passing tests", "Incomplete: the bypass is abandoned"]) {
      expect(claimsSuccess(s), s).toBe(false);
    }
  });
});

describe("the detectors on the real recorded CLI runs (fixtures/agents)", () => {
  const CLIS = ["claude-code", "codex", "droid", "gemini-cli", "kimi-code", "opencode", "qwen-code"];
  const detected = (r: RunEvidence) => PATHOLOGIES.flatMap((p) => (p.detect(r) ? [p.id] : []));
  for (const cli of CLIS) {
    it(`${cli}: nothing on its passing runs; failed, no action, a claim the score denies, and the model error of its error run`, () => {
      for (const name of ["text", "tool"]) {
        const f = loadFixture(cli, name);
        const events = parse(cli, f.stdout, f.session, f.upstream.instruction);
        expect(detected(run(events, { score: 1 })), `${cli}/${name} passing`).toEqual([]);
      }
      // the text run, failed: the model answered without acting
      const text = loadFixture(cli, "text");
      expect(detected(run(parse(cli, text.stdout, text.session, text.upstream.instruction), { score: 0 })), `${cli}/text failed`).toEqual(["no_action"]);
      // the tool run, scored 0: its last message says it did the work
      const tool = loadFixture(cli, "tool");
      expect(detected(run(parse(cli, tool.stdout, tool.session, tool.upstream.instruction), { score: 0 })), `${cli}/tool failed`).toEqual(["verifier_disagreement"]);
      const err = loadFixture(cli, "error");
      const found = detected(run(parse(cli, err.stdout, err.session, err.upstream.instruction), { score: 0, outcome: "agent_error" }));
      expect(found, `${cli}/error`).toContain("model_error");
      expect(found, `${cli}/error`).not.toContain("no_action");
    });
  }
});

describe("docs/pathologies.md", () => {
  const doc = readFileSync(join(__dirname, "../..", "docs", "pathologies.md"), "utf8");
  it("lists every pathology as the registry has it, and no other", () => {
    const rows = [...doc.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
    expect(rows).toEqual(PATHOLOGIES.map((p) => p.id));
    for (const p of PATHOLOGIES) {
      expect(doc, p.id).toContain(`| \`${p.id}\` | ${p.title} | \`.agent/${p.points_at}\` | ${p.where} |`);
      expect(doc, p.id).toContain(`### \`${p.id}\`\n\n${p.description}\n`);
    }
  });
});
