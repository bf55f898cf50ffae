/**
 * `evolve harness screen -d name@version` end to end (engine tier): candidate and parent run as real jobs (podman
 * trials, the gateway, traces) on a published dataset (fixtures/datasets/evolve-eval), each with its own `.agent/`
 * delivered to the agent: the conductor (the evolve binary in the box) and an installed CLI (claude-code, vendored). The scripted upstream passes a task only when the request carries
 * the candidate's marker, so the candidate wins both pairs (n = 2: t = +∞, reported as the smoke test it is).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findVendored } from "../engine/harness/vendor.ts";
import { ScriptedUpstream, type ScriptedReply } from "../fixtures/upstream/server.ts";

const ROOT = resolve(__dirname, "..");
const MARKER = "EVOLVE-SCREEN-MARKER-51be";
process.env.EVOLVE_AGENTS_DIR ||= "/root/.evolve/agents";
const hasClaude = findVendored("claude-code") !== undefined;
// the conductor's box runs the compiled binary (CI builds it before npm test)
const hasBinary = existsSync(join(ROOT, "dist", "evolve")) || Boolean(process.env.EVOLVE_BINARY);

const upstream = new ScriptedUpstream();
let home: string;
let project: string;

/** `evolve <args>` as a child process: the scripted upstream lives in this process, so the test must not block. */
function evolve(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(join(ROOT, "node_modules", ".bin", "bun"), [join(ROOT, "main.ts"), ...args], { cwd: project, env: { ...process.env, EVOLVE_HOME: home, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b) => (stdout += b));
    child.stderr.on("data", (b) => (stderr += b));
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

beforeAll(async () => {
  await upstream.start();
  home = mkdtempSync(join(tmpdir(), "evolve-screen-dataset-"));
  project = mkdtempSync(join(tmpdir(), "evolve-screen-dataset-project-"));
  writeFileSync(join(home, "gateway.toml"), `[upstreams.anthropic]\nbase_url = "${upstream.url}"\napi_key = "sk-ant-REAL-screen-dataset"\n`);
  mkdirSync(join(project, ".agent", "harness"), { recursive: true });
  writeFileSync(join(project, ".agent", "harness", "PLANNING.md"), "Plan the work, then do it.\n");
  upstream.responder = (req): ScriptedReply | undefined => {
    if (req.path !== "/messages") return undefined;
    const text = JSON.stringify(req.body ?? "");
    if (!text.includes(MARKER)) return { text: "I was not told how to plan." };
    if (text.includes("tool_result")) return { text: "Done." };
    const word = /Write the word (\w+)/.exec(text)?.[1];
    if (!word) return { text: "no task" };
    // the conductor offers its own shell tool; claude-code its Bash
    const conductor = Array.isArray(req.body?.tools) && req.body.tools.some((t: { name?: string }) => t.name === "shell");
    return conductor
      ? { toolCall: { name: "shell", input: { command: `printf ${word} > /app/out.txt` } } }
      : { toolCall: { name: "Bash", input: { command: `printf ${word} > /app/out.txt`, description: "write the word" } } };
  };
}, 60_000);

afterAll(async () => {
  await upstream.close();
  for (const d of [home, project]) if (d && !process.env.EVOLVE_TEST_KEEP) rmSync(d, { recursive: true, force: true });
});

/** Scaffolds a candidate whose PLANNING.md carries the marker, screens it with `agent` on the dataset, checks the record. */
async function screenWith(agent: string): Promise<void> {
  const s = await evolve("harness", "scaffold", "--where", "prompt", "--pathology", "no_plan", "--hypothesis", `say how to plan (${agent})`, "--marker", MARKER, "--json");
  expect(s.code, s.stderr).toBe(0);
  const id = JSON.parse(s.stdout).id as string;
  writeFileSync(join(project, "evolve", "candidates", id, "files", "harness", "PLANNING.md"), `Plan the work, then do it. Activation: ${MARKER}\n`);

  const r = await evolve("harness", "screen", "-d", "evolve-eval@1", "-a", agent, "-m", "anthropic/claude-sonnet-4-5", "--json", id);
  expect(r.code, `${r.stderr.slice(-1500)}\n${r.stdout.slice(0, 4000)}`).toBe(0);
  const rec = JSON.parse(r.stdout);
  expect(rec.source).toBe("evolve-eval@1");
  expect(rec.sample).toEqual(["evolve-eval/write-alpha", "evolve-eval/write-beta"]);
  expect(Object.keys(rec.jobs).sort()).toEqual([id, "live"].sort());
  const c = rec.candidates[0];
  expect(c.attempts.candidate.map((a: { score: number; valid: boolean; marker_seen: boolean }) => [a.score, a.valid, a.marker_seen])).toEqual([
    [1, true, true],
    [1, true, true],
  ]);
  expect(c.attempts.parent.map((a: { score: number; valid: boolean }) => [a.score, a.valid])).toEqual([
    [0, true],
    [0, true],
  ]);
  expect(c.gates.paired_gain.status).toBe("pass");
  expect(c.stats).toMatchObject({ n: 2, mean_gain: 1, t: "Infinity" });
  expect(c.passed).toBe(true);
  expect(c.cost.cost_usd).toBeGreaterThan(0);
  expect(rec.limits).toContain("n = 2: a smoke test, not evidence");
  // podman trials are boxes: the host-cards limit is not claimed
  expect(rec.limits.some((l: string) => l.startsWith("task cards run on the host"))).toBe(false);
  // each attempt's log is its trial, which ran this agent with the .agent/ it was given
  const trial = c.attempts.candidate[0].log;
  const result = JSON.parse(readFileSync(join(home, "trials", trial, "result.json"), "utf8"));
  expect(result.agent_info.agent_root).toContain(join("overlays", id, ".agent"));
  expect(result.config?.agent?.name ?? result.agent_info.name).toBe(agent);
}

describe("harness screen -d", () => {
  beforeAll(async () => {
    const pub = await evolve("dataset", "publish", join(ROOT, "fixtures/datasets/evolve-eval"), "--name", "evolve-eval", "--version", "1");
    expect(pub.code, pub.stderr).toBe(0);
  }, 120_000);

  it.skipIf(!hasBinary)(`runs candidate and parent as real jobs of the conductor and passes the candidate whose .agent/ reached the model${hasBinary ? "" : " (skipped: no dist/evolve; npm run build)"}`, () => screenWith("conductor"), 600_000);

  it.skipIf(!hasClaude)(`does the same with an installed CLI (claude-code)${hasClaude ? "" : " (skipped: claude-code is not vendored under $EVOLVE_AGENTS_DIR)"}`, () => screenWith("claude-code"), 600_000);
});
