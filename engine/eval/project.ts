/**
 * Where an evolution project keeps things: the live `.agent/` and the `evolve/` records beside it (engine/evolve/types.ts
 * shows the whole layout). One place for every path, so neither the evaluation layer (cards, runner.json) nor the
 * evolver (candidates, screens, rounds) spells one twice.
 */
import { join } from "node:path";

/** The paths of the project rooted at `project` (the folder holding `.agent/` and `evolve/`). */
export function projectPaths(project: string) {
  const evolve = join(project, "evolve");
  return {
    project,
    agent: join(project, ".agent"),
    evolve,
    evals: join(evolve, "evals"),
    runner: join(evolve, "runner.json"),
    candidates: join(evolve, "candidates"),
    candidate: (id: string) => join(evolve, "candidates", id),
    screens: join(evolve, "screens"),
    screen: (id: string) => join(evolve, "screens", id),
    rounds: join(evolve, "rounds"),
    round: (n: number) => join(evolve, "rounds", String(n)),
    genebank: join(evolve, "genebank.jsonl"),
    backups: join(evolve, "backups"),
  };
}

export type ProjectPaths = ReturnType<typeof projectPaths>;
