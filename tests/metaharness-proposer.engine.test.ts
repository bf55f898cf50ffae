/**
 * A Meta-Harness Adapter proposal round end to end (issue 13 §1): the real vendored codex CLI as the proposer, in a
 * no-network podman box, its model the scripted upstream through the gateway. The scripted model's tool calls list
 * D, look for held-out material, write two candidates (and a link as a third), run `evolve metaharness check-spec`
 * inside the box (the mounted binary on its PATH) and write the proposer's report; the run folder must then hold the candidates and the step's records, and the box
 * must never have held a validation or test folder.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEngine } from "../engine/engine-choice.ts";
import { findVendored } from "../engine/harness/vendor.ts";
import { DEFAULT_PROPOSE_PROMPT, fillPrompt } from "../engine/metaharness/propose.ts";
import { runProposer, type ProposerResult } from "../engine/metaharness/proposer.ts";
import { ingestRound, seedCandidate } from "../engine/metaharness/state.ts";
import { writeTemplate } from "../engine/metaharness/template.ts";
import { openStore, trialDir, type Store } from "../engine/store/index.ts";
import { settleRemovals } from "../engine/trial/run.ts";
import { ScriptedUpstream, type RecordedRequest, type ScriptedReply } from "../fixtures/upstream/server.ts";

const ROOT = resolve(__dirname, "..");
process.env.EVOLVE_AGENTS_DIR ||= existsSync("/var/cache/evolve/agents") ? "/var/cache/evolve/agents" : "/root/.evolve/agents";
const hasCodex = findVendored("codex", "0.171.0") !== undefined;
const hasClaude = findVendored("claude-code", "2.1.197") !== undefined;
// a model the gateway's price table lacks: the round's cost must come from the configured price
const MODEL = "openai/evolve-proposer-test-model";
const PRICE = { input: 2, cached_input: 0.5, output: 8 };
const KEY = "sk-REAL-openai-provider-key-proposer-3c9d";
const ANTHROPIC_KEY = "sk-ant-REAL-provider-key-proposer-7a1e";

const LOOK = "pwd; ls /work/state /work/steps /work/steps/step_0000; echo FIND-START; find / -xdev \\( -name validation -o -name test -o -name answers.json \\) -not -path '/proc/*' -not -path '/usr/*' -not -path '/sys/*' 2>/dev/null; echo FIND-END";
const WRITE = [
  "mkdir -p /work/scratch/candidates/alpha/notes /work/scratch/candidates/beta",
  `printf '%s' '{"hypothesis": "tips in a notes file", "base": "seed"}' > /work/scratch/candidates/alpha/candidate.json`,
  // a link as a candidate: kept as a link, never followed, for the state machine to reject
  "ln -s /etc /work/scratch/candidates/gamma",
  "printf '# alpha\\nRead notes/tips.md first.\\n' > /work/scratch/candidates/alpha/ADAPTER.md",
  "printf 'check units\\n' > /work/scratch/candidates/alpha/notes/tips.md",
  "printf '# beta\\nAnswer briefly.\\n' > /work/scratch/candidates/beta/ADAPTER.md",
].join(" && ");
const CHECK = "command -v evolve; for c in alpha gamma; do evolve metaharness check-spec /work/scratch/candidates/$c --template /work/template; echo \"$c exit=$?\"; done";
const REPORT = "printf '# round 1\\nalpha: notes; beta: brevity\\n' > /work/scratch/proposer_report.md";
const usage = { input_tokens: 1000, output_tokens: 50, cache_read_tokens: 200 };
// no workdir: each command runs in the CLI's own cwd, which must be /work
const call = (id: string, cmd: string): ScriptedReply => ({ toolCall: { id, name: "exec_command", input: { cmd } }, usage });

const upstream = new ScriptedUpstream();
let home: string;
let runDir: string;
let store: Store;
let result: ProposerResult;
let posts: RecordedRequest[];
let template: string;

/** The output codex sent back for tool call `id`, from the request bodies that followed it. */
function outputOf(id: string): string {
  for (const r of posts) {
    for (const item of (r.body?.input ?? []) as { type?: string; call_id?: string; output?: unknown }[]) {
      if (item.type === "function_call_output" && item.call_id === id) return typeof item.output === "string" ? item.output : JSON.stringify(item.output);
    }
  }
  return "";
}

/** A run folder with D (state, a search step holding a held-out folder) and validation/test material beside it. */
function makeRun(): string {
  const run = mkdtempSync(join(tmpdir(), "evolve-mh-run-"));
  runs.push(run);
  mkdirSync(join(run, "workspace", "state", "candidates", "seed", "adapter"), { recursive: true });
  writeFileSync(join(run, "workspace", "state", "evolution_summary.jsonl"), '{"id":"seed","round":0,"mean":0.5}\n');
  writeFileSync(join(run, "workspace", "state", "candidates", "seed", "adapter", "ADAPTER.md"), "# seed\n");
  mkdirSync(join(run, "step_0000", "task-a"), { recursive: true });
  writeFileSync(join(run, "step_0000", "task-a", "trajectory.json"), "{}\n");
  mkdirSync(join(run, "step_0000", "validation"), { recursive: true });
  writeFileSync(join(run, "step_0000", "validation", "answers.json"), "{}\n");
  for (const held of ["validation", "test"]) {
    mkdirSync(join(run, held), { recursive: true });
    writeFileSync(join(run, held, "answers.json"), "{}\n");
  }
  return run;
}
const runs: string[] = [];

beforeAll(async () => {
  if (!hasCodex && !hasClaude) return;
  // the box runs the compiled binary as its evolve tool
  if (!existsSync(join(ROOT, "dist", "evolve")) && !process.env.EVOLVE_BINARY) execFileSync("npm", ["run", "--silent", "build"], { cwd: ROOT, stdio: "ignore" });
  await upstream.start();
  home = mkdtempSync(join(tmpdir(), "evolve-mh-proposer-"));
  writeFileSync(
    join(home, "gateway.toml"),
    `[upstreams.openai]\nbase_url = "${upstream.url}/v1"\napi_key = "${KEY}"\n\n[upstreams.anthropic]\nbase_url = "${upstream.url}"\napi_key = "${ANTHROPIC_KEY}"\n`,
  );
  template = join(home, "template");
  writeTemplate(template);
  mkdirSync(join(template, "seed_adapter"));
  writeFileSync(join(template, "seed_adapter", "ADAPTER.md"), "# seed\n");
  store = openStore(home);
}, 120_000);

afterAll(async () => {
  await settleRemovals();
  await upstream.close();
  await store?.close();
  if (!process.env.EVOLVE_TEST_KEEP) for (const d of [home, ...runs]) if (d) rmSync(d, { recursive: true, force: true });
});

describe.skipIf(!hasCodex)("a proposal round: the real codex CLI writes k candidates through tool calls", () => {
  beforeAll(async () => {
    runDir = makeRun();
    upstream.reset();
    upstream.push(call("call_look", LOOK), call("call_write", WRITE), call("call_check", CHECK), call("call_report", REPORT), { text: "Wrote alpha and beta.", usage });
    result = await runProposer({
      store, home, engine: () => openEngine({ home }), runDir, round: 1, step: 0, k: 2, backend: "codex", model: MODEL, price: PRICE, timeoutSec: 300, templateDir: template,
    });
    posts = upstream.requests.filter((r) => r.method === "POST" && r.path.endsWith("/responses"));
  }, 420_000);

  const why = () => {
    const dir = trialDir(home, result.trialId);
    const log = existsSync(join(dir, "trial.log")) ? readFileSync(join(dir, "trial.log"), "utf8") : "";
    return `${log}\n${result.sessionLog && existsSync(result.sessionLog) ? readFileSync(result.sessionLog, "utf8").slice(-3000) : ""}`;
  };

  it("runs the session to its end in one trial, every scripted turn asked for", () => {
    expect(result.status, why()).toBe("SCORED");
    expect(result.exitCode, why()).toBe(0);
    expect(posts).toHaveLength(5);
  });

  it("the box held D and never a validation or test folder", () => {
    const look = outputOf("call_look");
    expect(look).toMatch(/Output:\n\/work\n/);
    expect(look).toContain("evolution_summary.jsonl");
    expect(look).toContain("step_0000");
    expect(look).toContain("task-a");
    const found = look.slice(look.indexOf("FIND-START") + "FIND-START".length, look.indexOf("FIND-END")).trim();
    expect(look).toContain("FIND-END");
    expect(found).toBe("");
  });

  it("evolve runs inside the box, from its PATH, and its output came back in the next request", () => {
    const out = outputOf("call_check");
    expect(out).toContain("/opt/evolve/bin/evolve");
    expect(out).toContain("ok: /work/scratch/candidates/alpha is a complete adapter\nalpha exit=0");
    expect(out).toMatch(/gamma: is a symbolic link, not a directory of its own\ngamma exit=1/);
  });

  it("copies the candidates into the run's workspace/scratch/candidates/, the link as a link; the state machine queues the two real ones", () => {
    expect(result.candidates).toEqual(["alpha", "beta", "gamma"]);
    expect(result.problems).toEqual([]);
    expect(result.candidatesDir).toBe(join(runDir, "workspace", "scratch", "candidates"));
    expect(readFileSync(join(result.candidatesDir, "alpha", "ADAPTER.md"), "utf8")).toBe("# alpha\nRead notes/tips.md first.\n");
    expect(readFileSync(join(result.candidatesDir, "alpha", "notes", "tips.md"), "utf8")).toBe("check units\n");
    expect(readFileSync(join(result.candidatesDir, "beta", "ADAPTER.md"), "utf8")).toBe("# beta\nAnswer briefly.\n");
    expect(readlinkSync(join(result.candidatesDir, "gamma"))).toBe("/etc");
    const state = seedCandidate(runDir, join(template, "seed_adapter"), template);
    const { queued, rejected } = ingestRound(runDir, state, 1, template);
    expect(queued).toEqual(["alpha", "beta"]);
    expect(rejected).toEqual([{ id: "gamma", problems: ["gamma: is a symbolic link, not a directory of its own"] }]);
    expect(state.candidates.find((c) => c.id === "alpha")).toMatchObject({ hypothesis: "tips in a notes file", base: "seed" });
  });

  it("records the round in the step's output: the prompt, the session and the proposer's report", () => {
    const out = join(runDir, "step_0000", "output");
    const prompt = fillPrompt(DEFAULT_PROPOSE_PROMPT, { round: 1, k: 2, state_dir: "/work/state", scratch_dir: "/work/scratch", steps_dir: "/work/steps", template_dir: "/work/template" });
    expect(readFileSync(join(out, "proposer_prompt.md"), "utf8")).toBe(prompt);
    // the instruction the CLI got is the filled prompt
    expect(JSON.stringify(posts[0].body)).toContain("Write exactly 2 candidates");
    expect(result.sessionLog).toBe(join(out, "proposer-session.jsonl"));
    const session = readFileSync(result.sessionLog!, "utf8");
    // codex's --json events: the commands it ran, the check among them
    expect(session).toContain("thread.started");
    expect(session).toContain("metaharness check-spec");
    expect(result.report).toBe(join(out, "proposer_report.md"));
    expect(readFileSync(result.report!, "utf8")).toBe("# round 1\nalpha: notes; beta: brevity\n");
  });

  it("keeps codex's hosted web search off: set in its config, and no web_search tool offered (web_search=live offers one)", () => {
    // set explicitly: codex's own default may turn it on, and it runs at the provider, past the box
    const cfg = readFileSync(join(trialDir(home, result.trialId), "agent", ".codex", "config.toml"), "utf8");
    expect(cfg).toMatch(/^web_search = "disabled"$/m);
    for (const r of posts) {
      const tools = (r.body?.tools ?? []) as { type?: string }[];
      expect(tools.filter((t) => String(t.type).startsWith("web_search"))).toEqual([]);
    }
  });

  it("a round run again that writes nothing: no candidate left from before, no earlier report shown as its own", async () => {
    upstream.reset();
    upstream.push({ text: "I will not write anything.", usage });
    const again = await runProposer({ store, home, engine: () => openEngine({ home }), runDir, round: 1, step: 0, k: 2, backend: "codex", model: MODEL, price: PRICE, timeoutSec: 300, templateDir: template });
    expect(again.status).toBe("SCORED");
    expect(again.candidates).toEqual([]);
    expect(readdirSync(again.candidatesDir)).toEqual([]);
    expect(again.report).toBeUndefined();
    expect(existsSync(join(runDir, "step_0000", "output", "proposer_report.md"))).toBe(false);
    expect(readFileSync(again.sessionLog!, "utf8")).toContain("I will not write anything.");
    // the health check saw no candidate: reward 0, which selects nothing
    expect(store.getTrial(again.trialId)?.rewards).toMatchObject({ reward: 0 });
  }, 300_000);

  it("a proposer that links /logs/artifacts/work to a host folder imports nothing of it (issue 20 §6)", async () => {
    // a host folder shaped like another run's workspace: a candidate and a report that must never be taken in
    const hostWs = mkdtempSync(join(tmpdir(), "evolve-mh-hostws-"));
    runs.push(hostWs);
    mkdirSync(join(hostWs, "scratch", "candidates", "host-cand"), { recursive: true });
    writeFileSync(join(hostWs, "scratch", "candidates", "host-cand", "ADAPTER.md"), "# the host's candidate\n");
    writeFileSync(join(hostWs, "scratch", "proposer_report.md"), "the host's report\n");
    const run = makeRun();
    upstream.reset();
    upstream.push(call("call_link", `ln -s ${hostWs} /logs/artifacts/work && ls -la /logs/artifacts`), { text: "Linked.", usage });
    const r = await runProposer({ store, home, engine: () => openEngine({ home }), runDir: run, round: 1, step: 0, k: 2, backend: "codex", model: MODEL, price: PRICE, timeoutSec: 300, templateDir: template });
    expect(r.candidates).toEqual([]);
    expect(readdirSync(r.candidatesDir)).toEqual([]);
    expect(r.problems).toEqual([{ name: "candidates", problem: "work is a symbolic link; nothing under it was collected" }]);
    expect(r.report).toBeUndefined();
    expect(existsSync(join(run, "step_0000", "output", "proposer_report.md"))).toBe(false);
    // the host folder is as it was
    expect(readdirSync(join(hostWs, "scratch", "candidates"))).toEqual(["host-cand"]);
  }, 300_000);

  it("prices the session from its tokens when the gateway has no price for the model", () => {
    expect(result.cost_source).toBe("price");
    const t = result.tokens;
    expect(t.output).toBe(5 * usage.output_tokens);
    // the record's prompt counts cached reads and writes (engine/trial/tokens.ts): all but the reads at the input price
    const want = (((t.prompt ?? 0) - (t.cached_read ?? 0)) * PRICE.input + (t.cached_read ?? 0) * PRICE.cached_input + t.output * PRICE.output) / 1e6;
    expect(result.cost_usd).toBeCloseTo(want, 9);
    expect(result.cost_usd).toBeGreaterThan(0);
  });
});

describe.skipIf(!hasClaude)("a proposal round: the real claude CLI as the proposer", () => {
  let r: ProposerResult;
  let run: string;
  let messages: RecordedRequest[];
  const bash = (id: string, command: string): ScriptedReply => ({ toolCall: { id, name: "Bash", input: { command, description: "proposer step" } }, usage: { input_tokens: 300, output_tokens: 20 } });
  /** The tool_result claude sent back for tool use `id`. */
  const resultOf = (id: string): string => {
    for (const q of messages) {
      for (const m of (q.body?.messages ?? []) as { content?: unknown }[]) {
        for (const c of (Array.isArray(m.content) ? m.content : []) as { type?: string; tool_use_id?: string; content?: unknown }[]) {
          if (c.type === "tool_result" && c.tool_use_id === id) return typeof c.content === "string" ? c.content : JSON.stringify(c.content);
        }
      }
    }
    return "";
  };

  beforeAll(async () => {
    run = makeRun();
    upstream.reset();
    upstream.push(bash("toolu_write", WRITE), bash("toolu_check", CHECK), { text: "Wrote alpha and beta.", usage: { input_tokens: 400, output_tokens: 10 } });
    r = await runProposer({ store, home, engine: () => openEngine({ home }), runDir: run, round: 1, step: 0, k: 2, backend: "claude", model: "anthropic/claude-sonnet-4-5", timeoutSec: 300, templateDir: template });
    messages = upstream.requests.filter((q) => q.method === "POST" && q.path.endsWith("/messages"));
  }, 420_000);

  it("writes the candidates with its Bash tool, runs check-spec from its PATH, and has no WebSearch tool", () => {
    expect(r.status).toBe("SCORED");
    expect(r.candidates).toEqual(["alpha", "beta", "gamma"]);
    expect(resultOf("toolu_check")).toContain("ok: /work/scratch/candidates/alpha is a complete adapter");
    for (const q of messages) expect(((q.body?.tools ?? []) as { name?: string }[]).map((t) => t.name)).not.toContain("WebSearch");
    expect(readFileSync(join(run, "step_0000", "output", "proposer-session.jsonl"), "utf8")).toContain('"type":"result"');
    expect(r.cost_source).toBe("gateway");
  });
});
