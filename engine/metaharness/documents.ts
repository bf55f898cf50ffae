/**
 * A Meta-Harness run's records as `metaharness status --json` prints them and the local API (engine/serve) answers
 * them: built once here.
 */
import { roundSpend } from "./run.ts";
import { loadState } from "./state.ts";

/** `metaharness status --json` of the run folder `run` (absolute). */
export function statusDocument(run: string) {
  const s = loadState(run);
  const candidates = s.candidates.map((c) => ({ id: c.id, round: c.round, status: c.status, mean: c.mean, evaluations: c.evaluations.length, hypothesis: c.hypothesis, base: c.base, problems: c.problems ?? [] }));
  return { run, step: s.step, round: s.round, candidates, queue: s.queue, handedBack: s.handed_back, finalized: s.finalized ?? null, spend: roundSpend(s) };
}
