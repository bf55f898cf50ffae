/**
 * Rounds end to end (engine/evolve/round.ts, screen.ts, engine/eval/evals.ts): real candidates and overlays, a real agent CLI
 * (a small node program, the runner's `command`) reaching the scripted upstream through the real gateway, and an
 * upstream that answers from what the overlay's `.agent/` tells it, so a candidate that changes PLANNING.md
 * measurably changes its scores.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ScriptedUpstream, type RecordedRequest } from "../../fixtures/upstream/server.ts";
import { buildUpstreams } from "../../gateway/upstreams.ts";
import { scaffoldCandidate } from "./candidate.ts";
import { cardsEvaluator, loadCards, loadRunner } from "../eval/evals.ts";
import { conductorCardRunner } from "../eval/conductor-runner.ts";
import { initAgentDir } from "../conductor/init.ts";
import { geneBankCells, readGeneBank } from "./genebank.ts";
import { installCandidate, undoInstall } from "./install.ts";
import { openLocalGateway, type LocalGateway } from "../eval/local-gateway.ts";
import { round, readRounds } from "./round.ts";
import { CARDS_ON_HOST, drawSample } from "./screen.ts";
import type { Evaluator } from "../eval/types.ts";
import { openStore, type Store } from "../store/index.ts";

const BOOST = "Think step by step and answer with the code word.";
const SLOPPY = "Answer sloppily.";
const MODEL = "claude-sonnet-4-5";

/** The agent CLI: PLANNING.md is its system prompt (echoed to stderr, its transcript); SLEEP in it hangs it. */
const AGENT = `
import { readFileSync } from "node:fs";
const [root, prompt] = process.argv.slice(2);
let system = "";
try { system = readFileSync(root + "/harness/PLANNING.md", "utf8"); } catch {}
process.stderr.write("system: " + system + "\\n");
if (system.includes("SLEEP")) await new Promise((r) => setTimeout(r, 60000));
const r = await fetch(process.env.ANTHROPIC_BASE_URL + "/v1/messages", {
  method: "POST",
  headers: { "x-api-key": process.env.ANTHROPIC_API_KEY, "anthropic-version": "2023-06-01", "content-type": "application/json" },
  body: JSON.stringify({ model: "${MODEL}", max_tokens: 64, system, messages: [{ role: "user", content: prompt }] }),
});
const j = await r.json();
if (!r.ok) { process.stderr.write(JSON.stringify(j)); process.exit(2); }
process.stdout.write(j.content.map((c) => c.text ?? "").join(""));
`;

/**
 * The same agent as a shell script with curl, used where curl is installed: a tenth of node's start-up per card.
 * Naive JSON (quotes and newlines of PLANNING.md flattened to spaces), which the test's prompts allow.
 */
const SH_AGENT = `#!/bin/sh
system=$(tr '\\n"\\\\' '   ' < "$1/harness/PLANNING.md" 2>/dev/null)
echo "system: $system" >&2
case "$system" in *SLEEP*) sleep 60;; esac
body=$(printf '{"model":"${MODEL}","max_tokens":64,"system":"%s","messages":[{"role":"user","content":"%s"}]}' "$system" "$2")
resp=$(curl -sS -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" -H "anthropic-version: 2023-06-01" -H "content-type: application/json" --data-binary "$body") || exit 2
printf '%s' "$resp" | sed -n 's/.*"text":"\\([^"]*\\)".*/\\1/p'
`;
const CURL = ["/usr/bin/curl", "/bin/curl", "/usr/local/bin/curl"].some((p) => existsSync(p));

const upstream = new ScriptedUpstream();
let home: string;
let store: Store;
let gateway: LocalGateway;
let agentScript: string;

/** Correct on task 1 always; on the others only with BOOST; never with SLOPPY; held-out tasks are hurt by BOOST. */
function respond(req: RecordedRequest) {
  // the shell agent sends strings, the conductor content blocks: both read as text
  const system = JSON.stringify(req.body?.system ?? "");
  const prompt = JSON.stringify(req.body?.messages?.[0]?.content ?? "");
  const m = /(task|holdout) (\d+)/.exec(prompt);
  if (!m) return { text: "?" };
  const n = Number(m[2]);
  const right = system.includes(SLOPPY) ? false : m[1] === "holdout" ? !system.includes(BOOST) : n === 1 || system.includes(BOOST);
  return { text: right ? `code-${m[1]}-${n}` : "no idea" };
}

beforeAll(async () => {
  await upstream.start();
  home = mkdtempSync(join(tmpdir(), "evolve-round-home-"));
  store = openStore(home);
  const upstreams = buildUpstreams({ upstreams: { anthropic: { base_url: upstream.url, api_key: "sk-real", models: [MODEL] } } }, {});
  gateway = await openLocalGateway({ home, store, upstreams });
  agentScript = CURL ? `sh ${join(home, "agent.sh")}` : `${process.execPath} ${join(home, "agent.mjs")}`;
  writeFileSync(join(home, "agent.sh"), SH_AGENT);
  writeFileSync(join(home, "agent.mjs"), AGENT);
});

afterAll(async () => {
  await gateway?.close();
  await store?.close();
  await upstream.close();
});

beforeEach(() => {
  upstream.reset();
  upstream.responder = respond;
});

/** A project: live PLANNING.md, `n` cards (task 1..n), optional held-out cards, a command runner. */
function makeProject(o: { cards?: number; holdout?: number; timeoutSec?: number } = {}): string {
  const project = mkdtempSync(join(tmpdir(), "evolve-round-"));
  mkdirSync(join(project, ".agent", "harness"), { recursive: true });
  writeFileSync(join(project, ".agent", "harness", "PLANNING.md"), "You are a careful agent.\n");
  mkdirSync(join(project, "evolve", "evals"), { recursive: true });
  for (let i = 1; i <= (o.cards ?? 4); i++) {
    writeFileSync(join(project, "evolve", "evals", `t${i}.json`), JSON.stringify({ id: `t${i}`, domain: "codes", prompt: `task ${i}: the code word?`, check: { contains: `code-task-${i}` } }));
  }
  if (o.holdout) {
    mkdirSync(join(project, "holdout"));
    for (let i = 1; i <= o.holdout; i++) {
      writeFileSync(join(project, "holdout", `h${i}.json`), JSON.stringify({ id: `h${i}`, domain: "codes", prompt: `holdout ${i}: the code word?`, check: { contains: `code-holdout-${i}` } }));
    }
  }
  writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "command", command: `${agentScript} {agent_root} {prompt}`, timeout_sec: o.timeoutSec ?? 20 }));
  return project;
}

/** A prompt candidate whose PLANNING.md is the live one plus `add`. */
function candidate(project: string, add: string, o: { marker?: string; pathology?: string; parent?: string } = {}): string {
  const d = scaffoldCandidate(project, { where: "prompt", pathology: o.pathology ?? "wrong-answers", hypothesis: "the frame makes it answer", marker: o.marker, parent: o.parent });
  writeFileSync(join(project, "evolve", "candidates", d.id, "files", "harness", "PLANNING.md"), `You are a careful agent.\n${add}\n`);
  return d.id;
}

const evaluatorOf = (project: string, dir?: string): Evaluator => cardsEvaluator({ project, cards: loadCards(project, dir), runner: loadRunner(project), gateway });

describe("a round with the conductor", () => {
  it("confirms a better candidate: the conductor runs each card in the overlay, its trace the log, its episodes the overlay's", async () => {
    const project = makeProject();
    rmSync(join(project, ".agent"), { recursive: true });
    initAgentDir(project);
    writeFileSync(join(project, ".agent", "harness", "PLANNING.md"), "You are a careful agent.\n");
    writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "conductor", model: `anthropic/${MODEL}`, timeout_sec: 20 }));
    const better = candidate(project, BOOST, { marker: "step by step" });
    // the conductor's model answers with the finish tool, right or wrong as respond() decides
    upstream.responder = (req) => {
      const r = respond(req) as { text: string };
      return { toolCall: { name: "finish", input: { answer: r.text } } };
    };
    const ev = cardsEvaluator({ project, cards: loadCards(project), runner: loadRunner(project), gateway, conductor: conductorCardRunner });
    const r = await round({ project, evaluator: ev });
    const rec = r.rounds[0];
    expect(rec).toMatchObject({ confirmed: [better], utility: { live: 0.25, [better]: 1 } });
    const c = r.screens[rec.screen_id!].candidates[0];
    expect(c.gates.activation.status).toBe("pass");
    expect(c.attempts.candidate.map((a) => [a.score, a.exit_code, a.valid])).toEqual([[1, 0, true], [1, 0, true], [1, 0, true], [1, 0, true]]);
    const screenDir = join(project, "evolve", "screens", rec.screen_id!);
    const firstLine = JSON.parse(readFileSync(join(screenDir, c.attempts.candidate[0].log), "utf8").split("\n")[0]);
    expect(firstLine.type).toBe("prompt");
    // one episode per card in the candidate's overlay, none in the live memory
    const episodes = readFileSync(join(screenDir, "overlays", better, ".agent", "memory", "episodes.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    expect(episodes.map((e) => [e.task, e.domain, e.outcome, e.score])).toEqual(["t1", "t2", "t3", "t4"].map((t) => [t, "codes", "finished", 1]));
    expect(existsSync(join(project, ".agent", "memory", "episodes.jsonl"))).toBe(false);
  });

  it("a candidate whose seats.json cannot load fails validity instead of stopping the screen", async () => {
    const project = makeProject({ cards: 3 });
    rmSync(join(project, ".agent"), { recursive: true });
    initAgentDir(project);
    writeFileSync(join(project, "evolve", "runner.json"), JSON.stringify({ agent: "conductor", model: `anthropic/${MODEL}`, timeout_sec: 20 }));
    const d = scaffoldCandidate(project, { where: "runtime", pathology: "p", hypothesis: "h", files: ["harness/seats.json"] });
    writeFileSync(join(project, "evolve", "candidates", d.id, "files", "harness", "seats.json"), "{not json");
    upstream.responder = () => ({ toolCall: { name: "finish", input: { answer: "x" } } });
    const ev = cardsEvaluator({ project, cards: loadCards(project), runner: loadRunner(project), gateway, conductor: conductorCardRunner });
    const r = await round({ project, evaluator: ev });
    const c = r.screens[r.rounds[0].screen_id!].candidates[0];
    expect(c.gates.validity).toMatchObject({ status: "fail", detail: expect.stringMatching(/3 of 3 attempts invalid \(t1: the conductor did not start: seats_invalid: /) });
  });
});

describe("a round", () => {
  it("confirms a better candidate: screen gates and stats, utility, gene bank, cost", async () => {
    const project = makeProject();
    const better = candidate(project, BOOST, { marker: "step by step" });
    const r = await round({ project, evaluator: evaluatorOf(project) });
    const rec = r.rounds[0];
    expect(rec).toMatchObject({ round: 1, stage: "done", candidates: [better], confirmed: [better], rejected: {}, stop: "max_rounds" });
    expect(rec.utility).toEqual({ live: 0.25, [better]: 1 });
    expect(rec.parent_utility).toBe(0.25);
    expect(rec.genebank?.[better]).toMatchObject({ accepted: true });
    const c = r.screens[rec.screen_id!].candidates[0];
    expect(c.gates.validity.status).toBe("pass");
    expect(c.gates.activation).toMatchObject({ status: "pass", detail: "marker seen in 4 of 4 transcripts" });
    expect(c.gates.paired_gain.status).toBe("pass");
    expect(c.stats).toMatchObject({ n: 4, mean_gain: 0.75, t: 3, sign_test: { wins: 3, losses: 0, ties: 1 } });
    expect(c.stats.sign_test.p).toBeCloseTo(0.25, 12);
    expect(c.stats.ci95![0]).toBeCloseTo(0.75 - 3.182446 * 0.25, 5);
    expect(c.cost.rollouts).toBe(4);
    expect(c.cost.cost_usd).toBeGreaterThan(0);
    // 4 cards × (parent + candidate); the utility re-used the screen's runs, since the sample is every card
    expect(upstream.requests.length).toBe(8);
    expect(geneBankCells(readGeneBank(project))).toMatchObject([{ where: "prompt", pathology: "wrong-answers", harness_id: better, utility: 1, lineage: ["live", better], round: 1 }]);
    // the record on disk says the same, t = 3 as a number
    const disk = JSON.parse(readFileSync(join(project, "evolve", "screens", rec.screen_id!, "screen.json"), "utf8"));
    expect(disk.candidates[0].stats.t).toBe(3);
    expect(disk.sample).toEqual(["t1", "t2", "t3", "t4"]);
    expect(readRounds(project)[0].stage).toBe("done");

    // installed, the live harness answers as the candidate did; undone, as before
    const planning = join(project, ".agent", "harness", "PLANNING.md");
    installCandidate(project, better);
    expect(readFileSync(planning, "utf8")).toContain(BOOST);
    upstream.reset();
    upstream.responder = respond;
    const live = await evaluatorOf(project).run({ harnessId: "live", agentRoot: join(project, ".agent"), tasks: ["t1", "t2", "t3", "t4"], marker: null, outDir: join(project, "out", "a", "live") });
    expect(live.attempts.map((a) => a.score)).toEqual([1, 1, 1, 1]);
    undoInstall(project);
    expect(readFileSync(planning, "utf8")).toBe("You are a careful agent.\n");
  });

  it("rejects a worse candidate on its paired gain", async () => {
    const project = makeProject();
    const worse = candidate(project, SLOPPY, { marker: "sloppily" });
    const r = await round({ project, evaluator: evaluatorOf(project) });
    expect(r.rounds[0]).toMatchObject({ confirmed: [], stop: "stagnation" });
    expect(r.rounds[0].rejected[worse]).toMatch(/^paired_gain: mean gain -0\.25/);
    expect(r.stop).toBe("stagnation");
    expect(readGeneBank(project)).toEqual([]);
  });

  it("fails the activation gate when the marker never shows, and reports a marker-less one unverified", async () => {
    const project = makeProject();
    const silent = candidate(project, BOOST, { marker: "NEVER-EMITTED" });
    const unmarked = candidate(project, BOOST, { pathology: "other" });
    const r = await round({ project, evaluator: evaluatorOf(project) });
    const byId = Object.fromEntries(r.screens[r.rounds[0].screen_id!].candidates.map((c) => [c.candidate, c]));
    expect(byId[silent].gates.activation).toMatchObject({ status: "fail" });
    expect(r.rounds[0].rejected[silent]).toMatch(/^activation: marker "NEVER-EMITTED" in no transcript/);
    expect(byId[unmarked].gates.activation.status).toBe("unverified");
    expect(r.rounds[0].confirmed).toEqual([unmarked]);
    // the parent ran once for both candidates: 4 cards × 3 harnesses
    expect(upstream.requests.length).toBe(12);
  });

  it("fails the validity gate when a candidate's runs time out", async () => {
    const project = makeProject({ cards: 2, timeoutSec: 0.6 });
    const hangs = candidate(project, `${BOOST} SLEEP`, { marker: "step by step" });
    const r = await round({ project, evaluator: evaluatorOf(project) });
    const c = r.screens[r.rounds[0].screen_id!].candidates[0];
    expect(c.gates.validity).toMatchObject({ status: "fail", detail: "2 of 2 attempts invalid (t1: timed out after 0.6s)" });
    expect(c.attempts.candidate.every((a) => a.timed_out && !a.valid && a.exit_code === null)).toBe(true);
    expect(r.rounds[0].rejected[hangs]).toMatch(/^validity: /);
    expect(r.screens[r.rounds[0].screen_id!].limits).toContain("n = 2: a smoke test, not evidence");
    // cards ran on the host, and the record says so
    expect(r.screens[r.rounds[0].screen_id!].limits).toContain(CARDS_ON_HOST);
  }, 30_000);

  it("refuses the winner whose held-out gain does not hold", async () => {
    const project = makeProject({ holdout: 3 });
    const better = candidate(project, BOOST, { marker: "step by step" });
    const r = await round({ project, evaluator: evaluatorOf(project), holdout: evaluatorOf(project, join(project, "holdout")) });
    const rec = r.rounds[0];
    expect(rec.confirmed).toEqual([better]);
    expect(rec.holdout?.results[better]).toMatchObject({ n: 3, mean_gain: -1, held: false });
    expect(rec.genebank?.[better]).toMatchObject({ accepted: false });
    expect(readGeneBank(project)).toEqual([]);
    const disk = JSON.parse(readFileSync(join(project, "evolve", "rounds", "1", "round.json"), "utf8"));
    expect(disk.holdout.results[better]).toMatchObject({ t: "-Infinity", held: false });
    expect(() => installCandidate(project, better)).toThrow(expect.objectContaining({ code: "holdout_not_held" }));
    expect(readFileSync(join(project, ".agent", "harness", "PLANNING.md"), "utf8")).not.toContain(BOOST);
    installCandidate(project, better, { overrideHoldout: true });
    expect(readFileSync(join(project, ".agent", "harness", "PLANNING.md"), "utf8")).toContain(BOOST);
  });

  it("keeps the gene bank's incumbent on a tie", async () => {
    const project = makeProject();
    const first = candidate(project, BOOST, { marker: "step by step" });
    await round({ project, evaluator: evaluatorOf(project) });
    const second = candidate(project, `${BOOST} Be brief.`, { marker: "brief" });
    const r = await round({ project, evaluator: evaluatorOf(project) });
    expect(r.rounds[0]).toMatchObject({ round: 2, candidates: [second], confirmed: [second] });
    expect(r.rounds[0].genebank?.[second]).toMatchObject({ accepted: false });
    expect(geneBankCells(readGeneBank(project)).map((e) => e.harness_id)).toEqual([first]);
  });

  it("resumes a killed round without re-running finished runs", async () => {
    const project = makeProject();
    const better = candidate(project, BOOST, { marker: "step by step" });
    const ctl = new AbortController();
    let candidateCalls = 0;
    upstream.responder = (req) => {
      if (String(req.body?.system).includes(BOOST) && ++candidateCalls === 2) ctl.abort();
      return respond(req);
    };
    await expect(round({ project, evaluator: evaluatorOf(project), signal: ctl.signal })).rejects.toThrow();
    expect(readRounds(project)[0]).toMatchObject({ round: 1, stage: "screen" });
    // what is left: the candidate's run (the parent's finished one is re-used)
    expect((await round({ project, evaluator: evaluatorOf(project), dryRun: true })).plan).toMatchObject({ round: 1, screen_rollouts: 4, utility_rollouts: 0, total_rollouts: 4 });
    const before = upstream.requests.length;
    const liveRequests = () => upstream.requests.filter((q) => !String(q.body?.system).includes(BOOST)).length;
    expect(liveRequests()).toBe(4);
    const r = await round({ project, evaluator: evaluatorOf(project) });
    expect(r.rounds[0]).toMatchObject({ round: 1, stage: "done", confirmed: [better] });
    // the parent's finished run was re-used; only the candidate's interrupted run ran again
    expect(liveRequests()).toBe(4);
    expect(upstream.requests.length - before).toBe(4);
  });

  it("screens a drawn sample, then gives the survivor and its parent utility over every card, as the dry run counted", async () => {
    const project = makeProject();
    const better = candidate(project, BOOST, { marker: "step by step" });
    const ev = evaluatorOf(project);
    const plan = (await round({ project, evaluator: ev, dryRun: true, sampleSize: 3, seed: "s1" })).plan!;
    expect(plan).toMatchObject({ screen_rollouts: 6, utility_rollouts: 8, total_rollouts: 14 });
    const r = await round({ project, evaluator: ev, sampleSize: 3, seed: "s1" });
    const scr = r.screens[r.rounds[0].screen_id!];
    expect(scr.sample).toEqual(drawSample(["t1", "t2", "t3", "t4"], 3, "s1"));
    expect(scr.seed).toBe("s1");
    expect(r.rounds[0]).toMatchObject({ confirmed: [better], utility: { live: 0.25, [better]: 1 } });
    expect(upstream.requests.length).toBe(plan.total_rollouts);
    expect(r.rounds[0].cost).toMatchObject({ screen: { rollouts: 6 }, utility: { rollouts: 8 } });
    expect(r.rounds[0].cost!.utility!.cost_usd).toBeGreaterThan(0);
  });

  it("draws the same sample from the same seed, in the tasks' order", () => {
    const tasks = Array.from({ length: 20 }, (_, i) => `t${String(i).padStart(2, "0")}`);
    const a = drawSample(tasks, 5, "seed-a");
    expect(a).toEqual(drawSample(tasks, 5, "seed-a"));
    expect(a).toHaveLength(5);
    expect([...a].sort()).toEqual(a);
    expect(drawSample(tasks, 5, "seed-b")).not.toEqual(a);
    expect(drawSample(tasks, undefined, "x")).toEqual(tasks);
    expect(drawSample(tasks, 50, "x")).toEqual(tasks);
  });

  it("--dry-run counts the rollouts and runs nothing", async () => {
    const project = makeProject({ holdout: 3 });
    candidate(project, BOOST);
    candidate(project, SLOPPY);
    const ev = evaluatorOf(project);
    const all = await round({ project, evaluator: ev, dryRun: true, holdout: evaluatorOf(project, join(project, "holdout")) });
    expect(all.plan).toMatchObject({ round: 1, parents: ["live"], sample_size: 4, all_tasks: 4, screen_rollouts: 12, utility_rollouts: 0, holdout_rollouts: 6, total_rollouts: 18 });
    const sampled = await round({ project, evaluator: ev, dryRun: true, sampleSize: 2 });
    expect(sampled.plan).toMatchObject({ sample_size: 2, screen_rollouts: 6, utility_rollouts: 12, holdout_rollouts: 0, total_rollouts: 18 });
    expect(upstream.requests.length).toBe(0);
    expect(readRounds(project)).toEqual([]);
    rmSync(project, { recursive: true, force: true });
  });
});
