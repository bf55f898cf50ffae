/**
 * The CLI harness without a container engine: what `-m`/`--ak` it refuses and how, where the vendored copy is
 * mounted (the agent's box only), what refuses a trial before anything is built (a task seeding a session for a CLI
 * that cannot load one, nothing vendored), the ELF check behind the musl refusal, the live trace over a box-written
 * stdout file (links refused, a throwing parser set aside) and the agent home capture.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, appendFileSync, existsSync, cpSync, readFileSync, statSync, utimesSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execFileSync } from "node:child_process";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { checkCliRequest, cliHarness, elfInterpreter, splitModel, AGENT_ROOT } from "../engine/harness/cli.ts";
import type { CliSpec } from "../engine/harness/cli-types.ts";
import { checkAgentRequest, parseAgentOptions } from "../engine/harness/index.ts";
import { chunkEvent, promptEvent, toolCallEvent, type TraceUpdate } from "../engine/trace/events.ts";
import { globMatcher, LiveTrace } from "../engine/trace/live.ts";
import type { ParserSpec } from "../engine/trace/parsers/index.ts";
import { captureAgentHome } from "../engine/trial/agent-home.ts";
import { persistAgentRecords } from "../engine/trial/phases/agent.ts";
import type { HarnessSettle } from "../engine/harness/types.ts";
import { boxMounts } from "../engine/box/layout.ts";
import { TrialFailure } from "../engine/outcome.ts";
import { expectCode } from "./support/expect-code.ts";

const root = resolve(__dirname, "..");

const spec = (o: Partial<CliSpec> = {}): CliSpec => ({
  name: "probe-cli",
  vendor: { packages: [{ name: "probe-cli", version: "1.2.3" }], entry: "lib/node_modules/probe-cli/bin/probe", viaNode: false },
  apiFor: (p) => (p === "anthropic" ? "anthropic" : undefined),
  options: { effort: { description: "how hard it tries", values: ["low", "high"] }, turns: { description: "the most turns", pattern: /[1-9][0-9]*/ } },
  home: "/logs/agent/home",
  stdoutName: "probe-cli.txt",
  invocation: (i) => ({ argv: [...i.program, i.instruction], env: {}, files: [] }),
  ...o,
});

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-harness-cli-"));
});
afterEach(() => {
  rmSync(scratch, { recursive: true, force: true });
  delete process.env.EVOLVE_AGENTS_DIR;
});

describe("-m and --ak", () => {
  it("splits provider/model and takes a model of a provider the CLI speaks", () => {
    expect(splitModel("anthropic/claude-sonnet-4-6")).toEqual({ provider: "anthropic", model: "claude-sonnet-4-6" });
    expect(splitModel("openrouter/meta/llama")).toEqual({ provider: "openrouter", model: "meta/llama" });
    expect(splitModel("claude")).toBeUndefined();
    expect(checkCliRequest(spec(), { model: "anthropic/claude-x", options: { effort: "high", turns: "12" } })).toEqual({ provider: "anthropic", model: "claude-x", api: "anthropic" });
  });

  it("refuses a missing or provider-less -m (agent_model_invalid) and a provider it cannot speak (agent_model_unsupported)", async () => {
    const e1 = await expectCode(() => checkCliRequest(spec(), { options: {} }), "agent_model_invalid");
    expect(e1.message).toContain("give -m provider/model");
    await expectCode(() => checkCliRequest(spec(), { model: "claude-x", options: {} }), "agent_model_invalid");
    const e2 = await expectCode(() => checkCliRequest(spec(), { model: "gemini/gemini-2.5-pro", options: {} }), "agent_model_unsupported");
    expect(e2.message).toContain("cannot call a model of provider gemini");
  });

  it("refuses an unknown --ak key naming the CLI's keys, and a value outside its set or pattern", async () => {
    const e = await expectCode(() => checkCliRequest(spec(), { model: "anthropic/m", options: { max_turns: "3" } }), "agent_option_unknown");
    expect(e.hint).toBe("its options: effort, turns");
    const v = await expectCode(() => checkCliRequest(spec(), { model: "anthropic/m", options: { effort: "extreme" } }), "agent_option_invalid");
    expect(v.message).toContain("one of low, high");
    // a pattern matches the whole value
    await expectCode(() => checkCliRequest(spec(), { model: "anthropic/m", options: { turns: "3x" } }), "agent_option_invalid");
  });

  it("parses --ak KEY=VALUE (a later key wins) and refuses a flag without =", async () => {
    expect(parseAgentOptions(["a=1", "b=x=y", "a=2"])).toEqual({ a: "2", b: "x=y" });
    await expectCode(() => parseAgentOptions(["effort"]), "agent_option_invalid");
    await expectCode(() => parseAgentOptions(["=x"]), "agent_option_invalid");
  });

  it("refuses any --ak for a built-in agent, and an unknown agent first", async () => {
    await expectCode(() => checkAgentRequest("oracle", undefined, { effort: "high" }), "agent_option_unknown");
    await expectCode(() => checkAgentRequest("no-such-agent", undefined, {}), "agent_unknown");
    expect(() => checkAgentRequest("nop", undefined, {})).not.toThrow();
  });
});

describe("the vendored mount", () => {
  it("is the agent's box's alone, read-only, in either verifier mode", () => {
    const m = [{ host: "/vendored/probe/1.2.3", box: AGENT_ROOT }];
    for (const separate of [false, true]) {
      expect(boxMounts("/t", "agent", separate, m)).toContainEqual({ host: "/vendored/probe/1.2.3", container: AGENT_ROOT, readOnly: true });
      expect(boxMounts("/t", "verifier", separate, m).map((x) => x.container)).not.toContain(AGENT_ROOT);
    }
  });
});

/** A vendored tree of `s` as vendor.ts lays it out (its manifest names the entry). */
function vendor(s: CliSpec): string {
  const agents = join(scratch, "agents");
  const dir = join(agents, s.name, s.vendor.packages[0].version);
  mkdirSync(join(dir, "lib/node_modules/probe-cli/bin"), { recursive: true });
  const data = Buffer.from("#!/bin/sh\necho probe\n");
  writeFileSync(join(dir, s.vendor.entry), data, { mode: 0o755 });
  const file = { path: s.vendor.entry, size: data.length, sha256: createHash("sha256").update(data).digest("hex"), mode: statSync(join(dir, s.vendor.entry)).mode & 0o7777 };
  writeFileSync(join(dir, "manifest.json"), JSON.stringify({ harness: s.name, version: s.vendor.packages[0].version, packages: s.vendor.packages, node_version: null, entry: s.vendor.entry, created_at: "", files: [file], links: [] }));
  process.env.EVOLVE_AGENTS_DIR = agents;
  return dir;
}

function task(withSeed: boolean): string {
  const dir = join(scratch, "task");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "instruction.md"), "do it\n");
  if (withSeed) writeFileSync(join(dir, "trajectory.json"), "{}");
  return dir;
}

const trial = (o: { model?: string } = {}) => ({ trialId: "T1", home: scratch, model: o.model ?? "anthropic/claude-x", options: {} });

describe("prepare: refused before anything is built", () => {
  it("mounts the vendored tree at /opt/evolve/agent", () => {
    const s = spec();
    const dir = vendor(s);
    const dirT = task(false);
    expect(cliHarness(s).prepare!({ dir: dirT, steps: [{ name: null, dir: dirT }] }, trial())).toEqual({ scripts: [], mounts: [{ host: dir, box: AGENT_ROOT }] });
  });

  it("refuses a vendored tree changed since it was vendored (AgentTamperedError), even one byte with its mtime put back", () => {
    const s = spec();
    const dir = vendor(s);
    const dirT = task(false);
    const steps = [{ name: null, dir: dirT }];
    const entry = join(dir, s.vendor.entry);
    // a whole-second mtime, so that utimes can put it back exactly
    utimesSync(entry, 1_700_000_000, 1_700_000_000);
    // the first trial reads the tree and remembers it; the second finds it unchanged without reading it again
    expect(cliHarness(s).prepare!({ dir: dirT, steps }, trial()).mounts).toEqual([{ host: dir, box: AGENT_ROOT }]);
    expect(cliHarness(s).prepare!({ dir: dirT, steps }, trial()).mounts).toEqual([{ host: dir, box: AGENT_ROOT }]);
    // same size, same inode, mtime restored: only the ctime (which utimes sets to now) and the bytes tell
    const before = statSync(entry);
    writeFileSync(entry, readFileSync(entry, "utf8").replace("probe", "pwned"));
    utimesSync(entry, 1_700_000_000, 1_700_000_000);
    expect(statSync(entry, { bigint: true }).mtimeNs).toBe(1_700_000_000_000_000_000n);
    expect(statSync(entry).size).toBe(before.size);
    expect(statSync(entry).ino).toBe(before.ino);
    const e = (() => {
      try {
        cliHarness(s).prepare!({ dir: dirT, steps }, trial());
      } catch (x) {
        return x;
      }
    })() as TrialFailure;
    expect(e).toBeInstanceOf(TrialFailure);
    expect(e.type).toBe("AgentTamperedError");
    expect(e.status).toBe("INFRASTRUCTURE_ERROR");
    expect(e.message).toContain(`agent_tampered: the vendored probe-cli 1.2.3 at ${dir} differs from its manifest: ${s.vendor.entry}: sha256 differs from the manifest`);
    // a file added beside it is refused too
    writeFileSync(entry, readFileSync(entry, "utf8").replace("pwned", "probe"));
    writeFileSync(join(dir, "lib/evil.js"), "x");
    expect(() => cliHarness(s).prepare!({ dir: dirT, steps }, trial())).toThrow(expect.objectContaining({ type: "AgentTamperedError", message: expect.stringContaining("lib/evil.js: not in the manifest") }));
  });

  it("with evolve's tools asked for, mounts the evolve binary read-only at /opt/evolve/bin/evolve beside the vendored tree", () => {
    const s = spec();
    const dir = vendor(s);
    const dirT = task(false);
    const bin = join(scratch, "evolve-bin");
    writeFileSync(bin, "#!/bin/sh\n");
    const saved = process.env.EVOLVE_BINARY;
    process.env.EVOLVE_BINARY = bin;
    try {
      expect(cliHarness(s).prepare!({ dir: dirT, steps: [{ name: null, dir: dirT }] }, { ...trial(), evolveTools: true })).toEqual({
        scripts: [],
        mounts: [{ host: dir, box: AGENT_ROOT }, { host: bin, box: "/opt/evolve/bin/evolve" }],
      });
      // without it, nothing of evolve's reaches the box
      expect(cliHarness(s).prepare!({ dir: dirT, steps: [{ name: null, dir: dirT }] }, trial()).mounts).toEqual([{ host: dir, box: AGENT_ROOT }]);
      process.env.EVOLVE_BINARY = join(scratch, "no-such-evolve");
      expect(() => cliHarness(s).prepare!({ dir: dirT, steps: [{ name: null, dir: dirT }] }, { ...trial(), evolveTools: true })).toThrow(
        expect.objectContaining({ type: "AgentNotInstalledError", message: expect.stringContaining("the job gives probe-cli evolve's tools in the box, and there is none at") }),
      );
    } finally {
      if (saved === undefined) delete process.env.EVOLVE_BINARY;
      else process.env.EVOLVE_BINARY = saved;
    }
  });

  it("fails AgentNotInstalledError naming `evolve agent pull` when nothing is vendored and the image has no command", () => {
    process.env.EVOLVE_AGENTS_DIR = join(scratch, "empty");
    const dirT = task(false);
    const h = cliHarness(spec());
    const e = (() => {
      try {
        h.prepare!({ dir: dirT, steps: [{ name: null, dir: dirT }] }, trial());
      } catch (x) {
        return x;
      }
    })() as TrialFailure;
    expect(e).toBeInstanceOf(TrialFailure);
    expect(e.type).toBe("AgentNotInstalledError");
    expect(e.message).toContain("evolve agent pull probe-cli");
  });

  it("needs no vendored copy for an agent that vendors nothing (a registered agent's own install script)", () => {
    process.env.EVOLVE_AGENTS_DIR = join(scratch, "empty");
    const dirT = task(false);
    const s = spec({ vendor: { packages: [], entry: "", viaNode: false } });
    expect(cliHarness(s).prepare!({ dir: dirT, steps: [{ name: null, dir: dirT }] }, trial())).toEqual({ scripts: [], mounts: [] });
  });

  it("refuses a task's trajectory.json on a CLI that cannot seed a session, and the model's provider it cannot speak", () => {
    vendor(spec());
    const dirT = task(true);
    const steps = [{ name: null, dir: dirT }];
    expect(() => cliHarness(spec()).prepare!({ dir: dirT, steps }, trial())).toThrow(expect.objectContaining({ type: "TrajectorySeedUnsupportedError" }));
    expect(() => cliHarness(spec({ seedsTrajectory: true })).prepare!({ dir: dirT, steps }, trial())).not.toThrow();
    expect(() => cliHarness(spec({ seedsTrajectory: true })).prepare!({ dir: dirT, steps }, trial({ model: "openai/gpt-5" }))).toThrow(
      expect.objectContaining({ type: "AgentModelUnsupportedError" }),
    );
  });
});

describe("the libc check", () => {
  it("reads the ELF interpreter a dynamic binary needs, and none of a script or a static binary", () => {
    expect(elfInterpreter(process.execPath)).toMatch(/^\/lib(64)?\/ld-/);
    const sh = join(scratch, "x.sh");
    writeFileSync(sh, "#!/bin/sh\necho hi\n");
    expect(elfInterpreter(sh)).toBeUndefined();
    expect(elfInterpreter(join(scratch, "missing"))).toBeUndefined();
    const musl = join(root, "node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex");
    if (existsSync(musl)) expect(elfInterpreter(musl)).toBeUndefined();
  });
});

/** A parser that turns `say X` into a message chunk and `call X` into a tool call; `boom` throws. */
const toyParser: ParserSpec = {
  harness: "toy",
  sessionGlobs: ["sessions/**/*.jsonl"],
  create: ({ instruction }) => {
    let first = true;
    return {
      line(text) {
        const out: TraceUpdate[] = [];
        if (first && instruction !== undefined) out.push({ type: "prompt", data: { _prompt: { text: instruction } } });
        first = false;
        if (text === "boom") throw new Error("cannot read boom");
        if (text.startsWith("say ")) out.push(chunkEvent("agent_message_chunk", text.slice(4)));
        if (text.startsWith("call ")) out.push(toolCallEvent({ toolCallId: "c1", name: text.slice(5), title: "t", kind: "execute", status: "pending", rawInput: {} }));
        return out;
      },
      end(files) {
        return files.map((f) => chunkEvent("agent_thought_chunk", `${f.path}:${f.text.trim()}`));
      },
    };
  },
};

function live(agentDir: string) {
  const got: TraceUpdate[] = [];
  const logs: string[] = [];
  const t = new LiveTrace({ agentDir, stdoutName: "toy.txt", homeRel: "home", parser: toyParser, instruction: "do it", sink: (u) => got.push(...u), log: (l) => logs.push(l) });
  return { t, got, logs };
}

describe("the live trace", () => {
  it("parses whole lines as they arrive, then the last unterminated one and the session files", async () => {
    const agent = join(scratch, "agent");
    mkdirSync(join(agent, "home/sessions/2026/12"), { recursive: true });
    writeFileSync(join(agent, "home/sessions/2026/12/r.jsonl"), "session-line\n");
    writeFileSync(join(agent, "home/sessions/other.txt"), "not matched\n");
    const { t, got } = live(agent);
    writeFileSync(join(agent, "toy.txt"), "say hel");
    t.start();
    await new Promise((r) => setTimeout(r, 700));
    // half a line is not a line yet
    expect(got).toEqual([]);
    appendFileSync(join(agent, "toy.txt"), "lo\ncall Bash\nsay bye");
    await t.finish();
    expect(got.map((u) => u.type)).toEqual(["prompt", "agent_message_chunk", "tool_call", "agent_message_chunk", "agent_thought_chunk"]);
    expect(got.map((u) => (u.data as { update?: { content?: { text: string } } }).update?.content?.text).filter(Boolean)).toEqual(["hello", "bye", "sessions/2026/12/r.jsonl:session-line"]);
  });

  it("refuses a stdout that is a link (trace_loss, logged, the target never read)", async () => {
    const agent = join(scratch, "agent");
    mkdirSync(agent);
    writeFileSync(join(scratch, "secret"), "say SECRET\n");
    symlinkSync(join(scratch, "secret"), join(agent, "toy.txt"));
    const { t, got, logs } = live(agent);
    await t.finish();
    expect(JSON.stringify(got)).not.toContain("SECRET");
    expect(got.map((u) => u.type)).toEqual(["trace_loss"]);
    expect(logs.join("\n")).toContain("a symbolic link");
  });

  it("reads no session file through a home that is a link", async () => {
    const agent = join(scratch, "agent");
    mkdirSync(join(scratch, "host/sessions"), { recursive: true });
    writeFileSync(join(scratch, "host/sessions/a.jsonl"), "HOST\n");
    mkdirSync(agent);
    symlinkSync(join(scratch, "host"), join(agent, "home"));
    writeFileSync(join(agent, "toy.txt"), "say one\n");
    const { t, got, logs } = live(agent);
    await t.finish();
    expect(JSON.stringify(got)).not.toContain("HOST");
    expect(logs.join("\n")).toContain("home is a symbolic link");
  });

  it("sets a throwing parser aside: logged, one trace_loss, nothing after it parsed", async () => {
    const agent = join(scratch, "agent");
    mkdirSync(agent);
    writeFileSync(join(agent, "toy.txt"), "say one\nboom\nsay two\n");
    const { t, got, logs } = live(agent);
    await t.finish();
    expect(got.map((u) => u.type)).toEqual(["prompt", "agent_message_chunk", "trace_loss"]);
    expect(logs.join("\n")).toContain("the toy parser failed");
  });

  it("matches session globs: ** any depth, * within a name", () => {
    const m = globMatcher("sessions/**/rollout-*.jsonl");
    expect(m("sessions/rollout-1.jsonl")).toBe(true);
    expect(m("sessions/2026/12/02/rollout-1.jsonl")).toBe(true);
    expect(m("sessions/2026/x.jsonl")).toBe(false);
    expect(globMatcher("projects/*/*.jsonl")("projects/a/b/c.jsonl")).toBe(false);
  });
});

describe("the agent home capture", () => {
  it("records each file (box path, size, sha256, mode), leaves the caches out and says what it skipped", async () => {
    const agent = join(scratch, "agent");
    const home = join(agent, "home");
    mkdirSync(join(home, ".codex/.tmp/plugins/x"), { recursive: true });
    mkdirSync(join(home, "config/opencode/node_modules/p"), { recursive: true });
    writeFileSync(join(home, ".codex/.tmp/plugins/x/big.js"), "cache");
    writeFileSync(join(home, "settings.json"), '{"a":1}\n', { mode: 0o600 });
    writeFileSync(join(home, "state.db"), Buffer.from([0xff, 0xfe, 0x00, 0x01]));
    symlinkSync("/etc/passwd", join(home, "passwd"));
    execFileSync("mkfifo", [join(home, "pipe")]);
    writeFileSync(join(agent, "probe.txt"), "stdout, not the home's");
    const rec = await captureAgentHome(agent, "/logs/agent", "/logs/agent/home");
    expect(rec.home).toBe("/logs/agent/home");
    expect(rec.files.map((f) => f.path)).toEqual(["/logs/agent/home/settings.json", "/logs/agent/home/state.db"]);
    expect(rec.files[0]).toEqual({ path: "/logs/agent/home/settings.json", size: 8, sha256: "e346432021b04179518d9614f3560ccd71354a4ee101ddcb893d6959a9d6301c", mode: "0600" });
    expect(rec.excluded.map((e) => e.path).sort()).toEqual(["/logs/agent/home/.codex/.tmp/plugins", "/logs/agent/home/config/opencode/node_modules"]);
    expect(existsSync(join(home, ".codex/.tmp/plugins"))).toBe(false);
    expect(rec.skipped).toEqual([
      { path: "/logs/agent/home/passwd", reason: "a symbolic link" },
      { path: "/logs/agent/home/pipe", reason: "a FIFO" },
      { path: "/logs/agent/home/state.db", reason: expect.stringContaining("not UTF-8") },
    ]);
  });

  it("does not walk a home the box swapped for a link to a host folder, and removes nothing there", async () => {
    const agent = join(scratch, "agent");
    const host = join(scratch, "host");
    mkdirSync(join(host, ".codex/.tmp/plugins"), { recursive: true });
    writeFileSync(join(host, "host-secret.txt"), "x");
    mkdirSync(agent);
    symlinkSync(host, join(agent, "home"));
    const rec = await captureAgentHome(agent, "/logs/agent", "/logs/agent/home");
    expect(rec).toEqual({ home: "/logs/agent/home", files: [], excluded: [], skipped: [{ path: "/logs/agent/home", reason: "home is a symbolic link" }] });
    expect(existsSync(join(host, ".codex/.tmp/plugins"))).toBe(true);
  });

  it("leaves out the trial's own outputs when the home is agent/ itself", async () => {
    const agent = join(scratch, "agent");
    mkdirSync(agent);
    writeFileSync(join(agent, "probe.txt"), "out");
    writeFileSync(join(agent, "notes.md"), "mine");
    cpSync(join(agent, "notes.md"), join(agent, "stderr.log"));
    const rec = await captureAgentHome(agent, "/logs/agent", "/logs/agent", ["probe.txt", "stderr.log"]);
    expect(rec.files.map((f) => f.path)).toEqual(["/logs/agent/notes.md"]);
  });
});

describe("the records a harness names are written by the trial (harness/cli.ts settle, trial/phases/agent.ts)", () => {
  /** A settle view of `agent` whose writes land in the folder, as the runner's, with what it logged. */
  function settleView(agent: string, events: TraceUpdate[] = []): HarnessSettle & { lines: string[] } {
    const lines: string[] = [];
    return {
      trialId: "t1",
      agentDir: agent,
      events: () => events.map((e, i) => ({ ...e, seq: i + 1 }) as never),
      writeAgentFile: async (name, text) => writeFileSync(join(agent, name), text),
      redact: (t) => t,
      log: (l) => void lines.push(l),
      lines,
    };
  }

  it("keeps the home a harness names as agent-home.json, the capture as it reads, and no trajectory unless named", async () => {
    const agent = join(scratch, "agent");
    mkdirSync(join(agent, "home"), { recursive: true });
    writeFileSync(join(agent, "home", "settings.json"), '{"a":1}\n');
    writeFileSync(join(agent, "demo.txt"), "stdout");
    const st = settleView(agent);
    await persistAgentRecords(st, "demo", { home: { box: "/logs/agent/home", leaveOut: ["demo.txt"] } });
    const written = readFileSync(join(agent, "agent-home.json"), "utf8");
    expect(JSON.parse(written).files.map((f: { path: string }) => f.path)).toEqual(["/logs/agent/home/settings.json"]);
    expect(written).toBe(JSON.stringify(await captureAgentHome(agent, "/logs/agent", "/logs/agent/home", ["demo.txt", "agent-home.json"]), null, 2) + "\n");
    expect(existsSync(join(agent, "trajectory.json"))).toBe(false);
    expect(st.lines).toEqual([]);
  });

  it("logs a home it could not keep under the agent's name, and still goes on to the trajectory", async () => {
    const agent = join(scratch, "agent");
    mkdirSync(join(agent, "home"), { recursive: true });
    const st = settleView(agent, [promptEvent("hi"), chunkEvent("agent_message_chunk", "hello")]);
    const write = st.writeAgentFile;
    st.writeAgentFile = async (name, text) => (name === "agent-home.json" ? Promise.reject(new Error("disk on fire")) : write(name, text));
    await persistAgentRecords(st, "demo", { home: { box: "/logs/agent/home", leaveOut: [] }, trajectory: { name: "demo", version: null, model: "m" } });
    expect(st.lines[0]).toBe("demo: agent home not captured: disk on fire");
    expect(existsSync(join(agent, "agent-home.json"))).toBe(false);
    expect(st.lines).toHaveLength(1);
    const t = JSON.parse(readFileSync(join(agent, "trajectory.json"), "utf8"));
    expect(t.agent).toEqual({ name: "demo", version: "unknown", model_name: "m" });
    expect(t.steps[0]).toMatchObject({ source: "user", message: "hi" });
  });
});
