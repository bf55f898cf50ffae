/**
 * The dashboard's evolution pages (engine/dashboard/evolution.ts) over an evolution project whose records are
 * written as the evolver writes them (candidates scaffolded by the engine, a screen, a round and gene bank lines in
 * their documented shapes) and a real Meta-Harness run folder (tests/support/metaharness-run.ts): each page shows
 * the figures of the records, links the trials the store holds, and escapes what the records hold.
 */
import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { dashboardApp } from "../engine/dashboard/app.ts";
import { lineDiff } from "../engine/dashboard/evolution.ts";
import { evolutionFixture } from "./support/dashboard-evolution.ts";
import { dashboardFixture } from "./support/dashboard-store.ts";

const fx = dashboardFixture();
const { dir, project, run, c1, c2, stats, parentAttempts, candAttempts } = evolutionFixture(fx);
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
