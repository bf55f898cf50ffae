/**
 * An evolution project and a Meta-Harness run for the dashboard's evolution pages, beside a dashboard fixture's
 * store: two candidates scaffolded by the engine (c2 made from c1), each with a changed file; a screen of c1 against
 * live whose attempts are the fixture's baseline trials (so both sides link to trials the store holds); a done
 * round; two gene bank lines (c2's lineage runs through c1); and a real Meta-Harness run folder.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pairedStats, statsToJson } from "../../engine/eval/stats.ts";
import type { Attempt } from "../../engine/eval/types.ts";
import { readCandidate, scaffoldCandidate } from "../../engine/evolve/candidate.ts";
import type { DashboardFixture } from "./dashboard-store.ts";
import { makeProject } from "./evolve-project.ts";
import { makeMetaRun } from "./metaharness-run.ts";

/** Writes the project and the run under a fresh folder (`dir`, for the caller to remove). */
export function evolutionFixture(fx: Pick<DashboardFixture, "store" | "base" | "cand">) {
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
  return { dir, project, run, c1, c2, stats, parentAttempts, candAttempts };
}
