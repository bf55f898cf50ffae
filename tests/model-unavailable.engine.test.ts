/**
 * Issue 19 §2 end to end, through `evolve run` (a child `bun main.ts`: the scripted upstream answers in this process
 * while it runs) with real podman and the vendored codex (`$EVOLVE_AGENTS_DIR`, default /root/.evolve/agents):
 * - no upstream for the model: refused before anything is recorded (exit 2, `job list` empty);
 * - an upstream that answers 502 to every call, or one that cannot be reached: the trial settles
 *   INFRASTRUCTURE_ERROR ModelUnavailableError, never SCORED; run exits 1 and its summary says how many and why;
 *   the agent is stopped once the gateway's evidence passes its cutoff rather than after all of codex's retries;
 * - the same upstream answering: the trial scores 1 as before.
 * Skipped where codex is not vendored.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { findVendored } from "../engine/harness/vendor.ts";
import { ScriptedUpstream, type ScriptedReply } from "../fixtures/upstream/server.ts";

const ROOT = resolve(__dirname, "..");
const BUN = join(ROOT, "node_modules/.bin/bun");
const TASK = join(ROOT, "fixtures", "tasks", "agent-trials", "cli-agent");
const AGENTS = process.env.EVOLVE_AGENTS_DIR || "/root/.evolve/agents";
const hasCodex = findVendored("codex", undefined, AGENTS) !== undefined;
const WRITE = "printf 'hello, world' > /app/hello.txt";
const TURNS: ScriptedReply[] = [
  { toolCall: { id: "call_mu_1", name: "exec_command", input: { cmd: WRITE, workdir: "/app" } }, usage: { input_tokens: 900, output_tokens: 30 } },
  { text: "Created /app/hello.txt.", usage: { input_tokens: 1100, output_tokens: 12 } },
];

const upstream = new ScriptedUpstream();
let scratch: string;

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), "evolve-model-unavailable-"));
  await upstream.start();
});

afterAll(async () => {
  await upstream.close();
  if (!process.env.EVOLVE_TEST_KEEP) rmSync(scratch, { recursive: true, force: true });
});

beforeEach(() => upstream.reset());

/** A fresh home whose gateway.toml is `toml` (none when undefined). */
function freshHome(toml?: string): string {
  const home = mkdtempSync(join(scratch, "home-"));
  if (toml !== undefined) writeFileSync(join(home, "gateway.toml"), toml);
  return home;
}

/** `evolve <args>` as a child process (async: the scripted upstream must go on answering meanwhile). */
function evolve(home: string, args: string[], timeoutMs = 420_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: Record<string, string | undefined> = { ...process.env, EVOLVE_HOME: home, EVOLVE_AGENTS_DIR: AGENTS, NO_COLOR: "1" };
  for (const k of Object.keys(env)) if (/^(OPENAI|ANTHROPIC|GEMINI|GOOGLE)_/.test(k)) delete env[k];
  return new Promise((done, fail) => {
    const child = spawn(BUN, [join(ROOT, "main.ts"), ...args], { cwd: home, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b) => (stdout += b));
    child.stderr.on("data", (b) => (stderr += b));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", fail);
    child.once("close", (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

/** The one trial of the run's `--json` stream, and its summary. */
function settled(stdout: string): { trial: any; summary: any; logs: string[] } {
  const lines = stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  return {
    trial: lines.find((l) => l.kind === "trial_settled")?.trial,
    summary: lines.find((l) => l.kind === "job_summary")?.summary,
    logs: lines.filter((l) => l.kind === "log").map((l) => l.line),
  };
}

const RUN = ["run", "-p", TASK, "-a", "codex", "-m", "openai/gpt-5", "--max-retries", "0"];

describe("a model the gateway cannot serve", () => {
  it("no upstream: refused before anything is recorded, exit 2, no job", async () => {
    const home = freshHome();
    const r = await evolve(home, RUN);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/^error\[model_upstream_missing\]: -m openai\/gpt-5: no upstream serves provider openai/);
    expect(r.stderr).toMatch(/hint: export OPENAI_API_KEY=/);
    const list = await evolve(home, ["job", "list", "--json"]);
    expect(JSON.parse(list.stdout)).toEqual([]);
  }, 60_000);

  it.skipIf(!hasCodex)("an upstream that answers 502 to every call: ModelUnavailableError, never SCORED, exit 1, said in the summary", async () => {
    const at: number[] = [];
    upstream.responder = () => (at.push(Date.now()), { status: 502 });
    const home = freshHome(`[upstreams.openai]\nbase_url = "${upstream.url}/v1"\napi_key = "sk-REAL-dead"\n`);
    const r = await evolve(home, [...RUN, "--json"]);
    expect(r.code, r.stderr).toBe(1);
    const { trial, summary, logs } = settled(r.stdout);
    expect(trial).toMatchObject({ status: "INFRASTRUCTURE_ERROR", exception: { type: "ModelUnavailableError" }, rewards: null });
    expect(trial.exception.message).toMatch(/all failed before any answer: upstream openai answered 502/);
    // codex alone retries a 502 for about 27 s; the gateway's evidence stops it once the cutoff is past
    expect(logs.some((l) => /answered 502 .*; stopping the trial$/.test(l)), logs.join("\n")).toBe(true);
    // the gateway stops the agent at the first call past the cutoff (4 calls, the first 10 s ago): no call reaches the
    // upstream after that one, and the agent phase ends soon after it. Asserted on the calls, not on wall time: codex
    // alone would go on retrying for about 27 s, and a loaded machine only spaces its calls further apart.
    expect(at.length).toBeGreaterThanOrEqual(4);
    expect(at.slice(0, -1).every((t) => t - at[0] < 10_000), at.map((t) => t - at[0]).join(" ")).toBe(true);
    expect(Date.parse(trial.phase_timings.agent.finished_at) - at[at.length - 1]).toBeLessThan(10_000);
    expect(upstream.requests.length).toBeGreaterThan(0);
    expect(summary.model_unavailable).toMatchObject({ trials: 1 });
    expect(summary.mean_reward).toBeNull();
    // the text summary says it too
    const show = await evolve(home, ["job", "show", summary.id]);
    expect(show.stdout).toMatch(/model unavailable: 1 trial never met the model \(not scored, not in the mean\)/);
  }, 420_000);

  it.skipIf(!hasCodex)("an upstream that cannot be reached: ModelUnavailableError, exit 1", async () => {
    const home = freshHome(`[upstreams.openai]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-REAL-nowhere"\n`);
    const r = await evolve(home, [...RUN, "--json"]);
    expect(r.code, r.stderr).toBe(1);
    const { trial } = settled(r.stdout);
    expect(trial).toMatchObject({ status: "INFRASTRUCTURE_ERROR", exception: { type: "ModelUnavailableError" } });
    expect(trial.exception.message).toMatch(/upstream openai unreachable/);
  }, 420_000);

  it.skipIf(!hasCodex)("the same upstream answering: scored as before (1), exit 0", async () => {
    upstream.push(...TURNS);
    const home = freshHome(`[upstreams.openai]\nbase_url = "${upstream.url}/v1"\napi_key = "sk-REAL-live"\n`);
    const r = await evolve(home, [...RUN, "--json"]);
    expect(r.code, r.stderr + r.stdout.slice(-2000)).toBe(0);
    const { trial, summary } = settled(r.stdout);
    expect(trial).toMatchObject({ status: "SCORED", rewards: { reward: 1 } });
    expect(summary.model_unavailable).toEqual({ trials: 0, why: [] });
  }, 420_000);
});
