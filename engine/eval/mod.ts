/**
 * The evaluation layer: evaluators for cards and datasets, statistics, the local gateway, the candidate store and trees.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { boxedCardsEvaluator, runCardCheck } from "./card-tasks.ts";
export { conductorCardRunner } from "./conductor-runner.ts";
export { datasetEvaluator } from "./dataset-eval.ts";
export { HOST_MODE_NOTICE, appendOverlayEpisodes, cardsEvaluator, loadCards, loadRunner } from "./evals.ts";
export type { CardsGateway } from "./evals.ts";
export { openLocalGateway } from "./local-gateway.ts";
export type { LocalGateway } from "./local-gateway.ts";
export { projectPaths } from "./project.ts";
export { attemptPassed, passAt1, statsToJson } from "./stats.ts";
export { copyTreeOver, newBudget } from "./tree.ts";
export type { Evaluator } from "./types.ts";
