/**
 * The dataset evaluator against real trials (issue 12 §1–§3): a two-task dataset (fixtures/datasets/evolve-eval, each
 * task checks a word the agent writes to /app/out.txt) run as one real job per harness by `datasetEvaluator`, in
 * no-network podman boxes whose agent calls the scripted upstream through the gateway. The upstream's responder
 * answers with the shell call that passes a task only when the activation marker of the `.agent/`'s PLANNING.md is in
 * what it was sent, so a score of 1 proves the `.agent/` reached the model:
 * (a) `-a conductor` (evolve's own loop, the built binary mounted in the box), the marker in its system prompt;
 * (b) claude-code (vendored under $EVOLVE_AGENTS_DIR), the `.agent/`'s text before the instruction, in its prompt event.
 * Each part skips, saying why, when this machine lacks what it needs.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_INSTRUCTIONS_BEGIN } from "../engine/conductor/instructions.ts";
import { publishDataset } from "../engine/dataset.ts";
import { openEngine } from "../engine/engine-choice.ts";
import type { Engine } from "../engine/driver/types.ts";
import { datasetEvaluator, traceHas } from "../engine/eval/dataset-eval.ts";
import type { EvaluatorRun } from "../engine/eval/types.ts";
import { findVendored } from "../engine/harness/vendor.ts";
import { evolveBinary } from "../engine/runtime.ts";
import { newId, openStore, type Store } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { readTrace } from "../engine/trace/store.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";
import { ScriptedUpstream, type RecordedRequest, type ScriptedReply } from "../fixtures/upstream/server.ts";
import { expectCode } from "./support/expect-code.ts";

const ROOT = resolve(__dirname, "..");
const DATASET = join(ROOT, "fixtures/datasets/evolve-eval");
const MARKER = "EVOLVE-MARKER-9c41d2";
const REAL_ANTHROPIC = "sk-ant-REAL-provider-key-dataset-eval-61f0";

process.env.EVOLVE_AGENTS_DIR ||= "/root/.evolve/agents";
const hasClaude = findVendored("claude-code") !== undefined;

/** The evolve binary for the conductor's box: built once here when none is (CI builds it before `npm test`). */
function conductorBinary(): { bin?: string; why?: string } {
  let bin = evolveBinary();
  if (!bin) {
    const r = spawnSync("npm", ["run", "build"], { cwd: ROOT, encoding: "utf8", timeout: 240_000 });
    if (r.status !== 0) return { why: `npm run build failed: ${(r.stderr || r.stdout).slice(-300)}` };
    bin = evolveBinary();
  }
  if (!bin) return { why: "no evolve binary (npm run build)" };
  // the conductor's command lands with engine/conductor's loop; a binary without it cannot run this part
  const help = spawnSync(bin, ["conductor", "run", "--help"], { encoding: "utf8", timeout: 30_000 });
  if (help.status !== 0) return { why: `${bin} has no \`conductor run\` command yet` };
  return { bin };
}

/** The text of everything a model request carries (system prompt, messages, tool results), for matching. */
const requestText = (req: RecordedRequest): string => JSON.stringify(req.body ?? "");
/** The word the task's instruction asks for (`Write the word alpha …`), as the request quotes it. */
const wordOf = (req: RecordedRequest): string | undefined => /Write the word (\w+)/.exec(requestText(req))?.[1];

let home: string;
let engine: Engine;
let store: Store;
const upstream = new ScriptedUpstream();
let dir: string;

/** A `.agent/` whose planning text holds the marker. */
function agentRoot(name: string): string {
  const root = join(dir, name, ".agent");
  mkdirSync(join(root, "harness"), { recursive: true });
  mkdirSync(join(root, "knowledge"), { recursive: true });
  writeFileSync(join(root, "harness/PLANNING.md"), `Plan the work, then do it. Activation: ${MARKER}\n`);
  writeFileSync(join(root, "knowledge/files.md"), "Write files with printf, never echo.\n");
  return root;
}

const evaluator = (agent: string, model: string) =>
  datasetEvaluator({ store, home, engine: () => openEngine({ home }), ref: "evolve-eval@1", agent, model, concurrency: 2 });

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "evolve-dataset-eval-"));
  dir = mkdtempSync(join(tmpdir(), "evolve-dataset-eval-roots-"));
  await upstream.start();
  writeFileSync(join(home, "gateway.toml"), `[upstreams.anthropic]\nbase_url = "${upstream.url}"\napi_key = "${REAL_ANTHROPIC}"\n`);
  engine = await openEngine({ home });
  store = openStore(home);
  await publishDataset(store, home, DATASET, { name: "evolve-eval", version: "1" });
}, 120_000);

afterAll(async () => {
  await settleRemovals();
  await upstream.close();
  await store?.close();
  await engine?.close();
  for (const d of [home, dir]) if (d && !process.env.EVOLVE_TEST_KEEP) rmSync(d, { recursive: true, force: true });
});

describe("the dataset evaluator", () => {
  it("lists the dataset's tasks, and refuses a task it lacks and an .agent/ a trial cannot be given", async () => {
    const ev = evaluator("nop", "anthropic/claude-sonnet-4-5");
    expect(ev.source).toBe("evolve-eval@1");
    expect(ev.tasks()).toEqual(["evolve-eval/write-alpha", "evolve-eval/write-beta"]);
    const root = agentRoot("plain");
    await expectCode(() => ev.run({ harnessId: "h", agentRoot: root, tasks: ["evolve-eval/nope"], marker: null, outDir: join(dir, "out") }), "dataset_task_unknown");
    symlinkSync("/etc/passwd", join(root, "knowledge/passwd.md"));
    await expectCode(() => ev.run({ harnessId: "h", agentRoot: root, tasks: ev.tasks(), marker: null, outDir: join(dir, "out") }), "agent_root_invalid");
    rmSync(join(root, "knowledge/passwd.md"));
  });

  it("fails a trial whose .agent/ holds a link in prepare, before anything is built (AgentRootInvalidError)", async () => {
    const root = agentRoot("linked");
    symlinkSync("/etc", join(root, "knowledge/etc"));
    const task = join(DATASET, "write-alpha");
    const rec = await runTrial(
      { trialId: newId(), jobId: "JOB-DATASET-EVAL", home, task: { dir: task, digest: await taskDigest(task), name: "write-alpha" }, agent: { name: "nop", root }, timeoutMultiplier: 1, secrets: {} },
      { engine, store },
    );
    expect(rec.status).toBe("INFRASTRUCTURE_ERROR");
    expect(rec.failed_phase).toBe("prepare");
    expect(rec.exception?.type).toBe("AgentRootInvalidError");
    expect(rec.exception?.message).toMatch(/knowledge\/etc is a link/);
    expect(rec.phase_timings.build).toBeUndefined();
  }, 60_000);
});

const conductor = conductorBinary();

describe.skipIf(!conductor.bin)(`-a conductor with a .agent/${conductor.bin ? "" : ` (skipped: ${conductor.why})`}`, () => {
  let run: EvaluatorRun;
  let root: string;

  beforeAll(async () => {
    process.env.EVOLVE_BINARY ??= conductor.bin;
    upstream.reset();
    // the shell call that passes the task only for a conductor whose system prompt carries the .agent/'s marker
    upstream.responder = (req): ScriptedReply | undefined => {
      if (req.path !== "/messages") return undefined;
      const system = JSON.stringify(req.body?.system ?? "");
      if (!system.includes(MARKER)) return { text: "I was not told how to plan." };
      if (requestText(req).includes("tool_result")) return { text: "Done." };
      const word = wordOf(req);
      return word ? { toolCall: { name: "shell", input: { command: `printf ${word} > /app/out.txt` } } } : { text: "no task" };
    };
    root = agentRoot("conductor");
    const ev = evaluator("conductor", "anthropic/claude-sonnet-4-5");
    run = await ev.run({ harnessId: "cand-conductor", agentRoot: root, tasks: ev.tasks(), marker: MARKER, outDir: join(dir, "screen", "cand-conductor") });
  }, 240_000);

  it("scores both tasks 1 as valid attempts with the marker seen, from one job", () => {
    const why = run.attempts.map((a) => `${a.task}: ${a.invalid_reason ?? "ok"} ${a.log ? readFileSync(join(home, "trials", a.log, "trial.log"), "utf8").slice(-1500) : ""}`).join("\n");
    expect(run.attempts.map((a) => [a.task, a.score, a.valid, a.exit_code, a.timed_out, a.marker_seen]), why).toEqual([
      ["evolve-eval/write-alpha", 1, true, 0, false, true],
      ["evolve-eval/write-beta", 1, true, 0, false, true],
    ]);
    expect(run.jobId).toBeDefined();
    expect(new Set(run.attempts.map((a) => store.getTrial(a.log)?.job_id))).toEqual(new Set([run.jobId]));
    for (const a of run.attempts) expect(a.cost_usd).toBeGreaterThan(0);
  });

  it("stores the conductor's stdout as its trace: the instruction with the system prompt made of the .agent/, its shell call, no line lost", () => {
    for (const a of run.attempts) {
      const events = [...readTrace(home, a.log)];
      expect(events[0]).toMatchObject({ seq: 0, type: "prompt", data: { _prompt: { text: expect.stringMatching(/^Write the word (alpha|beta)/) } } });
      const system = (events[0].data as { _prompt: { system?: string } })._prompt.system ?? "";
      expect(system).toContain(`Plan the work, then do it. Activation: ${MARKER}`);
      expect(system).toContain("## Knowledge: files.md\n\nWrite files with printf, never echo.");
      // the marker is seen only where the .agent/ put it: nothing else in the run says it
      expect(events.slice(1).some((e) => JSON.stringify(e.data).includes(MARKER))).toBe(false);
      expect(events.filter((e) => e.type === "tool_call").map((e) => (e.data as { update: { name: string } }).update.name)).toContain("shell");
      expect(events.filter((e) => e.type === "trace_loss")).toEqual([]);
      expect(JSON.parse(readFileSync(join(home, "trials", a.log, "result.json"), "utf8")).agent_info).toMatchObject({ name: "conductor", agent_root: root });
    }
  });

  const conductorTrial = async (dir: string, name: string) =>
    runTrial(
      { trialId: newId(), jobId: "JOB-DATASET-EVAL", home, task: { dir, digest: await taskDigest(dir), name }, agent: { name: "conductor", model: "anthropic/claude-sonnet-4-5" }, timeoutMultiplier: 1, secrets: {} },
      { engine, store },
    );

  it("is refused in a musl box before any model call (AgentRuntimeIncompatibleError), and without a binary (AgentNotInstalledError)", async () => {
    upstream.reset();
    const musl = await conductorTrial(join(ROOT, "fixtures/tasks/agent-trials/cli-agent-musl"), "cli-agent-musl");
    expect(musl.status).toBe("INFRASTRUCTURE_ERROR");
    expect(musl.exception?.type).toBe("AgentRuntimeIncompatibleError");
    expect(musl.exception?.message).toMatch(/^the evolve binary \(conductor\) needs \/lib64\/ld-linux-x86-64\.so\.2 \(a glibc system\).*musl-based/);
    expect(musl.failed_phase).toBe("install");
    const was = process.env.EVOLVE_BINARY;
    process.env.EVOLVE_BINARY = join(dir, "no-such-evolve");
    try {
      const none = await conductorTrial(join(DATASET, "write-alpha"), "write-alpha");
      expect(none.exception?.type).toBe("AgentNotInstalledError");
      expect(none.exception?.message).toMatch(/runs the evolve binary in the box, and there is none at .*no-such-evolve: run `npm run build`/);
      expect(none.failed_phase).toBe("prepare");
    } finally {
      if (was === undefined) delete process.env.EVOLVE_BINARY;
      else process.env.EVOLVE_BINARY = was;
    }
    expect(upstream.requests).toEqual([]);
  }, 120_000);

  it("runs on its built-in defaults when the job has no .agent/", async () => {
    upstream.reset();
    upstream.responder = (req) => {
      if (req.path !== "/messages") return undefined;
      if (requestText(req).includes("tool_result")) return { text: "Done." };
      // the built-in planning, not a .agent/'s
      if (JSON.stringify(req.body?.system ?? "").includes(MARKER)) return { text: "unexpected marker" };
      return { toolCall: { name: "shell", input: { command: "printf alpha > /app/out.txt" } } };
    };
    const rec = await conductorTrial(join(DATASET, "write-alpha"), "write-alpha");
    expect(rec.status, readFileSync(join(home, "trials", rec.id, "trial.log"), "utf8").slice(-2000)).toBe("SCORED");
    expect(rec.reward).toBe(1);
    expect(rec.agent_exit).toEqual({ exit_code: 0, timed_out: false });
    expect(existsSync(join(home, "trials", rec.id, "agent-root"))).toBe(false);
  }, 120_000);
});

describe.skipIf(!hasClaude)(`claude-code with a .agent/${hasClaude ? "" : " (skipped: claude-code is not vendored under $EVOLVE_AGENTS_DIR)"}`, () => {
  let run: EvaluatorRun;
  let root: string;

  beforeAll(async () => {
    upstream.reset();
    upstream.responder = (req): ScriptedReply | undefined => {
      if (req.path !== "/messages") return undefined;
      const text = requestText(req);
      if (!text.includes(MARKER)) return { text: "I was not told how to plan." };
      if (text.includes("tool_result")) return { text: "Done." };
      const word = wordOf(req);
      return word ? { toolCall: { name: "Bash", input: { command: `printf ${word} > /app/out.txt`, description: "write the word" } } } : { text: "no task" };
    };
    root = agentRoot("claude");
    const ev = evaluator("claude-code", "anthropic/claude-sonnet-4-5");
    run = await ev.run({ harnessId: "cand-claude", agentRoot: root, tasks: [...ev.tasks()].reverse(), marker: MARKER, outDir: join(dir, "screen", "cand-claude") });
  }, 240_000);

  it("scores both tasks 1 as valid attempts in the order asked, the marker seen, spend metered", () => {
    const why = run.attempts.map((a) => `${a.task}: ${a.invalid_reason ?? "ok"} ${a.log ? readFileSync(join(home, "trials", a.log, "trial.log"), "utf8").slice(-1500) : ""}`).join("\n");
    expect(run.attempts.map((a) => [a.task, a.score, a.valid, a.exit_code, a.timed_out, a.marker_seen]), why).toEqual([
      ["evolve-eval/write-beta", 1, true, 0, false, true],
      ["evolve-eval/write-alpha", 1, true, 0, false, true],
    ]);
    for (const a of run.attempts) {
      expect(a.cost_usd).toBeGreaterThan(0);
      expect(a.wall_sec).toBeGreaterThan(0);
    }
    const job = JSON.parse(readFileSync(join(dir, "screen", "cand-claude", "job.json"), "utf8"));
    expect(job).toMatchObject({ job_id: run.jobId, source: "evolve-eval@1", agent_root: root });
  });

  it("puts PLANNING.md and the knowledge before the instruction, in the prompt event, and records the .agent/", () => {
    for (const a of run.attempts) {
      const prompt = [...readTrace(home, a.log)][0];
      expect(prompt.type).toBe("prompt");
      const text = (prompt.data as { _prompt: { text: string } })._prompt.text;
      expect(text.startsWith(`${AGENT_INSTRUCTIONS_BEGIN}\n## harness/PLANNING.md\n\nPlan the work, then do it. Activation: ${MARKER}\n\n## knowledge/files.md`)).toBe(true);
      expect(text).toMatch(/<\/agent-instructions>\n\nWrite the word (alpha|beta) \(and nothing else\) to \/app\/out\.txt\.\n$/);
      const trialDir = join(home, "trials", a.log);
      expect(JSON.parse(readFileSync(join(trialDir, "config.json"), "utf8")).agent.root).toBe(root);
      expect(JSON.parse(readFileSync(join(trialDir, "result.json"), "utf8")).agent_info.agent_root).toBe(root);
      // the trial's copy is what was mounted: the same planning text
      expect(readFileSync(join(trialDir, "agent-root/harness/PLANNING.md"), "utf8")).toContain(MARKER);
      expect(store.getTrial(a.log)?.agent_exit).toEqual({ exit_code: 0, timed_out: false });
    }
  });

  it("sees no marker that is not there", () => {
    for (const a of run.attempts) expect(traceHas(home, a.log, "NOT-A-MARKER-0000")).toBe(false);
  });
});
