/**
 * The Meta-Harness adapter search: its spec, config, state, run and proposer.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { resolveRunConfig } from "./config.ts";
export type { MetaRunFlags } from "./config.ts";
export { runPaths } from "./layout.ts";
export { proposerAgent } from "./proposer.ts";
export { boxedCardsSearch, cardsSearch, planRun, realPropose, roundSpend, runMetaHarness, searchOf, trialMaterial } from "./run.ts";
export type { SearchEvaluator } from "./run.ts";
export { checkSpec, templateHermit } from "./spec.ts";
export { candidateOf, finalize, loadState } from "./state.ts";
export { statusDocument } from "./documents.ts";
