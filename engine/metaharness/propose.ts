/**
 * The proposal round's prompt (`PROPOSE.md`): the default text with the Meta-Harness authors' hard rules, and the
 * filling of its `{placeholder}`s per round. Paths in it are the proposer's box paths, never host ones.
 */
import { EvolveError } from "../errors.ts";

/** The placeholders a round prompt may use, each filled per round. */
export const PROMPT_PLACEHOLDERS = ["round", "k", "state_dir", "scratch_dir", "steps_dir", "template_dir"] as const;
export type PromptPlaceholder = (typeof PROMPT_PLACEHOLDERS)[number];

/** The values of every placeholder for one round. */
export type PromptVars = Record<PromptPlaceholder, string | number>;

/**
 * The default round prompt. The hard rules are the paper's: a candidate carries no facts about individual search
 * tasks or their answers (it would fit the search set, not the task family), all k are delivered, and the
 * evaluation is never run by the proposer (it is the Trainer's; the proposer sees only what earlier steps logged).
 */
export const DEFAULT_PROPOSE_PROMPT = `# Meta-Harness Adapter: proposal round {round}

You are the proposer of an adapter search. An adapter is a folder whose ADAPTER.md is the acting agent's
instructions at the start of every task; any other file in it reaches the agent only if ADAPTER.md says what is
there. Read the guide first: \`{template_dir}/.hermit/EVOLVER.md\`. Your job this round: write {k} new candidate
adapters.

## What you can read (the filesystem D)

- \`{state_dir}/TASK_INFO.md\`: who the acting agent is and exactly how an adapter's files reach it.
- \`{state_dir}/evolution_summary.jsonl\`: one line per earlier candidate (id, round, hypothesis, base, mean score,
  where its files and rollouts are).
- \`{state_dir}/candidates/<id>/adapter/\`: each earlier candidate's files.
- \`{steps_dir}/step_NNNN/\`: each evaluated step: \`tasks/<task>/\` (its input, the agent's output, the score,
  the verifier's feedback and the full trajectory) and \`output/report.md\`. Read the trajectories: they show why
  a candidate failed.
- \`{template_dir}\`: the adapter template; its \`.hermit/\` is always put back as it is into every candidate.

## What you write

Write exactly {k} candidates, each a complete adapter in a directory of its own:
\`{scratch_dir}/candidates/<name>/\` with at least \`ADAPTER.md\`. Names: \`[a-z0-9][a-z0-9._-]{0,63}\`, none an
earlier candidate's id. In each candidate also write \`candidate.json\`:
\`{"hypothesis": "what you changed and why you expect it to score better", "base": "<the id it builds on, or null>"}\`.
Use plain files and folders only: a candidate holding a symbolic link is rejected.

Check every candidate before you finish, and fix what it reports:
\`evolve metaharness check-spec {scratch_dir}/candidates/<name> --template {template_dir}\`.
A candidate that fails the check is rejected.

When you are done, write \`{scratch_dir}/proposer_report.md\`: for each candidate, its name, base and hypothesis.

## Hard rules

1. Write no facts about individual search tasks or their answers into a candidate: no task ids, no questions
   copied from the inputs, no expected answers. A candidate must help on unseen tasks of the same kind.
2. Deliver all {k} candidates. A round with fewer is a round lost.
3. Do not run the evaluation, and do not try to: you have no evaluation tool, and the next steps of the run
   evaluate your candidates. \`check-spec\` is the only evolve command you may use.
`;

/**
 * Fills every `{name}` of `text` with `vars[name]`. Refuses (`propose_placeholder_unknown`) a `{name}` that is no
 * placeholder, so a misspelt one fails the round before the proposer runs instead of reaching it as literal text.
 * Braces around anything but a bare lowercase name (JSON, code) and doubled ones (`{{name}}`) are left as they are.
 */
export function fillPrompt(text: string, vars: PromptVars): string {
  const known = new Set<string>(PROMPT_PLACEHOLDERS);
  const unknown = new Set<string>();
  const filled = text.replace(/(?<!\{)\{([a-z][a-z0-9_]*)\}(?!\})/g, (whole, name: string) => {
    if (!known.has(name)) {
      unknown.add(name);
      return whole;
    }
    return String(vars[name as PromptPlaceholder]);
  });
  if (unknown.size > 0) {
    const names = [...unknown].map((n) => `{${n}}`).join(", ");
    throw new EvolveError("propose_placeholder_unknown", `the round prompt uses ${names}, which ${unknown.size === 1 ? "is no placeholder" : "are no placeholders"}`, `its placeholders: ${PROMPT_PLACEHOLDERS.map((n) => `{${n}}`).join(", ")}`);
  }
  return filled;
}
