/**
 * The meta-harness-adapter template, shipped in the source so a run needs no fixture to start: `.hermit/manifest.json`
 * and the proposer's guide `.hermit/EVOLVER.md`. The template fixes only `.hermit/`; it declares no structure, no
 * check of its own and no exports (the spec's "The template").
 */
import { join } from "node:path";
import { MAX_AGENT_BYTES, MAX_AGENT_FILES } from "../conductor/layout.ts";
import { ensureDir, writeFileAtomic } from "../eval/tree.ts";
import { ADAPTER_MD, HERMIT_DIR } from "./layout.ts";
import { SPEC_RULES } from "./spec.ts";

/** The template's manifest: its name, and that it fixes only `.hermit/`. */
export const TEMPLATE_MANIFEST =
  JSON.stringify(
    {
      name: "meta-harness-adapter",
      version: 1,
      fixed: [`${HERMIT_DIR}/`],
      entry: ADAPTER_MD,
      structure: null,
      checks: ["check_spec"],
      exports: [],
      limits: { max_files: MAX_AGENT_FILES, max_bytes: MAX_AGENT_BYTES },
    },
    null,
    2,
  ) + "\n";

/** The proposer's guide: what an adapter is, how its files reach the agent, the check_spec rules and the hard rules. */
export const TEMPLATE_EVOLVER_MD = `# The adapter you are improving

An **adapter** is a folder of files that a fixed acting agent receives at the start of every task. The agent, its
loop and its host do not change; only the adapter does. You write whole adapters: each candidate is a complete
folder of its own, never a patch.

## What reaches the agent

- \`${ADAPTER_MD}\` is the agent's instructions. It is given to the agent at the start of every task, every time.
- Any other file you add reaches the agent only as the agent's own deployment allows (the task information says
  how), and the agent knows it is there only if \`${ADAPTER_MD}\` tells it what is there and when to read it. A file
  that \`${ADAPTER_MD}\` does not mention is, for the agent, not there.
- \`${HERMIT_DIR}/\` is the template's. You may leave it out of a candidate; it is always replaced with the
  template's when the candidate is stored.

What an adapter contains and how it is organised is up to you.

## check_spec: what every candidate must pass

${SPEC_RULES.map((r) => `- ${r}`).join("\n")}

Run check_spec on each candidate before you finish. The evolver runs it again; a candidate that fails is rejected
and recorded with its problems, and is never evaluated.

## Each candidate

- A folder of its own under the round's candidates folder, named \`[a-z0-9][a-z0-9._-]{0,63}\` (a name no earlier
  candidate has).
- Optionally a \`candidate.json\`: \`{"hypothesis": "...", "base": "<id of the candidate it builds on, or null>"}\`
  (or a first line of \`HYPOTHESIS.md\`): what the candidate changes and why you expect it to score better.
- One mechanism per candidate: change one idea at a time, so its score says whether that idea works.

## Hard rules

- Write no facts about individual search tasks or their answers into a candidate: an adapter must help on tasks it
  has never seen.
- Deliver all k candidates the round asks for.
- Do not run the evaluation: every candidate is evaluated on the search set by the next steps, not by you.
`;

/** The template's files, relative to the template folder. */
export const TEMPLATE_FILES: ReadonlyMap<string, string> = new Map([
  [`${HERMIT_DIR}/manifest.json`, TEMPLATE_MANIFEST],
  [`${HERMIT_DIR}/EVOLVER.md`, TEMPLATE_EVOLVER_MD],
]);

/** Writes the built-in template's `.hermit/` into the folder `dir` (made if missing); returns the files written. */
export function writeTemplate(dir: string): string[] {
  ensureDir(join(dir, HERMIT_DIR));
  for (const [rel, text] of TEMPLATE_FILES) writeFileAtomic(join(dir, rel), new TextEncoder().encode(text), 0o644);
  return [...TEMPLATE_FILES.keys()];
}
