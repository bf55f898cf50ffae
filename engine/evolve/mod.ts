/**
 * The evolve search strategy: screen, round, gene bank, install, and diagnosis of a project.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { scaffoldCandidate } from "./candidate.ts";
export { MAX_EPISODE_BYTES, diagnoseReport, eachRunOfJob, runsFromEpisodes } from "./diagnose.ts";
export type { Diagnosis, DiagnosisReport, EvidenceEvent } from "./diagnose.ts";
export { geneBankCells, readGeneBankLines } from "./genebank.ts";
export { installCandidate, undoInstall } from "./install.ts";
export { round, unscreenedCandidates } from "./round.ts";
export type { RoundsResult } from "./round.ts";
export { newRunId, parentCost, runHarnessCached, screen, screenToJson } from "./screen.ts";
export type { ScreenRecord } from "./types.ts";
export { geneBankDocument, roundsResultDocument, screenDocument } from "./documents.ts";
