/**
 * Where a Meta-Harness Adapter run keeps things: every path of a run folder and of a template folder, in one place so
 * the evolver's modules never spell one twice. A run folder (the seed's layout, docs/json.md and the spec's "Records
 * to read after a run"):
 *
 *   run.json
 *   workspace/state/meta_harness_adapter.json     every candidate, the queue (state.ts)
 *   workspace/state/evolution_summary.jsonl       the proposer's view, one line per candidate
 *   workspace/state/candidates/<id>/adapter/      each stored candidate's files
 *   workspace/scratch/candidates/<id>/            where the proposer writes a round's candidates
 *   step_NNNN/tasks/<task>/{input.md, output.txt, score.json, verifier.txt, trajectory.json}
 *   step_NNNN/output/{report.md, proposer_prompt.md, proposer_report.md, proposer-session.jsonl}
 *
 * A template folder holds `.hermit/` (manifest.json and the proposer's guide EVOLVER.md) and `seed_adapter/`.
 */
import { join } from "node:path";
import { idPattern } from "../eval/candidate-store.ts";

/** What a candidate may be called: a folder name that is safe in every path and shell, never `.` or `..` (the store's id rule, lower case, 64 at most). */
export const CANDIDATE_NAME = idPattern({ lowercase: true, max: 64 });

/** Whether `name` is a candidate name ({@link CANDIDATE_NAME}). */
export function isCandidateName(name: string): boolean {
  return CANDIDATE_NAME.test(name);
}

/** The id of the starting adapter, the first candidate (round 0). */
export const SEED_ID = "seed";

/** A step's folder name: `step_` and the step number in at least 4 digits. */
export function stepName(step: number): string {
  return `step_${String(step).padStart(4, "0")}`;
}

/**
 * A task name as one folder name: task names are `org/name`, and a `/` (or anything outside `A-Za-z0-9._-`) would
 * make another level or an unsafe name, so each becomes `_`, and `/` becomes `__` so `org/name` stays readable.
 */
export function taskDirName(task: string): string {
  const s = task.replace(/\//g, "__").replace(/[^A-Za-z0-9._-]/g, "_");
  return s === "" || s === "." || s === ".." ? `_${s}` : s;
}

/** The template's fixed part: the folder every candidate's `.hermit/` is replaced with. */
export const HERMIT_DIR = ".hermit";

/** The file every adapter must have: the agent's instructions at the start of every task. */
export const ADAPTER_MD = "ADAPTER.md";

/** The paths of the run folder `run`, relative ones included (the summary names files relative to the run). */
export function runPaths(run: string) {
  const rel = {
    state: join("workspace", "state"),
    candidates: join("workspace", "state", "candidates"),
    candidateAdapter: (id: string) => join("workspace", "state", "candidates", id, "adapter"),
    step: (n: number) => stepName(n),
  };
  const stepTask = (n: number, task: string) => {
    const dir = join(run, stepName(n), "tasks", taskDirName(task));
    return {
      dir,
      input: join(dir, "input.md"),
      output: join(dir, "output.txt"),
      score: join(dir, "score.json"),
      verifier: join(dir, "verifier.txt"),
      trajectory: join(dir, "trajectory.json"),
    };
  };
  const stepOutput = (n: number) => {
    const dir = join(run, stepName(n), "output");
    return {
      dir,
      report: join(dir, "report.md"),
      proposerPrompt: join(dir, "proposer_prompt.md"),
      proposerReport: join(dir, "proposer_report.md"),
      proposerSession: join(dir, "proposer-session.jsonl"),
    };
  };
  return {
    run,
    runJson: join(run, "run.json"),
    workspace: join(run, "workspace"),
    state: join(run, rel.state),
    stateFile: join(run, rel.state, "meta_harness_adapter.json"),
    summary: join(run, rel.state, "evolution_summary.jsonl"),
    candidates: join(run, rel.candidates),
    candidate: (id: string) => join(run, rel.candidates, id),
    candidateAdapter: (id: string) => join(run, rel.candidateAdapter(id)),
    scratch: join(run, "workspace", "scratch"),
    scratchCandidates: join(run, "workspace", "scratch", "candidates"),
    step: (n: number) => join(run, stepName(n)),
    stepTasks: (n: number) => join(run, stepName(n), "tasks"),
    stepTask,
    stepOutput,
    rel,
  };
}

export type RunPaths = ReturnType<typeof runPaths>;

/** The paths of the template folder `dir`. */
export function templatePaths(dir: string) {
  const hermit = join(dir, HERMIT_DIR);
  return {
    root: dir,
    hermit,
    manifest: join(hermit, "manifest.json"),
    evolver: join(hermit, "EVOLVER.md"),
    seed: join(dir, "seed_adapter"),
  };
}
