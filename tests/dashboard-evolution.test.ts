/**
 * The dashboard's evolution pages (engine/dashboard/evolution.ts) over an evolution project whose records are
 * written as the evolver writes them (candidates scaffolded by the engine, a screen, a round and gene bank lines in
 * their documented shapes) and a real Meta-Harness run folder (tests/support/metaharness-run.ts): each page shows
 * the figures of the records, links the trials the store holds, and escapes what the records hold.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { dashboardApp } from "../engine/dashboard/app.ts";
import { lineDiff } from "../engine/dashboard/evolution.ts";
import { pairedStats, statsToJson } from "../engine/eval/stats.ts";
import type { Attempt } from "../engine/eval/types.ts";
import { readCandidate, scaffoldCandidate } from "../engine/evolve/candidate.ts";
import { dashboardFixture } from "./support/dashboard-store.ts";
import { makeProject } from "./support/evolve-project.ts";
import { makeMetaRun } from "./support/metaharness-run.ts";

const fx = dashboardFixture();
const dir = mkdtempSync(join(tmpdir(), "evolve-dash-evo-"));
const project = makeProject(join(dir, "project"));
const c1 = scaffoldCandidate(project, { where: "prompt", pathology: "skips the plan", hypothesis: "plan <b>first</b>", marker: "M1" });
writeFileSync(join(readCandidate(project, c1.id).filesDir, "harness/PLANNING.md"), "# Plan\nThink first.\nWrite the plan down. <script>window.__pwned=1</script>\n");
const c2 = scaffoldCandidate(project, { parent: c1.id, where: "knowledge", pathology: "forgets facts", hypothesis: "a fact sheet" });
writeFileSync(join(readCandidate(project, c2.id).filesDir, "knowledge/a.md"), "alpha\ngamma\n");
const trials = fx.store.listTrials(fx.base).map((t) => t.id);
const attempt = (task: string, score: number, log: string): Attempt => ({ task, score, valid: true, exit_code: 0, timed_out: false, wall_sec: 3, cost_usd: 0.01, log, marker_seen: true });
const parentAttempts = [attempt("t1", 0, trials[0]!), attempt("t2", 1, trials[1]!), attempt("t3", 0, trials[2]!)];
const candAttempts = [attempt("t1", 1, trials[3]!), attempt("t2", 1, trials[4]!), attempt("t3", 1, trials[5]!)];
const stats = pairedStats([1, 1, 1], [0, 1, 0]);
mkdirSync(join(project, "evolve/screens/s-1"), { recursive: true });
writeFileSync(
  join(project, "evolve/screens/s-1/screen.json"),
  JSON.stringify({
    id: "s-1",
    at: "2026-06-01T12:00:00.000Z",
    sample: ["t1", "t2", "t3"],
    source: "demo@1.1",
    jobs: { live: fx.base, [c1.id]: fx.cand },
    candidates: [
      {
        candidate: c1.id,
        parent: "live",
        attempts: { candidate: candAttempts, parent: parentAttempts },
        gates: { validity: { status: "pass", detail: "6/6 valid" }, activation: { status: "pass", detail: "marker in 3/3" }, paired_gain: { status: "pass", detail: "t above the bar" } },
        stats: statsToJson(stats),
        passed: true,
        cost: { rollouts: 6, wall_sec: 18, cost_usd: 0.06 },
      },
    ],
    limits: ["three tasks are a smoke test"],
  }),
);
mkdirSync(join(project, "evolve/rounds/1"), { recursive: true });
writeFileSync(
  join(project, "evolve/rounds/1/round.json"),
  JSON.stringify({ round: 1, stage: "done", candidates: [c1.id], screen_id: "s-1", utility: { [c1.id]: 1 }, parent_utility: 0.333, confirmed: [c1.id], rejected: {}, cost: { screen: { rollouts: 6, wall_sec: 18, cost_usd: 0.06 } }, genebank: { [c1.id]: { accepted: true, reason: "first in its cell" } }, stop: null }),
);
writeFileSync(
  join(project, "evolve/genebank.jsonl"),
  [
    { where: "prompt", pathology: "skips the plan", harness_id: c1.id, utility: 1, lineage: ["live", c1.id], round: 1, at: "2026-06-01T12:00:00.000Z" },
    { where: "knowledge", pathology: "forgets facts", harness_id: c2.id, utility: 0.5, lineage: ["live", c1.id, c2.id], round: 2, at: "2026-06-01T13:00:00.000Z" },
  ]
    .map((e) => JSON.stringify(e))
    .join("\n") + "\n",
);
const { run } = makeMetaRun(join(dir, "mh-run"));
const app = dashboardApp({ home: fx.home, store: fx.store, project, metaharnessRun: run });
const bare = dashboardApp({ home: fx.home, store: fx.store });

afterAll(async () => {
  await fx.store.close();
  rmSync(fx.home, { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
});

async function get(path: string, a = app): Promise<{ status: number; body: string }> {
  const r = await a.fetch(new Request(`http://dash${path}`));
  return { status: r.status, body: await r.text() };
}

describe("evolution pages", () => {
  it("lists the project's rounds, screens and candidates", async () => {
    const { status, body } = await get("/evolution");
    expect(status).toBe(200);
    const round = body.slice(body.indexOf('data-round="1"'), body.indexOf("</tr>", body.indexOf('data-round="1"')));
    expect(round).toContain('href="/evolution/screens/s-1"');
    expect(round).toContain(`${c1.id} 1.000`);
    expect(round).toContain("0.333");
    expect(round).toContain("$0.06");
    expect(body).toContain(`href="/evolution/candidates/${c2.id}"`);
    expect(body).toContain("plan &lt;b&gt;first&lt;/b&gt;");
  });

  it("shows a screen's gates, t, interval, sign test, rollouts and spend, and each task's parent and candidate trials", async () => {
    const { status, body } = await get("/evolution/screens/s-1");
    expect(status).toBe(200);
    const row = body.slice(body.indexOf(`data-candidate="${c1.id}"`));
    expect(row).toContain("passed");
    expect(row).toContain("6/6 valid");
    expect(row).toContain("+0.667");
    expect(row).toContain(`[${stats.ci95![0].toFixed(3)}, ${stats.ci95![1].toFixed(3)}]`);
    expect(row).toContain(stats.t!.toFixed(2));
    expect(row).toMatch(/weak evidence|p =/);
    const bvc = body.slice(body.indexOf('class="bvc"'));
    for (const t of [...parentAttempts, ...candAttempts]) expect(bvc).toContain(`href="/trials/${t.log}"`);
    expect(bvc).toContain("+1.000");
    expect(body).toContain(`href="/jobs/${fx.base}"`);
  });

  it("shows the gene bank's holders and its lineage as a tree", async () => {
    const { status, body } = await get("/evolution/genebank");
    expect(status).toBe(200);
    expect(body).toContain("2 entries");
    // c2 hangs under c1, which hangs under live
    expect(body).toMatch(new RegExp(`<li data-harness="live">live<ul><li data-harness="${c1.id}">.*<ul><li data-harness="${c2.id}">`));
  });

  it("diffs a candidate against its parent's built harness, not against live", async () => {
    const one = await get(`/evolution/candidates/${c1.id}`);
    expect(one.status).toBe(200);
    expect(one.body).toContain(".agent/harness/PLANNING.md");
    expect(one.body).toContain('<code class="add">+ Write the plan down. &lt;script&gt;');
    expect(one.body).not.toContain("<script>window.__pwned");
    const two = await get(`/evolution/candidates/${c2.id}`);
    expect(two.body).toContain("1 changed paths");
    expect(two.body).toContain(".agent/knowledge/a.md");
    expect(two.body).not.toContain("PLANNING.md</code>");
    expect(two.body).toContain('<code class="add">+ gamma</code>');
    expect(two.body).toContain('<code class="ctx">  alpha</code>');
  });

  it("shows a Meta-Harness run: candidates with means and status, invalid ones with their problems, rounds and spend", async () => {
    const { status, body } = await get("/metaharness");
    expect(status).toBe(200);
    const c1Row = body.slice(body.indexOf('data-candidate="c1"'), body.indexOf("</tr>", body.indexOf('data-candidate="c1"')));
    expect(c1Row).toContain("evaluated");
    expect(c1Row).toContain("0.750");
    expect(c1Row).toContain("a checklist before answering");
    const c2Row = body.slice(body.indexOf('data-candidate="c2"'), body.indexOf("</tr>", body.indexOf('data-candidate="c2"')));
    expect(c2Row).toContain("invalid");
    expect(c2Row).toMatch(/ADAPTER\.md/);
    expect(body).toContain('id="mh-rounds"');
  });

  it("says how to serve a project when none is, refuses a bad id and answers an unknown one 404", async () => {
    expect((await get("/evolution", bare)).body).toContain("evolve serve --project");
    expect((await get("/metaharness", bare)).body).toContain("--metaharness-run");
    expect((await get("/evolution/genebank", bare)).status).toBe(404);
    expect((await get("/evolution/screens/s-2")).status).toBe(404);
    expect((await get("/evolution/screens/..%2f..")).status).toBe(400);
    expect((await get("/evolution/candidates/nope-nope")).status).toBe(404);
    expect((await get("/evolution/candidates/-x")).status).toBe(400);
  });

  it("diffs lines by their longest common subsequence", () => {
    expect(lineDiff(["a", "b", "c"], ["a", "x", "c"])).toEqual([[" ", "a"], ["-", "b"], ["+", "x"], [" ", "c"]]);
    expect(lineDiff([], ["n"])).toEqual([["+", "n"]]);
  });
});
