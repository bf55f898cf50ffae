/**
 * `evolve metaharness run`'s loop end to end (engine tier, issue 13): the real codex CLI as the proposer (runProposer:
 * a no-network podman box, the gateway, the scripted upstream's tool calls) writes k = 2 candidates; a fixed acting
 * agent (claude-code, vendored) evaluates each step's candidate on the search set fixtures/datasets/evolve-eval as
 * real jobs, its ADAPTER.md prepended to the instruction. The scripted model passes a task only when the request
 * carries the marker, so a candidate whose ADAPTER.md has it scores 1 and the seed 0. One candidate is changed in
 * its stored folder between rounds (before its step) and is never handed back; finalize picks the marked one; the
 * records are where the layout says.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importTasks } from "../engine/dataset.ts";
import { openEngine } from "../engine/engine-choice.ts";
import { datasetEvaluator } from "../engine/eval/dataset-eval.ts";
import { findVendored } from "../engine/harness/vendor.ts";
import type { MetaRunConfig } from "../engine/metaharness/config.ts";
import { runPaths } from "../engine/metaharness/layout.ts";
import { realPropose, runMetaHarness, searchOf, trialMaterial, type RunEvent, type RunMetaResult } from "../engine/metaharness/run.ts";
import { loadState } from "../engine/metaharness/state.ts";
import { openStore, type Store } from "../engine/store/index.ts";
import { settleRemovals } from "../engine/trial/run.ts";
import { ScriptedUpstream, type ScriptedReply } from "../fixtures/upstream/server.ts";

const ROOT = resolve(__dirname, "..");
process.env.EVOLVE_AGENTS_DIR ||= existsSync("/var/cache/evolve/agents/codex") ? "/var/cache/evolve/agents" : "/root/.evolve/agents";
const hasCodex = findVendored("codex", "0.171.0") !== undefined;
const hasClaude = findVendored("claude-code") !== undefined;
const MARKER = "EVOLVE-MH-MARKER-9d2e";
const PROPOSER_MODEL = "openai/evolve-proposer-test-model";
const usage = { input_tokens: 1000, output_tokens: 50 };

/** The proposer's one shell call of round `r`: reads the task information, writes two candidates, one carrying the marker. */
const writeCall = (r: number) =>
  [
    // the task information is in D: without it the chain stops and no candidate is written
    "grep -q 'prepended to the task' /work/state/TASK_INFO.md",
    `mkdir -p /work/scratch/candidates/good-r${r} /work/scratch/candidates/plain-r${r}`,
    `printf 'Before anything else: ${MARKER}. Do exactly what the task says.\\n' > /work/scratch/candidates/good-r${r}/ADAPTER.md`,
    `printf '{"hypothesis":"state the activation line first","base":"seed"}' > /work/scratch/candidates/good-r${r}/candidate.json`,
    `printf 'Do the task.\\n' > /work/scratch/candidates/plain-r${r}/ADAPTER.md`,
    `evolve metaharness check-spec /work/scratch/candidates/good-r${r}`,
  ].join(" && ");

const upstream = new ScriptedUpstream();
let home: string;
let work: string;
let store: Store;
let cfg: MetaRunConfig;
let result: RunMetaResult;
const events: RunEvent[] = [];

beforeAll(async () => {
  if (!hasCodex || !hasClaude) return;
  if (!existsSync(join(ROOT, "dist", "evolve")) && !process.env.EVOLVE_BINARY) execFileSync("npm", ["run", "--silent", "build"], { cwd: ROOT, stdio: "ignore" });
  await upstream.start();
  home = mkdtempSync(join(tmpdir(), "evolve-mh-e2e-"));
  work = mkdtempSync(join(tmpdir(), "evolve-mh-e2e-work-"));
  writeFileSync(join(home, "gateway.toml"), `[upstreams.openai]\nbase_url = "${upstream.url}/v1"\napi_key = "sk-REAL-openai-mh-e2e"\n\n[upstreams.anthropic]\nbase_url = "${upstream.url}"\napi_key = "sk-ant-REAL-mh-e2e"\n`);
  upstream.responder = (req): ScriptedReply | undefined => {
    const text = JSON.stringify(req.body ?? "");
    if (req.path.endsWith("/responses")) {
      // codex, the proposer: one shell call per round, then done
      const round = Number(/proposal round (\d+)/.exec(text)?.[1] ?? "0");
      if (text.includes(`call_write_r${round}`)) return { text: "Wrote two candidates.", usage };
      return { toolCall: { id: `call_write_r${round}`, name: "exec_command", input: { cmd: writeCall(round), workdir: "/work" } }, usage };
    }
    if (req.path !== "/messages") return undefined;
    // claude-code, the acting agent: it solves the task only when its instructions carry the marker
    if (!text.includes(MARKER)) return { text: "I was told nothing special." };
    if (text.includes("tool_result")) return { text: "Done." };
    const word = /Write the word (\w+)/.exec(text)?.[1];
    if (!word) return { text: "no task" };
    return { toolCall: { name: "Bash", input: { command: `printf ${word} > /app/out.txt`, description: "write the word" } } };
  };
  store = openStore(home);
  const seed = join(work, "seed");
  mkdirSync(seed, { recursive: true });
  writeFileSync(join(seed, "ADAPTER.md"), "Solve the task.\n");
  cfg = {
    search: { kind: "path", dir: join(ROOT, "fixtures/datasets/evolve-eval") },
    agent: "claude-code",
    model: "anthropic/claude-sonnet-4-5",
    startFrom: seed,
    k: 2,
    maxRounds: 1,
    epochs: 3,
    run: join(work, "run"),
    proposer: { backend: "codex", model: PROPOSER_MODEL, args: [], webSearch: false, timeoutSec: 300, price: { input: 2, cached_input: 0.5, output: 8 } },
  };
  const engine = () => openEngine({ home });
  const imported = await importTasks(store, home, cfg.search.kind === "path" ? cfg.search.dir : "", { secrets: new Set() });
  const ev = datasetEvaluator({ store, home, engine, ref: "evolve-eval", imported: { path: join(ROOT, "fixtures/datasets/evolve-eval"), tasks: imported.tasks }, agent: cfg.agent, model: cfg.model });
  const p = runPaths(cfg.run);
  result = await runMetaHarness({
    config: cfg,
    search: searchOf(ev, (a) => trialMaterial(store, home, a)),
    propose: realPropose({ store, home, engine, config: cfg }),
    onEvent: (e) => {
      events.push(e);
      // between rounds, before its step: round 1's second candidate is changed in its stored folder
      if (e.type === "step_start" && e.step === 2) writeFileSync(join(p.candidateAdapter("plain-r1"), "ADAPTER.md"), `Do the task. ${MARKER}\n`);
    },
  });
}, 600_000);

afterAll(async () => {
  await settleRemovals();
  await upstream.close();
  await store?.close();
  if (!process.env.EVOLVE_TEST_KEEP) for (const d of [home, work]) if (d) rmSync(d, { recursive: true, force: true });
});

describe.skipIf(!hasCodex || !hasClaude)("metaharness run: codex proposes, claude-code evaluates on a task folder in podman", () => {
  it("evaluates the seed, then the marked candidate; the tampered one is never handed back; finalize picks the marked one", () => {
    const steps = events.filter((e) => e.type === "step_done").map((e) => e.type === "step_done" && [e.step, e.candidate, e.mean]);
    expect(steps).toEqual([
      [1, "seed", 0],
      [2, "good-r1", 1],
      [3, "good-r1", 1],
    ]);
    expect(events.filter((e) => e.type === "tampered").map((e) => e.type === "tampered" && e.id)).toEqual(["plain-r1"]);
    expect(result).toMatchObject({ finalized: "good-r1", mean: 1, steps: 3, rounds: 1 });
    const s = loadState(cfg.run);
    expect(s.candidates.map((c) => [c.id, c.status, c.evaluations.length])).toEqual([
      ["seed", "evaluated", 1],
      ["good-r1", "evaluated", 2],
      ["plain-r1", "tampered", 0],
    ]);
    // the proposer's spend per round, priced from its tokens (the gateway has no price for the test model)
    expect(s.rounds).toHaveLength(1);
    expect(s.rounds![0]).toMatchObject({ round: 1, step: 1, queued: ["good-r1", "plain-r1"], cost_source: "price" });
    expect(s.rounds![0].cost_usd).toBeGreaterThan(0);
    expect(s.candidates[1].evaluations[0].cost_usd).toBeGreaterThan(0);
  });

  it("leaves the records the layout names: per task input, output, score, verifier output, ATIF trajectory; step reports; the round's records", () => {
    const p = runPaths(cfg.run);
    for (const step of [1, 2, 3]) {
      for (const task of ["evolve-eval/write-alpha", "evolve-eval/write-beta"]) {
        const t = p.stepTask(step, task);
        for (const f of [t.input, t.output, t.score, t.verifier, t.trajectory]) expect(existsSync(f), f).toBe(true);
        // the instruction the agent got: the adapter's text first
        expect(readFileSync(t.input, "utf8")).toContain("<agent-instructions");
        const traj = JSON.parse(readFileSync(t.trajectory, "utf8"));
        expect(String(traj.schema_version)).toMatch(/^ATIF/);
      }
      expect(existsSync(p.stepOutput(step).report)).toBe(true);
    }
    expect(JSON.parse(readFileSync(p.stepTask(2, "evolve-eval/write-alpha").score, "utf8"))).toMatchObject({ score: 1, valid: true });
    expect(readFileSync(p.stepTask(2, "evolve-eval/write-alpha").input, "utf8")).toContain(MARKER);
    expect(existsSync(p.stepOutput(1).proposerPrompt)).toBe(true);
    expect(existsSync(p.stepOutput(1).proposerSession)).toBe(true);
    expect(readFileSync(p.stepOutput(3).report, "utf8")).toContain("Evaluated: `good-r1`");
    expect(readFileSync(join(p.workspace, "TASK_INFO.md"), "utf8")).toContain("prepended to the task's instruction");
    expect(existsSync(p.candidateAdapter("good-r1"))).toBe(true);
    expect(readFileSync(p.summary, "utf8").trim().split("\n")).toHaveLength(3);
  });
});
