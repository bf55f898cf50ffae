/**
 * A small real Meta-Harness Adapter run folder, made through the engine's own state machine (no proposer, no
 * rollouts): the starting adapter evaluated at step 1, a round that queued `c1` and rejected `c2`, and `c1`
 * evaluated at step 2. For the CLI tests and tests/json-docs.test.ts.
 */
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { runPaths } from "../../engine/metaharness/layout.ts";
import { handBack, ingestRound, recordEvaluation, saveState, seedCandidate, writeSummary } from "../../engine/metaharness/state.ts";
import { writeTemplate } from "../../engine/metaharness/template.ts";
import { writeTree } from "./evolve-project.ts";

/** Makes the run folder `run` (and its template beside it, `<run>-template`); returns both. */
export function makeMetaRun(run: string, scores: { seed: Record<string, number>; c1: Record<string, number> } = { seed: { t1: 0.5, t2: 0.5 }, c1: { t1: 1, t2: 0.5 } }): { run: string; template: string } {
  const template = `${run}-template`;
  writeTemplate(template);
  writeTree(join(template, "seed_adapter"), { "ADAPTER.md": "Solve the task; write the answer to /app/answer.txt.\n" });
  mkdirSync(run, { recursive: true });
  const p = runPaths(run);
  const s = seedCandidate(run, join(template, "seed_adapter"), template);
  handBack(run, s);
  recordEvaluation(s, "seed", 1, scores.seed, { cost_usd: 0.5, tokens: 2000 });
  rmSync(p.scratchCandidates, { recursive: true, force: true });
  writeTree(join(p.scratchCandidates, "c1"), { "ADAPTER.md": "Check your answer before you finish.\n", "candidate.json": JSON.stringify({ hypothesis: "a checklist before answering", base: "seed" }) });
  writeTree(join(p.scratchCandidates, "c2"), { "notes.md": "no ADAPTER.md\n" });
  ingestRound(run, s, 1, template);
  handBack(run, s);
  recordEvaluation(s, "c1", 2, scores.c1, { cost_usd: 0.5, tokens: 2000 });
  saveState(run, s);
  writeSummary(run, s);
  return { run, template };
}
